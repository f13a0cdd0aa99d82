"""The loss comparison trained at its smallest (random images in place of the digit strings, 12
steps of 16 images): each loss's numbers land under its own name, every run starts from the
seed's one initialization, the seed is honoured, and hyperparameters are chosen on held-out
training numbers only. The reference runs the protocol of the module's docstring by hand from
public pieces."""

from __future__ import annotations

import json
import os
import re
import statistics
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from gradlab.data import FixedCountBatches
from gradlab.errors import GradlabError
from gradlab.experiments import loss_comparison
from gradlab.experiments.metrics import map_at_r
from gradlab.experiments.runtime import StudyError
from gradlab.experiments.statistics import mean_std
from gradlab.functional import in_batch_retrieval
from gradlab.models import DigitStringNet
from gradlab.progress import set_progress_mode
from gradlab.training import embed, train_on_batches
from tests.reference import retrieval_loops

TINY = {"per_class": 4, "batch_size": 16, "steps": 12, "lr": 3e-3, "timing_repeats": 1,
        "test_numbers": 6, "validation_numbers": 6, "sweep": False}  # fmt: skip
"""lr 3e-3: not train_on_batches' default, so a run that lost its settings' lr shows."""


def _stand_in_strings(num_digits, per_class, seed):
    """Random images in place of the digit strings (generated in milliseconds): 30 training
    numbers and 10 test numbers of ``per_class`` images each, drawn by ``seed``."""
    assert num_digits == 3  # the study's numbers
    generator = torch.Generator().manual_seed(seed)
    return SimpleNamespace(
        train_images=torch.rand(30 * per_class, 1, 10, 30, generator=generator),
        train_labels=torch.arange(30).repeat_interleave(per_class),
        test_images=torch.rand(10 * per_class, 1, 10, 30, generator=generator),
        test_labels=torch.arange(30, 40).repeat_interleave(per_class),
    )


@pytest.fixture
def tiny(monkeypatch):
    # quick=True is the tiny study; anything else one step longer and with one number fewer
    # held out and tested, so a lost flag shows in the batches and in the split
    longer = {**TINY, "steps": 13, "test_numbers": 5, "validation_numbers": 5}
    monkeypatch.setattr(loss_comparison, "settings", lambda q: dict(TINY if q is True else longer))
    monkeypatch.setattr(loss_comparison, "load_digit_strings", _stand_in_strings)


def _recall_loop(embeddings, labels, k):
    """Share of items with an item of their label among the k most cosine-similar others."""
    unit = F.normalize(embeddings.double(), dim=1).tolist()
    hits = 0
    for i, query in enumerate(unit):
        others = [j for j in range(len(unit)) if j != i]
        scores = {j: sum(a * b for a, b in zip(query, unit[j], strict=True)) for j in others}
        top = sorted(others, key=lambda j: (-scores[j], j))[:k]
        hits += any(labels[j] == labels[i] for j in top)
    return hits / len(unit)


def _map_at_r_loop(embeddings, labels):
    unit = F.normalize(embeddings.double(), dim=1)
    scores = unit @ unit.T
    keep = ~torch.eye(len(labels), dtype=torch.bool)
    scores = scores[keep].reshape(len(labels), -1)
    relevant = (labels.unsqueeze(0) == labels.unsqueeze(1))[keep].reshape(len(labels), -1)
    return retrieval_loops.map_at_r(scores, relevant)


