"""Renderer of the README's derivation-audit block from ``benchmarks/results/audit.json``.

The JSON is written by ``gradlab audit --measure --mutants --json benchmarks/results/audit.json``
(``make audit``); tests/symbolic/test_readme_audit.py checks that a fresh audit agrees with it.
"""

from __future__ import annotations

from pathlib import Path

from tools.readme_blocks import load_json, register

AUDIT_JSON = "benchmarks/results/audit.json"


@register("audit")
def audit(root: Path) -> str:
    """Counts, mutants killed, and every claim that does not simply hold, with its paper."""
    from gradlab.symbolic.claims import VERDICTS
    from gradlab.symbolic.seeds import SEEDS

    records = load_json(root, AUDIT_JSON)
    counts = {v: sum(r["verdict"] == v for r in records) for v in VERDICTS}
    mutants = sum(r["mutants"] for r in records)
    killed = sum(r["mutants_killed"] for r in records)
    undecided = [r for r in records if r["verdict"] == "inconclusive"]
    survivors = sum(r["mutants"] - r["mutants_killed"] for r in undecided)
    lines = [
        f"`gradlab audit --measure --mutants` checks **{len(records)}** printed claims of the "
        f"{len(SEEDS)} texts of {len({seed.title for seed in SEEDS.values()})} papers: "
        f"{counts['holds']} hold, {counts['holds-with-correction']} hold only after a correction "
        f"(each correction checked by the same computation), {counts['fails']} fail, "
        f"{counts['inconclusive']} inconclusive. Its checks reject **{killed} of {mutants}** "
        f"mutants of the printed forms"
        + (f"; the {survivors} survivors belong to the inconclusive claim, which no mutant can "
           "change until its measurement decides." if survivors == mutants - killed and survivors
           else "."),
        "",
        "| paper | claims | holds | with correction | fails | inconclusive |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for key, seed in SEEDS.items():
        mine = [r for r in records if r["seed"] == key]
        cells = " | ".join(str(sum(r["verdict"] == v for r in mine)) for v in VERDICTS)
        lines.append(f"| `{key[:3]}` {seed.citation()} | {len(mine)} | {cells} |")
    lines += ["", "Every claim that does not simply hold:", "",
              "| claim | verdict | statement |", "| --- | --- | --- |"]  # fmt: skip
    for record in records:
        if record["verdict"] != "holds":
            short = f"{record['seed'][:3]}:{record['label']}"
            lines.append(f"| `{short}` | {record['verdict']} | {record['claim']['statement']} |")
    return "\n".join(lines)
