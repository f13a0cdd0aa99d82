"""The operating-region studies at tiny sizes: every share they report against float64 loops
over the batches and embeddings they used, the words of the conclusion against the numbers, the
seeded starts, the sizes they say they ran.

The sizes come from the public ``batch_size_settings`` and ``dynamics_settings``; the samplers,
``embed`` and the training loop are watched (wrapped, not replaced) to read what the study saw.
"""

from __future__ import annotations

import copy
import itertools
import math

import numpy as np
import pytest
import torch

from gradlab.data import ClassBalancedBatches, load_digits_split
from gradlab.experiments import operating_region as study
from gradlab.functional import decomposition_norms, in_batch_decomposition
from gradlab.models import EmbeddingMLP
from gradlab.progress import progress
from gradlab.training import embed, train_embedding
from tests.reference.batch_proportion_loops import cosine_scores, entry_shares
from tests.reference.operating_region_loops import gradient_count

SIZES = {"epochs": 2, "fixed": [16, 24, 32], "trained": [16, 32], "draws": 3}
ALL_DIGITS = 1797  # scikit-learn's digits: the fixed models' uniform batches permute them all
DYNAMICS = {"epochs": 1, "per_class": 4, "classes_per_batch": 4}
TAU, EPS = 0.02, 0.004
SHARES = ("p_seed_definition", "p_off_diagonal", "p_query_column", "p_without_query")


def _watch(patch) -> dict:
    seen: dict[str, list] = {"samplers": [], "embeds": [], "trainings": [], "bars": [],
                             "permutations": []}  # fmt: skip

    class Watched(ClassBalancedBatches):
        def __init__(self, labels, per_class, classes_per_batch=None, seed=0):
            super().__init__(labels, per_class, classes_per_batch, seed=seed)
            self.record = {"labels": labels.clone(), "per_class": per_class,
                           "classes_per_batch": classes_per_batch, "taken": []}  # fmt: skip
            seen["samplers"].append(self.record)

        def take(self, count):
            batches = super().take(count)
            self.record["taken"].extend(batch.clone() for batch in batches)
            return batches

    def watched_embed(model, images, *args, **kwargs):
        embeddings = embed(model, images, *args, **kwargs)
        seen["embeds"].append({"model": copy.deepcopy(model), "images": images,
                               "embeddings": embeddings.detach().clone()})  # fmt: skip
        return embeddings

    def watched_training(model, images, labels, loss_fn, **options):
        record = {"start": copy.deepcopy(model.state_dict()), "model": model, "images": images,
                  "labels": labels, "tau": loss_fn.tau, "steps": [], **options}  # fmt: skip
        on_step = options.pop("on_step", None)

        def step(index, embeddings, batch_labels, loss):
            record["steps"].append((index, embeddings.clone(), batch_labels.clone(), loss))
            if on_step is not None:
                on_step(index, embeddings, batch_labels, loss)

        seen["trainings"].append(record)
        return train_embedding(model, images, labels, loss_fn, on_step=step, **options)

    def watched_progress(iterable=None, **options):
        seen["bars"].append(options["desc"])
        return progress(iterable, **options)

    randperm = torch.randperm  # the unwatched one, for the watch to call

    def watched_randperm(n, *args, **kwargs):
        permutation = randperm(n, *args, **kwargs)
        if n == ALL_DIGITS:
            seen["permutations"].append(permutation.clone())
        return permutation

    patch.setattr(study, "ClassBalancedBatches", Watched)
    patch.setattr(study, "embed", watched_embed)
    patch.setattr(study, "progress", watched_progress)
    patch.setattr(torch, "randperm", watched_randperm)
    patch.setattr(study, "train_embedding", watched_training)
    return seen


@pytest.fixture(scope="module")
def batch_size_run():
    asked = []

    def settings(quick):
        asked.append(quick)
        return copy.deepcopy(SIZES)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(study, "batch_size_settings", settings)
        seen = _watch(patch)
        result = study.p_against_batch_size(quick=True, tau=TAU, eps=EPS)
    seen["settings_asked"] = asked
    return result, seen


@pytest.fixture(scope="module")
def dynamics_run():
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(study, "dynamics_settings", lambda quick: copy.deepcopy(DYNAMICS))
        seen = _watch(patch)
        result = study.training_dynamics(quick=True, tau=TAU, eps=EPS)
    return result, seen


