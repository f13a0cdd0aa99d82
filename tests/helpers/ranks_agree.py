"""Two-rank gloo workers for what the ranks' Monitors must agree on (importable by spawn).

* ``horizon_worker``: a schedule of the user's own that raises on rank 1 alone at
  :data:`RAISES_AT`, past the steps the ranks compare at their first ``monitor.step()``; the
  loop runs step 0, then (as a loop resumed from a checkpoint) sets ``monitor.step_count`` to
  :data:`RESUMED_AT` and runs one step past :data:`RAISES_AT`, under ``DistributedDataParallel``.
* ``first_note_worker``: the run's first record is the ``"disabled"`` note alone (a quantity's
  ``at_call`` raises on rank 0 at step 0, where nothing else is due), then the loss is logged.
* ``warnings_worker``: a resumption of a folder prepared by the test, with a tau other than
  the loss's, a quantity one of the watched losses cannot serve and ``every=`` replacing a
  quantity's own schedule.
* ``dropped_worker``: a quantity whose ``compute`` raises on rank 0 at step 1; each rank counts
  the calls of its copy.

Each rank writes ``out_<rank>.json``: gradlab's warnings, the error it raised (or None) and
what the worker counted. The process group times out after :data:`TIMEOUT_S` seconds, so a rank
left waiting in a collective ends with an error, well inside the test's time box.
"""

import datetime
import json
import os
import warnings

import torch

import gradlab
from gradlab.models import EmbeddingMLP
from gradlab.monitor import Loss, Monitor, Quantity, every

TIMEOUT_S = 10
RESUMED_AT = 4095
RAISES_AT = 4100


def _init(rank: int, world: int, init_file: str) -> None:
    torch.distributed.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=world,
        timeout=datetime.timedelta(seconds=TIMEOUT_S),
    )


def _batch(rank: int, step: int, width: int = 4):
    generator = torch.Generator().manual_seed(1000 * rank + step)
    return torch.randn(8, width, generator=generator), torch.arange(8) % 2


def _save(out_dir: str, rank: int, caught, error, **counted) -> None:
    seen = [str(w.message) for w in caught if "gradlab" in str(w.message)]
    with open(os.path.join(out_dir, f"out_{rank}.json"), "w") as handle:
        json.dump({"warnings": seen, "error": error, **counted}, handle)


class RaisesOnRankOne:
    """Every step, but raises for :data:`RAISES_AT` on rank 1 (a table of steps that ends
    early on one rank)."""

    def __init__(self, rank: int) -> None:
        self.rank = rank

    def __call__(self, step: int) -> bool:
        if self.rank == 1 and step == RAISES_AT:
            raise RuntimeError("no entry for this step")
        return True


def horizon_worker(rank: int, world: int, init_file: str, out_dir: str) -> None:
    _init(rank, world, init_file)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(EmbeddingMLP(4, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    error = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            monitor = Monitor(os.path.join(out_dir, "run"),
                              quantities=[Loss(RaisesOnRankOne(rank))])  # fmt: skip
            loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.1))
            for step in [0, *range(RESUMED_AT, RAISES_AT + 2)]:
                if step == RESUMED_AT:
                    monitor.step_count = RESUMED_AT
                images, labels = _batch(rank, step)
                loss_fn(model(images), labels).backward()
                optimizer.step()
                optimizer.zero_grad()
                monitor.step()
            monitor.close()
        except Exception as raised:  # the test reads what went wrong
            error = f"{type(raised).__name__}: {raised}"
    _save(out_dir, rank, caught, error)
    del optimizer, model  # DDP's reducer gone before its process group
    torch.distributed.destroy_process_group()


class FailsAtFirstCall(Quantity):
    """The mean of the step's embeddings; its ``at_call`` raises on rank 0 at its first call."""

    name = "fails_at_first_call"
    keys = ("fails_at_first_call",)
    needs = frozenset({"embeddings"})

    def __init__(self, schedule) -> None:
        super().__init__(schedule)
        self.calls = 0

    def at_call(self, batch):
        self.calls += 1
        if self.calls == 1 and torch.distributed.get_rank() == 0:
            raise KeyError("injected failure at the call")

    def compute(self, batch):
        return {"fails_at_first_call": batch.embeddings.double().mean()}


def first_note_worker(rank: int, world: int, init_file: str, out_dir: str) -> None:
    _init(rank, world, init_file)
    error = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        monitor = Monitor(os.path.join(out_dir, "run"), quantities=[
            Loss(lambda step: step >= 1), FailsAtFirstCall(every(1))])  # fmt: skip
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.1))
        for step in range(3):
            embeddings, labels = _batch(rank, step)
            loss_fn(embeddings.requires_grad_(True), labels).backward()
            monitor.step()
        monitor.close()
    _save(out_dir, rank, caught, error)
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()


class EmbeddingMean(Quantity):
    """The mean of the step's embeddings (a loss on a score matrix cannot serve it)."""

    name = "embedding_mean"
    keys = ("embedding_mean",)
    needs = frozenset({"embeddings"})

    def compute(self, batch):
        return {"embedding_mean": batch.embeddings.double().mean()}


