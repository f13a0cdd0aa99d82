"""Under torch.distributed (two gloo ranks): the note of a quantity disabled on rank 0 reaches
the log even when nothing is logged after it, and a warning about the whole group is given
once, by rank 0.

Before, rank 0 wrote the note only into a record of a later logged step: a quantity disabled
at its call, or by its schedule, on a step that logged nothing else, with nothing logged after
it, left the log without a word of it (``close()`` did not write it either). And the warnings
that tell the group's decision (a step not logged on any rank, ranks out of step, every rank
holding the same batch) were printed by every rank, each with the same words.
"""

import json

import pytest
import torch

from gradlab.monitor import read_jsonl
from tests.helpers.disabled_notes_ranks import (
    DISABLED_AT,
    batch_of,
    disabled_on_rank_1_worker,
    first_record_worker,
    notes_worker,
    same_batch_worker,
)
from tests.helpers.processes import run_two_ranks


def _spawn(tmp_path, worker, *args):
    """Two ranks of ``worker`` (:func:`run_two_ranks`); returns each rank's warnings."""
    run_two_ranks(worker, (str(tmp_path / "init"), str(tmp_path), *args))
    return [json.loads((tmp_path / f"warnings_{rank}.json").read_text()) for rank in range(2)]


NOTES = {
    "at_call": "raised in at_call(): KeyError: 'injected failure at the call'",
    "schedule": "raised in its schedule: RuntimeError: bad step",
    "last_call": "raised in at_call(): KeyError: 'injected failure at the call'",
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(NOTES))
def test_a_note_that_no_later_record_carries_is_written_by_rank_0(tmp_path, case):
    _spawn(tmp_path, notes_worker, case)
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    if case == "last_call":  # its step never closed: no record of it (resume=True would number
        # on past it); the warning at the call says it
        assert [r["step"] for r in records] == [0, 1]
        return
    # at_call: rank 0 has disabled the quantity, so no rank reads step 3 for it (rank 1 did,
    # for nothing): the schedules skip step 3, which close() logs as the last step, as it
    # would in one process; the note was written at step 2 all the same
    last = [3] if case == "at_call" else []
    assert [r["step"] for r in records] == [0, 1, DISABLED_AT, *last]
    assert records[2] == {"step": DISABLED_AT, "disabled": {
        "fails_at_step": f"step {DISABLED_AT}: {NOTES[case]}"}}  # fmt: skip
    assert sorted(records[-1]) == (["loss", "step"] if last else ["disabled", "step"])


@pytest.mark.slow
def test_a_quantity_disabled_on_rank_0_alone_is_warned_of_there_alone(tmp_path):
    # rank-specific: said on the rank whose copy is disabled, and on no other
    told = _spawn(tmp_path, notes_worker, "at_call")
    assert len(told[0]) == 1 and told[0][0].startswith(
        f"gradlab.Monitor: step {DISABLED_AT}: quantity 'fails_at_step' raised in at_call() "
        "and is disabled on rank 0, which writes the log: it is logged no more")
    assert told[1] == []
    # rank 1, whose copy raised nothing, leaves it out too: rank 0 logs it no more
    disabled = [json.loads((tmp_path / f"disabled_{rank}.json").read_text()) for rank in range(2)]
    assert list(disabled[0]) == ["fails_at_step"]  # rank 0: the traceback of its error
    assert disabled[0]["fails_at_step"].endswith("KeyError: 'injected failure at the call'\n")
    assert disabled[1] == {"fails_at_step": "disabled on rank 0, which writes the log"}


@pytest.mark.slow
def test_every_rank_holding_the_same_batch_is_said_once_by_rank_0(tmp_path):
    told = _spawn(tmp_path, same_batch_worker)
    assert len(told[0]) == 1 and told[0][0].startswith(
        "gradlab.Monitor: at step 0 every rank holds the same batch")
    assert told[1] == []


@pytest.mark.slow
def test_a_first_record_of_a_note_alone_leaves_the_gathering_unsaid_in_the_header(tmp_path):
    # no value of the step's batch is logged: the header cannot say whether it was gathered
    _spawn(tmp_path, first_record_worker)
    (header,), records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [sorted(record) for record in records] == [["disabled", "step"]]
    assert header["distributed"] == {"world_size": 2, "mode": "auto", "gathered": None}


@pytest.mark.slow
def test_a_schedule_failing_at_every_later_step_disables_its_quantity_once(tmp_path):
    # a quantity disabled by its schedule is not asked by that schedule again: one warning on
    # each rank (each rank's copy is disabled) and one note, at the step it failed
    told = _spawn(tmp_path, notes_worker, "schedule_ends")
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [record["step"] for record in records] == [0, 1, DISABLED_AT]
    assert records[-1] == {"step": DISABLED_AT, "disabled": {"fails_at_step": (
        f"step {DISABLED_AT}: raised in its schedule: IndexError: list index out of range")}}
    assert [len(said) for said in told] == [1, 1]


@pytest.mark.slow
def test_a_quantity_disabled_on_rank_1_alone_is_logged_on_from_both_ranks_batches(tmp_path):
    # rank 1, whose copy is disabled, has nothing due of its own but still offers its batch
    # to the gathering on the steps rank 0 logs the quantity
    told = _spawn(tmp_path, disabled_on_rank_1_worker)
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [record["step"] for record in records] == [0, 1, 2, 3]
    for step, record in enumerate(records):
        both = torch.cat([batch_of(rank, step)[0].detach().double() for rank in range(2)])
        assert record["fails_at_step"] == pytest.approx(both.mean().item(), rel=1e-12)
    assert told[0] == [] and len(told[1]) == 1
