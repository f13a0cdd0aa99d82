"""Key findings: numbers from the section results, links to the figure numbers the page uses."""

from __future__ import annotations

import re

from gradlab.report.findings import figure_numbers, findings_markdown
from gradlab.report.html import markdown_to_html
from tests.helpers.images import PNG

AUDIT = {"counts": {"holds": 7, "holds-with-correction": 3, "fails": 2, "inconclusive": 1}}
TIE_AWARE = {"harmonic_error": {"bound_holds": False, "largest_error_over_bound": 1.25,
                                "grid": {"before": [1.0, 512.0], "in_bin": [1.0, 512.0]}}}
SECTIONS = {
    "audit": (AUDIT, "## Derivation audit\n\ntext"),
    "tie_aware": (TIE_AWARE, "## Harmonic sums\n\n![one](figures/a.png)\n\n![two](figures/b.png)"),
}


def test_findings_quote_the_results_and_name_their_sections():
    text = findings_markdown(SECTIONS)
    assert text.startswith("## Key findings")
    assert "13 printed claims" in text
    assert "7 hold as printed, 3 are wrong as printed, with a correction that holds" in text
    assert "2 are wrong with no correction that holds and 1 stays inconclusive" in text
    assert "exceeds the paper's error bound" in text and "1.250" in text
    assert "(#derivation-audit)" in text and "(#harmonic-sums)" in text


def test_figure_links_match_the_numbers_the_page_gives(tmp_path):
    (tmp_path / "figures").mkdir()
    for name in ("a", "b", "tie_aware_harmonic_error"):
        (tmp_path / "figures" / f"{name}.png").write_bytes(PNG)
    markdown = "\n\n".join(["## Harmonic sums", "![one](figures/a.png)",
                             "![the one](figures/tie_aware_harmonic_error.png)"])  # fmt: skip
    sections = {"audit": SECTIONS["audit"], "tie_aware": (TIE_AWARE, markdown)}
    findings = findings_markdown(sections)
    assert "[Figure 2](#figure-2)" in findings
    body = "\n\n".join(markdown for _, markdown in sections.values())
    page = markdown_to_html("# R\n\n" + findings + "\n\n" + body, tmp_path)
    caption = re.search(r'<figure id="figure-2">.*?<figcaption>(.*?)</figcaption>', page).group(1)
    assert "the one" in caption
    assert figure_numbers(markdown) == {"figures/a.png": 1,
                                        "figures/tie_aware_harmonic_error.png": 2}  # fmt: skip


def test_a_section_without_the_expected_results_gives_no_finding():
    assert findings_markdown({"audit": ({"seconds": 1.0}, "## Audit")}) == ""
    assert findings_markdown({"unknown": ({}, "## Other")}) == ""


def test_findings_word_the_studies_verdicts_from_the_results_dict():
    # The summaries say B is best and the claim holds; the raw numbers alone would say
    # otherwise. The findings word what the results dict holds: nothing is re-decided, and no
    # section prose is parsed.
    runs = {"A": {"metrics": {"MAP@R": [0.9, 0.9]}}, "B": {"metrics": {"MAP@R": [0.1, 0.1]}}}
    losses = {"losses": runs, "before": {"MAP@R": [0.0, 0.0]},
              "summary": {"metric": "MAP@R", "best": "B", "tied": [], "behind": ["A"],
                          "no_gradient": [], "below_untrained": [],
                          "clearly_below_untrained": []}}  # fmt: skip
    batch = {"batch_sizes": [16, 64], "seeds": [0, 1], "settings": {}}
    region = {"p_vs_batch_size": batch, "p_vs_batch_size_summary": {
        "settings": {"trained_at_m": {"first": [0.1, 0.1], "last": [0.2, 0.2], "change": "rises"}},
        "claim": {"verdict": "holds", "detail": ""}}}  # fmt: skip
    text = findings_markdown({"losses": (losses, "## Losses"),
                              "operating_region": (region, "## Operating region")})  # fmt: skip
    assert ("best MAP@R among the losses that beat the untrained network (0.000 ± 0.000) by "
            "more than the seed spread: B (0.100 ± 0.000).") in text
    assert "For networks fine-tuned at each m, P rises from 0.100 ± 0.000 to 0.200 ± 0.000." in text
    assert "the audit's verdict: holds." in text


