"""Quantities that count the entries of a mask, on masks of any memory layout.

A caller's ``positives`` may be a transposed view (the caption->image direction of an
image->caption mask), a slice that starts at an odd byte, or have a row length that is no
multiple of 8; large masks (at least 2^17 entries) are where the Monitor counts 8 flags at a
time. :class:`~gradlab.monitor.DegenerateBatches` reads the counts, checked against a loop
over the rows (a batch has ranking signal when a query has a positive and a negative).
"""

from __future__ import annotations

import pytest
import torch

from gradlab.monitor import DegenerateBatches
from gradlab.monitor.batch import BatchView


def expected_degenerate(positives: torch.Tensor) -> float:
    """1.0 when no row of the mask has both a True and a False entry, else 0.0."""
    for row in positives.tolist():
        if any(row) and not all(row):
            return 0.0
    return 1.0


def logged(positives: torch.Tensor) -> float:
    queries, candidates = positives.shape
    view = BatchView(torch.ones(queries, 2), candidates=torch.ones(candidates, 2),
                     positives=positives)  # fmt: skip
    return DegenerateBatches().compute(view)["degenerate_batch"].item()


def masks(rows: int, columns: int) -> list[torch.Tensor]:
    """Every row full but one: with signal (that row mixed) and without (that row empty)."""
    with_signal = torch.ones(rows, columns, dtype=torch.bool)
    with_signal[rows // 2, ::3] = False
    without = torch.ones(rows, columns, dtype=torch.bool)
    without[rows // 2] = False
    return [with_signal, without]


@pytest.mark.parametrize("signal", [0, 1])
def test_a_transposed_mask_is_counted_as_its_values(signal):
    """360 x 368 read through its transpose: not contiguous, rows a multiple of 8 long."""
    mask = masks(368, 360)[signal].T
    assert not mask.is_contiguous() and mask.numel() >= 1 << 17
    assert logged(mask) == expected_degenerate(mask)


@pytest.mark.parametrize("signal", [0, 1])
def test_rows_of_a_length_no_multiple_of_8_are_counted(signal):
    """369 columns (a multiple of 9, not of 8), 369 rows: in-batch labels and a cross-modal mask."""
    mask = masks(369, 369)[signal]
    assert logged(mask) == expected_degenerate(mask)
    labels = torch.arange(369) if signal else torch.arange(369) % 5
    view = BatchView(torch.ones(369, 2), labels=labels)
    same = [[a == b for b in labels.tolist()] for a in labels.tolist()]
    signal_rows = [sum(row) > 1 and not all(row) for row in same]  # a positive, a negative
    assert DegenerateBatches().compute(view)["degenerate_batch"].item() == float(
        not any(signal_rows)
    )


@pytest.mark.parametrize("signal", [0, 1])
@pytest.mark.slow
def test_a_mask_starting_at_any_byte_is_counted(signal):
    """A contiguous 368 x 360 slice of a larger mask, starting at each byte of a 72-byte span
    (every address modulo 8 and modulo 9)."""
    values = masks(368, 360)[signal]
    base = torch.zeros(values.numel() + 72, dtype=torch.bool)
    for start in range(72):
        mask = base[start:start + values.numel()].view(368, 360)
        mask.copy_(values)
        assert mask.is_contiguous()
        assert logged(mask) == expected_degenerate(values), start
