"""Each report section with stand-in studies: which heading, table, sentence and figure it writes.

The studies, figure functions and prose functions a section calls are replaced by stand-ins
that return hand-built results (and record how they were called), so a section runs in
milliseconds. Every number the section quotes is formatted here from those results; the
sentences of :mod:`gradlab.report.prose` are tested on their own (tests/report/test_prose.py),
here only where the section puts them.
"""

from __future__ import annotations

import itertools
import json
import re
import statistics
import types

import pytest

from gradlab.experiments import digit_scenes, loss_comparison, p_vs_batch_size
from gradlab.report import sections
from gradlab.report.sections import (
    audit_markdown,
    audit_section,
    loss_comparison_section,
    operating_region_section,
    p_vs_batch_size_measurement,
    scenes_section,
    tie_aware_section,
    training_section,
    verification_section,
)

DEFINITION = ("In that form a positive's gradient is (A D - C B) / R^2: A is its rank among the "
              "positives and C the count of negatives ranked above it (both smoothed, R = A + C), "
              "B and D sum the sigmoid-slope-weighted differences to the other positives and to "
              "the negatives. The figure counts an entry by its sigmoid slope alone (slope > eps) "
              "and by Bleeker & de Rijke's weighted count, its slope divided by that R^2, the "
              "factor of their Eq. 13 (slope / R^2 > eps).")
"""The AD - CB terms in words, as Bleeker & de Rijke (2022, appendix A, Eq. 8-14) define them,
and the weighted count the figure's "slope / R^2 > eps" stands for (their Eq. 13)."""


def _cell(values, digits=3):
    return f"{statistics.fmean(values):.{digits}f} ± {statistics.pstdev(values):.{digits}f}"


def _rows(markdown: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")]
            for line in markdown.splitlines() if line.startswith("|")]  # fmt: skip


def _figures(markdown: str) -> list[str]:
    return re.findall(r"^!\[[^\]]*\]\(([^)]+)\)$", markdown, flags=re.M)


def _layout(markdown: str) -> list[str]:
    """The section's paragraphs in order: a table as ``table``, a figure as ``figure PATH``
    once checked to be one image of its own with a sentence-case caption."""
    layout = []
    for paragraph in markdown.rstrip("\n").split("\n\n"):
        if paragraph.startswith("|"):
            assert all(line.startswith("|") and line.endswith("|")
                       for line in paragraph.splitlines()), paragraph  # fmt: skip
            layout.append("table")
            continue
        if not paragraph.startswith("!["):
            layout.append(paragraph)
            continue
        image = re.fullmatch(r"!\[([^\]]+)\]\((figures/\w+\.png)\)", paragraph)
        assert image, paragraph
        caption = image.group(1)
        assert caption[0].isupper() and not re.search(r"\b[A-Z]{4,}\b", caption), caption
        assert "XX" not in caption
        layout.append(f"figure {image.group(2)}")
    return layout


class _Calls:
    """Stand-ins that record their arguments and return what they were given."""

    def __init__(self, monkeypatch):
        self.monkeypatch = monkeypatch
        self.log: list = []

    def replace(self, owner, name, value=None, returns=None):
        def stand_in(*arguments, **keywords):
            self.log.append((name, arguments, keywords))
            if value is not None:
                return value(*arguments, **keywords)
            return returns

        self.monkeypatch.setattr(owner, name, stand_in)

    def called(self, name):
        return [(a, k) for n, a, k in self.log if n == name]


@pytest.fixture
def calls(monkeypatch):
    return _Calls(monkeypatch)


_DEVICES = itertools.count()


def _device(request) -> str:
    """A device name of this test alone: the P-vs-m measurement is computed once per settings
    and process (a test run twice in one process included), so each call has its own."""
    return f"stand-in {request.node.name} {next(_DEVICES)}"


def _measurement(tag):
    return {"tag": tag, "batch_sizes": [8, 16], "nested": {"P": [[0.1, 0.2]]}}


# --- the audit ---------------------------------------------------------------------------------


def test_the_audit_markdown_goes_one_level_down_to_six_hashes(monkeypatch):
    from gradlab.symbolic import audit

    given = "# Audit\n## Paper\nnot # a heading\n##### five\n###### six\n#no space"
    monkeypatch.setattr(audit, "format_markdown", lambda records: given)
    assert audit_markdown([]) == ("## Audit\n### Paper\nnot # a heading\n###### five\n"
                                  "###### six\n#no space")  # fmt: skip


def test_the_audit_markdown_of_the_report_leaves_out_the_latex_lines(monkeypatch):
    # the report's page renders no math: the lines showed as raw "$\text{...}$"
    from gradlab.symbolic import audit

    given = ("## Paper\n- printed: a = b\n- LaTeX: $a = b$\n- method: arithmetic\n"
             "a line that mentions - LaTeX: inside")  # fmt: skip
    monkeypatch.setattr(audit, "format_markdown", lambda records: given)
    assert audit_markdown([]) == ("### Paper\n- printed: a = b\n- method: arithmetic\n"
                                  "a line that mentions - LaTeX: inside")  # fmt: skip


