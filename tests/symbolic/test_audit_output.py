"""The audit driver and its outputs on hand-built claims and records (seconds, not the audit).

``test_audit.py`` checks the whole audit end to end (about 30 s); these tests pin
``gradlab/symbolic/audit.py``'s own functions on a few claims and records written here: the
order of the claims, the record of a check that raises, the precision a check runs at, the
timing, the verdict counts, and the terminal table and markdown report, compared with texts
written out by hand from the format each docstring describes.
"""

import itertools
import json
import re

import mpmath
import pytest
import sympy as sp

from gradlab.errors import GradlabError
from gradlab.symbolic import audit
from gradlab.symbolic.audit import (
    NOT_TESTABLE,
    PROBLEM_VERDICTS,
    all_claims,
    distinct_problems,
    format_markdown,
    format_not_testable,
    format_table,
    mutant_shortfalls,
    mutant_summary,
    printed_numbers_said,
    problem_key,
    run_audit,
    summary_counts,
    write_outputs,
)
from gradlab.symbolic.claims import PRINTED_RESULTS_ONLY, Claim, Form, decide, mutant, undecided

S000, S002 = "000_e0f8edb24a02ffe3", "002_9d7d2555864f9baa"
CITATION_000 = ("Bleeker & de Rijke (2022). Do Lessons from Metric Learning Generalize to "
                "Image-Caption Retrieval? ECIR, appendix A, short version.")  # fmt: skip
CITATION_002 = ("Brown, Xie, Kalogeiton & Zisserman (2020). Smooth-AP: Smoothing the Path "
                "Towards Large-Scale Image Retrieval. ECCV, supplementary material.")  # fmt: skip


def _is_one(form: Form):
    return decide(form.value == 1, "it is one.", f"it is {form.value}, not one.")


def _one_claim(seed: str = "mine", label: str = "eq1", check=_is_one) -> Claim:
    printed = Form(sp.Integer(1), lhs="x")
    return Claim(seed, label, "x is one", printed, check, method="comparison",
                 mutants=(mutant(printed, sp.Integer(2), "doubled"),))  # fmt: skip


def _raises(form: Form):
    raise ZeroDivisionError("boom")


# --- all_claims --------------------------------------------------------------------------------


@pytest.mark.slow
def test_all_claims_holds_each_module_claim_once_ordered_by_seed_then_equation_number():
    claims = all_claims()
    ids = [claim.id for claim in claims]
    committed = json.loads((audit.Path(__file__).parents[2] / "benchmarks/results/audit.json")
                           .read_text())  # fmt: skip
    assert sorted(ids) == sorted(record["id"] for record in committed)
    assert len(set(ids)) == len(ids)
    by_seed = {}
    for claim in claims:
        by_seed.setdefault(claim.seed, []).append(claim.label)
    assert list(by_seed) == sorted(by_seed)  # each seed in one run, seeds in order
    # 003 prints eq1..eq37: numeric order (eq2 before eq10), then its named claims A to Z
    labels = by_seed["003_9ae9ec3ce43e30ad"]
    assert labels[:37] == [f"eq{k}" for k in range(1, 38)]
    assert labels[37:] == sorted(labels[37:]) and labels[37] == "claim-beta-symmetric"
    # 004: equations first, then claim-* and lemma1 alphabetically (lemma1 is not an equation)
    assert by_seed["004_e426679a66883031"][:8] == [*(f"eq{k}" for k in range(1, 8)),
                                                   "claim-algorithm1-guard"]  # fmt: skip
    assert by_seed["004_e426679a66883031"][-1] == "lemma1"


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        (["eq10", "eq9", "eq1"], ["eq1", "eq9", "eq10"]),
        (["claim-b", "eq3", "claim-a"], ["eq3", "claim-a", "claim-b"]),
        (["lemma1", "eqx", "eq2", "eq"], ["eq2", "eq", "eqx", "lemma1"]),
    ],
)
def test_claims_sort_by_equation_number_then_by_name(monkeypatch, labels, expected):
    class Module:
        @staticmethod
        def claims():
            return [_one_claim(label=label) for label in labels]

    monkeypatch.setattr(audit, "MODULES", (Module,))
    assert [claim.label for claim in all_claims()] == expected


# --- run_audit ---------------------------------------------------------------------------------


def test_a_record_holds_the_claim_its_verdict_mutants_and_citation():
    (record,) = run_audit([_one_claim(S000)], mutants=True)
    seconds = record.pop("seconds")
    assert 0 <= seconds < 60
    assert record == {
        "id": f"{S000}:eq1", "seed": S000, "label": "eq1",
        "claim": {"statement": "x is one", "formula": "x = 1", "latex": "\\text{x} = 1",
                  "correction": None},
        "method": "comparison", "verdict": "holds", "failure": None, "detail": "it is one.",
        "cause": "",
        # the slip 2, then 1 -> -1 (sign) and 1 -> 0 (shift); 1 -> 2 (shift) and 2 * 1 (factor)
        # repeat the slip's text
        "mutated_form": "printed", "mutants": 3, "mutant_operators": 3, "mutants_killed": 3,
        "mutant_results": [
            {"operator": "slip", "mutant": "doubled", "formula": "x = 2", "verdict": "fails",
             "killed": True},
            {"operator": "sign", "mutant": "sign flipped", "formula": "x = -1",
             "verdict": "fails", "killed": True},
            {"operator": "shift", "mutant": "constant 1 -> 0", "formula": "x = 0",
             "verdict": "fails", "killed": True}],
        "inapplicable": {}, "equivalent_mutants_dropped": [],
        "citation": CITATION_000,
    }  # fmt: skip


def test_a_claim_of_your_own_is_cited_by_its_seed_name():
    (record,) = run_audit([_one_claim("my-notes")])
    assert record["citation"] == "my-notes" and "mutants" not in record


@pytest.mark.parametrize("mutants", [False, True])
def test_a_check_that_raises_is_recorded_inconclusive_with_its_error(mutants):
    claims = [_one_claim(label="eq1", check=_raises), _one_claim(label="eq2")]
    broken, fine = run_audit(claims, mutants=mutants)  # the audit goes on after an error
    detail = broken.pop("detail")
    assert detail.startswith("the check raised ZeroDivisionError: boom\nTraceback")
    assert len(re.findall(r'^  File "', detail, flags=re.MULTILINE)) == 2  # short: two frames
    assert 0 <= broken.pop("seconds") < 60
    expected = {
        "id": "mine:eq1", "seed": "mine", "label": "eq1",
        "claim": {"statement": "x is one", "formula": "x = 1", "latex": "\\text{x} = 1",
                  "correction": None},
        "method": "comparison", "verdict": "inconclusive", "failure": None, "citation": "mine",
        "cause": "",
    }  # fmt: skip
    if mutants:  # none decided: none killed
        expected.update(mutants=1, mutant_operators=0, mutants_killed=0, mutant_results=[],
                        inapplicable={})  # fmt: skip
    assert broken == expected
    assert fine["verdict"] == "holds" and ("mutants" in fine) == mutants


def test_a_check_runs_at_15_digits_whatever_the_callers_precision():
    seen = []

    def check(form):
        seen.append(mpmath.mp.dps)
        return _is_one(form)

    with mpmath.workdps(40):
        run_audit([_one_claim(check=check)], mutants=True)
        assert mpmath.mp.dps == 40  # given back to the caller
    assert seen == [15] * 4  # the printed form, then its three mutants


def test_seconds_is_the_checks_wall_time_rounded_to_a_tenth_of_a_millisecond(monkeypatch):
    clock = iter([100.0, 100.123456789, 200.0, 200.00004])
    monkeypatch.setattr(audit.time, "perf_counter", lambda: next(clock))
    first, second = run_audit([_one_claim(label="eq1"), _one_claim(label="eq2")])
    assert first["seconds"] == 0.1235 and second["seconds"] == 0.0


def test_without_claims_the_audit_runs_every_claim(monkeypatch):
    monkeypatch.setattr(audit, "all_claims", lambda **_: [_one_claim(label="eq7")])
    assert [record["id"] for record in run_audit()] == ["mine:eq7"]
    assert run_audit([]) == []  # an empty list is no claims, not every claim


@pytest.mark.parametrize("mutants", [False, True])
def test_with_progress_the_audit_says_each_paper_and_keeps_the_claims_order(capsys, mutants):
    from gradlab.progress import set_progress_mode

    S002 = "002_9d7d2555864f9baa"
    claims = [_one_claim(S002, "eq1"), _one_claim("mine", "eq2"), _one_claim(S002, "eq3")]
    quiet = run_audit(claims, mutants=mutants)
    assert capsys.readouterr().err == ""  # the library is silent unless asked
    set_progress_mode("lines")
    try:
        loud = run_audit(claims, mutants=mutants, progress=True)
    finally:
        set_progress_mode("auto")
    assert [r["label"] for r in loud] == ["eq1", "eq2", "eq3"]  # the claims' order, not the papers'
    assert [{**r, "seconds": 0} for r in loud] == [{**r, "seconds": 0} for r in quiet]
    lines = [re.sub(r", [\d.]+ s\)$", ")", line) for line in capsys.readouterr().err.splitlines()]
    brown = "gradlab: audit: paper 1 of 2, Brown et al. 2020, supplementary material"
    # not a count: a count of the slips alone left out the operators' mutants (39 said for 332)
    brown += ", with their mutants" if mutants else ""
    mine = "gradlab: audit: paper 2 of 2, mine" + (", with their mutants" if mutants else "")
    assert lines == [f"{brown} (2 claims) ...", f"{brown} done (2 claims)",
                     f"{mine} (1 claim) ...", f"{mine} done (1 claim)"]  # fmt: skip


def test_progress_must_be_a_bool():
    with pytest.raises(GradlabError, match="progress must be True or False; got 'yes'"):
        run_audit([_one_claim()], progress="yes")


# --- summary counts, table and markdown ------------------------------------------------------


def _record(seed, label, verdict, statement, *, mutants=None, correction=None, **claim):
    record = {
        "id": f"{seed}:{label}", "seed": seed, "label": label,
        "claim": {"statement": statement, "formula": claim.get("formula", "a = b"),
                  "latex": claim.get("latex", "a = b"), "correction": correction},
        "method": claim.get("method", "sympy"), "verdict": verdict,
        "failure": claim.get("failure"), "detail": claim.get("detail", "why"),
    }  # fmt: skip
    if mutants is not None:
        record.update(mutants=mutants[1], mutants_killed=mutants[0], mutant_results=[])
    return record


NO_EMPIRICAL = ", reproduced: 0, not-reproduced: 0, not-testable-here: 0"
"""The empirical verdicts' counts, zero in every table here."""
LONG = "a statement long enough to wrap onto a second line of the table"
RECORDS = [
    _record(S002, "eq2", "holds", "short statement", mutants=(2, 2)),
    _record(S000, "claim-x", "fails", LONG, mutants=(1, 3)),
    _record("mine", "eq1", "holds-with-correction", "", mutants=(0, 1)),
]


def test_summary_counts_every_verdict_in_order_zeros_included():
    counts = summary_counts([*RECORDS, _record("m", "eq2", "fails", "s")])
    assert list(counts.items()) == [("holds", 1), ("holds-with-correction", 1), ("fails", 2),
                                    ("inconclusive", 0), ("reproduced", 0), ("not-reproduced", 0),
                                    ("not-testable-here", 0)]  # fmt: skip
    assert summary_counts([]) == dict.fromkeys(
        ("holds", "holds-with-correction", "fails", "inconclusive", "reproduced",
         "not-reproduced", "not-testable-here"), 0
    )  # fmt: skip


def test_the_table_puts_statements_beside_their_rows_when_30_characters_fit():
    # each paper's citation, then its claims; claim column: 2 + the longest label (9); verdict:
    # 21; mutants: 8; statement: 72 - 40 = 32
    pad = " " * 40
    expected = [
        "claim     verdict               mutants statement",
        "-" * 72,
        "Brown, Xie, Kalogeiton & Zisserman (2020). Smooth-AP: Smoothing the Path",
        "Towards Large-Scale Image Retrieval. ECCV, supplementary material.",
        "  eq2     holds                 2/2     short statement",
        "Bleeker & de Rijke (2022). Do Lessons from Metric Learning Generalize to",
        "Image-Caption Retrieval? ECIR, appendix A, short version.",
        "  claim-x fails                 1/3     a statement long enough to wrap",
        pad + "onto a second line of the table",
        "mine",
        "  eq1     holds-with-correction 0/1     ",
        "-" * 72,
        # both lines wrapped at 72 columns: the counts between items, the summary between words
        "holds: 1, holds-with-correction: 1, fails: 1, inconclusive: 0,",
        "reproduced: 0, not-reproduced: 0, not-testable-here: 0",
        "records: 3, mutants: 6, killed: 3; below 3 mutants / 2 operators without",
        "a stated reason: 3",
    ]
    assert format_table(RECORDS, width=72).split("\n") == expected


def test_the_table_puts_statements_below_their_rows_when_30_characters_do_not_fit():
    expected = [  # 69 - 40 = 29 < 30
        "claim     verdict               mutants",
        "-" * 69,
        "Brown, Xie, Kalogeiton & Zisserman (2020). Smooth-AP: Smoothing the",
        "Path Towards Large-Scale Image Retrieval. ECCV, supplementary",
        "material.",
        "  eq2     holds                 2/2",
        "    short statement",
        "Bleeker & de Rijke (2022). Do Lessons from Metric Learning Generalize",
        "to Image-Caption Retrieval? ECIR, appendix A, short version.",
        "  claim-x fails                 1/3",
        "    a statement long enough to wrap onto a second line of the table",
        "mine",
        "  eq1     holds-with-correction 0/1",
        "    ",
        "-" * 69,
        "holds: 1, holds-with-correction: 1, fails: 1, inconclusive: 0,",
        "reproduced: 0, not-reproduced: 0, not-testable-here: 0",
        "records: 3, mutants: 6, killed: 3; below 3 mutants / 2 operators",
        "without a stated reason: 3",
    ]
    assert format_table(RECORDS, width=69).split("\n") == expected


def test_a_table_without_mutants_has_no_mutant_column_and_ids_at_least_5_wide():
    records = [_record("m", "e1", "inconclusive", "s t"), _record("my-notes", "e2", "holds", "")]
    assert format_table(records[:1], width=60).split("\n") == [
        "claim verdict               statement",
        "-" * 60,
        "m",
        "  e1  inconclusive          s t",
        "-" * 60,
        "holds: 0, holds-with-correction: 0, fails: 0,",
        "inconclusive: 1, reproduced: 0, not-reproduced: 0,",
        "not-testable-here: 0",
    ]
    assert format_table(records[1:], width=40).split("\n")[:5] == [
        "claim verdict",  # 40 - 28 < 30: the statement goes below
        "-" * 40,
        "my-notes",
        "  e2  holds",
        "    ",
    ]


def test_the_table_splits_the_claims_wrong_as_printed_by_what_their_checks_found():
    records = [_record("m", "e1", "fails", "s", failure="ill-typed"),
               _record("m", "e2", "holds-with-correction", "s", failure="undefined"),
               _record("m", "e3", "holds-with-correction", "s", failure="undefined"),
               _record("m", "e4", "holds", "s")]  # fmt: skip
    lines = format_table(records, width=60).split("\n")
    # by hand: 2 undefined and 1 ill-typed of the 3 wrong as printed, wrapped at 60 columns
    assert lines[-2:] == ["wrong as printed: 2 are undefined at a legal input, 1 has",
                          "the wrong shape or type"]  # fmt: skip


def test_a_citation_too_long_for_the_width_keeps_every_word():
    lines = format_table([_record(S002, "eq1", "holds", "s")], width=40).splitlines()
    cited = lines[2:lines.index("  eq1 holds")]
    assert " ".join(cited) == CITATION_002
    assert max(len(line) for line in cited) <= 40 and len(cited) == 4


def test_the_markdown_report_groups_the_claims_by_paper_with_counts_and_formulas():
    records = [
        _record(S000, "eq3", "holds-with-correction", "S one", mutants=(1, 2),
                correction="a = c", detail="D one", failure="undefined"),
        _record("mine", "claim-two", "fails", "S two", mutants=(1, 1), formula="line1\nline2",
                latex="\\texttt{line1 line2}", method="exec", detail="D two",
                failure="wrong-value"),
    ]  # fmt: skip
    expected = [
        "# Derivation audit",
        "",
        "Each printed claim is data (its printed form), checked by computation (SymPy, exact "
        "rationals, float64/mpmath against autograd or brute force); a correction counts only "
        "when the same check holds on it, and each check must reject mutants of the accepted form "
        "(the printed form when it holds, else the correction).",
        "",
        "| paper | claims | holds | holds-with-correction | fails | inconclusive | reproduced "
        "| not-reproduced | not-testable-here | mutants killed |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        f"| {CITATION_000} | 1 | 0 | 1 | 0 | 0 | 0 | 0 | 0 | 1 / 2 |",
        "| mine | 1 | 0 | 0 | 1 | 0 | 0 | 0 | 0 | 1 / 1 |",
        "| all papers | 2 | 0 | 1 | 1 | 0 | 0 | 0 | 0 | 2 / 3 |",
        "",
        "Of the 2 claims wrong as printed, 1 gives a wrong value, 1 is undefined at a legal "
        "input (as each check found it: a wrong number, no number at a legal input, or a result "
        "of the wrong shape or type).",
        "",
        f"## {CITATION_000}",
        "",
        "holds: 0, holds-with-correction: 1, fails: 0, inconclusive: 0" + NO_EMPIRICAL,
        "",
        "<details>",
        "<summary>The 1 claim of this paper, with its check</summary>",
        "",
        "| claim | verdict | statement |",
        "| --- | --- | --- |",
        "| `eq3` | **holds with a correction** | S one |",
        "",
        "<details>",
        "<summary><code>eq3</code>: S one (holds-with-correction)</summary>",
        "",
        "- printed: `a = b`",
        "- LaTeX: $a = b$",
        "- corrected: `a = c`",
        "- method: sympy",
        "- verdict: **holds with a correction**",
        "- as printed, it is undefined at a legal input (`undefined`)",
        "- detail: D one",
        "- mutants killed: 1 of 2",
        "",
        "</details>",
        "",
        "</details>",
        "",
        "",
        "## mine",
        "",
        "holds: 0, holds-with-correction: 0, fails: 1, inconclusive: 0" + NO_EMPIRICAL,
        "",
        "<details>",
        "<summary>The 1 claim of this paper, with its check</summary>",
        "",
        "| claim | verdict | statement |",
        "| --- | --- | --- |",
        "| `claim-two` | **FAILS** | S two |",
        "",
        "<details>",
        "<summary><code>claim-two</code>: S two (fails)</summary>",
        "",
        "- printed:",
        "",
        "```",
        "line1",
        "line2",
        "```",
        "",
        "- method: exec",
        "- verdict: **FAILS**",
        "- as printed, it gives a wrong value (`wrong-value`)",
        "- detail: D two",
        "- mutants killed: 1 of 1",
        "",
        "</details>",
        "",
        "</details>",
        "",
    ]
    assert format_markdown(records).split("\n") == expected



def test_a_raising_checks_traceback_sits_in_a_fenced_block_inside_its_detail_item():
    # pasted into the bullet as it was, the traceback's lines broke the list and the fold
    records = run_audit([_one_claim(label="eq1", check=_raises), _one_claim(label="eq2")])
    lines = format_markdown(records).splitlines()
    start = lines.index("- detail: the check raised ZeroDivisionError: boom")
    end = lines.index("  ```", start)
    assert lines[start + 1:start + 4] == ["", "  ```text", "  Traceback (most recent call last):"]
    body = lines[start + 3:end]
    assert body and all(line.startswith("  ") for line in body)
    assert len([line for line in body if line.startswith('    File "')]) == 2
    assert lines[end + 1:end + 3] == ["", "</details>"]
    assert "- detail: it is one." in lines[end:]  # a one-line detail stays one bullet


def test_a_failing_form_names_the_mutants_that_hold_as_candidate_corrections():
    # x printed as -1 where it is 1: the sign-flipped mutant holds; said as what it is, not
    # left to read as a weak check ("mutants killed: 1 of 2")
    def is_one(form):  # simplified: "2 - 1" is one too
        return decide(sp.simplify(form.value - 1) == 0, "it is one.", "it is not one.")

    printed = Form(sp.Integer(-1), lhs="x")
    wrong = Claim("mine", "eq1", "x is one", printed, is_one, method="comparison",
                  mutants=(mutant(printed, sp.Integer(1), "sign flipped"),
                           mutant(printed, sp.Add(2, -1, evaluate=False), "two minus one"),
                           mutant(printed, sp.Integer(-2), "doubled")))  # fmt: skip
    (record,) = run_audit([wrong], mutants=True)
    assert record["verdict"] == "fails" and record["mutated_form"] == "printed"
    holding = [o["mutant"] for o in record["mutant_results"] if o["verdict"] == "holds"]
    assert holding[:2] == ["sign flipped", "two minus one"]
    assert _mutants_line(record) == (
        f"- mutants killed: {record['mutants_killed']} of {record['mutants']}; the printed form "
        f"fails, so the mutants that hold are candidate corrections: {', '.join(holding)}")
    (right,) = run_audit([_one_claim()], mutants=True)  # a holding form: the count alone
    assert _mutants_line(right) == f"- mutants killed: {right['mutants']} of {right['mutants']}"
    # a failing form whose mutants all fail, and one whose correction is the mutated form
    five = Form(sp.Integer(5), lhs="x")  # no mutant of it is one
    wrong = Claim("mine", "eq1", "x is one", five, _is_one, method="comparison",
                  mutants=(mutant(five, sp.Integer(10), "doubled"),))  # fmt: skip
    (record,) = run_audit([wrong], mutants=True)
    assert record["verdict"] == "fails"  # it said no to every form: its kills showed nothing
    assert _mutants_line(record) == (f"- mutants killed: 0 of {record['mutants']}; the check "
                                     "accepted no form of this claim, so rejecting its mutants "
                                     "shows nothing of it")
    wrong = Claim("mine", "eq1", "x is one", printed, _is_one, method="comparison",
                  correction=Form(sp.Integer(-3), lhs="x"),
                  mutants=(mutant(printed, sp.Integer(1), "sign flipped"),))  # fmt: skip
    (record,) = run_audit([wrong], mutants=True)
    assert record["mutated_form"] == "correction"
    assert _mutants_line(record).endswith(f"of {record['mutants']}")


def test_the_console_summary_counts_candidate_corrections_as_the_markdown_names_them():
    # the console said "records with a surviving mutant: 1" of the mutants that hold of a
    # failing printed form, where the Markdown calls them candidate corrections
    def is_one(form):
        return decide(sp.simplify(form.value - 1) == 0, "it is one.", "it is not one.")

    printed = Form(sp.Integer(-1), lhs="x")
    wrong = Claim("mine", "eq1", "x is one", printed, is_one, method="comparison",
                  mutants=(mutant(printed, sp.Integer(1), "sign flipped"),
                           mutant(printed, sp.Integer(-2), "doubled")))  # fmt: skip
    records = run_audit([wrong, _one_claim(label="eq2")], mutants=True)
    line = mutant_summary(records)
    assert "surviving" not in line
    assert line.endswith("; records whose failing printed form has candidate corrections: 1")


def test_the_console_summary_counts_a_check_that_accepted_no_form_as_neither_kind():
    # a printed form whose mutants all fail too was counted as "a surviving mutant" and as
    # "candidate corrections" (there were none): its check kills nothing and accepts nothing
    five = Form(sp.Integer(5), lhs="x")
    rejecting = Claim("mine", "eq1", "x is one", five, _is_one, method="comparison",
                      mutants=(mutant(five, sp.Integer(10), "doubled"),
                               mutant(five, sp.Integer(-5), "sign flipped")))  # fmt: skip
    printed = Form(sp.Integer(-1), lhs="x")  # and one with a candidate correction beside it
    corrected = Claim("mine", "eq2", "x is one", printed, _is_one, method="comparison",
                      mutants=(mutant(printed, sp.Integer(1), "sign flipped"),
                               mutant(printed, sp.Integer(-2), "doubled")))  # fmt: skip
    records = run_audit([rejecting, corrected, _one_claim(label="eq3")], mutants=True)
    assert records[0]["mutants_killed"] == 0 and records[0]["verdict"] == "fails"
    line = mutant_summary(records)
    assert "surviving" not in line
    assert line.endswith("; records whose failing printed form has candidate corrections: 1; "
                         "records whose check accepted no form (so no mutant killed): 1")
    assert mutant_shortfalls(records[0]) == []  # no survivor listed for it either
    assert "accepted no form" not in mutant_summary(records[1:])


def test_markdown_says_corrected_only_where_the_check_ran_on_the_correction():
    # the check runs on a correction only when the printed form fails, and then whether or
    # not the correction holds, or whether the check can decide it; a correction of a printed
    # form that holds (or that the check cannot decide) is given but never checked
    def is_one_or_undecided(form):
        if form.value == 0:
            return undecided("zero: no data")
        return _is_one(form)

    printed = {"a": 5, "b": 5, "c": 1, "d": 0, "e": 5}  # x is one in c only; d undecided
    corrected = {"a": 1, "b": 3, "c": 3, "d": 3, "e": 0}  # b's is not one, e's undecided
    said_of = {"a": "corrected", "b": "correction given, checked: it fails too",
               "e": "correction given, checked: the check cannot decide it"}
    claims = [Claim("mine", label, "x is one", Form(sp.Integer(printed[label]), lhs="x"),
                    is_one_or_undecided, correction=Form(sp.Integer(value), lhs="x"))
              for label, value in corrected.items()]  # fmt: skip
    lines = format_markdown(run_audit(claims)).splitlines()
    for label, value in corrected.items():
        said = said_of.get(label, "correction given, not checked")
        start = lines.index(next(line for line in lines
                                 if line.startswith(f"<summary><code>{label}</code>")))
        block = lines[start:lines.index("</details>", start)]
        said_lines = [line for line in block if line.startswith("- correct")]
        assert said_lines == [f"- {said}: `x = {value}`"], label


def _mutants_line(record):
    lines = format_markdown([record]).splitlines()
    return next(line for line in lines if line.startswith("- mutants"))


def test_an_empty_detail_is_an_empty_detail_item():
    def silent(form):
        return decide(form.value == 1, "", "")

    lines = format_markdown(run_audit([_one_claim(check=silent)])).splitlines()
    assert "- detail: " in lines and not any(line.startswith("  ```") for line in lines)

def test_markdown_without_mutants_has_no_mutant_column_and_badges_every_verdict():
    records = [_record("m", "eq1", "holds", "s1"), _record("m", "eq2", "inconclusive", "s2")]
    del records[1]["claim"]["correction"]  # a record written before corrections were recorded
    markdown = format_markdown(records).split("\n")
    assert markdown[4:8] == [
        "| paper | claims | holds | holds-with-correction | fails | inconclusive | reproduced "
        "| not-reproduced | not-testable-here |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        "| m | 2 | 1 | 0 | 0 | 1 | 0 | 0 | 0 |",
        "| all papers | 2 | 1 | 0 | 0 | 1 | 0 | 0 | 0 |",
    ]
    assert "| `eq1` | holds | s1 |" in markdown
    assert "| `eq2` | *inconclusive* | s2 |" in markdown
    assert "- verdict: *inconclusive*" in markdown
    assert not any(line.startswith(("- mutants", "- corrected")) for line in markdown)


def test_a_statement_with_a_pipe_keeps_its_table_row_whole():
    # "tie-aware AP (k = |S|)" was cut at its pipes into cells past the table's three
    records = [_record("m", "eq2", "holds", "tie-aware AP (k = |S|)")]
    markdown = format_markdown(records).split("\n")
    assert r"| `eq2` | holds | tie-aware AP (k = \|S\|) |" in markdown
    # the folded summary is no table: it keeps the pipes as they are
    assert any(line.startswith("<summary><code>eq2</code>: tie-aware AP (k = |S|)")
               for line in markdown)


def test_markdown_of_no_records_counts_zero_without_a_mutant_column():
    markdown = format_markdown([]).split("\n")
    assert markdown[4:] == [
        "| paper | claims | holds | holds-with-correction | fails | inconclusive | reproduced "
        "| not-reproduced | not-testable-here |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        "| all papers | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 |",
    ]


# --- output files ------------------------------------------------------------------------------


def test_write_outputs_writes_json_and_markdown(tmp_path):
    records = RECORDS[:2]
    json_path, markdown_path = tmp_path / "a.json", tmp_path / "a.md"
    write_outputs(records, json_path, markdown_path)
    assert json.loads(json_path.read_text()) == records
    assert json_path.read_text().startswith('[\n {\n  "id": ')  # indent 1: diffs stay small
    assert markdown_path.read_text() == format_markdown(records)
    write_outputs(records, None, None)  # nothing asked, nothing written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "a.md"]


def test_write_outputs_creates_no_folder_and_writes_nothing_when_one_path_is_bad(tmp_path):
    with pytest.raises(GradlabError, match=r"^--markdown must be a file in an existing folder"):
        write_outputs(RECORDS, tmp_path / "a.json", tmp_path / "new" / "a.md")
    assert list(tmp_path.iterdir()) == []


def test_write_outputs_writes_only_what_is_asked(tmp_path):
    write_outputs(RECORDS, None, tmp_path / "only.md")
    write_outputs(RECORDS, tmp_path / "only.json", None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["only.json", "only.md"]


def test_below_its_row_a_statement_fills_the_width_after_a_4_space_indent():
    fits, too_long = "x" * 30 + " " + "y" * 30, "x" * 32 + " " + "y" * 32  # 61 and 65 characters
    records = [_record("m", "eq1", "holds", fits, mutants=(1, 1)),
               _record("m", "eq2", "holds", too_long, mutants=(1, 1))]  # fmt: skip
    lines = format_table(records, width=65).split("\n")  # 65 - 36 < 30: statements below
    row = "holds                 1/1"
    assert lines[2:8] == ["m", f"  eq1 {row}", "    " + fits, f"  eq2 {row}", "    " + "x" * 32,
                          "    " + "y" * 32]  # fmt: skip


def test_the_table_is_110_characters_wide_by_default():
    lines = format_table(RECORDS).split("\n")
    assert lines[1] == "-" * 110 and lines[0].endswith("statement")
    assert lines[2].startswith("Brown, Xie") and max(len(line) for line in lines) == 110
    assert "  eq2     holds                 2/2     short statement" in lines


ALL_OPERATORS = ("sign", "shift", "factor", "term", "exponent", "log", "swap")
"""The audit's mutation operators, in the order its messages list them."""
EVERY_REASON = {operator: "does not apply" for operator in ALL_OPERATORS}


def _result(operator, name, formula, killed=True):
    return {"operator": operator, "mutant": name, "formula": formula, "killed": killed}


def _short(results, mutants=None, reasons=None, verdict="holds", correction=None):
    return {"mutants": len(results) if mutants is None else mutants, "verdict": verdict,
            "mutant_results": results, "inapplicable": reasons or {},
            "claim": {"formula": "x = 1", "correction": correction}}  # fmt: skip


SHORTFALL_CASES = {
    "no mutants run": ({"verdict": "holds"}, ["the audit ran without mutants"]),
    "few, one operator, its own form": (
        _short([_result("sign", "sign", "x = -1"), _result("sign", "no-op", "x = 1")]),
        ["2 mutants (fewer than 3)",
         "1 operator (sign); no reason given for: shift, factor, term, exponent, log, swap",
         "mutant 'no-op' is the printed form or the correction: x = 1"]),
    "two operators, a survivor, the correction": (
        _short([_result("sign", "s1", "x = -1"), _result("shift", "s2", "x = 3", killed=False),
                 _result("shift", "s3", "x = 2")], correction="x = 2"),
        ["mutant survives (shift: s2): x = 3",
         "mutant 's3' is the printed form or the correction: x = 2"]),
    "no results recorded": (
        {"mutants": 3, "verdict": "holds", "inapplicable": {}, "claim": {"formula": "x = 1"}},
        ["0 operators (none); no reason given for: sign, shift, factor, term, exponent, log, "
         "swap"]),
    "every reason, but a testable verdict": (
        _short([], reasons=EVERY_REASON), ["0 mutants (fewer than 3)"]),
    "one mutant": (  # was: "1 mutants"
        _short([_result("sign", "sign", "x = -1")], reasons=EVERY_REASON),
        ["1 mutant (fewer than 3)"]),
    "not testable, every reason": (_short([], verdict=NOT_TESTABLE, reasons=EVERY_REASON), []),
    "not testable, a reason missing": (
        _short([], verdict=NOT_TESTABLE, reasons={"sign": "does not apply"}),
        ["0 mutants (fewer than 3)",
         "0 operators (none); no reason given for: shift, factor, term, exponent, log, swap"]),
}  # fmt: skip


@pytest.mark.parametrize("case", list(SHORTFALL_CASES))
def test_mutant_shortfalls_name_each_kind_in_the_records_words(case):
    """The lines the audit prints when a record's mutants fall short, written out from the rule
    (at least 3 mutants, from at least 2 operators or a reason for each silent one, none
    surviving, none equal to the printed form or the correction; a claim that cannot be
    tested here needs no mutant if every operator has a reason)."""
    record, expected = SHORTFALL_CASES[case]
    assert mutant_shortfalls(record) == expected


def test_the_statement_column_goes_beside_the_rows_at_exactly_30_characters():
    # the header with a mutant column is 40 characters (claim 9, verdict 21, mutants 8)
    assert format_table(RECORDS, width=70).split("\n")[0].endswith(" statement")
    assert format_table(RECORDS, width=69).split("\n")[0].endswith(" mutants")


@pytest.mark.parametrize("width", range(26, 121))
def test_the_verdict_counts_fill_each_line_with_whole_items(width):
    """The counts line, checked against its rule rather than a copy of the code: the lines
    joined are the items joined by ", "; no line is wider than ``width`` (a line ended by a
    comma counts it); and no line could have taken the next item (with its own trailing comma
    unless it is the last)."""
    records = [_record("m", "eq1", "holds", "s")]
    lines = format_table(records, width=width).split("\n")
    counts = lines[len(lines) - lines[::-1].index("-" * width):]  # after the last rule
    items = [f"{verdict}: {count}" for verdict, count in summary_counts(records).items()]
    assert " ".join(counts) == ", ".join(items)
    assert all(len(line) <= width for line in counts)
    for line, following in itertools.pairwise(counts):
        first = following.split(", ")[0].rstrip(",")
        trailing = 0 if first == items[-1] else 1
        assert len(line) - 1 + 2 + len(first) + trailing > width, (line, following)


def test_the_summary_counts_records_with_a_surviving_mutant_not_the_mutants():
    two_survive = _short([_result("sign", "a", "x = -1", killed=False),
                          _result("shift", "b", "x = 2", killed=False),
                          _result("shift", "c", "x = 3")])  # fmt: skip
    one_survives = _short([_result("sign", "a", "x = -1", killed=False),
                           _result("shift", "b", "x = 2"), _result("shift", "c", "x = 3")])
    none_survive = _short([_result("sign", "a", "x = -1"), _result("shift", "b", "x = 2"),
                           _result("shift", "c", "x = 3")])  # fmt: skip
    records = [dict(r, mutants_killed=sum(x["killed"] for x in r["mutant_results"]))
               for r in (two_survive, one_survives, none_survive)]  # fmt: skip
    assert mutant_summary(records).endswith("; records with a surviving mutant: 2")
    assert "surviving" not in mutant_summary(records[2:])


@pytest.mark.parametrize(("verdict", "badge"), [("reproduced", "*reproduced*"),
                                                ("not-reproduced", "*not reproduced*"),
                                                ("not-testable-here", "*not testable here*")])
def test_markdown_writes_the_empirical_verdicts_in_words(verdict, badge):
    markdown = format_markdown([_record("m", "eq1", verdict, "s1")]).split("\n")
    assert f"| `eq1` | {badge} | s1 |" in markdown


def test_the_measurement_given_to_the_audit_reaches_the_default_claims(monkeypatch):
    given = []
    monkeypatch.setattr(audit, "all_claims",
                        lambda **kwargs: given.append(kwargs) or [_one_claim()])  # fmt: skip
    measurement = {"batch_sizes": [8, 16]}
    run_audit(p_vs_batch_size=measurement)
    assert given == [{"p_vs_batch_size": measurement}]


@pytest.mark.parametrize(("records", "message"), [
    ({"seed": "mine"}, r"^records must be a list of audit records \(dicts from run_audit or "
                       r"audit_claim\); got dict \{'seed': 'mine'\}$"),
    # a list, but of something else than records
    (["mine"], r"^records must be a list of audit records \(dicts from run_audit or "
               r"audit_claim\); got list \['mine'\]$"),
    # a long value is shown by the first 200 characters of its repr: a quote and 199 x
    ("x" * 300, r"^records must be a list of audit records \(dicts from run_audit or "
                r"audit_claim\); got str '" + "x" * 199 + "$"),
    ([{"seed": "mine", "verdict": "holds"}], r"^records must be audit records \(from run_audit "
                                             r"or audit_claim\); record 1 of 1 lacks label, "),
    ([{"seed": "mine", "label": "eq1", "verdict": "true", "method": "", "detail": "",
       "claim": {"statement": "s", "formula": "x", "latex": "x"}}],
     r"^record 1 of 1: verdict must be one of \("),
])
@pytest.mark.parametrize("format_records", [format_table, format_markdown, format_not_testable])
def test_the_formats_name_records_that_are_not_audit_records(records, message, format_records):
    with pytest.raises(GradlabError, match=message):
        format_records(records)


def test_format_table_refuses_a_width_too_narrow_for_a_word():
    record = {"seed": "mine", "label": "eq1", "verdict": "holds", "claim": {"statement": "s"}}
    with pytest.raises(GradlabError, match=r"^width must be an int >= 10; got 0$"):
        format_table([record], width=0)


def _not_testable(label, detail=None):
    record = {"seed": "mine", "label": label, "verdict": "not-testable-here",
              "claim": {"statement": "s"}}  # fmt: skip
    if detail is not None:
        record["detail"] = detail
    return record


def test_the_not_testable_claims_are_listed_with_their_whole_detail_wrapped():
    holds = {"seed": "mine", "label": "eq1", "verdict": "holds", "claim": {"statement": "s"},
             "detail": "arithmetic"}  # fmt: skip
    detail = "needs the authors' data; a miniature, as context only: P unclear over 3 seeds"
    records = [holds, _not_testable("trend", detail), _not_testable("bare")]
    assert format_not_testable(records, width=40).split("\n") == [
        "Not testable here (the context measured is in each detail):",
        "  trend: needs the authors' data; a",  # the first line indented by 2, the rest by 4
        "    miniature, as context only: P",
        "    unclear over 3 seeds",
        "  bare:",  # a record without a detail
    ]
    assert format_not_testable([holds]) == (
        "Not testable here (the context measured is in each detail):\n  none")
    assert format_not_testable([_not_testable("long", "x " * 60)]).split("\n")[1] == (
        "  long: " + "x " * 50 + "x")  # the default width: 110 (109 here, 111 with one more)


@pytest.mark.parametrize("width", [9, 0])
def test_format_not_testable_refuses_a_width_below_10(width):
    with pytest.raises(GradlabError, match=rf"^width must be an int >= 10; got {width}$"):
        format_not_testable([_not_testable("trend", "d")], width=width)
    assert format_not_testable([_not_testable("t", "d")], width=10).endswith("  t: d")


def test_a_table_of_records_with_and_without_mutants_has_no_mutant_column():
    # format_table raised KeyError 'mutants_killed' where format_markdown left the column out
    with_mutants = _record(S002, "eq1", "holds", "s", mutants=(3, 3))
    without = _record(S002, "eq2", "fails", "t")
    mixed = format_table([with_mutants, without], width=60)
    assert mixed == format_table([_record(S002, "eq1", "holds", "s"), without], width=60)
    assert "mutants" not in mixed.split("\n")[0]
    assert format_table([with_mutants], width=60).split("\n")[0].split()[2] == "mutants"
    assert "| mutants killed |" not in format_markdown([with_mutants, without])


def test_a_claim_checked_on_printed_numbers_says_so_wherever_its_verdict_is_shown():
    # a verdict on the authors' printed table is not a rerun of their experiment: the table
    # row, the folded summary and the verdict line say "on the printed numbers only"; a claim
    # checked otherwise does not
    def table(form):
        return decide(form.value == 1, "the table's rows agree.", "they do not.")

    printed = [Claim("mine", label, "x is one", Form(sp.Integer(value), lhs="x"), table,
                     note=note)
               for label, value, note in (("t1", 1, PRINTED_RESULTS_ONLY),
                                          ("t2", 2, PRINTED_RESULTS_ONLY),
                                          ("t3", 1, ""),
                                          ("t4", 1, f"Context. {PRINTED_RESULTS_ONLY} More."))]
    lines = format_markdown(run_audit(printed)).splitlines()
    only = ", on the printed numbers only"
    for label, verdict, said in (("t1", "holds", True), ("t2", "**FAILS**", True),
                                 ("t3", "holds", False), ("t4", "holds", True)):
        row = next(line for line in lines if line.startswith(f"| `{label}` |"))
        assert row == f"| `{label}` | {verdict}{only if said else ''} | x is one |"
        summary = next(line for line in lines if line.startswith(f"<summary><code>{label}<"))
        plain = "holds" if verdict == "holds" else "fails"
        assert summary.endswith(f"x is one ({plain}{only if said else ''})</summary>")
        start = lines.index(summary)
        assert f"- verdict: {verdict}{only if said else ''}" in lines[start:start + 12]


def test_the_count_of_claims_that_hold_says_apart_those_on_printed_numbers_alone():
    # of the claims that hold, those decided on the authors' printed table alone; a failing or
    # corrected claim on printed numbers, and a derivation that holds, are not among them
    def table(form):
        return decide(form.value == 1, "the table's rows agree.", "they do not.")

    cases = (("t1", 1, PRINTED_RESULTS_ONLY), ("t2", 2, PRINTED_RESULTS_ONLY), ("t3", 1, ""),
             ("t4", 1, f"Context. {PRINTED_RESULTS_ONLY} More."), ("t5", 1, PRINTED_RESULTS_ONLY))
    records = run_audit([Claim("mine", label, "x is one", Form(sp.Integer(value), lhs="x"),
                               table, note=note) for label, value, note in cases])
    expected = sum(value == 1 and PRINTED_RESULTS_ONLY in note for _, value, note in cases)
    assert expected == 3
    assert printed_numbers_said(records) == f" ({expected} on the authors' printed numbers alone)"
    corrected = {**records[0], "verdict": "holds-with-correction"}
    assert printed_numbers_said([corrected, *records[1:]]) == (
        f" ({expected - 1} on the authors' printed numbers alone)")
    assert printed_numbers_said([r for r in records if r["label"] in ("t2", "t3")]) == ""
    assert printed_numbers_said([]) == ""


def test_the_terminal_table_says_which_claims_rest_on_printed_numbers():
    def table(form):
        return decide(form.value == 1, "the rows agree.", "they do not.")

    claims = [Claim("mine", label, f"claim {label}", Form(sp.Integer(1), lhs="x"), table,
                    note=note)
              for label, note in (("t1", PRINTED_RESULTS_ONLY), ("t2", ""))]
    rows = format_table(run_audit(claims), width=120).splitlines()
    assert next(r for r in rows if r.startswith("  t1")).endswith(
        "claim t1 (checked on the printed numbers only)")
    assert next(r for r in rows if r.startswith("  t2")).endswith("claim t2")


@pytest.mark.slow
def test_the_mutant_summary_says_how_many_killed_mutants_the_check_could_not_evaluate():
    # a mutant on which the check raises is rejected as inconclusive: counted as killed, and
    # said apart, since it was not shown wrong
    def is_one(form):
        if form.value == 3:
            raise ValueError("math domain error")
        return _is_one(form)

    printed = Form(sp.Integer(1), lhs="x")
    claim = Claim("mine", "eq1", "x is one", printed, is_one,
                  mutants=(mutant(printed, sp.Integer(2), "two"),
                           mutant(printed, sp.Integer(3), "three")))  # fmt: skip
    records = run_audit([claim], mutants=True)
    results = {o["mutant"]: o["verdict"] for o in records[0]["mutant_results"]}
    assert results["two"] == "fails" and results["three"] == "inconclusive"
    # every mutant is killed (3 raises; the others are not one), one of them unevaluated
    assert records[0]["mutants_killed"] == records[0]["mutants"]
    total = records[0]["mutants"]
    assert (f"killed: {total} ({total - 1} refuted, 1 forms the check cannot evaluate: "
            "rejected, not shown wrong);" in mutant_summary(records))
    assert "cannot evaluate" not in mutant_summary(run_audit([_one_claim()], mutants=True))


def test_run_audit_refuses_two_claims_of_one_id_before_any_work():
    def never(form):
        raise AssertionError("checked before the refusal")

    twice = [_one_claim(check=never), _one_claim(check=never), _one_claim(label="eq2")]
    with pytest.raises(GradlabError) as raised:
        run_audit(twice)
    assert str(raised.value) == ("claims must have distinct ids (seed:label); got 'mine:eq1' "
                                 "more than once")
    with pytest.raises(GradlabError) as raised:
        run_audit([*twice, _one_claim(label="eq2", check=never)])
    assert str(raised.value) == ("claims must have distinct ids (seed:label); got 'mine:eq1', "
                                 "'mine:eq2' more than once")


def test_a_long_correction_is_shown_with_the_stretch_it_changes():
    # two ~100-character formulas that differ in one sign: the markdown shows that stretch
    # with 15 characters either side, so the reader need not compare them by eye
    s_i, s_j = sp.symbols("s_i s_j", real=True)
    padding = sum(sp.Symbol(f"a{k}", real=True) for k in range(14))
    printed = Form(padding + s_i - s_j, lhs="D_ij")
    corrected = Form(padding + s_j - s_i, lhs="D_ij")
    truth = padding + s_j - s_i
    claim = Claim("mine", "eq1", "D_ij", printed,
                  lambda form: decide(sp.simplify(form.value - truth) == 0, "ok", "differs"),
                  correction=corrected)  # fmt: skip
    lines = format_markdown(run_audit([claim])).splitlines()
    (changed,) = [line for line in lines if line.startswith("- changed: ")]
    before, after = printed.text(), corrected.text()
    assert len(before) > 80
    start = next(i for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b)
    shown_before, shown_after = changed.removeprefix("- changed: `").split("` -> `")
    shown_after = shown_after.removesuffix("`")
    # each shown part is a stretch of its formula, around the first difference
    for shown, whole in ((shown_before, before), (shown_after, after)):
        inner = shown.removeprefix("...").removesuffix("...")
        assert inner in whole and whole.index(inner) <= start < whole.index(inner) + len(inner)
        assert len(inner) < len(whole)
        assert whole.index(inner) == start - 15  # 15 characters of context before it
    short = Claim("mine", "eq2", "x", Form(sp.Integer(2), lhs="x"), _is_one,
                  correction=Form(sp.Integer(1), lhs="x"))  # fmt: skip
    assert not any(line.startswith("- changed: ")
                   for line in format_markdown(run_audit([short])).splitlines())


def test_the_terminal_table_reads_records_without_a_detail():
    # format_table needs no detail (a record written by hand, as in its example)
    record = {"seed": "mine", "label": "eq1", "verdict": "holds", "claim": {"statement": "s"}}
    assert "  eq1 holds" in format_table([record], width=60)


def _changed_of(printed: str, corrected: str) -> list[str]:
    """The "- changed:" lines of the audit Markdown for a claim printed as the text
    ``printed`` whose correction ``corrected`` holds (text forms, no left-hand side)."""
    claim = Claim("mine", "eq1", "a text", Form(printed),
                  lambda form: decide(form.value == corrected, "ok", "differs"),
                  correction=Form(corrected))  # fmt: skip
    return [line for line in format_markdown(run_audit([claim])).splitlines()
            if line.startswith("- changed: ")]


A, B = "a" * 50, "b" * 50


@pytest.mark.parametrize(("printed", "corrected", "shown"), [
    # one character apart in the middle: 15 characters of context either side, cut with ...
    (A + "X" + B, A + "Y" + B, f"`...{'a' * 15}X{'b' * 15}...` -> `...{'a' * 15}Y{'b' * 15}...`"),
    # apart at the very start, or at the very end: no ... on that side
    ("X" + B + B, "Y" + B + B, f"`X{'b' * 15}...` -> `Y{'b' * 15}...`"),
    (A + A + "X", A + A + "Y", f"`...{'a' * 15}X` -> `...{'a' * 15}Y`"),
    # an insertion: the printed stretch is the context alone
    (A + B, A + "ZZ" + B, f"`...{'a' * 15}{'b' * 15}...` -> `...{'a' * 15}ZZ{'b' * 15}...`"),
    # one more character at the end of a run: the common end does not reach into the start
    ("a" * 100, "a" * 101, f"`...{'a' * 15}` -> `...{'a' * 16}`"),
    # 81 characters: long enough to be shown; an odd common end (85 characters)
    ("X" + "b" * 80, "Y" + "b" * 80, f"`X{'b' * 15}...` -> `Y{'b' * 15}...`"),
    ("X" + "b" * 85, "Y" + "b" * 85, f"`X{'b' * 15}...` -> `Y{'b' * 15}...`"),
    # apart at both ends: each shown whole
    ("X" + "b" * 90 + "X", "Y" + "b" * 90 + "Y", f"`X{'b' * 90}X` -> `Y{'b' * 90}Y`"),
    # an a inserted where a's end: the common end stops at the common start
    ("a" * 40 + "b" * 60, "a" * 41 + "b" * 60,
     f"`...{'a' * 15}{'b' * 15}...` -> `...{'a' * 16}{'b' * 15}...`"),
], ids=["middle", "start", "end", "insertion", "run", "81-characters", "odd-end", "both-ends",
        "inserted-in-a-run"])  # fmt: skip
def test_the_changed_stretch_of_a_long_correction_is_cut_at_15_characters(printed, corrected,
                                                                          shown):
    assert _changed_of(printed, corrected) == [f"- changed: {shown}"]


@pytest.mark.parametrize(("printed", "corrected"), [
    ("X" + "b" * 79, "Y" + "b" * 79),  # 80 characters: short enough to compare by eye
    (A + "\n" + B, A + "\nY" + B),  # lines of their own: shown whole
    (A + B, A + "\n" + B),
    (A + "\n" + B, A + B),
], ids=["80-characters", "both-multi-line", "correction-multi-line", "printed-multi-line"])
def test_a_short_or_multi_line_correction_has_no_changed_stretch(printed, corrected):
    assert _changed_of(printed, corrected) == []


@pytest.mark.parametrize("count", [1, 2, 3])
def test_the_papers_folded_claims_are_counted_in_the_singular_or_plural(count):
    # "The 1 claims of this paper, each with its check"
    from gradlab.symbolic import Claim, Form, decide, format_markdown, run_audit

    def is_four(form):
        return decide(form.value == 4, "it is four.", "it is not four.")

    records = run_audit([Claim("my-notes", f"eq{index}", "four", Form(4), is_four)
                         for index in range(count)])  # fmt: skip
    expected = ("The 1 claim of this paper, with its check" if count == 1
                else f"The {count} claims of this paper, each with its check")  # fmt: skip
    assert f"<summary>{expected}</summary>" in format_markdown(records).splitlines()


def test_killed_mutants_the_check_could_not_evaluate_are_counted_apart():
    # "mutants killed: 2 of 2" read as two refutations where one mutant was a form the check
    # could not evaluate (a symbol left without a value): rejected, never shown wrong
    def is_one(form):
        if form.value.free_symbols:
            return undecided("a symbol is left without a value.")
        return decide(form.value == 1, "it is one.", "it is not one.")

    printed = Form(sp.Integer(1), lhs="x")
    claim = Claim("mine", "eq1", "x is one", printed, is_one, method="comparison",
                  mutants=(mutant(printed, sp.Integer(2), "doubled"),
                           mutant(printed, sp.Symbol("y"), "a stray symbol")))  # fmt: skip
    (record,) = run_audit([claim], mutants=True)
    results = record["mutant_results"]  # the two above and the audit's own operators'
    stray = [o for o in results if o["mutant"] == "a stray symbol"]
    assert [o["verdict"] for o in stray] == ["inconclusive"] and stray[0]["killed"]
    unevaluable = sum(o["killed"] and o["verdict"] == "inconclusive" for o in results)
    total, killed = len(results), sum(o["killed"] for o in results)
    said = (f" ({killed - unevaluable} refuted, {unevaluable} forms the check cannot evaluate: "
            "rejected, not shown wrong)")
    assert _mutants_line(record) == f"- mutants killed: {killed} of {total}{said}"
    row = next(line for line in format_markdown([record]).splitlines()
               if line.startswith("| all papers"))
    assert row.endswith(f"| {killed} / {total}{said} |")


# --- records of an older audit: no failure kind, no per-mutant results ---------------------------


def _without(record: dict, *keys: str) -> dict:
    return {key: value for key, value in record.items() if key not in keys}


@pytest.mark.parametrize("unrecorded", [1, 2])
def test_claims_wrong_as_printed_without_a_recorded_kind_are_counted_apart(unrecorded):
    # records written before the audit recorded what a check found: no "failure" key, or None
    older = [_without(_record("m", f"o{i}", "fails", "s"), "failure") for i in range(unrecorded)]
    records = [_record("m", "e1", "holds-with-correction", "s", failure="wrong-value"),
               _record("m", "e2", "fails", "s", failure=None), *older,
               _record("m", "e3", "holds", "s")]  # fmt: skip
    counts = audit.failure_counts(records)
    assert counts == {"wrong-value": 1, "undefined": 0, "ill-typed": 0,
                      "not recorded": 1 + unrecorded}  # fmt: skip
    assert audit.failure_split(records) == (
        f"1 gives a wrong value, {1 + unrecorded} are of a kind not recorded")
    one = audit.failure_split([records[0], records[1]])
    assert one == "1 gives a wrong value, 1 is of a kind not recorded"
    # none with a kind: nothing to split
    assert audit.failure_split(older) == "" and audit.failure_counts(older)["not recorded"] == (
        unrecorded)


@pytest.mark.parametrize("wrong", [1, 2])
def test_the_markdown_counts_the_claims_wrong_as_printed_in_the_singular_or_plural(wrong):
    records = [_record("m", f"e{i}", "fails", "s", failure="undefined") for i in range(wrong)]
    markdown = format_markdown([*records, _record("m", "h", "holds", "s")]).split("\n")
    claims, kind = ("claim", "is") if wrong == 1 else ("claims", "are")
    assert (f"Of the {wrong} {claims} wrong as printed, {wrong} {kind} undefined at a legal "
            "input (as each check found it: a wrong number, no number at a legal input, or a "
            "result of the wrong shape or type).") in markdown


def test_a_record_with_mutant_counts_but_no_results_per_mutant_is_reported():
    # an older audit's JSON kept the counts alone
    accepted_none = _without(_record("m", "e1", "fails", "s", mutants=(0, 2)), "mutant_results")
    failing = _without(_record("m", "e2", "fails", "s", mutants=(1, 2)), "mutant_results")
    failing["mutated_form"] = "printed"
    markdown = format_markdown([accepted_none, failing]).split("\n")
    assert ("- mutants killed: 0 of 2; the check accepted no form of this claim, so rejecting "
            "its mutants shows nothing of it") in markdown
    assert "- mutants killed: 1 of 2" in markdown  # no result names a mutant that holds
    assert "killed: 1;" in mutant_summary([accepted_none, failing])


def test_a_failing_printed_form_whose_mutants_all_fail_names_no_candidate_correction():
    printed = Form(sp.Integer(-1), lhs="x")
    wrong = Claim("mine", "eq1", "x is one", printed, _is_one, method="comparison",
                  mutants=(mutant(printed, sp.Integer(1), "sign flipped"),
                           mutant(printed, sp.Integer(-2), "doubled")))  # fmt: skip
    (record,) = run_audit([wrong], mutants=True)
    record["mutant_results"] = [o for o in record["mutant_results"] if o["verdict"] != "holds"]
    assert record["verdict"] == "fails" and record["mutants_killed"] > 0
    assert f"- mutants killed: {record['mutants_killed']} of {record['mutants']}" in (
        format_markdown([record]).split("\n"))


def test_a_check_that_accepted_a_mutant_is_not_said_to_have_accepted_no_form():
    # no mutant rejected, but one accepted: a failing printed form with a candidate correction
    record = _record("m", "e1", "fails", "s", mutants=(0, 1))
    record.update(mutated_form="printed",
                  mutant_results=[{"mutant": "sign flipped", "verdict": "holds"}])
    assert ("- mutants killed: 0 of 1; the printed form fails, so the mutants that hold are "
            "candidate corrections: sign flipped") in format_markdown([record]).split("\n")
    # an experiment not reproduced whose mutant is: the count alone
    empirical = _record("m", "e2", "not-reproduced", "s", mutants=(0, 1))
    empirical["mutant_results"] = [{"mutant": "halved", "verdict": "reproduced"}]
    assert "- mutants killed: 0 of 1" in format_markdown([empirical]).split("\n")


def test_problems_are_the_corrected_and_failing_records_counted_by_cause():
    assert set(PROBLEM_VERDICTS) == {"holds-with-correction", "fails"}
    records = [
        {"id": "a", "verdict": "fails", "cause": "sign"},
        {"id": "b", "verdict": "holds-with-correction", "cause": "sign"},
        {"id": "c", "verdict": "fails", "cause": ""},  # no cause: the record is its own problem
        {"id": "d", "verdict": "holds-with-correction"},
        {"id": "e", "verdict": "holds", "cause": "other"},
        {"id": "f", "verdict": "inconclusive", "cause": "third"},
        {"id": "g", "verdict": "not-reproduced", "cause": "fourth"},
        {"id": "h", "verdict": "not-testable-here"},
    ]
    assert distinct_problems(records) == 3  # sign, c, d
    assert distinct_problems(records[4:]) == 0
    assert [problem_key(r) for r in records[:4]] == ["sign", "sign", "c", "d"]
