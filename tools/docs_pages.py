"""Renderers of the docs site's generated blocks (see tools/readme_blocks.py).

Each block is written from the declarations or the JSON that hold its facts, never retyped:

* ``monitor-quantities``: the Monitor's quantities table, from the classes'
  own declarations in :mod:`gradlab.monitor.quantities` (``keys``, ``needs``, docstring) and
  :data:`~gradlab.monitor.quantities.PRESETS`;
* ``audit-papers``: every audited claim, per paper, from ``benchmarks/results/audit.json``
  with the citations of :mod:`gradlab.symbolic.seeds`;
* ``readme-findings``: the README's headline numbers (audit counts, speed against
  pytorch-metric-learning);
* ``example-NAME``: ``examples/NAME.py``, its output and figure as the docs show them.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from tools.docs_examples import EXAMPLES
from tools.readme_blocks import ROOT, load_json, register

AUDIT_JSON = "benchmarks/results/audit.json"
SUMMARY_SUFFIXES = ("mean", "q10", "q50", "q90")
"""The suffixes of a summarised quantity (``_summaries`` in gradlab.monitor.quantities)."""

NEED_COST = {
    "loss": (0, "none"),
    "loss_kind": (0, "none"),
    "embeddings": (1, "O(B d)"),
    "embedding_grad": (1, "O(B d)"),
    "features": (2, "O(B^2)"),
    "scores": (2, "O(B^2)"),
    "score_grad": (2, "O(B^2)"),
    "smooth_ap_terms": (3, "O(B^2 g) sigmoid block"),
    "sorted_scores": (4, "O(B^2 log B) sort"),
    "descending_order": (4, "O(B^2 log B) sort"),
}
"""Cost class of each need of :data:`gradlab.monitor.quantity.NEEDS` (B items of dimension d,
g positives per query): a need is computed once per logged step and shared by every quantity
that declares it, so a quantity's class is that of its dearest need."""


DIRECTIONS = ("i2t", "t2i")
"""Direction infixes of cross-modal keys (``anatomy_i2t_...`` beside ``anatomy_...``)."""


def _keys(keys: tuple[str, ...]) -> str:
    """Keys as code, a summarised family (``x_mean``, ``x_q10``, ...) folded into ``x_{...}``,
    and the per-direction copies of a key (``a_i2t_b``, ``a_t2i_b`` beside ``a_b``) into a note."""
    plain = set(keys)
    directed = {key for key in keys for d in DIRECTIONS
                if f"_{d}_" in key and key.replace(f"_{d}_", "_", 1) in plain}  # fmt: skip
    keys = tuple(key for key in keys if key not in directed)
    shown: list[str] = []
    index = 0
    while index < len(keys):
        key = keys[index]
        stem = key.rsplit("_", 1)[0]
        family = tuple(f"{stem}_{suffix}" for suffix in SUMMARY_SUFFIXES)
        if keys[index:index + len(family)] == family:
            shown.append(f"`{stem}_{{{','.join(SUMMARY_SUFFIXES)}}}`")
            index += len(family)
        else:
            shown.append(f"`{key}`")
            index += 1
    text = "<br>".join(shown)
    if directed:
        stem = keys[0].split("_", 1)[0]
        copies = ", ".join(f"`{stem}_{d}_*`" for d in DIRECTIONS)
        text += f"<br>on cross-modal batches each also as {copies}"
    return text


def _meaning(cls: type) -> str:
    """The first paragraph of a class docstring, on one line, with Sphinx roles as code."""
    first = (inspect.getdoc(cls) or "").split("\n\n")[0]
    if "(module docstring)" in first:  # the class points at its module for the details
        module = inspect.getmodule(cls)
        first = (inspect.getdoc(module) or first).split("\n\n")[0]
    text = " ".join(first.split())
    text = re.sub(r":\w+:`~?([\w.]+)`", lambda m: f"`{m[1].rsplit('.', 1)[-1]}`", text)
    return text.replace("|", "\\|")


def quantity_classes() -> list[type]:
    """Every quantity class of ``QUANTITIES`` and of the presets, in ``QUANTITIES`` order."""
    from gradlab.monitor.config import PRESETS, QUANTITIES

    classes = list(QUANTITIES)
    for preset in PRESETS.values():
        for cls in preset:
            if cls not in classes:
                base = next(c for c in classes if issubclass(cls, c))
                classes.insert(classes.index(base) + 1, cls)
    return classes


