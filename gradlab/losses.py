"""Thin ``nn.Module`` wrappers: validate in ``__init__``, forward is one call into functional.

Every loss derives from :class:`RankingLoss`, which gives it ``validate=``, the count of
batches without ranking signal (``degenerate_batches``, one :class:`DegenerateBatchWarning`
per instance, pointing at the caller's line) and the class attribute :attr:`~RankingLoss.input_form`
that says what the first argument is. Argument names follow the glossary (``docs/glossary.md``):

* embedding losses: ``loss(embeddings, labels)``, pytorch-metric-learning's convention;
* cross-modal SmoothAP and Blackbox AP by keyword:
  ``loss(queries, candidates=candidates, positives=positives)``;
* score losses: ``loss(scores, positives)`` on a ``[Q, C]`` score matrix.

SigLIP's sigmoid loss, a score loss too, is :class:`gradlab.SigLIPLoss` (module
:mod:`gradlab.siglip_loss`).
"""

from __future__ import annotations

import inspect
import warnings
from typing import ClassVar, NamedTuple

import torch
from torch import nn

from gradlab.errors import GradlabError, caller_stacklevel
from gradlab.functional.blackbox_ap import blackbox_ap_loss
from gradlab.functional.fappy import check_delta_min, check_normalization, fappy_deltas, fappy_loss
from gradlab.functional.fastap import check_num_bins
from gradlab.functional.losses import (
    check_call_form,
    fastap_loss,
    has_ranking_signal,
    smooth_ap_loss,
)
from gradlab.functional.precision import call_form_checked
from gradlab.functional.score_losses import (
    DIRECTIONS,
    LEARNABLE_TEMPERATURE,
    REDUCTIONS,
    check_margin,
    max_violation_triplet_loss,
    nt_xent_loss,
)
from gradlab.validation import (
    ScoreRecorderSlot,
    check_bool,
    check_embeddings_and_labels,
    check_interpolation,
    check_temperature,
    count_noun,
    finite_flag,
    non_finite_message,
    refuse_learnable,
    value_checks_enabled,
)

__all__ = [
    "BlackboxAPLoss",
    "DegenerateBatchWarning",
    "FAPPYLoss",
    "FastAPLoss",
    "MaxViolationTripletLoss",
    "NTXentLoss",
    "RankingLoss",
    "SmoothAPLoss",
    "SoftmaxLogits",
]

LEARNABLE_TAU = ("SmoothAPLoss scores cosines, so no scaling of the embeddings stands in for "
                 "one; 1 - gradlab.functional.smooth_ap(scores / tau, positives, tau=1.0) on a "
                 "score matrix of yours learns it, and float(tau) fixes it at its value")
"""What a learnable SmoothAP ``tau`` needs: the sigmoid reads ``D / tau`` for ``D`` a difference
of scores, so the functional form on scores divided by the parameter gives it its gradient;
the module's cosines are unchanged by a scale of the embeddings."""

INPUT_FORMS = ("embeddings", "scores", "in_batch_scores")
"""The values of :attr:`RankingLoss.input_form`."""


class DegenerateBatchWarning(UserWarning):
    """A loss got a batch in which no query has both a positive and a negative: no ranking
    signal. Its value is 0 with a zero gradient, but for NT-Xent on queries with only
    positives (a softmax over them) and for ``SmoothAPLoss(include_query=True)`` on one item
    per class (each query its own positive); the warning says which.

    Example:
        >>> import torch
        >>> from gradlab import SmoothAPLoss
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     loss = SmoothAPLoss(0.05)(torch.randn(4, 3), torch.arange(4))  # all singletons
        >>> float(loss), caught[0].category.__name__
        (0.0, 'DegenerateBatchWarning')
    """


