"""Runs the report sections in order and writes ``summary.md`` and ``results.json``."""

from __future__ import annotations

import json
import platform
from collections.abc import Callable
from pathlib import Path

import torch
from tqdm.auto import tqdm

import gradlab
from gradlab.errors import GradlabError
from gradlab.report.verification import smoothap_gradient_errors


def _verification_section(quick: bool) -> tuple[dict, str]:
    errors = smoothap_gradient_errors(trials=3 if quick else 20)
    lines = [
        "## Numeric verification (float64)",
        "",
        "| check | max abs error |",
        "| --- | --- |",
        *(f"| {name} | {value:.2e} |" for name, value in errors.items()),
    ]
    return {"smoothap_gradients": errors}, "\n".join(lines)


SECTIONS: dict[str, Callable[[bool], tuple[dict, str]]] = {
    "verification": _verification_section,
}
"""Report sections by name: each takes ``quick`` and returns (results, markdown)."""


def run_report(out: Path, quick: bool = False, only: list[str] | None = None) -> dict:
    """Run the selected sections and write ``summary.md`` and ``results.json`` under ``out``."""
    names = list(SECTIONS) if not only else only
    unknown = [name for name in names if name not in SECTIONS]
    if unknown:
        raise GradlabError(f"only must name report sections {sorted(SECTIONS)}; got {unknown}")
    out.mkdir(parents=True, exist_ok=True)
    results = {
        "gradlab": gradlab.__version__,
        "torch": torch.__version__,
        "machine": platform.platform(),
        "sections": {},
    }
    markdown = ["# gradlab report", ""]
    for name in tqdm(names, desc="report", unit="section"):
        section_results, section_markdown = SECTIONS[name](quick)
        results["sections"][name] = section_results
        markdown += [section_markdown, ""]
    (out / "results.json").write_text(json.dumps(results, indent=2))
    (out / "summary.md").write_text("\n".join(markdown))
    return results
