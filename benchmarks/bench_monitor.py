"""Monitor overhead: training-step time with and without gradlab.Monitor, interleaved.

Writes ``benchmarks/results/monitor.json`` (``monitor_cuda.json`` with ``--device cuda``).
Models: a three-conv CNN on 3x32x32 inputs (batch 112 = 28 classes x 4, SmoothAP) and an MLP on
the digits (batch 100). Configurations: no monitor; the full preset every step; the default
preset on its default schedule (every 50 steps). Each configuration runs blocks of steps in
turn; the reported ratio is the median block time over the baseline's.

Usage: python benchmarks/bench_monitor.py [--device cuda] [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, machine_info, synchronize, write_results

import gradlab
from gradlab.data import load_digits_split
from gradlab.models import EmbeddingMLP, SmallConvNet


def make_step(model, loss_fn, optimizer, inputs, labels, monitor, device):
    watched = monitor.watch(loss_fn) if monitor is not None else loss_fn

    def step(index):
        x, y = inputs[index % len(inputs)], labels[index % len(labels)]
        loss = watched(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if monitor is not None:
            monitor.step()

    return step


def measure(setting: str, device: torch.device, blocks: int, steps_per_block: int) -> dict:
    torch.manual_seed(0)
    if setting == "cnn":
        model = SmallConvNet(out_features=64).to(device)
        inputs = [torch.randn(112, 3, 32, 32, device=device) for _ in range(4)]
        labels = [torch.arange(28, device=device).repeat_interleave(4) for _ in range(4)]
    else:
        digits = load_digits_split()
        model = EmbeddingMLP().to(device)
        generator = torch.Generator().manual_seed(0)
        picks = [
            torch.randperm(len(digits.train_labels), generator=generator)[:100] for _ in range(4)
        ]
        inputs = [digits.train_images[p].to(device) for p in picks]
        labels = [digits.train_labels[p].to(device) for p in picks]
    loss_fn = gradlab.SmoothAPLoss(0.01)
    folder = tempfile.mkdtemp()
    configurations = {
        "baseline": None,
        "full_every_step": gradlab.Monitor(f"{folder}/full", preset="full", every=1),
        "default_schedule": gradlab.Monitor(f"{folder}/default", preset="default"),
    }
    steps = {}
    for name, monitor in configurations.items():
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
        steps[name] = make_step(model, loss_fn, optimizer, inputs, labels, monitor, device)
        for index in range(3):  # warm-up
            steps[name](index)
    samples = {name: [] for name in configurations}
    for _ in range(blocks):
        for name, step in steps.items():
            synchronize(device)
            start = time.perf_counter()
            for index in range(steps_per_block):
                step(index)
            synchronize(device)
            samples[name].append((time.perf_counter() - start) / steps_per_block)
    for monitor in configurations.values():
        if monitor is not None:
            monitor.close()
    medians = {name: statistics.median(values) for name, values in samples.items()}
    return {
        "step_seconds_median": medians,
        "ratio_full_every_step": medians["full_every_step"] / medians["baseline"],
        "ratio_default_schedule": medians["default_schedule"] / medians["baseline"],
        "blocks": blocks,
        "steps_per_block": steps_per_block,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--quick", action="store_true")
    arguments = parser.parse_args()
    device = torch.device(arguments.device)
    blocks = 5 if arguments.quick else 15
    results = {
        "cnn_3x32x32_batch112": measure("cnn", device, blocks, steps_per_block=10),
        "mlp_digits_batch100": measure("mlp", device, blocks, steps_per_block=20),
    }
    payload = {
        "benchmark": "training-step overhead of gradlab.Monitor",
        "machine": machine_info(device),
        "targets": {"full_every_step": 1.05, "default_schedule": 1.01},
        "results": results,
    }
    suffix = "" if device.type == "cpu" else f"_{device.type}"
    previous = RESULTS / f"monitor{suffix}.json"
    if previous.exists() and "cockpit" in json.loads(previous.read_text()):
        payload["cockpit"] = json.loads(previous.read_text())["cockpit"]  # bench_cockpit.py's
    print(f"wrote {write_results(f'monitor{suffix}.json', payload)}")
    for name, result in results.items():
        print(name, {k: round(v, 4) if isinstance(v, float) else v for k, v in result.items()})


if __name__ == "__main__":
    main()
