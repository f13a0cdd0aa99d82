"""close() after torch.distributed.destroy_process_group(), in process (one gloo rank): the
rank seen at the first step decides who writes, and a last step the schedules skipped is not
logged, with one warning. The two-rank case runs in tests/monitor/test_distributed_faults.py."""

import inspect
import warnings

import pytest
import torch

import gradlab
from gradlab.monitor import read_jsonl

WARNING = ("gradlab.Monitor: close() after the process group was destroyed: the last step ({}), "
           "which the schedules skipped, is not logged (no rank can be asked for its batch any "
           "more); close the Monitor before torch.distributed.destroy_process_group()")


def _train_then_destroy(tmp_path, steps: int, **options):
    if not torch.distributed.is_available():
        pytest.skip("torch.distributed is not available")
    torch.distributed.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}",
                                         rank=0, world_size=1)  # fmt: skip
    generator = torch.Generator().manual_seed(0)
    try:
        monitor = gradlab.Monitor(tmp_path / "run", preset="cheap", **options)
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        for _ in range(steps):
            embeddings = torch.randn(8, 4, generator=generator, requires_grad=True)
            loss_fn(embeddings, torch.arange(8) % 2).backward()
            monitor.step()
    finally:
        torch.distributed.destroy_process_group()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        monitor.close()
    said = [str(w.message) for w in caught if w.category is RuntimeWarning]
    return read_jsonl(tmp_path / "run" / "metrics.jsonl"), said, caught


def test_rank_0_writes_what_it_logged_and_says_the_last_step_is_lost(tmp_path):
    # the default schedule logs 0-10 and skips 11, which close() would add
    (headers, records), said, _ = _train_then_destroy(tmp_path, 12)
    assert len(headers) == 1
    assert [r["step"] for r in records] == list(range(11))
    assert said == [WARNING.format(11)]


def test_the_warning_points_at_the_close_call(tmp_path):
    _, _, caught = _train_then_destroy(tmp_path, 12)
    lines, first = inspect.getsourcelines(_train_then_destroy)
    close = first + next(i for i, line in enumerate(lines) if "monitor.close()" in line)
    assert {(w.filename, w.lineno) for w in caught if w.category is RuntimeWarning} == {
        (__file__, close)}  # the close() line itself, not the test that called the helper


@pytest.mark.parametrize("steps", [11, 0])
def test_nothing_is_said_when_no_step_was_skipped_or_none_taken(tmp_path, steps):
    # 11 steps: the last (10) was logged; 0 steps: no rank was seen, nothing to lose
    (headers, records), said, _ = _train_then_destroy(tmp_path, steps)
    assert len(headers) == 1
    assert [r["step"] for r in records] == list(range(steps))
    assert said == []


def test_a_schedule_that_logged_the_last_step_is_not_warned_about(tmp_path):
    (_, records), said, _ = _train_then_destroy(tmp_path, 12, every=1)
    assert [r["step"] for r in records] == list(range(12))
    assert said == []
