"""The ranks' comparison of their schedules past the steps compared at the first step
(``agree_on_schedules``), in process: a one-rank gloo group and a fake second rank whose
offers the test writes (``torch.distributed.get_world_size`` and ``all_gather`` replaced)."""

from __future__ import annotations

import pytest
import torch

from gradlab import GradlabError
from gradlab.monitor.distributed import PLAN_HORIZON, agree_on_schedules


class _PeerRank:
    """A fake rank 1: ``first`` its three integers, ``answers`` its answers' bytes."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, first, answers: bytes = b"") -> None:
        self.first, self.answers, self.gathers = first, answers, 0
        monkeypatch.setattr(torch.distributed, "get_world_size", lambda *a, **k: 2)
        monkeypatch.setattr(torch.distributed, "all_gather", self.all_gather)

    def all_gather(self, out: list[torch.Tensor], tensor: torch.Tensor, *a, **k) -> None:
        self.gathers += 1
        out[0].copy_(tensor)
        peer = self.first(tensor) if self.gathers == 1 else torch.frombuffer(
            bytearray(self.answers), dtype=torch.uint8)  # fmt: skip
        out[1].copy_(peer)


def _rows(*quantities: dict[int, int]) -> bytes:
    """Answers of each quantity, 0 (does not log) but at the steps (offsets) given."""
    table = bytearray()
    for answers in quantities:
        row = bytearray(PLAN_HORIZON)
        for at, answer in answers.items():
            row[at] = answer
        table += row
    return bytes(table)


def _first_parting(mine: bytes, peer: bytes, quantities: int) -> dict[int, tuple]:
    """The reference: per quantity, the first step offset where one rank logs (answer 1) and
    the other does not (0 or 2, a schedule that raises), with both answers there."""
    parted = {}
    for index in range(quantities):
        for at in range(PLAN_HORIZON):
            a, b = mine[index * PLAN_HORIZON + at], peer[index * PLAN_HORIZON + at]
            if (a == 1) != (b == 1):
                parted[index] = (at, (a, b))
                break
    return parted


def test_ranks_whose_schedules_agree_exchange_three_integers_and_no_answers(
        one_rank_group, monkeypatch):
    peer = _PeerRank(monkeypatch, lambda tensor: tensor.clone())  # the same digest
    asked = []
    assert agree_on_schedules(4096, 2, b"every(n=1)\nevery(n=5)",
                              lambda: asked.append(1) or b"") == {}  # fmt: skip
    assert peer.gathers == 1 and asked == []


def test_the_first_step_each_quantity_parts_at_with_every_ranks_answer(one_rank_group, monkeypatch):
    # quantity 0: both log 10 and 30, rank 1 also 20 (rank 0's schedule raises there); quantity 1:
    # alike (one does not log where the other raises: neither logs); quantity 2: rank 0 logs 7
    # and 11 too, the first of them named
    mine = _rows({10: 1, 20: 2, 30: 1}, {5: 0, 6: 1}, {7: 1, 9: 1, 11: 1})
    peer = _rows({10: 1, 20: 1, 30: 1}, {5: 2, 6: 1}, {9: 1})
    _PeerRank(monkeypatch, lambda t: torch.tensor([t[0], t[1], t[2] + 1]), peer)
    parted = agree_on_schedules(8192, 3, b"mine", lambda: mine)
    expected = {index: (8192 + at, answers)
                for index, (at, answers) in _first_parting(mine, peer, 3).items()}
    assert parted == expected
    assert parted[0][0] == 8192 + 20 and parted[2][0] == 8192 + 7 and 1 not in parted


@pytest.mark.parametrize(("peer_first", "said"), [
    ([4000, 2, 7], "rank 0 at step 4096 with 2 quantities, rank 1 at step 4000 with 2 quantities"),
    ([4096, 3, 7], "rank 0 at step 4096 with 2 quantities, rank 1 at step 4096 with 3 quantities"),
])  # fmt: skip
def test_ranks_at_other_steps_or_with_other_quantities_are_refused(
        one_rank_group, monkeypatch, peer_first, said):
    _PeerRank(monkeypatch, lambda tensor: torch.tensor(peer_first))
    with pytest.raises(GradlabError) as refused:
        agree_on_schedules(4096, 2, b"mine", lambda: _rows({}, {}))
    assert str(refused.value) == (
        "gradlab.Monitor: the ranks' agreement on their schedules from step 4096: the ranks "
        f"differ ({said}); under torch.distributed every rank must make the Monitor alike and "
        "call monitor.step() once per optimizer step"
    )


def test_answers_of_the_wrong_length_are_refused(one_rank_group, monkeypatch):
    _PeerRank(monkeypatch, lambda t: torch.tensor([t[0], t[1], t[2] + 1]), _rows({}))
    with pytest.raises(ValueError, match=f"^answers\\(\\) gave {PLAN_HORIZON} bytes, not 2 x "
                                         f"{PLAN_HORIZON}$"):  # fmt: skip
        agree_on_schedules(0, 2, b"mine", lambda: _rows({}))


def test_without_a_process_group_nothing_is_compared():
    assert agree_on_schedules(0, 1, b"x", lambda: pytest.fail("asked")) == {}


def _echo_of(compared: bytes, monkeypatch) -> torch.Tensor:
    """What a rank whose schedules compare as ``compared`` offers first (its step, count and
    digest), recorded from a call beside a rank that offers the same."""
    peer = _PeerRank(monkeypatch, lambda tensor: tensor.clone())
    offered = []
    real = peer.all_gather
    monkeypatch.setattr(torch.distributed, "all_gather",
                        lambda out, tensor, *a, **k: offered.append(tensor.clone()) or real(
                            out, tensor))  # fmt: skip
    agree_on_schedules(0, 1, compared, lambda: pytest.fail("asked"))
    return offered[0]


def test_the_ranks_compare_what_their_schedules_log_not_merely_their_steps(
        one_rank_group, monkeypatch):
    # a rank whose schedules compare as b"every(n=2)" beside one whose compare as b"every(n=3)":
    # their offers differ, and each rank's answers are exchanged
    other = _echo_of(b"every(n=3)", monkeypatch)
    _PeerRank(monkeypatch, lambda tensor: other, _rows({1: 1}))
    asked = []
    parted = agree_on_schedules(0, 1, b"every(n=2)", lambda: asked.append(1) or _rows({2: 1}))
    assert asked == [1] and parted == {0: (1, (0, 1))}
    # and beside one that compares alike: nothing more
    _PeerRank(monkeypatch, lambda tensor: other)
    assert agree_on_schedules(0, 1, b"every(n=3)", lambda: pytest.fail("asked")) == {}


@pytest.mark.parametrize("failing", [1, 2])
def test_a_failed_exchange_names_the_comparison_and_the_error(one_rank_group, monkeypatch, failing):
    # the first exchange (three integers) or the second (the answers) fails: a rank ended
    peer = _PeerRank(monkeypatch, lambda t: torch.tensor([t[0], t[1], t[2] + 1]), _rows({}))
    real = peer.all_gather

    def all_gather(out, tensor, *args, **kwargs):
        if peer.gathers + 1 == failing:
            raise RuntimeError("Connection closed by peer")
        real(out, tensor)

    monkeypatch.setattr(torch.distributed, "all_gather", all_gather)
    with pytest.raises(GradlabError) as failed:
        agree_on_schedules(4096, 1, b"mine", lambda: _rows({}))
    assert str(failed.value).startswith(
        "gradlab.Monitor: the ranks' agreement on their schedules from step 4096 failed "
        "(RuntimeError: Connection closed by peer): another rank ended")
