"""Runs the report sections in order and writes ``summary.md`` and ``results.json``.

A section is a function ``(out, quick) -> (results, markdown)``: it may write figures under
``out / "figures"``, returns JSON-ready results and a markdown fragment that cites its figures
by relative path.
"""

from __future__ import annotations

import json
import platform
from collections.abc import Callable
from pathlib import Path

import torch
from tqdm.auto import tqdm

import gradlab
from gradlab.errors import GradlabError
from gradlab.report.sections import (
    audit_section,
    operating_region_section,
    tie_aware_section,
    verification_section,
)

Section = Callable[[Path, bool], tuple[dict, str]]

SECTIONS: dict[str, Section] = {
    "audit": audit_section,
    "verification": verification_section,
    "tie_aware": tie_aware_section,
    "operating_region": operating_region_section,
}
"""Report sections by name, in report order."""


def run_report(out: Path, quick: bool = False, only: list[str] | None = None) -> dict:
    """Run the selected sections and write ``summary.md`` and ``results.json`` under ``out``."""
    names = list(SECTIONS) if not only else only
    unknown = [name for name in names if name not in SECTIONS]
    if unknown:
        raise GradlabError(f"only must name report sections {list(SECTIONS)}; got {unknown}")
    out = Path(out)
    (out / "figures").mkdir(parents=True, exist_ok=True)
    results = {
        "gradlab": gradlab.__version__,
        "torch": torch.__version__,
        "machine": platform.platform(),
        "quick": quick,
        "sections": {},
    }
    markdown = ["# gradlab report", ""]
    for name in tqdm(names, desc="report", unit="section"):
        section_results, section_markdown = SECTIONS[name](out, quick)
        results["sections"][name] = section_results
        markdown += [section_markdown, ""]
    (out / "results.json").write_text(json.dumps(results, indent=1))
    (out / "summary.md").write_text("\n".join(markdown))
    return results
