"""Geometry, margin, chance-level and temperature quantities of a logged step.

What embedding-model users ask of a run ("are my embeddings collapsing?", "is the loss stuck at
chance?", "what is the learnable scale doing?"), each a small :class:`Quantity` whose math is a
call into :mod:`gradlab.functional.geometry`, from what the step already has (the embeddings
and the step's one score matrix); reductions stay on the device (no host sync).

* :class:`Geometry` (embeddings): alignment and uniformity (Wang & Isola 2020), effective rank
  of the centred embeddings and its share of ``min(N - 1, d)`` (RankMe), the normalised
  standard deviation x ``sqrt(d)`` (SimSiam) and, for a cross-modal batch, the modality gap.
* :class:`Margins` (the score matrix, in the loss's units): per query the positive score, the
  hardest negative, their margin, the share of negatives violating it and in-batch R@1, means
  over the queries that have both a positive and a negative.
* :class:`ChanceLevel` (InfoNCE-family losses): the loss minus ``ln C``.
* :class:`Temperature` (a softmax scale, learnable or fixed): its value, ``dL/d log s`` in
  closed form, the parameter's own gradient when it has one, and whether a clamp holds it.

Cost: :class:`Geometry`'s effective rank takes its eigenvalues from the smaller Gram matrix,
``[min(B, d)]^2``, never an SVD of the ``[B, d]`` batch, and in-batch its alignment and
uniformity read the step's cosine scores once, in float64 blocks of rows (no ``[B, B]``
float64 copy on a CPU); :class:`Margins` makes a few
passes over the scores and, in-batch when another quantity has sorted them (P does, in every
preset), counts the violations and R@1 by binary searches of that sort. Both are in the default
preset that ``benchmarks/bench_monitor.py`` times against a plain training step.
"""

from __future__ import annotations

import math
import warnings
import weakref
from collections.abc import Callable

import torch

from gradlab.errors import GradlabError, caller_stacklevel
from gradlab.functional import geometry as measures
from gradlab.losses import SoftmaxLogits
from gradlab.monitor.batch import BatchView
from gradlab.monitor.quantity import Plot, Quantity, Values
from gradlab.monitor.schedules import Schedule

__all__ = ["ChanceLevel", "Geometry", "Margins", "Temperature"]


class Geometry(Quantity):
    """Alignment, uniformity, effective rank, normalised std and modality gap of the batch.

    In-batch, the positive pairs are those of the labels and the uniformity reads the step's
    cosine score matrix (no second product); cross-modal, the alignment runs over the
    ``positives`` of the queries x candidates scores, the other values describe the queries
    (the watched call's ``embeddings``) and ``geometry_modality_gap`` compares them with the
    candidates. A loss read through a recorded score matrix (sentence-transformers' recording
    similarity, open_clip's wrapper) is measured on the embeddings that matrix compares, in
    cosine units even when the matrix holds logits (the effective rank excepted: it is RankMe's
    formula on the centred embeddings, not scaled to unit length, so a row with a larger norm
    weighs more); where the
    integration did not see them (a
    matrix gathered from other processes) the step logs no geometry. A batch of one query
    (a short last batch) logs no uniformity, no effective rank and no spread: all three need
    two points. On a
    CUDA device the effective rank's ``torch.linalg.eigvalsh`` synchronises with the host once
    per logged step (torch checks its convergence there): the one exception to the Monitor's
    single transfer per logged step.

    Example:
        >>> import torch
        >>> from gradlab.monitor import Geometry
        >>> from gradlab.monitor.batch import BatchView
        >>> view = BatchView(embeddings=torch.eye(4), labels=torch.tensor([0, 0, 1, 1]))
        >>> values = Geometry().compute(view)  # 4 orthogonal points: a regular simplex
        >>> [round(float(values[key]), 4) for key in ("geometry_alignment",
        ...                                           "geometry_effective_rank_share")]
        [2.0, 1.0]
    """

    name = "geometry"
    needs = frozenset({"features"})
    keys = ("geometry_alignment", "geometry_uniformity", "geometry_effective_rank",
            "geometry_effective_rank_share", "geometry_std", "geometry_modality_gap")  # fmt: skip
    plots = (
        Plot("geometry", "Alignment and uniformity (Wang & Isola 2020; each lower is better, "
             "but they trade off)", "value", (
                 ("geometry_alignment", "alignment: mean |u - v|^2 of positive pairs"),
                 ("geometry_uniformity", "uniformity: log mean exp(-2 |u - v|^2)")),
             reading=("How close the positives' unit embeddings are (alignment) and how evenly "
                      "the batch spreads over the sphere (uniformity). Read the two together: "
                      "a run that starts collapsed (every cosine near 1) sees alignment rise "
                      "while uniformity falls as its batch spreads out, which is training "
                      "working, not failing; from a spread-out start, alignment falling is the "
                      "positives drawing together.")),
        Plot("geometry_collapse", "Collapse: effective rank / min(N - 1, d) (low: few "
             "directions; blind to scale) and std of unit embeddings x sqrt(d) (0: one "
             "direction)",
             "1: spread evenly, near 0: collapsed", (
                 ("geometry_effective_rank_share",
                  "effective rank / min(N - 1, d) (scale-free)"),
                 ("geometry_std", "std x sqrt(d)")),
             zero_based=True,
             reading=("Whether the embeddings collapse: near 0 on either series, they use few "
                      "directions. The two can disagree: a batch in a narrow cone (every "
                      "cosine near 1) has a low std, while its effective rank, taken after "
                      "the batch's mean is removed, sees only the spread around the cone's "
                      "axis and can stay near 1.")),
        Plot("geometry_modality_gap", "Modality gap: distance between the centroids of the "
             "normalised queries and candidates (Liang et al. 2022)", "distance", (
                 ("geometry_modality_gap", "modality gap |centroid difference|"),),
             zero_based=True,
             reading=("How far apart the queries and the candidates lie on the sphere: near 0, "
                      "the two modalities share one region.")),
    )  # fmt: skip

    def compute(self, batch: BatchView) -> Values:
        compared = batch.compared
        if compared is None:  # a recorded matrix whose embeddings the integration did not see
            return {}
        embeddings, candidates, cosine = compared
        wide = embeddings.dtype == torch.float64  # float32 and half need no rescaling
        norms = None
        if embeddings is batch.embeddings:  # the step's float64 copy and norms, shared
            embeddings = batch.float64_embeddings
            # float64 rows may overflow their norms (past 1e154): unit_rows scales them first
            norms = None if wide else batch.embedding_norms
        else:
            embeddings = embeddings.to(torch.float64)  # once: each measure works in float64
        layout = batch.layout
        in_batch = candidates is None
        values = {}
        # The measures of the step's own float64 tensors, unchecked (measures._...).
        if embeddings.shape[0] > 1:  # one point has no spread: 0 would read as a collapse
            values["geometry_std"] = measures._normalized_std(embeddings, norms)
        standard = in_batch and batch.every_candidate_but_the_query
        if standard and embeddings.shape[0] > 1:  # both from one copy of the distances
            # the layout's positives leave out the diagonal; their number is the step's count
            kept = batch.positive_counts(layout).sum()
            values["geometry_alignment"], values["geometry_uniformity"] = (
                measures._in_batch_alignment_uniformity(cosine, layout.positives, kept=kept))
        else:
            values["geometry_alignment"] = measures.alignment(
                cosine, layout.positives, candidate_mask=layout.candidate_mask)
        if embeddings.shape[0] > 1:  # one query (a last short batch): no pairs, no spread
            rank = measures._effective_rank(embeddings, rescale=wide)
            if "geometry_uniformity" not in values:
                values["geometry_uniformity"] = measures.uniformity(
                    embeddings, gram=cosine if in_batch else None)
            values["geometry_effective_rank"] = rank.rank
            values["geometry_effective_rank_share"] = rank.share
        if not in_batch and candidates.shape[0] > 0:  # no candidates: no centroid, no gap
            values["geometry_modality_gap"] = measures.modality_gap(embeddings, candidates)
        return {key: values[key] for key in self.keys if key in values}


