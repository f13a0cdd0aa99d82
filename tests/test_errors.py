"""gradlab's exception types: what code that catches them, and a reader of the message, see."""

from __future__ import annotations

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


def _chain(wrapper_module: str):
    """A trainer's function that asks for the level, called through a wrapper in
    ``wrapper_module``, called from here: the level that names this test's line."""
    trainer = {"__name__": "trainerpkg.loop", "caller_stacklevel": caller_stacklevel}
    exec("def library():\n    return caller_stacklevel(frozenset({'trainerpkg'}))", trainer)
    wrapper = {"__name__": wrapper_module, "library": trainer["library"]}
    exec("def wrapped():\n    return library()", wrapper)
    return wrapper["wrapped"]()


def test_mutation_testings_trampolines_are_not_the_callers_line():
    # mutmut wraps every function of the package it mutates: its frames are skipped like the
    # trainer's, so the level goes past both (library 1, trampoline 2, this line 3)
    assert _chain("mutmut.mutation.trampoline") == 3
    assert _chain("users_code") == 2  # another module's frame is the caller's
