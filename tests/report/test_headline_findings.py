"""The report's first findings: the derivation's slips, the pytorch-metric-learning grouping,
then every other paper's problems; all read from the results."""

from __future__ import annotations

from gradlab.report.findings import findings_markdown
from gradlab.report.prose import pml_grouping_sentence

BLEEKER, BROWN = "000_e0f8edb24a02ffe3", "002_9d7d2555864f9baa"


def _record(seed, label, verdict, cause=""):
    return {"id": f"{seed}:{label}", "seed": seed, "label": label, "verdict": verdict,
            "cause": cause}  # fmt: skip


RECORDS = [
    _record(BROWN, "eq1", "holds-with-correction", "P counts the diagonal"),
    _record(BLEEKER, "eq1", "holds"),
    _record(BLEEKER, "eq8", "holds-with-correction", "sign"),
    _record(BLEEKER, "eq9", "holds-with-correction", "sign"),
    _record(BLEEKER, "eq11", "holds-with-correction", "quotient rule"),
    _record(BROWN, "table", "not-testable-here"),
]
ROWS = [
    dict(classes=4, per_class=4, batch=16, pml_loss=0.4, smooth_ap_loss_classes=0.4,
         smooth_ap_loss_blocks=0.4, difference_classes=1e-8, difference_blocks=1e-8,
         equals_classes=True, equals_blocks=True),
    dict(classes=28, per_class=4, batch=112, pml_loss=0.68, smooth_ap_loss_classes=0.673,
         smooth_ap_loss_blocks=0.68, difference_classes=7e-3, difference_blocks=4e-8,
         equals_classes=False, equals_blocks=True),
]  # fmt: skip
GROUPING = {"pml_version": "2.9.0", "tau": 0.01, "agreement": 1e-6, "rows": ROWS}


def _findings(records=RECORDS, grouping=GROUPING):
    counts: dict[str, int] = {}
    for record in records:
        counts[record["verdict"]] = counts.get(record["verdict"], 0) + 1
    verification = {"gradient_errors": {"smoothap": {"exact_vs_autograd": 1e-13}}}
    if grouping is not None:
        verification["pml_smooth_ap"] = grouping
    sections = {"audit": ({"counts": counts, "records": records}, "## Audit"),
                "verification": (verification, "## Verification")}  # fmt: skip
    return [line for line in findings_markdown(sections).splitlines() if line.startswith("- ")]


def test_the_derivation_slips_then_the_pml_grouping_then_the_other_papers_open_the_list():
    lines = _findings()
    assert lines[0].startswith("- Bleeker & de Rijke (2022)'s SmoothAP gradient derivation")
    # three records, two causes (the sign twice), each named with its count
    assert "3 of its printed steps" in lines[0] and "2 distinct slips" in lines[0]
    assert "sign (2 claims); quotient rule (1 claim)" in lines[0]
    assert lines[1].startswith("- pytorch-metric-learning 2.9.0's SmoothAPLoss")
    assert lines[2].startswith("- Brown, Xie, Kalogeiton & Zisserman (2020): 1 printed claim does")
    assert "P counts the diagonal (1 claim)" in lines[2]
    assert lines[3].startswith("- The audit checks 6 printed claims")  # then page order
    assert lines[4].startswith("- Every analytic gradient")


def test_a_failing_record_is_said_to_fail_not_to_be_corrected():
    records = [*RECORDS, _record(BLEEKER, "eq14", "fails", "sign")]
    first = _findings(records)[0]
    assert "1 is wrong with no correction that holds" in first and "re-checked" not in first


def test_without_the_library_there_is_no_grouping_finding():
    lines = _findings(grouping=None)
    assert not any("pytorch-metric-learning" in line for line in lines)
    assert lines[1].startswith("- Brown")


def test_the_grouping_sentence_follows_the_measured_rows():
    sentence = pml_grouping_sentence(GROUPING)
    assert "in every measured batch" in sentence and "(4 x 4)" in sentence
    assert "at 28 classes of 4 (B = 112)" in sentence and "7.0e-03" in sentence
    one_block_off = {**GROUPING, "rows": [ROWS[0], {**ROWS[1], "equals_blocks": False}]}
    assert "in 1 of 2 measured batches (4 x 4)" in pml_grouping_sentence(one_block_off)
    agrees = {**GROUPING, "rows": [ROWS[0], {**ROWS[1], "equals_classes": True}]}
    text = pml_grouping_sentence(agrees)
    assert "another grouping" not in text and "in these batches (4 x 4, 28 x 4)" in text


def test_one_slip_of_the_derivation_is_worded_in_the_singular():
    records = [_record(BLEEKER, "eq1", "holds"), _record(BLEEKER, "eq8", "holds-with-correction",
                                                         "sign")]  # fmt: skip
    first = _findings(records)[0]
    assert first.startswith("- Bleeker & de Rijke (2022)'s SmoothAP gradient derivation: 1 of "
                            "its printed steps is wrong as printed, from 1 distinct slip: ")
    two = _findings([*records, _record(BLEEKER, "eq9", "holds-with-correction", "sign")])[0]
    assert "2 of its printed steps are wrong as printed, from 1 distinct slip: " in two
