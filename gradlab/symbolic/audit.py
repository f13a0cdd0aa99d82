"""Run every audited claim (optionally with its mutants) and format the records.

Outputs: a terminal table (statements wrapped, never cut), JSON records, and markdown with a
table of the papers and every formula in plain text and LaTeX. The table and the markdown name
each paper by its citation (authors, year, title); its document key is only in the JSON.
"""

from __future__ import annotations

import json
import textwrap
import time
import traceback
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import mpmath

from gradlab.errors import GradlabError
from gradlab.paths import check_output_file, write_text
from gradlab.progress import progress as progress_stage
from gradlab.symbolic import (
    fappy_claims,
    minibatch_claims,
    smoothap_claims,
    supplementary_claims,
    tie_aware_claims,
)
from gradlab.symbolic.claims import (
    CORRECTION_UNDECIDED,
    FAILURE_WORDS,
    PRINTED_RESULTS_ONLY,
    VERDICTS,
    Claim,
    audit_claim,
)
from gradlab.symbolic.seeds import citation, paper_label
from gradlab.validation import check_bool, check_int_in_range

NOT_TESTABLE = VERDICTS[-1]
AUDIT_DECIMAL_DIGITS = 15
"""mpmath's working precision for a check that does not set its own (mpmath's default)."""

MODULES = (smoothap_claims, supplementary_claims, tie_aware_claims, minibatch_claims, fappy_claims)


def all_claims(*, p_vs_batch_size: Mapping | None = None) -> list[Claim]:
    """Every audited claim, ordered by text (its key) and then by label.

    Args:
        p_vs_batch_size: the measurement that decides Smooth-AP's batch-size conjecture
            (``gradlab.experiments.p_vs_batch_size.measure``'s dict). The audit never measures:
            without it that claim is ``not-testable-here``, its detail saying it was not measured.

    Example:
        >>> from gradlab.symbolic import all_claims
        >>> claim = next(c for c in all_claims() if c.label == "claim-p-grows-with-batch-size")
        >>> verdict = claim.check(claim.printed)
        >>> verdict.verdict, "not measured in this run" in verdict.detail
        ('not-testable-here', True)
    """
    if p_vs_batch_size is not None and not isinstance(p_vs_batch_size, Mapping):
        raise GradlabError(
            "p_vs_batch_size must be a measurement dict (gradlab.experiments.p_vs_batch_size."
            f"measure) or None; got {type(p_vs_batch_size).__name__}"
        )
    claims = [claim for module in MODULES
              for claim in (module.claims(p_vs_batch_size) if module is supplementary_claims
                            else module.claims())]  # fmt: skip
    return sorted(claims, key=lambda c: (c.seed, _label_key(c.label)))


def _label_key(label: str) -> tuple:
    if label.startswith("eq") and label[2:].isdigit():
        return (0, int(label[2:]), "")
    return (1, 0, label)


def paper_stages(claims: Sequence[Claim], *, mutants: bool) -> Iterator[tuple[str, list[Claim]]]:
    """The audit's progress stages: one per paper, in the order the claims first name it.

    Args:
        claims: the claims to check.
        mutants: whether their mutants are checked too (the label then counts them).

    Yields:
        ``(label, claims)``: the stage's progress label (``audit: paper k of n, <authors year,
        part>``, ``, with their mutants`` when they are checked) and that paper's claims.

    Example:
        >>> from gradlab.symbolic.claims import Claim, Form
        >>> mine = Claim("my-notes", "eq1", "1 + 1 is 2", Form(2), lambda form: None)
        >>> [label for label, _ in paper_stages([mine, mine], mutants=False)]
        ['audit: paper 1 of 1, my-notes']
    """
    papers = list(dict.fromkeys(claim.seed for claim in claims))
    for number, paper in enumerate(papers, start=1):
        own = [claim for claim in claims if claim.seed == paper]
        # the operators' mutants are generated as each claim is checked: not counted ahead
        counted = ", with their mutants" if mutants else ""
        yield f"audit: paper {number} of {len(papers)}, {paper_label(paper)}{counted}", own


