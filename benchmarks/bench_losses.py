"""Loss cost against mini-batch size: SmoothAP, FastAP, Blackbox AP and FAPPY (Brown et al.
2020, suppl., Table S2).

Writes ``benchmarks/results/losses.json`` and ``figures/loss_cost.png`` (``_cuda`` with
``--device cuda``). Forward+backward from d = 512 embeddings, 4 per class, the losses
interleaved within each batch size; median of repeats. The asymptotic order is the slope of
log(time) against log(M) over the sizes M >= 448, next to what Table S2 claims.

Usage: python benchmarks/bench_losses.py [--device cuda] [--quick]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (
    argument_parser,
    checked_device,
    interleaved_medians,
    machine_info,
    results_folder,
    write_results,
)

from gradlab import BlackboxAPLoss, FAPPYLoss, FastAPLoss, SmoothAPLoss
from gradlab.plotting.losses import plot_loss_cost

CLAIMED = {
    "SmoothAP": "O(M^2) per query",
    "FastAP": "O(M L) per query",
    "BlackboxAP": "O(n log n) per query",
    "FAPPY": "not stated",
}


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--quick", action="store_true",
                        help="sizes up to 448, written under benchmarks/results/quick/")
    arguments = parser.parse_args()
    device = checked_device(parser, arguments.device)
    losses = {
        "SmoothAP": SmoothAPLoss(0.01),
        "FastAP": FastAPLoss(10),
        "BlackboxAP": BlackboxAPLoss(4.0, 0.02),
        "FAPPY": FAPPYLoss(0.01),
    }
    sizes = [56, 112, 224, 448] if arguments.quick else [56, 112, 224, 448, 896, 1792, 4096]
    dims = 512
    timings = []
    for size in sizes:
        generator = torch.Generator().manual_seed(size)
        embeddings = torch.randn(size, dims, generator=generator).to(device)
        labels = torch.arange(size // 4).repeat_interleave(4).to(device)

        def run(loss_fn, embeddings=embeddings, labels=labels):
            def step():
                leaf = embeddings.detach().requires_grad_(True)
                loss_fn(leaf, labels).backward()

            return step

        repeats = 7 if size <= 448 else (3 if size <= 1792 else 2)
        medians = interleaved_medians({n: run(f) for n, f in losses.items()}, device, repeats)
        for name, seconds in medians.items():
            timings.append({"loss": name, "batch_size": size, "median_seconds": seconds})
            print(f"M={size:5d} {name:11s} {seconds * 1e3:10.2f} ms", flush=True)

    fitted = {}
    for name in losses:
        rows = [r for r in timings if r["loss"] == name and r["batch_size"] >= 448]
        if len(rows) >= 2:
            x = np.log([r["batch_size"] for r in rows])
            y = np.log([r["median_seconds"] for r in rows])
            fitted[name] = float(np.polyfit(x, y, 1)[0])
    payload = {
        "benchmark": "loss forward+backward against mini-batch size",
        "machine": machine_info(device),
        "dims": dims,
        "per_class": 4,
        "settings": {
            "SmoothAP tau": 0.01,
            "FastAP bins": 10,
            "Blackbox": [4.0, 0.02],
            "FAPPY": 0.01,
        },
        "timings": timings,
        "fitted_order": fitted,
        "fit_range": "M >= 448",
        "claimed": CLAIMED,
        "note": (
            "Table S2 states per-query costs; a batch of M queries multiplies them by M, and every "
            "in-batch loss also pays the O(M^2 d) similarity matrix."
        ),
    }
    suffix = "" if device.type == "cpu" else f"_{device.type}"
    print(f"wrote {write_results(f'losses{suffix}.json', payload, arguments.quick)}")
    figures = (results_folder(True) if arguments.quick
               else Path(__file__).resolve().parents[1] / "figures")  # fmt: skip
    print(f"wrote {plot_loss_cost(payload, figures / f'loss_cost{suffix}.png')}")
    if fitted:
        print("fitted orders:", {k: round(v, 2) for k, v in fitted.items()})
    else:  # a --quick run's sizes stop at 448
        print("fitted orders: none (the fit needs two batch sizes of at least 448)")


if __name__ == "__main__":
    main()
