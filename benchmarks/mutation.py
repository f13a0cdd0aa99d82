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

    python benchmarks/mutation.py --only functional/harmonic --children 1

or a custom group (its own name, its own tests)::

    python benchmarks/mutation.py --group harmonic=gradlab/functional/harmonic.py \\
        --tests tests/functional/test_harmonic.py

Not part of CI. A full run takes several hours on two cores: the three largest claim modules of
``symbolic/`` (smoothap, fappy and tie-aware claims) hold 2,100-3,100 mutants each at about
30-40 a minute with one child; every other group runs in minutes. ``--recheck`` resumes a
stopped group where it left off.
"""

from __future__ import annotations

import argparse
import fcntl
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

FUNCTIONAL_TESTS = {
    "blackbox_ap": ["tests/functional/test_fastap_blackbox.py"],
    "decomposition": ["tests/functional/test_decomposition.py"],
    "diagnostics": ["tests/functional/test_diagnostics.py", "tests/monitor/test_shared.py"],
    "fappy": ["tests/functional/test_fappy.py"],
    "fastap": ["tests/functional/test_fastap_blackbox.py"],
    "gradient_anatomy": ["tests/functional/test_gradient_anatomy.py"],
    "harmonic": ["tests/functional/test_harmonic.py", "tests/functional/test_relaxed_ranking.py"],
    "layouts": ["tests/functional/test_layouts.py"],
    "losses": ["tests/functional/test_functional_losses.py", "tests/test_losses.py"],
    "operating_region": ["tests/functional/test_operating_region.py"],
    "relaxed_ranking": ["tests/functional/test_relaxed_ranking.py"],
    "retrieval_metrics": ["tests/functional/test_retrieval_metrics.py"],
    "score_losses": ["tests/functional/test_score_losses.py"],
    "sigmoid": ["tests/functional/test_sigmoid.py", "tests/functional/test_decomposition.py"],
    "smooth_ap": ["tests/functional/test_smooth_ap.py"],
    "tie_aware": ["tests/functional/test_tie_aware.py", "tests/functional/test_relaxed_ranking.py"],
}
"""Each module of ``gradlab/functional/`` -> the test files that cover it (a run stays short)."""

_MONITOR_VALUES = ["tests/monitor/test_values.py", "tests/monitor/test_shared.py",
                   "tests/monitor/test_monitor_defaults.py"]  # fmt: skip
_MONITOR_RUNS = ["tests/monitor/test_monitor.py", "tests/monitor/test_runs.py",
                 "tests/monitor/test_options.py"]  # fmt: skip
MONITOR_TESTS = {
    "anatomy": ["tests/monitor/test_anatomy.py", *_MONITOR_VALUES],
    "batch": ["tests/monitor/test_batch_view.py", *_MONITOR_VALUES,
              "tests/monitor/test_anatomy.py"],
    # test_lock_claims: the lock function by function (about a second); test_lock: the Monitor's use
    "lock": ["tests/monitor/test_lock_claims.py", "tests/monitor/test_lock.py"],
    # Without the tests that spend seconds in torch.compile, matplotlib or subprocesses
    # (mutmut cannot see subprocesses; test_monitor_paths runs torch.distributed in process).
    # test_lock: the Monitor's claim of its folder (test_lock_claims calls no Monitor code).
    "monitor": [*_MONITOR_RUNS, *_MONITOR_VALUES, "tests/monitor/test_watch.py",
                "tests/monitor/test_tau.py", "tests/monitor/test_runs_degenerate.py",
                "tests/monitor/test_anatomy.py", "tests/monitor/test_sink_roundtrip.py",
                "tests/monitor/test_monitor_paths.py", "tests/monitor/test_monitor_mutants.py",
                "tests/monitor/test_lock.py",
                *(f"--deselect=tests/monitor/{test}" for test in (
                    "test_watch.py::test_a_watched_score_loss_runs_under_torch_compile",
                    "test_monitor.py::test_plot_command",
                    "test_anatomy.py::test_plot_draws_the_anatomy_family_for_both_directions",
                    "test_lock.py::test_a_killed_writer_blocks_while_alive_and_its_lock_is_taken_over_after"))],
    "quantities": [*_MONITOR_VALUES, "tests/monitor/test_runs_degenerate.py",
                   "tests/monitor/test_monitor.py"],
    "schedules": ["tests/monitor/test_schedules.py", *_MONITOR_RUNS,
                  "tests/monitor/test_monitor_defaults.py"],
    "sinks": ["tests/monitor/test_sinks.py", "tests/monitor/test_sink_roundtrip.py",
              "tests/monitor/test_sinks_remote.py", "tests/monitor/test_runs.py",
              "tests/monitor/test_monitor_defaults.py"],
}  # fmt: skip
"""Each module of ``gradlab/monitor/`` -> the test files that cover it (no compile, sync or
overhead tests: slow, and they check costs, not values)."""

# test_claim_definitions.py first: mutmut runs the fastest covering test first, and it rejects
# a changed definition (form, mutant, method) in milliseconds without running any check.
_CLAIM_RECORDS = ["tests/symbolic/test_claim_definitions.py",
                  "tests/symbolic/test_claim_records.py", "tests/symbolic/test_checks.py",
                  "tests/symbolic/test_claims_api.py"]  # fmt: skip
SYMBOLIC_TESTS = {
    "claims": [*_CLAIM_RECORDS, "tests/symbolic/test_no_verdict_literals.py"],
    # the driver and its outputs on hand-built claims and records: seconds per mutant, where
    # the whole-audit tests of test_audit.py take about 30 s
    "audit": ["tests/symbolic/test_audit_output.py"],
    "batch_size": ["tests/symbolic/test_batch_size.py", *_CLAIM_RECORDS],
    "derivations": ["tests/symbolic/test_audit.py", *_CLAIM_RECORDS],
    "seeds": ["tests/symbolic/test_seeds.py", *_CLAIM_RECORDS, "tests/symbolic/test_audit.py"],
    # the records, and checks given forms wrong by a little (loose tolerances, coarse samples)
    **{module: [*_CLAIM_RECORDS, f"tests/symbolic/test_{module}.py"]
       for module in ("smoothap_claims", "tie_aware_claims", "fappy_claims")},
    # the operation counters and helpers pinned against independent counts and loops
    "supplementary_claims": [*_CLAIM_RECORDS, "tests/symbolic/test_supplementary_claims.py",
                             "tests/symbolic/test_batch_size.py"],
    "minibatch_claims": [*_CLAIM_RECORDS, "tests/symbolic/test_minibatch_claims.py"],
}  # fmt: skip
"""Each module of ``gradlab/symbolic/`` -> its tests: mainly one test per claim comparing its whole
record (verdict, detail, formulas, every mutant's verdict) with the committed audit.json, so a
mutant of one claim's check runs that claim only."""

DEFAULTS_TESTS = ["tests/test_defaults.py", "tests/functional/test_defaults.py"]
"""The tests of every public default, run for every functional group (only the tests that reach
a mutated function run for its mutants, so they cost one instrumented pass)."""

GROUPS = {
    **{f"functional/{module}": ([f"gradlab/functional/{module}.py"], [*tests, *DEFAULTS_TESTS])
       for module, tests in FUNCTIONAL_TESTS.items()},
    "losses": (["gradlab/losses.py"], ["tests/test_losses.py", "tests/test_defaults.py"]),
    **{f"monitor/{module}": ([f"gradlab/monitor/{module}.py"], tests)
       for module, tests in MONITOR_TESTS.items()},
    **{f"symbolic/{module}": ([f"gradlab/symbolic/{module}.py"], tests)
       for module, tests in SYMBOLIC_TESTS.items()},
}  # fmt: skip
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
        # the symbolic record tests read the committed audit.json through tools/readme_audit
        'also_copy = ["tools/", "benchmarks/results/"]\n'
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


PACKAGES = {
    "functional": "gradlab/functional/",
    "monitor": "gradlab/monitor/",
    "symbolic": "gradlab/symbolic/",
    "losses.py": "gradlab/losses.py",
}
"""Roll-up name -> the path prefix of the modules its groups mutate."""

COUNTED = ("killed", "survived", "no_tests", "timeout")


def scratch_folder(name: str) -> Path:
    """The scratch clone of one group (``/`` in a group name becomes ``-``)."""
    return Path(tempfile.gettempdir()) / f"gradlab-mutants-{name.replace('/', '-')}"


def killed_share(killed: int, undetected: int, equivalent: int) -> float | None:
    """Killed share of the non-equivalent mutants (None when every mutant is equivalent).

    A mutant no test reaches (``no_tests``) counts as undetected, as a survivor does; a timeout
    counts as detected (the tests notice a mutant that hangs).
    """
    non_equivalent = killed + undetected - equivalent
    return killed / non_equivalent if non_equivalent else None


def _recheck_names(workdir: Path, only_mutate: list[str], tests: list[str]) -> list[str]:
    """Bring a group's scratch clone to the committed tree and name the mutants to run again:
    those the last run did not detect or did not check. mutmut keeps every other verdict,
    regenerates the mutants of changed functions and maps tests that are new."""
    pyproject = workdir / "pyproject.toml"
    committed = subprocess.run(["git", "show", "HEAD:pyproject.toml"], cwd=workdir, check=True,
                               capture_output=True, text=True).stdout  # fmt: skip
    pyproject.write_text(committed)  # without the [tool.mutmut] table appended to it
    subprocess.run(["git", "pull", "--quiet", "--ff-only"], cwd=workdir, check=True)
    with open(pyproject, "a") as handle:
        handle.write(_mutmut_config(only_mutate, tests))
    return sorted(m for m, s in _collect(workdir).items() if s not in ("killed", "timeout"))


def run_group(
    name: str, only_mutate: list[str], tests: list[str], children: int, recheck: bool = False
) -> dict:
    """Mutate one group in a scratch clone and count what its tests caught (``recheck``: run
    again only the mutants the group's last run in its clone left undetected)."""
    workdir = scratch_folder(name)
    names = []
    if recheck and (workdir / "mutants").is_dir():
        names = _recheck_names(workdir, only_mutate, tests)
    else:
        _scratch_clone(workdir)
        with open(workdir / "pyproject.toml", "a") as pyproject:
            pyproject.write(_mutmut_config(only_mutate, tests))
    mutmut = Path(sys.executable).with_name("mutmut")
    started = time.perf_counter()
    subprocess.run(
        [str(mutmut), "run", "--max-children", str(children), *names],
        cwd=workdir, check=False, stdout=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(workdir)},
    )  # fmt: skip
    statuses = _collect(workdir)
    unchecked = sorted(m for m, s in statuses.items() if s == "not_checked")
    if names and unchecked:  # a recheck: mutmut reset the verdicts of functions whose tests
        subprocess.run(  # changed, and a named run leaves those unchecked: run them too
            [str(mutmut), "run", "--max-children", str(children), *unchecked],
            cwd=workdir, check=False, stdout=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(workdir)},
        )  # fmt: skip
        statuses = _collect(workdir)
    equivalents = json.loads(EQUIVALENTS.read_text()) if EQUIVALENTS.exists() else {}
    undetected = sorted(m for m, s in statuses.items() if s in ("survived", "no_tests"))
    judged = {m: equivalents[m] for m in undetected if m in equivalents}
    counts = {status: sum(s == status for s in statuses.values()) for status in COUNTED}
    detected = counts["killed"] + counts["timeout"]
    return {
        "modules": only_mutate,
        "tests": tests,
        "commit": _head(workdir),
        "generated": len(statuses),
        **counts,
        "not_checked": sum(s == "not_checked" for s in statuses.values()),
        "equivalent": judged,
        "killed_share_of_non_equivalent": killed_share(
            detected, counts["survived"] + counts["no_tests"], len(judged)
        ),
        "survivors": [m for m in undetected if m not in judged],
        "seconds": round(time.perf_counter() - started, 1),
    }