def run_audit(
    claims: list[Claim] | None = None,
    *,
    mutants: bool = False,
    p_vs_batch_size: Mapping | None = None,
    progress: bool = False,
) -> list[dict]:
    """Check every claim; a check that raises is recorded as ``inconclusive`` with its error.

    Args:
        claims: the claims to check (default :func:`all_claims`).
        mutants: also check the mutants of every claim's accepted form (its slips and the
            operators' mutants, :func:`gradlab.symbolic.claims.claim_mutants`).
        p_vs_batch_size: the measurement passed to :func:`all_claims` (only with the default
            claims; claims built by the caller carry their own).
        progress: report each paper as a stage of :func:`gradlab.progress.progress` (its
            label from :func:`paper_stages`; a bar on a terminal, two lines ``gradlab: audit:
            paper k of n, ...`` on stderr elsewhere); the records are the same either way.

    Returns:
        One JSON-ready record per claim: id, seed, label, claim, method, verdict, detail,
        cause, citation, seconds (with ``mutants`` also mutated_form, mutants,
        mutant_operators, mutants_killed, mutant_results, inapplicable and
        equivalent_mutants_dropped).

    Example:
        >>> from gradlab.symbolic import run_audit
        >>> from gradlab.symbolic.claims import Claim, Form, decide
        >>> check = lambda form: decide(form.value == 2, "1 + 1 = 2", "not 2")
        >>> (record,) = run_audit([Claim("mine", "eq1", "1 + 1 is 2", Form(2), check)])
        >>> record["verdict"], record["detail"]
        ('holds', '1 + 1 = 2')
    """
    check_bool("mutants", mutants)
    if claims is not None and p_vs_batch_size is not None:
        raise GradlabError(
            "p_vs_batch_size is used only with the default claims; got it with claims=[...] "
            "(build the measured claim with supplementary_claims.claims(measurement) instead)"
        )
    check_bool("progress", progress)
    claims = (all_claims(p_vs_batch_size=p_vs_batch_size) if claims is None
              else _listed_claims(claims))  # fmt: skip
    if not progress:
        return [_audit_one(claim, mutants) for claim in claims]
    done = []
    for label, own in paper_stages(claims, mutants=mutants):
        stage = progress_stage(total=len(own), desc=label, unit="claim")
        for claim in own:
            done.append(_audit_one(claim, mutants))
            stage.update()
        stage.close()  # not on an exception: nothing is said done after Ctrl-C
    papers = list(dict.fromkeys(claim.seed for claim in claims))  # the stages' order, stable
    ran = sorted(range(len(claims)), key=lambda index: papers.index(claims[index].seed))
    records: list[dict] = [{}] * len(claims)
    for index, record in zip(ran, done, strict=True):
        records[index] = record  # back in the order of the claims
    return records


def _listed_claims(claims: object) -> list[Claim]:
    """``claims`` as a list, refused by name unless it is an iterable of :class:`Claim` with
    distinct ids (two records of one id could not be told apart)."""
    listed = (None if isinstance(claims, (Claim, str)) or not isinstance(claims, Iterable)
              else list(claims))  # fmt: skip
    if listed is None or not all(isinstance(claim, Claim) for claim in listed):
        raise GradlabError(f"claims must be None or a list of Claims (e.g. [claim]); got "
                           f"{type(claims).__name__} {claims!r}")  # fmt: skip
    ids = [claim.id for claim in listed]
    repeated = sorted({claim_id for claim_id in ids if ids.count(claim_id) > 1})
    if repeated:
        raise GradlabError(f"claims must have distinct ids (seed:label); got "
                           f"{', '.join(map(repr, repeated))} more than once")  # fmt: skip
    return listed


def _audit_one(claim: Claim, mutants: bool) -> dict:
    """One claim's record; a check that raises is recorded as ``inconclusive``."""
    start = time.perf_counter()
    try:
        with mpmath.workdps(AUDIT_DECIMAL_DIGITS):  # records independent of the caller's mpmath
            record = audit_claim(claim, mutants=mutants)
    except Exception as error:  # the audit reports, it does not stop
        record = {
            "id": claim.id, "seed": claim.seed, "label": claim.label,
            "claim": {"statement": claim.statement, "formula": claim.printed.text(),
                      "latex": claim.printed.latex(), "correction": None},
            "method": claim.method, "verdict": "inconclusive", "failure": None,
            "detail": f"the check raised {type(error).__name__}: {error}\n"
            f"{traceback.format_exc(limit=2)}", "cause": claim.cause,
        }  # fmt: skip
        if mutants:
            record.update(mutants=len(claim.mutants), mutant_operators=0, mutants_killed=0,
                          mutant_results=[], inapplicable=dict(claim.inapplicable))  # fmt: skip
    record["citation"] = citation(claim.seed)
    record["seconds"] = round(time.perf_counter() - start, 4)
    return record


def summary_counts(records: list[dict]) -> dict[str, int]:
    return {verdict: sum(r["verdict"] == verdict for r in records) for verdict in VERDICTS}


WRONG_AS_PRINTED = VERDICTS[1:3]
"""The verdicts of a claim wrong as printed (``holds-with-correction``, ``fails``): the records
that have a ``failure``."""


