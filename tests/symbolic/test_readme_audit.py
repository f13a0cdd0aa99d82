"""README's audit block and committed JSON agree with a fresh audit; README's example runs."""

import contextlib
import io
import json
import re

import pytest

from tools.readme_audit import AUDIT_JSON
from tools.readme_blocks import BLOCKS, ROOT, _load_renderers

README = (ROOT / "docs" / "audit.md").read_text()


def _block(text: str) -> str:
    match = re.search(r"<!-- generated: audit -->\n(.*?)<!-- /generated: audit -->", text, re.S)
    assert match, "README has no audit block"
    return match.group(1)


@pytest.mark.slow  # the whole audit, its measured claim included (trains)
def test_readme_audit_block_agrees_with_a_fresh_audit(audit_records, tmp_path):
    target = tmp_path / AUDIT_JSON
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps(audit_records))
    _load_renderers()
    fresh = BLOCKS["audit"](tmp_path).rstrip("\n") + "\n"
    assert _block(README) == fresh, "run `make audit docs` and commit README.md and the JSON"


@pytest.mark.slow  # the whole audit, its measured claim included (trains)
def test_committed_json_agrees_with_a_fresh_audit(audit_records):
    committed = json.loads((ROOT / AUDIT_JSON).read_text())

    def key(records):
        return {r["id"]: (r["verdict"], r["mutants"], r["mutants_killed"]) for r in records}

    assert key(committed) == key(audit_records)


def test_readme_example_audits_a_derivation_of_your_own():
    section = README[README.index("### Audit a derivation of your own"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert len(code.strip().splitlines()) < 20
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(code, "README example", "exec"), {})
    assert output.getvalue().strip() == "holds 2 of 2"
