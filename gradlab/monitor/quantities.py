"""One small class per logged quantity (cockpit's call chain: track -> should_compute -> compute).

A quantity declares its schedule; :meth:`Quantity.compute` receives a :class:`BatchView` under
``torch.inference_mode()`` on the embeddings' device and returns 0-d tensors keyed by name; the
monitor stacks every value of a step and moves them to the host once. All math is a call into
:mod:`gradlab.functional`.

No quantity reads a value back to the host (no ``.item()``, ``bool()``, masked indexing or
``nonzero``): summaries are NaN-aware reductions on the device. P, the counts and the weighted
counts share one sort of the scores (the relaxation gap's exact AP searches it too, or compares
the positives' scores with their rows when no quantity sorted); the smooth AP, the
decomposition and gradient agreement share one sigmoid block (see :mod:`gradlab.monitor.batch`).
Values are computed in the embeddings' dtype (float32 for half precision), reusing the watched
SmoothAP loss's scores and ranks when it recorded them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from gradlab.errors import GradlabError
from gradlab.functional import operating_region_width
from gradlab.functional.diagnostics import term_norms
from gradlab.functional.operating_region import operating_region_widths
from gradlab.functional.tie_aware import tie_aware_ap_at_positives, tie_aware_ap_from_counts
from gradlab.monitor.anatomy import Anatomy
from gradlab.monitor.batch import BatchView
from gradlab.monitor.quantity import Plot, Quantity, Values
from gradlab.monitor.schedules import Schedule
from gradlab.validation import renamed_keyword, skip_value_checks


def row_summaries(prefixes: Sequence[str], rows: torch.Tensor) -> Values:
    """Mean and 10/50/90 % quantiles of the finite entries of each row: per-query values
    summarised as gradlab's own quantities log them (a quantity of your own may return them).

    NaN and infinities are left out (an undefined query's NaN, an overflow); a row with no
    finite entry gives NaN. The quantiles interpolate linearly between the sorted entries
    (definition 7 of Hyndman & Fan, 1996, as ``torch.quantile``). Computed in float64 on the
    rows' device in one pass, nothing read back to the host.

    Args:
        prefixes: one name per row of ``rows``.
        rows: ``[k, n]`` values, a row per prefix.

    Returns:
        0-d float64 tensors keyed ``{prefix}_mean``, ``{prefix}_q10``, ``{prefix}_q50`` and
        ``{prefix}_q90``, prefix by prefix.

    Raises:
        GradlabError: ``rows`` is not ``[k, n]`` with one row per prefix.

    Example:
        >>> import math
        >>> import torch
        >>> from gradlab.monitor import row_summaries
        >>> rows = torch.tensor([[1.0, 2.0, 3.0, math.nan, math.inf], [math.nan] * 5])
        >>> values = row_summaries(["first", "undefined"], rows)
        >>> list(values)[:4]
        ['first_mean', 'first_q10', 'first_q50', 'first_q90']
        >>> [round(float(value), 6) for value in values.values()]  # the NaN and inf left out
        [2.0, 1.2, 2.0, 2.8, nan, nan, nan, nan]
    """
    if rows.ndim != 2 or rows.shape[0] != len(prefixes):
        raise GradlabError(
            "row_summaries needs rows [k, n] with one row per prefix: got "
            f"{len(prefixes)} prefixes and rows of shape {tuple(rows.shape)}"
        )
    finite = torch.isfinite(rows)
    rows = rows.to(torch.float64)
    means = torch.where(finite, rows, 0.0).sum(dim=1) / finite.sum(dim=1)  # 0 / 0 = NaN
    levels = torch.linspace(0.1, 0.9, 3, dtype=torch.float64, device=rows.device)
    quantiles = torch.nanquantile(torch.where(finite, rows, math.nan), levels, dim=1)  # [3, k]
    names = [f"{prefix}_{name}" for prefix in prefixes for name in ("mean", "q10", "q50", "q90")]
    # [k, 4] in the order of the names; unbind makes every 0-d view in one call.
    return dict(zip(names, torch.cat((means.unsqueeze(0), quantiles)).T.reshape(-1).unbind(),
                    strict=True))  # fmt: skip


class Loss(Quantity):
    """The loss value of the step.

    Example:
        >>> import torch
        >>> from gradlab.monitor import Loss
        >>> from gradlab.monitor.batch import BatchView
        >>> view = BatchView(embeddings=torch.eye(2), loss=torch.tensor(0.5))
        >>> float(Loss().compute(view)["loss"])
        0.5
    """

    name = "loss"
    needs = frozenset({"loss"})
    keys = ("loss",)
    warns_if_not_finite = True  # a NaN loss on finite inputs is the loss's own
    reads_empty_batches = True
    plots = (Plot("loss", "Loss", "loss", (("loss", "loss"),),
                  reading=("The watched loss at each logged step: how fast the batches become "
                           "easy to rank.")),)

    def compute(self, batch: BatchView) -> Values:
        if batch.loss is None:
            return {}
        return {"loss": batch.loss.detach().to(torch.float64).reshape(())}


class EmbeddingNorms(Quantity):
    """Mean, smallest and largest L2 norm of the embeddings.

    Of a cross-modal call, the queries' (the call's first argument): the candidates' norms are
    not read.

    Example:
        >>> import torch
        >>> from gradlab.monitor import EmbeddingNorms
        >>> from gradlab.monitor.batch import BatchView
        >>> values = EmbeddingNorms().compute(BatchView(embeddings=2 * torch.eye(3)))
        >>> {key: float(value) for key, value in values.items()}  # every row has norm 2
        {'embedding_norm_mean': 2.0, 'embedding_norm_min': 2.0, 'embedding_norm_max': 2.0}
    """

    name = "embedding_norm"
    needs = frozenset({"embeddings"})
    keys = ("embedding_norm_mean", "embedding_norm_min", "embedding_norm_max")
    plots = (
        Plot("embeddings", "Embedding norms", "norm", (
            ("embedding_norm_mean", "mean norm"), ("embedding_norm_min", "smallest norm"),
            ("embedding_norm_max", "largest norm")),
             reading=("The embeddings' norms before a loss on cosine scores (SmoothAP) "
                      "normalises them: it reads only their directions, and the gradient an "
                      "embedding receives shrinks as 1 / its norm.")),
    )  # fmt: skip

    def compute(self, batch: BatchView) -> Values:
        norms = batch.embedding_norms  # float64, shared with the geometry's normalised rows
        smallest, largest = torch.aminmax(norms)  # one pass for both
        return {"embedding_norm_mean": norms.mean(), "embedding_norm_min": smallest,
                "embedding_norm_max": largest}  # fmt: skip


class EmbeddingGradNorm(Quantity):
    """Norm of the gradient backpropagated into the embeddings (whole batch and mean per row).

    The gradient backward leaves on them, from every term of the training loss that reaches
    them, divided by the factor on the watched loss. Of a cross-modal call, the queries' (the
    call's first argument): the candidates' gradient is not read.

    Example:
        >>> import torch
        >>> from gradlab.monitor import EmbeddingGradNorm
        >>> from gradlab.monitor.batch import BatchView
        >>> view = BatchView(embeddings=torch.eye(2), embedding_grad=torch.ones(2, 2))
        >>> values = EmbeddingGradNorm().compute(view)  # whole: sqrt(4); per row: sqrt(2)
        >>> [round(float(values[key]), 4) for key in EmbeddingGradNorm.keys]
        [2.0, 1.4142]
    """

    name = "embedding_grad_norm"
    needs = frozenset({"embeddings", "embedding_grad"})
    warns_if_not_finite = True  # a NaN gradient of finite embeddings is the training's own
    keys = ("embedding_grad_norm", "embedding_grad_norm_row_mean")
    plots = (
        Plot("embedding_gradients", "Gradient of the loss w.r.t. the embeddings", "norm", (
            ("embedding_grad_norm", "gradient norm (whole batch)"),
            ("embedding_grad_norm_row_mean", "gradient norm per embedding (mean)")),
             reading=("The norm of dL/d(embeddings), of the whole batch and per embedding: "
                      "how hard the loss still pushes the network.")),
    )  # fmt: skip

    def compute(self, batch: BatchView) -> Values:
        if batch.embedding_grad is None:
            return {}
        grad = batch.embedding_grad.to(torch.float64)
        norm = torch.linalg.vector_norm  # Tensor.norm's kernel, without its Python dispatch
        return {
            "embedding_grad_norm": norm(grad),
            "embedding_grad_norm_row_mean": norm(grad, dim=1).mean(),
        }


class OperatingRegion(Quantity):
    """P (Brown et al. 2020, supplementary Eq. 1), its in-batch variants, and the half-width w.

    ``operating_region_width`` is a function of tau and eps alone: on a step whose scores are
    not finite it keeps its value while the P keys log NaN (:attr:`Quantity.input_free_keys`).

    Example:
        >>> import torch
        >>> from gradlab.monitor import OperatingRegion
        >>> from gradlab.monitor.batch import BatchView
        >>> view = BatchView(embeddings=torch.ones(4, 2), labels=torch.tensor([0, 0, 1, 1]),
        ...                  tau=0.05)  # equal scores: every difference is 0, inside the region
        >>> values = OperatingRegion().compute(view)
        >>> float(values["p_seed"]), round(float(values["operating_region_width"]), 4)
        (1.0, 0.4147)
    """

    name = "operating_region"
    reads_tau = True
    needs = frozenset({"scores", "sorted_scores"})
    keys = ("p_seed", "p_off_diagonal", "p_without_query", "p_cross_modal",
            "operating_region_width")  # fmt: skip
    input_free_keys = frozenset({"operating_region_width"})  # tau and eps: no score read
    plots = (
        Plot("operating_region", "Operating-region proportion P", "proportion", (
            ("p_seed", "P (Brown et al. 2020, suppl. Eq. 1)"),
            ("p_off_diagonal", "P without the diagonal"),
            ("p_without_query", "P without the query's row and column"),
            ("p_cross_modal", "P (cross-modal scores)")), zero_based=True,
             reading=("The share of each query's score differences D whose sigmoid slope "
                      "exceeds eps (|D| < w), with its variants.")),
    )  # fmt: skip

    def __init__(self, schedule: Schedule | None = None, eps: float = 0.005) -> None:
        super().__init__(schedule)
        self.eps = eps

    def compute(self, batch: BatchView) -> Values:
        width = operating_region_width(batch.tau, self.eps)  # a Python float: no transfer
        width_value = torch.full((), width, dtype=torch.float64, device=batch.embeddings.device)
        # Eq. 1 per query: the pairs inside each row's window (BatchView.pair_counts).
        inside = batch.pair_counts(width).to(torch.float64)
        size = batch.scores.shape[1]
        own_column_scored = batch.labels is not None  # in-batch: the query's score with itself
        if not own_column_scored and not batch.query_column_excluded:
            proportion = (inside / size**2).mean()
            return {"p_cross_modal": proportion, "operating_region_width": width_value}
        # The other proportions follow from the same counts: m diagonal entries, and
        # 2 n_self + 1 entries in the query's own row and column. A matrix watched as a batch
        # against itself holds no score in that column: only P without it is logged.
        diagonal = size if width > 0 else 0
        values = {"p_seed": (inside / size**2).mean()} if own_column_scored else {}
        values["operating_region_width"] = width_value
        off_diagonal = inside - diagonal
        if own_column_scored:  # one row (two for the next): no such pair, NaN (undefined)
            values["p_off_diagonal"] = (off_diagonal / (size * (size - 1))).mean() \
                if size > 1 else torch.full_like(width_value, math.nan)  # fmt: skip
        if size > 2:  # n_self: the other candidates in the window of the query's own score
            own = batch.scores.diagonal().unsqueeze(1)
            self_pairs = batch.counts_at(own, width).squeeze(1) - (1 if width > 0 else 0)
            others = torch.sub(off_diagonal, self_pairs, alpha=2)  # integers: exact
            values["p_without_query"] = (others / ((size - 1) * (size - 2))).mean()
        else:
            values["p_without_query"] = torch.full_like(width_value, math.nan)
        return values


class Decomposition(Quantity):
    """Norms of the AD and CB terms of dAP/dq, their ratio and cosine, |dAP/dq|: summaries.

    With one positive per query the CB term (a sum over the query's other positives) is 0: its
    norm is 0, and the ratio and the cosine are NaN (undefined), not an error.

    Example:
        >>> import torch
        >>> from gradlab.monitor import Decomposition
        >>> from gradlab.monitor.batch import BatchView
        >>> view = BatchView(embeddings=torch.randn(8, 4), labels=torch.arange(8) % 2, tau=0.05)
        >>> len(Decomposition().compute(view))  # 6 statistics x mean, q10, q50, q90
        24
    """

    name = "decomposition"
    reads_tau = True
    needs = frozenset({"embeddings", "smooth_ap_terms"})
    keys = tuple(f"decomposition_{term}_{statistic}"
                 for term in ("ad_norm", "cb_norm", "grad_norm", "ad_share", "ratio", "cosine")
                 for statistic in ("mean", "q10", "q50", "q90"))  # fmt: skip
    plots = (
        Plot("decomposition", "AD - CB decomposition (medians over queries)", "norm", (
            ("decomposition_ad_norm_q50", "|AD| (median)"),
            ("decomposition_cb_norm_q50", "|CB| (median)"),
            ("decomposition_grad_norm_q50", "|AD - CB| = gradient (median)")),
             reading=("The median norms of the two terms of Bleeker & de Rijke's (2022, appendix "
                      "A) form of a positive's gradient, AD and CB, and of the gradient AD - CB "
                      "itself.")),
        Plot("decomposition_shape", "AD share and cosine(AD, -CB) (means over queries; -1: "
             "the two summands cancel)", "value", (
                 ("decomposition_ad_share_mean", "AD share (mean)"),
                 ("decomposition_cosine_mean", "cosine(AD, -CB) (mean)")),
             reading=("Which term carries the gradient: AD's share of |AD| + |CB|, and the "
                      "cosine between AD and -CB (-1: the terms point against each other)."),
             undefined=("the cosine is undefined where no query has a second positive (CB is "
                        "then 0, AD's share 1)")),
    )  # fmt: skip

    def compute(self, batch: BatchView) -> Values:
        # The step's one sigmoid block (shared with smooth AP and gradient agreement).
        terms = batch.smooth_ap_terms(batch.tau)
        # gradlab.functional.term_norms: undefined queries (NaN rows) kept as NaN, and norms of
        # rows scaled by their largest entry (terms in a sigmoid tail square to 0 otherwise).
        norms = term_norms(terms.ad_term, terms.cb_term)
        keys = ("ad_norm", "cb_norm", "grad_norm", "ad_share", "ratio", "cosine")
        return row_summaries([f"decomposition_{key}" for key in keys],
                          torch.stack([norms[key] for key in keys]))  # fmt: skip


class GradientCounts(Quantity):
    """Entries with non-negligible slope per query (Bleeker & de Rijke), and queries with none.

    This is Bleeker & de Rijke's (2022) count: entries whose sigmoid slope exceeds
    ``eps`` (the operating region), not the gradient itself; ``queries_without_gradient``
    can stay nonzero while the true ``dL/dS`` is exactly 0 (a perfectly ranked batch). The
    actual gradient is measured by
    :class:`~gradlab.monitor.anatomy.Anatomy` (``anatomy_queries_without_gradient``).

    Only a query with both a positive and a negative has a ranking to learn: one without a
    positive, or without a negative (every candidate positive: its AP is 1 whatever the
    scores, its gradient exactly 0, and its entries' slopes are no gradient) counts 0 entries
    and is not among ``queries_without_gradient``: ``gradient_count_mean`` averages over every
    query of the batch (those 0s included), ``queries_without_gradient`` counts the queries
    that have both and no entry in the operating region (a number, not a share). On a batch
    where no query has both (one class, or all singletons: ``degenerate_batch`` is 1, the
    loss has no gradient at all) every key is NaN, undefined, as
    ``anatomy_queries_without_gradient`` is: a 0 there would read as "every query receives
    gradient".

    Example:
        >>> import torch
        >>> from gradlab.monitor import GradientCounts
        >>> from gradlab.monitor.batch import BatchView
        >>> view = BatchView(embeddings=torch.ones(4, 2), labels=torch.tensor([0, 0, 1, 1]),
        ...                  tau=0.05)  # one positive, 3 candidates: 2 entries j != i per query
        >>> {key: float(value) for key, value in GradientCounts().compute(view).items()}
        {'gradient_count_mean': 2.0, 'queries_without_gradient': 0.0}
        >>> one_class = BatchView(embeddings=torch.ones(4, 2), tau=0.05,
        ...                       labels=torch.zeros(4, dtype=torch.long))  # no negative
        >>> {key: float(value) for key, value in GradientCounts().compute(one_class).items()}
        {'gradient_count_mean': nan, 'queries_without_gradient': nan}
    """

    name = "gradient_counts"
    reads_tau = True
    needs = frozenset({"scores", "sorted_scores"})
    keys = ("gradient_count_mean", "queries_without_gradient")
    plots = (
        Plot("gradient_counts", "Queries with no entry in the sigmoid's operating region "
             "(Bleeker & de Rijke's count: slope above eps)", "queries", (
                 ("queries_without_gradient", "queries (count)"),
                 ("queries_without_gradient_weighted", "queries (weighted count)")),
             zero_based=True,
             reading=("How many queries have no entry (positive, other candidate) whose sigmoid "
                      "slope exceeds eps: SmoothAP sends their scores almost no gradient; the "
                      "weighted count first divides each slope by R^2 (the factor of Bleeker & "
                      "de Rijke's Eq. 13).")),
        Plot("gradient_count_mean", "Entries in the sigmoid's operating region per query "
             "(mean; Bleeker & de Rijke's count)", "entries", (
                 ("gradient_count_mean", "entries per query (count)"),
                 ("gradient_count_mean_weighted", "entries per query (weighted count)")),
             zero_based=True,
             reading=("Bleeker & de Rijke's count: the entries (positive, other candidate) of a "
                      "query whose sigmoid slope exceeds eps; the weighted count first divides "
                      "each slope by R^2, R the positive's smoothed rank among all candidates "
                      "(the factor of their Eq. 13).")),
    )  # fmt: skip

    @renamed_keyword("threshold", "eps")  # eps, as OperatingRegion and gradient_counts say
    def __init__(
        self, schedule: Schedule | None = None, eps: float = 0.005, weighted: bool = False
    ) -> None:
        super().__init__(schedule)
        self.eps = eps
        self.variants = (("", False), ("_weighted", True)) if weighted else (("", False),)
        if weighted:  # the weights are SmoothAP's ranks: its sigmoid block, when the loss has it
            self.optional_needs = frozenset({"smooth_ap_terms"})
            self.keys = (*self.keys, "gradient_count_mean_weighted",
                         "queries_without_gradient_weighted")  # fmt: skip

    @property
    def threshold(self) -> float:
        """``eps``, under its former name (read only)."""
        return self.eps

    def __setstate__(self, state: dict) -> None:
        """A quantity pickled before ``threshold`` was called ``eps`` (a saved Monitor) keeps
        its setting."""
        if "threshold" in state and "eps" not in state:
            state = {**state, "eps": state["threshold"]}
            del state["threshold"]
        self.__dict__.update(state)

    def compute(self, batch: BatchView) -> Values:
        positives = batch.layout.positives
        ranks = batch.ranking_queries  # a positive and a negative (BatchView, shared per step)
        defined = ranks.any()  # no query ranks: the loss has no gradient, the counts are NaN
        values: Values = {}
        for suffix, weighted in self.variants:
            if weighted and not batch.provided("smooth_ap_terms"):
                continue  # a loss without SmoothAP's ranks: the plain counts only
            per_query = self._weighted(batch) if weighted else self._plain(batch, positives)
            per_query = torch.where(ranks, per_query, 0)  # nothing to rank: no entry counts
            mean = per_query.mean(dtype=torch.float64)  # integers: an exact sum, then / Q
            without = (ranks & (per_query == 0)).sum(dtype=torch.float64)  # a count: exact
            values[f"gradient_count_mean{suffix}"] = torch.where(defined, mean, math.nan)
            values[f"queries_without_gradient{suffix}"] = torch.where(defined, without, math.nan)
        return values

    def _plain(self, batch: BatchView, positives: torch.Tensor) -> torch.Tensor:
        """Bleeker & de Rijke's counts: windows ``|D_ij| < w`` of the positives in the step's
        one sort.

        The pair itself (``j = i``) and, in-batch, the query (not a candidate) are taken out.
        With the positives' groups at hand (the loss's record, at most two groups) only those
        rows are searched; otherwise, on a CPU, the positives packed row by row
        (:meth:`_packed`), and elsewhere every entry is searched and the positives are summed
        (the same numbers every way).
        """
        width = operating_region_width(batch.tau, self.eps)
        forward = batch.known_forward(batch.tau)
        in_batch = batch.query_not_candidate
        # Per group, a few small searches; past a couple of groups (or without them), on a CPU
        # the positives packed row by row, else one more search of every entry.
        if forward is None or len(forward.groups) > 2:
            if positives.device.type == "cpu":
                packed = self._packed(batch, positives, width, in_batch)
                if packed is not None:
                    return packed
            anchors = batch.scores
            inside = batch.entry_counts(width) - (1 if width > 0 else 0)
            if in_batch:
                inside = inside - batch.query_inside(anchors, width).long()
            return torch.where(positives, inside, 0).sum(dim=1)
        per_query = None
        for group in forward.groups:
            rows = batch.rows_of(group.queries)  # None: every row (no indexing)
            anchors = batch.positive_anchors(group)  # shared with the margins
            inside = batch.counts_at(anchors, width, rows) - (1 if width > 0 else 0)
            if in_batch:
                inside = inside - batch.query_inside(anchors, width, rows).long()
            if rows is None:  # the only group
                return inside.sum(dim=1)
            if per_query is None:
                per_query = torch.zeros(positives.shape[0], dtype=torch.long,
                                        device=positives.device)  # fmt: skip
            per_query.index_add_(0, group.queries, inside.sum(dim=1))
        if per_query is None:  # no query has a positive
            return torch.zeros(positives.shape[0], dtype=torch.long, device=positives.device)
        return per_query

    @staticmethod
    def _packed(
        batch: BatchView, positives: torch.Tensor, width: float, in_batch: bool
    ) -> torch.Tensor | None:
        """:meth:`_plain`'s counts from the positives alone, on a CPU: each row's positive
        scores packed into ``[Q, k]`` (``k`` the most positives of a row, read on the host: no
        device to wait for) and searched in the step's sort, ``Q k`` searches instead of the
        ``Q C`` of every entry. None when ``2 k > C`` (the search of every entry is then no
        dearer)."""
        counts = batch.positive_counts(batch.layout).long()
        rows_count, columns = positives.shape
        most = int(counts.max()) if rows_count else 0
        if 2 * most > columns:
            return None
        if most == 0:  # no query has a positive
            return torch.zeros(rows_count, dtype=torch.long)
        rows, where = positives.nonzero(as_tuple=True)  # row by row, columns ascending
        slots = torch.arange(rows.shape[0]) - (counts.cumsum(0) - counts)[rows]
        scores = batch.scores
        anchors = scores.new_zeros((rows_count, most))  # the padding is counted, then dropped
        anchors[rows, slots] = scores[rows, where]
        inside = batch.counts_at(anchors, width) - (1 if width > 0 else 0)
        if in_batch:
            inside = inside - batch.query_inside(anchors, width).long()
        kept = torch.arange(most).unsqueeze(0) < counts.unsqueeze(1)
        return torch.where(kept, inside, 0).sum(dim=1)

    def _weighted(self, batch: BatchView) -> torch.Tensor:
        """Counts with the slope over ``R(i, S_Omega)^2``: per-positive windows, same sort."""
        groups, ranks = batch.smooth_ap_forward(batch.tau)
        scores = batch.scores
        in_batch = batch.query_not_candidate
        per_query = torch.zeros(scores.shape[0], dtype=torch.long, device=scores.device)
        for group, (rank_a, rank_c) in zip(groups, ranks, strict=True):
            rows = batch.rows_of(group.queries)  # None: every row (no indexing)
            anchors = (scores if rows is None else scores[rows]).gather(1, group.positive_columns)
            with skip_value_checks():  # positive by construction: nothing to read back
                widths = operating_region_widths(batch.tau,
                                                 self.eps * (rank_a + rank_c) ** 2)
            widths = widths.to(scores.dtype)
            inside = batch.counts_at(anchors, widths, rows) - (widths > 0).long()
            if in_batch:  # the query is not a candidate: take it out of its windows
                inside = inside - batch.query_inside(anchors, widths, rows).long()
            if rows is None:  # the only group
                return inside.sum(dim=1)
            per_query.index_add_(0, group.queries, inside.sum(dim=1))
        return per_query


class RelaxationGap(Quantity):
    """Mean smooth AP against mean exact (tie-aware) AP of the same batch.

    Both at the Monitor's tau and with each query left out of its own ranking (the in-batch
    convention), whatever the watched loss's ``include_query``: ``smooth_ap`` is ``1 - loss``
    for a loss that leaves the query out too (``SmoothAPLoss``'s default), not for one that
    ranks it among its own candidates.

    Example:
        >>> import torch
        >>> from gradlab.monitor import RelaxationGap
        >>> from gradlab.monitor.batch import BatchView
        >>> embeddings = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
        >>> view = BatchView(embeddings=embeddings, labels=torch.tensor([0, 0, 1, 1]), tau=0.01)
        >>> values = RelaxationGap().compute(view)  # each positive ranked first: AP 1
        >>> round(float(values["exact_ap"]), 12), abs(float(values["relaxation_gap"])) < 1e-12
        (1.0, True)
    """

    name = "relaxation_gap"
    reads_tau = True
    needs = frozenset({"scores", "smooth_ap_terms"})
    keys = ("smooth_ap", "exact_ap", "relaxation_gap")
    # the gap apart: on the APs' 0-1 axis a gap of 1e-3 read as a flat 0
    plots = (
        Plot("relaxation_gap", "Smooth AP vs exact AP", "AP", (
            ("smooth_ap", "Smooth AP"), ("exact_ap", "exact AP")),
             reading="How close SmoothAP's relaxed AP is to the exact AP of the same batch."),
        Plot("relaxation_gap_difference", "Smooth AP - exact AP (the relaxation's gap)",
             "AP difference", (("relaxation_gap", "Smooth AP - exact AP"),),
             resolution=1e-12,
             reading=("The relaxed AP minus the exact AP (below 0: the relaxation underrates the "
                      "batch's ranking).")),  # APs in [0, 1]: a gap below 1e-12 is rounding
    )  # fmt: skip

    def compute(self, batch: BatchView) -> Values:
        scores = batch.scores
        groups, ranks = batch.smooth_ap_forward(batch.tau)  # the loss's ranks when recorded
        candidates = batch.layout.candidate_mask  # in-batch: the query is not its own candidate
        smooth = torch.full((scores.shape[0],), math.nan, dtype=scores.dtype, device=scores.device)
        exact = torch.full_like(smooth, math.nan, dtype=torch.float64)
        for group, (rank_a, rank_c) in zip(groups, ranks, strict=True):
            smooth = smooth.index_put((group.queries,), (rank_a / (rank_a + rank_c)).mean(dim=1))
            # Tie-aware AP from the positives' scores alone: searched in the step's sort when
            # another quantity made it, else compared with their rows (O(Q g C), SmoothAP's own
            # positive rows: no sort). Finite by construction; nothing read back.
            subset = batch.rows_of(group.queries)  # None: every row (no indexing)
            rows = scores if subset is None else scores[subset]
            anchors = rows.gather(1, group.positive_columns)
            if batch.has_sort:
                above, tied = batch.above_and_tied(anchors, subset)
                per_query = tie_aware_ap_from_counts(anchors, above, tied)
            else:
                mask = candidates if candidates is None or subset is None else candidates[subset]
                with skip_value_checks():
                    per_query = tie_aware_ap_at_positives(rows, anchors, mask)
            exact = exact.index_put((group.queries,), per_query)
        defined = ~torch.isnan(exact)
        count = defined.sum()  # a mean over no query is 0 / 0 = NaN
        smooth_mean = torch.where(defined, smooth.to(torch.float64), 0.0).sum() / count
        exact_mean = torch.where(defined, exact, 0.0).sum() / count
        return {
            "smooth_ap": smooth_mean,
            "exact_ap": exact_mean,
            "relaxation_gap": smooth_mean - exact_mean,
        }


class GradientAgreement(Quantity):
    """When the watched loss is SmoothAP: analytic dLoss/dembeddings against the one backpropagated.

    In-batch calls only: a cross-modal call (``candidates=``) logs no key, as its candidates'
    gradient is not read. The analytic gradient is gradlab's SmoothAP (exact backward) of the
    same batch with the watched loss's tau and query convention; cosine near 1 and relative
    error near 0 mean the training loss computes SmoothAP. Under torch.distributed it compares
    the writing rank's own call, on the batch that call saw: each rank backpropagates its own
    loss, which the gathered batch's SmoothAP does not describe.

    A batch without ranking signal (one class, all singletons, one row) has a zero analytic
    gradient: the cosine is NaN when either gradient is zero (no direction to compare), and the
    relative error NaN when both are (a 0 would read as agreement), inf when only the analytic
    one is. An all-zero embedding row has no direction and gets no gradient, as in the loss.

    Example:
        >>> import torch
        >>> from gradlab.monitor import GradientAgreement
        >>> import tempfile, gradlab
        >>> from gradlab.monitor.schedules import every
        >>> with gradlab.Monitor(tempfile.mkdtemp(),
        ...                      quantities=[GradientAgreement(every(1))]) as monitor:
        ...     loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        ...     loss_fn(torch.randn(8, 4, requires_grad=True), torch.arange(8) % 2).backward()
        ...     record = monitor.step()
        >>> round(record["gradient_agreement_cosine"], 9)  # analytic = backpropagated
        1.0
    """

    name = "gradient_agreement"
    reads_tau = True
    needs = frozenset({"embeddings", "embedding_grad", "loss_kind", "smooth_ap_terms"})
    keys = ("gradient_agreement_cosine", "gradient_agreement_relative_error")
    plots = (
        Plot("gradient_agreement", "Analytic vs backpropagated gradient", "value", (
            ("gradient_agreement_cosine", "cosine(analytic, backpropagated)"),
            ("gradient_agreement_relative_error", "relative error")),
             reading=("Whether the training computes SmoothAP: the cosine between gradlab's "
                      "analytic SmoothAP gradient of the batch and the one backpropagated "
                      "into the embeddings, 1 when they agree, and their relative error, 0 "
                      "when they agree."),
             undefined=("undefined for a batch without ranking signal (one class, or no two "
                        "items of one): no analytic gradient to compare")),
    )  # fmt: skip

    def compute(self, batch: BatchView) -> Values:
        batch = batch.local if batch.local is not None else batch  # the call this rank made
        if batch.loss_kind is None or batch.embedding_grad is None or batch.labels is None:
            return {}
        include_query = batch.loss_kind == "include_query"
        tau = batch.loss_tau if batch.loss_tau is not None else batch.tau
        # dAP/dS from the step's shared sigmoid block, then back through S = N N^T and the
        # normalization N = E / |E| by hand (no second SmoothAP forward and backward).
        score_grad = batch.smooth_ap_loss_grad(tau, include_query)  # dLoss/dS
        normalized = batch.vectors
        grad_normalized = score_grad @ normalized + score_grad.T @ normalized
        norms = batch.embeddings.to(batch.compute_dtype).norm(dim=1, keepdim=True)
        radial = (normalized * grad_normalized).sum(dim=1, keepdim=True)
        analytic = (grad_normalized - normalized * radial) / norms.clamp(min=1e-12)
        # a zero row has no direction: the loss sends it no gradient (unit_rows)
        analytic = torch.where(norms == 0, 0.0, analytic).double()
        actual = batch.embedding_grad.to(torch.float64)
        cosine = torch.nn.functional.cosine_similarity(
            analytic.flatten(), actual.flatten(), dim=0, eps=1e-30
        )
        size, actual_size = analytic.norm(), actual.norm()
        cosine = torch.where((size > 0) & (actual_size > 0), cosine, math.nan)
        relative = torch.where(size > 0, (analytic - actual).norm() / size,
                               torch.where(actual_size > 0, math.inf, math.nan))  # fmt: skip
        return {"gradient_agreement_cosine": cosine, "gradient_agreement_relative_error": relative}


class WeightedGradientCounts(GradientCounts):
    """Gradient counts with and without the 1/R(i, S_Omega)^2 weight (needs the ranks).

    The ``_weighted`` keys count the entries whose slope divided by ``R(i, S_Omega)^2`` is above
    ``eps`` (a count, not a weighted sum): never more entries than the unweighted count.

    Example:
        >>> import torch
        >>> from gradlab.monitor import WeightedGradientCounts
        >>> from gradlab.monitor.batch import BatchView
        >>> view = BatchView(embeddings=torch.ones(4, 2), labels=torch.tensor([0, 0, 1, 1]),
        ...                  tau=0.05)
        >>> sorted(WeightedGradientCounts().compute(view))  # doctest: +NORMALIZE_WHITESPACE
        ['gradient_count_mean', 'gradient_count_mean_weighted', 'queries_without_gradient',
         'queries_without_gradient_weighted']
    """

    @renamed_keyword("threshold", "eps")
    def __init__(self, schedule: Schedule | None = None, eps: float = 0.005) -> None:
        super().__init__(schedule, eps, weighted=True)


class DegenerateBatches(Quantity):
    """Batches in which no query has both a positive and a negative (no ranking signal).

    ``degenerate_batches``: how many such batches the watched loss has seen so far, every step
    counted (gradlab's :class:`~gradlab.losses.SmoothAPLoss` counts them at no cost; absent for
    losses that do not). ``degenerate_batch``: 1 if this logged batch is one, else 0 (any loss;
    from the labels or the positive mask, on the device).

    Example:
        >>> import torch
        >>> from gradlab.monitor import DegenerateBatches
        >>> from gradlab.monitor.batch import BatchView
        >>> view = BatchView(embeddings=torch.eye(4), labels=torch.arange(4))  # all singletons
        >>> {key: float(value) for key, value in DegenerateBatches().compute(view).items()}
        {'degenerate_batch': 1.0}
    """

    name = "degenerate_batches"
    keys = ("degenerate_batches", "degenerate_batch")
    reads_empty_batches = True  # an empty batch is a degenerate one
    plots = (Plot("degenerate_batches", "Batches without ranking signal (no query has both a "
                  "positive and a negative)", "batches", (
                      ("degenerate_batches",
                       "batches without ranking signal (counted by the loss)"),
                      ("degenerate_batch", "this batch without ranking signal (0/1)")),
                  zero_based=True,
                  reading=("Batches in which no query has both a positive and a negative, so the "
                           "loss has nothing to rank: the loss's count over every step so far, "
                           "and whether the logged batch is one.")),)  # fmt: skip

    def compute(self, batch: BatchView) -> Values:
        values: Values = {}
        device = batch.embeddings.device
        count = batch.degenerate_batches
        if isinstance(count, torch.Tensor):  # summed over the ranks, on the device
            values["degenerate_batches"] = count.to(device=device, dtype=torch.float64)
        elif count is not None:
            values["degenerate_batches"] = torch.full(  # a kernel argument, not a copy
                (), float(count), dtype=torch.float64, device=device
            )
        ranking = batch.ranking_queries  # shared with the gradient counts: computed once
        if ranking is None:
            return values
        values["degenerate_batch"] = (~ranking.any()).to(torch.float64)
        return values

    def said_of_logged(self, logged: dict[str, float], batch: BatchView) -> str | None:
        """A logged batch without ranking signal, for a loss that does not say so itself
        (gradlab's losses warn with ``DegenerateBatchWarning``, and count): its ranking
        quantities are NaN, which would otherwise pass unseen (a ragged last batch of one)."""
        if logged.get("degenerate_batch") != 1.0 or batch.degenerate_batches is not None:
            return None
        return ("the logged batch has no query with both a positive and a negative (a batch "
                "of one item, of one class, or of singletons: a ragged last batch?), so the "
                "quantities that rank its pairs are NaN for it; degenerate_batch marks such "
                "steps (later ones are not warned about)")


PRESETS = {
    "cheap": (Loss, EmbeddingNorms, EmbeddingGradNorm, DegenerateBatches),
    "default": (Loss, EmbeddingNorms, EmbeddingGradNorm, OperatingRegion, GradientCounts,
                DegenerateBatches),
    "full": (Loss, EmbeddingNorms, EmbeddingGradNorm, OperatingRegion, WeightedGradientCounts,
             Decomposition, RelaxationGap, GradientAgreement, Anatomy, DegenerateBatches),
}  # fmt: skip
"""Quantity classes of each preset, from cheap to full."""

QUANTITIES = (Loss, EmbeddingNorms, EmbeddingGradNorm, OperatingRegion, Decomposition,
              GradientCounts, RelaxationGap, GradientAgreement, DegenerateBatches,
              Anatomy)  # fmt: skip
"""gradlab's quantity classes, in the order ``gradlab plot`` draws their families."""

DEFAULT_EVERY = 50
"""Steady-state interval of the presets' default schedule (``schedules.default_schedule``)."""
