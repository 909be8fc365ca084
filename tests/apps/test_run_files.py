"""Run-directory safety: locks, resume from config.json, divergence, corpus hash, temporary files, safe
checkpoint loading, one-line CLI errors, --help defaults and --version."""

from __future__ import annotations

import builtins
import json
import os
import subprocess
import sys
import time

import pytest
import torch

import hybrid_attention
from hybrid_attention.apps import cli, run_files
from hybrid_attention.tasks.shakespeare import sha256_file

TINY = ["--n-embd", "8", "--batch-size", "8", "--no-progress", "--warmup", "2"]
BRACKETS = ["train", "--task", "brackets", "--attention", "hj", "--block-size", "4", "--eval-interval", "2", *TINY]


@pytest.fixture(autouse=True)
def _threads():
    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


def read(d, name):
    return json.loads((d / name).read_text())


def one_line_error(err, command="train"):
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"hybrid-attention {command}: error: "), err
    return lines[0]


@pytest.fixture
def corpus(tmp_path):
    f = tmp_path / "corpus.txt"
    f.write_text("First Citizen:\nBefore we proceed any further, hear me speak.\n" * 40)
    return f


def shakespeare(corpus):
    return [
        "train",
        "--task",
        "shakespeare",
        "--attention",
        "softmax",
        "--block-size",
        "8",
        "--eval-interval",
        "2",
        "--eval-size",
        "16",
        "--data",
        str(corpus),
        *TINY,
    ]