def failure_counts(records: Iterable[Mapping]) -> dict[str, int]:
    """The records wrong as printed (:data:`WRONG_AS_PRINTED`) counted by their ``failure``,
    each of :data:`~gradlab.symbolic.claims.FAILURES` in order; ``not recorded`` counts those
    whose record has none (one written before the audit recorded it), only when there are some.

    Example:
        >>> failure_counts([{"verdict": "holds-with-correction", "failure": "undefined"},
        ...                 {"verdict": "fails", "failure": "wrong-value"},
        ...                 {"verdict": "holds", "failure": None}])
        {'wrong-value': 1, 'undefined': 1, 'ill-typed': 0}
    """
    counts = dict.fromkeys(FAILURE_WORDS, 0)
    for record in records:
        if record["verdict"] in WRONG_AS_PRINTED:
            kind = record.get("failure")
            key = kind if kind in FAILURE_WORDS else "not recorded"
            counts[key] = counts.get(key, 0) + 1
    return counts


PROBLEM_VERDICTS = ("holds-with-correction", "fails")
"""Verdicts of a printed form that does not hold: each such record shows a problem. The outcomes
of empirical claims (reproduced, not reproduced, not testable here) are not among them."""

def problem_key(record: Mapping) -> str:
    """What a record's problem is counted by: its ``cause``, else the record itself.

    Example:
        >>> problem_key({"id": "p:eq1", "cause": "sign convention"}), problem_key({"id": "p:eq2"})
        ('sign convention', 'p:eq2')
    """
    return record.get("cause") or record["id"]


def distinct_problems(records: Iterable[Mapping]) -> int:
    """How many distinct problems the records show: records whose verdict is one of
    :data:`PROBLEM_VERDICTS`, those that share a ``cause`` counted once.

    Example:
        >>> records = [{"id": "a", "verdict": "fails", "cause": "sign"},
        ...            {"id": "b", "verdict": "holds-with-correction", "cause": "sign"},
        ...            {"id": "c", "verdict": "fails"}, {"id": "d", "verdict": "not-testable-here"}]
        >>> distinct_problems(records)
        2
    """
    return len({problem_key(r) for r in records if r["verdict"] in PROBLEM_VERDICTS})


def failure_split(records: Iterable[Mapping]) -> str:
    """What the records wrong as printed got wrong, each kind their checks found counted apart
    (:func:`failure_counts`): a wrong value, no value at a legal input (``0/0``, a pole), a
    wrong shape or type; kinds with no record left out. Empty without such records, or when
    none of them records a kind (records written before the audit recorded it).

    Example:
        >>> records = [{"verdict": "holds-with-correction", "failure": "wrong-value"}] * 29
        >>> records += [{"verdict": "fails", "failure": "undefined"}] * 8
        >>> failure_split(records)
        '29 give a wrong value, 8 are undefined at a legal input'
        >>> failure_split([{"verdict": "holds", "failure": None}])
        ''
        >>> failure_split(records + [{"verdict": "fails"}])  # one without a kind recorded
        '29 give a wrong value, 8 are undefined at a legal input, 1 is of a kind not recorded'
    """
    words = {**FAILURE_WORDS, "not recorded": ("is of a kind not recorded",
                                               "are of a kind not recorded")}  # fmt: skip
    counts = failure_counts(records)
    if not any(counts[kind] for kind in FAILURE_WORDS):
        return ""
    return ", ".join(f"{count} {words[kind][count != 1]}"
                     for kind, count in counts.items() if count)


MIN_MUTANTS = 3
"""Every record's check must reject at least this many mutants of its accepted form ..."""
MIN_OPERATORS = 2
"""... made by at least this many operators, unless the claim says why the others do not apply."""


def mutant_shortfalls(record: dict) -> list[str]:
    """What keeps a record's mutants from testing its check; empty when nothing does.

    A record falls short when it has fewer than :data:`MIN_MUTANTS` mutants (unless it is
    ``not-testable-here`` and states for every operator why none applies: a check that cannot
    look at the authors' data rejects no form, so a mutant of it would test nothing); when they come
    from fewer than :data:`MIN_OPERATORS` operators and an operator that made none has no
    stated reason (the claim's ``inapplicable``); when a mutant survives (its check returns
    ``holds``); or when a mutant's formula is the printed form's or the correction's.

    Example:
        >>> record = {"mutants": 2, "mutants_killed": 2, "inapplicable": {}, "claim":
        ...           {"formula": "x = 1", "correction": None}, "mutant_results": [
        ...     {"operator": "sign", "formula": "x = -1", "killed": True, "mutant": "sign"},
        ...     {"operator": "sign", "formula": "x = 1", "killed": True, "mutant": "no-op"}]}
        >>> for line in mutant_shortfalls(record):
        ...     print(line)
        2 mutants (fewer than 3)
        1 operator (sign); no reason given for: shift, factor, term, exponent, log, swap
        mutant 'no-op' is the printed form or the correction: x = 1
    """
    return [line for lines in _shortfalls(record).values() for line in lines]


