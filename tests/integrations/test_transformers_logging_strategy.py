"""The Trainer's logging schedule beyond logging_steps. With logging_strategy="epoch" the
callback logs on the epoch ends: it followed logging_steps (500 by default) instead, so
log_history's epoch entries had no gradlab values, metrics.jsonl only the last step, and a
warning advised lowering logging_steps; the epoch that max_steps cuts short is logged at
max_steps, as the Trainer logs it. With logging_first_step it logs step 1 too."""

import warnings

import pytest

pytest.importorskip("transformers")
pytest.importorskip("accelerate")

import gradlab
from gradlab.integrations.transformers import GradlabTrainerCallback
from gradlab.monitor import read_jsonl
from tests.helpers.hf_models import (
    PairDataset,
    in_batch_trainer_class,
    tiny_bert,
    training_arguments,
)


@pytest.mark.parametrize(("pairs", "accumulation", "epoch_ends"),
                         [(32, 1, [4, 8]), (40, 2, [3, 6])])  # 5 batches: steps of 2, 2 and 1
def test_epoch_logging_logs_each_epoch_end_in_both_logs(tmp_path, pairs, accumulation,
                                                        epoch_ends):  # fmt: skip
    callback = GradlabTrainerCallback(preset="cheap")
    trainer = in_batch_trainer_class()(
        model=tiny_bert(), train_dataset=PairDataset(pairs),
        args=training_arguments(tmp_path, max_steps=-1, num_train_epochs=2, logging_steps=500,
                                logging_strategy="epoch",
                                gradient_accumulation_steps=accumulation),
        loss_fn=callback.watch(gradlab.NTXentLoss(0.05)))  # fmt: skip
    callback.attach(trainer)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.train()
    assert not [w for w in caught if "logged none" in str(w.message)]
    _, records = read_jsonl(tmp_path / "gradlab_logs" / "metrics.jsonl")
    assert [record["step"] for record in records] == epoch_ends
    logged = {entry["step"]: entry["gradlab/loss"] for entry in trainer.state.log_history
              if "gradlab/loss" in entry}  # fmt: skip
    assert logged == {record["step"]: record["loss"] for record in records}


@pytest.mark.parametrize(("accumulation", "max_steps", "logged_steps"),
                         [(1, 10, [8, 10]), (3, 5, [3, 5]), (1, 1, [1])])
def test_an_epoch_that_max_steps_cuts_short_is_logged_with_its_gradients(
    tmp_path, accumulation, max_steps, logged_steps,
):
    # Epochs of 8 (and of 3 accumulated) optimizer steps, max_steps inside the second (or the
    # first: max_steps = 1): the Trainer logs that cut epoch at max_steps, where only the closing
    # record (no gradient quantities) was written and log_history's entry had no gradlab values.
    callback = GradlabTrainerCallback(preset="full")
    trainer = in_batch_trainer_class()(
        model=tiny_bert(), train_dataset=PairDataset(64 if accumulation == 1 else 72),
        args=training_arguments(tmp_path, max_steps=max_steps, logging_steps=500,
                                logging_strategy="epoch",
                                gradient_accumulation_steps=accumulation),
        loss_fn=callback.watch(gradlab.NTXentLoss(0.05)))  # fmt: skip
    callback.attach(trainer)
    trainer.train()
    _, records = read_jsonl(tmp_path / "gradlab_logs" / "metrics.jsonl")
    assert [record["step"] for record in records] == logged_steps
    key = "anatomy_i2t_active_negatives_mean"  # read from dL/dS: a logged step's gradient
    assert all(key in record for record in records)
    logged = {entry["step"]: entry[f"gradlab/{key}"] for entry in trainer.state.log_history
              if f"gradlab/{key}" in entry}  # fmt: skip
    assert logged == {record["step"]: record[key] for record in records}
    trainer_steps = [entry["step"] for entry in trainer.state.log_history if "loss" in entry]
    assert trainer_steps == logged_steps  # where the Trainer itself logged its loss


