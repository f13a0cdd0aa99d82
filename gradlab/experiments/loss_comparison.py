"""Ranking losses on unseen digit strings: same backbone, same batches, same budget, per seed.

The deep-metric-learning protocol of CUB / Stanford Online Products, on the 1000-class digit
strings (:mod:`gradlab.data.digit_strings`): train on half of the numbers, retrieve on the unseen
other half (each test image queries all the others). Every loss trains the same
:class:`gradlab.models.DigitStringNet` from the same initialization, on the same batches of the
seed's sampler (4 images per class, ``m / 4`` classes), for the same number of steps:

* SmoothAP (Brown et al., 2020, Eq. 1), query excluded (the paper's definition) and
  included (the official code's), tau = 0.01;
* FastAP (Cakir et al. 2019), 10 bins; Blackbox AP (Rolinek et al. 2020), lambda = 4, margin
  0.02; FAPPY (Zhong et al., Algorithm 1);
* a contrastive baseline (Hadsell et al. 2006 on cosine similarity: positives pulled to 1,
  negatives pushed below a margin of 0.5).

Metrics on the unseen numbers: Recall@1/2/4/8, mAP (tie-aware) and MAP@R (Musgrave et al.,
"A Metric Learning Reality Check", 2020), and each loss's cost per step: the median time of the
loss's forward and backward pass on a batch of embeddings, and the whole training step.
"""

from __future__ import annotations

import copy
import statistics
import time

import torch
import torch.nn.functional as F

from gradlab.data import FixedCountBatches, load_digit_strings
from gradlab.experiments.metrics import map_at_r
from gradlab.experiments.runtime import run_tasks, study_threads
from gradlab.experiments.statistics import mean_std, separated
from gradlab.functional import in_batch_retrieval, retrieval_report
from gradlab.losses import BlackboxAPLoss, FAPPYLoss, FastAPLoss, SmoothAPLoss
from gradlab.models import DigitStringNet
from gradlab.training import embed, train_on_batches


def contrastive_loss(
    embeddings: torch.Tensor, labels: torch.Tensor, margin: float = 0.5
) -> torch.Tensor:
    """Contrastive loss on cosine similarity (Hadsell et al. 2006), the baseline of the study.

    ``mean over positive pairs of (1 - s) + mean over negative pairs of max(0, s - margin)``,
    pairs ``i != j`` of the batch.

    Example:
        >>> emb = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
        >>> contrastive_loss(emb, torch.tensor([0, 0, 1, 1])).item()
        0.0
    """
    normalized = F.normalize(embeddings, dim=1)
    scores = normalized @ normalized.T
    same = labels.unsqueeze(0) == labels.unsqueeze(1)
    off_diagonal = ~torch.eye(len(labels), dtype=torch.bool, device=labels.device)
    positives, negatives = same & off_diagonal, ~same
    pull = ((1.0 - scores) * positives).sum() / positives.sum().clamp(min=1)
    push = (F.relu(scores - margin) * negatives).sum() / negatives.sum().clamp(min=1)
    return pull + push


def loss_functions(tau: float = 0.01) -> dict:
    """Name -> ``loss(embeddings, labels)`` of every loss of the study."""
    return {
        "SmoothAP (query excluded)": SmoothAPLoss(tau),
        "SmoothAP (query included)": SmoothAPLoss(tau, include_query=True),
        "FastAP": FastAPLoss(10),
        "Blackbox AP": BlackboxAPLoss(),
        "FAPPY": FAPPYLoss(),
        "Contrastive": contrastive_loss,
    }


def evaluate(embeddings: torch.Tensor, labels: torch.Tensor) -> dict[str, float]:
    """Recall@1/2/4/8, mAP and MAP@R, each item querying all the others."""
    scores, relevant = in_batch_retrieval(embeddings.cpu(), labels.cpu())
    return {**retrieval_report(scores, relevant), "MAP@R": map_at_r(scores, relevant)}


