"""Monitor: logged values equal the functional API, schedules, sinks, errors, hooks."""

import json
import math
import platform
import warnings

import numpy as np
import pytest
import torch

import gradlab
from gradlab import GradlabError, Monitor
from gradlab.functional import (
    decomposition_norms,
    in_batch_decomposition,
    in_batch_layout,
    operating_region_proportion,
)
from gradlab.monitor import (
    CSVSink,
    JSONLSink,
    OperatingRegion,
    Quantity,
    dense_warmup,
    every,
    log_spaced,
    read_jsonl,
)
from tests.helpers.home import home_and_work
from tests.helpers.training import batches, train


def test_watch_leaves_gradients_bit_identical(tmp_path):
    plain = train(steps=3)
    with Monitor(tmp_path, preset="full", every=1) as monitor:
        watched = train(monitor, steps=3)
    for a, b in zip(plain, watched, strict=True):
        assert torch.equal(a, b)


def test_logged_values_equal_the_functional_api(tmp_path):
    images, labels = next(batches(1))
    torch.manual_seed(0)
    model = gradlab.models.EmbeddingMLP(64, 16)
    with Monitor(tmp_path, tau=0.05, preset="full", every=1) as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        embeddings = model(images)
        loss = loss_fn(embeddings, labels)
        loss.backward()
        record = monitor.step()
    detached = embeddings.detach()
    assert record["loss"] == pytest.approx(loss.item())
    seed_scores = in_batch_layout(detached, labels, include_query=True).scores
    assert record["p_seed"] == pytest.approx(
        operating_region_proportion(seed_scores, 0.05).mean().item()
    )
    norms = decomposition_norms(in_batch_decomposition(detached.double(), labels, 0.05))
    # The monitor computes in the embeddings' float32, reusing the loss's scores and ranks.
    assert record["decomposition_ad_norm_mean"] == pytest.approx(
        norms["ad_norm"].mean().item(), rel=1e-5
    )
    # Gradient agreement is checked against a SmoothAP written with loops (test_values.py), not
    # against gradlab's SmoothAPLoss itself.
    assert {"gradient_agreement_cosine", "gradient_agreement_relative_error"} <= set(record)
    layout = in_batch_layout(detached.double(), labels)
    smooth = gradlab.functional.smooth_ap(
        layout.scores, layout.positives, 0.05, candidate_mask=layout.candidate_mask
    )
    # The monitor scores the float32 embeddings; the reference uses float64.
    assert record["smooth_ap"] == pytest.approx(smooth.nanmean().item(), rel=1e-6)


def test_agreement_flags_a_loss_that_is_not_smoothap(tmp_path):
    # pytorch-metric-learning's SmoothAPLoss groups positives wrongly for 6 classes of 4.
    losses = pytest.importorskip("pytorch_metric_learning.losses")
    with Monitor(tmp_path, quantities=[gradlab.monitor.GradientAgreement(every(1))]) as monitor:
        images = torch.randn(24, 64)
        labels = torch.arange(6).repeat_interleave(4)
        model = gradlab.models.EmbeddingMLP(64, 16)
        loss = monitor.watch(losses.SmoothAPLoss(temperature=0.05))(model(images), labels)
        loss.backward()
        record = monitor.step()
    assert record["gradient_agreement_relative_error"] > 0.1


@pytest.mark.parametrize(
    ("schedule", "expected"),
    # Step 9, the last, is logged at close() by every schedule.
    [
        (every(3), [0, 3, 6, 9]),
        (log_spaced(), [0, 1, 2, 4, 8, 9]),
        (dense_warmup(2, 4), [0, 1, 4, 8, 9]),
    ],
)
def test_schedules_select_the_logged_steps(tmp_path, schedule, expected):
    with Monitor(tmp_path, preset="cheap", every=schedule) as monitor:
        train(monitor, steps=10)
    _, records = read_jsonl(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in records] == expected