def test_the_audit_section_counts_refuted_mutants_apart_from_those_not_evaluated(monkeypatch):
    # its table's "mutants killed" read "3 / 3" for one refuted mutant and two its check could
    # not evaluate, and nothing on the page said so
    from gradlab.symbolic import audit

    given = ("# Derivation audit\n\n| paper | claims | mutants killed |\n| --- | --- | --- |\n"
             "| A (2020) | 1 | 3 / 3 |\n| all papers | 1 | 3 / 3 |\n\n## A (2020)")  # fmt: skip
    monkeypatch.setattr(audit, "format_markdown", lambda records: given)
    records = [{"mutant_results": [{"verdict": "fails", "killed": True},
                                   {"verdict": "inconclusive", "killed": True},
                                   {"verdict": "inconclusive", "killed": True}]}]  # fmt: skip
    lines = audit_markdown(records).splitlines()
    at = lines.index("| all papers | 1 | 3 / 3 |")
    assert lines[at + 1] == "" and lines[at + 3] == ""
    assert lines[at + 2].startswith("The last column counts a mutant as killed whether its check "
                                    "refutes it or cannot evaluate it. Of 3 deliberately wrong "
                                    "variants of the forms that hold, 1 is refuted ")  # fmt: skip
    assert "2 cannot be evaluated by the check" in lines[at + 2]
    assert lines[at + 4] == "### A (2020)"
    assert audit_markdown([{"verdict": "holds"}]) == given.replace("# D", "## D").replace(
        "## A", "### A")  # no mutants run (a quick report): nothing to split


@pytest.mark.parametrize("quick", [True, False])
def test_the_audit_runs_each_papers_claims_with_the_reports_p_measurement(
    calls, monkeypatch, tmp_path, capsys, request, quick
):
    from gradlab.progress import set_progress_mode
    from gradlab.symbolic import audit

    claim = lambda seed, mutants: types.SimpleNamespace(seed=seed, mutants=[0] * mutants)  # noqa: E731
    brown = "002_9d7d2555864f9baa"
    claims = [claim(brown, 2), claim("x_paper", 1), claim(brown, 3)]
    calls.replace(p_vs_batch_size, "measure", value=lambda **k: _measurement(k["device"]))
    calls.replace(audit, "all_claims", returns=claims)
    calls.replace(audit, "run_audit", value=lambda own, mutants: [
        {"claim": claims.index(c), "mutants": mutants} for c in own])  # fmt: skip
    calls.replace(audit, "summary_counts", value=lambda records: {"counted": len(records)})
    calls.replace(audit, "format_markdown",
                  value=lambda records: f"# Audit of {len(records)}\n## One paper")
    device = _device(request)
    set_progress_mode("lines")
    try:
        results, markdown = audit_section(tmp_path, quick, device)
    finally:
        set_progress_mode("auto")
    assert calls.called("measure") == [((), {"quick": quick, "device": device})]
    assert calls.called("all_claims") == [((), {"p_vs_batch_size": _measurement(device)})]
    # one run per paper, in the order the claims first name it, with mutants when not quick
    assert calls.called("run_audit") == [((claims[::2],), {"mutants": not quick}),
                                         ((claims[1:2],), {"mutants": not quick})]  # fmt: skip
    records = [{"claim": 0, "mutants": not quick}, {"claim": 2, "mutants": not quick},
               {"claim": 1, "mutants": not quick}]  # fmt: skip
    assert results == {"counts": {"counted": 3}, "records": records}
    assert json.loads((tmp_path / "audit.json").read_text()) == records
    assert markdown == "## Audit of 3\n### One paper"
    assert (tmp_path / "audit.json").read_text().splitlines()[1] == " {"  # one space a level
    with_mutants = ", with their mutants" if not quick else ""
    lines = [re.sub(r", [\d.]+ s\)$", ")", line) for line in capsys.readouterr().err.splitlines()]
    assert lines == [
        f"gradlab: audit: paper 1 of 2, Brown et al. 2020, supplementary material{with_mutants} "
        "(2 claims) ...",
        f"gradlab: audit: paper 1 of 2, Brown et al. 2020, supplementary material{with_mutants} "
        "done (2 claims)",
        f"gradlab: audit: paper 2 of 2, x_paper{with_mutants} (1 claim) ...",
        f"gradlab: audit: paper 2 of 2, x_paper{with_mutants} done (1 claim)",
    ]  # fmt: skip


def test_the_audit_measures_p_on_the_cpu_by_default(monkeypatch, tmp_path):
    from gradlab.symbolic import audit

    asked = []
    monkeypatch.setattr(sections, "p_vs_batch_size_measurement",
                        lambda quick, device: asked.append((quick, device)) or {})
    monkeypatch.setattr(audit, "all_claims", lambda p_vs_batch_size: [])
    assert audit_section(tmp_path, True)[0]["records"] == []
    assert asked == [(True, "cpu")]


def test_the_operating_region_measures_p_on_the_cpu_by_default(calls, monkeypatch, tmp_path):
    asked = []

    def measurement(quick, device):
        asked.append((quick, device))
        raise KeyError("enough")

    calls.replace(sections, "draw_figures", returns={"operating_region_closed_forms": {},
                                                     "operating_region_training_dynamics": {}})
    monkeypatch.setattr(sections, "p_vs_batch_size_measurement", measurement)
    with pytest.raises(KeyError, match="enough"):
        operating_region_section(tmp_path, False)
    assert asked == [(False, "cpu")]


def test_the_p_measurement_is_measured_once_per_settings_and_handed_out_as_copies(
    calls, request
):
    calls.replace(p_vs_batch_size, "measure", value=lambda **k: _measurement(k))
    device = _device(request)
    first = p_vs_batch_size_measurement(True, device)
    first["nested"]["P"][0][0] = 99.0  # a caller's change reaches no other caller
    second = p_vs_batch_size_measurement(True, device)
    other = p_vs_batch_size_measurement(False, device)
    assert second == _measurement({"quick": True, "device": device})
    assert other == _measurement({"quick": False, "device": device})
    assert len(calls.called("measure")) == 2


# --- verification ------------------------------------------------------------------------------


