"""What the backends share (hybrid_attention/backends/base.py): the progress bar of long sampler calls."""

from __future__ import annotations

from tqdm.auto import tqdm

from hybrid_attention.backends.base import progress


def test_progress_wraps_long_work_only():
    r = range(3)
    assert progress(r, 3, "aer") is r  # too short for a bar
    assert progress(r, 3, "aer", show=False) is r
    bar = progress(range(5), 5, "aer")  # a transient bar (hidden when the output is not a terminal)
    assert isinstance(bar, tqdm) and list(bar) == [0, 1, 2, 3, 4]
    assert list(progress(range(20), 20, "dimod", show=False)) == list(range(20))
