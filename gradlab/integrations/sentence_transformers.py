"""A recording similarity for sentence-transformers: the score matrix its losses differentiate.

Give a sentence-transformers loss a :class:`RecordingSimilarity` and :meth:`gradlab.Monitor.watch`
(or :meth:`gradlab.integrations.transformers.GradlabTrainerCallback.watch` inside a
``SentenceTransformerTrainer``) reads the score matrix and ``dL/dS`` through hooks that only
read, so the loss gets a gradient anatomy::

    from sentence_transformers.sentence_transformer import losses
    from gradlab.integrations.sentence_transformers import RecordingSimilarity

    loss = losses.MultipleNegativesRankingLoss(model, similarity_fct=RecordingSimilarity())
    callback.watch(loss)           # or loss_fn = monitor.watch(loss) in a loop of your own

:func:`record_scores` does the same for a loss made already (``GISTEmbedLoss`` takes no
``similarity_fct`` argument: it wraps the loss's own cosine).

How the calls are read (the layout of the losses as of sentence-transformers 6.2):

* **MultipleNegativesRankingLoss** and **CachedMultipleNegativesRankingLoss** call the
  similarity once per direction they use, in the order ``query_to_doc``, ``query_to_query``,
  ``doc_to_query``, ``doc_to_doc`` (the cached loss: that sequence once per mini-batch of
  ``mini_batch_size`` queries). ``query_to_doc`` is the ``[B, B (1 + k)]`` matrix of the anchors
  against the positives and then the ``k`` columns of hard negatives: the positive of row ``i``
  is column ``i`` (``rank x B + i`` when ``gather_across_devices``), the columns past ``B`` are
  hard negatives. It is logged as ``anatomy_i2t_*``. ``doc_to_query`` (the symmetric term of
  **MultipleNegativesSymmetricRankingLoss**, or ``directions`` naming it) is logged as
  ``anatomy_t2i_*``: its columns are the documents as queries. The loss subtracts the positive
  pair's score once, from ``query_to_doc``, while ``doc_to_query`` holds the same score in its
  softmax: each direction is given its share of that target (the sum of a document's
  ``doc_to_query`` gradients moves from its positive to the pair's ``query_to_doc`` entry), so
  with ``partition_mode="per_direction"`` each direction's ``dL/dS`` is that of its own InfoNCE
  term, and with ``"joint"`` the target is split by each direction's softmax mass; the pair's
  net gradient is unchanged. The mini-batches of the cached
  loss are stitched back into one ``[Q, C]`` matrix and one ``dL/dS`` (the cached loss runs
  each mini-batch's backward inside its forward). ``query_to_query`` and ``doc_to_doc`` (extra
  negatives in a joint softmax) are not recorded. With them, with ``partition_mode="joint"``
  over several directions, or with ``hardness_mode`` weighting the negatives, the loss's
  softmax is not that of the recorded directions: ``ChanceLevel`` and ``Temperature`` do not
  apply, and the run header's ``not_logged`` says why.
* **GISTEmbedLoss** and **CachedGISTEmbedLoss** (per mini-batch of anchors) call it for the
  anchor-positive matrix, then (as configured) the anchor-anchor and positive-positive matrices
  and the anchor-negative matrices, each also for the guide model without gradient (not
  recorded); the calls are told apart by the embeddings they compare. The anchor-positive
  matrix, with the anchor-negative matrices as further columns, is logged as
  ``anatomy_i2t_*``; the pairs the guide masks as false negatives (set to ``-inf`` by the loss)
  are not candidates. The anchor-anchor and positive-positive blocks are not recorded (their
  rows are not all the anchors'), so ``ChanceLevel`` and, with those blocks,
  ``Temperature`` do not apply: the run header's ``not_logged`` says why.
* Any other loss: the first matrix with a gradient, positives on its diagonal.

The recorded view names the directions the loss computes (``BatchView.score_direction``):
``"i2t"`` for MultipleNegativesRankingLoss and GIST, ``"both"`` when ``doc_to_query`` is scored
too; ``Temperature`` follows it unless given its own ``direction``.

The Monitor never changes the loss: the similarity returns the wrapped function's matrix, value
for value and gradient for gradient, and diagnostics never pass through the loss's return value
(the trainer sums every entry of a loss that returns a dict).
"""