def _verification_stand_ins(calls, grouping):
    table = {"SmoothAP": {"autograd": 1.234e-9, "finite differences": 5.6e-7},
             "FastAP": {"autograd": 0.0}}  # fmt: skip
    lemma = {"lemma_value_matches": False, "largest": 0.25, "positions": [1, 2]}
    calls.replace(sections, "gradient_error_table", returns=table)
    calls.replace(sections, "draw_figures", returns={"fappy_lemma1_gradient": lemma})
    calls.replace(sections, "grouping_check", returns=grouping)
    calls.replace(sections, "lemma1_verdict", value=lambda got: f"LEMMA VERDICT {got['largest']}")
    calls.replace(sections, "check_label", value=lambda name: f"<{name}>")
    calls.replace(sections, "pml_grouping_sentence", value=lambda g: f"PML SENTENCE {g['tau']}")
    return table, lemma


@pytest.mark.parametrize("quick", [True, False])
def test_the_verification_section_tabulates_every_error_and_says_pml_is_missing(
    calls, tmp_path, quick
):
    table, _ = _verification_stand_ins(calls, None)
    results, markdown = verification_section(tmp_path, quick)
    assert calls.called("gradient_error_table") == [((), {"trials": 2 if quick else 10})]
    assert calls.called("draw_figures") == [((sections.LOSS_FIGURES, tmp_path / "figures", quick),
                                             {})]  # fmt: skip
    assert results == {"gradient_errors": table,
                       "fappy_lemma1": {"lemma_value_matches": False, "largest": 0.25}}
    lines = markdown.splitlines()
    assert lines[0] == "## Numeric verification (float64)"
    assert _rows(markdown) == [["family", "check", "max abs error"], ["---"] * 3,
                               ["SmoothAP", "<autograd>", "1.23e-09"],
                               ["SmoothAP", "<finite differences>", "5.60e-07"],
                               ["FastAP", "<autograd>", "0.00e+00"]]  # fmt: skip
    lemma_at = lines.index("### FAPPY Lemma 1, measured")
    assert lines[lemma_at + 2] == "LEMMA VERDICT 0.25"
    assert _figures(markdown) == ["figures/fappy_lemma1_gradient.png"]
    pml_at = lines.index("### pytorch-metric-learning's SmoothAPLoss, measured")
    assert lemma_at < pml_at
    assert lines[pml_at + 2].startswith("pytorch-metric-learning is not installed (`pip install")
    assert lines[pml_at + 2].endswith("`): not measured.")
    assert lines[-1] == lines[pml_at + 2]
    assert _layout(markdown) == [lines[0], "table", "### FAPPY Lemma 1, measured",
                                 "LEMMA VERDICT 0.25", "figure figures/fappy_lemma1_gradient.png",
                                 lines[pml_at], lines[-1]]  # fmt: skip
    assert "dP_ij/ds_ik" in markdown and "Lemma 1 states" in markdown


def test_the_verification_section_tabulates_pml_against_smoothap(calls, tmp_path):
    grouping = {"tau": 0.01, "rows": [
        {"classes": 2, "per_class": 3, "pml_loss": 0.1234567, "smooth_ap_loss_classes": 0.2,
         "smooth_ap_loss_blocks": 0.30000049},
        {"classes": 4, "per_class": 2, "pml_loss": 1.0, "smooth_ap_loss_classes": 0.5,
         "smooth_ap_loss_blocks": 0.25}]}  # fmt: skip
    _verification_stand_ins(calls, grouping)
    results, markdown = verification_section(tmp_path, True)
    assert results["pml_smooth_ap"] == grouping
    lines = markdown.splitlines()
    pml_at = lines.index("### pytorch-metric-learning's SmoothAPLoss, measured")
    assert lines[pml_at + 2] == "PML SENTENCE 0.01"
    assert _rows("\n".join(lines[pml_at:])) == [
        ["classes x per class", "pytorch-metric-learning", "SmoothAP, true classes",
         "SmoothAP, blocks of n_classes"], ["---"] * 4,
        ["2 x 3", "0.123457", "0.200000", "0.300000"],
        ["4 x 2", "1.000000", "0.500000", "0.250000"]]  # fmt: skip
    assert lines[-1] == ("Each value is 1 - mean SmoothAP (tau = 0.01, the query its own "
                         "candidate, as the library computes it) on one batch of random float64 "
                         "embeddings sorted by class.")  # fmt: skip
    assert _layout(markdown)[-4:] == [lines[pml_at], "PML SENTENCE 0.01", "table", lines[-1]]


# --- operating region --------------------------------------------------------------------------


def _stand_in_operating_region(calls, history: list[dict]) -> dict:
    """Stand-ins for the operating-region section's figures and measurement, the training run
    ``history``; returns the closed forms drawn."""
    from gradlab.plotting import studies

    closed = {"seed_setting": {"width": 0.0123456, "tau": 0.01}, "curves": [1, 2]}
    calls.replace(sections, "draw_figures", returns={
        "operating_region_closed_forms": closed,
        "operating_region_training_dynamics": {
            "history": history, "tau": 0.01, "classes_per_batch": 3, "per_class": 7}})  # fmt: skip
    calls.replace(p_vs_batch_size, "measure", value=lambda **k: _measurement("p"))
    calls.replace(p_vs_batch_size, "summarize", returns={"trend": "falls"})
    calls.replace(studies, "plot_p_vs_batch_size")
    calls.replace(sections, "p_vs_batch_size_text",
                  value=lambda batch, summary: f"P TEXT {batch['tag']} {summary['trend']}")
    return closed


