"""The incremental selection of ``tools/mutation.py``: which functions a run mutates again.

A tiny module is committed to a temporary git repository, one function is edited and committed
again, and the driver must pick that function only; the records it merges are checked against
counts written out by hand. No mutmut run: the selection is what is tested.
"""

import fnmatch
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tools.mutation import (
    GROUPS,
    ROOT,
    _mutmut_config,
    changed_functions,
    committed_hashes,
    function_hashes,
    function_records,
    group_totals,
    judge,
    merge_incremental,
    mutant_diffs,
    package_of,
    plan,
    prepare_recheck,
    recheck_functions,
    unchecked_mutants,
)

MODULE = '''"""A tiny module."""


def double(x):
    """Twice x."""
    return 2 * x


def half(x):
    return x / 2


class Scale:
    def apply(self, x):
        def inner(y):
            return 3 * y

        return inner(x)
'''


def _git(folder, *args):
    subprocess.run(["git", *args], cwd=folder, check=True, capture_output=True)


@pytest.fixture
def repository(tmp_path):
    """A git repository holding ``pkg/tiny.py`` (MODULE), committed once."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "tiny.py").write_text(MODULE)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "pkg/tiny.py")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    return tmp_path


def _commit_edit(folder, old, new):
    path = folder / "pkg" / "tiny.py"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    _git(folder, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-am", "edit")


def test_keys_follow_mutmuts_names_for_functions_and_methods():
    assert sorted(function_hashes(MODULE, "pkg.tiny")) == [
        "pkg.tiny.x_double",
        "pkg.tiny.x_half",
        "pkg.tiny.xǁScaleǁapply",  # the nested function is part of apply
    ]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('    """Twice x."""\n', '    """Two times x, reworded."""\n'),
        ("    return 2 * x\n", "    return 2 * x  # a comment\n"),
        ("def double(x):\n", "def double(\n    x,\n):\n"),
    ],
    ids=["docstring", "comment", "formatting"],
)
def test_docstrings_comments_and_formatting_change_no_hash(old, new):
    assert function_hashes(MODULE.replace(old, new), "m") == function_hashes(MODULE, "m")


def test_only_the_edited_function_is_selected(repository):
    before = committed_hashes(["pkg/*.py"], repository)
    _commit_edit(repository, "return x / 2", "return x // 2")
    after = committed_hashes(["pkg/*.py"], repository)
    assert changed_functions(before, after) == (["pkg.tiny.x_half"], [])


def test_an_edit_inside_a_nested_function_selects_the_method(repository):
    before = committed_hashes(["pkg/*.py"], repository)
    _commit_edit(repository, "return 3 * y", "return 4 * y")
    assert changed_functions(before, committed_hashes(["pkg/*.py"], repository)) == (
        ["pkg.tiny.xǁScaleǁapply"],
        [],
    )


def test_new_functions_run_and_removed_ones_are_dropped(repository):
    before = committed_hashes(["pkg/*.py"], repository)
    _commit_edit(repository, "def half(x):\n    return x / 2", "def third(x):\n    return x / 3")
    assert changed_functions(before, committed_hashes(["pkg/*.py"], repository)) == (
        ["pkg.tiny.x_third"],
        ["pkg.tiny.x_half"],
    )


def test_the_committed_tree_counts_not_the_working_copy(repository):
    before = committed_hashes(["pkg/*.py"], repository)
    path = repository / "pkg" / "tiny.py"
    path.write_text(path.read_text().replace("return 2 * x", "return 5 * x"))  # not committed
    assert committed_hashes(["pkg/*.py"], repository) == before


def _recorded(hashes):
    """A group as a run records it: double has 3 mutants (2 killed, 1 timed out), half 2 (one
    killed, one survived), apply 1 (killed)."""
    statuses = {
        "pkg.tiny.x_double__mutmut_1": "killed",
        "pkg.tiny.x_double__mutmut_2": "killed",
        "pkg.tiny.x_double__mutmut_3": "timeout",
        "pkg.tiny.x_half__mutmut_1": "killed",
        "pkg.tiny.x_half__mutmut_2": "survived",
        "pkg.tiny.xǁScaleǁapply__mutmut_1": "killed",
    }
    return {
        "modules": ["pkg/*.py"],
        "commit": "one",
        "functions": function_records(statuses, hashes),
        "survivors": ["pkg.tiny.x_half__mutmut_2"],
        "equivalent": {},
    }


def test_a_plan_reruns_the_changed_function_and_the_merge_keeps_the_others(repository):
    recorded = _recorded(committed_hashes(["pkg/*.py"], repository))
    assert plan(["pkg/*.py"], recorded, full=False, root=repository)["rerun"] == []
    _commit_edit(repository, "return x / 2", "return x * 0.5")
    step = plan(["pkg/*.py"], recorded, full=False, root=repository)
    assert (step["rerun"], step["removed"]) == (["pkg.tiny.x_half"], [])
    # The fresh run checked half's two mutants (both killed now) and left the others unchecked.
    fresh_statuses = {
        "pkg.tiny.x_double__mutmut_1": "not_checked",
        "pkg.tiny.x_double__mutmut_2": "not_checked",
        "pkg.tiny.x_double__mutmut_3": "not_checked",
        "pkg.tiny.x_half__mutmut_1": "killed",
        "pkg.tiny.x_half__mutmut_2": "killed",
        "pkg.tiny.xǁScaleǁapply__mutmut_1": "not_checked",
    }
    fresh = {
        "modules": ["pkg/*.py"],
        "commit": "two",
        "functions": function_records(fresh_statuses, step["current"]),
        "survivors": [],
        "equivalent": {},
    }
    merged = merge_incremental(recorded, fresh, step["rerun"], step["current"])
    counts = {key: merged[key] for key in ("generated", "killed", "timeout", "survived")}
    assert counts == {"generated": 6, "killed": 5, "timeout": 1, "survived": 0}
    assert merged["survivors"] == [] and merged["not_checked"] == 0
    assert merged["killed_share_of_non_equivalent"] == 1.0
    assert merged["incremental"] == {"since": "one", "functions": ["pkg.tiny.x_half"]}
    assert merged["functions"]["pkg.tiny.x_half"]["hash"] == step["current"]["pkg.tiny.x_half"]


def test_a_group_without_function_records_or_with_full_runs_everything(repository):
    recorded = _recorded(committed_hashes(["pkg/*.py"], repository))
    assert "full" in plan(["pkg/*.py"], None, full=False, root=repository)
    assert "full" in plan(["pkg/*.py"], recorded, full=True, root=repository)
    without = {key: value for key, value in recorded.items() if key != "functions"}
    assert "full" in plan(["pkg/*.py"], without, full=False, root=repository)
    assert "full" in plan(["pkg/other.py"], recorded, full=False, root=repository)


def test_a_recheck_merge_leaves_out_a_function_added_since_the_recorded_run(repository):
    recorded = _recorded(committed_hashes(["pkg/*.py"], repository))
    _commit_edit(repository, "def half(x):", "def third(x):\n    return x / 3\n\n\ndef half(x):")
    current = committed_hashes(["pkg/*.py"], repository)
    fresh = {
        "modules": ["pkg/*.py"],
        "commit": "two",
        "survivors": [],
        "equivalent": {},
        "functions": {"pkg.tiny.x_half": recorded["functions"]["pkg.tiny.x_half"]},
    }
    merged = merge_incremental(recorded, fresh, ["pkg.tiny.x_half"], current)
    # third has no record yet: the next plain run finds it new and mutates it
    assert "pkg.tiny.x_third" not in merged["functions"]
    assert plan(["pkg/*.py"], merged, full=False, root=repository)["rerun"] == ["pkg.tiny.x_third"]


def test_a_recheck_of_an_incremental_record_runs_every_function_with_a_survivor_too():
    # half's survivor was decided by a run before the incremental one (which re-ran double
    # only): a recheck limited to double would keep it however many new tests kill it
    incremental = {"since": "zero", "functions": ["pkg.tiny.x_double"]}
    recorded = {**_recorded({}), "incremental": incremental}
    assert recheck_functions(recorded) == ["pkg.tiny.x_double", "pkg.tiny.x_half"]
    judged = {**recorded, "survivors": [], "equivalent": {"pkg.tiny.x_half__mutmut_2": "same"}}
    assert recheck_functions(judged) == ["pkg.tiny.x_double"]  # a judged one needs no rerun


def test_unchecked_mutants_are_those_of_the_asked_functions():
    statuses = {
        "m.x_f__mutmut_1": "not_checked",
        "m.x_f__mutmut_2": "killed",
        "m.x_g__mutmut_1": "not_checked",
    }
    assert unchecked_mutants(statuses, ["m.x_f"]) == ["m.x_f__mutmut_1"]
    assert unchecked_mutants(statuses, ["m.x_h"]) == []
    assert unchecked_mutants(statuses, None) == ["m.x_f__mutmut_1", "m.x_g__mutmut_1"]


SPREAD = """

