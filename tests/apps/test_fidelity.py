"""Tests for the fidelity sweep: CLI smoke in a tiny configuration, resume, --out safety, bad arguments,
statistical checks of the measurement against the shot-noise floor, and model-derived problems."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from hybrid_attention import exact
from hybrid_attention.apps import cli
from hybrid_attention.apps.fidelity import FidelityConfig, sweep_points
from hybrid_attention.apps.fidelity import sweep as fidelity_sweep
from hybrid_attention.apps.fidelity.problems import problems_from_model, random_problems
from hybrid_attention.apps.fidelity.sweep import SweepPoint, measure_point
from hybrid_attention.metrics import weights_from_marginals

TINY = ["fidelity", "--samplers", "exact", "--n", "2,3", "--shots", "64,256", "--problems", "3", "--no-progress"]


def _run(args, out):
    return cli.main([*args, "--out", str(out)])


def test_cli_smoke_writes_report_and_plots(tmp_path, capsys):
    out = tmp_path / "rep"
    assert _run(TINY, out) == 0
    rep = json.loads((out / "report.json").read_text())
    assert set(rep["points"]) == {
        "exact|n=2|shots=64|tau=None|steps=None",
        "exact|n=3|shots=64|tau=None|steps=None",
        "exact|n=2|shots=256|tau=None|steps=None",
    }
    assert rep["config"]["base"] == {"n": 2, "shots": 64, "tau": 1.0, "steps": 10}
    assert rep["commands"][0].startswith("hybrid-attention fidelity --samplers exact --n 2,3 --shots 64,256")
    assert sorted(rep["plots"]) == ["fidelity_vs_cost.png", "fidelity_vs_n.png", "fidelity_vs_shots.png"]
    for f in rep["plots"]:
        assert (out / f).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    res = rep["points"]["exact|n=2|shots=64|tau=None|steps=None"]
    for k in ("tv", "kl_pq", "kl_qp", "hellinger", "fidelity", "marginal_max", "correlation_max", "attention_tv"):
        assert set(res["target"][k]) >= {"mean", "median", "std", "max"}
    assert 0 <= res["target"]["tv"]["mean"] <= 1
    assert "| exact | 2 | 64 |" in capsys.readouterr().out


def test_resume_skips_finished_points_and_adds_new_ones(tmp_path, monkeypatch):
    out = tmp_path / "rep"
    assert _run(TINY, out) == 0
    before = (out / "report.json").read_text()
    calls = []
    real = fidelity_sweep.measure_point

    def counting(pt, problems, **kw):
        calls.append(pt.key)
        return real(pt, problems, **kw)

    monkeypatch.setattr(fidelity_sweep, "measure_point", counting)
    assert _run(TINY + ["--no-plots"], out) == 0
    assert calls == []
    assert json.loads((out / "report.json").read_text())["points"] == json.loads(before)["points"]
    wider = [a if a != "64,256" else "64,256,1024" for a in TINY]
    assert _run(wider + ["--no-plots", "--base", "shots=64"], out) == 0
    assert calls == ["exact|n=2|shots=1024|tau=None|steps=None"]


def test_interrupted_sweep_resumes(tmp_path, monkeypatch):
    out = tmp_path / "rep"
    real = fidelity_sweep.measure_point
    seen = []

    def dies_on_second(pt, problems, **kw):  # the second point measured on the whole ensemble (not a probe call)
        seen.extend([pt.key] if problems.h.shape[0] == 3 else [])
        if len(seen) == 2:
            raise KeyboardInterrupt
        return real(pt, problems, **kw)

    monkeypatch.setattr(fidelity_sweep, "measure_point", dies_on_second)
    assert _run(TINY, out) == 130
    assert len(json.loads((out / "report.json").read_text())["points"]) == 1
    monkeypatch.setattr(fidelity_sweep, "measure_point", real)
    assert _run(TINY, out) == 0
    assert len(json.loads((out / "report.json").read_text())["points"]) == 3


@pytest.mark.parametrize(
    "extra",
    [
        ["--samplers", "nosuch"],
        ["--shots", "0"],
        ["--n", "2,40"],
        ["--tau", "-1"],
        ["--base", "shots=999"],
        ["--ensemble", "model"],
        ["--problems", "0"],
    ],
)
def test_bad_arguments_exit_2_before_writing(tmp_path, extra, capsys):
    out = tmp_path / "rep"
    try:
        rc = _run(TINY + extra, out)
    except (
        SystemExit
    ) as exc:  # refused by the parser (hybrid_attention/apps/cli_types.py: --shots 0, --tau -1, --problems 0)
        rc = exc.code
    assert rc == 2
    assert "error" in capsys.readouterr().err
    assert not (out / "report.json").exists()


def test_out_is_never_silently_overwritten(tmp_path, capsys):
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("keep me")
    assert _run(TINY, busy) == 2
    assert (busy / "notes.txt").read_text() == "keep me" and not (busy / "report.json").exists()
    out = tmp_path / "rep"
    assert _run(TINY, out) == 0
    first = (out / "report.json").read_text()
    assert _run(TINY + ["--seed", "1"], out) == 2  # a different ensemble
    assert "different ensemble" in capsys.readouterr().err
    assert (out / "report.json").read_text() == first
    assert _run(TINY + ["--seed", "1", "--overwrite", "--no-plots"], out) == 0
    assert json.loads((out / "report.json").read_text())["config"]["seed"] == 1
    assert not list(out.glob("fidelity_vs_*.png"))  # the old report's plots went with it


def test_sweep_points_one_axis_at_a_time():
    cfg = FidelityConfig(
        samplers=["exact", "statevector", "aer"], n=[3, 4, 5], shots=[100, 1000], tau=[0.5, 1.0, 2.0], steps=[10, 40]
    )
    pts = sweep_points(cfg)
    assert cfg.base == {"n": 4, "shots": 100, "tau": 1.0, "steps": 10}
    by = {s: [p for p in pts if p.sampler == s] for s in cfg.samplers}
    assert len(by["exact"]) == 1 + 2 + 1  # base, two other n, one other shots
    assert all(p.tau is None and p.steps is None for p in by["exact"])
    assert len(by["statevector"]) == 1 + 2 + 2 + 1 and all(p.shots is None for p in by["statevector"])
    assert len(by["aer"]) == 1 + 2 + 1 + 2 + 1
    assert len({p.key for p in pts}) == len(pts)


def test_exact_sampling_errors_within_shot_noise():
    """Exact samples: every marginal error is within z sqrt((1 - m^2) / N) (z = 5), TV near its expected floor."""
    N, probs = 2000, random_problems(4, 16, seed=5)
    res = measure_point(SweepPoint("exact", 4, N, None, None), probs, seed=11)
    m = exact.marginals(probs.to(torch.float64)).numpy()
    bound = 5 * np.sqrt((1 - m**2).max() / N)
    assert res["target"]["marginal_max"]["max"] < bound
    floor = res["shot_noise_tv"]
    # the mean TV of 16 problems fluctuates around the floor; 5 standard errors of a TV ~ floor / 2
    assert abs(res["target"]["tv"]["mean"] - floor) < 5 * floor / 2 / math.sqrt(16)


def test_random_problems_are_reproducible_and_size_independent():
    a, b = random_problems(3, 4, seed=2), random_problems(3, 4, seed=2)
    assert torch.equal(a.h, b.h) and torch.equal(a.J, b.J)
    assert not torch.equal(random_problems(3, 4, seed=3).h, a.h)
    assert torch.allclose(a.J, a.J.transpose(-1, -2)) and torch.all(torch.diagonal(a.J, dim1=-2, dim2=-1) == 0)


def test_problems_from_model_reproduce_the_layer_output():
    """The extracted (h, J, beta) give exactly the attention weights the model's layer applies at query n - 1."""
    from hybrid_attention.model import Transformer, TransformerConfig

    torch.manual_seed(0)
    model = Transformer(TransformerConfig(vocab_size=5, block_size=6, n_embd=16, n_head=2, attention="hj"))
    with torch.no_grad():
        for att in model.attention_layers:
            att.J_raw.normal_(0, 0.7)
    idx = torch.randint(0, 5, (3, 6))
    att = model.attention_layers[0]
    cap = {}
    # hooks return None (a returned value would replace the module's output)
    h1 = att.register_forward_hook(lambda m, i, o: cap.__setitem__("x", i[0]))
    h2 = att.c_proj.register_forward_hook(lambda m, i, o: cap.__setitem__("y", i[0]))
    model.eval()
    with torch.no_grad():
        model(idx)
    h1.remove(), h2.remove()
    n, head, d = 4, 1, 8
    v = att.c_attn(cap["x"]).split(16, dim=2)[2].view(3, 6, 2, d)[:, :n, head]  # (B, n, d)
    prob = problems_from_model(model, idx, n, head=head)
    assert prob.h.shape == (3, n) and prob.J.shape == (n, n)
    assert torch.allclose(prob.J, att.J[head, :n, :n].double())
    a = torch.from_numpy(weights_from_marginals(exact.marginals(prob).numpy()))
    expected = cap["y"].view(3, 6, 2, d)[:, n - 1, head].double()
    assert torch.allclose(torch.einsum("bn,bnd->bd", a, v.double()), expected, atol=1e-5)
    with pytest.raises(ValueError, match="head"):
        problems_from_model(model, idx, n, head=2)


