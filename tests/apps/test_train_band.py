"""``hybrid-attention train --band W``: a banded run past the enumeration limit, what it records, and its refusals."""

from __future__ import annotations

import contextlib
import json

import pytest
import torch

from hybrid_attention import exact
from hybrid_attention.apps import cli
from hybrid_attention.apps.runs import load_run

TINY = ["--n-embd", "8", "--batch-size", "4", "--no-progress", "--warmup", "2", "--eval-size", "16"]


@pytest.fixture(autouse=True)
def one_thread():
    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)  # train() sets the thread count from --threads


def run(out, *extra):
    base = ["train", "--task", "brackets", "--attention", "hj", "--steps", "2", "--eval-interval", "2"]
    return cli.main([*base, "--out", str(out), *TINY, *extra])


@pytest.mark.parametrize("shape", ["free", "toeplitz"])
def test_banded_run_past_the_enumeration_limit(tmp_path, shape):
    T = exact.MAX_SPINS + 8  # a full J would be refused here
    out = tmp_path / shape
    assert run(out, "--block-size", str(T), "--band", "3", "--band-shape", shape) == 0
    cfg = json.loads((out / "config.json").read_text())
    assert (cfg["run"]["band"], cfg["run"]["band_shape"]) == (3, shape)
    assert (cfg["model"]["band"], cfg["model"]["band_shape"]) == (3, shape)
    J = torch.tensor(json.loads((out / "couplings.json").read_text())["J"][0])
    far = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).abs() > 3
    assert J.shape == (1, T, T) and torch.equal(J, J.transpose(1, 2)) and (J[:, far] == 0).all()
    model = load_run(out).model
    assert model.config.band == 3 and model.config.band_shape == shape


def test_resume_with_another_band_is_refused(tmp_path, capsys):
    out = tmp_path / "r"
    assert run(out, "--block-size", "8", "--band", "2") == 0
    capsys.readouterr()
    rc = cli.main(["train", "--out", str(out), "--resume", "--band", "3", "--steps", "4", "--no-progress"])
    assert rc == 2 and "band: checkpoint 2, now 3" in capsys.readouterr().err


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--block-size", "8", "--band", "-1"], "expected an integer >= 0, got '-1'"),
        (["--block-size", "8", "--band", "8"], "band = 8 must be below block_size = 8"),
        (["--block-size", "8", "--band-shape", "diagonal"], "invalid choice: 'diagonal'"),
    ],
)
def test_bad_band_flags_fail_before_training(tmp_path, capsys, extra, message):
    out = tmp_path / "never"
    parser_refusal = "invalid choice" in message or "expected an integer" in message  # argparse exits 2 itself
    with pytest.raises(SystemExit) if parser_refusal else contextlib.nullcontext():
        rc = run(out, *extra)
        assert rc == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_evaluation_of_a_banded_model_splits_its_windows_to_fit_the_memory_budget(monkeypatch):
    """A banded model whose validation set in one pass exceeds the memory budget is evaluated in smaller chunks
    (the engine would refuse the whole pass), and the metrics equal the one-pass metrics under a large budget."""
    import torch

    from hybrid_attention import banded, checks
    from hybrid_attention.apps.train.data import evaluate, fitting_chunk
    from hybrid_attention.model import Transformer, TransformerConfig

    torch.manual_seed(0)
    model = Transformer(TransformerConfig(vocab_size=11, block_size=12, n_embd=8, n_head=2, attention="hj", band=3))
    with torch.no_grad():
        for m in model.modules():
            if getattr(m, "J_raw", None) is not None:
                m.J_raw.normal_(0.0, 0.5)
    x = torch.randint(0, 11, (40, 12))
    y = torch.randint(0, 11, (40, 12))
    per_window = banded.estimate_bytes(2, 12, 3, 12, 4)
    monkeypatch.setattr(checks, "MEMORY_BUDGET", int(per_window * 40 * 10))
    whole = evaluate(model, x, y, "shakespeare")
    monkeypatch.setattr(checks, "MEMORY_BUDGET", int(per_window * 7.5))  # 7 windows per pass fit, 8 do not
    assert fitting_chunk(model, 12, 512) == 7
    with pytest.raises(ValueError, match="memory budget"):  # one pass of all 40 windows is refused
        model(x)
    split = evaluate(model, x, y, "shakespeare")
    # the same sums in another grouping: float32 rounding of a sum over 40 x 12 losses, relative ~ 1e-6
    assert split["val_loss"] == pytest.approx(whole["val_loss"], rel=1e-5)


def test_eval_exact_reaches_any_length_with_a_band_and_stays_refused_for_a_full_j():
    """--eval-exact: exact evaluation of a model trained with a sampler; a banded J is exact at any T (the transfer
    matrix), a full J only up to the enumeration limit."""
    from hybrid_attention.apps.train import TrainConfig
    from hybrid_attention.exact import MAX_SPINS

    T = MAX_SPINS + 8
    TrainConfig(attention="hj", block_size=T, band=4, sampler="meanfield", eval_exact=True, out="r").validate()
    with pytest.raises(ValueError, match="--eval-exact needs block_size"):
        TrainConfig(attention="hj", block_size=T, sampler="meanfield", eval_exact=True, out="r").validate()
