"""Peak extra memory of SmoothAP forward+backward by label layout, one subprocess per case.

Writes ``benchmarks/results/memory.json``: for B in {1024, 2048} and the label layouts one
class, two classes, 4 per class and all singletons (d = 64, float32, CPU), the peak resident
set of a fresh process minus its baseline after imports and input creation. The peak is the
kernel's ``VmHWM`` (reset through ``/proc/self/clear_refs`` at the baseline; where that file
cannot be written, ``ru_maxrss`` is used, whose baseline is then the peak so far). Each case runs
under an address-space cap (``--cap-gib``, 6 GiB by default) so that a regression cannot take a
shared machine down: a case that hits the cap is recorded as failed, not as a number.

``--quick`` measures B = 256 alone and writes ``benchmarks/results/quick/memory.json``.

Usage: python benchmarks/bench_memory.py [--quick] [--sizes 1024 2048] [--cap-gib 6] [--out PATH]
       python benchmarks/bench_memory.py --case BATCH LAYOUT   (one measurement, JSON on stdout)
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import subprocess
import sys
from pathlib import Path

LAYOUTS = ("one_class", "two_classes", "four_per_class", "singletons")
DIMS = 64
LIMIT_MIB = 256


def labels_for(layout: str, batch: int):
    import torch

    if layout == "one_class":
        return torch.zeros(batch, dtype=torch.long)
    if layout == "two_classes":
        return torch.arange(batch) % 2
    if layout == "four_per_class":
        return torch.arange(batch) // 4
    if layout == "singletons":
        return torch.arange(batch)
    raise SystemExit(f"layout must be one of {LAYOUTS}; got {layout!r}")


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def measure_case(batch: int, layout: str) -> dict[str, object]:
    """One forward+backward in this process; RSS numbers in MiB."""
    import warnings

    import torch

    import gradlab

    generator = torch.Generator().manual_seed(0)
    embeddings = torch.randn(batch, DIMS, generator=generator).requires_grad_(True)
    labels = labels_for(layout, batch)
    loss_fn = gradlab.SmoothAPLoss(tau=0.01)
    try:
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := current RSS
        method = "VmHWM"
        baseline = _status_kib("VmRSS")
    except OSError:
        method = "ru_maxrss"
        baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # one class and singletons are degenerate batches
        loss = loss_fn(embeddings, labels)
        loss.backward()
    peak = (
        _status_kib("VmHWM")
        if method == "VmHWM"
        else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    )
    return {
        "batch_size": batch,
        "layout": layout,
        "baseline_rss_mib": round(baseline / 1024, 1),
        "peak_extra_mib": round((peak - baseline) / 1024, 1),
        "peak_method": method,
        "loss": float(loss),
    }


def run_case(batch: int, layout: str, cap_gib: float) -> dict[str, object]:
    """``measure_case`` in a fresh interpreter under an address-space cap."""
    cap = int(cap_gib * 2**30)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    completed = subprocess.run(
        [sys.executable, __file__, "--case", str(batch), layout],
        capture_output=True,
        text=True,
        preexec_fn=limit,
        check=False,
    )
    if completed.returncode != 0:
        tail = (completed.stderr or completed.stdout).strip().splitlines()[-1:]
        return {
            "batch_size": batch,
            "layout": layout,
            "failed": f"exit {completed.returncode} under a {cap_gib} GiB cap: {' '.join(tail)}",
        }
    return json.loads(completed.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=re.sub(r"``(.+?)``", r"\1", __doc__.splitlines()[0]))  # plain text
    parser.add_argument("--case", nargs=2, metavar=("BATCH", "LAYOUT"))
    parser.add_argument("--quick", action="store_true",
                        help="B = 256 alone, written under benchmarks/results/quick/")
    parser.add_argument("--sizes", nargs="+", type=int, default=None,
                        help="batch sizes (default 1024 2048; 256 with --quick)")
    parser.add_argument("--layouts", nargs="+", default=list(LAYOUTS), choices=LAYOUTS)
    parser.add_argument("--cap-gib", type=float, default=6.0,
                        help="address-space cap of each case, in GiB (default 6)")
    parser.add_argument("--out", type=Path, default=None,
                        help="the JSON (default benchmarks/results/memory.json, or "
                             "benchmarks/results/quick/memory.json with --quick)")
    args = parser.parse_args()
    if args.sizes is None:
        args.sizes = [256] if args.quick else [1024, 2048]
    if args.out is None:
        results = Path(__file__).resolve().parent / "results"
        args.out = (results / "quick" if args.quick else results) / "memory.json"
        args.out.parent.mkdir(parents=True, exist_ok=True)

    def refuse(message: str) -> None:  # one line, exit code 2, before any work
        print(f"{parser.prog}: {message}", file=sys.stderr)
        raise SystemExit(2)

    if args.case:
        batch, layout = args.case
        if not batch.isdigit() or int(batch) < 1 or layout not in LAYOUTS:
            refuse(f"--case needs a batch size of at least 1 and a layout of {list(LAYOUTS)}; "
                   f"got {batch!r} {layout!r}")  # fmt: skip
        print(json.dumps(measure_case(int(batch), layout)))
        return
    small = [size for size in args.sizes if size < 1]
    if small:
        refuse(f"--sizes must be batch sizes of at least 1; got {small}")
    if not 1.0 <= args.cap_gib < float("inf"):  # NaN too: a cap of 0 failed every case
        refuse(f"--cap-gib must be a finite number of GiB of at least 1 (importing torch maps "
               f"about 0.75 GiB before a case runs); got {args.cap_gib:g}")
    from gradlab.errors import GradlabError
    from gradlab.paths import check_output_file

    try:
        args.out = check_output_file(args.out, argument="--out")
    except GradlabError as error:
        refuse(str(error))
    import platform

    import torch

    rows = []
    for batch in args.sizes:
        for layout in args.layouts:
            row = run_case(batch, layout, args.cap_gib)
            print(json.dumps(row), flush=True)
            rows.append(row)
    within = all("failed" not in row and row["peak_extra_mib"] <= LIMIT_MIB for row in rows)
    result = {
        "benchmark": "smoothap forward+backward peak extra RSS by label layout",
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "cpu_count": __import__("os").cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "device": "cpu",
        },
        "config": {
            "dims": DIMS,
            "dtype": "float32",
            "tau": 0.01,
            "cap_gib": args.cap_gib,
            "quick": args.quick,
            "limit_mib": LIMIT_MIB,
            "measure": "peak RSS (VmHWM) minus RSS after imports and inputs, fresh process",
        },
        "all_within_limit": within,
        "cases": rows,
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}; all within {LIMIT_MIB} MiB: {within}")
    if not within:  # a case failed or passed the limit: the run says so in its exit code
        raise SystemExit(1)


if __name__ == "__main__":
    main()