def _loss_seconds(loss_fn, embeddings: torch.Tensor, labels: torch.Tensor, repeats: int) -> float:
    """Median seconds of one forward + backward pass of the loss alone."""
    times = []
    for _ in range(repeats + 1):
        leaf = embeddings.detach().clone().requires_grad_(True)
        if leaf.is_cuda:
            torch.cuda.synchronize()
        started = time.perf_counter()
        loss_fn(leaf, labels).backward()
        if leaf.is_cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - started)
    return statistics.median(times[1:])


def _gradient_norm(loss_fn, embeddings: torch.Tensor, labels: torch.Tensor) -> float:
    """Norm of the loss's gradient with respect to the embeddings of the first batch, at the
    initialization: a loss that is flat there (exactly 0 for a histogram loss whose scores
    all fall into one bin) never moves the network."""
    leaf = embeddings.detach().clone().requires_grad_(True)
    loss_fn(leaf, labels).backward()
    return leaf.grad.norm().item()


def settings(quick: bool) -> dict:
    """Sizes of the study."""
    if quick:
        return {"per_class": 4, "batch_size": 64, "steps": 15, "lr": 1e-3, "timing_repeats": 3,
                "test_numbers": 250}  # fmt: skip
    return {"per_class": 6, "batch_size": 128, "steps": 200, "lr": 1e-3, "timing_repeats": 10,
            "test_numbers": 500}  # fmt: skip


