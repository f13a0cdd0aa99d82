"""Renderer of the README's "How we test" mutation scores from ``benchmarks/results/mutation.json``.

The JSON is written by ``make mutants`` (``tools/mutation.py``); ``tests/test_readme.py``
checks that the block agrees with it.
"""

from __future__ import annotations

from pathlib import Path

from tools.mutation import GROUPS, PACKAGES, judgement_counts, package_of
from tools.readme_blocks import load_json, register

MUTATION_JSON = "benchmarks/results/mutation.json"

def _modules_per_package() -> dict[str, int]:
    """How many groups (modules) ``tools/mutation.py`` defines for each package (the code
    of this checkout; ``root`` only holds the JSON results)."""
    defined = [package_of({"modules": globs}) for globs, _ in GROUPS.values()]
    return {package: defined.count(package) for package in PACKAGES}


def _unchecked(row: dict) -> int:
    """Mutants generated but not run yet (a run stopped early, or a group whose run failed)."""
    return row["generated"] - sum(row.get(key, 0) for key in
                                  ("killed", "survived", "no_tests", "timeout"))  # fmt: skip


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


JUDGED_COLUMNS = "equivalent (reason recorded) | killed by hand | CUDA only, not run"
"""The judged mutants, told apart: equivalent, killed by tests run by hand (counted killed),
reachable only on a GPU (counted undetected until their tests run there)."""
SHARE_COLUMN = "killed of non-equivalent checked"


def _judged_cells(kinds: dict[str, int]) -> str:
    return f"{kinds['equivalent_proper']} | {kinds['killed_by_hand']} | {kinds['cuda_only']}"


def _module_rows(groups: dict[str, dict]) -> str:
    """Every module's scores (one mutation group per module), folded under the package table."""
    if not groups:
        return ""
    lines = [
        "",
        "<details><summary>Per module</summary>",
        "",
        "| module | mutants | not checked yet | killed | timed out | survived | no test reaches it "
        f"| {JUDGED_COLUMNS} | left undetected | {SHARE_COLUMN} |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, group in sorted(groups.items()):
        kinds = judgement_counts(group["equivalent"])
        lines.append(
            f"| `{name}` | {group['generated']} | {_unchecked(group)} | {group['killed']} "
            f"| {group.get('timeout', 0)} | {group['survived']} | {group.get('no_tests', 0)} "
            f"| {_judged_cells(kinds)} | {len(group['survivors'])} "
            f"| {_share(group['killed_share_of_non_equivalent'])} |"
        )
    return "\n".join([*lines, "", "</details>"]) + "\n"


def _package_kinds(result: dict, row: dict) -> dict[str, int]:
    """A package's judged mutants told apart, from its groups' judgements."""
    groups = result.get("groups", {})
    return judgement_counts({f"{name}:{mutant}": reason for name in row["groups"]
                             for mutant, reason in groups.get(name, {}).get("equivalent",
                                                                            {}).items()})


@register("mutation-scores")
def mutation_scores(root: Path) -> str:
    """One row per package: mutants, killed, survived, judged equivalent, killed share."""
    result = load_json(root, MUTATION_JSON)
    packages = result.get("packages", {})
    lines = [
        "| package | modules run | mutants | not checked yet | killed | timed out | survived "
        f"| no test reaches it | {JUDGED_COLUMNS} | {SHARE_COLUMN} |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    missing = []
    modules = _modules_per_package()
    for name in PACKAGES:
        row = packages.get(name)
        if row is None:
            missing.append(name)
            continue
        lines.append(
            f"| `{name}` | {len(row['groups'])} of {modules[name]} | {row['generated']} "
            f"| {_unchecked(row)} | {row['killed']} | {row.get('timeout', 0)} | {row['survived']} "
            f"| {row.get('no_tests', 0)} | {_judged_cells(_package_kinds(result, row))} "
            f"| {_share(row['killed_share_of_non_equivalent'])} |"
        )
    text = "\n".join(lines) + "\n"
    gathered = packages.get("other top-level modules")
    if gathered is not None:  # named below the table, not in a tall cell
        text += ("\nOther top-level modules: "
                 + ", ".join(f"`{name}`" for name in gathered["groups"]) + ".\n")  # fmt: skip
    text += _module_rows(result.get("groups", {}))
    machine = result.get("machine", {})
    text += (
        f"\nmutmut at commit `{result.get('commit', '?')}` on {machine.get('cpu_count', '?')} "
        "cores; per-module groups and survivors are in the JSON."
    )
    if missing:
        text += f" Not run yet: {', '.join(f'`{m}`' for m in missing)}."
    return text + "\n"