def _loop_means(embeddings, batches):
    rows = [entry_shares(embeddings[b].tolist(), TAU, EPS) for b in batches]
    return {key: sum(row[key] for row in rows) / len(rows) for key in SHARES}


def _same_weights(state, model) -> bool:
    return all(torch.equal(state[key], value) for key, value in model.state_dict().items())


def _the_batch_size_study_reports_the_sizes_it_ran(batch_size_run):
    result, seen = batch_size_run
    assert (result["tau"], result["eps"], result["epochs"]) == (TAU, EPS, SIZES["epochs"])
    names = {f"{model}_{sampling}" for model in ("untrained", "trained")
             for sampling in ("uniform", "class_balanced")}  # fmt: skip
    assert set(result["fixed_model"]) == names
    for rows in result["fixed_model"].values():
        assert [row["batch_size"] for row in rows] == SIZES["fixed"]
        assert all(row["batches"] == SIZES["draws"] for row in rows)
    trained = result["trained_per_batch_size"]
    assert [row["batch_size"] for row in trained] == SIZES["trained"]
    fixed_training, *per_m = seen["trainings"]
    assert len(per_m) == len(SIZES["trained"])
    for training, row, m in zip(per_m, trained, SIZES["trained"], strict=True):
        assert (training["per_class"], training["classes_per_batch"]) == (m // 4, 4)
        assert training["epochs"] == SIZES["epochs"] and training["tau"] == TAU
        assert row["steps"] == len(training["steps"])
        assert all(len(batch_labels) == m for _, _, batch_labels, _ in training["steps"])
    assert (fixed_training["per_class"], fixed_training["classes_per_batch"]) == (16, 4)
    assert fixed_training["epochs"] == SIZES["epochs"] and fixed_training["tau"] == TAU


def _every_network_trains_on_the_seen_classes_from_one_seeded_start(batch_size_run):
    _, seen = batch_size_run
    digits = load_digits_split()
    torch.manual_seed(0)
    initial = EmbeddingMLP()
    for training in seen["trainings"]:
        assert _same_weights(training["start"], initial)
        assert torch.equal(training["images"], digits.train_images)
        assert torch.equal(training["labels"], digits.train_labels)
        assert set(training["labels"].tolist()) == {0, 1, 2, 3, 4}


def _fixed_models_embed_all_digits_and_class_balanced_rows_are_loops(batch_size_run):
    result, seen = batch_size_run
    digits = load_digits_split()
    all_images = torch.cat([digits.train_images, digits.test_images])
    all_labels = torch.cat([digits.train_labels, digits.test_labels])
    untrained, trained = seen["embeds"][:2]
    torch.manual_seed(0)
    assert _same_weights(untrained["model"].state_dict(), EmbeddingMLP())
    assert _same_weights(trained["model"].state_dict(), seen["trainings"][0]["model"])
    for embedded in (untrained, trained):
        assert torch.equal(embedded["images"], all_images)
    balanced = [s for s in seen["samplers"] if len(s["labels"]) == len(all_labels)]
    assert len(balanced) == 2 * len(SIZES["fixed"])
    for index, (name, embedded) in enumerate((("untrained", untrained), ("trained", trained))):
        rows = result["fixed_model"][f"{name}_class_balanced"]
        for k, (row, m) in enumerate(zip(rows, SIZES["fixed"], strict=True)):
            sampler = balanced[index * len(SIZES["fixed"]) + k]
            assert (sampler["per_class"], sampler["classes_per_batch"]) == (m // 8, 8)
            assert torch.equal(sampler["labels"], all_labels)
            assert len(sampler["taken"]) == SIZES["draws"]
            expected = _loop_means(embedded["embeddings"], sampler["taken"])
            assert {key: row[key] for key in SHARES} == pytest.approx(expected, abs=1e-9)


def _uniform_rows_split_p_into_diagonal_column_and_pairs(batch_size_run):
    """Per query, m of the m^2 entries are the diagonal (always inside), 2(m - 1) pair the
    query's own column with a candidate and (m - 1)(m - 2) pair two other candidates: the
    identities hold for every batch, so for the means of any size; the prediction is the same
    split with the column and pair shares of the largest size."""
    result, _ = batch_size_run
    for name in ("untrained_uniform", "trained_uniform"):
        rows = result["fixed_model"][name]
        column, pairs = rows[-1]["p_query_column"], rows[-1]["p_without_query"]
        for row in rows:
            m = row["batch_size"]
            seed_p, off = row["p_seed_definition"], row["p_off_diagonal"]
            assert seed_p == pytest.approx(1 / m + (m - 1) / m * off, abs=1e-12)
            split = (2 * row["p_query_column"] + (m - 2) * row["p_without_query"]) / m
            assert off == pytest.approx(split, abs=1e-12)
            predicted = 1 / m + 2 * (m - 1) / m**2 * column + (m - 1) * (m - 2) / m**2 * pairs
            assert row["sampling_only_prediction"] == pytest.approx(predicted, abs=1e-12)
            assert 0.0 < off < 1.0


def _trained_rows_average_the_last_epoch_and_measure_the_score_spread(batch_size_run):
    result, seen = batch_size_run
    digits = load_digits_split()
    spreads = seen["embeds"][2:]
    for row, training, spread in zip(result["trained_per_batch_size"], seen["trainings"][1:],
                                     spreads, strict=True):  # fmt: skip
        per_epoch = len(training["steps"]) // SIZES["epochs"]
        last = [e for step, e, _, _ in training["steps"]
                if step >= (SIZES["epochs"] - 1) * per_epoch]  # fmt: skip
        assert len(last) == per_epoch
        rows = [entry_shares(e.tolist(), TAU, EPS) for e in last]
        for key in SHARES:
            assert row[key] == pytest.approx(sum(r[key] for r in rows) / len(rows), abs=1e-9)
        assert torch.equal(spread["images"], digits.train_images)
        assert _same_weights(spread["model"].state_dict(), training["model"])
        vectors = spread["embeddings"].numpy().astype(np.float64)
        unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        scores = unit @ unit.T  # numpy in float64, not the study's torch float32
        assert row["score_spread"] == pytest.approx(scores.std(ddof=1), abs=1e-6)


def _change_words(rows, key):
    first, last = rows[0][key], rows[-1][key]
    m0, m1 = rows[0]["batch_size"], rows[-1]["batch_size"]
    if abs(last - first) < 0.01:
        return f"stays near {last:.3f} ({first:.3f} at m={m0}, {last:.3f} at m={m1})"
    word = "rises" if last > first else "falls"
    return f"{word} from {first:.3f} (m={m0}) to {last:.3f} (m={m1})"


def _the_conclusion_words_each_trend_from_its_numbers(batch_size_run):
    result, _ = batch_size_run
    parts = []
    for name in ("untrained_uniform", "trained_uniform"):
        rows = result["fixed_model"][name]
        gap = max(abs(r["p_seed_definition"] - r["sampling_only_prediction"]) for r in rows)
        model = name.split("_")[0]
        parts.append(f"Fixed {model} model, uniform batches: the paper's P "
                     f"{_change_words(rows, 'p_seed_definition')}, while P over pairs of two "
                     f"other candidates {_change_words(rows, 'p_without_query')}; the shares of "
                     "the diagonal and of the query's own column predict the paper's P to within "
                     f"{gap:.3f} at every size.")  # fmt: skip
    balanced = result["fixed_model"]["trained_class_balanced"]
    parts.append("Fixed trained model, class-balanced batches (8 classes of m/8): P over pairs of "
                 f"two other candidates {_change_words(balanced, 'p_without_query')}.")  # fmt: skip
    trained = result["trained_per_batch_size"]
    parts.append("One model trained per batch size (same epochs, same initialization): the "
                 f"paper's P {_change_words(trained, 'p_seed_definition')} and P over pairs of "
                 f"two other candidates {_change_words(trained, 'p_without_query')}; the score "
                 f"spread {_change_words(trained, 'score_spread')}.")  # fmt: skip
    # what the numbers mean, said after them: the diagonal and the self-score move P with m
    parts.append("At a fixed model, a larger batch does not hold a larger proportion of close "
                 "pairs: what moves with m is the weight of the diagonal and of the query's "
                 "self-score (exactly 1), which Eq. 1 counts. Any further dependence on m must "
                 "come from what training at that batch size does to the scores.")  # fmt: skip
    assert result["conclusion"] == " ".join(parts)


def test_a_change_of_0_01_is_a_rise_and_a_smaller_one_stays_near():
    def rows(first, last, key="p_seed_definition"):
        flat = {"p_seed_definition": 0.2, "sampling_only_prediction": 0.2,
                "p_without_query": 0.1, "score_spread": 0.3}  # fmt: skip
        return [{**flat, key: first, "batch_size": 16}, {**flat, key: last, "batch_size": 32}]

    fixed = {name: rows(0.2, 0.2) for name in ("untrained_uniform", "trained_uniform",
                                               "trained_class_balanced")}  # fmt: skip
    # 0.01 - 0.0 is exactly 0.01 in binary floating point: the smallest change called one
    worded = study.batch_size_conclusion(fixed, rows(0.0, 0.01))
    assert "the paper's P rises from 0.000 (m=16) to 0.010 (m=32) and" in worded
    worded = study.batch_size_conclusion(fixed, rows(0.0, -0.01))
    assert "the paper's P falls from 0.000 (m=16) to -0.010 (m=32) and" in worded
    worded = study.batch_size_conclusion(fixed, rows(0.0, 0.0099))
    assert "the paper's P stays near 0.010 (0.000 at m=16, 0.010 at m=32) and" in worded


def _uniform_rows_are_loops_over_batches_both_models_share(batch_size_run):
    """Uniform batches are m distinct digits of all 1797 (the first m of a permutation); the
    untrained and the trained model are measured on the same batches, so that their rows
    differ by the model alone."""
    result, seen = batch_size_run
    per_model = len(SIZES["fixed"]) * SIZES["draws"]
    permutations = seen["permutations"]
    assert len(permutations) == 2 * per_model
    for first, second in zip(permutations[:per_model], permutations[per_model:], strict=True):
        assert torch.equal(first, second)
    untrained, trained = seen["embeds"][:2]
    for name, embedded in (("untrained", untrained), ("trained", trained)):
        rows = result["fixed_model"][f"{name}_uniform"]
        for k, (row, m) in enumerate(zip(rows, SIZES["fixed"], strict=True)):
            drawn = permutations[k * SIZES["draws"] : (k + 1) * SIZES["draws"]]
            batches = [permutation[:m] for permutation in drawn]
            expected = _loop_means(embedded["embeddings"], batches)
            assert {key: row[key] for key in SHARES} == pytest.approx(expected, abs=1e-9)


def _the_study_runs_its_quick_settings_under_labelled_progress_bars(batch_size_run):
    _, seen = batch_size_run
    assert seen["settings_asked"] == [True]
    fixed = [
        f"P vs m (10 digit classes), fixed model, {sampling}"
        for _ in ("untrained", "trained")
        for sampling in ("uniform", "class_balanced")
    ]
    assert seen["bars"] == [*fixed, "P vs m (10 digit classes), trained per m"]


@pytest.mark.slow
def test_the_dynamics_record_every_step_against_loops(dynamics_run):
    result, seen = dynamics_run
    (training,) = seen["trainings"]
    m = DYNAMICS["per_class"] * DYNAMICS["classes_per_batch"]
    assert (result["tau"], result["eps"], result["batch_size"]) == (TAU, EPS, m)
    assert (result["classes_per_batch"], result["per_class"]) == (DYNAMICS["classes_per_batch"],
                                                                  DYNAMICS["per_class"])
    assert (training["per_class"], training["classes_per_batch"], training["epochs"]) == (
        DYNAMICS["per_class"],
        DYNAMICS["classes_per_batch"],
        DYNAMICS["epochs"],
    )
    assert training["tau"] == TAU
    torch.manual_seed(1)
    assert _same_weights(training["start"], EmbeddingMLP())
    history = result["history"]
    assert [h["step"] for h in history] == [step for step, *_ in training["steps"]]
    assert len(history) > 10
    for record, (_, embeddings, labels, loss) in zip(history, training["steps"], strict=True):
        assert record["loss"] == loss
        shares = entry_shares(embeddings.tolist(), TAU, EPS)
        assert {key: record[key] for key in SHARES} == pytest.approx(shares, abs=1e-9)
        score = cosine_scores(embeddings.double().tolist())
        counts, weighted = [], []
        for q in range(m):
            others = [j for j in range(m) if j != q]
            row = [score[q][j] for j in others]
            positives = [bool(labels[j] == labels[q]) for j in others]
            counts.append(gradient_count(row, positives, TAU, EPS, False))
            weighted.append(gradient_count(row, positives, TAU, EPS, True))
        assert record["mean_gradient_count"] == pytest.approx(sum(counts) / m, abs=1e-12)
        assert record["share_without_gradient"] == pytest.approx(counts.count(0) / m, abs=1e-12)
        assert record["share_without_weighted_gradient"] == pytest.approx(
            weighted.count(0) / m, abs=1e-12
        )
        norms = decomposition_norms(in_batch_decomposition(embeddings.double(), labels, TAU))
        for key, name in (("ad_share", "ad_share"), ("ad_cb_cosine", "cosine"),
                          ("grad_norm", "grad_norm")):  # fmt: skip
            kept = [v for v in norms[name].tolist() if not math.isnan(v)]
            expected = sum(kept) / len(kept) if kept else math.nan
            assert record[key] == pytest.approx(expected, abs=1e-9, nan_ok=True), key


def _width_by_root(tau: float, eps: float) -> float:
    """Half-width of |dG/dD| > eps from the reference slope (scipy's root; 0 when the sigmoid's
    steepest slope 1 / (4 tau) does not exceed eps)."""
    from scipy.optimize import brentq

    from tests.reference.smooth_ap_loops import slope

    if 1 / (4 * tau) <= eps:
        return 0.0
    return brentq(lambda d: slope(d, tau) - eps, 0.0, 100.0 * tau + 10.0, xtol=1e-15)


def test_the_closed_form_curves_span_their_axes_under_their_labels():
    results = study.closed_form_curves()
    taus, spreads = results["taus"], results["spreads"]
    # tau from 1e-4 to 10 and the spread from 1e-3 to 1, evenly on a log axis
    for values, low, high in ((taus, 1e-4, 10.0), (spreads, 1e-3, 1.0)):
        assert values[0] == pytest.approx(low, rel=1e-12)
        assert values[-1] == pytest.approx(high, rel=1e-12)
        ratios = [b / a for a, b in itertools.pairwise(values)]
        assert max(ratios) == pytest.approx(min(ratios), rel=1e-9) and len(values) >= 20
    assert list(results["widths"]) == ["0.0005", "0.005", "0.05", "0.5"]
    for eps, widths in results["widths"].items():
        expected = [_width_by_root(tau, float(eps)) for tau in taus]
        assert widths == pytest.approx(expected, rel=1e-9, abs=1e-15), eps
    assert list(results["expected_proportion"]) == ["0.005", "0.01", "0.05"]
    assert list(results["simulated_proportion"]) == ["0.005", "0.01", "0.05"]
    for points in results["simulated_proportion"].values():  # every half decade, 1e-3 to 1
        assert [s for s, _ in points] == pytest.approx([10 ** (k / 2) for k in range(-6, 1)])
    setting = results["seed_setting"]
    assert (setting["tau"], setting["eps"]) == (0.01, 0.005)
    assert setting["width"] == pytest.approx(_width_by_root(0.01, 0.005), rel=1e-9)


@pytest.mark.slow
def test_the_simulation_follows_its_seed():
    default, again = study.closed_form_curves(), study.closed_form_curves(seed=0)
    other = study.closed_form_curves(seed=1)
    assert default["simulated_proportion"] == again["simulated_proportion"]
    assert other["simulated_proportion"] != default["simulated_proportion"]


@pytest.mark.slow
def test_p_against_batch_size_at_tiny_sizes_reports_what_it_ran(batch_size_run):
    """One test over the one run, so that mutation testing (which credits a module
    fixture's work to the first test using it) runs every check for every mutant."""
    _the_batch_size_study_reports_the_sizes_it_ran(batch_size_run)
    _every_network_trains_on_the_seen_classes_from_one_seeded_start(batch_size_run)
    _fixed_models_embed_all_digits_and_class_balanced_rows_are_loops(batch_size_run)
    _uniform_rows_split_p_into_diagonal_column_and_pairs(batch_size_run)
    _trained_rows_average_the_last_epoch_and_measure_the_score_spread(batch_size_run)
    _the_conclusion_words_each_trend_from_its_numbers(batch_size_run)
    _uniform_rows_are_loops_over_batches_both_models_share(batch_size_run)
    _the_study_runs_its_quick_settings_under_labelled_progress_bars(batch_size_run)


@pytest.mark.slow  # seconds: all 1797 digits embedded twice
def test_p_against_batch_size_defaults_to_the_full_run_and_the_papers_tau_and_eps():
    """Brown et al. (2020), supplementary Sec. 3: tau = 0.01, eps = 0.005. Called without
    arguments, with its training stood in by one step of stand-in embeddings (no network
    trained) and one tiny size."""
    asked, taus = [], []
    sizes = {"epochs": 1, "fixed": [8], "trained": [8], "draws": 1}

    def settings(quick):
        asked.append(quick)
        return copy.deepcopy(sizes)

    def stand_in(model, images, labels, loss_fn, **options):
        taus.append(loss_fn.tau)
        if "on_step" in options:
            embeddings = torch.randn(8, 4, generator=torch.Generator().manual_seed(0))
            options["on_step"](0, embeddings, labels[:8], 0.0)
        return [0.0]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(study, "batch_size_settings", settings)
        patch.setattr(study, "train_embedding", stand_in)
        result = study.p_against_batch_size()
    assert asked == [False]
    assert taus == [0.01, 0.01]  # the fixed trained model and the one trained at m = 8
    assert (result["tau"], result["eps"]) == (0.01, 0.005)


def test_training_dynamics_defaults_to_the_full_run_and_the_papers_tau_and_eps():
    embeddings = _on_circle([0.0, 0.005, 0.3, 0.31, 2.0, 2.004])
    labels = torch.tensor([0, 0, 1, 1, 2, 3])
    result, asked = _dynamics_over([(embeddings, labels)])
    assert (result["tau"], result["eps"], asked["tau"]) == (0.01, 0.005, 0.01)
    assert asked["epochs"] == study.dynamics_settings(False)["epochs"]
    (record,) = result["history"]
    _check_against_loops(record, embeddings, labels.tolist(), 0.01, 0.005)


@pytest.mark.slow
def test_one_draw_per_size_reports_that_batchs_shares():
    sizes = {"epochs": 1, "fixed": [16], "trained": [16], "draws": 1}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(study, "batch_size_settings", lambda quick: copy.deepcopy(sizes))
        seen = _watch(patch)
        result = study.p_against_batch_size(quick=True, tau=TAU, eps=EPS)
    untrained = seen["embeds"][0]["embeddings"]
    (row,) = result["fixed_model"]["untrained_uniform"]
    (permutation, _) = seen["permutations"]  # one draw per model, the same one
    expected = entry_shares(untrained[permutation[:16]].tolist(), TAU, EPS)
    assert row["batches"] == 1
    assert {key: row[key] for key in SHARES} == pytest.approx(expected, abs=1e-9)


def test_the_simulation_at_the_widest_spread_leaves_the_diagonal_out():
    """At spread 1 the proportion over the 255 x 256 off-diagonal entries is erf(w / 2); the
    256 diagonal entries (always inside) would add (1 - P) / 256, about 0.0037. Over 40 seeds
    the simulated value's error there has a standard deviation of 0.0003 (tau = 0.005) and
    0.0004 (tau = 0.01); at tau = 0.05 it is 0.001, too close to tell, so that curve is left
    to the looser test."""
    results = study.closed_form_curves()
    for tau in ("0.005", "0.01"):
        spread, measured = results["simulated_proportion"][tau][-1]
        assert spread == pytest.approx(1.0)
        width = _width_by_root(float(tau), 0.005)
        assert measured == pytest.approx(math.erf(width / 2), abs=0.0018), tau


def _dynamics_over(batches, **arguments):
    """training_dynamics with its training stood in by hand-made batches (embeddings, labels)
    handed to its per-step record; returns the history and the training options it asked."""
    asked = {}

    def stand_in(model, images, labels, loss_fn, **options):
        asked.update(options, tau=loss_fn.tau)
        for step, (embeddings, batch_labels) in enumerate(batches):
            options["on_step"](step, embeddings, batch_labels, 0.25 * step)
        return [0.25 * step for step in range(len(batches))]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(study, "train_embedding", stand_in)
        result = study.training_dynamics(**arguments)
    return result, asked


def _share_without(counts, labels):
    """Share of the queries with a positive whose count is 0 (0 when no query has one)."""
    with_positive = [
        q
        for q in range(len(labels))
        if any(labels[j] == labels[q] for j in range(len(labels)) if j != q)
    ]
    if not with_positive:
        return 0.0
    return sum(counts[q] == 0 for q in with_positive) / len(with_positive)


def _check_against_loops(record, embeddings, labels, tau, eps):
    m = len(labels)
    shares = entry_shares(embeddings.tolist(), tau, eps)
    keys = SHARES if m > 1 else ("p_seed_definition", "p_off_diagonal", "p_without_query")
    expected = {key: shares[key] for key in keys}  # one item: no column pair (the study says 0)
    assert {key: record[key] for key in keys} == pytest.approx(expected, abs=1e-12, nan_ok=True)
    score = cosine_scores(embeddings.double().tolist())
    counts, weighted = [], []
    for q in range(m):
        others = [j for j in range(m) if j != q]
        row = [score[q][j] for j in others]
        positives = [labels[j] == labels[q] for j in others]
        counts.append(gradient_count(row, positives, tau, eps, False))
        weighted.append(gradient_count(row, positives, tau, eps, True))
    assert record["mean_gradient_count"] == pytest.approx(sum(counts) / m, abs=1e-12)
    assert record["share_without_gradient"] == pytest.approx(_share_without(counts, labels))
    assert record["share_without_weighted_gradient"] == pytest.approx(
        _share_without(weighted, labels)
    )


def _on_circle(angles):
    return torch.tensor([[math.cos(a), math.sin(a)] for a in angles], dtype=torch.float32)


def test_the_dynamics_of_hand_made_batches_match_loops():
    """One query alone, three items (the first size with pairs of two other candidates), and
    batches where a positive's slope clears eps only before the weighting by its rank, where
    one has no candidate in reach but the query, and where no query has a positive."""
    tau, eps = 0.1, 1.0  # width about 0.21 in score
    generator = torch.Generator().manual_seed(3)
    batches = [
        (torch.randn(1, 4, generator=generator), [0]),
        (torch.randn(3, 4, generator=generator), [0, 0, 1]),
        # query 0: its positive (angle 0.5) sits among higher-scoring negatives
        (_on_circle([0.0, 0.5, 0.1, 0.15, 0.45, 2.0]), [0, 0, 1, 2, 3, 3]),
        (_on_circle([0.0, 1.0, 2.0, 3.0, 0.02, 2.5]), [0, 0, 1, 1, 2, 3]),
        # the positive pair is each other's only close item: no candidate (the query itself
        # is none) within reach of either positive
        (_on_circle([0.0, 0.05, 1.5, 2.5]), [0, 0, 1, 2]),
        (_on_circle([0.0, 0.4, 0.8, 1.2]), [0, 1, 2, 3]),
    ]
    batches = [(embeddings, torch.tensor(labels)) for embeddings, labels in batches]
    result, asked = _dynamics_over(batches, quick=True, tau=tau, eps=eps)
    assert [h["step"] for h in result["history"]] == list(range(len(batches)))
    for record, (embeddings, labels) in zip(result["history"], batches, strict=True):
        _check_against_loops(record, embeddings, labels.tolist(), tau, eps)
    assert record["share_without_gradient"] == 0.0  # the last batch: no query has a positive
    assert math.isnan(result["history"][0]["p_without_query"])  # one item: no pair at all
    quick = study.dynamics_settings(True)
    assert asked["epochs"] == quick["epochs"] and asked["tau"] == tau
    assert (asked["per_class"], asked["classes_per_batch"]) == (
        quick["per_class"],
        quick["classes_per_batch"],
    )
    assert asked["progress"] == "SmoothAP training dynamics"


def test_an_empty_operating_region_holds_no_pair_not_even_a_duplicate():
    """eps * tau >= 1/4: no slope exceeds eps, so no entry is inside, even the pair of an item
    with its duplicate (score difference exactly 0)."""
    tau, eps = 1.0, 0.5
    embeddings = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    labels = torch.tensor([0, 0, 1, 2])
    result, asked = _dynamics_over([(embeddings, labels)], quick=False, tau=tau, eps=eps)
    (record,) = result["history"]
    _check_against_loops(record, embeddings, labels.tolist(), tau, eps)
    assert record["p_query_column"] == 0.0 and record["p_off_diagonal"] == 0.0
    assert asked["epochs"] == study.dynamics_settings(False)["epochs"]