class Margins(Quantity):
    """Per query: positive score, hardest negative, margin, share of negatives at or above the
    hardest positive, R@1 (means).

    The positive score is the mean over the query's positives; the margin is its hardest
    (lowest-scored) positive minus its hardest negative, so with several positives it is not
    ``margin_positive_score - margin_hardest_negative``.

    Read from the step's score matrix in the loss's own units (cosine scores when the loss is
    watched on embeddings, whichever similarity it computes: a pytorch-metric-learning loss on
    raw dot products is read on the batch's cosines; logits when it is watched on a score
    matrix); the means run over
    the queries that have both a positive and a negative. A margin that stays negative with a
    violation share near 1 is a batch the model does not separate; R@1 is in-batch recall at 1.

    Example:
        >>> import torch
        >>> from gradlab.monitor import Margins
        >>> from gradlab.monitor.batch import BatchView
        >>> view = BatchView(embeddings=torch.tensor([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]]),
        ...                  labels=torch.tensor([0, 0, 1]))
        >>> values = Margins().compute(view)  # margins 0.8 - 0.0 and 0.8 - 0.6
        >>> round(float(values["margin_mean"]), 4), float(values["margin_recall_at_1"])
        (0.5, 1.0)
    """

    name = "margins"
    needs = frozenset({"scores"})
    keys = ("margin_positive_score", "margin_hardest_negative", "margin_mean",
            "margin_violation_share", "margin_recall_at_1")  # fmt: skip
    plots = (
        Plot("margins", "Mean positive score, hardest negative, and the margin of the "
             "hardest positive (means over queries)", "score (the loss's own: cosine, or logit)", (
                 ("margin_positive_score", "positive score (mean over the positives)"),
                 ("margin_hardest_negative", "hardest negative"),
                 ("margin_mean", "margin: hardest positive - hardest negative")),
             reading=("The scores of the positives and of the hardest negative; a positive "
                      "margin: the lowest-scored positive ranks above every negative."),
             undefined="undefined for a batch where no query has both a positive and a negative"),
        Plot("margin_violations", "Negatives at or above the hardest positive, and in-batch R@1",
             "share", (
                 ("margin_violation_share", "negatives violating the margin (share)"),
                 ("margin_recall_at_1", "in-batch R@1")), zero_based=True,
             reading=("The share of negatives scored at or above the hardest positive, and the "
                      "batch's own R@1."),
             undefined="undefined for a batch where no query has both a positive and a negative"),
    )  # fmt: skip

    def compute(self, batch: BatchView) -> Values:
        layout = batch.layout
        # In-batch, the query its only non-candidate: binary searches of the step's sort, and
        # the positives' row counts the step shares (the layout's positives leave out the
        # diagonal: in_batch_margins on the Monitor's own tensors, unchecked).
        if batch.every_candidate_but_the_query and batch.has_sort:
            margins = measures._in_batch_margins(batch.scores, layout.positives,
                                                 batch.negated_sorted,
                                                 batch.positive_counts(layout),
                                                 batch.lowest_positives(layout))  # fmt: skip
        else:
            margins = measures.query_margins(batch.scores, layout.positives,
                                             candidate_mask=layout.candidate_mask)  # fmt: skip
        rows = torch.stack([margins.positive, margins.hardest_negative, margins.margin,
                            margins.violation_share, margins.recall_at_1])  # fmt: skip
        # The queries with a positive and a negative: their margin is a number (NaN scores
        # make every key NaN in the Monitor, whatever is computed here). x == x: not NaN.
        both = margins.margin == margins.margin
        means = torch.where(both, rows, 0.0).sum(dim=1) / both.sum()  # none: 0 / 0, NaN
        return dict(zip(self.keys, means.unbind(), strict=True))


