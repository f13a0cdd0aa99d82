"""Mutation testing of gradlab's checks with mutmut: do the tests notice a plausible bug?

``make mutants`` runs this script over the modules whose numbers users trust (the math in
``gradlab/functional/``, the Monitor, the audit and the loss modules). For each module group it
clones the committed tree into a scratch folder, lets mutmut (a maintained mutation tool: we
configure it, we do not write a mutator) apply its single-point mutations one at a time, and runs
only the tests that cover the mutated function (mutmut records which tests reach which
function on a first, instrumented run). It writes ``benchmarks/results/mutation.json``: per
group, mutants generated, killed, survived, without covering tests and timed out, the
survivors by name, and the survivors judged equivalent with their one-line reason (from
``benchmarks/mutation_equivalents.json``: a change no input can observe).

Run one module in minutes::

    python benchmarks/mutation.py --group harmonic=gradlab/functional/harmonic.py \\
        --tests tests/functional/test_harmonic.py

Not part of CI: a full run takes about an hour on two cores.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "mutation.json"
EQUIVALENTS = ROOT / "benchmarks" / "mutation_equivalents.json"

GROUPS = {
    "functional": (["gradlab/functional/*"], ["tests/functional", "tests/test_defaults.py"]),
    "losses": (["gradlab/losses.py"], ["tests/test_losses.py", "tests/test_defaults.py"]),
    "monitor": (["gradlab/monitor/*"], ["tests/monitor"]),
    "symbolic": (["gradlab/symbolic/*"], ["tests/symbolic"]),
}
"""Group name -> (mutmut ``only_mutate`` globs, test paths that may kill its mutants)."""

# mutmut's exit-code convention (mutmut.stats.status_by_exit_code), folded into our columns.
STATUS = {1: "killed", 3: "killed", 37: "killed", 0: "survived", 5: "no_tests", 33: "no_tests",
          36: "timeout", -24: "timeout", 34: "skipped"}  # fmt: skip


def _mutmut_config(only_mutate: list[str], tests: list[str]) -> str:
    quoted = ", ".join(json.dumps(p) for p in only_mutate)
    selected = ", ".join(json.dumps(p) for p in tests)
    return (
        "\n[tool.mutmut]\n"
        'source_paths = ["gradlab/"]\n'
        f"only_mutate = [{quoted}]\n"
        f"pytest_add_cli_args_test_selection = [{selected}]\n"
        'pytest_add_cli_args = ["-p", "no:xdist", "-p", "no:cacheprovider", "-q", '
        '"-o", "addopts="]\n'
    )


def _scratch_clone(workdir: Path) -> None:
    if workdir.exists():
        shutil.rmtree(workdir)
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(workdir)], check=True)


def _collect(workdir: Path) -> dict[str, str]:
    """Mutant name -> status, read from mutmut's per-file ``.meta`` records."""
    statuses = {}
    for meta in (workdir / "mutants").rglob("*.meta"):
        for name, code in json.loads(meta.read_text())["exit_code_by_key"].items():
            statuses[name] = STATUS.get(code, "suspicious" if code is not None else "not_checked")
    return statuses


def run_group(name: str, only_mutate: list[str], tests: list[str], children: int) -> dict:
    """Mutate one group in a scratch clone and count what its tests caught."""
    workdir = Path(tempfile.gettempdir()) / f"gradlab-mutants-{name}"
    _scratch_clone(workdir)
    with open(workdir / "pyproject.toml", "a") as pyproject:
        pyproject.write(_mutmut_config(only_mutate, tests))
    mutmut = Path(sys.executable).with_name("mutmut")
    started = time.perf_counter()
    subprocess.run(
        [str(mutmut), "run", "--max-children", str(children)],
        cwd=workdir, check=False, stdout=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(workdir)},
    )  # fmt: skip
    statuses = _collect(workdir)
    equivalents = json.loads(EQUIVALENTS.read_text()) if EQUIVALENTS.exists() else {}
    survived = sorted(m for m, s in statuses.items() if s == "survived")
    judged = {m: equivalents[m] for m in survived if m in equivalents}
    counts = {status: sum(s == status for s in statuses.values())
              for status in ("killed", "survived", "no_tests", "timeout")}  # fmt: skip
    non_equivalent = counts["killed"] + counts["survived"] - len(judged)
    return {
        "modules": only_mutate,
        "tests": tests,
        "generated": len(statuses),
        **counts,
        "equivalent": judged,
        "killed_share_of_non_equivalent": counts["killed"] / non_equivalent
        if non_equivalent else None,
        "survivors": [m for m in survived if m not in judged],
        "seconds": round(time.perf_counter() - started, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--group", action="append", default=[],
        help="NAME=GLOB[,GLOB]: a group to mutate (default: every group of GROUPS)",
    )  # fmt: skip
    parser.add_argument(
        "--tests", action="append", default=[],
        help="test paths for --group (default: the whole tests/ folder)",
    )  # fmt: skip
    parser.add_argument("--children", type=int, default=2, help="parallel mutants (default 2)")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"default {RESULTS}")
    arguments = parser.parse_args(argv)
    if shutil.which("mutmut", path=str(Path(sys.executable).parent)) is None:
        print("mutation.py: mutmut is not installed: pip install 'gradlab[mutation]'",
              file=sys.stderr)  # fmt: skip
        return 2
    groups = {}
    for spec in arguments.group:
        name, _, globs = spec.partition("=")
        groups[name] = (globs.split(","), arguments.tests or ["tests"])
    groups = groups or GROUPS
    previous = json.loads(arguments.out.read_text()) if arguments.out.exists() else {}
    results = previous.get("groups", {})
    for name, (only_mutate, tests) in groups.items():
        print(f"mutation.py: {name}: mutating {only_mutate}, tests {tests}", file=sys.stderr)
        results[name] = run_group(name, only_mutate, tests, arguments.children)
        print(f"mutation.py: {name}: {results[name]['killed']} of {results[name]['generated']} "
              f"killed, {results[name]['survived']} survived", file=sys.stderr)  # fmt: skip
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    report = {
        "tool": "mutmut",
        "commit": commit,
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count()},
        "groups": results,
    }
    arguments.out.parent.mkdir(parents=True, exist_ok=True)
    arguments.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"mutation.py: wrote {arguments.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
