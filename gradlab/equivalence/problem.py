"""What a training step is checked on: a paired batch, the score matrix and a gradient probe.

A :class:`PairedBatch` holds ``B`` items, each a query-side input (an image, an anchor) and a
candidate-side input (its caption, its positive), with one label per item: query ``q`` and
candidate ``c`` are positives of each other when ``labels[q] == labels[c]`` (so every query's
own candidate is a positive, as in CLIP and sentence-transformers' MNRL). One model encodes both
sides; the score matrix is the cosine similarity of the query embeddings ``[B, d]`` against the
candidate embeddings ``[B, d]`` and, with a cross-batch memory, against the memory's ``M``
embeddings after them: columns ``0..B-1`` are the batch's candidates, ``B..B+M-1`` the memory's
slots.

A training step (the reference or a trick) is any callable ``step(model, batch, probe)`` that
runs the forward and backward passes of one step and leaves the gradients in the model's
``.grad``. It may hand its intermediate tensors to the :class:`GradientProbe` (``probe.queries``,
``probe.candidates``, ``probe.scores``) with the global indices of their rows and columns; the
probe then adds up their gradients, so that ``dL/dembeddings`` and ``dL/dscores`` can be compared
too, wherever and in whatever pieces the step computed them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import torch
import torch.nn.functional as F

from gradlab.errors import GradlabError
from gradlab.validation import check_int_in_range, check_tensor

__all__ = ["GradientProbe", "PairedBatch", "cosine_scores", "positive_mask"]


@dataclass(frozen=True)
class PairedBatch:
    """A batch of paired items, or one process's shard of it.

    Attributes:
        query_inputs: ``[b, ...]`` model inputs of the query side.
        candidate_inputs: ``[b, ...]`` model inputs of the candidate side, one per query.
        labels: ``[b]`` integer labels; ``query q`` and ``candidate c`` are positives of each
            other when their labels are equal.
        memory: optional ``[M, d]`` candidate embeddings of earlier steps (a cross-batch
            memory); constants, they carry no gradient.
        memory_labels: ``[M]`` labels of the memory's entries (with ``memory``).
        memory_start: the memory slot the next enqueue writes (a ring buffer).
        rows: ``[b]`` global indices of these items in the whole batch; ``None``: ``0..b-1``.
        size: ``B``, the number of items of the whole batch; ``None``: ``b``.

    Example:
        >>> batch = PairedBatch(torch.zeros(4, 3), torch.ones(4, 3), torch.tensor([0, 0, 1, 1]))
        >>> shard = batch.shard(1, 2)
        >>> shard.rows.tolist(), shard.size, shard.labels.tolist()
        ([2, 3], 4, [1, 1])
    """

    query_inputs: torch.Tensor
    candidate_inputs: torch.Tensor
    labels: torch.Tensor
    memory: torch.Tensor | None = None
    memory_labels: torch.Tensor | None = None
    memory_start: int = 0
    rows: torch.Tensor | None = None
    size: int | None = None

    def __post_init__(self) -> None:
        check_tensor("query_inputs", self.query_inputs, ndims=(2, 3, 4, 5), kind="any_real")
        check_tensor("candidate_inputs", self.candidate_inputs, ndims=(2, 3, 4, 5),
                     kind="any_real")  # fmt: skip
        check_tensor("labels", self.labels, ndims=(1,), kind="integer")
        count = self.labels.shape[0]
        for name in ("query_inputs", "candidate_inputs"):
            if getattr(self, name).shape[0] != count:
                raise GradlabError(
                    f"{name} must hold one row per label ({count}); got shape "
                    f"{tuple(getattr(self, name).shape)}"
                )
        if count == 0:
            raise GradlabError("labels must hold at least one item; got an empty batch")
        if (self.memory is None) != (self.memory_labels is None):
            raise GradlabError(
                "memory and memory_labels go together; got "
                f"memory={'a tensor' if self.memory is not None else None} and "
                f"memory_labels={'a tensor' if self.memory_labels is not None else None}"
            )
        if self.memory is not None:
            check_tensor("memory", self.memory, ndims=(2,), kind="float")
            check_tensor("memory_labels", self.memory_labels, ndims=(1,), kind="integer")
            if self.memory_labels.shape[0] != self.memory.shape[0]:
                raise GradlabError(
                    f"memory_labels must hold one label per memory row ({self.memory.shape[0]});"
                    f" got {self.memory_labels.shape[0]}"
                )
        if (
            isinstance(self.memory_start, bool)
            or not isinstance(self.memory_start, int)
            or not (0 <= self.memory_start < max(self.memory_size, 1))
        ):
            raise GradlabError(
                f"memory_start must be an integer in [0, {max(self.memory_size, 1)}); "
                f"got {self.memory_start!r}"
            )
        if self.size is not None:  # the whole batch holds at least this shard
            check_int_in_range("size", self.size, count)
        size = count if self.size is None else self.size
        if self.rows is not None:
            check_tensor("rows", self.rows, ndims=(1,), kind="integer")
            distinct = self.rows.unique()
            if (self.rows.shape[0] != count or distinct.shape[0] != count
                    or int(distinct[0]) < 0 or int(distinct[-1]) >= size):  # fmt: skip
                raise GradlabError(
                    f"rows must hold {count} distinct indices in [0, {size}) (one per item of "
                    f"the whole batch); got {self.rows.tolist()}"
                )
        if self.rows is None:
            object.__setattr__(self, "rows", torch.arange(count))
        if self.size is None:
            object.__setattr__(self, "size", count)

    @property
    def memory_size(self) -> int:
        """``M``, the number of memory slots (0 without a memory)."""
        return 0 if self.memory is None else self.memory.shape[0]

    @property
    def columns(self) -> int:
        """Columns of the whole score matrix: ``B`` candidates, then ``M`` memory slots."""
        return self.size + self.memory_size

    def shard(self, rank: int, world_size: int) -> PairedBatch:
        """The contiguous rows of process ``rank`` out of ``world_size`` (equal shards).

        Raises:
            GradlabError: ``world_size`` does not divide the batch, or ``rank`` is out of range.
        """
        count = self.labels.shape[0]
        if (
            isinstance(world_size, bool)
            or not isinstance(world_size, int)
            or world_size < 1
            or (count % world_size)
        ):
            raise GradlabError(
                f"world_size must be a positive integer that divides the batch size {count}; "
                f"got {world_size!r}"
            )
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < world_size:
            raise GradlabError(f"rank must be an integer in [0, {world_size}); got {rank!r}")
        local = count // world_size
        part = slice(rank * local, (rank + 1) * local)
        return replace(
            self, query_inputs=self.query_inputs[part],
            candidate_inputs=self.candidate_inputs[part], labels=self.labels[part],
            rows=self.rows[part], size=self.size,
        )  # fmt: skip

    def to(self, dtype: torch.dtype) -> PairedBatch:
        """The batch with its floating tensors (inputs, memory) cast to ``dtype``."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        cast = {name: value.to(dtype) for name, value in values.items()
                if isinstance(value, torch.Tensor) and value.is_floating_point()}  # fmt: skip
        return replace(self, **cast)


