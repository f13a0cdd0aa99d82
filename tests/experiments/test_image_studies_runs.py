"""The image-folder studies called directly at tiny sizes (16-pixel crops, an 8-dimensional
head, batches of 8 and 16): the numbers they report against float64 loops over what they
trained on, the sizes and labels they write, the seeds they honour, and that the test split's
classes are never trained on.

The loss and the evaluation are watched (wrapped, not replaced) to read the embeddings of every
step and the split each evaluation saw.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
import io
import math
import re
from pathlib import Path

import pytest
import torch

from gradlab.backbones import build_backbone
from gradlab.data.image_folder import image_folder, train_transform
from gradlab.errors import GradlabError
from gradlab.experiments import image_studies as study
from gradlab.functional.gradient_anatomy import (
    DEFAULT_ABSOLUTE_THRESHOLD,
    DEFAULT_RELATIVE_THRESHOLD,
)
from gradlab.losses import SmoothAPLoss
from tests.helpers.study_images import CLASSES, PER_CLASS, digit_images, write_images
from tests.reference import geometry_loops
from tests.reference.anatomy_loops import anatomy_one_query
from tests.reference.batch_proportion_loops import KEYS, batch_proportions
from tests.reference.retrieval_loops import map_at_r

BACKBONE = "tests.helpers.backbones:four_channel_resnet"
SMALL = {"backbone": BACKBONE, "embedding_dim": 8, "image_size": 16, "lr": 1e-3}
TAU, EPS = 0.05, 0.004
TRAIN_IMAGES = CLASSES // 2 * PER_CLASS  # the first half of the classes trains


@pytest.fixture(scope="module")
def halves(tmp_path_factory):
    root = tmp_path_factory.mktemp("halves")
    for label, number, picture in digit_images():
        (root / f"digit_{label}").mkdir(exist_ok=True)
        picture.save(root / f"digit_{label}" / f"{number}.png")
    return root


def _watch(patch) -> dict:
    seen: dict[str, list] = {"losses": [], "models": [], "evaluated": [], "sampler_seeds": [],
                             "augmentation_seeds": [], "batches": [], "forwards": []}  # fmt: skip

    class WatchedSampler(study.FixedCountBatches):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            seen["sampler_seeds"].append(kwargs.get("seed"))

        def take(self, count):
            batches = super().take(count)
            seen["batches"].append([batch.clone() for batch in batches])
            return batches

    class WatchedImages(study.StudyImages):
        def __init__(self, dataset, image_size, seed=None):
            super().__init__(dataset, image_size, seed)
            if dataset.split == "train":  # the training images of a run
                seen["augmentation_seeds"].append(seed)

    class WatchedLoss(SmoothAPLoss):
        def __init__(self, tau, *args, **kwargs):
            super().__init__(tau, *args, **kwargs)
            self.calls = []
            seen["losses"].append(self)

        def forward(self, embeddings, labels):
            self.calls.append((embeddings.detach().clone(), labels.clone()))
            return super().forward(embeddings, labels)

    def forward_seen(module, inputs, output):  # kept by copy.deepcopy: every copy's forwards
        seen["forwards"].append((module.training, output.detach().clone()))

    def watched_build(*args, **kwargs):
        model = build_backbone(*args, **kwargs)
        seen["models"].append(copy.deepcopy(model.state_dict()))
        model.register_forward_hook(forward_seen)
        return model

    real_evaluate = study.evaluate_split

    def watched_evaluate(model, dataset, *args, **kwargs):
        metrics = real_evaluate(model, dataset, *args, **kwargs)
        seen["evaluated"].append({"dataset": dataset, "metrics": metrics})
        return metrics

    patch.setattr(study, "SmoothAPLoss", WatchedLoss)
    patch.setattr(study, "FixedCountBatches", WatchedSampler)
    patch.setattr(study, "StudyImages", WatchedImages)
    patch.setattr(study, "build_backbone", watched_build)
    patch.setattr(study, "evaluate_split", watched_evaluate)
    return seen


@pytest.fixture(scope="module")
def p_run(halves):
    with pytest.MonkeyPatch.context() as patch:
        seen = _watch(patch)
        with contextlib.redirect_stderr(io.StringIO()) as said:
            result = study.p_vs_batch_size_on_images(
                halves, batch_sizes=[8, 16], seeds=[0, 1], epochs=2, tau=TAU, eps=EPS, **SMALL
            )
    seen["stderr"] = said.getvalue()
    return result, seen


def _the_p_study_labels_its_sizes_data_and_network(p_run, halves):
    result, _ = p_run
    assert result["batch_sizes"] == [8, 16] and result["seeds"] == [0, 1]
    assert (result["per_class"], result["tau"], result["eps"]) == (4, TAU, EPS)
    assert result["data"] == f"{halves.name}, train split ({TRAIN_IMAGES} images, 4 classes)"
    assert (
        result["model"] == f"{BACKBONE} with a linear head to 8 dimensions, random initial weights"
    )
    trained = result["settings"]["trained_at_m"]
    # how it trained, which the JSON of the losses and anatomy studies recorded and this lacked
    how = {key: trained[key] for key in ("lr", "device", "amp", "image_size")}
    assert how == {"lr": 1e-3, "device": "cpu", "amp": False, "image_size": 16}  # SMALL's
    assert trained["epochs"] == 2
    assert trained["steps"] == [2 * math.ceil(TRAIN_IMAGES / m) for m in (8, 16)]
    for key in KEYS:
        assert [len(run) for run in trained[key]] == [2, 2], key


def _the_p_study_averages_a_loop_over_the_last_epochs_batches(p_run):
    result, seen = p_run
    runs = seen["losses"]
    assert len(runs) == 4  # (seed, m) in order: (0, 8), (0, 16), (1, 8), (1, 16)
    trained = result["settings"]["trained_at_m"]
    for index, loss in enumerate(runs):
        seed_index, size_index = divmod(index, 2)
        m = (8, 16)[size_index]
        assert loss.tau == TAU
        per_epoch = math.ceil(TRAIN_IMAGES / m)
        assert len(loss.calls) == 2 * per_epoch
        for _, labels in loss.calls:  # 4 images of each of m / 4 training classes
            counts = torch.bincount(labels)
            assert sorted(counts[counts > 0].tolist()) == [4] * (m // 4)
            assert set(labels.tolist()) <= set(range(CLASSES // 2))
        rows = [batch_proportions(e.tolist(), y.tolist(), TAU, EPS)
                for e, y in loss.calls[per_epoch:]]  # fmt: skip
        for k, key in enumerate(KEYS):
            expected = sum(row[k] for row in rows) / len(rows)
            assert trained[key][seed_index][size_index] == pytest.approx(expected, abs=1e-9), key
    assert trained["P"][0] != trained["P"][1]


def _each_seed_starts_every_batch_size_from_its_own_weights(p_run):
    _, seen = p_run
    _, *starts = seen["models"]  # the first: the check before training
    assert len(starts) == 4

    def same(a, b):
        return all(torch.equal(a[key], b[key]) for key in a)

    assert same(starts[0], starts[1]) and same(starts[2], starts[3])
    assert not same(starts[0], starts[2])
    torch.manual_seed(1)
    assert same(build_backbone(BACKBONE, embedding_dim=8, image_size=16).state_dict(), starts[2])
    # each (seed, m) draws its own batches and its own crops: no seed is left to a default
    runs = [study.run_seed(seed, m) for seed in (0, 1) for m in (8, 16)]
    assert len(set(runs)) == 4
    for kind in ("sampler_seeds", "augmentation_seeds"):
        assert seen[kind] == runs, kind


def test_run_seeds_are_whole_numbers_distinct_for_every_seed_and_batch_size():
    seeds = [study.run_seed(seed, m) for seed in range(20) for m in range(4, 4096, 4)]
    assert all(type(seed) is int and seed >= 0 for seed in seeds)
    assert len(set(seeds)) == len(seeds)


def _retrieval_loops(embeddings, labels):
    unit = torch.nn.functional.normalize(embeddings.double(), dim=1).tolist()
    n = len(unit)
    scores, relevant, recall = [], [], {1: [], 2: [], 4: [], 8: []}
    r_precision = []
    for q in range(n):
        others = [j for j in range(n) if j != q]
        row = [sum(a * b for a, b in zip(unit[q], unit[j], strict=True)) for j in others]
        flags = [labels[j] == labels[q] for j in others]
        order = sorted(range(len(row)), key=lambda j: (-row[j], j))
        for k in recall:
            recall[k].append(float(any(flags[j] for j in order[:k])))
        r = sum(flags)
        r_precision.append(sum(flags[j] for j in order[:r]) / r)
        scores.append(row)
        relevant.append(flags)
    metrics = {f"recall@{k}": sum(v) / n for k, v in recall.items()}
    metrics["R-Precision"] = sum(r_precision) / n
    metrics["MAP@R"] = map_at_r(torch.tensor(scores), torch.tensor(relevant))
    return metrics


@pytest.mark.slow
def test_evaluate_split_is_retrieval_over_the_whole_split_against_loops(halves):
    test = image_folder(halves, "test", image_size=16)
    torch.manual_seed(3)
    model = build_backbone(BACKBONE, embedding_dim=8, image_size=16)
    model.train()
    metrics = study.evaluate_split(model, test)
    assert model.training  # put back as it was
    model.eval()
    with torch.no_grad():
        embeddings = model(torch.stack([test[i][0] for i in range(len(test))]))
    labels = [test[i][1] for i in range(len(test))]
    expected = _retrieval_loops(embeddings, labels)
    assert set(metrics) == set(expected)
    assert {key: metrics[key] for key in expected} == pytest.approx(expected, abs=1e-6)
    split = study.embed_split(model, test, batch_size=5)  # any chunking: the same embeddings
    torch.testing.assert_close(split, embeddings, atol=1e-5, rtol=0)


LOSS_EPOCHS = 4  # 12 steps of 8: the final loss (the last 10 steps' mean) is not every step's


@pytest.fixture(scope="module")
def loss_run(halves):
    from gradlab.experiments import loss_comparison

    calls: dict[str, list[float]] = {}
    real = loss_comparison.loss_functions

    def watched_losses(tau, size):
        def watch(name, loss_fn):
            def run(embeddings, labels):
                value = loss_fn(embeddings, labels)
                calls.setdefault(name, []).append(float(value.detach()))
                return value

            return run

        return {name: watch(name, fn) for name, fn in real(tau, size).items()}

    with pytest.MonkeyPatch.context() as patch:
        seen = _watch(patch)
        patch.setattr(loss_comparison, "loss_functions", watched_losses)
        with contextlib.redirect_stderr(io.StringIO()) as said:
            result = study.loss_comparison_on_images(halves, batch_sizes=[8], seeds=[0],
                                                     epochs=LOSS_EPOCHS, tau=TAU,
                                                     timing_repeats=1, **SMALL)  # fmt: skip
    seen["stderr"] = said.getvalue()
    return result, seen, calls


def _the_loss_study_labels_its_settings_and_evaluates_only_the_test_classes(loss_run, halves):
    from gradlab.experiments.loss_comparison import loss_functions

    result, seen, _ = loss_run
    assert list(result) == [8]
    run = result[8]
    settings = run["settings"]
    steps = LOSS_EPOCHS * math.ceil(TRAIN_IMAGES / 8)
    assert {key: settings[key] for key in ("per_class", "batch_size", "classes_per_batch",
                                            "epochs", "steps", "lr", "timing_repeats",
                                            "device", "amp", "tau")} == {
        "per_class": 4, "batch_size": 8, "classes_per_batch": 2, "epochs": LOSS_EPOCHS,
        "steps": steps,
        "lr": 1e-3, "timing_repeats": 1, "device": "cpu", "amp": False, "tau": TAU}  # fmt: skip
    assert settings["data"] == f"{halves.name}, train split ({TRAIN_IMAGES} images, 4 classes)"
    assert settings["test_data"] == f"test split ({TRAIN_IMAGES} images, 4 classes)"
    assert type(settings["classes_per_batch"]) is int  # written to JSON as 2, not 2.0
    assert set(settings) == {"per_class", "batch_size", "classes_per_batch", "epochs", "steps",
                             "lr", "timing_repeats", "device", "amp", "tau", "image_size", "data",
                             "model", "training_classes", "test_data",
                             "timing"}  # the bundled's, the data's, where the times were taken
    assert (settings["timing"]["processes"], settings["timing"]["device"]) == (1, "cpu")
    assert settings["image_size"] == SMALL["image_size"]
    assert settings["training_classes"]["left_out_classes"] == 0  # every digit has 6 images
    assert run["seeds"] == [0]
    assert list(run["losses"]) == list(loss_functions(TAU, 8))
    train_classes = {f"digit_{label}" for label in range(CLASSES // 2)}
    assert len(seen["evaluated"]) == 1 + len(run["losses"])  # before, then each loss
    for evaluated in seen["evaluated"]:
        assert evaluated["dataset"].split == "test"
        assert len(evaluated["dataset"]) == TRAIN_IMAGES
        assert evaluated["dataset"][0][0].shape == (3, SMALL["image_size"], SMALL["image_size"])
        assert not set(evaluated["dataset"].class_names) & train_classes
    before, *after = seen["evaluated"]
    assert run["before"] == {key: [value] for key, value in before["metrics"].items()}
    for (name, loss), evaluated in zip(run["losses"].items(), after, strict=True):
        assert loss["metrics"] == {key: [v] for key, v in evaluated["metrics"].items()}, name
    assert len(run["initial_score_range"]) == 1 and 0.0 <= run["initial_score_range"][0] <= 2.0


def _start(seen) -> torch.nn.Module:
    """The network a seed's runs start from, rebuilt from the weights the study drew."""
    model = build_backbone(BACKBONE, embedding_dim=8, image_size=SMALL["image_size"])
    model.load_state_dict(seen["models"][1])  # [0]: the check before training
    return model


