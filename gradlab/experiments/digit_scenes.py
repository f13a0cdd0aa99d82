"""Image-caption retrieval on digit scenes: VSE++ and VSRN miniatures, three losses, per seed.

Bleeker & de Rijke (2022), appendix B, in miniature on :mod:`gradlab.data.digit_scenes`:

* **VSE++** (B.1): a frozen backbone (:class:`gradlab.models.DigitBackbone`, pre-trained on digit
  classification) over the whole canvas, its feature map pooled to a 6 x 6 grid, and a trained
  linear projection (:class:`gradlab.models.GlobalImageProjection`).
* **VSRN** (B.2, no caption decoder): the same backbone on each ground-truth digit box (the
  detector regions), a GCN over the regions and a GRU over the region sequence
  (:class:`gradlab.models.RegionRelationEncoder`).
* Both use the same caption encoder (:class:`gradlab.models.CaptionGRU`: word embeddings from
  scratch, a GRU); all embeddings on the unit sphere.

A batch holds ``batch_images`` scenes and their five captions each: an image query has 5 positive
captions, a caption query 1 positive image, as in the paper. Each encoder is trained with SmoothAP
(both directions), VSE++'s max-violation triplet loss and NT-Xent, from the same initialization
per seed and with the same batches. Evaluation on unseen scenes (unseen handwriting too):
Recall@1/5/10 in both directions and rsum (their sum, in percent). Over training, the gradient
anatomy (:func:`gradlab.functional.gradient_anatomy`, which reads ``dL/dS``) of each loss in
both directions: how many negatives per query receive gradient, the share of queries that
receive none, and the share of the negative gradient mass on the hardest 10 % of negatives; and
the geometry of the batch's embeddings (:mod:`gradlab.functional.geometry`): the alignment of
the positive pairs and the uniformity of each modality (Wang & Isola 2020, Eq. 4 and 5), each
modality's effective rank over ``min(N - 1, d)`` (RankMe, Garrido et al. 2023) and the
modality gap between their centroids (Liang et al. 2022).

The backbone is frozen, so its features are computed once per data set
(:func:`scene_features`); training then touches only the projection / region encoder and the
caption encoder.
"""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from gradlab.data.digit_scenes import (
    CAPTIONS_PER_IMAGE,
    DigitScenes,
    load_digit_scenes,
    vocabulary,
)
from gradlab.data.digit_strings import digit_pools
from gradlab.experiments.runtime import check_seeds, run_tasks, study_threads
from gradlab.experiments.statistics import mean_std, separated
from gradlab.functional import (
    gradient_anatomy,
    max_violation_triplet_loss,
    nt_xent_loss,
    recall_at_k,
    smooth_ap,
)
from gradlab.functional.geometry import alignment, effective_rank, modality_gap, uniformity
from gradlab.models import (
    CaptionGRU,
    DigitBackbone,
    GlobalImageProjection,
    RegionRelationEncoder,
    pretrain_digit_backbone,
)

GRID_POOL = 6
"""VSE++'s canvas feature map is average-pooled to ``GRID_POOL x GRID_POOL`` cells."""

KS = (1, 5, 10)


def smoothap_both_directions(
    scores: torch.Tensor, positives: torch.Tensor, tau: float = 0.01
) -> torch.Tensor:
    """``2 - mean AP(image -> caption) - mean AP(caption -> image)`` with SmoothAP
    (Bleeker & de Rijke, 2022)."""
    image_to_caption = smooth_ap(scores, positives, tau)
    caption_to_image = smooth_ap(scores.T.contiguous(), positives.T.contiguous(), tau)
    return 2.0 - image_to_caption.nanmean() - caption_to_image.nanmean()


LOSSES = {
    "SmoothAP": smoothap_both_directions,
    "VSE++ max-violation": max_violation_triplet_loss,
    "NT-Xent": nt_xent_loss,
}
"""Loss name -> ``loss(scores [images, captions], positives)``."""

ENCODERS = ("VSE++", "VSRN")