# ---------------------------------------------------------------------- 2. --help defaults, --version
@pytest.mark.parametrize(
    "command, flag, default",
    [
        ("train", "--max-steps", "1000"),
        ("train", "--lr", "0.003"),
        ("ablate", "--max-steps", "1000"),
        ("ablate", "--block-sizes", "[4, 8, 12, 16]"),
        ("fidelity", "--problems", "8"),
        ("demo", "--shots", "128"),
    ],
)
def test_help_shows_defaults(capsys, command, flag, default):
    with pytest.raises(SystemExit) as info:
        cli.main([command, "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    options = out[out.index("\noptions:") :].splitlines()
    start = next(i for i, ln in enumerate(options) if ln.strip().startswith((flag + " ", flag + ",")))
    end = next((i for i in range(start + 1, len(options)) if options[i].strip().startswith("-")), len(options))
    entry = " ".join(" ".join(options[start:end]).split())  # argparse wraps lines
    assert f"(default: {default})" in entry
    assert "(default: None)" not in out


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["--version"])
    assert (
        info.value.code == 0 and capsys.readouterr().out.strip() == f"hybrid-attention {hybrid_attention.__version__}"
    )


# ---------------------------------------------------------------------- 3. --resume reads config.json
def test_resume_reads_the_settings_from_config_json(tmp_path, capsys):
    out = tmp_path / "run"
    assert cli.main([*BRACKETS, "--steps", "4", "--seed", "3", "--lr", "0.01", "--out", str(out)]) == 0
    assert cli.main(["train", "--out", str(out), "--resume", "--no-progress"]) == 0  # finished: nothing to do
    assert cli.main(["train", "--out", str(out), "--resume", "--steps", "6", "--no-progress"]) == 0  # extend the run
    m, c = read(out, "metrics.json"), read(out, "config.json")["run"]
    assert m["finished"] and m["step"] == 6 and len(m["train_loss"]) == 6
    assert (c["seed"], c["lr"], c["block_size"], c["n_embd"], c["max_steps"]) == (3, 0.01, 4, 8, 6)
    # explicit flags must match (or be on the whitelist like --steps); a conflict is refused naming the setting
    assert cli.main(["train", "--out", str(out), "--resume", "--steps", "8", "--seed", "3", "--no-progress"]) == 0
    capsys.readouterr()
    assert cli.main(["train", "--out", str(out), "--resume", "--steps", "10", "--lr", "0.02", "--no-progress"]) == 2
    assert "lr: checkpoint 0.01, now 0.02" in one_line_error(capsys.readouterr().err)
    assert read(out, "metrics.json")["step"] == 8


@pytest.mark.parametrize("setup", ["missing", "empty", "config_only"])
def test_resume_without_a_run_is_an_error(tmp_path, capsys, setup):
    out = tmp_path / "run"
    if setup != "missing":
        out.mkdir()
    if setup == "config_only":  # killed before its first checkpoint
        (out / "config.json").write_text(json.dumps({"run": {"task": "brackets", "block_size": 4}}))
    before = sorted(p.name for p in out.iterdir()) if out.exists() else None
    assert cli.main([*BRACKETS, "--steps", "2", "--out", str(out), "--resume"]) == 2
    err = one_line_error(capsys.readouterr().err)
    assert "--resume" in err and str(out) in err
    assert (sorted(p.name for p in out.iterdir()) if out.exists() else None) == before  # nothing started


def test_resume_with_fewer_steps_than_done_is_an_error(tmp_path, capsys):
    out = tmp_path / "run"
    assert cli.main([*BRACKETS, "--steps", "4", "--out", str(out)]) == 0
    before = (out / "checkpoint.pt").read_bytes()
    capsys.readouterr()
    assert cli.main([*BRACKETS, "--steps", "2", "--out", str(out), "--resume"]) == 2
    err = one_line_error(capsys.readouterr().err)
    assert "4 steps" in err and "--max-steps 2" in err
    assert (out / "checkpoint.pt").read_bytes() == before and read(out, "metrics.json")["step"] == 4


# ---------------------------------------------------------------------- 4. locks
def test_lock_is_exclusive_across_file_descriptors(tmp_path):
    with run_files.lock_directory(tmp_path):
        assert (tmp_path / run_files.LOCK_NAME).read_text().strip() == str(os.getpid())
        with pytest.raises(run_files.DirectoryLocked, match=str(tmp_path)):
            with run_files.lock_directory(tmp_path):
                pass
    assert not (tmp_path / run_files.LOCK_NAME).exists()
    with run_files.lock_directory(tmp_path):  # released: free again
        pass


def test_second_train_process_on_the_same_directory_is_refused(tmp_path, capsys):
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "hybrid_attention.apps",
        *BRACKETS,
        "--steps",
        "100000",
        "--eval-interval",
        "1",
        "--out",
        str(out),
    ]
    first = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not (out / "checkpoint.pt").exists():
            assert first.poll() is None, first.stderr.read().decode()
            assert time.monotonic() < deadline, "the first run wrote no checkpoint"
            time.sleep(0.1)
        assert cli.main(["train", "--out", str(out), "--resume", "--no-progress"]) == 2
        err = one_line_error(capsys.readouterr().err)
        assert "in use" in err and str(out) in err and str(first.pid) in err
        assert first.poll() is None  # the first run is unharmed
    finally:
        first.kill()
        first.wait()
    # a lock file left by the killed process does not block the next run
    with run_files.lock_directory(out):
        pass


def test_ablate_and_fidelity_respect_the_lock(tmp_path, capsys):
    abl, fid = tmp_path / "abl", tmp_path / "fid"
    abl.mkdir()
    fid.mkdir()
    with run_files.lock_directory(abl), run_files.lock_directory(fid):
        assert (
            cli.main(
                [
                    "ablate",
                    "--task",
                    "brackets",
                    "--modes",
                    "softmax",
                    "--block-sizes",
                    "4",
                    "--seeds",
                    "0",
                    "--steps",
                    "2",
                    "--out",
                    str(abl),
                    *TINY,
                ]
            )
            == 2
        )
        assert "in use" in one_line_error(capsys.readouterr().err, "ablate")
        assert (
            cli.main(
                [
                    "fidelity",
                    "--samplers",
                    "exact",
                    "--n",
                    "2",
                    "--shots",
                    "64",
                    "--problems",
                    "2",
                    "--no-progress",
                    "--out",
                    str(fid),
                ]
            )
            == 2
        )
        assert "in use" in one_line_error(capsys.readouterr().err, "fidelity")
    assert sorted(p.name for p in abl.iterdir()) == [] and sorted(p.name for p in fid.iterdir()) == []


