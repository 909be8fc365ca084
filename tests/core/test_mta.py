"""The ``mta`` control (key-query convolution, hybrid_attention.mta): the definition by brute force, identity
initialisation equals softmax, causality, gradients to the kernel, settings."""

from __future__ import annotations

import pytest
import torch

from hybrid_attention import Transformer, TransformerConfig
from hybrid_attention.attention import ALL_MODES, COUPLED_MODES, BoltzmannAttention, attention_weights
from hybrid_attention.backends.registry import get_sampler
from hybrid_attention.mta import (
    DEFAULT_KERNEL,
    check_kernel_size,
    identity_kernel,
    key_query_convolution,
    mta_weights,
)
from hybrid_attention.sampling import Sampling


def _brute(h, kernel, causal):
    """Weights from the definition: l_ij = sum_{a, b} theta[cq-1-a, (ck-1)/2+b] h~_{i-a, j+b}, masked before/after."""
    B, H, Tq, T = h.shape
    _, cq, ck = kernel.shape
    c = (ck - 1) // 2
    vis = lambda i, j: 0 <= i < Tq and 0 <= j < T and (not causal or j <= i)  # noqa: E731
    out = torch.full_like(h, float("-inf"))
    for i in range(Tq):
        for j in range(T):
            if not vis(i, j):
                continue
            acc = torch.zeros(B, H, dtype=h.dtype)
            for a in range(cq):
                for b in range(-c, c + 1):
                    if vis(i - a, j + b):
                        acc = acc + kernel[:, cq - 1 - a, c + b] * h[:, :, i - a, j + b]
            out[:, :, i, j] = acc
    return torch.softmax(out, dim=-1)


@pytest.mark.parametrize(("cq", "ck", "causal"), [(6, 11, True), (2, 3, True), (1, 1, True), (3, 5, False)])
def test_weights_match_the_definition(cq, ck, causal):
    g = torch.Generator().manual_seed(cq * 10 + ck)
    h = torch.randn(2, 3, 7, 7, generator=g, dtype=torch.float64)
    kernel = torch.randn(3, cq, ck, generator=g, dtype=torch.float64)
    a = mta_weights(h, kernel, causal=causal)
    assert torch.allclose(a, _brute(h, kernel, causal), atol=1e-12, rtol=0)
    assert torch.allclose(a.sum(-1), torch.ones(2, 3, 7, dtype=torch.float64), atol=1e-12)
    if causal:
        assert bool((a.triu(1) == 0).all())


@pytest.mark.parametrize("size", [DEFAULT_KERNEL, (2, 9), (1, 1)])
def test_identity_kernel_is_softmax(size):
    g = torch.Generator().manual_seed(0)
    h = torch.randn(3, 2, 9, 9, generator=g, dtype=torch.float64)
    k = identity_kernel(2, *size).double()
    assert torch.allclose(attention_weights(h, mode="mta", kernel=k), attention_weights(h, mode="softmax"), atol=1e-14)
    # the layer, as built, computes what a softmax layer with the same projections computes
    torch.manual_seed(1)
    mta = BoltzmannAttention(16, 2, 9, mode="mta", kernel_size=size)
    soft = BoltzmannAttention(16, 2, 9, mode="softmax")
    soft.load_state_dict({k: v for k, v in mta.state_dict().items() if k != "mta_kernel"})
    x = torch.randn(4, 9, 16)
    assert torch.allclose(mta(x), soft(x), atol=1e-6)


def test_model_at_init_equals_the_softmax_model():
    cfg = dict(vocab_size=11, block_size=12, n_layer=2, n_head=2, n_embd=16)
    torch.manual_seed(0)
    soft = Transformer(TransformerConfig(**cfg, attention="softmax"))
    torch.manual_seed(0)
    mta = Transformer(TransformerConfig(**cfg, attention="mta"))
    idx = torch.randint(0, 11, (3, 12))
    assert torch.allclose(soft(idx)[0], mta(idx)[0], atol=1e-5)
    n_soft = sum(p.numel() for p in soft.parameters())
    n_mta = sum(p.numel() for p in mta.parameters())
    assert n_mta - n_soft == 2 * 2 * 6 * 11  # one (n_head, c_q, c_k) kernel per layer


def test_outputs_ignore_future_tokens():
    """With a random (non-identity) kernel, position i's output does not depend on tokens after i: by changing the
    future, and by the Jacobian of the layer (zero above the diagonal)."""
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(vocab_size=9, block_size=10, n_layer=2, n_embd=16, attention="mta",
                                          mta_query_kernel=3, mta_key_kernel=7))  # fmt: skip
    with torch.no_grad():
        for a in model.attention_layers:
            a.mta_kernel.normal_()
    idx = torch.randint(0, 9, (4, 10))
    base = model(idx)[0]
    for t in range(9):
        other = idx.clone()
        other[:, t + 1 :] = torch.randint(0, 9, (4, 9 - t))
        assert torch.equal(model(other)[0][:, : t + 1], base[:, : t + 1])
    att = BoltzmannAttention(8, 1, 6, mode="mta", kernel_size=(4, 9)).double()
    with torch.no_grad():
        att.mta_kernel.normal_()
    x = torch.randn(1, 6, 8, dtype=torch.float64)
    jac = torch.autograd.functional.jacobian(lambda z: att(z)[0].sum(-1), x)[:, 0].abs().sum(-1)  # (out i, in j)
    assert bool((jac.triu(1) == 0).all()) and bool((jac[torch.ones(6, 6).tril().bool()] > 0).all())