def test_off_schedule_steps_capture_nothing(tmp_path):
    monitor = Monitor(tmp_path, preset="full", every=5)
    loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
    monitor.step()  # step 0 had no batch: nothing logged
    embeddings = torch.randn(8, 4, requires_grad=True)
    loss_fn(embeddings, torch.arange(8) % 2)
    assert monitor._pending is None  # step 1 is off schedule
    assert embeddings._backward_hooks is None
    monitor.close()


def test_jsonl_header_and_append_on_resume(tmp_path):
    with Monitor(tmp_path, preset="cheap", every=1, config={"run": 1}) as monitor:
        train(monitor, steps=2)
    with Monitor(tmp_path, preset="cheap", every=1, config={"run": 2}, resume=True) as monitor:
        train(monitor, steps=2)
    headers, records = read_jsonl(tmp_path / "metrics.jsonl")
    assert [h["config"]["run"] for h in headers] == [1, 2]
    assert headers[0]["device"] == "cpu" and headers[0]["torch"] == torch.__version__
    assert headers[0]["python"] == platform.python_version()
    assert [r["step"] for r in records] == [0, 1, 2, 3]
    for line in (tmp_path / "metrics.jsonl").read_text().splitlines():
        json.loads(line)  # every line is valid JSON


def test_resume_on_a_folder_without_a_run_starts_one_at_step_zero(tmp_path):
    """One command for a job's first launch and its restarts: resume=True on an empty (or
    absent) folder starts a run; the next launch continues it."""
    for run in (1, 2):
        with Monitor(tmp_path / "job", preset="cheap", every=1, config={"run": run},
                     resume=True) as monitor:  # fmt: skip
            train(monitor, steps=2)
    headers, records = read_jsonl(tmp_path / "job" / "metrics.jsonl")
    assert [h["config"]["run"] for h in headers] == [1, 2]
    assert "resumed" not in headers[0] and headers[1]["resumed"]["from_step"] == 2
    assert [r["step"] for r in records] == [0, 1, 2, 3]


def test_a_resumption_from_an_earlier_checkpoint_names_the_step_it_logs_from(tmp_path):
    # a trainer resumed from the checkpoint of step 1 sets the Monitor's step back (the
    # Lightning callback follows trainer.global_step): the header names step 1, not 4
    with Monitor(tmp_path / "job", preset="cheap", every=1) as monitor:
        train(monitor, steps=4)
    with Monitor(tmp_path / "job", preset="cheap", every=1, resume=True) as monitor:
        assert monitor.step_count == 4  # after the log's last step, unless told otherwise
        monitor.step_count = 1
        train(monitor, steps=2)
    headers, records = read_jsonl(tmp_path / "job" / "metrics.jsonl")
    assert headers[1]["resumed"]["from_step"] == 1
    assert [r["step"] for r in records] == [0, 1, 2, 3, 1, 2]


def test_csv_sink_round_trips(tmp_path):
    with Monitor(tmp_path, preset="cheap", every=1, sinks=["jsonl", "csv"]) as monitor:
        train(monitor, steps=3)
    import csv

    rows = list(csv.DictReader((tmp_path / "metrics.csv").open()))
    _, records = read_jsonl(tmp_path / "metrics.jsonl")
    assert len(rows) == len(records) == 3
    for row, record in zip(rows, records, strict=True):
        for key, value in record.items():
            assert float(row[key]) == pytest.approx(value)


def test_a_log_dir_under_tilde_is_written_in_the_home_folder(tmp_path, monkeypatch):
    home, work = home_and_work(tmp_path, monkeypatch)
    with Monitor("~/runs/a", preset="cheap", every=1) as monitor:
        train(monitor, steps=2)
    assert monitor.log_dir == home / "runs" / "a"
    assert [r["step"] for r in read_jsonl(home / "runs" / "a" / "metrics.jsonl")[1]] == [0, 1]
    assert list(work.iterdir()) == []  # no folder named ~ in the working folder


