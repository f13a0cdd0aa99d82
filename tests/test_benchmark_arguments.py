"""The benchmark scripts refuse bad arguments before any work: one line, exit code 2.

A full run of some takes minutes (retrieval about 9); an output path that cannot be written,
found only when the results are saved, lost them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(script: str, *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *arguments],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(("script", "arguments", "message"), [
    ("bench_memory.py", ["--out", "/proc/x.json"], "bench_memory.py: --out must be a path "
     "gradlab can write; got '/proc/x.json', and files cannot be written in '/proc'"),
    ("bench_memory.py", ["--sizes", "0", "64"],
     "bench_memory.py: --sizes must be batch sizes of at least 1; got [0]"),
    ("bench_memory.py", ["--case", "x", "singletons"], "bench_memory.py: --case needs a batch "
     "size of at least 1 and a layout of ['one_class', 'two_classes', 'four_per_class', "
     "'singletons']; got 'x' 'singletons'"),
    ("bench_memory.py", ["--cap-gib", "0"], "bench_memory.py: --cap-gib must be a finite number "
     "of GiB of at least 1 (importing torch maps about 0.75 GiB before a case runs); got 0"),
    ("bench_memory.py", ["--cap-gib", "nan"], "bench_memory.py: --cap-gib must be a finite number "
     "of GiB of at least 1 (importing torch maps about 0.75 GiB before a case runs); got nan"),
    ("bench_retrieval.py", ["--quick", "--out", "/proc/x.json"], "bench_retrieval.py: --out "
     "must be a path gradlab can write; got '/proc/x.json', and files cannot be written in "
     "'/proc'"),
    ("bench_retrieval.py", ["--rounds", "0"], "bench_retrieval.py: --rounds must be at least "
     "1; got 0"),
    ("bench_monitor.py", ["--threads", "0"], "bench_monitor.py: --threads must be at least 1; "
     "got 0"),
    ("bench_smoothap.py", ["--device", "banana"], "bench_smoothap.py: --device must be cpu, "
     "cuda[:N] or mps; got 'banana'"),
    ("bench_losses.py", ["--device", "banana"], "bench_losses.py: --device must be cpu, "
     "cuda[:N] or mps; got 'banana'"),
])  # fmt: skip
def test_a_bad_argument_is_one_line_and_exit_code_2(script, arguments, message):
    done = _run(script, *arguments)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", message + "\n")


def test_quick_runs_write_apart_from_the_committed_results():
    # a --quick run replaced the JSON (and figure) the docs quote, unlabelled
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import common
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    assert common.results_folder(False) == ROOT / "benchmarks" / "results"
    assert common.results_folder(True) == ROOT / "benchmarks" / "results" / "quick"
    ignored = subprocess.run(["git", "check-ignore", "-q", "benchmarks/results/quick/x.json"],
                             cwd=ROOT, check=False)  # fmt: skip
    assert ignored.returncode == 0
