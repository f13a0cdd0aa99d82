"""A train_dataset dict with a loss per dataset: each logged record is the step's own loss, and
steps of a loss the callback does not watch are named as such (the Monitor's warning about them
advised calling monitor.step() once per optimizer step, which the user does not call)."""

import warnings

import pytest

pytest.importorskip("sentence_transformers")
pytest.importorskip("datasets")

from datasets import Dataset, DatasetDict
from sentence_transformers import SentenceTransformerTrainer
from sentence_transformers.sentence_transformer import losses

from gradlab.integrations.sentence_transformers import RecordingSimilarity
from gradlab.integrations.transformers import GradlabTrainerCallback
from gradlab.monitor import read_jsonl
from tests.helpers.hf_models import caption_pairs, sentence_training_arguments, static_model


def train(tmp_path, watch_both, watched="pairs"):
    model = static_model()
    anchors, positives = caption_pairs(32)
    pairs = Dataset.from_dict({"anchor": anchors[:16], "positive": positives[:16]})
    triplets = Dataset.from_dict({"anchor": anchors[16:], "positive": positives[16:],
                                  "negative": positives[17:] + positives[16:17]})  # fmt: skip
    callback = GradlabTrainerCallback(preset="cheap")
    loss_per_dataset = {
        name: losses.MultipleNegativesRankingLoss(model, similarity_fct=RecordingSimilarity())
        for name in ("pairs", "triplets")}  # fmt: skip
    callback.watch(loss_per_dataset[watched])
    if watch_both:
        callback.watch(loss_per_dataset["triplets"])
    arguments = sentence_training_arguments(tmp_path, max_steps=6, per_device_train_batch_size=4,
                                            multi_dataset_batch_sampler="round_robin")  # fmt: skip
    trainer = SentenceTransformerTrainer(
        model=model, args=arguments, loss=loss_per_dataset,
        train_dataset=DatasetDict({"pairs": pairs, "triplets": triplets}))  # fmt: skip
    callback.attach(trainer)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.train()
    _, records = read_jsonl(tmp_path / "gradlab_logs" / "metrics.jsonl")
    told = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    return records, told


def test_steps_of_an_unwatched_loss_are_named_and_not_logged(tmp_path):
    records, told = train(tmp_path, watch_both=False)
    assert [record["step"] for record in records] == [1, 3, 5]  # round robin: pairs first
    assert not [message for message in told if "monitor.step() closed step" in message]
    assert told == [
        "GradlabTrainerCallback: training step 2 called none of the losses it watches, so it is "
        "not logged (a train_dataset dict with a loss per dataset: only the steps of the watched "
        "losses are logged; watch each loss with callback.watch to log every step); later such "
        "steps are not warned about"]


def test_an_unwatched_first_step_is_named_by_the_callback_too(tmp_path):
    # was: step 1 (the unwatched pairs, before any watched call) got the Monitor's advice to
    # train with the wrapped loss or attach the Monitor; the callback's own came at step 4
    records, told = train(tmp_path, watch_both=False, watched="triplets")
    assert [record["step"] for record in records] == [2, 4, 6]
    assert told == [
        "GradlabTrainerCallback: training step 1 called none of the losses it watches, so it is "
        "not logged (a train_dataset dict with a loss per dataset: only the steps of the watched "
        "losses are logged; watch each loss with callback.watch to log every step); later such "
        "steps are not warned about"]


def test_with_every_loss_watched_every_step_is_logged_without_warning(tmp_path):
    records, told = train(tmp_path, watch_both=True)
    assert [record["step"] for record in records] == [1, 2, 3, 4, 5, 6]
    assert told == []
