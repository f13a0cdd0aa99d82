"""The ranks' comparison of their schedules, in process, beside a simulated rank 1.

Under torch.distributed the ranks compare what their schedules log over the
:data:`~gradlab.monitor.distributed.PLAN_HORIZON` steps from their first ``monitor.step()``, and
again when those steps run out (or when ``monitor.step_count`` is set past them): a schedule
that logs a step on one rank and not on another would leave a rank waiting at that step. These
tests run the real Monitor as rank 0 of a one-rank gloo group beside
:class:`~tests.helpers.second_rank.MirrorRank`, whose schedules the test gives, and read what a
user sees: the records, the one warning of each kind and its words, the error under
``strict=True``, and which exchanges a step costs. The same cases with two real processes are
in ``test_ranks_agree.py`` (slow).
"""

from __future__ import annotations

import warnings

import pytest
import torch

import gradlab
from gradlab import GradlabError
from gradlab.monitor import EmbeddingNorms, Loss, Monitor, every, read_jsonl
from gradlab.monitor.distributed import ANSWERS, PLAN_HORIZON, PLAN_STEPS
from tests.helpers.second_rank import MirrorRank, compared_digest

PARTS_AT = PLAN_HORIZON + 10  # where rank 1's schedule answers otherwise, in the second window
WHY = "no entry for this step"


def _always(step: int) -> bool:
    """A schedule of the user's own that logs every step (the ranks compare its answers)."""
    return True


class _RaisesAt:
    """A schedule of the user's own: every step, but it raises at ``step`` (a table of steps
    that ends early)."""

    def __init__(self, step: int) -> None:
        self.step = step

    def __call__(self, step: int) -> bool:
        if step == self.step:
            raise RuntimeError(WHY)
        return True


def _answers(at: dict[int, int] | None = None, default: int = 1) -> bytes:
    """One quantity's answers over a window: ``default`` but at the offsets given."""
    row = bytearray([default]) * PLAN_HORIZON
    for offset, answer in (at or {}).items():
        row[offset] = answer
    return bytes(row)


def _compared(answers: bytes) -> bytes:
    """What a rank compares for a schedule of the user's own: whether it logs each step."""
    return bytes(answer == 1 for answer in answers)


def _peer(window_start: int, answers: bytes):
    """Rank 1, whose user schedule answers ``answers`` from ``window_start`` (and as this rank
    elsewhere)."""
    return lambda step: (_compared(answers), answers) if step == window_start else None


def _train(monitor: Monitor, steps, loss=None) -> list:
    """Train on ``steps`` (a step that is not the Monitor's next sets ``step_count``: a loop
    resumed or gone back); returns what each ``monitor.step()`` returned."""
    loss_fn = monitor.watch(loss or gradlab.SmoothAPLoss(0.05))
    returned = []
    for step in steps:
        if step != monitor.step_count:
            monitor.step_count = step
        generator = torch.Generator().manual_seed(step)
        embeddings = torch.randn(6, 4, generator=generator, dtype=torch.float64)
        loss_fn(embeddings.requires_grad_(True), torch.arange(6) % 2).backward()
        returned.append(monitor.step())
    return returned


def _run(tmp_path, quantities, steps, strict=False):
    """A Monitor of ``quantities`` trained on ``steps``; the records, gradlab's warnings, and
    the error the training raised (None)."""
    error = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        monitor = Monitor(tmp_path / "run", quantities=quantities, strict=strict)
        try:
            _train(monitor, steps)
        except GradlabError as raised:  # strict=True: the training stops there
            error = str(raised)
        else:
            monitor.close()
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    ours = [w for w in caught if "gradlab" in str(w.message)]
    assert all(w.category is RuntimeWarning for w in ours), [w.category for w in ours]
    assert all(w.filename == __file__ for w in ours)  # the training loop's step()
    return monitor, records, [str(w.message) for w in ours], error


def _why(step: int, rank_0: int, rank_1: int) -> str:
    return (f"its schedule answers differently on the ranks for step {step} (rank 0 "
            f"{ANSWERS[rank_0]}, rank 1 {ANSWERS[rank_1]}): under torch.distributed a schedule "
            "must answer alike on every rank")  # fmt: skip


