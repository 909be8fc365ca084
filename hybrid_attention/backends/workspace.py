"""Reusable scratch tensors for the simulators' hot loops.

Fresh multi-MiB tensors cost a page fault per 4 KiB every time they are allocated (glibc returns large blocks to the
system on free), which on a virtual machine costs about as much as the arithmetic done on them: the statevector
engines keep their per-call working buffers here instead, one per name, dtype and thread, grown when too small.
A scratch tensor is valid until the next request of the same name on the same thread: never return one to a caller.
"""

from __future__ import annotations

import math
import threading

import torch

__all__ = ["scratch"]

_POOL = threading.local()
#: scratch tensors above this many bytes are allocated per call instead of kept
_POOL_LIMIT = 64 << 20


def scratch(name: str, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """A reusable uninitialised tensor (per thread, per ``name``; grown when too small): fresh multi-MiB tensors cost a
    page fault per 4 KiB on every call, about as much as the arithmetic on them."""
    numel = math.prod(shape)
    size = numel * torch.empty(0, dtype=dtype).element_size()
    if size > _POOL_LIMIT:
        return torch.empty(shape, dtype=dtype)
    pool = _POOL.__dict__.setdefault("pool", {})
    buf = pool.get((name, dtype))
    if buf is None or buf.numel() < numel:
        pool[(name, dtype)] = buf = torch.empty(numel, dtype=dtype)
    return buf[:numel].view(shape)
