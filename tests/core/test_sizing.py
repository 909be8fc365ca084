"""Parameter counts and width matching (hybrid_attention.sizing)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from hybrid_attention import Transformer, TransformerConfig
from hybrid_attention.attention import ALL_MODES, COUPLED_MODES
from hybrid_attention.sizing import count_parameters, matched_width


@pytest.mark.parametrize("mode", ALL_MODES)
@pytest.mark.parametrize("head", ["lm", "position", "attention"])
def test_counts_are_the_model_parameters(mode, head):
    cfg = TransformerConfig(vocab_size=7, block_size=6, n_layer=2, n_head=2, n_embd=8, attention=mode, head=head)
    stored = sum(p.numel() for p in Transformer(cfg).parameters())
    assert count_parameters(cfg, free=False) == stored
    # J (and the bias control's B) is symmetric with a zero diagonal: T (T - 1) / 2 free entries per head
    spare = 2 * 2 * 6 * 7 // 2 if mode in COUPLED_MODES else 0
    assert count_parameters(cfg) == stored - spare


def test_counting_leaves_the_random_state_alone():
    torch.manual_seed(0)
    a = torch.rand(3)
    torch.manual_seed(0)
    count_parameters(TransformerConfig(vocab_size=7, block_size=6))
    assert torch.equal(torch.rand(3), a)


@pytest.mark.parametrize(
    "ref",
    [
        dict(vocab_size=65, block_size=16, n_embd=64),  # Tiny Shakespeare-like
        dict(vocab_size=16, block_size=20, n_embd=64, head="attention"),  # the runs task
        dict(vocab_size=5, block_size=12, n_embd=32, ffn=False, head="position"),  # brackets without the MLP
    ],
)
def test_two_layer_softmax_matches_one_layer_hj_within_a_few_percent(ref):
    hj = TransformerConfig(**ref, attention="hj")
    m = matched_width(hj)
    assert m.config.n_layer == 2 and m.config.attention == "softmax" and m.config.n_embd == m.n_embd
    assert m.n_embd % hj.n_head == 0 and m.n_embd < hj.n_embd  # two layers of softmax: narrower
    assert m.reference_params == count_parameters(hj) and m.params == count_parameters(m.config)
    assert abs(m.relative_difference) < 0.03, (m.n_embd, m.params, m.reference_params)
    # no other width is closer
    for w in (m.n_embd - hj.n_head, m.n_embd + hj.n_head):
        other = count_parameters(dataclasses.replace(m.config, n_embd=w))
        assert abs(other - m.reference_params) >= abs(m.params - m.reference_params)


def test_several_heads_match_on_multiples_of_n_head():
    """Widths step by n_head: the match is the closest multiple (here 36 of 4 heads, 4.3 % above the reference; a
    width step of 4 moves the count by about 8 %)."""
    hj = TransformerConfig(vocab_size=64, block_size=16, n_embd=48, n_head=4, attention="hj")
    m = matched_width(hj)
    assert (m.n_embd, m.params, m.reference_params) == (36, 37296, 35760)
    below = count_parameters(dataclasses.replace(m.config, n_embd=32))
    assert abs(below - m.reference_params) > abs(m.params - m.reference_params)


def test_matched_width_from_a_training_configuration_beyond_exact_enumeration():
    """What a study plan does: the one-layer hj arm's settings (T = 64, mean field), the two-layer softmax arm's width."""
    from hybrid_attention.apps.train import TrainConfig

    cfg = TrainConfig(task="runs", pointer="attention", attention="hj", block_size=64, sampler="meanfield")
    m = matched_width(cfg.model_config())
    assert m.config.block_size == 64 and m.config.head == "attention" and abs(m.relative_difference) < 0.03


def test_matched_width_errors():
    hj = TransformerConfig(vocab_size=5, block_size=4, n_embd=16, attention="hj")
    with pytest.raises(ValueError, match="chooses n_embd"):
        matched_width(hj, n_embd=8)
    with pytest.raises(ValueError, match="no width in 1 .. 0"):
        matched_width(hj, max_embd=0)
    with pytest.raises(TypeError, match="must be a TransformerConfig"):
        matched_width({"n_embd": 8})