def _first_crops(halves, batch, seed):
    """The training crops of a run's first batch, drawn again from its seed."""
    images = study.StudyImages(_train_half(halves), SMALL["image_size"], seed=seed)
    return next(iter(images.loader([batch])))[0]


def _first_training_forwards(seen, steps):
    trained = [output for training, output in seen["forwards"] if training]
    assert len(trained) % steps == 0
    return trained[::steps]  # each run's first step


def _every_loss_starts_from_one_network_on_the_runs_first_batch(loss_run, halves):
    """Every loss's first step: the seed's start on the crops of run_seed(seed, m); the timing
    batch: the same first batch at the start, in evaluation mode, from the seed's own crops."""
    from gradlab.experiments.loss_comparison import loss_functions

    result, seen, _ = loss_run
    run = result[8]
    steps = run["settings"]["steps"]
    assert seen["sampler_seeds"] == [study.run_seed(0, 8)]
    (batches,) = seen["batches"]
    assert len(batches) == steps
    start = _start(seen).train()
    with torch.no_grad():
        expected = start(_first_crops(halves, batches[0], study.run_seed(0, 8)))
    firsts = _first_training_forwards(seen, steps)
    assert len(firsts) == len(run["losses"])
    for name, first in zip(run["losses"], firsts, strict=True):
        torch.testing.assert_close(first, expected, rtol=0, atol=1e-6, msg=name)
    # evaluation-mode forwards: the test split before training, the timing batch, then each
    # loss's network on the test split
    timing = [output for training, output in seen["forwards"] if not training][1]
    with torch.no_grad():
        expected = _start(seen).eval()(_first_crops(halves, batches[0], 0))  # running stats
    torch.testing.assert_close(timing, expected, rtol=0, atol=1e-6)
    cosines = [value for row in geometry_loops.cosines(timing.tolist(), timing.tolist())
               for value in row]  # fmt: skip
    assert run["initial_score_range"] == [pytest.approx(max(cosines) - min(cosines), abs=1e-6)]
    labels = _train_half(halves).labels[batches[0]]
    for name, loss_fn in loss_functions(TAU, 8).items():
        leaf = timing.clone().requires_grad_(True)
        loss_fn(leaf, labels).backward()
        norm = math.sqrt(sum(value * value for value in leaf.grad.flatten().tolist()))
        assert run["losses"][name]["initial_gradient_norm"] == [pytest.approx(norm, rel=1e-5)]


