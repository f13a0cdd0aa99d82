"""P against mini-batch size under Smooth-AP's sampler, on 1000-class digit strings.

Brown et al. (2020, Smooth-AP supplementary, Section 3, Eq. 1 and Fig. S7a): P is the
proportion of the ``m x m`` difference-matrix entries of a query whose sigmoid slope exceeds
``eps = 0.005`` at ``tau = 0.01``; the paper reports P rising with m, measured over one epoch
of training on Stanford Online Products with ``|P| = 4`` images per class (so ``m / 4``
classes per batch). Here the
batches are drawn the same way from the 1000-class digit strings (:mod:`gradlab.data.
digit_strings`), in three settings:

* ``fixed_untrained``: an untrained :class:`gradlab.models.DigitStringNet`, batches of unseen
  numbers at each m.
* ``fixed_trained``: the same network after SmoothAP training at m = 64, the same batches.
* ``trained_at_m``: one network per m, each fine-tuned with SmoothAP from the same start for the
  same number of epochs (as the paper keeps everything but m equal); P is averaged over the
  batches of the last epoch, as the paper measures. The start is the ``fixed_trained`` network,
  as the paper starts from pre-trained weights: from the untrained network (all cosine scores
  within 0.1 of each other, P = 1) the large-m runs take so few steps (12 at m = 1024 for three
  epochs) that they never leave the initial collapse, and P = 1 there says nothing about m.

Next to P (Eq. 1, query included with its self-score 1, diagonal counted) the proportion of close
pairs is split by kind, with the query left out: ``P_positive_negative`` (a positive of the query
against a negative, the pairs SmoothAP's ranking terms differentiate) and ``P_negative_negative``
(two negatives). P itself is split into four additive parts (:func:`p_decomposition`): the
diagonal (``1/m``, always inside), the query's own row and column, the rows of the query's other
positives (the only rows that carry SmoothAP gradient) and the negative-only rows. Every value is
kept per seed.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F

from gradlab.data import FixedCountBatches, load_digit_strings
from gradlab.errors import GradlabError
from gradlab.experiments.runtime import check_seeds, run_tasks, study_threads
from gradlab.experiments.statistics import mean_std, separated
from gradlab.functional import (
    drop_diagonal,
    operating_region_proportion,
    operating_region_width,
)
from gradlab.losses import SmoothAPLoss
from gradlab.models import DigitStringNet
from gradlab.training import embed, train_on_batches
from gradlab.validation import check_tensor

PER_CLASS = 4
"""Images per class in a batch (Brown et al., 2020: ``|P| = 4``)."""

PARTS = ("P_diagonal", "P_own_row_column", "P_positive_rows", "P_negative_rows")
"""The four additive parts of P (:func:`p_decomposition`), in its order."""

KEYS = ("P", "P_positive_negative", "P_negative_negative", *PARTS)

MODEL = "DigitStringNet (a small CNN)"


def close_pair_proportions(
    embeddings: torch.Tensor, labels: torch.Tensor, tau: float = 0.01, eps: float = 0.005
) -> torch.Tensor:
    """``[3]`` batch means of P (Eq. 1), P over positive-negative and over negative-negative pairs.

    Scores are cosine similarities in float64, each item querying the whole batch. Eq. 1 counts
    all ``m^2`` entries of a query's difference matrix (the query is its own candidate, score 1).
    The two splits leave the query out: positive ``i`` (same label) against negative ``j``, and
    ordered pairs of two distinct negatives. Every class in the batch must hold the same number
    of items (Smooth-AP's sampler), so every query has the same number of negatives. Stays on the
    device of ``embeddings`` (no host synchronisation).

    Example:
        >>> emb = torch.tensor([[1.0, 0.0], [1.0, 0.01], [0.0, 1.0], [0.01, 1.0]])
        >>> close_pair_proportions(emb, torch.tensor([0, 0, 1, 1])).tolist()
        [0.5, 0.0, 1.0]
    """
    normalized = F.normalize(embeddings.to(torch.float64), dim=1)
    scores = normalized @ normalized.T
    seed_p = operating_region_proportion(scores, tau, eps).mean()
    others = drop_diagonal(scores)
    positives = drop_diagonal(labels.unsqueeze(0) == labels.unsqueeze(1))
    pos_neg = operating_region_proportion(
        others, tau, eps, pairs="positive-negative", positives=positives
    ).nanmean()
    negatives = others[~positives].reshape(len(labels), -1)
    if negatives.shape[1] >= 2:
        neg_neg = operating_region_proportion(negatives, tau, eps, include_diagonal=False).mean()
    else:
        neg_neg = torch.full_like(seed_p, float("nan"))
    return torch.stack([seed_p, pos_neg, neg_neg])


def p_decomposition(
    embeddings: torch.Tensor, labels: torch.Tensor, tau: float = 0.01, eps: float = 0.005
) -> torch.Tensor:
    """``[4]`` batch means of P's parts: diagonal, own row and column, positive rows, negative rows.

    For query ``q`` (each item of the batch in turn, cosine scores in float64, the query its own
    candidate) the ``m^2`` entries ``D_ij = s_j - s_i`` of Eq. 1 (Brown et al., 2020) fall into
    four groups: the ``m`` diagonal entries; row ``q`` and column ``q`` off the diagonal
    (``2(m - 1)``); rows ``i`` of the query's other positives, columns ``j`` other than ``i`` and
    ``q``; rows of negatives, likewise. Each part is the number of its entries inside the
    operating region over ``m^2``, so the four add up to P. Needs no sampler: any labels.

    Example:
        >>> emb = torch.tensor([[1.0, 0.0], [1.0, 0.01], [0.0, 1.0], [0.01, 1.0]])
        >>> [round(v, 4) for v in p_decomposition(emb, torch.tensor([0, 0, 1, 1])).tolist()]
        [0.25, 0.125, 0.0, 0.125]

    Raises:
        GradlabError: ``embeddings`` not a finite ``[m, d]`` float tensor, ``labels`` not an
            ``[m]`` integer or bool tensor of the same length.
    """
    check_tensor("embeddings", embeddings, ndims=(2,), kind="float", finite=True)
    check_tensor("labels", labels, ndims=(1,), kind="any")
    if labels.dtype.is_floating_point or labels.is_complex() or len(labels) != len(embeddings):
        raise GradlabError(f"labels must be an integer tensor with one label per embedding "
                           f"({len(embeddings)}); got {labels.dtype} of shape "
                           f"{tuple(labels.shape)}")  # fmt: skip
    normalized = F.normalize(embeddings.to(torch.float64), dim=1)
    scores = normalized @ normalized.T  # row q: query q's scores of every item
    size = len(labels)
    width = operating_region_width(tau, eps)
    eye = torch.eye(size, dtype=torch.bool, device=scores.device)
    same = labels.unsqueeze(0) == labels.unsqueeze(1)
    own = scores.diagonal().unsqueeze(1)
    # the comparisons of a window count: strictly inside (own - width, own + width)
    near_query = (scores < own + width) & (scores > own - width) & ~eye

    def rows(mask: torch.Tensor) -> torch.Tensor:
        """Entries inside in the rows of ``mask``, off the diagonal and off column q."""
        count = mask.sum(dim=1).to(torch.float64)
        share = operating_region_proportion(scores, tau, eps, include_diagonal=False,
                                            pairs="positive-rows", positives=mask)  # fmt: skip
        inside = torch.round(share.nan_to_num(0.0) * count * (size - 1))
        return inside - (near_query & mask).sum(dim=1)

    diagonal = torch.full((size,), float(size) if width > 0 else 0.0, dtype=torch.float64,
                          device=scores.device)  # fmt: skip
    parts = torch.stack([diagonal, 2.0 * near_query.sum(dim=1), rows(same & ~eye), rows(~same)])
    return (parts / size**2).mean(dim=1)


def _proportions(embeddings, labels, tau, eps) -> torch.Tensor:
    """``[len(KEYS)]``: :func:`close_pair_proportions` and :func:`p_decomposition`."""
    return torch.cat([close_pair_proportions(embeddings, labels, tau, eps),
                      p_decomposition(embeddings, labels, tau, eps)])  # fmt: skip


def _fixed_rows(model, images, labels, sizes, draws, seed, tau, eps) -> torch.Tensor:
    """``[len(sizes), len(KEYS)]`` mean proportions over ``draws`` batches per size, fixed model."""
    with torch.no_grad():
        embeddings = embed(model, images, batch_size=2048)
    rows = []
    for size in sizes:
        batches = FixedCountBatches(labels.cpu(), size, PER_CLASS, seed=seed * 7919 + size)
        values = [
            _proportions(embeddings[b.to(images.device)], labels[b.to(labels.device)], tau, eps)
            for b in batches.take(draws)
        ]  # fmt: skip
        rows.append(torch.stack(values).mean(dim=0))
    return torch.stack(rows)


def _trained_rows(initial, images, labels, sizes, epochs, seed, tau, eps, lr):
    """``([len(sizes), len(KEYS)], steps)``: mean proportions over each run's last epoch."""
    rows, steps = [], []
    for size in sizes:
        model = copy.deepcopy(initial)
        sampler = FixedCountBatches(labels.cpu(), size, PER_CLASS, seed=seed * 7919 + size)
        batches = sampler.take(epochs * len(sampler))
        last_epoch_start = (epochs - 1) * len(sampler)
        logged: list[torch.Tensor] = []

        def record(step, embeddings, batch_labels, loss, start=last_epoch_start, log=logged):
            if step >= start:
                log.append(_proportions(embeddings, batch_labels, tau, eps))

        train_on_batches(model, images, labels, SmoothAPLoss(tau), batches, lr=lr, on_step=record)
        rows.append(torch.stack(logged).mean(dim=0))
        steps.append(len(batches))
    return torch.stack(rows), steps


def _split(table: torch.Tensor) -> dict[str, list[float]]:
    values = table.cpu().tolist()
    return {key: [row[index] for row in values] for index, key in enumerate(KEYS)}


def measure(
    quick: bool = True,
    seeds: tuple[int, ...] = (0, 1, 2),
    device: str = "cpu",
    tau: float = 0.01,
    eps: float = 0.005,
    workers: int | None = None,
) -> dict:
    """P (Brown et al., 2020, suppl. Eq. 1) against batch size m under Smooth-AP's sampler, per
    seed.

    Each seed is one task (:func:`gradlab.experiments.runtime.run_tasks`) that builds its data,
    networks and batches from the seed alone, so the numbers are the same whether the seeds run
    here one after the other or on worker processes.

    Args:
        quick: small settings (:func:`settings`: m in 16, 64, 256; 30 training steps for
            the fixed trained model; one epoch per m for ``trained_at_m``), about 4 s per seed
            on one CPU thread. The full run takes m from 16 to 1024, 400 steps and two epochs
            per m.
        seeds: each seed fixes the data set (which numbers are unseen, which handwriting), the
            initialization and the batches.
        device: where the models run (``"cpu"`` or ``"cuda"``).
        tau, eps: the paper's temperature and slope threshold.
        workers: worker processes (``None``: those of the enclosing
            :func:`gradlab.experiments.runtime.study_workers` block, 1 outside any).

    Returns:
        ``{"batch_sizes": [m...], "data": ..., "model": ..., "per_class": 4, "seeds": [...],
        "tau", "eps", "settings": {name: {"P": [[P per m] per seed], ...}}}``, one list per
        key of :data:`KEYS` (P, the two close-pair shares, P's four parts), with settings
        ``fixed_untrained``, ``fixed_trained`` and ``trained_at_m``, which also holds
        ``"steps"`` (optimizer steps per m) and ``"epochs"``.

    Raises:
        GradlabError: ``seeds`` empty, repeated, or not whole numbers >= 0.
    """
    seeds = tuple(check_seeds(seeds))
    sizes = settings(quick)
    tasks = [(sizes, seed, device, tau, eps) for seed in seeds]
    outputs = run_tasks(
        _seed_task, tasks, stage="P against batch size",
        names=[f"seed {seed}" for seed in seeds],
        detail=f"{len(sizes['batch_sizes'])} batch sizes x 3 settings, "
        f"{len(sizes['batch_sizes']) + 1} networks trained",
        workers=workers,
    )  # fmt: skip
    per_seed: dict[str, list[dict[str, list[float]]]] = {
        "fixed_untrained": [],
        "fixed_trained": [],
        "trained_at_m": [],
    }
    trained_steps: list[int] = outputs[-1][1]  # the same for every seed
    for output, _ in outputs:
        for name, table in output.items():
            per_seed[name].append(table)
    by_setting = {}
    for name, runs in per_seed.items():
        if runs:
            by_setting[name] = {key: [run[key] for run in runs] for key in KEYS}
    if "trained_at_m" in by_setting:
        by_setting["trained_at_m"]["steps"] = trained_steps
        by_setting["trained_at_m"]["epochs"] = sizes["epochs"]
    by_setting["fixed_trained"]["training"] = (
        f"SmoothAP at m={sizes['fixed_batch_size']}, {sizes['fixed_steps']} steps"
    )
    digits = sizes["num_digits"]
    return {
        "batch_sizes": sizes["batch_sizes"],
        "data": f"unseen {digits}-digit strings ({10**digits} classes) built from scikit-learn's "
        "digits",
        "model": MODEL,
        "per_class": PER_CLASS,
        "seeds": list(seeds),
        "tau": tau,
        "eps": eps,
        "settings": by_setting,
    }


def settings(quick: bool) -> dict:
    """Sizes of the study: the m values, batches drawn per m for the fixed models, the fixed
    trained model's batch size and steps, epochs per m, the data set (digits per number, images
    per number) and Adam's learning rate.

    Quick: m in 16, 64, 256, 3 batches drawn per m, 30 steps at m = 64, one epoch per m, 4
    images per number. Full: m from 16 to 1024 (doubling), 5 batches per m, 400 steps at
    m = 64, two epochs per m, 6 images per number. Both: 3-digit strings, Adam at 1e-3.

    Example:
        >>> settings(quick=True)["batch_sizes"], settings(quick=False)["batch_sizes"][-1]
        ([16, 64, 256], 1024)
    """
    if quick:
        return {"batch_sizes": [16, 64, 256], "draws": 3, "fixed_batch_size": 64,
                "fixed_steps": 30, "epochs": 1, "num_digits": 3, "images_per_number": 4,
                "lr": 1e-3}  # fmt: skip
    return {"batch_sizes": [16, 32, 64, 128, 256, 512, 1024], "draws": 5, "fixed_batch_size": 64,
            "fixed_steps": 400, "epochs": 2, "num_digits": 3, "images_per_number": 6,
            "lr": 1e-3}  # fmt: skip


def _seed_task(study: dict, seed: int, device: str, tau: float, eps: float) -> tuple:
    """One seed of :func:`measure` (``study``: its :func:`settings`): ``({setting: {key: [per
    m]}}, steps per m)``."""
    with study_threads(device):
        return _seed_run(study, seed, device, tau, eps)


def _seed_run(study: dict, seed: int, device: str, tau: float, eps: float) -> tuple:
    sizes, draws, epochs, lr = (study[k] for k in ("batch_sizes", "draws", "epochs", "lr"))
    data = load_digit_strings(num_digits=study["num_digits"],
                              per_class=study["images_per_number"], seed=seed)  # fmt: skip
    train_images, train_labels = data.train_images.to(device), data.train_labels.to(device)
    test_images, test_labels = data.test_images.to(device), data.test_labels.to(device)
    torch.manual_seed(seed)
    initial = DigitStringNet(num_digits=study["num_digits"]).to(device)
    tables = {
        "fixed_untrained": _split(
            _fixed_rows(initial, test_images, test_labels, sizes, draws, seed, tau, eps)
        )
    }
    trained = copy.deepcopy(initial)
    batches = FixedCountBatches(data.train_labels, study["fixed_batch_size"], PER_CLASS,
                                seed=seed).take(study["fixed_steps"])  # fmt: skip
    train_on_batches(trained, train_images, train_labels, SmoothAPLoss(tau), batches, lr=lr)
    tables["fixed_trained"] = _split(
        _fixed_rows(trained, test_images, test_labels, sizes, draws, seed, tau, eps)
    )
    table, steps = _trained_rows(
        trained, train_images, train_labels, sizes, epochs, seed, tau, eps, lr
    )
    tables["trained_at_m"] = _split(table)
    return tables, steps


SUMMARIZED_SETTINGS = ("fixed_trained", "trained_at_m")
"""The settings whose P can show a trend (the untrained network's P is 1 at every m)."""


def summarize(measurement: dict) -> dict:
    """The verdicts on a :func:`measure` result, computed once for every text that words them.

    Per setting of :data:`SUMMARIZED_SETTINGS` that was measured: P at the smallest and the
    largest m per seed; ``change``: ``"saturated"`` when P's bounds decide the reading
    (:func:`gradlab.symbolic.batch_size.saturation`), else ``"rises"`` or ``"falls"`` when the
    two means differ by more than the sum of their seed stds, else ``"within_spread"``;
    ``trend``: the paired t-test's reading (:func:`gradlab.symbolic.batch_size.setting_trend`),
    ``trend_detail`` what it rests on (the means, the change, t against its critical value);
    ``parts``: the trend of each of P's parts (:func:`p_decomposition`) and of P without its
    diagonal; ``off_diagonal`` (where the diagonal was measured): P without each query's own
    entry, which adds ``1/m`` to P, at the smallest and largest m and its change by the same
    rule, and the diagonal's share at the smallest m. ``claim`` is the audit's verdict on the
    conjecture (``not-testable-here``: it needs the authors' data and network), with
    ``miniature``, the decision rule's outcome on this measurement, and its detail.

    Example:
        >>> rising = {"batch_sizes": [16, 64], "per_class": 4, "seeds": [0, 1, 2], "settings":
        ...           {"trained_at_m": {"P": [[0.30, 0.40], [0.31, 0.42], [0.29, 0.41]]}}}
        >>> summary = summarize(rising)
        >>> summary["settings"]["trained_at_m"]["change"], summary["claim"]["verdict"]
        ('rises', 'not-testable-here')
        >>> summary["claim"]["miniature"]["outcome"]
        'reproduced'
    """
    from gradlab.symbolic.batch_size import (
        conjecture_verdict,
        decide_trend,
        part_trends,
        saturation,
        setting_trend,
    )

    settings = {}
    for name in SUMMARIZED_SETTINGS:
        if name not in measurement["settings"]:
            continue
        values = measurement["settings"][name]["P"]
        first, last = [run[0] for run in values], [run[-1] for run in values]
        if saturation(values) is not None:  # P's bound, not the seeds, sets the spread
            change = "saturated"
        elif not separated(first, last):
            change = "within_spread"
        else:
            change = "rises" if mean_std(last)[0] > mean_std(first)[0] else "falls"
        parts = {key: trend for key, (trend, _) in part_trends(measurement, name).items()}
        trend, why = setting_trend(values)
        settings[name] = {"first": first, "last": last, "change": change, "trend": trend,
                          "trend_detail": why, "parts": parts}  # fmt: skip
        diagonal = measurement["settings"][name].get("P_diagonal")
        if diagonal is not None:  # each query's own entry: 1/m of P, falling by construction
            off = [[p - d for p, d in zip(run, own, strict=True)]
                   for run, own in zip(values, diagonal, strict=True)]  # fmt: skip
            off_first, off_last = [run[0] for run in off], [run[-1] for run in off]
            settings[name]["off_diagonal"] = {
                "first": off_first, "last": off_last,
                "change": ("within_spread" if not separated(off_first, off_last)
                           else "rises" if mean_std(off_last)[0] > mean_std(off_first)[0]
                           else "falls"),
                "diagonal_first": mean_std([run[0] for run in diagonal])[0],
            }  # fmt: skip
    verdict, detail = conjecture_verdict(measurement, "rises")
    outcome, why = decide_trend(measurement, "rises")
    return {"settings": settings, "claim": {"verdict": verdict, "detail": detail,
                                            "miniature": {"outcome": outcome, "detail": why}}}


def trend_sentence(measurement: dict, trend: str, detail: str = "") -> str:
    """P's trend over the measured batch sizes in words, for every text that states it.

    The study command's last line, the study page and the report's findings word the trend of
    :func:`summarize` with this one sentence, so that they say the same thing (among others, that
    one batch size or one seed cannot show a trend).

    Args:
        measurement: a :func:`measure` result (its ``batch_sizes`` and ``seeds`` are read).
        trend: the setting's trend from :func:`summarize` (``settings[name]["trend"]``).
        detail: more context, appended inside the parentheses (optional).

    Returns:
        ``P from m = <first> to m = <last>: <trend> (paired t-test over the seeds; <why>)``,
        ``<why>`` saying what the run lacked for a trend or how many seeds it had; with one
        batch size, which has no trend to test, ``P at m = <m> alone: no trend (...)``.

    Example:
        >>> trend_sentence({"batch_sizes": [8, 16], "seeds": [0]}, "unclear")
        'P from m = 8 to m = 16: unclear (paired t-test over the seeds; one seed cannot show a trend)'
        >>> trend_sentence({"batch_sizes": [8], "seeds": [0, 1]}, "unclear")
        'P at m = 8 alone: no trend (a trend needs P at two or more batch sizes)'
        >>> print(trend_sentence({"batch_sizes": [8, 12], "seeds": [0, 1]}, "saturated"))
        P from m = 8 to m = 12: saturated (P lies within 0.01 of its bound, 0 or 1, at every m and seed, or at its bound at one end with every seed changing alike: the bound, not a t-test, decides)
    """  # noqa: E501
    sizes, seeds = measurement["batch_sizes"], len(measurement["seeds"])
    more = f"; {detail}" if detail else ""
    if len(sizes) < 2:  # no range and no test to name: the run lacked a second m
        return (f"P at m = {sizes[0]} alone: no trend (a trend needs P at two or more batch "
                f"sizes{more})")  # fmt: skip
    if trend == "saturated":  # P's bound decided it: no t-test was run
        from gradlab.symbolic.batch_size import SATURATED

        return (f"P from m = {sizes[0]} to m = {sizes[-1]}: saturated (P lies within "
                f"{SATURATED:g} of its bound, 0 or 1, at every m and seed, or at its bound at "
                f"one end with every seed changing alike: the bound, not a t-test, decides"
                f"{more})")  # fmt: skip
    why = "one seed cannot show a trend" if seeds < 2 else f"{seeds} seeds"
    return (f"P from m = {sizes[0]} to m = {sizes[-1]}: {trend} (paired t-test over the seeds; "
            f"{why}{more})")  # fmt: skip