def package_of(group: dict) -> str | None:
    """The roll-up a group belongs to: the package every one of its modules lies in."""
    for package, prefix in PACKAGES.items():
        if group["modules"] and all(m.startswith(prefix) for m in group["modules"]):
            return package
    return None


def roll_up(groups: dict[str, dict]) -> dict[str, dict]:
    """Per package, the sums over its predefined groups present in ``groups``.

    Only the groups of ``GROUPS`` count (a custom ``--group`` may overlap them); a package's
    predefined groups mutate disjoint files, so no mutant is counted twice.
    """
    packages = {}
    for package in PACKAGES:
        members = sorted(name for name, group in groups.items()
                         if name in GROUPS and package_of(group) == package)  # fmt: skip
        if not members:
            continue
        total = {key: sum(groups[m][key] for m in members) for key in ("generated", *COUNTED)}
        total["equivalent"] = sum(len(groups[m]["equivalent"]) for m in members)
        total["killed_share_of_non_equivalent"] = killed_share(
            total["killed"] + total["timeout"],
            total["survived"] + total["no_tests"],
            total["equivalent"],
        )
        packages[package] = {"groups": members, **total}
    return packages


def _head(folder: Path) -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=folder,
                          capture_output=True, text=True).stdout.strip()  # fmt: skip