def _the_loss_study_quotes_each_losss_own_first_and_last_steps(loss_run):
    result, _, calls = loss_run
    run = result[8]
    steps = run["settings"]["steps"]
    for name, loss in run["losses"].items():
        history = calls[name][:steps]  # training first, then the timing on the first batch
        assert loss["initial_loss"] == [pytest.approx(history[0], abs=1e-6)], name
        last = history[-10:]
        assert loss["final_loss"] == [pytest.approx(sum(last) / len(last), abs=1e-6)], name
        assert len(loss["step_seconds"]) == len(loss["loss_seconds"]) == 1
        assert loss["step_seconds"][0] > 0 and loss["loss_seconds"][0] > 0
        assert len(loss["initial_gradient_norm"]) == 1 and loss["initial_gradient_norm"][0] >= 0


@pytest.fixture(scope="module")
def anatomy_run(halves):
    with pytest.MonkeyPatch.context() as patch:
        seen = _watch(patch)
        with contextlib.redirect_stderr(io.StringIO()) as said:
            result = study.anatomy_on_images(
                halves, batch_sizes=[8], seeds=[0], epochs=2, tau=TAU, logs=2, **SMALL
            )
    seen["stderr"] = said.getvalue()
    return result, seen


@pytest.mark.slow
def test_the_anatomy_study_at_tiny_sizes_reports_what_it_ran(anatomy_run, halves):
    """One test over the one run, so that mutation testing (which credits a module
    fixture's work to the first test using it) runs every check for every mutant."""
    _the_anatomy_study_logs_evenly_spaced_steps_and_the_last(anatomy_run, halves)
    _every_anatomy_loss_trains_from_one_network_on_the_runs_crops(anatomy_run, halves)


def _the_anatomy_study_logs_evenly_spaced_steps_and_the_last(anatomy_run, halves):
    from gradlab.experiments.digit_scenes import ANATOMY_KEYS

    result, seen = anatomy_run
    settings = result["settings"]
    assert settings["batch_sizes"] == [8] and settings["epochs"] == 2 and settings["tau"] == TAU
    assert settings["per_class"] == 4 and settings["directions"] == ["in_batch"]
    assert (settings["lr"], settings["device"], settings["amp"]) == (1e-3, "cpu", False)
    assert settings["image_size"] == SMALL["image_size"]
    assert settings["test_data"] == f"test split ({TRAIN_IMAGES} images, 4 classes)"
    assert settings["data"] == f"{halves.name}, train split ({TRAIN_IMAGES} images, 4 classes)"
    assert result["seeds"] == [0] and list(result["runs"]) == ["m = 8"]
    steps = 2 * math.ceil(TRAIN_IMAGES / 8)  # 6 steps, logs = 2: every third step and the last
    runs = result["runs"]["m = 8"]
    assert list(runs) == list(study.ANATOMY_LOSSES)
    for (name, run), evaluated in zip(runs.items(), seen["evaluated"], strict=True):
        assert set(run) == {"recall", "loss_history", "anatomy", "geometry"}, name
        assert set(run["anatomy"]) == {"steps", "in_batch"}, name
        assert run["anatomy"]["steps"] == [0, 3, steps - 1], name
        assert len(run["loss_history"]) == 1 and len(run["loss_history"][0]) == steps
        for key in ANATOMY_KEYS:
            assert len(run["anatomy"]["in_batch"][key][0]) == 3
        for key in study.IMAGE_GEOMETRY_KEYS:
            assert len(run["geometry"][key][0]) == 3
        assert run["recall"] == {key: [value] for key, value in evaluated["metrics"].items()}
        assert evaluated["dataset"].split == "test"
    assert _said(seen, "anatomy:") == [f"anatomy: seed 0, m = 8, {name}: {steps} steps"
                                       for name in runs]  # fmt: skip
    assert seen["sampler_seeds"] and None not in seen["sampler_seeds"]  # seeded batches
    assert len(seen["augmentation_seeds"]) == len(runs) and None not in seen["augmentation_seeds"]


def _in_batch_loss_loops(name, embeddings, labels):
    """The anatomy study's training loss on a batch, each image querying the others, with the
    library's defaults (VSE++'s margin, NT-Xent's temperature) and TAU for SmoothAP."""
    import inspect

    from gradlab.functional import max_violation_triplet_loss, nt_xent_loss
    from tests.reference.score_losses_loops import score_loss
    from tests.reference.smooth_ap_loops import in_batch_smooth_ap

    points, labels = embeddings.double().tolist(), labels.tolist()
    if name == "SmoothAP":
        aps = in_batch_smooth_ap(points, labels, TAU, include_query=False)
        return 1.0 - sum(aps) / len(aps)
    n = len(labels)
    scores = geometry_loops.cosines(points, points)
    rows = [[scores[q][c] for c in range(n) if c != q] for q in range(n)]
    positives = [[labels[c] == labels[q] for c in range(n) if c != q] for q in range(n)]
    function, option, key = ((max_violation_triplet_loss, "triplet", "margin")
                             if name == "VSE++ max-violation"
                             else (nt_xent_loss, "nt_xent", "temperature"))  # fmt: skip
    default = inspect.signature(function).parameters[key].default
    return score_loss(option, rows, positives, default, direction="i2t")[0]


