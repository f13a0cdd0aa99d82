"""Subprocess entry points for the crash-safety and distributed tests (importable by spawn)."""

import json
import os
import sys
import time
import warnings

import torch

import gradlab
from gradlab.models import EmbeddingMLP


def rank_batch(rank: int, size: int = 12):
    generator = torch.Generator().manual_seed(100 + rank)
    return torch.randn(size, 64, generator=generator), torch.arange(size) % 3


def distributed_worker(rank: int, world: int, init_file: str, log_dir: str) -> None:
    torch.distributed.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=world
    )
    torch.manual_seed(0)  # the same model on every rank
    model = EmbeddingMLP(64, 16)
    with gradlab.Monitor(log_dir, preset="default", every=1) as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        images, labels = rank_batch(rank)
        loss_fn(model(images), labels).backward()
        monitor.step()
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()


def rank_scores(rank: int, size: int = 6) -> torch.Tensor:
    """Rank ``rank``'s own ``[size, size]`` cosine matrix, its positives on the diagonal."""
    queries, candidates = rank_pairs(rank, size)
    return queries @ candidates.T


def rank_pairs(rank: int, size: int = 6) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank ``rank``'s own queries and candidates ``[size, 8]``, query i's positive candidate
    i: the vectors whose cosine matrix is :func:`rank_scores`."""
    generator = torch.Generator().manual_seed(200 + rank)
    queries = torch.nn.functional.normalize(torch.randn(size, 8, generator=generator), dim=1)
    noise = torch.randn(size, 8, generator=generator)
    return queries, torch.nn.functional.normalize(queries + noise, dim=1)


def score_matrix_worker(rank: int, world: int, init_file: str, log_dir: str, kind: str) -> None:
    """A loss on a score matrix (``kind="scores"``: NT-Xent) or on queries against candidates
    (``"cross"``: SmoothAP) under torch.distributed: each rank its own matrix."""
    torch.distributed.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=world
    )
    positives = torch.eye(6, dtype=torch.bool)
    with gradlab.Monitor(log_dir, preset="default", every=1) as monitor:
        if kind == "scores":
            loss_fn = monitor.watch(gradlab.NTXentLoss(0.1, direction="i2t"))
            loss = loss_fn(rank_scores(rank).requires_grad_(), positives)
        else:
            queries, candidates = (t.requires_grad_() for t in rank_pairs(rank))
            loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
            loss = loss_fn(queries, candidates=candidates, positives=positives)
        loss.backward()
        monitor.step()
        disabled = dict(monitor.disabled)
    torch.save(disabled, f"{log_dir}_rank{rank}_disabled.pt")
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()


def gathered_worker(rank: int, world: int, init_file: str, log_dir: str, distributed: str) -> None:
    """Each rank all-gathers the embeddings (its own slice keeping its graph, as SimCLR and
    CLIP implementations do) and calls the watched loss on the global batch; the warnings each
    rank saw go to ``<log_dir>_rank<rank>_warnings.json``."""
    torch.distributed.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=world
    )
    torch.manual_seed(0)  # the same model on every rank
    model = EmbeddingMLP(64, 16)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(log_dir, preset="default", every=1,
                             distributed=distributed) as monitor:  # fmt: skip
            loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
            for _ in range(2):
                images, labels = rank_batch(rank)
                embeddings = model(images)
                parts = [torch.zeros_like(embeddings) for _ in range(world)]
                torch.distributed.all_gather(parts, embeddings.detach())
                parts[rank] = embeddings
                every_label = [torch.zeros_like(labels) for _ in range(world)]
                torch.distributed.all_gather(every_label, labels)
                loss_fn(torch.cat(parts), torch.cat(every_label)).backward()
                monitor.step()
    with open(f"{log_dir}_rank{rank}_warnings.json", "w") as handle:
        json.dump([str(w.message) for w in caught if w.category is RuntimeWarning], handle)
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()


class ScaledScores(torch.nn.Module):
    """CLIP's learnable ``logit_scale`` (``log s``) on given cosine scores: ``s * q c^T``."""

    def __init__(self, log_scale: float) -> None:
        super().__init__()
        self.logit_scale = torch.nn.Parameter(torch.tensor(log_scale, dtype=torch.float64))

    def forward(self, queries: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        return self.logit_scale.exp() * queries @ candidates.T


def temperature_ddp_worker(rank: int, world: int, init_file: str, log_dir: str) -> None:
    """A DDP-wrapped learnable scale on each rank's own :func:`rank_pairs`, NT-Xent (i2t) on
    the logits, the Monitor following the scale (the record is rank 0's)."""
    torch.distributed.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=world
    )
    module = ScaledScores(2.5)
    model = torch.nn.parallel.DistributedDataParallel(module)
    quantity = gradlab.monitor.Temperature(gradlab.monitor.every(1), scale=module.logit_scale,
                                           log_scale=True, logits=True, direction="i2t")
    with gradlab.Monitor(log_dir, quantities=[quantity]) as monitor:
        loss_fn = monitor.watch(gradlab.NTXentLoss(1.0, direction="i2t"))
        queries, candidates = (t.double() for t in rank_pairs(rank))
        loss_fn(model(queries, candidates), torch.eye(6, dtype=torch.bool)).backward()
        monitor.step()
    torch.save(module.logit_scale.grad, f"{log_dir}_rank{rank}_grad.pt")
    torch.distributed.barrier()
    # DDP's reducer gone before its process group (a teardown abort, "terminate called without
    # an active exception", was seen once under load with it freed after, at the return)
    del model
    torch.distributed.destroy_process_group()


def train_forever(log_dir: str) -> None:
    """Log every step until killed; prints READY after the fifth record."""
    torch.manual_seed(0)
    model = EmbeddingMLP(64, 16)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    monitor = gradlab.Monitor(log_dir, preset="full", every=1)
    loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
    step = 0
    while True:
        images, labels = rank_batch(step % 7, size=32)
        loss_fn(model(images), labels).backward()
        optimizer.step()
        optimizer.zero_grad()
        monitor.step()
        step += 1
        if step == 5:
            print("READY", flush=True)
        time.sleep(0.001)


if __name__ == "__main__":
    sys.path.insert(0, os.getcwd())
    train_forever(sys.argv[1])