from __future__ import annotations

from collections.abc import Callable, Collection

import torch

from gradlab.errors import GradlabError
from gradlab.extras import missing_extra
from gradlab.integrations.recorded import RecordedScoresAdapter, Stitch
from gradlab.losses import SoftmaxLogits
from gradlab.monitor.adapters import (
    IN_BATCH_INSTEAD,
    LossAdapter,
    loss_name,
    matryoshka_dims_of_cached,
    register,
)
from gradlab.monitor.anatomy import Anatomy
from gradlab.monitor.batch import ScoreCapture
from gradlab.monitor.geometry import ChanceLevel, Temperature
from gradlab.validation import ScoreRecorderSlot

try:
    from sentence_transformers.util import cos_sim
except ImportError as error:  # pragma: no cover - exercised only without the package
    raise missing_extra("sentence_transformers", "sentence-transformers",
                        "gradlab.integrations.sentence_transformers") from error  # fmt: skip

__all__ = [
    "MNRL_DIRECTIONS",
    "RecordingSimilarity",
    "record_scores",
    "refuse_cached_matryoshka",
    "sentence_transformers_adapter",
]

MNRL_DIRECTIONS = ("query_to_doc", "query_to_query", "doc_to_query", "doc_to_doc")
"""The order in which MultipleNegativesRankingLoss computes its directions' matrices."""