def test_model_ensemble_from_a_training_run(tmp_path):
    from hybrid_attention.apps.train import TrainConfig, train

    run = tmp_path / "run"
    train(
        TrainConfig(
            task="brackets",
            attention="hj",
            block_size=6,
            max_steps=3,
            out=str(run),
            progress=False,
            eval_interval=3,
            n_embd=16,
            eval_size=64,
        )
    )
    out = tmp_path / "rep"
    args = [
        "fidelity",
        "--samplers",
        "exact",
        "--ensemble",
        "model",
        "--checkpoint",
        str(run),
        "--n",
        "3",
        "--shots",
        "128",
        "--problems",
        "4",
        "--no-progress",
        "--no-plots",
    ]
    assert _run(args, out) == 0
    rep = json.loads((out / "report.json").read_text())
    assert rep["config"]["ensemble"] == "model" and len(rep["points"]) == 1
    assert "--ensemble model --checkpoint" in rep["commands"][0]
    assert _run(args[:6] + [str(tmp_path / "missing")] + args[7:], tmp_path / "rep2") == 2


def _available(name):
    from hybrid_attention.backends import available_samplers

    return available_samplers().get(name, False)


@pytest.mark.skipif(not _available("aer"), reason="aer sampler not available")
def test_aer_point_matches_its_ideal_circuit_within_shot_noise():
    N, probs = 2000, random_problems(3, 8, seed=4)
    res = measure_point(SweepPoint("aer", 3, N, 1.0, 10), probs, seed=2)
    # the sampled marginals agree with the ideal circuit's within z sqrt(1/N); the target (beta = 1) is far away
    assert res["circuit"]["marginal_max"]["max"] < 5 * math.sqrt(1.0 / N)
    floor = res["circuit"]["shot_noise_tv"]
    assert abs(res["circuit"]["tv"]["mean"] - floor) < 5 * floor / 2 / math.sqrt(8)
    assert res["target"]["tv"]["mean"] > res["circuit"]["tv"]["mean"]
    # docs/theory.md section 4: a short quench samples couplings at about twice the field inverse temperature
    assert 1.3 < res["fit"]["beta_J"]["median"] / res["fit"]["beta_h"]["median"] < 2.5
    assert res["schedule"]["energy_scale"] == 1.0


