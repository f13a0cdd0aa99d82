"""Cockpit's cheapest preset ('economy') tracked every step, on the monitor benchmark's CNN.

Cockpit (Schneider et al., 2021) needs BackPACK-extended modules and a classification loss, so
the same three-conv CNN gets a linear head over its 64-d embedding and cross-entropy on the
28 classes of the batch (112 = 28 x 4, 3x32x32 inputs). Baseline: the same model and loss
without Cockpit. Block medians, interleaved. Adds a ``cockpit`` entry to
``benchmarks/results/monitor.json``. Install with ``pip install '.[cockpit]'`` in a clone.

Usage: python benchmarks/bench_cockpit.py [--quick]
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import argument_parser, results_folder

from gradlab.models import SmallConvNet


def classifier() -> nn.Sequential:
    torch.manual_seed(0)
    cnn = SmallConvNet(out_features=64)
    return nn.Sequential(*cnn.features, nn.Flatten(), cnn.head, nn.ReLU(), nn.Linear(64, 28))


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--quick", action="store_true")
    arguments = parser.parse_args()
    warnings.simplefilter("ignore")
    try:
        import cockpit.utils.configuration as configuration
        from backpack import extend
        from cockpit import Cockpit
    except ImportError as error:
        print(f"bench_cockpit: needs cockpit-for-pytorch and backpack-for-pytorch ({error}); "
              "nothing measured", file=sys.stderr)
        raise SystemExit(2) from None
    inputs = [torch.randn(112, 3, 32, 32) for _ in range(4)]
    targets = [torch.arange(28).repeat_interleave(4) for _ in range(4)]

    baseline_model = classifier()
    baseline_loss = nn.CrossEntropyLoss()
    baseline_optimizer = torch.optim.SGD(baseline_model.parameters(), lr=1e-4)

    cockpit_model = extend(classifier())
    cockpit_loss = extend(nn.CrossEntropyLoss())
    individual = nn.CrossEntropyLoss(reduction="none")
    cockpit_optimizer = torch.optim.SGD(cockpit_model.parameters(), lr=1e-4)
    tracker = Cockpit(
        cockpit_model.parameters(),
        quantities=configuration.configuration("economy"),
    )
    counter = {"step": 0}

    def baseline_step(index):
        loss = baseline_loss(baseline_model(inputs[index % 4]), targets[index % 4])
        loss.backward()
        baseline_optimizer.step()
        baseline_optimizer.zero_grad()

    def cockpit_step(index):
        step = counter["step"]
        outputs = cockpit_model(inputs[index % 4])
        loss = cockpit_loss(outputs, targets[index % 4])
        losses = individual(outputs, targets[index % 4])
        info = {"batch_size": 112, "individual_losses": losses, "loss": loss,
                "optimizer": cockpit_optimizer}  # fmt: skip
        with tracker(step, info=info):
            loss.backward(create_graph=tracker.create_graph(step))
        cockpit_optimizer.step()
        cockpit_optimizer.zero_grad()
        counter["step"] += 1

    steps = {"baseline": baseline_step, "cockpit_economy_every_step": cockpit_step}
    for step in steps.values():
        for index in range(3):
            step(index)
    samples = {name: [] for name in steps}
    for _ in range(4 if arguments.quick else 10):
        for name, step in steps.items():
            start = time.perf_counter()
            for index in range(5):
                step(index)
            samples[name].append((time.perf_counter() - start) / 5)
    medians = {name: statistics.median(values) for name, values in samples.items()}
    result = {
        "model": "same three-conv CNN with a 28-way linear head, cross-entropy (Cockpit needs it)",
        "step_seconds_median": medians,
        "ratio_economy_every_step": medians["cockpit_economy_every_step"] / medians["baseline"],
    }
    result["quick"] = arguments.quick
    folder = results_folder(arguments.quick)  # a quick run never replaces the committed JSON
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "monitor.json"
    payload = json.loads(path.read_text()) if path.exists() else {}
    payload["cockpit"] = result
    path.write_text(json.dumps(payload, indent=2))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
