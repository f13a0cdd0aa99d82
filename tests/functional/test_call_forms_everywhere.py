"""Every public function of ``gradlab.functional`` refuses a call that does not fit its
signature (an argument too many, a misspelt keyword) with a ``GradlabError`` that shows the
signature, as the losses did; the diagnostics raised Python's bare ``TypeError``."""

from __future__ import annotations

import inspect

import pytest

import gradlab.functional as F
from gradlab import GradlabError

FUNCTIONS = sorted(name for name in F.__all__ if inspect.isfunction(getattr(F, name)))

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _shown(function) -> str:
    """The signature as the message shows it: the parameters without their annotations."""
    signature = inspect.signature(function)
    return str(signature.replace(
        parameters=[parameter.replace(annotation=inspect.Parameter.empty)
                    for parameter in signature.parameters.values()],
        return_annotation=inspect.Signature.empty))  # fmt: skip


@pytest.mark.parametrize("name", FUNCTIONS)
def test_an_argument_too_many_is_refused_showing_the_signature(name):
    function = getattr(F, name)
    parameters = inspect.signature(function).parameters.values()
    if any(parameter.kind is inspect.Parameter.VAR_POSITIONAL for parameter in parameters):
        pytest.skip(f"{name} takes any number of positional arguments")
    # two too many: gradient_anatomy and soft_histogram still read one more as candidate_mask
    too_many = [object()] * (sum(parameter.kind in _POSITIONAL for parameter in parameters) + 2)
    with pytest.raises(GradlabError) as raised:
        function(*too_many)
    assert str(raised.value).startswith(f"{name}{_shown(function)}: ")
    assert "positional argument" in str(raised.value)  # "too many positional arguments"


@pytest.mark.parametrize("name", FUNCTIONS)
def test_a_misspelt_keyword_is_refused_showing_the_signature(name):
    function = getattr(F, name)
    required = [object() for parameter in inspect.signature(function).parameters.values()
                if parameter.kind in _POSITIONAL and parameter.default is inspect.Parameter.empty]
    with pytest.raises(GradlabError) as raised:
        function(*required, no_such_argument=1)
    assert str(raised.value).startswith(f"{name}{_shown(function)}: ")
    assert "no_such_argument" in str(raised.value)
