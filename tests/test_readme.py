"""README and docs numbers agree with the JSON that produced them (``make docs`` regenerates
them); the README stays short and its Monitor example runs as written."""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from tests.reference.smooth_ap_loops import in_batch_smooth_ap
from tools import readme_anatomy
from tools.readme_blocks import BLOCKS, ROOT, block_names, load_json, pages, render, stale_pages

README = (ROOT / "README.md").read_text()
README_LIMIT = 10_000
"""Bytes: the README is the front door; the details live in docs/."""


def test_every_generated_block_matches_its_json():
    assert stale_pages() == [], "run `make docs` (or python tools/readme_blocks.py) and commit"


def test_every_registered_block_stands_in_a_page():
    render(README)  # loads the renderers
    placed = {name for page in pages() for name in block_names(page.read_text())}
    assert sorted(set(BLOCKS) - placed) == []


@pytest.mark.slow
def test_a_changed_result_makes_its_block_stale(tmp_path):
    root = tmp_path / "repo"
    tracked = subprocess.run(["git", "ls-files", "*.json"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()  # fmt: skip
    for relative in tracked:
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / relative, root / relative)
    before = set(stale_pages(ROOT, json_root=root))  # empty once `make docs` has run
    losses = root / "benchmarks" / "results" / "losses.json"
    result = json.loads(losses.read_text())
    result["timings"][0]["median_seconds"] *= 3
    losses.write_text(json.dumps(result))
    assert set(stale_pages(ROOT, json_root=root)) - before == {"docs/benchmarks.md: loss-cost"}


def test_a_changed_audit_record_makes_the_readme_and_the_audit_page_stale(tmp_path):
    source = json.loads((ROOT / "benchmarks/results/audit.json").read_text())
    changed = copy.deepcopy(source)
    holding = next(r for r in changed if r["verdict"] == "holds")
    holding["verdict"] = "fails"
    audit = tmp_path / "benchmarks/results/audit.json"
    audit.parent.mkdir(parents=True)
    audit.write_text(json.dumps(changed))
    for relative in ("benchmarks/results/smoothap.json", "figures/studies/p_vs_batch_size.json"):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / relative, tmp_path / relative)
    render(README)
    for name, page in (("readme-findings", "README.md"), ("audit-papers", "docs/audit.md")):
        text = (ROOT / page).read_text()
        block = re.search(rf"<!-- generated: {name} -->\n(.*?)<!-- /generated", text, re.S)[1]
        assert BLOCKS[name](tmp_path).rstrip("\n") + "\n" != block, name


def test_the_readme_is_at_most_10_000_bytes():
    size = len(README.encode("utf-8"))
    assert size <= README_LIMIT, f"README.md is {size} bytes; move details into docs/"


def _monitor_example() -> str:
    section = README[README.index("## Instrumented training"):]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


@pytest.mark.slow
def test_the_readme_monitor_example_runs_verbatim_twice_and_logs_its_loss(tmp_path, monkeypatch):
    """The README's loop runs as written, with no name supplied from outside (in two
    consecutive pieces: the stand-ins, then the loop, so the untrained model can be kept),
    and runs again into the same directory. The default schedule logs steps 0-9, then every
    10th step and the last; the logged loss of step 0 is 1 - mean AP of the float64 loop
    reference at the untrained model's embeddings."""
    monkeypatch.chdir(tmp_path)
    block = _monitor_example()
    split = block.index("monitor = ")
    torch.manual_seed(0)
    namespace: dict = {}
    exec(compile(block[:split], "README.md", "exec"), namespace)
    untrained = copy.deepcopy(namespace["model"]).double()
    exec(compile(block[split:], "README.md", "exec"), namespace)
    log = Path(tmp_path) / "runs" / "exp1" / "metrics.jsonl"
    records = [json.loads(line) for line in log.read_text().splitlines()]
    exec(compile(block, "README.md", "exec"), {})  # a second run replaces the first
    again = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r.get("step") for r in again] == [r.get("step") for r in records]
    steps = [r["step"] for r in records if "step" in r and "loss" in r]
    last = len(namespace["loader"]) - 1
    assert steps == [*range(10), *range(10, last, 10), last]
    x, labels = namespace["loader"][0]
    with torch.no_grad():
        embeddings = untrained(x.double()).tolist()
    tau = 0.01
    aps = in_batch_smooth_ap(embeddings, labels.tolist(), tau, include_query=False)
    first = next(r for r in records if r.get("step") == 0 and "loss" in r)
    assert abs(first["loss"] - (1 - sum(aps) / len(aps))) < 1e-5


def test_the_ten_class_block_quotes_keys_its_json_holds():
    """A key the p-10-classes block names in backticks is one its rows hold."""
    render(README)  # loads the renderers
    text = BLOCKS["p-10-classes"](ROOT)
    result = json.loads((ROOT / "figures/operating_region_p_vs_batch_size_10_classes.json")
                        .read_text())  # fmt: skip
    keys = {key for rows in result["fixed_model"].values() for row in rows for key in row}
    quoted = re.findall(r"`(\w+)`", text)
    assert quoted and [name for name in quoted if name not in keys] == []