def _shortfalls(record: dict) -> dict[str, list[str]]:
    from gradlab.symbolic.mutation_operators import OPERATORS

    if "mutants" not in record:
        return {"count": ["the audit ran without mutants"]}
    results = record.get("mutant_results", [])
    found: dict[str, list[str]] = {"count": [], "operators": [], "survivors": [], "own": []}
    reasons = record.get("inapplicable", {})
    untestable = record.get("verdict") == NOT_TESTABLE and set(OPERATORS) <= set(reasons)
    if record["mutants"] < MIN_MUTANTS and not untestable:
        found["count"].append(f"{record['mutants']} mutant{'' if record['mutants'] == 1 else 's'}"
                              f" (fewer than {MIN_MUTANTS})")
    used = list(dict.fromkeys(result["operator"] for result in results))
    unexplained = [op for op in OPERATORS if op not in used and op not in reasons]
    if len(used) < MIN_OPERATORS and unexplained:
        found["operators"].append(
            f"{len(used)} operator{'' if len(used) == 1 else 's'} ({', '.join(used) or 'none'}); "
            f"no reason given for: {', '.join(unexplained)}"
        )
    own = {record["claim"]["formula"], record["claim"].get("correction")}
    corrections = bool(_candidate_corrections(record))  # a failing form's mutants that hold
    none_accepted = _accepted_no_form(record)  # no mutant is killed, and none survives
    for result in results:
        if not result["killed"] and not none_accepted and not (
                corrections and result.get("verdict") == "holds"):  # fmt: skip
            found["survivors"].append(f"mutant survives ({result['operator']}: "
                                      f"{result['mutant']}): {result['formula']}")  # fmt: skip
        if result["formula"] in own:
            found["own"].append(f"mutant {result['mutant']!r} is the printed form or the "
                                f"correction: {result['formula']}")  # fmt: skip
    return found


def mutant_summary(records: list[dict]) -> str:
    """One line: records, mutants, killed (and how many of those the check could not evaluate:
    rejected as ``inconclusive``, not shown wrong), records short of mutants, records with
    survivors.

    Example:
        >>> print(mutant_summary([]))
        records: 0, mutants: 0, killed: 0; below 3 mutants / 2 operators without a stated reason: 0
    """
    kinds = [_shortfalls(record) for record in records]
    few = sum(bool(kind["count"] or kind["operators"]) for kind in kinds)
    line = (f"records: {len(records)}, mutants: {sum(r['mutants'] for r in records)}, "
            f"killed: {sum(r['mutants_killed'] for r in records)}{_unevaluable_said(records)}; "
            f"below {MIN_MUTANTS} "
            f"mutants / {MIN_OPERATORS} operators without a stated reason: {few}")  # fmt: skip
    surviving = sum(bool(kind["survivors"]) for kind in kinds)
    line += f"; records with a surviving mutant: {surviving}" if surviving else ""
    corrections = sum(bool(_candidate_corrections(record)) for record in records)
    line += (f"; records whose failing printed form has candidate corrections: {corrections}"
             if corrections else "")
    rejecting = sum(_accepted_no_form(record) for record in records)
    return line + (f"; records whose check accepted no form (so no mutant killed): "
                   f"{rejecting}" if rejecting else "")


def _check_records(records: object, needed: Sequence[str], claim_needed: Sequence[str]) -> None:
    """Refuse, by name, records that are not a list of audit records (``run_audit`` or
    ``audit_claim`` dicts) with the fields the format reads."""
    if not isinstance(records, (list, tuple)) or not all(isinstance(r, dict) for r in records):
        shown = repr(records)[:200]
        raise GradlabError(f"records must be a list of audit records (dicts from run_audit or "
                           f"audit_claim); got {type(records).__name__} {shown}")  # fmt: skip
    for number, record in enumerate(records, start=1):
        missing = [key for key in needed if key not in record]
        claim = record.get("claim")
        missing += [f"claim.{key}" for key in claim_needed
                    if not isinstance(claim, dict) or key not in claim]  # fmt: skip
        if missing:
            raise GradlabError(f"records must be audit records (from run_audit or audit_claim); "
                               f"record {number} of {len(records)} lacks "
                               f"{', '.join(missing)}")  # fmt: skip
        if record["verdict"] not in VERDICTS:
            raise GradlabError(f"record {number} of {len(records)}: verdict must be one of "
                               f"{VERDICTS}; got {record['verdict']!r}")  # fmt: skip


