"""Refusal messages the tests expect, written out once from the rule they state (not read from
the code under test)."""

from __future__ import annotations

import torch


def wide_unsigned_refusal(name: str, dtype: torch.dtype) -> str:
    """What gradlab says of ``name`` given in ``dtype`` (uint16, uint32 or uint64): torch lacks
    most operations for these, so an integer argument in them is refused, ``.long()`` advised."""
    width = str(dtype).removeprefix("torch.")
    return (f"{name} must have a signed integer dtype or uint8; got {dtype} (torch implements "
            f"few operations for {width}: no ordering comparison, search, bincount or "
            f"indexing); pass {name}.long()")  # fmt: skip


def refusal_of(make) -> str:
    """The message of the :class:`~gradlab.GradlabError` that ``make()`` raises (the test
    fails if it raises none, or another error)."""
    import pytest

    from gradlab import GradlabError

    with pytest.raises(GradlabError) as refused:
        make()
    return str(refused.value)
