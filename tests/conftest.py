"""Shared pytest set-up for every suite.

Only one thing lives here: the repository root goes on ``sys.path`` so test helpers
import as ``tests.support...`` / ``tests.core...`` whether pytest is started as
``pytest`` or ``python -m pytest`` and whatever the import mode. Suite-specific
fixtures belong in the suite's own conftest (e.g. tests/kubernetes/conftest.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)
