"""Ranking losses on unseen digit strings: same backbone, same batches, same budget, per seed.

The deep-metric-learning protocol of CUB / Stanford Online Products, on the 1000-class digit
strings (:mod:`gradlab.data.digit_strings`): train on half of the numbers, retrieve on the unseen
other half (each test image queries all the others). Every loss trains the same
:class:`gradlab.models.DigitStringNet` from the same initialization (:func:`centre_head`), on the
same batches of the seed's sampler (4 images per class, ``m / 4`` classes), for the same number
of steps:

* SmoothAP (Brown et al., 2020, Eq. 1), query excluded (the paper's definition) and
  included (the official code's), tau = 0.01;
* FastAP (Cakir et al. 2019), Blackbox AP (Rolinek et al. 2020) and FAPPY (Zhong et al.,
  Algorithm 1), each with a small sweep of its hyperparameters (:data:`CANDIDATES`) chosen per
  seed on held-out training numbers (:func:`validation_split`, :func:`select_candidate`; the
  protocol of Musgrave et al. 2020), never on the test numbers;
* a contrastive baseline (Hadsell et al. 2006 on cosine similarity: positives pulled to 1,
  negatives pushed below a margin of 0.5).

Metrics on the unseen numbers: Recall@1/2/4/8, mAP (tie-aware) and MAP@R (Musgrave et al.,
"A Metric Learning Reality Check", 2020), and each loss's cost per step: the median time of the
loss's forward and backward pass on a batch of embeddings, and the whole training step.
"""

from __future__ import annotations

import copy
import functools
import statistics
import time
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from gradlab.data import FixedCountBatches, load_digit_strings
from gradlab.errors import GradlabError
from gradlab.experiments.metrics import map_at_r
from gradlab.experiments.runtime import (
    check_seeds,
    current_workers,
    run_tasks,
    study_threads,
    timing_conditions,
)
from gradlab.experiments.statistics import mean_std, separated
from gradlab.functional import in_batch_retrieval, retrieval_report
from gradlab.losses import BlackboxAPLoss, FAPPYLoss, FastAPLoss, SmoothAPLoss
from gradlab.models import DigitStringNet
from gradlab.training import embed, train_on_batches
from gradlab.validation import check_positive_int


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


def loss_functions(tau: float = 0.01, batch_size: int = 128) -> dict:
    """Name -> ``loss(embeddings, labels)`` of every loss of the study at the settings its paper
    recommends: the first candidate of each sweep in :data:`CANDIDATES` (SmoothAP at ``tau``),
    built for batches of ``batch_size`` (Blackbox AP's interpolation is ``lambda x
    batch_size``). No sweep is run: the report's study chooses among :data:`CANDIDATES` on a
    validation split; a study on other data starts from these.

    Example:
        >>> losses = loss_functions(0.01, batch_size=64)
        >>> losses["Blackbox AP"], losses["FastAP"]
        (BlackboxAPLoss(interpolation=256.0, margin=0.02), FastAPLoss(num_bins=20))
    """
    check_positive_int("batch_size", batch_size)
    recommended = {name: sweep[0] for name, sweep in CANDIDATES.items()}
    for name in ("SmoothAP (query excluded)", "SmoothAP (query included)"):
        recommended[name] = {**recommended[name], "tau": tau}
    return {name: make_loss(name, params, batch_size) for name, params in recommended.items()}


CANDIDATES: dict[str, list[dict]] = {
    "SmoothAP (query excluded)": [{"tau": 0.01}],
    "SmoothAP (query included)": [{"tau": 0.01}],
    "FastAP": [{"bins": 20}, {"bins": 10}],
    "Blackbox AP": [
        {"lambda": 4.0, "margin": 0.02},
        {"lambda": 4.0, "margin": 0.0},
        {"interpolation": 4.0, "margin": 0.02},
        {"interpolation": 4.0, "margin": 0.0},
    ],
    "FAPPY": [{"delta_min": 0.01}, {"delta_min": 0.001}],
    "Contrastive": [{"margin": 0.5}],
}
"""Each loss's sweep, the paper's recommendation first (chosen on a tie).

* SmoothAP: tau = 0.01 (Brown et al. 2020, Section 4), no sweep.
* FastAP: L = 20 bins, the setting Brown et al. (2020, supplementary) take from Cakir et al.
  (2019) for the largest data set, and L = 10.
* Blackbox AP: lambda = 4 and margin 0.02 (Rolinek et al. 2020, as Brown et al. take them),
  and margin 0. ``lambda`` is on the official code's scale, whose ranks are divided by the
  number of candidates ``C`` (the batch size); :class:`gradlab.losses.BlackboxAPLoss` ranks
  ``1..C``, so its ``interpolation`` is ``lambda * C`` (the same perturbation and gradient).
  The two ``interpolation = 4`` candidates are this library's default, lambda = 4 read on its
  own rank scale.
* FAPPY: Delta_min = 0.01 and 0.001 (Zhong et al., Table 1: Recall@K within 0.5 % over both).
* Contrastive: margin 0.5 (the study's baseline), no sweep.
"""