class RankingLoss(nn.Module):
    """Base of every gradlab loss: input checks, degenerate-batch accounting, input form.

    A batch in which no query has both a positive and a negative (an empty batch, one item per
    class, a single class) has no ranking signal: the embedding losses (SmoothAP, FastAP, FAPPY,
    Blackbox AP) and VSE++'s triplet loss return 0 with zero gradients (SmoothAP with
    ``include_query=True`` on one item per class excepted: each query is its own positive,
    ranked against the others); NT-Xent is 0 only
    without positives (on one class its softmax still spreads over the positives, with a
    gradient), and SigLIP, whose pairs are each their own binary problem, neither warns nor
    counts. Such a batch is usually a sampler bug, so the first one raises a
    :class:`DegenerateBatchWarning`
    (a ``UserWarning``, once per loss instance; silence it with
    ``warnings.filterwarnings("ignore", category=DegenerateBatchWarning)``) and every such batch
    is counted in ``degenerate_batches``, which a :class:`gradlab.Monitor` logs. The warning
    names the first frame outside gradlab and torch (:func:`gradlab.errors.caller_stacklevel`):
    the line that called the loss, however it was wrapped.

    Attributes:
        input_form: class attribute, ``"embeddings"`` (the first argument is ``[B, d]``
            embeddings, or ``[Q, d]`` queries in the cross-modal form), ``"scores"`` (a
            ``[Q, C]`` score matrix) or ``"in_batch_scores"`` (a ``[B, B]`` score matrix of
            a batch against itself, each query's own column no candidate). A
            :class:`gradlab.Monitor` reads it, so ``watch(loss)`` needs no ``inputs=`` for
            gradlab's losses.
        validate: refuse NaN/inf inputs and count degenerate batches (on by default). Both
            ride on one host read per call; ``False`` skips them (see each loss for what is
            then read back, if anything).
        degenerate_batches: how many batches without ranking signal this instance has seen.
            A plain attribute, not in ``state_dict()``: a run resumed from a checkpoint
            counts from 0 unless it restores the count itself.

    Example:
        >>> from gradlab import BlackboxAPLoss, FAPPYLoss, FastAPLoss, MaxViolationTripletLoss
        >>> from gradlab import NTXentLoss, RankingLoss, SmoothAPLoss
        >>> losses = (SmoothAPLoss, FastAPLoss, FAPPYLoss, BlackboxAPLoss, NTXentLoss,
        ...           MaxViolationTripletLoss)
        >>> all(issubclass(cls, RankingLoss) for cls in losses)
        True
        >>> NTXentLoss.input_form, SmoothAPLoss.input_form
        ('scores', 'embeddings')
    """

    input_form: ClassVar[str] = "embeddings"
    degenerate_message: ClassVar[str] = (
        "no query in this batch has both a positive and a negative (an empty batch, one item "
        "per class, or a single class), so the loss has no ranking signal (0, with a zero "
        "gradient); check the sampler (a batch needs two or more items of a class and another "
        "class). Warned once per loss instance; loss.degenerate_batches counts such batches."
    )
    masked_degenerate_message: ClassVar[str] = (
        "no query in this batch has both a positive and a negative: no row of positives holds "
        "both a True and a False (no candidates or no queries at all, or, where positives "
        "comes from labels, one item per class or a single class), so the loss has no ranking "
        "signal (0, with a zero gradient); check "
        "how positives is built, and the sampler it comes from. Warned once per loss instance; "
        "loss.degenerate_batches counts such batches."
    )
    """The warning of a call given a ``positives`` mask (the cross-modal form): it names the
    mask, where :attr:`degenerate_message` speaks of the labels' classes."""

    def __init__(self, validate: bool = True) -> None:
        super().__init__()
        self.validate = check_bool("validate", validate)
        self.degenerate_batches = 0

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if cls.input_form not in INPUT_FORMS:
            raise GradlabError(
                f"{cls.__name__}.input_form must be one of {INPUT_FORMS}; got {cls.input_form!r}"
            )
        # a misspelt keyword, of the loss's call or of its constructor, is said as gradlab's
        # functions say it: a CallFormError (a GradlabError and a TypeError) with the signature
        for method in ("__init__", "forward"):
            own = cls.__dict__.get(method)
            if inspect.isfunction(own) and not getattr(own, "refuses_misfit_calls", False):
                setattr(cls, method, call_form_checked(own, method=True))

    @property
    def softmax_logits(self) -> SoftmaxLogits:
        """What this loss says of its logits (:class:`SoftmaxLogits`): an AP loss is no
        softmax over logits and holds no logit scale (its ``tau`` is a sigmoid's width), so
        InfoNCE's chance level ``ln C`` and the closed form of a scale's gradient do not apply
        to it; the losses on a score matrix say their own.

        Example:
            >>> from gradlab import SmoothAPLoss
            >>> SmoothAPLoss(0.01).softmax_logits.info_nce
            False
        """
        return SoftmaxLogits(info_nce=False)

    def _on_degenerate(self, masked: bool = False) -> None:
        """Count a batch without ranking signal; warn on the first (at the caller's line),
        of its ``positives`` mask when ``masked`` (the cross-modal form), else of its labels."""
        self.degenerate_batches += 1
        if self.degenerate_batches == 1:
            said = self.masked_degenerate_message if masked else self.degenerate_message
            warnings.warn(
                f"{type(self).__name__}: {said}",
                DegenerateBatchWarning,
                stacklevel=caller_stacklevel(),
            )

    def _check_in_batch(self, embeddings: torch.Tensor, labels: torch.Tensor) -> None:
        """With ``validate``: finite embeddings and the degenerate count, in one host read.

        Shapes and dtypes are checked first (metadata only), so the flags are well defined.
        """
        check_embeddings_and_labels(embeddings, labels)
        if not self.validate or not value_checks_enabled():
            return
        flags = torch.stack((finite_flag(embeddings), has_ranking_signal(labels))).tolist()
        if not flags[0]:
            raise GradlabError(non_finite_message("embeddings", embeddings))
        if not flags[1]:
            self._on_degenerate()

    def _on_masked_degenerate(self) -> None:
        """:meth:`_on_degenerate` of a call given a ``positives`` mask."""
        self._on_degenerate(masked=True)


