"""Run every audited claim and format the records (table, JSON, markdown)."""

from __future__ import annotations

import json
import time
import traceback
from pathlib import Path

from gradlab.symbolic import fappy_claims, smoothap_claims, tie_aware_claims
from gradlab.symbolic.claims import VERDICTS, Claim

MODULES = (smoothap_claims, tie_aware_claims, fappy_claims)


def all_claims() -> list[Claim]:
    """Every audited claim, ordered by seed and then by label."""
    claims = [claim for module in MODULES for claim in module.claims()]
    return sorted(claims, key=lambda c: (c.seed, _label_key(c.label)))


def _label_key(label: str) -> tuple:
    if label.startswith("eq") and label[2:].isdigit():
        return (0, int(label[2:]), "")
    return (1, 0, label)


def run_audit(claims: list[Claim] | None = None) -> list[dict]:
    """Check every claim; a check that raises is recorded as ``inconclusive`` with its error."""
    records = []
    for claim in claims if claims is not None else all_claims():
        start = time.perf_counter()
        try:
            verdict = claim.check()
            outcome, detail = verdict.verdict, verdict.detail
        except Exception as error:  # the audit reports, it does not stop
            outcome = "inconclusive"
            detail = (
                f"the check raised {type(error).__name__}: {error}\n{traceback.format_exc(limit=2)}"
            )
        records.append(
            {
                "id": claim.id,
                "seed": claim.seed,
                "label": claim.label,
                "claim": {"statement": claim.statement, "formula": claim.formula},
                "method": claim.method,
                "verdict": outcome,
                "detail": detail,
                "seconds": round(time.perf_counter() - start, 4),
            }
        )
    return records


def summary_counts(records: list[dict]) -> dict[str, int]:
    return {verdict: sum(r["verdict"] == verdict for r in records) for verdict in VERDICTS}


def format_table(records: list[dict], width: int = 100) -> str:
    """A plain-text table: id, verdict, the start of the statement."""
    lines = [f"{'claim':44} {'verdict':22} statement", "-" * width]
    for record in records:
        statement = record["claim"]["statement"]
        room = max(10, width - 68)
        lines.append(f"{record['id']:44} {record['verdict']:22} {statement[:room]}")
    counts = summary_counts(records)
    lines += ["-" * width, ", ".join(f"{v}: {c}" for v, c in counts.items())]
    return "\n".join(lines)


def format_markdown(records: list[dict]) -> str:
    """A readable report: a summary table, then every claim with formula, method and detail."""
    counts = summary_counts(records)
    lines = [
        "# Derivation audit of the seed documents",
        "",
        "Each printed claim is checked by computation (SymPy, exact rationals, float64/mpmath "
        "against autograd or brute force).",
        "",
        "| verdict | claims |",
        "| --- | --- |",
        *(f"| {verdict} | {count} |" for verdict, count in counts.items()),
        "",
        "| claim | verdict | statement |",
        "| --- | --- | --- |",
    ]
    badge = {"holds": "holds", "holds-with-correction": "**holds with correction**",
             "fails": "**FAILS**", "inconclusive": "*inconclusive*"}  # fmt: skip
    for record in records:
        lines.append(
            f"| `{record['id']}` | {badge[record['verdict']]} | {record['claim']['statement']} |"
        )
    for seed in dict.fromkeys(r["seed"] for r in records):
        lines += ["", f"## {seed}", ""]
        for record in (r for r in records if r["seed"] == seed):
            lines += [
                f"### `{record['label']}`: {record['claim']['statement']}",
                "",
                f"- printed: `{record['claim']['formula']}`",
                f"- method: {record['method']}",
                f"- verdict: {badge[record['verdict']]}",
                f"- detail: {record['detail']}",
                "",
            ]
    return "\n".join(lines)


def write_outputs(records: list[dict], json_path: Path | None, markdown_path: Path | None) -> None:
    if json_path is not None:
        Path(json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(json_path).write_text(json.dumps(records, indent=1))
    if markdown_path is not None:
        Path(markdown_path).parent.mkdir(parents=True, exist_ok=True)
        Path(markdown_path).write_text(format_markdown(records))
