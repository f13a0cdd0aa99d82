"""`gradlab report --quick` end to end: every section, every output file, every figure embedded."""

import json
import re

import pytest

from gradlab.plotting.monitor import flat_families, load_runs
from gradlab.report import SECTIONS


@pytest.mark.slow
def test_quick_report_writes_every_output(quick_report):
    out = quick_report
    results = json.loads((out / "results.json").read_text())
    assert set(results["sections"]) == set(SECTIONS) and not results["skipped"]
    summary = (out / "summary.md").read_text()
    page = (out / "index.html").read_text()
    figures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", summary)
    assert len(figures) >= 10
    for figure in figures:
        assert (out / figure).exists(), figure
    assert page.count("data:image/png;base64,") == len(figures)  # self-contained
    for heading in ("Derivation audit", "Numeric verification", "Harmonic sums", "Operating region",
                    "SmoothAP training on real data", "Ranking losses on unseen digit strings",
                    "Image-caption retrieval on digit scenes", "Gradient anatomy",
                    "Embedding geometry over training"):  # fmt: skip
        assert heading in summary
    training = results["sections"]["training"]
    assert 0.0 <= training["unseen_classes_after"]["mAP"] <= 1.0
    # The Monitor's flat families are sentences, not full-size flat lines; no overview repeats
    # the figures (the families are read again from the run's log here).
    flat = flat_families(load_runs([out / training["run_dir"]]))
    assert "figures/training/overview.png" not in figures
    assert [f for f in figures if f.startswith("figures/training/")]
    for family, sentence in flat.items():
        assert f"figures/training/{family}.png" not in figures and f"- {sentence}" in summary
    # Every study keeps one value per seed (issue 13), and the page shows their spread.
    batch = results["sections"]["operating_region"]["p_vs_batch_size"]
    per_seed = batch["settings"]["fixed_trained"]["P"]
    assert len(per_seed) == len(batch["seeds"]) >= 3
    assert all(len(values) == len(batch["batch_sizes"]) for values in per_seed)
    losses = results["sections"]["losses"]["losses"]
    assert len(losses) == 6
    assert all(len(run["metrics"]["MAP@R"]) >= 3 for run in losses.values())
    scenes = results["sections"]["scenes"]["runs"]
    assert set(scenes) == {"VSE++", "VSRN"}
    assert "figures/digit_scenes_geometry.png" in figures
    for runs in scenes.values():
        assert set(runs) == {"SmoothAP", "VSE++ max-violation", "NT-Xent"}
        assert all(len(run["recall"]["rsum"]) >= 3 for run in runs.values())
    assert "±" in summary


@pytest.mark.slow
def test_the_quick_reports_audit_leaves_open_only_the_claim_its_quick_study_decides(quick_report):
    results = json.loads((quick_report / "results.json").read_text())
    assert results["quick"] is True
    audit = results["sections"]["audit"]
    assert sum(audit["counts"].values()) > 60
    # Only the P-vs-batch-size claim may stay open: with --quick it reads the quick study
    # (no models trained per m), whose trend can be within the seed spread.
    open_claims = [r["label"] for r in audit["records"] if r["verdict"] == "inconclusive"]
    assert set(open_claims) <= {"claim-p-grows-with-batch-size"}
    assert json.loads((quick_report / "audit.json").read_text())
    assert "## Derivation audit" in (quick_report / "summary.md").read_text()


@pytest.mark.slow
def test_the_quick_reports_verification_agrees_with_finite_differences(quick_report):
    verification = json.loads((quick_report / "results.json").read_text())["sections"][
        "verification"]
    for family, errors in verification["gradient_errors"].items():
        for name, error in errors.items():
            tolerance = 1e-6 if name.endswith("_vs_fd") else 1e-10
            assert error < tolerance, (family, name, error)
    assert verification["fappy_lemma1"]["lemma_value_matches"] is False
    assert (quick_report / "figures" / "fappy_lemma1_gradient.png").exists()
    assert "Numeric verification" in (quick_report / "summary.md").read_text()
