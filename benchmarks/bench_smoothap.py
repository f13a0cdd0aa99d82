"""SmoothAP forward+backward: gradlab against pytorch-metric-learning and a dense baseline.

Writes ``benchmarks/results/smoothap.json`` (``smoothap_cuda.json`` with ``--device cuda``).

Part 1, interleaved in one run at B in {112, 224, 448} (4 per class, d = 512):
  * ``gradlab``: gradlab.SmoothAPLoss (query not its own candidate, the paper's definition);
  * ``pml``: pytorch-metric-learning's SmoothAPLoss (builds the B^3 tensor; note that with
    B / 4 classes of 4 its positive groups are wrong, see README: timed, not trusted);
  * ``dense``: the naive O(B^3) formulation of the official code, computing the same value as
    gradlab (checked, and the difference recorded).
Part 2: gradlab alone up to B = 8192.

Usage: python benchmarks/bench_smoothap.py [--device cuda] [--quick]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (
    argument_parser,
    checked_device,
    interleaved_medians,
    machine_info,
    peak_memory_mib,
    write_results,
)

import gradlab


def dense_smooth_ap_loss(
    embeddings: torch.Tensor, labels: torch.Tensor, tau: float
) -> torch.Tensor:
    """Naive O(B^3) SmoothAP as the official code builds it, query excluded from its candidates."""
    size = embeddings.shape[0]
    normalized = F.normalize(embeddings, dim=1)
    scores = normalized @ normalized.T
    eye = torch.eye(size, dtype=torch.bool, device=embeddings.device)
    # differences[q, i, j] = s_qj - s_qi
    differences = scores.unsqueeze(1) - scores.unsqueeze(2)
    excluded = eye.unsqueeze(0) | eye.unsqueeze(1) | eye.unsqueeze(2)  # j == i, j == q or i == q
    sig = torch.sigmoid(differences / tau).masked_fill(excluded, 0.0)
    rank_all = 1.0 + sig.sum(dim=2)
    same = labels.unsqueeze(0) == labels.unsqueeze(1)
    rank_positive = 1.0 + (sig * same.unsqueeze(1)).sum(dim=2)
    positive_of_query = same & ~eye
    ap = (rank_positive / rank_all * positive_of_query).sum(1) / positive_of_query.sum(1)
    return 1.0 - ap.mean()


def make_inputs(batch, dims, per_class, device, seed):
    generator = torch.Generator().manual_seed(seed)
    embeddings = torch.randn(batch, dims, generator=generator).to(device)
    labels = torch.arange(batch // per_class).repeat_interleave(per_class).to(device)
    return embeddings, labels


def make_loss(name, tau):
    if name == "gradlab":
        return gradlab.SmoothAPLoss(tau)
    if name == "dense":
        return lambda e, y: dense_smooth_ap_loss(e, y, tau)
    from pytorch_metric_learning.losses import SmoothAPLoss as PMLSmoothAP

    return PMLSmoothAP(temperature=tau)


def probe_memory(name, batch, device, tau=0.01, dims=512, per_class=4):
    """Peak extra memory of one forward+backward, measured in a fresh interpreter.

    A fresh process has no freed-but-resident pages, so the kernel's peak resident set after
    the call, minus the resident set with the inputs in place, is the memory the call needed.
    """
    command = [sys.executable, __file__, "--probe", name, str(batch), "--device", str(device)]
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return json.loads(output.strip().splitlines()[-1])["peak_extra_mib"]


def forward_backward(loss_fn, embeddings, labels):
    def run():
        leaf = embeddings.detach().requires_grad_(True)
        loss_fn(leaf, labels).backward()

    return run


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--quick", action="store_true", help="fewer repeats, smaller scaling, "
                        "written under benchmarks/results/quick/")
    parser.add_argument("--probe", nargs=2, metavar=("METHOD", "B"), help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    device = checked_device(parser, arguments.device)
    warnings.simplefilter("ignore")
    if arguments.probe:
        name, batch = arguments.probe[0], int(arguments.probe[1])
        embeddings, labels = make_inputs(batch, 512, 4, device, seed=0)
        run = forward_backward(make_loss(name, 0.01), embeddings, labels)
        print(json.dumps({"peak_extra_mib": peak_memory_mib(run, device)}))
        return
    tau, dims, per_class = 0.01, 512, 4
    gradlab_loss = make_loss("gradlab", tau)
    methods_available = {"gradlab": gradlab_loss, "dense": make_loss("dense", tau)}
    try:
        methods_available["pml"] = make_loss("pml", tau)
    except ImportError:
        print("pytorch-metric-learning not installed: skipping it")

    comparison = []
    for batch in (112, 224, 448):
        embeddings, labels = make_inputs(batch, dims, per_class, device, seed=batch)
        runs = {
            name: forward_backward(fn, embeddings, labels) for name, fn in methods_available.items()
        }
        repeats = 3 if arguments.quick else (10 if batch < 448 else 5)
        medians = interleaved_medians(runs, device, repeats=repeats)
        with torch.no_grad():
            value_gap = abs(
                gradlab_loss(embeddings.double(), labels).item()
                - dense_smooth_ap_loss(embeddings.double(), labels, tau).item()
            )
        for name, seconds in medians.items():
            row = {
                "batch_size": batch,
                "method": name,
                "median_seconds": seconds,
                "peak_extra_mib": probe_memory(name, batch, device),
            }
            comparison.append(row)
            print(
                f"B={batch:5d} {name:8s} {seconds * 1e3:9.2f} ms  "
                f"peak +{row['peak_extra_mib']:.0f} MiB"
            )
        print(f"B={batch:5d} |gradlab - dense| loss value in float64: {value_gap:.2e}")
        comparison.append(
            {"batch_size": batch, "check": "gradlab_vs_dense_value_gap", "value": value_gap}
        )

    def median_of(batch, name):
        return next(
            r["median_seconds"]
            for r in comparison
            if r.get("method") == name and r["batch_size"] == batch
        )

    ratios = {
        str(batch): {
            f"{name}_over_gradlab": median_of(batch, name) / median_of(batch, "gradlab")
            for name in methods_available
            if name != "gradlab"
        }
        for batch in (112, 224, 448)
    }

    scaling = []
    sizes = (1024, 2048, 4096) if arguments.quick else (1024, 2048, 4096, 8192)
    for batch in sizes:
        embeddings, labels = make_inputs(batch, dims, per_class, device, seed=batch)
        run = forward_backward(gradlab_loss, embeddings, labels)
        seconds = interleaved_medians({"gradlab": run}, device, repeats=3 if batch <= 4096 else 2)[
            "gradlab"
        ]
        peak = probe_memory("gradlab", batch, device)
        scaling.append({"batch_size": batch, "median_seconds": seconds, "peak_extra_mib": peak})
        print(f"B={batch:5d} gradlab  {seconds * 1e3:9.2f} ms  peak +{peak:.0f} MiB")

    at_4096 = next(r for r in scaling if r["batch_size"] == 4096)
    payload = {
        "benchmark": "smoothap forward+backward from embeddings",
        "machine": machine_info(device),
        "config": {"tau": tau, "dims": dims, "per_class": per_class, "statistic": "median"},
        "comparison": comparison,
        "ratios": ratios,
        "scaling": scaling,
        "targets": {
            "pml_over_gradlab_at_448_at_least_100": ratios["448"].get("pml_over_gradlab", 0) >= 100,
            "b4096_under_half_second": at_4096["median_seconds"] < 0.5,
            "b4096_under_512_mib_extra": (at_4096["peak_extra_mib"] or 0) < 512,
        },
    }
    name = "smoothap.json" if device.type == "cpu" else f"smoothap_{device.type}.json"
    print(f"wrote {write_results(name, payload, arguments.quick)}")
    print(payload["ratios"], payload["targets"])


if __name__ == "__main__":
    main()
