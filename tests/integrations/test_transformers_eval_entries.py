"""Which entry of ``state.log_history`` gets gradlab's values when a step logs an evaluation.

On every step the Monitor logs, gradlab's values land in exactly one entry of the step: its
training entry (``"loss"``) when the Trainer logs one, else its evaluation entry. The events
are called as ``transformers.Trainer`` 5 calls them (:func:`train`, read in its ``_run_epoch``,
``_maybe_log_save_evaluate`` and ``DefaultFlowCallback``): after each optimizer step the step's
training entry (``logging_strategy="steps"``, ``logging_first_step``), then its evaluation
(``eval_steps``, and ``max_steps`` when training stops); at each epoch's end (or at
``max_steps``, which ends the epoch it cuts) the epoch's training entry (``"epoch"``), then an
``eval_strategy="epoch"`` evaluation; the closing summary last.
"""

from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("transformers")

import gradlab
from gradlab.integrations.transformers import DEFAULT_FOLDER, GradlabTrainerCallback
from gradlab.monitor import read_jsonl


class Unsized:
    """The training dataloader of an iterable dataset: no length, one epoch until max_steps."""

    def __iter__(self):
        return iter(())


def batch(seed):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(6, 6, generator=generator, requires_grad=True), torch.eye(6, dtype=bool)


def train(tmp_path, callback, *, max_steps, epoch_steps=None, logging_strategy="steps",
          logging_steps=500, logging_first_step=False, eval_strategy="steps", eval_steps=None):
    """Run ``max_steps`` optimizer steps, epochs of ``epoch_steps`` (``None``: a dataloader
    without length, one epoch), calling the callback's events in the Trainer's order; returns
    the state."""
    args = SimpleNamespace(output_dir=str(tmp_path / "out"), report_to=[],
                           logging_strategy=logging_strategy, logging_steps=logging_steps,
                           logging_first_step=logging_first_step, gradient_accumulation_steps=1,
                           eval_strategy=eval_strategy, eval_steps=eval_steps)  # fmt: skip
    state = SimpleNamespace(global_step=0, max_steps=max_steps, logging_steps=logging_steps,
                            log_history=[])  # fmt: skip
    loss_fn = callback.watch(gradlab.NTXentLoss(0.05))
    last_logged = 0

    def log(logs):  # Trainer.log
        state.log_history.append({**logs, "step": state.global_step})
        callback.on_log(args, state, None, logs=logs)

    def training_entry():
        nonlocal last_logged
        if state.global_step > last_logged:  # once per step
            last_logged = state.global_step
            log({"loss": 1.0, "learning_rate": 1e-3})

    def evaluation():
        metrics = {"eval_loss": loss_fn(*batch(7)).item()}  # outside a step: not logged
        log(metrics)
        callback.on_evaluate(args, state, None, metrics=metrics)

    dataloader = Unsized() if epoch_steps is None else [0] * epoch_steps
    callback.on_train_begin(args, state, None, train_dataloader=dataloader)
    while state.global_step < max_steps:
        callback.on_epoch_begin(args, state, None)
        for _ in range(epoch_steps or max_steps):
            callback.on_step_begin(args, state, None)
            loss_fn(*batch(state.global_step)).backward()
            callback.on_pre_optimizer_step(args, state, None)
            callback.on_optimizer_step(args, state, None)
            state.global_step += 1
            callback.on_step_end(args, state, None)
            step = state.global_step
            if (logging_first_step and step == 1) or (
                    logging_strategy == "steps" and step % logging_steps == 0):  # fmt: skip
                training_entry()
            if eval_strategy == "steps" and (step % eval_steps == 0 or step == max_steps):
                evaluation()
            if step >= max_steps:
                break
        callback.on_epoch_end(args, state, None)
        if logging_strategy == "epoch":
            training_entry()
        if eval_strategy == "epoch":
            evaluation()
    log({"train_runtime": 1.0, "train_loss": 1.0})  # the closing summary
    callback.on_train_end(args, state, None)
    return state


def holders(tmp_path, state):
    """Step -> the kinds of the entries that hold gradlab's values, each value checked against
    the step's record in metrics.jsonl."""
    _, records = read_jsonl(tmp_path / "out" / DEFAULT_FOLDER / "metrics.jsonl")
    losses = {record["step"]: record["loss"] for record in records}
    held = {}
    for entry in state.log_history:
        if "gradlab/loss" in entry:
            assert entry["gradlab/loss"] == losses[entry["step"]]
            kind = ("training" if "loss" in entry else "evaluation" if "eval_loss" in entry
                    else "summary")  # fmt: skip
            held.setdefault(entry["step"], []).append(kind)
    return held


