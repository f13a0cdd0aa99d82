"""Renderer of the README's "How we test" mutation scores from ``benchmarks/results/mutation.json``.

The JSON is written by ``make mutants`` (``tools/mutation.py``); ``tests/test_readme.py``
checks that the block agrees with it.
"""

from __future__ import annotations

from pathlib import Path

from tools.mutation import GROUPS, PACKAGES, package_of
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


def _module_rows(groups: dict[str, dict]) -> str:
    """Every module's scores (one mutation group per module), folded under the package table."""
    if not groups:
        return ""
    lines = [
        "",
        "<details><summary>Per module</summary>",
        "",
        "| module | mutants | not checked yet | killed | timed out | survived | no test reaches it "
        "| equivalent (reason recorded) | left undetected | killed of non-equivalent checked |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, group in sorted(groups.items()):
        lines.append(
            f"| `{name}` | {group['generated']} | {_unchecked(group)} | {group['killed']} "
            f"| {group.get('timeout', 0)} | {group['survived']} | {group.get('no_tests', 0)} "
            f"| {len(group['equivalent'])} | {len(group['survivors'])} "
            f"| {_share(group['killed_share_of_non_equivalent'])} |"
        )
    return "\n".join([*lines, "", "</details>"]) + "\n"


@register("mutation-scores")
def mutation_scores(root: Path) -> str:
    """One row per package: mutants, killed, survived, judged equivalent, killed share."""
    result = load_json(root, MUTATION_JSON)
    packages = result.get("packages", {})
    lines = [
        "| package | modules run | mutants | not checked yet | killed | timed out | survived "
        "| no test reaches it | equivalent (reason recorded) | killed of non-equivalent checked |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
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
            f"| {row.get('no_tests', 0)} | {row['equivalent']} "
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