def scene_features(backbone: DigitBackbone, scenes: DigitScenes) -> dict[str, torch.Tensor]:
    """The frozen backbone's inputs for both encoders, computed once.

    Returns:
        ``{"global": [N, 16 * 36]`` pooled canvas features (VSE++), ``"regions": [N, 4, 66]``
        (each box's 64 features and its centre in ``[0, 1]`` coordinates; zeros after the
        scene's regions, VSRN), ``"counts": [N]``}.
    """
    device = next(backbone.parameters()).device
    images = scenes.images.to(device)
    with torch.no_grad():
        grid = F.adaptive_avg_pool2d(backbone.feature_map(images), GRID_POOL).flatten(1)
        count = len(images)
        rows = torch.arange(8, device=device)
        top = scenes.boxes[:, :, 0].to(device)
        left = scenes.boxes[:, :, 1].to(device)
        row_index = (top.unsqueeze(-1) + rows).clamp(max=images.shape[2] - 1)  # [N, 4, 8]
        col_index = (left.unsqueeze(-1) + rows).clamp(max=images.shape[3] - 1)
        batch_index = torch.arange(count, device=device).view(count, 1, 1, 1)
        crops = images[:, 0][batch_index, row_index.unsqueeze(-1), col_index.unsqueeze(-2)]
        features = backbone.region_features(crops.reshape(-1, 1, 8, 8)).reshape(count, 4, -1)
        centre = torch.stack([top + 4, left + 4], dim=-1).to(features.dtype) / images.shape[2]
        slots = torch.arange(4, device=device)
        valid = (slots < scenes.counts.to(device).unsqueeze(1)).unsqueeze(-1)
        regions = torch.cat([features, centre], dim=-1) * valid
    return {"global": grid, "regions": regions, "counts": scenes.counts.to(device)}


GLOBAL_FEATURES = "standardised per feature with the training scenes' mean and std"
"""How VSE++'s frozen global features enter its projection (recorded in the results).

The frozen digit backbone's pooled canvas features are all positive with a large common part
(raw, two scenes' features have a mean cosine of about 0.89), so the linear projection starts
with every image at nearly the same embedding; centred and scaled by the training scenes'
statistics (the test scenes use the same statistics), SmoothAP's VSE++ miniature trains too.
The same input for every loss."""


