"""The digit-scenes study (Bleeker & de Rijke 2022, app. B, in miniature) trained at its smallest:
random stand-in scenes and digit pools, a backbone with random weights, 4 steps of 4 scenes. Each
(encoder, loss)'s numbers land under its names, all losses of a seed start from one
initialization on the same batches, the seed is honoured, and the anatomy, geometry and recall
are those of the protocol of the module's docstring run by hand from public pieces."""

from __future__ import annotations

import copy
import json
import math
import os
from pathlib import Path

import pytest
import torch

from gradlab.data.digit_scenes import DigitScenes, vocabulary
from gradlab.experiments import digit_scenes
from gradlab.experiments.runtime import StudyError
from gradlab.functional import (
    gradient_anatomy,
    max_violation_triplet_loss,
    nt_xent_loss,
    smooth_ap,
)
from gradlab.models import CaptionGRU, DigitBackbone, GlobalImageProjection, RegionRelationEncoder
from tests.helpers.default_device import assert_unchanged_under_another_default_device
from tests.reference import score_losses_loops, smooth_ap_loops
from tests.reference.retrieval_loops import recall_at_k

TINY = {"train_scenes": 10, "test_scenes": 6, "steps": 4, "batch_images": 4, "dims": 8,
        "lr": 2e-3, "log_every": 2}  # fmt: skip
# the stand-in for the full setting: every size differs from TINY, so a run that asked for the
# full setting anywhere (the quick flag lost on the way) shows it
NOT_QUICK = {"train_scenes": 12, "test_scenes": 7, "steps": 6, "batch_images": 3, "dims": 6,
             "lr": 1e-3, "log_every": 4}  # fmt: skip


def _fresh_seeds() -> tuple[int, int]:
    """Two seeds no other process has used: the study keeps each seed's setup for the life of
    its process, and a process forked from one that ran the study (as a mutation tool forks a
    child per mutant) inherits that cache; taken from the pid when the run starts, so each
    process computes its own setup."""
    first = 100 + os.getpid()
    return first, first + 1
TAU = 0.05


def _stand_in_scenes(num_scenes, split="train", seed=0):
    generator = torch.Generator().manual_seed(seed * 2 + (split == "test"))
    counts = torch.randint(2, 5, (num_scenes,), generator=generator)
    corners = torch.randint(0, 23, (num_scenes, 4, 2), generator=generator)
    boxes = torch.cat([corners, corners + 8], dim=-1)
    boxes = boxes * (torch.arange(4) < counts.unsqueeze(1)).unsqueeze(-1)
    tokens = torch.randint(1, len(vocabulary()), (num_scenes, 5, 6), generator=generator)
    return DigitScenes(torch.rand(num_scenes, 1, 30, 30, generator=generator), None, boxes,
                       None, counts, None, tokens)  # fmt: skip


def _stand_in_pools(generator):
    """Pools whose images all hold their digit's value / 10: a label can be read off its image."""
    sizes = torch.randint(3, 6, (2, 10), generator=generator)
    return tuple([torch.full((int(n), 8, 8), v / 10) for v, n in enumerate(row)] for row in sizes)


def _stand_in_backbone(images, labels, seed):
    assert torch.equal(labels, (images.mean(dim=(1, 2)) * 10).round().long())
    torch.manual_seed(seed)
    return DigitBackbone()


def _run(seeds):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(digit_scenes, "settings", lambda quick: dict(TINY if quick else NOT_QUICK))
        patch.setattr(digit_scenes, "load_digit_scenes", _stand_in_scenes)
        patch.setattr(digit_scenes, "digit_pools", _stand_in_pools)
        patch.setattr(digit_scenes, "pretrain_digit_backbone", _stand_in_backbone)
        return digit_scenes.measure(seeds=seeds, tau=TAU, workers=1)  # quick by default


def _smoothap_loop(scores, positives, tau, directions=("i2t", "t2i")):
    total = 0.0
    for direction in directions:
        s, p = (scores, positives) if direction == "i2t" else (scores.T, positives.T)
        aps = [smooth_ap_loops.smooth_ap_one_query(r, q, tau)
               for r, q in zip(s.tolist(), p.tolist(), strict=True)]  # fmt: skip
        total += 1.0 - math.fsum(aps) / len(aps)
    return total