@pytest.mark.parametrize(("losses", "norms", "said"), [
    ((0.5, 0.2, 0.1), (0.5, 3.1e-7, 7.029e-9), ""),
    ((0.5, 0.0, 0.0), (0.5, 3.1e-7, 7.029e-9),
     " The loss is exactly 0 from step 1 on (every query's smooth AP rounds to 1) and the "
     "embeddings' gradient norm ends at 7.0e-09: the run saturated, and the slopes above eps "
     "counted here carry next to no gradient."),  # the last step's norm
    ((0.5, 0.0, 0.0), None,
     " The loss is exactly 0 from step 1 on (every query's smooth AP rounds to 1): the run "
     "saturated, and the slopes above eps counted here carry next to no gradient."),
    # 0 at step 1, then not: no saturation (the report said "0 from step 50 on" of such a run)
    ((0.5, 0.0, 0.01), (0.5, 3.1e-7, 7.029e-9),
     " The loss is exactly 0 at 1 of the 2 logged steps from step 1 on (every query's smooth AP "
     "rounds to 1 there): at those steps the slopes above eps counted here carry next to no "
     "gradient."),
])  # fmt: skip
def test_a_training_run_whose_loss_reached_zero_is_said_to_have_saturated(
    calls, tmp_path, request, losses, norms, said
):
    # "0 queries without gradient" beside a loss of exactly 0 read as a run still learning
    history = [{"step": step, "loss": loss, "p_seed_definition": 0.25,
                "share_without_gradient": 0.0, "ad_share": 0.99}
               for step, loss in zip((0, 1, 41), losses, strict=True)]  # fmt: skip
    for entry, norm in zip(history, norms or (), strict=False):  # None: no norm recorded
        entry["grad_norm"] = norm
    _stand_in_operating_region(calls, history)
    (tmp_path / "figures").mkdir()
    # a device of its own: the measurement is computed once per settings and process
    _, markdown = operating_region_section(tmp_path, True, _device(request))
    assert (
        "After 42 steps: P = 0.250, share of queries with no difference-matrix entry of slope "
        "above eps (Bleeker & de Rijke's count; an entry there can still carry no gradient of the "
        f"loss) = 0.000, |AD| share (the AD term's share of Bleeker & de Rijke's (2022, appendix "
        f"A) AD - CB form of the gradient) = 0.990. {DEFINITION}{said}") in markdown.splitlines()


def test_the_operating_region_section_quotes_the_width_p_and_the_last_training_step(
    calls, tmp_path, request
):
    history = [{"step": 0}, {"step": 1}, {"step": 41, "p_seed_definition": 0.12345,
                             "share_without_gradient": 0.5, "ad_share": 0.0004}]  # fmt: skip
    closed = _stand_in_operating_region(calls, history)
    device = _device(request)
    (tmp_path / "figures").mkdir()  # as the report makes it
    results, markdown = operating_region_section(tmp_path, True, device)
    assert calls.called("draw_figures") == [((sections.OPERATING_REGION_FIGURES,
                                              tmp_path / "figures", True), {})]  # fmt: skip
    assert calls.called("measure") == [((), {"quick": True, "device": device})]
    assert calls.called("summarize") == [((_measurement("p"),), {})]
    assert calls.called("plot_p_vs_batch_size") == [
        ((_measurement("p"), tmp_path / "figures" / "p_vs_batch_size.png"), {})]
    assert json.loads((tmp_path / "figures" / "p_vs_batch_size.json").read_text()) == (
        _measurement("p"))
    assert results == {"closed_forms": closed["seed_setting"], "p_vs_batch_size": _measurement("p"),
                       "p_vs_batch_size_summary": {"trend": "falls"},
                       "training_dynamics_last_step": history[-1]}  # fmt: skip
    lines = markdown.splitlines()
    assert lines[0] == "## Operating region"
    assert ("At tau = 0.01 and eps = 0.005 (Brown et al., 2020) the slope exceeds eps exactly "
            "when |D| < w = 0.0123. The closed form of P (right panel) leaves out a query's "
            "diagonal entry D_ii = 0, always inside the region: it is P without the diagonal. The "
            "other figures count it, as Eq. 1 does (the Monitor logs both: p_seed and "
            "p_off_diagonal); it adds (1 - P without the diagonal) / m to P for m candidates per "
            "query.") in lines
    headings = [line for line in lines if line.startswith("#")]
    assert headings == ["## Operating region",
                        "### P against mini-batch size (Brown et al., 2020, Fig. S7a), Smooth-AP's "
                        "sampler", "### Over a SmoothAP training run"]  # fmt: skip
    assert lines[lines.index(headings[1]) + 2] == "P TEXT p falls"
    assert lines[lines.index(headings[2]) + 2] == (
        "One SmoothAP run of its own (tau = 0.01): an MLP embedding of the digits 0-4 in batches "
        "of 3 classes x 7 images, measured at each of its 3 steps by gradlab's functions. The "
        "Monitor's log in [SmoothAP training on real data](#smoothap-training-on-real-data-digits) "
        "is of another run, described there.")
    assert lines[lines.index(headings[2]) + 4] == (
        "After 42 steps: P = 0.123, share of queries with no difference-matrix entry of slope "
        "above eps (Bleeker & de Rijke's count; an entry there can still carry no gradient of the "
        "loss) = 0.500, |AD| share (the AD term's share of Bleeker & de Rijke's (2022, appendix "
        f"A) AD - CB form of the gradient) = 0.000. {DEFINITION}")
    assert _layout(markdown) == [
        "## Operating region", lines[2], "figure figures/operating_region_closed_forms.png",
        headings[1], "P TEXT p falls", "figure figures/p_vs_batch_size.png", headings[2],
        lines[lines.index(headings[2]) + 2], lines[lines.index(headings[2]) + 4],
        "figure figures/operating_region_training_dynamics.png"]  # fmt: skip
    assert "P without the diagonal against the score spread" in markdown
    # one name for each variant of P, the glossary's: P, P without the diagonal, P without the
    # query's row and column
    assert "off-diagonal P" not in markdown
    assert "P, queries with no entry of slope above eps and the AD/CB" in markdown


# --- tie-aware ---------------------------------------------------------------------------------


