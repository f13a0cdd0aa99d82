"""Two-rank gloo workers for the distributed fault tests (importable by spawn).

Each worker trains four steps with a Monitor logging every step and writes its own per-step
loss values to ``losses_<rank>.json`` so that the test can tell which ranks' batches a record
mixes. ``fault`` names what goes wrong on rank 1 at step 1:

* ``"none"``: nothing;
* ``"unreadable"``: the watched loss is called with a 3-D tensor the Monitor cannot read (the
  loss itself flattens it and trains);
* ``"raises"``: the watched loss raises; the loop catches it and goes on to ``monitor.step()``;
* ``"skips_step"``: rank 1 does not call ``monitor.step()`` after step 1's optimizer step.

After the loop every rank calls ``monitor.close()``, then ``torch.distributed.barrier()``:
a Monitor left waiting in a collective would hang there.
"""

import json
import os
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
            try:
                loss = loss_fn(embeddings, labels)
            except RuntimeError:
                loss = None
            if loss is not None:
                loss.backward()
                losses[step] = float(loss)
            model.zero_grad()
            if not (faulty and fault == "skips_step"):
                monitor.step()
        monitor.close()
        seen = [str(w.message) for w in caught]
    torch.distributed.barrier()
    with open(os.path.join(out_dir, f"losses_{rank}.json"), "w") as handle:
        json.dump({"losses": losses, "warnings": seen,
                   "skipped_steps": getattr(monitor, "skipped_steps", None),
                   "out_of_step": getattr(monitor, "out_of_step", None)}, handle)  # fmt: skip
    torch.distributed.destroy_process_group()