@pytest.mark.skipif(not _available("aer"), reason="aer sampler not available")
def test_calibrated_schedule_raises_the_effective_temperature_to_target():
    from hybrid_attention.apps.fidelity.sweep import make_schedule

    probs = random_problems(3, 8, seed=4, scale=0.5)
    plain = measure_point(SweepPoint("aer", 3, 256, 0.5, 20), probs, seed=2)
    comp = measure_point(SweepPoint("aer", 3, 256, 0.5, 20), probs, seed=2, calibration="compensated")
    assert comp["schedule"]["field_scale"] == 2.0 and comp["schedule"]["energy_scale"] > 1
    # compensation balances the two temperatures (docs/theory.md section 4: plain DQA has beta_J ~ 2 beta_h) and the
    # larger energy scale heats less; the leading-order calibration undershoots beta = 1 (higher orders saturate it)
    ph, pj = plain["fit"]["beta_h"]["median"], plain["fit"]["beta_J"]["median"]
    ch, cj = comp["fit"]["beta_h"]["median"], comp["fit"]["beta_J"]["median"]
    assert pj / ph > 1.6 and abs(cj / ch - 1) < 0.15
    assert ch > 3 * ph and ch < 1.0
    assert comp["target"]["tv"]["mean"] < plain["target"]["tv"]["mean"]
    with pytest.raises(ValueError, match="calibration"):
        make_schedule(1.0, 10, "bogus")


@pytest.mark.skipif(not _available("statevector"), reason="statevector sampler not available")
def test_fitted_calibration_reaches_a_hot_target_temperature():
    """Calibrated on an independent ensemble, the anneal samples other problems at the target beta = 0.2: both
    fitted temperatures within 15 % (problem-to-problem scatter), and far closer to the target than the default program;
    the leading-order calibration undershoots (higher orders)."""
    probs = random_problems(4, 8, seed=6, beta=0.2)
    res = measure_point(SweepPoint("statevector", 4, None, 1.0, 40), probs, calibration="fitted")
    assert abs(res["fit"]["beta_h"]["median"] - 0.2) < 0.03 and abs(res["fit"]["beta_J"]["median"] - 0.2) < 0.03
    assert res["fit"]["r"]["median"] > 0.98
    lead = measure_point(SweepPoint("statevector", 4, None, 1.0, 40), probs, calibration="compensated")
    assert lead["fit"]["beta_h"]["median"] < res["fit"]["beta_h"]["median"]
    plain = measure_point(SweepPoint("statevector", 4, None, 1.0, 40), probs)
    assert res["target"]["tv"]["mean"] < 0.5 * plain["target"]["tv"]["mean"]
    # at a short anneal the target cannot be reached: the point is reported, not faked
    from hybrid_attention.apps.fidelity.sweep import UnreachableTemperature

    with pytest.raises(UnreachableTemperature, match="cannot reach"):
        measure_point(SweepPoint("statevector", 4, None, 0.5, 40), probs, calibration="fitted")


