"""Tasks: the paper's character-level Tiny Shakespeare and bracket matching, run finding (``runs``: evidence
pooled across neighbouring keys) and multi-query associative recall (``mqar``, Zoology's recall task).

Each task module exposes a small data object with ``get_batch(split, batch_size, block_size, generator)`` style
access used by :mod:`hybrid_attention.apps.train`; the modules depend on numpy and torch only.
"""

from __future__ import annotations

from .bracket_variants import BracketVariant, BracketVariantTask, accuracy_by, generate_variant
from .brackets import BracketTask, generate_brackets, match_positions
from .mqar import MQARTask, generate_mqar, mqar_oracle
from .runs import RunsTask, generate_runs
from .shakespeare import CharDataset, load_shakespeare, resolve_data_path

__all__ = [
    "BracketTask",
    "generate_brackets",
    "match_positions",
    "BracketVariant",
    "BracketVariantTask",
    "generate_variant",
    "accuracy_by",
    "RunsTask",
    "generate_runs",
    "MQARTask",
    "generate_mqar",
    "mqar_oracle",
    "CharDataset",
    "load_shakespeare",
    "resolve_data_path",
]
