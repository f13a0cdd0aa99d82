"""GradlabTrainerCallback's wiring mistakes and options: a forgotten ``attach`` is said, and a
loss of one's own on a score matrix is read with ``watch(loss_fn, inputs="scores")``.

Stand-in trainers (a ``training_step`` that calls the watched loss, a ``callback_handler``) keep
most tests fast; one real Trainer on a tiny BERT shows each where it matters.
"""

import warnings
from types import SimpleNamespace

import pytest
import torch.nn.functional as F

pytest.importorskip("transformers")

import gradlab
from gradlab import GradlabError
from gradlab.integrations.transformers import DEFAULT_FOLDER, GradlabTrainerCallback
from gradlab.monitor import read_jsonl
from tests.helpers.hf_models import scores_and_positives


class StandInTrainer:
    """A trainer whose ``training_step`` calls the loss, as ``Trainer.training_step`` calls
    ``compute_loss``; ``callbacks`` are its callback handler's."""

    def __init__(self, loss_fn, callbacks=()):
        self.loss_fn = loss_fn
        self.callback_handler = SimpleNamespace(callbacks=list(callbacks))

    def training_step(self, seed):
        return self.loss_fn(*scores_and_positives(seed))  # the line the warning names


def unattached_warnings(trainer, steps=3):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for seed in range(steps):
            trainer.training_step(seed).backward()
    return [w for w in caught if "attach" in str(w.message)]


def test_a_watched_loss_in_a_training_step_of_a_trainer_without_the_callback_warns_once():
    callback = GradlabTrainerCallback()
    loss_fn = callback.watch(gradlab.NTXentLoss(0.05))
    (warning,) = unattached_warnings(StandInTrainer(loss_fn))
    assert warning.filename == __file__  # the caller's line, not gradlab's
    # Another trainer without it: once per callback, not once per trainer.
    assert unattached_warnings(StandInTrainer(loss_fn)) == []


def test_the_unattached_warning_says_what_happened_and_the_fix_word_for_word():
    callback = GradlabTrainerCallback()
    loss_fn = callback.watch(gradlab.NTXentLoss(0.05))
    (warning,) = unattached_warnings(StandInTrainer(loss_fn))
    assert warning.category is RuntimeWarning
    assert str(warning.message) == (
        "the loss NTXentLoss watched by a GradlabTrainerCallback was called in a training step "
        "of StandInTrainer, but that trainer does not hold the callback, so nothing is logged; "
        "call callback.attach(trainer) after making the trainer, before trainer.train()")


@pytest.mark.parametrize("where", ["another instance", "a trainer holding it", "no trainer"])
def test_no_warning_where_the_callback_is_held_or_no_training_step_runs(where):
    callback = GradlabTrainerCallback()
    loss_fn = callback.watch(gradlab.NTXentLoss(0.05))
    if where == "another instance":  # trainer.add_callback(GradlabTrainerCallback): not ours
        found = unattached_warnings(StandInTrainer(loss_fn, [GradlabTrainerCallback()]))
        assert len(found) == 1
        return
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        if where == "a trainer holding it":
            StandInTrainer(loss_fn, [callback]).training_step(0)
        else:  # an evaluation or a test of the loss: no trainer's training step on the stack
            loss_fn(*scores_and_positives(0)).backward()
        expected = gradlab.NTXentLoss(0.05)(*scores_and_positives(1))
        assert loss_fn(*scores_and_positives(1)).item() == expected.item()


@pytest.mark.slow
def test_a_real_trainer_without_the_callback_warns_at_its_compute_loss(tmp_path):
    pytest.importorskip("accelerate")
    from tests.helpers import hf_models

    callback = GradlabTrainerCallback(preset="cheap")
    trainer = hf_models.in_batch_trainer_class()(
        model=hf_models.tiny_bert(), args=hf_models.training_arguments(tmp_path, max_steps=2),
        train_dataset=hf_models.PairDataset(16), loss_fn=callback.watch(gradlab.NTXentLoss(0.05)),
    )  # fmt: skip  # callbacks=[...] and attach() both forgotten
    with pytest.warns(RuntimeWarning, match=r"InBatchTrainer.*call callback\.attach") as caught:
        trainer.train()
    found = [w for w in caught if "attach" in str(w.message)]
    assert len(found) == 1 and found[0].filename == hf_models.__file__  # its compute_loss
    assert not (tmp_path / DEFAULT_FOLDER).exists()  # indeed nothing was logged


# --- watch(loss_fn, inputs=...) --------------------------------------------------------------


def my_infonce(scores, positives):
    """A user's own in-batch loss on a score matrix (temperature 0.05, positives one per row)."""
    return F.cross_entropy(scores / 0.05, positives.float().argmax(1))


