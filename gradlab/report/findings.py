"""The report's first screen: one sentence per section with its number and a link to its evidence.

Each finding is built from that section's results (the same dict that ``results.json`` holds,
with the verdicts :mod:`gradlab.experiments` computed once), never parsed from the section's
prose, so the first screen cannot disagree with the section below it. A finding names the
figure that shows it by file; :func:`findings_markdown` turns that into "Figure N" with a link,
numbering figures in page order exactly as :mod:`gradlab.report.html` does.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

from gradlab.experiments import digit_scenes, loss_comparison, p_vs_batch_size
from gradlab.report.html import slug
from gradlab.report.prose import (
    best_loss_sentence,
    best_recall_sentences,
    pml_grouping_sentence,
    scope_sentence,
    unswept_sentence,
)
from gradlab.report.summaries import (
    VERDICT_WORDS,
    cell,
    mutant_outcomes,
    mutants_sentence,
    run_name,
    with_verb,
)
from gradlab.symbolic.audit import PROBLEM_VERDICTS, distinct_problems

EMPIRICAL = ("reproduced", "not-reproduced", "not-testable-here")
"""Outcomes of claims about the authors' experiments: worded apart, never counted as failures."""


class Finding(NamedTuple):
    """A sentence, the figure (path as cited in the markdown) that shows it, if any, and its
    place: the headlines (rank 0, 1, 2) open the list, the rest follow in page order."""

    text: str
    figure: str | None = None
    rank: int = 3


DERIVATION_AUTHORS = "Bleeker & de Rijke"
"""The authors of the SmoothAP gradient derivation: their slips are the first finding."""


def problems_by_paper(records: list[dict]) -> dict[str, list[dict]]:
    """``Authors (year)`` -> its records that do not hold as printed, in record order (the two
    versions of one paper are one paper).

    Example:
        >>> problems_by_paper([{"seed": "x", "verdict": "holds-with-correction"},
        ...                    {"seed": "x", "verdict": "holds"}])
        {'x': [{'seed': 'x', 'verdict': 'holds-with-correction'}]}
    """
    from gradlab.symbolic.seeds import SEEDS

    papers: dict[str, list[dict]] = {}
    for record in records:
        if record["verdict"] in PROBLEM_VERDICTS:
            seed = SEEDS.get(record["seed"])
            paper = f"{seed.authors} ({seed.year})" if seed else record["seed"]
            papers.setdefault(paper, []).append(record)
    return papers


def in_texts(records: list[dict]) -> str:
    """`` in its N texts`` when ``records`` (one paper's) come from more than one of its texts
    (a short and a long version), else nothing: a step printed in each is a claim of each, and
    counted once per text.

    Example:
        >>> in_texts([{"seed": "short"}, {"seed": "long"}]), in_texts([{"seed": "short"}])
        (' in its 2 texts (a step printed in each is counted in each)', '')
    """
    texts = len({record["seed"] for record in records})
    return f" in its {texts} texts (a step printed in each is counted in each)" if texts > 1 \
        else ""  # fmt: skip


def _counted(number: int, noun: str) -> str:
    """``1 claim``, ``2 claims``."""
    return f"{number} {noun}{'s' * (number != 1)}"


def _causes(records: list[dict]) -> str:
    """Each distinct problem once, with the number of claims it accounts for: its root cause, or
    for a claim with no shared cause "the claim" and its statement in quotes (its label only
    where the record holds no statement), counted only when two texts print it: a statement
    alone in the list read as the problem found, not as the claim that does not hold."""
    counts: dict[str, int] = {}
    for record in records:
        statement = record.get("claim", {}).get("statement")
        key = record.get("cause") or (f'the claim "{statement}"' if statement
                                      else record["label"])  # fmt: skip
        counts[key] = counts.get(key, 0) + 1
    return "; ".join(cause if n == 1 and cause.startswith('the claim "')
                     else f"{cause} ({_counted(n, 'claim')})"
                     for cause, n in counts.items())  # fmt: skip


