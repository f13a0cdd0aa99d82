"""The Monitor under ``torch.distributed``: the global batch, the writing rank, staying in step.

With ``distributed="auto"`` and an initialized process group the quantities are computed on
the batch of every rank (embeddings, labels and their gradients all-gathered, the loss
averaged), and only rank 0 writes. Score matrices captured for the anatomy stay the writing
rank's own.

Every logged step starts with one small collective, :func:`agree_on_step`: each rank offers
its step number, its count of watched calls and what its batch holds, and every rank takes
the same decision from the same table. The step is gathered only when all ranks hold a
readable batch of the same step; when a rank has none (its loss call could not be read, or
raised) the step is skipped on every rank; when the ranks' steps or call counts differ (a rank
skipped ``monitor.step()``), the ranks are out of step and the Monitor stops gathering for the
rest of the run rather than mix steps. So no rank is left waiting in a collective the others
never join, where the Monitor's are the only collectives between two steps (under
``DistributedDataParallel`` the next collective of a rank that skipped ``monitor.step()`` is a
gradient all-reduce: the ranks wait until the group times out).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import torch

from gradlab.errors import GradlabError
from gradlab.monitor.batch import BatchView

__all__ = [
    "ANSWERS",
    "DROPPED_BITS",
    "StepAgreement",
    "agree_on_schedules",
    "agree_on_step",
    "all_gather_rows",
    "checksum",
    "collective_device",
    "decide",
    "gather_batch",
    "is_distributed",
    "is_rank_zero",
    "rank_zero_step",
]


def is_distributed() -> bool:
    """Whether a ``torch.distributed`` process group is initialized.

    Example:
        >>> is_distributed()
        False
    """
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def is_rank_zero() -> bool:
    """Whether this process writes: rank 0, or the only process.

    Example:
        >>> is_rank_zero()
        True
    """
    return not is_distributed() or torch.distributed.get_rank() == 0


_OFFER = ("step", "calls", "batch", "labels", "grad", "loss", "rows", "width", "checksum")
"""What each rank offers at a logged step (:func:`agree_on_step`), in order."""


@dataclass(frozen=True)
class StepAgreement:
    """The decision every rank takes at a logged step (:func:`agree_on_step`).

    Attributes:
        log: gather the batch and log the step.
        rows: each rank's number of rows (used by :func:`gather_batch`, no second exchange).
        skipped: why the step is skipped on every rank (a rank has no batch, or the batches
            differ in what they hold); ``None`` when it is logged or the ranks are out of step.
        out_of_step: why the ranks are out of step (their steps or watched-call counts
            differ); ``None`` otherwise.
        same: every rank (two or more) holds the same rows and labels (equal checksums): the
            batch is read once, on each rank its own (:func:`gather_batch`).
        dropped: the quantities disabled on rank 0, which writes, as rank 0 offered them (bit
            ``i`` for the Monitor's quantity ``i``): every rank leaves them out from then on.
        uneven_calls: out of step at the same step number: a rank made a watched call the
            others did not (an extra micro-batch, or a call with gradients on outside
            training), rather than skipping ``monitor.step()``.
    """

    log: bool
    rows: tuple[int, ...] = ()
    skipped: str | None = None
    out_of_step: str | None = None
    same: bool = False
    dropped: int = 0
    uneven_calls: bool = field(default=False, repr=False)


def collective_device() -> torch.device:
    """The device of this rank's collectives: its current CUDA device under NCCL, else CPU.

    Example:
        >>> collective_device()
        device(type='cpu')
    """
    if is_distributed() and "nccl" in str(torch.distributed.get_backend()):
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


NOT_GATHERED = {"scores": -2, "candidates": -3}
"""The ``width`` a rank offers for a batch that is not gathered (:func:`gather_batch`): a score
matrix, or queries against candidates. Each rank's own shape is then its own business (a last
batch smaller on one rank); only the kind of batch must agree."""


_FLOAT_DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16)
"""The embeddings' dtypes a rank's offer names by position: its ``has batch`` is 1 + the
position (5 for another dtype). Rows of different dtypes cannot be gathered into one tensor."""


def _batch_code(embeddings: torch.Tensor) -> int:
    """``has batch`` of an offer: 1 + the position of the embeddings' dtype in
    :data:`_FLOAT_DTYPES`, ``len(_FLOAT_DTYPES) + 1`` for another dtype."""
    dtype = embeddings.dtype
    return 1 + (_FLOAT_DTYPES.index(dtype) if dtype in _FLOAT_DTYPES else len(_FLOAT_DTYPES))


def _offer(step: int, calls: int, batch: BatchView | None) -> list[int]:
    """The offer but its checksum (:func:`checksum`, computed on the device)."""
    if batch is None:
        return [step, calls, 0, 0, 0, 0, 0, 0]
    embeddings = batch.embeddings
    if batch.on_scores or batch.candidates is not None:
        width = NOT_GATHERED["scores" if batch.on_scores else "candidates"]
    else:  # rows to stack: every rank's must be as wide
        width = embeddings.shape[1] if embeddings.dim() > 1 else -1
    return [step, calls, _batch_code(embeddings), batch.labels is not None,
            batch.embedding_grad is not None, batch.loss is not None, embeddings.shape[0],
            width]  # fmt: skip


_BIT_VIEWS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def checksum(batch: BatchView | None) -> torch.Tensor:
    """A 0-d int64 checksum of the batch's rows and labels, on their device, without a host sync.

    The sum over rows ``r`` of ``(r + 1)`` times (the row's values, each value's bit pattern
    read as an integer, weighted by column ``c`` as ``c + 1``, plus the row's label): integer
    arithmetic (wrapping on overflow), so every rank that holds the same rows and labels gets
    the same number, whatever the order of the reduction; rows or columns in another order give
    another one. 0 for no batch or no rows.

    Example:
        >>> view = BatchView(embeddings=torch.eye(2), labels=torch.arange(2))
        >>> int(checksum(view)) == int(checksum(BatchView(embeddings=torch.eye(2),
        ...                                               labels=torch.arange(2))))
        True
        >>> int(checksum(view)) == int(checksum(BatchView(embeddings=torch.eye(2).flip(0),
        ...                                               labels=torch.arange(2))))
        False
    """
    if batch is None or batch.embeddings.numel() == 0:
        device = batch.embeddings.device if batch is not None else None
        return torch.zeros((), dtype=torch.int64, device=device)
    embeddings = batch.embeddings.detach()
    rows = embeddings.shape[0]
    flat = embeddings.reshape(rows, -1).contiguous()
    bits = flat.view(_BIT_VIEWS[flat.element_size()]).to(torch.int64)
    columns = torch.arange(1, bits.shape[1] + 1, dtype=torch.int64, device=bits.device)
    bits = (bits * columns).sum(dim=1)
    if batch.labels is not None and batch.labels.numel() == rows:  # CPU labels too (PML's)
        bits = bits + batch.labels.detach().reshape(rows).to(bits.device, torch.int64)
    weights = torch.arange(1, rows + 1, dtype=torch.int64, device=bits.device)
    return (bits * weights).sum()


_KINDS_IN_WORDS = {-1: "1-D embeddings", NOT_GATHERED["scores"]: "a score matrix",
                   NOT_GATHERED["candidates"]: "queries against candidates"}  # fmt: skip


def _width_in_words(width: int, code: int) -> str:
    """What a rank's offered ``width`` and ``has batch`` code (the embeddings' dtype,
    :func:`_batch_code`) say of its batch, as the skip message names it."""
    known = 1 <= code <= len(_FLOAT_DTYPES)
    dtype = str(_FLOAT_DTYPES[code - 1]).removeprefix("torch.") if known else "other dtype"
    return _KINDS_IN_WORDS.get(width, f"{dtype} embeddings of width {width}")


def decide(table: list[list[int]]) -> StepAgreement:
    """The decision from every rank's offer (rows of ``table``, rank order); pure, no collective.

    Args:
        table: per rank ``[step, calls, has batch, has labels, has gradient, has loss, rows,
            width, checksum]``; ``width`` is the embeddings' dimension for a batch to be
            gathered, else :data:`NOT_GATHERED`'s code for its kind.

    Example:
        >>> decide([[3, 3, 1, 1, 1, 1, 8, 4, 17], [3, 3, 1, 1, 1, 1, 6, 4, 23]])
        StepAgreement(log=True, rows=(8, 6), skipped=None, out_of_step=None, same=False, dropped=0)
        >>> decide([[3, 3, 1, 1, 1, 1, 8, 4, 17], [3, 3, 1, 1, 1, 1, 8, 4, 17]]).same
        True
        >>> decide([[3, 3, 1, 1, 1, 1, 8, 4, 17], [3, 3, 0, 0, 0, 0, 0, 0, 0]]).skipped
        'rank 1 has no batch for step 3 (its loss call was not read, or raised)'
    """
    if any(len(row) != len(_OFFER) for row in table):
        raise ValueError(f"each rank's offer holds {len(_OFFER)} values {_OFFER}; got {table}")
    steps = [(row[0], row[1]) for row in table]
    if len(set(steps)) > 1:
        where = ", ".join(f"rank {rank} at step {step} after {calls} watched call(s)"
                          for rank, (step, calls) in enumerate(steps))  # fmt: skip
        return StepAgreement(log=False, out_of_step=f"the ranks are out of step ({where})",
                             uneven_calls=len({step for step, _ in steps}) == 1)  # fmt: skip
    step = steps[0][0]
    missing = [rank for rank, row in enumerate(table) if not row[2]]
    if missing:
        ranks = ", ".join(f"rank {rank}" for rank in missing)
        verb = "has" if len(missing) == 1 else "have"
        return StepAgreement(log=False, skipped=f"{ranks} {verb} no batch for step {step} "
                             "(its loss call was not read, or raised)")  # fmt: skip
    held = {tuple(row[3:6]) for row in table}
    widths = {row[7] for row in table}
    # the embeddings' dtypes, where they are gathered (score matrices stay on their rank)
    dtypes = {row[2] for row in table if row[7] not in _KINDS_IN_WORDS}
    if len(held) > 1 or len(widths) > 1 or len(dtypes) > 1:
        detail = "; ".join(
            f"rank {rank}: " + ", ".join(f"{name} {value}" for name, value
                                         in zip(_OFFER[3:7], row[3:7], strict=True))
            + f", {_width_in_words(row[7], row[2])}"
            for rank, row in enumerate(table)
        )  # fmt: skip
        return StepAgreement(log=False, skipped=f"the ranks' batches for step {step} differ in "
                             f"what they hold ({detail}): every rank's Monitor needs the same "
                             "options and the same watched loss, called alike (embeddings "
                             "as wide and of one dtype on every rank, to be gathered into one "
                             "batch), and "
                             "monitor.step() after backward")  # fmt: skip
    # the same rows, width and checksum on every rank (of two or more): one batch, not copies
    same = len(table) > 1 and table[0][6] > 0 and len({tuple(row[6:]) for row in table}) == 1
    return StepAgreement(log=True, rows=tuple(row[6] for row in table), same=same)


def agree_on_step(
    step: int, calls: int, batch: BatchView | None, dropped: int = 0
) -> StepAgreement:
    """One collective at a logged step: every rank offers its step, its count of watched calls
    and what its batch holds, and takes the same :func:`decide` decision from the same table.
    Rank 0 offers with them the quantities it has disabled (``dropped``), which no rank computes
    or gathers for after this step.

    Every rank must call it at the same logged steps (the schedule decides, the same on every
    rank); a rank without a batch still calls it, with ``batch=None``. One small
    ``all_gather`` and one host read of ``world_size x 9`` integers (the batch's
    :func:`checksum` is computed on the device and joins the offer there).

    Args:
        step: this rank's step number.
        calls: this rank's count of watched calls so far.
        batch: this rank's batch of the step, or ``None``.
        dropped: the quantities disabled on this rank, bit ``i`` for the Monitor's quantity
            ``i`` (the first :data:`DROPPED_BITS`); only rank 0's are read.

    Returns:
        The :class:`StepAgreement`; without a process group, the one-rank decision.

    Raises:
        GradlabError: the collective failed (it timed out, or a rank ended), naming what
            every rank must do; the process group's error is its cause.

    Example:
        >>> agree_on_step(0, 1, None).skipped
        'rank 0 has no batch for step 0 (its loss call was not read, or raised)'
    """
    mine = _offer(step, calls, batch)
    if not is_distributed():
        # one rank: no copies to tell apart, no checksum needed, its own quantities
        return replace(decide([[*mine, 0]]), dropped=dropped)
    device = batch.embeddings.device if batch is not None else collective_device()
    offer = torch.tensor([*mine, 0, dropped], dtype=torch.int64, device=device)
    if batch is not None:  # no batch offers 0, on the collectives' device
        offer[len(_OFFER) - 1] = checksum(batch)
    table = [torch.empty_like(offer) for _ in range(torch.distributed.get_world_size())]
    try:
        torch.distributed.all_gather(table, offer)
    except RuntimeError as error:  # torch.distributed's errors (DistBackendError, timeouts)
        raise _failed(f"the ranks' agreement on step {step}", error) from error
    rows = torch.stack(table).tolist()  # the one host read of the agreement
    return replace(decide([row[: len(_OFFER)] for row in rows]), dropped=rows[0][-1])


DROPPED_BITS = 63
"""The Monitor's quantities (the first, in order) whose being disabled on rank 0 an offer
carries (:func:`agree_on_step`): the bits of an int64. A quantity past them disabled on rank 0
is still computed on the other ranks, for nothing."""


def _failed(what: str, error: RuntimeError) -> GradlabError:
    """The error of a Monitor collective that failed: what every rank must do."""
    return GradlabError(
        f"gradlab.Monitor: {what} failed ({type(error).__name__}: {str(error).strip()}): "
        "another rank ended (see its own error) or never joined. Under torch.distributed every "
        "rank must make the Monitor (only rank 0 writes), call the watched loss and "
        "monitor.step() as often, and close() it: a Monitor made or closed on rank 0 alone "
        "(inside 'if rank == 0:'), or made with distributed='local' on some ranks only, waits "
        "here for ranks that never come until the process group times out. Make it on every "
        "rank with the same distributed=, or pass distributed='local' on every rank to log "
        "rank 0's own batch without collectives"
    )


PLAN_STEPS = 62
"""The steps from a Monitor's first one that a plan names, bit by bit (the bits of an int64)."""

