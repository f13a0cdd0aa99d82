"""Distributed runs stay in step: two gloo ranks, one of which misbehaves at step 1.

Each case runs in two spawned processes with a time box: a rank left waiting in the Monitor's
collective (the other rank never joins it) fails the test instead of hanging CI. The records
are checked against the ranks' own per-step losses: a record's ``loss`` is the mean of the two
ranks' losses at the SAME step, never rank 0 at step s with rank 1 at step s + 1.
"""

import json
import time

import pytest
import torch

from gradlab.monitor import read_jsonl
from gradlab.monitor.batch import BatchView
from gradlab.monitor.distributed import agree_on_step, decide
from tests.helpers.distributed_faults import (
    FAULT_STEP,
    STEPS,
    close_after_destroy_worker,
    disabled_worker,
    fault_worker,
    restart_worker,
    schedule_worker,
)
from tests.helpers.processes import run_two_ranks


def _spawn(worker, args, what):
    """Two ranks of ``worker``, failing the test if a rank still runs after the time box."""
    run_two_ranks(worker, args, what)


def _run(tmp_path, fault):
    _spawn(fault_worker, (str(tmp_path / "init"), str(tmp_path), fault), f"fault {fault!r}")
    ranks = [json.loads((tmp_path / f"losses_{rank}.json").read_text()) for rank in range(2)]
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    return ranks, records


@pytest.mark.slow
def test_a_rank_that_resumes_before_rank_0_wrote_its_last_record_follows_rank_0(tmp_path):
    # Rank 1 reads the folder while rank 0 still writes step 12: it would start at 11, rank 0
    # at 13, and log other optimizer steps than rank 0's, whose collectives then meet DDP's
    # all-reduces (a hang). It numbers its steps as rank 0 instead, and says so once.
    _spawn(restart_worker, (str(tmp_path / "init"), str(tmp_path)), "a resumed Monitor")
    headers, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    # the default schedule: 0-10, then every 10th step; close() adds each phase's last step
    assert [r["step"] for r in records] == [*range(11), 12, 20, 25]
    assert headers[1]["resumed"]["from_step"] == 13
    told = json.loads((tmp_path / "warnings_1.json").read_text())
    assert [w for w in told if "rank 1 was at step 11" in w and "rank 0 at step 13" in w], told
    assert json.loads((tmp_path / "warnings_0.json").read_text()) == []


def _mean_loss(ranks, step):
    return (ranks[0]["losses"][str(step)] + ranks[1]["losses"][str(step)]) / 2


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["none", "validates", "int32_labels"])
def test_without_fault_every_step_logs_the_mean_of_both_ranks(tmp_path, fault):
    # a rank validating alone (gradients off) is no fault: its calls are neither read nor
    # counted, so the ranks stay in step and every record holds the training batches
    ranks, records = _run(tmp_path, fault)
    assert [r["step"] for r in records] == list(range(STEPS))
    for record in records:
        assert record["loss"] == pytest.approx(_mean_loss(ranks, record["step"]), rel=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["unreadable", "raises", "float64"])
def test_a_rank_without_a_usable_batch_skips_that_step_on_every_rank(tmp_path, fault):
    ranks, records = _run(tmp_path, fault)
    steps = [r["step"] for r in records]
    assert steps == [s for s in range(STEPS) if s != FAULT_STEP]
    for record in records:  # no record mixes the ranks' steps
        assert record["loss"] == pytest.approx(_mean_loss(ranks, record["step"]), rel=1e-6)
    assert [rank["skipped_steps"] for rank in ranks] == [1, 1]
    told = [w for w in ranks[0]["warnings"] if "rank 1" in w and f"step {FAULT_STEP}" in w]
    assert len(told) == 1, ranks[0]["warnings"]
    # the group's decision is said once, by rank 0; rank 1 says nothing of the log rank 0
    # wrote (it said "nothing was logged" at close(), of a log that holds three steps)
    assert not [w for w in ranks[1]["warnings"]
                if "not logged on any rank" in w or "nothing was logged" in w]  # fmt: skip