@pytest.mark.parametrize("holds", [True, False])
def test_the_tie_aware_section_says_whether_the_bound_holds_and_keeps_the_runs_without_gaps(
    calls, tmp_path, holds
):
    surface = {"bound_holds": holds, "largest_error_over_bound": 0.98765, "surfaces": [[1.0]],
               "before": [3.0, 1.0, 8.0], "in_bin": [2.0, 64.0]}  # the grid's axes
    gap = {"runs": [{"stand_in": "digamma", "scale": 10, "gaps": [0.1, 0.01]},
                    {"stand_in": "log", "scale": 10, "gaps": [0.2]}]}  # fmt: skip
    calls.replace(sections, "draw_figures", returns={"tie_aware_harmonic_error": surface,
                                                     "tie_aware_relaxation_gap": gap})
    calls.replace(sections, "relaxation_summary", value=lambda g: f"GAP SUMMARY {len(g['runs'])}")
    results, markdown = tie_aware_section(tmp_path, False)
    assert calls.called("draw_figures") == [((sections.TIE_AWARE_FIGURES, tmp_path / "figures",
                                              False), {})]  # fmt: skip
    kept = {"bound_holds": holds, "largest_error_over_bound": 0.98765,
            "grid": {"before": [1.0, 8.0], "in_bin": [2.0, 64.0]}}
    assert results == {"harmonic_error": kept,
                       "relaxation_gap": [{"stand_in": "digamma", "scale": 10},
                                          {"stand_in": "log", "scale": 10}]}  # fmt: skip
    lines = markdown.splitlines()
    assert lines[0] == "## Harmonic sums vs logarithms (He et al., 2018)"
    assert lines[2] == ("The error of ln((N+n)/N) against H(N+n) - H(N) "
                        + ("stays below" if holds else "exceeds")
                        + " the paper's bound n/(2N^2) on the whole grid (N = 1 to 8 items "
                        "before the bin, n = 2 to 64 in it); the largest error/bound ratio is "
                        "0.988. The grid starts at N = 1: at the first bin (N = 0) the logarithm "
                        "is infinite and the bound undefined, which the [derivation "
                        "audit](#derivation-audit) corrects.")  # fmt: skip
    assert "GAP SUMMARY 2" in lines
    assert _layout(markdown) == [lines[0], lines[2], "figure figures/tie_aware_harmonic_error.png",
                                 "GAP SUMMARY 2", "figure figures/tie_aware_relaxation_gap.png"]
    assert "against N (right)" in markdown and "AP/DCG" in markdown  # the paper's symbols
    assert lines.index("GAP SUMMARY 2") > lines.index(_line(lines, "tie_aware_harmonic_error"))
    cited = re.findall(r"\]\(([^)]+\.png)\)", markdown.replace("]\n(", "]("))
    assert cited == ["figures/tie_aware_harmonic_error.png", "figures/tie_aware_relaxation_gap.png"]


def _line(lines, text):
    return next(line for line in lines if text in line)


# --- training ----------------------------------------------------------------------------------