def _score_loss_loop(name, option):
    return lambda s, p: score_losses_loops.score_loss(name, s.tolist(), p.tolist(), option)[0]


LOOPS = {  # the papers' losses as loops at the study's settings
    "SmoothAP": lambda s, p: _smoothap_loop(s.double(), p, TAU),
    "VSE++ max-violation": _score_loss_loop("triplet", 0.2),
    "NT-Xent": _score_loss_loop("nt_xent", 0.1),
}
DIRECTED = {  # each direction's own term, for the anatomy
    "SmoothAP": lambda d: lambda s, p: (
        1.0 - smooth_ap(*((s, p) if d == "i2t" else (s.T, p.T)), TAU).nanmean()),
    "VSE++ max-violation": lambda d: lambda s, p: max_violation_triplet_loss(s, p, direction=d),
    "NT-Xent": lambda d: lambda s, p: nt_xent_loss(s, p, direction=d),
}  # fmt: skip


def _setup(seed):
    """The seed's data, features and batches, by hand."""
    train, test = _stand_in_scenes(10, "train", seed), _stand_in_scenes(6, "test", seed)
    pools = _stand_in_pools(torch.Generator().manual_seed(seed))
    torch.manual_seed(seed)
    backbone = DigitBackbone()
    train_features = digit_scenes.scene_features(backbone, train)
    test_features = digit_scenes.scene_features(backbone, test)
    mean = train_features["global"].mean(dim=0)
    std = train_features["global"].std(dim=0, unbiased=False)
    std[std == 0] = 1.0  # a constant feature is only centred
    train_features["global"] = (train_features["global"] - mean) / std
    test_features["global"] = (test_features["global"] - mean) / std
    generator = torch.Generator().manual_seed(seed)
    batches = [torch.randperm(10, generator=generator)[:4] for _ in range(4)]
    images = torch.cat(pools[1]).reshape(-1, 1, 8, 8)
    labels = torch.cat([torch.full((len(p),), v) for v, p in enumerate(pools[1])])
    with torch.no_grad():
        accuracy = (backbone(images).argmax(dim=1) == labels).double().mean().item()
    return accuracy, train, test, train_features, test_features, batches


def _encoders(kind, seed, features):
    torch.manual_seed(seed)
    image = (GlobalImageProjection(features["global"].shape[1], 8) if kind == "VSE++"
             else RegionRelationEncoder(features["regions"].shape[2], 8))  # fmt: skip
    return image, CaptionGRU(len(vocabulary()), 8)


def _images(kind, encoder, features, index):
    if kind == "VSE++":
        return encoder(features["global"][index])
    return encoder(features["regions"][index], features["counts"][index])


POSITIVES = torch.eye(4, dtype=torch.bool).repeat_interleave(5, dim=1)


def _each_run_lands_under_its_encoder_and_loss_and_starts_from_the_seeds_network(run, seeds):
    assert run["seeds"] == list(seeds)
    assert list(run["runs"]) == ["VSE++", "VSRN"]
    for kind, runs in run["runs"].items():
        assert list(runs) == ["SmoothAP", "VSE++ max-violation", "NT-Xent"]
        for s, seed in enumerate(seeds):
            _, train, _, features, _, batches = _setup(seed)
            image_encoder, caption_encoder = _encoders(kind, seed, features)
            images = _images(kind, image_encoder, features, batches[0])
            captions = caption_encoder(train.tokens[batches[0]].reshape(20, -1))
            scores = (images @ captions.T).detach()
            for name, result in runs.items():
                expected = LOOPS[name](scores.double(), POSITIVES)
                assert result["loss_history"][s][0] == pytest.approx(expected, rel=1e-4), (
                    kind, name, seed)  # fmt: skip
                assert len(result["loss_history"][s]) == 4


def _the_seed_fixes_the_backbone_and_the_accuracy_is_read_on_the_test_pools(run, seeds):
    assert run["backbone_accuracy"] == pytest.approx([_setup(seed)[0] for seed in seeds])
    histories = run["runs"]["VSRN"]["NT-Xent"]["loss_history"]
    assert histories[0] != histories[1]


