"""Sentences and table cells from results: per-seed values (mean +- std, and whether a gap
exceeds it) and audit records (verdict counts, distinct problems).

Rendering only: the numbers, and whether two settings differ by more than their seed spread,
come from :mod:`gradlab.experiments` (:mod:`gradlab.experiments.statistics`); the verdicts from
the audit's records (``gradlab audit --json``). These helpers count and put them in words.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from gradlab.experiments.statistics import mean_std, separated


def run_name(encoder: str, loss: str) -> str:
    """A scene run named in running text: the encoder said to be one, since an encoder and a
    loss may share a paper's name (VSE++'s encoder, Faghri et al. 2018, and its max-violation
    loss).

    Example:
        >>> run_name("VSE++", "VSE++ max-violation")
        'the VSE++ encoder with VSE++ max-violation'
    """
    return f"the {encoder} encoder with {loss}"


def cell(values: Sequence[float], digits: int = 3) -> str:
    """``"mean ± std"`` of per-seed values; a seed whose value is undefined (NaN: a share of
    the gradient where no negative received any) is left out and counted. One value has no
    spread to show: it is shown alone (``± 0.000`` would read as a measured spread of zero), and
    a spread that rounds to zero is shown as below the last digit.

    Example:
        >>> cell([0.25, 0.35])
        '0.300 ± 0.050'
        >>> cell([0.25, float("nan"), 0.35]), cell([float("nan")] * 2)
        ('0.300 ± 0.050 (2 of 3 seeds)', 'undefined (every seed)')
        >>> cell([0.25]), cell([0.25, float("nan")]), cell([0.6160, 0.6168])
        ('0.250', '0.250 (1 of 2 seeds)', '0.616 ± <0.001')
    """
    defined = [value for value in values if value == value]
    if not defined:
        return "undefined (every seed)"
    if len(defined) == 1:
        text = f"{defined[0]:.{digits}f}"
    else:
        mean, std = mean_std(defined)
        spread = f"{std:.{digits}f}"
        if std > 0 and float(spread) == 0:
            spread = f"<{10.0 ** -digits:.{digits}f}"
        text = f"{mean:.{digits}f} ± {spread}"
    if len(defined) < len(values):
        text = f"{text} ({len(defined)} of {len(values)} seeds)"
    return text


def trend(values_per_seed: Sequence[Sequence[float]], sizes: Sequence[int], name: str) -> str:
    """How a per-seed curve moves from its first to its last point, against its spread; saturated
    when its bounds decide the reading (:func:`gradlab.symbolic.batch_size.saturation`).

    Example:
        >>> trend([[0.3, 0.2], [0.32, 0.21]], [16, 1024], "P")
        'P falls from 0.310 ± 0.010 (m=16) to 0.205 ± 0.005 (m=1024), more than the seed spread'
    """
    from gradlab.symbolic.batch_size import saturation

    first = [run[0] for run in values_per_seed]
    last = [run[-1] for run in values_per_seed]
    mean_first, mean_last = mean_std(first)[0], mean_std(last)[0]
    if saturation(values_per_seed) is not None:  # the bound, not the seeds, sets the spread
        return (f"{name} is saturated, so it shows no trend: {cell(first)} at m={sizes[0]}, "
                f"{cell(last)} at m={sizes[-1]}")  # fmt: skip
    if not separated(first, last):
        verb = "stays within the seed spread"
        return (
            f"{name} {verb}: {cell(first)} at m={sizes[0]}, {cell(last)} at m={sizes[-1]}"
        )
    verb = "rises" if mean_last > mean_first else "falls"
    return (
        f"{name} {verb} from {cell(first)} (m={sizes[0]}) to {cell(last)} (m={sizes[-1]}), "
        "more than the seed spread"
    )


VERDICT_WORDS = {
    "holds": "holds",
    "holds-with-correction": "holds with a correction",
    "fails": "fails",
    "inconclusive": "inconclusive",
    "reproduced": "reproduced",
    "not-reproduced": "not reproduced",
    "not-testable-here": "not testable here",
}
"""Each audit verdict as words in a sentence or a column heading."""


def with_verb(count: int, one: str, many: str) -> str:
    """``count`` and the verb that agrees with it.

    Example:
        >>> with_verb(1, "is", "are"), with_verb(37, "is", "are"), with_verb(0, "holds", "hold")
        ('1 is', '37 are', '0 hold')
    """
    return f"{count} {one if count == 1 else many}"


def mutant_outcomes(records: Iterable[Mapping]) -> dict[str, int]:
    """The mutants of the records counted by what their check did with each, one kind apart
    from the other: ``refuted``, a case found where the mutant differs (its verdict
    ``fails``); ``not_evaluable``, a form the check cannot evaluate (``inconclusive``: a
    symbol left without a value, an index out of range, a domain error), rejected without
    being shown wrong; ``passed``, a mutant the check accepts. ``mutants_killed`` sums the
    first two: a sentence that quotes it mixes a refutation with a form never checked.

    Example:
        >>> mutant_outcomes([{"mutant_results": [
        ...     {"verdict": "fails", "killed": True}, {"verdict": "inconclusive", "killed": True},
        ...     {"verdict": "holds", "killed": False}]}, {"verdict": "holds"}])
        {'refuted': 1, 'not_evaluable': 1, 'passed': 1}
    """
    counts = {"refuted": 0, "not_evaluable": 0, "passed": 0}
    for record in records:
        for outcome in record.get("mutant_results", ()):
            if not outcome.get("killed"):
                counts["passed"] += 1
            elif outcome.get("verdict") == "inconclusive":
                counts["not_evaluable"] += 1
            else:
                counts["refuted"] += 1
    return counts


def mutants_sentence(outcomes: dict[str, int]) -> str:
    """What the checks did with the deliberately wrong variants (mutants), each kind counted
    apart (:func:`mutant_outcomes`): a variant refuted by a case where
    it differs is not a variant the check could not evaluate.

    Example:
        >>> mutants_sentence({"refuted": 1802, "not_evaluable": 117, "passed": 0})
        'Of 1919 deliberately wrong variants of the forms that hold, 1802 are refuted (the check finds a case where each differs), 117 cannot be evaluated by the check (a symbol left without a value, an index out of range, a domain error: rejected, not shown wrong) and 0 pass it.'
    """  # noqa: E501
    total = sum(outcomes.values())
    return (
        f"Of {total} deliberately wrong variant{'s' * (total != 1)} of the forms that hold, "
        f"{with_verb(outcomes['refuted'], 'is', 'are')} refuted (the check finds a case where "
        f"each differs), {outcomes['not_evaluable']} cannot be evaluated by the check (a symbol "
        "left without a value, an index out of range, a domain error: rejected, not shown "
        f"wrong) and {with_verb(outcomes['passed'], 'passes', 'pass')} it."
    )