def test_the_training_section_tabulates_retrieval_before_and_after_and_lists_flat_families(
    calls, monkeypatch, tmp_path, request
):
    from gradlab.experiments import digits_training
    from gradlab.plotting import monitor, report_figures

    metrics = {"recall@1": (0.1, 0.5, 0.3, 0.9), "mAP": (0.05, 0.25, 0.123456, 0.7)}
    results = {
        "epochs": 3, "steps": 27, "run_dir": "runs/one",
        "unseen_classes_before": {m: v[0] for m, v in metrics.items()},
        "unseen_classes_after": {m: v[1] for m, v in metrics.items()},
        "seen_classes_held_out_before": {m: v[2] for m, v in metrics.items()},
        "seen_classes_held_out_after": {m: v[3] for m, v in metrics.items()},
        "figures": ["figures/overview.png", "figures/p_share.png", "figures/flat_one.png",
                    "figures/ad_split.png"],
    }  # fmt: skip
    calls.replace(digits_training, "digits_training", returns=results)
    calls.replace(report_figures, "plot_retrieval_before_after")
    records = [{"step": 0, "loss": 0.5}, {"step": 2, "loss": 0.25}]
    calls.replace(monitor, "load_runs", value=lambda dirs: [(f"loaded {dirs}", records)])
    calls.replace(monitor, "flat_families", returns={"flat_one": "FLAT ONE is 0 throughout.",
                                                     "flat_two": "FLAT TWO is 1 throughout."})
    calls.replace(sections, "training_sentence", value=lambda *a: f"TRAINING {len(a)}")
    calls.replace(sections, "monitor_figure_caption",
                  value=lambda stem, logged: f"{stem.upper()} of {len(logged)} steps")
    (tmp_path / "figures").mkdir()  # as the report makes it
    for figure in results["figures"]:  # as the training run writes them
        (tmp_path / figure).write_bytes(b"png")
    got, markdown = training_section(tmp_path, True, "stand-in")
    assert got is results
    # the flat family's figure, stated in words, is neither listed nor left on disk
    assert results["figures"] == ["figures/overview.png", "figures/p_share.png",
                                  "figures/ad_split.png"]  # fmt: skip
    assert sorted(p.name for p in (tmp_path / "figures").iterdir()) == [
        "ad_split.png", "overview.png", "p_share.png"]
    assert calls.called("digits_training") == [((tmp_path,), {"quick": True, "device": "stand-in"})]
    assert calls.called("plot_retrieval_before_after") == [
        ((results, tmp_path / "figures" / "training_retrieval.png"), {})]
    assert calls.called("load_runs") == [(([tmp_path / "runs/one"],), {})]
    assert calls.called("flat_families") == [
        (([(f"loaded {[tmp_path / 'runs/one']}", records)],), {})]
    assert calls.called("training_sentence") == [((
        results["unseen_classes_before"], results["unseen_classes_after"],
        results["seen_classes_held_out_before"], results["seen_classes_held_out_after"]), {})]
    lines = markdown.splitlines()
    assert lines[0] == "## SmoothAP training on real data (digits)"
    assert lines[2] == ("An MLP embedding trained with SmoothAP (tau = 0.01) on classes 0-4 for 3 "
                        "epochs (27 steps, class-balanced batches of 5 classes x 8), the Monitor "
                        "logging the full preset every other step. Each image queries all the "
                        "others.")  # fmt: skip
    assert _rows(markdown) == [
        ["metric", "unseen 5-9 before", "unseen 5-9 after", "seen 0-4 (held out) before",
         "seen 0-4 after"], ["---"] * 5,
        ["recall@1", "0.100", "0.500", "0.300", "0.900"],
        ["mAP", "0.050", "0.250", "0.123", "0.700"]]  # fmt: skip
    assert lines.index("TRAINING 4") > lines.index("| mAP | 0.050 | 0.250 | 0.123 | 0.700 |")
    assert _figures(markdown) == ["figures/training_retrieval.png", "figures/p_share.png",
                                  "figures/ad_split.png"]  # fmt: skip
    # each figure of the run captioned from the run's logged steps
    assert "![P_SHARE of 2 steps](figures/p_share.png)" in lines
    assert "![AD_SPLIT of 2 steps](figures/ad_split.png)" in lines
    flat_at = lines.index("Flat over the whole run, so not drawn:")
    assert lines[flat_at:] == ["Flat over the whole run, so not drawn:", "",
                               "- FLAT ONE is 0 throughout.", "- FLAT TWO is 1 throughout."]
    figures = ["figure figures/p_share.png", "figure figures/ad_split.png"]
    assert _layout(markdown) == [lines[0], lines[2], "table", "TRAINING 4",
                                 "figure figures/training_retrieval.png", *figures,
                                 "Flat over the whole run, so not drawn:",
                                 "- FLAT ONE is 0 throughout.\n- FLAT TWO is 1 throughout."]
    assert "on the unseen digits 5-9 and on held-out images of the trained digits 0-4" in markdown
    # nothing flat: no such list, and every figure drawn
    calls.replace(monitor, "flat_families", returns={})
    calls.replace(digits_training, "digits_training", returns={
        **results, "figures": ["figures/overview.png", "figures/p_share.png",
                               "figures/flat_one.png", "figures/ad_split.png"]})  # fmt: skip
    _, markdown = training_section(tmp_path, False)
    assert calls.called("digits_training")[1] == ((tmp_path,), {"quick": False, "device": "cpu"})
    assert _layout(markdown)[4:] == ["figure figures/training_retrieval.png",
                                     "figure figures/p_share.png", "figure figures/flat_one.png",
                                     "figure figures/ad_split.png"]  # fmt: skip
    assert "Flat over" not in markdown
    assert _figures(markdown)[1:] == ["figures/p_share.png", "figures/flat_one.png",
                                      "figures/ad_split.png"]  # fmt: skip


# --- the loss comparison -----------------------------------------------------------------------


LOSS_METRICS = ["recall@1", "recall@2", "recall@4", "recall@8", "mAP", "MAP@R"]


def _loss_results():
    def run(base):
        return {"metrics": {m: [round(base + i / 100, 4), round(base + 0.03 + i / 100, 4)]
                            for i, m in enumerate(LOSS_METRICS)},
                "loss_seconds": [0.0512, 0.0716], "step_seconds": [0.821, 0.927]}  # fmt: skip

    return {
        "settings": {"batch_size": 32, "classes_per_batch": 8, "steps": 40,
                     "validation_numbers": 60, "selection_rule": "highest MAP@R",
                     "test_numbers": 100, "per_class": 5},
        "seeds": [0, 1, 2],
        "initial_score_range": [0.71, 0.42, 0.9],
        "before": {m: [0.1, 0.12] for m in LOSS_METRICS},
        "losses": {"SmoothAP": run(0.5), "FastAP": run(0.4), "flat": run(0.1)},
    }  # fmt: skip


def _loss_section_of(measured, calls, tmp_path) -> str:
    """The loss section's markdown for ``measured``, none listed apart, its prose stood in."""
    from gradlab.plotting import studies

    calls.replace(loss_comparison, "measure", value=lambda **k: json.loads(json.dumps(measured)))
    calls.replace(loss_comparison, "summarize", value=lambda r: {"apart": {}, "best": "x"})
    calls.replace(studies, "plot_loss_comparison")
    calls.replace(sections, "loss_comparison_text", value=lambda r, s: "LOSS TEXT")
    calls.replace(sections, "sweep_lines", value=lambda r: [])
    (tmp_path / "figures").mkdir()
    return loss_comparison_section(tmp_path, False)[1]


def test_the_loss_section_says_so_when_no_loss_is_listed_apart(calls, tmp_path):
    markdown = _loss_section_of(_loss_results(), calls, tmp_path)
    lines = markdown.splitlines()
    assert lines[2].endswith("Mean ± std (population) over 3 seeds; no loss is listed apart:")
    assert "(apart)" not in markdown
    # the figure's caption names no grey of losses listed apart where none is
    assert "grey: listed apart" not in markdown and "dashed: untrained)" in markdown


