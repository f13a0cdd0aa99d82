"""Brown et al.'s (2020) conjecture "P grows with mini-batch size", measured on a named miniature.

The measurement comes from ``gradlab.experiments.p_vs_batch_size.measure``, passed in: the paper's
sampler (4 items per class, ``m/4`` classes), P of Eq. 1 per batch size ``m`` and per random seed,
in several settings (a fixed untrained model, a fixed trained model, models trained at each m).
The decision is a pure function of that dict, so it is tested on synthetic measurements.

The rule, in two steps:

1. :func:`setting_trend` reads one setting: a paired t-test of the per-seed change
   ``P(largest m) - P(smallest m)`` with ``seeds - 1`` degrees of freedom (two-sided level
   :data:`ALPHA`; SciPy's t quantile). ``rises`` / ``falls`` when the change is significant and
   larger than :data:`FLAT_BAND`; ``flat`` when the whole confidence interval of the change lies
   inside ``(-FLAT_BAND, FLAT_BAND)``; ``saturated`` when P's bounds decide the reading
   (:func:`saturation`: P within :data:`SATURATED` of 0 or 1 everywhere, as for an untrained
   network that puts every score inside the operating region, P = 1 at every m; or P exactly 0
   or 1 at an end m in every seed with every seed changing by the same amount, where the bound
   leaves the changes without variance and a t-test is undefined); ``unclear`` otherwise.
2. :func:`decide_trend` decides on ONE setting named in advance, :data:`PROTOCOL_SETTING` (one
   network trained at each m, P averaged over the last epoch: the paper's protocol). The other
   settings are reported as context and never vote, so there is no multiple comparison to
   correct for: ``reproduced`` when that setting shows the predicted trend, ``not-reproduced``
   when it shows another trend (rises / falls / flat), ``inconclusive`` when it is unclear,
   saturated or missing. Each outcome names the setting (data, model, batch sizes, epochs, seeds).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from gradlab.errors import GradlabError

NOT_MEASURED = "not measured"
NOT_TESTABLE_HERE = "not-testable-here"
"""The conjecture's verdict: it is about the authors' data and network (see :data:`NEEDS`)."""
NEEDS = ("needs Stanford Online Products with a ResNet-50, one epoch of training per m (Brown et "
         "al., 2020, Fig. S7a)")  # fmt: skip
WHERE_TESTABLE = ("`gradlab study p-vs-batch-size` runs that protocol on a local copy of the "
                  "data and a backbone")  # fmt: skip
"""Where the claim can be tested: the study command on the authors' data set."""
ALPHA = 0.05
"""Two-sided level of the paired t-test on the decisive setting."""
FLAT_BAND = 0.01
"""A change of mean P smaller than this is flat for the claim, significant or not."""
SATURATED = 0.01
"""P within this of 0 or 1 at every m and seed says nothing about a trend."""
PROTOCOL_SETTING = "trained_at_m"
"""The setting that follows the paper's protocol and alone decides the miniature's outcome."""
SETTING_WORDS = {
    "trained_at_m": "networks fine-tuned at each m",
    "fixed_untrained": "one untrained network at every m",
    "fixed_trained": "one network trained at a single m, at every m",
}
"""The miniature's settings (``gradlab.experiments.p_vs_batch_size``) in words, for the audit's
details; a setting not listed is named by its key."""
TRENDS = ("rises", "falls", "flat", "unclear", "saturated")
"""What :func:`setting_trend` can return."""