def warnings_worker(rank: int, world: int, init_file: str, out_dir: str) -> None:
    _init(rank, world, init_file)
    error = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        monitor = Monitor(os.path.join(out_dir, "run"), tau=0.05, resume=True, every=1,
                          quantities=[Loss(every(1)), EmbeddingMean(every(2))])  # fmt: skip
        monitor.watch(gradlab.NTXentLoss(0.1))  # on a score matrix: no embeddings to read
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.1))  # another tau than the Monitor's
        for step in range(2):
            embeddings, labels = _batch(rank, step)
            loss_fn(embeddings.requires_grad_(True), labels).backward()
            monitor.step()
        monitor.close()
    _save(out_dir, rank, caught, error)
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()


class CountedCalls(Quantity):
    """The rows of the step's batch; counts its ``at_call`` and ``compute`` calls, and its
    ``compute`` raises on rank 0 at its second call (step 1)."""

    name = "counted_calls"
    keys = ("counted_calls",)
    needs = frozenset({"embeddings"})

    def __init__(self, schedule) -> None:
        super().__init__(schedule)
        self.at_calls = self.computes = 0

    def at_call(self, batch):
        self.at_calls += 1

    def compute(self, batch):
        self.computes += 1
        if self.computes == 2 and torch.distributed.get_rank() == 0:
            raise RuntimeError("injected failure in compute on rank 0")
        return {"counted_calls": torch.tensor(float(batch.embeddings.shape[0]))}


def _counted_run(rank: int, world: int, init_file: str, out_dir: str, logs_loss,
                 steps: list[int]) -> None:
    """The loss (on the schedule ``logs_loss``) and a :class:`CountedCalls` every step, over
    ``steps`` (a step that is not the Monitor's next one sets ``step_count``: a loop gone
    back to an earlier checkpoint); saves the quantity's calls and the float all-gathers."""
    _init(rank, world, init_file)
    counted = CountedCalls(every(1))
    gathers = []
    gather = torch.distributed.all_gather

    def counting(out, tensor, *args, **kwargs):  # the rows gathered: floats (offers are ints)
        if tensor.is_floating_point():
            gathers.append(tuple(tensor.shape))
        return gather(out, tensor, *args, **kwargs)

    torch.distributed.all_gather = counting
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        monitor = Monitor(os.path.join(out_dir, "run"),
                          quantities=[Loss(logs_loss), counted])  # fmt: skip
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.1))
        for step in steps:
            if step != monitor.step_count:
                monitor.step_count = step  # back to an earlier checkpoint
            embeddings, labels = _batch(rank, step)
            loss_fn(embeddings.requires_grad_(True), labels).backward()
            monitor.step()
        monitor.close(log_last_step=False)
    torch.distributed.all_gather = gather
    _save(out_dir, rank, caught, None, at_calls=counted.at_calls, computes=counted.computes,
          float_gathers=len(gathers))
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()


def dropped_worker(rank: int, world: int, init_file: str, out_dir: str) -> None:
    """The loss logged at steps 0 and 1, :class:`CountedCalls` every step, 4 steps."""
    _counted_run(rank, world, init_file, out_dir, lambda step: step < 2, list(range(4)))


def went_back_worker(rank: int, world: int, init_file: str, out_dir: str) -> None:
    """``dropped_worker``'s quantity, the loss logged at step 0 alone; after step 3 the loop goes
    back to step 1 (an earlier checkpoint) and runs steps 1 to 3 again."""
    _counted_run(rank, world, init_file, out_dir, lambda step: step == 0,
                 [0, 1, 2, 3, 1, 2, 3])


class RaisesOnRankOneAt:
    """Every step, but raises for ``at`` on rank 1."""

    def __init__(self, rank: int, at: int) -> None:
        self.rank, self.at = rank, at

    def __call__(self, step: int) -> bool:
        if self.rank == 1 and step == self.at:
            raise RuntimeError("no entry for this step")
        return True


def boundary_strict_worker(rank: int, world: int, init_file: str, out_dir: str) -> None:
    """A schedule of the user's own that raises on rank 1 alone at step 4096, the first step
    past those compared at the first ``monitor.step()``, under ``strict=True``: the loop runs
    step 0, then (resumed) steps 4095 to 4097."""
    _init(rank, world, init_file)
    error = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            monitor = Monitor(os.path.join(out_dir, "run"), strict=True,
                              quantities=[Loss(RaisesOnRankOneAt(rank, 4096))])  # fmt: skip
            loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.1))
            for step in [0, 4095, 4096, 4097]:
                if step == 4095:
                    monitor.step_count = 4095
                embeddings, labels = _batch(rank, step)
                loss_fn(embeddings.requires_grad_(True), labels).backward()
                monitor.step()
            monitor.close()
        except Exception as raised:  # the test reads what went wrong
            error = f"{type(raised).__name__}: {raised}"
    _save(out_dir, rank, caught, error)
    torch.distributed.destroy_process_group()