def test_the_loss_section_names_the_losses_trained_at_one_setting_before_its_figure(calls,
                                                                                  tmp_path):
    measured = _loss_results()
    measured["losses"]["SmoothAP"]["sweep"] = {"candidates": [{"tau": 0.01}]}
    measured["losses"]["FastAP"]["sweep"] = {"candidates": [{"bins": 20}, {"bins": 10}]}
    markdown = _loss_section_of(measured, calls, tmp_path)
    paragraphs = markdown.split("\n\n")
    assert paragraphs[-2:] == [
        "Trained at one setting each, not swept: SmoothAP (tau 0.01); the ranking does not show "
        "how they do at other settings.", paragraphs[-1]]
    assert paragraphs[-1].startswith("![Recall@1, mAP and MAP@R") and paragraphs[0].startswith(
        "## Ranking losses")  # the rest of the section kept


def test_the_loss_section_says_where_its_times_were_taken(calls, tmp_path):
    measured = _loss_results()
    measured["settings"]["timing"] = {"clock": "wall", "device": "cpu", "processor": "EPYC",
                                      "cores": 2, "threads": 1, "processes": 2}  # fmt: skip
    markdown = _loss_section_of(measured, calls, tmp_path)
    paragraphs = markdown.split("\n\n")
    table = next(i for i, p in enumerate(paragraphs) if p.startswith("| loss |"))
    assert paragraphs[table + 1:table + 3] == [
        "Times are wall-clock on EPYC (2 cores), 1 torch thread per process, 2 training "
        "processes at once; other load on the machine moves them.", "LOSS TEXT"]


@pytest.mark.parametrize("sweep", [[], ["SWEEP 1", "SWEEP 2"]])
def test_the_loss_section_tabulates_each_loss_marks_those_apart_and_quotes_its_settings(
    calls, tmp_path, sweep
):
    from gradlab.plotting import studies

    measured = _loss_results()
    if sweep:  # a full run sweeps: a loss with two candidates, chosen on the held-out numbers
        measured["losses"]["flat"]["sweep"] = {"candidates": [{"margin": 0.5}, {"margin": 1}]}
    calls.replace(loss_comparison, "measure", value=lambda **k: json.loads(json.dumps(measured)))
    calls.replace(loss_comparison, "summarize",
                  value=lambda r: {"apart": {"flat": {}}, "best": "x" * len(r["seeds"][:1])})
    calls.replace(studies, "plot_loss_comparison")
    calls.replace(sections, "loss_comparison_text",
                  value=lambda r, s: f"LOSS TEXT {len(r['losses'])} {s['best']}")
    calls.replace(sections, "sweep_lines", value=lambda r: sweep if r["losses"] else [])
    (tmp_path / "figures").mkdir()  # as the report makes it
    results, markdown = loss_comparison_section(tmp_path, False)
    assert calls.called("measure") == [((), {"quick": False, "device": "cpu"})]
    # the JSON beside the figure is the measurement, the results add the summary
    assert json.loads((tmp_path / "figures" / "loss_comparison.json").read_text()) == measured
    assert results == {**measured, "summary": {"apart": {"flat": {}}, "best": "x"}}
    assert calls.called("plot_loss_comparison") == [
        ((results, tmp_path / "figures" / "loss_comparison.png"), {})]
    lines = markdown.splitlines()
    assert lines[0] == "## Ranking losses on unseen digit strings"
    assert ("cosine scores of a batch span 0.42 or more), batches (32 images: 4 of each of 8 "
            "numbers) and 40 Adam steps for every loss, trained on 440 of the 500 training "
            "3-digit numbers (60 more are held out to choose each loss's hyperparameters"
            # a quick run said they chose each loss's setting, then that none was swept
            + (": highest MAP@R)" if sweep else
               ", which this run does not sweep: each loss trains at one setting)")
            + " and evaluated on 100 of the 500 unseen ones (5 images each; every "
            "image queries all the others). Mean ± std (population) over 3 seeds; "
            "losses listed apart (not "
            "ranked) are marked (apart):") in lines[2]
    assert "dashed: untrained; grey: listed apart)" in markdown  # flat is drawn grey
    rows = _rows(markdown)
    assert rows[0] == ["loss", *LOSS_METRICS, "loss fwd+bwd (ms)", "training step (ms)"]
    assert rows[1] == ["---"] * 9
    assert rows[2] == ["untrained", *(_cell(measured["before"][m]) for m in LOSS_METRICS), "", ""]
    for row, (name, run) in zip(rows[3:], measured["losses"].items(), strict=True):
        label = f"{name} (apart)" if name == "flat" else name
        assert row == [label, *(_cell(run["metrics"][m]) for m in LOSS_METRICS),
                       _cell([1000 * s for s in run["loss_seconds"]], 2),
                       _cell([1000 * s for s in run["step_seconds"]], 1)]  # fmt: skip
    assert len(rows) == 3 + 3
    text_at = lines.index("LOSS TEXT 3 x")
    assert text_at > lines.index(f"| flat (apart) | {' | '.join(rows[-1][1:])} |")
    if sweep:
        assert lines[text_at + 2] == (
            "Each loss's sweep, the paper's recommendation first (Brown et al. 2020 for SmoothAP "
            "and, from Cakir et al. 2019 and Rolinek et al. 2020, for FastAP and Blackbox AP; "
            "Zhong et al., Table 1 for FAPPY). Blackbox AP's lambda is on the official code's "
            "scale (ranks divided by the batch size), interpolation on gradlab's (ranks 1..m). "
            "Validation MAP@R on the held-out training numbers, mean ± std "
            "(population) over seeds:")
        assert lines[text_at + 4 : text_at + 6] == sweep
    else:
        assert "Each loss's sweep" not in markdown
    assert _figures(markdown) == ["figures/loss_comparison.png"]
    sweeps = [lines[text_at + 2], "\n".join(sweep)] if sweep else []
    assert _layout(markdown) == [lines[0], lines[2], "table", "LOSS TEXT 3 x", *sweeps,
                                 "figure figures/loss_comparison.png"]
    assert "Recall@1, mAP and MAP@R of each loss" in markdown