def standardise_global(
    train: dict[str, torch.Tensor], test: dict[str, torch.Tensor]
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """``(train, test)`` with ``"global"`` standardised by the training set's per-feature mean
    and std (a constant feature is only centred); the other entries unchanged.

    Example:
        >>> train, test = standardise_global({"global": torch.tensor([[1.0, 5.0], [3.0, 5.0]])},
        ...                                  {"global": torch.tensor([[2.0, 6.0]])})
        >>> train["global"].tolist(), test["global"].tolist()
        ([[-1.0, 0.0], [1.0, 0.0]], [[0.0, 1.0]])
    """
    mean = train["global"].mean(dim=0)
    std = train["global"].std(dim=0, unbiased=False)
    std = torch.where(std > 0, std, torch.ones_like(std))
    return ({**train, "global": (train["global"] - mean) / std},
            {**test, "global": (test["global"] - mean) / std})  # fmt: skip


def _image_encoder(kind: str, features: dict[str, torch.Tensor], dims: int) -> torch.nn.Module:
    if kind == "VSE++":
        return GlobalImageProjection(features["global"].shape[1], dims)
    return RegionRelationEncoder(features["regions"].shape[2], dims)


def _encode_images(kind: str, encoder, features: dict[str, torch.Tensor], index) -> torch.Tensor:
    if kind == "VSE++":
        return encoder(features["global"][index])
    return encoder(features["regions"][index], features["counts"][index])


def _one_direction_losses(name: str, tau: float):
    """``(loss_i2t, loss_t2i)`` of a loss, each a function of ``(scores, positives)``."""
    if name == "SmoothAP":
        return (
            lambda s, p: 1.0 - smooth_ap(s, p, tau).nanmean(),
            lambda s, p: 1.0 - smooth_ap(s.T.contiguous(), p.T.contiguous(), tau).nanmean(),
        )
    function = max_violation_triplet_loss if name == "VSE++ max-violation" else nt_xent_loss
    return (
        lambda s, p: function(s, p, direction="i2t"),
        lambda s, p: function(s, p, direction="t2i"),
    )


def _anatomy_record(name: str, scores: torch.Tensor, positives: torch.Tensor, tau: float):
    """``[2, 3]`` (i2t, t2i) x (mean active negatives per query, share of queries without
    gradient, hardest-10 % share of the negative gradient mass), on the device.

    Each direction's own term of the loss is differentiated apart (``dL_i2t/dS`` read by rows,
    ``dL_t2i/dS`` by columns), so one direction's gradient is not counted in the other's.
    """
    detached = scores.detach().requires_grad_(True)
    rows = []
    for loss_fn, transpose in zip(_one_direction_losses(name, tau), (False, True), strict=True):
        (grad,) = torch.autograd.grad(loss_fn(detached, positives), detached)
        grad, score, positive = (
            (grad.T, detached.detach().T, positives.T)
            if transpose
            else (grad, detached.detach(), positives)
        )
        anatomy = gradient_anatomy(grad, score, positive)
        rows.append(
            torch.stack(
                [
                    anatomy.active_negatives.double().mean(),
                    anatomy.without_gradient.double().mean(),
                    anatomy.hardest_10pct_share.nanmean(),
                ]
            )
        )
    return torch.stack(rows)


GEOMETRY_KEYS = ("alignment", "uniformity_images", "uniformity_captions", "rank_share_images",
                 "rank_share_captions", "modality_gap")  # fmt: skip
"""The geometry logged over training (:func:`geometry_record`), in its order."""


def geometry_record(images: torch.Tensor, captions: torch.Tensor, scores: torch.Tensor,
                     positives: torch.Tensor) -> torch.Tensor:  # fmt: skip
    """``[6]`` float64 on the device, in :data:`GEOMETRY_KEYS`' order: the alignment of the
    (image, caption) positives (Wang & Isola 2020, Eq. 4, from the cosine scores), the
    uniformity of the images and of the captions (Eq. 5), the effective rank of each over
    ``min(N - 1, d)`` (RankMe) and the modality gap between their centroids (Liang et al. 2022).
    The embeddings are unit vectors, so ``scores`` are cosines."""
    images, captions = images.detach(), captions.detach()
    return torch.stack([
        alignment(scores.detach(), positives),
        uniformity(images),
        uniformity(captions),
        effective_rank(images).share,
        effective_rank(captions).share,
        modality_gap(images, captions),
    ])  # fmt: skip


def scene_recall(
    kind: str,
    image_encoder: torch.nn.Module,
    caption_encoder: torch.nn.Module,
    features: dict[str, torch.Tensor],
    tokens: torch.Tensor,
) -> dict[str, float]:
    """Recall@K of trained encoders on scenes in both directions, and rsum: the evaluation of
    Bleeker & de Rijke (2022), as in VSE++ (Faghri et al., 2018).

    Every image is scored against every caption (cosines of the unit embeddings); an image's
    positives are its own captions, a caption's its own image. rsum is the sum of the six
    recalls in percent.

    Args:
        kind: ``"VSE++"`` (``image_encoder`` reads ``features["global"]``) or ``"VSRN"``
            (``features["regions"]`` and ``features["counts"]``).
        image_encoder: the trained image encoder of ``kind``.
        caption_encoder: the trained caption encoder (token rows -> unit embeddings).
        features: :func:`scene_features` of the scenes (standardised as in training).
        tokens: ``[N, captions per image, length]`` the scenes' captions.

    Returns:
        ``{"i2t_R@1": ..., "i2t_R@5", "i2t_R@10", "t2i_R@1", ..., "rsum"}`` (K in :data:`KS`).

    Example:
        >>> from gradlab.models import CaptionGRU, GlobalImageProjection
        >>> _ = torch.manual_seed(0)
        >>> features = {"global": torch.randn(4, 12)}
        >>> tokens = torch.randint(1, len(vocabulary()), (4, 5, 6))  # 4 scenes, 5 captions each
        >>> recall = scene_recall("VSE++", GlobalImageProjection(12, 8),
        ...                       CaptionGRU(len(vocabulary()), 8), features, tokens)
        >>> list(recall)
        ['i2t_R@1', 'i2t_R@5', 'i2t_R@10', 't2i_R@1', 't2i_R@5', 't2i_R@10', 'rsum']
        >>> recall["t2i_R@5"], recall["t2i_R@10"]  # a caption's image: always among 4 images
        (1.0, 1.0)
    """
    with torch.no_grad():
        images = _encode_images(kind, image_encoder, features, slice(None))
        captions = caption_encoder(tokens.reshape(-1, tokens.shape[-1]))
    scores = (images @ captions.T).double()
    relevant = torch.eye(len(images), dtype=torch.bool, device=scores.device)
    relevant = relevant.repeat_interleave(tokens.shape[1], dim=1)
    i2t = recall_at_k(scores, relevant, KS)
    t2i = recall_at_k(scores.T.contiguous(), relevant.T.contiguous(), KS)
    result = {f"i2t_R@{k}": i2t[k] for k in KS} | {f"t2i_R@{k}": t2i[k] for k in KS}
    result["rsum"] = 100.0 * sum(result.values())
    return result


def _train_one(
    kind: str,
    loss_name: str,
    initial: tuple[torch.nn.Module, torch.nn.Module],
    features: dict[str, torch.Tensor],
    tokens: torch.Tensor,
    batches: list[torch.Tensor],
    log_every: int,
    lr: float,
    tau: float,
) -> tuple[torch.nn.Module, torch.nn.Module, list[float], list[int], torch.Tensor,
           torch.Tensor]:  # fmt: skip
    image_encoder, caption_encoder = (copy.deepcopy(m) for m in initial)
    parameters = list(image_encoder.parameters()) + list(caption_encoder.parameters())
    optimizer = torch.optim.Adam(parameters, lr=lr)
    loss_fn = LOSSES[loss_name]
    if loss_name == "SmoothAP":
        loss_fn = lambda s, p: smoothap_both_directions(s, p, tau)  # noqa: E731
    per_image = tokens.shape[1]
    device = tokens.device
    positives = None
    losses, logged_steps, records, geometry = [], [], [], []
    for step, batch in enumerate(batches):
        batch = batch.to(device)
        images = _encode_images(kind, image_encoder, features, batch)
        captions = caption_encoder(tokens[batch].reshape(-1, tokens.shape[-1]))
        if positives is None or positives.shape[0] != len(batch):
            positives = torch.eye(len(batch), dtype=torch.bool, device=device)
            positives = positives.repeat_interleave(per_image, dim=1)
        scores = images @ captions.T
        logging = step % log_every == 0 or step == len(batches) - 1
        loss = loss_fn(scores, positives)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
        if logging:
            logged_steps.append(step)
            records.append(_anatomy_record(loss_name, scores, positives, tau))
            geometry.append(geometry_record(images, captions, scores, positives))
    history = torch.stack(losses).cpu().tolist()
    return (image_encoder, caption_encoder, history, logged_steps, torch.stack(records).cpu(),
            torch.stack(geometry).cpu())  # fmt: skip


def settings(quick: bool) -> dict:
    """The sizes of the study (quick: seconds per run; full: the report's setting)."""
    if quick:
        return {"train_scenes": 200, "test_scenes": 100, "steps": 20, "batch_images": 32,
                "dims": 64, "lr": 2e-3, "log_every": 5}  # fmt: skip
    return {"train_scenes": 2000, "test_scenes": 500, "steps": 300, "batch_images": 32,
            "dims": 64, "lr": 2e-3, "log_every": 25}  # fmt: skip


def measure(
    quick: bool = True,
    seeds: tuple[int, ...] = (0, 1, 2),
    device: str = "cpu",
    encoders: tuple[str, ...] = ENCODERS,
    losses: tuple[str, ...] = tuple(LOSSES),
    tau: float = 0.01,
    workers: int | None = None,
) -> dict:
    """Train each encoder with each loss for every seed; recall both ways and the anatomy.

    Every (seed, encoder, loss) is one task (:func:`gradlab.experiments.runtime.run_tasks`)
    that rebuilds the seed's scenes, backbone, initialization and batches from the seed alone
    (once per process), so the numbers are the same whether the tasks run here one after the
    other or on worker processes.

    Args:
        quick: small data and 20 steps (for tests); the full run uses 2000 training and 500
            test scenes and 300 steps.
        seeds: each fixes the scenes, the backbone's pre-training, the initialization and the
            batch order (shared by all losses of that seed).
        device: torch device.
        encoders: a subset of ``("VSE++", "VSRN")``.
        losses: a subset of :data:`LOSSES`.
        tau: SmoothAP's temperature.
        workers: worker processes (``None``: those of the enclosing
            :func:`gradlab.experiments.runtime.study_workers` block, 1 outside any).

    Returns:
        ``{"settings", "seeds", "runs": {encoder: {loss: {"recall": {metric: [per seed]},
        "loss_history": [[per step] per seed], "anatomy": {"steps": [...], direction:
        {quantity: [[per logged step] per seed]}}, "geometry": {quantity: [[per logged step]
        per seed]}}}}, "backbone_accuracy": [per seed]}`` (the geometry's quantities:
        :data:`GEOMETRY_KEYS`, at the anatomy's steps).

    Raises:
        GradlabError: ``seeds`` empty, repeated, or not whole numbers >= 0.
    """
    seeds, encoders, losses = tuple(check_seeds(seeds)), tuple(encoders), tuple(losses)
    config = settings(quick)
    tasks = [(quick, seed, device, kind, name, tau)
             for seed in seeds for kind in (None, *encoders)
             for name in ((None,) if kind is None else losses)]  # fmt: skip
    outputs = run_tasks(
        _scene_task, tasks, stage="digit scenes",
        names=[f"seed {task[1]}" for task in tasks],
        parts=[f"{task[3]}, {task[4]}" if task[3] else "backbone" for task in tasks],
        detail=f"{_count(len(encoders), 'encoder')} x {_count(len(losses), 'loss')} trained",
        workers=workers,
    )  # fmt: skip
    runs: dict = {kind: {name: _empty_run() for name in losses} for kind in encoders}
    accuracies = []
    for (_, _, _, kind, name, _), output in zip(tasks, outputs, strict=True):
        if kind is None:
            accuracies.append(output)
        else:
            _append(runs[kind][name], *output)
    return {"settings": {**config, "tau": tau, "captions_per_image": CAPTIONS_PER_IMAGE,
                         "global_features": GLOBAL_FEATURES},
            "seeds": list(seeds), "runs": runs,
            "backbone_accuracy": accuracies}  # fmt: skip


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "es" if noun.endswith("s") else "s")


