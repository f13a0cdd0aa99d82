"""README's audit block and committed JSON agree with a fresh audit; README's example runs."""

import contextlib
import io
import json
import re

import pytest

from tools.readme_audit import AUDIT_JSON, audit_block
from tools.readme_blocks import BLOCKS, ROOT, _load_renderers, stale_blocks

README = (ROOT / "docs" / "audit.md").read_text()


def _block(text: str) -> str:
    match = re.search(r"<!-- generated: audit -->\n(.*?)<!-- /generated: audit -->", text, re.S)
    assert match, "README has no audit block"
    return match.group(1)


@pytest.mark.slow  # the whole audit, its measured claim included (trains)
def test_readme_audit_block_agrees_with_a_fresh_audit(audit_records, tmp_path):
    target = tmp_path / AUDIT_JSON
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps(audit_records))
    _load_renderers()
    fresh = BLOCKS["audit"](tmp_path).rstrip("\n") + "\n"
    assert _block(README) == fresh, "run `make audit docs` and commit README.md and the JSON"


@pytest.mark.slow  # the whole audit, its measured claim included (trains)
def test_committed_json_agrees_with_a_fresh_audit(audit_records):
    committed = json.loads((ROOT / AUDIT_JSON).read_text())

    def key(records):
        return {r["id"]: (r["verdict"], r["failure"], r["mutants"], r["mutants_killed"])
                for r in records}  # fmt: skip

    assert key(committed) == key(audit_records)


def test_readme_example_audits_a_derivation_of_your_own():
    section = README[README.index("### Audit a derivation of your own"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert len(code.strip().splitlines()) < 20
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(code, "README example", "exec"), {})
    # the output the page promises in its comment, every mutant killed
    promised = re.search(r"print\(.*\)  # (.*)\n", code).group(1)
    assert output.getvalue().strip() == promised
    assert re.fullmatch(r"holds (\d+) of \1", promised)


S000, S004 = "000_e0f8edb24a02ffe3", "004_e426679a66883031"


def _synthetic():
    """Eight records of two papers: three share the cause "sign", one fails on its own, one is
    not testable here and one reproduced (outcomes, not problems); mutants 3 each, one survivor,
    one record with a single operator."""
    rows = [(S000, "eq1", "holds", ""), (S000, "eq2", "holds-with-correction", "sign"),
            (S000, "eq3", "holds-with-correction", "sign"), (S004, "eq1", "fails", "sign"),
            (S004, "eq2", "fails", ""), (S004, "claim-a", "not-testable-here", ""),
            (S004, "claim-b", "reproduced", ""), (S004, "eq3", "holds", "")]  # fmt: skip
    refuted, unevaluated = {"verdict": "fails", "killed": True}, {"verdict": "inconclusive",
                                                                  "killed": True}  # fmt: skip
    results = {(S000, "eq1"): [refuted, unevaluated, refuted],
               (S004, "eq3"): [refuted, refuted, {"verdict": "holds", "killed": False}]}
    failures = {(S000, "eq2"): "wrong-value", (S000, "eq3"): "undefined",
                (S004, "eq1"): "wrong-value", (S004, "eq2"): "ill-typed"}
    return [{"id": f"{seed}:{label}", "seed": seed, "label": label, "verdict": verdict,
             "failure": failures.get((seed, label)),
             "cause": cause, "claim": {"statement": f"statement {label}"}, "mutants": 3,
             "mutants_killed": 3 - (label == "eq3" and seed == S004),
             "mutant_results": results.get((seed, label), [refuted] * 3),
             "mutant_operators": 1 if label == "eq2" and seed == S000 else 2}
            for seed, label, verdict, cause in rows]  # fmt: skip


def _row(block, key):
    from gradlab.symbolic.seeds import SEEDS

    line = next(line for line in block.splitlines()
                if line.startswith(f"| {SEEDS[key].citation()} |"))  # fmt: skip
    return [cell.strip() for cell in line.split("|")[2:-1]]


def test_the_audit_block_counts_verdicts_and_distinct_problems_from_the_records():
    block = audit_block(_synthetic())
    # by hand: 2 hold, 2 corrected, 2 fail, 0 inconclusive, 1 reproduced, 0 not reproduced,
    # 1 not testable here; the 4 records that do not hold are 2 problems ("sign" and 004:eq2)
    assert "checks **8** printed claims" in block
    # each kind as the records say: of the 2 corrected, one a wrong value and one undefined;
    # of the 2 that fail, one a wrong value and one ill-typed
    assert ("2 hold as printed, 2 are wrong as printed (1 gives a wrong value, 1 is undefined at "
            "a legal input), with a correction that holds") in block
    assert ("2 are wrong with no correction that holds (1 gives a wrong value, 1 has the wrong "
            "shape or type), 0 inconclusive") in block
    assert "1 reproduced, 0 not reproduced, 1 not testable here (outcomes" in block
    assert "The 4 claims wrong as printed show **2 distinct problems**" in block
    # 24 mutants: 000:eq1's one not evaluable and 004:eq3's one survivor, the 22 others refuted
    assert ("Of the **24** mutants of the forms that hold, its checks refute **22** (a case where "
            "each differs), **1** cannot be evaluated by their check (rejected, not shown wrong; "
            "each with the reason in the JSON) and **1** passes;") in block
    assert "7 of 8 claims have at least 3 mutants" in block
    # per paper: claims, distinct problems, then one column per verdict in VERDICTS' order
    assert _row(block, S000) == ["3", "1", "1", "2", "0", "0", "0", "0", "0"]
    assert _row(block, S004) == ["5", "2", "1", "0", "2", "0", "1", "0", "1"]
    # "sign" is a problem of both texts: in each row, once in all (1 + 2 rows, 2 in all)
    assert ("The texts' distinct problems add up to 3, against 2 in all: a problem printed in "
            "two texts of one paper counts in each text's row and once in all.") in block
    # each claim by its paper's authors, year and part, and its label; no document key
    zhong = "Zhong et al. n.d., paper with appendix"
    assert f"| {zhong} | `claim-a` | not testable here | - | - | statement claim-a |" in block
    assert f"| {zhong} | `eq1` | fails | gives a wrong value | sign | statement eq1 |" in block
    assert (f"| {zhong} | `eq2` | fails | has the wrong shape or type | - | statement eq2 |"
            in block)
    assert not re.search(r"\b00[0-4]\b|00[0-4]_", block), block


def test_a_changed_cause_alone_makes_the_audit_block_stale(tmp_path):
    # the verdicts stay; only the grouping of problems changes: the block must notice
    records = json.loads((ROOT / AUDIT_JSON).read_text())
    target = tmp_path / AUDIT_JSON
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps(records))
    assert "audit" not in stale_blocks(README, tmp_path)
    problems = [r for r in records if r["verdict"] in ("holds-with-correction", "fails")]
    for record in problems[:2]:
        record["cause"] = "one shared cause"
    target.write_text(json.dumps(records))
    assert "audit" in stale_blocks(README, tmp_path)


