"""Two-rank gloo workers for the distributed fault tests (importable by spawn).

Each worker trains four steps with a Monitor logging every step and writes its own per-step
loss values to ``losses_<rank>.json`` so that the test can tell which ranks' batches a record
mixes. ``fault`` names what goes wrong on rank 1 at step 1:

* ``"none"``: nothing;
* ``"unreadable"``: the watched loss is called with a 3-D tensor the Monitor cannot read (the
  loss itself flattens it and trains);
* ``"raises"``: the watched loss raises; the loop catches it and goes on to ``monitor.step()``;
* ``"skips_step"``: rank 1 does not call ``monitor.step()`` after step 1's optimizer step;
* ``"validates"``: rank 1 alone calls the watched loss on a validation batch with gradients
  off, between step 1's backward and ``monitor.step()`` and again after it;
* ``"int32_labels"``: rank 1's labels at step 1 are int32 (rank 0's int64);
* ``"float64"``: rank 1's embeddings at step 1 are float64 (rank 0's float32).

After the loop every rank calls ``monitor.close()``, then ``torch.distributed.barrier()``:
a Monitor left waiting in a collective would hang there.
"""

import datetime
import json
import os
import time
import warnings

import torch

import gradlab
from gradlab.models import EmbeddingMLP

STEPS = 4
FAULT_STEP = 1


def rank_step_batch(rank: int, step: int, size: int = 8):
    generator = torch.Generator().manual_seed(1000 * rank + step)
    return torch.randn(size, 32, generator=generator), torch.arange(size) % 2


class FlakyLoss(torch.nn.Module):
    """SmoothAP on embeddings of any rank (flattened to 2-D); raises when told to."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = gradlab.SmoothAPLoss(0.05)
        self.raise_next = False

    def forward(self, embeddings, labels):
        if self.raise_next:
            self.raise_next = False
            raise RuntimeError("injected failure in the loss")
        return self.inner(embeddings.reshape(-1, embeddings.shape[-1]), labels)


def _validate(loss_fn, model) -> None:
    images, labels = rank_step_batch(7, 7, size=12)
    with torch.no_grad():
        loss_fn(model(images), labels)


def fault_worker(rank: int, world: int, init_file: str, out_dir: str, fault: str) -> None:
    torch.distributed.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=world
    )
    torch.manual_seed(0)
    model = EmbeddingMLP(32, 8)
    flaky = FlakyLoss()
    losses = {}
    seen = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        monitor = gradlab.Monitor(os.path.join(out_dir, "run"), preset="default", every=1)
        loss_fn = monitor.watch(flaky)
        for step in range(STEPS):
            images, labels = rank_step_batch(rank, step)
            embeddings = model(images)
            faulty = rank == 1 and step == FAULT_STEP
            if faulty and fault == "unreadable":
                embeddings = embeddings.unsqueeze(0)
            if faulty and fault == "raises":
                flaky.raise_next = True
            if faulty and fault == "int32_labels":
                labels = labels.int()
            if faulty and fault == "float64":
                embeddings = embeddings.double()
            try:
                loss = loss_fn(embeddings, labels)
            except RuntimeError:
                loss = None
            if loss is not None:
                loss.backward()
                losses[step] = float(loss)
            model.zero_grad()
            validates = faulty and fault == "validates"
            if validates:
                _validate(loss_fn, model)
            if not (faulty and fault == "skips_step"):
                monitor.step()
            if validates:
                _validate(loss_fn, model)
        monitor.close()
        seen = [str(w.message) for w in caught]
    torch.distributed.barrier()
    with open(os.path.join(out_dir, f"losses_{rank}.json"), "w") as handle:
        json.dump({"losses": losses, "warnings": seen,
                   "skipped_steps": getattr(monitor, "skipped_steps", None),
                   "out_of_step": getattr(monitor, "out_of_step", None)}, handle)  # fmt: skip
    torch.distributed.destroy_process_group()


def restart_worker(rank: int, world: int, init_file: str, out_dir: str) -> None:
    """Two Monitors one after the other on one folder, the second with ``resume=True`` (a
    Monitor per training phase), under DDP; rank 0 writes each record half a second late, as
    a loaded file system does, so rank 1 reads the folder before rank 0's last record is in
    it. Writes each rank's warnings to ``warnings_<rank>.json``."""
    torch.distributed.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=world
    )
    if rank == 0:
        from gradlab.monitor.run_folder import RunFolder

        write = RunFolder.write

        def late(self, record):
            time.sleep(0.5)
            write(self, record)

        RunFolder.write = late
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(EmbeddingMLP(32, 8))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    seen = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for phase in range(2):
            with gradlab.Monitor(os.path.join(out_dir, "run"), preset="cheap",
                                 resume=phase > 0) as monitor:  # fmt: skip
                loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
                for _ in range(13):  # the default schedule logs 0-10, then close() step 12
                    images, labels = rank_step_batch(rank, monitor.step_count)
                    loss_fn(model(images), labels).backward()
                    optimizer.step()
                    optimizer.zero_grad()
                    monitor.step()
        seen = [str(w.message) for w in caught if "gradlab" in str(w.message)]
    with open(os.path.join(out_dir, f"warnings_{rank}.json"), "w") as handle:
        json.dump(seen, handle)
    torch.distributed.barrier()
    del optimizer, model  # DDP's reducer gone before its process group (see workers.py)
    torch.distributed.destroy_process_group()