@functools.lru_cache(maxsize=2)
def _seed_setup(quick: bool, seed: int, device: str) -> tuple:
    """``(backbone accuracy, train features, test features, train tokens, test tokens,
    batches)`` of one seed, computed once per process (read, never changed, by its tasks)."""
    config = settings(quick)
    train = load_digit_scenes(config["train_scenes"], "train", seed=seed)
    test = load_digit_scenes(config["test_scenes"], "test", seed=seed)
    pools = digit_pools(torch.Generator().manual_seed(seed))
    backbone = _pretrained_backbone(pools, seed, device)
    accuracy = backbone_accuracy(backbone, pools[1], device)
    train_features, test_features = standardise_global(
        scene_features(backbone, train), scene_features(backbone, test)
    )
    train_tokens, test_tokens = train.tokens.to(device), test.tokens.to(device)
    generator = torch.Generator().manual_seed(seed)
    batches = [
        torch.randperm(config["train_scenes"], generator=generator)[: config["batch_images"]]
        for _ in range(config["steps"])
    ]
    return accuracy, train_features, test_features, train_tokens, test_tokens, batches


def _scene_task(quick: bool, seed: int, device: str, kind: str | None, name: str | None,
                tau: float):  # fmt: skip
    """One task of :func:`measure`: the seed's backbone accuracy (``kind`` None), or one
    encoder trained with one loss: ``(recall, loss history, logged steps, anatomy,
    geometry)``."""
    with study_threads(device):
        setup = _seed_setup(quick, seed, device)
        if kind is None:
            return setup[0]
        return _scene_run(quick, seed, device, kind, name, tau, setup)