def paired_t(changes: Sequence[float], alpha: float = ALPHA) -> dict[str, float]:
    """The paired t-test of per-seed changes: mean, standard error, t, df and the interval.

    Args:
        changes: one change of P per seed (largest m minus smallest m), at least two.
        alpha: two-sided level, in (0, 1).

    Returns:
        ``{"mean", "standard_error", "t", "df", "critical", "low", "high"}``: ``t = mean /
        standard_error`` (``+-inf`` when every seed changes by the same non-zero amount, 0 when
        all changes are 0), ``critical`` the ``1 - alpha/2`` quantile of Student's t with
        ``df = len(changes) - 1`` degrees of freedom, ``[low, high]`` the confidence interval.

    Raises:
        GradlabError: fewer than two changes, or ``alpha`` outside (0, 1).

    Example:
        >>> test = paired_t([0.10, 0.11, 0.12])  # mean 0.11, sd 0.01, se 0.01 / sqrt(3)
        >>> round(test["t"], 2), test["df"], round(test["critical"], 3)
        (19.05, 2, 4.303)
    """
    values = np.asarray(changes, dtype=float)
    if values.ndim != 1 or len(values) < 2:
        raise GradlabError(f"changes must hold one change per seed, at least 2; got {changes!r}")
    if not 0 < alpha < 1:
        raise GradlabError(f"alpha must lie in (0, 1); got {alpha!r}")
    from scipy.stats import t as student_t  # the `audit` extra

    mean = float(values.mean())
    error = float(values.std(ddof=1) / math.sqrt(len(values)))
    df = len(values) - 1
    critical = float(student_t.ppf(1 - alpha / 2, df))
    if error > 0:
        statistic = mean / error
    else:
        statistic = math.copysign(math.inf, mean) if mean != 0 else 0.0
    return {"mean": mean, "standard_error": error, "t": statistic, "df": df,
            "critical": critical, "low": mean - critical * error,
            "high": mean + critical * error}  # fmt: skip


def saturation(p_per_seed: Sequence[Sequence[float]]) -> str | None:
    """Why P's bounds keep a setting from showing a trend, or None when they do not.

    P is a share, so it lies in [0, 1]. A setting shows no trend when P is within
    :data:`SATURATED` of 0 or 1 at every m and seed; nor when P is exactly 0 or 1 at the smallest
    or the largest m in every seed and every seed changes by the same amount: the changes then
    have zero variance because P cannot pass its bound, not because the seeds agree, and the
    paired t-test is undefined with zero variance (its t would be infinite).

    Args:
        p_per_seed: ``p_per_seed[s][k]``, P at the k-th batch size for seed s.

    Returns:
        The reason in words, or None.

    Example:
        >>> saturation([[0.5, 1.0], [0.5, 1.0], [0.5, 1.0]])
        'P is 1 at the largest m in every seed and every seed changed by the same amount: the bound leaves the changes without variance, so a t-test is undefined'
        >>> saturation([[0.4, 1.0], [0.5, 1.0], [0.6, 1.0]]) is None  # the seeds vary
        True
    """  # noqa: E501
    values = np.asarray(p_per_seed, dtype=float)
    if values.ndim != 2 or values.shape[1] < 2 or values.shape[0] == 0:
        return None
    if values.min() >= 1 - SATURATED or values.max() <= SATURATED:
        return "P saturated at every m and seed, so this setting is uninformative about a trend"
    changes = values[:, -1] - values[:, 0]
    if len(changes) < 2 or changes.min() != changes.max():
        return None
    for column, end in ((values[:, 0], "smallest"), (values[:, -1], "largest")):
        for bound in (0.0, 1.0):
            if (column == bound).all():
                return (f"P is {bound:g} at the {end} m in every seed and every seed changed by "
                        "the same amount: the bound leaves the changes without variance, so a "
                        "t-test is undefined")  # fmt: skip
    return None


