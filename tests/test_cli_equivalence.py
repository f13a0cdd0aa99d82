"""``gradlab check-equivalence``: the table, exit 0 when the trick is the whole-batch gradient,
1 when it is not, and every bad argument one line on stderr with exit code 2."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from gradlab.cli import main
from tests.helpers.hf_models import cached_replay_in_float32
from tests.helpers.home import home_and_work


def _run(argv, capsys):
    """``gradlab check-equivalence ARGV`` -> (exit code, stdout, stderr)."""
    try:
        status = main(["check-equivalence", *argv])
    except SystemExit as usage_error:  # argparse's
        status = usage_error.code
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["gradient-cache"], 0),
        (["gradient-cache", "--loss", "smooth-ap", "--chunk-size", "3"], 0),
        (["gradient-cache", "--loss", "max-violation", "--dtype", "float32"], 0),
        (["memory", "--loss", "smooth-ap"], 0),
        (["cached-mnrl", "--chunk-size", "3"], 0),
        (["gradient-cache", "--loss", "siglip", "--chunk-size", "5"], 0),
        (["memory", "--loss", "siglip"], 0),
        (["accumulation", "--micro-batches", "2"], 1),
        (["accumulation", "--loss", "siglip"], 1),
        (["memory-before"], 1),
    ],
)
def test_one_process_candidates_exit_0_when_equivalent_and_1_when_not(capsys, argv, code):
    if argv[0] == "cached-mnrl":
        pytest.importorskip("sentence_transformers")
        code = int(cached_replay_in_float32())  # 5.7 to 6.1 replay in float32: exit 1
    status, out, err = _run(argv, capsys)
    assert status == code, err
    assert ("verdict: EQUIVALENT" in out) == (code == 0)
    assert ("verdict: NOT EQUIVALENT" in out) == (code == 1)
    assert "dL/dtheta" in out and "dL/dscores" in out
    assert err == ""


def test_accumulation_says_how_many_scores_it_never_computed(capsys):
    # B = 16 in 4 micro-batches of 4: 4 x 16 of the 256 scores are computed, 192 are not.
    status, out, _ = _run(["accumulation"], capsys)
    assert status == 1
    assert "192 scores never computed" in out


def test_loss_names_with_underscores_are_taken_as_gradlab_plan_spells_them(capsys):
    # smooth_ap (gradlab plan's spelling) is smooth-ap: the reference is SmoothAP
    status, out, _ = _run(["gradient-cache", "--loss", "smooth_ap", "--batch-size", "8"], capsys)
    assert status == 0 and "SmoothAPLoss" in out, out


def test_json_is_the_result(tmp_path, capsys):
    target = tmp_path / "result.json"
    status, _, _ = _run(["accumulation", "--micro-batches", "2", "--json", str(target)], capsys)
    assert status == 1
    record = json.loads(target.read_text())
    assert record["equivalent"] is False and record["candidate"].startswith("Accumulation")
    assert record["quantities"]["dL/dscores"]["unscored"] == 16 * 16 - 2 * 8 * 8


MONITOR_LOG = '{"header": {"run": 1}}\n{"step": 0, "loss": 0.5}\n'


def _refused(path):
    return (f"gradlab: --json would replace {str(path)!r}, an existing file that is not an "
            "earlier gradlab check-equivalence --json output; name another file, or move that "
            "one away first\n")


def test_json_refuses_to_replace_a_file_it_did_not_write(tmp_path, capsys, monkeypatch):
    # it replaced any file, a Monitor's metrics.jsonl as well
    log = tmp_path / "metrics.jsonl"
    log.write_text(MONITOR_LOG)
    monkeypatch.setattr("gradlab.equivalence.builtin.check_builtin",
                        lambda *args, **kwargs: pytest.fail("the check ran"))  # fmt: skip
    assert _run(["gradient-cache", "--json", str(log)], capsys) == (2, "", _refused(log))
    assert log.read_text() == MONITOR_LOG


def test_json_run_again_replaces_its_own_earlier_result(tmp_path, capsys):
    target = tmp_path / "result.json"
    target.touch()  # an empty file holds nothing to lose
    for argv, code in ((["gradient-cache"], 0), (["accumulation", "--micro-batches", "2"], 1)):
        status, _, err = _run([*argv, "--json", str(target)], capsys)
        assert (status, err) == (code, "")
        assert json.loads(target.read_text())["equivalent"] is (code == 0)


def test_json_keeps_a_file_written_there_while_the_check_ran(tmp_path, capsys, monkeypatch):
    import gradlab.equivalence.builtin as builtin

    target = tmp_path / "metrics.jsonl"
    check = builtin.check_builtin

    def written_meanwhile(*args, **kwargs):
        target.write_text(MONITOR_LOG)
        return check(*args, **kwargs)

    monkeypatch.setattr(builtin, "check_builtin", written_meanwhile)
    status, out, err = _run(["gradient-cache", "--json", str(target)], capsys)
    assert (status, err) == (2, _refused(target))
    assert "verdict: EQUIVALENT" in out  # the table was printed; the result not written
    assert target.read_text() == MONITOR_LOG


def test_json_of_a_quantity_the_steps_did_not_both_record_has_no_verdict(tmp_path, capsys):
    # CachedMNRL records dL/dtheta only: the others were "agrees": true beside "skipped"
    pytest.importorskip("sentence_transformers")
    target = tmp_path / "result.json"
    _, out, _ = _run(["cached-mnrl", "--json", str(target)], capsys)
    quantities = json.loads(target.read_text())["quantities"]
    for name in ("dL/dqueries", "dL/dcandidates", "dL/dscores", "scores"):
        assert f"{name:<16}{'-':>11}{'-':>11}{'-':>9}  skipped  not recorded by both steps" in out
        assert quantities[name]["recorded"] is False
        assert (quantities[name]["agrees"], quantities[name]["scaled_agrees"]) == (None, None)
    assert quantities["dL/dtheta"]["recorded"] is True


def test_a_json_under_tilde_is_written_in_the_home_folder(tmp_path, capsys, monkeypatch):
    home, work = home_and_work(tmp_path, monkeypatch)
    status, _, err = _run(["accumulation", "--micro-batches", "2", "--json=~/result.json"], capsys)
    assert (status, err) == (1, "")
    assert json.loads((home / "result.json").read_text())["equivalent"] is False
    assert list(work.iterdir()) == []


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["banana"], "invalid choice: 'banana'"),
        ([], "CANDIDATE"),
        (["gather", "--loss", "hinge"], "--loss"),
        (["gather", "--loss", "sigmoid"], "siglip"),  # the choices name it
        (["gather", "--processes", "0"], "--processes must be a positive integer; got 0"),
        (["gather", "--processes", "two"], "--processes"),
        (["gather", "--processes", "3"], "--processes must divide --batch-size 16; got 3"),
        (["gather", "--batch-size", "7"], "--batch-size must be even"),
        (["gradient-cache", "--chunk-size", "0"], "--chunk-size must be a positive integer"),
        (["accumulation", "--micro-batches", "3"], "--micro-batches must divide"),
        (["cached-mnrl", "--processes", "2"], "--processes must be 1 for cached-mnrl"),
        (["memory", "--processes", "2"], "--processes must be 1 for memory"),
        (["gather", "--seed", "-1"], "--seed must be a whole number from 0 to 2**32 - 1; got -1"),
        # was torch's "Overflow when unpacking long long", a traceback
        (["gather", "--seed", str(2**64)],
         f"--seed must be a whole number from 0 to 2**32 - 1; got {2**64}"),
        (["gather", "--dtype", "float16"], "--dtype"),
        (["gather", "--json", "/nonexistent-folder/x.json"], "--json"),
        # an option the candidate would ignore
        (["cached-mnrl", "--loss", "smooth-ap"], "--loss does not apply to cached-mnrl"),
        (["gradient-cache", "--micro-batches", "3"],
         "--micro-batches does not apply to gradient-cache"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(capsys, argv, needle):
    status, out, err = _run(argv, capsys)
    assert status == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert needle in err


NOTE = ("note: every class of this batch holds 2 items, so losses that weigh a query by its "
        "number of positives otherwise (a mean over positive pairs, or over queries) agree on "
        "it; for a loss that takes several positives per query, compare on classes of several "
        "sizes too, adding up to the batch size: on the command line gradlab check-equivalence "
        "... --class-sizes 2,3,4,7, in Python synthetic_problem(16, class_sizes=[2, 3, 4, 7]), "
        "or on a batch of your own, labels in classes of several sizes")


def test_the_note_on_classes_of_one_size_names_an_option_the_command_has(tmp_path, capsys):
    # it suggested synthetic_problem(..., class_sizes=...), which the command had no flag for
    status, out, err = _run(["gradient-cache", "--loss", "smooth-ap"], capsys)
    assert (status, err) == (0, "")
    assert out.splitlines()[-2:] == ["verdict: EQUIVALENT", NOTE]
    target = tmp_path / "result.json"
    status, out, err = _run(["gradient-cache", "--loss", "smooth-ap", "--class-sizes", "2,3,4,7",
                             "--json", str(target)], capsys)  # fmt: skip
    assert (status, err) == (0, "")
    assert out.splitlines()[-1] == "verdict: EQUIVALENT"  # no note: the classes differ in size
    assert json.loads(target.read_text())["class_size"] is None


@pytest.mark.parametrize("batch_size", ["8", "12", "32"])
def test_the_notes_class_sizes_fit_the_batch_size_the_check_ran_at(capsys, batch_size):
    # at --batch-size 8 the note suggested --class-sizes 2,3,4,7 (16 items), which the same
    # command then refused: "--class-sizes must add up to --batch-size 8"
    status, out, _ = _run(["gradient-cache", "--batch-size", batch_size], capsys)
    assert status == 0
    note = out.splitlines()[-1]
    (suggested,) = re.findall(r"--class-sizes (\d+(?:,\d+)+),? in Python", note)
    sizes = [int(size) for size in suggested.split(",")]
    assert sum(sizes) == int(batch_size) and len(set(sizes)) > 1
    assert f"synthetic_problem({batch_size}, class_sizes={sizes})" in note
    status, out, err = _run(["gradient-cache", "--batch-size", batch_size, "--class-sizes",
                             suggested], capsys)  # fmt: skip
    assert (status, err) == (0, "")
    assert out.splitlines()[-1] == "verdict: EQUIVALENT"  # classes of several sizes: no note


def test_cached_mnrl_takes_an_odd_batch_whose_every_item_is_its_own_class(capsys):
    # it was refused: "--batch-size must be even (classes of two); got 5", though cached-mnrl
    # makes every item its own class and has no classes of two
    pytest.importorskip("sentence_transformers")
    status, out, err = _run(["cached-mnrl", "--batch-size", "5", "--chunk-size", "2"], capsys)
    assert (status, err) == (0, "")
    assert "verdict: EQUIVALENT" in out.splitlines()


def test_class_sizes_of_an_odd_batch_are_taken(capsys):
    status, out, err = _run(["accumulation", "--batch-size", "9", "--micro-batches", "3",
                             "--class-sizes", "2,3,4"], capsys)  # fmt: skip
    assert (status, err) == (1, "")
    assert out.splitlines()[-1].startswith("verdict: NOT EQUIVALENT (")


@pytest.mark.parametrize(("argv", "message"), [
    (["gather", "--class-sizes", "2,3,4"],
     "gradlab: --class-sizes must add up to --batch-size 16; got 2,3,4, which adds up to 9"),
    (["gather", "--class-sizes", "0,16"], "gradlab: --class-sizes must be positive whole numbers "
     "separated by commas, e.g. 2,3,4,7; got 0,16"),
    (["gather", "--class-sizes="], "gradlab: --class-sizes must be positive whole numbers "
     "separated by commas, e.g. 2,3,4,7; got none"),
    (["cached-mnrl", "--class-sizes", "2,3,4,7"], "gradlab: --class-sizes does not apply to "
     "cached-mnrl, whose every item is its own class; got --class-sizes 2,3,4,7"),
    (["gather", "--class-sizes", "2,x"], "gradlab check-equivalence: error: argument "
     "--class-sizes: must be integers separated by commas, e.g. 2,3,4,7; got '2,x' (see gradlab "
     "check-equivalence --help)"),
])  # fmt: skip
def test_bad_class_sizes_are_one_line_and_exit_2(capsys, argv, message):
    assert _run(argv, capsys) == (2, "", message + "\n")


def test_siglip_accumulation_loses_the_cross_block_pairs_only(capsys):
    # SigLIP's pairs are independent: of the 16 x 16 scores, the 4 blocks of 4 x 4 are computed
    # and get the whole batch's gradient; the other 192 are never computed.
    status, out, _ = _run(["accumulation", "--loss", "siglip"], capsys)
    assert status == 1
    assert "SigLIPLoss" in out and "192 scores never computed" in out


@pytest.mark.slow
def test_siglip_under_a_local_loss_with_gradient_is_equivalent(capsys):
    # The paper's own scheme: each process its own images' rows against every text (2 processes).
    status, out, err = _run(["local-loss", "--loss", "siglip"], capsys)
    assert status == 0, err
    assert "SigLIPLoss" in out and "2 processes" in out and "verdict: EQUIVALENT" in out


@pytest.mark.slow
def test_the_console_command_runs_a_distributed_candidate():
    # Two gloo processes started from the command itself (spawn re-imports its main module).
    completed = subprocess.run(
        [sys.executable, "-m", "gradlab", "check-equivalence", "local-loss-no-grad"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert completed.returncode == 1, completed.stderr[-2000:]
    assert "2 processes" in completed.stdout
    assert "dL/dcandidates" in completed.stdout and "ranks 0, 1" in completed.stdout


def test_a_check_that_runs_out_of_memory_anyway_is_one_line_and_exit_2(capsys, monkeypatch):
    def out_of_memory(*args, **kwargs):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't "
                           "allocate memory: you tried to allocate 80000000000 bytes")
    monkeypatch.setattr("gradlab.equivalence.builtin.check_builtin", out_of_memory)
    status, out, err = _run(["gather", "--batch-size", "64"], capsys)
    assert (status, out) == (2, "")
    assert err == ("gradlab: the check of gather at --batch-size 64 ran out of memory; try a "
                   "smaller --batch-size\n")
    monkeypatch.setattr("gradlab.equivalence.builtin.check_builtin",
                        lambda *args, **kwargs: (_ for _ in ()).throw(RuntimeError("a bug")))
    with pytest.raises(RuntimeError, match=r"^a bug$"):  # any other error is not called memory
        _run(["gather"], capsys)


def test_a_batch_too_large_for_this_machine_is_refused_in_one_line(capsys):
    status, out, err = _run(["gather", "--batch-size", "2000000"], capsys)  # 8 x 4e12 x 8 B
    assert (status, out) == (2, "")
    assert err.startswith("gradlab: --batch-size 2000000: checking gather needs about ")
    assert err.endswith("GiB available; try a smaller --batch-size\n")


@pytest.mark.parametrize(
    "argv",
    [
        ["gradient-cache", "--batch-size", "2", "--loss", "smooth-ap"],
        ["accumulation", "--batch-size", "2", "--micro-batches", "2", "--loss", "max-violation"],
    ],
)
def test_a_reference_with_a_zero_gradient_is_one_line_and_exit_2_not_equivalent(capsys, argv):
    # B = 2 is one class of two: every candidate is a positive, and SmoothAP and the
    # max-violation triplet loss have nothing to rank. The check would compare only zeros.
    status, out, err = _run(argv, capsys)
    assert (status, out) == (2, "")
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("gradlab: the reference's gradient is exactly zero everywhere ")
    assert "the loss is constant on this batch" in err


def test_cached_mnrls_verdict_suggests_no_class_sizes_which_it_refuses(capsys):
    # the note of an EQUIVALENT verdict on classes of one item suggested --class-sizes 2,3
    # (Python: synthetic_problem(5, class_sizes=[2, 3])), which cached-mnrl refuses: its loss
    # takes the pair's own item as the only positive, every item its own class
    pytest.importorskip("sentence_transformers")
    status, out, err = _run(["cached-mnrl", "--batch-size", "5", "--chunk-size", "2"], capsys)
    assert (status, err) == (0, "")
    assert out.splitlines()[-1] == "verdict: EQUIVALENT"
    status, _, err = _run(["cached-mnrl", "--batch-size", "5", "--chunk-size", "2",
                           "--class-sizes", "2,3"], capsys)  # fmt: skip
    assert status != 0 and "--class-sizes does not apply to cached-mnrl" in err
