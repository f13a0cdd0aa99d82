"""measure() of the P-against-batch-size study at tiny sizes: every number it reports against a
float64 loop over the same batches, the batches and networks it says it uses, its labels.

The study's sizes come from its public ``settings``; here 2-digit strings (100 classes), two
batch sizes, two seeds and a few steps, so one run takes seconds. The samplers and the training
loop are watched (wrapped, not replaced) to read the batches drawn and the embeddings trained
on; the expected numbers are recomputed from those by tests/reference/batch_proportion_loops.py.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import io
import math

import pytest
import torch

from gradlab.data import FixedCountBatches, load_digit_strings
from gradlab.experiments import p_vs_batch_size as study
from gradlab.experiments.image_studies import run_seed
from gradlab.models import DigitStringNet
from gradlab.training import train_on_batches
from tests.reference.batch_proportion_loops import KEYS, batch_proportions

TINY = {"batch_sizes": [8, 16], "draws": 2, "fixed_batch_size": 16, "fixed_steps": 4,
        "epochs": 2, "num_digits": 2, "images_per_number": 4, "lr": 1e-2}  # fmt: skip
TAU, EPS = 0.002, 0.004  # not the defaults; a window where the trained P is below 1
SEEDS = (0, 1)
SAMPLERS_PER_SEED = 3 * len(TINY["batch_sizes"]) + 1  # two fixed settings, training, per m


@pytest.fixture(scope="module")
def run():
    samplers: list[dict] = []
    trainings: list[dict] = []

    class Watched(FixedCountBatches):
        def __init__(self, labels, batch_size, per_class=4, seed=0):
            super().__init__(labels, batch_size, per_class, seed)
            self.record = {"labels": labels.clone(), "batch_size": batch_size,
                           "per_class": per_class, "seed": seed, "taken": []}  # fmt: skip
            samplers.append(self.record)

        def take(self, count):
            batches = super().take(count)
            self.record["taken"].extend(batch.clone() for batch in batches)
            return batches

    def watched_training(model, images, labels, loss_fn, batches, *, lr, on_step=None):
        seen = {"start": copy.deepcopy(model.state_dict()), "model": model, "images": images,
                "labels": labels, "batches": list(batches), "lr": lr, "tau": loss_fn.tau,
                "steps": [], "threads": torch.get_num_threads()}  # fmt: skip

        def step(index, embeddings, batch_labels, loss):
            seen["steps"].append((index, embeddings.detach().clone(), batch_labels.clone()))
            if on_step is not None:
                on_step(index, embeddings, batch_labels, loss)

        trainings.append(seen)
        return train_on_batches(model, images, labels, loss_fn, batches, lr=lr, on_step=step)

    asked: list = []

    def tiny_settings(quick):
        asked.append(quick)
        return copy.deepcopy(TINY)

    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # so that the study's own one thread shows
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stderr(io.StringIO()) as err:
        patch.setattr(study, "settings", tiny_settings)
        patch.setattr(study, "FixedCountBatches", Watched)
        patch.setattr(study, "train_on_batches", watched_training)
        try:
            result = study.measure(quick=True, seeds=SEEDS, tau=TAU, eps=EPS, workers=1)
        finally:
            torch.set_num_threads(threads)
    assert asked == [True]  # the quick sizes were asked for
    return result, samplers, trainings, err.getvalue()


def _data(seed):
    return load_digit_strings(num_digits=TINY["num_digits"],
                              per_class=TINY["images_per_number"], seed=seed)  # fmt: skip


def _mean_loop(embeddings, labels, batches):
    rows = [batch_proportions(embeddings[b].tolist(), labels[b].tolist(), TAU, EPS)
            for b in batches]  # fmt: skip
    return [sum(row[k] for row in rows) / len(rows) for k in range(len(KEYS))]


def _reported(result, setting, seed_index, size_index):
    return [result["settings"][setting][key][seed_index][size_index] for key in KEYS]


def _embed(model, images):
    model.eval()
    with torch.no_grad():
        return model(images)


def _the_result_is_labelled_with_the_sizes_seeds_and_training_it_ran(run):
    result, samplers, trainings, _ = run
    assert result["batch_sizes"] == TINY["batch_sizes"] and result["seeds"] == list(SEEDS)
    assert (result["per_class"], result["tau"], result["eps"]) == (4, TAU, EPS)
    assert "unseen 2-digit strings (100 classes)" in result["data"]
    fixed = result["settings"]["fixed_trained"]["training"]
    assert fixed == f"SmoothAP at m={TINY['fixed_batch_size']}, {TINY['fixed_steps']} steps"
    assert set(result["settings"]) == {"fixed_untrained", "fixed_trained", "trained_at_m"}
    trained = result["settings"]["trained_at_m"]
    images = len(_data(0).train_labels)
    expected_steps = [TINY["epochs"] * math.ceil(images / m) for m in TINY["batch_sizes"]]
    assert trained["steps"] == expected_steps and trained["epochs"] == TINY["epochs"]
    assert len(samplers) == SAMPLERS_PER_SEED * len(SEEDS)
    assert len(trainings) == (1 + len(TINY["batch_sizes"])) * len(SEEDS)
    for seed_index in range(len(SEEDS)):
        mine = samplers[SAMPLERS_PER_SEED * seed_index : SAMPLERS_PER_SEED * (seed_index + 1)]
        sizes = [s["batch_size"] for s in mine]
        count = len(TINY["batch_sizes"])
        assert sizes == [*TINY["batch_sizes"], TINY["fixed_batch_size"], *TINY["batch_sizes"],
                         *TINY["batch_sizes"]]  # fmt: skip
        assert all(s["per_class"] == 4 for s in mine)
        taken = [len(s["taken"]) for s in mine]
        draws = [TINY["draws"]] * count
        assert taken == [*draws, TINY["fixed_steps"], *draws, *expected_steps]
        for sampler in mine:  # 4 images of each of m / 4 classes in every batch
            for batch in sampler["taken"]:
                counts = torch.bincount(sampler["labels"][batch])
                assert sorted(counts[counts > 0].tolist()) == [4] * (sampler["batch_size"] // 4)
    for training in trainings:
        assert training["lr"] == TINY["lr"] and training["tau"] == TAU


def _train_and_test_never_share_images_or_classes(run):
    _, samplers, trainings, _ = run
    for seed_index, seed in enumerate(SEEDS):
        data = _data(seed)
        assert not set(data.train_labels.tolist()) & set(data.test_labels.tolist())
        mine = samplers[SAMPLERS_PER_SEED * seed_index : SAMPLERS_PER_SEED * (seed_index + 1)]
        count = len(TINY["batch_sizes"])
        measured = [*mine[:count], *mine[count + 1 : 2 * count + 1]]  # the fixed settings
        for sampler in measured:
            assert torch.equal(sampler["labels"], data.test_labels)
        for sampler in [mine[count], *mine[2 * count + 1 :]]:  # the trainings
            assert torch.equal(sampler["labels"], data.train_labels)
        for training in trainings[3 * seed_index : 3 * (seed_index + 1)]:
            assert torch.equal(training["images"], data.train_images)
            assert torch.equal(training["labels"], data.train_labels)


def _the_fixed_settings_are_a_float64_loop_over_the_same_test_batches(run):
    result, samplers, trainings, _ = run
    count = len(TINY["batch_sizes"])
    for seed_index, seed in enumerate(SEEDS):
        data = _data(seed)
        mine = samplers[SAMPLERS_PER_SEED * seed_index : SAMPLERS_PER_SEED * (seed_index + 1)]
        torch.manual_seed(seed)
        untrained = DigitStringNet(num_digits=2)
        fixed_training = trainings[3 * seed_index]
        for key, value in untrained.state_dict().items():  # trained from the seeded start
            assert torch.equal(fixed_training["start"][key], value)
        assert [len(b) for b in fixed_training["batches"]] == [16] * TINY["fixed_steps"]
        models = {"fixed_untrained": untrained, "fixed_trained": fixed_training["model"]}
        for offset, (setting, model) in zip((0, count + 1), models.items(), strict=True):
            embeddings = _embed(model, data.test_images)
            for k in range(count):
                batches = mine[offset + k]["taken"]
                # both fixed settings measure the same batches at each m
                assert all(torch.equal(a, b) for a, b in
                           zip(batches, mine[count + 1 + k]["taken"], strict=True))  # fmt: skip
                expected = _mean_loop(embeddings, data.test_labels, batches)
                reported = _reported(result, setting, seed_index, k)
                assert reported == pytest.approx(expected, abs=1e-9), (setting, seed, k)
    trained_p = result["settings"]["fixed_trained"]["P"]
    assert all(0.0 < value < 1.0 for row in trained_p for value in row)  # not a trivial 1


def _trained_at_m_is_the_mean_over_the_last_epoch_from_the_fixed_trained_start(run):
    result, _, trainings, _ = run
    images = len(_data(0).train_labels)
    for seed_index in range(len(SEEDS)):
        fixed = trainings[3 * seed_index]["model"].state_dict()
        for k, m in enumerate(TINY["batch_sizes"]):
            training = trainings[3 * seed_index + 1 + k]
            for key, value in fixed.items():
                assert torch.equal(training["start"][key], value)
            per_epoch = math.ceil(images / m)
            last = [(e, y) for step, e, y in training["steps"]
                    if step >= (TINY["epochs"] - 1) * per_epoch]  # fmt: skip
            assert len(training["steps"]) == TINY["epochs"] * per_epoch and len(last) == per_epoch
            rows = [batch_proportions(e.tolist(), y.tolist(), TAU, EPS) for e, y in last]
            expected = [sum(row[i] for row in rows) / len(rows) for i in range(len(KEYS))]
            reported = _reported(result, "trained_at_m", seed_index, k)
            assert reported == pytest.approx(expected, abs=1e-9), (seed_index, m)


def _each_seed_has_its_own_data_network_and_numbers(run):
    result, _, trainings, _ = run
    assert not torch.equal(_data(0).test_labels, _data(1).test_labels)
    assert any(not torch.equal(a, b) for a, b in
               zip(trainings[0]["start"].values(), trainings[3]["start"].values(),
                   strict=True))  # fmt: skip
    for setting in ("fixed_trained", "trained_at_m"):  # the untrained P is 1 at both seeds
        first, second = result["settings"][setting]["P"]
        assert first != second, setting


def _each_seed_draws_its_own_batches_on_one_thread(run):
    """Seeds 0 and 1 have data of the same layout (50 training and 50 test numbers of 4 images,
    sorted): a sampler that lost its seed would draw the same indices for both."""
    _, samplers, trainings, _ = run
    first, second = samplers[:SAMPLERS_PER_SEED], samplers[SAMPLERS_PER_SEED:]
    for mine, other in zip(first, second, strict=True):  # each setting and m, in order
        assert mine["batch_size"] == other["batch_size"]
        assert any(not torch.equal(a, b) for a, b in
                   zip(mine["taken"], other["taken"], strict=True)), mine["batch_size"]  # fmt: skip
    assert {training["threads"] for training in trainings} == {1}  # runtime.study_threads


def _each_run_draws_its_batches_with_the_documented_run_seed(run):
    """The batches of seed s at m come from the image studies' run seed (s * 7919 + m, see
    gradlab.experiments.image_studies.run_seed), in each setting, so that a user can draw a
    run's batches again; the fixed network's own training batches from the seed itself."""
    _, samplers, _, _ = run
    for seed_index, seed in enumerate(SEEDS):
        mine = samplers[SAMPLERS_PER_SEED * seed_index : SAMPLERS_PER_SEED * (seed_index + 1)]
        per_m = [run_seed(seed, m) for m in TINY["batch_sizes"]]
        assert [s["seed"] for s in mine] == [*per_m, seed, *per_m, *per_m]


def _the_progress_lines_name_the_stage_and_its_work(run):
    *_, err = run
    sizes = len(TINY["batch_sizes"])
    for seed in SEEDS:
        assert (f"gradlab: P against batch size: seed {seed} done ({sizes} batch sizes x 3 "
                f"settings, {sizes + 1} networks trained, ") in err  # fmt: skip


def test_the_defaults_are_the_quick_run_and_the_papers_tau_and_eps():
    defaults = {name: p.default for name, p in inspect.signature(study.measure).parameters.items()}
    # Brown et al. (2020), supplementary Sec. 3: tau = 0.01, eps = 0.005
    assert (defaults["quick"], defaults["tau"], defaults["eps"]) == (True, 0.01, 0.005)


def test_measure_at_tiny_sizes_reports_what_it_ran(run):
    """One test over the one run, so that mutation testing (which credits a module fixture's
    work to the first test using it) runs every check below for every mutant."""
    _the_result_is_labelled_with_the_sizes_seeds_and_training_it_ran(run)
    _train_and_test_never_share_images_or_classes(run)
    _the_fixed_settings_are_a_float64_loop_over_the_same_test_batches(run)
    _trained_at_m_is_the_mean_over_the_last_epoch_from_the_fixed_trained_start(run)
    _each_seed_has_its_own_data_network_and_numbers(run)
    _each_seed_draws_its_own_batches_on_one_thread(run)
    _each_run_draws_its_batches_with_the_documented_run_seed(run)
    _the_progress_lines_name_the_stage_and_its_work(run)
    result = run[0]
    assert result["data"].endswith("built from scikit-learn's digits")
    assert result["model"] == "DigitStringNet (a small CNN)"
