"""A run whose every loss call the Monitor could not read: the callback does not blame the
logging schedule (the Monitor has said why it skipped the calls)."""

import warnings

import pytest

pytest.importorskip("sentence_transformers")
pytest.importorskip("datasets")

from datasets import Dataset
from sentence_transformers import SentenceTransformerTrainer
from sentence_transformers.sentence_transformer import losses

from gradlab.integrations.sentence_transformers import record_scores
from gradlab.integrations.transformers import GradlabTrainerCallback
from tests.helpers.hf_models import caption_pairs, sentence_training_arguments, static_model


def test_unreadable_calls_on_logging_steps_are_not_blamed_on_logging_steps(tmp_path):
    """A loss on scored pairs that watch does not know by name (CoSENT and AnglE are refused
    there): each call is skipped (the Monitor warns once). The callback also warned 'set
    logging_steps ... below the number of steps' though logging_steps=1 and the run had 2
    steps."""

    class PairLoss(losses.CoSENTLoss):  # a loss of one's own on pairs
        pass

    model = static_model()
    anchors, positives = caption_pairs(16)
    data = Dataset.from_dict({"s1": anchors, "s2": positives,
                              "score": [float(index % 2) for index in range(16)]})  # fmt: skip
    callback = GradlabTrainerCallback(preset="cheap")
    loss = callback.watch(record_scores(PairLoss(model)))
    trainer = SentenceTransformerTrainer(
        model=model, args=sentence_training_arguments(tmp_path, max_steps=2, logging_steps=1,
                                                      per_device_train_batch_size=8),
        train_dataset=data, loss=loss)  # fmt: skip
    callback.attach(trainer)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.train()
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert any("not a [Q, C] score matrix" in message for message in messages)
    assert not [message for message in messages if "logged none" in message]
    # the closing "nothing was logged" points at trainer.train(), not into gradlab's callback
    said = [w for w in caught if str(w.message).startswith("gradlab.Monitor: nothing was logged")]
    assert [w.filename for w in said] == [__file__]
