"""check_device from Python: the refusals name the keyword argument as Python writes it."""

from __future__ import annotations

import pytest
import torch

from gradlab import GradlabError
from gradlab.experiments.runtime import check_device


def _refusal(device: str, argument: str = "device") -> str:
    with pytest.raises(GradlabError) as raised:
        check_device(device, argument)
    return str(raised.value)


def test_a_cpu_index_past_the_one_cpu_device_is_refused_as_a_keyword():
    assert check_device("cpu:0") == "cpu:0"
    assert _refusal("cpu:1") == ("device='cpu:1': torch has one CPU device, cpu (or cpu:0); "
                                 "use device='cpu'")  # fmt: skip
    assert _refusal("cpu:2", "test_device") == (
        "test_device='cpu:2': torch has one CPU device, cpu (or cpu:0); use test_device='cpu'")


def test_cuda_without_cuda_is_refused_as_a_keyword(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert _refusal("cuda") == (f"device='cuda': this torch build ({torch.__version__}) sees no "
                                "CUDA device; use device='cpu'")  # fmt: skip


def test_the_command_lines_option_is_written_as_typed():
    assert _refusal("cpu:1", "--device") == (
        "--device cpu:1: torch has one CPU device, cpu (or cpu:0); use --device cpu")