def _by_paper(records: list[dict]) -> dict[str, list[dict]]:
    """Document key -> its records, papers in the order of their first record."""
    papers: dict[str, list[dict]] = {}
    for record in records:
        papers.setdefault(record["seed"], []).append(record)
    return papers


def format_not_testable(records: list[dict], width: int = 110) -> str:
    """The claims not testable here, each with its whole detail (what it needs, and the
    context measured for it, as ``gradlab audit --measure`` shows it below the table).

    Example:
        >>> record = {"seed": "notes", "label": "trend", "verdict": "not-testable-here",
        ...           "claim": {"statement": "P grows"}, "detail": "needs their data."}
        >>> print(format_not_testable([record], width=60))
        Not testable here (the context measured is in each detail):
          trend: needs their data.

    Raises:
        GradlabError: ``records`` not a list of audit records with ``seed``, ``label``,
            ``verdict`` and ``claim.statement``; ``width`` not an int >= 10.
    """
    _check_records(records, ("seed", "label", "verdict"), ("statement",))
    check_int_in_range("width", width, 10)
    lines = ["Not testable here (the context measured is in each detail):"]
    for record in records:
        if record["verdict"] == "not-testable-here":
            lines += textwrap.wrap(f"{record['label']}: {record.get('detail', '')}", width,
                                   initial_indent="  ", subsequent_indent="    ")  # fmt: skip
    if len(lines) == 1:
        lines.append("  none")
    return "\n".join(lines)


def format_table(records: list[dict], width: int = 110) -> str:
    """A plain-text table grouped by paper: each paper's citation (authors, year, title, as
    :func:`gradlab.symbolic.seeds.citation` gives it), then its claims indented by 2: label,
    verdict, mutants killed, and the whole statement.

    Under the verdict counts, the claims wrong as printed are split by their ``failure``
    (:func:`failure_split`). Citations and statements are wrapped, never cut; when ``width``
    leaves less than 30 characters for the statement column, each statement goes on the lines
    below its row (``gradlab audit`` prints at the default width).

    Example:
        >>> from gradlab.symbolic import format_table
        >>> record = {"seed": "my-notes", "label": "eq1", "verdict": "holds",
        ...           "claim": {"statement": "1 + 1 is 2"}}
        >>> print(format_table([record], width=60))
        claim verdict               statement
        ------------------------------------------------------------
        my-notes
          eq1 holds                 1 + 1 is 2
        ------------------------------------------------------------
        holds: 1, holds-with-correction: 0, fails: 0,
        inconclusive: 0, reproduced: 0, not-reproduced: 0,
        not-testable-here: 0

    Raises:
        GradlabError: ``records`` not a list of audit records, or one without ``seed``,
            ``label``, ``verdict`` (one of :data:`VERDICTS`) or ``claim.statement``;
            ``width`` not an int >= 10.
    """
    _check_records(records, ("seed", "label", "verdict"), ("statement",))
    check_int_in_range("width", width, 10)
    # a mutant column only when every record was audited with its mutants (as the Markdown)
    with_mutants = bool(records) and all("mutants" in r for r in records)
    id_width = max([2 + len(r["label"]) for r in records] + [5])  # labels indented by 2
    head = f"{'claim':{id_width}} {'verdict':21} " + ("mutants " if with_mutants else "")
    beside = width - len(head) >= 30
    room = width - len(head) if beside else width - 4
    lines = [f"{head}statement" if beside else head.rstrip(), "-" * width]
    for key, mine in _by_paper(records).items():
        lines += textwrap.wrap(citation(key), width) or [key]
        for record in mine:
            killed = (f"{record['mutants_killed']}/{record['mutants']}".ljust(8)
                      if with_mutants else "")  # fmt: skip
            statement = record["claim"]["statement"] + (
                " (checked on the printed numbers only)" if on_printed_numbers(record) else "")
            wrapped = textwrap.wrap(statement, room) or [""]
            row = f"{'  ' + record['label']:{id_width}} {record['verdict']:21} {killed}"
            if beside:
                lines.append(row + wrapped[0])
                lines += [" " * len(head) + part for part in wrapped[1:]]
            else:
                lines.append(row.rstrip())
                lines += ["    " + part for part in wrapped]
    counts = summary_counts(records)
    lines += ["-" * width, *_item_lines([f"{v}: {c}" for v, c in counts.items()], width)]
    split = failure_split(records)  # what those wrong as printed got wrong, as their checks found
    lines += textwrap.wrap(f"wrong as printed: {split}", width) if split else []
    if with_mutants:
        lines += textwrap.wrap(mutant_summary(records), width)
    return "\n".join(lines)


