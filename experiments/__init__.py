"""The studies behind ``results/``: one importable package per study, over the library and never imported by it.

Run a script from the repository root as a module, ``python -m experiments.<study>.<script> [options]`` (each
script's docstring says what it regenerates); a study's plan of training runs goes through the one plan runner,
``python -m experiments.run_plan <study> --plan NAME`` (claims, long_context).

The Tiny Shakespeare corpus: :func:`data_path` (``--data``, else ``$HYBRID_ATTENTION_DATA``, else the repository
default :data:`DEFAULT_DATA`, ``data/tinyshakespeare.txt``, which git ignores).
"""

from __future__ import annotations

import os
from pathlib import Path

#: the repository root
REPO = Path(__file__).resolve().parents[1]
#: the environment variable that locates the corpus (as for the library: ``hybrid_attention.tasks.shakespeare``)
DATA_ENV = "HYBRID_ATTENTION_DATA"
#: where the studies look for the corpus when neither ``--data`` nor ``$HYBRID_ATTENTION_DATA`` says
DEFAULT_DATA = REPO / "data" / "tinyshakespeare.txt"


def data_path(explicit: str | os.PathLike | None = None) -> Path:
    """The corpus: ``explicit`` (a ``--data`` option), else ``$HYBRID_ATTENTION_DATA``, else :data:`DEFAULT_DATA`."""
    return Path(explicit or os.environ.get(DATA_ENV) or DEFAULT_DATA)