class ChanceLevel(Quantity):
    """The loss minus ``ln C``, InfoNCE's loss when every candidate scores alike.

    For InfoNCE-family losses (NT-Xent, CLIP's loss, sentence-transformers'
    MultipleNegativesRankingLoss): a value near 0 means the model has learned nothing (open_clip
    users' "the loss stays at 4.85 = ln 128"). ``C`` is the number of candidates per query:
    ``B - 1`` in-batch, the columns of a cross-modal ``[Q, C]`` matrix (its rows, ``Q``, for a
    loss whose queries are the columns: one that declares ``direction="t2i"`` in its
    ``softmax_logits``, as a loss of your own does with ``loss.softmax_logits =
    SoftmaxLogits(direction="t2i")``; ``ChanceLevel`` takes no direction of its own). A loss
    summed over both directions
    (gradlab's ``NTXentLoss(direction="both")``, its default) sits at ``ln C + ln Q`` (``2 ln C``
    in-batch or on a square matrix), CLIP's mean of the two at half that: ``terms`` left out is
    the number of terms the watched loss declares (:class:`~gradlab.losses.SoftmaxLogits`, 2 for
    that one, 1 for a mean), else 1. Other losses have other chance levels: this quantity is
    not in a preset, and is not logged for a gradlab loss that declares no InfoNCE mean (VSE++'s
    triplet loss, SigLIP's sigmoid loss, NT-Xent with ``reduction="sum"``, the AP losses on
    embeddings: SmoothAP, FastAP, FAPPY, Blackbox AP), nor for a pytorch-metric-learning loss
    other than ``SupConLoss`` and ``NTXentLoss`` (whose chance level is ``ln C`` only with one
    positive per item, pairs of views; with ``m`` items per class it is ``ln(C - m + 2)``).
    Neither key reads the
    scores' values (``chance_level`` is ``ln C`` of their shape, ``loss_minus_chance`` the loss
    as it is logged): on a step whose scores are not finite both keep their value
    (:attr:`Quantity.input_free_keys`).

    Args:
        schedule: ``step -> bool``.
        terms: how many InfoNCE terms the loss sums (1, or 2 for a summed symmetric loss);
            ``None``: the watched loss's declared terms, else 1.

    Raises:
        GradlabError: ``terms`` neither None nor a positive integer.

    Example:
        >>> import math
        >>> import torch
        >>> from gradlab.monitor import ChanceLevel
        >>> from gradlab.monitor.batch import BatchView
        >>> view = BatchView(embeddings=torch.eye(3), labels=torch.tensor([0, 0, 1]),
        ...                  loss=torch.tensor(math.log(2.0)))
        >>> round(float(ChanceLevel().compute(view)["loss_minus_chance"]), 6)  # C = 2 candidates
        0.0
    """

    name = "chance_level"
    needs = frozenset({"loss", "scores"})
    keys = ("loss_minus_chance", "chance_level")
    input_free_keys = frozenset(keys)  # the loss and the scores' shape: no score value read
    plots = (Plot("chance_level", "Loss minus its chance level ln C (InfoNCE: 0 = chance)",
                  "loss", (("loss_minus_chance", "loss - ln C"),),
                  reading=("The loss minus its value for scores that tell no candidate from "
                           "another (ln C per InfoNCE term, C candidates per query): near 0, the "
                           "model has learned nothing.")),)  # fmt: skip

    def __init__(self, schedule: Schedule | None = None, terms: int | None = None) -> None:
        super().__init__(schedule)
        if terms is not None and (isinstance(terms, bool) or not isinstance(terms, int)
                                  or terms < 1):  # fmt: skip
            raise GradlabError(f"terms must be a positive integer (InfoNCE terms the loss sums, "
                               f"1 or 2) or None (the loss's own); got {terms!r}")  # fmt: skip
        self.terms = terms
        self._checked_positives = False

    def compute(self, batch: BatchView) -> Values:
        if batch.loss is None:
            return {}
        if not self._checked_positives and batch.softmax is None:  # once: a host read
            self._checked_positives = True
            if _several_positives(batch):
                _say(PER_POSITIVE.format(what="chance_level (ln C)",
                                         other="another, ln(negatives + 1)"))  # fmt: skip
        rows, columns = batch.scores.shape
        own = int(batch.query_not_candidate)  # in-batch, a query is not its own candidate
        # candidates per query of each direction: a row's columns, a column's rows
        candidates = {"i2t": columns - own, "t2i": rows - own}
        declared = batch.softmax
        # the loss's declared directions, else those its integration knows (sentence-
        # transformers' symmetric losses: "both", their terms averaged)
        direction = ((declared.direction if declared is not None else None)
                     or batch.score_direction)  # fmt: skip
        terms = self.terms
        if terms is None:  # the watched loss's own (gradlab's NTXentLoss sums both directions)
            terms = declared.terms if direction == "both" and declared is not None else 1
        counts = ((candidates["i2t"], candidates["t2i"]) if direction == "both"
                  else (candidates.get(direction, candidates["i2t"]),))  # fmt: skip
        if min(counts) < 1:
            return {}
        # each direction's ln C; a loss over both: their sum (terms 2) or mean (terms 1, CLIP)
        level = terms * math.fsum(measures.chance_level(count) for count in counts) / len(counts)
        loss = batch.loss.detach().to(torch.float64).reshape(())
        level_value = torch.full((), level, dtype=torch.float64, device=loss.device)
        return {"loss_minus_chance": loss - level, "chance_level": level_value}