def _by_hand(name, index, seed):
    """One candidate's run as the module's docstring describes it."""
    data = _stand_in_strings(3, 4, seed)
    numbers = data.train_labels.unique()
    order = torch.randperm(len(numbers), generator=torch.Generator().manual_seed(seed))
    held = torch.isin(data.train_labels, numbers[order[:6]])
    images, labels = data.train_images[~held], data.train_labels[~held]
    test_images, test_labels = data.test_images[: 6 * 4], data.test_labels[: 6 * 4]
    torch.manual_seed(seed)
    model = DigitStringNet()
    with torch.no_grad():
        model.head.bias -= model(images).mean(dim=0)
    batches = FixedCountBatches(labels, 16, 4, seed=seed).take(12)
    initial = embed(model, test_images)
    with torch.no_grad():
        first = model(images[batches[0]])
    unit = F.normalize(first, dim=1)
    before = {"score_range": (unit @ unit.T).max().item() - (unit @ unit.T).min().item(),
              "MAP@R": _map_at_r_loop(initial, test_labels),
              "recall@1": _recall_loop(initial, test_labels, 1)}  # fmt: skip
    if name is None:
        return before
    loss_fn = loss_comparison.make_loss(name, loss_comparison.CANDIDATES[name][index], 16)

    def gradient_norm(embeddings, batch_labels):
        leaf = embeddings.detach().clone().requires_grad_(True)
        loss_fn(leaf, batch_labels).backward()
        return leaf.grad.norm().item()

    norms = []
    losses = train_on_batches(
        model, images, labels, loss_fn, batches, lr=TINY["lr"],
        on_step=lambda step, e, y, _: norms.append(gradient_norm(e, y)),
    )  # fmt: skip
    trained = embed(model, test_images)
    return {
        "validation": _map_at_r_loop(
            embed(model, data.train_images[held]), data.train_labels[held]
        ),
        "MAP@R": _map_at_r_loop(trained, test_labels),
        "recall@1": _recall_loop(trained, test_labels, 1),
        "recall@4": _recall_loop(trained, test_labels, 4),
        "initial_loss": losses[0].item(),
        "final_loss": losses[-10:].mean().item(),  # the last 10 steps
        "initial_gradient_norm": gradient_norm(first, labels[batches[0]]),
        "early_gradient_norm": statistics.fmean(norms[: loss_comparison.GRADIENT_STEPS]),
    }


@pytest.mark.slow
@pytest.mark.parametrize(("name", "index"), [("FastAP", 0), ("Contrastive", 0),
                                             ("Blackbox AP", 0)])  # lambda x the batch size
def test_a_trained_run_is_the_protocol_run_by_hand(tiny, name, index):
    started = time.perf_counter()
    run = loss_comparison.seed_task(True, 2, name, index, "cpu")
    elapsed = time.perf_counter() - started
    expected = _by_hand(name, index, seed=2)
    assert run["validation"] == pytest.approx(expected["validation"], abs=1e-6)
    for metric in ("MAP@R", "recall@1", "recall@4"):
        assert run["metrics"][metric] == pytest.approx(expected[metric], abs=1e-6), metric
    for key in ("initial_loss", "final_loss", "initial_gradient_norm", "early_gradient_norm"):
        assert run[key] == pytest.approx(expected[key], rel=1e-5), key
    # parts of the task's time (no time asserted, only that a part is not more than the whole)
    assert 0 < run["loss_seconds"] < elapsed and 0 < run["step_seconds"] < elapsed


@pytest.mark.slow
def test_the_untrained_network_is_the_same_start_measured_by_hand(tiny):
    run = loss_comparison.seed_task(True, 2, None, 0, "cpu")
    expected = _by_hand(None, 0, seed=2)
    assert run["score_range"] == pytest.approx(expected["score_range"], rel=1e-5)
    assert run["before"]["MAP@R"] == pytest.approx(expected["MAP@R"], abs=1e-6)
    assert run["before"]["recall@1"] == pytest.approx(expected["recall@1"], abs=1e-6)


@pytest.mark.slow
def test_the_seed_fixes_the_run_and_another_seed_changes_it(tiny):
    first = loss_comparison.seed_task(True, 4, "Contrastive", 0, "cpu")
    again = loss_comparison.seed_task(True, 4, "Contrastive", 0, "cpu")
    other = loss_comparison.seed_task(True, 5, "Contrastive", 0, "cpu")
    timings = ("step_seconds", "loss_seconds")
    same = {k: v for k, v in first.items() if k not in timings}
    assert same == {k: v for k, v in again.items() if k not in timings}
    assert first["initial_loss"] != other["initial_loss"]
    assert first["final_loss"] != other["final_loss"]


class _ReachedError(Exception):
    """Raised by a stand-in where the test has seen what it looks for."""