@pytest.mark.slow
def test_tensorboard_sink_round_trips(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    with Monitor(tmp_path, preset="cheap", every=1, sinks=["tensorboard"]) as monitor:
        train(monitor, steps=3)
    accumulator = EventAccumulator(str(tmp_path))
    accumulator.Reload()
    assert [event.step for event in accumulator.Scalars("loss")] == [0, 1, 2]


class Exploding(Quantity):
    name = "exploding"

    def compute(self, batch):
        raise RuntimeError("boom")


def test_a_quantity_that_raises_is_reported_once_and_disabled(tmp_path):
    with Monitor(tmp_path, quantities=[Exploding(every(1)), OperatingRegion(every(1))]) as monitor:
        with pytest.warns(RuntimeWarning,
                          match=r"'exploding' raised in compute\(\) and is disabled") as caught:
            train(monitor, steps=3)
    assert len([w for w in caught if "exploding" in str(w.message)]) == 1
    assert "RuntimeError: boom" in monitor.disabled["exploding"]
    _, records = read_jsonl(tmp_path / "metrics.jsonl")
    assert len(records) == 3 and all("p_seed" in r for r in records)


def test_strict_raises(tmp_path):
    with Monitor(tmp_path, quantities=[Exploding(every(1))], strict=True) as monitor:
        with pytest.raises(GradlabError, match=r"^quantity 'exploding' raised in compute\(\) "
                           "at step 0: RuntimeError: boom$") as raised:
            train(monitor, steps=1)
    assert isinstance(raised.value.__cause__, RuntimeError)  # its own error, chained


def test_nan_inputs_are_logged_as_nan(tmp_path):
    with Monitor(tmp_path, preset="cheap", every=1) as monitor:
        loss_fn = monitor.watch(lambda e, y: e.sum() * float("nan"))
        embeddings = torch.randn(6, 3, requires_grad=True)
        loss_fn(embeddings, torch.arange(6) % 2).backward()
        monitor.step()
    text = (tmp_path / "metrics.jsonl").read_text()
    assert '"loss": "NaN"' in text
    _, records = read_jsonl(tmp_path / "metrics.jsonl")
    assert math.isnan(records[0]["loss"])


def test_attach_forward_hook(tmp_path):
    torch.manual_seed(0)
    model = gradlab.models.EmbeddingMLP(64, 16)
    current = {}
    with Monitor(tmp_path, preset="default", every=1) as monitor:
        handle = monitor.attach(model, labels=lambda: current["labels"])
        for images, labels in batches(2):
            current["labels"] = labels
            model(images).sum().backward()
            monitor.step()
        handle.remove()
    _, records = read_jsonl(tmp_path / "metrics.jsonl")
    assert len(records) == 2 and "p_seed" in records[0]
    # The backward of sum() sends a gradient of ones into the 24 x 16 embeddings.
    assert records[0]["embedding_grad_norm"] == pytest.approx(math.sqrt(24 * 16))


@pytest.mark.parametrize("gradients_off", [torch.no_grad, torch.inference_mode])
def test_a_validation_call_before_the_step_leaves_the_training_batch_logged(
    tmp_path, gradients_off
):
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    train, validation = torch.randn(12, 8), 5 * torch.randn(12, 8)
    labels = torch.arange(4).repeat_interleave(3)
    current = {"labels": labels}
    with Monitor(tmp_path / "watched", preset="cheap", every=1) as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        embeddings = model(train)
        loss = loss_fn(embeddings, labels)
        loss.backward()
        with gradients_off():  # a validation batch, with its own loss (labels by keyword)
            validation_loss = loss_fn(model(validation), labels=labels)
        assert validation_loss.item() == gradlab.SmoothAPLoss(0.05)(model(validation),
                                                                    labels).item()
        record = monitor.step()
    assert record["loss"] == loss.item()
    assert record["embedding_norm_mean"] == pytest.approx(embeddings.norm(dim=1).mean().item())
    assert "embedding_grad_norm" in record
    with Monitor(tmp_path / "attached", preset="cheap", every=1) as monitor:
        monitor.attach(model, labels=lambda: current["labels"])
        embeddings = model(train)
        embeddings.sum().backward()
        with gradients_off():
            model(validation)
        record = monitor.step()
    assert record["embedding_norm_mean"] == pytest.approx(embeddings.norm(dim=1).mean().item())
    assert record["embedding_grad_norm"] == pytest.approx(math.sqrt(12 * 4))
    # a loss watched for its values alone, every call with gradients off: the last is logged
    with Monitor(tmp_path / "values", preset="cheap", every=1) as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        with gradients_off():
            loss_fn(model(train), labels)
            last = loss_fn(model(validation), labels)
        record = monitor.step()
    assert record["loss"] == last.item()


def test_cross_modal_watch(tmp_path):
    with Monitor(tmp_path, preset="full", every=1) as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        images = torch.randn(4, 8, requires_grad=True)
        captions = torch.randn(20, 8)
        positives = torch.arange(4).unsqueeze(1) == (torch.arange(20) // 5).unsqueeze(0)
        loss_fn(images, candidates=captions, positives=positives).backward()
        record = monitor.step()
    assert "p_cross_modal" in record and "gradient_count_mean" in record


@pytest.mark.slow
def test_plot_command(tmp_path, capsys):
    with Monitor(tmp_path, preset="full", every=1) as monitor:
        train(monitor, steps=3)
    from gradlab.cli import main

    assert main(["plot", str(tmp_path)]) == 0
    assert (tmp_path / "figures" / "operating_region.png").exists()
    assert main(["plot", str(tmp_path / "missing")]) == 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tau": 0}, "tau must be a positive finite number"),
        ({"preset": "everything"}, "preset must be one of"),
        ({"sinks": ["neptune"]}, "sinks must name one of"),
        ({"distributed": "global"}, "distributed must be 'auto' or 'local'"),
        ({"every": 0}, "every must be a positive integer"),
    ],
)
def test_constructor_errors(tmp_path, kwargs, message):
    with pytest.raises(GradlabError, match=message):
        Monitor(tmp_path, **kwargs)