PLAN_HORIZON = 4096
"""The steps from a Monitor's first one whose schedules the ranks compare (by a digest)."""


def rank_zero_step(
    step: int, device: torch.device | None = None, plan: int = 0, digest: int = 0
) -> int:
    """Rank 0's step number, on every rank: one all-gather and one host read, at a Monitor's
    first ``monitor.step()``; ranks that would log different steps are refused there.

    The ranks number their steps alike only if they start alike, and a rank that resumes
    (``resume=True``) reads its start from the run folder: one that reads it before rank 0
    has written its last record (a Monitor made again right after another's ``close()``), or
    on a node that does not share the folder, starts elsewhere. Its schedule would then log
    other optimizer steps than rank 0's, and under ``DistributedDataParallel`` its collectives
    would meet the gradients' all-reduces: a hang. Every rank follows rank 0, which writes.
    The same hang follows from Monitors whose schedules differ (``every=1`` on one rank,
    ``every=2`` on another): each rank offers its ``plan``, and a rank at rank 0's step whose
    plan differs from rank 0's makes every rank raise, at once.

    Args:
        step: this rank's step number.
        device: where the numbers travel (the step's batch's device); None: this rank's
            :func:`collective_device`.
        plan: the steps this rank's Monitor logs among the :data:`PLAN_STEPS` from ``step``
            on: bit ``k`` for step ``step + k``.
        digest: a digest of the steps it logs among the :data:`PLAN_HORIZON` from ``step``
            on (ranks that agree on the first 62 may part later: ``every=100`` and 200).

    Returns:
        Rank 0's; ``step`` itself without a process group.

    Raises:
        GradlabError: the collective failed (it timed out, or a rank ended), or the ranks'
            plans differ.

    Example:
        >>> rank_zero_step(7)
        7
    """
    if not is_distributed():
        return step
    device = collective_device() if device is None else device
    mine = torch.tensor([step, plan, digest], dtype=torch.int64, device=device)
    table = [torch.empty_like(mine) for _ in range(torch.distributed.get_world_size())]
    try:
        torch.distributed.all_gather(table, mine)
    except RuntimeError as error:  # torch.distributed's errors (DistBackendError, timeouts)
        raise _failed(f"the ranks' agreement on their first step ({step} here)", error) from error
    rows = torch.stack(table).tolist()  # once per Monitor
    first, planned, digested = rows[0]
    differ = [rank for rank, (start, other, code) in enumerate(rows) if start == first
              and (other, code) != (planned, digested)]  # fmt: skip
    if differ:
        other = rows[differ[0]][1]
        said = (f"rank 0 logs {_planned_steps(first, planned)}, rank {differ[0]} logs "
                f"{_planned_steps(first, other)}" if other != planned else
                f"rank 0 and rank {differ[0]} log the same steps up to step "
                f"{first + PLAN_STEPS - 1}, not later ones (before step {first + PLAN_HORIZON})")
        raise GradlabError(
            f"gradlab.Monitor: the ranks' Monitors log different steps from step {first}: "
            f"{said}; under torch.distributed every rank's Monitor must log the same steps (the "
            "same every=, preset and quantities' schedules; a schedule of your own that raises "
            "reads as logging no step where it raises, so it must raise alike on every rank): "
            "each would wait at a step another does not log until the process group times out"
        )
    return first