def cost_class(needs: frozenset[str]) -> str:
    """The dearest need's cost class (``none`` for a quantity that needs nothing computed)."""
    if not needs:
        return "none"
    return max(NEED_COST[need] for need in needs)[1]


@register("monitor-quantities")
def monitor_quantities(root: Path) -> str:
    """One row per quantity class: name, keys, meaning, presets, and its needs under their cost
    class (one column: six did not fit a page's width)."""
    from gradlab.monitor.config import PRESETS

    lines = [
        "| quantity | keys | meaning | presets | cost class and needs |",
        "| --- | --- | --- | --- | --- |",
    ]
    for cls in quantity_classes():
        quantity = cls()
        presets = ", ".join(name for name, members in PRESETS.items() if cls in members)
        needs = [f"`{need}`" for need in sorted(quantity.needs)]
        needs += [f"`{need}` (optional)" for need in sorted(quantity.optional_needs)]
        every_need = frozenset(quantity.needs | quantity.optional_needs)
        lines.append(
            f"| `{cls.__name__}` | {_keys(tuple(quantity.keys))} | {_meaning(cls)} "
            f"| {presets or '-'} | {cost_class(every_need)}<br>"
            f"{'needs:<br>' + '<br>'.join(needs) if needs else 'needs nothing'} |"
        )
    return "\n".join(lines)


def _paper_heading(seed) -> str:
    return f"{seed.authors} ({seed.year}), {seed.venue}: *{seed.title}* ({seed.part})"


@register("audit-papers")
def audit_papers(root: Path) -> str:
    """Every claim of audit.json, grouped by paper: label, statement, verdict, method, detail,
    and for a claim wrong as printed what its check found (its record's ``failure``)."""
    from gradlab.symbolic.audit import failure_split
    from gradlab.symbolic.claims import FAILURE_WORDS
    from gradlab.symbolic.seeds import SEEDS

    records = load_json(root, AUDIT_JSON)
    lines: list[str] = []
    for key, seed in SEEDS.items():
        mine = [r for r in records if r["seed"] == key]
        if not mine:
            continue
        verdicts = {v: sum(r["verdict"] == v for r in mine) for v in dict.fromkeys(
            r["verdict"] for r in mine)}  # fmt: skip
        summary = ", ".join(f"{count} {verdict}" for verdict, count in verdicts.items())
        split = failure_split(mine)
        summary += f"; of those wrong as printed, {split}" if split else ""
        lines += [f"### {_paper_heading(seed)}", "", f"{len(mine)} claims: {summary}.", "",
                  "| claim | statement | verdict | checked by | mutants rejected |",
                  "| --- | --- | --- | --- | --- |"]  # fmt: skip
        for record in mine:
            mutants = (f"{record['mutants_killed']} of {record['mutants']}"
                       if record.get("mutants") else "-")  # fmt: skip
            verdict = record["verdict"]
            if verdict != "holds":
                verdict = f"**{verdict}**"
            statement = record["claim"]["statement"].replace("|", "\\|")
            method = record["method"].replace("|", "\\|")
            lines.append(f"| `{record['label']}` | {statement} | {verdict} | {method} "
                         f"| {mutants} |")  # fmt: skip
        corrected = [r for r in mine if r["verdict"] != "holds"]
        if corrected:
            lines += ["", "<details><summary>What the check found, claim by claim</summary>",
                      ""]  # fmt: skip
            for record in corrected:
                # plain text: the formulas' * and ** (SymPy's) are no Markdown emphasis
                detail = " ".join(record["detail"].split()).replace("*", "\\*")
                wrong = (f"; as printed, it {FAILURE_WORDS[record['failure']][0]}"
                         if record.get("failure") in FAILURE_WORDS else "")  # fmt: skip
                lines.append(f"- `{record['label']}` ({record['verdict']}{wrong}): {detail}")
            lines += ["", "</details>"]
        lines.append("")
    return "\n".join(lines)


