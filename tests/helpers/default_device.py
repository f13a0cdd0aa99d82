"""One check for "internal tensors are made on the input's device": the same computation under
another default device (``meta``, the stand-in for ``cuda`` with CPU inputs) gives the same
tensors, bit for bit, on the input's device."""

from __future__ import annotations

from collections.abc import Callable

import torch


def _named_leaves(result, prefix: str = "") -> list[tuple[str, object]]:
    if isinstance(result, torch.Tensor):
        return [(prefix or "result", result)]
    if hasattr(result, "_asdict"):  # a NamedTuple of results
        items = result._asdict().items()
    elif isinstance(result, (list, tuple)):
        items = ((str(index), value) for index, value in enumerate(result))
    else:
        return [(prefix or "result", result)]
    return [leaf for name, value in items for leaf in _named_leaves(value, f"{prefix}{name}.")]


def assert_unchanged_under_another_default_device(
    compute: Callable[[], object], device: torch.device
) -> None:
    """``compute()`` (tensors, sequences or NamedTuples of them, plain values) is the same with
    torch's default device set to ``meta``, and every tensor it returns lies on ``device``."""
    expected = _named_leaves(compute())
    with torch.device("meta"):
        got = _named_leaves(compute())
    assert [name for name, _ in got] == [name for name, _ in expected]
    for (name, value), (_, reference) in zip(got, expected, strict=True):
        if isinstance(value, torch.Tensor):
            assert value.device == device, name
            torch.testing.assert_close(value, reference, atol=0, rtol=0, equal_nan=True)
        else:
            assert value == reference or (value != value and reference != reference), name
