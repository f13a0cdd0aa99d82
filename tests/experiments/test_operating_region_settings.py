"""The operating-region studies' settings against the results the report publishes.

The figures' JSON in ``figures/`` were made by the full studies; each number checked here is
read from that JSON or counted with the public sampler, never copied from the settings."""

import json
from pathlib import Path

import pytest

from gradlab.data import ClassBalancedBatches, load_digits_split
from gradlab.experiments import operating_region as study

FIGURES = Path(__file__).resolve().parents[2] / "figures"
P_AGAINST_M = FIGURES / "operating_region_p_vs_batch_size_10_classes.json"
DYNAMICS = FIGURES / "operating_region_training_dynamics.json"


def _steps_per_epoch(per_class: int, classes_per_batch: int) -> int:
    labels = load_digits_split().train_labels
    return len(ClassBalancedBatches(labels, per_class, classes_per_batch))


@pytest.mark.slow
def test_the_published_p_against_m_was_measured_with_the_full_settings():
    published, full = json.loads(P_AGAINST_M.read_text()), study.batch_size_settings(False)
    assert published["epochs"] == full["epochs"]
    for name, rows in published["fixed_model"].items():
        assert [row["batch_size"] for row in rows] == full["fixed"], name
        assert {row["batches"] for row in rows} == {full["draws"]}, name
    trained = published["trained_per_batch_size"]
    assert [row["batch_size"] for row in trained] == full["trained"]
    for row in trained:  # every m trained for the same epochs of 4 classes x m / 4
        assert row["steps"] == full["epochs"] * _steps_per_epoch(row["batch_size"] // 4, 4)


def test_the_published_training_dynamics_were_measured_with_the_full_settings():
    published, full = json.loads(DYNAMICS.read_text()), study.dynamics_settings(False)
    assert published["batch_size"] == full["per_class"] * full["classes_per_batch"]
    steps = full["epochs"] * _steps_per_epoch(full["per_class"], full["classes_per_batch"])
    assert [record["step"] for record in published["history"]] == list(range(steps))


def test_the_quick_studies_only_shrink_the_full_ones():
    """Fewer epochs and some of the batch sizes; the same draws per size and the same batch."""
    quick, full = study.batch_size_settings(True), study.batch_size_settings(False)
    assert set(quick) == set(full) and quick["draws"] == full["draws"]
    assert set(quick["fixed"]) < set(full["fixed"]) and set(quick["trained"]) < set(full["trained"])
    assert 0 < quick["epochs"] < full["epochs"]
    short, long = study.dynamics_settings(True), study.dynamics_settings(False)
    assert set(short) == set(long) and 0 < short["epochs"] < long["epochs"]
    assert {k: short[k] for k in short if k != "epochs"} == {k: long[k] for k in long
                                                             if k != "epochs"}  # fmt: skip


def test_the_quick_dynamics_are_four_epochs_of_the_full_batch():
    """The documented example of dynamics_settings (a doctest, which the mutation runs leave
    out): four epochs of batches of 4 classes x 16."""
    assert study.dynamics_settings(quick=True) == {"epochs": 4, "per_class": 16,
                                                   "classes_per_batch": 4}  # fmt: skip