def test_a_seed_task_puts_the_network_and_its_data_on_the_device(tiny, monkeypatch):
    """The meta device stands in for an accelerator: the network, the training images and
    labels all go there (the training loop expects them on the model's device)."""
    seen = {}
    real_centre = loss_comparison.centre_head

    def centring(model, images):
        seen["centred network"] = next(model.parameters()).device.type
        seen["centred images"] = images.device.type
        return real_centre(model, images)

    def training(model, images, labels, *args, **kwargs):
        seen["trained network"] = next(model.parameters()).device.type
        seen["training images"], seen["training labels"] = images.device.type, labels.device.type
        raise _ReachedError

    monkeypatch.setattr(loss_comparison, "centre_head", centring)
    monkeypatch.setattr(loss_comparison, "train_on_batches", training)
    with pytest.raises(_ReachedError):
        loss_comparison.seed_task(True, 0, "Contrastive", 0, "meta")
    assert seen == dict.fromkeys(("centred network", "centred images", "trained network",
                                  "training images", "training labels"), "meta")  # fmt: skip


def _planted(quick, seed, name, index, device):
    """Numbers that say where they came from: loss (its position), candidate, seed, key."""
    if name is None:
        return {"before": {"MAP@R": 0.001 * seed}, "score_range": 1.0 + seed}
    where = list(loss_comparison.CANDIDATES).index(name)
    keys = ("step_seconds", "loss_seconds", "final_loss", "initial_loss",
            "initial_gradient_norm", "early_gradient_norm")  # fmt: skip
    value = 100 * where + 10 * index + seed
    return {"validation": 0.5 - 0.1 * index, "metrics": {"MAP@R": value, "recall@1": -value},
            **{key: value + (k + 1) / 10 for k, key in enumerate(keys)}}  # fmt: skip


def test_each_losss_numbers_land_under_its_name_per_seed(monkeypatch):
    monkeypatch.setattr(loss_comparison, "seed_task", _planted)
    results = loss_comparison.measure(quick=True, seeds=(3, 1), workers=1)
    assert results["seeds"] == [3, 1]
    assert results["before"] == {"MAP@R": [0.003, 0.001]}
    assert results["initial_score_range"] == [4.0, 2.0]
    assert list(results["losses"]) == list(loss_comparison.CANDIDATES)
    for where, (name, run) in enumerate(results["losses"].items()):
        assert run["metrics"] == {"MAP@R": [100 * where + 3, 100 * where + 1],
                                  "recall@1": [-100 * where - 3, -100 * where - 1]}  # fmt: skip
        assert run["final_loss"] == pytest.approx([100 * where + 3.3, 100 * where + 1.3])
        assert run["early_gradient_norm"] == pytest.approx([100 * where + 3.6, 100 * where + 1.6])
        assert run["step_seconds"] == pytest.approx([100 * where + 3.1, 100 * where + 1.1])
        assert run["sweep"] == {"candidates": loss_comparison.CANDIDATES[name][:1],
                                "validation": [[0.5], [0.5]], "chosen": [0, 0]}  # fmt: skip
    config = results["settings"]
    assert config["classes_per_batch"] * 4 == config["batch_size"]
    assert isinstance(config["classes_per_batch"], int)  # a count, also in the JSON
    assert (config["device"], config["gradient_steps"]) == ("cpu", loss_comparison.GRADIENT_STEPS)
    with open("/proc/cpuinfo") as cpuinfo:  # Linux, as this suite's machines
        model = next(line.split(":", 1)[1].strip() for line in cpuinfo
                     if line.startswith("model name"))  # fmt: skip
    # one thread per task (seed_task), one worker: the times' conditions, for the table
    assert config["timing"] == {"clock": "wall", "device": "cpu", "processor": model,
                                "cores": len(os.sched_getaffinity(0)), "threads": 1,
                                "processes": 1}  # fmt: skip


def test_the_timing_conditions_name_one_thread_per_task_and_the_workers_in_effect(monkeypatch):
    # each task trains on one thread (study_threads), whatever this process's setting; with
    # workers=None the enclosing study_workers block's count (1 outside any) is the one used
    monkeypatch.setattr(loss_comparison, "seed_task", _planted)
    before = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        results = loss_comparison.measure(quick=True, seeds=(0,))
    finally:
        torch.set_num_threads(before)
    timing = results["settings"]["timing"]
    assert (timing["threads"], timing["processes"], timing["device"]) == (1, 1, "cpu")