GRADIENT_STEPS = 10
"""Training steps over which each run's loss gradient norm is recorded (the reason given for a
loss that does not beat the untrained network)."""


def make_loss(name: str, params: dict, batch_size: int):
    """The loss ``name`` of the study with one candidate's ``params`` (:data:`CANDIDATES`).

    Example:
        >>> make_loss("Blackbox AP", {"lambda": 4.0, "margin": 0.02}, 128)
        BlackboxAPLoss(interpolation=512.0, margin=0.02)
    """
    if name.startswith("SmoothAP"):
        return SmoothAPLoss(params["tau"], include_query="included" in name)
    if name == "FastAP":
        return FastAPLoss(params["bins"])
    if name == "Blackbox AP":
        interpolation = params.get("interpolation") or params["lambda"] * batch_size
        return BlackboxAPLoss(interpolation, params["margin"])
    if name == "FAPPY":
        return FAPPYLoss(params["delta_min"])
    if name == "Contrastive":
        return functools.partial(contrastive_loss, margin=params["margin"])
    raise GradlabError(f"name must be one of {list(CANDIDATES)}; got {name!r}")


def select_candidate(validation: Sequence[float]) -> int:
    """The selection rule: the candidate with the highest validation MAP@R, the first on a tie.

    Only validation values enter (the validation split's numbers, never the test numbers).

    Example:
        >>> select_candidate([0.10, 0.30, 0.30, 0.20])
        1
    """
    if not validation:
        raise GradlabError("validation must hold one value per candidate; got none")
    best = max(validation)
    return next(index for index, value in enumerate(validation) if value == best)


