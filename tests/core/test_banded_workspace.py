"""The banded block sweeps' buffers kept between calls (hybrid_attention.banded_workspace): handed out again only
once their owner is gone, so a retained graph, a second layer or an interleaved call never reads another call's
messages."""

from __future__ import annotations

import gc

import pytest
import torch

from hybrid_attention import banded, banded_block, banded_workspace

F64 = torch.float64


@pytest.fixture(params=["dense", "split"])
def split(request, monkeypatch):
    """The dense block engine, or the one factorised over half-windows at every band from 2."""
    monkeypatch.setattr(banded_block, "SPLIT_MIN_W", 99 if request.param == "dense" else 2)
    return request.param


def problem(seed: int, T: int = 13, W: int = 4, B: int = 3):
    gen = torch.Generator().manual_seed(seed)
    h = torch.randn(B, 1, T, T, generator=gen, dtype=F64).requires_grad_(True)
    c = (torch.randn(1, W, T, generator=gen, dtype=F64) * 0.5).requires_grad_(True)
    up = torch.randn(B, 1, T, T, generator=gen, dtype=F64).tril()
    return h, c, up


def loss(h, c, up):
    return (torch.softmax(banded.layer_log_alpha(h, c, torch.ones(1, dtype=F64)), -1) * up).sum()


def grads(h, c, up):
    return torch.autograd.grad(loss(h, c, up), (h, c))


def test_a_retained_graph_keeps_its_buffers(split):
    """Backward twice through a retained graph, with other calls of other sizes and values in between (which would
    reuse a freed buffer): the same gradients both times, and those of a fresh graph. Exact equality: the same
    operations on the same values in one process (determinism), unless a buffer was overwritten."""
    h, c, up = problem(0)
    ref = grads(h, c, up)
    L = loss(h, c, up)
    first = torch.autograd.grad(L, (h, c), retain_graph=True)
    for seed in (1, 2):  # the same sizes and other sizes, with and without gradients
        grads(*problem(seed))
        grads(*problem(seed, T=17, B=5))
        with torch.no_grad():
            loss(*problem(seed))
    second = torch.autograd.grad(L, (h, c))
    for a, b, r in zip(first, second, ref):
        assert torch.equal(a, b) and torch.equal(a, r)


def test_two_live_graphs_do_not_share_buffers(split):
    """Two forward passes before either backward (two layers, or two micro-batches): each gets its own buffers."""
    p1, p2 = problem(3), problem(4)
    r1, r2 = grads(*p1), grads(*p2)
    L1, L2 = loss(*p1), loss(*p2)
    g2 = torch.autograd.grad(L2, (p2[0], p2[1]))
    g1 = torch.autograd.grad(L1, (p1[0], p1[1]))
    for a, b in zip((*g1, *g2), (*r1, *r2)):
        assert torch.equal(a, b)


def test_buffers_come_back_after_the_graph_is_freed(split):
    """After a step's graph is gone the next call of the same size reuses the kept buffers (no new allocation),
    while at most ``KEEP`` buffers per role are kept."""
    grads(*problem(5))
    gc.collect()
    before = {role: [b.data_ptr() for _, b in kept] for role, kept in banded_workspace._KEPT.items()}
    grads(*problem(6))
    after = {role: [b.data_ptr() for _, b in kept] for role, kept in banded_workspace._KEPT.items()}
    assert before and before == after
    assert all(len(kept) <= banded_workspace.KEEP for kept in banded_workspace._KEPT.values())