def _headlines(records: list[dict]) -> list[Finding]:
    """The derivation's slips first (rank 0), then every other paper's problems (rank 2), each
    with what its claims got wrong as printed (:func:`gradlab.symbolic.audit.failure_split`)."""
    from gradlab.symbolic.audit import failure_split

    findings = []
    for paper, mine in problems_by_paper(records).items():
        corrected = all(r["verdict"] == "holds-with-correction" for r in mine)
        failing = sum(r["verdict"] == "fails" for r in mine)
        tail = ("; every correction holds when re-checked by computation" if corrected else
                f"; {with_verb(failing, 'is', 'are')} wrong with no correction that holds")
        split = failure_split(mine)
        kinds = f" ({split})" if split else ""
        if paper.startswith(DERIVATION_AUTHORS):
            findings.append(Finding(
                f"{paper}'s SmoothAP gradient derivation: {len(mine)} of its printed steps"
                f"{in_texts(mine)} {'is' if len(mine) == 1 else 'are'} wrong as printed"
                f"{kinds}, from "
                f"{_counted(distinct_problems(mine), 'distinct slip')}: {_causes(mine)}{tail}.",
                rank=0))  # fmt: skip
        else:
            findings.append(Finding(
                f"{paper}: {_counted(len(mine), 'printed claim')}{in_texts(mine)} "
                f"{'does' if len(mine) == 1 else 'do'} not hold as printed{kinds}, "
                f"{_counted(distinct_problems(mine), 'distinct problem')}: {_causes(mine)}{tail}.",
                rank=2))  # fmt: skip
    return findings


def _audit(results: dict) -> list[Finding]:
    from gradlab.symbolic.audit import failure_split, printed_numbers_said

    counts = results["counts"]
    total = sum(counts.values())
    records = results.get("records", [])

    def kinds(verdict: str) -> str:  # what those of one verdict got wrong, from their records
        split = failure_split(r for r in records if r["verdict"] == verdict)
        return f" ({split})" if split else ""

    text = (
        f"The audit checks {_counted(total, 'printed claim')}{_texts(records)} by computation: "
        f"{with_verb(counts.get('holds', 0), 'holds', 'hold')} as printed"
        f"{printed_numbers_said(records)}, "
        f"{with_verb(counts.get('holds-with-correction', 0), 'is', 'are')} wrong as printed"
        f"{kinds('holds-with-correction')}, "
        "with a correction that holds (each correction re-checked), "
        f"{with_verb(counts.get('fails', 0), 'is', 'are')} wrong with no correction that holds"
        f"{kinds('fails')} "
        f"and {with_verb(counts.get('inconclusive', 0), 'stays', 'stay')} inconclusive"
    )
    empirical = [f"{counts[v]} {VERDICT_WORDS[v]}" for v in EMPIRICAL if counts.get(v)]
    if empirical:
        text += (
            "; of the claims about the authors' experiments, " + ", ".join(empirical)
            + " (outcomes, not failures)"
        )  # fmt: skip
    text += "."
    failing = [r for r in records if r["verdict"] in PROBLEM_VERDICTS]
    if failing:
        per_paper = []
        for seed in dict.fromkeys(r["seed"] for r in records):
            mine = [r for r in failing if r["seed"] == seed]
            if mine:
                per_paper.append(f"{_paper(seed)}: {_counted(len(mine), 'claim')}, "
                                 f"{_counted(distinct_problems(mine), 'problem')}")  # fmt: skip
        text += (
            f" The {_counted(len(failing), 'claim')} wrong as printed "
            f"{'shows' if len(failing) == 1 else 'show'} "
            f"{_counted(distinct_problems(failing), 'distinct problem')} (claims sharing one root "
            f"cause count once; "
            f"{'; '.join(per_paper)})."
        )
    outcomes = mutant_outcomes(records)
    if sum(outcomes.values()):
        text += f" {mutants_sentence(outcomes)}"
    return [*_headlines(records), Finding(text)]



def _texts(records: list[dict]) -> str:
    """`` in N texts of M papers`` of the audited records (two versions of a paper are one
    paper), or nothing without records."""
    from gradlab.symbolic.seeds import SEEDS

    keys = {record["seed"] for record in records}
    if not keys:
        return ""
    papers = {SEEDS[key].title if key in SEEDS else key for key in keys}
    return (f" in {len(keys)} text{'s' * (len(keys) > 1)} of {len(papers)} "
            f"paper{'s' * (len(papers) > 1)}")  # fmt: skip


def _paper(seed: str) -> str:
    """``Authors (year), part`` of an audited text, its key where it is not a seed."""
    from gradlab.symbolic.seeds import SEEDS

    if seed not in SEEDS:
        return seed
    return f"{SEEDS[seed].authors} ({SEEDS[seed].year}), {SEEDS[seed].part}"