def validation_split(
    labels: torch.Tensor, count: int, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Indices ``(fit, validation)`` of the training images: ``count`` of the training numbers,
    drawn by ``seed``, are held out for choosing hyperparameters; the others are trained on.

    Example:
        >>> fit, held = validation_split(torch.tensor([5, 5, 7, 7, 9, 9]), 1, seed=0)
        >>> sorted(fit.tolist() + held.tolist()), len(held)
        ([0, 1, 2, 3, 4, 5], 2)
    """
    numbers = labels.unique()
    if not 0 < count < len(numbers):
        raise GradlabError(
            f"count must be between 1 and {len(numbers) - 1} (the training numbers less one); "
            f"got {count}"
        )
    order = torch.randperm(len(numbers), generator=torch.Generator().manual_seed(seed))
    held = torch.isin(labels, numbers[order[:count]])
    return (~held).nonzero().flatten(), held.nonzero().flatten()


def centre_head(model: DigitStringNet, images: torch.Tensor) -> None:
    """Data-dependent initialization: shift the head's bias so that the mean embedding of
    ``images`` is 0 (Kraehenbuehl et al. 2016 centre each layer's output the same way).

    The CNN's ReLU features are all positive, so at PyTorch's default initialization every
    embedding points the same way (cosine scores of a batch within about 0.001 of each other):
    a histogram loss whose guard skips such pairs (FAPPY, Algorithm 1) or a rank loss whose
    margin exceeds the spread never moves it. Every loss and the untrained network start here.
    """
    with torch.no_grad():
        model.head.bias -= model(images).mean(dim=0)


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
    """Sizes of the study; ``sweep`` False trains only each loss's first candidate (the
    paper's recommendation, :func:`candidates`)."""
    if quick:
        return {"per_class": 4, "batch_size": 64, "steps": 15, "lr": 1e-3, "timing_repeats": 3,
                "test_numbers": 250, "validation_numbers": 100, "sweep": False}  # fmt: skip
    return {"per_class": 6, "batch_size": 128, "steps": 200, "lr": 1e-3, "timing_repeats": 10,
            "test_numbers": 500, "validation_numbers": 100, "sweep": True}  # fmt: skip


SELECTION_RULE = (
    "per seed and loss, the candidate with the highest MAP@R on the validation numbers (held-out "
    "training numbers; never a test number), the paper's recommendation on a tie"
)


def measure(
    quick: bool = True,
    seeds: tuple[int, ...] = (0, 1, 2),
    device: str = "cpu",
    workers: int | None = None,
) -> dict:
    """Train the same network with each loss for every seed; retrieval on unseen numbers.

    Per seed, ``validation_numbers`` of the training numbers are held out
    (:func:`validation_split`); every candidate of a loss's sweep (:data:`CANDIDATES`) trains on
    the other training numbers, and the one with the best validation MAP@R
    (:func:`select_candidate`) is the loss's run on the test numbers. Every (seed, loss,
    candidate) is one task (:func:`gradlab.experiments.runtime.run_tasks`) that rebuilds the
    seed's data, initialization (:func:`centre_head`) and batches from the seed alone, so the
    numbers are the same whether the tasks run here one after the other or on worker processes
    (only the timings differ).

    Args:
        quick: small settings (for tests); the full run is the report's.
        seeds: each fixes the data set, the validation split, the initialization and the
            batches.
        device: torch device.
        workers: worker processes (``None``: those of the enclosing
            :func:`gradlab.experiments.runtime.study_workers` block, 1 outside any).

    Returns:
        ``{"settings" (its ``"timing"``: where the seconds were taken,
        :func:`~gradlab.experiments.runtime.timing_conditions`), "seeds", "before": {metric:
        [per seed]}, "initial_score_range": [per
        seed] (largest minus smallest cosine score of the first batch at the initialization),
        "losses": {name: {"metrics": {metric: [per seed]}, "loss_seconds", "step_seconds",
        "final_loss", "initial_loss", "initial_gradient_norm", "early_gradient_norm" (mean
        over the first :data:`GRADIENT_STEPS` steps): [per seed] of the chosen candidate,
        "sweep": {"candidates": [params], "validation": [[per candidate] per seed],
        "chosen": [index per seed]}}}}``. Gradient norms are taken with respect to the
        embeddings of the step's batch.

    Raises:
        GradlabError: ``seeds`` empty, repeated, or not whole numbers >= 0.
    """
    seeds = tuple(check_seeds(seeds))
    config = settings(quick)
    tasks = [(quick, seed, None, 0, device) for seed in seeds]
    tasks += [
        (quick, seed, name, index, device)
        for seed in seeds
        for name in CANDIDATES
        for index in range(len(candidates(name, quick)))
    ]
    outputs = run_tasks(
        seed_task, tasks, stage="loss comparison",
        names=[f"seed {task[1]}" for task in tasks],
        parts=[_part(task[2], task[3]) for task in tasks],
        detail=f"{len(tasks) // len(seeds) - 1} training runs of {len(CANDIDATES)} losses",
        workers=workers,
    )  # fmt: skip
    keys = ("step_seconds", "loss_seconds", "final_loss", "initial_loss",
            "initial_gradient_norm", "early_gradient_norm")  # fmt: skip
    runs = {task[1:4]: output for task, output in zip(tasks, outputs, strict=True)}
    before: dict[str, list[float]] = {}
    for seed in seeds:
        for metric, value in runs[seed, None, 0]["before"].items():
            before.setdefault(metric, []).append(value)
    results: dict = {}
    for name in CANDIDATES:
        trained = candidates(name, quick)
        sweep = {"candidates": trained, "validation": [], "chosen": []}
        run: dict = {"metrics": {}, **{key: [] for key in keys}, "sweep": sweep}
        for seed in seeds:
            validation = [runs[seed, name, i]["validation"] for i in range(len(trained))]
            chosen = select_candidate(validation)
            run["sweep"]["validation"].append(validation)
            run["sweep"]["chosen"].append(chosen)
            output = runs[seed, name, chosen]
            for metric, value in output["metrics"].items():
                run["metrics"].setdefault(metric, []).append(value)
            for key in keys:
                run[key].append(output[key])
        results[name] = run
    return {
        "settings": {
            **config,
            "classes_per_batch": config["batch_size"] // 4,
            "device": device,
            "gradient_steps": GRADIENT_STEPS,
            "selection_rule": SELECTION_RULE,
            "initialization": "head bias centred on the training images",
            # each task trains on one thread (seed_task); the workers train at once
            "timing": timing_conditions(
                device,
                threads=1 if str(device).startswith("cpu") else torch.get_num_threads(),
                processes=min(current_workers() if workers is None else workers, len(tasks)),
            ),
        },
        "seeds": list(seeds),
        "before": before,
        "initial_score_range": [runs[seed, None, 0]["score_range"] for seed in seeds],
        "losses": results,
    }


def candidates(name: str, quick: bool) -> list[dict]:
    """The candidates of loss ``name`` that the study trains: its whole sweep
    (:data:`CANDIDATES`), or its first candidate where the settings have no sweep.

    Example:
        >>> candidates("FAPPY", quick=True), len(candidates("FAPPY", quick=False))
        ([{'delta_min': 0.01}], 2)
    """
    return CANDIDATES[name] if settings(quick)["sweep"] else CANDIDATES[name][:1]


def _part(name: str | None, index: int) -> str:
    """A task's label within its seed, for progress lines and errors."""
    if name is None:
        return "untrained network"
    params = ", ".join(f"{key} {value:g}" for key, value in CANDIDATES[name][index].items())
    return f"{name} ({params})"


def study_split(quick: bool, seed: int) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """The seed's images and labels as the study uses them: ``"fit"`` (the training numbers
    trained on), ``"validation"`` (the held-out training numbers, :func:`validation_split`) and
    ``"test"`` (the first ``test_numbers`` unseen numbers)."""
    config = settings(quick)
    data = load_digit_strings(num_digits=3, per_class=config["per_class"], seed=seed)
    kept = config["test_numbers"] * config["per_class"]  # the first numbers (sorted)
    fit, held = validation_split(data.train_labels, config["validation_numbers"], seed)
    return {
        "fit": (data.train_images[fit], data.train_labels[fit]),
        "validation": (data.train_images[held], data.train_labels[held]),
        "test": (data.test_images[:kept], data.test_labels[:kept]),
    }


def seed_task(quick: bool, seed: int, name: str | None, index: int, device: str) -> dict:
    """One task of :func:`measure`: the untrained network's numbers (``name`` None) or one
    candidate of one loss trained, for one seed; everything rebuilt from the seed."""
    with study_threads(device):
        return _seed_run(quick, seed, name, index, device)


def _seed_run(quick: bool, seed: int, name: str | None, index: int, device: str) -> dict:
    config = settings(quick)
    split = study_split(quick, seed)
    test_images, test_labels = split["test"]
    train_images, train_labels = split["fit"]
    train_images = train_images.to(device)
    torch.manual_seed(seed)
    initial = DigitStringNet().to(device)
    centre_head(initial, train_images)
    sampler = FixedCountBatches(train_labels, config["batch_size"], 4, seed=seed)
    batches = sampler.take(config["steps"])
    train_labels = train_labels.to(device)
    with torch.no_grad():
        timing_embeddings = initial(train_images[batches[0].to(device)])
    timing_labels = train_labels[batches[0].to(device)]
    if name is None:
        unit = F.normalize(timing_embeddings, dim=1)
        cosines = unit @ unit.T
        return {"before": evaluate(embed(initial, test_images), test_labels),
                "score_range": (cosines.max() - cosines.min()).item()}  # fmt: skip
    loss_fn = make_loss(name, CANDIDATES[name][index], config["batch_size"])
    model = copy.deepcopy(initial)
    norms: list[float] = []

    def record(step: int, embeddings: torch.Tensor, labels: torch.Tensor, _loss) -> None:
        if step < GRADIENT_STEPS:
            norms.append(_gradient_norm(loss_fn, embeddings, labels))

    started = time.perf_counter()
    losses = train_on_batches(model, train_images, train_labels, loss_fn, batches,
                              lr=config["lr"], on_step=record)  # fmt: skip
    step_seconds = (time.perf_counter() - started) / len(batches)
    held_scores, held_relevant = in_batch_retrieval(
        embed(model, split["validation"][0]).cpu(), split["validation"][1]
    )
    return {
        "validation": map_at_r(held_scores, held_relevant),
        "metrics": evaluate(embed(model, test_images), test_labels),
        "step_seconds": step_seconds,
        "loss_seconds": _loss_seconds(
            loss_fn, timing_embeddings, timing_labels, config["timing_repeats"]
        ),
        "final_loss": losses[-10:].mean().item(),
        "initial_loss": losses[0].item(),
        "initial_gradient_norm": _gradient_norm(loss_fn, timing_embeddings, timing_labels),
        "early_gradient_norm": statistics.fmean(norms),
    }


def summarize(results: dict, metric: str = "MAP@R") -> dict:
    """The verdicts on a :func:`measure` result, computed once for every text that words them.

    A loss is ranked only if its mean ``metric`` beats the untrained network's by more than
    the seed spread (:func:`gradlab.experiments.statistics.separated`: gap above the sum of the
    two stds) and its gradient was not exactly 0 at the initialization in every seed
    (``no_gradient``: such a loss never moves the network). The others are listed ``apart``,
    each with its measured reason. Among the ranked, ``best`` has the highest mean ``metric``
    (None when no loss is ranked); ``tied`` are within the seed spread of it, ``behind``
    further. ``below_untrained``: mean below the untrained network's;
    ``clearly_below_untrained``: by more than the spread. ``single_seed``: the run has one seed,
    whose spread is not measured: no loss is ranked, and only a loss without gradient is set
    apart.

    Example:
        >>> runs = {"A": {"metrics": {"MAP@R": [0.5, 0.52]}},
        ...         "B": {"metrics": {"MAP@R": [0.49, 0.5]}},
        ...         "C": {"metrics": {"MAP@R": [0.2, 0.21]}}}
        >>> summary = summarize({"losses": runs, "before": {"MAP@R": [0.3, 0.31]}})
        >>> summary["best"], summary["tied"], list(summary["apart"]), summary["behind"]
        ('A', ['B'], ['C'], [])
    """
    runs = results["losses"]
    before = results["before"][metric]
    flat = [n for n in runs if max(runs[n].get("initial_gradient_norm", [1.0])) == 0.0]
    # one seed has no spread: no gap can be shown to exceed it, so nothing is ranked or set
    # apart by it (``single_seed``)
    single = len(before) < 2
    beats = [n for n in runs if n not in flat and not single
             and _beats(runs[n]["metrics"][metric], before)]  # fmt: skip
    apart = {n: _reason(runs[n], before, metric, n in flat) for n in runs
             if n not in beats and (not single or n in flat)}  # fmt: skip
    ranked = sorted(beats, key=lambda name: -mean_std(runs[name]["metrics"][metric])[0])
    best = ranked[0] if ranked else None
    top = runs[best]["metrics"][metric] if best else []
    tied = [n for n in ranked[1:] if not separated(runs[n]["metrics"][metric], top)]
    worse = [n for n in runs if mean_std(runs[n]["metrics"][metric])[0] < mean_std(before)[0]]
    return {
        "metric": metric,
        "single_seed": single,
        "best": best,
        "ranked": ranked,
        "tied": tied,
        "behind": [n for n in ranked[1:] if n not in tied],
        "apart": apart,
        "no_gradient": flat,
        "below_untrained": worse,
        "clearly_below_untrained": [n for n in worse if separated(runs[n]["metrics"][metric],
                                                                  before)],
    }  # fmt: skip


def _beats(values: Sequence[float], before: Sequence[float]) -> bool:
    """Mean above the untrained network's by more than the seed spread."""
    return mean_std(values)[0] > mean_std(before)[0] and separated(values, before)


def _reason(run: dict, before: Sequence[float], metric: str, flat: bool) -> dict:
    """What was measured of a loss listed apart: its gap to the untrained network against the
    spread, its gradient norms and its training loss (means over seeds where recorded)."""
    mean, std = mean_std(run["metrics"][metric])
    before_mean, before_std = mean_std(before)
    reason = {"gap": mean - before_mean, "spread": std + before_std, "no_gradient": flat}
    for key in ("initial_gradient_norm", "early_gradient_norm", "initial_loss", "final_loss"):
        if run.get(key):
            reason[key] = mean_std(run[key])[0]
    return reason
