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