@pytest.mark.slow
def test_a_rank_skipping_monitor_step_stops_the_gathering_without_mixing(tmp_path):
    ranks, records = _run(tmp_path, "skips_step")
    *records, note = records  # logged until the skip, then a record of the note alone
    assert [r["step"] for r in records] == list(range(FAULT_STEP))
    assert note["step"] == FAULT_STEP and sorted(note) == ["disabled", "step"]
    assert all("the Monitor stops logging" in why and "out of step" in why
               for why in note["disabled"].values())  # fmt: skip
    for record in records:
        assert record["loss"] == pytest.approx(_mean_loss(ranks, record["step"]), rel=1e-6)
    for rank in ranks:
        assert rank["out_of_step"] and "rank 1" in rank["out_of_step"]
    # of the whole group: said once, by rank 0
    assert [sum("out of step" in w for w in rank["warnings"]) for rank in ranks] == [1, 0]


# --- the decision itself: every outcome from a synthetic table (no process group) -------------

# [step, calls, has batch, has labels, has gradient, has loss, rows, width] per rank
READY = [5, 6, 1, 1, 1, 1, 8, 4, 99]


def _rank(**changes):
    names = ["step", "calls", "batch", "labels", "grad", "loss", "rows", "width", "checksum"]
    return [changes.get(name, value) for name, value in zip(names, READY, strict=True)]


def test_ranks_with_the_same_step_and_readable_batches_log_with_their_row_counts():
    agreement = decide([_rank(), _rank(rows=3), _rank(rows=8, checksum=98)])
    assert agreement.log and agreement.rows == (8, 3, 8)
    assert agreement.skipped is None and agreement.out_of_step is None


@pytest.mark.parametrize(
    ("table", "named"),
    [
        ([_rank(), _rank(batch=0, labels=0, grad=0, loss=0, rows=0, width=0)], ["rank 1 has"]),
        ([_rank(batch=0), _rank(), _rank(batch=0)], ["rank 0, rank 2 have"]),
        ([_rank(), _rank(labels=0)], ["differ", "labels 0"]),
        ([_rank(grad=0), _rank()], ["differ", "grad 0"]),
        ([_rank(), _rank(width=5)], ["differ"]),
    ],
)
def test_a_rank_without_a_usable_batch_skips_the_step_on_every_rank(table, named):
    agreement = decide(table)
    assert not agreement.log and agreement.out_of_step is None
    assert f"step {READY[0]}" in agreement.skipped
    for words in named:
        assert words in agreement.skipped


@pytest.mark.parametrize(
    "table",
    [[_rank(), _rank(step=6)], [_rank(), _rank(calls=7)], [_rank(step=4, batch=0), _rank()]],
)
def test_ranks_at_different_steps_or_call_counts_are_out_of_step(table):
    agreement = decide(table)
    assert not agreement.log and agreement.skipped is None
    for rank, row in enumerate(table):
        assert (
            f"rank {rank} at step {row[0]} after {row[1]} watched call(s)" in agreement.out_of_step
        )


def test_one_rank_group_agrees_with_itself(one_rank_group):
    view = BatchView(embeddings=torch.randn(6, 3), labels=torch.arange(6) % 2)
    assert agree_on_step(2, 3, view).rows == (6,)
    assert "rank 0 has no batch for step 2" in agree_on_step(2, 3, None).skipped


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["auto", "local"])
def test_close_after_the_group_is_destroyed_writes_on_rank_0_only(tmp_path, mode):
    # rank 1 wrote a record of its own batch (local: into its own folder; auto: into rank 0's
    # folder, refused) once destroy_process_group() had made every process look like rank 0
    _spawn(close_after_destroy_worker, (str(tmp_path / "init"), str(tmp_path), mode),
           f"close after destroy ({mode})")  # fmt: skip
    assert not list(tmp_path.glob("error_*.txt"))
    folder = tmp_path / ("run" if mode == "auto" else "rank0")
    _, records = read_jsonl(folder / "metrics.jsonl")
    assert [r["step"] for r in records] == list(range(11))  # step 11: skipped, not gathered
    assert not (tmp_path / "rank1" / "metrics.jsonl").exists()
    told = json.loads((tmp_path / "warnings_0.json").read_text())
    assert [w for w in told if w.startswith(
        "gradlab.Monitor: close() after the process group was destroyed: the last step (11), "
        "which the schedules skipped, is not logged")]  # fmt: skip
    assert json.loads((tmp_path / "warnings_1.json").read_text()) == []


