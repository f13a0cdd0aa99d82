"""Evaluation at Stanford Online Products' scale: gradlab's chunked retrieval metrics against
pytorch-metric-learning's ``AccuracyCalculator`` with faiss-cpu, in the same run.

N = 60,000 unit embeddings of dimension 512 in 11,318 classes (the size of Online Products'
test split; each embedding is its class's random centre plus Gaussian noise of twice its norm,
so the metrics are far from 0 and from 1 and the two methods' agreement means something),
every embedding querying all the others; Precision@1, R-Precision and MAP@R with
``k = max_bin_count``. Each method runs once per round, in turn, on one thread
(``torch.set_num_threads(1)``, ``faiss.omp_set_num_threads(1)``), so the machine's other load
hits both alike; wall-clock and process CPU seconds are recorded, with the peak resident memory
each call adds (``VmHWM`` reset before the call). Writes ``benchmarks/results/retrieval.json``.

Usage: python benchmarks/bench_retrieval.py [--quick] [--rounds 1] [--out PATH]
Needs: pytorch-metric-learning and faiss-cpu (``pip install '.[pml,faiss]'`` in a clone).
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import (
    argument_parser,
    at_least_one,
    checked_output,
    machine_info,
    peak_memory_mib,
    results_folder,
)
from gradlab.functional.retrieval_at_scale import retrieval_at_scale

FULL = {"count": 60_000, "dim": 512, "classes": 11_318}
QUICK = {"count": 6_000, "dim": 128, "classes": 1_132}
KEYS = {"precision_at_1": "precision_at_1", "r_precision": "r_precision",
        "map_at_r": "mean_average_precision_at_r"}  # fmt: skip
MEMORY_TARGET_MIB = 2048
NOISE = 2.0  # noise norm over centre norm: same-class cosine about 1 / (1 + NOISE^2) = 0.2


def data(count: int, dim: int, classes: int, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    labels = (torch.arange(count) % classes)[torch.randperm(count, generator=generator)]
    centres = F.normalize(torch.randn(classes, dim, generator=generator), dim=1)
    noise = F.normalize(torch.randn(count, dim, generator=generator), dim=1)
    return F.normalize(centres[labels] + NOISE * noise, dim=1), labels


def ours(embeddings, labels):
    return retrieval_at_scale(embeddings, labels, ks=(1,))


def pml_faiss(embeddings, labels):
    from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator

    calculator = AccuracyCalculator(include=tuple(KEYS.values()), k="max_bin_count")
    result = calculator.get_accuracy(embeddings, labels)
    return {key: result[pml_key] for key, pml_key in KEYS.items()}


def measure(function, *args) -> dict:
    cpu, wall = time.process_time(), time.perf_counter()
    holder = {}
    peak = peak_memory_mib(lambda: holder.setdefault("value", function(*args)), torch.device("cpu"))
    return {
        "wall_seconds": time.perf_counter() - wall,
        "cpu_seconds": time.process_time() - cpu,
        "peak_extra_mib": peak,
        "metrics": {key: holder["value"][key] for key in KEYS},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__, whole=False)
    parser.add_argument("--quick", action="store_true", help=f"sizes {QUICK} (a smoke run)")
    parser.add_argument("--rounds", type=int, default=1, help="interleaved rounds (default 1)")
    parser.add_argument("--out", type=Path, default=None,
                        help="the JSON (default: benchmarks/results/retrieval.json, a --quick "
                        "run's under benchmarks/results/quick/)")
    arguments = parser.parse_args(argv)
    at_least_one(parser, arguments.rounds, "--rounds")
    if arguments.out is None:
        results_folder(arguments.quick).mkdir(parents=True, exist_ok=True)
        arguments.out = results_folder(arguments.quick) / "retrieval.json"
    arguments.out = checked_output(parser, arguments.out, "--out")
    try:
        import faiss
        import pytorch_metric_learning  # noqa: F401
    except ImportError as error:
        print(f"bench_retrieval: needs faiss-cpu and pytorch-metric-learning ({error})",
              file=sys.stderr)  # fmt: skip
        return 2
    torch.set_num_threads(1)
    faiss.omp_set_num_threads(1)
    sizes = QUICK if arguments.quick else FULL
    embeddings, labels = data(**sizes)
    started, load_before = time.strftime("%Y-%m-%dT%H:%M:%S%z"), os.getloadavg()
    rounds = []
    for number in range(arguments.rounds):
        row = {}
        for name, function in (("gradlab", ours), ("pml_faiss", pml_faiss)):
            row[name] = measure(function, embeddings, labels)
            print(f"round {number + 1}/{arguments.rounds} {name}: "
                  f"{row[name]['wall_seconds']:.1f} s wall, {row[name]['cpu_seconds']:.1f} s CPU, "
                  f"peak +{row[name]['peak_extra_mib']:.0f} MiB", flush=True)  # fmt: skip
        rounds.append(row)

    def median(name, field):
        return statistics.median(row[name][field] for row in rounds)

    result = {
        "benchmark": "retrieval metrics at Stanford Online Products' test-set size",
        "sizes": sizes,
        "machine": machine_info(torch.device("cpu")) | {"threads": 1},
        "conditions": {
            "started": started,
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "load_average_1_5_15_before": list(load_before),
            "load_average_1_5_15_after": list(os.getloadavg()),
            "note": "one thread each; methods interleaved per round; 2 cores shared",
            "faiss": faiss.__version__,
            "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        },
        "targets": {"peak_extra_mib": MEMORY_TARGET_MIB, "cpu_ratio_gradlab_over_pml_faiss": 1.0},
        "rounds": rounds,
        "median": {
            name: {
                field: median(name, field)
                for field in ("wall_seconds", "cpu_seconds", "peak_extra_mib")
            }
            for name in ("gradlab", "pml_faiss")
        },
    }
    result["ratio_gradlab_over_pml_faiss"] = {
        field: result["median"]["gradlab"][field] / result["median"]["pml_faiss"][field]
        for field in ("wall_seconds", "cpu_seconds")
    }
    result["largest_metric_difference"] = max(
        abs(row["gradlab"]["metrics"][key] - row["pml_faiss"]["metrics"][key])
        for row in rounds
        for key in KEYS
    )
    arguments.out.parent.mkdir(parents=True, exist_ok=True)
    arguments.out.write_text(json.dumps(result, indent=2) + "\n")
    ratio = result["ratio_gradlab_over_pml_faiss"]
    peak = result["median"]["gradlab"]["peak_extra_mib"]
    print(f"gradlab / pml+faiss: CPU {ratio['cpu_seconds']:.2f}x, "
          f"wall {ratio['wall_seconds']:.2f}x; gradlab peak +{peak:.0f} MiB "
          f"(target {MEMORY_TARGET_MIB}); wrote {arguments.out}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