def _verification(results: dict) -> list[Finding]:
    errors = [v for family in results["gradient_errors"].values() for v in family.values()]
    findings = [
        Finding(
            f"Every analytic gradient gradlab uses agrees with autograd or finite differences "
            f"in float64; the largest difference is {max(errors):.1e}."
        )
    ]
    grouping = results.get("pml_smooth_ap")
    if grouping:
        findings.append(Finding(pml_grouping_sentence(grouping), rank=1))
    lemma = results.get("fappy_lemma1")
    if lemma:
        support = (
            "the pair's bin and the bin below it"
            if lemma["nonzero_share_in_bin_below"] > 0 else "the pair's bin only"
        )  # fmt: skip
        verdict = (
            "as the lemma states" if lemma["lemma_value_matches"]
            else "not the value the lemma prints"
        )  # fmt: skip
        findings.append(
            Finding(
                f"Lemma 1 of FAPPY, measured over {lemma['configurations']} configurations: the "
                f"gradient reaches {support} ({lemma['nonzero_share_in_bin_below']:.0%} of "
                f"negatives in the bin below), with a {lemma['sign_of_nonzero']} value, "
                f"{verdict}.",
                "figures/fappy_lemma1_gradient.png",
            )
        )
    return findings


def _tie_aware(results: dict) -> list[Finding]:
    harmonic = results["harmonic_error"]
    holds = "stays below" if harmonic["bound_holds"] else "exceeds"
    first, last = harmonic["grid"]["before"]
    return [
        Finding(
            f"Replacing a harmonic partial sum by a logarithm (He et al., 2018) {holds} the "
            f"paper's error bound everywhere on the grid of bins with N = {first:g} to {last:g} "
            f"items before them (largest error/bound ratio "
            f"{harmonic['largest_error_over_bound']:.3f}); at the first bin (N = 0) the "
            "logarithm is infinite.",
            "figures/tie_aware_harmonic_error.png",
        )
    ]


BATCH_SIZE_CLAIM = "claim-p-grows-with-batch-size"
"""The audit's label of Brown et al.'s (2020) batch-size conjecture (Fig. S7a)."""
MINIATURE_DATA = "digit strings built from scikit-learn's digits"
"""The data of the report's P study, named where its results predate their own ``data`` entry."""


def _t_test_words(trend: str, change: str) -> str:
    """What the paired t-test over seeds and m says beside a change read against the seed
    spread: that it agrees, that it cannot confirm it (``unclear``: the two tests part, said
    so rather than side by side), or what it reads.

    Example:
        >>> _t_test_words("unclear", "rises")
        ' (a paired t-test over seeds and m cannot confirm it: unclear)'
        >>> _t_test_words("rises", "rises")
        ' (a paired t-test over seeds and m agrees: rises)'
    """
    if trend == change:
        return f" (a paired t-test over seeds and m agrees: {trend})"
    if trend == "unclear":
        return " (a paired t-test over seeds and m cannot confirm it: unclear)"
    return f" (a paired t-test over seeds and m reads: {trend})"