# ---------------------------------------------------------------------- 5. divergence
@pytest.mark.parametrize("mode", ["hj", "softmax"])
def test_diverging_run_stops_and_keeps_the_last_good_checkpoint(tmp_path, capsys, mode):
    out = tmp_path / "run"
    args = [
        "train",
        "--task",
        "brackets",
        "--attention",
        mode,
        "--block-size",
        "6",
        "--steps",
        "40",
        "--eval-interval",
        "1",
        "--lr",
        "1e6",
        "--out",
        str(out),
        *TINY,
    ]
    assert cli.main(args) == 1
    err = one_line_error(capsys.readouterr().err)
    m = read(out, "metrics.json")
    assert not m["finished"] and m["diverged"]["step"] <= 40
    assert f"diverged at step {m['diverged']['step']}" in err and str(out) in err
    good = m["diverged"]["checkpoint_step"]
    assert good is not None and good < m["diverged"]["step"]
    blob = torch.load(out / "checkpoint.pt", weights_only=True)
    assert blob["step"] == good and all(torch.isfinite(v).all() for v in blob["model"].values())
    assert all(torch.isfinite(torch.tensor(m["train_loss"])))


def test_ablate_reports_a_diverged_run_and_does_not_rerun_it(tmp_path, monkeypatch, capsys):
    import dataclasses

    import hybrid_attention.apps.ablate.runs as ab

    real, calls = ab.train, []

    def hj_diverges(cfg):  # the same grid, but the hj runs with a learning rate that blows up
        calls.append(cfg.attention)
        return real(dataclasses.replace(cfg, lr=1e6) if cfg.attention == "hj" else cfg)

    monkeypatch.setattr(ab, "train", hj_diverges)
    args = [
        "ablate",
        "--task",
        "brackets",
        "--modes",
        "softmax",
        "hj",
        "--block-sizes",
        "4",
        "--seeds",
        "0",
        "--steps",
        "30",
        "--eval-interval",
        "1",
        "--out",
        str(tmp_path / "abl"),
        *TINY,
    ]
    assert cli.main(args) == 1
    cap = capsys.readouterr()
    assert "| 4 | softmax |" in cap.out and "| 4 | hj |" not in cap.out
    assert "hj_T4_s0" in cap.err and "diverged at step" in cap.err
    assert cli.main(args) == 1 and calls == ["softmax", "hj"]  # nothing re-run


