"""Fixtures of the equivalence checker's tests."""

import pytest
import torch.distributed as dist


@pytest.fixture
def group_of_one(tmp_path):
    """A gloo process group of this one process (rank 0 of 1), destroyed after the test."""
    if not dist.is_available():
        pytest.skip("torch.distributed is not available")
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    yield
    dist.destroy_process_group()