def setting_trend(p_per_seed: list[list[float]], alpha: float = ALPHA) -> tuple[str, str]:
    """``(trend, why)`` of P over m for one setting: one of :data:`TRENDS`.

    ``p_per_seed[s][k]`` is P at the k-th batch size for seed s. A seed fixes the data, the start
    and the batches for every m, so the seeds pair the two ends: the per-seed changes
    ``P(largest m) - P(smallest m)`` go through :func:`paired_t`. ``rises`` / ``falls``: ``|t|``
    above the critical value and the mean change beyond :data:`FLAT_BAND`; ``flat``: the
    confidence interval inside ``(-FLAT_BAND, FLAT_BAND)``; ``saturated``: P's bounds decide the
    reading (:func:`saturation`); else ``unclear`` (also for a single seed, which has no spread).

    Example:
        >>> setting_trend([[0.30, 0.35, 0.40], [0.31, 0.36, 0.41], [0.29, 0.34, 0.40]])[0]
        'rises'
        >>> setting_trend([[0.30, 0.35, 0.40], [0.41, 0.36, 0.31], [0.29, 0.34, 0.40]])[0]
        'unclear'
    """
    values = np.asarray(p_per_seed, dtype=float)
    if values.ndim != 2 or values.shape[1] < 2:
        return "unclear", f"needs P at >= 2 batch sizes per seed; got shape {values.shape}"
    mean = values.mean(axis=0)
    seeds = values.shape[0]
    head = f"mean P {mean[0]:.3f} -> {mean[-1]:.3f}"
    bounded = saturation(values)
    if bounded is not None:
        return "saturated", f"{head}: {bounded}"
    if seeds < 2:
        return "unclear", f"{head} ({seeds} seed): no seed spread, no t-test"
    test = paired_t(values[:, -1] - values[:, 0], alpha)
    same = (" (every seed changed by the same amount: no spread, so t is infinite)"
            if math.isinf(test["t"]) else "")  # fmt: skip
    why = (f"{head}, change {test['mean']:+.3f} +/- {test['standard_error']:.3f} (standard "
           f"error over {seeds} seeds), t = {test['t']:.2f}{same} against "
           f"{test['critical']:.2f} (df = {test['df']}, two-sided {alpha:g})")  # fmt: skip
    significant = abs(test["t"]) > test["critical"]
    if significant and abs(test["mean"]) > FLAT_BAND:
        return ("rises" if test["mean"] > 0 else "falls"), why
    if -FLAT_BAND < test["low"] and test["high"] < FLAT_BAND:
        return "flat", why + f"; the interval lies inside +/- {FLAT_BAND}"
    return "unclear", why


def setting_name(measurement: Mapping, setting: str = PROTOCOL_SETTING) -> str:
    """The setting in words: data, model, batch sizes, training and seeds.

    Example:
        >>> setting_name({"data": "digit strings", "model": "a CNN", "batch_sizes": [16, 256],
        ...               "seeds": [0, 1, 2], "settings": {"trained_at_m": {"epochs": 1}}})
        'networks fine-tuned at each m: digit strings, a CNN, m = 16..256, one network trained per m for 1 epoch(s), 3 seeds'
    """  # noqa: E501
    data = measurement.get("settings", {}).get(setting, {})
    sizes = measurement.get("batch_sizes", [])
    parts = [measurement.get("data", "data not named"), measurement.get("model", "model not named")]
    if sizes:
        parts.append(f"m = {sizes[0]}..{sizes[-1]}")
    if "epochs" in data:
        steps = data.get("steps") or []
        counted = f" ({steps[0]} to {steps[-1]} optimizer steps)" if steps else ""
        parts.append(f"one network trained per m for {data['epochs']} epoch(s){counted}")
    elif "training" in data:
        parts.append(str(data["training"]))
    parts.append(f"{len(measurement.get('seeds', []))} seeds")
    return f"{SETTING_WORDS.get(setting, setting)}: " + ", ".join(parts)


def decide_trend(
    measurement: Mapping, predicted: str = "rises", setting: str = PROTOCOL_SETTING
) -> tuple[str, str]:
    """``(outcome, detail)`` on the named ``setting``: reproduced, not-reproduced or inconclusive.

    Only ``setting`` decides (see the module docstring); every other setting's trend is listed
    after it as context.

    Args:
        measurement: ``gradlab.experiments.p_vs_batch_size.measure``'s dict.
        predicted: the trend the claim predicts, one of ``rises``, ``falls``, ``flat``.
        setting: the decisive setting's name.

    Raises:
        GradlabError: ``predicted`` is not a trend a setting can show.

    Example:
        >>> rising = [[0.30, 0.40], [0.31, 0.42], [0.29, 0.41]]
        >>> decide_trend({"settings": {"trained_at_m": {"P": rising}}})[0]
        'reproduced'
        >>> decide_trend({"settings": {"trained_at_m": {"P": rising}}}, "falls")[0]
        'not-reproduced'
    """
    if predicted not in ("rises", "falls", "flat"):
        raise GradlabError(f"predicted must be 'rises', 'falls' or 'flat'; got {predicted!r}")
    settings = measurement.get("settings", {})
    if not settings:
        return "inconclusive", "the measurement holds no setting"
    trends = {name: setting_trend(data["P"]) for name, data in settings.items() if "P" in data}
    context = "; ".join(f"{SETTING_WORDS.get(name, name)}: {trend} ({why})"
                        for name, (trend, why) in trends.items() if name != setting)  # fmt: skip
    context = f" Context, not deciding: {context}." if context else ""
    if setting not in trends:
        return "inconclusive", f"the measurement lacks the deciding setting {setting}.{context}"
    trend, why = trends[setting]
    named = setting_name(measurement, setting)
    if trend == predicted:
        outcome = "reproduced"
    elif trend in ("rises", "falls", "flat"):
        outcome = "not-reproduced"
    else:
        outcome = "inconclusive"
    return outcome, f"On {named}: P {trend} ({why}); predicted: {predicted}.{context}"