def spread(x):
    a = x + 1
    b = a * 3
    c = b - 4
    d = c + 5
    return d / 2
"""


def _mutant_with(diffs, removed, added):
    """The one mutant whose diff turns the line ``removed`` into ``added``."""
    found = [m for m, lines in diffs.items()
             if f"-    {removed}" in lines and f"+    {added}" in lines]  # fmt: skip
    assert len(found) == 1, found
    return found[0]


@pytest.mark.slow
def test_a_judgement_follows_its_diff_across_renumbering_and_drops_when_its_line_changes(
    repository,
):
    pytest.importorskip("mutmut")
    _commit_edit(repository, "class Scale:", SPREAD.lstrip("\n") + "\n\nclass Scale:")
    before = mutant_diffs(None, ["pkg.tiny"], repository)
    judged_as = _mutant_with(before, "return d / 2", "return d * 2")
    entry = {"mutant": judged_as, "diff": before[judged_as], "reason": "a stand-in reason"}
    # an edit four lines above (outside the diff's context) adds mutants before it
    _commit_edit(repository, "a = x + 1", "a = (x + 1) * 1")
    after = mutant_diffs(None, ["pkg.tiny"], repository)
    renumbered = _mutant_with(after, "return d / 2", "return d * 2")
    assert renumbered != judged_as  # mutmut numbers it anew
    assert after.get(judged_as) != entry["diff"]  # the old name now names another mutant
    assert judge(list(after), after, [entry]) == {renumbered: "a stand-in reason"}
    # the same edit in another function is not judged by it
    other = renumbered.replace("x_spread", "x_double")
    assert judge([other], {other: after[renumbered]}, [entry]) == {}
    # the line the judgement describes changes: the judgement attaches to nothing
    _commit_edit(repository, "return d / 2", "return d / 4")
    changed = mutant_diffs(None, ["pkg.tiny"], repository)
    assert judge(list(changed), changed, [entry]) == {}


def test_a_recheck_maps_the_tests_again_and_names_the_undetected_mutants(repository, tmp_path):
    """mutmut maps only new tests to the functions they reach: an edited test that now reaches
    another function would never meet its mutants. A recheck drops the mapping (mutmut then
    rebuilds it), pulls the committed tree and names the mutants left undetected."""
    (repository / "pyproject.toml").write_text("[project]\nname = 'pkg'\n")
    _git(repository, "add", "pyproject.toml")
    _git(repository, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "two")
    scratch = tmp_path / "scratch"
    _git(tmp_path, "clone", "-q", str(repository), str(scratch))
    (scratch / "pyproject.toml").write_text("[project]\nname = 'pkg'\n[tool.mutmut]\nold = 1\n")
    meta = scratch / "mutants" / "pkg" / "tiny.py.meta"
    meta.parent.mkdir(parents=True)
    verdicts = {"pkg.tiny.x_double__mutmut_1": 1, "pkg.tiny.x_double__mutmut_2": 0,
                "pkg.tiny.x_half__mutmut_1": 33, "pkg.tiny.x_half__mutmut_2": 36,
                "pkg.tiny.x_half__mutmut_3": None}  # fmt: skip
    meta.write_text(json.dumps({"exit_code_by_key": verdicts}))
    stats = scratch / "mutants" / "mutmut-stats.json"
    stats.write_text("{}")
    _commit_edit(repository, "return x / 2", "return x * 0.5")

    names = prepare_recheck(scratch, ["pkg/tiny.py"], ["tests/test_tiny.py"])

    assert names == ["pkg.tiny.x_double__mutmut_2", "pkg.tiny.x_half__mutmut_1",
                     "pkg.tiny.x_half__mutmut_3"]  # survived, without tests, unchecked
    assert not stats.exists()
    assert "return x * 0.5" in (scratch / "pkg" / "tiny.py").read_text()
    config = (scratch / "pyproject.toml").read_text()
    assert "old = 1" not in config and config.count("[tool.mutmut]") == 1
    assert '"pkg/tiny.py"' in config and '"tests/test_tiny.py"' in config


def test_every_module_of_the_package_is_in_a_group():
    # a module left out of every group is never mutated, and the scores would not say so
    globs = [pattern for paths, _ in GROUPS.values() for pattern in paths]
    root = Path(__file__).resolve().parents[1]
    modules = sorted(path.relative_to(root).as_posix()
                     for path in (root / "gradlab").rglob("*.py")
                     if path.name not in ("__init__.py", "__main__.py", "_version.py"))  # fmt: skip
    assert len(modules) > 100
    assert [m for m in modules if not any(fnmatch.fnmatch(m, g) for g in globs)] == []


def test_every_group_is_in_one_roll_up():
    # a group in no roll-up is left out of the README's package table; a top-level module goes
    # to its own roll-up when it has one, else to the last (the modules directly in gradlab/)
    rolled = {name: package_of({"modules": paths}) for name, (paths, _) in GROUPS.items()}
    assert [name for name, package in rolled.items() if package is None] == []
    assert rolled["cli"] == "cli.py" and rolled["validation"] == "other top-level modules"
    assert package_of({"modules": ["gradlab/functional/smooth_ap.py"]}) == "functional"
    assert package_of({"modules": ["gradlab/functional/smooth_ap.py", "gradlab/errors.py"]}) \
        is None  # fmt: skip


WRAPPED = '''import functools


def outside_autocast(function):
    return function


def cached(function):
    return functools.lru_cache(function)


@outside_autocast
def wrapped(x):
    return x + 1


@cached
def other(x):
    return x + 1


class Box:
    @property
    def size(self):
        return 2 + 1
'''


@pytest.mark.slow
def test_functions_decorated_by_gradlabs_wrappers_only_are_mutated(repository):
    """mutmut leaves decorated functions out; those decorated only by gradlab's wrappers
    (``outside_autocast`` among them) get mutants; other decorators still none."""
    pytest.importorskip("mutmut")
    (repository / "pkg" / "wrapped.py").write_text(WRAPPED)
    _git(repository, "add", "pkg/wrapped.py")
    _git(repository, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "w")

    diffs = mutant_diffs(None, ["pkg.wrapped"], repository)

    functions = {name.rsplit("__mutmut_", 1)[0] for name in diffs}
    # outside_autocast's own body has nothing to mutate; other and Box.size none: decorated
    assert functions == {"pkg.wrapped.x_cached", "pkg.wrapped.x_wrapped"}
    assert any("-    return x + 1" in diff and "+    return x - 1" in diff
               for name, diff in diffs.items() if name.startswith("pkg.wrapped.x_wrapped__"))


def test_a_judged_mutant_counts_as_what_its_reason_says():
    # "Killed by hand" and "CUDA only" judgements were counted as equivalents and left out of
    # the share: one killed by hand is killed, one CUDA-only mutant is not shown killed
    functions = {"m.x_f": {"generated": 10, "killed": 6, "survived": 4, "no_tests": 0,
                           "timeout": 0, "not_checked": 0}}  # fmt: skip
    undetected = ["m.x_f__mutmut_1", "m.x_f__mutmut_2", "m.x_f__mutmut_3", "m.x_f__mutmut_4"]
    judged = {"m.x_f__mutmut_1": "same value", "m.x_f__mutmut_2": "Killed by hand: t fails",
              "m.x_f__mutmut_3": "CUDA only: moved to the GPU"}  # fmt: skip
    totals = group_totals(functions, undetected, judged)
    assert (totals["equivalent_proper"], totals["killed_by_hand"], totals["cuda_only"]) == (1, 1, 1)
    # killed 6 + 1 by hand, of the 10 - 1 equivalent
    assert totals["killed_share_of_non_equivalent"] == pytest.approx(7 / 9)
    assert totals["survivors"] == ["m.x_f__mutmut_4"]


@pytest.mark.slow  # starts pytest
def test_the_suite_collects_with_the_options_mutmut_runs_it_with():
    # mutmut runs pytest without xdist: a conftest hook of xdist's, registered as such, made
    # every mutation run stop at "unknown hook 'pytest_xdist_make_scheduler'"
    config = _mutmut_config(["gradlab/losses.py"], [])
    options = json.loads(re.search(r"^pytest_add_cli_args = (\[.*\])$", config, re.M).group(1))
    assert "no:xdist" in options
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", *options, "--collect-only", "tests/test_defaults.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]
