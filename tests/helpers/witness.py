"""Read a failing symbolic check's witness back from its detail, as a reader would."""

import re

WITNESS = re.compile(r"printed minus true is (\S+) at ((?:\w+ = [^,\s]+)(?:, \w+ = [^,\s]+)*)")
"""``printed minus true is DIFFERENCE at NAME = VALUE, NAME = VALUE``."""


def witness(detail: str) -> tuple[str, dict[str, str]]:
    """The printed difference and the point (name -> value, as printed) of ``detail``."""
    found = WITNESS.search(detail)
    assert found is not None, detail
    point = dict(part.split(" = ") for part in found.group(2).split(", "))
    return found.group(1), point
