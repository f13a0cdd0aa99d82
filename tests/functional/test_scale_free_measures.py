"""Measures defined on the unit vectors ``x_i / |x_i|`` do not depend on the rows' scale.

A power-of-two scale is exact in floating point, so each measure of ``2^k x`` must equal its
measure of ``x`` bit for bit: at ``2^-45`` (norms below ``F.normalize``'s floor of 1e-12, which
shortened the rows), at ``2^70`` in float32 and ``2^600`` in float64 (norms that overflow, which
``F.normalize`` turned into rows of zeros). The losses normalise through ``unit_rows`` and were
scale-free already; these measures called ``F.normalize``.
"""

import pytest
import torch

import gradlab.functional as F

SCALES = {torch.float32: (2.0**-45, 2.0**70), torch.float64: (2.0**-45, 2.0**600)}
"""Per dtype: a scale below the 1e-12 floor, and one whose squared norms overflow."""

MEASURES = {
    "normalized_std": lambda x, labels: F.normalized_std(x),
    "uniformity": lambda x, labels: F.uniformity(x),
    "effective_rank": lambda x, labels: F.effective_rank(x, normalize=True).rank,
    "modality_gap": lambda x, labels: F.modality_gap(x[:5], x[5:]),
    "in_batch_retrieval": lambda x, labels: F.in_batch_retrieval(x, labels)[0],
    "nearest_neighbours": lambda x, labels: F.nearest_neighbours(x, 3),
    "precision_at_1": lambda x, labels: torch.tensor(
        F.retrieval_at_scale(x, labels, ks=(1,))["precision_at_1"]),
    "in_batch_decomposition": lambda x, labels: F.in_batch_decomposition(x, labels, tau=0.1).grad,
}


def _points(dtype):
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(12, 6, generator=generator, dtype=torch.float64).to(dtype)
    return x, torch.arange(4).repeat_interleave(3)


@pytest.mark.parametrize("dtype", list(SCALES))
@pytest.mark.parametrize("name", list(MEASURES))
def test_a_measure_of_unit_vectors_is_the_same_at_every_scale(name, dtype):
    x, labels = _points(dtype)
    at_one = MEASURES[name](x, labels)
    for scale in SCALES[dtype]:
        scaled = x * scale
        assert torch.isfinite(scaled).all()  # the rows themselves are ordinary numbers
        assert torch.equal(MEASURES[name](scaled, labels), at_one), (name, dtype, scale)


def test_a_zero_row_stays_a_zero_row():
    # a zero vector has no direction: it counts as the origin, as F.normalize left it
    x, _ = _points(torch.float64)
    x[0] = 0.0
    unit = x[1:] / x[1:].norm(dim=1, keepdim=True)
    points = torch.cat([torch.zeros(1, 6, dtype=torch.float64), unit])
    expected = (points - points.mean(dim=0)).square().mean(dim=0).sqrt().mean() * 6**0.5
    assert float(F.normalized_std(x)) == pytest.approx(float(expected), rel=1e-14)
