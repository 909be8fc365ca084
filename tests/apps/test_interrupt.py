"""Ctrl-C: the command says what was saved (the checkpoint and its step, or nothing) and the exact command that
continues; further Ctrl-C while it saves and exits are ignored instead of ending in a traceback."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time

import pytest

from hybrid_attention.apps import cli
from hybrid_attention.apps.run_files import load_checkpoint
from hybrid_attention.apps.train import loop

ARGS = ["train", "--task", "brackets", "--block-size", "4", "--batch-size", "2", "--eval-size", "4", "--n-embd", "8",
        "--eval-interval", "2", "--no-progress"]  # fmt: skip

#: runs ``cli.main(argv)`` with a slow cleanup (leaving the run directory) and a slow exit, touching a marker file
#: when each starts, so that the test can press Ctrl-C again inside each
SLOW_EXIT = """
import atexit, contextlib, pathlib, sys, time
from hybrid_attention.apps import cli
from hybrid_attention.apps.train import loop

marks = pathlib.Path(sys.argv[1])
real = loop.claim_directory

@contextlib.contextmanager
def slow_claim(out, resume):
    with real(out, resume) as d:
        try:
            yield d
        finally:
            (marks / "cleanup").touch()
            time.sleep(2)

def slow_exit():
    (marks / "exit").touch()
    time.sleep(2)

atexit.register(slow_exit)
loop.claim_directory = slow_claim
sys.exit(cli.main(sys.argv[2:]))
"""


def _wait_for(path, proc, seconds=120):
    t0 = time.monotonic()
    while not path.exists():
        if proc.poll() is not None or time.monotonic() - t0 > seconds:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"{path} never appeared (exit {proc.returncode}): {err[-2000:]}")
        time.sleep(0.05)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child process is POSIX")
def test_ctrl_c_says_what_was_saved_and_how_to_resume_and_a_second_one_is_harmless(tmp_path):
    out, marks = tmp_path / "run", tmp_path / "marks"
    marks.mkdir()
    argv = [*ARGS, "--steps", "100000", "--out", str(out)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", SLOW_EXIT, str(marks), *argv], stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        _wait_for(out / "metrics.json", proc)
        proc.send_signal(signal.SIGINT)  # stop the run
        _wait_for(marks / "cleanup", proc, 60)
        proc.send_signal(signal.SIGINT)  # again, while it leaves the run directory
        _wait_for(marks / "exit", proc, 60)
        proc.send_signal(signal.SIGINT)  # and again, while the interpreter exits
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    m = re.search(r"the checkpoint '(.+)' \(step (\d+) of 100000\) is kept.*resume with:\n  ([^\n]+)\n", err, re.S)
    assert m, err
    step = int(m.group(2))
    assert m.group(1) == str(out / "checkpoint.pt") and step == load_checkpoint(out / "checkpoint.pt")["step"]
    command = shlex.split(m.group(3))
    assert command == ["hybrid-attention", *argv, "--resume"]
    assert cli.main([*command[1:], "--steps", str(step + 1)]) == 0  # the printed command resumes it
    assert json.loads((out / "metrics.json").read_text())["step"] == step + 1


def test_ctrl_c_before_the_first_checkpoint_says_nothing_was_saved(tmp_path, monkeypatch, capsys):
    out = tmp_path / "new"
    argv = [*ARGS, "--steps", "4", "--out", str(out)]
    real = loop._lr_at

    def interrupted(step, cfg):
        if step == 1:
            raise KeyboardInterrupt
        return real(step, cfg)

    monkeypatch.setattr(loop, "_lr_at", interrupted)
    assert cli.main(argv) == 130
    err = capsys.readouterr().err
    assert "interrupted before the first checkpoint: nothing was saved; start again with:\n" in err
    assert f"  hybrid-attention {shlex.join(argv)}\n" in err and not out.exists()
    monkeypatch.setattr(loop, "_lr_at", real)
    assert cli.main(argv) == 0  # the same command starts it


def test_ctrl_c_in_a_resumed_run_names_its_checkpoint(tmp_path, monkeypatch, capsys):
    out = tmp_path / "r"
    assert cli.main([*ARGS, "--steps", "2", "--out", str(out)]) == 0
    real = loop._lr_at

    def interrupted(step, cfg):
        if step == 3:
            raise KeyboardInterrupt
        return real(step, cfg)

    monkeypatch.setattr(loop, "_lr_at", interrupted)
    argv = [*ARGS, "--steps", "6", "--out", str(out), "--resume"]
    assert cli.main(argv) == 130
    err = capsys.readouterr().err
    assert f"the checkpoint {str(out / 'checkpoint.pt')!r} (step 2 of 6) is kept" in err
    assert f"resume with:\n  hybrid-attention {shlex.join(argv)}\n" in err  # --resume given once