def p_vs_batch_size_sentences(results: dict) -> list[str]:
    """The P-against-batch-size finding as sentences: first the paper's claim, the audit's
    verdict and the miniature run as context, then one sentence per measured outcome (the
    report joins them into one paragraph, the README lists them under the first); ``[]``
    without a run.

    Example:
        >>> p_vs_batch_size_sentences({})
        []
    """
    batch = results.get("p_vs_batch_size")
    if not batch:
        return []
    summary = results.get("p_vs_batch_size_summary") or p_vs_batch_size.summarize(batch)
    sizes = batch["batch_sizes"]
    parts = []
    for name, words in (("fixed_trained", "At a fixed trained network"),
                        ("trained_at_m", "For networks fine-tuned at each m")):  # fmt: skip
        setting = summary["settings"].get(name)
        if setting is None:
            continue
        first, last = cell(setting["first"]), cell(setting["last"])
        if setting["change"] == "within_spread":
            parts.append(f"{words}, P stays within the seed spread ({first} to {last}).")
        elif setting["change"] == "saturated":
            parts.append(f"{words}, P is saturated, so it shows no trend ({first} to {last}).")
        else:
            parts.append(f"{words}, P {setting['change']} from {first} to {last}.")
        off = setting.get("off_diagonal")
        if off is not None and off["change"] != setting["change"]:  # the 1/m term hides it
            span = f"{cell(off['first'])} to {cell(off['last'])}"
            change = (f"stays within the seed spread ({span})" if off["change"] == "within_spread"
                      else f"{off['change']} from {span}, beyond the seed spread")  # fmt: skip
            trend = setting.get("parts", {}).get("P without the diagonal")
            test = "" if trend is None else _t_test_words(trend, off["change"])
            parts.append(
                f"Without each query's own entry (1/m of P: {off['diagonal_first']:g} at "
                f"m = {sizes[0]}), P there {change}{test}.")  # fmt: skip
    if not parts:
        return []
    claim = summary["claim"]
    record = next((r for r in results.get("audit_records", []) if r["label"] == BATCH_SIZE_CLAIM),
                  claim)  # fmt: skip
    verdict = VERDICT_WORDS[record["verdict"]]
    needs = re.match(r"needs [^(.]*", record.get("detail", ""))
    if needs:
        verdict += f" ({needs.group(0).rstrip(', ')})"
    miniature = claim.get("miniature", {}).get("outcome")
    quick = p_vs_batch_size.settings(True)["batch_sizes"]
    per_class = batch.get("per_class", p_vs_batch_size.PER_CLASS)
    steps = batch.get("settings", {}).get("trained_at_m", {}).get("steps")
    after = [
        *([f"On this miniature alone, the audit's paired t-test over the seeds, applied to "
           f"this run (networks fine-tuned at each m), reads: {VERDICT_WORDS[miniature]}"
           f"{_t_statistic(batch)}; the audit's own record (`gradlab audit --measure`) runs a "
           f"quicker one, m = {quick[0]} to {quick[-1]}, which can read differently."]
          if miniature else []),
        *([f"The networks fine-tuned at each m took {steps[0]} optimizer steps at the smallest m "
           f"and {steps[-1]} at the largest, so training length differs with m too."]
          if steps and "trained_at_m" in summary["settings"] else []),
    ]  # fmt: skip
    return [
        "Brown et al. (2020) report the operating-region proportion P rising with the "
        f"batch size; the audit's verdict: {verdict}. As context, a miniature was run "
        f"({MINIATURE_DATA if 'data' not in batch else batch['data']}, "
        f"{batch.get('model', p_vs_batch_size.MODEL)}) with the paper's sampler "
        f"({per_class} images per class, m/{per_class} classes) at m = {sizes[0]} to "
        f"{sizes[-1]}, over {len(batch['seeds'])} seeds (mean ± population std).",
        *parts, *after,
    ]  # fmt: skip


def _t_statistic(batch: dict) -> str:
    """`` (t = ..., critical ..., df = ...)``: the paired t-test over the seeds that decides the
    miniature's reading (:func:`gradlab.symbolic.batch_size.paired_t` of each seed's change of
    P from the smallest to the largest m, networks fine-tuned at each m), or nothing where it
    has no value (fewer than two seeds or batch sizes, or P saturated at a bound)."""
    from gradlab.symbolic.batch_size import PROTOCOL_SETTING, paired_t, saturation

    values = batch.get("settings", {}).get(PROTOCOL_SETTING, {}).get("P")
    if (not values or len(values) < 2 or len(values[0]) < 2
            or saturation(values) is not None):  # fmt: skip
        return ""
    test = paired_t([run[-1] - run[0] for run in values])
    return f" (t = {test['t']:.2f}, critical {test['critical']:.2f}, df = {test['df']})"


def _operating_region(results: dict) -> list[Finding]:
    sentences = p_vs_batch_size_sentences(results)
    if not sentences:
        return []
    return [Finding(" ".join(sentences), "figures/p_vs_batch_size.png")]


def _training(results: dict) -> list[Finding]:
    before, after = results["unseen_classes_before"]["mAP"], results["unseen_classes_after"]["mAP"]
    seen_before = results["seen_classes_held_out_before"]["mAP"]
    seen_after = results["seen_classes_held_out_after"]["mAP"]
    direction = "rises" if after > before else "falls"
    run = f"one training run, seed {results['seed']}" if "seed" in results else "one training run"
    return [
        Finding(
            f"SmoothAP training on digits 0-4 lifts held-out mAP of the trained classes from "
            f"{seen_before:.3f} to {seen_after:.3f}, while mAP on the unseen digits 5-9 "
            f"{direction} from {before:.3f} to {after:.3f} ({run}: no seed spread)."
        )
    ]


def _losses(results: dict) -> list[Finding]:
    summary = results.get("summary") or loss_comparison.summarize(results)
    sentence = best_loss_sentence(results, summary)
    sentence = sentence[:1].lower() + sentence[1:]
    if summary.get("tied"):  # the best alone read as a winner over losses within its spread
        sentence += f" Within the seed spread of it: {', '.join(summary['tied'])}."
    unswept = unswept_sentence(results)
    if unswept:
        sentence += " " + unswept
    if summary.get("apart"):
        sentence += (f" Listed apart with their measured reasons: "
                     f"{', '.join(summary['apart'])}.")  # fmt: skip
    sentence += " " + scope_sentence(results)
    return [Finding(f"On unseen digit strings, {sentence}", "figures/loss_comparison.png")]