ANSWERS = ("does not log it", "logs it", "raises")
"""A schedule's answer for a step, as :func:`agree_on_schedules` exchanges it: 0, 1 or 2."""


def agree_on_schedules(
    step: int, quantities: int, compared: bytes, answers: Callable[[], bytes]
) -> dict[int, tuple]:
    """Where the ranks' schedules part, among the :data:`PLAN_HORIZON` steps from ``step``: one
    all-gather of three integers (and one host read), made every :data:`PLAN_HORIZON` steps,
    when the steps the ranks compared last run out; a second one, of every answer, only when
    the ranks' differ.

    A schedule past the steps compared at the first ``monitor.step()``
    (:func:`rank_zero_step`) that logs a step on one rank and not on another (one of the
    user's own that raises there, on one rank) would leave a rank waiting at that step for one
    that never comes: every rank now finds out here, together, before that step.

    Args:
        step: the first step of the steps compared.
        quantities: the Monitor's number of quantities.
        compared: what this rank's schedules log over those steps, as the ranks compare it (a
            digest of it travels): equal on every rank when they log the same steps.
        answers: called only when the ranks' ``compared`` differ: this rank's answer for each
            quantity and step, ``quantities`` rows of :data:`PLAN_HORIZON` bytes, each an
            index into :data:`ANSWERS`.

    Returns:
        By quantity index, for each quantity whose schedules log a step on some rank and not
        on another: ``(the first such step, every rank's answer there)``; ``{}`` when they
        agree, and without a process group.

    Raises:
        GradlabError: a collective failed, or the ranks are at different steps or hold
            different numbers of quantities.

    Example:
        >>> agree_on_schedules(0, 1, b"every(n=1)", lambda: bytes([1]) * PLAN_HORIZON)
        {}
    """
    if not is_distributed():
        return {}
    digest = int.from_bytes(hashlib.blake2b(compared, digest_size=7).digest(), "little")
    device = collective_device()
    mine = torch.tensor([step, quantities, digest], dtype=torch.int64, device=device)
    world = torch.distributed.get_world_size()
    table = [torch.empty_like(mine) for _ in range(world)]
    what = f"the ranks' agreement on their schedules from step {step}"
    try:
        torch.distributed.all_gather(table, mine)
    except RuntimeError as error:  # torch.distributed's errors (DistBackendError, timeouts)
        raise _failed(what, error) from error
    rows = torch.stack(table).tolist()
    if len({tuple(row) for row in rows}) == 1:
        return {}
    if len({tuple(row[:2]) for row in rows}) > 1:
        said = ", ".join(f"rank {rank} at step {row[0]} with {row[1]} quantities"
                         for rank, row in enumerate(rows))  # fmt: skip
        raise GradlabError(
            f"gradlab.Monitor: {what}: the ranks differ ({said}); under torch.distributed every "
            "rank must make the Monitor alike and call monitor.step() once per optimizer step"
        )
    table_of_mine = answers()
    if len(table_of_mine) != quantities * PLAN_HORIZON:
        raise ValueError(f"answers() gave {len(table_of_mine)} bytes, not {quantities} x "
                         f"{PLAN_HORIZON}")  # fmt: skip
    own = torch.frombuffer(bytearray(table_of_mine), dtype=torch.uint8).to(device)
    every = [torch.empty_like(own) for _ in range(world)]
    try:
        torch.distributed.all_gather(every, own)
    except RuntimeError as error:
        raise _failed(what, error) from error
    grid = torch.stack(every).reshape(world, quantities, PLAN_HORIZON).cpu()
    logged = grid == 1  # a schedule that raises logs nothing
    parts = (logged != logged[:1]).any(dim=0)  # [quantities, steps]: some rank differs there
    parted = {}
    for index in parts.any(dim=1).nonzero().flatten().tolist():
        at = int(parts[index].nonzero()[0])
        parted[index] = (step + at, tuple(grid[:, index, at].tolist()))
    return parted