ScaleSource = float | torch.Tensor | Callable[[], "float | torch.Tensor"]


class Temperature(Quantity):
    """A softmax scale ``s`` (logits ``s * S``): its value, ``dL/d log s``, clamp hits.

    ``temperature_log_scale_grad`` is the closed form
    :func:`gradlab.functional.temperature_gradient` on the step's cosine scores: the
    softmax-expected logit minus the positive logit, averaged over the queries (negative: the
    loss wants a larger scale, a sharper softmax; positive: a smaller one). When ``scale`` is a
    tensor with a gradient (a learnable parameter; its value is taken at the watched loss call,
    the scale the loss used), ``temperature_log_scale_grad_observed`` is its gradient as ``dL/d
    log s``: the two agree when the watched loss is the batch's InfoNCE. It is the gradient that
    the backward after the watched call sent to the parameter (a hook on it, divided by the
    factor the loop put on the loss, as the other gradients are; another term of the objective
    that uses the parameter or the scores adds to it, as it does not to the closed form), not
    ``scale.grad``: under
    ``DistributedDataParallel`` ``scale.grad`` is the mean over the ranks while the closed form
    reads this rank's matrix, and with gradient accumulation ``scale.grad`` sums the
    micro-batches while the closed form reads the last one. A parameter whose gradient no
    backward of the watched call reached (a view built by hand) logs ``scale.grad``. With both
    directions the closed form is their mean (CLIP's loss, sentence-transformers' symmetric
    loss), or their sum for a loss that says it sums them (gradlab's
    ``NTXentLoss(direction="both")``, :class:`gradlab.losses.SoftmaxLogits`). A loss that says
    it is no softmax over each query's candidates (SigLIP's sigmoid loss, VSE++'s triplet loss,
    NT-Xent summed over the queries) logs no closed form: the scale, the parameter's gradient
    and the clamp only. Those three read no score: on a step whose scores are not finite they
    keep their value (a scale that diverged is then on the record) while the closed form logs
    NaN (:attr:`Quantity.input_free_keys`). Without a ``scale`` of its own, on a loss that says
    it is no softmax and holds no scale (VSE++'s triplet loss, Faghri et al. 2018, Eq. 5: a
    hinge on cosine scores; the AP losses, whose ``tau`` is a sigmoid's width), the quantity
    logs nothing: the Monitor's fallback ``1 / tau`` is no
    scale of that loss, and the run header's ``not_logged`` says so.

    Args:
        schedule: ``step -> bool``.
        scale: the parameter, a positive finite number (a finite ``log s`` with
            ``log_scale``), or a callable returning either; None: the watched loss's own scale
            when it says it (gradlab's ``NTXentLoss``: ``1 / temperature``; ``SigLIPLoss``:
            its ``scale`` ``t``; the
            sentence-transformers losses: their ``scale``; open_clip's ``ClipLoss``: the
            call's ``logit_scale``), else ``1 / tau`` (the Monitor's tau) unless the loss says
            it is no softmax (then nothing is logged); the first step says when ``1 / tau``
            was taken, and, on an InfoNCE loss read on scores (not logits), when a given scale
            is more than 1 % from the one the loss declares. open_clip:
            ``model.logit_scale`` with ``log_scale=True``; sentence-transformers' losses:
            ``loss.scale`` (a number, 20 by default).
        log_scale: the parameter holds ``log s`` (open_clip) instead of ``s``.
        inverse: the parameter holds the temperature ``t = 1 / s`` (logits ``S / t``; ``log
            t`` with ``log_scale``) instead of the scale: ``temperature_scale`` logs ``s = 1 /
            t`` and the parameter's gradient is turned into ``dL/d log s = -dL/d log t``.
            Needs ``scale``. ``clamp`` bounds the parameter as it is held (``t`` or ``log t``).
        clamp: ``(low, high)`` bounds applied to the parameter (open_clip clamps
            ``logit_scale`` to ``[0, ln 100]``); ``temperature_clamp_hit`` is 1 when the
            parameter sits on or past either bound (a parameter never clamped can pass
            them), the bounds rounded to the parameter's dtype (a
            bfloat16 parameter clamped at ``ln 100`` holds 4.59375). A parameter past a bound
            (more than its rounding) is said once: the bounds may be in other units than the
            parameter as held (``log s`` bounds without ``log_scale``); with ``log_scale``, a
            bound beyond :data:`LARGEST_LOG_BOUND` in magnitude is said where the quantity is
            made (a scale's bound given for ``log s``).
        direction: ``"i2t"``, ``"t2i"`` or ``"both"``; None: the directions the loss or the
            integration that recorded the scores names (:attr:`BatchView.softmax`,
            :attr:`BatchView.score_direction`: ``"i2t"`` for
            sentence-transformers' MultipleNegativesRankingLoss), else ``"i2t"`` in-batch and
            ``"both"`` for a cross-modal batch or a score matrix of a loss of your own (pass
            ``"i2t"`` for an InfoNCE over its rows alone).
        logits: True: the step's score matrix is already ``s * S`` (a loss of your own watched
            on its logits); False: it holds the scores ``S`` the scale multiplies (cosines, on
            embeddings); None: as the watched loss declares
            (:attr:`gradlab.losses.SoftmaxLogits.logits`: open_clip's wrapper records logits),
            else False.

    Raises:
        GradlabError: a bad ``clamp``, ``direction`` or ``scale`` (a tensor computed from a
            parameter, such as ``logit_scale.exp()``, is refused: it would keep the value it
            had when made), or ``inverse`` without a ``scale``.

    Example:
        >>> import math
        >>> import torch
        >>> from gradlab.monitor import Temperature
        >>> from gradlab.monitor.batch import BatchView
        >>> logit_scale = torch.nn.Parameter(torch.tensor(math.log(100.0)))
        >>> quantity = Temperature(scale=logit_scale, log_scale=True, clamp=(0.0, math.log(100)))
        >>> view = BatchView(embeddings=torch.eye(2), candidates=torch.eye(2),
        ...                  positives=torch.eye(2, dtype=torch.bool))
        >>> values = quantity.compute(view)
        >>> round(float(values["temperature_scale"]), 4), float(values["temperature_clamp_hit"])
        (100.0, 1.0)
        >>> log_t = torch.nn.Parameter(torch.tensor(0.07).log())  # a learnable temperature
        >>> values = Temperature(scale=log_t, log_scale=True, inverse=True).compute(view)
        >>> round(float(values["temperature_scale"]), 4)  # s = 1 / 0.07
        14.2857
    """

    name = "temperature"
    needs = frozenset({"scores"})
    keys = ("temperature_scale", "temperature_log_scale_grad",
            "temperature_log_scale_grad_observed", "temperature_clamp_hit")  # fmt: skip
    # the parameter, its own gradient and its clamp: no score value read
    input_free_keys = frozenset({"temperature_scale", "temperature_log_scale_grad_observed",
                                 "temperature_clamp_hit"})  # fmt: skip
    plots = (
        Plot("temperature", "Scale s of the logits (1 / temperature)", "scale", (
            ("temperature_scale", "scale s"),),
             reading=("The scale s (1 / temperature) that the loss multiplies its scores by: the "
                      "larger s, the sharper the loss tells the highest-scored candidates from "
                      "the rest.")),
        Plot("temperature_gradient", "dL/d log s (< 0: the loss wants a larger scale)",
             "dL/d log s", (
                 ("temperature_log_scale_grad",
                  "closed form of a softmax: expected minus positive logit"),
                 ("temperature_log_scale_grad_observed", "the parameter's gradient")),
             reading=("Which way the loss pulls the scale: the gradient the parameter received "
                      "as dL/d log s and, for a softmax loss, its closed form (the "
                      "softmax-expected logit minus the positive logit; a sigmoid loss such as "
                      "SigLIP's has none); below 0, a larger scale would lower the loss.")),
        Plot("temperature_clamp", "Scale on its clamp (0/1)", "hit", (
            ("temperature_clamp_hit", "clamp hit"),), zero_based=True,
             reading=("Whether the scale sits on a bound of its clamp (open_clip's logit scale "
                      "at 100): there the optimizer moves it no further that way.")),
    )  # fmt: skip

    def __init__(
        self,
        schedule: Schedule | None = None,
        scale: ScaleSource | None = None,
        *,
        log_scale: bool = False,
        clamp: tuple[float, float] | None = None,
        direction: str | None = None,
        logits: bool | None = None,
        inverse: bool = False,
    ) -> None:
        super().__init__(schedule)
        number = isinstance(scale, (int, float, torch.Tensor)) and not isinstance(scale, bool)
        if scale is not None and not (number or callable(scale)):
            raise GradlabError(f"scale must be a number, a tensor or a callable returning one; "
                               f"got {type(scale).__name__}")  # fmt: skip
        if isinstance(scale, torch.Tensor) and scale.numel() != 1:
            raise GradlabError(f"scale must hold one value; got shape {tuple(scale.shape)}")
        if isinstance(scale, torch.Tensor) and scale.requires_grad and not scale.is_leaf:
            made = type(scale.grad_fn).__name__  # not a leaf: an operation made it
            raise GradlabError(
                f"scale must be the parameter itself, not a tensor computed from it (made by "
                f"{made}): it keeps the value it had when made while the parameter trains; "
                "pass the parameter (open_clip's log s: scale=model.logit_scale, "
                "log_scale=True) or a callable returning the scale "
                "(scale=lambda: model.logit_scale.exp())"
            )
        if not isinstance(inverse, bool):
            raise GradlabError(f"inverse must be True or False; got {inverse!r}")
        if inverse and scale is None:
            raise GradlabError("inverse=True reads scale= as a temperature t = 1 / s, but no "
                               "scale was given; pass scale= the temperature (its log with "
                               "log_scale=True)")  # fmt: skip
        if number and not isinstance(scale, torch.Tensor):  # a parameter may move; a number not
            held, what = ("t", "a temperature") if inverse else ("s", "a scale")
            allowed = f"a finite log {held}" if log_scale else f"{what} {held} > 0 and finite"
            if not math.isfinite(scale) or (not log_scale and scale <= 0):
                raise GradlabError(f"scale must be {allowed}; got {scale!r}")
        if not isinstance(log_scale, bool):
            raise GradlabError(f"log_scale must be True or False; got {log_scale!r}")
        if logits is not None and not isinstance(logits, bool):
            raise GradlabError(f"logits must be True, False or None (as the loss declares); "
                               f"got {logits!r}")  # fmt: skip
        if clamp is not None:
            valid = (
                isinstance(clamp, (tuple, list))
                and len(clamp) == 2
                and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in clamp)
            )
            if not valid or not clamp[0] < clamp[1]:
                raise GradlabError(f"clamp must be a pair (low, high) of numbers with low < high; "
                                   f"got {clamp!r}")  # fmt: skip
            clamp = (float(clamp[0]), float(clamp[1]))
            largest = max(map(abs, clamp))
            if log_scale is True and largest > LARGEST_LOG_BOUND:
                held = "log t" if inverse else "log s"
                warnings.warn(
                    f"Temperature(clamp={clamp!r}, log_scale=True) bounds {held}: a bound of "
                    f"{largest:g} is a factor e^{largest:g} on the logits; for bounds on the "
                    "scale itself, pass their logs (open_clip: "
                    "clamp=(0, math.log(100)))", UserWarning,
                    stacklevel=caller_stacklevel())  # fmt: skip
        if direction is not None and direction not in ("i2t", "t2i", "both"):
            raise GradlabError(f"direction must be 'i2t', 't2i', 'both' or None; got "
                               f"{direction!r}")  # fmt: skip
        self.scale, self.log_scale, self.clamp, self.direction = scale, log_scale, clamp, direction
        self.logits, self.inverse = logits, inverse
        self._hook = None  # on the parameter: the watched call's own gradient (at_call)
        self._checked_scores = False  # the scale and the score matrix: said once if wrong
        self._own_gradient = False  # the step's gradient came from the watched call's backward
        self._told_of_logits = False  # logits read as cosines: said, the cause of any gap

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_hook"] = None  # a hook handle belongs to this process's parameter
        return state

    def not_applicable(self, loss: object) -> str | None:
        """Why nothing is logged for ``loss``: no ``scale`` given, and the loss declares
        (:class:`~gradlab.losses.SoftmaxLogits`) no softmax and no scale; else None.

        Example:
            >>> from gradlab.monitor import Temperature
            >>> from gradlab.losses import MaxViolationTripletLoss
            >>> Temperature().not_applicable(MaxViolationTripletLoss()).split(":")[0]
            'has no scale to log for MaxViolationTripletLoss'
            >>> Temperature(scale=20.0).not_applicable(MaxViolationTripletLoss()) is None
            True
        """
        if self.scale is not None or not _scale_free(getattr(loss, "softmax_logits", None)):
            return None
        return (f"has no scale to log for {type(loss).__name__}: it is no softmax and holds no "
                "scale (1 / the Monitor's tau is no scale of it); give Temperature(scale=...) "
                "a parameter of the loss to follow it")  # fmt: skip

    def _parameter(self, batch: BatchView) -> tuple[torch.Tensor, torch.dtype]:
        """The parameter's value (``s`` or ``log s``) as a 0-d float64 tensor on the device,
        and the dtype it is held in (its clamp rounds to it)."""
        source = self.scale() if callable(self.scale) else self.scale
        device = batch.embeddings.device
        from_loss = source is None  # the watched loss's own s when it says it, else 1 / tau
        if from_loss:
            declared = batch.softmax.scale if batch.softmax is not None else None
            source = 1.0 / batch.tau if declared is None else declared
        if isinstance(source, torch.Tensor):
            value = source.detach().reshape(()).to(device=device, dtype=torch.float64)
        else:  # a kernel argument, not a copy to the device
            value = torch.full((), float(source), dtype=torch.float64, device=device)
        if from_loss:  # s itself, not a parameter held in its own dtype
            return (value.log() if self.log_scale else value), torch.float64
        return value, source.dtype if isinstance(source, torch.Tensor) else torch.float64

    def at_call(self, batch: BatchView) -> None:
        """Keep the parameter's value at the watched call: the scale the loss used (by
        ``monitor.step()`` an ``optimizer.step()`` may have moved it)."""
        value, dtype = self._parameter(batch)
        batch._cache[("temperature parameter", id(self))] = (value.clone(), dtype)
        self._follow_gradient(batch)

    def _follow_gradient(self, batch: BatchView) -> None:
        """Hook the parameter for the gradient that the backward of this call sends it, kept
        in ``batch.parameter_grads`` (the hook of an earlier call is removed: one at a time)."""
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        scale = self.scale
        if not (isinstance(scale, torch.Tensor) and scale.requires_grad):
            return
        view, key = weakref.ref(batch), ("temperature", id(self))

        def keep(grad: torch.Tensor) -> None:
            kept = view()
            if kept is not None:  # a copy: DDP averages the tensor autograd hands on in place
                kept.parameter_grads[key] = grad.detach().clone()

        self._hook = scale.register_hook(keep)

    def _check_scale(self, batch: BatchView, scale: torch.Tensor, logits: bool) -> None:
        """Once, at the first step with a closed form (a host read or two): say when the scale
        is the Monitor's ``1 / tau`` because neither ``scale=`` nor the loss gave one, when a
        given ``scale=`` is not the one the watched loss declares (more than 1 % apart: a
        bfloat16 parameter's ``exp`` rounds by up to 0.4 %; not said of logits, ``s * S``
        made before a loss that may scale them again, as ``NTXentLoss(temperature=1.0)``),
        and when the matrix of a loss of
        the user's own looks like logits though ``logits`` is False (entries beyond 1 in
        magnitude, where cosines are at most 1)."""
        self._checked_scores = True
        if batch.softmax is None and _several_positives(batch):
            _say(PER_POSITIVE.format(what="temperature_log_scale_grad",
                                     other="another dL/d log s"))  # fmt: skip
        declared = batch.softmax.scale if batch.softmax is not None else None
        if self.scale is None and declared is None:
            _say(f"Temperature() was given no scale= and the watched loss declares none, so "
                 f"it logs 1 / tau = {1.0 / batch.tau:g} (the Monitor's tau) as the softmax "
                 "scale; pass Temperature(scale=...) the scale (or parameter) the loss "
                 "multiplies its scores by")  # fmt: skip
        if self.scale is not None and declared is not None and not logits:
            given, own = float(scale), float(declared)
            if not math.isclose(given, own, rel_tol=0.01):
                _say(f"Temperature(scale=...) logs s = {given:g}, but the watched loss "
                     f"declares its own scale s = {own:g}: the closed form "
                     "temperature_log_scale_grad is taken at the given one; leave scale= out "
                     "to follow the loss's")  # fmt: skip
        if not batch.on_scores:  # embeddings: the Monitor made the cosines itself
            return
        if not self.logits and batch.softmax is None:  # a loss of the user's own (None: False)
            largest = float(batch.scores.detach().abs().amax())
            if largest > 1.0 + 1e-3:  # a cosine, rounded, is at most 1
                self._told_of_logits = True  # the closed form's gap to the gradient: said here
                _say(f"Temperature(logits=False) reads the watched score matrix as the scores "
                     "S that the scale multiplies (cosines, on embeddings), but it holds values "
                     f"up to {largest:.4g} in magnitude: if they are the logits s * S already, "
                     "pass Temperature(..., logits=True) (temperature_log_scale_grad is off by "
                     "the scale otherwise)")  # fmt: skip

    def compute(self, batch: BatchView) -> Values:
        if self.scale is None and _scale_free(batch.softmax):  # 1 / tau: no scale of the loss
            return {}
        call = batch.local if batch.local is not None else batch  # the watched call's view
        kept = call._cache.get(("temperature parameter", id(self)))
        # no watched call captured (a view built by hand): the parameter now
        parameter, dtype = kept if kept is not None else self._parameter(batch)
        held = parameter.exp() if self.log_scale else parameter  # s, or t with inverse
        scale = held.reciprocal() if self.inverse else held
        declared = batch.softmax if batch.softmax is not None else SoftmaxLogits()
        values = {"temperature_scale": scale}
        if declared.info_nce:  # InfoNCE's closed form is the loss's gradient
            layout = batch.layout
            direction = (self.direction or declared.direction or batch.score_direction
                         or ("i2t" if batch.query_not_candidate else "both"))  # fmt: skip
            logits = declared.logits if self.logits is None else self.logits
            scores = batch.scores / scale if logits else batch.scores
            if not self._checked_scores:
                self._check_scale(batch, scale, logits)
            gradient = measures.temperature_gradient(
                scores, layout.positives, scale, candidate_mask=layout.candidate_mask,
                direction=direction)  # fmt: skip
            terms = declared.terms if direction == "both" else 1  # a sum of both directions
            values["temperature_log_scale_grad"] = gradient * terms
        if self._hook is not None:  # read: no later backward needs to call it
            self._hook.remove()
            self._hook = None
        grad = call.parameter_grads.get(("temperature", id(self)))
        self._own_gradient = grad is not None  # this call's: comparable with the closed form
        if grad is None and not (call.not_backpropagated or batch.not_backpropagated):
            # no backward of the watched call reached it: the parameter's own
            grad = getattr(self.scale, "grad", None)
        if isinstance(grad, torch.Tensor):
            grad = grad.detach().reshape(()).to(device=scale.device, dtype=torch.float64)
            if self.log_scale:  # dL/d log s, or dL/d log t = -dL/d log s
                observed = -grad if self.inverse else grad
            else:  # s: dL/ds * s; t = 1 / s: dL/d log s = -dL/dt * t
                observed = -grad * held if self.inverse else grad * scale
            values["temperature_log_scale_grad_observed"] = observed
        if self.clamp is not None:  # the bounds as the parameter's dtype holds them
            low, high = (float(torch.tensor(bound, dtype=dtype)) for bound in self.clamp)
            values["temperature_clamp_hit"] = ((parameter <= low) | (parameter >= high)).double()
        return values

    def said_of_logged(self, logged: dict[str, float], batch: BatchView) -> str | None:
        """Say when the closed form and the parameter's gradient part: more than 10 % apart
        (opposite signs included), beyond ``1e-4 s`` (float32 rounding of logits of size ``s``).
        They agree when the watched loss is the objective's only InfoNCE term and ``scale`` is
        the ``s`` it multiplies its scores by; a temperature ``t = 1 / s`` given as a scale, a
        wrong ``direction``, or another term of the objective on the parameter part them.

        Compared only when the gradient is the one the watched call's backward sent the
        parameter (not the ``.grad`` of a parameter that backward did not reach), and not
        after the first step said the matrix looks like logits read as cosines (the gap's
        cause, said then).

        Example:
            >>> import math, tempfile, warnings
            >>> import torch
            >>> import gradlab
            >>> from gradlab.monitor import Temperature, every
            >>> log_t = torch.nn.Parameter(torch.tensor(math.log(0.07)))  # a temperature
            >>> def info_nce(scores, positives):  # logits S / t
            ...     targets = positives.int().argmax(dim=1)
            ...     return torch.nn.functional.cross_entropy(scores / log_t.exp(), targets)
            >>> as_scale = Temperature(every(1), scale=log_t, log_scale=True, direction="i2t")
            >>> cosines = torch.nn.functional.normalize(torch.randn(8, 4), dim=1)
            >>> with warnings.catch_warnings(record=True) as said:
            ...     warnings.simplefilter("always")
            ...     with gradlab.Monitor(tempfile.mkdtemp(), quantities=[as_scale]) as monitor:
            ...         watched = monitor.watch(info_nce, inputs="scores")
            ...         positives = torch.eye(8, dtype=torch.bool)
            ...         watched((cosines @ cosines.T).requires_grad_(), positives).backward()
            ...         _ = monitor.step()
            >>> "inverse=True" in str(said[0].message)
            True
        """
        beyond = self._beyond_clamp(logged)
        if beyond is not None:
            return beyond
        if not self._own_gradient or self._told_of_logits:  # nothing to compare, or said
            return None
        closed = logged.get("temperature_log_scale_grad")
        observed = logged.get("temperature_log_scale_grad_observed")
        scale = logged.get("temperature_scale")
        if closed is None or observed is None or scale is None or not all(
            math.isfinite(v) for v in (closed, observed, scale)
        ):
            return None
        # opposite signs are always more than 10 % apart
        if abs(closed - observed) <= 0.1 * max(abs(closed), abs(observed)) + 1e-4 * abs(scale):
            return None
        return (f"temperature_log_scale_grad = {closed:.4g} (closed form) and the parameter's "
                f"gradient as dL/d log s, temperature_log_scale_grad_observed = {observed:.4g}, "
                "disagree: they agree when the watched loss is the objective's only InfoNCE "
                f"term and scale= is the s = {scale:.4g} it multiplies its scores by. A "
                "parameter holding log s (open_clip's logit_scale) needs log_scale=True; one "
                "holding the temperature t = 1 / s (logits S / t) needs "
                "Temperature(scale=..., inverse=True) (log_scale=True for log t); a wrong "
                "direction=, or another term of the objective on the parameter, also parts "
                "them")  # fmt: skip

    def _beyond_clamp(self, logged: dict[str, float]) -> str | None:
        """Say when the parameter, as held, lies past a bound of ``clamp`` by more than the
        parameter's rounding (a thousandth of the bound, or of 1): a loop that clamps it keeps
        it on the bound, so the bounds are likely in other units than the parameter (``log
        s`` bounds for a scale ``s`` without ``log_scale``, a scale's bounds for ``log s``)."""
        scale = logged.get("temperature_scale")
        if self.clamp is None or scale is None or not math.isfinite(scale) or scale <= 0:
            return None
        held = 1.0 / scale if self.inverse else scale
        if self.log_scale:
            held = math.log(held)
        low, high = self.clamp
        slack = 1e-3 * max(1.0, abs(low), abs(high))
        if low - slack <= held <= high + slack:
            return None
        what = ("log t" if self.inverse else "log s") if self.log_scale else (
            "t" if self.inverse else "s")
        return (f"the parameter as held, {what} = {held:.4g}, lies past its clamp=({low:g}, "
                f"{high:g}), so temperature_clamp_hit is 1: a loop that clamps the parameter "
                "keeps it on a bound, not past it (after its first clamp). clamp= bounds the "
                "parameter as held: log s with log_scale=True (open_clip: clamp=(0, "
                "math.log(100))), s without it (clamp=(1, 100)); if the parameter is clamped "
                "nowhere, leave clamp= out")