def _scenes(results: dict) -> list[Finding]:
    summary = results.get("summary") or digit_scenes.summarize(results)
    sentences = best_recall_sentences(results, summary)
    apart = {"untrained": [], "collapsed": []}
    for encoder, losses in summary["apart"].items():
        for loss, numbers in losses.items():
            kind = "untrained" if numbers["below_chance"] else "collapsed"
            apart[kind].append(run_name(encoder, loss))
    if apart["untrained"]:
        sentences.append(f"Listed apart, not compared (R@1 not at least "
                         f"{summary['chance_factor']:g} x chance both ways): "
                         f"{', '.join(apart['untrained'])}.")  # fmt: skip
    if apart["collapsed"]:
        sentences.append(f"Listed apart, not compared (embeddings collapsed: uniformity above "
                         f"{summary['collapse']['uniformity']:.3f}): "
                         f"{', '.join(apart['collapsed'])}.")  # fmt: skip
    return [Finding(" ".join(sentences), "figures/digit_scenes_recall.png")]


FINDERS: dict[str, Callable[[dict], list[Finding]]] = {
    "audit": _audit,
    "verification": _verification,
    "tie_aware": _tie_aware,
    "operating_region": _operating_region,
    "training": _training,
    "losses": _losses,
    "scenes": _scenes,
}
"""Section name -> its findings from its results; a section without an entry has none."""


def figure_numbers(markdown: str) -> dict[str, int]:
    """Figure path -> its number in page order (first occurrence), as the page numbers them."""
    numbers: dict[str, int] = {}
    for index, path in enumerate(re.findall(r"^!\[[^\]]*\]\(([^)]+)\)\s*$", markdown, re.M), 1):
        numbers.setdefault(path, index)
    return numbers


def findings_markdown(
    sections: dict[str, tuple[dict, str]],
    finders: dict[str, Callable[[dict], list[Finding]]] | None = None,
) -> str:
    """The "Key findings" section for ``sections`` (name -> (results, markdown), page order).

    ``finders`` adds finders by section name to :data:`FINDERS` (a user's study, say).

    Example:
        >>> audit = {"counts": {"holds": 3, "holds-with-correction": 1, "fails": 1,
        ...                     "inconclusive": 0}}
        >>> print(findings_markdown({"audit": (audit, "## Derivation audit")}))
        ## Key findings
        <BLANKLINE>
        - The audit checks 5 printed claims by computation: 3 hold as printed, 1 is wrong as printed, with a correction that holds (each correction re-checked), 1 is wrong with no correction that holds and 0 stay inconclusive. ([Derivation audit](#derivation-audit))
    """  # noqa: E501
    numbers = figure_numbers("\n".join(markdown for _, markdown in sections.values()))
    ranked: list[tuple[int, str]] = []
    for name, (results, markdown) in sections.items():
        finder = {**FINDERS, **(finders or {})}.get(name)
        if finder is None:
            continue
        if name == "operating_region" and "audit" in sections:
            results = {**results, "audit_records": sections["audit"][0].get("records", [])}
        try:
            findings = finder(results)
        except (KeyError, IndexError, TypeError, ValueError):
            continue  # a section whose results lack what its finding reads: no finding
        headings = list(re.finditer(r"^## (.+)$", markdown, flags=re.MULTILINE))
        for finding in findings:
            links = []
            number = numbers.get(finding.figure)
            if number is not None:
                links.append(f"[Figure {number}](#figure-{number})")
            # the heading the finding's figure is under (a section may hold several, as a
            # user's losses study does, one per batch size); else the section's first
            cited = markdown.find(f"]({finding.figure})") if finding.figure else -1
            above = [match for match in headings if match.start() < cited]
            heading = above[-1] if above else (headings[0] if headings else None)
            if heading:
                links.append(f"[{heading.group(1)}](#{slug(heading.group(1))})")
            ranked.append((finding.rank,
                           f"- {finding.text}" + (f" ({'; '.join(links)})" if links else "")))
    ranked.sort(key=lambda item: item[0])  # stable: page order within a rank
    lines = ["## Key findings", "", *(line for _, line in ranked)]
    return "\n".join(lines) if len(lines) > 2 else ""
