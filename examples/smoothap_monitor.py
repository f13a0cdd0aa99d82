"""SmoothAP in a training loop with the Monitor, then the run's figures.

A small MLP learns to embed noisy copies of 64 random class centres, 8 classes of 4 per batch
(the Smooth-AP sampler), with gradlab's SmoothAP at tau = 0.01. The Monitor logs the
``default`` preset (loss, norms, the operating-region proportion P, gradient counts) on its
default schedule; ``gradlab.plotting.monitor.plot_run`` draws the log (the ``plot`` extra).

    python examples/smoothap_monitor.py --out runs/examples/smoothap_monitor
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

import gradlab
from gradlab.monitor import read_jsonl

STEPS = 60


def batches(steps: int, classes: int = 64, per_batch: int = 8, per_class: int = 4,
            dim: int = 32, seed: int = 0):
    """``steps`` batches of ``per_batch`` classes with ``per_class`` noisy items each."""
    generator = torch.Generator().manual_seed(seed)
    centres = torch.randn(classes, dim, generator=generator)
    for _ in range(steps):
        chosen = torch.randperm(classes, generator=generator)[:per_batch]
        labels = chosen.repeat_interleave(per_class)
        noise = 0.8 * torch.randn(len(labels), dim, generator=generator)
        yield centres[labels] + noise, labels


def main(out: Path) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    monitor = gradlab.Monitor(out / "run", overwrite=True)
    loss_fn = monitor.watch(gradlab.SmoothAPLoss(tau=0.01))
    for x, y in batches(STEPS):
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        monitor.step()
    monitor.close()

    _, records = read_jsonl(out / "run" / "metrics.jsonl")
    print(f"{len(records)} logged steps of {STEPS}")
    for record in (records[0], records[-1]):
        print(f"step {record['step']:>2}: loss {record['loss']:.3f}, P {record['p_seed']:.3f}, "
              f"gradient count {record['gradient_count_mean']:.1f}")
    from gradlab.plotting.monitor import plot_run

    figures = plot_run(out / "run", out / "figures")
    print("figures:", ", ".join(sorted(path.name for path in figures)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/examples/smoothap_monitor"))
    main(parser.parse_args().out)