def test_the_full_settings_sweep_every_candidate_and_quick_ones_only_the_first(monkeypatch):
    monkeypatch.setattr(loss_comparison, "seed_task", _planted)
    results = loss_comparison.measure(quick=False, seeds=(0,), workers=1)
    for name, run in results["losses"].items():
        trained = loss_comparison.CANDIDATES[name]
        assert run["sweep"]["candidates"] == trained
        assert run["sweep"]["validation"] == [pytest.approx([0.5 - 0.1 * i for i in
                                                             range(len(trained))])]  # fmt: skip
    quick, full = loss_comparison.settings(True), loss_comparison.settings(False)
    assert not quick["sweep"] and full["sweep"]
    for key in ("per_class", "batch_size", "steps", "test_numbers", "timing_repeats"):
        assert quick[key] < full[key], key  # quick is the smaller study


def test_a_failing_run_is_named_by_its_seed_loss_and_candidate(monkeypatch):
    def failing(quick, seed, name, index, device):
        if name == "Blackbox AP" and index == 2:
            raise RuntimeError("planted")
        return _planted(quick, seed, name, index, device)

    monkeypatch.setattr(loss_comparison, "seed_task", failing)
    with pytest.raises(
        StudyError, match=r"seed 7 \(Blackbox AP \(interpolation 4, margin 0.02\)\)"
    ):
        loss_comparison.measure(quick=False, seeds=(7,), workers=1)


@pytest.mark.parametrize(
    ("name", "params", "expected"),
    [
        ("Blackbox AP", {"lambda": 4.0, "margin": 0.0}, (4.0 * 48, 0.0)),
        ("Blackbox AP", {"interpolation": 4.0, "margin": 0.02}, (4.0, 0.02)),
    ],
)
def test_blackbox_ap_reads_lambda_on_the_batch_scale_and_interpolation_as_given(
    name, params, expected
):
    loss = loss_comparison.make_loss(name, params, 48)
    assert (loss.interpolation, loss.margin) == pytest.approx(expected)


def test_each_candidate_builds_its_own_setting():
    assert loss_comparison.make_loss("FastAP", {"bins": 10}, 16).num_bins == 10
    assert loss_comparison.make_loss("FAPPY", {"delta_min": 0.001}, 16).delta_min == 0.001
    excluded = loss_comparison.make_loss("SmoothAP (query excluded)", {"tau": 0.3}, 16)
    assert (excluded.tau, excluded.include_query) == (0.3, False)
    assert loss_comparison.make_loss("Contrastive", {"margin": 0.1}, 16).keywords == {"margin": 0.1}


def test_an_unknown_loss_is_refused_naming_the_known_ones():
    with pytest.raises(GradlabError, match=r"^name must be one of \['SmoothAP .*'Contrastive'\]; "
                                           r"got 'Triplet'$"):  # fmt: skip
        loss_comparison.make_loss("Triplet", {}, 16)


def test_no_candidate_is_refused():
    with pytest.raises(
        GradlabError, match=r"^validation must hold one value per candidate; got none"
    ):
        loss_comparison.select_candidate([])


@pytest.mark.parametrize("count", [0, 10])
def test_a_validation_split_keeps_at_least_one_number_each_side(count):
    labels = torch.arange(10).repeat_interleave(2)
    with pytest.raises(GradlabError, match=rf"^count must be between 1 and 9 \(.*\); got {count}$"):
        loss_comparison.validation_split(labels, count, seed=0)
    fit, held = loss_comparison.validation_split(labels, 9, seed=0)  # the widest allowed
    assert len(labels[fit].unique()) == 1 and len(labels[held].unique()) == 9
    fit, held = loss_comparison.validation_split(labels, 1, seed=0)  # the narrowest
    assert len(labels[fit].unique()) == 9 and len(labels[held].unique()) == 1


def test_the_centred_head_maps_the_images_mean_to_zero_and_keeps_the_rest():
    torch.manual_seed(0)
    model = DigitStringNet(out_features=8)
    images = torch.rand(12, 1, 10, 30)
    weight = model.head.weight.clone()
    loss_comparison.centre_head(model, images)
    with torch.no_grad():
        assert model(images).mean(dim=0).abs().max() < 1e-5
    assert torch.equal(model.head.weight, weight)


