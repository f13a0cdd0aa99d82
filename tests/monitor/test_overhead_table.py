"""The README's Monitor overhead table is the one rendered from benchmarks/results/monitor.json."""

from __future__ import annotations

import json
import re
import shutil

from tools.readme_blocks import ROOT
from tools.readme_monitor import monitor_overhead, ratio_text

README = (ROOT / "docs" / "benchmarks.md").read_text()
RESULT = "benchmarks/results/monitor.json"


def _block(text: str) -> str:
    match = re.search(r"<!-- generated: monitor-overhead -->\n(.*?)<!-- /generated", text, re.S)
    assert match, "README.md lacks the monitor-overhead block"
    return match.group(1)


def _copy(tmp_path, change):
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    result = json.loads((ROOT / RESULT).read_text())
    change(result)
    (tmp_path / RESULT).write_text(json.dumps(result))
    for other in ("losses.json", "smoothap.json"):
        source = ROOT / "benchmarks" / "results" / other
        if source.exists():
            shutil.copy(source, tmp_path / "benchmarks" / "results" / other)
    return tmp_path


def test_the_readme_table_is_rendered_from_the_json():
    assert _block(README).rstrip("\n") == monitor_overhead(ROOT).rstrip("\n")
    result = json.loads((ROOT / RESULT).read_text())
    cnn = result["results"]["cnn"]["ratio"]["full_every_step"]
    assert f"{cnn:.3f}x" in _block(README)


def test_a_changed_ratio_makes_the_table_stale(tmp_path):
    def slower(result):
        result["results"]["cnn"]["step_seconds_median"]["full_every_step"] *= 1.5
        result["results"]["cnn"]["ratio"]["full_every_step"] *= 1.5

    root = _copy(tmp_path, slower)
    assert _block(README).rstrip("\n") != monitor_overhead(root).rstrip("\n")


def test_the_verdict_follows_the_target(tmp_path):
    def set_ratio(value, spread, alone=1.01):
        def change(result):
            cnn = result["results"]["cnn"]
            cnn["ratio"]["default_every_step"] = value
            cnn["ratio_round_q25_q75"]["default_every_step"] = spread
            cnn.setdefault("ratio_monitor_step_alone", {})["default_every_step"] = alone

        return change

    row = "default preset every step |"
    line = lambda root: next(x for x in monitor_overhead(root).splitlines() if row in x)  # noqa: E731
    assert line(_copy(tmp_path / "a", set_ratio(1.02, [1.01, 1.025]))).endswith("| met |")
    assert line(_copy(tmp_path / "b", set_ratio(1.05, [1.04, 1.06]))).endswith("| **not met** |")
    assert "(noisy)" in line(_copy(tmp_path / "c", set_ratio(1.02, [0.99, 1.07])))
    # the block median within the target but monitor.step() alone above it: not met
    late = line(_copy(tmp_path / "d", set_ratio(1.02, [1.01, 1.025], alone=1.04)))
    assert late.endswith("| **not met** |") and "| 1.040x" in late


def test_a_ratio_just_past_its_target_never_prints_equal_to_it(tmp_path):
    """2.501x against 2.5x printed as 2.50x beside "not met"."""
    assert [ratio_text(v, 2.5) for v in (2.5012, 2.4996, 2.5, 2.96, 2.5000004)] == [
        "2.501x", "2.4996x", "2.50x", "2.96x", "2.500000x"]

    def just_past(result):
        run = result["results"]["logged_step_vs_loss"][-1]
        run["one_thread_cpu_logged_full_step_over_loss"] = 2.5012
        result["targets"]["one_thread_cpu_logged_full_step_over_loss"][str(run["batch"])] = 2.5

    rows = monitor_overhead(_copy(tmp_path, just_past)).splitlines()
    row = next(x for x in rows if "one-thread CPU time: 2.5" in x and "B = 1024" in x)
    assert "one-thread CPU time: 2.501x" in row and row.endswith("| **not met** |")



def test_the_cold_step_sentence_follows_its_measurement(tmp_path):
    """The CNN's cold monitor.step() against a warm one, and what the target leaves, each
    computed from the JSON the sentence is rendered from."""

    def cold(after_cnn, warm, baseline):
        def change(result):
            result["results"]["cnn_cold_step"] = {
                "monitor_step_seconds_median": {"after_the_cnn": after_cnn,
                                                "after_another_monitor": warm},
                "steps": 7,
            }
            result["results"]["cnn"]["step_seconds_median"]["baseline"] = baseline
            result["targets"]["cnn_default_every_step"] = 1.03

        return change

    text = monitor_overhead(_copy(tmp_path / "a", cold(0.0024, 0.0012, 0.05)))
    sentence = next(line for line in text.splitlines() if "Where the CNN's" in line)
    assert sentence == (
        "Where the CNN's default-preset step goes: right after the CNN's backward and optimizer "
        "step, `monitor.step()` takes 2.4 ms (median of 7 steps); a second Monitor logging the "
        "same batch right after it takes 1.2 ms, the same work with its code and buffers back "
        "in the caches the CNN's step evicted (2.00x). The target of 1.03x leaves 1.5 ms per "
        "step.")

    def without(result):
        result["results"].pop("cnn_cold_step", None)

    assert "Where the CNN's" not in monitor_overhead(_copy(tmp_path / "b", without))
