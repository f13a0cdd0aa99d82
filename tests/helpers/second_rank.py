"""A simulated second rank for in-process tests of the Monitor under ``torch.distributed``.

With a one-rank gloo group the Monitor gathers; :class:`MirrorRank` replaces
``get_world_size``, ``all_gather`` and ``all_reduce`` by a second rank that holds the same
values as this one (so a record holds this rank's values) but offers another checksum (its batch
is another one), and whose offer at the step agreement a test may change (its first nine
values; the quantities rank 1 disabled are this rank's).
"""

from __future__ import annotations

import pytest
import torch

OFFER_LENGTH = 10  # [step, calls, has batch, has labels, has gradient, has loss, rows, width,
#                    checksum, quantities disabled on the rank]


START_LENGTH = 3  # [step, plan, digest]: the exchange at a Monitor's first step


class MirrorRank:
    """Rank 1 holds this rank's values under another checksum; ``offers(step, offer)`` may
    change what it offers. At the first step's exchange (``[step, plan, digest]``) this rank plays
    rank 0 unless ``rank_zero_start(mine)`` gives rank 0's row (this rank then plays rank 1);
    :attr:`starts` keeps what this rank offered there."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, offers=None,
                 rank_zero_start=None) -> None:  # fmt: skip
        self.offers = offers or (lambda step, offer: offer)
        self.rank_zero_start = rank_zero_start
        self.starts: list[list[int]] = []
        self.gathers: list[str] = []  # "start", "offer" or "rows", one per all_gather
        self.reduces = 0
        monkeypatch.setattr(torch.distributed, "get_world_size", lambda *a, **k: 2)
        monkeypatch.setattr(torch.distributed, "all_gather", self.all_gather)
        monkeypatch.setattr(torch.distributed, "all_reduce", self.all_reduce)

    def all_gather(self, out: list[torch.Tensor], tensor: torch.Tensor, *a, **k) -> None:
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

    def all_reduce(self, tensor: torch.Tensor, *a, **k) -> None:
        self.reduces += 1
        tensor.mul_(2)