def _item_lines(items: list[str], width: int) -> list[str]:
    """``items`` joined by ``", "``, broken into lines of at most ``width`` between items only."""
    lines: list[str] = []
    for index, item in enumerate(items):
        comma = 1 if index < len(items) - 1 else 0  # room for the comma that may end the line
        if lines and len(lines[-1]) + 2 + len(item) + comma <= width:
            lines[-1] += ", " + item
        else:
            if lines:
                lines[-1] += ","
            lines.append(item)
    return lines


def _unevaluable_said(records: list[dict]) -> str:
    """`` (N refuted, M forms the check cannot evaluate: rejected, not shown wrong)`` of the
    killed mutants of ``records``, M those whose verdict was ``inconclusive``, or ``""`` when
    M is 0: a count of killed mutants says apart those it never refuted, in the words of the
    audit's summary (refuted, cannot be evaluated)."""
    results = [o for r in records for o in r.get("mutant_results", ())]
    unevaluated = sum(bool(o.get("killed")) and o.get("verdict") == "inconclusive"
                      for o in results)  # fmt: skip
    if not unevaluated:
        return ""
    refuted = sum(r["mutants_killed"] for r in records) - unevaluated
    return (f" ({refuted} refuted, {unevaluated} forms the check cannot evaluate: rejected, "
            "not shown wrong)")


def _counts_row(records: list[dict]) -> str:
    counts = summary_counts(records)
    cells = " | ".join(str(counts[v]) for v in VERDICTS)
    if records and all("mutants" in r for r in records):
        total = sum(r["mutants"] for r in records)
        killed = (f"{sum(r['mutants_killed'] for r in records)} / {total}"
                  f"{_unevaluable_said(records)}")
    else:
        return f"{len(records)} | {cells}"  # the audit ran without mutants: no column
    return f"{len(records)} | {cells} | {killed}"


def _formula_lines(name: str, formula: str) -> list[str]:
    """``- name: `formula` ``, or a fenced block for multi-line pseudocode."""
    if "\n" not in formula:
        return [f"- {name}: `{formula}`"]
    return [f"- {name}:", "", "```", formula, "```", ""]


CHANGED_CONTEXT = 15
"""Characters of context either side of what a correction changes (:func:`_changed_lines`)."""


def _changed_lines(printed: str, corrected: str) -> list[str]:
    """``- changed: `...printed part...` -> `...corrected part...` ``: the one stretch where a
    one-line correction of more than 80 characters differs from the printed form (their common
    start and end left out but for :data:`CHANGED_CONTEXT` characters), so that a reader need
    not compare two long formulas; empty for short or multi-line ones.

    Example:
        >>> _changed_lines("x" * 60 + " = s[i] - s[j] + " + "y" * 30,
        ...                "x" * 60 + " = -s[i] + s[j] + " + "y" * 30)
        ['- changed: `...xxxxxxxxxxxx = s[i] - s[j] + yyyyyyy...` -> `...xxxxxxxxxxxx = -s[i] + s[j] + yyyyyyy...`']
    """  # noqa: E501
    if ("\n" in printed or "\n" in corrected or printed == corrected
            or max(len(printed), len(corrected)) <= 80):  # fmt: skip
        return []
    shorter = min(len(printed), len(corrected))
    start = 0
    while start < shorter and printed[start] == corrected[start]:
        start += 1
    end = 0  # common end, not reaching into the common start
    while end < shorter - start and printed[-1 - end] == corrected[-1 - end]:
        end += 1

    def part(text: str) -> str:
        low, high = max(0, start - CHANGED_CONTEXT), len(text) - max(0, end - CHANGED_CONTEXT)
        return ("..." if low else "") + text[low:high] + ("..." if high < len(text) else "")

    return [f"- changed: `{part(printed)}` -> `{part(corrected)}`"]


def _detail_lines(detail: str) -> list[str]:
    """``- detail: ...``; the lines after the first (a failing check's traceback) in a fenced
    block inside the item, so that the list and the folded section around it stay intact."""
    first, *rest = detail.splitlines() or [""]
    if not rest:
        return [f"- detail: {first}"]
    return [f"- detail: {first}", "", "  ```text", *(f"  {line}" for line in rest), "  ```"]