def _found(first: int, at: int, why: str, name: str = "loss") -> str:
    """The group's finding, as rank 0 says it (without its ending)."""
    return (f"gradlab.Monitor: step {first}: quantity {name!r}: {why}, or a rank would wait at "
            f"step {at} for one that never comes until the process group times out")


# Steps: the first, then (a loop resumed from a checkpoint) the last of the first window and
# the second window up to two steps past where the schedules part.
STEPS = [0, *range(PLAN_HORIZON - 1, PARTS_AT + 3)]


def test_a_user_schedule_that_raises_on_rank_1_alone_is_left_out_on_every_rank_from_there(
        tmp_path, one_rank_group, monkeypatch):  # fmt: skip
    rank1 = MirrorRank(monkeypatch, schedules=_peer(PLAN_HORIZON, _answers({10: 2})))
    monitor, records, said, error = _run(tmp_path, [Loss(_always)], STEPS)
    assert error is None
    logged = [0, *range(PLAN_HORIZON - 1, PARTS_AT)]
    assert [(r["step"], "loss" in r) for r in records] == [
        *((step, True) for step in logged), (PARTS_AT, False)]  # fmt: skip
    why = _why(PARTS_AT, 1, 2)
    assert records[-1]["disabled"] == {"loss": f"step {PARTS_AT}: disabled on every rank: {why}"}
    assert said == [f"{_found(PLAN_HORIZON, PARTS_AT, why)}. It is disabled on every rank from "
                    f"step {PARTS_AT} on (strict=True raises instead)"]  # fmt: skip
    assert monitor.disabled == {"loss": f"disabled on every rank: {why}"}
    # compared when the first window's last step closes, before the next one's call asks;
    # this rank's user schedule compared by its answers (it logs every step)
    assert rank1.compares == [[PLAN_HORIZON, 1, compared_digest(_compared(_answers()))]]
    one_step = ["offer", "rows", "rows"]  # the agreement, then embeddings, labels, gradient
    assert rank1.gathers == ["start", *one_step, "compare", "answers",
                             *one_step * (len(logged) - 1)]  # fmt: skip


def test_strict_raises_on_this_rank_where_the_schedules_part(tmp_path, one_rank_group,
                                                             monkeypatch):  # fmt: skip
    MirrorRank(monkeypatch, schedules=_peer(PLAN_HORIZON, _answers({10: 0})))
    monitor, records, said, error = _run(tmp_path, [Loss(_always)], STEPS, strict=True)
    why = _why(PARTS_AT, 1, 0)
    assert error == (f"{_found(PLAN_HORIZON, PARTS_AT, why)} (strict=True raises, on every "
                     "rank, rather than disable the quantity on every rank)")  # fmt: skip
    assert said == [] and monitor.disabled == {}
    # raised in the last step of the first window, before it was logged
    assert [r["step"] for r in records] == [0]


def test_this_ranks_own_schedule_error_is_said_by_it_and_the_finding_once(
        tmp_path, one_rank_group, monkeypatch):  # fmt: skip
    MirrorRank(monkeypatch, schedules=_peer(PLAN_HORIZON, _answers()))
    _monitor, records, said, error = _run(tmp_path, [Loss(_RaisesAt(PARTS_AT))], STEPS)
    why = _why(PARTS_AT, 2, 1)
    assert error is None
    assert said == [
        f"gradlab.Monitor: the schedule of quantity 'loss' raises for step {PARTS_AT} on rank 0: "
        f"RuntimeError: {WHY}",
        f"{_found(PLAN_HORIZON, PARTS_AT, why)}. It is disabled on every rank from step "
        f"{PARTS_AT} on (strict=True raises instead)",
    ]
    assert records[-1] == {"step": PARTS_AT,
                           "disabled": {"loss": f"step {PARTS_AT}: disabled on every rank: {why}"}}