def run_steps(callback, loss_fn, tmp_path, steps=3):
    """The Trainer's events around ``steps`` calls of ``loss_fn``; returns the records."""
    args = SimpleNamespace(output_dir=str(tmp_path), logging_steps=1, report_to=[])
    state = SimpleNamespace(global_step=0, logging_steps=None, log_history=[])
    callback.on_train_begin(args, state, None)
    for _ in range(steps):
        callback.on_step_begin(args, state, None)
        loss_fn(*scores_and_positives(state.global_step)).backward()
        callback.on_pre_optimizer_step(args, state, None)
        state.global_step += 1
        callback.on_step_end(args, state, None)
    callback.on_train_end(args, state, None)
    return read_jsonl(tmp_path / DEFAULT_FOLDER / "metrics.jsonl")[1]


def test_a_loss_of_ones_own_on_a_score_matrix_logs_as_the_monitor_watches_it(tmp_path):
    callback = GradlabTrainerCallback(preset="full")
    records = run_steps(callback, callback.watch(my_infonce, inputs="scores"), tmp_path / "cb")
    assert [record["step"] for record in records] == [1, 2, 3]
    for record in records:  # the loss itself, computed here without gradlab
        expected = my_infonce(*scores_and_positives(record["step"] - 1)).item()
        assert record["loss"] == pytest.approx(expected, rel=1e-6)
    # The documented meaning: what gradlab.Monitor.watch(my_infonce, inputs="scores") logs.
    with gradlab.Monitor(tmp_path / "bare", preset="full", every=1) as monitor:
        monitor.step_count = 1
        loss_fn = monitor.watch(my_infonce, inputs="scores")
        for step in range(3):
            loss_fn(*scores_and_positives(step)).backward()
            monitor.step()
    _, bare = read_jsonl(tmp_path / "bare" / "metrics.jsonl")
    assert any(key.startswith("anatomy_i2t_") for key in records[0])  # dL/dS was read
    for record, reference in zip(records, bare, strict=True):
        assert record.keys() == reference.keys()
        for key, value in record.items():
            assert value == pytest.approx(reference[key], rel=1e-6, nan_ok=True), key


@pytest.mark.parametrize(
    ("loss_fn", "inputs", "match"),
    [
        (my_infonce, "score", r"inputs must be one of \('embeddings', 'scores', "
         r"'in_batch_scores'\) or None; got 'score'"),
        (my_infonce, 1, r"inputs must be one of .* got 1"),
        (gradlab.NTXentLoss, None, r"loss_fn must be a loss module or function, not a class; "
         r"got the class NTXentLoss"),
    ],
)
def test_watch_refuses_bad_inputs_before_training(loss_fn, inputs, match):
    with pytest.raises(GradlabError, match=match):
        GradlabTrainerCallback().watch(loss_fn, inputs=inputs)


def test_a_sentence_transformers_loss_takes_inputs_too():
    pytest.importorskip("sentence_transformers")
    from sentence_transformers.sentence_transformer import losses

    from gradlab.integrations.sentence_transformers import RecordingSimilarity
    from tests.helpers.hf_models import static_model

    loss = losses.MultipleNegativesRankingLoss(static_model(),
                                               similarity_fct=RecordingSimilarity())  # fmt: skip
    for inputs in ("matrix", "embeddings"):  # it is read through its recorded score matrices
        with pytest.raises(GradlabError) as caught:
            GradlabTrainerCallback().watch(loss, inputs=inputs)
        assert str(caught.value) == (
            "inputs must be None or 'scores' for the sentence-transformers loss "
            "MultipleNegativesRankingLoss (its RecordingSimilarity records its score matrices); "
            f"got {inputs!r}")  # fmt: skip
        assert "forward" not in vars(loss)  # refused: the loss is left as it was
    assert GradlabTrainerCallback().watch(loss, inputs="scores") is loss


@pytest.mark.slow
def test_a_real_trainer_logs_a_score_matrix_loss_of_ones_own(tmp_path):
    pytest.importorskip("accelerate")
    from tests.helpers import hf_models

    callback = GradlabTrainerCallback(preset="full")
    trainer = hf_models.in_batch_trainer_class()(
        model=hf_models.tiny_bert(), args=hf_models.training_arguments(tmp_path, max_steps=3),
        train_dataset=hf_models.PairDataset(24), loss_fn=callback.watch(my_infonce,
                                                                        inputs="scores"),
    )  # fmt: skip
    callback.attach(trainer)
    trainer.train()
    _, records = read_jsonl(tmp_path / DEFAULT_FOLDER / "metrics.jsonl")
    assert [record["step"] for record in records] == [1, 2, 3]
    for record, loss in zip(records, trainer.losses, strict=True):
        assert record["loss"] == pytest.approx(loss, rel=1e-6)
        assert record["anatomy_i2t_active_negatives_mean"] >= 0
