"""One small class per logged quantity (cockpit's call chain: track -> should_compute -> compute).

A quantity declares its schedule; :meth:`Quantity.compute` receives a :class:`BatchView` under
``torch.no_grad()`` on the embeddings' device and returns 0-d tensors keyed by name; the monitor
stacks every value of a step and moves them to the host once. All math is a call into
:mod:`gradlab.functional`.
"""

from __future__ import annotations

import math

import torch

from gradlab.functional import (
    decomposition_norms,
    drop_diagonal,
    gradient_counts,
    in_batch_decomposition,
    operating_region_proportion,
    operating_region_width,
    smooth_ap,
    smooth_ap_decomposition,
    tie_aware_ap,
)
from gradlab.monitor.batch import BatchView
from gradlab.monitor.schedules import Schedule, every

Values = dict[str, torch.Tensor]


def _nan_like(reference: torch.Tensor) -> torch.Tensor:
    return torch.full((), math.nan, dtype=torch.float64, device=reference.device)


def _summary(prefix: str, values: torch.Tensor) -> Values:
    """Mean and 10/50/90% quantiles of the finite entries (NaN if none)."""
    kept = values[torch.isfinite(values)].to(torch.float64)
    if kept.numel() == 0:
        nan = _nan_like(values)
        return {
            f"{prefix}_mean": nan,
            f"{prefix}_q10": nan,
            f"{prefix}_q50": nan,
            f"{prefix}_q90": nan,
        }
    quantiles = torch.quantile(
        kept, torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64, device=kept.device)
    )
    return {
        f"{prefix}_mean": kept.mean(),
        f"{prefix}_q10": quantiles[0],
        f"{prefix}_q50": quantiles[1],
        f"{prefix}_q90": quantiles[2],
    }


class Quantity:
    """A logged quantity: a name, a schedule, and :meth:`compute`.

    Attributes:
        name: prefix of the logged keys.
        schedule: ``step -> bool``.
        needs_grad: whether it needs the gradient backpropagated into the embeddings.
    """

    name = "quantity"
    needs_grad = False

    def __init__(self, schedule: Schedule | None = None) -> None:
        self.schedule = schedule if schedule is not None else every(1)

    def should_compute(self, step: int) -> bool:
        return bool(self.schedule(step))

    def compute(self, batch: BatchView) -> Values:  # pragma: no cover - abstract
        raise NotImplementedError


class Loss(Quantity):
    """The loss value of the step."""

    name = "loss"

    def compute(self, batch: BatchView) -> Values:
        if batch.loss is None:
            return {}
        return {"loss": batch.loss.detach().to(torch.float64).reshape(())}


class EmbeddingNorms(Quantity):
    """Mean, smallest and largest L2 norm of the embeddings."""

    name = "embedding_norm"

    def compute(self, batch: BatchView) -> Values:
        norms = batch.embeddings.to(torch.float64).norm(dim=1)
        return {"embedding_norm_mean": norms.mean(), "embedding_norm_min": norms.min(),
                "embedding_norm_max": norms.max()}  # fmt: skip


class EmbeddingGradNorm(Quantity):
    """Norm of the gradient backpropagated into the embeddings (whole batch and mean per row)."""

    name = "embedding_grad_norm"
    needs_grad = True

    def compute(self, batch: BatchView) -> Values:
        if batch.embedding_grad is None:
            return {}
        grad = batch.embedding_grad.to(torch.float64)
        return {
            "embedding_grad_norm": grad.norm(),
            "embedding_grad_norm_row_mean": grad.norm(dim=1).mean(),
        }


class OperatingRegion(Quantity):
    """P (seed 002, Eq. 1, and off-diagonal) and the half-width w (in-batch batches)."""

    name = "operating_region"

    def __init__(self, schedule: Schedule | None = None, eps: float = 0.005) -> None:
        super().__init__(schedule)
        self.eps = eps

    def compute(self, batch: BatchView) -> Values:
        device = batch.embeddings.device
        width = torch.tensor(
            operating_region_width(batch.tau, self.eps), dtype=torch.float64, device=device
        )
        if batch.labels is None:
            scores = batch.layout.scores
            proportion = operating_region_proportion(scores, batch.tau, self.eps).mean()
            return {"p_cross_modal": proportion, "operating_region_width": width}
        # One sorted pass (Eq. 1 per query); the other proportions follow from its counts:
        # m diagonal entries, and 2 n_self + 1 entries in the query's own row and column.
        scores = batch.self_scores
        size = scores.shape[0]
        seed = operating_region_proportion(scores, batch.tau, self.eps)
        inside = seed * size**2
        diagonal = size if width.item() > 0 else 0
        values = {"p_seed": seed.mean(), "operating_region_width": width}
        if size > 1:
            values["p_off_diagonal"] = ((inside - diagonal) / (size * (size - 1))).mean()
        if size > 2:
            near_self = (scores.diagonal().unsqueeze(1) - scores).abs() < width
            self_pairs = near_self.sum(dim=1) - near_self.diagonal().long()
            others = inside - diagonal - 2 * self_pairs
            values["p_without_query"] = (others / ((size - 1) * (size - 2))).mean()
        return values


