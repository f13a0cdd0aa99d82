"""Fixtures of the monitor tests."""

import pytest
import torch


@pytest.fixture
def one_rank_group(tmp_path):
    if not torch.distributed.is_available():
        pytest.skip("torch.distributed is not available")
    torch.distributed.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1
    )
    try:
        yield
    finally:
        torch.distributed.destroy_process_group()