def test_ranks_whose_gradlab_schedules_agree_compare_their_descriptions_alone(
        tmp_path, one_rank_group, monkeypatch):  # fmt: skip
    rank1 = MirrorRank(monkeypatch)  # it compares as this rank: no answers are exchanged
    quantities = [Loss(every(1)), EmbeddingNorms(every(2))]
    steps = [0, 2 * PLAN_HORIZON, 3 * PLAN_HORIZON - 1, 3 * PLAN_HORIZON]
    _monitor, records, said, error = _run(tmp_path, quantities, steps)
    assert error is None and said == []
    assert "answers" not in rank1.gathers
    described = compared_digest(b"every(1)\nevery(2)")
    # a step set past the first window compares from there, and its last step the next
    assert rank1.compares == [[2 * PLAN_HORIZON, 2, described],
                              [3 * PLAN_HORIZON, 2, described]]  # fmt: skip
    assert [r["step"] for r in records] == steps
    assert ["embedding_norm_mean" in r for r in records] == [step % 2 == 0 for step in steps]


def test_a_gradlab_schedule_that_parts_is_compared_with_its_end_in_the_next_window(
        tmp_path, one_rank_group, monkeypatch):  # fmt: skip
    peer = _answers({10: 0})  # rank 1 leaves out one step of every(1): another schedule
    rank1 = MirrorRank(monkeypatch, schedules=lambda step: (
        b"one of the user's own", peer) if step == PLAN_HORIZON else None)  # fmt: skip
    steps = [*STEPS, 2 * PLAN_HORIZON - 1, 2 * PLAN_HORIZON]
    _monitor, records, said, error = _run(tmp_path, [Loss(every(1))], steps)
    assert error is None and len(said) == 1
    assert [r["step"] for r in records if "loss" in r] == [0, *range(PLAN_HORIZON - 1, PARTS_AT)]
    assert rank1.compares == [
        [PLAN_HORIZON, 1, compared_digest(b"every(1)")],
        # the next window: the schedule as recorded, and that the ranks left it out (from step
        # 0 once it is disabled: at every step, a loop gone back included)
        [2 * PLAN_HORIZON, 1, compared_digest(b"every(1) until 0")],
    ]
    assert rank1.gathers.count("answers") == 1


