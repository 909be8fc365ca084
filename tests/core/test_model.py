"""The decoder model: shapes, config validation, causality, couplings after training, overfitting one batch."""

from __future__ import annotations

import pytest
import torch

from hybrid_attention import exact
from hybrid_attention.attention import MODES
from hybrid_attention.model import Transformer, TransformerConfig
from hybrid_attention.tasks.brackets import accuracy, generate_brackets

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ffn", [True, False])
def test_shapes_and_loss(mode, ffn):
    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=11, block_size=6, n_layer=2, n_head=2, n_embd=8, ffn=ffn, attention=mode)
    model = Transformer(cfg)
    idx = torch.randint(0, 11, (3, 5))
    logits, loss = model(idx, idx)
    assert logits.shape == (3, 5, 11) and loss.ndim == 0 and torch.isfinite(loss)
    assert abs(loss.item() - torch.log(torch.tensor(11.0))) < 0.3  # near-uniform at initialisation
    assert model(idx)[1] is None
    assert (model.blocks[0].mlp is not None) == ffn


@pytest.mark.parametrize("mode", MODES)
def test_model_is_causal(mode):
    torch.manual_seed(1)
    model = Transformer(TransformerConfig(vocab_size=7, block_size=8, n_layer=2, n_embd=8, attention=mode))
    for layer in model.attention_layers:  # non-zero couplings so that J takes part
        if layer.J_raw is not None:
            layer.J_raw.data.normal_(std=0.5)
    idx = torch.randint(0, 7, (2, 8))
    idx2 = idx.clone()
    idx2[:, 5] = (idx[:, 5] + 1) % 7
    a, b = model(idx)[0], model(idx2)[0]
    torch.testing.assert_close(a[:, :5], b[:, :5], rtol=0, atol=1e-6)
    assert (a[:, 5:] - b[:, 5:]).abs().max() > 1e-6


def test_position_head_masks_the_future():
    model = Transformer(TransformerConfig(vocab_size=2, block_size=6, n_embd=8, head="position"))
    logits, _ = model(torch.zeros(1, 6, dtype=torch.long))
    assert logits.shape == (1, 6, 6)
    assert torch.isinf(logits[0].triu(1)[torch.ones(6, 6).triu(1).bool()]).all()
    assert torch.isfinite(logits[0][torch.ones(6, 6).tril().bool()]).all()


@pytest.mark.parametrize(
    "kw, exc, text",
    [
        (dict(attention="sofmax"), ValueError, "unknown attention mode"),
        (dict(head="classify"), ValueError, "unknown head"),
        (dict(n_embd=10, n_head=3), ValueError, "divisible"),
        (dict(block_size=exact.MAX_SPINS + 1, attention="hj"), ValueError, "exact-enumeration limit"),
        (dict(block_size=exact.MAX_SPINS + 1, attention="j"), ValueError, "exact-enumeration limit"),
        (dict(block_size=0), ValueError, ">= 1"),
        (dict(block_size=4.0), TypeError, "must be an int"),
        (dict(dropout=1.0), ValueError, "dropout"),
        (dict(beta=-1.0), ValueError, "beta"),
    ],
)
def test_config_validation(kw, exc, text):
    base = dict(vocab_size=5, block_size=8, n_embd=8)
    base.update(kw)
    with pytest.raises(exc, match=text):
        TransformerConfig(**base)


def test_large_block_size_fine_without_enumeration():
    cfg = TransformerConfig(vocab_size=5, block_size=exact.MAX_SPINS + 8, n_embd=8, attention="softmax")
    assert Transformer(cfg)(torch.zeros(1, 30, dtype=torch.long))[0].shape == (1, 30, 5)
    TransformerConfig(
        vocab_size=5, block_size=exact.MAX_SPINS + 8, n_embd=8, attention="hj", exact=False
    )  # a sampler would do it


@pytest.mark.parametrize("mode", ["hj", "softmax"])
def test_overfits_one_batch(mode):
    """Within 400 steps the loss falls below 5 % of its start with every bracket right, at some step.

    A property of training, not of one optimiser trajectory: float kernels differ between CPUs (AdamW at this
    learning rate has transient spikes whose timing moves with the kernel), so no fixed step is checked.
    """
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(vocab_size=2, block_size=8, n_embd=32, head="position", attention=mode))
    x, y = generate_brackets(8, 8, seed=3)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    first, reached = None, None
    for step in range(400):
        logits, loss = model(x, y)
        first = loss.item() if first is None else first
        if loss.item() < 0.05 * first and accuracy(logits, y)[0] == 1.0:
            reached = step
            break
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert reached is not None, (
        f"loss {loss.item():.4f} never fell below 5 % of {first:.4f} with accuracy 1 in 400 steps"
    )