class RecordingSimilarity(ScoreRecorderSlot, torch.nn.Module):
    """A similarity function for sentence-transformers losses whose matrices a Monitor reads.

    Returns ``similarity_fct(a, b)`` unchanged; while a :class:`gradlab.Monitor` listens (it sets
    ``score_recorder``), each matrix that carries a gradient is handed to it.

    Args:
        similarity_fct: the similarity to compute: ``cos_sim`` (sentence-transformers' default)
            when None; GIST's ``torch.nn.CosineSimilarity(dim=-1)`` works on its broadcast
            ``[B, 1, d]`` x ``[1, C, d]`` arguments too.

    Raises:
        GradlabError: ``similarity_fct`` is not callable.

    Example:
        >>> import torch
        >>> from sentence_transformers.util import cos_sim
        >>> from gradlab.integrations.sentence_transformers import RecordingSimilarity
        >>> similarity = RecordingSimilarity()
        >>> seen = []
        >>> similarity.score_recorder = lambda direction, matrix, _: seen.append(matrix.shape)
        >>> a = torch.randn(3, 4, requires_grad=True)
        >>> torch.equal(similarity(a, a), cos_sim(a, a)), seen
        (True, [torch.Size([3, 3])])
    """

    _recorder_signature = " (direction, matrix, mask)"

    def __init__(self, similarity_fct: Callable | None = None) -> None:
        super().__init__()
        if similarity_fct is not None and not callable(similarity_fct):
            raise GradlabError(
                "similarity_fct must be a callable (a, b) -> [Q, C] matrix, or None for "
                f"cos_sim; got {type(similarity_fct).__name__} {similarity_fct!r}"
            )
        self.similarity_fct = cos_sim if similarity_fct is None else similarity_fct

    operands: tuple[torch.Tensor, torch.Tensor] | None = None
    """``(a, b)`` of the call being recorded, while the recorder runs (else None)."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        matrix = self.similarity_fct(a, b)
        recorder = self.score_recorder
        if recorder is not None and isinstance(matrix, torch.Tensor) and matrix.requires_grad:
            self.operands = (a, b)  # the stitcher keeps the embeddings it compares
            try:
                recorder(None, matrix, None)  # the stitcher names the direction
            finally:
                self.operands = None
        return matrix

    @property
    def __name__(self) -> str:  # sentence-transformers names the similarity in model cards
        return getattr(self.similarity_fct, "__name__", type(self.similarity_fct).__name__)


def record_scores(loss: torch.nn.Module) -> torch.nn.Module:
    """Give a sentence-transformers loss a :class:`RecordingSimilarity` around its own
    ``similarity_fct`` (for losses made already, and for ``GISTEmbedLoss``); returns the loss.

    Args:
        loss: a sentence-transformers loss with a ``similarity_fct`` attribute.

    Raises:
        GradlabError: ``loss`` has no ``similarity_fct``.

    Example:
        >>> import torch
        >>> from gradlab.integrations.sentence_transformers import record_scores
        >>> loss = torch.nn.Module()
        >>> loss.similarity_fct = torch.nn.CosineSimilarity(dim=-1)  # as GISTEmbedLoss has
        >>> type(record_scores(loss).similarity_fct).__name__
        'RecordingSimilarity'
    """
    if isinstance(loss, type):
        raise GradlabError(
            f"loss must be a sentence-transformers loss made already (an instance); got the "
            f"class {loss.__name__}: record_scores({loss.__name__}(model, ...))"
        )
    current = getattr(loss, "similarity_fct", None)
    if not callable(current):
        raise GradlabError(
            f"loss must be a sentence-transformers loss with a similarity_fct; "
            f"{type(loss).__name__} has none"
        )
    if not isinstance(current, RecordingSimilarity):
        loss.similarity_fct = RecordingSimilarity(current)
    return loss


PAIR_LOSSES = frozenset({"CoSENTLoss", "AnglELoss"})
"""Losses on scored (sentence1, sentence2) pairs whose similarity returns a ``[B]`` vector
(``pairwise_cos_sim`` and kin): a ``RecordingSimilarity()`` around ``cos_sim`` breaks them."""

GIST_LOSSES = ("GISTEmbedLoss", "CachedGISTEmbedLoss")
"""The guided losses, whose calls are named by the embeddings they compare (module docstring)."""


def _is_a(loss: object, names: Collection[str]) -> bool:
    """Whether ``loss`` is of a class named in ``names``, or of a subclass of one (a user's
    subclass, made to capture its inputs, say, is the same loss)."""
    return any(cls.__name__ in names for cls in type(loss).__mro__)


def _is_gist(loss: object) -> bool:
    return _is_a(loss, GIST_LOSSES)


class _Stitch(Stitch):
    """A :class:`Stitch` that tells its stitcher when its capture's gradient is complete, and
    places the positives at ``rank x B + i`` with ``B`` the rank's whole batch (the rows of all
    its mini-batches, known at :meth:`finish`), not the first recorded piece's rows."""

    def __init__(self, direction: str, rank: int, on_complete: Callable[[], None]) -> None:
        super().__init__(direction)
        self.rank, self.on_complete = rank, on_complete

    def finish(self):
        rows = sum(piece.scores.shape[0] for piece in self.blocks[min(self.blocks)])
        self.offset = self.rank * rows
        return super().finish()

    def complete(self) -> None:
        super().complete()
        if self.capture is not None and self.capture.grad is not None:
            self.on_complete()


