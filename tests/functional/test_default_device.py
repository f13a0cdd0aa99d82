"""The default-device check itself fails on what it exists to catch."""

import pytest
import torch

from tests.helpers.default_device import assert_unchanged_under_another_default_device

CPU = torch.device("cpu")


def test_a_tensor_made_on_the_default_device_is_caught():
    values = torch.arange(3.0)
    with pytest.raises(AssertionError):  # torch.ones made without device= lands on meta
        assert_unchanged_under_another_default_device(lambda: (values, torch.ones(3)), CPU)
    assert_unchanged_under_another_default_device(
        lambda: (values, torch.ones_like(values)), CPU
    )


def test_a_result_that_depends_on_the_default_device_is_caught():
    calls = []

    def compute():
        calls.append(None)
        return (torch.tensor([1.0]), len(calls))  # the plain value differs between the runs

    with pytest.raises(AssertionError):
        assert_unchanged_under_another_default_device(compute, CPU)