def _scene_run(quick, seed, device, kind, name, tau, setup) -> tuple:
    config = settings(quick)
    _, train_features, test_features, train_tokens, test_tokens, batches = setup
    torch.manual_seed(seed)
    initial = (
        _image_encoder(kind, train_features, config["dims"]).to(device),
        CaptionGRU(len(vocabulary()), config["dims"]).to(device),
    )
    image_encoder, caption_encoder, history, steps, anatomy, geometry = _train_one(
        kind, name, initial, train_features, train_tokens, batches,
        config["log_every"], config["lr"], tau,
    )  # fmt: skip
    recall = scene_recall(kind, image_encoder, caption_encoder, test_features, test_tokens)
    return recall, history, steps, anatomy, geometry


ANATOMY_KEYS = ("active_negatives", "share_without_gradient", "hardest_10pct_share")


def _empty_run() -> dict:
    return {
        "recall": {},
        "loss_history": [],
        "anatomy": {
            "steps": [],
            "i2t": {k: [] for k in ANATOMY_KEYS},
            "t2i": {k: [] for k in ANATOMY_KEYS},
        },
        "geometry": {k: [] for k in GEOMETRY_KEYS},
    }


def _append(run: dict, recall: dict, history: list, steps: list, anatomy: torch.Tensor,
            geometry: torch.Tensor) -> None:  # fmt: skip
    for metric, value in recall.items():
        run["recall"].setdefault(metric, []).append(value)
    run["loss_history"].append(history)
    run["anatomy"]["steps"] = steps
    for d, direction in enumerate(("i2t", "t2i")):
        for q, key in enumerate(ANATOMY_KEYS):
            run["anatomy"][direction][key].append(anatomy[:, d, q].tolist())
    for q, key in enumerate(GEOMETRY_KEYS):
        run["geometry"][key].append(geometry[:, q].tolist())


