"""Runs the report sections in order and writes ``summary.md`` and ``results.json``.

A section is a function ``(out, quick, device) -> (results, markdown)``: it may write figures under
``out / "figures"``, returns JSON-ready results and a markdown fragment that cites its figures
by relative path.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable
from pathlib import Path

import torch

import gradlab
from gradlab.errors import GradlabError
from gradlab.experiments.runtime import check_workers, study_threads, study_workers
from gradlab.jsonio import write_json
from gradlab.progress import progress
from gradlab.report.findings import findings_markdown
from gradlab.report.html import markdown_to_html
from gradlab.report.sections import (
    audit_section,
    loss_comparison_section,
    operating_region_section,
    scenes_section,
    tie_aware_section,
    training_section,
    verification_section,
)
from gradlab.report.user_studies import (
    check_study_folders,
    study_findings,
    study_report_section,
)

Section = Callable[[Path, bool, str], tuple[dict, str]]

SECTIONS: dict[str, Section] = {
    "audit": audit_section,
    "verification": verification_section,
    "tie_aware": tie_aware_section,
    "operating_region": operating_region_section,
    "training": training_section,
    "losses": loss_comparison_section,
    "scenes": scenes_section,
}

"""Report sections by name, in report order."""


def run_report(
    out: Path,
    quick: bool = False,
    only: list[str] | None = None,
    device: str = "cpu",
    workers: int = 1,
    studies: list[Path] | None = None,
) -> dict:
    """Run the selected sections; write ``summary.md``, ``index.html``, ``results.json``.

    A section that fails (a missing optional dependency, say) is skipped with a note in the
    report instead of failing the whole run.

    Args:
        out: the report's folder (created if missing).
        quick: small settings (numbers are not the study's).
        only: the sections to run (default: all of :data:`SECTIONS`, in that order).
        device: where the studies' networks run.
        workers: processes that run a study's seeds (and losses) side by side, one torch thread
            each (:func:`gradlab.experiments.runtime.study_workers`); 1 runs everything in this
            process. The numbers are the same for any value; only the timings differ.
        studies: folders written by ``gradlab study``: each study saved there becomes a section
            after the bundled ones, rendered from its JSON (nothing is trained), with its
            findings; checked before any section runs
            (:func:`gradlab.report.user_studies.check_study_folders`).

    Returns:
        The results as written to ``results.json``.

    Example:
        >>> import tempfile
        >>> from gradlab.progress import set_progress_mode
        >>> set_progress_mode("off")
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     results = run_report(Path(folder), quick=True, only=["tie_aware"])
        >>> set_progress_mode("auto")
        >>> sorted(results["sections"])
        ['tie_aware']
    """
    names = list(SECTIONS) if not only else only
    unknown = [name for name in names if name not in SECTIONS]
    if unknown:
        raise GradlabError(f"only must name report sections {list(SECTIONS)}; got {unknown}")
    workers = check_workers(workers)
    user_studies = check_study_folders(studies or [])
    out = Path(out)
    (out / "figures").mkdir(parents=True, exist_ok=True)
    results = {
        "gradlab": gradlab.__version__,
        "torch": torch.__version__,
        "machine": platform.platform(),
        "quick": quick,
        "device": device,
        "sections": {},
        "skipped": {},
    }
    intro = [
        "# gradlab report",
        "",
        f"gradlab {gradlab.__version__}, torch {torch.__version__}, device {device}"
        + (", quick settings (small data and few steps: numbers are not the study's)" if quick
           else "")
        + ".",
        "",
    ]  # fmt: skip
    markdown: list[str] = []
    rendered: dict[str, tuple[dict, str]] = {}
    cpu_started_report, children_started = time.process_time(), _children_cpu()
    with study_workers(workers):  # one pool of worker processes for every study
        for number, name in enumerate(names, start=1):
            # Not progress(names): its lines say a stage is done even when Ctrl-C ends it.
            stage = progress(desc=f"report section {number} of {len(names)}: {name}",
                             unit="section")  # fmt: skip
            started, cpu_started = time.perf_counter(), time.process_time()
            try:
                # One CPU thread: the studies' kernels are small, and two threads on a shared
                # 2-core machine made their steps several times slower
                # (gradlab.experiments.runtime).
                with study_threads(device):
                    section_results, section_markdown = SECTIONS[name](out, quick, device)
            except (ImportError, ModuleNotFoundError) as error:
                results["skipped"][name] = f"{type(error).__name__}: {error}"
                markdown += [f"## {name}", "", f"Skipped: a dependency is missing ({error}).", ""]
                stage.close()
                continue
            stage.update(1)
            stage.close()  # only here: after Ctrl-C nothing is said done
            _record(results, rendered, markdown, name, section_results, section_markdown,
                    started, cpu_started)  # fmt: skip
    finders = {}
    for number, run in enumerate(user_studies, start=1):
        # A user's study: its saved JSON rendered as on its own page, its figures drawn here.
        name, started, cpu_started = f"study {number}", time.perf_counter(), time.process_time()
        study_results, study_markdown = study_report_section(run, out, number)
        _record(results, rendered, markdown, name, study_results, study_markdown, started,
                cpu_started)  # fmt: skip
        finders[name] = study_findings
    results["workers"] = workers
    # The workers have ended with the block above, so their CPU time is counted now.
    results["cpu_seconds"] = {
        "this_process": round(time.process_time() - cpu_started_report, 1),
        "workers": round(_children_cpu() - children_started, 1),
    }
    write_json(out / "results.json", results)
    # Findings first: one sentence per section, each linked to its figure and section.
    text = "\n".join([*intro, findings_markdown(rendered, finders), "", *markdown])
    (out / "summary.md").write_text(text)
    (out / "index.html").write_text(markdown_to_html(text, out))
    return results


def _record(results: dict, rendered: dict, markdown: list, name: str, section_results: dict,
            section_markdown: str, started: float, cpu_started: float) -> None:  # fmt: skip
    """Add a finished section's results, with its wall and CPU seconds, to the report."""
    section_results["seconds"] = round(time.perf_counter() - started, 1)
    # Process CPU time too: on a shared machine wall time also counts other people's work. With
    # worker processes it is this process's only; the report's ``cpu_seconds`` adds theirs.
    section_results["cpu_seconds"] = round(time.process_time() - cpu_started, 1)
    results["sections"][name] = section_results
    rendered[name] = (section_results, section_markdown)
    markdown += [section_markdown, ""]


def _children_cpu() -> float:
    """User + system CPU seconds of this process's ended children (0 where not measurable)."""
    try:
        import resource
    except ImportError:  # not on Windows
        return 0.0
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime
