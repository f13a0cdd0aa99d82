"""The key findings read whole, one line per finding, from hand-made section results: which
statistic each quotes, the word it uses for a change, its links, and the order of the list."""

from __future__ import annotations

import math

import pytest

from gradlab.experiments.p_vs_batch_size import MODEL, PER_CLASS, settings
from gradlab.report.findings import (
    BATCH_SIZE_CLAIM,
    MINIATURE_DATA,
    Finding,
    figure_numbers,
    findings_markdown,
    problems_by_paper,
)
from gradlab.symbolic.seeds import SEEDS

GRID = {"before": [1.0, 512.0], "in_bin": [1.0, 512.0]}

SHORT, LONG, BROWN = "000_e0f8edb24a02ffe3", "001_69c8c92ba6da9a08", "002_9d7d2555864f9baa"

_QUICK_SIZES = settings(True)["batch_sizes"]
QUICK = f"m = {_QUICK_SIZES[0]} to {_QUICK_SIZES[-1]}"
"""The quick miniature of `gradlab audit --measure`, as the batch-size line names it."""


def _cell(values, digits=3):
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


GROUPING = {"pml_version": "2.9.0", "agreement": 1e-6, "rows": [
    {"classes": 2, "per_class": 2, "batch": 4, "equals_blocks": True, "equals_classes": True,
     "difference_classes": 0.0}]}  # fmt: skip
"""One measured batch where the library's loss equals SmoothAP both ways."""


def _paper(seed):
    return f"{SEEDS[seed].authors} ({SEEDS[seed].year})"


def _lines(sections, **finders):
    return findings_markdown(sections, finders or None).splitlines()


def _record(seed, label, verdict, cause="", **extra):
    return {
        "id": f"{seed}:{label}",
        "seed": seed,
        "label": label,
        "verdict": verdict,
        "cause": cause,
        **extra,
    }


def test_problems_are_grouped_by_paper_both_versions_as_one():
    records = [
        _record(SHORT, "eq1", "fails"),
        _record(LONG, "eq2", "holds-with-correction"),
        _record(LONG, "eq3", "holds"),
        _record("other", "x", "fails"),
        _record(BROWN, "c", "not-reproduced"),
        _record(BROWN, "d", "inconclusive"),
    ]
    assert problems_by_paper(records) == {_paper(SHORT): records[:2], "other": [records[3]]}
    assert _paper(SHORT) == _paper(LONG)


def test_headlines_name_each_papers_causes_with_their_counts_and_rank_first():
    records = [
        _record(BROWN, "eq1", "fails", "diagonal"),
        _record(BROWN, "eq2", "holds-with-correction"),
        _record(BROWN, "eq3", "fails", "diagonal"),
        _record(SHORT, "eq8", "holds-with-correction", "sign"),
        _record(LONG, "eq9", "holds-with-correction", "sign"),
        _record(LONG, "eq11", "holds-with-correction", "quotient rule"),
        _record(LONG, "eq12", "holds"),
    ]
    lines = _lines({"audit": ({"counts": {"fails": 2}, "records": records}, "## Audit")})
    assert lines[:2] == ["## Key findings", ""]
    assert lines[2] == (
        f"- {_paper(SHORT)}'s SmoothAP gradient derivation: 3 of its printed steps in its 2 "
        "texts (a step printed in each is counted in each) are wrong as printed, from 2 "
        "distinct slips: sign (2 claims); quotient rule (1 claim); "
        "every correction holds when re-checked by computation. ([Audit](#audit))"
    )
    assert lines[3] == (
        f"- {_paper(BROWN)}: 3 printed claims do not hold as printed, 2 distinct problems: "
        "diagonal (2 claims); eq2 (1 claim); 2 are wrong with no correction that holds. "
        "([Audit](#audit))"
    )
    assert lines[4].startswith("- The audit checks 2 printed claims")
    assert len(lines) == 5


def test_a_problem_without_a_shared_cause_is_named_by_its_claims_statement():
    """The reader sees what the claim says, as the claim (a quoted statement alone read as
    the problem found), not the audit's label for it; counted only when two texts print it."""
    statement = "Eq. 4-5 are defined for every batch"
    records = [_record(BROWN, "claim-empty-set", "holds-with-correction",
                       claim={"statement": statement})]  # fmt: skip
    lines = _lines({"audit": ({"counts": {"holds-with-correction": 1}, "records": records},
                              "## Audit")})  # fmt: skip
    assert lines[2] == (
        f"- {_paper(BROWN)}: 1 printed claim does not hold as printed, 1 distinct problem: "
        f'the claim "{statement}"; every correction holds when re-checked by computation. '
        "([Audit](#audit))"
    )
    assert "claim-empty-set" not in "\n".join(lines)
    twice = [*records, _record(BROWN, "claim-empty-set-long", "holds-with-correction",
                               claim={"statement": statement})]  # fmt: skip
    lines = _lines({"audit": ({"counts": {"holds-with-correction": 2}, "records": twice},
                              "## Audit")})  # fmt: skip
    assert f'the claim "{statement}" (2 claims);' in lines[2]


FAILS = {"verdict": "fails", "killed": True}
"""A mutant its check refutes: a case where it differs."""
UNEVALUATED = {"verdict": "inconclusive", "killed": True}
"""A mutant its check cannot evaluate: rejected, never shown wrong."""


def _audit_line(line, claims, texts=""):
    """The audit line after "by computation: ", once its head counts ``claims`` claims in
    ``texts`` (`` in N texts of M papers``, or nothing without records)."""
    head, tail = line.split(" by computation: ")
    noun = "claim" if claims == 1 else "claims"
    assert head == f"- The audit checks {claims} printed {noun}{texts}", head
    return tail


def test_the_audit_line_of_one_claim_and_one_mutant_is_in_the_singular():
    # was: "checks 1 printed claims", "The 1 claims wrong as printed show 1 distinct problems",
    # "1 of 1 deliberately wrong variants of the forms that hold are told apart"
    records = [_record(BROWN, "eq1", "fails", "diagonal", mutants=1, mutants_killed=1,
                       mutant_results=[{"verdict": "fails", "killed": True}])]
    line = _lines({"audit": ({"counts": {"fails": 1}, "records": records}, "text")})[-1]
    brown = f"{_paper(BROWN)}, {SEEDS[BROWN].part}"
    assert line == (
        "- The audit checks 1 printed claim in 1 text of 1 paper by computation: 0 hold as "
        "printed, 0 are wrong as printed, with a correction that holds (each correction "
        "re-checked), 1 is wrong with no correction that holds and 0 stay inconclusive. The 1 "
        "claim wrong as printed shows 1 distinct problem (claims sharing one root cause count "
        f"once; {brown}: 1 claim, 1 problem). Of 1 deliberately wrong variant of the forms "
        "that hold, 1 is refuted (the check finds a case where each differs), 0 cannot be "
        "evaluated by the check (a symbol left without a value, an index out of range, a domain "
        "error: rejected, not shown wrong) and 0 pass it."
    )


def test_the_audit_line_counts_verdicts_outcomes_problems_and_mutants():
    records = [
        _record(BROWN, "eq1", "fails", "diagonal", mutants=4, mutants_killed=3,
                mutant_results=[FAILS, FAILS, UNEVALUATED, {"verdict": "holds", "killed": False}]),
        _record(BROWN, "eq2", "holds", mutants=2, mutants_killed=2, mutant_results=[FAILS] * 2),
        _record("custom", "eq1", "holds-with-correction", "diagonal", mutants=1,
                mutant_results=[UNEVALUATED]),
        _record("custom", "eq2", "fails"),
        _record(BROWN, "claim", "not-testable-here"),
    ]
    counts = {
        "holds": 1,
        "holds-with-correction": 1,
        "fails": 2,
        "not-testable-here": 1,
        "reproduced": 2,
    }
    audit = {"counts": counts, "records": records}
    line = _lines({"audit": (audit, "text, no heading")})[-1]
    brown = f"{_paper(BROWN)}, {SEEDS[BROWN].part}"
    assert _audit_line(line, 7, " in 2 texts of 2 papers") == (
        "1 holds as printed, 1 is wrong as printed, with a correction that holds (each "
        "correction re-checked), 2 are wrong with no correction that holds and 0 stay "
        "inconclusive; of the claims about the authors' experiments, 2 reproduced, 1 not "
        "testable here (outcomes, not failures). The 3 claims wrong as printed show 2 distinct "
        "problems (claims sharing one root cause count once; "
        f"{brown}: 1 claim, 1 problem; custom: 2 claims, 2 problems). Of 7 deliberately "
        "wrong variants of the forms that hold, 4 are refuted (the check finds a case where each "
        "differs), 2 cannot be evaluated by the check (a symbol left without a value, an index "
        "out of range, a domain error: rejected, not shown wrong) and 1 passes it."
    )
    plain = _lines({"audit": ({"counts": {"holds": 2}}, "## Audit")})
    assert _audit_line(plain[2], 2) == (
        "2 hold as printed, 0 are wrong as printed, with a correction that holds (each "
        "correction re-checked), 0 are wrong with no correction that holds and 0 stay "
        "inconclusive. ([Audit](#audit))"
    )
    assert _audit_line(_lines({"audit": ({"counts": {"fails": 1}}, "")})[2], 1) == (
        "0 hold as printed, 0 are wrong as printed, with a correction that holds (each "
        "correction re-checked), 1 is wrong with no correction that holds and 0 stay "
        "inconclusive."
    )
    one = {"counts": {"holds": 1}, "records": [_record(BROWN, "eq2", "holds")]}
    assert _audit_line(_lines({"audit": (one, "")})[-1], 1, " in 1 text of 1 paper")
    versions = {"counts": {"holds": 2}, "records": [_record(SHORT, "eq8", "holds"),
                                                   _record(LONG, "eq12", "holds")]}  # fmt: skip
    papers = len({SEEDS[SHORT].title, SEEDS[LONG].title})  # two versions of one paper
    assert papers == 1
    assert _audit_line(_lines({"audit": (versions, "")})[-1], 2, " in 2 texts of 1 paper")


def test_the_headlines_lead_the_list_whatever_the_page_order():
    records = [_record(BROWN, "eq1", "fails"), _record(SHORT, "eq8", "holds-with-correction")]
    verification = {
        "gradient_errors": {"a": {"x": 1e-13}},
        "pml_smooth_ap": GROUPING,
    }
    harmonic = {"harmonic_error": {"bound_holds": True, "largest_error_over_bound": 0.25,
                                   "grid": GRID}}
    sections = {
        "tie_aware": (harmonic, ""),
        "verification": (verification, ""),
        "audit": ({"counts": {"fails": 1}, "records": records}, ""),
    }
    starts = [line[:16] for line in _lines(sections)[2:]]
    assert starts == [
        f"- {_paper(SHORT)}"[:16],
        "- pytorch-metric",
        f"- {_paper(BROWN)}"[:16],
        "- Replacing a ha",
        "- Every analytic",
        "- The audit chec",
    ]


def _lemma(below, matches):
    return {
        "configurations": 60,
        "nonzero_share_in_bin_below": below,
        "lemma_value_matches": matches,
        "sign_of_nonzero": "positive",
    }


def test_the_verification_lines_quote_the_largest_error_the_grouping_and_the_lemma():
    errors = {"a": {"x": 2e-14, "y": 3.14e-12}, "b": {"z": 1e-13}}
    grouping = GROUPING
    results = {
        "gradient_errors": errors,
        "pml_smooth_ap": grouping,
        "fappy_lemma1": _lemma(0.875, False),
    }
    markdown = "## Checks\n\n![lemma](figures/fappy_lemma1_gradient.png)"
    lines = _lines({"verification": (results, markdown)})
    assert lines[2].startswith("- pytorch-metric-learning 2.9.0's SmoothAPLoss equals SmoothAP")
    assert lines[3] == (
        "- Every analytic gradient gradlab uses agrees with autograd or finite differences in "
        "float64; the largest difference is 3.1e-12. ([Checks](#checks))"
    )
    assert lines[4] == (
        "- Lemma 1 of FAPPY, measured over 60 configurations: the gradient reaches the pair's bin "
        "and the bin below it (88% of negatives in the bin below), with a positive value, not "
        "the value the lemma prints. ([Figure 1](#figure-1); [Checks](#checks))"
    )
    results = {"gradient_errors": errors, "fappy_lemma1": _lemma(0.0, True)}
    lines = _lines({"verification": (results, "## Checks")})
    assert len(lines) == 4
    assert lines[3] == (
        "- Lemma 1 of FAPPY, measured over 60 configurations: the gradient reaches the pair's bin "
        "only (0% of negatives in the bin below), with a positive value, as the lemma states. "
        "([Checks](#checks))"
    )


def test_the_harmonic_bound_line_says_whether_it_holds_and_leaves_out_the_first_bin():
    # "everywhere on the grid" read as every bin, the first (N = 0) too, where ln diverges
    for holds, words in ((True, "stays below"), (False, "exceeds")):
        results = {"harmonic_error": {"bound_holds": holds, "largest_error_over_bound": 0.5,
                                      "grid": {"before": [2.0, 300.0], "in_bin": [1.0, 9.0]}}}
        assert _lines({"tie_aware": (results, "## Sums")})[2] == (
            f"- Replacing a harmonic partial sum by a logarithm (He et al., 2018) {words} the "
            "paper's error bound everywhere on the grid of bins with N = 2 to 300 items before "
            "them (largest error/bound ratio 0.500); at the first bin (N = 0) the logarithm is "
            "infinite. ([Sums](#sums))"
        )


BATCH = {"batch_sizes": [16, 64, 256], "seeds": [0, 1, 2], "settings": {}}
MINIATURE = (f"a miniature was run ({MINIATURE_DATA}, {MODEL}) with the paper's sampler "
             f"({PER_CLASS} images per class, m/{PER_CLASS} classes)")  # fmt: skip
"""How the line names a measurement that does not name its own data, network and sampler."""


def _region(settings, claim):
    return {
        "p_vs_batch_size": BATCH,
        "p_vs_batch_size_summary": {"settings": settings, "claim": claim},
    }


def test_the_miniatures_reading_quotes_the_t_statistic_it_rests_on():
    # it read "reads: reproduced;" with the test's t only inside the audit's folded record
    batch = {**BATCH, "batch_sizes": [16, 256], "settings": {"trained_at_m": {
        "P": [[0.30, 0.40], [0.31, 0.42], [0.29, 0.41]]}}}  # fmt: skip
    settings = {"trained_at_m": {"first": [0.30, 0.31, 0.29], "last": [0.40, 0.42, 0.41],
                                 "change": "rises"}}  # fmt: skip
    claim = {"verdict": "not-testable-here", "miniature": {"outcome": "reproduced"}}
    region = {"p_vs_batch_size": batch,
              "p_vs_batch_size_summary": {"settings": settings, "claim": claim}}  # fmt: skip
    (line,) = [line for line in _lines({"operating_region": (region, "## Region")})
               if "On this miniature alone" in line]  # fmt: skip
    # by hand: changes 0.10, 0.11, 0.12: mean 0.11, sample std 0.01, standard error
    # 0.01 / sqrt(3), t = 0.11 sqrt(3) / 0.01 = 19.05; Student's t at 0.975 with 2 df: 4.303
    assert ("applied to this run (networks fine-tuned at each m), reads: reproduced (t = 19.05, "
            "critical 4.30, df = 2); the audit's own record") in line
    one_seed = {**batch, "seeds": [0], "settings": {"trained_at_m": {"P": [[0.3, 0.4]]}}}
    region["p_vs_batch_size"] = one_seed  # no spread, no test: no t
    (line,) = [line for line in _lines({"operating_region": (region, "## Region")})
               if "On this miniature alone" in line]  # fmt: skip
    assert "reads: reproduced; the audit's own record" in line


def test_the_batch_size_line_words_each_setting_and_the_verdict():
    settings = {
        "fixed_trained": {"first": [0.1, 0.2], "last": [0.15, 0.1], "change": "within_spread"},
        "trained_at_m": {"first": [0.3, 0.2], "last": [0.1, 0.1], "change": "falls"},
    }
    claim = {"verdict": "not-testable-here", "miniature": {"outcome": "reproduced"}}
    record = _record(
        BROWN,
        BATCH_SIZE_CLAIM,
        "inconclusive",
        detail="needs the authors' network, data, and CUDA-X, (Brown et al., 2020). More.",
    )
    other = _record(BROWN, "other", "fails", detail="needs nothing")
    sections = {
        "audit": ({"counts": {}, "records": [other, record]}, ""),
        "operating_region": (
            _region(settings, claim),
            "## Region\n\n![P](figures/p_vs_batch_size.png)",
        ),
    }
    assert _lines(sections)[-1] == (
        "- Brown et al. (2020) report the operating-region proportion P rising with the batch "
        "size; the audit's verdict: inconclusive (needs the authors' network, data, and CUDA-X). "
        f"As context, {MINIATURE} at m = 16 to 256, over 3 seeds (mean ± population std). "
        f"At a fixed trained network, P stays within the seed spread ({_cell([0.1, 0.2])} to "
        f"{_cell([0.15, 0.1])}). For networks fine-tuned at each m, P falls from "
        f"{_cell([0.3, 0.2])} to {_cell([0.1, 0.1])}. On this miniature alone, the audit's "
        "paired t-test over the seeds, applied to this run (networks fine-tuned at each m), "
        "reads: reproduced; the audit's own record (`gradlab audit --measure`) runs a quicker "
        f"one, {QUICK}, which can read differently. "
        "([Figure 1](#figure-1); [Region](#region))"
    )
    # Without the audit section the summary's own verdict is quoted; without a miniature
    # outcome or a "needs" detail nothing is added.
    alone = {
        "operating_region": (
            _region(
                {"trained_at_m": settings["trained_at_m"]},
                {"verdict": "holds"},
            ),
            "",
        )
    }
    assert _lines(alone)[-1] == (
        "- Brown et al. (2020) report the operating-region proportion P rising with the batch "
        f"size; the audit's verdict: holds. As context, {MINIATURE} at m = 16 to 256, over 3 "
        f"seeds (mean ± population std). For networks fine-tuned at each m, P falls from "
        f"{_cell([0.3, 0.2])} to {_cell([0.1, 0.1])}."
    )
    # an audit section without records: the summary's verdict, still a finding
    alone["audit"] = ({"counts": {"holds": 1}}, "")
    assert any(line.startswith("- Brown et al. (2020) report") for line in _lines(alone))


def test_the_batch_size_line_names_the_miniatures_data_network_and_sampler():
    """A reader learns what the context was measured on, as the measurement names it."""
    settings = {"trained_at_m": {"first": [0.3, 0.2], "last": [0.1, 0.1], "change": "falls"}}
    batch = {**BATCH, "data": "toy strings", "model": "TinyNet", "per_class": 6}
    sections = {"operating_region": ({"p_vs_batch_size": batch,
                                      "p_vs_batch_size_summary": {"settings": settings,
                                                                  "claim": {"verdict": "holds"}}},
                                     "")}  # fmt: skip
    line = _lines(sections)[-1]
    assert ("As context, a miniature was run (toy strings, TinyNet) with the paper's sampler "
            "(6 images per class, m/6 classes) at m = 16 to 256, ") in line
    assert "its own sampler" not in line


def test_no_batch_size_line_without_a_measured_setting():
    claim = {"verdict": "holds"}
    assert findings_markdown({"operating_region": (_region({}, claim), "## R")}) == ""
    assert findings_markdown({"operating_region": ({}, "## R")}) == ""


def test_the_batch_size_line_computes_its_summary_when_none_is_stored():
    curves = [[0.40, 0.35, 0.30], [0.41, 0.36, 0.29], [0.39, 0.34, 0.31]]
    batch = {**BATCH, "per_class": 4, "settings": {"trained_at_m": {"P": curves}}}
    line = _lines({"operating_region": ({"p_vs_batch_size": batch}, "")})[-1]
    first, last = _cell([0.40, 0.41, 0.39]), _cell([0.30, 0.29, 0.31])
    assert f"For networks fine-tuned at each m, P falls from {first} to {last}." in line


def test_the_training_line_says_which_way_unseen_map_moved():
    def results(before, after):
        return {
            "unseen_classes_before": {"mAP": before},
            "unseen_classes_after": {"mAP": after},
            "seen_classes_held_out_before": {"mAP": 0.5},
            "seen_classes_held_out_after": {"mAP": 0.75},
        }

    assert _lines({"training": (results(0.25, 0.5), "")})[2] == (
        "- SmoothAP training on digits 0-4 lifts held-out mAP of the trained classes from 0.500 "
        "to 0.750, while mAP on the unseen digits 5-9 rises from 0.250 to 0.500 (one training "
        "run: no seed spread)."
    )
    # the run says its seed (a finding of one seed read as general before)
    assert _lines({"training": ({**results(0.5, 0.5), "seed": 3}, "")})[2].endswith(
        "digits 5-9 falls from 0.500 to 0.500 (one training run, seed 3: no seed spread)."
    )


def test_the_loss_line_starts_lower_case_and_lists_the_apart_losses():
    runs = {
        "A": {"metrics": {"MAP@R": [0.5, 0.7]}},
        "B": {"metrics": {"MAP@R": [0.1, 0.1]}},
        "C": {"metrics": {"MAP@R": [0.1, 0.2]}},
    }
    summary = {"metric": "MAP@R", "best": "A", "apart": {"B": {}, "C": {}}}
    results = {
        "losses": runs,
        "before": {"MAP@R": [0.2, 0.2]},
        "summary": summary,
        "seeds": [0],
        "settings": {"steps": 9},
    }
    markdown = "## Losses\n\n![c](figures/other.png)\n![l](figures/loss_comparison.png)"
    assert _lines({"losses": (results, markdown)})[2] == (
        f"- On unseen digit strings, best MAP@R among the losses that beat the untrained network "
        f"({_cell([0.2, 0.2])}) by more than the seed spread: A ({_cell([0.5, 0.7])}). Listed "
        "apart with their measured reasons: B, C. This ranks the losses for one small CNN "
        "trained from scratch for 9 steps, 1 seeds, each loss at its paper's settings; it "
        "cannot show how they rank with a pre-trained backbone, longer training or a wider "
        "search, as on CUB-200 or Stanford Online Products. ([Figure 2](#figure-2); "
        "[Losses](#losses))"
    )


def test_the_loss_line_names_the_losses_within_the_best_ones_spread_and_those_not_swept():
    # "best MAP@R: A" alone read as a winner over B, within A's seed spread, and over C, run
    # at one setting where A was chosen from two
    runs = {
        "A": {"metrics": {"MAP@R": [0.5, 0.7]},
              "sweep": {"candidates": [{"tau": 0.01}, {"tau": 0.1}]}},
        "B": {"metrics": {"MAP@R": [0.45, 0.65]}},
        "C": {"metrics": {"MAP@R": [0.3, 0.3]}, "sweep": {"candidates": [{"margin": 0.5}]}},
    }  # fmt: skip
    summary = {"metric": "MAP@R", "best": "A", "tied": ["B"], "apart": {}}
    results = {"losses": runs, "before": {"MAP@R": [0.2, 0.2]}, "summary": summary,
               "seeds": [0, 1], "settings": {"steps": 9}}  # fmt: skip
    line = _lines({"losses": (results, "## Losses")})[2]
    assert (f"by more than the seed spread: A ({_cell([0.5, 0.7])}). Within the seed spread of "
            "it: B. Trained at one setting each, not swept: C (margin 0.5); the ranking does not "
            "show how they do at other settings. This ranks the losses") in line


def test_the_scenes_line_names_the_best_and_the_apart_runs():
    run = {"recall": {"i2t_R@1": [0.5, 0.75], "t2i_R@1": [0.25, 0.25]}}
    best = {"encoder": "VSRN", "loss": "x", "tied": []}
    summary = {
        "best_recall_at_1": {"i2t": best, "t2i": best},
        "chance_factor": 2.5,
        "apart": {"VSRN": {"y": {"below_chance": True}},
                  "VSE++": {"y": {"below_chance": True}, "z": {"below_chance": True}}},
    }
    figure = "![r](figures/digit_scenes_recall.png)"
    line = _lines({"scenes": ({"runs": {"VSRN": {"x": run}}, "summary": summary}, figure)})[2]
    assert line == (
        f"- Best image -> caption R@1: the VSRN encoder with x, {_cell([0.5, 0.75])}. Best "
        f"caption -> image R@1: the VSRN encoder with x, {_cell([0.25, 0.25])}. Listed apart, "
        "not compared (R@1 not at least 2.5 x chance both ways): the VSRN encoder with y, the "
        "VSE++ encoder with y, the VSE++ encoder with z. ([Figure 1](#figure-1))"
    )
    summary["apart"] = {"VSRN": {}}
    line = _lines({"scenes": ({"runs": {"VSRN": {"x": run}}, "summary": summary}, "")})[2]
    assert line.endswith(f"caption -> image R@1: the VSRN encoder with x, {_cell([0.25, 0.25])}.")


def test_added_finders_rank_and_follow_page_order():
    def mine(results):
        return [
            Finding(f"late {results['n']}"),
            Finding("first", rank=0),
            Finding("fig", "figures/z.png", rank=1),
        ]

    def broken(results):
        return [Finding(f"{results['missing']}")]

    sections = {
        "unknown": ({}, "## U"),  # no finder: skipped
        "broken": ({}, "## B"),  # its finder fails on these results: skipped
        "tie_aware": (
            {"harmonic_error": {"bound_holds": True, "largest_error_over_bound": 0.25,
                                "grid": GRID}},
            "## T",
        ),
        "mine": ({"n": 4}, "![a](figures/a.png)\n![z](figures/z.png)  \n"),
    }
    lines = _lines(sections, mine=mine, broken=broken)
    assert lines[2:4] == ["- first", "- fig ([Figure 2](#figure-2))"]
    assert lines[4].startswith("- Replacing a harmonic partial sum")
    assert lines[5] == "- late 4"
    assert len(lines) == 6


def test_figures_are_numbered_by_first_appearance_on_their_own_line():
    markdown = (
        "![a](figures/a.png)\ntext ![x](figures/x.png)\n![b](figures/b.png) \n"
        "![a again](figures/a.png)\n![c](figures/c.png)"
    )
    assert figure_numbers(markdown) == {"figures/a.png": 1, "figures/b.png": 2, "figures/c.png": 4}


def test_the_loss_and_scenes_lines_compute_their_summaries_when_none_is_stored():
    from gradlab.experiments import digit_scenes, loss_comparison

    runs = {
        "best": {"metrics": {"MAP@R": [0.49, 0.51]}},
        "far": {"metrics": {"MAP@R": [0.10, 0.12]}},
    }
    losses = {"before": {"MAP@R": [0.30, 0.30]}, "seeds": [0, 1], "losses": runs}
    stored = {**losses, "summary": loss_comparison.summarize(losses)}
    assert stored["summary"]["best"] == "best"
    assert _lines({"losses": (losses, "")}) == _lines({"losses": (stored, "")})

    def scene(i2t, t2i):
        return {"recall": {"i2t_R@1": i2t, "t2i_R@1": t2i, "rsum": [100.0, 100.0]}}

    scenes = {
        "settings": {"test_scenes": 100, "captions_per_image": 5},
        "runs": {
            "VSRN": {"x": scene([0.5, 0.5], [0.4, 0.4]), "stuck": scene([0.01, 0.01], [0.01, 0.01])}
        },
    }
    stored = {**scenes, "summary": digit_scenes.summarize(scenes)}
    assert list(stored["summary"]["apart"]["VSRN"]) == ["stuck"]  # the line lists it apart
    assert _lines({"scenes": (scenes, "")}) == _lines({"scenes": (stored, "")})


def test_the_batch_size_line_says_saturated_when_p_is_pinned_at_1():
    curves = [[0.5, 0.75, 1.0]] * 3  # every seed alike, exactly 1 at the largest m
    batch = {**BATCH, "per_class": 4, "settings": {"trained_at_m": {"P": curves}}}
    line = _lines({"operating_region": ({"p_vs_batch_size": batch}, "")})[-1]
    first, last = _cell([0.5] * 3), _cell([1.0] * 3)
    assert (f"For networks fine-tuned at each m, P is saturated, so it shows no trend ({first} to "
            f"{last}).") in line  # fmt: skip
    assert "rises" not in line.split("report the operating-region proportion P rising")[1]


def test_the_batch_size_line_says_the_networks_trained_at_each_m_took_other_step_counts():
    # the training-length confound: fewer optimizer steps at larger m, said with the steps
    settings = {"trained_at_m": {"first": [0.3, 0.2], "last": [0.1, 0.1], "change": "falls"}}
    batch = {**BATCH, "settings": {"trained_at_m": {"steps": [376, 94, 6]}}}
    region = {"p_vs_batch_size": batch,
              "p_vs_batch_size_summary": {"settings": settings, "claim": {"verdict": "holds"}}}
    line = _lines({"operating_region": (region, "")})[-1]
    assert line.endswith(
        f"P falls from {_cell([0.3, 0.2])} to {_cell([0.1, 0.1])}. The networks fine-tuned at each "
        "m took 376 optimizer steps at the smallest m and 6 at the largest, so training length "
        "differs with m too.")
    # a fixed trained network alone: no networks fine-tuned at each m, nothing said of steps
    fixed = {"fixed_trained": {"first": [0.1, 0.2], "last": [0.15, 0.1],
                               "change": "within_spread"}}  # fmt: skip
    region["p_vs_batch_size_summary"]["settings"] = fixed
    assert "optimizer steps" not in _lines({"operating_region": (region, "")})[-1]


def test_the_loss_line_lists_every_loss_within_the_best_ones_spread():
    runs = {name: {"metrics": {"MAP@R": values}}
            for name, values in (("A", [0.5, 0.7]), ("B", [0.45, 0.65]), ("C", [0.4, 0.7]))}
    summary = {"metric": "MAP@R", "best": "A", "tied": ["B", "C"], "apart": {}}
    results = {"losses": runs, "before": {"MAP@R": [0.2, 0.2]}, "summary": summary,
               "seeds": [0, 1], "settings": {"steps": 9}}  # fmt: skip
    line = _lines({"losses": (results, "## Losses")})[2]
    assert " Within the seed spread of it: B, C. " in line


def test_a_batch_size_measurement_without_settings_says_nothing_of_steps():
    # results written before the measurement recorded its settings
    settings = {"trained_at_m": {"first": [0.3, 0.2], "last": [0.1, 0.1], "change": "falls"}}
    batch = {key: value for key, value in BATCH.items() if key != "settings"}
    region = {"p_vs_batch_size": batch,
              "p_vs_batch_size_summary": {"settings": settings, "claim": {"verdict": "holds"}}}
    line = _lines({"operating_region": (region, "")})[-1]
    assert line.endswith(f"P falls from {_cell([0.3, 0.2])} to {_cell([0.1, 0.1])}.")


def test_p_without_the_diagonal_is_said_where_the_1_over_m_term_hides_its_change():
    # P counts each query's own entry, 1/m of it: at a fixed network P read "within the seed
    # spread" while P without that entry rose in every seed
    from gradlab.report.findings import p_vs_batch_size_sentences

    flat = [[0.30, 0.30], [0.31, 0.31], [0.29, 0.29]]  # P at m = 16 and 256, per seed
    diagonal = [[1 / 16, 1 / 256]] * 3
    measurement = {"batch_sizes": [16, 256], "per_class": 4, "seeds": [0, 1, 2],
                   "settings": {"fixed_trained": {"P": flat, "P_diagonal": diagonal}}}  # fmt: skip
    sentences = p_vs_batch_size_sentences({"p_vs_batch_size": measurement})
    first = [p[0] - 1 / 16 for p in flat]
    last = [p[1] - 1 / 256 for p in flat]
    assert sentences[1] == f"At a fixed trained network, P stays within the seed spread " \
        f"({_cell([p[0] for p in flat])} to {_cell([p[1] for p in flat])})."
    assert sentences[2].startswith(
        f"Without each query's own entry (1/m of P: 0.0625 at m = 16), P there rises from "
        f"{_cell(first)} to {_cell(last)}, beyond the seed spread (a paired t-test over seeds "
        "and m ")  # fmt: skip
    # P falls, P without its diagonal stays: said as within the spread, with no t-test words
    # where the summary gives no trend of the parts
    summary = {"settings": {"fixed_trained": {
        "first": [0.4, 0.4], "last": [0.3, 0.3], "change": "falls",
        "off_diagonal": {"first": [0.2, 0.3], "last": [0.25, 0.2], "change": "within_spread",
                         "diagonal_first": 0.0625}}}, "claim": {"verdict": "holds"}}  # fmt: skip
    said = p_vs_batch_size_sentences({"p_vs_batch_size": measurement,
                                      "p_vs_batch_size_summary": summary})  # fmt: skip
    assert said[2] == (f"Without each query's own entry (1/m of P: 0.0625 at m = 16), P there "
                       f"stays within the seed spread ({_cell([0.2, 0.3])} to "
                       f"{_cell([0.25, 0.2])}).")
    # where P without it changes as P does, nothing more is said
    rising = [[0.30, 0.40], [0.31, 0.42], [0.29, 0.41]]
    measurement["settings"]["fixed_trained"]["P"] = rising
    assert not any(s.startswith("Without each query's own entry")
                   for s in p_vs_batch_size_sentences({"p_vs_batch_size": measurement}))