def _every_anatomy_loss_trains_from_one_network_on_the_runs_crops(anatomy_run, halves):
    """Each loss's first step: the seed's start on the crops of run_seed(seed, m), its loss
    the loss named, on the batch's cosines without their diagonal, against float64 loops."""
    result, seen = anatomy_run
    runs = result["runs"]["m = 8"]
    steps = len(runs["SmoothAP"]["loss_history"][0])
    assert seen["sampler_seeds"] == [study.run_seed(0, 8)]
    assert seen["augmentation_seeds"] == [study.run_seed(0, 8)] * len(runs)
    (batches,) = seen["batches"]
    with torch.no_grad():
        expected = _start(seen).train()(_first_crops(halves, batches[0], study.run_seed(0, 8)))
    labels = _train_half(halves).labels[batches[0]]
    firsts = _first_training_forwards(seen, steps)
    assert len(firsts) == len(runs)
    for (name, run), first in zip(runs.items(), firsts, strict=True):
        torch.testing.assert_close(first, expected, rtol=0, atol=1e-6, msg=name)
        loss = _in_batch_loss_loops(name, first, labels)
        assert run["loss_history"][0][0] == pytest.approx(loss, abs=1e-5), name
    values = {name: run["loss_history"][0][0] for name, run in runs.items()}
    assert len(set(values.values())) == len(values)  # three losses, three values


def test_in_batch_anatomy_reads_the_losss_gradient_like_a_loop():
    generator = torch.Generator().manual_seed(4)
    embeddings = torch.randn(8, 3, generator=generator)
    labels = torch.tensor([0, 0, 1, 1, 1, 2, 2, 3])
    weights = torch.randn(8, 7, generator=generator, dtype=torch.float64)
    weights[2, :] = 0.0  # a query without gradient
    weights[weights.abs() < 0.3] = 0.0

    def linear(scores, positives):  # dL/dS = weights
        return (scores.double() * weights).sum()

    values = study.in_batch_anatomy(embeddings, labels, linear).tolist()
    scores = geometry_loops.cosines(embeddings.tolist(), embeddings.tolist())
    records = []
    for q in range(8):
        others = [j for j in range(8) if j != q]
        records.append(anatomy_one_query(
            weights[q].tolist(), [scores[q][j] for j in others],
            [bool(labels[j] == labels[q]) for j in others], [True] * 7,
            DEFAULT_ABSOLUTE_THRESHOLD, DEFAULT_RELATIVE_THRESHOLD))  # fmt: skip
    shares = [r["share_10"] for r in records if not math.isnan(r["share_10"])]
    expected = [sum(r["active_negatives"] for r in records) / 8,
                sum(r["without"] for r in records) / 8, sum(shares) / len(shares)]  # fmt: skip
    assert values == pytest.approx(expected, abs=1e-9)
    assert expected[1] > 0 and expected[0] > 0


def test_in_batch_geometry_matches_float64_loops():
    generator = torch.Generator().manual_seed(6)
    embeddings = torch.randn(8, 5, generator=generator)
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 2, 3])
    positives = [[i != j and bool(labels[i] == labels[j]) for j in range(8)] for i in range(8)]
    points = embeddings.tolist()
    expected = [
        geometry_loops.alignment(points, points, positives),
        geometry_loops.uniformity(points),
        geometry_loops.effective_rank(geometry_loops.unit_rows(points))[1],  # unit rows
    ]
    values = study.in_batch_geometry(embeddings, labels)
    assert values.dtype == torch.float64
    assert values.tolist() == pytest.approx(expected, abs=1e-9)  # float64 throughout


# [1, 0], [3, 4] and [0, 2]: cosines 3/5, 0 and 4/5, off the ranking grid of 2^-36 (3/5 lies
# some 5.8e-12 from its nearest grid point): a measure read from grid-rounded scores is that far off
COSINE_EMBEDDINGS = torch.tensor([[1.0, 0.0], [3.0, 4.0], [0.0, 2.0]])
COSINE_LABELS = torch.tensor([0, 0, 1])


def test_in_batch_anatomy_differentiates_the_loss_at_the_exact_cosines():
    handed = []

    def loss(scores, positives):
        handed.append(scores.detach().clone())
        return scores.sum()

    study.in_batch_anatomy(COSINE_EMBEDDINGS, COSINE_LABELS, loss)
    (scores,) = handed  # each image querying the other two
    assert scores.dtype == torch.float64 and scores.shape == (3, 2)
    expected = [3 / 5, 0.0, 3 / 5, 4 / 5, 0.0, 4 / 5]
    assert scores.flatten().tolist() == pytest.approx(expected, rel=0, abs=1e-15)


def test_in_batch_geometry_aligns_the_exact_cosines():
    # the one positive pair's unit vectors [1, 0] and [3/5, 4/5] lie (2/5)^2 + (4/5)^2 apart
    alignment = study.in_batch_geometry(COSINE_EMBEDDINGS, COSINE_LABELS)[0].item()
    assert alignment == pytest.approx(4 / 25 + 16 / 25, rel=0, abs=1e-15)


def test_a_training_items_crop_is_seeded_by_the_blake2b_digest_of_seed_and_draw(halves):
    # the seed of item (index, draw): blake2b of "seed:draw" in 8 bytes, read little-endian and
    # halved into torch's 63 bits, so that a study's crops stay those of earlier versions
    split = _train_half(halves)
    images = study.StudyImages(split, SMALL["image_size"], seed=3)
    for draw in (0, 5):
        digest = hashlib.blake2b(f"3:{draw}".encode(), digest_size=8).digest()
        seed = sum(byte << (8 * place) for place, byte in enumerate(digest)) // 2
        seeded = dataclasses.replace(split, transform=train_transform(SMALL["image_size"], seed))
        picture, label = images[2, draw]
        assert torch.equal(picture, seeded[2][0]) and label == seeded[2][1]


@pytest.mark.slow
def test_the_loss_study_times_each_loss_three_times_by_default_on_this_process_threads(
    tmp_path,
):  # fmt: skip
    # as the bundled miniature: three timed passes; the threads: this process's torch's
    for name in ("bench", "chair", "fan", "kettle"):  # two classes train, one batch of 8
        write_images(tmp_path / "data" / name, 4)
    with contextlib.redirect_stderr(io.StringIO()):
        result = study.loss_comparison_on_images(tmp_path / "data", batch_sizes=[8], **SMALL)
    settings = result[8]["settings"]
    assert settings["steps"] == 1 and settings["timing_repeats"] == 3
    assert settings["timing"]["threads"] == torch.get_num_threads()


@pytest.mark.parametrize(("sizes", "classes", "message"), [
    ([], None, "batch sizes must name at least one size; got none"),
    ([8, 0], None, "batch size must be"),
    ([8, 10], None, "batch size must be a multiple of 4 (4 images per class, as Smooth-AP "
                    "samples); got 10"),
    ([8, 20], 4, "batch size must be at most 4 x 4 classes = 16 for this split; got 20"),
    ([4, 8], None, "batch size must hold at least two classes (8 or more, 4 images per "
                   "class): a batch of one class has no negative; got 4"),
    ([8, 16, 8], None, "batch sizes must be distinct; got 8 more than once in"),
    # one size where a list goes: was "TypeError: 'int' object is not iterable"
    (8, None, "batch sizes must be a list of sizes (one size: [8]); got 8"),
    ("8,16", None, "batch sizes must be a list of sizes ([8, 16]); got '8,16'"),
])  # fmt: skip
def test_batch_sizes_are_refused_with_what_the_sampler_allows(sizes, classes, message):
    with pytest.raises(GradlabError, match=f"^{re.escape(message)}"):
        study.check_batch_sizes(sizes, classes)


def test_batch_sizes_the_sampler_can_make_pass_unchanged():
    assert study.check_batch_sizes((8, 16), 4) == [8, 16]
    assert study.check_batch_sizes([1024]) == [1024]


