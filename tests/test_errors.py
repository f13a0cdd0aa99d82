"""gradlab's exception types: what code that catches them, and a reader of the message, see."""

from __future__ import annotations

import sys

import pytest

from gradlab.errors import GradlabError, UnknownKeyError, caller_stacklevel


def test_an_unknown_key_is_caught_as_a_key_error_and_as_a_gradlab_error():
    for caught_as in (KeyError, GradlabError, ValueError, LookupError):
        with pytest.raises(caught_as):
            raise UnknownKeyError("'x' is not a quantity")


def test_an_unknown_key_prints_its_message_without_added_quotes():
    error = UnknownKeyError("'x' is not a quantity; the quantities are ['a', 'b']")
    assert str(error) == "'x' is not a quantity; the quantities are ['a', 'b']"
    assert str(KeyError("'x'")) == "\"'x'\""  # what a plain KeyError would print


def _named_by_a_warning_through(wrapper_module: str | None, asked_through_mutmut: bool = False
                                ) -> str:
    """The function a warning would name when a trainer's function asks for the level (itself
    through one of mutmut's trampolines, or directly) and is called through a wrapper in
    ``wrapper_module``, called from here."""
    asking = {"__name__": "mutmut.mutation.trampoline", "caller_stacklevel": caller_stacklevel}
    exec("def ask(packages):\n    return caller_stacklevel(packages)", asking)
    trainer = {"__name__": "trainerpkg.loop", "sys": sys,
               "ask": asking["ask"] if asked_through_mutmut else caller_stacklevel}  # fmt: skip
    exec("def library():\n"
         "    level = ask(frozenset({'trainerpkg'}))\n"
         "    return sys._getframe(level - 1).f_code.co_name", trainer)  # fmt: skip
    wrapper = {"library": trainer["library"]}  # None: code run without a module name
    if wrapper_module is not None:
        wrapper["__name__"] = wrapper_module
    exec("def wrapped():\n    return library()", wrapper)
    return wrapper["wrapped"]()


@pytest.mark.parametrize("asked_through_mutmut", [False, True])
def test_mutation_testings_trampolines_are_not_the_callers_line(asked_through_mutmut):
    # mutmut wraps every function of the package it mutates, caller_stacklevel too: its frames
    # are skipped like the trainer's, so the warning names the line past both; another
    # module's frame is the caller
    through_mutmut = _named_by_a_warning_through("mutmut.mutation.trampoline", asked_through_mutmut)
    assert through_mutmut == "_named_by_a_warning_through"
    assert _named_by_a_warning_through("users_code", asked_through_mutmut) == "wrapped"
    assert _named_by_a_warning_through(None, asked_through_mutmut) == "wrapped"