class SmoothAPLoss(RankingLoss):
    """``1 - mean smooth AP`` (Brown et al., ECCV 2020, Eq. 1; Bleeker & de Rijke, Eq. 5).

    Call it two ways:

    * ``loss(embeddings, labels)``: in-batch retrieval with cosine similarity; every item
      queries all the others (see :mod:`gradlab.functional.layouts` for ``include_query``).
    * ``loss(queries, candidates=candidates, positives=positives)``: cross-modal retrieval,
      ``queries [Q, d]`` against ``candidates [C, d]`` with a ``[Q, C]`` bool positive mask.
      By keyword only: a third positional argument raises a :class:`GradlabError` that shows
      this form.

    Queries without a positive (a singleton class, a caption with no image) are left out of
    the mean; with ``include_query=True`` every query is its own positive, so a singleton's
    query stays in the mean (its AP ranks its own score against the others). Degenerate
    batches are counted and warned about as :class:`RankingLoss` says;
    that accounting reads the group sizes the loss reads back anyway, so it runs with
    ``validate=False`` too.

    Second derivatives are exact: under ``create_graph=True`` the backward differentiates the
    plain forward instead of the closed form (at the memory cost of ``backward="autograd"``).
    A query with a positive but a NaN AP makes the loss NaN (see ``docs/loss_reliability.md``).

    Args:
        tau: sigmoid temperature, finite and at least ``1e-30`` (``1/tau`` must fit float32;
            the paper uses 0.01).
        include_query: in-batch only (refused in a cross-modal call); count the query as its
            own candidate and positive, as the official Smooth-AP code and
            pytorch-metric-learning do.
        validate: refuse NaN/inf embeddings. The check shares the call's single host
            synchronisation (the group sizes), so it costs no extra sync; ``False`` skips it.

    Example:
        >>> import torch
        >>> from gradlab import SmoothAPLoss
        >>> loss_fn = SmoothAPLoss(tau=0.01)
        >>> emb = torch.tensor([[1.0, 0.1], [0.9, 0.0], [0.0, 1.0], [0.1, 0.9]])
        >>> round(loss_fn(emb, torch.tensor([0, 0, 1, 1])).item(), 4)
        0.0
        >>> images, captions = emb[:2], emb[2:]  # image 0 ranks its caption second: AP 1/2
        >>> round(loss_fn(images, candidates=captions, positives=torch.eye(2) > 0).item(), 4)
        0.25
    """

    input_form = "embeddings"

    def __init__(
        self, tau: float = 0.01, include_query: bool = False, validate: bool = True
    ) -> None:
        super().__init__(validate)
        if isinstance(tau, torch.Tensor) and tau.requires_grad:  # float(tau) would freeze it
            refuse_learnable("tau", tau, LEARNABLE_TAU)
        self.tau = check_temperature("tau", tau)
        self.include_query = check_bool("include_query", include_query)

    def forward(
        self,
        embeddings: torch.Tensor,
        labels: torch.Tensor | None = None,
        *extra: object,
        candidates: torch.Tensor | None = None,
        positives: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``loss(embeddings, labels)`` or ``loss(queries, candidates=..., positives=...)``."""
        return smooth_ap_loss(
            embeddings, labels, *extra, candidates=candidates, positives=positives,
            tau=self.tau, include_query=self.include_query, validate=self.validate,
            on_degenerate=self._on_degenerate if positives is None else self._on_masked_degenerate,
            name=type(self).__name__,
        )  # fmt: skip

    @property
    def degenerate_message(self) -> str:  # type: ignore[override]
        """:attr:`RankingLoss.degenerate_message`; with ``include_query=True`` it says that a
        batch of one item per class still has a loss and a gradient (each query is its own
        positive, ranked against the others).

        Example:
            >>> from gradlab import SmoothAPLoss
            >>> "is not 0" in SmoothAPLoss(include_query=True).degenerate_message
            True
        """
        if not self.include_query:
            return RankingLoss.degenerate_message
        return (
            "no query in this batch has both a positive besides itself and a negative (an "
            "empty batch, one item per class, or a single class). With include_query=True "
            "each query is its own positive: on a single class the loss is 0 with a zero "
            "gradient, but on one item per class it is not 0: each query ranks its own score "
            "against the others, a gradient that pulls no two items together; check the "
            "sampler (a batch needs two or more items of a class and another class). Warned "
            "once per loss instance; loss.degenerate_batches counts such batches."
        )

    def extra_repr(self) -> str:
        return f"tau={self.tau}, include_query={self.include_query}"


class _InBatchLoss(RankingLoss):
    """A loss defined on one batch only: ``loss(embeddings, labels)``, no cross-modal form."""

    input_form = "embeddings"

    def forward(
        self,
        embeddings: torch.Tensor,
        labels: torch.Tensor | None = None,
        *extra: object,
        candidates: torch.Tensor | None = None,
        positives: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``loss(embeddings, labels)``."""
        check_call_form(type(self).__name__, labels, extra, candidates, positives, False)
        self._check_in_batch(embeddings, labels)
        return self._in_batch_loss(embeddings, labels)

    def _in_batch_loss(
        self, embeddings: torch.Tensor, labels: torch.Tensor
    ) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError


class FAPPYLoss(_InBatchLoss):
    """FAPPY, the multi-scale false-positive-probability loss (FAPPY paper, Algorithm 1).

    ``loss(embeddings, labels)``; cosine similarities, scales 2.0 halving while at least
    ``delta_min`` (the default 0.01: down to 0.015625; 0.1: down to 0.125).
    ``normalization="paper"`` (default) divides each scale's sum by all positive pairs as
    Algorithm 1 prints it; ``"official"`` divides the running loss by the scale's active pairs as
    the authors' Caffe layer does. In-batch only: its functional core,
    :func:`gradlab.functional.fappy_loss`, pairs the items of one batch. Plain autograd:
    second derivatives (``create_graph=True``) are exact.

    Args:
        delta_min: the narrowest bin width allowed, in ``[2**-20, 1]`` (above 1 only the
            scale 2.0 would run, where a positive pair counts only at cosine -1: a loss of 0
            on any other batch).
        normalization: ``"paper"`` or ``"official"``.
        validate: refuse NaN/inf embeddings and count degenerate batches (one host read);
            with float16 embeddings, also refuse when backward runs a gradient float16 cannot
            hold (:func:`gradlab.functional.fappy_loss`). With ``False`` the core still refuses
            non-finite similarities (it bins them).

    Example:
        >>> import torch
        >>> from gradlab import FAPPYLoss
        >>> FAPPYLoss(delta_min=0.01).deltas[:3]
        [2.0, 1.0, 0.5]
        >>> emb = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
        >>> float(FAPPYLoss(delta_min=0.25)(emb, torch.tensor([0, 0, 1, 1])))
        0.0
    """

    input_form = "embeddings"

    def __init__(
        self, delta_min: float = 0.01, normalization: str = "paper", validate: bool = True
    ) -> None:
        super().__init__(validate)
        self.delta_min = check_delta_min(delta_min)
        self.normalization = check_normalization(normalization)

    @property
    def deltas(self) -> list[float]:
        """The bin widths a call runs, from 2.0 halving while at least :attr:`delta_min` (read
        from it at each access: a ``delta_min`` changed after construction is the one used)."""
        return fappy_deltas(self.delta_min)

    def _check_in_batch(self, embeddings: torch.Tensor, labels: torch.Tensor) -> None:
        check_embeddings_and_labels(embeddings, labels)  # values: fappy_loss's one read

    def _in_batch_loss(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        # validate passed on: with float16 embeddings it also sets up the refusal of a
        # gradient float16 cannot hold (returned as inf otherwise)
        return fappy_loss(embeddings, labels, self.delta_min, self.normalization,
                          validate=self.validate, on_degenerate=self._on_degenerate)  # fmt: skip

    def extra_repr(self) -> str:
        return f"delta_min={self.delta_min}, normalization={self.normalization!r}"


class FastAPLoss(_InBatchLoss):
    """``1 - mean FastAP`` (Cakir et al., CVPR 2019) with ``num_bins`` distance bins.

    ``loss(embeddings, labels)``. In-batch only: its functional core,
    :func:`gradlab.functional.fastap`, builds each query's histogram from the batch. Plain
    autograd: second derivatives (``create_graph=True``) are exact.

    Args:
        num_bins: distance bins, an integer from 1 to 2**14.
        validate: refuse NaN/inf embeddings and count degenerate batches (one host read).

    Example:
        >>> from gradlab import FastAPLoss
        >>> FastAPLoss(num_bins=10)
        FastAPLoss(num_bins=10)
    """

    input_form = "embeddings"

    def __init__(self, num_bins: int = 10, validate: bool = True) -> None:
        super().__init__(validate)
        self.num_bins = check_num_bins(num_bins)

    def _in_batch_loss(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return fastap_loss(embeddings, labels, self.num_bins, validate=False)

    def extra_repr(self) -> str:
        return f"num_bins={self.num_bins}"


class BlackboxAPLoss(RankingLoss):
    """``1 - mean AP`` with blackbox-differentiated ranks (Rolinek et al., CVPR 2020).

    Defaults ``interpolation`` 4 and ``margin`` 0.02. The interpolation is the blackbox
    lambda for ranks counted ``1..C``; the authors' code ranks normalised by ``C``, so the
    lambda = 4 that Brown et al. (2020, supplementary) take from Rolinek et al. is
    ``interpolation = 4 * C`` here (``C = B - 1`` in-batch), not the default (see
    :func:`gradlab.functional.blackbox_ap`).
    Called as ``loss(embeddings, labels)`` or, cross-modal, as
    ``loss(queries, candidates=candidates, positives=positives)`` (its core,
    :func:`gradlab.functional.blackbox_ap`, takes any score matrix). Second derivatives are
    refused: ``create_graph=True`` raises a :class:`GradlabError`, as the blackbox backward is
    an interpolation, not a derivative.

    Args:
        interpolation: lambda for integer ranks (the authors' lambda times ``C``), positive
            and finite.
        margin: subtracted from positive scores before ranking, in ``[0, 1e30]`` (larger
            margins overflow float32).
        validate: refuse NaN/inf embeddings and count degenerate batches (one host read).
            With ``False`` the core still refuses NaN scores (a NaN has no rank).

    Example:
        >>> from gradlab import BlackboxAPLoss
        >>> BlackboxAPLoss()
        BlackboxAPLoss(interpolation=4.0, margin=0.02)
    """

    input_form = "embeddings"

    def __init__(
        self, interpolation: float = 4.0, margin: float = 0.02, validate: bool = True
    ) -> None:
        super().__init__(validate)
        self.interpolation = check_interpolation(interpolation)
        self.margin = check_margin(margin)

    def forward(
        self,
        embeddings: torch.Tensor,
        labels: torch.Tensor | None = None,
        *extra: object,
        candidates: torch.Tensor | None = None,
        positives: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``loss(embeddings, labels)`` or ``loss(queries, candidates=..., positives=...)``."""
        name = type(self).__name__
        if check_call_form(name, labels, extra, candidates, positives, True):
            self._check_in_batch(embeddings, labels)
            return blackbox_ap_loss(
                embeddings, labels, self.interpolation, self.margin, validate=False
            )
        return blackbox_ap_loss(
            embeddings, None, self.interpolation, self.margin, candidates=candidates,
            positives=positives, validate=self.validate,
            on_degenerate=self._on_masked_degenerate, name=name,
        )  # fmt: skip

    def extra_repr(self) -> str:
        return f"interpolation={self.interpolation}, margin={self.margin}"


class SoftmaxLogits(NamedTuple):
    """What a loss on a score matrix says of its logits, for the Monitor's
    :class:`~gradlab.monitor.Temperature`.

    Attributes:
        scale: ``s`` of its logits ``s * S`` (a number, or the 0-d tensor a call used), or
            None when it does not hold one.
        direction: the directions its softmax runs over (``"i2t"``, ``"t2i"``, ``"both"``), or
            None when not known.
        terms: with ``direction="both"``: 2 when it sums the two directions' InfoNCE terms
            (gradlab's :class:`NTXentLoss`), 1 when it averages them (CLIP's loss).
        info_nce: whether InfoNCE's closed form ``dL/d log s`` (the softmax-expected logit
            minus the positive logit) is its gradient: not for a sigmoid of each pair
            (SigLIP), a triplet loss, or a sum over the queries.
        logits: whether the score matrix the Monitor reads holds the logits ``s * S``
            already (open_clip's wrapper records ``get_logits``' output), not the scores
            ``S`` the scale multiplies (gradlab's losses, sentence-transformers' similarity).

    Example:
        >>> from gradlab import NTXentLoss
        >>> NTXentLoss(0.05, direction="i2t").softmax_logits
        SoftmaxLogits(scale=20.0, direction='i2t', terms=1, info_nce=True, logits=False)
    """

    scale: float | torch.Tensor | None = None
    direction: str | None = None
    terms: int = 1
    info_nce: bool = True
    logits: bool = False


class _ScoreMatrixLoss(ScoreRecorderSlot, RankingLoss):
    """Base of the losses called as ``loss(scores, positives)`` on a ``[Q, C]`` score matrix.

    ``score_recorder`` is ``None`` or a ``(direction, scores_alias, positives_mask)`` callable;
    a :class:`gradlab.Monitor` that watches the loss sets it on logged steps to read each
    direction's ``dL/dS`` (see :mod:`gradlab.functional.score_losses`). It never changes the
    loss value or its gradients.

    NaN/inf scores and an empty score matrix raise a :class:`GradlabError`. The finiteness
    check and the degenerate count share the call's one host read. Unlike SmoothAP these losses
    need no host read of their own, so ``validate=False`` makes the call read nothing back at
    all (for GPU pipelines): no finiteness check, and no degenerate-batch warning or count.
    """

    input_form = "scores"
    _recorder_signature = " (direction, scores, positives)"
    degenerate_message: ClassVar[str] = RankingLoss.masked_degenerate_message
    """Of the ``positives`` mask, which every call has (an empty score matrix is refused, not
    warned about)."""

    def __init__(self, direction: str, reduction: str, validate: bool = True) -> None:
        RankingLoss.__init__(self, validate)
        if direction not in DIRECTIONS:
            raise GradlabError(f"direction must be one of {DIRECTIONS}; got {direction!r}")
        if reduction not in REDUCTIONS:
            raise GradlabError(f"reduction must be one of {REDUCTIONS}; got {reduction!r}")
        self.direction = direction
        self.reduction = reduction
        self.score_recorder = None

    @property
    def softmax_logits(self) -> SoftmaxLogits:
        """What this loss says of its logits (:class:`SoftmaxLogits`): not a softmax here."""
        return SoftmaxLogits(direction=self.direction, info_nce=False)

    def _check_call(self, positives: object, extra: tuple) -> None:
        """Refuse a call other than ``loss(scores, positives)``, naming the form it takes."""
        form = (f"{type(self).__name__} takes loss(scores, positives): scores [Q, C] and "
                "positives, a [Q, C] bool mask or [B] integer labels")  # fmt: skip
        if extra:
            raise GradlabError(f"{form}; got {count_noun(2 + len(extra), 'positional argument')}")
        if positives is None:
            raise GradlabError(f"{form}; positives is missing")


class MaxViolationTripletLoss(_ScoreMatrixLoss):
    """VSE++'s max-violation triplet loss on a score matrix (Faghri et al. 2018, Eq. 5).

    ``loss(scores, positives)``: see :func:`gradlab.functional.max_violation_triplet_loss`.
    Plain autograd: second derivatives are exact.

    Args:
        margin: the margin ``alpha``, in ``[0, 1e30]`` (VSE++ uses 0.2).
        direction: ``"both"`` (the default: the image-to-text and text-to-image losses
            summed, as VSE++ does), ``"i2t"`` (rows are the queries) or ``"t2i"`` (columns).
        reduction: ``"mean"`` over the positive pairs of each direction, or ``"sum"``
            (VSE++'s code sums over the batch).
        validate: refuse NaN/inf scores and scores too large for the loss's dtype, and count
            degenerate batches (one host read); ``False`` skips both.

    Example:
        >>> import torch
        >>> from gradlab import MaxViolationTripletLoss
        >>> loss_fn = MaxViolationTripletLoss(margin=0.2)
        >>> scores = torch.tensor([[0.9, 0.8], [0.1, 0.5]])
        >>> round(loss_fn(scores, torch.eye(2, dtype=torch.bool)).item(), 4)
        0.3
    """

    def __init__(
        self,
        margin: float = 0.2,
        direction: str = "both",
        reduction: str = "mean",
        validate: bool = True,
    ) -> None:
        super().__init__(direction, reduction, validate)
        self.margin = check_margin(margin)

    def forward(
        self, scores: torch.Tensor, positives: torch.Tensor | None = None, *extra: object
    ) -> torch.Tensor:
        """``loss(scores [Q, C], positives [Q, C] bool)``."""
        self._check_call(positives, extra)
        return max_violation_triplet_loss(
            scores, positives, self.margin, direction=self.direction,
            reduction=self.reduction, on_scores=self.score_recorder, validate=self.validate,
            on_degenerate=self._on_degenerate if self.validate else None,
        )  # fmt: skip

    def extra_repr(self) -> str:
        return f"margin={self.margin}, direction={self.direction!r}, reduction={self.reduction!r}"


class NTXentLoss(_ScoreMatrixLoss):
    """NT-Xent / InfoNCE on a score matrix (Oord et al. 2018; SimCLR Eq. 1), several positives.

    ``loss(scores, positives)``: see :func:`gradlab.functional.nt_xent_loss`.
    Plain autograd: second derivatives are exact.

    Args:
        temperature: ``T``, finite and at least ``1e-30`` (SimCLR uses 0.1-0.5). A learnable
            temperature is refused: pass ``temperature=1.0`` and the scaled scores, as for
            CLIP's ``logit_scale``.
        direction: ``"both"`` (the default: the image-to-text and text-to-image losses
            summed, so chance level is ``2 ln C`` on a square matrix), ``"i2t"`` (rows are the
            queries) or ``"t2i"`` (columns).
        reduction: ``"mean"`` over the queries that have a positive, or ``"sum"``.
        validate: refuse NaN/inf scores and scores too large for the loss's dtype, and count
            degenerate batches (one host read); ``False`` skips both.

    Example:
        >>> import torch
        >>> from gradlab import NTXentLoss
        >>> loss_fn = NTXentLoss(temperature=1.0, direction="i2t")
        >>> scores = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
        >>> round(loss_fn(scores, torch.eye(2, dtype=torch.bool)).item(), 4)
        0.3133
    """

    degenerate_message: ClassVar[str] = (
        "no query in this batch has both a positive and a negative: no row of positives holds "
        "both a True and a False (where positives comes from labels: one item per class, or a "
        "single class), so the loss has no ranking signal: 0 with a zero gradient where no "
        "query has a positive, and where the queries have only positives a softmax spread over "
        "them, whose gradient ranks nothing; check how positives is built, and the sampler it "
        "comes from. Warned once per loss instance; loss.degenerate_batches counts such "
        "batches."
    )

    def __init__(
        self,
        temperature: float = 0.1,
        direction: str = "both",
        reduction: str = "mean",
        validate: bool = True,
    ) -> None:
        super().__init__(direction, reduction, validate)
        refuse_learnable("temperature", temperature, LEARNABLE_TEMPERATURE)
        self.temperature = check_temperature("temperature", temperature)

    @property
    def softmax_logits(self) -> SoftmaxLogits:
        """Its logits are ``S / temperature`` (:class:`SoftmaxLogits`); ``"both"`` sums the
        two directions; ``reduction="sum"`` is no mean over the queries, which the closed
        form is."""
        return SoftmaxLogits(1.0 / self.temperature, self.direction,
                             2 if self.direction == "both" else 1,
                             info_nce=self.reduction == "mean")  # fmt: skip

    def forward(
        self, scores: torch.Tensor, positives: torch.Tensor | None = None, *extra: object
    ) -> torch.Tensor:
        """``loss(scores [Q, C], positives [Q, C] bool)``."""
        self._check_call(positives, extra)
        return nt_xent_loss(
            scores, positives, self.temperature, direction=self.direction,
            reduction=self.reduction, on_scores=self.score_recorder, validate=self.validate,
            on_degenerate=self._on_degenerate if self.validate else None,
        )  # fmt: skip

    def extra_repr(self) -> str:
        return (
            f"temperature={self.temperature}, direction={self.direction!r}, "
            f"reduction={self.reduction!r}"
        )
