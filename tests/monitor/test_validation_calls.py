"""Validation calls (gradients off) once the run trains through the Monitor: never logged,
never counted, on logged and unlogged steps alike, and never what close() logs for the last
step. Each expected value is the training batch's own, computed here."""

import pytest
import torch

import gradlab
from gradlab.monitor import read_jsonl


def _batches(steps: int):
    generator = torch.Generator().manual_seed(0)
    labels = torch.arange(16) % 4
    train = [torch.randn(16, 8, generator=generator) for _ in range(steps)]
    validation = 10 * torch.randn(40, 8, generator=generator), torch.arange(40) % 2
    return train, labels, validation


@pytest.mark.parametrize("gradients_off", [torch.no_grad, torch.inference_mode])
def test_close_logs_the_last_training_batch_not_a_validation_after_it(tmp_path, gradients_off):
    steps = 12  # the default schedule skips step 11: close() adds it
    train, labels, validation = _batches(steps)
    with gradlab.Monitor(tmp_path, preset="cheap") as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.1))
        for embeddings in train:
            loss_fn(embeddings.clone().requires_grad_(), labels).backward()
            with gradients_off():
                loss_fn(*validation)
            monitor.step()
    _, records = read_jsonl(tmp_path / "metrics.jsonl")
    last = records[-1]
    assert last["step"] == steps - 1
    expected = train[-1].norm(dim=1).mean().item()
    assert last["embedding_norm_mean"] == pytest.approx(expected, rel=1e-6)
    assert last["loss"] == pytest.approx(gradlab.SmoothAPLoss(0.1)(train[-1], labels).item(),
                                         rel=1e-6)  # fmt: skip


def test_a_validation_call_between_steps_is_not_counted_nor_logged(tmp_path):
    train, labels, validation = _batches(3)
    with gradlab.Monitor(tmp_path, preset="cheap", every=1) as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.1))
        records = []
        for embeddings in train:
            with torch.no_grad():  # after the previous step(), before this step's training
                loss_fn(*validation)
            loss_fn(embeddings.clone().requires_grad_(), labels).backward()
            with torch.no_grad():
                loss_fn(*validation)
            records.append(monitor.step())
        calls = monitor.calls
    # the first validation came before any training call: read (and replaced) as any call
    assert calls == len(train) + 1
    for record, embeddings in zip(records, train, strict=True):
        assert record["embedding_norm_mean"] == pytest.approx(
            embeddings.norm(dim=1).mean().item(), rel=1e-6)  # fmt: skip


def test_calls_with_gradients_off_alone_are_still_read(tmp_path):
    """A loss watched for its values alone (no call ever trains): each call is read."""
    *_, validation = _batches(0)
    with gradlab.Monitor(tmp_path, preset="cheap", every=1) as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.1))
        with torch.no_grad():
            loss_fn(*validation)
            record = monitor.step()
        assert monitor.calls == 1
    assert record["embedding_norm_mean"] == pytest.approx(
        validation[0].norm(dim=1).mean().item(), rel=1e-6)  # fmt: skip
