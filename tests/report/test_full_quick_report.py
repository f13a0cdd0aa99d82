"""`gradlab report --quick` end to end: every section, every output file, every figure embedded."""

import json
import re

import pytest

from gradlab.cli import main
from gradlab.report import SECTIONS


@pytest.mark.slow
def test_quick_report_writes_every_output(tmp_path):
    out = tmp_path / "report"
    assert main(["report", "--out", str(out), "--quick"]) == 0
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
                    "SmoothAP training on real data", "Image-caption miniature"):  # fmt: skip
        assert heading in summary
    training = results["sections"]["training"]
    assert 0.0 <= training["unseen_classes_after"]["mAP"] <= 1.0
    captions = results["sections"]["captions"]["losses"]
    assert set(captions) == {"SmoothAP", "VSE++ max-violation", "NT-Xent"}
