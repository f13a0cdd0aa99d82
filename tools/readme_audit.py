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
    """Counts, distinct problems and mutants, per paper, and every claim that does not simply
    hold, with its paper and root cause."""
    return audit_block(load_json(root, AUDIT_JSON))


def audit_block(records: list[dict]) -> str:
    """The audit block's markdown for ``records`` (audit.json's list).

    Verdict counts come from the records, one column per verdict of
    :data:`gradlab.symbolic.claims.VERDICTS` (the outcomes of empirical claims in their own
    columns, never counted as failures); those wrong as printed are split by the ``failure``
    their check recorded (:func:`gradlab.symbolic.audit.failure_split`); "distinct problems"
    counts the records that do not hold once per root cause
    (:func:`gradlab.symbolic.audit.distinct_problems`); the mutants are counted by kind,
    refuted apart from not evaluable (:func:`gradlab.report.summaries.mutant_outcomes`).
    """
    from gradlab.report.summaries import VERDICT_WORDS, mutant_outcomes, with_verb
    from gradlab.symbolic.audit import (
        PROBLEM_VERDICTS,
        WRONG_AS_PRINTED,
        distinct_problems,
        failure_split,
        printed_numbers_said,
    )
    from gradlab.symbolic.claims import FAILURE_WORDS, VERDICTS
    from gradlab.symbolic.seeds import SEEDS, paper_label

    counts = {v: sum(r["verdict"] == v for r in records) for v in VERDICTS}
    mutated = mutant_outcomes(records)
    covered = sum(r.get("mutants", 0) >= 3 and r.get("mutant_operators", 0) >= 2 for r in records)
    from gradlab.symbolic.mutation_operators import OPERATORS

    untestable = sum(r["verdict"] == "not-testable-here" and not r.get("mutants", 0)
                     and set(OPERATORS) <= set(r.get("inapplicable", {}))
                     for r in records)  # fmt: skip
    reasons = (f"; the {untestable} claims not testable here have none and say for every "
               "operator why (a check that cannot look at the authors' data rejects no form)"
               if untestable else "")  # fmt: skip
    failing = [r for r in records if r["verdict"] in PROBLEM_VERDICTS]
    outcomes = [f"{counts[v]} {VERDICT_WORDS[v]}" for v in VERDICTS[4:]]

    def kinds(verdict: str) -> str:  # what those of one verdict got wrong, from their records
        split = failure_split(r for r in records if r["verdict"] == verdict)
        return f" ({split})" if split else ""

    lines = [
        f"`gradlab audit --measure --mutants` checks **{len(records)}** printed claims of the "
        f"{len(SEEDS)} texts of {len({seed.title for seed in SEEDS.values()})} papers: "
        f"{with_verb(counts['holds'], 'holds', 'hold')} as printed"
        f"{printed_numbers_said(records)}, "
        f"{with_verb(counts['holds-with-correction'], 'is', 'are')} wrong as printed"
        f"{kinds('holds-with-correction')}, with a "
        "correction that holds (each correction checked by the same computation), "
        f"{with_verb(counts['fails'], 'is', 'are')} wrong with no correction that holds"
        f"{kinds('fails')}, "
        f"{counts['inconclusive']} inconclusive"
        + f"; of the claims about the authors' experiments, {', '.join(outcomes)} (outcomes "
        "on a named setting, not failures)"
        + f". The {len(failing)} claims wrong as printed show **{distinct_problems(failing)} "
        "distinct problems** (claims that share one root cause count once). Of the "
        f"**{sum(mutated.values())}** mutants of the forms that hold, its checks refute "
        f"**{mutated['refuted']}** (a case where each differs), **{mutated['not_evaluable']}** "
        "cannot be evaluated by their check (rejected, not shown wrong; each with the reason in "
        f"the JSON) and **{with_verb(mutated['passed'], 'passes', 'pass').replace(' ', '** ', 1)}"
        f"; {covered} of {len(records)} "
        f"claims have at least 3 mutants from at least 2 operators{reasons}.",
        "",
        "| paper | claims | distinct problems | " + " | ".join(VERDICT_WORDS[v] for v in VERDICTS)
        + " |",
        "| --- | --- | --- | " + " | ".join("---" for _ in VERDICTS) + " |",
    ]  # fmt: skip
    per_text = 0
    for key, seed in SEEDS.items():
        mine = [r for r in records if r["seed"] == key]
        cells = " | ".join(str(sum(r["verdict"] == v for r in mine)) for v in VERDICTS)
        lines.append(f"| {seed.citation()} | {len(mine)} | "
                     f"{distinct_problems(mine)} | {cells} |")  # fmt: skip
        per_text += distinct_problems(mine)
    if per_text != distinct_problems(failing):  # a problem of two texts of one paper
        lines += ["", f"The texts' distinct problems add up to {per_text}, against "
                  f"{distinct_problems(failing)} in all: a problem printed in two texts of one "
                  "paper counts in each text's row and once in all."]  # fmt: skip
    lines += ["", "Every claim that does not simply hold, with what its printed form got wrong "
              "(for one wrong as printed) and its root cause where several claims share one:",
              "", "| paper | claim | verdict | as printed, it | root cause | statement |",
              "| --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for record in records:
        if record["verdict"] != "holds":
            cause = record.get("cause") or "-"
            wrong = (FAILURE_WORDS[record["failure"]][0] if record["verdict"] in WRONG_AS_PRINTED
                     and record.get("failure") in FAILURE_WORDS else "-")  # fmt: skip
            lines.append(f"| {paper_label(record['seed'])} | `{record['label']}` "
                         f"| {VERDICT_WORDS[record['verdict']]} | {wrong} | {cause} "
                         f"| {record['claim']['statement']} |")  # fmt: skip
    return "\n".join(lines)