@pytest.mark.parametrize(("option", "message"), [
    ({"workers": True}, "workers must be a whole number >= 0; got True"),
    ({"workers": 1.0}, "workers must be a whole number >= 0; got 1.0"),
    ({"seeds": []}, "seeds must name at least one seed; got none"),
    ({"seeds": [0, 1, 0]}, r"seeds must be distinct whole numbers >= 0; got \[0, 1, 0\]"),
    ({"seeds": [1.5]}, r"seeds must be distinct whole numbers >= 0; got \[1\.5\]"),
    ({"seeds": [-1]}, r"seeds must be distinct whole numbers >= 0; got \[-1\]"),
    ({"seeds": [True]}, r"seeds must be distinct whole numbers >= 0; got \[True\]"),
    ({"epochs": 0}, "epochs must be"),
    ({"lr": 0.0}, "lr must be"),
    # Adam's first step, lr / (1 - 0.9), past float32's range: torch raised "value cannot be
    # converted to type float without overflow" in the first step (the command line refused it)
    ({"lr": 1e38}, re.escape("lr must be at most 3.4028234663852877e+37 (Adam's first step is "
                             "lr / (1 - 0.9), a float32 number); got 1e+38") + "$"),
    ({"batch_sizes": [32]}, "batch size must be at most 4 x 4 classes = 16"),
])  # fmt: skip
def test_each_study_refuses_bad_options_before_training(halves, option, message):
    for function in (study.p_vs_batch_size_on_images, study.loss_comparison_on_images,
                     study.anatomy_on_images):  # fmt: skip
        with pytest.raises(GradlabError, match=f"^{message}"):
            function(halves, **(SMALL | option))


def test_weights_are_named_in_the_model_label(halves, tmp_path):
    torch.manual_seed(0)
    weights = tmp_path / "start.pt"
    network = build_backbone(BACKBONE, embedding_dim=8, image_size=16)
    torch.save(network.backbone.state_dict(), weights)  # a checkpoint of the backbone alone
    result = study.p_vs_batch_size_on_images(halves, batch_sizes=[16], seeds=[0], epochs=1,
                                             weights=weights, **SMALL)  # fmt: skip
    assert result["model"] == f"{BACKBONE} with a linear head to 8 dimensions, from start.pt"
    assert result["settings"]["trained_at_m"]["steps"] == [math.ceil(TRAIN_IMAGES / 16)]


def _said(seen, prefix):
    return [line for line in seen["stderr"].splitlines() if line.startswith(prefix)]


def _the_p_study_says_each_runs_steps_and_p_on_stderr(p_run):
    result, seen = p_run
    trained = result["settings"]["trained_at_m"]
    expected = [f"p-vs-batch-size: seed {seed}, m = {m}: {trained['steps'][k]} steps, "
                f"P = {trained['P'][s][k]:.4f}"
                for s, seed in enumerate((0, 1)) for k, m in enumerate((8, 16))]  # fmt: skip
    assert _said(seen, "p-vs-batch-size:") == expected


@pytest.mark.slow
def test_the_p_study_at_tiny_sizes_reports_what_it_ran(halves, p_run):
    """One test over the one run, so that mutation testing (which credits a module
    fixture's work to the first test using it) runs every check for every mutant."""
    _the_p_study_says_each_runs_steps_and_p_on_stderr(p_run)
    _the_p_study_labels_its_sizes_data_and_network(p_run, halves)
    _the_p_study_averages_a_loop_over_the_last_epochs_batches(p_run)
    _each_seed_starts_every_batch_size_from_its_own_weights(p_run)


@pytest.mark.slow
def test_the_loss_study_at_tiny_sizes_reports_what_it_ran(halves, loss_run):
    """One test over the one run, so that mutation testing (which credits a module
    fixture's work to the first test using it) runs every check for every mutant."""
    _the_loss_study_labels_its_settings_and_evaluates_only_the_test_classes(loss_run, halves)
    _the_loss_study_quotes_each_losss_own_first_and_last_steps(loss_run)
    _every_loss_starts_from_one_network_on_the_runs_first_batch(loss_run, halves)
    result, seen, _ = loss_run
    run = result[8]
    assert _said(seen, "losses:") == [
        f"losses: seed 0, m = 8, {name}: {run['settings']['steps']} steps, "
        f"MAP@R = {loss['metrics']['MAP@R'][0]:.4f}" for name, loss in run["losses"].items()]
    assert seen["sampler_seeds"] and None not in seen["sampler_seeds"]  # seeded batches
    assert None not in seen["augmentation_seeds"]  # the timing batch and each loss's crops


@pytest.mark.slow
@pytest.mark.parametrize("name", ["p-vs-batch-size", "losses", "anatomy"])
def test_every_study_starts_every_network_from_the_given_weights(
    halves, tmp_path, name
):
    torch.manual_seed(0)
    network = build_backbone(BACKBONE, embedding_dim=8, image_size=16)
    with torch.no_grad():  # unlike any random start the study could draw
        for parameter in network.backbone.parameters():
            parameter.add_(1.0)
    weights = tmp_path / "start.pt"
    torch.save(network.backbone.state_dict(), weights)
    built = []

    def watched_build(*args, **kwargs):
        model = build_backbone(*args, **kwargs)
        built.append({k: v.clone() for k, v in model.backbone.state_dict().items()})
        return model

    function = {"p-vs-batch-size": study.p_vs_batch_size_on_images,
                "losses": study.loss_comparison_on_images, "anatomy": study.anatomy_on_images}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(study, "build_backbone", watched_build)
        result = function[name](halves, batch_sizes=[8], seeds=[0], epochs=1, weights=weights,
                                **SMALL)  # fmt: skip
    assert built  # the check before training, then each seed's start
    for state in built:
        for key, value in network.backbone.state_dict().items():
            torch.testing.assert_close(state[key], value, rtol=0, atol=0, msg=key)
    described = {"p-vs-batch-size": lambda: result, "losses": lambda: result[8]["settings"],
                 "anatomy": lambda: result["settings"]}[name]()  # where each study says it
    assert described["model"] == f"{BACKBONE} with a linear head to 8 dimensions, from start.pt"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["losses", "anatomy"])