@pytest.mark.parametrize("value", [np.int64(4), np.int32(4)])
def test_every_takes_a_numpy_integer_read_from_a_config(tmp_path, value):
    # refused as "every must be a positive integer n ...; got np.int64(4)"
    with Monitor(tmp_path, preset="cheap", every=value) as monitor:
        assert {repr(q.schedule) for q in monitor.quantities} == {"every(4)"}
    for refused in (np.float64(4.0), np.int64(0), np.bool_(True)):
        with pytest.raises(GradlabError, match=r"^every must be a positive integer n"):
            Monitor(tmp_path / "refused", every=refused)


def test_step_after_close_is_refused_and_names_the_run(tmp_path):
    monitor = Monitor(tmp_path)
    assert monitor.closed is False  # a bool, as documented (not merely falsy)
    monitor.close()
    assert monitor.closed is True
    with pytest.raises(GradlabError) as error:
        monitor.step()
    assert str(error.value) == (
        f"monitor.step() called after close() of the Monitor of {str(tmp_path)!r}; make a new "
        "Monitor (resume=True continues this run in its log_dir)"
    )


def test_watch_and_attach_after_close_are_refused(tmp_path):
    monitor = Monitor(tmp_path)
    monitor.close()
    with pytest.raises(GradlabError, match=r"^monitor\.watch\(\) called after close\(\); make"):
        monitor.watch(gradlab.SmoothAPLoss(0.05))
    with pytest.raises(GradlabError, match=r"^monitor\.attach\(\) called after close\(\)"):
        monitor.attach(torch.nn.Linear(2, 2), torch.arange(4))


