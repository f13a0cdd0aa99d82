"""Threads of a logged step on a CPU: ``monitor.step()`` with one intra-op thread or with all.

Would the Monitor's own computation of a logged step be cheaper on one intra-op thread? Its
few hundred small operations gain little from a parallel region, and on a machine whose other
cores are busy (DataLoader workers, other jobs) each region waits for one. This measures the
wall-clock seconds of ``monitor.step()`` alone (the loss and its backward run outside the
timed part, with the machine's threads) at several batch sizes, with the thread count set to
one around the call and left as it is, interleaved round after round, and their ratio (above
1: one thread is faster there). The Monitor itself leaves the thread count alone: switching it
per step was tried and, in a CNN training loop on a lightly loaded machine, made
``monitor.step()`` no faster and at times slower (``torch.set_num_threads`` also resets
oneDNN's cache of convolution plans and resizes the thread pools).

Writes ``benchmarks/results/monitor_threads.json``, with the load average before and after
(the machine may be shared).

Usage: python benchmarks/bench_monitor_threads.py [--quick]
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import argument_parser, machine_info, write_results

import gradlab

SIZES = (64, 112, 181, 256, 362, 512, 1024)
"""In-batch batch sizes B (B x B score matrices; 181^2 sits about torch's parallel grain)."""
PRESETS = ("default", "full")
TAU = 0.01


def _load() -> list[float]:
    return list(os.getloadavg())


def measure(batch: int, preset: str, rounds: int, block: int, folder: str) -> dict:
    """Median seconds of ``monitor.step()`` alone, one thread and every thread, interleaved."""
    generator = torch.Generator().manual_seed(0)
    embeddings = torch.randn(batch, 64, generator=generator)
    labels = torch.arange(batch) // 4  # classes of 4 (the last one smaller)
    loss_fn = gradlab.SmoothAPLoss(TAU)
    monitor = gradlab.Monitor(f"{folder}/{preset}_{batch}", tau=TAU, preset=preset, every=1)
    watched = monitor.watch(loss_fn)
    threads = torch.get_num_threads()

    def step(one_thread: bool) -> float:
        leaf = embeddings.detach().requires_grad_(True)
        watched(leaf, labels).backward()
        start = time.perf_counter()
        if one_thread:
            torch.set_num_threads(1)
            try:
                monitor.step()
            finally:
                torch.set_num_threads(threads)
        else:
            monitor.step()
        return time.perf_counter() - start

    modes = {"one_thread": True, "every_thread": False}
    samples: dict[str, list[float]] = {name: [] for name in modes}
    try:
        for one_thread in modes.values():  # warm-up
            step(one_thread), step(one_thread)
        for _ in range(rounds):
            for name, one_thread in modes.items():
                samples[name].append(statistics.median(step(one_thread) for _ in range(block)))
    finally:
        monitor.close()
    one, every = (statistics.median(samples[name]) for name in modes)
    return {
        "batch": batch,
        "preset": preset,
        "entries": batch * batch,
        "step_seconds_one_thread": one,
        "step_seconds_every_thread": every,
        "every_thread_over_one_thread": every / one,
        "rounds": rounds,
        "steps_per_block": block,
    }


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    device = torch.device("cpu")
    before = _load()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for preset in PRESETS:
            for batch in SIZES[:3] if args.quick else SIZES:
                block = max(3, int(20 * 112 / batch))
                row = measure(batch, preset, 3 if args.quick else 8, block, folder)
                print(f"{preset:8s} B = {batch:5d}: one thread "
                      f"{row['step_seconds_one_thread'] * 1e3:8.3f} ms, every thread "
                      f"{row['step_seconds_every_thread'] * 1e3:8.3f} ms "
                      f"({row['every_thread_over_one_thread']:.2f}x)", flush=True)  # fmt: skip
                rows.append(row)
    payload = {
        "benchmark": "monitor.step() on one intra-op thread and on every thread (CPU)",
        "machine": machine_info(device),
        "conditions": {
            "load_average_1_5_15_before": before,
            "load_average_1_5_15_after": _load(),
            "threads": torch.get_num_threads(),
            "quick": args.quick,
        },
        "results": rows,
    }
    print(f"wrote {write_results('monitor_threads.json', payload, args.quick)}")


if __name__ == "__main__":
    main()