def _scores_run(tmp_path, quantities) -> list[str]:
    """The loss and a quantity it cannot serve (the norms of embeddings): NT-Xent watched on a
    score matrix, over the first step and the first window's end; gradlab's warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        monitor = Monitor(tmp_path / "run", quantities=quantities)
        loss_fn = monitor.watch(gradlab.NTXentLoss(0.1))  # on a score matrix: no embeddings
        for step in [0, PLAN_HORIZON - 1, PLAN_HORIZON]:
            monitor.step_count = step
            scores = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
            loss_fn(scores, torch.eye(4, dtype=torch.bool)).backward()
            monitor.step()
        monitor.close()
    return [str(w.message) for w in caught if "gradlab" in str(w.message)]


def test_a_quantity_the_loss_cannot_serve_is_compared_as_not_logged(tmp_path, one_rank_group,
                                                                    monkeypatch):  # fmt: skip
    rank1 = MirrorRank(monkeypatch)
    _scores_run(tmp_path, [Loss(every(1)), EmbeddingNorms(every(1))])
    assert rank1.compares == [[PLAN_HORIZON, 2, compared_digest(b"every(1)\n-")]]


def test_a_user_schedule_compares_no_answer_past_the_step_the_ranks_left_it_out_from(
        tmp_path, one_rank_group, monkeypatch):  # fmt: skip
    rank1 = MirrorRank(monkeypatch, schedules=_peer(PLAN_HORIZON, _answers({10: 2})))
    steps = [*STEPS, 2 * PLAN_HORIZON - 1]
    _run(tmp_path, [Loss(_always)], steps)
    # in the second window it logs up to PARTS_AT; in the third, nothing
    assert [row[2] for row in rank1.compares] == [
        compared_digest(_compared(_answers())), compared_digest(_compared(_answers(default=0)))]


RESUMED = 3 * PLAN_HORIZON  # a loop resumed past the first window


@pytest.mark.parametrize("strict", [False, True])
def test_a_step_set_past_the_compared_window_is_compared_before_its_call_asks_the_schedule(
        tmp_path, one_rank_group, monkeypatch, strict):  # fmt: skip
    # this rank's schedule raises at the very step the loop resumes at, where rank 1's logs:
    # its call asked the schedule before the ranks compared, so under strict=True it raised at
    # the loss call while rank 1 waited for it in the comparison, and without it this rank
    # said its schedule's error twice
    MirrorRank(monkeypatch, schedules=_peer(RESUMED, _answers()))
    _monitor, records, said, error = _run(tmp_path, [Loss(_RaisesAt(RESUMED))],
                                          [0, RESUMED, RESUMED + 1], strict=strict)  # fmt: skip
    why = _why(RESUMED, 2, 1)
    if strict:  # raised by step(), as on rank 1, where the ranks compared
        assert error == (f"{_found(RESUMED, RESUMED, why)} (strict=True raises, on every rank, "
                         "rather than disable the quantity on every rank)")  # fmt: skip
        assert [r["step"] for r in records] == [0]
        return
    assert error is None
    assert said == [
        f"gradlab.Monitor: the schedule of quantity 'loss' raises for step {RESUMED} on rank 0: "
        f"RuntimeError: {WHY}",
        f"{_found(RESUMED, RESUMED, why)}. It is disabled on every rank from step {RESUMED} on "
        "(strict=True raises instead)",
    ]
    assert records[1:] == [{"step": RESUMED, "disabled": {
        "loss": f"step {RESUMED}: disabled on every rank: {why}"}}]  # fmt: skip


@pytest.mark.parametrize("back_to", [[PARTS_AT - 2, PARTS_AT - 1], [0, 1]])
def test_a_loop_gone_back_before_the_parting_step_gathers_nothing_for_the_quantity(
        tmp_path, one_rank_group, monkeypatch, back_to):  # fmt: skip
    # disabled on every rank for the rest of the run, as a quantity rank 0 disabled: a loop
    # gone back to an earlier checkpoint (in the compared window, or to the run's first step,
    # outside it) neither logs it nor gathers a batch for it
    rank1 = MirrorRank(monkeypatch, schedules=_peer(PLAN_HORIZON, _answers({10: 2})))
    _monitor, records, said, error = _run(tmp_path, [Loss(_always)],
                                          [*STEPS, *back_to])  # fmt: skip
    assert error is None and len(said) == 1
    assert [r["step"] for r in records][-1] == PARTS_AT  # the note; nothing after it
    compared = ["compare"] if back_to[0] == 0 else []  # step 0 lies outside the window
    # the last logged step's rows, before the parting, then at most the comparison from step 0
    assert rank1.gathers[-1 - len(compared):] == ["rows", *compared]
    logged = [0, *range(PLAN_HORIZON - 1, PARTS_AT)]  # 3 gathers each
    assert len(rank1.gathers) == len(["start", "compare", "answers", *compared]) + 3 * len(
        logged)


def test_a_loop_resumed_at_the_first_step_past_the_compared_window_is_compared_there(
        tmp_path, one_rank_group, monkeypatch):  # fmt: skip
    # the first window is steps 0 to PLAN_HORIZON - 1: PLAN_HORIZON itself is past it
    MirrorRank(monkeypatch, schedules=_peer(PLAN_HORIZON, _answers()))
    _monitor, records, _said, error = _run(tmp_path, [Loss(_RaisesAt(PLAN_HORIZON))],
                                           [0, PLAN_HORIZON], strict=True)  # fmt: skip
    assert [r["step"] for r in records] == [0]
    why = _why(PLAN_HORIZON, 2, 1)
    assert error == (f"{_found(PLAN_HORIZON, PLAN_HORIZON, why)} (strict=True raises, on every "
                     "rank, rather than disable the quantity on every rank)")  # fmt: skip


@pytest.mark.parametrize("at", [PLAN_HORIZON, PLAN_HORIZON + 5])
def test_inside_the_compared_steps_a_schedule_raising_on_every_rank_raises_at_the_loss_call(
        tmp_path, one_rank_group, monkeypatch, at):  # fmt: skip
    # the ranks compared these steps (rank 1 raises there too): under strict=True each rank
    # raises at its own loss call, as without torch.distributed, before any collective
    peer = _answers({at - PLAN_HORIZON: 2})
    rank1 = MirrorRank(monkeypatch, schedules=_peer(PLAN_HORIZON, peer))
    monitor = Monitor(tmp_path / "run", quantities=[Loss(_RaisesAt(at))], strict=True)
    loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
    labels = torch.arange(6) % 2
    for step in [0, *range(PLAN_HORIZON - 1, at)]:
        monitor.step_count = step
        loss_fn(torch.randn(6, 4, requires_grad=True), labels).backward()
        monitor.step()
    gathers = len(rank1.gathers)
    with pytest.raises(GradlabError, match=f"raised for step {at}: RuntimeError: {WHY}"):
        loss_fn(torch.randn(6, 4, requires_grad=True), labels)
    assert len(rank1.gathers) == gathers  # no rank was asked to wait


def test_several_user_schedules_exchange_one_row_of_answers_each(tmp_path, one_rank_group,
                                                                 monkeypatch):  # fmt: skip
    # rank 1's second quantity leaves out one step: the answers of both travel, and only the
    # second is left out
    rows = _answers() + _answers({10: 0})
    rank1 = MirrorRank(monkeypatch, schedules=lambda step: (
        b"its own", rows) if step == PLAN_HORIZON else None)  # fmt: skip
    _monitor, records, said, error = _run(tmp_path, [Loss(_always), EmbeddingNorms(_always)],
                                          STEPS)  # fmt: skip
    assert error is None and len(said) == 1 and "quantity 'embedding_norm'" in said[0]
    assert rank1.gathers.count("answers") == 1
    assert "loss" in records[-1] and "embedding_norm_mean" not in records[-1]
    assert records[-1]["step"] == STEPS[-1]


def test_a_quantity_disabled_on_rank_0_says_that_rank_0_logs_it_no_more(tmp_path, one_rank_group,
                                                                        monkeypatch):  # fmt: skip
    MirrorRank(monkeypatch)

    class Raises(Loss):
        name = "raises"
        keys = ("raises",)
        plots = ()

        def compute(self, batch):
            raise ValueError("injected")

    _monitor, _records, said, error = _run(tmp_path, [Loss(every(1)), Raises(every(1))], [0, 1])
    assert error is None and len(said) == 1
    assert said[0].startswith(
        "gradlab.Monitor: step 0: quantity 'raises' raised in compute() and is disabled on "
        "rank 0, which writes the log: it is logged no more (strict=True raises instead):\n")


def test_a_step_whose_schedule_raises_is_offered_as_not_logged_at_the_first_step(
        tmp_path, one_rank_group, monkeypatch):  # fmt: skip
    # the first step's exchange: the steps this rank's Monitor logs, as a plan of the first
    # PLAN_STEPS and a digest of PLAN_HORIZON; a schedule that raises logs nothing there
    rank1 = MirrorRank(monkeypatch)
    _run(tmp_path, [Loss(_RaisesAt(5))], [0])
    logs = [step != 5 for step in range(PLAN_HORIZON)]
    assert rank1.starts == [[0, sum(1 << k for k in range(PLAN_STEPS) if logs[k]),
                             compared_digest(bytes(logs))]]  # fmt: skip


def test_a_quantity_the_loss_cannot_serve_answers_no_step_when_the_answers_travel(
        tmp_path, one_rank_group, monkeypatch):  # fmt: skip
    # rank 1 compares otherwise: every answer travels, the norms' (which no rank logs) as 0
    rows = _answers({10: 2}) + _answers(default=0)
    rank1 = MirrorRank(monkeypatch, schedules=lambda step: (
        b"its own", rows) if step == PLAN_HORIZON else None)  # fmt: skip
    said = _scores_run(tmp_path, [Loss(_always), EmbeddingNorms(_always)])
    parted = [message for message in said if "answers differently" in message]
    assert len(parted) == 1 and "quantity 'loss'" in parted[0]
    assert rank1.gathers.count("answers") == 1


def test_a_quantity_that_decides_its_steps_itself_is_compared_by_its_answers(
        tmp_path, one_rank_group, monkeypatch):  # fmt: skip
    # its schedule reads every(1), but its own should_compute logs even steps: the ranks
    # compare what it logs, not the schedule it was given

    class EvenSteps(Loss):
        def should_compute(self, step: int) -> bool:
            return step % 2 == 0

    rank1 = MirrorRank(monkeypatch)
    _run(tmp_path, [EvenSteps(every(1))], [0, PLAN_HORIZON - 1])
    even = bytes(step % 2 == 0 for step in range(PLAN_HORIZON, 2 * PLAN_HORIZON))
    assert rank1.compares == [[PLAN_HORIZON, 1, compared_digest(even)]]