def write_results(out: Path, fresh: dict[str, dict]) -> dict:
    """Merge ``fresh`` groups into ``out`` under an exclusive lock and rewrite the roll-ups.

    Several people run groups at once: the file is re-read inside the lock (``out`` + ``.lock``,
    ``fcntl.flock``), so a group another run wrote meanwhile is kept, and replaced atomically.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.with_name(out.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        previous = json.loads(out.read_text()) if out.exists() else {}
        groups = {**previous.get("groups", {}), **fresh}
        report = {
            "tool": "mutmut",
            "commit": _head(ROOT),
            "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count()},
            "packages": roll_up(groups),
            "groups": dict(sorted(groups.items())),
        }
        staging = out.with_name(out.name + f".{os.getpid()}.tmp")
        staging.write_text(json.dumps(report, indent=1) + "\n")
        staging.replace(out)
    return report


def selected(wanted: str) -> dict[str, tuple[list[str], list[str]]]:
    """The predefined groups ``--only wanted`` names: itself, or all under a name ending in /."""
    return {name: spec for name, spec in GROUPS.items()
            if name == wanted or (wanted.endswith("/") and name.startswith(wanted))}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--group", action="append", default=[],
        help="NAME=GLOB[,GLOB]: a custom group to mutate, with --tests",
    )  # fmt: skip
    parser.add_argument(
        "--tests", action="append", default=[],
        help="test paths for --group (default: the whole tests/ folder)",
    )  # fmt: skip
    parser.add_argument(
        "--only", action="append", default=[], metavar="NAME",
        help="run this predefined group only (repeatable; a name ending in / runs every group "
        "under it, e.g. functional/); default: every group of GROUPS",
    )  # fmt: skip
    parser.add_argument("--list", action="store_true", help="print the predefined groups and exit")
    parser.add_argument("--children", type=int, default=2, help="parallel mutants (default 2)")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"default {RESULTS}")
    parser.add_argument(
        "--recheck", action="store_true",
        help="reuse each group's scratch clone (pulled to the committed tree) and run again "
        "only the mutants its last run left undetected: minutes after new tests",
    )  # fmt: skip
    arguments = parser.parse_args(argv)
    if arguments.list:
        for name, (only_mutate, tests) in GROUPS.items():
            print(f"{name}: {' '.join(only_mutate)} <- {' '.join(tests)}")
        return 0
    unknown = [wanted for wanted in arguments.only if not selected(wanted)]
    if unknown:
        print(f"mutation.py: --only {unknown[0]!r} is not a predefined group (see --list)",
              file=sys.stderr)  # fmt: skip
        return 2
    if shutil.which("mutmut", path=str(Path(sys.executable).parent)) is None:
        print("mutation.py: mutmut is not installed: pip install 'gradlab-ranking[mutation]'",
              file=sys.stderr)  # fmt: skip
        return 2
    groups = {}
    for spec in arguments.group:
        name, _, globs = spec.partition("=")
        groups[name] = (globs.split(","), arguments.tests or ["tests"])
    for wanted in arguments.only:
        groups.update(selected(wanted))
    groups = groups or GROUPS
    for name, (only_mutate, tests) in groups.items():
        print(f"mutation.py: {name}: mutating {only_mutate}, tests {tests}", file=sys.stderr)
        result = run_group(name, only_mutate, tests, arguments.children, arguments.recheck)
        write_results(arguments.out, {name: result})  # each group saved as soon as it is done
        share = result["killed_share_of_non_equivalent"]
        print(f"mutation.py: {name}: {result['killed']} of {result['generated']} killed, "
              f"{result['survived']} survived, {len(result['equivalent'])} equivalent, "
              f"{result['no_tests']} without tests, share {share}", file=sys.stderr)  # fmt: skip
    print(f"mutation.py: wrote {arguments.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