def test_evaluate_quotes_recall_and_map_at_r_of_each_item_querying_the_others():
    generator = torch.Generator().manual_seed(0)
    embeddings = torch.randn(12, 3, generator=generator, dtype=torch.float64)
    labels = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3])
    found = loss_comparison.evaluate(embeddings, labels)
    for k in (1, 2, 4, 8):
        assert found[f"recall@{k}"] == pytest.approx(_recall_loop(embeddings, labels, k))
    assert found["MAP@R"] == pytest.approx(_map_at_r_loop(embeddings, labels))
    scores, relevant = in_batch_retrieval(embeddings, labels)
    assert found["MAP@R"] == pytest.approx(map_at_r(scores, relevant))


PUBLISHED = Path(__file__).resolve().parents[2] / "figures" / "studies" / "loss_comparison.json"


def test_the_published_comparison_was_measured_with_the_full_settings_and_sweeps():
    """The numbers docs/studies.md quotes come from a run with the settings the code has now."""
    published = json.loads(PUBLISHED.read_text())
    recorded, full = published["settings"], loss_comparison.settings(False)
    assert {key: recorded[key] for key in full} == full
    assert recorded["gradient_steps"] == loss_comparison.GRADIENT_STEPS
    assert recorded["selection_rule"] == loss_comparison.SELECTION_RULE
    sweeps = {name: run["sweep"]["candidates"] for name, run in published["losses"].items()}
    assert sweeps == loss_comparison.CANDIDATES
    # the quick study only shrinks the sizes: same optimiser step, same validation split
    quick = loss_comparison.settings(True)
    assert (quick["lr"], quick["validation_numbers"]) == (full["lr"], full["validation_numbers"])
    assert set(quick) == set(full)


def test_measure_is_quick_on_the_cpu_unless_told_and_records_what_it_did(monkeypatch):
    monkeypatch.setattr(loss_comparison, "seed_task", _planted)
    results = loss_comparison.measure(seeds=(0,), workers=1)
    assert results["settings"]["device"] == "cpu"
    assert {k: results["settings"][k] for k in loss_comparison.settings(True)} == (
        loss_comparison.settings(True))  # fmt: skip
    assert all(len(run["sweep"]["candidates"]) == 1 for run in results["losses"].values())
    published = json.loads(PUBLISHED.read_text())["settings"]
    for key in ("initialization", "selection_rule"):
        assert results["settings"][key] == published[key], key


def test_progress_says_how_many_runs_of_how_many_losses_each_seed_trained(monkeypatch, capsys):
    monkeypatch.setattr(loss_comparison, "seed_task", _planted)
    set_progress_mode("lines")
    try:
        loss_comparison.measure(quick=False, seeds=(5,), workers=1)
    finally:
        set_progress_mode("auto")
    runs = sum(len(sweep) for sweep in loss_comparison.CANDIDATES.values())
    assert re.search(
        rf"^gradlab: loss comparison: seed 5 done \({runs} training runs of 6 losses, ",
        capsys.readouterr().err, flags=re.MULTILINE,
    )  # fmt: skip


def test_a_failing_untrained_network_is_named_so(monkeypatch):
    def failing(quick, seed, name, index, device):
        if name is None:
            raise RuntimeError("planted")
        return _planted(quick, seed, name, index, device)

    monkeypatch.setattr(loss_comparison, "seed_task", failing)
    with pytest.raises(StudyError, match=r"^loss comparison, seed 2 \(untrained network\) failed"):
        loss_comparison.measure(seeds=(2,), workers=1)


def test_the_quick_batches_hold_whole_classes_of_four():
    assert loss_comparison.settings(True)["batch_size"] % 4 == 0


def test_the_default_losses_are_the_full_studys():
    losses = loss_comparison.loss_functions()
    assert losses["SmoothAP (query excluded)"].tau == 0.01
    full = loss_comparison.settings(False)["batch_size"]
    assert losses["Blackbox AP"].interpolation == pytest.approx(4.0 * full)