class Decomposition(Quantity):
    """Norms of the AD and CB terms of dAP/dq, their ratio and cosine, |dAP/dq|: summaries."""

    name = "decomposition"

    def compute(self, batch: BatchView) -> Values:
        embeddings = batch.embeddings.to(torch.float64)
        if batch.labels is not None:
            parts = in_batch_decomposition(embeddings, batch.labels, batch.tau)
        else:
            normalize = torch.nn.functional.normalize
            parts = smooth_ap_decomposition(normalize(embeddings, dim=1),
                                            normalize(batch.candidates.to(torch.float64), dim=1),
                                            batch.positives, batch.tau)  # fmt: skip
        norms = decomposition_norms(parts)
        values: Values = {}
        for key in ("ad_norm", "cb_norm", "grad_norm", "ad_share", "ratio", "cosine"):
            values.update(_summary(f"decomposition_{key}", norms[key]))
        return values


class GradientCounts(Quantity):
    """Entries with non-negligible slope per query (Bleeker & de Rijke), and queries with none."""

    name = "gradient_counts"

    def __init__(
        self, schedule: Schedule | None = None, threshold: float = 0.005, weighted: bool = False
    ) -> None:
        super().__init__(schedule)
        self.threshold = threshold
        self.variants = (("", False), ("_weighted", True)) if weighted else (("", False),)

    def compute(self, batch: BatchView) -> Values:
        layout = batch.layout
        values: Values = {}
        for suffix, weighted in self.variants:
            counts = gradient_counts(
                layout.scores.to(torch.float64),
                layout.positives,
                batch.tau,
                self.threshold,
                weighted=weighted,
                candidates=layout.candidates,
            )
            per_query = counts.per_query.to(torch.float64)
            values[f"gradient_count_mean{suffix}"] = per_query.mean()
            values[f"queries_without_gradient{suffix}"] = torch.tensor(
                float(counts.queries_without_gradient), dtype=torch.float64, device=per_query.device
            )
        return values


class RelaxationGap(Quantity):
    """Mean smooth AP against mean exact (tie-aware) AP of the same batch."""

    name = "relaxation_gap"

    def compute(self, batch: BatchView) -> Values:
        layout = batch.layout
        scores = layout.scores.to(torch.float64)
        positives = layout.positives
        smooth = smooth_ap(scores, positives, batch.tau, candidates=layout.candidates)
        if layout.candidates is not None:  # in-batch: the query is not its own candidate
            scores, positives = drop_diagonal(scores), drop_diagonal(positives)
        exact = tie_aware_ap(scores, positives)
        defined = ~torch.isnan(exact)
        if not bool(defined.any()):
            nan = _nan_like(scores)
            return {"smooth_ap": nan, "exact_ap": nan, "relaxation_gap": nan}
        smooth_mean, exact_mean = smooth[defined].mean(), exact[defined].mean()
        return {
            "smooth_ap": smooth_mean,
            "exact_ap": exact_mean,
            "relaxation_gap": smooth_mean - exact_mean,
        }


class GradientAgreement(Quantity):
    """When the watched loss is SmoothAP: analytic dLoss/dembeddings against the one backpropagated.

    The analytic gradient is gradlab's SmoothAP (exact backward) of the same batch with the
    watched loss's tau and query convention; cosine near 1 and relative error near 0 mean the
    training loss computes SmoothAP.
    """

    name = "gradient_agreement"
    needs_grad = True

    def compute(self, batch: BatchView) -> Values:
        if batch.loss_kind is None or batch.embedding_grad is None or batch.labels is None:
            return {}
        from gradlab.losses import SmoothAPLoss

        include_query = batch.loss_kind == "include_query"
        with torch.enable_grad():
            leaf = batch.embeddings.detach().to(torch.float64).requires_grad_(True)
            tau = batch.loss_tau if batch.loss_tau is not None else batch.tau
            loss = SmoothAPLoss(tau, include_query=include_query)(leaf, batch.labels)
            (analytic,) = torch.autograd.grad(loss, leaf)
        actual = batch.embedding_grad.to(torch.float64)
        cosine = torch.nn.functional.cosine_similarity(
            analytic.flatten(), actual.flatten(), dim=0, eps=1e-30
        )
        relative = (analytic - actual).norm() / analytic.norm().clamp(min=1e-30)
        return {"gradient_agreement_cosine": cosine, "gradient_agreement_relative_error": relative}


class WeightedGradientCounts(GradientCounts):
    """Gradient counts with and without the 1/R(i, S_Omega)^2 weight (needs the ranks)."""

    def __init__(self, schedule: Schedule | None = None, threshold: float = 0.005) -> None:
        super().__init__(schedule, threshold, weighted=True)


from gradlab.monitor.anatomy import Anatomy  # noqa: E402  (it subclasses Quantity, above)

PRESETS = {
    "cheap": (Loss, EmbeddingNorms, EmbeddingGradNorm),
    "default": (Loss, EmbeddingNorms, EmbeddingGradNorm, OperatingRegion, GradientCounts),
    "full": (Loss, EmbeddingNorms, EmbeddingGradNorm, OperatingRegion, WeightedGradientCounts,
             Decomposition, RelaxationGap, GradientAgreement, Anatomy),
}  # fmt: skip
"""Quantity classes of each preset, from cheap to full."""

DEFAULT_EVERY = 50
"""Default schedule of every preset: every 50 optimizer steps."""
