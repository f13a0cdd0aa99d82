"""No verdict is written into gradlab/symbolic: every verdict comes out of a computation."""

import re
from pathlib import Path

import gradlab.symbolic

PACKAGE = Path(gradlab.symbolic.__file__).parent
LITERAL = re.compile(
    r"""(predicate|decide)\(\s*(True|False)\b"""
    r"""|Verdict\(\s*["'](holds|holds-with-correction|fails|inconclusive)["']"""
)


def test_no_verdict_literal_in_the_package():
    found = [f"{path.name}:{n}: {line.strip()}"
             for path in sorted(PACKAGE.glob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), start=1)
             if LITERAL.search(line)]  # fmt: skip
    assert found == []


def test_the_pattern_catches_the_literals_it_is_meant_to():
    lines = ('return predicate(False, "", "x")', 'decide(True, "a", "b")', 'Verdict("fails", d)',
             "Verdict('holds', d)")
    for line in lines:
        assert LITERAL.search(line), line
    assert not LITERAL.search("decide(worst < 1e-10, 'a', 'b')")
