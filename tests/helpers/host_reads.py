"""Count the host reads (device-to-host synchronisations) a call makes, by the tensor methods
that read a value back."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

SYNC_POINTS = ("item", "tolist", "cpu", "numpy", "__bool__", "__float__", "__int__", "__index__")
"""The tensor methods that read values back to the host."""


def host_reads(monkeypatch: pytest.MonkeyPatch, call: Callable[[], object]) -> list[str]:
    """The :data:`SYNC_POINTS` methods ``call()`` went through, in order (every tensor method
    patched for the call only)."""
    calls: list[str] = []
    for name in SYNC_POINTS:
        original = getattr(torch.Tensor, name)

        def spy(self, *args, _name=name, _original=original, **kwargs):
            calls.append(_name)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, spy)
    try:
        call()
    finally:
        monkeypatch.undo()
    return calls
