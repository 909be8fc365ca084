"""experiments/stash_checkpoints.py: unfinished runs travel to a fresh working copy; newer work is never overwritten."""

from __future__ import annotations

import json

import pytest

from experiments import stash_checkpoints as sc


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setattr(sc, "REPO", tmp_path)
    monkeypatch.setattr(sc, "WIP", tmp_path / "wip")
    r = tmp_path / "results" / "study"
    for name, finished, step in (("a_T8_lr0.001_s0", False, 300), ("b_T8_lr0.001_s0", True, 2000)):
        d = r / "task_T8" / "runs" / name
        d.mkdir(parents=True)
        (d / "checkpoint.pt").write_bytes(name.encode() * 10)
        (d / "config.json").write_text("{}")
        (d / "metrics.json").write_text(json.dumps({"finished": finished, "step": step}))
        (d / ".lock").write_text("")
    return r


def test_save_then_restore_into_an_empty_copy(root):
    path, n = sc.save(root, keep=["b_*"])
    assert n == 2 and path.name == "checkpoints-results-study.tar"
    a = root / "task_T8" / "runs" / "a_T8_lr0.001_s0"
    b = root / "task_T8" / "runs" / "b_T8_lr0.001_s0"
    for d in (a, b):
        for f in d.iterdir():
            f.unlink()
        d.rmdir()
    assert sc.restore(root) == (2, 0)
    assert (a / "checkpoint.pt").read_bytes() == b"a_T8_lr0.001_s0" * 10
    assert {f.name for f in a.iterdir()} == {"checkpoint.pt", "config.json", "metrics.json"}  # no lock
    assert {f.name for f in b.iterdir()} == {"checkpoint.pt"}  # a finished run: its checkpoint only


def test_restore_never_overwrites_a_run_that_is_further_along(root):
    sc.save(root, keep=[])
    a = root / "task_T8" / "runs" / "a_T8_lr0.001_s0"
    (a / "metrics.json").write_text(json.dumps({"finished": False, "step": 400}))
    (a / "checkpoint.pt").write_bytes(b"newer")
    assert sc.restore(root) == (0, 1)
    assert (a / "checkpoint.pt").read_bytes() == b"newer"


def test_restore_without_an_archive_says_so(root):
    with pytest.raises(FileNotFoundError, match="no archive"):
        sc.restore(root)
