"""The shared argument checks of gradlab.validation: what they accept and how they refuse."""

import pytest

from gradlab.errors import GradlabError
from gradlab.validation import check_int_in_range


@pytest.mark.parametrize(("value", "low", "high"), [(2, 2, None), (7, 2, None), (1, 1, 4),
                                                    (4, 1, 4), (10**30, 0, None)])  # fmt: skip
def test_an_int_in_range_is_returned_as_given(value, low, high):
    assert check_int_in_range("n", value, low, high) is value


@pytest.mark.parametrize(("value", "low", "high", "allowed"), [
    (1, 2, None, "an int >= 2"),
    (0, 1, 4, "an int from 1 to 4"),
    (5, 1, 4, "an int from 1 to 4"),
    (True, 0, None, "an int >= 0"),  # a bool is no count
    (3.0, 1, 4, "an int from 1 to 4"),
    ("3", 1, 4, "an int from 1 to 4"),
])  # fmt: skip
def test_anything_else_is_refused_with_the_name_the_range_and_the_value(value, low, high, allowed):
    with pytest.raises(GradlabError) as raised:
        check_int_in_range("count", value, low, high)
    assert str(raised.value) == f"count must be {allowed}; got {value!r}"