def test_logging_first_step_logs_step_one_in_both_logs(tmp_path):
    """The Trainer logged step 1 (logging_first_step) without gradlab's values: the Monitor
    followed logging_steps alone."""
    callback = GradlabTrainerCallback(preset="cheap")
    trainer = in_batch_trainer_class()(
        model=tiny_bert(), train_dataset=PairDataset(32),
        args=training_arguments(tmp_path, max_steps=5, logging_steps=4, logging_first_step=True),
        loss_fn=callback.watch(gradlab.NTXentLoss(0.05)))  # fmt: skip
    callback.attach(trainer)
    trainer.train()
    _, records = read_jsonl(tmp_path / "gradlab_logs" / "metrics.jsonl")
    assert [record["step"] for record in records] == [1, 4, 5]  # 5: the last, added at the end
    logged = {entry["step"]: entry["gradlab/loss"] for entry in trainer.state.log_history
              if "gradlab/loss" in entry}  # fmt: skip
    assert logged == {record["step"]: record["loss"] for record in records[:2]}


@pytest.mark.parametrize("eval_steps", [4, 3])
def test_epoch_logging_with_step_evaluations_puts_the_values_with_the_training_loss(
    tmp_path, eval_steps
):
    # An evaluation on eval_steps runs at the step's end, the epoch's training entry at the
    # epoch's end: both at step 4 or 8 (the last step is always evaluated). The values of an
    # epoch end landed in the eval_loss entry, the training loss's entry of that step had none.
    from transformers import TrainerCallback

    class Backend(TrainerCallback):  # what a report_to backend after gradlab's callback gets
        def __init__(self):
            self.received = []

        def on_log(self, args, state, control, logs=None, **kwargs):
            self.received.append({**logs, "step": state.global_step})

    callback = GradlabTrainerCallback(preset="cheap")
    trainer = in_batch_trainer_class()(
        model=tiny_bert(), train_dataset=PairDataset(32), eval_dataset=PairDataset(16, seed=1),
        args=training_arguments(tmp_path, max_steps=-1, num_train_epochs=2,
                                logging_strategy="epoch", eval_strategy="steps",
                                eval_steps=eval_steps),
        loss_fn=callback.watch(gradlab.NTXentLoss(0.05)))  # fmt: skip
    callback.attach(trainer)
    backend = Backend()
    trainer.add_callback(backend)  # after gradlab's
    trainer.train()
    history = trainer.state.log_history
    assert [entry for entry in backend.received if "train_runtime" not in entry] == [
        entry for entry in history if "train_runtime" not in entry]  # the same entries
    evaluated = [entry["step"] for entry in history if "eval_loss" in entry]
    assert evaluated == ([4, 8] if eval_steps == 4 else [3, 6, 8])
    training = {entry["step"]: entry for entry in history if "loss" in entry}
    assert sorted(training) == [4, 8]  # 4 steps of 8 pairs an epoch
    for step, entry in training.items():  # each step's own loss, as the Trainer computed it
        assert entry["gradlab/loss"] == pytest.approx(trainer.losses[step - 1], rel=1e-6)
    assert not [entry for entry in history if "eval_loss" in entry and "gradlab/loss" in entry]


@pytest.mark.slow
def test_epoch_logging_of_an_iterable_dataset_puts_the_last_step_in_its_training_entry(tmp_path):
    # No length: epochs are not counted, the Monitor logs on logging_steps (4, 8). The Trainer's
    # one epoch ends at max_steps: step 8's evaluation, then its training entry. gradlab's
    # values of step 8 landed in the evaluation's entry, the training entry had none.
    import torch

    class Pairs(torch.utils.data.IterableDataset):
        def __init__(self):
            self.pairs = PairDataset(64)

        def __iter__(self):
            return (self.pairs[index] for index in range(len(self.pairs)))

    callback = GradlabTrainerCallback(preset="cheap")
    trainer = in_batch_trainer_class()(
        model=tiny_bert(), train_dataset=Pairs(), eval_dataset=PairDataset(8, seed=1),
        args=training_arguments(tmp_path, max_steps=8, logging_steps=4, logging_strategy="epoch",
                                eval_strategy="steps", eval_steps=4),
        loss_fn=callback.watch(gradlab.NTXentLoss(0.05)))  # fmt: skip
    callback.attach(trainer)
    trainer.train()
    history = trainer.state.log_history
    assert [(entry["step"], "loss" in entry) for entry in history if "eval_loss" in entry
            or "loss" in entry] == [(4, False), (8, False), (8, True)]  # the Trainer's order
    held = [(entry["step"], "loss" in entry) for entry in history if "gradlab/loss" in entry]
    assert held == [(4, False), (8, True)]  # step 4 has an evaluation alone
    assert history[-2]["gradlab/loss"] == pytest.approx(trainer.losses[7], rel=1e-6)