def test_couplings_learned_and_symmetric():
    torch.manual_seed(0)
    model = Transformer(
        TransformerConfig(vocab_size=5, block_size=6, n_embd=8, n_head=2, attention="hj", learn_beta=True)
    )
    opt = torch.optim.AdamW(model.parameters(), lr=3e-2, weight_decay=0.1)
    idx = torch.randint(0, 5, (8, 6))
    for _ in range(5):
        _, loss = model(idx[:, :-1], idx[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
    (J,) = model.couplings()
    assert J.shape == (2, 6, 6) and J.abs().max() > 0
    assert torch.equal(J, J.transpose(1, 2)) and torch.equal(torch.diagonal(J, dim1=1, dim2=2), torch.zeros(2, 6))


# ---------------------------------------------------------------------- controls, J = 0 evaluation, J-only field
from hybrid_attention.attention import (  # noqa: E402
    ALL_MODES,
    BoltzmannAttention,
    attention_weights,
    symmetric_couplings,
)


def _n_params(model):
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("T", [4, 9])
def test_bias_control_has_the_parameter_count_of_J(T):
    cfg = dict(vocab_size=5, block_size=T, n_layer=2, n_head=2, n_embd=8)
    counts = {m: _n_params(Transformer(TransformerConfig(**cfg, attention=m))) for m in ALL_MODES}
    assert counts["bias"] == counts["hj"] == counts["j"]
    assert counts["bias"] - counts["softmax"] == 2 * 2 * T * T  # one (H, T, T) parameter per layer, like J
    att = BoltzmannAttention(8, 2, T, mode="bias")
    att.J_raw.data.normal_()
    B = att.J  # symmetric, zero diagonal, T (T - 1) / 2 free entries per head, exactly like J
    assert torch.equal(B, B.transpose(1, 2)) and bool((torch.diagonal(B, dim1=1, dim2=2) == 0).all())


def test_bias_control_weights_are_softmax_of_scores_plus_bias():
    g = torch.Generator().manual_seed(0)
    h = torch.randn(2, 3, 6, 6, generator=g, dtype=torch.float64)
    B = symmetric_couplings(torch.randn(3, 6, 6, generator=g, dtype=torch.float64))
    a = attention_weights(h, B, mode="bias")
    for i in range(6):  # row by row, from the definition
        z = torch.exp(h[:, :, i, : i + 1] + B[None, :, i, : i + 1])
        assert torch.allclose(a[:, :, i, : i + 1], z / z.sum(-1, keepdim=True), atol=1e-12)
        assert bool((a[:, :, i, i + 1 :] == 0).all())
    assert torch.equal(attention_weights(h, 0 * B, mode="bias"), attention_weights(h, mode="softmax"))
    with pytest.raises(ValueError, match="needs couplings"):
        attention_weights(h, None, mode="bias")


def test_couplings_zeroed_is_h_mode_and_restores_J():
    torch.manual_seed(3)
    hj = Transformer(TransformerConfig(vocab_size=6, block_size=6, n_layer=2, n_head=2, n_embd=8, attention="hj"))
    for layer in hj.attention_layers:
        layer.J_raw.data.normal_(std=1.0)
        layer.c_attn.weight.data.normal_(std=0.5)  # scores away from 0, where J matters (at h = 0 it cannot)
    h = Transformer(TransformerConfig(vocab_size=6, block_size=6, n_layer=2, n_head=2, n_embd=8, attention="h"))
    h.load_state_dict({k: v for k, v in hj.state_dict().items() if "J_raw" not in k})
    idx = torch.randint(0, 6, (4, 6))
    before = [J.clone() for J in hj.couplings()]
    with_J = hj(idx)[0], hj.attention_maps(idx)[0]
    with hj.couplings_zeroed():
        assert all(bool((J == 0).all()) for J in hj.couplings())
        zeroed = hj(idx)[0], hj.attention_maps(idx)[0]
    ref = h(idx)[0], h.attention_maps(idx)[0]
    assert torch.allclose(zeroed[0], ref[0], atol=1e-6) and torch.allclose(zeroed[1], ref[1], atol=1e-6)
    assert float((zeroed[1] - with_J[1]).detach().abs().max()) > 1e-2  # J = 0 removes an effect that was there
    assert all(torch.equal(a, b) for a, b in zip(before, hj.couplings()))
    with pytest.raises(RuntimeError), hj.couplings_zeroed():
        raise RuntimeError("restored on errors too")
    assert all(torch.equal(a, b) for a, b in zip(before, hj.couplings()))
    with pytest.raises(ValueError, match="couplings"), h.couplings_zeroed():
        pass


def test_j_only_is_uniform_and_J_gets_no_gradient_without_a_field():
    g = torch.Generator().manual_seed(1)
    h = torch.randn(2, 1, 5, 5, generator=g, dtype=torch.float64)
    J = symmetric_couplings(torch.randn(1, 5, 5, generator=g, dtype=torch.float64)).requires_grad_(True)
    v = torch.randn(2, 1, 5, 3, generator=g, dtype=torch.float64)
    a = attention_weights(h, J, mode="j")
    assert torch.allclose(a, attention_weights(h, 0 * J.detach(), mode="j"))
    assert not a.requires_grad  # the weights do not depend on J at all: its gradient is exactly 0
    assert torch.allclose(a[0], a[1]) and v.shape[-1] == 3


@pytest.mark.parametrize("eps", [0.3, -0.8])
def test_j_field_breaks_the_symmetry_and_makes_J_learnable(eps):
    g = torch.Generator().manual_seed(2)
    h = torch.randn(2, 1, 5, 5, generator=g, dtype=torch.float64)
    raw = torch.randn(1, 5, 5, generator=g, dtype=torch.float64).requires_grad_(True)
    J = symmetric_couplings(raw)
    a = attention_weights(h, J, mode="j", j_field=eps)
    # oracle: hj attention with every score replaced by the constant field (exact enumeration path)
    ref = attention_weights(torch.full_like(h, eps), J, mode="hj")
    assert torch.allclose(a, ref, atol=1e-12)
    assert torch.allclose(a[0], a[1])  # still independent of the input
    zero = attention_weights(h, 0 * J.detach(), mode="j", j_field=eps)
    vis = torch.ones(5, 5, dtype=torch.bool).tril()
    assert torch.allclose(zero, (vis / vis.sum(-1, keepdim=True)).expand_as(zero).to(zero.dtype))  # J = 0: uniform
    v = torch.randn(2, 1, 5, 3, generator=g, dtype=torch.float64)
    (a @ v).pow(2).sum().backward()
    assert float(raw.grad.abs().max()) > 1e-6  # J learns
    with pytest.raises(ValueError, match="mode 'j' only"):
        attention_weights(h, J.detach(), mode="hj", j_field=eps)
    with pytest.raises(ValueError, match="j_field"):
        TransformerConfig(vocab_size=3, block_size=4, attention="h", j_field=0.5)


def test_attention_pointer_head_is_the_last_layers_attention():
    torch.manual_seed(4)
    cfg = TransformerConfig(vocab_size=2, block_size=8, n_layer=2, n_head=2, n_embd=8, attention="hj", head="attention")
    model = Transformer(cfg)
    assert model.head is None
    x, y = generate_brackets(5, 8, seed=0)
    logits, loss = model(x, y)
    maps = model.attention_maps(x)
    assert len(maps) == 2 and maps[0].shape == (5, 2, 8, 8)
    a = maps[-1].mean(1)
    assert torch.allclose(torch.softmax(logits, -1), a, atol=1e-6)
    assert bool(torch.isinf(logits[:, 0, 1:]).all()) and torch.isfinite(loss)
    loss.backward()
    assert model.blocks[-1].attn.c_attn.weight.grad is not None


@pytest.mark.parametrize("mode", ["hj", "h", "j"])
def test_attention_problems_give_the_weights_each_layer_applies(mode):
    """Every layer's (h, J, mask, beta) reproduce its attention weights through the exact engine, query by query."""
    from hybrid_attention.attention import attention_weights

    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=7, block_size=6, n_layer=2, n_head=2, n_embd=16, attention=mode, dropout=0.1)
    model = Transformer(cfg).eval()
    with torch.no_grad():
        for a in model.attention_layers:
            if a.J_raw is not None:
                a.J_raw.normal_(0, 0.7)
    idx = torch.randint(0, 7, (3, 6))
    problems = model.attention_problems(idx)
    maps = model.attention_maps(idx)
    assert len(problems) == 2
    for p, a in zip(problems, maps):
        assert p.h.shape == (3, 2, 6, 6) and p.J.shape == (2, 6, 6) and p.beta.shape == (2,)
        assert torch.equal(p.mask, torch.ones(6, 6, dtype=torch.bool).tril())
        w = attention_weights(p.h, p.J, mode="hj", beta=p.beta)
        torch.testing.assert_close(w, a, atol=1e-5, rtol=0)
        prob = p.ising(1, 3)
        m = exact.marginals(prob)
        alpha = (1 + m) / 2
        torch.testing.assert_close((alpha / alpha.sum(-1, keepdim=True)).float(), a[:, 1, 3, :4], atol=1e-5, rtol=0)
    assert [q.h.shape for q in model.attention_problems(idx, layers=[1])] == [(3, 2, 6, 6)]


def test_attention_problems_refuse_layers_without_ising_problems():
    model = Transformer(TransformerConfig(vocab_size=7, block_size=6, n_embd=16, attention="softmax"))
    with pytest.raises(ValueError, match="solves no Ising problems"):
        model.attention_problems(torch.zeros(1, 6, dtype=torch.long))
    with pytest.raises(ValueError, match="layers must be in"):
        model.attention_problems(torch.zeros(1, 6, dtype=torch.long), layers=[3])
