"""JSON written reproducibly: floats rounded to 12 significant digits, keys in insertion order.

A rerun of an analysis on another thread count or BLAS build can change the last bits of a
float64 sum; rounding to 12 significant digits (far below any tolerance gradlab reports) makes a
rerun reproduce the committed file byte for byte. NaN and infinities are written as the strings
``"NaN"``, ``"Infinity"`` and ``"-Infinity"`` so that the file stays standard JSON.

Example:
    >>> dumps({"p": 0.26527895533477663, "n": 3, "gap": float("nan")})
    '{\\n "p": 0.265278955335,\\n "n": 3,\\n "gap": "NaN"\\n}'
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

SIGNIFICANT_DIGITS = 12
"""Significant digits kept of every float."""


def rounded(value: Any, digits: int = SIGNIFICANT_DIGITS) -> Any:
    """``value`` with every float rounded to ``digits`` significant digits (recursively)."""
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return float(f"{value:.{digits}g}")
    if isinstance(value, dict):
        return {str(key): rounded(item, digits) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [rounded(item, digits) for item in value]
    if hasattr(value, "tolist"):  # numpy arrays and scalars, torch tensors
        return rounded(value.tolist(), digits)
    return str(value)


def dumps(value: Any, digits: int = SIGNIFICANT_DIGITS) -> str:
    """The JSON text of ``value`` after :func:`rounded`, indented by one space."""
    return json.dumps(rounded(value, digits), indent=1, allow_nan=False)


def write_json(path: str | Path, value: Any, digits: int = SIGNIFICANT_DIGITS) -> Path:
    """Write :func:`dumps` of ``value`` to ``path`` (with a final newline); return the path."""
    path = Path(path)
    path.write_text(dumps(value, digits) + "\n")
    return path
