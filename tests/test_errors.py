"""gradlab's exception types: what code that catches them, and a reader of the message, see."""

from __future__ import annotations

import pytest

from gradlab.errors import GradlabError, UnknownKeyError


def test_an_unknown_key_is_caught_as_a_key_error_and_as_a_gradlab_error():
    for caught_as in (KeyError, GradlabError, ValueError, LookupError):
        with pytest.raises(caught_as):
            raise UnknownKeyError("'x' is not a quantity")


def test_an_unknown_key_prints_its_message_without_added_quotes():
    error = UnknownKeyError("'x' is not a quantity; the quantities are ['a', 'b']")
    assert str(error) == "'x' is not a quantity; the quantities are ['a', 'b']"
    assert str(KeyError("'x'")) == "\"'x'\""  # what a plain KeyError would print
