"""The all-gathers in one process: without a process group, and in a group of one.

One process is the whole batch, so both gathers hand back their input and the rank is 0. The
gathers between processes (rows in rank order, the backward's all-reduce) are checked by the
two-process runs of ``test_distributed.py``.
"""

import torch
import torch.distributed as dist

from gradlab.equivalence.collectives import gather_rows, process_rank, world_size


def test_without_a_group_one_process_of_rank_0_is_the_whole_batch():
    assert not dist.is_initialized()
    assert world_size() == 1 and process_rank() == 0
    rows = torch.randn(3, 2, requires_grad=True)
    assert gather_rows(rows) is rows and gather_rows(rows, gradient=False) is rows


def test_a_group_of_one_is_read_from_the_group(group_of_one):
    assert world_size() == dist.get_world_size() == 1
    assert process_rank() == dist.get_rank() == 0
    rows = torch.randn(4, 2, requires_grad=True)
    gathered = gather_rows(rows)
    assert gathered is rows
    (gathered * torch.arange(8.0).reshape(4, 2)).sum().backward()
    torch.testing.assert_close(rows.grad, torch.arange(8.0).reshape(4, 2), rtol=0, atol=0)