def _records():
    """A synthetic audit: two papers, one cause shared by three records, three records without
    a cause, and the three outcomes of empirical claims (never failures)."""
    rows = [("p1", "eq1", "holds", ""), ("p1", "eq2", "holds-with-correction", "sign"),
            ("p1", "eq3", "holds-with-correction", "sign"), ("p1", "eq4", "fails", "sign"),
            ("p1", "eq5", "fails", ""), ("p2", "eq1", "holds-with-correction", ""),
            ("p2", "eq2", "fails", ""), ("p2", "claim-a", "not-testable-here", "why"),
            ("p2", "claim-b", "reproduced", ""), ("p2", "claim-c", "not-reproduced", ""),
            ("p2", "eq3", "inconclusive", "")]  # fmt: skip
    refuted, unevaluated = {"verdict": "fails", "killed": True}, {"verdict": "inconclusive",
                                                                  "killed": True}  # fmt: skip
    passed = {"verdict": "holds", "killed": False}
    return [{"id": f"{s}:{label}", "seed": s, "label": label, "verdict": v, "cause": c,
             "mutants": 3, "mutants_killed": 3 - (label == "eq3"),
             "mutant_results": [refuted, unevaluated, passed] if label == "eq3"
             else [refuted, refuted, unevaluated]}
            for s, label, v, c in rows]  # fmt: skip


def test_the_audit_finding_counts_verdicts_and_distinct_problems_from_the_records():
    records = _records()
    counts = {}
    for record in records:
        counts[record["verdict"]] = counts.get(record["verdict"], 0) + 1
    text = findings_markdown({"audit": ({"counts": counts, "records": records}, "## Audit")})
    # by hand: 1 holds, 3 corrected, 3 fail, 1 inconclusive; p1's four records that do not
    # hold are 2 problems (the cause "sign" once, eq5), p2's two are 2; 33 mutants: the two eq3
    # records' 2 refuted, 2 not evaluable, 2 passed, the nine others' 18 refuted, 9 not evaluable
    assert "checks 11 printed claims" in text
    assert "1 holds as printed, 3 are wrong as printed, with a correction that holds" in text
    assert "3 are wrong with no correction that holds and 1 stays inconclusive" in text
    assert "1 reproduced, 1 not reproduced, 1 not testable here (outcomes, not failures)" in text
    assert "The 6 claims wrong as printed show 4 distinct problems" in text
    assert "p1: 4 claims, 2 problems; p2: 2 claims, 2 problems" in text
    assert "Of 33 deliberately wrong variants of the forms that hold, 20 are refuted" in text
    assert "11 cannot be evaluated by the check" in text and "and 2 pass it." in text
    assert "31 of 33" not in text  # the refuted and the not evaluable, never one sum


def test_the_batch_size_finding_takes_its_verdict_from_the_audit_record():
    batch = {"batch_sizes": [16, 64], "seeds": [0, 1], "settings": {}}
    summary = {"settings": {"trained_at_m": {"first": [0.1, 0.1], "last": [0.3, 0.3],
                                             "change": "rises"}},
               "claim": {"verdict": "holds", "detail": "",
                         "miniature": {"outcome": "not-reproduced"}}}  # fmt: skip
    record = {"id": "x:claim-p-grows-with-batch-size", "seed": "x",
              "label": "claim-p-grows-with-batch-size", "verdict": "not-testable-here",
              "detail": "needs Some Data with Some Net, one epoch (Brown et al., 2020). More."}
    audit = {"counts": {"not-testable-here": 1}, "records": [record]}
    sections = {"audit": (audit, "## Audit"),
                "operating_region": ({"p_vs_batch_size": batch,
                                      "p_vs_batch_size_summary": summary}, "## Region")}
    text = findings_markdown(sections)
    # the record's verdict, not the summary's "holds"; its reason up to the parenthesis
    assert ("the audit's verdict: not testable here (needs Some Data with Some Net, one "
            "epoch). As context,") in text
    assert ("On this miniature alone, the audit's paired t-test over the seeds, applied to "
            "this run (networks fine-tuned at each m), reads: not reproduced; the audit's own "
            "record (`gradlab audit --measure`) runs a quicker one") in text
    assert "the audit's verdict: holds" not in text