def positive_mask(query_labels: torch.Tensor, candidate_labels: torch.Tensor) -> torch.Tensor:
    """``[Q, C]`` bool mask, ``True`` where the labels are equal.

    Example:
        >>> positive_mask(torch.tensor([0, 1]), torch.tensor([1, 1, 0])).tolist()
        [[False, False, True], [True, True, False]]
    """
    return query_labels.unsqueeze(1) == candidate_labels.unsqueeze(0)


def cosine_scores(queries: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
    """Cosine similarities ``[Q, C]`` of ``queries [Q, d]`` and ``candidates [C, d]``.

    The scoring of every built-in step (gradlab's embedding losses normalise the same way).

    Example:
        >>> cosine_scores(torch.tensor([[2.0, 0.0]]), torch.tensor([[1.0, 1.0], [0.0, 3.0]]))
        tensor([[0.7071, 0.0000]])
    """
    return F.normalize(queries, dim=1) @ F.normalize(candidates, dim=1).T


def _require_gradient(method: str, tensor: torch.Tensor) -> None:
    """Refuse a tensor whose gradient the probe could never record."""
    if not tensor.requires_grad:
        raise GradlabError(
            f"probe.{method} must be handed a tensor the loss is computed from, one that "
            f"requires grad; got a tensor of shape {tuple(tensor.shape)} with no gradient "
            "(computed under torch.no_grad(), or detached): its gradient would read as 0"
        )


def _index(name: str, value: object, bound: int) -> torch.Tensor:
    check_tensor(name, value, ndims=(1,), kind="integer")
    if value.numel() and (int(value.min()) < 0 or int(value.max()) >= bound):
        raise GradlabError(
            f"{name} must hold global indices in [0, {bound}); got values from "
            f"{int(value.min())} to {int(value.max())}"
        )
    return value.to(device="cpu", dtype=torch.int64)


class GradientProbe:
    """Adds up the gradients of a step's embeddings and scores at their global positions.

    Hand it a tensor with the global indices of its rows (and, for scores, columns); it returns
    the same tensor and, when the backward pass reaches it, adds its gradient into a
    whole-batch accumulator: ``queries [B, d]``, ``candidates [B, d]``, ``scores [B, B + M]``.
    Pieces computed in chunks, micro-batches or processes land where they belong. The scores'
    values are kept too (``values``); a score never handed over stays marked as not scored
    (``scored``), which is how a step that never compares
    a query with a candidate (gradient accumulation) shows the negatives it loses. ``reached``
    says, per accumulator, whether any backward pass reached a tensor handed over. The
    accumulators live on the CPU whatever the step's device (a CUDA step's values and
    gradients are copied there as they are recorded).

    Args:
        size: ``B``, the items of the whole batch.
        columns: columns of the whole score matrix (``B`` plus the memory's ``M``).
        embedding_size: ``d``.
        dtype: the accumulators' dtype.

    Example:
        >>> probe = GradientProbe(size=2, columns=2, embedding_size=1)
        >>> q = torch.tensor([[1.0], [2.0]], requires_grad=True)
        >>> (3 * probe.queries(q[1:], rows=torch.tensor([1]))).sum().backward()
        >>> probe.gradients["queries"].tolist()
        [[0.0], [3.0]]
    """

    def __init__(
        self, size: int, columns: int, embedding_size: int, dtype: torch.dtype = torch.float64
    ) -> None:
        self.size = size
        self.columns_count = columns
        self.gradients = {
            "queries": torch.zeros(size, embedding_size, dtype=dtype),
            "candidates": torch.zeros(size, embedding_size, dtype=dtype),
            "scores": torch.zeros(size, columns, dtype=dtype),
        }
        self.recorded = {name: False for name in self.gradients}
        self.reached = {name: False for name in self.gradients}
        self.scored = torch.zeros(size, columns, dtype=torch.bool)
        self.values = torch.zeros(size, columns, dtype=dtype)

    def _embeddings(self, name: str, embeddings: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        check_tensor(name, embeddings, ndims=(2,), kind="float")
        rows = _index("rows", rows, self.size)
        if rows.shape[0] != embeddings.shape[0]:
            raise GradlabError(
                f"rows must give one index per row of {name} ({embeddings.shape[0]}); "
                f"got {rows.shape[0]}"
            )
        target = self.gradients[name]
        if embeddings.shape[1] != target.shape[1]:  # else index_add_ fails inside backward
            raise GradlabError(
                f"probe.{name} must be handed embeddings of the model's width {target.shape[1]} "
                f"(the last dimension of its output); got shape {tuple(embeddings.shape)}"
            )
        _require_gradient(name, embeddings)
        self.recorded[name] = True

        def add(grad: torch.Tensor) -> None:
            self.reached[name] = True
            target.index_add_(0, rows, grad.detach().to(device=target.device, dtype=target.dtype))

        embeddings.register_hook(add)
        return embeddings

    def queries(self, embeddings: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """Record query embeddings ``[n, d]`` whose rows are the items ``rows [n]``.

        Raises:
            GradlabError: ``embeddings`` does not require grad (computed under
                ``torch.no_grad()`` or detached: the probe could never see its gradient), is
                not of the model's width, or ``rows`` does not index its rows.
        """
        return self._embeddings("queries", embeddings, rows)

    def candidates(self, embeddings: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """Record candidate embeddings ``[n, d]`` whose rows are the items ``rows [n]``.

        Raises:
            GradlabError: ``embeddings`` does not require grad (computed under
                ``torch.no_grad()`` or detached: the probe could never see its gradient), is
                not of the model's width, or ``rows`` does not index its rows.
        """
        return self._embeddings("candidates", embeddings, rows)

    def scores(
        self,
        scores: torch.Tensor,
        rows: torch.Tensor,
        columns: torch.Tensor,
        owned_rows: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Record a score block ``[n, m]``: queries ``rows [n]`` against columns ``columns [m]``.

        ``owned_rows`` (global indices, a subset of ``rows``): count only these rows' gradient.
        A process whose copy of the score matrix propagates gradient into its own queries only
        (gathered without gradient) owns those rows; ``None``: all of them.

        Raises:
            GradlabError: ``scores`` does not require grad (computed under ``torch.no_grad()``
                or detached), or ``rows`` and ``columns`` do not index the block.
        """
        check_tensor("scores", scores, ndims=(2,), kind="float")
        rows = _index("rows", rows, self.size)
        columns = _index("columns", columns, self.columns_count)
        if (rows.shape[0], columns.shape[0]) != tuple(scores.shape):
            raise GradlabError(
                f"rows and columns must index the score block of shape {tuple(scores.shape)}; "
                f"got {rows.shape[0]} rows and {columns.shape[0]} columns"
            )
        keep = torch.ones(rows.shape[0], dtype=torch.bool)
        if owned_rows is not None:
            keep = torch.isin(rows, _index("owned_rows", owned_rows, self.size))
        _require_gradient("scores", scores)
        self.recorded["scores"] = True
        self.scored[rows[keep].unsqueeze(1), columns.unsqueeze(0)] = True
        values = scores.detach().to(device=self.values.device, dtype=self.values.dtype)
        self.values[rows[keep].unsqueeze(1), columns.unsqueeze(0)] = values[keep]
        target = self.gradients["scores"]

        def add(grad: torch.Tensor) -> None:
            self.reached["scores"] = True
            block = grad.detach().to(device=target.device, dtype=target.dtype)[keep]
            target.index_put_((rows[keep].unsqueeze(1), columns.unsqueeze(0)), block,
                              accumulate=True)  # fmt: skip

        scores.register_hook(add)
        return scores

    def reduce(self) -> None:
        """Under ``torch.distributed``: sum every process's accumulators and divide by the
        number of processes, as DistributedDataParallel averages the parameters' gradients."""
        world = torch.distributed.get_world_size()
        for value in self.gradients.values():
            torch.distributed.all_reduce(value)
            value.div_(world)
        flags = torch.tensor([[self.recorded[name], self.reached[name]] for name in
                              self.gradients], dtype=torch.int64)  # fmt: skip
        torch.distributed.all_reduce(flags, op=torch.distributed.ReduceOp.MAX)
        self.recorded = {name: bool(flag[0]) for name, flag in zip(self.gradients, flags.tolist(),
                                                                    strict=True)}  # fmt: skip
        self.reached = {name: bool(flag[1]) for name, flag in zip(self.gradients, flags.tolist(),
                                                                   strict=True)}  # fmt: skip
        scored = self.scored.to(torch.int64)
        torch.distributed.all_reduce(scored)  # how many processes computed each score
        torch.distributed.all_reduce(self.values)
        self.values.div_(scored.clamp(min=1))  # their mean (they computed the same value)
        self.scored = scored > 0