def close_after_destroy_worker(rank: int, world: int, init_file: str, out_dir: str,
                               mode: str) -> None:  # fmt: skip
    """Twelve steps on the default schedule (it skips step 11), then the process group is
    destroyed before ``monitor.close()``, a common order of clean-up. ``mode``: the Monitor's
    ``distributed`` (``"local"``: a folder per rank). Writes ``warnings_<rank>.json`` and, if
    close() raised, ``error_<rank>.txt``."""
    torch.distributed.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=world
    )
    torch.manual_seed(0)
    model = EmbeddingMLP(32, 8)
    folder = os.path.join(out_dir, "run" if mode == "auto" else f"rank{rank}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        monitor = gradlab.Monitor(folder, preset="cheap", distributed=mode)
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        for step in range(12):
            images, labels = rank_step_batch(rank, step)
            loss_fn(model(images), labels).backward()
            model.zero_grad()
            monitor.step()
        torch.distributed.destroy_process_group()
        try:
            monitor.close()
        except Exception as error:  # the test reads what went wrong
            with open(os.path.join(out_dir, f"error_{rank}.txt"), "w") as handle:
                handle.write(f"{type(error).__name__}: {error}")
        seen = [str(w.message) for w in caught]
    with open(os.path.join(out_dir, f"warnings_{rank}.json"), "w") as handle:
        json.dump(seen, handle)


def schedule_worker(rank: int, world: int, init_file: str, out_dir: str) -> None:
    """Rank 0's Monitor logs every step, rank 1's every second one: each records the error of
    its first ``monitor.step()`` (or None) in ``schedule_<rank>.json``."""
    torch.distributed.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=world,
        timeout=datetime.timedelta(seconds=30),
    )
    torch.manual_seed(0)
    model = EmbeddingMLP(32, 8)
    monitor = gradlab.Monitor(os.path.join(out_dir, "run"), preset="cheap",
                              every=1 if rank == 0 else 2)  # fmt: skip
    loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
    images, labels = rank_step_batch(rank, 0)
    loss_fn(model(images), labels).backward()
    error = None
    try:
        monitor.step()
    except gradlab.GradlabError as raised:
        error = str(raised)
    with open(os.path.join(out_dir, f"schedule_{rank}.json"), "w") as handle:
        json.dump({"error": error}, handle)
    torch.distributed.destroy_process_group()


class RowsSeen(gradlab.monitor.Quantity):
    """The rows of the step's batch (the global batch under torch.distributed); raises on
    rank 1 at :data:`FAULT_STEP` (a quantity that fails on one rank's data)."""

    name = "rows_seen"
    needs = frozenset({"embeddings"})
    keys = ("rows_seen",)

    failing_rank = 1

    def compute(self, batch):
        rank = torch.distributed.get_rank()
        if rank == self.failing_rank and self.step == FAULT_STEP:
            raise RuntimeError("injected failure in a quantity on rank 1")
        return {"rows_seen": torch.tensor(float(batch.embeddings.shape[0]))}


def disabled_worker(rank: int, world: int, init_file: str, out_dir: str,
                    failing_rank: int = 1) -> None:  # fmt: skip
    """The loss is logged at steps 0 and 1 only, :class:`RowsSeen` at every step; it raises on
    ``failing_rank`` at step 1 and is disabled there alone. Writes ``disabled_<rank>.json``
    (the warnings, the skipped steps)."""
    torch.distributed.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=world,
        timeout=datetime.timedelta(seconds=30),
    )
    torch.manual_seed(0)
    model = EmbeddingMLP(32, 8)
    rows = RowsSeen(lambda step: step >= 0)  # every step, asked with its number
    rows.failing_rank = failing_rank
    quantities = [gradlab.monitor.quantities.Loss(lambda step: step < 2), rows]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        monitor = gradlab.Monitor(os.path.join(out_dir, "run"), quantities=quantities)
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        for step in range(STEPS):
            rows.step = step
            images, labels = rank_step_batch(rank, step)
            loss_fn(model(images), labels).backward()
            model.zero_grad()
            monitor.step()
        monitor.close(log_last_step=False)
        seen = [str(w.message) for w in caught if "gradlab" in str(w.message)]
    with open(os.path.join(out_dir, f"disabled_{rank}.json"), "w") as handle:
        json.dump({"warnings": seen, "skipped_steps": monitor.skipped_steps}, handle)
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