def test_the_findings_say_what_the_claims_wrong_as_printed_got_wrong_from_their_records():
    # by hand: of the 3 corrected, 2 give a wrong value and 1 none at a legal input; the 1 that
    # fails has the wrong shape; Brown et al.'s headline counts its own 3 (2 corrected, 1 fails)
    records = [
        _record(BROWN, "eq1", "holds-with-correction", failure="wrong-value"),
        _record(BROWN, "eq2", "holds-with-correction", failure="undefined"),
        _record(BROWN, "eq3", "fails", failure="ill-typed"),
        _record("other", "x", "holds-with-correction", failure="wrong-value"),
        _record("other", "y", "holds", failure=None),
    ]
    counts = {"holds": 1, "holds-with-correction": 3, "fails": 1}
    lines = _lines({"audit": ({"counts": counts, "records": records}, "## Audit")})
    brown = next(line for line in lines if line.startswith(f"- {_paper(BROWN)}:"))
    assert brown.startswith(
        f"- {_paper(BROWN)}: 3 printed claims do not hold as printed (1 gives a wrong value, 1 "
        "is undefined at a legal input, 1 has the wrong shape or type), 3 distinct problems")
    audit = next(line for line in lines if line.startswith("- The audit checks"))
    assert ("1 holds as printed, 3 are wrong as printed (2 give a wrong value, 1 is undefined at "
            "a legal input), with a correction that holds (each correction re-checked), 1 is "
            "wrong with no correction that holds (1 has the wrong shape or type) and 0 stay "
            "inconclusive") in audit


def test_claims_that_hold_on_the_authors_printed_numbers_alone_are_said_apart():
    # a table's arithmetic holds of the table, not of the experiment: "2 hold as printed" alone
    # read as two derivations that hold
    from gradlab.symbolic.claims import PRINTED_RESULTS_ONLY

    records = [_record(BROWN, "eq1", "holds", detail="SymPy: the difference is 0."),
               _record(BROWN, "table", "holds", detail=f"The sums agree. {PRINTED_RESULTS_ONLY}"),
               _record(BROWN, "claim", "fails", "diagonal",
                       detail=f"A row is off. {PRINTED_RESULTS_ONLY}")]  # fmt: skip
    audit = {"counts": {"holds": 2, "fails": 1}, "records": records}
    line = _lines({"audit": (audit, "text")})[-1]
    assert ("2 hold as printed (1 on the authors' printed numbers alone), 0 are wrong as "
            "printed" in line)  # fmt: skip
    records[1]["detail"] = "The sums agree."
    line = _lines({"audit": (audit, "text")})[-1]
    assert "2 hold as printed, 0 are wrong" in line and "printed numbers" not in line


@pytest.mark.parametrize(("trend", "words"), [
    ("rises", "(a paired t-test over seeds and m agrees: rises)"),
    ("unclear", "(a paired t-test over seeds and m cannot confirm it: unclear)"),
    ("falls", "(a paired t-test over seeds and m reads: falls)"),
])  # fmt: skip
def test_the_t_test_beside_a_change_beyond_the_spread_says_whether_it_agrees(trend, words):
    # "rises ..., beyond the seed spread (paired t-test over seeds and m: unclear)" read as a
    # contradiction: the two tests part, and the sentence now says so
    from gradlab.report.findings import p_vs_batch_size_sentences

    measurement = {"batch_sizes": [16, 256], "per_class": 4, "seeds": [0, 1, 2],
                   "settings": {"fixed_trained": {"P": [[0.3, 0.3]] * 3,
                                                  "P_diagonal": [[1 / 16, 1 / 256]] * 3}}}
    summary = {"settings": {"fixed_trained": {
        "first": [0.4, 0.4], "last": [0.4, 0.4], "change": "within_spread",
        "off_diagonal": {"first": [0.2, 0.2], "last": [0.3, 0.3], "change": "rises",
                         "diagonal_first": 0.0625},
        "parts": {"P without the diagonal": trend}}}, "claim": {"verdict": "holds"}}
    said = p_vs_batch_size_sentences({"p_vs_batch_size": measurement,
                                      "p_vs_batch_size_summary": summary})  # fmt: skip
    assert said[2].endswith(f"beyond the seed spread {words}."), said[2]