def test_the_contrastive_loss_stays_on_the_labels_device():
    embeddings = torch.empty(6, 3, device="meta")
    labels = torch.tensor([0, 0, 1, 1, 2, 2], device="meta")
    assert loss_comparison.contrastive_loss(embeddings, labels).device.type == "meta"


def _summary_run(values, gradient=(1.0, 3.0)):
    return {"metrics": {"MAP@R": values}, "initial_gradient_norm": list(gradient)}


def test_a_runner_up_outside_the_spread_is_behind_and_an_equal_mean_is_not_below():
    before = [0.25, 0.375]  # binary fractions: the means below are exactly equal
    results = {"before": {"MAP@R": before}, "losses": {
        "best": _summary_run([0.75, 0.8125]),
        "second": _summary_run([0.5, 0.5625]),
        "level": _summary_run([0.125, 0.5]),  # the untrained mean, a wider spread
    }}  # fmt: skip
    summary = loss_comparison.summarize(results)
    assert summary["ranked"] == ["best", "second"] and summary["behind"] == ["second"]
    assert summary["tied"] == [] and list(summary["apart"]) == ["level"]
    assert summary["below_untrained"] == [] and summary["clearly_below_untrained"] == []
    reason = summary["apart"]["level"]
    assert reason["gap"] == pytest.approx(0.0, abs=1e-12)
    spread = mean_std([0.125, 0.5])[1] + mean_std(before)[1]
    assert reason["spread"] == pytest.approx(spread) and reason["initial_gradient_norm"] == 2.0


def test_measure_hands_its_worker_count_and_stage_to_the_task_runner(monkeypatch):
    seen = {}

    def laid_out(function, tasks, **options):
        seen.update(options)
        return [_planted(*task) for task in tasks]

    monkeypatch.setattr(loss_comparison, "run_tasks", laid_out)
    loss_comparison.measure(seeds=(0, 1), workers=3)
    assert (seen["workers"], seen["stage"]) == (3, "loss comparison")


def test_a_runs_step_and_loss_times_read_a_clock_around_training_and_each_timed_pass(
    tiny, monkeypatch
):
    """A clock that moves only where the test says: 36 s over the 12 training steps, then per
    pass of the loss after training 100 s (the untimed first pass), 2 s (the timed pass) and
    7 s (the gradient norm read last). The step time is 36 / 12; the loss time the median of
    the passes after the first: the one timed pass's 2 s."""
    clock = {"now": 1000.0, "trained": False, "after": 0}
    monkeypatch.setattr(loss_comparison, "time", SimpleNamespace(perf_counter=lambda: clock["now"]))
    real_train = loss_comparison.train_on_batches

    def train(*args, **kwargs):
        losses = real_train(*args, **kwargs)
        clock["now"] += 36.0
        clock["trained"] = True
        return losses

    real_make = loss_comparison.make_loss

    def make(name, params, batch_size):
        loss_fn = real_make(name, params, batch_size)

        def timed(embeddings, labels):
            if clock["trained"]:
                clock["now"] += (100.0, 2.0, 7.0)[clock["after"]]
                clock["after"] += 1
            return loss_fn(embeddings, labels)

        return timed

    monkeypatch.setattr(loss_comparison, "train_on_batches", train)
    monkeypatch.setattr(loss_comparison, "make_loss", make)
    run = loss_comparison.seed_task(True, 2, "Contrastive", 0, "cpu")
    assert run["step_seconds"] == 36.0 / TINY["steps"]
    assert run["loss_seconds"] == 2.0
    assert clock["after"] == TINY["timing_repeats"] + 2  # the timed passes and the norm


@pytest.mark.slow
def test_a_runs_kernels_run_on_one_thread_on_the_cpu(tiny, monkeypatch):
    """The studies' small kernels on one intra-op thread (runtime.study_threads)."""
    threads = []
    real_make = loss_comparison.make_loss

    def make(name, params, batch_size):
        loss_fn = real_make(name, params, batch_size)

        def counted(embeddings, labels):
            threads.append(torch.get_num_threads())
            return loss_fn(embeddings, labels)

        return counted

    monkeypatch.setattr(loss_comparison, "make_loss", make)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        loss_comparison.seed_task(True, 2, "Contrastive", 0, "cpu")
    finally:
        torch.set_num_threads(before)
    assert threads and set(threads) == {1}
