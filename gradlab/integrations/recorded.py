"""Losses read through the score matrices they record: one Monitor adapter for the integrations.

A loss from another library whose call arguments are not embeddings or a score matrix (token
ids for sentence-transformers, features and a learnable scale for open_clip) can still be read:
an object of that integration (a similarity function, a loss wrapper) hands each score matrix
the loss differentiates to a *collector* while a Monitor listens, and the collector turns them
into :class:`~gradlab.monitor.batch.ScoreCapture` s whose ``dL/dS`` hooks fill during backward.
:class:`RecordedScoresAdapter` is the Monitor's side: the first capture is the step's score
matrix (``inputs="scores"``), and every capture feeds the anatomy.

A collector has ``record(direction, matrix, mask)`` (the ``score_recorder`` protocol of
:class:`gradlab.validation.ScoreRecorderSlot`) and ``finish() -> list[ScoreCapture]``, called
once after the loss call. A collector that saw the embeddings the first capture compares also
has ``features() -> (queries [Q, d], candidates [C, d]) | None``: the geometry quantities read
them (:attr:`gradlab.monitor.batch.BatchView.features`).

Example:
    >>> class Collector:
    ...     def __init__(self):
    ...         self.kept = []
    ...     def record(self, direction, matrix, mask):
    ...         self.kept.append(matrix.detach())
    ...     def finish(self):
    ...         positives = torch.eye(len(self.kept[0]), dtype=torch.bool)
    ...         return [ScoreCapture("i2t", self.kept[0], positives)]
    >>> class Recorder:
    ...     score_recorder = None
    >>> recorder = Recorder()
    >>> adapter = RecordedScoresAdapter("the watched loss demo", recorder, Collector)
    >>> with adapter.listening(score_grad=False) as (recorded, _):
    ...     recorder.score_recorder(None, torch.eye(3), None)
    >>> adapter.capture([], torch.tensor(1.0), 0.01, recorded=recorded).scores.shape
    torch.Size([3, 3])
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

from gradlab.errors import GradlabError
from gradlab.functional.layouts import RetrievalLayout
from gradlab.monitor.adapters import SCORE_VALUES, LossAdapter
from gradlab.monitor.batch import BatchView, ScoreCapture

__all__ = ["RecordedScoresAdapter", "Stitch", "loss_value"]


class _Piece:
    """One recorded matrix, queries on its rows: its values when recorded, the live tensor (a
    loss may mask it in place afterwards) and its gradient once backward reaches it."""

    def __init__(self, matrix: torch.Tensor, transposed: bool, stitch: Stitch) -> None:
        oriented = matrix.T if transposed else matrix
        self.scores = oriented.detach().clone()
        self.live = oriented.detach()  # shares memory: sees the loss's in-place masking
        self.grad: torch.Tensor | None = None

        def keep(grad: torch.Tensor) -> None:
            self.grad = (grad.T if transposed else grad).detach().clone()  # read only
            stitch.complete()

        matrix.register_hook(keep)

    def masked(self) -> torch.Tensor:
        """Entries the loss set to ``-inf`` after they were recorded (not candidates)."""
        return torch.isneginf(self.live) & ~torch.isneginf(self.scores)


class Stitch:
    """One direction's score matrix recorded in pieces, joined into one capture.

    Pieces are row chunks (queries) of column blocks: :meth:`add` appends a piece's rows to a
    block; blocks are joined along the columns in the order of their numbers. The positive of
    query ``i`` is column ``offset + i`` of block 0; later blocks hold negatives only. Entries
    the loss set to ``-inf`` after recording are not candidates. The capture's ``dL/dS`` is
    set once backward has reached every piece.

    Args:
        direction: ``"i2t"``, ``"t2i"`` (the capture's columns are the queries) or ``"both"``.
        offset: column of the first query's positive (``rank x B`` when the candidates were
            gathered from every process).

    Example:
        >>> import torch
        >>> from gradlab.integrations.recorded import Stitch
        >>> stitch = Stitch("i2t")
        >>> first, second = torch.randn(2, 6).requires_grad_(), torch.randn(2, 6).requires_grad_()
        >>> stitch.add(first), stitch.add(second)  # two chunks of queries
        (None, None)
        >>> capture = stitch.finish()
        >>> (first.sum() + 2 * second.sum()).backward()
        >>> capture.grad[:, 0].tolist(), capture.positives[3].nonzero().item()
        ([1.0, 1.0, 2.0, 2.0], 3)
    """

    def __init__(self, direction: str, offset: int = 0) -> None:
        if direction not in ("i2t", "t2i", "both"):
            raise GradlabError(f"direction must be 'i2t', 't2i' or 'both'; got {direction!r}")
        self.direction, self.offset = direction, offset
        self.blocks: dict[int, list[_Piece]] = {}
        self.capture: ScoreCapture | None = None

    def add(self, matrix: torch.Tensor, block: int = 0, transposed: bool = False) -> None:
        """Record ``matrix`` (its rows are queries; ``transposed``: its columns are)."""
        self.blocks.setdefault(block, []).append(_Piece(matrix, transposed, self))

    def _joined(self, values: Callable[[_Piece], torch.Tensor]) -> torch.Tensor:
        return torch.cat([torch.cat([values(piece) for piece in self.blocks[block]])
                          for block in sorted(self.blocks)], dim=1)  # fmt: skip

    def finish(self) -> ScoreCapture:
        """The capture (its ``grad`` follows when backward has reached every piece)."""
        scores = self._joined(lambda piece: piece.scores)
        positives = torch.zeros_like(scores, dtype=torch.bool)
        width = self.blocks[min(self.blocks)][0].scores.shape[1]  # block 0: the positives
        rows = torch.arange(scores.shape[0], device=scores.device)
        rows = rows[self.offset + rows < width]
        positives[rows, self.offset + rows] = True
        # Candidates: all but what the loss masked (no host sync to ask whether it masked any).
        candidates = ~self._joined(_Piece.masked)
        if self.direction == "t2i":  # the capture's columns are the queries
            scores, positives, candidates = scores.T, positives.T, candidates.T
        self.capture = ScoreCapture(self.direction, scores, positives, candidates)
        self.complete()
        return self.capture

    def complete(self) -> None:
        """Set the capture's gradient once every piece has one (the pieces' hooks call it)."""
        pieces = [piece for block in self.blocks.values() for piece in block]
        if self.capture is None or any(piece.grad is None for piece in pieces):
            return
        grad = self._joined(lambda piece: piece.grad)
        self.capture.grad = grad.T if self.direction == "t2i" else grad


def loss_value(loss: object) -> torch.Tensor | None:
    """The loss as a tensor: itself, or the sum of a dict's values (open_clip's
    ``output_dict=True``, as its training loop sums them).

    Example:
        >>> import torch
        >>> from gradlab.integrations.recorded import loss_value
        >>> float(loss_value({"contrastive_loss": torch.tensor(2.0)}))
        2.0
    """
    if isinstance(loss, dict):
        values = [value for value in loss.values() if isinstance(value, torch.Tensor)]
        return torch.stack([value.reshape(()) for value in values]).sum() if values else None
    return loss if isinstance(loss, torch.Tensor) else None


class RecordedScoresAdapter(LossAdapter):
    """The Monitor's adapter of a loss read through the score matrices it records.

    Args:
        name: how messages name the loss (``"the watched loss ClipLoss"``).
        recorder: the object whose ``score_recorder`` is set while a logged call runs.
        collector: makes the collector of one call (called with no argument).
        loss_fn: the loss, whose attributes a step may read.
        masked_candidates: the captures' ``candidates`` mark pairs the loss left out (then the
            step's layout uses them too).
        features: the collectors have ``features()`` (the adapter provides the ``features``
            need).
        hint: what to check when a call recorded nothing (ends the error message).
    """

    def __init__(
        self,
        name: str,
        recorder: object,
        collector: Callable[[], object],
        *,
        loss_fn: object | None = None,
        masked_candidates: bool = False,
        features: bool = False,
        hint: str = "",
    ) -> None:
        provides = SCORE_VALUES | {"features"} if features else SCORE_VALUES
        super().__init__(name, "scores", provides, {}, recorder=recorder, loss_fn=loss_fn)
        self.collector = collector
        self.reads_calls_again = False  # its matrices are recorded during a logged call only
        self.masked_candidates = masked_candidates
        self.features = features
        self.hint = hint
        self.missing = dict.fromkeys(
            ("embeddings", "features", "embedding_grad", "smooth_ap_terms", "loss_kind"),
            f"{name} is read through the score matrices it records",
        )
        if features:  # the geometry is logged from them: say why these are not
            for need in ("embeddings", "embedding_grad"):
                self.missing[need] += (" (the embeddings those matrices compare serve the "
                                       "geometry alone: no gradient of them is read)")  # fmt: skip

    @contextmanager
    def listening(self, score_grad: bool) -> Iterator[tuple[list, list]]:
        """Hand the recorder a collector for the call (the first matrix is the step's scores
        even when no quantity reads ``dL/dS``); yields ``([collector], [])``."""
        collector = self.collector()
        self.recorder.score_recorder = collector.record
        try:
            yield [collector], []
        finally:
            self.recorder.score_recorder = None

    def capture(self, tensors: list, loss: object, tau: float, *, recorded=(),
                score_grad: bool = False, loss_scale: bool = False,
                **_ignored: object) -> BatchView:  # fmt: skip
        """The BatchView of a logged call from the recorded matrices (the call's own tensors,
        gradlab's loss record and the embeddings' gradient do not apply). With ``score_grad``
        or ``loss_scale``, the loss is hooked for the factor the training loop puts on it
        (accumulation, AMP, a weight), which the step divides out of ``dL/dS`` and of a
        followed parameter's gradient; for a dict of losses (open_clip's ``output_dict``,
        summed by its training loop), the first of its values in the graph.

        Raises:
            GradlabError: the call recorded no matrix.
        """
        collector = recorded[0] if recorded else None
        captures = collector.finish() if collector is not None else []
        if not captures:
            raise GradlabError(f"{self.name} recorded no score matrix with a gradient{self.hint}")
        primary = captures[0]
        batch = self.read([primary.scores, primary.positives], loss_value(loss), tau)
        if self.masked_candidates and primary.candidates is not None:
            batch.__dict__["layout"] = RetrievalLayout(primary.scores, primary.positives,
                                                       primary.candidates)  # fmt: skip
        if self.features:
            batch.features = _matching(collector.features(), primary.scores.shape)
        if callable(getattr(collector, "softmax", None)):  # what the loss's logits are
            batch.softmax = collector.softmax()
        if score_grad:
            batch.score_captures = captures
        self.remove_hooks()  # the previous logged call's, if no step() came between
        if score_grad or loss_scale:
            self.follow_loss_scale(batch, _scaled_part(loss))
        return batch


def _scaled_part(loss: object) -> object:
    """The tensor that backward reaches with the loop's factor: the loss itself, or the first
    value of a dict of losses that is in the graph (each value of a sum receives the factor)."""
    if isinstance(loss, dict):
        return next((value for value in loss.values() if isinstance(value, torch.Tensor)
                     and value.requires_grad), None)  # fmt: skip
    return loss


def _matching(features: tuple | None, shape: torch.Size) -> tuple | None:
    """``features`` when its queries and candidates are the rows and columns of a ``shape``
    matrix (not so for a matrix gathered from other processes), else None."""
    if features is None:
        return None
    queries, candidates = features
    return features if (queries.shape[0], candidates.shape[0]) == tuple(shape) else None