def test_other_settings_are_refused_naming_them(tmp_path, capsys):
    out = tmp_path / "rep"
    assert _run(TINY + ["--no-plots"], out) == 0
    first = (out / "report.json").read_text()
    capsys.readouterr()
    # another base point would put the new sweep lines around a different point than the report's
    assert _run(TINY + ["--no-plots", "--base", "shots=256"], out) == 2
    err = capsys.readouterr().err
    assert "base: report {'n': 2, 'shots': 64, 'tau': 1.0, 'steps': 10}, now {'n': 2, 'shots': 256" in err
    assert "--base n=2,shots=64,tau=1,steps=10" in err  # how to extend it instead
    assert _run(TINY + ["--no-plots", "--calibration", "leading", "--problems", "4"], out) == 2
    err = capsys.readouterr().err
    assert "problems: report 3, now 4" in err and "calibration: report 'none', now 'leading'" in err
    assert (out / "report.json").read_text() == first
    # the same command resumes; other axis values extend the report, whose configuration keeps the union
    assert _run(TINY + ["--no-plots"], out) == 0
    assert (
        _run(
            [
                "fidelity",
                "--samplers",
                "exact",
                "--n",
                "2",
                "--shots",
                "64",
                "--problems",
                "3",
                "--no-progress",
                "--no-plots",
                "--base",
                "n=2,shots=64,tau=1,steps=10",
            ],
            out,
        )
        == 0
    )
    rep = json.loads((out / "report.json").read_text())
    assert rep["config"]["n"] == [2, 3] and rep["config"]["shots"] == [64, 256] and len(rep["points"]) == 3


def test_settings_a_schedule_or_sampler_does_not_use_are_refused():
    """``beta``/``n`` belong to the fitted calibration and ``schedule`` to DQA samplers: elsewhere they are refused,
    not dropped."""
    from hybrid_attention.apps.fidelity.sweep import build_sampler, make_schedule
    from hybrid_attention.circuits import DQASchedule

    with pytest.raises(ValueError, match="beta and n only apply to calibration='fitted'.*'leading'"):
        make_schedule(1.0, 10, "leading", beta=0.5)
    with pytest.raises(ValueError, match="calibration='none'"):
        make_schedule(1.0, 10, n=3)
    assert make_schedule(1.0, 10) == DQASchedule(tau=1.0, steps=10)
    with pytest.raises(ValueError, match="'gibbs' runs no DQA program and takes no schedule"):
        build_sampler("gibbs", schedule=DQASchedule(tau=1.0, steps=10))


def test_plots_draw_the_whole_sweep_with_its_floor_next_to_the_table(tmp_path, monkeypatch, capsys):
    """One PNG per swept axis, error per sampler with the shot-noise floor on each (not only along shots), saved
    next to the table (summary.md) and named by the CLI."""
    import matplotlib.axes

    labels = []
    real = matplotlib.axes.Axes.plot

    def plot(self, *args, **kw):
        labels.append((self.get_xlabel(), kw.get("label")))
        return real(self, *args, **kw)

    monkeypatch.setattr(matplotlib.axes.Axes, "plot", plot)
    out = tmp_path / "rep"
    assert _run(TINY, out) == 0
    printed = capsys.readouterr().out
    for name in ("fidelity_vs_n.png", "fidelity_vs_shots.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"plot: {out / name}" in printed
    floors = [lab for lab in labels if lab[1] == "shot-noise floor (exact samples)"]
    assert len(floors) == 2  # one on the n figure, one on the shots figure
    assert (out / "summary.md").read_text().count("| exact | 2 | 64 |") == 1


def test_without_matplotlib_the_cli_still_works_and_says_so(tmp_path, monkeypatch, caplog):
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    out = tmp_path / "rep"
    assert _run(TINY, out) == 0
    notes = [r.getMessage() for r in caplog.records if "matplotlib is not installed" in r.getMessage()]
    assert len(notes) == 1 and "hybrid-attention[plots]" in notes[0]
    assert json.loads((out / "report.json").read_text())["plots"] == []
    assert not list(out.glob("*.png")) and (out / "summary.md").is_file()