# ---------------------------------------------------------------------- 6. one-line errors
@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty"])
def test_damaged_checkpoint_is_a_one_line_error(tmp_path, capsys, damage):
    out = tmp_path / "run"
    assert cli.main([*BRACKETS, "--steps", "2", "--out", str(out)]) == 0
    ck = out / "checkpoint.pt"
    data = ck.read_bytes()
    ck.write_bytes({"garbage": b"not a checkpoint\n" * 10, "truncated": data[: len(data) // 2], "empty": b""}[damage])
    capsys.readouterr()
    assert cli.main([*BRACKETS, "--steps", "4", "--out", str(out), "--resume"]) == 2
    assert str(ck) in one_line_error(capsys.readouterr().err)
    assert (
        cli.main(
            [
                "fidelity",
                "--samplers",
                "exact",
                "--ensemble",
                "model",
                "--checkpoint",
                str(out),
                "--n",
                "3",
                "--shots",
                "64",
                "--problems",
                "2",
                "--no-progress",
                "--no-plots",
                "--out",
                str(tmp_path / "fid"),
            ]
        )
        == 2
    )
    assert str(ck) in one_line_error(capsys.readouterr().err, "fidelity")


def test_unwritable_output_directory_is_a_one_line_error(tmp_path, capsys, monkeypatch):
    out = tmp_path / "ro"
    out.mkdir()
    real_open = os.open

    def read_only(path, flags, *a, **kw):  # what a read-only directory does (the tests may run as root)
        if str(path).startswith(str(out)) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *a, **kw)

    real_builtin_open = builtins.open

    def builtin_open(file, mode="r", *a, **kw):
        if any(c in mode for c in "wax+") and str(file).startswith(str(out)):
            raise PermissionError(13, "Permission denied", str(file))
        return real_builtin_open(file, mode, *a, **kw)

    monkeypatch.setattr(os, "open", read_only)
    monkeypatch.setattr(builtins, "open", builtin_open)
    assert cli.main([*BRACKETS, "--steps", "2", "--out", str(out)]) == 1
    err = one_line_error(capsys.readouterr().err)
    assert "Permission denied" in err and str(out) in err


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root ignores directory permissions")
def test_read_only_output_directory_for_real(tmp_path, capsys):
    out = tmp_path / "ro"
    out.mkdir()
    out.chmod(0o500)
    try:
        assert cli.main([*BRACKETS, "--steps", "2", "--out", str(out)]) == 1
        assert str(out) in one_line_error(capsys.readouterr().err)
    finally:
        out.chmod(0o700)


def test_resume_with_another_vocabulary_is_a_one_line_error(tmp_path, corpus, capsys):
    out = tmp_path / "run"
    assert cli.main([*shakespeare(corpus), "--steps", "2", "--out", str(out)]) == 0
    other = tmp_path / "other.txt"
    other.write_text("Zounds! Quoth the raven, jumping vexed.\n" * 40)
    capsys.readouterr()
    assert cli.main([*shakespeare(other), "--steps", "4", "--out", str(out), "--resume"]) == 2
    assert "sha256" in one_line_error(capsys.readouterr().err)
    # a checkpoint from before corpus hashes were recorded: the vocabulary check still stops it
    blob = torch.load(out / "checkpoint.pt", weights_only=True)
    blob.pop("data_sha256")
    torch.save(blob, out / "checkpoint.pt")
    assert cli.main([*shakespeare(other), "--steps", "4", "--out", str(out), "--resume"]) == 2
    err = one_line_error(capsys.readouterr().err)
    assert "vocabulary" in err and str(out) in err
    assert read(out, "metrics.json")["step"] == 2


def test_ibm_account_errors_are_one_line(tmp_path, capsys, monkeypatch):
    pytest.importorskip("qiskit_ibm_runtime")
    from qiskit_ibm_runtime.accounts.exceptions import AccountNotFoundError

    from hybrid_attention.backends.ibm import devices as ibm_devices

    monkeypatch.delenv("QISKIT_IBM_TOKEN", raising=False)
    args = [
        "train",
        "--task",
        "brackets",
        "--attention",
        "hj",
        "--block-size",
        "4",
        "--steps",
        "2",
        "--sampler",
        "ibm",
        "--sampler-option",
        "allow_hardware=true",
        *TINY,
    ]
    monkeypatch.setattr(ibm_devices, "has_credentials", lambda: False)
    assert cli.main([*args, "--out", str(tmp_path / "a")]) == 2
    assert "credentials" in one_line_error(capsys.readouterr().err)

    def no_account(*a, **kw):
        raise AccountNotFoundError("Unable to find account.")

    monkeypatch.setattr(ibm_devices, "has_credentials", lambda: True)
    monkeypatch.setattr(ibm_devices, "QiskitRuntimeService", no_account)
    assert cli.main([*args, "--out", str(tmp_path / "b")]) == 2
    assert "Unable to find account" in one_line_error(capsys.readouterr().err)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


# ---------------------------------------------------------------------- 7. corpus hash
def test_changed_corpus_with_the_same_vocabulary_is_refused_on_resume(tmp_path, corpus, capsys):
    out = tmp_path / "run"
    assert cli.main([*shakespeare(corpus), "--steps", "2", "--out", str(out)]) == 0
    sha = sha256_file(corpus)
    assert read(out, "config.json")["data_sha256"] == sha
    assert torch.load(out / "checkpoint.pt", weights_only=True)["data_sha256"] == sha
    edited = tmp_path / "edited.txt"
    edited.write_text("".join(reversed(corpus.read_text())))  # same characters, other text
    capsys.readouterr()
    assert cli.main([*shakespeare(edited), "--steps", "4", "--out", str(out), "--resume"]) == 2
    err = one_line_error(capsys.readouterr().err)
    assert sha in err and str(edited) in err
    moved = tmp_path / "moved.txt"  # the same corpus elsewhere is fine
    moved.write_bytes(corpus.read_bytes())
    assert cli.main([*shakespeare(moved), "--steps", "4", "--out", str(out), "--resume"]) == 0


# ---------------------------------------------------------------------- 8. temporary files
def test_temporaries_left_by_a_kill_are_cleaned_up(tmp_path):
    out = tmp_path / "run"
    assert cli.main([*BRACKETS, "--steps", "2", "--out", str(out)]) == 0
    for name in (".checkpoint.pt.tmp", ".checkpoint.pt.k3j_9x2a", ".metrics.json.tmp"):  # new and earlier temp names
        (out / name).write_bytes(b"half a file")
    (out / ".notes").write_text("a user's file")
    assert cli.main([*BRACKETS, "--steps", "4", "--out", str(out), "--resume"]) == 0
    assert sorted(p.name for p in out.glob(".*")) == [".notes"]
    assert read(out, "metrics.json")["step"] == 4


def test_a_failed_checkpoint_write_keeps_the_previous_checkpoint(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    assert cli.main([*BRACKETS, "--steps", "2", "--out", str(out)]) == 0
    before = (out / "checkpoint.pt").read_bytes()
    real_save = torch.save

    def disk_full(obj, f, *a, **kw):
        real_save(obj, f, *a, **kw)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", disk_full)
    capsys.readouterr()
    assert cli.main([*BRACKETS, "--steps", "4", "--out", str(out), "--resume"]) == 1
    assert "No space left" in one_line_error(capsys.readouterr().err)
    assert (out / "checkpoint.pt").read_bytes() == before and not list(out.glob(".*"))


# ---------------------------------------------------------------------- 9. weights_only
def test_checkpoints_are_loaded_with_weights_only(tmp_path, monkeypatch):
    out = tmp_path / "run"
    assert cli.main([*BRACKETS, "--steps", "2", "--out", str(out)]) == 0
    calls = []
    real_load = torch.load

    def spy(*a, **kw):
        calls.append(kw.get("weights_only"))
        return real_load(*a, **kw)

    monkeypatch.setattr(torch, "load", spy)
    assert cli.main([*BRACKETS, "--steps", "4", "--out", str(out), "--resume"]) == 0
    from hybrid_attention.apps.runs import load_run

    load_run(out)
    assert calls and all(w is True for w in calls)


class Payload:  # stands for any pickled object that is not a tensor or a plain container
    pass


def test_a_checkpoint_holding_arbitrary_objects_is_refused(tmp_path, capsys):
    out = tmp_path / "run"
    assert cli.main([*BRACKETS, "--steps", "2", "--out", str(out)]) == 0
    blob = torch.load(out / "checkpoint.pt", weights_only=True)
    blob["extra"] = Payload()
    torch.save(blob, out / "checkpoint.pt")
    capsys.readouterr()
    assert cli.main([*BRACKETS, "--steps", "4", "--out", str(out), "--resume"]) == 2
    assert str(out / "checkpoint.pt") in one_line_error(capsys.readouterr().err)


def test_a_checkpoint_of_the_earlier_format_still_resumes(tmp_path):
    out = tmp_path / "run"
    assert cli.main([*BRACKETS, "--steps", "2", "--out", str(out)]) == 0
    blob = torch.load(out / "checkpoint.pt", weights_only=True)
    old = {k: blob[k] for k in ("model", "optimizer", "generator", "history", "step", "elapsed", "config")}
    torch.save(old, out / "checkpoint.pt")
    assert cli.main([*BRACKETS, "--steps", "4", "--out", str(out), "--resume"]) == 0
    assert read(out, "metrics.json")["step"] == 4