@pytest.mark.slow
def test_ranks_whose_monitors_log_different_steps_are_refused_at_once(tmp_path):
    """every=1 on rank 0, every=2 on rank 1: rank 0 would wait at step 1 for a rank that
    never comes, until the process group timed out. Both ranks refuse at their first step,
    well inside the time box, with the steps each would log."""
    started = time.monotonic()
    _spawn(schedule_worker, (str(tmp_path / "init"), str(tmp_path)), "different schedules")
    errors = [json.loads((tmp_path / f"schedule_{rank}.json").read_text())["error"]
              for rank in range(2)]  # fmt: skip
    expected = ("gradlab.Monitor: the ranks' Monitors log different steps from step 0: rank 0 "
                "logs steps 0, 1, 2, 3, 4, ..., rank 1 logs steps 0, 2, 4, 6, 8, ...; under "
                "torch.distributed every rank's Monitor must log the same steps (the same "
                "every=, preset and quantities' schedules; a schedule of your own that raises "
                "reads as logging no step where it raises, so it must raise alike on every "
                "rank): each would wait at a step another does not log until the process group "
                "times out")
    assert errors == [expected, expected]
    assert time.monotonic() - started < 30  # the process group's own timeout: no wait for it


@pytest.mark.slow
def test_a_quantity_disabled_on_one_rank_is_still_logged_by_rank_0(tmp_path):
    """RowsSeen raises on rank 1 at step 1 and is disabled there alone; from step 2 it is the
    only quantity due. Rank 1 read no batch for it then, and every such step was skipped on
    both ranks ("rank 1 has no batch"), though rank 0 logs it: rank 1 now reads the batch
    for rank 0 to gather."""
    _spawn(disabled_worker, (str(tmp_path / "init"), str(tmp_path)), "a disabled quantity")
    ranks = [json.loads((tmp_path / f"disabled_{rank}.json").read_text()) for rank in range(2)]
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    rows = 2 * 8  # both ranks' batches, gathered
    assert [(r["step"], r.get("loss") is not None, r["rows_seen"]) for r in records] == [
        (0, True, rows), (1, True, rows), (2, False, rows), (3, False, rows)]
    assert [rank["skipped_steps"] for rank in ranks] == [0, 0]
    assert ranks[0]["warnings"] == []
    # the warning says whose copy it disables, and that the log goes on: it read "is
    # disabled" alone, above a log that holds the quantity at every step
    assert [w.split("\n")[0] for w in ranks[1]["warnings"]] == [
        "gradlab.Monitor: step 1: quantity 'rows_seen' raised in compute() and is disabled on "
        "rank 1: rank 0, which writes the log, logs it on unless its own copy is disabled too "
        "(rank 0 warns of that) (strict=True raises instead):"]


@pytest.mark.slow
def test_a_quantity_disabled_on_rank_0_alone_ends_its_records_without_empty_ones(tmp_path):
    """RowsSeen raises on rank 0 at step 1: rank 0, which alone writes, logs it no more. Rank 1
    still computes it; rank 0 reads its batch for that rank's gather and writes no record
    that would hold its step alone."""
    _spawn(disabled_worker, (str(tmp_path / "init"), str(tmp_path), 0), "a disabled quantity")
    ranks = [json.loads((tmp_path / f"disabled_{rank}.json").read_text()) for rank in range(2)]
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [sorted(record) for record in records] == [["loss", "rows_seen", "step"],
                                                     ["disabled", "loss", "step"]]  # fmt: skip
    assert list(records[1]["disabled"]) == ["rows_seen"]
    assert records[1]["disabled"]["rows_seen"].startswith("step 1: raised in compute(): ")
    assert [rank["skipped_steps"] for rank in ranks] == [0, 0]
    assert [w.split("\n")[0] for w in ranks[0]["warnings"]] == [
        "gradlab.Monitor: step 1: quantity 'rows_seen' raised in compute() and is disabled on "
        "rank 0, which writes the log: it is logged no more (strict=True raises instead):"]
    assert ranks[1]["warnings"] == []