def _pretrained_backbone(pools, seed: int, device: str) -> DigitBackbone:
    images = torch.cat(pools[0]).to(device)
    labels = torch.cat([torch.full((len(p),), v) for v, p in enumerate(pools[0])]).to(device)
    return pretrain_digit_backbone(images, labels, seed=seed)


def backbone_accuracy(
    backbone: torch.nn.Module, test_pools: Sequence[torch.Tensor], device: str
) -> float:
    """The digit classifier's accuracy on held-out digits, computed on ``device``.

    Args:
        backbone: a classifier of ``[n, 1, 8, 8]`` digits into ``[n, 10]`` logits (the
            pre-trained :class:`gradlab.models.DigitBackbone`), on ``device``.
        test_pools: per digit value 0-9, a ``[n_v, 8, 8]`` tensor of its held-out images (the
            test pools of :func:`gradlab.data.digit_strings.digit_pools`).
        device: where the digits are classified; only the accuracy is read back.

    Returns:
        The share of the pooled digits whose largest logit is their value.

    Example:
        >>> pools = [torch.full((3, 8, 8), value / 10) for value in range(10)]
        >>> class ReadsTheInk(torch.nn.Module):  # the class nearest to the mean pixel x 10
        ...     def forward(self, digits):
        ...         ink = digits.mean(dim=(1, 2, 3)).unsqueeze(1) * 10
        ...         return -(ink - torch.arange(10)) ** 2
        >>> backbone_accuracy(ReadsTheInk(), pools, "cpu")
        1.0
        >>> backbone_accuracy(ReadsTheInk(), [pools[1]] * 10, "cpu")  # every digit read as a 1
        0.1
    """
    images = torch.cat(test_pools).to(device).reshape(-1, 1, 8, 8)
    labels = torch.cat([torch.full((len(p),), v) for v, p in enumerate(test_pools)]).to(device)
    with torch.no_grad():
        return (backbone(images).argmax(dim=1) == labels).double().mean().item()


