"""False-negative suspects among a step's negatives: how many, and how much gradient they take.

:class:`Suspects` flags the negatives of the step's score matrix that may be positives in
disguise (:func:`gradlab.functional.false_negative_suspects`): a label or content-hash
collision with the query, or a score too close to the query's positive by the sign-safe rule
``s_neg >= s_pos - |s_pos| * margin``. It logs their number, their share of the negatives'
gradient mass ``sum |dL/dS|`` (from the watched loss's ``dL/dS``) and their share of each
query's ``k`` hardest negatives (:func:`gradlab.functional.suspect_summary`).

Labels and hashes change with every batch: pass a callable that returns the current batch's
(the one the watched loss sees), as :meth:`gradlab.Monitor.attach` takes its labels. Under
``torch.distributed`` a loss on embeddings is read on the global batch (every rank's rows, in
rank order), so the callable returns the labels or hashes of every rank's batch (all-gathered
in the training loop, on every rank); this rank's alone are refused for their shape and the
quantity is disabled. No ``suspects_gradient_share`` is logged there: the ``dL/dS`` the Monitor
reads is this rank's own matrix, not one of the global batch (a step whose ``dL/dS`` has not
arrived logs none either). A loss on a score matrix is read on this rank's own matrix: this
rank's labels and hashes, and the share.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch

from gradlab.errors import GradlabError, caller_stacklevel
from gradlab.functional.suspects import false_negative_suspects, suspect_summary
from gradlab.monitor.batch import BatchView
from gradlab.monitor.quantity import Plot, Quantity, Values
from gradlab.monitor.schedules import Schedule
from gradlab.validation import check_in_range, check_positive_int

__all__ = ["Suspects"]

Source = Callable[[], "torch.Tensor | tuple[torch.Tensor, torch.Tensor] | None"]


class Suspects(Quantity):
    """Suspected false negatives of the step: count, gradient share, share of the hardest.

    Keys: ``suspects_count`` (in the batch), ``suspects_per_query``,
    ``suspects_gradient_share`` (of the negatives' ``sum |dL/dS|``; needs a watched loss whose
    score matrix gradient the Monitor reads) and ``suspects_top_k_share``.

    Args:
        schedule: ``step -> bool``.
        labels: callable returning the batch's collision labels: ``[B]`` for a paired or
            in-batch matrix, or ``(query_labels, candidate_labels)``; None: no label rule.
        hashes: the same for content hashes (:func:`gradlab.functional.content_hashes`).
        margin: the score rule's relative margin (>= 0); None: no score rule. Default 0:
            negatives scoring at least the query's lowest positive, that is every negative
            that violates a margin of 0 (early in training most hard negatives do: the rule
            tells near-duplicates apart only once the positives rank first; the label and
            hash rules do not depend on training).
        k: the hardest negatives per query that ``suspects_top_k_share`` looks at.
        gradient: read ``dL/dS`` for ``suspects_gradient_share`` (the Monitor then hooks the
            loss's score matrix; a loss without one leaves the quantity out unless False).

    Raises:
        GradlabError: no rule, a non-callable source, a negative margin or a bad ``k``.

    Example:
        >>> import torch
        >>> from gradlab.monitor import Suspects
        >>> from gradlab.monitor.batch import BatchView
        >>> import math
        >>> view = BatchView(embeddings=torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.1]]),
        ...                  candidates=torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]]),
        ...                  positives=torch.eye(3, dtype=torch.bool))
        >>> quantity = Suspects(margin=0.05, gradient=False)  # rows 0 and 2 are near-duplicates
        >>> values = quantity.compute(view)
        >>> float(values["suspects_count"]), float(values["suspects_top_k_share"])
        (2.0, 0.3333333333333333)
    """

    name = "suspects"
    keys = ("suspects_count", "suspects_per_query", "suspects_gradient_share",
            "suspects_top_k_share")  # fmt: skip
    plots = (
        Plot("suspects", "Suspected false negatives per query", "negatives", (
            ("suspects_per_query", "suspects per query"),), zero_based=True,
             reading=("The negatives per query that may be positives in disguise: a label or "
                      "content-hash collision with the query, or a score close to its lowest "
                      "positive's.")),
        Plot("suspects_share", "Suspected false negatives: share of the negatives' gradient and "
             "of the hardest negatives", "share", (
                 ("suspects_gradient_share", "share of sum |dL/dS| over negatives"),
                 ("suspects_top_k_share", "share of the k hardest negatives")),
             zero_based=True,
             reading=("How much of the loss's push on the negatives goes to the suspects: their "
                      "share of the negatives' sum |dL/dS|, and of each query's k hardest "
                      "negatives.")),
    )  # fmt: skip

    def __init__(
        self,
        schedule: Schedule | None = None,
        labels: Source | None = None,
        hashes: Source | None = None,
        margin: float | None = 0.0,
        k: int = 10,
        gradient: bool = True,
    ) -> None:
        super().__init__(schedule)
        for name, source in (("labels", labels), ("hashes", hashes)):
            if source is not None and not callable(source):
                raise GradlabError(f"{name} must be a callable returning the current batch's "
                                   f"{name} (a tensor); got {type(source).__name__}")  # fmt: skip
        if labels is None and hashes is None and margin is None:
            raise GradlabError("give at least one of labels, hashes or margin (the rules that "
                               "flag a suspect); got none")  # fmt: skip
        self.margin = None if margin is None else check_in_range("margin", margin, 0.0, 1e6)
        self.k = check_positive_int("k", k)
        if not isinstance(gradient, bool):
            raise GradlabError(f"gradient must be True or False; got {gradient!r}")
        self.labels, self.hashes = labels, hashes
        self.needs = frozenset({"scores", "score_grad"} if gradient else {"scores"})
        self._said_columns_only = False

    def fewer_needs(self) -> tuple[frozenset[str], str] | None:
        """Without ``dL/dS``: ``gradient=False`` logs every key but ``suspects_gradient_share``.

        Example:
            >>> from gradlab.monitor import Suspects
            >>> Suspects(margin=0.0).fewer_needs()[1]
            'Suspects(..., gradient=False) logs its other keys without dL/dS'
            >>> Suspects(margin=0.0, gradient=False).fewer_needs() is None
            True
        """
        if "score_grad" not in self.needs:
            return None
        return (self.needs - {"score_grad"},
                "Suspects(..., gradient=False) logs its other keys without dL/dS")

    def compute(self, batch: BatchView) -> Values:
        layout = batch.layout
        scores = batch.scores
        device = scores.device

        def current(name, source):
            if source is None:
                return None
            value = source()
            parts = value if isinstance(value, tuple) and len(value) == 2 else (value,)
            if value is not None and not all(isinstance(p, torch.Tensor) for p in parts):
                hint = (" (gradlab.functional.content_hashes(texts) makes them of the raw "
                        "texts)" if name == "hashes" else "")  # fmt: skip
                raise GradlabError(
                    f"{name}() must return the current batch's {name} as a tensor, a pair "
                    f"(query {name}, candidate {name}) of tensors or None; got "
                    f"{_type_names(value)}{hint}")  # fmt: skip
            if isinstance(value, tuple):
                return tuple(part.to(device) for part in value)
            return None if value is None else value.to(device)

        labels, hashes = current("labels", self.labels), current("hashes", self.hashes)
        if labels is None and hashes is None and self.margin is None:
            return {}
        suspects = false_negative_suspects(scores, layout.positives,
                                           candidate_mask=layout.candidate_mask, labels=labels,
                                           hashes=hashes, margin=self.margin)  # fmt: skip
        score_grad = self._score_grad(batch)
        summary = suspect_summary(suspects, scores, layout.positives,
                                  candidate_mask=layout.candidate_mask, score_grad=score_grad,
                                  k=self.k)  # fmt: skip
        values = {"suspects_count": summary.count, "suspects_per_query": summary.per_query,
                  "suspects_top_k_share": summary.top_k_share}  # fmt: skip
        if score_grad is not None:  # none of this matrix (the global batch): no share, not NaN
            values["suspects_gradient_share"] = summary.gradient_share
        return values

    def _score_grad(self, batch: BatchView) -> torch.Tensor | None:
        """The watched loss's ``dL/dS`` of the step's score matrix (rows as queries), if any."""
        if "score_grad" not in self.needs:
            return None
        for capture in batch.score_captures:
            if capture.direction not in ("in_batch", "i2t", "both"):
                continue
            grad = capture.grad
            if grad is None and capture.smooth_ap_tau is not None:
                include_query = capture.direction == "in_batch" and capture.candidates is None
                grad = batch.smooth_ap_loss_grad(capture.smooth_ap_tau, include_query)
            if grad is not None and tuple(grad.shape) == tuple(batch.scores.shape):
                return grad
        columns_only = batch.score_captures and all(
            capture.direction == "t2i" for capture in batch.score_captures)
        if columns_only and not self._said_columns_only:  # said once, not logged in silence
            self._said_columns_only = True
            warnings.warn(
                "gradlab.Monitor: Suspects reads the rows of the score matrix as queries, but "
                "the watched loss ranks its columns alone (direction 't2i'): "
                "suspects_gradient_share, a share of the rows' dL/dS, is not logged, and the "
                "counts describe rows as queries, which this loss does not rank",
                RuntimeWarning, stacklevel=caller_stacklevel())  # fmt: skip
        return None


def _type_names(value: object) -> str:
    """``list``, or ``tuple of (list, Tensor)``: what a source returned, for its error."""
    if isinstance(value, tuple):
        return f"tuple of ({', '.join(type(part).__name__ for part in value)})"
    return type(value).__name__
