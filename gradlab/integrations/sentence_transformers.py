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
  ``anatomy_t2i_*``: its columns are the documents as queries. The mini-batches of the cached
  loss are stitched back into one ``[Q, C]`` matrix and one ``dL/dS`` (the cached loss runs
  each mini-batch's backward inside its forward). ``query_to_query`` and ``doc_to_doc`` (extra
  negatives in a joint softmax) are not recorded.
* **GISTEmbedLoss** calls it for the anchor-positive matrix, then (as configured) the
  anchor-anchor and positive-positive matrices and the anchor-negative matrix, each also for
  the guide model without gradient (not recorded). The anchor-positive matrix, with the
  anchor-negative matrix as further columns, is logged as ``anatomy_i2t_*``; the pairs the
  guide masks as false negatives (set to ``-inf`` by the loss) are not candidates.
* Any other loss: the first matrix with a gradient, positives on its diagonal.

The Monitor never changes the loss: the similarity returns the wrapped function's matrix, value
for value and gradient for gradient, and diagnostics never pass through the loss's return value
(the trainer sums every entry of a loss that returns a dict).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from gradlab.errors import GradlabError
from gradlab.extras import missing_extra
from gradlab.integrations.recorded import RecordedScoresAdapter, Stitch
from gradlab.monitor.adapters import LossAdapter, loss_name, register
from gradlab.monitor.batch import ScoreCapture
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
        >>> loss = torch.nn.Module()
        >>> loss.similarity_fct = torch.nn.CosineSimilarity(dim=-1)  # as GISTEmbedLoss has
        >>> type(record_scores(loss).similarity_fct).__name__
        'RecordingSimilarity'
    """
    current = getattr(loss, "similarity_fct", None)
    if not callable(current):
        raise GradlabError(
            f"loss must be a sentence-transformers loss with a similarity_fct; "
            f"{type(loss).__name__} has none"
        )
    if not isinstance(current, RecordingSimilarity):
        loss.similarity_fct = RecordingSimilarity(current)
    return loss


class _Stitcher:
    """The ``score_recorder`` of one logged loss call: names each recorded matrix by the loss's
    call order (module docstring) and stitches mini-batches."""

    def __init__(self, loss: object) -> None:
        self.loss = loss
        self.calls = 0
        self.stitches: dict[str, Stitch] = {}
        self.queries: list[torch.Tensor] = []  # the i2t matrix's row chunks' embeddings
        self.candidates: dict[int, torch.Tensor] = {}  # its column blocks' embeddings
        self.offset = _rank_offset(loss)
        directions = getattr(loss, "directions", None)
        if isinstance(directions, tuple | list) and "query_to_doc" in directions:
            self.roles = [name for name in MNRL_DIRECTIONS if name in directions]
        elif type(loss).__name__ == "GISTEmbedLoss":
            self.roles = ["gist_ap", *(["skip"] if getattr(loss, "contrast_anchors", False)
                                       else []),
                          *(["skip"] if getattr(loss, "contrast_positives", False) else []),
                          "gist_an"]  # fmt: skip
        else:
            self.roles = ["query_to_doc"]

    def record(self, _direction: object, matrix: torch.Tensor, _mask: object) -> None:
        if type(self.loss).__name__ == "GISTEmbedLoss":
            role = self.roles[self.calls] if self.calls < len(self.roles) else "skip"
        else:
            role = self.roles[self.calls % len(self.roles)]
        self.calls += 1
        if role in ("query_to_doc", "gist_ap"):  # rows are the local queries
            self._stitch("i2t", matrix.shape[0]).add(matrix)
            self._keep_operands(0)
        elif role == "doc_to_query":  # similarity(queries, local_docs): columns are queries
            self._stitch("t2i", matrix.shape[1]).add(matrix, transposed=True)
        elif role == "gist_an" and "i2t" in self.stitches:  # further columns: hard negatives
            self.stitches["i2t"].add(matrix, block=1)
            self._keep_operands(1)

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
        """The embeddings of the i2t matrix: its queries and its candidates, block by block."""
        if not self.queries or 0 not in self.candidates:
            return None
        blocks = [self.candidates[block] for block in sorted(self.candidates)]
        return torch.cat(self.queries), torch.cat(blocks)

    def _stitch(self, direction: str, local: int) -> Stitch:
        if direction not in self.stitches:
            self.stitches[direction] = Stitch(direction, self.offset * local)
        return self.stitches[direction]

    def finish(self) -> list[ScoreCapture]:
        """The captures, ``i2t`` first."""
        return [self.stitches[name].finish() for name in ("i2t", "t2i") if name in self.stitches]


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
        >>> sentence_transformers_adapter(len, None) is None
        True
    """
    module = getattr(loss_fn, "loss_module", loss_fn)
    if inputs not in (None, "scores") or not isinstance(module, torch.nn.Module):
        return None
    similarity = getattr(module, "similarity_fct", None)
    if not isinstance(similarity, RecordingSimilarity):
        return None
    return RecordedScoresAdapter(
        f"the watched loss {loss_name(module)}", similarity, lambda: _Stitcher(module),
        loss_fn=module, masked_candidates=type(module).__name__ == "GISTEmbedLoss",
        features=True, hint=": is its similarity_fct the RecordingSimilarity the Monitor "
        "watches, and does the call run with gradients enabled?",
    )  # fmt: skip


register(sentence_transformers_adapter)