def _the_settings_record_the_temperature_and_the_caption_count(run):
    config = run["settings"]
    assert (config["tau"], config["captions_per_image"]) == (TAU, 5)
    assert config["steps"] == 4 and "standardised" in config["global_features"]
    assert {key: config[key] for key in TINY} == TINY  # the quick setting, asked for by default


def _anatomy_and_geometry_are_read_at_the_logged_steps_each_direction_apart(run, seeds):
    _, train, _, features, _, batches = _setup(seeds[1])
    for kind in ("VSE++", "VSRN"):
        image_encoder, caption_encoder = _encoders(kind, seeds[1], features)
        with torch.no_grad():
            images = _images(kind, image_encoder, features, batches[0])
            captions = caption_encoder(train.tokens[batches[0]].reshape(20, -1))
        scores = images @ captions.T
        geometry = digit_scenes.geometry_record(images, captions, scores, POSITIVES)
        for name, result in run["runs"][kind].items():
            assert result["anatomy"]["steps"] == [0, 2, 3]  # every 2nd step and the last
            assert set(result["anatomy"]) == {"steps", "i2t", "t2i"}
            for q, key in enumerate(digit_scenes.GEOMETRY_KEYS):
                assert len(result["geometry"][key][1]) == 3
                expected = pytest.approx(geometry[q].item(), rel=1e-4, abs=1e-6)
                assert result["geometry"][key][1][0] == expected, (kind, name, key)
            for direction in ("i2t", "t2i"):
                leaf = scores.clone().requires_grad_(True)
                (grad,) = torch.autograd.grad(DIRECTED[name](direction)(leaf, POSITIVES), leaf)
                if direction == "t2i":
                    grad, read, positive = grad.T, scores.T, POSITIVES.T
                else:
                    read, positive = scores, POSITIVES
                anatomy = gradient_anatomy(grad, read, positive)
                expected = {
                    "active_negatives": anatomy.active_negatives.double().mean().item(),
                    "share_without_gradient": anatomy.without_gradient.double().mean().item(),
                    "hardest_10pct_share": anatomy.hardest_10pct_share.nanmean().item(),
                }
                found = {k: v[1][0] for k, v in result["anatomy"][direction].items()}
                assert found == pytest.approx(expected, rel=1e-4, abs=1e-6, nan_ok=True), (
                    kind, name, direction)  # fmt: skip


def _recall_is_that_of_the_encoders_trained_by_hand(run, kind, name, seed):
    _, train, test, features, test_features, batches = _setup(seed)
    image_encoder, caption_encoder = (copy.deepcopy(m) for m in _encoders(kind, seed, features))
    optimizer = torch.optim.Adam([*image_encoder.parameters(), *caption_encoder.parameters()],
                                 lr=2e-3)  # fmt: skip
    for batch in batches:
        scores = _images(kind, image_encoder, features, batch) @ caption_encoder(
            train.tokens[batch].reshape(20, -1)).T  # fmt: skip
        loss = sum(DIRECTED[name](d)(scores, POSITIVES) for d in ("i2t", "t2i"))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        scores = (_images(kind, image_encoder, test_features, slice(None)) @ caption_encoder(
            test.tokens.reshape(30, -1)).T).double()  # fmt: skip
    relevant = torch.eye(6, dtype=torch.bool).repeat_interleave(5, dim=1)
    expected = {f"i2t_R@{k}": recall_at_k(scores, relevant, k) for k in (1, 5, 10)}
    expected |= {f"t2i_R@{k}": recall_at_k(scores.T, relevant.T, k) for k in (1, 5, 10)}
    expected["rsum"] = 100 * sum(expected.values())
    found = {metric: values[0] for metric, values in run["runs"][kind][name]["recall"].items()}
    assert found == pytest.approx(expected, abs=1e-9)


def test_smoothap_both_ways_matches_a_loop():
    generator = torch.Generator().manual_seed(0)
    scores = torch.rand(3, 15, generator=generator, dtype=torch.float64) * 2 - 1
    positives = torch.eye(3, dtype=torch.bool).repeat_interleave(5, dim=1)
    for tau in (0.01, 0.2):
        found = digit_scenes.smoothap_both_directions(scores, positives, tau).item()
        assert found == pytest.approx(_smoothap_loop(scores, positives, tau), rel=1e-12)
    assert digit_scenes.smoothap_both_directions(scores, positives).item() == pytest.approx(
        _smoothap_loop(scores, positives, 0.01), rel=1e-12)  # fmt: skip