class _Stitcher:
    """The ``score_recorder`` of one logged loss call: names each recorded matrix (module
    docstring) and stitches mini-batches."""

    def __init__(self, loss: object) -> None:
        self.loss = loss
        self.calls = 0
        self.stitches: dict[str, Stitch] = {}
        self.queries: list[torch.Tensor] = []  # the i2t matrix's row chunks' embeddings
        self.candidates: dict[int, torch.Tensor] = {}  # its column blocks' embeddings
        self.rank = _rank_offset(loss)  # 0 unless the loss gathers across processes
        self.gathered = _gathers(loss)  # its candidates are every process's: no geometry
        self.gist = _is_gist(loss)
        # GIST: the anchors' address and the positives' (start, end) in memory, from its first
        # call, and each negative column's address -> its block
        self.gist_first: tuple[int, int, int] | None = None
        self.negatives: dict[int, int] = {}
        self.pairwise: tuple[int, ...] | None = None  # the shape of a similarity that is no matrix
        directions = getattr(loss, "directions", None)
        if isinstance(directions, tuple | list) and "query_to_doc" in directions:
            self.roles = [name for name in MNRL_DIRECTIONS if name in directions]
        else:
            self.roles = []  # any other loss: its first matrix only

    def record(self, _direction: object, matrix: torch.Tensor, _mask: object) -> None:
        if matrix.dim() != 2:  # a pairwise similarity (CoSENTLoss): no queries x candidates
            self.pairwise = tuple(matrix.shape)
            return
        if self.gist:
            role = self._gist_role()
        elif self.roles:
            role = self.roles[self.calls % len(self.roles)]  # MNRL's call order, per mini-batch
        else:
            role = "query_to_doc" if self.calls == 0 else None  # any other loss: the first
        self.calls += 1
        if role in ("query_to_doc", "gist_ap"):  # rows are the local queries
            self._stitch("i2t").add(matrix)
            self._keep_operands(0)
        elif role == "doc_to_query":  # similarity(queries, local_docs): columns are queries
            self._stitch("t2i").add(matrix, transposed=True)
        elif isinstance(role, int) and "i2t" in self.stitches:  # GIST: hard negative columns
            self.stitches["i2t"].add(matrix, block=role)
            self._keep_operands(role)

    def _gist_role(self) -> str | int | None:
        """GIST's and CachedGIST's calls, named by their operands' addresses: the first is the
        anchors (from row 0) against the positives; then per mini-batch of anchors, anchors
        against positives (``gist_ap``), anchors against anchors and positives against
        positives (None: not recorded), anchors against the k-th negatives (block k)."""
        a, b = self.loss.similarity_fct.operands  # set while the recorder runs
        if self.gist_first is None:
            start = b.data_ptr()
            self.gist_first = (a.data_ptr(), start, start + b.numel() * b.element_size())
            return "gist_ap"
        anchors, start, end = self.gist_first
        if b.data_ptr() == start:
            return None if start <= a.data_ptr() < end else "gist_ap"
        if b.data_ptr() == anchors:
            return None
        return self.negatives.setdefault(b.data_ptr(), len(self.negatives) + 1)

    def _keep_operands(self, block: int) -> None:
        """The embeddings the i2t matrix's piece compares: its rows' (block 0) and its columns'
        (once per block). GIST's ``[B, 1, d]`` and ``[1, C, d]`` broadcast become rows."""
        operands = getattr(getattr(self.loss, "similarity_fct", None), "operands", None)
        if operands is None:
            return
        a, b = (x.detach().reshape(-1, x.shape[-1]) for x in operands)
        if block == 0:
            self.queries.append(a)
        self.candidates.setdefault(block, b)

    def features(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The embeddings of the i2t matrix: its queries and its candidates, block by block;
        None when the candidates were gathered from other processes (this process's queries
        against every process's candidates would mix the local batch with the global one)."""
        if self.gathered or not self.queries or 0 not in self.candidates:
            return None
        blocks = [self.candidates[block] for block in sorted(self.candidates)]
        return torch.cat(self.queries), torch.cat(blocks)

    def _stitch(self, direction: str) -> Stitch:
        if direction not in self.stitches:
            self.stitches[direction] = _Stitch(direction, self.rank, self._split)
        return self.stitches[direction]

    def _split(self) -> None:
        """Once both directions have their gradient: give each direction its share of the
        positive pair's target.

        MultipleNegativesRankingLoss subtracts the positive pair's score once, from
        ``query_to_doc``; ``doc_to_query`` holds the same score again inside its softmax, so
        autograd gives the two recorded copies about ``-s/(2B)`` and ``+s/(2B)`` (module
        docstring). Each t2i query's (document's) gradients sum to its share of the target,
        ``s/(nB)`` for ``partition_mode="per_direction"``: that sum moves from its positive to
        the i2t positive of the same pair. The pair's net gradient is unchanged, and each
        direction's ``dL/dS`` is that of its own InfoNCE term (per_direction), or of the joint
        softmax with the target split by each direction's softmax mass (joint).
        """
        # Each stitch completes once (its gradient set when its last piece's arrives), so the
        # second completion of the two is the one moment both gradients are in.
        i2t, t2i = (self.stitches.get(name) for name in ("i2t", "t2i"))
        if i2t is None or t2i is None:
            return
        first, second = i2t.capture, t2i.capture
        if first is None or second is None or first.grad is None or second.grad is None:
            return
        share = second.grad.sum(dim=0)  # per document (the t2i capture's columns)
        second.grad = second.grad - second.positives * share  # bool x float: float
        first.grad = first.grad + first.positives * share.unsqueeze(1)

    def finish(self) -> list[ScoreCapture]:
        """The captures, ``i2t`` first."""
        return [self.stitches[name].finish() for name in ("i2t", "t2i") if name in self.stitches]


def _gathers(loss: object) -> bool:
    """Whether the loss gathers its candidates from several processes."""
    distributed = torch.distributed
    return bool(getattr(loss, "gather_across_devices", False) and distributed.is_available()
                and distributed.is_initialized() and distributed.get_world_size() > 1)  # fmt: skip


def _rank_offset(loss: object) -> int:
    """This process's rank when the loss gathers the batch across processes, else 0 (the
    positives of the local rows are then at ``rank x B + i``)."""
    if not getattr(loss, "gather_across_devices", False):
        return 0
    distributed = torch.distributed
    if distributed.is_available() and distributed.is_initialized():
        return distributed.get_rank()
    return 0


def sentence_transformers_adapter(loss_fn: object, inputs: str | None) -> LossAdapter | None:
    """The adapter maker for sentence-transformers losses with a :class:`RecordingSimilarity`
    (registered with :func:`gradlab.monitor.adapters.register` when this module is imported):
    the loss itself, or the ``LossForward`` of
    :meth:`~gradlab.integrations.transformers.GradlabTrainerCallback.watch`.

    Example:
        >>> from gradlab.integrations.sentence_transformers import sentence_transformers_adapter
        >>> sentence_transformers_adapter(len, None) is None
        True
    """
    module = getattr(loss_fn, "loss_module", loss_fn)
    if inputs not in (None, "scores") or not isinstance(module, torch.nn.Module):
        return None
    similarity = getattr(module, "similarity_fct", None)
    if not isinstance(similarity, RecordingSimilarity):
        return None
    if _is_gist(module) and similarity.similarity_fct is cos_sim:  # RecordingSimilarity()
        raise GradlabError(
            f"{loss_name(module)} scores broadcast [B, 1, d] x [1, C, d] embeddings with its own "
            "similarity_fct (torch.nn.CosineSimilarity(dim=-1)), and its similarity_fct is "
            "RecordingSimilarity() around cos_sim, which takes [B, d] x [C, d]: make the loss "
            "with its own similarity_fct and wrap it with "
            "gradlab.integrations.sentence_transformers.record_scores(loss)"
        )
    if type(module).__name__ in PAIR_LOSSES:  # a subclass: its [B] vector is named at the call
        if similarity.similarity_fct is cos_sim:  # RecordingSimilarity() by its default
            told = ("but its similarity_fct is RecordingSimilarity() around cos_sim (its "
                    "default), which makes a [B, B] matrix the loss cannot take: leave the "
                    "loss's own similarity_fct")  # fmt: skip
        else:  # record_scores around its own pairwise similarity
            told = "not an in-batch [Q, C] matrix"
        raise GradlabError(
            f"{loss_name(module)} scores (sentence1, sentence2) pairs with a pairwise similarity "
            f"(a [B] vector), {told}: the Monitor reads no loss on scored pairs. "
            f"{IN_BATCH_INSTEAD}"
        )
    return _SentenceTransformersAdapter(
        f"the watched loss {loss_name(module)}", similarity, lambda: _Stitcher(module),
        loss_fn=module, masked_candidates=_is_gist(module), features=True,
        hint=": is its similarity_fct the RecordingSimilarity the Monitor watches, and does the "
        "call run with gradients enabled?",
    )  # fmt: skip


class _SentenceTransformersAdapter(RecordedScoresAdapter):
    """The recorded-scores adapter that names the loss's directions and leaves out the
    quantities that do not apply to GIST.

    GIST's softmax per anchor runs over the columns its guide did not mask, a number that
    differs from row to row, and (``contrast_anchors``, ``contrast_positives``) over the
    anchor-anchor and positive-positive blocks, which are not recorded: ``ChanceLevel``'s
    ``ln C`` of the recorded columns is not its chance level, and ``Temperature``'s closed form
    over the recorded columns is not its ``dL/d log s``.
    """

    def not_applicable(self, name: str) -> str | None:
        loss = self.loss_fn
        if _is_a(loss, ("ContrastiveTensionLossInBatchNegatives",)):
            if name in (ChanceLevel.name, Temperature.name, Anatomy.name):
                return (f"does not apply to {loss_name(loss)}: its loss is the mean of a softmax "
                        "over the rows and one over the columns of the one matrix it records, "
                        "so its dL/dS holds both directions, which this reads as one")  # fmt: skip
            return None
        if not _is_gist(loss):
            reason = _softmax_beyond_the_recorded(loss)
            if reason is not None and name in (ChanceLevel.name, Temperature.name):
                return f"does not apply to {loss_name(loss)}: {reason}"
            return None
        if name == ChanceLevel.name:
            blocks = (" and the anchor-anchor and positive-positive blocks"
                      if loss.contrast_anchors or loss.contrast_positives else "")  # fmt: skip
            return (f"does not apply to {loss_name(loss)}: its softmax runs over the columns its "
                    f"guide did not mask (a number per anchor){blocks}, not ln C of the recorded "
                    "columns")  # fmt: skip
        if (loss.contrast_anchors or loss.contrast_positives) and name == Temperature.name:
            return (f"does not apply to {loss_name(loss)} with contrast_anchors or "
                    "contrast_positives (both on by default): its softmax also runs over the "
                    "anchor-anchor and positive-positive blocks, which are not recorded; make "
                    "it with contrast_anchors=False, contrast_positives=False to log the "
                    "temperature")  # fmt: skip
        return None

    def capture(self, tensors: list, loss: object, tau: float, *, recorded=(), **options: object):
        """The recorded-scores view, with the directions the loss computes
        (:attr:`~gradlab.monitor.batch.BatchView.score_direction`): ``"both"`` when it scores
        ``doc_to_query`` too, else ``"i2t"``.

        Raises:
            GradlabError: the call recorded no matrix, or its similarity scores pairs (a
                vector, as CoSENTLoss's), not every query against every candidate.
        """
        refuse_cached_matryoshka(self.loss_fn)
        shape = getattr(recorded[0], "pairwise", None) if recorded else None
        if shape is not None and not recorded[0].stitches:
            raise GradlabError(
                f"{self.name}'s similarity_fct returned a {list(shape)} tensor, not a [Q, C] "
                "score matrix: the Monitor reads losses that score every query against every "
                "candidate (MultipleNegativesRankingLoss, GISTEmbedLoss and their cached "
                "forms), not losses on scored pairs"
            )
        batch = super().capture(tensors, loss, tau, recorded=recorded, **options)
        stitcher = recorded[0]  # the view exists: the stitcher recorded a matrix
        batch.score_direction = "both" if "doc_to_query" in stitcher.roles else "i2t"
        batch.softmax = SoftmaxLogits(_softmax_scale(self.loss_fn))  # directions: just above
        return batch


def _softmax_beyond_the_recorded(loss: object) -> str | None:
    """Why a MultipleNegativesRankingLoss's softmax is not that of its recorded directions
    (``ChanceLevel``'s ``ln C`` and ``Temperature``'s closed form read those), or None:
    ``query_to_query`` or ``doc_to_doc`` blocks (not recorded), a ``"joint"`` softmax over
    several directions, or hardness weighting of the negatives."""
    directions = tuple(getattr(loss, "directions", ()) or ())
    extra = [name for name in ("query_to_query", "doc_to_doc") if name in directions]
    if extra:
        return (f"its directions {extra} add score blocks to its softmax, which are not "
                "recorded")  # fmt: skip
    if getattr(loss, "partition_mode", None) == "joint" and len(directions) > 1:
        return (f"partition_mode='joint' puts its directions {list(directions)} in one softmax, "
                "not one per recorded direction")  # fmt: skip
    if getattr(loss, "hardness_mode", None) is not None and getattr(
            loss, "hardness_strength", 0.0):  # fmt: skip
        return (f"hardness_mode={loss.hardness_mode!r} weights its negatives by their scores: "
                "its softmax is not that of the recorded scores")  # fmt: skip
    return None


def refuse_cached_matryoshka(loss: object) -> None:
    """Refuse a cached loss inside ``MatryoshkaLoss``, which replaces its ``calculate_loss`` by
    a ``CachedLossDecorator`` that scores every mini-batch again for each dimension within one
    call: the recorded pieces of all dimensions cannot be told apart (they were stitched into
    one matrix and failed with torch's 'Sizes of tensors must match'). Checked when a logged
    call is read (MatryoshkaLoss is usually made around the watched loss) and by
    :meth:`~gradlab.integrations.transformers.GradlabTrainerCallback.watch`.

    Raises:
        GradlabError: ``loss`` is a cached loss wrapped by ``MatryoshkaLoss``.

    Example:
        >>> import torch
        >>> from gradlab.integrations.sentence_transformers import refuse_cached_matryoshka
        >>> refuse_cached_matryoshka(torch.nn.Module())  # not inside MatryoshkaLoss: accepted
    """
    dims = matryoshka_dims_of_cached(loss)
    if dims is not None:
        raise GradlabError(
            f"the watched loss {loss_name(loss)} runs inside MatryoshkaLoss (dims {dims}), which "
            "scores each of its mini-batches once per dimension within one call: the Monitor "
            "cannot tell the dimensions' matrices apart. Inside MatryoshkaLoss watch the "
            "uncached loss (MultipleNegativesRankingLoss, GISTEmbedLoss: the records describe "
            "the smallest dimension), or watch the cached loss without MatryoshkaLoss"
        )


def _softmax_scale(loss: object) -> float | torch.Tensor | None:
    """The scale the loss multiplies the recorded similarities by: its ``scale`` (the
    MultipleNegativesRankingLoss family), ``1 / temperature`` (GIST), else None. A learnable
    one (a one-value tensor, as a ``torch.nn.Parameter`` put in its place) is read as the 0-d
    tensor it holds at the call, without a read to the host."""
    for name, invert in (("scale", False), ("temperature", True)):
        value = getattr(loss, name, None)
        if isinstance(value, torch.Tensor) and value.numel() == 1 and value.is_floating_point():
            value = value.detach().reshape(())
            return 1.0 / value if invert else value
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return 1.0 / value if invert else float(value)
    return None


register(sentence_transformers_adapter)