def test_the_studies_block_does_not_tie_its_numbers_to_the_timed_run():
    """The timing JSON and each study's JSON come from separate runs: the timing sentence says
    what that run took, not that the numbers after it are that run's."""
    render(README)  # loads the renderers
    first = BLOCKS["studies"](ROOT).split("\n", 1)[0]
    assert first.startswith("A full report run (")
    assert "below" not in first


def test_the_speed_finding_says_where_it_was_measured():
    """A speed ratio holds for the machine that measured it: the finding names it."""
    render(README)  # loads the renderers
    machine = json.loads((ROOT / "benchmarks/results/smoothap.json").read_text())["machine"]
    (speed,) = [line for line in BLOCKS["readme-findings"](ROOT).splitlines()
                if line.startswith("- **Speed.**")]  # fmt: skip
    assert f"on a {machine['cpu_count']}-core CPU" in speed


def test_the_mutation_table_counts_every_module_that_ran():
    """The package table's 'modules run' add up to every predefined group in the JSON: a module
    outside the packages (gradlab/backbones.py, say) is not left out of the summary."""
    from tools.mutation import GROUPS

    render(README)  # loads the renderers
    groups = json.loads((ROOT / "benchmarks/results/mutation.json").read_text())["groups"]
    table = BLOCKS["mutation-scores"](ROOT).split("<details>", 1)[0]
    counted = [int(m) for m in re.findall(r"^\| [^|]+ \| (\d+) of \d+ \|", table, re.MULTILINE)]
    assert sum(counted) == sum(name in GROUPS for name in groups)


def test_each_mutation_row_accounts_for_every_mutant():
    """Not checked + killed + timed out + survived + no test reaches it = mutants, in the
    package table and per module, so a reader can see where every mutant went."""
    render(README)  # loads the renderers
    rows = [line.split(" | ") for line in BLOCKS["mutation-scores"](ROOT).splitlines()
            if line.startswith("| ") and re.search(r"\| \d+ \| \d+ \|", line)]  # fmt: skip
    assert rows
    for cells in rows:
        numbers = [int(c) for c in cells if c.strip().isdigit()]
        mutants, unchecked, killed, timed_out, survived, unreached = numbers[:6]
        assert unchecked + killed + timed_out + survived + unreached == mutants, cells[0]


def test_the_anatomy_table_gives_no_share_where_no_query_reaches_the_thresholds(tmp_path):
    # the trained SmoothAP's row read "0.69 / 0.88": shares of a gradient of 4e-14, which the
    # figure beside it does not draw
    result = load_json(ROOT, "figures/anatomy_comparison.json")
    for checkpoint in result["checkpoints"]:
        for record in checkpoint["losses"].values():
            record["i2t"]["queries_without_gradient"] = record["i2t"]["queries"] - 1
            record["t2i"]["queries_without_gradient"] = record["t2i"]["queries"]
            record["i2t"]["mass_share_by_rank"] = [0.25, 0.75]
            record["t2i"]["mass_share_by_rank"] = [0.5, 0.5]
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "anatomy_comparison.json").write_text(json.dumps(result))
    rows = [line for line in readme_anatomy.anatomy(tmp_path).splitlines() if line.startswith("| ")]
    assert rows[2:] and all(row.endswith("| 0.25 / - |") for row in rows[2:])


def test_the_studies_page_batch_size_finding_is_headed_with_its_paper():
    render(README)  # loads the renderers
    head = BLOCKS["finding-p-vs-batch-size"](ROOT).split(".**", 1)[0]
    assert head == "- **P against batch size (Brown et al., 2020, Fig. S7a)"


def test_the_memory_table_shows_each_measured_case_and_the_limit_it_was_held_to():
    """Each case of memory.json in its row (batch) and column (layout), rounded to a MiB, and
    the limit statement as the cases give it (not as the file's own flag says)."""
    render(README)  # loads the renderers
    text = BLOCKS["smoothap-memory"](ROOT)
    result = json.loads((ROOT / "benchmarks/results/memory.json").read_text())
    rows = [line.strip("|").split("|") for line in text.splitlines() if line.startswith("| ")]
    header, body = [cell.strip() for cell in rows[0]], rows[2:]  # past the rule
    table = {(int(row[0]), header[i]): row[i].strip() for row in body
             for i in range(1, len(header))}  # fmt: skip
    names = {"one_class": "one class", "two_classes": "two classes",
             "four_per_class": "4 per class", "singletons": "singletons (no positive)"}
    cases = result["cases"]
    assert len(table) == len(cases)
    for case in cases:
        assert table[case["batch_size"], names[case["layout"]]] == \
            f"{round(case['peak_extra_mib'])} MiB"  # fmt: skip
    within = all(c["peak_extra_mib"] <= result["config"]["limit_mib"] for c in cases)
    assert ("every case within the 256 MiB limit" in text) == within
