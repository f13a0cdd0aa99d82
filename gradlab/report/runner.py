"""Runs the report sections in order and writes ``summary.md`` and ``results.json``.

A section is a function ``(out, quick, device) -> (results, markdown)``: it may write figures under
``out / "figures"``, returns JSON-ready results and a markdown fragment that cites its figures
by relative path.
"""

from __future__ import annotations

import functools
import platform
import threading
import time
from collections.abc import Callable
from pathlib import Path

import torch

import gradlab
from gradlab.errors import GradlabError
from gradlab.experiments.runtime import (
    check_workers,
    parent_turn,
    stop_starting_workers,
    study_threads,
    study_workers,
)
from gradlab.jsonio import write_json
from gradlab.progress import progress
from gradlab.report.findings import findings_markdown
from gradlab.report.html import markdown_page, markdown_to_html, without_dead_links
from gradlab.report.prose import spelled_out
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
    rendered_or_refused,
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

WORKER_SECTIONS = ("audit", "losses", "scenes")
"""Sections whose studies run on the worker processes (the P-vs-m study, the loss comparison,
the scenes): side by side they start first, so that the workers have every task queued while
the other sections run in this process."""


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
        only: the sections to run, each once (default: all of :data:`SECTIONS`, in that
            order).
        device: where the studies' networks run.
        workers: processes that run a study's seeds (and losses) side by side, one torch thread
            each (:func:`gradlab.experiments.runtime.study_workers`); 1 runs everything in this
            process. With more than one, the sections run side by side too: while one waits
            for its workers, the next does its own part here (threads that take turns,
            :func:`gradlab.experiments.runtime.parent_turn`). The numbers are the same for any
            value; only the timings differ (each section's ``seconds`` then overlap).
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
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:  # it would run twice, and the page would hold it twice
        raise GradlabError(f"only must name each section once; got {', '.join(repeated)} more "
                           "than once")  # fmt: skip
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
    left_out = [name for name in SECTIONS if name not in names]
    if left_out:  # a partial report says so before its findings
        intro += [f"This report ran {len(names)} of the {len(SECTIONS)} sections "
                  f"({', '.join(names)}; `--only`); not run: {', '.join(left_out)}.", ""]
    results["sections_not_run"] = left_out
    markdown: list[str] = []
    rendered: dict[str, tuple[dict, str]] = {}
    cpu_started_report, children_started = time.process_time(), _children_cpu()
    run = functools.partial(_run_section, out=out, quick=quick, device=device, total=len(names))
    # One CPU thread: the studies' kernels are small, and two threads on a shared 2-core
    # machine made their steps several times slower (gradlab.experiments.runtime).
    with study_workers(workers), study_threads(device):  # one pool for every study
        if workers > 1 and len(names) > 1:
            outcomes = _side_by_side(names, run)
        else:
            outcomes = [run(number, name) for number, name in enumerate(names, start=1)]
    for name, outcome in zip(names, outcomes, strict=True):
        if isinstance(outcome, str):  # a missing dependency
            results["skipped"][name] = outcome
            markdown += [f"## {name}", "", f"Skipped: a dependency is missing ({outcome}).", ""]
        else:
            _record(results, rendered, markdown, name, *outcome)
    finders = {}
    for number, study in enumerate(user_studies, start=1):
        # A user's study: its saved JSON rendered as on its own page, its figures drawn here.
        name, started, cpu_started = f"study {number}", time.perf_counter(), time.thread_time()
        with rendered_or_refused(study, "--studies"):  # one line, never a traceback
            study_results, study_markdown = study_report_section(study, out, number)
        _record(results, rendered, markdown, name, study_results, study_markdown,
                _timing(started, cpu_started))  # fmt: skip
        finders[name] = study_findings
    results["workers"] = workers
    # The workers have ended with the block above, so their CPU time is counted now.
    results["cpu_seconds"] = {
        "this_process": round(time.process_time() - cpu_started_report, 1),
        "workers": round(_children_cpu() - children_started, 1),
    }
    # what the report wrote into figures/: a later report replacing this folder deletes these
    # and refuses to delete anything else there (gradlab.cli.check_report_folder)
    figures = out / "figures"
    results["figure_files"] = sorted(path.relative_to(figures).as_posix()
                                     for path in figures.rglob("*") if path.is_file())
    write_json(out / "results.json", results)
    # Findings first: one sentence per section, each linked to its figure and section.
    text = "\n".join([*intro, findings_markdown(rendered, finders), "", *markdown])
    text = spelled_out(text)  # FAPPY and the like, said in full where the page first uses them
    text = without_dead_links(text)  # a link to a section left out (--only) says its text
    (out / "summary.md").write_text(markdown_page(text))
    (out / "index.html").write_text(markdown_to_html(text, out))
    return results


def _run_section(number: int, name: str, *, out: Path, quick: bool, device: str,
                 total: int) -> tuple[dict, str, dict] | str:  # fmt: skip
    """One section: ``(results, markdown, timing)``, or the reason a dependency is missing."""
    # Not progress(names): its lines say a stage is done even when Ctrl-C ends it.
    stage = progress(desc=f"report section {number} of {total}: {name}", unit="section")
    started, cpu_started = time.perf_counter(), time.thread_time()
    try:
        section_results, section_markdown = SECTIONS[name](out, quick, device)
    except (ImportError, ModuleNotFoundError) as error:
        stage.close()
        return f"{type(error).__name__}: {error}"
    timing = _timing(started, cpu_started)
    stage.update(1)
    stage.close()  # only here: after Ctrl-C nothing is said done
    return section_results, section_markdown, timing


def _side_by_side(names: list[str], run: Callable[[int, str], object]) -> list:
    """Run the sections in threads that take turns (:func:`parent_turn`): while one waits for
    its studies' worker processes, the next runs its own part (the audit, small studies,
    drawing), so the workers and this process work at once. A section's numbers do not change
    (each task seeds its own generators; the parent's code never runs beside another's).

    The first failure ends the others, and so does Ctrl-C (or SIGTERM) here: the sections not
    started are skipped, the running ones are interrupted where they are (as Ctrl-C stops a
    serial run: no section is said done, nothing more is written) and waited for, and the
    pool is stopped by :func:`study_workers` as the exception leaves it.
    """
    outcomes: list = [None] * len(names)
    failures: list[BaseException] = []
    ended = [False] * len(names)
    done = threading.Event()

    entered = [threading.Event() for _ in names]

    def section(index: int) -> None:
        try:
            try:
                with parent_turn():
                    entered[index].set()
                    if not failures:
                        outcomes[index] = run(index + 1, names[index])
            except BaseException as error:  # handed to the main thread
                failures.append(error)
            finally:
                ended[index] = True
                entered[index].set()
                if failures or all(ended):
                    done.set()
        except BaseException:  # an interrupt that arrived as the section ended
            done.set()

    threads = [threading.Thread(target=section, args=(index,), daemon=True,
                                name=f"report section {name}")
               for index, name in enumerate(names)]  # fmt: skip
    try:
        # Those with workers' tasks first, then the others, each in report order: a section
        # asks for its first turn once the one before has had its own (a lock takes its
        # waiters in no set order).
        starts = sorted(range(len(names)), key=lambda i: names[i] not in WORKER_SECTIONS)
        for index in starts:
            thread, turn = threads[index], entered[index]
            thread.start()
            while not turn.wait(timeout=0.5):  # bounded: Ctrl-C reaches this thread at once
                pass
        while not done.wait(timeout=0.5):
            pass
        if failures:
            raise failures[0]
    except BaseException as error:
        if not failures:
            failures.append(error)  # the sections not started yet skip their turn
        stop_starting_workers(STOP_SECONDS)  # no thread is interrupted while it starts one
        for thread, finished in zip(threads, ended, strict=True):
            if thread.ident is not None and thread.is_alive() and not finished:
                _interrupt(thread, type(error) if isinstance(error, KeyboardInterrupt)
                           else _StoppedError)  # fmt: skip
        for thread in threads:
            if thread.ident is not None:  # started
                thread.join(timeout=STOP_SECONDS)
        raise
    return outcomes


class _StoppedError(Exception):
    """Raised in a section's thread when another section failed."""


STOP_SECONDS = 10.0
"""The longest the report waits for one interrupted section to unwind before it raises the
failure (or Ctrl-C) that stopped the sections: a section stuck in a long C call is left
behind."""


def _interrupt(thread: threading.Thread, error: type[BaseException]) -> None:
    """Raise ``error`` in ``thread`` at its next Python instruction (CPython's
    ``PyThreadState_SetAsyncExc``: a thread blocked in a lock or a long C call sees it when
    it returns)."""
    import ctypes

    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident),
                                               ctypes.py_object(error))  # fmt: skip


def _timing(started: float, cpu_started: float) -> dict:
    """Wall seconds since ``started``; CPU seconds of this thread since ``cpu_started``."""
    return {"seconds": round(time.perf_counter() - started, 1),
            "cpu_seconds": round(time.thread_time() - cpu_started, 1)}  # fmt: skip


def _record(results: dict, rendered: dict, markdown: list, name: str, section_results: dict,
            section_markdown: str, timing: dict) -> None:  # fmt: skip
    """Add a finished section's results, with its wall and CPU seconds, to the report."""
    # CPU time too: on a shared machine wall time also counts other people's work. It is this
    # process's part (the thread that ran the section); the report's ``cpu_seconds`` adds the
    # workers'. Sections run side by side overlap in wall time.
    section_results.update(timing)
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