def _planned_steps(first: int, plan: int, shown: int = 5) -> str:
    """The first ``shown`` steps of a :func:`rank_zero_step` plan, in words.

    Example:
        >>> _planned_steps(10, 0b10101), _planned_steps(0, 0)
        ('steps 10, 12, 14', 'no step')
    """
    steps = [first + k for k in range(PLAN_STEPS) if plan >> k & 1]
    if not steps:
        return "no step"
    more = ", ..." if len(steps) > shown else ""
    return "steps " + ", ".join(map(str, steps[:shown])) + more


def all_gather_rows(tensor: torch.Tensor, rows: tuple[int, ...] | None = None) -> torch.Tensor:
    """Concatenate ``tensor`` over ranks along dim 0 (the ranks' batches may differ in size).

    Args:
        tensor: this rank's rows ``[n_rank, ...]``.
        rows: every rank's ``n_rank`` when already agreed (:class:`StepAgreement`); ``None``:
            exchanged first (one more collective).

    Returns:
        ``[sum of n_rank, ...]``, rank 0's rows first.

    Example:
        >>> import os, tempfile
        >>> init = f"file://{tempfile.mkstemp()[1]}"
        >>> torch.distributed.init_process_group("gloo", init_method=init, rank=0, world_size=1)
        >>> all_gather_rows(torch.arange(3)).tolist()
        [0, 1, 2]
        >>> torch.distributed.destroy_process_group()
    """
    world = torch.distributed.get_world_size()
    if rows is None:
        size = torch.tensor([tensor.shape[0]], device=tensor.device)
        sizes = [torch.zeros_like(size) for _ in range(world)]
        torch.distributed.all_gather(sizes, size)
        rows = tuple(int(s.item()) for s in sizes)
    padded = torch.zeros((max(rows), *tensor.shape[1:]), dtype=tensor.dtype, device=tensor.device)
    padded[: tensor.shape[0]] = tensor
    parts = [torch.zeros_like(padded) for _ in range(world)]
    torch.distributed.all_gather(parts, padded)
    return torch.cat([part[:n] for part, n in zip(parts, rows, strict=True)])


def gather_batch(
    batch: BatchView, rows: tuple[int, ...] | None = None, *, same: bool = False
) -> BatchView:
    """The global batch of every rank (detached tensors all-gathered, the loss averaged over the
    ranks that hold rows); the
    batch itself when no process group is initialized. A batch read on a score matrix
    (``on_scores``) or on queries and candidates is not gathered: its statistics are this
    rank's own matrix, its loss the ranks' mean. Nor is a batch that every rank holds alike
    (``same``, from :func:`agree_on_step`: a loss called on embeddings all-gathered already):
    its copies are not distinct items. The watched losses' degenerate-batch counts are summed
    over the ranks.

    ``rows``: every rank's number of rows, from :func:`agree_on_step` (saves one exchange per
    tensor); ``None``: exchanged per tensor.

    Example:
        >>> view = BatchView(embeddings=torch.eye(2), labels=torch.arange(2))
        >>> gather_batch(view) is view
        True
    """
    if not is_distributed():
        return batch
    if batch.on_scores or batch.candidates is not None or same:
        # A score matrix, or queries against candidates, is no batch of rows to stack: each
        # rank's rows score the candidates that rank saw (its own, or every rank's when the
        # features are gathered), its positives placed for them. The statistics read this
        # rank's own matrix. A batch every rank holds alike is the global batch already.
        batch.loss, batch.degenerate_batches = _over_ranks(batch, rows)
        return batch
    gathered = BatchView(  # rows of embeddings and their labels (a positive mask goes with
        embeddings=all_gather_rows(batch.embeddings, rows),  # candidates: not gathered)
        labels=None if batch.labels is None  # on the embeddings' device (NCCL gathers CUDA)
        else all_gather_rows(batch.labels.to(batch.embeddings.device, torch.int64), rows),
        tau=batch.tau,
        loss_kind=batch.loss_kind,
        loss_tau=batch.loss_tau,
        score_direction=batch.score_direction,
        provides=batch.provides,
    )
    if batch.embedding_grad is not None:
        gathered.embedding_grad = all_gather_rows(batch.embedding_grad, rows)
    gathered.score_captures = batch.score_captures  # anatomy: this rank's score matrices
    gathered.local = batch  # what this rank's call saw (gradient agreement)
    gathered.loss, gathered.degenerate_batches = _over_ranks(batch, rows)
    return gathered


def _over_ranks(
    batch: BatchView, rows: tuple[int, ...] | None = None
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """``(loss, degenerate_batches)`` over every rank, in one all-reduce: the mean of the
    losses of the ranks that hold rows (``rows``, as agreed; a rank with an empty batch has a
    loss of 0 that is no measurement; every rank when ``rows`` is None) and the sum of their
    watched losses' degenerate-batch counts (a sampler bug on any rank shows), each None when
    the batch has none. 0-d float64 tensors on the device."""
    parts = []
    if batch.loss is not None:  # the loss lives where the embeddings do
        parts.append(batch.loss.detach().reshape(()).to(torch.float64))
    count = batch.degenerate_batches
    if count is not None:  # a kernel argument, not a copy to the device
        parts.append(torch.full((), float(count), dtype=torch.float64,
                                device=batch.embeddings.device))  # fmt: skip
    if not parts:
        return None, None
    totals = torch.stack(parts)
    torch.distributed.all_reduce(totals)
    holding = torch.distributed.get_world_size() if rows is None else sum(n > 0 for n in rows)
    loss = totals[0] / max(holding, 1) if batch.loss is not None else None
    return loss, (totals[-1] if count is not None else None)