def test_a_changed_kind_alone_makes_the_audit_block_stale(tmp_path):
    # the verdicts stay; one claim wrong as printed said to be undefined, not a wrong value
    records = json.loads((ROOT / AUDIT_JSON).read_text())
    target = tmp_path / AUDIT_JSON
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps(records))
    assert "audit" not in stale_blocks(README, tmp_path)
    wrong = next(r for r in records if r["failure"] == "wrong-value")
    wrong["failure"] = "undefined"
    target.write_text(json.dumps(records))
    assert "audit" in stale_blocks(README, tmp_path)


def test_the_block_says_which_claims_go_without_mutants_and_why():
    from gradlab.symbolic.mutation_operators import OPERATORS

    records = _synthetic()
    reasons = dict.fromkeys(OPERATORS, "needs the authors' data")
    untestable = next(r for r in records if r["verdict"] == "not-testable-here")
    assert "say for every operator why" not in audit_block(records)
    untestable.update(mutants=0, mutants_killed=0, mutant_operators=0, inapplicable=reasons)
    block = audit_block(records)
    assert ("6 of 8 claims have at least 3 mutants from at least 2 operators; the 1 claims not "
            "testable here have none and say for every operator why") in block
    untestable["inapplicable"] = dict.fromkeys(OPERATORS[:-1], "needs the authors' data")
    assert "say for every operator why" not in audit_block(records)  # one operator unexplained


def test_the_readme_finding_gives_claims_and_distinct_problems_per_paper():
    from gradlab.symbolic.seeds import SEEDS

    records = json.loads((ROOT / AUDIT_JSON).read_text())
    papers: dict[str, list[dict]] = {}
    for record in records:  # both versions of a paper are one paper: keyed by authors and year
        if record["verdict"] in ("holds-with-correction", "fails"):
            seed = SEEDS[record["seed"]]
            papers.setdefault(f"{seed.authors} ({seed.year})", []).append(record)
    readme = (ROOT / "README.md").read_text()
    # the finding and its nested lines, up to the next finding
    finding = re.search(r"^- \*\*The audit\*\*.*?(?=^- )", readme, re.S | re.M)[0]
    holding = sum(record["verdict"] == "holds" for record in records)
    # of those, the claims checked on the authors' printed numbers alone, counted here by hand
    tables = sum(record["verdict"] == "holds" and "Only the printed numbers are checked"
                 in record["detail"] for record in records)  # fmt: skip
    assert tables > 0
    assert (f"\n  - {holding} hold as printed ({tables} on the authors' printed numbers "
            "alone);\n") in finding
    # the corrected claims split by the kind their records hold, counted here by hand
    corrected = [r for r in records if r["verdict"] == "holds-with-correction"]
    phrases = {"wrong-value": ("gives a wrong value", "give a wrong value"),
               "undefined": ("is undefined at a legal input", "are undefined at a legal input"),
               "ill-typed": ("has the wrong shape or type", "have the wrong shape or type")}
    split = []
    for kind, (one, many) in phrases.items():
        number = sum(r["failure"] == kind for r in corrected)
        if number:
            split.append(f"{number} {one if number == 1 else many}")
    assert len(split) >= 2  # the committed audit finds more than one kind
    assert f"\n  - {len(corrected)} are wrong as printed ({', '.join(split)}), each with" in finding
    assert len(papers) >= 2
    for paper, mine in papers.items():
        problems = len({r["cause"] or r["id"] for r in mine})
        texts = len({r["seed"] for r in mine})  # a short and a long version: said so
        said = (f" in its {texts} texts (a step printed in each is counted in each)"
                if texts > 1 else "")  # fmt: skip
        assert f"{paper}: {problems} problems across {len(mine)} of its claims{said}" in finding