LARGEST_LOG_BOUND = 50.0
"""The largest ``|bound|`` of ``clamp`` taken without a word for a parameter held as a log:
``e^50`` (5e21) is no softmax scale a model trains to, so a larger bound is likely given in
the scale's own units (``clamp=(0, 100)`` for ``clamp=(0, math.log(100))``)."""


def _say(message: str) -> None:
    warnings.warn(f"gradlab.Monitor: {message}", RuntimeWarning, stacklevel=caller_stacklevel())


PER_POSITIVE = ("a query of this batch has several positives and the watched loss declares no "
                "softmax (gradlab.losses.SoftmaxLogits): {what} is InfoNCE's with the positives' "
                "mean over every candidate (SupCon's); a loss whose softmax runs over each "
                "positive and the negatives alone (pytorch-metric-learning's NTXentLoss) has "
                "{other} on such batches")
"""What ChanceLevel and Temperature say once of a batch they may not describe."""


def _several_positives(batch: BatchView) -> bool:
    """Whether a query of the step has more than one positive (one host read; none of a meta
    tensor, which holds no values: False)."""
    positives = batch.layout.positives
    return positives.device.type != "meta" and bool((positives.sum(dim=1) > 1).any())


def _scale_free(declared: object) -> bool:
    """Whether a loss's declaration (:class:`~gradlab.losses.SoftmaxLogits`) says it is no
    softmax and holds no scale (a triplet loss on cosine scores)."""
    return isinstance(declared, SoftmaxLogits) and not declared.info_nce and declared.scale is None