DIRECTIONS = ("i2t", "t2i")
"""Image -> caption and caption -> image retrieval."""


def chance_recall_at_1(results: dict) -> dict[str, float]:
    """R@1 of random scores on the test set, per direction, from its sizes in ``settings``.

    An image query has ``captions_per_image`` positives among ``test_scenes *
    captions_per_image`` captions, a caption query 1 positive among ``test_scenes`` images; a
    random ranking puts a positive first with probability positives / candidates.

    Example:
        >>> chance_recall_at_1({"settings": {"test_scenes": 500, "captions_per_image": 5}})
        {'i2t': 0.002, 't2i': 0.002}
    """
    config = results["settings"]
    scenes = config["test_scenes"]
    per_image = config.get("captions_per_image", CAPTIONS_PER_IMAGE)
    return {"i2t": per_image / (scenes * per_image), "t2i": 1 / scenes}


CHANCE_FACTOR = 2.0
"""A loss is compared only if its mean R@1 is at least this many times chance both ways."""

COLLAPSE_COSINE = 0.9
"""Two unit embeddings whose cosine is above this nearly coincide (squared distance below
``2 - 2 * 0.9 = 0.2``)."""

COLLAPSE_SHARE = 0.1
"""A modality has collapsed when at most this share of its pairs is farther apart than
:data:`COLLAPSE_COSINE` allows (at least 90 % nearly coincide)."""


def collapse_uniformity(t: float = 2.0) -> float:
    """The uniformity (Wang & Isola 2020, Eq. 5, ``log mean exp(-t |u - v|^2)``, kernel ``t``)
    above which a modality has collapsed: pairs at squared distance above ``D = 2 - 2 *``
    :data:`COLLAPSE_COSINE` add at most ``exp(-t D)`` each to the mean and the others at most
    1, so a share ``s`` of such pairs keeps the mean at most ``1 - s (1 - exp(-t D))``; a
    uniformity above ``log(1 -`` :data:`COLLAPSE_SHARE` ``(1 - exp(-t D)))`` leaves at most
    that share of the pairs farther apart than ``D``.

    Example:
        >>> round(collapse_uniformity(), 4)
        -0.0335
    """
    far = 2 - 2 * COLLAPSE_COSINE
    return math.log(1 - COLLAPSE_SHARE * (1 - math.exp(-t * far)))