def test_gradient_flows_to_the_kernel():
    g = torch.Generator().manual_seed(0)
    h = torch.randn(1, 2, 5, 5, generator=g, dtype=torch.float64, requires_grad=True)
    kernel = torch.randn(2, 2, 3, generator=g, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda hh, kk: mta_weights(hh, kk), (h, kernel))
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(vocab_size=9, block_size=8, n_embd=16, attention="mta"))
    idx = torch.randint(0, 9, (4, 8))
    _, loss = model(idx, idx)
    loss.backward()
    grad = model.attention_layers[0].mta_kernel.grad
    assert grad is not None and grad.shape == (1, 6, 11) and int((grad != 0).sum()) > 10


def test_settings_and_errors():
    assert "mta" in ALL_MODES and "mta" not in COUPLED_MODES
    assert check_kernel_size(6, 11) == (6, 11)
    with pytest.raises(ValueError, match="c_k must be odd"):
        check_kernel_size(6, 10)
    with pytest.raises(ValueError, match="c_q must be >= 1"):
        check_kernel_size(0, 11)
    with pytest.raises(TypeError, match="must be an int"):
        check_kernel_size(6.0, 11)
    with pytest.raises(ValueError, match="c_k must be odd"):
        TransformerConfig(vocab_size=4, block_size=4, attention="mta", mta_key_kernel=4)
    h = torch.randn(1, 2, 4, 4)
    with pytest.raises(ValueError, match="needs a key-query convolution kernel"):
        attention_weights(h, mode="mta")
    with pytest.raises(ValueError, match=r"shape \(H, c_q, c_k\) with H = 2"):
        key_query_convolution(h, torch.zeros(3, 1, 1), torch.ones(4, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="does not use a sampler"):
        attention_weights(h, mode="mta", kernel=identity_kernel(2), sampling=Sampling(get_sampler("exact")))
    model = Transformer(TransformerConfig(vocab_size=4, block_size=4, attention="mta"))
    with pytest.raises(ValueError, match="needs a model with couplings"):
        with model.couplings_zeroed():
            pass


def test_train_config_builds_the_kernel_and_refuses_a_sampler():
    from hybrid_attention.apps.train import TrainConfig

    cfg = TrainConfig(task="brackets", attention="mta", block_size=8, mta_query_kernel=2, mta_key_kernel=9, out="x")
    cfg.validate()
    model = Transformer(cfg.model_config())
    assert model.attention_layers[0].mta_kernel.shape == (1, 2, 9)
    with pytest.raises(ValueError, match="c_k must be odd"):
        TrainConfig(task="brackets", attention="mta", mta_key_kernel=8, out="x").validate()
    with pytest.raises(ValueError, match="not to attention 'mta'"):
        TrainConfig(task="brackets", attention="mta", sampler="meanfield", out="x").validate()


def test_a_training_run_records_the_learned_kernel(tmp_path):
    import json

    from hybrid_attention.apps.train import TrainConfig, train

    out = tmp_path / "m"
    cfg = TrainConfig(task="brackets", attention="mta", block_size=8, max_steps=2, eval_interval=2, n_embd=8,
                      batch_size=4, mta_query_kernel=2, mta_key_kernel=3, progress=False, out=str(out))  # fmt: skip
    assert "j0_val_accuracy" not in train(cfg)  # no couplings to zero
    saved = json.loads((out / "couplings.json").read_text())
    assert saved["J"] == [None] and torch.tensor(saved["mta_kernel"]).shape == (1, 1, 2, 3)
    assert json.loads((out / "config.json").read_text())["model"]["mta_key_kernel"] == 3


def test_boltzmann_attention_passes_the_kernel_to_mode_mta():
    """The functional form with mode mta uses the kernel it is given: at the identity kernel it is softmax attention
    (float32 rounding of the same logits, relative ~1e-6), and without a kernel it is refused."""
    import pytest
    import torch

    from hybrid_attention.attention import boltzmann_attention
    from hybrid_attention.mta import identity_kernel

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 1, 6, 4, generator=g) for _ in range(3))
    got = boltzmann_attention(q, k, v, None, mode="mta", kernel=identity_kernel(1, 6, 11))
    want = boltzmann_attention(q, k, v, None, mode="softmax")
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="kernel"):
        boltzmann_attention(q, k, v, None, mode="mta")