def test_global_features_are_standardised_with_the_training_statistics_only():
    train = {"global": torch.tensor([[1.0, 4.0, 2.0], [3.0, 4.0, 6.0]]), "counts": torch.ones(2)}
    test = {"global": torch.tensor([[5.0, 3.0, 4.0]]), "regions": torch.zeros(1)}
    train_out, test_out = digit_scenes.standardise_global(train, test)
    # per feature: mean (2, 4, 4), population std (1, -, 2); the constant feature only centred
    assert train_out["global"].tolist() == [[-1.0, 0.0, -1.0], [1.0, 0.0, 1.0]]
    assert test_out["global"].tolist() == [[3.0, -1.0, 0.0]]
    assert train_out["counts"] is train["counts"] and test_out["regions"] is test["regions"]


class _StopError(Exception):
    """Ends a run once its tasks are laid out."""


def _laid_out(monkeypatch, **measure_options) -> dict:
    """The options and tasks ``measure(**measure_options)`` hands to ``run_tasks`` (which then
    stops the study before any training)."""
    seen = {}

    def laid_out(function, tasks, **options):
        seen.update(options, tasks=tasks)
        raise _StopError

    monkeypatch.setattr(digit_scenes, "run_tasks", laid_out)
    with pytest.raises(_StopError):
        digit_scenes.measure(**measure_options)
    return seen


@pytest.mark.parametrize(
    ("encoders", "losses", "words"),
    [
        (("VSRN",), ("NT-Xent",), "1 encoder x 1 loss trained"),
        (("VSE++", "VSRN"), ("NT-Xent", "SmoothAP"), "2 encoders x 2 losses trained"),
    ],
)
def test_progress_counts_the_encoders_and_losses_trained_per_seed(
    monkeypatch, encoders, losses, words
):
    seen = _laid_out(monkeypatch, seeds=(3, 8), encoders=encoders, losses=losses, tau=0.2)
    assert seen["detail"] == words
    per_seed = 1 + len(encoders) * len(losses)  # the backbone, then each trained pair
    assert seen["names"] == ["seed 3"] * per_seed + ["seed 8"] * per_seed
    assert seen["parts"][:per_seed] == ["backbone"] + [
        f"{e}, {n}" for e in encoders for n in losses]  # fmt: skip
    assert {task[5] for task in seen["tasks"]} == {0.2}


def test_the_documented_defaults_lay_out_the_quick_study_of_three_seeds_on_the_cpu(monkeypatch):
    seen = _laid_out(monkeypatch)
    assert seen["stage"] == "digit scenes"  # how the progress lines and errors name the study
    assert seen["workers"] is None  # those of the enclosing study_workers block
    assert list(dict.fromkeys(seen["names"])) == ["seed 0", "seed 1", "seed 2"]
    assert seen["parts"][:7] == ["backbone", "VSE++, SmoothAP", "VSE++, VSE++ max-violation",
                                 "VSE++, NT-Xent", "VSRN, SmoothAP",
                                 "VSRN, VSE++ max-violation", "VSRN, NT-Xent"]  # fmt: skip
    # quick, on the CPU, SmoothAP's temperature 0.01
    assert {(task[0], task[2], task[5]) for task in seen["tasks"]} == {(True, "cpu", 0.01)}
    with pytest.raises(_StopError):
        digit_scenes.measure(seeds=(4,), workers=3)
    assert seen["workers"] == 3


def test_the_quick_study_trains_20_steps():
    assert digit_scenes.settings(True)["steps"] == 20  # measure's documented quick run


def test_a_task_on_the_cpu_runs_its_kernels_on_one_thread(monkeypatch):
    threads = []

    def scenes(num_scenes, split="train", seed=0):
        threads.append(torch.get_num_threads())
        raise _StopError

    monkeypatch.setattr(digit_scenes, "load_digit_scenes", scenes)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with pytest.raises(StudyError):
            digit_scenes.measure(seeds=(4,), encoders=(), workers=1)
        assert torch.get_num_threads() == 2  # and the setting is restored
    finally:
        torch.set_num_threads(before)
    assert threads == [1]


