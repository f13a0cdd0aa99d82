"""Operating-region analyses: closed forms, P against batch size, training dynamics.

``p_against_batch_size`` here samples the 10-class digits (so m/8 images per class, the number
of classes fixed): it separates the diagonal's share from the rest under uniform sampling. The
paper's setting (4 images per class, m/4 classes) is :mod:`gradlab.experiments.p_vs_batch_size`.

Each function returns plain dicts of numbers (JSON-ready); figures are drawn from them by
:mod:`gradlab.plotting.operating_region`.
"""

from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F

from gradlab.data import ClassBalancedBatches, load_digits_split
from gradlab.functional import (
    decomposition_norms,
    drop_diagonal,
    expected_operating_region_proportion,
    gradient_counts,
    in_batch_decomposition,
    in_batch_layout,
    operating_region_proportion,
    operating_region_width,
)
from gradlab.losses import SmoothAPLoss
from gradlab.models import EmbeddingMLP
from gradlab.progress import progress
from gradlab.training import embed, train_embedding


def closed_form_curves(seed: int = 0) -> dict:
    """Width against tau for several eps; expected P against score spread, with simulation."""
    taus = [10 ** (k / 8) for k in range(-32, 9)]  # 1e-4 .. 10
    epsilons = [0.0005, 0.005, 0.05, 0.5]
    widths = {str(eps): [operating_region_width(t, eps) for t in taus] for eps in epsilons}
    spreads = [10 ** (k / 8) for k in range(-24, 1)]  # 1e-3 .. 1
    curve_taus = [0.005, 0.01, 0.05]
    expected = {
        str(t): [expected_operating_region_proportion(s, t, 0.005, None) for s in spreads]
        for t in curve_taus
    }
    generator = torch.Generator().manual_seed(seed)
    simulated = {}
    for t in curve_taus:
        points = []
        for s in spreads[::4]:
            scores = torch.randn(64, 256, generator=generator, dtype=torch.float64) * s
            value = operating_region_proportion(scores, t, 0.005, include_diagonal=False)
            points.append([s, value.mean().item()])
        simulated[str(t)] = points
    return {
        "taus": taus,
        "widths": widths,
        "spreads": spreads,
        "expected_proportion": expected,
        "simulated_proportion": simulated,
        "seed_setting": {"tau": 0.01, "eps": 0.005, "width": operating_region_width(0.01, 0.005)},
    }


def _batch_proportions(embeddings: torch.Tensor, tau: float, eps: float) -> dict[str, float]:
    """Batch means of P, split by which entries of the m x m per-query matrix they count.

    The paper's matrix has the query among its candidates, with self-score exactly 1:
    ``p_seed_definition`` (all m^2 entries), ``p_off_diagonal`` (the m(m-1) off-diagonal ones),
    ``p_query_column`` (pairs of the query's own column with another candidate) and
    ``p_without_query`` (pairs of two other candidates: SmoothAP's candidate set).
    """
    normalized = F.normalize(embeddings.double(), dim=1)
    scores = normalized @ normalized.T
    width = operating_region_width(tau, eps)
    self_pairs = (scores.diagonal().unsqueeze(1) - scores).abs() < width
    self_pairs.fill_diagonal_(False)
    size = scores.shape[0]
    others = drop_diagonal(scores)
    return {
        "p_seed_definition": operating_region_proportion(scores, tau, eps).mean().item(),
        "p_off_diagonal": operating_region_proportion(scores, tau, eps, False).mean().item(),
        "p_query_column": self_pairs.double().sum().item() / max(1, size * (size - 1)),
        "p_without_query": (
            operating_region_proportion(others, tau, eps, False).mean().item()
            if size > 2
            else math.nan
        ),
    }


def _mean_of(values: list[dict[str, float]]) -> dict[str, float]:
    return {key: sum(v[key] for v in values) / len(values) for key in values[0]}


