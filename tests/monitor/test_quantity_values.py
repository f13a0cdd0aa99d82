"""What a quantity returns is checked against what it declares before anything is logged.

A quantity of the user's own that returns an undeclared key (a typo), nothing (a forgotten
``return``) or a value of several elements is disabled with a warning that names the quantity,
the key and what is allowed (``strict=True`` raises it); two quantities that declare one key
are refused at construction (one's value would replace the other's in every record). Python
numbers are logged as they are.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import gradlab
from gradlab.errors import GradlabError
from gradlab.monitor import Loss, Monitor, Quantity, every, read_jsonl


class Returns(Quantity):
    """Returns what it is given (under ``returned``), whatever the step."""

    name = "returns"
    keys = ("returns_value",)

    def __init__(self, returned):
        super().__init__(every(1))
        self.returned = returned

    def compute(self, batch):
        return self.returned


def _step(tmp_path, quantity, strict=False):
    """One watched SmoothAP step logging the loss and ``quantity``; the record and warnings."""
    generator = torch.Generator().manual_seed(0)
    embeddings = torch.randn(8, 4, generator=generator, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Monitor(tmp_path, quantities=[Loss(every(1)), quantity], strict=strict) as run:
            loss_fn = run.watch(gradlab.SmoothAPLoss(0.1))
            loss_fn(embeddings, torch.arange(8) % 4).backward()
            record = run.step()
    return record, [str(w.message) for w in caught], run


REFUSED = [
    (
        {"returns_valeu": torch.tensor(1.0)},
        "the returns quantity (Returns) returned the key 'returns_valeu', which it does not "
        "declare; its keys are ('returns_value',): add the key to Returns.keys, or fix its name",
    ),
    (
        None,
        "the returns quantity (Returns) returned None from compute(); compute returns a dict of "
        "its keys' values, one-element tensors or numbers ({} when it has nothing to log this "
        "step)",
    ),
    (
        {"returns_value": torch.ones(3)},
        "the returns quantity (Returns) returned a torch.float32 tensor of shape [3] under "
        "'returns_value'; a logged value is one real number: a 0-d tensor (or one of shape "
        "[1]), or a Python int or float",
    ),
    (
        {"returns_value": torch.tensor(1 + 2j)},
        "the returns quantity (Returns) returned a torch.complex64 tensor of shape [] under "
        "'returns_value'; a logged value is one real number: a 0-d tensor (or one of shape "
        "[1]), or a Python int or float",
    ),
    (
        {"returns_value": "0.5"},
        "the returns quantity (Returns) returned '0.5' (str) under 'returns_value'; a logged "
        "value is one real number: a 0-d tensor (or one of shape [1]), or a Python int or float",
    ),
    (
        {"returns_value": True},
        "the returns quantity (Returns) returned True (bool) under 'returns_value'; a logged "
        "value is one real number: a 0-d tensor (or one of shape [1]), or a Python int or float",
    ),
]


@pytest.mark.parametrize(("returned", "message"), REFUSED)
def test_a_value_against_the_declaration_disables_the_quantity_and_says_why(
    tmp_path, returned, message
):
    record, caught, run = _step(tmp_path, Returns(returned))
    assert set(record) == {"step", "loss"}  # the other quantities are logged
    assert list(run.disabled) == ["returns"]
    assert run.disabled["returns"].rstrip().endswith(f"GradlabError: {message}")
    assert any("quantity 'returns' raised and is disabled" in text and message in text
               for text in caught)  # fmt: skip
    _, records = read_jsonl(tmp_path / "metrics.jsonl")
    assert [set(r) for r in records] == [{"step", "loss"}]


@pytest.mark.parametrize(("returned", "message"), REFUSED[:3])
def test_strict_raises_what_the_value_breaks(tmp_path, returned, message):
    with pytest.raises(GradlabError) as raised:
        _step(tmp_path, Returns(returned), strict=True)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("value", "logged"),
    [
        (1.5, 1.5),
        (3, 3.0),
        (np.float32(0.25), 0.25),
        (torch.tensor([0.75]), 0.75),  # shape [1]
        (torch.tensor(2, dtype=torch.int64), 2.0),
    ],
)
def test_one_element_tensors_and_python_numbers_are_logged(tmp_path, value, logged):
    record, caught, run = _step(tmp_path, Returns({"returns_value": value}))
    assert record["returns_value"] == logged
    assert type(record["returns_value"]) is float
    assert not run.disabled and not caught


def test_an_empty_dict_logs_nothing_for_that_quantity(tmp_path):
    record, caught, run = _step(tmp_path, Returns({}))
    assert set(record) == {"step", "loss"}
    assert not run.disabled and not caught


def test_two_quantities_that_declare_one_key_are_refused_at_construction(tmp_path):
    class Other(Quantity):
        name = "other"
        keys = ("other_value", "returns_value")

    with pytest.raises(GradlabError) as raised:
        Monitor(tmp_path, quantities=[Returns({}), Other()])
    assert str(raised.value) == (
        "the returns and other quantities (Returns, Other) both declare the key "
        "'returns_value': one's value would replace the other's in every record; keep one of "
        "them, or rename the key of yours"
    )
    assert not any(tmp_path.iterdir())  # refused before anything is written


def test_a_quantity_that_declares_the_step_key_is_refused(tmp_path):
    class Step(Quantity):
        name = "step_count"
        keys = ("step",)

    with pytest.raises(GradlabError) as raised:
        Monitor(tmp_path, quantities=[Step()])
    assert str(raised.value) == (
        "the step_count quantity (Step) declares the key 'step', which every record holds "
        "itself; rename that key"
    )
