"""How the Monitor reads a watched loss: one registry of loss adapters.

An adapter says how a loss is called (on embeddings or on a score matrix), which of the step's
values it lets the Monitor provide (names of :data:`gradlab.monitor.quantity.NEEDS`), why the
others cannot be, whether the loss is SmoothAP (its tau and query convention, for the gradient
agreement) and where ``dL/dS`` comes from (for the anatomy). :func:`adapt` asks the registered
makers in turn (:data:`ADAPTERS`; :func:`register` puts a new one first):

* gradlab's :class:`~gradlab.losses.SmoothAPLoss`: embeddings; ``dL/dS`` is SmoothAP's exact
  gradient at the step's scores, or the matrix the loss recorded.
* pytorch-metric-learning's losses (through :mod:`gradlab.interop.pml`): embeddings; ``dL/dS``
  from a recording distance, PML's ``SmoothAPLoss`` recognised with its temperature.
* a loss declaring ``input_form = "scores"`` (gradlab's NT-Xent and VSE++ losses) or watched
  with ``inputs="scores"``: the score matrix; ``dL/dS`` from each direction's recorded matrix,
  else a hook on the ``scores`` argument. With ``inputs="in_batch_scores"`` the matrix is a
  batch compared with itself (``z @ z.T``): each query's own column is no candidate.
* any other loss: embeddings (``input_form = "embeddings"`` or undeclared), ``dL/dS`` only
  from a ``score_recorder`` it exposes.

Every capture is a hook that only reads: the gradients are the same with and without the
Monitor.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field

import torch

from gradlab.errors import GradlabError, caller_stacklevel
from gradlab.functional.layouts import RetrievalLayout
from gradlab.functional.losses import LossRecord, recording
from gradlab.functional.score_losses import score_positives
from gradlab.functional.smooth_ap import RecordedColumnWeights, recording_column_weights
from gradlab.losses import SoftmaxLogits
from gradlab.monitor.batch import BatchView, ScoreCapture, Workspace, as_called
from gradlab.monitor.quantity import NEEDS
from gradlab.validation import (
    WIDE_UNSIGNED,
    a_or_an,
    check_real_device,
    check_shape,
    check_tensor,
)

__all__ = [
    "ADAPTERS",
    "ATTACH_ADAPTER",
    "INPUTS",
    "LossAdapter",
    "adapt",
    "call_tensors",
    "declared_form",
    "describe_call",
    "embedding_adapter",
    "loss_name",
    "record_into",
    "register",
    "ships_with_gradlab",
]

INPUTS = ("embeddings", "scores", "in_batch_scores")
"""What the first argument of a watched loss is."""

SCORE_INPUTS = frozenset({"scores", "in_batch_scores"})
"""The forms whose first argument is a score matrix."""

FORMS = {
    "embeddings": "loss(embeddings [B, d], labels [B]) or loss(queries [Q, d], candidates="
    "[C, d], positives=[Q, C] bool)",
    "scores": "loss(scores [Q, C], positives [Q, C] bool or labels [B] of a square batch)",
    "in_batch_scores": "loss(scores [B, B] of a batch against itself, positives [B, B] bool or "
    "labels [B])",
}

EMBEDDING_VALUES = frozenset({"embeddings", "features", "loss", "embedding_grad", "scores",
                              "sorted_scores", "descending_order", "smooth_ap_terms"})  # fmt: skip
"""What a call on embeddings provides (the scores are their cosine matrix)."""

SCORE_VALUES = frozenset({"loss", "scores", "sorted_scores", "descending_order", "score_grad"})
"""What a call on a score matrix provides (the matrix is the layout; its gradient is hooked)."""

_KNOWN_NEEDS = frozenset(NEEDS)

ON_SCORES = "the loss is watched on a score matrix, not on embeddings"
IN_BATCH_INSTEAD = (
    "To log a run, train with (or add) an in-batch loss such as "
    "MultipleNegativesRankingLoss(model, similarity_fct=gradlab.integrations."
    "sentence_transformers.RecordingSimilarity()) and watch that"
)
"""What a sentence-transformers loss on scored pairs (CoSENT, AnglE, Triplet) is refused with:
the Monitor reads a [Q, C] matrix, which such a loss never makes."""

EXPOSE_SCORES = (
    "Watch a loss written on a score matrix with inputs='scores', use gradlab's losses, or give "
    "a pytorch-metric-learning loss distance=gradlab.interop.pml.RecordingCosineSimilarity()"
)

GRADLAB_EXPOSE_SCORES = (
    "Of gradlab's losses, SmoothAPLoss and those on a score matrix (NTXentLoss, "
    "MaxViolationTripletLoss, SigLIPLoss) expose theirs; this one scores inside"
)
"""EXPOSE_SCORES for a loss of gradlab's own that exposes no score matrix (FastAP, Blackbox AP,
FAPPY): "use gradlab's losses" would be no advice."""


def ships_with_gradlab(thing: object) -> bool:
    """Whether ``thing`` (a loss, a quantity) is one of gradlab's own: its class is defined in
    gradlab.

    Example:
        >>> import gradlab
        >>> ships_with_gradlab(gradlab.SmoothAPLoss(0.05)), ships_with_gradlab(len)
        (True, False)
    """
    return type(thing).__module__.split(".")[0] == "gradlab"


AT_TAU = ("operating_region", "gradient_counts", "relaxation_gap")
"""The quantities that read SmoothAP's sigmoid at the Monitor's tau on cosine scores (P, the
gradient counts, the relaxation gap): on a matrix of logits they measure nothing of the loss."""


@dataclass
class LossAdapter:
    """How the Monitor reads one watched loss: the form of its inputs, what it can provide the
    quantities, and why it cannot serve the others.

    Args:
        name: how messages name the loss (``"the watched loss NTXentLoss"``).
        inputs: ``"embeddings"``, ``"scores"`` or ``"in_batch_scores"``.
        provides: names of :data:`~gradlab.monitor.quantity.NEEDS` the Monitor can provide.
        missing: for needs it cannot, why (completes ``"needs <value>; <why>"``).
        loss_kind: ``"exclude_query"`` / ``"include_query"`` for a SmoothAP loss, else None.
        loss_tau: that SmoothAP loss's tau.
        recorder: the object whose ``score_recorder`` the Monitor sets on logged steps.
        smooth_ap: ``dL/dS`` is gradlab SmoothAP's exact gradient at the step's scores.
        loss_fn: the loss itself, whose own counts (``degenerate_batches``) a step reads.

    Example:
        >>> from gradlab.monitor import adapt
        >>> adapter = adapt(lambda scores, positives: scores.sum(), inputs="scores")
        >>> adapter.inputs, "score_grad" in adapter.provides, "embeddings" in adapter.provides
        ('scores', True, False)
    """

    name: str
    inputs: str
    provides: frozenset[str]
    missing: dict[str, str] = field(default_factory=dict)
    loss_kind: str | None = None
    loss_tau: float | None = None
    recorder: object | None = None
    smooth_ap: bool = False
    loss_fn: object | None = None
    read_tau: Callable[[], float | None] | None = field(default=None, repr=False, compare=False)
    """Reads the loss's tau as it is now (a schedule may change it after ``watch``): the
    Monitor reads it at each logged call into :attr:`loss_tau`, which it also gives at first
    when no ``loss_tau`` is passed."""
    _column_weights: list[RecordedColumnWeights] = field(
        default_factory=list, init=False, repr=False, compare=False
    )
    _workspace: Workspace | None = field(default=None, init=False, repr=False, compare=False)
    _warned_other_matrix: bool = field(default=False, init=False, repr=False, compare=False)
    _warned_not_scored: bool = field(default=False, init=False, repr=False, compare=False)
    inapplicable: dict[str, str] = field(default_factory=dict, repr=False, compare=False)
    """Quantities that do not apply to this loss though their needs are met, and why (an
    integration that knows the loss says; :meth:`not_applicable`)."""
    form_assumed: bool = field(default=False, repr=False, compare=False)
    """The loss declares no ``input_form`` and ``watch`` was given no ``inputs``: embeddings
    are assumed (a square first argument with labels is then named once, :meth:`read`)."""
    labels_may_be_targets: bool = field(default=False, repr=False, compare=False)
    """A loss of the user's own watched with ``inputs="scores"``: ``[B]`` labels that are a
    shuffled ``0..B-1`` may be ``cross_entropy`` targets (checked at each read call,
    :meth:`read`)."""
    reads_calls_again: bool = field(default=True, repr=False, compare=False)
    """Whether the batch of a call can be read again from its arguments after the call
    (``close()`` reads the last step's call so when the schedule skipped it); not for a loss
    read through the score matrices it records during a logged call
    (:class:`gradlab.integrations.recorded.RecordedScoresAdapter`)."""
    _warned_square: bool = field(default=False, init=False, repr=False, compare=False)
    _warned_diagonal: bool = field(default=False, init=False, repr=False, compare=False)
    _warned_targets: bool = field(default=False, init=False, repr=False, compare=False)
    _cross_modal: bool = field(default=False, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.loss_tau is None and self.read_tau is not None:
            self.loss_tau = self.read_tau()
    _hooks: list = field(default_factory=list, init=False, repr=False, compare=False)

    def remove_hooks(self) -> None:
        """Remove the gradient hooks of the last logged call (:meth:`capture`).

        The Monitor calls it at ``step()``, when backward has run, and :meth:`capture` before
        it hooks a new call: a tensor that outlives the step (a leaf optimised directly, a
        score matrix held by the model) would otherwise keep every step's hooks, and through
        them every step's batch.
        """
        for handle in self._hooks:
            handle.remove()
        self._hooks.clear()

    def not_applicable(self, name: str) -> str | None:
        """Why the quantity ``name`` does not apply to this loss although its needs are met
        (an integration that knows the loss says; see :meth:`why_not` for the needs), or None.

        A gradlab score loss that declares no InfoNCE mean (its ``softmax_logits``) has no
        chance level ``ln C``; a loss that declares that its matrix holds logits
        (``SoftmaxLogits(logits=True)``) gets none of the quantities of SmoothAP's sigmoid at
        the Monitor's tau, which read cosine scores.

        Example:
            >>> from gradlab.monitor import adapt
            >>> adapt(lambda embeddings, labels: embeddings.sum()).not_applicable("chance_level")
        """
        if name in self.inapplicable:
            return self.inapplicable[name]
        if name == "gradient_agreement" and self._cross_modal:
            return ("reads in-batch calls only, and the watched loss was called on queries "
                    "against candidates=, whose share of the analytic gradient is not read")
        declared = getattr(self.loss_fn, "softmax_logits", None)
        if name in AT_TAU and isinstance(declared, SoftmaxLogits) and declared.logits:
            return (f"reads SmoothAP's sigmoid at the Monitor's tau on cosine scores; the "
                    f"watched loss {loss_name(self.loss_fn)} declares that its matrix holds "
                    "logits (SoftmaxLogits(logits=True))")  # fmt: skip
        if name != "chance_level":
            return None
        if isinstance(declared, SoftmaxLogits) and not declared.info_nce:
            return (f"does not apply to {loss_name(self.loss_fn)}: it is no mean of InfoNCE terms, "
                    "so ln C is not its chance level")  # fmt: skip
        return None

    def why_not(self, needs: frozenset[str]) -> str | None:
        """Why a quantity with these needs cannot apply (its first unmet need), or None.

        Example:
            >>> from gradlab.monitor import adapt
            >>> adapt(lambda scores, positives: scores.sum(), inputs="scores").why_not(
            ...     frozenset({"embeddings"}))
            'needs the embeddings; the loss is watched on a score matrix, not on embeddings'
        """
        unmet = needs - self.provides  # one set difference: most quantities have none
        for need in NEEDS if unmet else ():  # in a fixed order: the same reason every time
            if need in unmet:
                why = self.missing.get(need, f"{self.name} does not provide it")
                return f"needs {NEEDS[need]}; {why}"
        if needs <= _KNOWN_NEEDS:
            return None
        unknown = sorted(needs - _KNOWN_NEEDS)
        return f"needs {', '.join(unknown)}, which the Monitor does not know"

    def read(self, tensors: list, loss: torch.Tensor | None, tau: float) -> BatchView:
        """The BatchView of a call (positional arguments, then tensor keyword arguments).

        Only the form's tensors are read: a second argument that is a 2-D float tensor is the
        candidates (the positive mask follows), any other is the labels; tensors after them
        (a per-sample ``weight=``, a positional extra) are ignored. Labels in ``uint16``,
        ``uint32`` or ``uint64``, which the user's loss may take and gradlab's functions refuse
        (:data:`~gradlab.validation.WIDE_UNSIGNED`), are read as int64.

        Raises:
            GradlabError: the call does not have this adapter's form, saying why.
        """
        _check_loss_value(loss)
        expected = FORMS[self.inputs]
        if len(tensors) < 2 or not all(isinstance(t, torch.Tensor) for t in tensors[:2]):
            raise GradlabError(f"expected {expected}; got {_describe(tensors)}")
        first = tensors[0]
        if first.dim() != 2 or not first.is_floating_point():
            raise GradlabError(f"expected {expected}; got {_describe(tensors)}: the first "
                               f"argument is a {first.dim()}-D {first.dtype} tensor, not a "
                               "2-D float one")  # fmt: skip
        second = tensors[1]
        if second.dim() == 1 and second.dtype in WIDE_UNSIGNED:
            # labels the user's loss takes, gradlab's functions do not (check_tensor): read as
            # int64, a one-to-one cast, so that the call is logged as it was
            second = second.long()
            tensors = [first, second, *tensors[2:]]
        if self.inputs == "embeddings" and second.dim() == 2 and second.dtype == torch.bool:
            raise GradlabError(  # the form of a loss on a score matrix
                f"expected {expected}; got {_describe(tensors)}, the form of a loss on a score "
                f"matrix: watch it with watch(loss, inputs='scores'), the Monitor's or a "
                f"callback's ({IN_BATCH_HINT})"
            )
        # a meta tensor has a shape and no values: nothing to compute or read back
        check_real_device(**{"scores" if self.inputs in SCORE_INPUTS else self.inputs: first,
                             "second argument": tensors[1]})
        in_batch = self.inputs == "in_batch_scores"  # a copy of its own, masked below
        embeddings, copied = (first.detach(), True) if in_batch else as_called(first)
        batch = BatchView(embeddings=embeddings, loss=None if loss is None else loss.detach(),
                          tau=tau, loss_kind=self.loss_kind, loss_tau=self.loss_tau)  # fmt: skip
        if not copied and not first.is_inference():  # (an inference tensor keeps no version)
            what = "scores" if self.inputs in SCORE_INPUTS else "embeddings"  # as the user
            batch.read_at_call[what] = (first, first._version)  # knows it
        # A count the watched loss keeps (gradlab's losses: batches without ranking signal).
        batch.degenerate_batches = getattr(self.loss_fn, "degenerate_batches", None)
        if self.inputs == "embeddings" and second.dim() == 1:
            self._name_a_square_first_argument(first)
        if self.inputs in SCORE_INPUTS:
            if second.dim() == 1 and self.labels_may_be_targets and not in_batch:
                self._refuse_targets(second)
            candidates = None
            if in_batch:
                if first.shape[0] != first.shape[1]:
                    raise GradlabError(f"expected {expected}; got scores of shape "
                                       f"{tuple(first.shape)}: a batch compared with itself "
                                       "gives a square matrix (a [Q, C] matrix of queries "
                                       "against other candidates is inputs='scores')")  # fmt: skip
                # the query's own column: no candidate, no positive, its value (often -inf,
                # the usual mask) never read; 0 there keeps the step's checks finite
                own = torch.eye(first.shape[0], dtype=torch.bool, device=first.device)
                batch.embeddings = batch.embeddings.masked_fill(own, 0.0)
                candidates = ~own
            mask = score_positives(batch.embeddings, tensors[1])
            if in_batch and second.dim() == 1 and self.labels_may_be_targets \
                    and _is_permutation(second):  # fmt: skip
                # read as labels, 0..B-1 leaves no row a positive: cross_entropy's targets
                mask = torch.nn.functional.one_hot(second.long(), first.shape[0]).bool()
            if in_batch:
                if second.dim() == 2:
                    self._warn_diagonal_positives(second)
                mask = mask & candidates
            batch.positives, batch.on_scores = mask, True
            batch.query_column_excluded = candidates is not None
            declared = getattr(self.loss_fn, "softmax_logits", None)  # gradlab's score losses
            batch.softmax = declared if isinstance(declared, SoftmaxLogits) else None
            # The score matrix is the layout: P, counts and the relaxation gap read it directly.
            batch.__dict__["layout"] = RetrievalLayout(batch.embeddings, mask, candidates)
        elif tensors[1].dim() == 2 and tensors[1].is_floating_point():  # candidates [C, d]
            # Further arguments (a weight, a margin) are not read: only the form's tensors are.
            if len(tensors) < 3 or not isinstance(tensors[2], torch.Tensor):
                raise GradlabError(
                    f"expected {expected}; got {_describe(tensors)}: two batches of "
                    "embeddings (a CLIP-style loss) are read as queries and candidates with "
                    "their [Q, C] bool positives as a third argument (torch.eye(B, "
                    "dtype=torch.bool) for paired rows); a loss that takes no such mask can "
                    "be watched on the score matrix it computes (inputs='scores')"
                )
            check_tensor("positives", tensors[2], ndims=(2,), kind="bool")
            check_shape("positives", tensors[2], (first.shape[0], tensors[1].shape[0]), "[Q, C]")
            batch.candidates, copied = as_called(tensors[1])
            batch.positives = tensors[2]
            if not copied and not tensors[1].is_inference():
                batch.read_at_call["candidates"] = (tensors[1], tensors[1]._version)
            self._cross_modal = True  # what the call showed: no gradient agreement
        else:
            check_tensor("labels", tensors[1], ndims=(1,), kind="integer")
            check_shape("labels", tensors[1], first.shape[:1], "one label per embedding")
            batch.labels = tensors[1]
        return batch

    def _name_a_square_first_argument(self, first: torch.Tensor) -> None:
        """Warn once when embeddings were assumed for a ``[B, B]`` first argument: as many
        dimensions as rows is also the shape of a score matrix, and a loss on one read as
        embeddings logs numbers of its score rows."""
        if not self.form_assumed or self._warned_square or first.shape[0] != first.shape[1] \
                or first.shape[0] < 2:  # one row: nothing is ranked, either way  # fmt: skip
            return
        self._warned_square = True
        rows = first.shape[0]
        warnings.warn(
            f"gradlab.Monitor: {self.name} declares no input_form and was watched without "
            f"inputs=, so its [{rows}, {rows}] first argument is read as {rows} embeddings of "
            f"dimension {rows}; if it is a score matrix (queries x candidates), watch it with "
            f"watch(loss, inputs='scores'), the Monitor's or a callback's ({IN_BATCH_HINT}), "
            "else pass inputs='embeddings' to say so",
            RuntimeWarning,
            stacklevel=caller_stacklevel(),
        )

    def _warn_diagonal_positives(self, positives: torch.Tensor) -> None:
        """Warn once (the first call read; one host read then) when a ``[B, B]`` positive mask
        watched as a batch against itself marks its diagonal: each query's own column, never a
        positive there (``torch.eye`` of paired rows would leave none)."""
        if self._warned_diagonal:
            return
        self._warned_diagonal = True
        marked = int(positives.diagonal().sum())
        if marked:
            warnings.warn(
                f"gradlab.Monitor: {self.name} was given positives with {marked} of "
                f"{positives.shape[0]} diagonal entries True, but with "
                "inputs='in_batch_scores' the diagonal is each query's own column, no candidate "
                "and no positive: they are left out (a mask that pairs view 2k with view "
                "2k + 1 marks the entries off the diagonal; later calls are not checked)",
                RuntimeWarning,
                stacklevel=caller_stacklevel(),
            )

    def own_scores(self, args: tuple, score_grad: bool) -> tuple:
        """The call's arguments with its score matrix (first, positional) replaced by a view of
        it, whose gradient is the watched loss's alone: a hook on the caller's own tensor also
        holds what other terms of the objective send through it (``loss + 0.1 * S.pow(2).mean()``).
        Only for a matrix read through its ``scores`` argument (no recorder) whose ``dL/dS`` a
        quantity reads; the view shares its values and storage, so the loss computes the same.

        Example:
            >>> import torch
            >>> from gradlab.monitor import adapt
            >>> scores = torch.randn(3, 3, requires_grad=True)
            >>> args = adapt(lambda s, p: s.sum(), inputs="scores").own_scores((scores,), True)
            >>> args[0] is scores, torch.equal(args[0], scores)
            (False, True)
        """
        if (self.inputs not in SCORE_INPUTS or not score_grad or self.recorder is not None
                or not args or not isinstance(args[0], torch.Tensor)
                or not args[0].requires_grad):  # fmt: skip
            return args
        return (args[0].view_as(args[0]), *args[1:])

    def _refuse_targets(self, labels: torch.Tensor) -> None:
        """Refuse ``[B]`` labels of a user's score loss that are ``0..B-1`` shuffled: read as
        labels (a positive where two rows' labels match) every row's positive is its own
        column, while as ``cross_entropy`` targets each row's positive is the column its
        target names. Labels that could be targets otherwise (every value a column, ``0..B-1``,
        some repeated) also read two ways, and are read as labels: the first such call warns
        (``RuntimeWarning``). Only ``0..B-1`` in order reads alike either way (each row's own
        column), and labels with a value outside ``0..B-1`` are no targets. Checked at each
        call the Monitor reads, in one host read of two flags."""
        order = torch.arange(labels.shape[0], device=labels.device)
        moved = (labels != order).any()
        columns = ((labels >= 0) & (labels < labels.shape[0])).all()
        shuffled, repeated = torch.stack(
            (_permutation_flag(labels, order) & moved, columns & moved)).tolist()  # one read
        if repeated and not shuffled and not self._warned_targets:
            self._warned_targets = True
            warnings.warn(
                f"gradlab.Monitor: {self.name}'s [B] second argument holds values that are all "
                "columns of the score matrix (0..B-1, some repeated), so it reads two ways: it "
                "is read as labels (a positive where two rows' labels match); if it holds "
                "cross_entropy targets (the column of each row's positive), the anatomy and P "
                "describe another mask than your loss trains on: give the loss a [Q, C] bool "
                "mask of the positives instead (positives = torch.nn.functional.one_hot("
                "targets, C).bool(), its targets = positives.int().argmax(1) inside the loss), "
                "and to say that they are labels, the mask labels[:, None] == labels[None, :]; "
                "later calls are not warned about",
                RuntimeWarning,
                stacklevel=caller_stacklevel(),
            )
        if shuffled:
            raise GradlabError(
                f"{self.name}'s [B] second argument holds 0..B-1 in another order, which reads "
                "two ways: as labels (the Monitor's reading: a positive where two rows' labels "
                "match, so each row's own column) or as cross_entropy targets (the column each "
                "row's target names); give the loss a [Q, C] bool mask of the positives "
                "instead (positives = torch.nn.functional.one_hot(targets, C).bool(), its "
                "targets = positives.int().argmax(1) inside the loss)"
            )

    @contextmanager
    def listening(self, score_grad: bool) -> Iterator[tuple[list[ScoreCapture], list]]:
        """While a logged call runs: gradlab's losses record what they computed
        (:func:`gradlab.functional.losses.recording`) and, when a quantity reads ``dL/dS``, the
        loss's ``score_recorder`` keeps each score matrix and SmoothAP's exact backward records
        its column weights (for the step's ``smooth_ap_terms``, :meth:`capture`). Yields the
        score matrices and the records.

        Example:
            >>> import torch
            >>> from gradlab.monitor import adapt
            >>> import gradlab
            >>> loss_fn = gradlab.NTXentLoss(0.1)
            >>> with adapt(loss_fn).listening(score_grad=True) as (recorded, records):
            ...     _ = loss_fn(torch.eye(3), torch.eye(3, dtype=torch.bool))
            >>> [capture.direction for capture in recorded], loss_fn.score_recorder is None
            (['i2t', 't2i'], True)
        """
        recorder = self.recorder if score_grad else None
        recorded: list[ScoreCapture] = []
        previous = None
        if recorder is not None:  # another Monitor's, when one watches the loss through this
            previous = getattr(recorder, "score_recorder", None)
            mine = record_into(recorded)
            recorder.score_recorder = mine if previous is None else _both(previous, mine)
        try:
            with recording() as records, ExitStack() as stack:
                if score_grad:  # dL/dS is read: SmoothAP's backward records its column weights
                    self._column_weights = stack.enter_context(recording_column_weights())
                yield recorded, records
        finally:
            if recorder is not None:
                recorder.score_recorder = previous

    def capture(
        self,
        tensors: list,
        loss: torch.Tensor | None,
        tau: float,
        *,
        record: LossRecord | None = None,
        recorded: Sequence[ScoreCapture] = (),
        score_grad: bool = False,
        embedding_grad: bool = False,
        loss_scale: bool = False,
    ) -> BatchView:
        """The BatchView of a logged call (:meth:`read`), with hooks that read the gradients
        the step's quantities need: ``dL/dS`` (:meth:`score_captures`) and the embeddings'.

        Args:
            tensors: the call's tensors (:func:`call_tensors`).
            loss: the value the call returned.
            tau: the Monitor's temperature.
            record: what gradlab's SmoothAP recorded during the call (its scores and ranks).
            recorded: the score matrices the loss handed its ``score_recorder``.
            score_grad: whether a quantity reads ``dL/dS``.
            embedding_grad: whether a quantity reads the embeddings' gradient.
            loss_scale: whether to read the factor put on the loss before backward even when
                neither gradient is read (a quantity reads a parameter's gradient).

        Raises:
            GradlabError: the call does not have this adapter's form.
        """
        batch = self.read(tensors, loss, tau)
        self.remove_hooks()  # the previous logged call's, if no step() came between
        weights, self._column_weights = self._column_weights, []
        if self.inputs == "embeddings":
            if record is not None and not _records_call(record, tensors):
                record = None  # SmoothAP of other embeddings (a projection inside the loss)
            batch.loss_record = record  # BatchView checks that it matches the layout
            if record is not None and weights:  # one per recorded SmoothAP call: the last
                batch.loss_column_weights = weights[-1]
                self._lend_workspace(batch, weights[-1])
        if score_grad:
            batch.score_captures = self.score_captures(batch, tensors[0], list(recorded))
        first = tensors[0]
        graph = isinstance(loss, torch.Tensor) and loss.requires_grad
        batch.embeddings_outside_graph = (
            embedding_grad and self.inputs == "embeddings" and not first.requires_grad and graph
        )  # fmt: skip
        batch.no_graph = bool(score_grad or embedding_grad) and not (first.requires_grad or graph)
        # a call that recorded no matrix: its embeddings' gradient tells a zero dL/dS from
        # pairs scored without the distance (BatchView.zero_unreached_score_grads)
        unscored = any(not capture.recorded for capture in batch.score_captures)
        if (score_grad or embedding_grad) and first.requires_grad:
            batch.gradient_arrived = False
            if (embedding_grad or unscored) and self.inputs == "embeddings":  # arrived, kept

                def arrived(grad: torch.Tensor) -> None:
                    batch.gradient_arrived = True
                    # a copy: autograd may keep this very tensor as a leaf's .grad, which the
                    # loop changes in place before step() (clipping, unscaling, zero_grad) and
                    # which a quantity must not change under the optimizer ([B, d]: cheap)
                    batch.embedding_grad = grad.detach().clone()  # returning None keeps grad

            else:

                def arrived(grad: torch.Tensor) -> None:  # read nothing: backward got here
                    batch.gradient_arrived = True

            self._hooks.append(first.register_hook(arrived))
        if score_grad or embedding_grad or loss_scale:
            self.follow_loss_scale(batch, loss)
        # hooked during the call, on whatever matrix the loss handed its recorder (perhaps a
        # tensor of the caller's); SmoothAP's recorded scores are its own, freed with the graph
        self._hooks.extend(capture.hook for capture in recorded if capture.hook is not None)
        return batch

    def follow_loss_scale(self, batch: BatchView, loss: object) -> None:
        """Hook ``loss`` (a one-element tensor in the graph; else nothing) for the factor the
        training loop puts on it before backward, kept in ``batch.loss_scale`` (read only)."""
        if not _is_scalar_in_graph(loss):
            return
        batch.loss_hooked = True

        def keep_scale(grad: torch.Tensor) -> None:
            batch.loss_scale = grad.detach().reshape(())

        self._hooks.append(loss.register_hook(keep_scale))

    def _lend_workspace(self, batch: BatchView, weights: RecordedColumnWeights) -> None:
        """The backward writes the column weights into the workspace that the previous step's
        view was given (the Monitor's own; no page faults), claimed by this step's view; before
        any step, into a fresh tensor."""
        batch.on_workspace = self._keep_workspace
        if batch.workspace is None and self._workspace is not None:
            batch.workspace = self._workspace
        if batch.workspace is not None:
            weights.buffer = batch.buffer

    def _keep_workspace(self, workspace: Workspace) -> None:
        self._workspace = workspace

    def score_captures(
        self, batch: BatchView, first: torch.Tensor, recorded: list[ScoreCapture]
    ) -> list[ScoreCapture]:
        """The score matrices whose ``dL/dS`` the anatomy reads (their hooks only read).

        ``recorded``: what the loss handed its ``score_recorder`` during the call.
        """
        captured = list(recorded)
        if self.inputs in SCORE_INPUTS and not captured:
            in_batch = batch.layout.candidate_mask is not None  # a batch against itself
            # the values at the call: the view's own copy, else one made here (no in-place
            # change of a model's output reaches the anatomy)
            scores = (batch.embeddings.clone() if "scores" in batch.read_at_call
                      else batch.embeddings)  # fmt: skip
            capture = ScoreCapture("in_batch" if in_batch else "both", scores,
                                   batch.positives, batch.layout.candidate_mask)  # fmt: skip
            if first.requires_grad:
                self._hooks.append(first.register_hook(_keep_into(capture)))
            captured = [capture]
        elif self.inputs == "embeddings" and batch.labels is not None:
            size = batch.labels.shape[0]
            in_batch = [c for c in captured if c.direction in (None, "in_batch")
                        and tuple(c.scores.shape) == (size, size)]  # fmt: skip
            if captured and not in_batch:
                self._warn_other_matrix(captured[0])
            elif not captured and self.recorder is not None and not self.smooth_ap:
                # no pair scored: dL/dS is 0, read as such once backward reaches the
                # embeddings (BatchView.zero_unreached_score_grads), on the step's scores
                self._warn_not_scored()
                in_batch = [ScoreCapture("in_batch", batch.layout.scores, batch.positives,
                                         recorded=False)]  # fmt: skip
            captured = in_batch[:1]
            for capture in captured:  # a recording distance: in-batch, the query not a candidate
                capture.direction = "in_batch"
                capture.positives = batch.layout.positives
                capture.candidates = batch.layout.candidate_mask
        if not captured and self.smooth_ap:
            captured = [_smooth_ap_capture(batch)]
        return captured

    def _warn_not_scored(self) -> None:
        """Warn once that a logged call computed no score matrix (a pytorch-metric-learning
        loss whose miner found no pair returns 0 without calling its distance): the anatomy
        of such steps is that of a zero ``dL/dS``, which would otherwise look like a fault."""
        if self._warned_not_scored:
            return
        self._warned_not_scored = True
        warnings.warn(
            f"gradlab.Monitor: {self.name} computed no score matrix on a logged call (a "
            "pytorch-metric-learning loss returns 0 without calling its distance when its "
            "miner finds no pair, and a few compute their similarities themselves): when no "
            "gradient reaches the embeddings, no pair received gradient through the scores "
            "and the anatomy logs such a call so (no active negative, every query without "
            "gradient); when one does, the loss scored its pairs without its distance and the "
            "step logs no anatomy (later ones are not warned about)",
            RuntimeWarning,
            stacklevel=caller_stacklevel(),
        )

    def _warn_other_matrix(self, capture: ScoreCapture) -> None:
        """Warn once that the loss scored the batch against another set (PML's ``ref_emb``, a
        proxy loss's proxies): its rows' positives are not the batch's, so no anatomy."""
        if self._warned_other_matrix:
            return
        self._warned_other_matrix = True
        warnings.warn(
            f"gradlab.Monitor: {self.name} scored the batch against another set (a "
            f"{list(capture.scores.shape)} matrix: ref_emb, proxies or a memory), not against "
            "itself; the anatomy reads the in-batch matrix only, so it is not logged for such "
            "calls (later ones are not warned about)",
            RuntimeWarning,
            stacklevel=caller_stacklevel(),
        )


TARGETS = ("embeddings", "queries", "scores", "labels", "candidates", "positives")
"""Keyword arguments read by name, in this order, after the positional ones (the glossary's
names: the first argument, then the targets)."""


FIRSTS = ("embeddings", "queries", "scores")
"""Names of a loss's first argument (the one whose gradient is read)."""


def _check_loss_value(loss: object) -> None:
    """Refuse what the watched loss returned unless it is one value (``None``: a module
    attached with ``Monitor.attach``, whose call returns no loss)."""
    if loss is None or (isinstance(loss, torch.Tensor) and loss.numel() == 1):
        return
    got = (f"a tensor of shape {tuple(loss.shape)}" if isinstance(loss, torch.Tensor)
           else a_or_an(type(loss).__name__))  # fmt: skip
    raise GradlabError(
        f"the watched loss returned {got}; the Monitor reads a loss that returns its value as "
        "one tensor of one element (reduce it, or watch a function that returns the loss alone)"
    )


def call_tensors(args: tuple, kwargs: dict) -> list:
    """The tensors of a loss call as the adapters read them: the positional arguments, then
    those given by keyword under a name of :data:`TARGETS` (in that order, whatever the call's),
    then any other tensor keyword argument. A call with neither a positional argument nor one
    of :data:`FIRSTS` starts with its first 2-D float tensor keyword (``features=``).

    Example:
        >>> q, c, p = torch.zeros(2, 3), torch.zeros(4, 3), torch.zeros(2, 4, dtype=torch.bool)
        >>> [t.shape[0] for t in call_tensors((q,), {"positives": p, "candidates": c})]
        [2, 4, 2]
        >>> [t.dim() for t in call_tensors((), {"labels": torch.arange(2), "features": q})]
        [2, 1]
    """
    named = [kwargs[name] for name in TARGETS if isinstance(kwargs.get(name), torch.Tensor)]
    others = [value for name, value in kwargs.items()
              if name not in TARGETS and isinstance(value, torch.Tensor)]  # fmt: skip
    if not args and not any(isinstance(kwargs.get(name), torch.Tensor) for name in FIRSTS):
        # The first argument under another name (features=, x=): the first 2-D float tensor.
        lead = next((index for index, value in enumerate(others)
                     if value.dim() == 2 and value.is_floating_point()), None)  # fmt: skip
        if lead is not None:
            named.insert(0, others.pop(lead))
    return [*args, *named, *others]


Maker = Callable[[object, str | None], LossAdapter | None]
"""``(loss_fn, inputs) -> LossAdapter | None``: an adapter if it recognises the loss."""


def loss_name(loss_fn: object) -> str:
    """The loss's function or class name, as messages show it.

    Example:
        >>> loss_name(len), loss_name(torch.nn.MSELoss())
        ('len', 'MSELoss')
    """
    return getattr(loss_fn, "__name__", None) or type(loss_fn).__name__


def embedding_adapter(loss_fn: object, recorder: object | None = None, **kwargs) -> LossAdapter:
    """The adapter of a loss called on embeddings (what a registered maker usually returns).

    Args:
        loss_fn: the loss.
        recorder: an object with a ``score_recorder`` the loss hands its score matrix to.
        **kwargs: ``loss_kind`` and ``loss_tau`` for a SmoothAP loss (``"include_query"`` when
            the query is its own candidate, else ``"exclude_query"``); ``smooth_ap=True`` for
            gradlab's SmoothAP (``dL/dS`` computed from the step's sigmoid block).

    Example:
        >>> adapter = embedding_adapter(len, loss_kind="include_query", loss_tau=0.05)
        >>> adapter.why_not(frozenset({"loss_kind"})) is None, adapter.why_not(
        ...     frozenset({"score_grad"})).startswith("needs dL/dS")
        (True, True)
    """
    name = f"the watched loss {loss_name(loss_fn)}"
    provides = EMBEDDING_VALUES | {"score_grad"} if recorder or kwargs.get("smooth_ap") \
        else EMBEDDING_VALUES  # fmt: skip
    if kwargs.get("loss_kind") is not None:
        provides = provides | {"loss_kind"}
    advice = GRADLAB_EXPOSE_SCORES if ships_with_gradlab(loss_fn) else EXPOSE_SCORES
    distance = getattr(loss_fn, "distance", None)
    if getattr(distance, "is_inverted", None) is False:  # PML's LpDistance: smaller is closer
        advice += (f" (its {type(distance).__name__} is a distance: with a similarity the loss's "
                   "margins must be set anew, e.g. ContrastiveLoss(pos_margin=1, neg_margin=0, "
                   "distance=RecordingCosineSimilarity()))")  # fmt: skip
    missing = {
        "loss_kind": f"{name} is not SmoothAP",
        "score_grad": f"{name} takes embeddings and exposes no score matrix. {advice}",
    }
    return LossAdapter(name, "embeddings", provides, missing, recorder=recorder, loss_fn=loss_fn,
                       **kwargs)  # fmt: skip


def _gradlab_smooth_ap(loss_fn: object, inputs: str | None) -> LossAdapter | None:
    from gradlab.losses import SmoothAPLoss

    if not isinstance(loss_fn, SmoothAPLoss) or inputs not in (None, "embeddings"):
        return None
    kind = "include_query" if loss_fn.include_query else "exclude_query"
    return embedding_adapter(loss_fn, loss_kind=kind, smooth_ap=True, read_tau=lambda: loss_fn.tau)


def _pytorch_metric_learning(loss_fn: object, inputs: str | None) -> LossAdapter | None:
    if type(loss_fn).__module__.split(".")[0] != "pytorch_metric_learning" or inputs not in (
        None, "embeddings"
    ):  # fmt: skip
        return None
    from gradlab.interop.pml import recording_distance, smooth_ap_temperature

    if type(loss_fn).__name__ == "SelfSupervisedLoss":
        raise GradlabError(
            "gradlab.Monitor does not read pytorch-metric-learning's SelfSupervisedLoss: it "
            "is called with two views, loss(embeddings, ref_emb), not with labels. With "
            "symmetric=True (its default) it is its inner loss on the two views stacked, the "
            "two views of an item one class: watch the inner loss and call it so, the same "
            "loss: loss_fn = monitor.watch(inner_loss); loss_fn(torch.cat([embeddings, "
            "ref_emb]), torch.arange(len(embeddings)).repeat(2)) (symmetric=False scores one "
            "view against the other, which the Monitor does not read)"
        )
    temperature = smooth_ap_temperature(loss_fn)
    kind = None if temperature is None else "include_query"  # PML's query is its own candidate
    elsewhere = _scored_elsewhere(loss_fn)
    adapter = embedding_adapter(
        loss_fn, None if elsewhere else recording_distance(loss_fn), loss_kind=kind,
        read_tau=None if temperature is None else lambda: smooth_ap_temperature(loss_fn),
    )  # fmt: skip
    if elsewhere:
        adapter.missing["score_grad"] = f"{adapter.name} {elsewhere}"
    if type(loss_fn).__name__ not in PML_INFO_NCE:
        adapter.inapplicable["chance_level"] = (
            f"does not apply to {loss_name(loss_fn)}: it is no mean of InfoNCE terms, so ln C "
            "is not its chance level")  # fmt: skip
    return adapter


PML_INFO_NCE = frozenset({"NTXentLoss", "SupConLoss"})
"""pytorch-metric-learning's losses that are means of InfoNCE terms (a softmax of each anchor's
positive against the batch): the only ones :class:`~gradlab.monitor.ChanceLevel` reads."""


_ONE_MATRIX = "the anatomy reads only a batch scored against itself"


def _scored_elsewhere(loss_fn: object) -> str | None:
    """Why a pytorch-metric-learning loss never hands the Monitor an in-batch score matrix
    (a recording distance would not change that), or None: it scores the batch against class
    weights (PML's ``WeightMixin``: ProxyAnchor, ProxyNCA, SoftTriple, the ArcFace family), its
    pairs' anchors against their positives (NPairs), its memory (CrossBatchMemory), or sums
    several losses (MultipleLosses)."""
    from pytorch_metric_learning import losses

    weighted = getattr(getattr(losses, "mixins", None), "WeightMixin", None)
    if weighted is not None and isinstance(loss_fn, weighted):
        return (f"scores the batch against its class weights (proxies), not against itself, "
                f"and {_ONE_MATRIX}")  # fmt: skip
    if isinstance(loss_fn, losses.NPairsLoss):
        return (f"scores the anchors of its pairs against their positives, not the batch "
                f"against itself, and {_ONE_MATRIX}")  # fmt: skip
    if isinstance(loss_fn, losses.CrossBatchMemory):
        return (f"scores the batch against its memory through its inner loss "
                f"{loss_name(loss_fn.loss)}, and {_ONE_MATRIX}")  # fmt: skip
    if isinstance(loss_fn, losses.MultipleLosses):
        return ("sums the losses it holds, and the anatomy reads the score matrix of one loss: "
                "watch an in-batch loss on its own, given "
                "distance=gradlab.interop.pml.RecordingCosineSimilarity()")  # fmt: skip
    return None


def _score_matrix(loss_fn: object, inputs: str | None) -> LossAdapter | None:
    form = inputs or declared_form(loss_fn)
    if form not in SCORE_INPUTS:
        return None
    recorder = loss_fn if hasattr(loss_fn, "score_recorder") else None
    missing = {need: ON_SCORES for need in EMBEDDING_VALUES - SCORE_VALUES} | {
        "loss_kind": ON_SCORES
    }
    return LossAdapter(f"the watched loss {loss_name(loss_fn)}", form, SCORE_VALUES,
                       missing, recorder=recorder, loss_fn=loss_fn,
                       labels_may_be_targets=declared_form(loss_fn) is None)  # fmt: skip


def _embeddings(loss_fn: object, inputs: str | None) -> LossAdapter:
    owners = (loss_fn, getattr(loss_fn, "distance", None))
    recorder = next((o for o in owners if o is not None and hasattr(o, "score_recorder")), None)
    adapter = embedding_adapter(loss_fn, recorder)
    adapter.form_assumed = inputs is None and declared_form(loss_fn) is None
    return adapter


def declared_form(loss_fn: object) -> str | None:
    """What the loss says its first argument is: its ``input_form`` (``"embeddings"`` or
    ``"scores"``, a class attribute of gradlab's losses), or None when it says nothing.

    Raises:
        GradlabError: an ``input_form`` that is neither.

    Example:
        >>> import gradlab
        >>> declared_form(gradlab.NTXentLoss(0.1)), declared_form(lambda e, y: e.sum())
        ('scores', None)
    """
    form = getattr(loss_fn, "input_form", None)
    if form is not None and form not in INPUTS:
        raise GradlabError(
            f"{loss_name(loss_fn)}.input_form must be one of {INPUTS}; got {form!r}"
        )
    return form


ADAPTERS: list[Maker] = [_gradlab_smooth_ap, _pytorch_metric_learning, _score_matrix, _embeddings]
"""The makers :func:`adapt` asks, in order; the last one accepts every loss."""


def register(maker: Maker) -> Maker:
    """Ask ``maker`` before the built-in adapters (usable as a decorator); returns it.

    Example:
        >>> @register
        ... def never(loss_fn, inputs):
        ...     return None
        >>> ADAPTERS[0] is never
        True
        >>> ADAPTERS.remove(never)
    """
    if not callable(maker):
        raise GradlabError(f"maker must be a callable (loss_fn, inputs) -> LossAdapter; "
                           f"got {maker!r}")  # fmt: skip
    ADAPTERS.insert(0, maker)
    return maker


def adapt(loss_fn: object, inputs: str | None = None) -> LossAdapter:
    """The adapter of a watched loss (the first registered maker that recognises it).

    Args:
        loss_fn: the loss, any callable.
        inputs: ``"embeddings"``, ``"scores"`` or None (the loss's declared form, else
            embeddings).

    Raises:
        GradlabError: ``loss_fn`` is not callable or is a class (not yet a loss), or ``inputs``
            is not allowed.

    Example:
        >>> from gradlab.monitor import adapt
        >>> import gradlab
        >>> adapt(gradlab.NTXentLoss(0.1)).inputs, adapt(gradlab.SmoothAPLoss(0.05)).loss_tau
        ('scores', 0.05)
    """
    if not callable(loss_fn):
        raise GradlabError(
            "loss_fn must be callable (a loss module or function); got "
            f"{type(loss_fn).__name__} {loss_fn!r}"
        )
    if isinstance(loss_fn, type):  # callable, but calling it builds a loss from the batch
        raise GradlabError(
            "loss_fn must be a loss module or function, not a class; got the class "
            f"{loss_fn.__name__} (create the loss first: {loss_fn.__name__}(...))"
        )
    if inputs is not None and inputs not in INPUTS:
        raise GradlabError(f"inputs must be one of {INPUTS} or None; got {inputs!r}")
    declared = declared_form(loss_fn)
    if inputs is not None and declared is not None and inputs != declared:
        own_column = (
            f"; {loss_name(loss_fn)} counts every column of its matrix as a candidate, a "
            "query's own included, so a batch's own matrix is no input of it (a loss of your "
            "own that masks the diagonal is watched with inputs='in_batch_scores')"
            if (inputs, declared) == ("in_batch_scores", "scores") else ""
        )
        raise GradlabError(  # the loss knows what it takes: the other reading logs nonsense
            f"inputs must match what {loss_name(loss_fn)} takes (its input_form: "
            f"{declared!r}), or be left out; got {inputs!r} (a subclass called on other "
            f"arguments declares its own input_form){own_column}"
        )
    _refuse_bare_logits_loss(loss_fn)
    _refuse_unrecorded_sentence_transformers_loss(loss_fn)
    for maker in ADAPTERS:
        adapter = maker(loss_fn, inputs)
        if adapter is not None:
            return adapter
    raise GradlabError(f"no loss adapter recognises {loss_name(loss_fn)}")  # pragma: no cover


def _refuse_bare_logits_loss(loss_fn: object) -> None:
    """A loss that makes its logits itself from features and a ``logit_scale`` (open_clip's
    ``ClipLoss`` and ``SigLipLoss``) cannot be read from its arguments: name its wrapper."""
    forward = getattr(loss_fn, "forward", None)
    if not callable(getattr(loss_fn, "get_logits", None)) or not callable(forward):
        return
    try:
        parameters = inspect.signature(forward).parameters
    except (TypeError, ValueError):
        return
    if "logit_scale" in parameters and not hasattr(loss_fn, "score_recorder"):
        name = type(loss_fn).__name__
        raise GradlabError(
            f"loss_fn {name} makes its logits itself from the features and logit_scale, which "
            f"the Monitor cannot read from its arguments; watch it wrapped: "
            f"monitor.watch(gradlab.integrations.open_clip.RecordingClipLoss({name}(...)))"
        )


def _refuse_unrecorded_sentence_transformers_loss(loss_fn: object) -> None:
    """A sentence-transformers loss is called on the tokenised features (a list of dicts), which
    the Monitor cannot read: only the score matrices its ``similarity_fct`` records can be. One
    without a recording similarity would log nothing, so it is named at ``watch``."""
    module = getattr(loss_fn, "loss_module", loss_fn)  # GradlabTrainerCallback's LossForward
    if not isinstance(module, torch.nn.Module):
        return
    if type(module).__module__.split(".")[0] != "sentence_transformers":
        return
    similarity = getattr(module, "similarity_fct", None)
    where = "gradlab.integrations.sentence_transformers"
    if isinstance(similarity, type):  # the class itself: sentence-transformers would call it
        raise GradlabError(
            f"loss_fn {type(module).__name__}'s similarity_fct is the class "
            f"{similarity.__name__}, not a similarity: make the loss with "
            f"similarity_fct={similarity.__name__}() (an instance)"
        )
    if hasattr(similarity, "score_recorder"):
        return
    if ".losses" not in type(module).__module__:  # the model, or one of its modules
        raise GradlabError(
            f"loss_fn {type(module).__name__} is a sentence-transformers model or module, not a "
            "loss: watch the loss you train it with, e.g. MultipleNegativesRankingLoss(model, "
            f"similarity_fct={where}.RecordingSimilarity())"
        )
    inner = getattr(module, "loss", None)
    wrapper = isinstance(inner, torch.nn.Module)  # MatryoshkaLoss, AdaptiveLayerLoss...
    dims = matryoshka_dims_of_cached(inner)
    if dims is not None:
        raise GradlabError(  # watched inside, it would be refused at its first call
            f"loss_fn {type(module).__name__} wraps the cached loss {type(inner).__name__}, "
            f"which it makes score each mini-batch once per dimension (dims {dims}) within one "
            "call: the Monitor cannot tell the dimensions' matrices apart, watched inside or "
            "outside. Inside MatryoshkaLoss watch an uncached loss (MultipleNegativesRanking"
            f"Loss, GISTEmbedLoss: {type(module).__name__}(model, monitor.watch(inner), ...), "
            "the records describing the smallest dimension), or watch the cached loss without "
            "MatryoshkaLoss"
        )
    if wrapper and hasattr(getattr(inner, "similarity_fct", None), "score_recorder"):
        raise GradlabError(  # the inner loss records already: only where to watch is wrong
            f"loss_fn {type(module).__name__} wraps {type(inner).__name__}, whose "
            "similarity_fct records its score matrix: watch the inner loss and wrap the "
            f"watched one ({type(module).__name__}(model, monitor.watch(inner), ...), or "
            "callback.watch(inner)); its last call of a step is logged (MatryoshkaLoss: the "
            "smallest dimension)"
        )
    if not wrapper and (similarity is None
                        or getattr(similarity, "__name__", "").startswith("pairwise_")):
        scored = ("pairs or triplets (no similarity_fct scores them as a matrix)"
                  if similarity is None else f"scored pairs (its similarity_fct, "
                  f"{similarity.__name__}, gives one score per pair)")  # fmt: skip
        raise GradlabError(
            f"loss_fn {type(module).__name__} is a sentence-transformers loss on {scored}, "
            "not an in-batch loss on a [Q, C] matrix of candidates: the Monitor has "
            f"no score matrix to read there. {IN_BATCH_INSTEAD}"
        )
    raise GradlabError(
        f"loss_fn {type(module).__name__} is a sentence-transformers loss whose score matrix the "
        "Monitor cannot read: it is called on tokenised features, and only the matrices its "
        "similarity_fct records are read. Make an in-batch loss that scores a [Q, C] matrix "
        "(MultipleNegativesRankingLoss, GISTEmbedLoss and their cached and symmetric forms) "
        f"with similarity_fct={where}.RecordingSimilarity(), or give it one around its own "
        f"with {where}.record_scores(loss); watch a wrapper such as MatryoshkaLoss through its "
        "inner loss"
    )


def matryoshka_dims_of_cached(loss: object) -> list | None:
    """The dimensions of the ``MatryoshkaLoss`` around ``loss`` when ``loss`` is a cached
    sentence-transformers loss (MatryoshkaLoss replaces its ``calculate_loss`` by a
    ``CachedLossDecorator``, which scores every mini-batch once per dimension within one
    call), else None.

    Example:
        >>> import torch
        >>> matryoshka_dims_of_cached(torch.nn.Module()) is None  # not inside MatryoshkaLoss
        True
    """
    decorator = getattr(loss, "__dict__", {}).get("calculate_loss")
    if type(decorator).__name__ != "CachedLossDecorator":
        return None
    return list(getattr(decorator, "matryoshka_dims", ()))


ATTACH_ADAPTER = LossAdapter(
    "attach()",
    "embeddings",
    EMBEDDING_VALUES - {"loss"},
    dict.fromkeys(("loss", "loss_kind", "score_grad"),
                  "attach() sees the embeddings only (use monitor.watch(loss_fn))"),
)  # fmt: skip
"""What :meth:`gradlab.Monitor.attach` reads: the module's output as embeddings, no loss."""


def _both(first: Callable, second: Callable) -> Callable:
    """A ``score_recorder`` that hands each matrix to two (nested Monitors' listenings)."""

    def record(direction: str, scores: torch.Tensor, positives: torch.Tensor | None) -> None:
        first(direction, scores, positives)
        second(direction, scores, positives)

    return record


def record_into(captured: list) -> Callable:
    """A ``score_recorder``: keep each recorded matrix (a copy) and read its gradient with a hook.

    Example:
        >>> kept = []
        >>> record_into(kept)("i2t", torch.eye(2), None)
        >>> kept[0].direction, kept[0].scores.shape
        ('i2t', torch.Size([2, 2]))
    """

    def record(direction: str, scores: torch.Tensor, positives: torch.Tensor | None) -> None:
        # Copies: an optimizer may update a leaf score matrix in place before step() reads it.
        capture = ScoreCapture(direction, scores.detach().clone(), positives)
        if scores.requires_grad:  # removed by the adapter once the step is read
            capture.hook = scores.register_hook(_keep_into(capture))
        captured.append(capture)

    return record


def _records_call(record: LossRecord, tensors: list) -> bool:
    """Whether ``record`` is of the watched call's own embeddings (and candidates): the very
    tensors it was given. A loss that calls SmoothAP on a transform of them (a projection head
    inside the loss, a second view) records another score matrix, of the same shape: not the
    cosine scores of the embeddings the Monitor describes."""
    if record.embeddings is not tensors[0]:
        return False
    return record.in_batch or (len(tensors) > 1 and record.candidates is tensors[1])


def _is_scalar_in_graph(value: object) -> bool:
    """Whether ``value`` is a one-element tensor that backward will reach (a loss)."""
    return isinstance(value, torch.Tensor) and value.requires_grad and value.numel() == 1


def _keep_into(capture: ScoreCapture):
    def keep(grad: torch.Tensor) -> None:
        capture.grad = grad.detach().clone()  # read only: returning None keeps it as it is

    return keep


def _smooth_ap_capture(batch: BatchView) -> ScoreCapture:
    """The score matrix of a gradlab SmoothAP call: hooked in the graph when the loss recorded
    it (``batch.record``), else SmoothAP's exact ``dL/dS`` from the step's shared sigmoid block
    (:meth:`BatchView.smooth_ap_loss_grad`) when the step is logged. No value is read."""
    record = batch.record
    if record is not None:
        direction = "in_batch" if record.in_batch else "i2t"
        capture = ScoreCapture(direction, record.scores.detach(), record.positives,
                               record.candidate_mask)  # fmt: skip
        if record.scores.requires_grad:
            record.scores.register_hook(_keep_into(capture))  # the loss's own: freed with it
        return capture
    if batch.labels is None:
        return ScoreCapture("i2t", None, batch.positives, None, smooth_ap_tau=batch.loss_tau)
    positives = batch.labels.unsqueeze(0) == batch.labels.unsqueeze(1)
    candidates = None
    if batch.loss_kind != "include_query":
        positives.fill_diagonal_(False)
        candidates = torch.ones_like(positives).fill_diagonal_(False)
    return ScoreCapture("in_batch", None, positives, candidates, smooth_ap_tau=batch.loss_tau)


def describe_call(args: tuple, kwargs: dict) -> str:
    """The arguments of a call as messages name them: position or keyword, type and shape.

    A list or tuple is named with its length and its items' kinds (sentence-transformers
    passes a list of feature dicts), ``None`` as itself.

    Example:
        >>> describe_call((torch.zeros(4, 3),), {"weight": torch.ones(4), "margin": 0.2})
        'args[0]=Tensor[4, 3], weight=Tensor[4], margin=float'
        >>> describe_call(([{"input_ids": 1}, {"input_ids": 2}], None), {})
        'args[0]=list of 2 dict, args[1]=None'
    """

    def kind(value: object) -> str:
        if value is None:
            return "None"
        if isinstance(value, (list, tuple)):
            kinds = list(dict.fromkeys(kind(item) for item in value))
            shown = ", ".join(kinds[:3]) + (", ..." if len(kinds) > 3 else "")
            return f"{type(value).__name__} of {len(value)}" + (f" {shown}" if kinds else "")
        shape = list(value.shape) if isinstance(value, torch.Tensor) else ""
        return f"{type(value).__name__}{shape}"

    named = [(f"args[{index}]", value) for index, value in enumerate(args)]
    named += list(kwargs.items())
    return ", ".join(f"{name}={kind(value)}" for name, value in named) or "no argument"


IN_BATCH_HINT = "inputs='in_batch_scores' if it scores a batch against itself, z @ z.T"
"""The form to name beside ``inputs='scores'``: a batch's own score matrix read as a
``[Q, C]`` one counts each query as its own candidate."""


def _permutation_flag(labels: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    """0-d bool on the device: ``[B]`` integer ``labels`` hold ``order`` (``0..B-1``), in any
    order."""
    return (torch.sort(labels).values == order).all()


def _is_permutation(labels: torch.Tensor) -> bool:
    """Whether ``[B]`` integer ``labels`` hold ``0..B-1``, in any order (one host read)."""
    return bool(_permutation_flag(labels, torch.arange(labels.shape[0], device=labels.device)))


def _describe(values) -> str:
    parts = [f"{type(v).__name__}{list(v.shape) if isinstance(v, torch.Tensor) else ''}"
             for v in values]  # fmt: skip
    return f"{len(values)} argument(s): ({', '.join(parts)})" if parts else "no argument"
