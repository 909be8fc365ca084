"""The ablation grid on a Dask LocalCluster (2 single-threaded worker processes): the same summaries as the serial
grid, byte for byte (a grid with a learning-rate axis); a worker killed mid-grid loses no finished run and the grid completes; bad cluster flags are
refused before any run."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest
import torch

from hybrid_attention.apps import cli
from hybrid_attention.apps.ablate import ablate
from hybrid_attention.apps.ablate.cluster import run_grid
from hybrid_attention.apps.ablate.grid import run_dir
from hybrid_attention.apps.ablate.report import is_finished
from hybrid_attention.apps.train import TrainConfig

distributed = pytest.importorskip("distributed")

TINY = dict(task="brackets", n_embd=8, batch_size=8, warmup=2, eval_size=64, threads=1, progress=False)
GRID = (["softmax", "hj"], [4], [0, 1])  # modes, block sizes, seeds
LRS = [3e-3, 1e-2]  # the learning-rate axis of the serial-vs-distributed grid


@pytest.fixture(autouse=True)
def keep_threads():
    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def own_cluster():
    """A cluster of this module's own: the kill test kills one of its workers."""
    c = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=40
    )
    client = distributed.Client(c)
    yield c, client
    client.close()
    c.close()


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    out = tmp_path_factory.mktemp("serial")
    ablate(TrainConfig(max_steps=8, eval_interval=4, out=str(out), **TINY), out, *GRID, lrs=LRS, progress=False)
    return out


def test_distributed_grid_gives_the_serial_summaries(dask_cluster, serial, tmp_path):
    out = tmp_path / "dist"
    base = TrainConfig(max_steps=8, eval_interval=4, out=str(out), **TINY)
    rows = ablate(base, out, *GRID, lrs=LRS, progress=False, scheduler=dask_cluster[0].scheduler_address)
    assert len(rows) == 8
    for name in ("summary.csv", "summary_by_lr.csv", "summary.md", "couplings_by_distance.csv"):
        assert (out / name).read_bytes() == (serial / name).read_bytes(), name
    names = sorted(p.name for p in (serial / "runs").iterdir())
    assert names == sorted(run_dir(serial, m, 4, s, lr).name for m in GRID[0] for s in GRID[2] for lr in LRS)
    assert sorted(p.name for p in (out / "runs").iterdir()) == names
    for name in names:  # every run trained the same numbers (timings aside)
        ja, jb = (json.loads((d / "runs" / name / "metrics.json").read_text()) for d in (out, serial))
        assert ja["train_loss"] == jb["train_loss"] and ja["val_loss"] == jb["val_loss"]


@pytest.mark.slow  # starts a second cluster of its own (~10-20 s on a shared machine)
def test_cli_workers_flag_runs_a_local_cluster(serial, tmp_path, capsys):
    out = tmp_path / "cli"
    args = ["ablate", "--task", "brackets", "--modes", "softmax", "hj", "--block-sizes", "4", "--seeds", "0", "1"]
    args += ["--steps", "8", "--eval-interval", "4", "--n-embd", "8", "--batch-size", "8", "--warmup", "2"]
    args += ["--eval-size", "64", "--no-progress", "--out", str(out), "--workers", "2", "--lrs", "0.003", "0.01"]
    assert cli.main(args) == 0
    assert (out / "summary.md").read_bytes() == (serial / "summary.md").read_bytes()
    assert "| 4 | hj |" in capsys.readouterr().out


def test_killed_worker_loses_no_finished_run_and_the_grid_completes(own_cluster, tmp_path):
    c, client = own_cluster
    out = tmp_path / "kill"
    out.mkdir()
    base = TrainConfig(max_steps=40, eval_interval=4, out=str(out), **TINY)
    configs = []
    for seed in (0, 1, 2):
        for mode in ("softmax", "hj"):
            cfg = TrainConfig(**{**base.__dict__, "attention": mode, "block_size": 4, "seed": seed})
            cfg.out = str(run_dir(out, mode, 4, seed))
            configs.append(cfg)
    seen: dict = {}
    stop = threading.Event()

    def killer():
        while not stop.is_set():
            done = [c for c in configs if is_finished(run_dir(out, c.attention, 4, c.seed))]
            busy = [w for w, keys in client.processing().items() if keys]
            if done and busy:
                seen["finished"] = {
                    cfg.out: (run_dir(out, cfg.attention, 4, cfg.seed) / "metrics.json").read_bytes() for cfg in done
                }
                pid = client.run(os.getpid, workers=[busy[0]])[busy[0]]
                os.kill(pid, signal.SIGKILL)  # the worker process dies under its run; its nanny starts another
                seen["killed"] = busy[0]
                return
            time.sleep(0.05)

    t = threading.Thread(target=killer)
    t.start()
    try:
        recs = run_grid(configs, client=client, progress=False)
    finally:
        stop.set()
        t.join()
    assert "killed" in seen, "no worker was busy after the first run finished"
    assert len(recs) == 6 and not any(r["diverged"] for r in recs)
    for cfg in configs:  # the grid completed
        assert is_finished(run_dir(out, cfg.attention, 4, cfg.seed))
    for path, before in seen["finished"].items():  # finished runs untouched
        assert (out / "runs" / os.path.basename(path) / "metrics.json").read_bytes() == before


def test_bad_cluster_settings_fail_before_any_run(tmp_path, capsys):
    out = tmp_path / "bad"
    base = ["ablate", "--task", "brackets", "--modes", "hj", "--block-sizes", "4", "--seeds", "0", "--out", str(out)]
    with pytest.raises(SystemExit):  # argparse: the two flags exclude each other
        cli.main([*base, "--workers", "2", "--scheduler", "tcp://127.0.0.1:1"])
    with pytest.raises(SystemExit) as info:  # refused by the parser (hybrid_attention/apps/cli_types.py)
        cli.main([*base, "--workers", "0"])
    assert info.value.code == 2
    assert "argument --workers: expected an integer >= 1, got '0'" in capsys.readouterr().err
    assert not out.exists()
    with pytest.raises(ValueError, match="either a scheduler address or a number of workers"):
        ablate(TrainConfig(out=str(out), **TINY), out, ["hj"], [4], [0], scheduler="tcp://x:1", workers=2)


def test_run_grid_refuses_a_client_with_a_cluster_setting():
    """A client and a scheduler address (or a worker count) name two clusters: refused, not one of them dropped."""
    with pytest.raises(ValueError, match="either client= or scheduler=/workers="):
        run_grid([], client=object(), workers=2)
    with pytest.raises(ValueError, match="tcp://h:1"):
        run_grid([], client=object(), scheduler="tcp://h:1")