def summarize(results: dict) -> dict:
    """The verdicts on a :func:`measure` result, computed once for every text that words them.

    A (encoder, loss) is compared only if its mean R@1 is at least :data:`CHANCE_FACTOR` times
    chance (:func:`chance_recall_at_1`) in both directions and its embeddings did not collapse
    (:func:`collapse_uniformity`); the others are listed ``apart[encoder][loss]`` with their
    measured numbers (mean R@1 each way, and the training loss at the first step and over the
    last 10 steps, means over seeds), ``below_chance`` (True: it never trained),
    ``below_gate`` (the directions, of :data:`DIRECTIONS`, whose mean R@1 is below the gate: one
    direction may have trained) and, where a
    modality collapsed (whether or not the run is below chance), ``collapsed``: that
    modality's mean uniformity at the last logged step. They are never ranked. Among the
    compared: ``best_recall_at_1[direction]``, the pair with the highest mean R@1 that way
    (None when none is compared), and ``tied``, the pairs within its seed spread (gap below
    the sum of the two stds); ``best_rsum[encoder]``, that encoder's compared loss
    with the highest mean rsum (``loss`` None when none) and its ``tied`` losses.

    Example:
        >>> recall = lambda r1, rsum: {"recall": {"i2t_R@1": r1, "t2i_R@1": r1, "rsum": rsum}}
        >>> runs = {"VSE++": {"SmoothAP": recall([0.5, 0.6], [300, 310]),
        ...                   "NT-Xent": recall([0.2, 0.21], [200, 201]),
        ...                   "VSE++ max-violation": recall([0.01, 0.0], [3, 2])}}
        >>> summary = summarize({"runs": runs, "settings": {"test_scenes": 100}})
        >>> summary["best_recall_at_1"]["t2i"], summary["best_rsum"]["VSE++"]
        ({'encoder': 'VSE++', 'loss': 'SmoothAP', 'tied': []}, {'loss': 'SmoothAP', 'tied': []})
        >>> list(summary["apart"]["VSE++"])
        ['VSE++ max-violation']
    """
    chance = chance_recall_at_1(results)
    apart: dict = {}
    compared: dict = {}
    for encoder, runs in results["runs"].items():
        apart[encoder] = {}
        for loss, run in runs.items():  # below chance, or collapsed, or both
            below, collapsed = _below_gate(run, chance), _collapsed(run)
            if below or collapsed:
                apart[encoder][loss] = {**_apart_numbers(run), "below_chance": bool(below),
                                        "below_gate": below,
                                        **({"collapsed": collapsed} if collapsed else {})}
        compared[encoder] = {loss: run for loss, run in runs.items() if loss not in apart[encoder]}
    best_recall = {}
    for direction in DIRECTIONS:
        key = f"{direction}_R@1"
        entries = {(encoder, loss): run["recall"][key]
                   for encoder, runs in compared.items()
                   for loss, run in runs.items()}  # fmt: skip
        best_recall[direction] = _best(entries)
        if best_recall[direction]:
            best, tied = best_recall[direction]
            best_recall[direction] = {"encoder": best[0], "loss": best[1],
                                      "tied": [list(k) for k in tied]}  # fmt: skip
    best_rsum = {}
    for encoder, runs in compared.items():
        found = _best({loss: run["recall"]["rsum"] for loss, run in runs.items()})
        best_rsum[encoder] = {"loss": found[0], "tied": found[1]} if found else {
            "loss": None, "tied": []}
    return {"chance": chance, "chance_factor": CHANCE_FACTOR, "apart": apart,
            "collapse": {"uniformity": collapse_uniformity(), "cosine": COLLAPSE_COSINE,
                         "share": COLLAPSE_SHARE},
            "best_recall_at_1": best_recall, "best_rsum": best_rsum}  # fmt: skip


def _collapsed(run: dict) -> dict[str, float]:
    """The modalities whose mean (over seeds) uniformity at the last logged step is above
    :func:`collapse_uniformity`, with that mean; empty when none (or no geometry logged)."""
    geometry = run.get("geometry") or {}
    found = {}
    for modality in ("images", "captions"):
        seeds = geometry.get(f"uniformity_{modality}")
        if seeds:
            mean = mean_std([seed[-1] for seed in seeds])[0]
            if mean > collapse_uniformity():
                found[modality] = mean
    return found


def _below_gate(run: dict, chance: dict[str, float]) -> list[str]:
    """The directions whose mean R@1 is below :data:`CHANCE_FACTOR` times chance."""
    return [d for d in DIRECTIONS
            if not mean_std(run["recall"][f"{d}_R@1"])[0] >= CHANCE_FACTOR * chance[d]]


def _apart_numbers(run: dict) -> dict:
    """What was measured of a run listed apart: mean R@1 each way, and its training loss at the
    first step and over the last 10 (means over seeds, where the history is recorded)."""
    numbers = {f"{d}_R@1": mean_std(run["recall"][f"{d}_R@1"])[0] for d in DIRECTIONS}
    if run.get("loss_history"):
        numbers["initial_loss"] = mean_std([h[0] for h in run["loss_history"]])[0]
        numbers["final_loss"] = mean_std([mean_std(h[-10:])[0] for h in run["loss_history"]])[0]
    return numbers


def _best(entries: dict) -> tuple | None:
    """``(key with the highest mean, [keys within its seed spread])``; None if no entries."""
    if not entries:
        return None
    best = max(entries, key=lambda k: mean_std(entries[k])[0])
    return best, [k for k in entries if k != best and not separated(entries[k], entries[best])]
