"""Two-rank gloo workers for the Monitor's note of disabled quantities and its group-wide
warnings under ``torch.distributed`` (importable by spawn).

``notes_worker`` trains with a quantity of the user's own that is disabled at step 2 while no
other quantity is due then or later, in one of three ways (``case``):

* ``"at_call"``: its ``at_call`` raises on rank 0, which writes the log;
* ``"schedule"``: its schedule raises for step 2 (on every rank);
* ``"schedule_ends"``: its schedule raises for step 2 and every later step (on every rank);
* ``"last_call"``: its ``at_call`` raises on rank 0 at the call of step 2, after which
  ``close()`` comes with no ``monitor.step()``.

``same_batch_worker`` trains three steps on the same batch on both ranks (the case the Monitor
reads once, and warns of once).

Each rank writes what it was warned of (gradlab's warnings) to ``warnings_<rank>.json``, and
its Monitor's ``disabled`` (quantity name: why) to ``disabled_<rank>.json``.
"""

import datetime
import json
import os
import warnings

import torch

import gradlab
from gradlab.monitor import Loss, Monitor, Quantity

DISABLED_AT = 2


class FailsAtStep(Quantity):
    """The mean of the step's embeddings; its ``at_call`` raises on rank 0 at
    :data:`DISABLED_AT` when ``fails`` (its calls counted from 0, one per step)."""

    name = "fails_at_step"
    keys = ("fails_at_step",)
    needs = frozenset({"embeddings"})

    def __init__(self, schedule, fails: bool, on_rank: int = 0) -> None:
        super().__init__(schedule)
        self.fails, self.calls, self.on_rank = fails, 0, on_rank

    def at_call(self, batch):
        self.calls += 1
        if (self.fails and torch.distributed.get_rank() == self.on_rank
                and self.calls - 1 == DISABLED_AT):  # fmt: skip
            raise KeyError("injected failure at the call")

    def compute(self, batch):
        return {"fails_at_step": batch.embeddings.double().mean()}


def _every_step_but_one(step: int) -> bool:
    if step == DISABLED_AT:
        raise RuntimeError("bad step")
    return True


def _planned_steps(step: int) -> bool:
    """A schedule read from a plan of two steps: it raises for every step past them."""
    return [True, True][step]


def _init(rank: int, world: int, init_file: str) -> None:
    torch.distributed.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=world,
        timeout=datetime.timedelta(seconds=30),
    )


def batch_of(rank: int, step: int):
    generator = torch.Generator().manual_seed(1000 * rank + step)
    return torch.randn(8, 4, generator=generator, requires_grad=True), torch.arange(8) % 2


def _save_and_leave(out_dir: str, rank: int, caught, monitor: Monitor) -> None:
    seen = [str(w.message) for w in caught if "gradlab" in str(w.message)]
    with open(os.path.join(out_dir, f"warnings_{rank}.json"), "w") as handle:
        json.dump(seen, handle)
    with open(os.path.join(out_dir, f"disabled_{rank}.json"), "w") as handle:
        json.dump(monitor.disabled, handle)
    torch.distributed.barrier()  # every rank's files written before the group ends
    torch.distributed.destroy_process_group()


def notes_worker(rank: int, world: int, init_file: str, out_dir: str, case: str) -> None:
    _init(rank, world, init_file)
    if case == "schedule":
        quantities = [FailsAtStep(_every_step_but_one, fails=False)]
    elif case == "schedule_ends":  # raises at step 2 and at every step after it
        quantities = [FailsAtStep(_planned_steps, fails=False)]
    else:  # the loss at step 0 (and 1), the failing quantity at every step
        quantities = [Loss(lambda step: step < 1), FailsAtStep(lambda step: True, fails=True)]
    steps = 3 if case == "last_call" else 4  # the last call's step never closes
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        monitor = Monitor(os.path.join(out_dir, "run"), quantities=quantities)
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.1))
        for step in range(steps):
            embeddings, labels = batch_of(rank, step)
            loss_fn(embeddings, labels).backward()
            if not (case == "last_call" and step == steps - 1):
                monitor.step()
        monitor.close()
    _save_and_leave(out_dir, rank, caught, monitor)


def same_batch_worker(rank: int, world: int, init_file: str, out_dir: str) -> None:
    _init(rank, world, init_file)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Monitor(os.path.join(out_dir, "run"), preset="cheap", every=1) as monitor:
            loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.1))
            for step in range(3):
                embeddings, labels = batch_of(0, step)  # rank 0's batch on every rank
                loss_fn(embeddings, labels).backward()
                monitor.step()
    _save_and_leave(out_dir, rank, caught, monitor)


class FailsToCompute(Quantity):
    """The mean of the step's embeddings, whose ``compute`` raises on every rank."""

    name = "fails_to_compute"
    keys = ("fails_to_compute",)
    needs = frozenset({"embeddings"})

    def compute(self, batch):
        raise ValueError("injected failure in compute")


def first_record_worker(rank: int, world: int, init_file: str, out_dir: str) -> None:
    """One step whose only due quantity raises in ``compute``: the run's first record holds
    the note alone, no value of a batch gathered or not."""
    _init(rank, world, init_file)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Monitor(os.path.join(out_dir, "run"),
                     quantities=[FailsToCompute(lambda step: True)]) as monitor:  # fmt: skip
            embeddings, labels = batch_of(rank, 0)
            monitor.watch(gradlab.SmoothAPLoss(0.1))(embeddings, labels).backward()
            monitor.step()
    _save_and_leave(out_dir, rank, caught, monitor)


def disabled_on_rank_1_worker(rank: int, world: int, init_file: str, out_dir: str) -> None:
    """Four steps; the quantity's ``at_call`` raises on rank 1 alone at step 2: rank 0 logs it
    on from the batches of both ranks, which rank 1 still offers to the gathering."""
    _init(rank, world, init_file)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Monitor(os.path.join(out_dir, "run"), quantities=[
                FailsAtStep(lambda step: True, fails=True, on_rank=1)]) as monitor:  # fmt: skip
            loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.1))
            for step in range(4):
                embeddings, labels = batch_of(rank, step)
                loss_fn(embeddings, labels).backward()
                monitor.step()
    _save_and_leave(out_dir, rank, caught, monitor)