def _accepted_no_form(record: dict) -> bool:
    """Whether the check said no to the claim and to every mutant of it: then no mutant is
    killed (rejecting a mutant shows nothing of a check that rejects everything) and none
    survives (none was accepted)."""
    return bool(record.get("mutants") and not record.get("mutants_killed")
                and record.get("verdict") in ("fails", "inconclusive", "not-reproduced")
                and not any(o["verdict"] in ("holds", "reproduced")
                            for o in record.get("mutant_results", ())))  # fmt: skip


def _candidate_corrections(record: dict) -> list[str]:
    """The mutants that hold of a printed form that fails with no correction given: candidate
    corrections, not a weak check (the check said no to the printed form)."""
    if record.get("verdict") != "fails" or record.get("mutated_form") != "printed":
        return []
    return [o["mutant"] for o in record.get("mutant_results", ()) if o["verdict"] == "holds"]


def _candidates(record: dict) -> str:
    """For a printed form that fails with no correction given, the mutants of it that hold
    (:func:`_candidate_corrections`). For a check that accepted no form (every verdict fails
    or inconclusive), why it kills no mutant."""
    if _accepted_no_form(record):
        return ("; the check accepted no form of this claim, so rejecting its mutants shows "
                "nothing of it")  # fmt: skip
    holding = _candidate_corrections(record)
    if not holding:
        return ""
    return (f"; the printed form fails, so the mutants that hold are candidate corrections: "
            f"{', '.join(holding)}")


def format_markdown(records: list[dict]) -> str:
    """A readable report grouped by paper: a section headed by the paper's citation (authors,
    year, title), its verdict counts, then each claim by its label, folded.

    Example:
        >>> from gradlab.symbolic import format_markdown, run_audit
        >>> from gradlab.symbolic import Claim, Form, decide
        >>> check = lambda form: decide(form.value == 4, "2 + 2 = 4", "not 4")
        >>> records = run_audit([Claim("my-notes", "eq1", "2 + 2 is 4", Form(4), check)])
        >>> report = format_markdown(records)
        >>> print(report.splitlines()[0]); print(next(l for l in report.splitlines() if "eq1" in l))
        # Derivation audit
        | `eq1` | holds | 2 + 2 is 4 |
    """
    _check_records(records, ("seed", "label", "verdict", "method", "detail"),
                   ("statement", "formula", "latex"))
    papers = _by_paper(records)
    with_mutants = bool(records) and all("mutants" in r for r in records)
    header = ("| paper | claims | " + " | ".join(VERDICTS)
              + (" | mutants killed |\n" if with_mutants else " |\n")
              + "| --- | --- | " + " | ".join("---" for _ in VERDICTS)
              + (" | --- |" if with_mutants else " |"))  # fmt: skip
    lines = [
        "# Derivation audit",
        "",
        "Each printed claim is data (its printed form), checked by computation (SymPy, exact "
        "rationals, float64/mpmath against autograd or brute force); a correction counts only "
        "when the same check holds on it, and each check must reject mutants of the accepted form "
        "(the printed form when it holds, else the correction).",
        "",
        header,
        *(f"| {citation(key)} | {_counts_row(mine)} |" for key, mine in papers.items()),
        f"| all papers | {_counts_row(records)} |",
        *_failures_said(records),
    ]  # fmt: skip
    badge = {"holds": "holds", "holds-with-correction": "**holds with a correction**",
             "fails": "**FAILS**", "inconclusive": "*inconclusive*",
             **{v: f"*{v.replace('-', ' ')}*" for v in VERDICTS[4:]}}  # fmt: skip
    correction_label = {"holds-with-correction": "corrected",
                        "fails": "correction given, checked: it fails too"}  # fmt: skip
    for key, mine in papers.items():
        counts = summary_counts(mine)
        lines += [
            "",
            f"## {citation(key)}",
            "",
            ", ".join(f"{v}: {c}" for v, c in counts.items()),
            "",
            "<details>",
            f"<summary>The {len(mine)} claim{'' if len(mine) == 1 else 's'} of this paper, "
            f"{'with' if len(mine) == 1 else 'each with'} its check</summary>",
            "",
            "| claim | verdict | statement |",
            "| --- | --- | --- |",
            *(f"| `{r['label']}` | {_verdict_cell(r, badge)} | "
              f"{r['claim']['statement'].replace('|', chr(92) + '|')} |"  # a cell's pipe: \|
              for r in mine),
            "",
        ]  # fmt: skip
        for record in mine:
            lines += [
                "<details>",
                f"<summary><code>{record['label']}</code>: {record['claim']['statement']} "
                f"({_verdict_cell(record, {})})</summary>",
                "",
                *_formula_lines("printed", record["claim"]["formula"]),
                *([] if record["claim"]["latex"].startswith("\\texttt")
                  else [f"- LaTeX: ${record['claim']['latex']}$"]),
                *(_formula_lines(_correction_label(record, correction_label),
                                 record["claim"]["correction"])
                  if record["claim"].get("correction") else []),
                *(_changed_lines(record["claim"]["formula"], record["claim"]["correction"])
                  if record["claim"].get("correction") else []),
                f"- method: {record['method']}",
                f"- verdict: {_verdict_cell(record, badge)}",
                *([f"- as printed, it {FAILURE_WORDS[record['failure']][0]} "
                   f"(`{record['failure']}`)"]
                  if record.get("failure") in FAILURE_WORDS else []),
                *_detail_lines(record["detail"]),
                *([f"- mutants killed: {record['mutants_killed']} of {record['mutants']}"
                   f"{_unevaluable_said([record])}{_candidates(record)}"]
                  if "mutants" in record else []),
                "",
                "</details>",
                "",
            ]
        lines += ["</details>", ""]
    return "\n".join(lines)


