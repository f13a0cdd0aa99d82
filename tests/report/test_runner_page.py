"""The report's page as a reader gets it: the whole summary.md of stand-in sections, and the CPU
time of the report's child processes (system time included)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import torch

import gradlab
from gradlab.progress import set_progress_mode
from gradlab.report import findings, runner


@pytest.fixture
def quiet():
    set_progress_mode("off")
    yield
    set_progress_mode("auto")


def _section(name):
    def section(out, quick, device):
        return {"value": name}, f"## {name}\n\ntext of {name}"

    return section


def _needs_wandb(out, quick, device):
    raise ImportError("No module named 'wandb'")


@pytest.mark.parametrize("workers", [1, 2])
def test_the_page_is_the_intro_then_each_section_or_its_skip_note_in_order(
    tmp_path, monkeypatch, quiet, workers
):
    monkeypatch.setattr(runner, "SECTIONS", {"one": _section("one"), "wandb": _needs_wandb,
                                             "two": _section("two")})  # fmt: skip
    runner.run_report(tmp_path, only=["two", "wandb", "one"], device="cpu", workers=workers)
    expected = (
        "# gradlab report\n\n"
        f"gradlab {gradlab.__version__}, torch {torch.__version__}, device cpu.\n\n\n\n"
        "## two\n\ntext of two\n\n"
        "## wandb\n\nSkipped: a dependency is missing (ImportError: No module named 'wandb').\n\n"
        "## one\n\ntext of one\n"
    )  # no finding for a stand-in section: nothing between the intro and the sections
    assert (tmp_path / "summary.md").read_text() == expected


_SYSTEM_TIME = """
import os
while os.times().system < 0.15:  # until this child has spent 0.15 s of system CPU time
    os.stat("/")  # a system call: system CPU time, not only user time
"""


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="getrusage is POSIX")
def test_the_workers_cpu_adds_the_childrens_user_and_system_time(tmp_path, monkeypatch, quiet):
    import resource

    def burn(out, quick, device):
        subprocess.run([sys.executable, "-c", _SYSTEM_TIME], check=True)
        return {}, "## child"

    monkeypatch.setattr(runner, "SECTIONS", {"child": burn})
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    workers = runner.run_report(tmp_path)["cpu_seconds"]["workers"]
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    assert system >= 0.1  # the child's system calls took system time
    assert workers == round(workers, 1)
    assert abs(workers - (user + system)) <= 0.05 + 1e-9


def _markdown_anchors(text):
    """The anchors a Markdown viewer finds in ``text``: explicit ``<a id="...">`` tags, and each
    heading's own, by GitHub's rule (lower case; punctuation other than ``-`` dropped; every
    space a ``-``)."""
    explicit = set(re.findall(r'<a id="([^"]+)"></a>', text))
    headings = {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
                for heading in re.findall(r"^#{1,6} (.+)$", text, flags=re.M)}  # fmt: skip
    return explicit | headings


def test_every_link_of_the_page_and_of_summary_md_has_its_anchor(tmp_path, monkeypatch, quiet):
    # a finding that cites a figure of its section, under a heading with an "&"
    def section(out, quick, device):
        return {}, "## Two & three (2020)\n\n![A plot of two](figures/two.png)"

    monkeypatch.setattr(runner, "SECTIONS", {"one": _section("one"), "two": section})
    monkeypatch.setitem(findings.FINDERS, "two",
                        lambda results: [findings.Finding("Two rises.", "figures/two.png")])
    runner.run_report(tmp_path, only=["one", "two"], device="cpu", workers=1)
    summary = (tmp_path / "summary.md").read_text()
    links = re.findall(r"\]\(#([^)]+)\)", summary)
    assert "figure-1" in links and len(links) == 2
    assert set(links) <= _markdown_anchors(summary), summary
    assert "**Figure 1.** A plot of two" in summary  # numbered as the HTML page numbers it
    page = (tmp_path / "index.html").read_text()
    hrefs = re.findall(r'href="#([^"]+)"', page)
    assert "figure-1" in hrefs and set(hrefs) <= set(re.findall(r' id="([^"]+)"', page))


def test_a_partial_report_says_which_sections_it_ran_and_which_it_did_not(
    tmp_path, monkeypatch, quiet
):
    monkeypatch.setattr(runner, "SECTIONS", {"one": _section("one"), "two": _section("two"),
                                             "three": _section("three")})  # fmt: skip
    results = runner.run_report(tmp_path, only=["two"], device="cpu", workers=1)
    page = (tmp_path / "summary.md").read_text()
    assert ("This report ran 1 of the 3 sections (two; `--only`); not run: one, three.\n"
            in page)  # fmt: skip
    assert page.index("not run: one, three") < page.index("## two")
    assert results["sections_not_run"] == ["one", "three"]
    whole = runner.run_report(tmp_path / "all", device="cpu", workers=1)
    assert "not run" not in (tmp_path / "all" / "summary.md").read_text()
    assert whole["sections_not_run"] == []


def test_a_link_to_a_section_left_out_is_its_text_alone(tmp_path, monkeypatch, quiet):
    # gradlab report --only tie_aware: its link to the derivation audit pointed at nothing
    def linking(out, quick, device):
        return {}, "## Linking\n\nwhich the [other section](#other) corrects."

    monkeypatch.setattr(runner, "SECTIONS", {"other": _section("other"), "linking": linking})
    runner.run_report(tmp_path / "alone", quick=True, only=["linking"], workers=1)
    runner.run_report(tmp_path / "both", quick=True, workers=1)
    alone, both = ((tmp_path / run / "summary.md").read_text() for run in ("alone", "both"))
    assert "which the other section corrects." in alone and "](#other)" not in alone
    assert "which the [other section](#other) corrects." in both
    assert 'href="#other"' not in (tmp_path / "alone" / "index.html").read_text()
