"""README's `studies` block: rendered from figures/studies/*.json, stale when a number changes."""

import json
import re
import shutil

from tools.readme_blocks import BLOCKS, ROOT, render

NAMES = ("p_vs_batch_size", "loss_comparison", "digit_scenes")


def _block(readme: str) -> str:
    match = re.search(r"<!-- generated: studies -->\n(.*?)<!-- /generated: studies -->", readme,
                      re.DOTALL)  # fmt: skip
    assert match, "README.md lacks the studies block"
    return match.group(1)


def _copy(tmp_path):
    folder = tmp_path / "figures" / "studies"
    folder.mkdir(parents=True)
    for name in (*NAMES, "report_timing"):
        shutil.copy(ROOT / "figures" / "studies" / f"{name}.json", folder / f"{name}.json")
    return folder


def test_studies_block_is_the_rendering_of_the_committed_json():
    readme = (ROOT / "docs" / "studies.md").read_text()
    render(readme)  # registers the renderers
    assert _block(readme) == BLOCKS["studies"](ROOT).rstrip("\n") + "\n"


def test_a_changed_seed_value_changes_the_block(tmp_path):
    render("")
    folder = _copy(tmp_path)
    fresh = BLOCKS["studies"](tmp_path)
    for name, edit in (  # one number of one seed in each file
        ("loss_comparison", lambda r: r["losses"]["FAPPY"]["metrics"]["MAP@R"].__setitem__(0, 0.9)),
        ("digit_scenes", lambda r: r["runs"]["VSRN"]["SmoothAP"]["recall"]["rsum"].insert(0, 0)),
        ("p_vs_batch_size", lambda r: r["settings"]["fixed_trained"]["P"][0].__setitem__(-1, 0.9)),
    ):
        original = (folder / f"{name}.json").read_text()
        result = json.loads(original)
        edit(result)
        (folder / f"{name}.json").write_text(json.dumps(result))
        assert BLOCKS["studies"](tmp_path) != fresh, name
        (folder / f"{name}.json").write_text(original)
