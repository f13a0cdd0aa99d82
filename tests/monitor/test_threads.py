"""How many intra-op threads a logged step's quantities run with, and that the caller's come back.

A quantity of one's own records ``torch.get_num_threads()`` while the Monitor computes it: one
thread below ``ONE_THREAD_BELOW`` score-matrix entries on a CPU, the caller's number from there
on, and the caller's number again after ``monitor.step()`` (also when a quantity raises)."""

import pytest
import torch

import gradlab
from gradlab.monitor import Quantity, every
from gradlab.monitor.threads import ONE_THREAD_BELOW, threads_for_step

CALLER_THREADS = 3
"""The training loop's thread count in these tests (any number above 1 shows the switch)."""


@pytest.fixture
def caller_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(CALLER_THREADS)
    try:
        yield CALLER_THREADS
    finally:
        torch.set_num_threads(before)


class ThreadsSeen(Quantity):
    """Logs the number of intra-op threads while it is computed."""

    name = "threads_seen"
    needs = frozenset({"scores"})
    keys = ("threads_seen",)

    def compute(self, batch):
        return {"threads_seen": torch.get_num_threads()}


class Raises(Quantity):
    name = "raises"
    needs = frozenset({"embeddings"})
    keys = ("raises",)

    def compute(self, batch):
        raise RuntimeError("a bug in a quantity")


def _side_for(entries: int) -> int:
    """The in-batch size B whose B x B matrix has ``entries`` or the fewest above."""
    side = int(entries**0.5)
    return side if side * side >= entries else side + 1


def _in_batch_step(tmp_path, rows: int, name: str) -> dict:
    with gradlab.Monitor(tmp_path / name, quantities=[ThreadsSeen(every(1))]) as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        embeddings = torch.randn(rows, 4, requires_grad=True)
        labels = torch.arange(rows) // 2
        loss_fn(embeddings, labels).backward()
        record = monitor.step()
        after = torch.get_num_threads()
    return record, after


def test_a_small_step_runs_on_one_thread_then_gives_them_back(tmp_path, caller_threads):
    rows = _side_for(ONE_THREAD_BELOW) - 1  # the largest square matrix below the bound
    assert rows * rows < ONE_THREAD_BELOW
    record, after = _in_batch_step(tmp_path, rows, "small")
    assert record["threads_seen"] == 1
    assert after == caller_threads


def test_a_step_at_the_bound_keeps_the_callers_threads(tmp_path, caller_threads):
    rows = _side_for(ONE_THREAD_BELOW)
    assert rows * rows >= ONE_THREAD_BELOW
    record, after = _in_batch_step(tmp_path, rows, "large")
    assert record["threads_seen"] == caller_threads
    assert after == caller_threads


def test_a_cross_modal_step_is_sized_by_its_candidates(tmp_path, caller_threads):
    queries = 4
    columns = {"few": ONE_THREAD_BELOW // queries - 1, "many": ONE_THREAD_BELOW // queries}
    seen = {}
    for name, count in columns.items():
        with gradlab.Monitor(tmp_path / name, quantities=[ThreadsSeen(every(1))]) as monitor:
            loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
            images = torch.randn(queries, 8, requires_grad=True)
            captions = torch.randn(count, 8)
            positives = torch.zeros(queries, count, dtype=torch.bool)
            positives[:, 0] = True
            loss_fn(images, candidates=captions, positives=positives).backward()
            seen[name] = monitor.step()["threads_seen"]
    assert seen == {"few": 1, "many": caller_threads}


def test_a_watched_score_matrix_is_sized_by_its_entries(tmp_path, caller_threads):
    """A loss watched on a score matrix: the matrix's entries size the step."""
    seen = {}
    for name, columns in {"few": 16, "many": ONE_THREAD_BELOW // 16}.items():
        monitor = gradlab.Monitor(tmp_path / name, quantities=[ThreadsSeen(every(1))])
        with monitor:
            loss_fn = monitor.watch(gradlab.NTXentLoss(0.1, direction="i2t"), inputs="scores")
            scores = torch.randn(16, columns, requires_grad=True)
            loss_fn(scores, torch.eye(16, columns, dtype=torch.bool)).backward()
            seen[name] = monitor.step()["threads_seen"]
    assert seen == {"few": 1, "many": caller_threads}


def test_a_quantity_that_raises_gives_the_threads_back(tmp_path, caller_threads):
    monitor = gradlab.Monitor(tmp_path, quantities=[Raises(every(1))], strict=True)
    loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
    loss_fn(torch.randn(8, 4, requires_grad=True), torch.arange(8) // 2).backward()
    with pytest.raises(RuntimeError, match="a bug in a quantity"):
        monitor.step()
    assert torch.get_num_threads() == caller_threads
    monitor.close()


def test_other_devices_and_one_thread_callers_are_left_alone(caller_threads):
    with threads_for_step(torch.device("meta"), 16):
        on_meta = torch.get_num_threads()
    torch.set_num_threads(1)
    with threads_for_step(torch.device("cpu"), 16):
        single = torch.get_num_threads()
    assert (on_meta, single, torch.get_num_threads()) == (caller_threads, 1, 1)
