"""A simulated second rank for in-process tests of the Monitor under ``torch.distributed``.

With a one-rank gloo group the Monitor gathers; :class:`MirrorRank` replaces
``get_world_size``, ``all_gather`` and ``all_reduce`` by a second rank that holds the same
values as this one (so a record holds this rank's values) but offers another checksum (its batch
is another one), and whose offer at the step agreement a test may change (its first nine
values; the quantities rank 1 disabled are this rank's). Past the first step, when the steps
the ranks compared run out, the ranks compare their schedules again (three integers, and every
answer when they differ): rank 1 compares as this rank unless ``schedules(step)`` gives what
rank 1 compares from ``step``, ``(compared, answers)``: the bytes whose digest it offers (the
quantities' schedules as the run header records them, one line each; see
:func:`compared_digest`) and, asked only when the digests differ, its answers (one byte per
quantity and step, an index into :data:`gradlab.monitor.distributed.ANSWERS`).
"""

from __future__ import annotations

import hashlib

import pytest
import torch

OFFER_LENGTH = 10  # [step, calls, has batch, has labels, has gradient, has loss, rows, width,
#                    checksum, quantities disabled on the rank]


START_LENGTH = 3  # [step, plan, digest]: the exchange at a Monitor's first step


def compared_digest(compared: bytes) -> int:
    """The digest a rank offers for its schedules' ``compared`` bytes: the first seven bytes of
    BLAKE2b, read little-endian (the ranks' wire format)."""
    return int.from_bytes(hashlib.blake2b(compared, digest_size=7).digest(), "little")


class MirrorRank:
    """Rank 1 holds this rank's values under another checksum; ``offers(step, offer)`` may
    change what it offers. At the first step's exchange (``[step, plan, digest]``) this rank plays
    rank 0 unless ``rank_zero_start(mine)`` gives rank 0's row (this rank then plays rank 1);
    :attr:`starts` keeps what this rank offered there."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, offers=None,
                 rank_zero_start=None, schedules=None) -> None:  # fmt: skip
        self.offers = offers or (lambda step, offer: offer)
        self.rank_zero_start = rank_zero_start
        self.schedules = schedules or (lambda step: None)
        self.peer_answers: bytes | None = None  # rank 1's, for the comparison under way
        self.compares: list[list[int]] = []  # what this rank offered: [step, quantities, digest]
        self.starts: list[list[int]] = []
        # "start", "offer", "rows", "compare" or "answers", one per all_gather
        self.gathers: list[str] = []
        self.reduces = 0
        monkeypatch.setattr(torch.distributed, "get_world_size", lambda *a, **k: 2)
        monkeypatch.setattr(torch.distributed, "all_gather", self.all_gather)
        monkeypatch.setattr(torch.distributed, "all_reduce", self.all_reduce)

    def all_gather(self, out: list[torch.Tensor], tensor: torch.Tensor, *a, **k) -> None:
        if tensor.dtype == torch.int64 and tuple(tensor.shape) == (START_LENGTH,) and self.starts:
            self._compare(out, tensor)
            return
        if tensor.dtype == torch.uint8:  # every rank's answers: the schedules differ
            self.gathers.append("answers")
            out[0].copy_(tensor)
            out[1].copy_(torch.frombuffer(bytearray(self.peer_answers), dtype=torch.uint8))
            return
        if tensor.dtype == torch.int64 and tuple(tensor.shape) == (START_LENGTH,):
            self.gathers.append("start")
            self.starts.append(tensor.tolist())
            if self.rank_zero_start is None:
                out[0].copy_(tensor)
                out[1].copy_(tensor)
            else:
                out[0].copy_(torch.tensor(self.rank_zero_start(tensor.tolist())))
                out[1].copy_(tensor)
            return
        is_offer = tensor.dtype == torch.int64 and tuple(tensor.shape) == (OFFER_LENGTH,)
        self.gathers.append("offer" if is_offer else "rows")
        out[0].copy_(tensor)
        if is_offer:  # ``offers`` sees the first nine (the checksum last); rank 1 disabled
            offer = tensor.tolist()[:-1]  # what this rank did
            offer[-1] += 1  # another batch than this rank's
            offered = [*self.offers(int(tensor[0]), offer), int(tensor[-1])]
            out[1].copy_(torch.tensor(offered))
        else:
            out[1].copy_(tensor)

    def _compare(self, out: list[torch.Tensor], tensor: torch.Tensor) -> None:
        """The comparison of the schedules from step ``tensor[0]``: ``[step, quantities,
        digest]``; rank 1 offers the same unless ``schedules`` says what it compares."""
        self.gathers.append("compare")
        self.compares.append(tensor.tolist())
        out[0].copy_(tensor)
        peer = tensor.clone()
        said = self.schedules(int(tensor[0]))
        if said is not None:
            compared, self.peer_answers = said
            peer[2] = compared_digest(compared)
        out[1].copy_(peer)

    def all_reduce(self, tensor: torch.Tensor, *a, **k) -> None:
        self.reduces += 1
        tensor.mul_(2)