class _DeviceBackbone(DigitBackbone):
    """A backbone with random weights that notes the device of the digits it classifies."""

    def __init__(self, seen):
        super().__init__()
        self.seen = seen

    def forward(self, digits):
        self.seen.setdefault("classified_on", []).append(digits.device.type)
        return super().forward(digits)


def _on_meta(monkeypatch, seen):
    """The study at TINY's sizes on the meta device (the stand-in for an accelerator: its
    tensors hold no data, so mixing one with a CPU tensor raises, and so does reading a
    number off it); the pre-training notes where its digits and labels are."""

    def pretrain(images, labels, seed):
        seen["pretrained_on"] = (images.device.type, labels.device.type)
        return _DeviceBackbone(seen).to("meta")

    monkeypatch.setattr(digit_scenes, "settings", lambda quick: dict(TINY))
    monkeypatch.setattr(digit_scenes, "load_digit_scenes", _stand_in_scenes)
    monkeypatch.setattr(digit_scenes, "digit_pools", _stand_in_pools)
    monkeypatch.setattr(digit_scenes, "pretrain_digit_backbone", pretrain)


def test_the_backbone_is_pretrained_and_scored_on_the_studys_device(monkeypatch):
    seen = {}
    _on_meta(monkeypatch, seen)
    with pytest.raises(StudyError) as caught:
        digit_scenes.measure(seeds=(1000 + os.getpid(),), device="meta", encoders=(), workers=1)
    assert seen == {"pretrained_on": ("meta", "meta"), "classified_on": ["meta"]}
    # the digits and labels compared on the device: the accuracy is the first number read
    assert "item() cannot be called on meta tensors" in str(caught.value.__cause__)


def _mean_captions(seen):
    """A stand-in for CaptionGRU that runs on the meta device (CaptionGRU packs its sequences
    by lengths read on the CPU): the mean of the word embeddings, on the unit sphere; it notes
    where its weights are when it encodes (in ``seen``, which the study's copies share)."""

    class MeanCaptions(torch.nn.Module):
        def __init__(self, vocabulary_size, dims):
            super().__init__()
            self.embedding = torch.nn.Embedding(vocabulary_size, dims)

        def forward(self, tokens):
            seen["captions_encoded_on"] = self.embedding.weight.device.type
            return torch.nn.functional.normalize(self.embedding(tokens).mean(dim=1), dim=-1)

    return MeanCaptions


def test_the_encoders_train_on_the_studys_device_and_a_failure_names_the_task(monkeypatch):
    seen = {}
    _on_meta(monkeypatch, seen)
    monkeypatch.setattr(digit_scenes, "backbone_accuracy", lambda *args: 0.5)  # no read
    monkeypatch.setattr(digit_scenes, "CaptionGRU", _mean_captions(seen))

    def loss(scores, positives):
        seen["loss_on"] = (scores.device.type, positives.device.type)
        raise _StopError

    monkeypatch.setitem(digit_scenes.LOSSES, "NT-Xent", loss)
    seed = 2000 + os.getpid()
    with pytest.raises(StudyError) as caught:
        digit_scenes.measure(seeds=(seed,), device="meta", encoders=("VSE++",),
                             losses=("NT-Xent",), workers=1)  # fmt: skip
    assert isinstance(caught.value.__cause__, _StopError)
    assert str(caught.value).startswith(f"digit scenes, seed {seed} (VSE++, NT-Xent) failed")
    assert seen == {"pretrained_on": ("meta", "meta"), "captions_encoded_on": "meta",
                    "loss_on": ("meta", "meta")}  # fmt: skip


