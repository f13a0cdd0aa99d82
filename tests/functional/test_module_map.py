"""The map in ``gradlab.functional``'s docstring (what ``help(gradlab.functional)`` shows)."""

import collections
import re

import gradlab.functional


def test_the_map_names_every_public_name_once_and_nothing_else():
    doc = gradlab.functional.__doc__
    mapped = doc[: doc.index("``smooth_ap``, ``fastap``, ``blackbox_ap``")]
    named = collections.Counter(re.findall(r"``([A-Za-z_][A-Za-z0-9_]*)``", mapped))
    assert {name for name, count in named.items() if count > 1} == set()
    assert set(named) == set(gradlab.functional.__all__)


def test_a_name_the_map_gives_as_imported_from_its_module_is_there():
    from gradlab.functional.gradient_anatomy import DEFAULT_ABSOLUTE_THRESHOLD

    assert "DEFAULT_ABSOLUTE_THRESHOLD" in gradlab.functional.__doc__
    assert DEFAULT_ABSOLUTE_THRESHOLD > 0
