"""MatryoshkaLoss around a watched loss: the uncached loss logs its last (smallest) dimension;
a cached loss, which MatryoshkaLoss makes score every mini-batch once per dimension inside one
call, is refused by name instead of failing inside torch."""

import re

import pytest

pytest.importorskip("sentence_transformers")
pytest.importorskip("datasets")

from datasets import Dataset
from sentence_transformers import SentenceTransformerTrainer
from sentence_transformers.sentence_transformer import losses

import gradlab
from gradlab import GradlabError
from gradlab.integrations.sentence_transformers import (
    RecordingSimilarity,
    refuse_cached_matryoshka,
)
from gradlab.integrations.transformers import GradlabTrainerCallback
from tests.helpers.hf_models import (
    bert_sentence_model,
    caption_pairs,
    sentence_features,
    sentence_training_arguments,
    static_model,
)
from tests.helpers.watch_refusals import watch_refusals

REFUSAL = (
    "the watched loss CachedMultipleNegativesRankingLoss runs inside MatryoshkaLoss (dims "
    "[32, 16, 8]), which scores each of its mini-batches once per dimension within one call: "
    "the Monitor cannot tell the dimensions' matrices apart. Inside MatryoshkaLoss watch the "
    "uncached loss (MultipleNegativesRankingLoss, GISTEmbedLoss: the records describe the "
    "smallest dimension), or watch the cached loss without MatryoshkaLoss")


def cached(model):
    return losses.CachedMultipleNegativesRankingLoss(model, mini_batch_size=3,
                                                     similarity_fct=RecordingSimilarity())


def test_a_cached_loss_watched_then_wrapped_is_skipped_with_its_reason(tmp_path):
    """It was skipped with torch's 'Sizes of tensors must match except in dimension 0'."""
    model = bert_sentence_model(tmp_path / "model")
    anchors, positives = caption_pairs(8)
    callback = GradlabTrainerCallback(preset="cheap")
    matryoshka = losses.MatryoshkaLoss(model, callback.watch(cached(model)), [32, 16, 8])
    trainer = SentenceTransformerTrainer(
        model=model, args=sentence_training_arguments(tmp_path / "out", max_steps=1,
                                                      per_device_train_batch_size=8),
        train_dataset=Dataset.from_dict({"anchor": anchors, "positive": positives}),
        loss=matryoshka)  # fmt: skip
    callback.attach(trainer)
    with pytest.warns(RuntimeWarning, match=re.escape(REFUSAL)):
        trainer.train()


def test_a_cached_loss_wrapped_then_watched_is_refused_at_watch(tmp_path):
    model = bert_sentence_model(tmp_path / "model")
    inner = cached(model)
    losses.MatryoshkaLoss(model, inner, [32, 16, 8])
    with pytest.raises(GradlabError) as refused:
        GradlabTrainerCallback().watch(inner)
    assert str(refused.value) == REFUSAL


def test_an_uncached_loss_inside_matryoshka_logs_the_smallest_dimension(tmp_path):
    model = bert_sentence_model(tmp_path / "model")
    anchors, positives = caption_pairs(8)
    inner = losses.MultipleNegativesRankingLoss(model, similarity_fct=RecordingSimilarity())
    with gradlab.Monitor(tmp_path / "run", preset="default", every=1) as monitor:
        matryoshka = losses.MatryoshkaLoss(model, monitor.watch(inner), [32, 16, 8])
        matryoshka(sentence_features(model, anchors, positives), None).backward()
        record = monitor.step()
    assert monitor.skipped_calls == 0
    assert record["margin_recall_at_1"] >= 0.0


def test_a_loss_without_an_instance_dict_is_not_inside_matryoshka():
    """MatryoshkaLoss marks a loss by setting ``calculate_loss`` in its ``__dict__``: a loss
    object without one (its class has ``__slots__``) cannot be marked, and is accepted."""
    class SlottedLoss:
        __slots__ = ("scale",)

        def __call__(self, scores, positives):
            return scores.sum()

    assert refuse_cached_matryoshka(SlottedLoss()) is None


def test_a_wrapper_around_a_recording_loss_is_told_to_watch_the_inner_loss(tmp_path):
    # the refusal led with "make an in-batch loss with similarity_fct=RecordingSimilarity()",
    # which the inner loss already had
    model = static_model()
    inner = losses.MultipleNegativesRankingLoss(model, similarity_fct=RecordingSimilarity())
    wrapped = losses.MatryoshkaLoss(model, inner, [16, 8])
    refusal = ("loss_fn MatryoshkaLoss wraps MultipleNegativesRankingLoss, whose similarity_fct "
               "records its score matrix: watch the inner loss and wrap the watched one "
               "(MatryoshkaLoss(model, monitor.watch(inner), ...), or callback.watch(inner)); "
               "its last call of a step is logged (MatryoshkaLoss: the smallest dimension)")
    assert watch_refusals(wrapped, tmp_path / "run") == (refusal, refusal)


@pytest.mark.parametrize("recording", [True, False])
def test_a_wrapper_around_a_cached_loss_is_told_to_watch_an_uncached_one(tmp_path, recording):
    # it was told to watch the inner loss and wrap the watched one, which then skipped every
    # call (the refusal above, at the end of the training): a run lost before the rule came
    model = bert_sentence_model(tmp_path / "model")
    options = {"similarity_fct": RecordingSimilarity()} if recording else {}
    inner = losses.CachedMultipleNegativesRankingLoss(model, mini_batch_size=3, **options)
    wrapped = losses.MatryoshkaLoss(model, inner, [16, 8])
    refusal = ("loss_fn MatryoshkaLoss wraps the cached loss CachedMultipleNegativesRankingLoss, "
               "which it makes score each mini-batch once per dimension (dims [16, 8]) within "
               "one call: the Monitor cannot tell the dimensions' matrices apart, watched inside "
               "or outside. Inside MatryoshkaLoss watch an uncached loss "
               "(MultipleNegativesRankingLoss, GISTEmbedLoss: MatryoshkaLoss(model, "
               "monitor.watch(inner), ...), the records describing the smallest dimension), or "
               "watch the cached loss without MatryoshkaLoss")
    assert watch_refusals(wrapped, tmp_path / "run") == (refusal, refusal)