def p_against_batch_size(quick: bool = False, tau: float = 0.01, eps: float = 0.005) -> dict:
    """Fig. S7a of Brown et al., 2020, with its two explanations measured apart.

    (a) Fixed models (untrained, and trained on classes 0-4): batches of 16 to 1024 drawn from
        all 1797 digits, uniformly or class-balanced (8 classes of m/8). Uniform sampling alone
        changes only the diagonal share: ``E[P] = 1/m + (1 - 1/m) p_off``, ``p_off`` fixed.
    (b) One model per batch size, trained with SmoothAP on classes 0-4 for the same number of
        epochs from the same initialization; mean P over the last epoch, as the paper measures.
    """
    sizes = batch_size_settings(quick)
    digits = load_digits_split()
    all_images = torch.cat([digits.train_images, digits.test_images])
    all_labels = torch.cat([digits.train_labels, digits.test_labels])
    epochs, sizes_fixed, sizes_trained = sizes["epochs"], sizes["fixed"], sizes["trained"]

    torch.manual_seed(0)
    initial = EmbeddingMLP()
    trained = copy.deepcopy(initial)
    train_embedding(
        trained, digits.train_images, digits.train_labels, SmoothAPLoss(tau),
        per_class=16, classes_per_batch=4, epochs=epochs,
    )  # fmt: skip

    fixed = {}
    for name, model in (("untrained", initial), ("trained", trained)):
        embeddings = embed(model, all_images)
        for sampling in ("uniform", "class_balanced"):
            fixed[f"{name}_{sampling}"] = _fixed_model_rows(
                embeddings, all_labels, sizes_fixed, sampling, tau, eps, sizes["draws"]
            )

    trained_rows = []
    for size in progress(sizes_trained, desc="P vs m (10 digit classes), trained per m"):
        model = copy.deepcopy(initial)
        steps_per_epoch = len(ClassBalancedBatches(digits.train_labels, size // 4, 4))
        last_epoch: list[dict[str, float]] = []

        def record(step, embeddings, labels, loss, steps_per_epoch=steps_per_epoch, log=last_epoch):
            if step >= (epochs - 1) * steps_per_epoch:
                log.append(_batch_proportions(embeddings, tau, eps))

        train_embedding(
            model, digits.train_images, digits.train_labels, SmoothAPLoss(tau),
            per_class=size // 4, classes_per_batch=4, epochs=epochs, on_step=record,
        )  # fmt: skip
        spread = embed(model, digits.train_images)
        normalized = F.normalize(spread, dim=1)
        trained_rows.append(
            {
                "batch_size": size,
                "steps": epochs * steps_per_epoch,
                **_mean_of(last_epoch),
                "score_spread": (normalized @ normalized.T).std().item(),
            }
        )
    return {
        "tau": tau,
        "eps": eps,
        "epochs": epochs,
        "fixed_model": fixed,
        "trained_per_batch_size": trained_rows,
        "conclusion": batch_size_conclusion(fixed, trained_rows),
    }


def batch_size_settings(quick: bool) -> dict:
    """Sizes of :func:`p_against_batch_size`: SmoothAP epochs, the m values of the fixed models
    and of the trained ones, and the batches drawn per m for the fixed models.

    Example:
        >>> batch_size_settings(quick=True)["trained"]
        [16, 64, 256]
    """
    if quick:
        return {"epochs": 3, "fixed": [16, 32, 64, 128, 256], "trained": [16, 64, 256],
                "draws": 20}  # fmt: skip
    return {"epochs": 15, "fixed": [16, 32, 64, 128, 256, 512, 1024],
            "trained": [16, 32, 64, 128, 256, 512], "draws": 20}  # fmt: skip


def dynamics_settings(quick: bool) -> dict:
    """Sizes of :func:`training_dynamics`: SmoothAP epochs and the batch (classes x per class).

    Example:
        >>> dynamics_settings(quick=True)
        {'epochs': 4, 'per_class': 16, 'classes_per_batch': 4}
    """
    return {"epochs": 4 if quick else 25, "per_class": 16, "classes_per_batch": 4}


def _fixed_model_rows(
    embeddings: torch.Tensor,
    labels: torch.Tensor,
    sizes: list[int],
    sampling: str,
    tau: float,
    eps: float,
    draws: int = 20,
) -> list[dict]:
    """Mean P of ``draws`` batches per size from fixed embeddings.

    ``uniform`` batches are drawn without regard to class: pairs of two other candidates are
    then identically distributed at every size, and only the shares of the diagonal (``1/m``)
    and of the query's own column (``2(m-1)/m^2``) move the paper's P. The
    ``sampling_only_prediction`` combines those shares with the pair rates measured at the
    largest size. ``class_balanced`` batches take 8 classes of ``m/8`` items each.
    """
    generator = torch.Generator().manual_seed(len(sizes))
    rows = []
    for size in progress(sizes, desc=f"P vs m (10 digit classes), fixed model, {sampling}"):
        if sampling == "uniform":
            batches = [
                torch.randperm(len(labels), generator=generator)[:size] for _ in range(draws)
            ]
        else:
            sampler = ClassBalancedBatches(labels, size // 8, 8, seed=size)
            batches = sampler.take(draws)
        values = [_batch_proportions(embeddings[b], tau, eps) for b in batches]
        rows.append({"batch_size": size, "batches": len(values), **_mean_of(values)})
    column, pairs = rows[-1]["p_query_column"], rows[-1]["p_without_query"]
    for row in rows:
        m = row["batch_size"]
        row["sampling_only_prediction"] = (
            1.0 / m + 2.0 * (m - 1) / m**2 * column + (m - 1) * (m - 2) / m**2 * pairs
        )
    return rows


def _change(rows: list[dict], key: str) -> str:
    first, last = rows[0], rows[-1]
    delta = last[key] - first[key]
    if abs(delta) < 0.01:
        return (
            f"stays near {last[key]:.3f} ({first[key]:.3f} at m={first['batch_size']}, "
            f"{last[key]:.3f} at m={last['batch_size']})"
        )
    direction = "rises" if delta > 0 else "falls"
    return (
        f"{direction} from {first[key]:.3f} (m={first['batch_size']}) to {last[key]:.3f} "
        f"(m={last['batch_size']})"
    )


def batch_size_conclusion(fixed: dict, trained_rows: list[dict]) -> str:
    """The conclusion of :func:`p_against_batch_size`, worded from its own numbers.

    Each trend is read from the first and last row (the smallest and largest ``m``): a change
    of at least 0.01 "rises" or "falls", a smaller one "stays near" the last value. The paper's
    P is Eq. 1 of Brown et al. (2020), which counts the diagonal and the query's self-score.

    Args:
        fixed: the ``fixed_model`` rows of :func:`p_against_batch_size` by model and sampling
            (``untrained_uniform``, ``trained_uniform``, ``trained_class_balanced``), each row
            with ``batch_size``, ``p_seed_definition``, ``p_without_query`` and (uniform ones)
            ``sampling_only_prediction``.
        trained_rows: its ``trained_per_batch_size`` rows (``batch_size``,
            ``p_seed_definition``, ``p_without_query``, ``score_spread``).

    Returns:
        One paragraph: the fixed models' trends, the trained models' trends, what they mean.

    Example:
        >>> def rows(first, last):
        ...     return [{"batch_size": m, "p_seed_definition": p, "sampling_only_prediction": p,
        ...              "p_without_query": 0.1, "score_spread": 0.3}
        ...             for m, p in ((16, first), (32, last))]
        >>> fixed = dict.fromkeys(("untrained_uniform", "trained_uniform",
        ...                        "trained_class_balanced"), rows(0.2, 0.2))
        >>> trained = batch_size_conclusion(fixed, rows(0.0, 0.01)).split("One model")[1]
        >>> trained[trained.index("the paper's P"):trained.index(" and P")]
        "the paper's P rises from 0.000 (m=16) to 0.010 (m=32)"
        >>> trained = batch_size_conclusion(fixed, rows(0.0, 0.0099)).split("One model")[1]
        >>> trained[trained.index("the paper's P"):trained.index(" and P")]
        "the paper's P stays near 0.010 (0.000 at m=16, 0.010 at m=32)"
    """
    parts = []
    for name in ("untrained_uniform", "trained_uniform"):
        rows = fixed[name]
        gap = max(abs(r["p_seed_definition"] - r["sampling_only_prediction"]) for r in rows)
        parts.append(
            f"Fixed {name.replace('_', ' model, ')} batches: the paper's P "
            f"{_change(rows, 'p_seed_definition')}, while P over pairs of two other candidates "
            f"{_change(rows, 'p_without_query')}; the shares of the diagonal and of the query's "
            f"own column predict the paper's P to within {gap:.3f} at every size."
        )
    balanced = fixed["trained_class_balanced"]
    parts.append(
        "Fixed trained model, class-balanced batches (8 classes of m/8): P over pairs of two "
        f"other candidates {_change(balanced, 'p_without_query')}."
    )
    parts.append(
        "One model trained per batch size (same epochs, same initialization): the paper's P "
        f"{_change(trained_rows, 'p_seed_definition')} and P over pairs of two other candidates "
        f"{_change(trained_rows, 'p_without_query')}; the score spread "
        f"{_change(trained_rows, 'score_spread')}."
    )
    parts.append(
        "At a fixed model, a larger batch does not hold a larger proportion of close pairs: what "
        "moves with m is the weight of the diagonal and of the query's self-score (exactly 1), "
        "which Eq. 1 counts. Any further dependence on m must come from what training at that "
        "batch size does to the scores."
    )
    return " ".join(parts)


def training_dynamics(quick: bool = False, tau: float = 0.01, eps: float = 0.005) -> dict:
    """P, gradient counts and the AD / CB split over one SmoothAP run on digits 0-4."""
    digits = load_digits_split()
    torch.manual_seed(1)
    model = EmbeddingMLP()
    history: list[dict] = []

    def record(step, embeddings, labels, loss):
        scores, positives, candidates = in_batch_layout(embeddings.double(), labels)
        counts = gradient_counts(scores, positives, tau, eps, candidate_mask=candidates)
        weighted = gradient_counts(
            scores, positives, tau, eps, weighted=True, candidate_mask=candidates
        )
        norms = decomposition_norms(in_batch_decomposition(embeddings.double(), labels, tau))
        history.append(
            {
                "step": step,
                "loss": loss,
                **_batch_proportions(embeddings, tau, eps),
                "mean_gradient_count": counts.per_query.double().mean().item(),
                "share_without_gradient": counts.queries_without_gradient
                / max(1, counts.queries_with_positive),
                "share_without_weighted_gradient": weighted.queries_without_gradient
                / max(1, weighted.queries_with_positive),
                "ad_share": _nanmean(norms["ad_share"]),
                "ad_cb_cosine": _nanmean(norms["cosine"]),
                "grad_norm": _nanmean(norms["grad_norm"]),
            }
        )

    sizes = dynamics_settings(quick)
    train_embedding(
        model, digits.train_images, digits.train_labels, SmoothAPLoss(tau),
        per_class=sizes["per_class"], classes_per_batch=sizes["classes_per_batch"],
        epochs=sizes["epochs"], on_step=record, progress="SmoothAP training dynamics",
    )  # fmt: skip
    batch_size = sizes["per_class"] * sizes["classes_per_batch"]
    return {"tau": tau, "eps": eps, "batch_size": batch_size,
            "classes_per_batch": sizes["classes_per_batch"], "per_class": sizes["per_class"],
            "history": history}  # fmt: skip


def _nanmean(values: torch.Tensor) -> float:
    kept = values[~torch.isnan(values)]
    return kept.mean().item() if kept.numel() else math.nan