def _failures_said(records: list[dict]) -> list[str]:
    """The lines under the table of counts that split the claims wrong as printed by what
    their checks found (:func:`failure_split`); none without such claims."""
    split = failure_split(records)
    if not split:
        return []
    wrong = sum(record["verdict"] in WRONG_AS_PRINTED for record in records)
    return ["", f"Of the {wrong} claim{'' if wrong == 1 else 's'} wrong as printed, {split} "
            "(as each check found it: a wrong number, no number at a legal input, or a result "
            "of the wrong shape or type)."]


def _correction_label(record: dict, labels: dict[str, str]) -> str:
    """What the report says of a record's correction: ``labels``' entry for its verdict, else
    not checked; for a failing claim whose correction the check could not decide (its detail
    says :data:`~gradlab.symbolic.claims.CORRECTION_UNDECIDED`), that it could not."""
    if record["verdict"] == "fails" and CORRECTION_UNDECIDED in record["detail"]:
        return "correction given, checked: the check cannot decide it"
    return labels.get(record["verdict"], "correction given, not checked")


def _verdict_cell(record: dict, badge: dict[str, str]) -> str:
    """A record's verdict as ``badge`` shows it (plain when absent), with ``on the printed
    numbers only`` for a claim about the authors' experiments checked on what they printed
    (its detail says :data:`~gradlab.symbolic.claims.PRINTED_RESULTS_ONLY`): it holds of the
    table, and nothing was rerun."""
    verdict = badge.get(record["verdict"], record["verdict"])
    if on_printed_numbers(record):
        return f"{verdict}, on the printed numbers only"
    return verdict


def on_printed_numbers(record: dict) -> bool:
    """Whether ``record`` is a claim about the authors' experiments checked on the numbers
    they printed: its detail says :data:`~gradlab.symbolic.claims.PRINTED_RESULTS_ONLY`.

    Example:
        >>> from gradlab.symbolic.claims import PRINTED_RESULTS_ONLY
        >>> on_printed_numbers({"detail": f"Table 2 adds up. {PRINTED_RESULTS_ONLY}"})
        True
        >>> on_printed_numbers({"detail": "SymPy simplifies the difference to 0."})
        False
    """
    return PRINTED_RESULTS_ONLY in record.get("detail", "")


def printed_numbers_said(records: list[dict]) -> str:
    """`` (N on the authors' printed numbers alone)`` of the records that hold, N those
    :func:`on_printed_numbers` (a table's arithmetic holds of the table, not of the
    experiment), or ``""`` when N is 0: what a count of claims that hold says apart.

    Example:
        >>> from gradlab.symbolic.claims import PRINTED_RESULTS_ONLY
        >>> records = [{"verdict": "holds", "detail": PRINTED_RESULTS_ONLY},
        ...            {"verdict": "holds", "detail": "by SymPy"}]
        >>> printed_numbers_said(records)
        " (1 on the authors' printed numbers alone)"
    """
    count = sum(r["verdict"] == "holds" and on_printed_numbers(r) for r in records)
    return f" ({count} on the authors' printed numbers alone)" if count else ""


def write_outputs(records: list[dict], json_path: Path | None, markdown_path: Path | None) -> None:
    """Write the records as JSON and/or markdown; each path is checked first, no folder made."""
    outputs = {"--json": (json_path, lambda: json.dumps(records, indent=1)),
               "--markdown": (markdown_path, lambda: format_markdown(records))}  # fmt: skip
    checked = {option: check_output_file(path, argument=option)
               for option, (path, _) in outputs.items() if path is not None}  # fmt: skip
    for option, path in checked.items():
        write_text(path, outputs[option][1]())
