"""Flat scratch and message buffers of the banded block sweeps, kept from one call to the next.

Used by :mod:`hybrid_attention.banded_block`. A training step of a causal layer at ``T = 128``, ``W = 8`` and batch 64
fills two message buffers of about 70 MB each: above the C allocator's mapping threshold (32 MB at most in glibc), so
a fresh one is mapped anew at every call and every one of its pages faults on first touch, which cost about a fifth
of the step (measured: 47 000 minor faults and 0.14 s of system time per 0.9 s step). Here each buffer belongs to an
*owner* (the autograd context whose saved tensors are views of it, or a token that lives as long as one backward
pass) and is handed out again only once that owner is gone: after the step's graph is freed, never while a retained
graph (``retain_graph=True``) or a live output could still read it. Requests under no-grad free theirs at once.

At most :data:`KEEP` buffers per role are kept (one per layer of a small model), each reused for requests between
half its size and its size; so the memory held between steps is at most that of the largest recent step's buffers.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

import torch

__all__ = ["take", "KEEP"]

#: buffers kept per role
KEEP = 4
_KEPT: dict[str, list[tuple[Any, torch.Tensor]]] = {}
_LOCK = threading.Lock()


def take(role: str, numel: int, like: torch.Tensor, owner: Any) -> torch.Tensor:
    """A flat, uninitialised buffer of ``numel`` elements of ``like``'s dtype and device for ``owner`` (an object that
    supports weak references: it holds the buffer until it is garbage). Reuses a kept buffer of that ``role`` whose
    owner is gone, else allocates one and keeps it (replacing the oldest free one beyond :data:`KEEP`)."""
    with _LOCK:
        kept = _KEPT.setdefault(role, [])
        for i, (ref, buf) in enumerate(kept):
            if (
                ref() is None
                and buf.dtype == like.dtype
                and buf.device == like.device
                and numel <= buf.numel() <= 2 * numel
            ):
                kept[i] = (weakref.ref(owner), buf)
                return buf[:numel]
        buf = like.new_empty(numel)
        free = [i for i, (ref, _) in enumerate(kept) if ref() is None]
        if len(kept) >= KEEP and free:
            del kept[free[0]]
        if len(kept) < KEEP:
            kept.append((weakref.ref(owner), buf))
        return buf


class Token:
    """An owner for buffers used only within one call (it dies when the call's reference to it goes)."""
