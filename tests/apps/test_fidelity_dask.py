"""Fidelity sweeps on a Dask LocalCluster (2 single-threaded workers): every point is one task and measures the same
numbers as the serial sweep; the report keeps the serial order of its points; the command takes --workers and
--scheduler."""

from __future__ import annotations

import json

import pytest

from hybrid_attention.apps import cli
from hybrid_attention.apps.fidelity import FidelityConfig, run_sweep

distributed = pytest.importorskip("distributed")

CFG = dict(
    samplers=["exact", "gibbs", "statevector"], n=[3, 4], shots=[200, 400], tau=[0.5, 1.0], steps=[4], problems=4
)


@pytest.fixture
def cluster(dask_cluster):
    return dask_cluster[0]


def _numbers(report):
    """The measured numbers of every point (timings and run facts aside), as JSON text (NaN equals NaN there)."""
    drop = ("seconds", "sampler_info", "pareto_wall")

    def clean(f, v):
        return {c: x for c, x in v.items() if c != "wall_s"} if f == "cost" else v

    return json.dumps({k: {f: clean(f, v) for f, v in p.items() if f not in drop} for k, p in report["points"].items()})


def test_distributed_sweep_measures_the_serial_numbers(cluster, tmp_path):
    serial = run_sweep(FidelityConfig(**CFG), tmp_path / "serial", plots=False, progress=False)
    dist = run_sweep(
        FidelityConfig(**CFG), tmp_path / "dist", plots=False, progress=False, scheduler=cluster.scheduler_address
    )
    assert len(serial["points"]) == 9
    assert list(dist["points"]) == list(serial["points"])  # the serial order, whatever order the tasks finished in
    assert _numbers(dist) == _numbers(serial)
    on_disk = json.loads((tmp_path / "dist" / "report.json").read_text())
    assert _numbers(on_disk) == _numbers(serial)


def test_resumed_distributed_sweep_measures_only_new_points(cluster, tmp_path, monkeypatch):
    out = tmp_path / "r"
    run_sweep(FidelityConfig(**{**CFG, "samplers": ["exact"]}), out, plots=False, progress=False)
    first = json.loads((out / "report.json").read_text())["points"]
    rep = run_sweep(FidelityConfig(**CFG), out, plots=False, progress=False, scheduler=cluster.scheduler_address)
    assert len(rep["points"]) == 9
    for k, v in first.items():  # earlier points kept as they were
        assert rep["points"][k] == v


def test_command_flags(cluster, tmp_path, capsys):
    out = tmp_path / "cli"
    args = ["fidelity", "--samplers", "exact", "--n", "3", "--shots", "100", "--problems", "2", "--no-plots"]
    args += ["--no-progress", "--out", str(out)]
    assert cli.main([*args, "--scheduler", cluster.scheduler_address]) == 0
    assert "exact" in capsys.readouterr().out
    assert len(json.loads((out / "report.json").read_text())["points"]) == 1
    with pytest.raises(SystemExit) as info:  # refused by the parser (hybrid_attention/apps/cli_types.py)
        cli.main([*args[:-1], str(tmp_path / "bad"), "--workers", "0"])
    assert info.value.code == 2
    assert "argument --workers: expected an integer >= 1, got '0'" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()