def test_the_audit_section_is_linked_from_its_finding_and_names_papers_not_keys(tmp_path):
    """The report's audit section on the committed records: the finding's link and every link
    of the page reach an anchor; the section and its papers are headed by name, not by key."""
    import html
    import json

    from gradlab.report.sections import audit_markdown
    from gradlab.symbolic.audit import summary_counts
    from gradlab.symbolic.seeds import SEEDS
    from tools.readme_blocks import ROOT

    records = json.loads((ROOT / "benchmarks/results/audit.json").read_text())
    body = audit_markdown(records)
    results = {"counts": summary_counts(records), "records": records}
    findings = findings_markdown({"audit": (results, body)})
    assert "([Derivation audit](#derivation-audit))" in findings
    texts, papers = len(SEEDS), len({seed.title for seed in SEEDS.values()})  # 2 versions, 1 paper
    assert f"checks {len(records)} printed claims in {texts} texts of {papers} papers" in findings
    assert "seed" not in findings
    page = markdown_to_html("# R\n\n" + findings + "\n\n" + body, tmp_path)
    ids = re.findall(r'id="([^"]+)"', page)
    assert len(ids) == len(set(ids))
    for target in re.findall(r'href="#([^"]+)"', page):
        assert target in ids, target
    headings = [html.unescape(re.sub(r"<[^>]+>", "", h))
                for h in re.findall(r"<h3[^>]*>(.*?)</h3>", page)]  # fmt: skip
    assert headings == [seed.citation() for seed in SEEDS.values()]
    for key in SEEDS:
        assert key not in page and f"<code>{key[:3]}:" not in page, key


def test_a_finding_links_the_heading_its_figure_is_under():
    # A user's losses study is one section of the page with one "## Ranking losses at m = M"
    # heading per batch size: the finding of m = 16 links the m = 16 heading, not the first.
    from gradlab.report.findings import Finding

    markdown = "\n\n".join(["## At m = 8", "![eight](figures/m8.png)",
                             "## At m = 16", "![sixteen](figures/m16.png)"])  # fmt: skip

    def finder(results):
        return [Finding("m = 8 says", "figures/m8.png"), Finding("m = 16 says", "figures/m16.png")]

    text = findings_markdown({"study 1": ({}, markdown)}, {"study 1": finder})
    assert "- m = 8 says ([Figure 1](#figure-1); [At m = 8](#at-m-8))" in text
    assert "- m = 16 says ([Figure 2](#figure-2); [At m = 16](#at-m-16))" in text


def test_each_problem_of_the_committed_audit_is_named_by_what_is_wrong():
    # Zhong et al.'s line listed four problems by the claims' statements ('the claim "Eq. 4-5 and
    # Algorithm 1 are defined for every batch"'), which say what the paper claims, not what the
    # audit found wrong; every record that does not hold as printed now has its root cause
    import json

    from gradlab.symbolic.audit import summary_counts
    from tools.readme_blocks import ROOT

    records = json.loads((ROOT / "benchmarks/results/audit.json").read_text())
    wrong = [r for r in records if r["verdict"] in ("holds-with-correction", "fails")]
    assert wrong and all(r["cause"] for r in wrong), [r["id"] for r in wrong if not r["cause"]]
    text = findings_markdown({"audit": ({"counts": summary_counts(records), "records": records},
                                        "## Derivation audit")})  # fmt: skip
    zhong = next(line for line in text.splitlines() if line.startswith("- Zhong, Li & Li"))
    assert 'the claim "' not in zhong
    assert "Fig. 4's caption swaps the ends of the L2 ring" in zhong
    assert "dP/ds_ij printed without its minus sign and its 1/Delta (1 claim)" in zhong