def measure(
    quick: bool = True,
    seeds: tuple[int, ...] = (0, 1, 2),
    device: str = "cpu",
    workers: int | None = None,
) -> dict:
    """Train the same network with each loss for every seed; retrieval on unseen numbers.

    Every (seed, loss) pair is one task (:func:`gradlab.experiments.runtime.run_tasks`) that
    rebuilds the seed's data, initialization and batches from the seed alone, so the numbers are
    the same whether the tasks run here one after the other or on worker processes (only the
    timings differ).

    Args:
        quick: small settings (for tests); the full run is the report's.
        seeds: each fixes the data set, the initialization and the batches.
        device: torch device.
        workers: worker processes (``None``: those of the enclosing
            :func:`gradlab.experiments.runtime.study_workers` block, 1 outside any).

    Returns:
        ``{"settings", "seeds", "before": {metric: [per seed]}, "initial_score_range": [per
        seed] (largest minus smallest cosine score of the first batch at the initialization),
        "losses": {name: {"metrics":
        {metric: [per seed]}, "loss_seconds": [per seed], "step_seconds": [per seed],
        "final_loss", "initial_loss", "initial_gradient_norm": [per seed]}}}``; the initial
        gradient norm is taken on the first batch's embeddings at the initialization.
    """
    seeds = tuple(seeds)
    config = settings(quick)
    names = list(loss_functions())
    tasks = [(quick, seed, name, device) for seed in seeds for name in [None, *names]]
    outputs = run_tasks(
        _seed_task, tasks, stage="loss comparison",
        names=[f"seed {task[1]}" for task in tasks],
        parts=[task[2] or "untrained network" for task in tasks],
        detail=f"{len(names)} losses trained", workers=workers,
    )  # fmt: skip
    results: dict = {name: {"metrics": {}, "loss_seconds": [], "step_seconds": [],
                            "final_loss": [], "initial_loss": [], "initial_gradient_norm": []}
                     for name in names}  # fmt: skip
    before: dict[str, list[float]] = {}
    score_range: list[float] = []
    for (_, _, name, _), output in zip(tasks, outputs, strict=True):
        if name is None:
            for metric, value in output["before"].items():
                before.setdefault(metric, []).append(value)
            score_range.append(output["score_range"])
            continue
        run = results[name]
        for metric, value in output["metrics"].items():
            run["metrics"].setdefault(metric, []).append(value)
        for key in ("step_seconds", "loss_seconds", "final_loss", "initial_loss",
                    "initial_gradient_norm"):  # fmt: skip
            run[key].append(output[key])
    return {
        "settings": {**config, "classes_per_batch": config["batch_size"] // 4, "device": device},
        "seeds": list(seeds),
        "before": before,
        "initial_score_range": score_range,
        "losses": results,
    }


def _seed_task(quick: bool, seed: int, name: str | None, device: str) -> dict:
    """One task of :func:`measure`: the untrained network's numbers (``name`` None) or one
    loss trained, for one seed; everything rebuilt from the seed."""
    with study_threads(device):
        return _seed_run(quick, seed, name, device)


def _seed_run(quick: bool, seed: int, name: str | None, device: str) -> dict:
    config = settings(quick)
    data = load_digit_strings(num_digits=3, per_class=config["per_class"], seed=seed)
    kept = config["test_numbers"] * config["per_class"]  # the first numbers (sorted)
    test_images, test_labels = data.test_images[:kept], data.test_labels[:kept]
    train_images, train_labels = data.train_images.to(device), data.train_labels.to(device)
    torch.manual_seed(seed)
    initial = DigitStringNet().to(device)
    sampler = FixedCountBatches(data.train_labels, config["batch_size"], 4, seed=seed)
    batches = sampler.take(config["steps"])
    with torch.no_grad():
        timing_embeddings = initial(train_images[batches[0].to(device)])
    timing_labels = train_labels[batches[0].to(device)]
    if name is None:
        unit = F.normalize(timing_embeddings, dim=1)
        cosines = unit @ unit.T
        return {"before": evaluate(embed(initial, test_images), test_labels),
                "score_range": (cosines.max() - cosines.min()).item()}  # fmt: skip
    loss_fn = loss_functions()[name]
    model = copy.deepcopy(initial)
    started = time.perf_counter()
    losses = train_on_batches(model, train_images, train_labels, loss_fn, batches, lr=config["lr"])
    step_seconds = (time.perf_counter() - started) / len(batches)
    return {
        "metrics": evaluate(embed(model, test_images), test_labels),
        "step_seconds": step_seconds,
        "loss_seconds": _loss_seconds(
            loss_fn, timing_embeddings, timing_labels, config["timing_repeats"]
        ),
        "final_loss": losses[-10:].mean().item(),
        "initial_loss": losses[0].item(),
        "initial_gradient_norm": _gradient_norm(loss_fn, timing_embeddings, timing_labels),
    }


def summarize(results: dict, metric: str = "MAP@R") -> dict:
    """The verdicts on a :func:`measure` result, computed once for every text that words them.

    Losses whose gradient was exactly 0 at the initialization in every seed (``no_gradient``)
    never move the network and are ranked only if no loss trains. Among the others, ``best`` has
    the highest mean ``metric``; ``tied`` are within the seed spread of it (gap below the sum
    of the two stds), ``behind`` further. ``below_untrained``: mean below the untrained
    network's; ``clearly_below_untrained``: by more than the spread.

    Example:
        >>> runs = {"A": {"metrics": {"MAP@R": [0.5, 0.52]}},
        ...         "B": {"metrics": {"MAP@R": [0.49, 0.5]}},
        ...         "C": {"metrics": {"MAP@R": [0.2, 0.21]}}}
        >>> summary = summarize({"losses": runs, "before": {"MAP@R": [0.3, 0.31]}})
        >>> summary["best"], summary["tied"], summary["behind"], summary["clearly_below_untrained"]
        ('A', ['B'], ['C'], ['C'])
    """
    runs = results["losses"]
    flat = [n for n in runs if max(runs[n].get("initial_gradient_norm", [1.0])) == 0.0]
    moved = [n for n in runs if n not in flat] or list(runs)
    ranked = sorted(moved, key=lambda name: -mean_std(runs[name]["metrics"][metric])[0])
    best = ranked[0]
    best_values = runs[best]["metrics"][metric]
    tied = [n for n in ranked[1:] if not separated(runs[n]["metrics"][metric], best_values)]
    before = results["before"][metric]
    worse = [n for n in runs if mean_std(runs[n]["metrics"][metric])[0] < mean_std(before)[0]]
    return {
        "metric": metric,
        "best": best,
        "tied": tied,
        "behind": [n for n in ranked[1:] if n not in tied],
        "no_gradient": flat,
        "below_untrained": worse,
        "clearly_below_untrained": [n for n in worse if separated(runs[n]["metrics"][metric],
                                                                  before)],
    }  # fmt: skip
