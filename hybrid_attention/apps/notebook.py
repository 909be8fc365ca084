"""What every notebook in ``notebooks/`` shares: the quick flag, where the repository's results are, and showing a plot.

The notebooks run with their own folder as the working directory (Jupyter and ``notebooks/build.py`` alike), so the
repository root is its parent unless ``HYBRID_ATTENTION_ROOT`` says otherwise.

Example (in a notebook):
    >>> from hybrid_attention.apps.notebook import QUICK, ROOT, show   # doctest: +SKIP
    >>> show(fig)                                                       # doctest: +SKIP
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

__all__ = ["QUICK", "ROOT", "show"]

#: small parameters (``HYBRID_ATTENTION_QUICK=1``: the test suite's configuration)
QUICK = os.environ.get("HYBRID_ATTENTION_QUICK") == "1"
#: the repository root, where ``results/`` lives
ROOT = Path(os.environ.get("HYBRID_ATTENTION_ROOT", Path.cwd().parent))


def show(fig: Any, *, dpi: int = 100) -> None:
    """Display a matplotlib figure as a PNG output and close it (works under the Agg backend and nbclient)."""
    import matplotlib.pyplot as plt
    from IPython.display import Image, display

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    display(Image(buf.getvalue()))