# --- the scenes --------------------------------------------------------------------------------


SCENE_METRICS = ["i2t_R@1", "i2t_R@5", "i2t_R@10", "t2i_R@1", "t2i_R@5", "t2i_R@10", "rsum"]


def _scene_results(features):
    def run(base):
        return {"recall": {m: [base + i, base + 2 * i + 0.5] for i, m in enumerate(SCENE_METRICS)}}

    settings = {"train_scenes": 300, "test_scenes": 50, "batch_images": 16, "steps": 90}
    if features:
        settings["global_features"] = features
    return {
        "settings": settings, "seeds": [3, 4], "backbone_accuracy": [0.91, 0.95],
        "runs": {"VSE++": {"hinge": run(10.0), "InfoNCE": run(20.0)},
                 "VSRN": {"hinge": run(30.0), "InfoNCE": run(40.0)}},
    }  # fmt: skip


@pytest.mark.parametrize("features", [None, "averaged over the grid"])
def test_the_scenes_section_tabulates_recall_per_encoder_and_loss_and_places_its_texts(
    calls, tmp_path, features
):
    from gradlab.plotting import scene_geometry, studies

    measured = _scene_results(features)
    calls.replace(digit_scenes, "measure", value=lambda **k: json.loads(json.dumps(measured)))
    calls.replace(digit_scenes, "summarize", value=lambda r: {"best": r["runs"]["VSRN"]
                                                              and "InfoNCE"})
    for module, name in [(studies, "plot_scene_recall"), (studies, "plot_scene_anatomy"),
                         (scene_geometry, "plot_scene_geometry")]:  # fmt: skip
        calls.replace(module, name)
    calls.replace(sections, "scenes_text",
                  value=lambda r, s: f"SCENES TEXT {s['best']}, {len(r['seeds'])} seeds")
    calls.replace(sections, "anatomy_text", value=lambda r: f"ANATOMY TEXT {len(r['runs'])}")
    calls.replace(sections, "geometry_text", value=lambda r: f"GEOMETRY TEXT {r['seeds']}")
    (tmp_path / "figures").mkdir()  # as the report makes it
    results, markdown = scenes_section(tmp_path, True)
    assert calls.called("measure") == [((), {"quick": True, "device": "cpu"})]
    assert json.loads((tmp_path / "figures" / "digit_scenes.json").read_text()) == measured
    assert results == {**measured, "summary": {"best": "InfoNCE"}}
    for name, file in [("plot_scene_recall", "digit_scenes_recall.png"),
                       ("plot_scene_anatomy", "digit_scenes_anatomy.png"),
                       ("plot_scene_geometry", "digit_scenes_geometry.png")]:  # fmt: skip
        assert calls.called(name) == [((results, tmp_path / "figures" / file), {})]
    lines = markdown.splitlines()
    assert lines[0] == ("## Image-caption retrieval on digit scenes (Bleeker & de Rijke, 2022, "
                        "appendix B)")  # fmt: skip
    assert (f"(300 training scenes, 50 unseen test scenes drawn from unseen handwriting). VSE++: "
            f"a frozen digit-classifier CNN over the canvas (backbone test accuracy "
            f"0.930 ± 0.020), "
            f"its pooled features {features or 'raw'}, and a trained linear projection") in lines[2]
    # VSRN reads the ground-truth boxes: the encoders' gap is not the architecture's alone
    assert ("VSRN: the same backbone on each digit's box, given from the scene (ground truth: an "
            "advantage the pooled canvas features of VSE++ do not have, so the two encoders' gap "
            "is not the architecture's alone), a GCN over the regions") in lines[2]
    assert ("Batches of 16 images and their 80 captions, 90 Adam steps, the same initialization "
            "and batches for every loss. Recall on the test scenes, mean ± std (population) over "
            "2 seeds") in (
        lines[2])
    rows = _rows(markdown)
    # each column in words: the direction as the figures name it, then the metric
    words = studies.DIRECTION_TITLES
    assert rows[0] == ["encoder", "loss", *(f"{words[m[:3]]} {m[4:]}" for m in SCENE_METRICS[:-1]),
                       "rsum"]  # fmt: skip
    assert rows[1] == ["---"] * 9
    expected = [[encoder, loss, *(_cell(run["recall"][m], 1 if m == "rsum" else 3)
                                  for m in SCENE_METRICS)]
                for encoder, runs in measured["runs"].items() for loss, run in runs.items()]
    assert rows[2:] == expected
    order = [lines.index(text) for text in (
        "SCENES TEXT InfoNCE, 2 seeds", "### Gradient anatomy over training", "ANATOMY TEXT 2",
        "### Embedding geometry over training", "GEOMETRY TEXT [3, 4]")]  # fmt: skip
    assert order == sorted(order)
    cited = re.findall(r"\]\(([^)]+\.png)\)", markdown.replace("]\n(", "]("))
    assert cited == ["figures/digit_scenes_recall.png", "figures/digit_scenes_anatomy.png",
                     "figures/digit_scenes_geometry.png"]  # fmt: skip
    assert lines.index(_line(lines, "digit_scenes_recall.png")) < order[1]
    assert order[2] < lines.index(_line(lines, "digit_scenes_anatomy.png")) < order[3]
    assert order[4] < lines.index(_line(lines, "digit_scenes_geometry.png"))
    assert _layout(markdown) == [
        lines[0], lines[2], "table", "SCENES TEXT InfoNCE, 2 seeds",
        "figure figures/digit_scenes_recall.png",
        "### Gradient anatomy over training", "ANATOMY TEXT 2",
        "figure figures/digit_scenes_anatomy.png", "### Embedding geometry over training",
        "GEOMETRY TEXT [3, 4]", "figure figures/digit_scenes_geometry.png"]  # fmt: skip