@pytest.mark.parametrize(
    ("every", "max_steps", "expected"),
    [
        # logging_steps 4, eval_steps 6: training entries at 4, 8, 12; evaluations at 6, 12 and
        # the last step. The Monitor logs 4, 8, 12 (and the last step when training ends: no
        # entry of the Trainer is left then).
        (None, 14, {4: ["training"], 8: ["training"], 12: ["training"]}),
        # every=3: the Monitor logs 3, 6, 9, 12, 15. Step 3 and 9 have no entry; 6 and 15 an
        # evaluation alone (15, the last step, is evaluated when training stops)
        (3, 15, {6: ["evaluation"], 12: ["training"], 15: ["evaluation"]}),
    ],
    ids=["logging-steps", "every-3"],
)
def test_step_logging_with_evaluations_off_its_steps(tmp_path, every, max_steps, expected):
    callback = GradlabTrainerCallback(preset="cheap", every=every)
    state = train(tmp_path, callback, max_steps=max_steps, epoch_steps=100, logging_steps=4,
                  eval_steps=6)  # fmt: skip
    assert holders(tmp_path, state) == expected


@pytest.mark.parametrize(
    ("every", "eval_steps", "expected"),
    [
        # Epochs of 4 steps, max_steps 10 cuts the third: the epoch's training entries at 4, 8
        # and 10 come after the evaluations of those steps (on eval_steps, and at max_steps).
        (None, 4, {4: ["training"], 8: ["training"], 10: ["training"]}),
        (None, 3, {4: ["training"], 8: ["training"], 10: ["training"]}),
        # every=2, evaluations every 2 steps: steps 2 and 6 have an evaluation and no training
        # entry
        (2, 2, {2: ["evaluation"], 4: ["training"], 6: ["evaluation"], 8: ["training"],
                10: ["training"]}),
        # every=3: the Monitor logs 3, 6, 9 (10 when training ends, after the Trainer's entries)
        (3, 3, {3: ["evaluation"], 6: ["evaluation"], 9: ["evaluation"]}),
    ],
    ids=["eval-on-epoch-ends", "eval-mid-epoch", "every-2", "every-3"],
)
def test_epoch_logging_with_step_evaluations(tmp_path, every, eval_steps, expected):
    callback = GradlabTrainerCallback(preset="cheap", every=every)
    state = train(tmp_path, callback, max_steps=10, epoch_steps=4, logging_strategy="epoch",
                  eval_steps=eval_steps)  # fmt: skip
    assert holders(tmp_path, state) == expected


def test_epoch_logging_with_epoch_evaluations(tmp_path):
    # both at each epoch's end: the training entry first
    callback = GradlabTrainerCallback(preset="cheap")
    state = train(tmp_path, callback, max_steps=6, epoch_steps=3, logging_strategy="epoch",
                  eval_strategy="epoch")  # fmt: skip
    assert holders(tmp_path, state) == {3: ["training"], 6: ["training"]}


def test_logging_first_step_under_epoch_logging_comes_before_the_step_s_evaluation(tmp_path):
    callback = GradlabTrainerCallback(preset="cheap")
    state = train(tmp_path, callback, max_steps=4, epoch_steps=4, logging_strategy="epoch",
                  logging_first_step=True, eval_steps=1)  # fmt: skip
    assert holders(tmp_path, state) == {1: ["training"], 4: ["training"]}


def test_epochs_of_unknown_length_put_the_last_step_in_its_training_entry(tmp_path):
    # An iterable dataset: epochs are not counted, the Monitor follows logging_steps (4). The
    # Trainer's one epoch ends at max_steps (8): its training entry comes after the evaluation
    # of step 8, which took gradlab's values; step 4 has an evaluation alone.
    callback = GradlabTrainerCallback(preset="cheap")
    state = train(tmp_path, callback, max_steps=8, logging_strategy="epoch", logging_steps=4,
                  eval_steps=4)  # fmt: skip
    assert holders(tmp_path, state) == {4: ["evaluation"], 8: ["training"]}