PARTS = {
    "P_diagonal": "the diagonal",
    "P_own_row_column": "the query's own row and column",
    "P_positive_rows": "the positive rows",
    "P_negative_rows": "the negative-only rows",
}
"""P's four additive parts (``gradlab.experiments.p_vs_batch_size.p_decomposition``) in words."""


def part_trends(measurement: Mapping, setting: str = PROTOCOL_SETTING) -> dict[str, tuple]:
    """``{part: (trend, why)}`` of P's parts on ``setting``, and of P without its diagonal.

    Parts missing from the measurement are left out. Each trend is :func:`setting_trend`'s.

    Example:
        >>> data = {"P": [[0.5, 0.5], [0.5, 0.51], [0.5, 0.49]],  # P itself: unclear
        ...         "P_diagonal": [[1 / 16, 1 / 256]] * 3}
        >>> {k: v[0] for k, v in part_trends({"settings": {"trained_at_m": data}}).items()}
        {'P_diagonal': 'falls', 'P without the diagonal': 'rises'}
    """
    data = measurement.get("settings", {}).get(setting, {})
    trends = {key: setting_trend(data[key]) for key in PARTS if key in data}
    if "P" in data and "P_diagonal" in data:
        without = np.asarray(data["P"], dtype=float) - np.asarray(data["P_diagonal"], dtype=float)
        trends["P without the diagonal"] = setting_trend(without.tolist())
    return trends


def conjecture_verdict(measurement: Mapping | None, predicted: str = "rises") -> tuple[str, str]:
    """``(verdict, detail)`` of the conjecture: always :data:`NOT_TESTABLE_HERE`.

    The claim is about one epoch on Stanford Online Products with a ResNet-50; a miniature
    cannot reproduce or refute it. When a measurement is given, the detail shows it as context:
    :func:`decide_trend`'s outcome on :data:`PROTOCOL_SETTING` and the trend of each of P's
    parts there (the diagonal alone is ``1/m``, so it falls by construction).

    Example:
        >>> verdict, detail = conjecture_verdict(None)
        >>> verdict, detail.startswith("needs Stanford Online Products with a ResNet-50")
        ('not-testable-here', True)
    """
    if measurement is None:
        return NOT_TESTABLE_HERE, (
            f"{NEEDS}; {WHERE_TESTABLE}. The miniature was {NOT_MEASURED} in this run: "
            "`gradlab audit --measure` "
            "takes the quick one (3-digit strings, a small CNN, m = 16..256, one epoch per m, "
            "3 seeds), shown here as context."
        )
    outcome, detail = decide_trend(measurement, predicted)
    trends = part_trends(measurement)
    words = [f"{PARTS.get(key, key)}: {trend} ({why})" for key, (trend, why) in trends.items()]
    where = SETTING_WORDS[PROTOCOL_SETTING]
    parts = sum(key in PARTS for key in trends)
    counted = (f"the {parts} parts add up to P" if parts == len(PARTS)
               else f"{parts} of the {len(PARTS)} parts that add up to P")  # fmt: skip
    shown = (f" P's parts on the {where} (shares of the m^2 entries; {counted}), and P "
             f"without the diagonal: {'; '.join(words)}." if words else "")  # fmt: skip
    return NOT_TESTABLE_HERE, (f"{NEEDS}; {WHERE_TESTABLE}. A miniature, as context only (its "
                               f"outcome: {outcome}). {detail}{shown}")  # fmt: skip
