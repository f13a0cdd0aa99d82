"""Monitor overhead: training-step time with and without gradlab.Monitor, interleaved.

Writes ``benchmarks/results/monitor.json`` (``monitor_cuda.json`` with ``--device cuda``).
Models: a three-conv CNN on 3x32x32 inputs (batch 112 = 28 classes x 4, SmoothAP) and an MLP on
the digits (batch 100). Configurations: no monitor; the full preset every step; the default
preset on its default schedule (every 50 steps). Each configuration runs blocks of 50 steps (one
schedule period, so each default-schedule block holds exactly one logged step) in turn; the
reported ratio is the median block time over the baseline's.

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


def make_step(model, loss_fn, optimizer, inputs, labels, monitor, device, clock):
    """One training step; ``clock[0]`` accumulates the seconds spent inside ``monitor.step()``."""
    watched = monitor.watch(loss_fn) if monitor is not None else loss_fn

    def step(index):
        x, y = inputs[index % len(inputs)], labels[index % len(labels)]
        loss = watched(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if monitor is not None:
            synchronize(device)
            start = time.perf_counter()
            monitor.step()
            synchronize(device)
            clock[0] += time.perf_counter() - start

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
    steps, clocks = {}, {name: [0.0] for name in configurations}
    for name, monitor in configurations.items():
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
        steps[name] = make_step(
            model, loss_fn, optimizer, inputs, labels, monitor, device, clocks[name]
        )
        for index in range(3):  # warm-up
            steps[name](index)
        clocks[name][0] = 0.0
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
    total_steps = blocks * steps_per_block
    monitor_seconds = {name: clocks[name][0] / total_steps for name in configurations}
    baseline = medians["baseline"]
    return {
        "step_seconds_median": medians,
        "block_ratio_full_every_step": medians["full_every_step"] / baseline,
        "block_ratio_default_schedule": medians["default_schedule"] / baseline,
        "monitor_step_seconds_per_training_step": monitor_seconds,
        # The monitor's own time per step over the baseline step: robust to machine drift
        # (excludes the capture in watch(), a detach and a hook on logged steps).
        "ratio_full_every_step": 1.0 + monitor_seconds["full_every_step"] / baseline,
        "ratio_default_schedule": 1.0 + monitor_seconds["default_schedule"] / baseline,
        "blocks": blocks,
        "steps_per_block": steps_per_block,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--quick", action="store_true")
    arguments = parser.parse_args()
    device = torch.device(arguments.device)
    # A block is one period of the default schedule (50 steps), so every block of the
    # default configuration holds exactly one logged step: the ratio is the amortized cost.
    period = 50
    results = {
        "cnn_3x32x32_batch112": measure("cnn", device, 3 if arguments.quick else 6, period),
        "mlp_digits_batch100": measure("mlp", device, 5 if arguments.quick else 15, period),
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
