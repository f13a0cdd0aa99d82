"""FastAP (Cakir et al., CVPR 2019): AP from histograms of distances (Brown et al. 2020, Table S2).

Embeddings are L2-normalized; the squared Euclidean distance ``d = |x - y|^2 = 2 - 2 cos`` lies in
``[0, 4]``. With ``L`` bins the centres are ``z_l = l * 4/L`` (``l = 0 .. L``) and each distance
spreads over them with the triangular kernel ``max(0, 1 - |d - z_l| / (4/L))``. Per query, with
``h+_l``, ``h_l`` the soft counts of positives and of all candidates and ``H+``, ``H`` their
cumulative sums (closest bin first):

    FastAP = 1/N+ sum_l h+_l H+_l / H_l          (0 for a bin with H_l = 0)

Each query is its own non-candidate. Cost per query ``O(B L)``, ``O(B^2 L)`` for the batch,
plus the ``O(B^2 d)`` distance matrix that every in-batch loss pays.
"""

from __future__ import annotations

import math
import numbers

import torch

from gradlab.errors import GradlabError
from gradlab.functional.layouts import unit_rows
from gradlab.functional.precision import outside_autocast
from gradlab.functional.score_losses import widened
from gradlab.validation import check_bool, check_embeddings_and_labels

MAX_BINS = 2**14
"""The most distance bins FastAP takes. In float32 the rounding of a squared distance (``2 - 2
cos``) moves each soft count by a share of the bin width ``4 / L``, so FastAP drifts from its
float64 value as the bins narrow: by about 1e-4 at ``2**14`` bins, 1e-3 at ``10**5``, and past 1
at ``10**7`` (an AP above 1). Cakir et al. (2019) use 10 to 100 bins."""


def check_num_bins(value: object) -> int:
    """Return ``value`` if it is an integer from 1 to :data:`MAX_BINS` (a NumPy integer
    included, bools refused).

    Example:
        >>> check_num_bins(10**7)
        Traceback (most recent call last):
        ...
        gradlab.errors.GradlabError: num_bins must be an integer from 1 to 16384 (2**14: with ...
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not (
            1 <= value <= MAX_BINS):  # fmt: skip
        raise GradlabError(
            f"num_bins must be an integer from 1 to {MAX_BINS} (2**14: with narrower bins "
            "float32 rounding moves FastAP by more than 1e-4, past 1 at 10**7 bins; the paper "
            f"uses 10 to 100); got {value!r}"
        )
    return int(value)


@outside_autocast
def fastap(
    embeddings: torch.Tensor, labels: torch.Tensor, num_bins: int = 10, *, validate: bool = True
) -> torch.Tensor:
    """Per-query FastAP of in-batch retrieval; NaN for a query without positives.

    Args:
        embeddings: ``[B, d]`` floating (cosine: normalized inside); float16 and bfloat16 are
            computed in float32, the result returned in their dtype.
        labels: ``[B]`` integer classes.
        num_bins: distance bins ``L``, an integer from 1 to :data:`MAX_BINS` (``2**14``).
        validate: refuse NaN/inf embeddings (one host read); ``False`` skips the check.

    Example:
        >>> import torch
        >>> from gradlab.functional import fastap
        >>> emb = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
        >>> fastap(emb, torch.tensor([0, 0, 1, 1]), num_bins=10)
        tensor([1., 1., 1., 1.])
    """
    validate = check_bool("validate", validate)
    check_embeddings_and_labels(embeddings, labels, finite=validate)
    num_bins = check_num_bins(num_bins)
    # Half precision cannot hold distinct bin centres past a few hundred bins (bfloat16 has 8
    # significant bits): computed in float32, returned in the embeddings' dtype.
    normalized = unit_rows(widened(embeddings))  # a zero row: 0
    distances = (2.0 - 2.0 * normalized @ normalized.T).clamp(min=0.0)
    width = 4.0 / num_bins
    centres = torch.arange(num_bins + 1, dtype=distances.dtype, device=distances.device) * width
    kernel = torch.clamp(1.0 - (distances.unsqueeze(-1) - centres).abs() / width, min=0.0)
    size = len(labels)
    not_self = ~torch.eye(size, dtype=torch.bool, device=labels.device)
    positives = (labels.unsqueeze(0) == labels.unsqueeze(1)) & not_self
    kernel = kernel * not_self.unsqueeze(-1)
    positive_counts = (kernel * positives.unsqueeze(-1)).sum(dim=1)  # [B, L+1]
    counts = kernel.sum(dim=1)
    cumulative_positive = positive_counts.cumsum(dim=1)
    cumulative = counts.cumsum(dim=1)
    nonzero = cumulative > 0
    # An empty prefix's precision is 1, its limit as a positive enters (its term h+_l stays 0).
    ratio = torch.where(nonzero, cumulative_positive / torch.where(nonzero, cumulative, 1.0), 1.0)
    total = positives.sum(dim=1).to(distances.dtype)
    values = (positive_counts * ratio).sum(dim=1)
    ap = torch.where(total > 0, values / total.clamp(min=1.0), math.nan)
    return ap.to(embeddings.dtype)
