"""``python -m hybrid_attention.apps``: the ``hybrid-attention`` command."""

import sys

from .cli import main

sys.exit(main())