@register("readme-findings")
def readme_findings(root: Path) -> str:
    """The README's numbered findings: audit counts, P against batch size (worded as the report's
    key finding) and SmoothAP's speed against PML, each with its link into the docs."""
    from gradlab.report.findings import p_vs_batch_size_sentences

    batch = load_json(root, "figures/studies/p_vs_batch_size.json")
    records = load_json(root, AUDIT_JSON)
    # the report's one paragraph, as a lead and a list of outcomes
    lead, *outcomes = p_vs_batch_size_sentences({"p_vs_batch_size": batch,
                                                  "audit_records": records})  # fmt: skip
    holds = sum(r["verdict"] == "holds" for r in records)
    corrected = sum(r["verdict"] == "holds-with-correction" for r in records)
    fails = sum(r["verdict"] == "fails" for r in records)
    untestable = sum(r["verdict"] == "not-testable-here" for r in records)
    from gradlab.report.summaries import with_verb
    from gradlab.symbolic.audit import distinct_problems, failure_split, printed_numbers_said
    from gradlab.symbolic.seeds import SEEDS

    problems = distinct_problems(records)

    def kinds(verdict: str) -> str:  # what those of one verdict got wrong, from their records
        split = failure_split(r for r in records if r["verdict"] == verdict)
        return f" ({split})" if split else ""

    from gradlab.report.findings import in_texts, problems_by_paper

    # "17 claims" alone read as the claims checked (the table's 16 and 20)
    per_paper = "".join(
        f"\n    - {paper}: {distinct_problems(mine)} problems across {len(mine)} of its claims"
        f"{in_texts(mine)};" for paper, mine in problems_by_paper(records).items()
    )

    papers = len({SEEDS[r["seed"]].title for r in records})  # two versions of one paper: one
    texts = len({r["seed"] for r in records})
    speed = load_json(root, "benchmarks/results/smoothap.json")
    ratios = {int(size): value["pml_over_gradlab"] for size, value in speed["ratios"].items()}
    largest = max(ratios)
    machine = speed["machine"]
    where = (f"a {machine['cpu_count']}-core CPU" if machine["device"] == "cpu"
             else machine["device"])  # fmt: skip
    return (
        f"- **The audit** checks {len(records)} printed claims in {texts} texts of {papers} papers "
        "by computation ([per paper](docs/audit.md)):\n"
        f"  - {with_verb(holds, 'holds', 'hold')} as printed{printed_numbers_said(records)};\n"
        # (each with a correction that holds: the verdict is given only when it is re-checked)
        f"  - {with_verb(corrected, 'is', 'are')} wrong as printed{kinds('holds-with-correction')}"
        f", each with a correction that holds; {with_verb(fails, 'is', 'are')} wrong with none "
        f"that holds{kinds('fails')};\n"
        f"  - together they show {problems} distinct problems (a shared root cause counts "
        f"once):{per_paper[:-1]}.\n"
        f"  - {untestable} claims about the authors' experiments are not testable here.\n"
        f"- **P against batch size (Brown et al., 2020, Fig. S7a).** {lead} "
        "([studies](docs/studies.md#studies-on-real-pixels-with-seed-spreads))\n"
        + "".join(f"  - {sentence}\n" for sentence in outcomes)
        + f"- **Speed.** gradlab's SmoothAP differentiates only the positive rows: at B = "
        f"{largest}, on {where}, its forward+backward is {ratios[largest]:.0f}x faster than "
        "pytorch-metric-learning's, whose loss also groups positives wrongly "
        "([benchmarks](docs/benchmarks.md))."
    )


def example_block(name: str) -> str:
    """``examples/NAME.py``, what it printed and its figure (``docs/examples/NAME.*``, written
    by tools/docs_examples.py), read from this checkout: code, not a JSON result."""
    source = (ROOT / "examples" / f"{name}.py").read_text().rstrip("\n")
    output = (ROOT / "docs" / "examples" / f"{name}.txt").read_text().rstrip("\n")
    text = f"```python\n{source}\n```\n\nIt prints:\n\n```text\n{output}\n```"
    if EXAMPLES[name] is not None:
        text += f"\n\n![The figure examples/{name}.py draws](examples/{name}.png)"
    return text


for _name in EXAMPLES:
    register(f"example-{_name}")(lambda root, name=_name: example_block(name))
