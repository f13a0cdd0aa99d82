"""Built-in training steps: the whole-batch reference and the large-batch tricks.

Each step is called as ``step(model, batch, probe)`` (see :mod:`gradlab.equivalence.problem`):
it encodes the batch with ``model``, computes the loss its way, runs the backward pass (the
gradients land in the model's ``.grad``) and returns the loss value. Run in ``N`` processes
(:func:`gradlab.equivalence.run_distributed`), each process gets its shard of the batch and the
parameters' gradients are averaged afterwards, as DistributedDataParallel does.

* :class:`FullBatch`: the loss of the whole batch in one process, the reference. With a
  memory in the batch it scores the memory's entries as constants after the batch's candidates
  (the reference of :class:`CrossBatchMemory`).
* :class:`GradCache`: gradient caching (Gao et al., 2021): embeddings without graph, the loss
  and ``dL/dembeddings`` on them, then a chunked re-forward that back-propagates those
  gradients. Exactly the whole-batch gradient.
* :class:`Accumulation`: ``k`` micro-batches, each its own in-batch loss, gradients summed.
  Not the whole-batch gradient for an in-batch loss: a query never meets the candidates of the
  other micro-batches.
* :class:`AllGather`: every process gathers the others' embeddings, with or without gradient,
  and computes the whole loss or only its own queries' part (open_clip's ``--local-loss``).
* :class:`CrossBatchMemory`: the batch's queries against its candidates and a memory of earlier
  candidates (Wang et al., XBM, 2020), enqueued after the loss.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch
from torch import nn

from gradlab.equivalence.collectives import gather_rows, world_size
from gradlab.equivalence.objectives import score_objective
from gradlab.equivalence.problem import GradientProbe, PairedBatch, cosine_scores, positive_mask
from gradlab.errors import GradlabError
from gradlab.validation import check_bool, check_positive_int

__all__ = ["Accumulation", "AllGather", "CrossBatchMemory", "FullBatch", "GradCache", "Step"]


class Step:
    """Base of the built-in steps: a name for tables and a check before any work.

    A step of your own needs neither: any callable ``step(model, batch, probe)`` works.
    """

    loss: object

    def __call__(
        self, model: nn.Module, batch: PairedBatch, probe: GradientProbe
    ) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def check(self, batch: PairedBatch, world: int) -> None:
        """Raise :class:`GradlabError` when the step cannot run on ``batch`` in ``world``
        processes (called by :func:`gradlab.equivalence.compare_gradients` before any work)."""

    def _refuse_memory(self, batch: PairedBatch, who: str | None = None) -> None:
        """For a step that scores the batch only: a batch with a memory is refused."""
        if batch.memory is not None:
            raise GradlabError(
                f"{who or self.name} scores the batch only; got a batch with a memory of "
                f"{batch.memory_size} entries (that is for CrossBatchMemory)"
            )

    @property
    def known_difference(self) -> str | None:
        """What makes this step, as configured, differ from the whole-batch gradient when it
        does (printed beside a NOT EQUIVALENT verdict); None: nothing known."""
        return None

    def unsplit(self, batch: PairedBatch, world: int) -> str | None:
        """Why this step, on ``batch`` in ``world`` processes, runs each process's part whole,
        as one piece, so that a check of it says nothing of its splitting (printed as a note
        beside the verdict); None: it splits it."""
        return None

    @property
    def name(self) -> str:
        """The step and its options, without the loss: ``GradCache(chunk_size=4)``."""
        options = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self)
                            if f.name != "loss")  # fmt: skip
        return f"{type(self).__name__}({options})"


def _encode(model: nn.Module, batch: PairedBatch, probe: GradientProbe):
    queries = probe.queries(model(batch.query_inputs), batch.rows)
    candidates = probe.candidates(model(batch.candidate_inputs), batch.rows)
    return queries, candidates


def _with_memory(batch: PairedBatch, candidates: torch.Tensor, rows: torch.Tensor, memory=None,
                 memory_labels=None, labels=None):  # fmt: skip
    """Candidates, their labels and their global columns, the memory's slots after the batch's."""
    labels = batch.labels if labels is None else labels
    memory = batch.memory if memory is None else memory
    memory_labels = batch.memory_labels if memory_labels is None else memory_labels
    if memory is None:
        return candidates, labels, rows
    slots = batch.size + torch.arange(memory.shape[0])
    return (torch.cat((candidates, memory.to(candidates.dtype))),
            torch.cat((labels, memory_labels)), torch.cat((rows, slots)))  # fmt: skip


def _scored_loss(objective, probe, batch, queries, candidates, **memory) -> torch.Tensor:
    """The loss of ``queries`` (the batch's rows) against ``candidates`` (and the memory)."""
    pool, pool_labels, columns = _with_memory(batch, candidates, batch.rows, **memory)
    scores = probe.scores(cosine_scores(queries, pool), batch.rows, columns)
    return objective(scores, positive_mask(batch.labels, pool_labels))


@dataclass
class FullBatch(Step):
    """The loss of the whole batch in one process: the reference.

    In ``N`` processes each process computes the loss of its own shard only (plain
    DistributedDataParallel, no gather): not the whole-batch gradient.

    Args:
        loss: a gradlab loss or a callable ``loss(scores, positives)``.

    Example:
        >>> import gradlab
        >>> FullBatch(gradlab.NTXentLoss()).name
        'FullBatch()'
    """

    loss: object

    def __post_init__(self) -> None:
        score_objective(self.loss)

    def __call__(self, model: nn.Module, batch: PairedBatch, probe: GradientProbe) -> torch.Tensor:
        """Forward, loss and backward of ``batch``; returns the loss."""
        queries, candidates = _encode(model, batch, probe)
        loss = _scored_loss(score_objective(self.loss), probe, batch, queries, candidates)
        loss.backward()
        return loss.detach()


@dataclass
class GradCache(Step):
    """Gradient caching (Gao et al., 2021; sentence-transformers' CachedMNRL): the whole-batch
    loss at the memory cost of ``chunk_size`` items.

    Pass 1 encodes the batch chunk by chunk without a graph; the loss on those embeddings gives
    ``dL/dembeddings``; pass 2 encodes each chunk again, with a graph, and back-propagates its
    rows of ``dL/dembeddings``. Each chunk's random state is replayed in pass 2 (dropout draws
    the same masks), as sentence-transformers' ``RandContext`` does.

    Args:
        loss: a gradlab loss or a callable ``loss(scores, positives)``.
        chunk_size: items encoded at once, a positive integer.

    Example:
        >>> import gradlab
        >>> GradCache(gradlab.SmoothAPLoss(), chunk_size=4).name
        'GradCache(chunk_size=4)'
    """

    loss: object
    chunk_size: int = 4

    def __post_init__(self) -> None:
        score_objective(self.loss)
        check_positive_int("chunk_size", self.chunk_size)

    def unsplit(self, batch: PairedBatch, world: int) -> str | None:
        """One chunk: ``chunk_size`` at least the batch size per process.

        Example:
            >>> import gradlab
            >>> from gradlab.equivalence import synthetic_problem
            >>> _, batch = synthetic_problem(batch_size=8)
            >>> GradCache(gradlab.NTXentLoss(), chunk_size=4).unsplit(batch, 1) is None
            True
            >>> GradCache(gradlab.NTXentLoss(), chunk_size=8).unsplit(batch, 1).split(":")[0]
            'chunk_size=8 is at least the batch size per process (8)'
        """
        size = batch.labels.shape[0] // world
        if self.chunk_size < size:
            return None
        return (f"chunk_size={self.chunk_size} is at least the batch size per process ({size}): "
                "the cache encodes the batch in one chunk, so this compares the batch's own "
                "forward and says nothing of the cache's chunking; a chunk_size below "
                f"{size} checks it")

    def __call__(self, model: nn.Module, batch: PairedBatch, probe: GradientProbe) -> torch.Tensor:
        """Two passes over ``batch`` in chunks; returns the loss."""
        chunks = torch.arange(batch.labels.shape[0]).split(self.chunk_size)
        states = {}
        cached = {}
        with torch.no_grad():
            for side in ("query_inputs", "candidate_inputs"):
                outputs = []
                for index, chunk in enumerate(chunks):
                    states[side, index] = torch.get_rng_state()
                    outputs.append(model(getattr(batch, side)[chunk]))
                cached[side] = torch.cat(outputs).requires_grad_(True)
        queries = probe.queries(cached["query_inputs"], batch.rows)
        candidates = probe.candidates(cached["candidate_inputs"], batch.rows)
        loss = _scored_loss(score_objective(self.loss), probe, batch, queries, candidates)
        loss.backward()
        for side in ("query_inputs", "candidate_inputs"):
            grad = cached[side].grad
            for index, chunk in enumerate(chunks):
                with torch.random.fork_rng(devices=[]):
                    torch.set_rng_state(states[side, index])
                    output = model(getattr(batch, side)[chunk])
                output.backward(grad[chunk])
        return loss.detach()


@dataclass
class Accumulation(Step):
    """Gradient accumulation over ``micro_batches`` consecutive micro-batches.

    Each micro-batch computes the in-batch loss of its own items, divided by
    ``micro_batches``, and back-propagates it; the gradients add up. For an in-batch loss this
    is not the whole-batch gradient: a query's softmax or ranking sees only the candidates of
    its micro-batch, and the negatives of the other micro-batches get no gradient (the probe
    marks those scores as never computed).

    Args:
        loss: a gradlab loss or a callable ``loss(scores, positives)``.
        micro_batches: ``k``, a positive integer that divides the batch size.

    Example:
        >>> import gradlab
        >>> Accumulation(gradlab.NTXentLoss(), micro_batches=4).name
        'Accumulation(micro_batches=4)'
    """

    loss: object
    micro_batches: int = 2

    def __post_init__(self) -> None:
        score_objective(self.loss)
        check_positive_int("micro_batches", self.micro_batches)

    def unsplit(self, batch: PairedBatch, world: int) -> str | None:
        """One micro-batch: the whole batch, accumulated over nothing."""
        if self.micro_batches > 1:
            return None
        return ("micro_batches=1: the one micro-batch is the whole batch, so this compares the "
                "batch's own step and says nothing of accumulation; 2 or more check it")

    def check(self, batch: PairedBatch, world: int) -> None:
        """The micro-batches must split each process's shard evenly."""
        size = batch.labels.shape[0] // world
        if size % self.micro_batches:
            raise GradlabError(f"micro_batches must divide the batch size per process ({size});"
                               f" got {self.micro_batches}")  # fmt: skip

    def __call__(self, model: nn.Module, batch: PairedBatch, probe: GradientProbe) -> torch.Tensor:
        """One forward and backward per micro-batch; returns the summed, scaled loss."""
        objective = score_objective(self.loss)
        total = 0.0
        for part in torch.arange(batch.labels.shape[0]).chunk(self.micro_batches):
            micro = PairedBatch(
                batch.query_inputs[part], batch.candidate_inputs[part], batch.labels[part],
                batch.memory, batch.memory_labels, batch.memory_start, batch.rows[part],
                batch.size,
            )  # fmt: skip
            queries, candidates = _encode(model, micro, probe)
            loss = _scored_loss(objective, probe, micro, queries, candidates) / self.micro_batches
            loss.backward()
            total = total + loss.detach()
        return total


def _default_scale(gradient: bool, local_loss: bool, reduction: str, world: int) -> int:
    """The loss factor that makes :class:`AllGather` the whole-batch gradient when it can be:
    ``world`` when only this process's rows carry gradient into a whole-batch loss, or when
    local losses are sums; 1 otherwise (see :class:`AllGather`)."""
    if (not gradient and not local_loss) or (local_loss and reduction == "sum"):
        return world
    return 1


@dataclass
class AllGather(Step):
    """Each process gathers every process's embeddings and computes the loss on them.

    Run in ``N`` processes with the parameters' gradients averaged afterwards
    (DistributedDataParallel). Four variants:

    * ``gradient=True, local_loss=False``: every process computes the whole-batch loss on
      gathered embeddings whose backward all-reduces (:func:`gather_rows`): the whole-batch
      gradient.
    * ``gradient=True, local_loss=True``: each process computes only its own queries' rows
      (and, for a loss with a ``t2i`` direction, its own candidates' columns) against every
      process's embeddings, open_clip's ``--local-loss --gather-with-grad``: the whole-batch
      gradient (for a ``"mean"`` loss, when every process holds as many of the mean's terms:
      queries with a positive for Smooth-AP and NT-Xent, positive pairs for VSE++'s
      max-violation loss, queries for SigLIP).
    * ``gradient=False, local_loss=False``: the other processes' embeddings are constants;
      only this process's own rows carry gradient into the whole-batch loss. Multiplied by
      ``N`` (``loss_scale=None``), the average over processes is the whole-batch gradient;
      without the factor it is ``1/N`` of it.
    * ``gradient=False, local_loss=True``: a candidate receives gradient only from the queries
      of its own process: NOT the whole-batch gradient (the cross-process terms are lost).

    Args:
        loss: a gradlab loss or a callable ``loss(scores, positives)`` (rows as queries).
        gradient: whether the gathered embeddings carry gradient.
        local_loss: each process computes only its own queries' part of the loss.
        loss_scale: factor on each process's loss; ``None``: the one that makes the average
            the whole-batch gradient where that is possible (``N`` for ``gradient=False`` with
            the whole loss or for a ``"sum"`` local loss, else 1).

    Example:
        >>> import gradlab
        >>> AllGather(gradlab.NTXentLoss(), gradient=False).name
        'AllGather(gradient=False, local_loss=False, loss_scale=None)'
    """

    loss: object
    gradient: bool = True
    local_loss: bool = False
    loss_scale: float | None = None

    def __post_init__(self) -> None:
        score_objective(self.loss)
        for name in ("gradient", "local_loss"):
            check_bool(name, getattr(self, name))
        if self.loss_scale is not None and (
            isinstance(self.loss_scale, bool) or not isinstance(self.loss_scale, (int, float))
            or not self.loss_scale > 0 or self.loss_scale == float("inf")
        ):  # fmt: skip
            raise GradlabError(
                f"loss_scale must be None or a positive finite number; got {self.loss_scale!r}"
            )

    def check(self, batch: PairedBatch, world: int) -> None:
        """No memory: the gathered steps score the batch only."""
        self._refuse_memory(batch)

    @property
    def known_difference(self) -> str | None:
        """Why the gathered step can differ: its local loss, or a loss factor given by hand.

        Example:
            >>> import gradlab
            >>> step = AllGather(gradlab.NTXentLoss(), gradient=False, local_loss=True)
            >>> step.known_difference.split(": ")[0]
            "a local loss without the gathers' gradient"
        """
        if self.loss_scale is not None:  # first: a factor by hand decides every variant
            return (f"loss_scale={self.loss_scale!r} given by hand: loss_scale=None picks "
                    "the factor that makes the processes' average the whole-batch "
                    "gradient")  # fmt: skip
        if self.local_loss and not self.gradient:
            return ("a local loss without the gathers' gradient: a candidate receives gradient "
                    "only from its own process's queries")  # fmt: skip
        if self.local_loss and score_objective(self.loss).reduction == "mean":
            return ("each process averages its own terms, which gives the whole batch's mean "
                    "only when every process holds as many of them (queries with a positive for "
                    "Smooth-AP and NT-Xent, positive pairs for max-violation, queries for "
                    "SigLIP)")  # fmt: skip
        return None

    @property
    def process_losses_add_up(self) -> bool:
        """Whether the processes' losses add up to the whole batch's (a local loss reduced by
        a sum: each process holds its part), rather than each being a whole-batch value.

        Example:
            >>> import gradlab
            >>> step = AllGather(gradlab.NTXentLoss(reduction="sum"), local_loss=True)
            >>> step.process_losses_add_up
            True
        """
        return self.local_loss and score_objective(self.loss).reduction == "sum"

    def __call__(self, model: nn.Module, batch: PairedBatch, probe: GradientProbe) -> torch.Tensor:
        """Encode the shard, gather, compute this process's loss and back-propagate it."""
        objective = score_objective(self.loss)
        world = world_size()
        queries, candidates = _encode(model, batch, probe)
        labels = gather_rows(batch.labels, gradient=False)
        everyone = torch.arange(batch.size)
        positives = positive_mask(labels, labels)
        if self.local_loss:
            mine = batch.rows
            loss = torch.zeros((), dtype=queries.dtype)
            if "i2t" in objective.directions:
                scores = cosine_scores(queries, gather_rows(candidates, self.gradient))
                scores = probe.scores(scores, mine, everyone)
                loss = loss + objective.row_loss(scores, positives[mine])
            if "t2i" in objective.directions:
                scores = cosine_scores(gather_rows(queries, self.gradient), candidates)
                scores = probe.scores(scores, everyone, mine)
                loss = loss + objective.row_loss(scores.T, positives[:, mine].T)
        else:
            scores = cosine_scores(gather_rows(queries, self.gradient),
                                   gather_rows(candidates, self.gradient))  # fmt: skip
            owned = None if self.gradient or world == 1 else batch.rows
            scores = probe.scores(scores, everyone, everyone, owned_rows=owned)
            loss = objective(scores, positives)
        scale = self.loss_scale
        if scale is None:
            scale = _default_scale(self.gradient, self.local_loss, objective.reduction, world)
        (loss * scale).backward()
        return loss.detach()


ENQUEUE = ("after", "before")
"""When :class:`CrossBatchMemory` writes the batch into the memory, relative to the loss."""


@dataclass
class CrossBatchMemory(Step):
    """The batch's queries against its own candidates and a memory of earlier candidates
    (Wang et al., Cross-Batch Memory, CVPR 2020; pytorch-metric-learning's
    ``CrossBatchMemory``).

    The memory's entries are constants (their encoder has moved on); its columns come after the
    batch's in the score matrix, so the comparison reports them apart. ``enqueue="after"``
    writes the batch's candidates into the memory (a ring buffer from ``batch.memory_start``)
    after the loss, where the write changes only the next step: this step's loss scores the
    memory as it was, and the comparison, which takes one step, leaves the write out (the
    memory of ``batch`` is never changed). Its reference is :class:`FullBatch` on the same batch
    and memory. ``enqueue="before"`` writes them first, into a copy of the memory, so the loss
    also compares each query with constant copies of the batch's own candidates in the
    overwritten slots, and drops the entries they replaced.

    Args:
        loss: a gradlab loss or a callable ``loss(scores, positives)``.
        enqueue: ``"after"`` or ``"before"``.

    Example:
        >>> import gradlab
        >>> CrossBatchMemory(gradlab.SmoothAPLoss()).name
        "CrossBatchMemory(enqueue='after')"
    """

    loss: object
    enqueue: str = "after"

    def __post_init__(self) -> None:
        score_objective(self.loss)
        if self.enqueue not in ENQUEUE:
            raise GradlabError(f"enqueue must be one of {ENQUEUE}; got {self.enqueue!r}")

    def check(self, batch: PairedBatch, world: int) -> None:
        """One process, a batch with a memory at least as large as the batch."""
        if batch.memory is None:
            raise GradlabError("CrossBatchMemory needs a batch with a memory (memory=, "
                               "memory_labels=); got a batch without one")  # fmt: skip
        if batch.memory_size < batch.labels.shape[0]:
            raise GradlabError(f"the memory must hold at least the batch ({batch.labels.shape[0]}"
                               f" items); got {batch.memory_size} slots")  # fmt: skip
        if world != 1:
            raise GradlabError(f"CrossBatchMemory runs in one process; got world_size={world}")

    @property
    def known_difference(self) -> str | None:
        """``enqueue="before"`` scores the batch's own candidates twice and drops old entries."""
        if self.enqueue == "before":
            return ("enqueue='before' writes the batch into the memory before the loss: each "
                    "query also meets constant copies of the batch's own candidates, and the "
                    "entries they replaced are gone")  # fmt: skip
        return None

    def __call__(self, model: nn.Module, batch: PairedBatch, probe: GradientProbe) -> torch.Tensor:
        """Loss against the batch and the memory, and the enqueue; returns the loss."""
        queries, candidates = _encode(model, batch, probe)
        memory, memory_labels = batch.memory, batch.memory_labels
        if self.enqueue == "before":  # a copy: the batch's memory stays as it was given
            slots = (batch.memory_start + torch.arange(batch.labels.shape[0])) % batch.memory_size
            memory, memory_labels = memory.clone(), memory_labels.clone()
            memory[slots] = candidates.detach().to(memory.dtype)
            memory_labels[slots] = batch.labels
        loss = _scored_loss(score_objective(self.loss), probe, batch, queries, candidates,
                            memory=memory, memory_labels=memory_labels)  # fmt: skip
        loss.backward()
        return loss.detach()


def rank_of_rows(size: int, world: int) -> torch.Tensor:
    """The process that holds each of ``size`` items when they are split into ``world`` equal,
    contiguous shards.

    Raises:
        GradlabError: ``size`` or ``world`` not a positive integer, or ``world`` not dividing
            ``size`` (shards of unequal size).

    Example:
        >>> rank_of_rows(4, 2).tolist()
        [0, 0, 1, 1]
    """
    check_positive_int("size", size)
    check_positive_int("world", world)
    if size % world:
        raise GradlabError(f"world must divide size (equal shards); got size={size}, "
                           f"world={world}")  # fmt: skip
    return torch.arange(size) // (size // world)


__all__ += ["rank_of_rows"]