def test_with_list_files_the_evaluation_reads_the_test_list_at_the_studys_image_size(
    halves, tmp_path, name
):
    train = _listing(tmp_path, "train.txt", range(CLASSES // 2), PER_CLASS)
    test = _listing(tmp_path, "test.txt", range(CLASSES // 2, CLASSES), 2)  # not a half
    rows = test.read_text().splitlines()
    options = dict(layout="list", list_file=train, test_list_file=test, batch_sizes=[8],
                   seeds=[0], epochs=1, **SMALL)  # fmt: skip
    with pytest.MonkeyPatch.context() as patch:
        seen = _watch(patch)
        if name == "anatomy":
            result = study.anatomy_on_images(halves, logs=2, **options)
            # 24 training images, 3 steps of 8; logs = 2: every 3 // 2 = 1st step and the last
            for loss, run in result["runs"]["m = 8"].items():
                assert run["anatomy"]["steps"] == [0, 1, 2], loss
        else:
            result = study.loss_comparison_on_images(halves, timing_repeats=1, **options)
            assert result[8]["settings"]["steps"] == 3
    assert seen["evaluated"]
    for evaluated in seen["evaluated"]:
        dataset = evaluated["dataset"]
        assert [p.relative_to(halves).as_posix() for p in dataset.paths] == [
            row.split()[0] for row in rows]
        assert dataset.class_names == [str(label) for label in range(CLASSES // 2, CLASSES)]
        assert dataset.split == "test"  # not augmented: the evaluation transform
        assert dataset[0][0].shape == (3, SMALL["image_size"], SMALL["image_size"])


def _listing(tmp_path, name, labels, per_class):
    rows = [f"digit_{label}/{number}.png {label}" for label in labels
            for number in range(per_class)]  # fmt: skip
    (tmp_path / name).write_text("\n".join(rows) + "\n")
    return tmp_path / name


@pytest.mark.parametrize("function", [study.loss_comparison_on_images, study.anatomy_on_images])
def test_a_list_file_without_a_test_list_file_is_refused_before_training(
    halves, tmp_path, capsys, function
):
    train = _listing(tmp_path, "train.txt", range(CLASSES // 2), PER_CLASS)
    with pytest.raises(GradlabError) as refused:
        function(halves, layout="list", list_file=train, batch_sizes=[8], **SMALL)
    assert str(refused.value) == ("test_list_file must name the evaluation images' 'path "
                                  "label' file when the training images come from a list file")
    assert capsys.readouterr().err == ""  # no run began


def test_the_p_study_trains_on_the_list_files_images(halves, tmp_path):
    listed = _listing(tmp_path, "some.txt", [0, 1, 5], 4)  # 12 images of three classes
    result = study.p_vs_batch_size_on_images(halves, layout="list", list_file=listed,
                                             batch_sizes=[8], seeds=[0], **SMALL)  # fmt: skip
    assert result["data"] == f"{halves.name}, train split (12 images, 3 classes)"
    assert result["settings"]["trained_at_m"]["steps"] == [math.ceil(12 / 8)]


def test_the_p_study_trains_on_the_split_it_is_given(halves):
    with pytest.MonkeyPatch.context() as patch:
        seen = _watch(patch)
        result = study.p_vs_batch_size_on_images(halves, split="test", batch_sizes=[8],
                                                 seeds=[0], **SMALL)  # fmt: skip
    assert result["data"] == f"{halves.name}, test split ({TRAIN_IMAGES} images, 4 classes)"
    test_classes = set(range(CLASSES // 2, CLASSES))
    (loss,) = seen["losses"]
    for _, labels in loss.calls:  # the test half's digits; image_folder labels them 0..3
        assert len(set(labels.tolist())) == 2
    assert set(image_folder(halves, "test").class_names) == {f"digit_{d}" for d in test_classes}


def _train_half(halves):
    return image_folder(halves, "train", image_size=SMALL["image_size"])


def test_a_training_item_is_a_crop_fixed_by_its_seed_and_draw_alone(halves):
    images = study.StudyImages(_train_half(halves), SMALL["image_size"], seed=3)
    again = study.StudyImages(_train_half(halves), SMALL["image_size"], seed=3)
    other = study.StudyImages(_train_half(halves), SMALL["image_size"], seed=4)
    picture, label = images[2, 5]
    assert picture.shape == (3, SMALL["image_size"], SMALL["image_size"])
    assert label == int(_train_half(halves).labels[2])
    assert torch.equal(picture, again[2, 5][0])  # another instance, the same crop
    crops = [images[2, draw][0] for draw in range(8)]
    assert any(not torch.equal(crops[0], crop) for crop in crops[1:])  # draws differ
    assert any(not torch.equal(images[2, d][0], other[2, d][0]) for d in range(8))  # seeds too


def test_the_loader_counts_draws_across_the_batches_of_a_run(halves):
    images = study.StudyImages(_train_half(halves), SMALL["image_size"], seed=7)
    batches = [torch.tensor([4, 0, 9]), torch.tensor([2, 4]), torch.tensor([1])]
    loaded = list(images.loader(batches))
    draw = 0
    for batch, (pictures, labels) in zip(batches, loaded, strict=True):
        for place, index in enumerate(batch.tolist()):
            expected, label = images[index, draw]
            assert torch.equal(pictures[place], expected) and int(labels[place]) == label
            draw += 1


def test_an_item_read_without_the_studys_transform_says_so(halves):
    images = study.StudyImages(_train_half(halves), SMALL["image_size"])
    with pytest.raises(GradlabError, match=r"^StudyImages sets each item's transform; none was "
                       r"set$"):  # fmt: skip
        images.split[0]


def test_a_split_of_four_images_has_recall_at_1_and_2_only(halves):
    torch.manual_seed(0)
    model = build_backbone(BACKBONE, embedding_dim=8, image_size=SMALL["image_size"])
    small = image_folder(halves, "test", image_size=SMALL["image_size"])
    keep = [0, 1, PER_CLASS, PER_CLASS + 1]  # two images of each of two classes
    small = dataclasses.replace(small, paths=[small.paths[i] for i in keep],
                                labels=small.labels[keep])  # fmt: skip
    metrics = study.evaluate_split(model, small)
    assert list(metrics) == ["recall@1", "recall@2", "R-Precision", "MAP@R"]
    pair = dataclasses.replace(small, paths=small.paths[:2], labels=small.labels[:2])
    assert list(study.evaluate_split(model, pair)) == ["recall@1", "R-Precision", "MAP@R"]


def test_embed_split_is_the_model_in_eval_mode_on_each_image_as_the_split_gives_it(halves):
    torch.manual_seed(0)
    model = build_backbone(BACKBONE, embedding_dim=8, image_size=SMALL["image_size"])
    split = image_folder(halves, "test", image_size=SMALL["image_size"])
    model.train()
    embedded = study.embed_split(model, split, batch_size=7)
    assert model.training  # its mode given back
    model.eval()
    with torch.no_grad():
        expected = model(torch.stack([split[i][0] for i in range(len(split))]))
    torch.testing.assert_close(embedded, expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize(("function", "option"), [
    (study.loss_comparison_on_images, "timing_repeats"), (study.anatomy_on_images, "logs")])
def test_the_loss_and_anatomy_studies_name_a_count_below_1_before_training(
    halves, function, option
):
    with pytest.raises(GradlabError, match=rf"^{option} must be a positive integer"):
        function(halves, **SMALL, **{option: 0})


@pytest.mark.slow
@pytest.mark.parametrize(("classes", "per_class", "batch_size", "steps", "expected"), [
    (4, PER_CLASS, 8, 3, 1.0),  # 24 images, 3 steps: the later steps' 1 s each
    (4, PER_CLASS, 16, 2, 1.0),  # 24 images, 2 steps: the second step's 1 s
    (2, 4, 8, 1, 100.0),  # 8 images, 1 step: timed whole
])  # fmt: skip
def test_the_loss_studys_step_time_leaves_out_the_first_step(
    halves, tmp_path, classes, per_class, batch_size, steps, expected
):
    """A clock that moves only when a loss trains: 100 s for each loss's first step (the run's
    one-time costs), 1 s for every later one."""
    from gradlab.experiments import loss_comparison

    clock = {"now": 5000.0}
    calls: dict[str, int] = {}
    real = loss_comparison.loss_functions

    def timed_losses(tau, size):
        def timed(name, loss_fn):
            def run(embeddings, labels):
                calls[name] = calls.get(name, 0) + 1
                if calls[name] <= steps:  # a training step, not the timing after the run
                    clock["now"] += 100.0 if calls[name] == 1 else 1.0
                return loss_fn(embeddings, labels)

            return run

        return {name: timed(name, fn) for name, fn in real(tau, size).items()}

    train = _listing(tmp_path, "train.txt", range(classes), per_class)
    test = _listing(tmp_path, "test.txt", range(CLASSES // 2, CLASSES), 2)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(loss_comparison, "loss_functions", timed_losses)
        patch.setattr(study, "time", type("Clock", (), {"perf_counter": lambda: clock["now"]}))
        result = study.loss_comparison_on_images(
            halves, layout="list", list_file=train, test_list_file=test,
            batch_sizes=[batch_size], seeds=[0], epochs=1, timing_repeats=1, **SMALL,
        )  # fmt: skip
    run = result[batch_size]
    assert run["settings"]["steps"] == steps
    assert set(calls) == set(run["losses"])
    for name, loss in run["losses"].items():
        assert loss["step_seconds"] == [expected], name


def _asked_workers(patch) -> list:
    """The worker count of every loader a study asks for (each then loads in this process)."""
    asked = []

    class Images(study.StudyImages):
        def loader(self, batches, workers=0):
            asked.append((self.seed is not None, workers))  # (training crops?, workers)
            return super().loader(batches, 0)

    patch.setattr(study, "StudyImages", Images)
    return asked


def _run_study(name: str, folder, options: dict) -> None:
    """One short run of the study ``gradlab study NAME`` runs (one log, one timing pass)."""
    if name == "p-vs-batch-size":
        study.p_vs_batch_size_on_images(folder, **options)
    elif name == "losses":
        study.loss_comparison_on_images(folder, timing_repeats=1, **options)
    else:
        study.anatomy_on_images(folder, logs=1, **options)


@pytest.mark.parametrize("name", ["p-vs-batch-size", "losses", "anatomy"])
@pytest.mark.slow
def test_every_loader_of_a_study_gets_the_worker_count_it_is_given(halves, name):
    with pytest.MonkeyPatch.context() as patch:
        asked = _asked_workers(patch)
        _run_study(name, halves, dict(batch_sizes=[16], seeds=[0], epochs=1, workers=3,
                                      **SMALL))  # fmt: skip
    trained = [workers for training, workers in asked if training]
    evaluated = [workers for training, workers in asked if not training]
    runs = {"p-vs-batch-size": 1, "losses": 6, "anatomy": 3}[name]
    # the losses study's timing batch (one batch, loaded once) is the one in this process
    assert trained == ([0] if name == "losses" else []) + [3] * runs
    assert evaluated == {"p-vs-batch-size": [], "losses": [3] * (1 + runs),
                         "anatomy": [3] * runs}[name]  # fmt: skip


def test_evaluate_split_loads_in_this_process_unless_told_and_with_the_workers_it_is_given(
    halves,
):
    """As ``--loader-workers`` (default: 0, this process)."""
    torch.manual_seed(0)
    model = build_backbone(BACKBONE, embedding_dim=8, image_size=SMALL["image_size"])
    test = image_folder(halves, "test", image_size=SMALL["image_size"])
    with pytest.MonkeyPatch.context() as patch:
        asked = _asked_workers(patch)
        study.evaluate_split(model, test)
        study.evaluate_split(model, test, workers=2)
    assert asked == [(False, 0), (False, 2)]


def _output_dtypes(model) -> list:
    dtypes = []
    model.register_forward_hook(lambda module, inputs, output: dtypes.append(output.dtype))
    return dtypes


@pytest.mark.parametrize("autocast_default", [torch.bfloat16, torch.float16])
def test_mixed_precision_on_cpu_is_bfloat16_whatever_autocasts_default(halves, autocast_default):
    """``amp``: bfloat16 on CPU (the studies' docstring), even where a program has set
    torch.autocast's CPU default to float16; the embeddings come back in float32."""
    torch.manual_seed(0)
    model = build_backbone(BACKBONE, embedding_dim=8, image_size=SMALL["image_size"])
    test = image_folder(halves, "test", image_size=SMALL["image_size"])
    dtypes = _output_dtypes(model)
    before = torch.get_autocast_dtype("cpu")
    torch.set_autocast_dtype("cpu", autocast_default)
    try:
        embedded = study.embed_split(model, test, amp=True, batch_size=len(test))
        study.evaluate_split(model, test, amp=True)
        study.evaluate_split(model, test)
    finally:
        torch.set_autocast_dtype("cpu", before)
    assert embedded.dtype == torch.float32
    assert dtypes == [torch.bfloat16, torch.bfloat16, torch.float32]


@pytest.mark.parametrize("name", ["p-vs-batch-size", "losses", "anatomy"])
@pytest.mark.slow
def test_every_network_of_a_study_is_built_for_the_studys_image_size(halves, name):
    """A backbone whose feature count depends on the image side (flattened, not pooled): a
    network built for another side would not fit the study's crops."""
    options = dict(backbone="tests.helpers.backbones:flat_features", embedding_dim=4,
                   image_size=8, batch_sizes=[16], seeds=[0], epochs=1, lr=1e-3)  # fmt: skip
    with pytest.MonkeyPatch.context() as patch:
        seen = _watch(patch)
        _run_study(name, halves, options)
    head = "head.weight"
    assert len(seen["models"]) == 2  # the check before training, then the seed's start
    for state in seen["models"]:
        assert state[head].shape == (4, 2 * 8 * 8)


@pytest.mark.parametrize("function", [study.p_vs_batch_size_on_images,
                                      study.loss_comparison_on_images, study.anatomy_on_images])
def test_a_bad_image_size_is_named_before_the_folder_is_read(tmp_path, function):
    """As epochs, workers, lr and seeds: the options first, then the data."""
    with pytest.raises(GradlabError, match=r"^image_size must be a positive integer; got 0$"):
        function(tmp_path / "no such folder", image_size=0)


@pytest.mark.parametrize("function", [study.loss_comparison_on_images, study.anatomy_on_images])
def test_the_loss_and_anatomy_studies_refuse_to_evaluate_on_their_training_images(
    halves, tmp_path, capsys, function
):
    with pytest.raises(GradlabError) as refused:
        function(halves, split="test", batch_sizes=[8], **SMALL)
    assert str(refused.value) == (
        "split must not be the evaluation split 'test': the study would train and measure "
        "retrieval on the same images; got split='test'"
    )
    train = _listing(tmp_path, "train.txt", range(CLASSES // 2), PER_CLASS)
    with pytest.raises(GradlabError) as refused:
        function(halves, layout="list", list_file=train, test_list_file=train, batch_sizes=[8],
                 **SMALL)
    assert str(refused.value) == (
        f"test_list_file must name other images than list_file; both are {str(train)!r}"
    )
    duplicate = tmp_path / "copy of train.txt"  # another name, the same images: accepted before
    duplicate.write_text(train.read_text())
    listed = [line.split()[0] for line in train.read_text().splitlines() if line.strip()]
    with pytest.raises(GradlabError) as refused:
        function(halves, layout="list", list_file=train, test_list_file=duplicate, batch_sizes=[8],
                 **SMALL)
    message = str(refused.value)
    prefix = (f"the evaluation list {str(duplicate)!r} must name other images than the "
              f"training list {str(train)!r}; {len(listed)} of its {len(listed)} images are in "
              "the training list too (the first: ")  # fmt: skip
    suffix = "): retrieval would be measured on images the study trained on"
    assert message.startswith(prefix) and message.endswith(suffix)
    first = message.removeprefix(prefix).removesuffix(suffix).strip("'")
    assert Path(first).resolve() == (Path(halves) / listed[0]).resolve()  # the list's first
    assert capsys.readouterr().err == ""  # before any run


def test_the_command_names_the_overlapping_lists_by_their_files(halves, tmp_path, capsys):
    # it said "test_list_file must name other images than list_file": Python's names, which
    # the command's user never typed (--test-list-file, --list-file)
    from gradlab.cli import main

    train = _listing(tmp_path, "train.txt", range(CLASSES // 2), PER_CLASS)
    duplicate = tmp_path / "copy.txt"
    duplicate.write_text(train.read_text())
    code = main(["study", "losses", "--data", str(halves), "--list-file", str(train),
                 "--test-list-file", str(duplicate), "--batch-sizes", "8", "--embedding-dim",
                 "8", "--image-size", "16", "--out", str(tmp_path / "out")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"gradlab: the evaluation list {str(duplicate)!r} must name other "
                          f"images than the training list {str(train)!r}; ")  # fmt: skip
    assert "_list_file" not in err and not (tmp_path / "out").exists()


@pytest.mark.parametrize("function", [study.loss_comparison_on_images, study.anatomy_on_images])
def test_an_online_products_test_list_that_repeats_training_images_is_refused(
    halves, tmp_path, capsys, function
):
    # Ebay_test.txt holding lines of Ebay_train.txt (a merged copy) was accepted: retrieval
    # measured on trained images; a list file's overlap was refused already
    paths = sorted(p.relative_to(halves).as_posix() for p in halves.glob("digit_*/*.png"))
    rows = {"train": [], "test": []}
    for image_id, path in enumerate(paths, start=1):
        label = int(path.split("/")[0].split("_")[1])
        rows["train" if label < CLASSES // 2 else "test"].append(f"{image_id} {label} 1 {path}")
    rows["test"].append(rows["train"][0])  # one training image listed for evaluation too
    for split, lines in rows.items():
        (halves / f"Ebay_{split}.txt").write_text(
            "\n".join(["image_id class_id super_class_id path", *lines]) + "\n")
    try:
        with pytest.raises(GradlabError) as refused:
            function(halves, batch_sizes=[8], **SMALL)
    finally:
        for split in rows:
            (halves / f"Ebay_{split}.txt").unlink()
    assert str(refused.value) == (
        f"the evaluation split 'test' must hold other images than the training split 'train'; "
        f"1 of its {len(rows['test'])} images is in both (the first: "
        f"{str(halves / rows['train'][0].split()[3])!r}): retrieval would be measured on "
        "images the study trained on")
    assert capsys.readouterr().err == ""  # before any run


@pytest.mark.slow
def test_the_evaluation_split_follows_the_layout_given_not_the_one_detected(halves, tmp_path):
    """Class folders that also hold Online Products' files (which ``layout="auto"`` would
    read): with ``layout="class-halves"`` the test split is the second half of the folders
    (the anatomy study here; the losses study reads its test split the same way)."""
    import shutil

    both = tmp_path / "both"
    shutil.copytree(halves, both)
    rows = {"train": [], "test": []}
    for image_id, path in enumerate(sorted(both.glob("digit_*/*.png")), start=1):
        label = int(path.parent.name.split("_")[1])
        if label < CLASSES // 2 + 2:  # Ebay_test.txt would hold two classes only
            split = "train" if label < CLASSES // 2 else "test"
            rows[split].append(f"{image_id} {label} 1 {path.relative_to(both).as_posix()}")
    for split, lines in rows.items():
        (both / f"Ebay_{split}.txt").write_text(
            "\n".join(["image_id class_id super_class_id path", *lines]) + "\n")
    settings = study.anatomy_on_images(both, layout="class-halves", batch_sizes=[8], seeds=[0],
                                       epochs=1, logs=1, **SMALL)["settings"]  # fmt: skip
    assert settings["test_data"] == f"test split ({TRAIN_IMAGES} images, {CLASSES // 2} classes)"


def test_mixed_precision_training_on_the_cpu_is_bfloat16_without_loss_scaling(halves):
    """``amp`` on the CPU: bfloat16 forwards; loss scaling is CUDA's float16 remedy, not asked
    for here (torch warns when a GradScaler is enabled without CUDA)."""
    import warnings

    with pytest.MonkeyPatch.context() as patch, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        seen = _watch(patch)
        study.p_vs_batch_size_on_images(halves, batch_sizes=[8], seeds=[0], amp=True, **SMALL)
    trained = [output.dtype for training, output in seen["forwards"] if training]
    assert trained and set(trained) == {torch.bfloat16}
    assert not [w for w in caught if "GradScaler" in str(w.message)]


def test_a_class_left_out_alone_is_named_in_the_singular():
    record = {"min_images_per_class": 4, "classes": 1, "images": 4, "left_out_classes": 1,
              "left_out_images": 2, "left_out_examples": {"dogs": 2}}  # fmt: skip
    with pytest.raises(GradlabError) as refused:
        study.check_batch_sizes([8], 1, left_out=record)
    assert str(refused.value) == (
        "this split holds 1 class(es) (the classes with 4 or more images; 1 class with fewer "
        "was left out: 'dogs' has 2); a batch needs two (a query needs a negative)")


def test_a_runs_seed_is_the_documented_seed_times_7919_plus_m():
    """As its docstring gives it, so that a user can draw a run's batches and crops again."""
    assert [study.run_seed(seed, m) for seed, m in ((0, 64), (1, 64), (3, 8))] == [
        64, 7919 + 64, 3 * 7919 + 8]


def test_a_run_that_diverges_says_so_naming_the_run_and_the_rate(halves, capsys):
    # lr=1e30 ended in "embeddings must be finite; got NaN in rows 0-7", the loss's check
    # of its input, which named neither the run nor the learning rate
    with pytest.raises(GradlabError) as raised:
        study.p_vs_batch_size_on_images(halves, batch_sizes=[8], seeds=[0],
                                        **{**SMALL, "lr": 1e30})  # fmt: skip
    message = str(raised.value)
    assert message.startswith("training diverged (p-vs-batch-size: seed 0, m = 8: training): "
                              "after 1 optimizer step(s) at lr=1e+30 the model's embeddings "
                              "are no longer finite (embeddings must be finite")  # fmt: skip
    assert message.endswith("); try a smaller --lr")


@pytest.mark.parametrize("function", [study.loss_comparison_on_images, study.anatomy_on_images])
def test_a_run_that_diverges_on_its_last_step_says_so_too(tmp_path, function):
    # one step (two training classes of 4 images, one batch of 8, one epoch): no later loss
    # call saw the diverged model, and the evaluation said "embeddings must be finite",
    # naming neither the run nor the rate
    for name in ("bench", "chair", "fan", "kettle"):
        write_images(tmp_path / "data" / name, 4)
    with pytest.raises(GradlabError) as raised:
        function(tmp_path / "data", batch_sizes=[8], seeds=[0], epochs=1,
                 **{**SMALL, "lr": 1e30})  # fmt: skip
    assert re.fullmatch(r"training diverged \(.*: training\): after 1 optimizer step\(s\) "
                        r"at lr=1e\+30 the model's embeddings of the test split are not finite "
                        r"\(8 of 8 rows\); try a smaller --lr", str(raised.value))  # fmt: skip