def test_recall_reads_a_relevance_mask_made_on_the_scores_device():
    # Under the meta default device a tensor made without the scores' device lands on meta
    # and meets the CPU scores; the recall must be the same as under the CPU default.
    torch.manual_seed(0)
    features = {"global": torch.randn(6, 12)}
    tokens = torch.randint(1, len(vocabulary()), (6, 5, 4))
    image_encoder, caption_encoder = GlobalImageProjection(12, 8), CaptionGRU(len(vocabulary()), 8)
    assert_unchanged_under_another_default_device(
        lambda: digit_scenes.scene_recall(
            "VSE++", image_encoder, caption_encoder, features, tokens
        ),
        torch.device("cpu"),
    )


def test_region_centres_are_exact_at_the_backbones_precision():
    # a float64 backbone on float64 canvases: each box's centre, (top + 4) / 30 and
    # (left + 4) / 30, in float64 (a float32 centre would be off by up to 1e-8)
    scenes = _stand_in_scenes(5, seed=3)
    scenes = scenes._replace(images=scenes.images.double())
    torch.manual_seed(0)
    regions = digit_scenes.scene_features(DigitBackbone().double(), scenes)["regions"]
    assert regions.dtype == torch.float64
    for index, count in enumerate(scenes.counts.tolist()):
        for slot in range(count):
            top, left = scenes.boxes[index, slot, :2].tolist()
            expected = torch.tensor([(top + 4) / 30, (left + 4) / 30], dtype=torch.float64)
            assert torch.equal(regions[index, slot, -2:], expected), (index, slot)


PUBLISHED = Path(__file__).resolve().parents[2] / "figures" / "studies" / "digit_scenes.json"


def test_the_published_scenes_study_was_measured_with_the_full_settings():
    """The numbers docs/studies.md quotes come from a run with the settings the code has now."""
    published = json.loads(PUBLISHED.read_text())
    recorded, full = published["settings"], digit_scenes.settings(False)
    assert {key: recorded[key] for key in full} == full
    assert recorded["global_features"] == digit_scenes.GLOBAL_FEATURES
    assert list(published["runs"]["VSRN"]) == list(digit_scenes.LOSSES)
    # the quick study only shrinks the sizes: same batch, embedding, optimiser step
    quick = digit_scenes.settings(True)
    for key in ("batch_images", "dims", "lr"):
        assert quick[key] == full[key], key
    assert set(quick) == set(full)


def test_scene_features_follow_the_backbones_device():
    """The meta device stands in for an accelerator: every tensor made on the way must follow
    the backbone there (mixing devices raises)."""
    scenes = _stand_in_scenes(3, seed=1)
    features = digit_scenes.scene_features(DigitBackbone().to("meta"), scenes)
    assert {key: value.device.type for key, value in features.items()} == {
        "global": "meta", "regions": "meta", "counts": "meta"}  # fmt: skip
    assert features["global"].shape == (3, 16 * digit_scenes.GRID_POOL**2)
    assert features["regions"].shape == (3, 4, 66) and features["counts"].shape == (3,)


def test_chance_assumes_five_captions_per_image_when_the_results_do_not_say():
    chance = digit_scenes.chance_recall_at_1({"settings": {"test_scenes": 40}})
    assert chance == pytest.approx({"i2t": 5 / (40 * 5), "t2i": 1 / 40})
    chance = digit_scenes.chance_recall_at_1(
        {"settings": {"test_scenes": 40, "captions_per_image": 2}})  # fmt: skip
    assert chance == pytest.approx({"i2t": 2 / (40 * 2), "t2i": 1 / 40})


@pytest.mark.slow
def test_a_tiny_run_is_the_protocol_run_by_hand():
    """Each check reads the same run, computed once in this one test (a mutation tool credits a
    function to the test that first calls it, so a run shared by several tests would be
    credited to the first alone)."""
    seeds = _fresh_seeds()
    run = _run(seeds)
    _each_run_lands_under_its_encoder_and_loss_and_starts_from_the_seeds_network(run, seeds)
    _the_seed_fixes_the_backbone_and_the_accuracy_is_read_on_the_test_pools(run, seeds)
    _the_settings_record_the_temperature_and_the_caption_count(run)
    _anatomy_and_geometry_are_read_at_the_logged_steps_each_direction_apart(run, seeds)
    for kind, name in (("VSE++", "NT-Xent"), ("VSRN", "SmoothAP")):
        _recall_is_that_of_the_encoders_trained_by_hand(run, kind, name, seeds[0])