def _calls_after_close(tmp_path, loss_fn, **keywords):
    """Watch ``loss_fn``, close the Monitor, then call the loss twice for training and once
    under ``torch.no_grad()`` (evaluation after training). Returns the Monitor, the watched
    loss, the inputs, the training calls' values, and the warnings of the training calls and
    of the evaluation call."""
    monitor = Monitor(tmp_path)
    watched = monitor.watch(loss_fn)
    monitor.close()
    embeddings, labels = torch.randn(6, 3), torch.arange(6) % 2
    with warnings.catch_warnings(record=True) as training:
        warnings.simplefilter("always")
        values = [watched(embeddings.clone().requires_grad_(), labels, **keywords)
                  for _ in range(2)]  # fmt: skip
    with warnings.catch_warnings(record=True) as evaluation:
        warnings.simplefilter("always")
        with torch.no_grad():
            watched(embeddings, labels, **keywords)
    return monitor, watched, (embeddings, labels), values, training, evaluation


@pytest.mark.slow
def test_a_watched_call_after_close_runs_the_loss_and_warns_once_of_that_alone(tmp_path):
    # the call was counted as a first watched call: at collection the Monitor warned it had
    # "ended after watched calls but without monitor.step() or close()", close() notwithstanding
    import gc

    loss = gradlab.SmoothAPLoss(0.05)
    monitor, watched, inputs, values, training, evaluation = _calls_after_close(tmp_path, loss)
    with warnings.catch_warnings(record=True) as collected:
        warnings.simplefilter("always")
        del monitor, watched
        gc.collect()
    assert [str(w.message) for w in training] == [
        f"gradlab.Monitor: a watched call after close() of the Monitor of {str(tmp_path)!r}: "
        "the loss runs and nothing is read or logged; make a new Monitor (resume=True "
        "continues this run in its log_dir) and watch the loss again to log more steps"]
    assert [w.filename for w in training] == [__file__]
    assert evaluation == collected == []  # evaluation after training: nothing to say
    assert all(torch.equal(value, loss(*inputs)) for value in values)


def test_a_watched_call_after_close_passes_its_keywords_on_and_warns_a_runtime_warning(tmp_path):
    def scaled_smooth_ap(embeddings, labels, *, scale):
        return scale * gradlab.SmoothAPLoss(0.05)(embeddings, labels)

    *_, inputs, values, training, evaluation = _calls_after_close(tmp_path, scaled_smooth_ap,
                                                                  scale=2.0)  # fmt: skip
    assert [w.category for w in training] == [RuntimeWarning]  # once, at the first call
    assert evaluation == []  # evaluation after training: not warned
    expected = 2.0 * gradlab.SmoothAPLoss(0.05)(*inputs)
    assert all(torch.equal(value, expected) for value in values)


def test_sink_classes_are_exported():
    assert issubclass(JSONLSink, gradlab.monitor.Sink) and issubclass(CSVSink, gradlab.monitor.Sink)


def test_derived_proportions_equal_direct_computation():
    from gradlab.functional import drop_diagonal
    from gradlab.monitor.batch import BatchView

    embeddings = torch.randn(30, 8, generator=torch.Generator().manual_seed(2))
    labels = torch.arange(30) % 5
    values = OperatingRegion().compute(BatchView(embeddings=embeddings, labels=labels, tau=0.05))
    scores = in_batch_layout(embeddings, labels, include_query=True).scores
    direct_off = operating_region_proportion(scores, 0.05, 0.005, False).mean()
    direct_others = operating_region_proportion(drop_diagonal(scores), 0.05, 0.005, False).mean()
    assert values["p_off_diagonal"].item() == pytest.approx(direct_off.item(), abs=1e-12)
    assert values["p_without_query"].item() == pytest.approx(direct_others.item(), abs=1e-12)
