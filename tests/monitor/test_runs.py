"""Runs never merge (refuse, resume, overwrite); log_dir checked at the call; short runs shown."""

import contextlib
import csv
import inspect
import os
import sys
import warnings

import pytest
import torch

import gradlab
from gradlab import GradlabError, Monitor
from gradlab.monitor import EmbeddingGradNorm, default_schedule, every, read_jsonl
from tests.helpers.event_files import write_users_event_file
from tests.helpers.training import train


def _say_the_run_was_distributed(folder, distributed: dict) -> None:
    """Rewrite the first header of ``folder``'s metrics.jsonl as one written under
    torch.distributed, its ``"distributed"`` entry ``distributed`` (an earlier gradlab's, say)."""
    import json

    path = folder / "metrics.jsonl"
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    header["header"]["distributed"] = distributed
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")


def _steps(log_dir):
    return [r["step"] for r in read_jsonl(log_dir / "metrics.jsonl")[1]]


def test_a_second_monitor_on_a_run_is_refused_naming_both_ways_out(tmp_path):
    with Monitor(tmp_path, preset="cheap", every=1) as monitor:
        train(monitor, steps=2)
    before = (tmp_path / "metrics.jsonl").read_text()
    with pytest.raises(GradlabError) as raised:
        Monitor(tmp_path, preset="cheap")
    message = str(raised.value)
    assert "log_dir" in message and "metrics.jsonl" in message
    assert "resume=True" in message and "overwrite=True" in message
    assert (tmp_path / "metrics.jsonl").read_text() == before  # nothing touched


def test_resume_continues_the_steps_and_the_header_says_so(tmp_path):
    with Monitor(tmp_path, preset="cheap", every=1, sinks=["jsonl", "csv"]) as monitor:
        train(monitor, steps=3)
    with Monitor(tmp_path, preset="cheap", every=2, sinks=["jsonl", "csv"], resume=True) as monitor:
        assert monitor.step_count == 3
        train(monitor, steps=4)  # steps 3..6: 4 and 6 on schedule, 6 is also the last
    headers, records = read_jsonl(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in records] == [0, 1, 2, 4, 6]
    assert "resumed" not in headers[0]
    assert headers[1]["resumed"] == {"from_step": 3, "files": ["metrics.csv", "metrics.jsonl"]}
    with (tmp_path / "metrics.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [int(row["step"]) for row in rows] == [0, 1, 2, 4, 6]  # one header row only


def test_a_loop_resumed_from_its_checkpoint_sets_the_step_it_restarts_at(tmp_path):
    # crashed after loop step 23 (last record: step 20); the loop restarts from its checkpoint
    # at step 24: the Monitor would number it 21, the loop says 24
    with pytest.raises(RuntimeError), Monitor(tmp_path, preset="cheap", every=5) as monitor:
        train(monitor, steps=24)
        raise RuntimeError("the crash: no last record at close")
    monitor = Monitor(tmp_path, preset="cheap", every=5, resume=True)
    assert monitor.step_count == 21
    monitor.step_count = 24
    with monitor:
        train(monitor, steps=3)  # loop steps 24, 25, 26
    assert _steps(tmp_path)[:6] == [0, 5, 10, 15, 20, 25]


@pytest.mark.parametrize("sinks", [["jsonl"], ["csv"], ["jsonl", "csv"]])
def test_a_resume_after_going_back_to_a_checkpoint_goes_on_from_the_last_record(tmp_path,
                                                                                sinks):
    # steps 0-19 logged; the loop went back to its checkpoint at step 5 and logged 5-7: the
    # run's last record is step 7 (the later records of a step stand), not the 19 before it.
    # Taking the largest step resumed at 20, and the plot drew a line from 7 to 20.
    with Monitor(tmp_path, preset="cheap", every=1, sinks=sinks) as monitor:
        train(monitor, steps=20)
    monitor = Monitor(tmp_path, preset="cheap", every=1, sinks=sinks, resume=True)
    monitor.step_count = 5
    with monitor:
        train(monitor, steps=3)  # loop steps 5, 6, 7
    with Monitor(tmp_path, preset="cheap", every=1, sinks=sinks, resume=True) as monitor:
        assert monitor.step_count == 8
        train(monitor, steps=2)  # steps 8, 9
    if "jsonl" in sinks:
        assert _steps(tmp_path) == [*range(20), 5, 6, 7, 8, 9]


@pytest.mark.parametrize(("code", "succeeded"), [(None, True), (0, True), (1, False),
                                                ("stopped early", False)])
def test_sys_exit_in_a_with_block_is_a_failure_only_with_an_error_code(tmp_path, code,
                                                                        succeeded):
    # a script that ends with sys.exit(0) inside the block finished; it lost its last step
    # and its W&B / MLflow runs were marked failed
    with pytest.raises(SystemExit), Monitor(tmp_path, preset="cheap", every=5) as monitor:
        train(monitor, steps=8)  # steps 0-7: 0 and 5 on schedule, 7 the last
        sys.exit(code)
    assert _steps(tmp_path) == ([0, 5, 7] if succeeded else [0, 5])


def test_a_damaged_line_read_by_a_resumption_is_warned_at_the_monitors_line(tmp_path):
    with Monitor(tmp_path, preset="cheap", every=1) as monitor:
        train(monitor, steps=3)
    log = tmp_path / "metrics.jsonl"
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join([*lines[:2], "{not json\n", *lines[2:]]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        resumed = Monitor(tmp_path, preset="cheap", every=1, resume=True)
    resumed.close()
    bad = [w for w in caught if "skipped a line" in str(w.message)]
    assert [(w.filename, str(w.message)) for w in bad][:1] == [
        (__file__, f"{log}:3: skipped a line that is not valid JSON (a line edited by hand, or "
        "written by another program?)")]
    assert resumed.step_count == 3


@pytest.mark.parametrize("journal", ["metrics.jsonl", "run.jsonl"])
def test_a_resume_goes_on_from_the_files_its_latest_part_wrote_not_a_stale_one(tmp_path,
                                                                               journal):
    # steps 0-19 went to both files; the loop then went back to step 5 with the JSONL sink
    # alone, so metrics.csv still ends at 19 while the run's last record is step 7. Taking
    # the largest step of every file resumed at 20, across the steps the run abandoned (and
    # with a JSONL of another name, its header was not read: still 20)
    from gradlab.monitor import JSONLSink

    def sinks(*more):
        return [JSONLSink(journal), *more]

    with Monitor(tmp_path, preset="cheap", every=1, sinks=sinks("csv")) as monitor:
        train(monitor, steps=20)
    monitor = Monitor(tmp_path, preset="cheap", every=1, sinks=sinks(), resume=True)
    monitor.step_count = 5
    with monitor:
        train(monitor, steps=3)  # loop steps 5, 6, 7
    for more in ((), ("csv",)):
        with pytest.warns(UserWarning) as caught:
            resumed = Monitor(tmp_path, preset="cheap", sinks=sinks(*more), resume=True)
            assert resumed.step_count == 8
        assert [(str(w.message), w.filename) for w in caught] == [(
            f"gradlab.Monitor: the run in {str(tmp_path)!r} resumes after step 7, the last its "
            f"latest part logged ({journal!r}), though 'metrics.csv' ends at step 19: a file "
            "left out of a resumption that went back to a checkpoint. If the run did get there "
            "(resumed later without the JSONL sink), set monitor.step_count before the first "
            "step", __file__)]


def _made_by_a_trainer(*args, **kwargs):
    """A Monitor made inside a trainer (a module named as lightning's), as a callback makes it
    inside ``trainer.fit()``: the trainer's frame calls the constructor."""
    namespace = {"__name__": "lightning.pytorch.trainer.stand_in"}
    exec(compile("def fit(make, args, kwargs):\n    return make(*args, **kwargs)\n",
                 "<a trainer's fit()>", "exec"), namespace)  # fmt: skip
    return namespace["fit"](Monitor, args, kwargs)


def test_a_resume_warning_of_a_monitor_a_trainer_makes_names_the_users_line(tmp_path):
    # the run folder's warnings named the trainer's frame that made the Monitor
    with Monitor(tmp_path, preset="cheap", every=1, sinks=["jsonl", "csv"]) as monitor:
        train(monitor, steps=6)
    monitor = Monitor(tmp_path, preset="cheap", every=1, sinks=["jsonl"], resume=True)
    monitor.step_count = 2
    with monitor:
        train(monitor, steps=2)  # loop steps 2, 3: metrics.csv still ends at 5
    with pytest.warns(UserWarning, match="resumes after step 3") as caught:
        _made_by_a_trainer(tmp_path, preset="cheap", sinks=["jsonl", "csv"], resume=True)
    assert [w.filename for w in caught] == [__file__]


def test_a_resume_after_a_dropped_last_record_goes_on_after_the_file_that_holds_it(tmp_path):
    # both files written by the latest part: the CSV's later end is a record the JSONL lost
    with Monitor(tmp_path, preset="cheap", every=1, sinks=["jsonl", "csv"]) as monitor:
        train(monitor, steps=4)
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "metrics.jsonl").write_text("".join(lines[:-1]))  # step 3's record lost
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Monitor(tmp_path, preset="cheap", sinks=["jsonl"], resume=True).step_count == 4


@pytest.mark.parametrize("value", [-1, 2.5, True, "3", None])
def test_step_count_refuses_what_is_not_a_step(tmp_path, value):
    monitor = Monitor(tmp_path, preset="cheap")
    with pytest.raises(GradlabError, match=r"^step_count must be a non-negative integer; got "):
        monitor.step_count = value
    monitor.close()


@pytest.mark.parametrize(("args", "kwargs", "shown"), [
    ((5,), {}, "5"), ((), {"step": 5}, "step=5"),
    ((5, "x"), {"commit": True}, "5, 'x', commit=True"),
])
def test_a_step_number_passed_to_step_is_refused_before_anything_is_counted(
    tmp_path, args, kwargs, shown
):
    with Monitor(tmp_path, preset="cheap", every=1) as monitor:
        with pytest.raises(GradlabError) as raised:
            monitor.step(*args, **kwargs)
        assert monitor.step_count == 0  # nothing counted: the next step() is still step 0
    assert str(raised.value) == (
        f"monitor.step() takes no argument; got monitor.step({shown}): the Monitor counts its "
        "optimizer steps itself (set monitor.step_count = N once to number them from N)"
    )


def test_resume_on_an_empty_folder_starts_at_zero(tmp_path):
    with Monitor(tmp_path / "new", preset="cheap", every=1, resume=True) as monitor:
        train(monitor, steps=2)
    headers, records = read_jsonl(tmp_path / "new" / "metrics.jsonl")
    assert [r["step"] for r in records] == [0, 1] and "resumed" not in headers[0]


def test_overwrite_replaces_the_run_when_the_first_record_is_written(tmp_path):
    with Monitor(tmp_path, preset="cheap", every=1, config={"run": 1}) as monitor:
        train(monitor, steps=3)
    monitor = Monitor(tmp_path, preset="cheap", every=1, config={"run": 2}, overwrite=True)
    assert _steps(tmp_path) == [0, 1, 2]  # still there until the new run writes
    with monitor:
        train(monitor, steps=2)
    headers, records = read_jsonl(tmp_path / "metrics.jsonl")
    assert [h["config"]["run"] for h in headers] == [2] and [r["step"] for r in records] == [0, 1]
    assert headers[0]["overwrote"] == ["metrics.jsonl"]


def test_overwrite_keeps_the_old_run_when_the_new_one_writes_no_record(tmp_path):
    # the docs: the old files are removed "when the first record is written"; a run that
    # fails before its first step (or closes without one) must not destroy the old run
    with Monitor(tmp_path, preset="cheap", every=1) as monitor:
        train(monitor, steps=3)
    with pytest.raises(RuntimeError), Monitor(tmp_path, preset="cheap", overwrite=True):
        raise RuntimeError("training failed before its first step")
    assert _steps(tmp_path) == [0, 1, 2]
    Monitor(tmp_path, preset="cheap", overwrite=True).close()
    assert _steps(tmp_path) == [0, 1, 2]


def test_overwrite_replaces_the_files_of_sinks_the_new_run_does_not_use(tmp_path):
    # a run written as JSONL and CSV, replaced by a JSONL-only run: its CSV goes too, so a
    # later resume cannot read the old run's last step from it and merge the two
    with Monitor(tmp_path, preset="cheap", every=1, sinks=["jsonl", "csv"]) as monitor:
        train(monitor, steps=5)
    with Monitor(tmp_path, preset="cheap", every=1, overwrite=True) as monitor:
        train(monitor, steps=2)
    headers, _ = read_jsonl(tmp_path / "metrics.jsonl")
    assert headers[0]["overwrote"] == ["metrics.csv", "metrics.jsonl"]
    assert not (tmp_path / "metrics.csv").exists()
    with Monitor(tmp_path, preset="cheap", every=1, sinks=["jsonl", "csv"],
                 resume=True) as monitor:  # fmt: skip
        train(monitor, steps=2)
    assert _steps(tmp_path) == [0, 1, 2, 3]


def test_a_folder_holding_another_sinks_run_is_a_run(tmp_path):
    with Monitor(tmp_path, preset="cheap", every=1, sinks=["csv"]) as monitor:
        train(monitor, steps=2)
    with pytest.raises(GradlabError, match=r"already holds a run \(metrics\.csv\)"):
        Monitor(tmp_path, preset="cheap")


def test_other_files_in_the_folder_are_not_a_run(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "figures").mkdir()
    with Monitor(tmp_path, preset="cheap", every=1) as monitor:
        train(monitor, steps=1)
    assert _steps(tmp_path) == [0] and (tmp_path / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("options", [{}, {"overwrite": True}, {"resume": True}])
def test_an_event_file_of_another_writer_is_no_run_and_stays_as_it_was(tmp_path, options):
    # overwrite=True removed a SummaryWriter's file of the user's at the first record; without
    # it the folder was refused as a run, and resume=True listed it as a resumed file
    pytest.importorskip("tensorboard")
    users = write_users_event_file(tmp_path)
    written = users.read_bytes()
    with Monitor(tmp_path, preset="cheap", every=1, **options) as monitor:
        train(monitor, steps=2)
    (header,), records = read_jsonl(tmp_path / "metrics.jsonl")
    assert [record["step"] for record in records] == [0, 1]
    assert "overwrote" not in header and "resumed" not in header
    assert users.read_bytes() == written


def test_overwrite_removes_gradlabs_event_files_and_keeps_another_writers(tmp_path):
    pytest.importorskip("tensorboard")
    with Monitor(tmp_path, preset="cheap", every=1, sinks=["jsonl", "tensorboard"]) as monitor:
        train(monitor, steps=2)
    (gradlabs,) = tmp_path.glob("events.out.tfevents.*")
    users = write_users_event_file(tmp_path)
    with pytest.raises(GradlabError) as caught:
        Monitor(tmp_path, preset="cheap")
    assert str(caught.value) == (
        f"log_dir {str(tmp_path)!r} already holds a run ({gradlabs.name}, metrics.jsonl); pass "
        "resume=True to continue it, overwrite=True to replace it, or choose a new log_dir")
    with Monitor(tmp_path, preset="cheap", every=1, overwrite=True) as monitor:
        train(monitor, steps=1)
    (header,), _ = read_jsonl(tmp_path / "metrics.jsonl")
    assert header["overwrote"] == [gradlabs.name, "metrics.jsonl"]
    assert sorted(tmp_path.glob("events.out.tfevents.*")) == [users]


@pytest.mark.parametrize("how", ["refused", "resume", "overwrite"])
def test_an_event_file_an_earlier_gradlab_named_without_its_suffix_is_still_a_run(tmp_path,
                                                                                    how):
    # gradlab named its event files as SummaryWriter does before they ended with ".gradlab":
    # the header they hold says whose they are
    pytest.importorskip("tensorboard")
    with Monitor(tmp_path, preset="cheap", every=1, sinks=["jsonl", "tensorboard"]) as monitor:
        train(monitor, steps=2)
    (event_file,) = tmp_path.glob("events.out.tfevents.*")
    # named as then, an hour earlier: a SummaryWriter of the same process in the same second
    # would otherwise write the user's file below under that very name (the test's own clash)
    parts = event_file.name.removesuffix(".gradlab").split(".")
    parts[3] = str(int(parts[3]) - 3600)  # events.out.tfevents.<time>.<host>.<pid>.<n>
    earlier = event_file.rename(tmp_path / ".".join(parts))
    assert earlier.name != event_file.name
    users = write_users_event_file(tmp_path)
    if how == "refused":
        with pytest.raises(GradlabError) as caught:
            Monitor(tmp_path, preset="cheap", sinks=["tensorboard"])
        assert str(caught.value) == (
            f"log_dir {str(tmp_path)!r} already holds a run ({earlier.name}, metrics.jsonl); "
            "pass resume=True to continue it, overwrite=True to replace it, or choose a new "
            "log_dir")
        return
    with Monitor(tmp_path, preset="cheap", every=1, sinks=["jsonl", "tensorboard"],
                 **{how: True}) as monitor:  # fmt: skip
        train(monitor, steps=1)
    header = read_jsonl(tmp_path / "metrics.jsonl")[0][-1]
    if how == "resume":
        assert header["resumed"] == {"from_step": 2, "files": [earlier.name, "metrics.jsonl"]}
        assert earlier.exists()
    else:
        assert header["overwrote"] == [earlier.name, "metrics.jsonl"]
        assert not earlier.exists()
    assert users.exists()


def test_resume_from_tensorboard_only_files_is_refused(tmp_path):
    pytest.importorskip("tensorboard")
    with Monitor(tmp_path, preset="cheap", every=1, sinks=["tensorboard"]) as monitor:
        train(monitor, steps=1)
    with pytest.raises(GradlabError, match=r"resume=True needs the last step.*'jsonl'"):
        Monitor(tmp_path, sinks=["tensorboard"], resume=True)


def test_a_30_step_smoke_run_logs_several_points_and_its_last_step(tmp_path):
    with Monitor(tmp_path, preset="cheap") as monitor:
        train(monitor, steps=30)
    assert _steps(tmp_path) == [*range(10), 10, 20, 29]


def test_default_schedule_is_dense_early_then_every_50():
    logged = [step for step in range(1001) if default_schedule()(step)]
    assert logged[:10] == list(range(10))
    assert [s for s in logged if 10 <= s < 200] == list(range(10, 200, 10))
    assert [s for s in logged if s >= 200] == list(range(200, 1001, 50))


def test_the_last_step_is_not_logged_twice(tmp_path):
    with Monitor(tmp_path, preset="cheap", every=every(5)) as monitor:
        train(monitor, steps=6)  # step 5 is on schedule and is the last
    assert _steps(tmp_path) == [0, 5]


def test_no_last_step_when_the_block_raises(tmp_path):
    with pytest.raises(RuntimeError), Monitor(tmp_path, preset="cheap", every=5) as monitor:
        train(monitor, steps=3)
        raise RuntimeError("training failed")
    assert _steps(tmp_path) == [0]


def test_a_step_without_a_closing_step_call_is_not_logged_at_close(tmp_path):
    with Monitor(tmp_path, preset="cheap", every=5) as monitor:
        train(monitor, steps=2)  # steps 0, 1
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        loss_fn(torch.randn(8, 4), torch.arange(8) % 2)  # a forward whose step never closed
    assert _steps(tmp_path) == [0, 1]  # the last step closed (1), not the open one (2)


def test_a_last_step_without_a_watched_call_is_not_logged_from_an_earlier_call(tmp_path):
    # the loop skipped the loss at its last step (a batch it filtered out): the earlier call
    # is no batch of that step
    with Monitor(tmp_path, preset="cheap", every=10) as monitor:
        train(monitor, steps=3)  # steps 0-2: 0 on schedule
        with pytest.warns(RuntimeWarning, match="without a call of the watched loss"):
            monitor.step()  # step 3, no watched call
    assert _steps(tmp_path) == [0]


def test_quantities_that_all_read_gradients_log_no_last_step_at_close(tmp_path):
    # the last call is read again at close without its backward: nothing such a quantity reads
    with Monitor(tmp_path, quantities=[EmbeddingGradNorm(every(10))]) as monitor:
        train(monitor, steps=4)
    assert _steps(tmp_path) == [0]


@pytest.mark.parametrize("after", ["a validation without gradients", "micro-batches left over"])
def test_calls_after_the_last_step_do_not_hide_it_from_close(tmp_path, after):
    # close() logs the last step the schedule skipped; any watched call after the last
    # monitor.step() had dropped it in silence (its step was never closed)
    generator = torch.Generator().manual_seed(0)
    batches = [torch.randn(12, 8, generator=generator) for _ in range(6)]
    labels = torch.arange(12) % 3
    with Monitor(tmp_path, preset="cheap", every=3) as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        losses = []
        for embeddings in batches[:5]:  # steps 0-4: 0 and 3 on schedule, 4 skipped
            loss = loss_fn(embeddings.clone().requires_grad_(), labels)
            loss.backward()
            losses.append(loss.item())
            monitor.step()
        if after == "micro-batches left over":
            loss_fn(batches[5].clone().requires_grad_(), labels).backward()
        else:
            with torch.no_grad():
                loss_fn(batches[5], labels)
    _, records = read_jsonl(tmp_path / "metrics.jsonl")
    assert [record["step"] for record in records] == [0, 3, 4]
    # step 4's own call, not the one after it
    assert [record["loss"] for record in records] == pytest.approx(
        [losses[0], losses[3], losses[4]])


@pytest.mark.parametrize(
    ("make_log_dir", "kwargs", "message"),
    [
        (lambda tmp: tmp / "file.txt", {}, r"log_dir must be a folder.*existing file"),
        (lambda tmp: tmp / "file.txt" / "run", {}, r"log_dir must be a folder.*is a file"),
        (lambda tmp: 42, {}, r"log_dir must be a folder path .*got 42"),
        (lambda tmp: None, {}, r"log_dir must be a folder path .*got None"),
        (lambda tmp: "", {}, r"^log_dir must be a non-empty folder path; got ''$"),
        (lambda tmp: tmp, {"resume": "yes"}, r"^resume must be True or False; got 'yes'$"),
        (lambda tmp: tmp, {"overwrite": 1}, r"^overwrite must be True or False; got 1$"),
        (
            lambda tmp: tmp,
            {"resume": True, "overwrite": True},
            r"^resume=True and overwrite=True exclude each other; choose one$",
        ),
        (lambda tmp: tmp, {"sinks": ["neptune"]}, r"sinks must name one of"),
        (  # both would append every record to the one metrics.jsonl
            lambda tmp: tmp,
            {"sinks": ["jsonl", "csv", "jsonl"]},
            r"^sinks must name each sink once; got 'jsonl' more than once in "
            r"\['jsonl', 'csv', 'jsonl'\]$",
        ),
    ],
)
def test_bad_monitor_calls_raise_at_the_call(tmp_path, make_log_dir, kwargs, message):
    (tmp_path / "file.txt").write_text("not a folder")
    with pytest.raises(GradlabError, match=message):
        Monitor(make_log_dir(tmp_path), **kwargs)


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write into any folder")
def test_an_unwritable_parent_is_refused(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(GradlabError, match="not writable"):
        Monitor(locked / "run")


def test_a_run_cut_short_mid_line_can_be_resumed_and_read(tmp_path):
    with Monitor(tmp_path, preset="cheap", every=1) as monitor:
        train(monitor, steps=3)
    log = tmp_path / "metrics.jsonl"
    log.write_text(log.read_text() + '{"step": 3, "loss": 0.4')  # killed while writing step 3
    monitor = Monitor(tmp_path, preset="cheap", every=1, resume=True)
    assert monitor.step_count == 3  # the last complete record was step 2
    with monitor, pytest.warns(UserWarning, match="removed the last line") as caught:
        train(monitor, steps=2)
    assert len(caught) == 1  # the removal's warning alone: reading the log said nothing
    headers, records = read_jsonl(log, strict=True)  # the cut line went: strict JSON lines
    assert [r["step"] for r in records] == [0, 1, 2, 3, 4] and len(headers) == 2


def test_close_warns_at_the_callers_line_when_watched_calls_were_never_stepped(tmp_path):
    monitor = Monitor(tmp_path / "a", preset="cheap", every=1)
    loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
    embeddings = torch.randn(8, 4, requires_grad=True)
    loss_fn(embeddings, torch.arange(8) % 2).backward()  # no monitor.step() afterwards
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1
        monitor.close()
    (warning,) = [w for w in caught if "monitor.step() was never called" in str(w.message)]
    assert warning.category is RuntimeWarning
    assert (warning.filename, warning.lineno) == (__file__, line)
    assert "1 watched call(s)" in str(warning.message)
    assert read_jsonl(tmp_path / "a" / "metrics.jsonl")[1] == []  # nothing was logged

    with warnings.catch_warnings(record=True) as caught:  # leaving a with block: the same
        warnings.simplefilter("always")
        with Monitor(tmp_path / "b", preset="cheap", every=1) as monitor:
            monitor.watch(gradlab.SmoothAPLoss(0.05))(embeddings, torch.arange(8) % 2)
    (warning,) = [w for w in caught if "monitor.step() was never called" in str(w.message)]
    assert warning.filename == __file__

    with warnings.catch_warnings(record=True) as caught:  # left by an error: the error says it
        warnings.simplefilter("always")
        with pytest.raises(GradlabError), Monitor(tmp_path / "c", preset="cheap") as monitor:
            monitor.watch(gradlab.SmoothAPLoss(0.05))(embeddings, torch.arange(7) % 2)
    assert not [w for w in caught if "monitor.step() was never called" in str(w.message)]


def test_close_is_quiet_when_steps_were_taken_or_nothing_was_watched(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with Monitor(tmp_path / "a", preset="cheap", every=1) as monitor:
            train(monitor, steps=2)
        Monitor(tmp_path / "b", preset="cheap").close()


def test_resuming_with_other_settings_warns(tmp_path):
    with Monitor(tmp_path, preset="default", every=1) as monitor:
        train(monitor, steps=2)  # tau from the loss: 0.05
    monitor = Monitor(tmp_path, preset="cheap", tau=0.5, every=1, resume=True)
    with pytest.warns(UserWarning) as caught:
        train(monitor, steps=1)
    monitor.close()
    (warning,) = [w for w in caught if "resume=True" in str(w.message)]
    message = str(warning.message)
    assert "tau 0.05 -> 0.5" in message and "preset 'default' -> 'cheap'" in message
    assert "from step 2 on are not comparable" in message


def test_a_run_logged_to_csv_alone_resumes_without_the_settings_check(tmp_path):
    # metrics.csv records no settings: documented (docs/monitor_in_depth.md), nothing to compare
    with Monitor(tmp_path, preset="default", every=1, sinks=["csv"]) as monitor:
        train(monitor, steps=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with Monitor(tmp_path, preset="cheap", every=1, resume=True, sinks=["csv"]) as monitor:
            train(monitor, steps=1)
    assert monitor.step_count == 3
    assert [row.split(",")[0] for row in (tmp_path / "metrics.csv").read_text().splitlines()
            if row[:1].isdigit()] == ["0", "1", "2"]  # fmt: skip


def test_the_resume_warning_names_the_step_a_checkpoint_restart_logs_from(tmp_path):
    with Monitor(tmp_path, preset="cheap", every=1) as monitor:
        train(monitor, steps=5)
    monitor = Monitor(tmp_path, preset="cheap", tau=0.5, every=1, resume=True)
    monitor.step_count = 2  # restarted from a checkpoint saved at step 2
    with pytest.warns(UserWarning, match="from step 2 on are not comparable"):
        train(monitor, steps=1)
    monitor.close()


def test_the_resume_warning_names_every_setting_that_changed_word_for_word(tmp_path):

    from gradlab.monitor.quantities import Loss

    with Monitor(tmp_path, quantities=[Loss(every(1))]) as monitor:
        train(monitor, steps=2)
    # the first run made under torch.distributed (its header says so), the second not
    _say_the_run_was_distributed(tmp_path, {"world_size": 2, "gathered": True})
    monitor = Monitor(tmp_path, preset="cheap", every=1, resume=True)
    with pytest.warns(UserWarning) as caught:
        train(monitor, steps=1)
    monitor.close()
    (warning,) = [w for w in caught if "resume=True" in str(w.message)]
    quantities = [q.name for q in monitor.quantities]
    assert str(warning.message) == (
        f"gradlab.Monitor: resume=True continues the run in {str(tmp_path)!r} with other "
        f"settings (preset None -> 'cheap'; quantities ['loss'] -> {quantities}; distributed "
        "{'world_size': 2, 'gathered': True} -> None): its records from step 2 on are not "
        "comparable with those before; use a new log_dir (or overwrite=True) for a new run")


def test_the_resume_warning_points_at_the_training_loop(tmp_path):
    with Monitor(tmp_path, preset="default", every=1) as monitor:
        train(monitor, steps=1)
    with pytest.warns(UserWarning, match="resume=True") as caught:
        with Monitor(tmp_path, preset="cheap", every=1, resume=True) as monitor:
            train(monitor, steps=1)
    assert {w.filename for w in caught if "resume=True" in str(w.message)} == {
        train.__code__.co_filename}  # fmt: skip


def test_a_resumed_run_is_compared_with_the_latest_settings_past_a_cut_line(tmp_path):
    with Monitor(tmp_path, preset="default", every=1) as monitor:
        train(monitor, steps=2)
    with pytest.warns(UserWarning, match="resume=True"):
        with Monitor(tmp_path, preset="cheap", every=1, resume=True) as monitor:
            train(monitor, steps=1)
    with open(tmp_path / "metrics.jsonl", "a") as log:  # a writer killed mid-line
        log.write('{"step": 3, "loss": 0.')
    with pytest.warns(UserWarning) as caught:  # the cut line is reported; no settings changed
        with Monitor(tmp_path, preset="cheap", every=1, resume=True) as monitor:
            train(monitor, steps=1)
    assert [str(w.message) for w in caught if "resume=True" in str(w.message)] == []
    assert sum("removed the last line" in str(w.message) for w in caught) == 1


def test_resuming_with_the_same_settings_is_quiet(tmp_path):
    with Monitor(tmp_path, preset="cheap", every=1) as monitor:
        train(monitor, steps=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with Monitor(tmp_path, preset="cheap", every=1, resume=True) as monitor:
            train(monitor, steps=1)


def test_resuming_a_log_without_a_header_starts_at_zero_quietly(tmp_path):
    # a run killed before its header reached the disk leaves an empty metrics.jsonl
    (tmp_path / "metrics.jsonl").write_text("")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with Monitor(tmp_path, preset="cheap", every=1, resume=True) as monitor:
            assert monitor.step_count == 0
            train(monitor, steps=1)
    assert _steps(tmp_path) == [0]


@pytest.mark.slow
def test_the_docs_csv_recipe_keeps_the_rows_gradlab_plot_keeps_after_going_back(tmp_path):
    # docs/monitor_in_depth.md: a resumption from an earlier checkpoint logs its steps again; in
    # metrics.csv a row stands when its step is below every later row's step. Run A logs 0-9,
    # B goes back to 4 and crashes after 6, C goes back to 5 and logs 5-8: A's 7-9 and B's 5-6
    # were replaced, which gradlab plot's reader of metrics.jsonl also drops.
    pandas = pytest.importorskip("pandas")
    from gradlab.plotting.monitor import load_runs

    def run(start, steps, seed, crash=False):
        resume = start is not None
        with pytest.raises(RuntimeError) if crash else contextlib.nullcontext():
            with Monitor(tmp_path, preset="cheap", every=1, sinks=["jsonl", "csv"],
                         resume=resume) as monitor:  # fmt: skip
                if resume:
                    monitor.step_count = start
                train(monitor, steps=steps, seed=seed)
                if crash:
                    raise RuntimeError("the crash")

    run(None, 10, seed=0)
    run(4, 3, seed=1, crash=True)
    run(5, 4, seed=2)
    rows = pandas.read_csv(tmp_path / "metrics.csv")
    assert rows["step"].tolist() == [*range(10), 4, 5, 6, 5, 6, 7, 8]  # every row kept
    steps = rows["step"]
    rows = rows[steps < steps[::-1].cummin()[::-1].shift(-1, fill_value=steps.max() + 1)]
    with pytest.warns(UserWarning, match="resumptions start at steps the run had logged"):
        ((_, records),) = load_runs([tmp_path])
    assert rows["step"].tolist() == [record["step"] for record in records] == list(range(9))
    assert rows["loss"].tolist() == [record["loss"] for record in records]
    _, trained = read_jsonl(tmp_path, as_trained=True)  # the same records, no figure needed
    assert [(r["step"], r["loss"]) for r in trained] == list(
        zip(rows["step"], rows["loss"], strict=True))
    assert len(set(rows["loss"])) == 9  # the three runs' losses differ: the rows are told apart


def test_a_cut_last_line_of_a_resumed_log_is_warned_about_once_where_it_is_removed(tmp_path):
    # The resume reads the log's last step line by line and warned of the cut line ("skipped
    # a line that is not valid JSON"); the sink then removed it with a warning of its own. The
    # removal alone warns now, at the line outside gradlab that made the run write.
    with Monitor(tmp_path, preset="cheap", every=1) as monitor:
        train(monitor, steps=2)
    with (tmp_path / "metrics.jsonl").open("a") as handle:
        handle.write('{"step": 2, "lo')  # cut short
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        resumed = Monitor(tmp_path, preset="cheap", every=1, resume=True, tau=0.05)  # the loss's
        assert caught == []
        loss_fn = resumed.watch(gradlab.SmoothAPLoss(0.05))
        embeddings = torch.randn(8, 4, requires_grad=True)
        loss_fn(embeddings, torch.arange(8) % 2).backward()
        assert caught == []
        resumed.step()  # the run writes: the cut line goes (a resume that logs nothing leaves it)
        resumed.close()
    assert _steps(tmp_path) == [0, 1, 2]
    assert [(str(w.message), w.filename) for w in caught] == [(
        f"gradlab.Monitor: removed the last line of {str(tmp_path / 'metrics.jsonl')!r} (15 "
        "bytes with no line end that are not a whole JSON object: a write cut short by a killed "
        "process), so that every line is JSON; the run goes on after the last whole record, "
        "and logs the cut record's step again if its schedule logs that step", __file__)]


def test_resuming_under_a_process_group_a_run_made_without_one_warns(tmp_path, request):
    from gradlab.monitor.quantities import Loss

    folder = tmp_path / "run"
    with Monitor(folder, quantities=[Loss(every(1))]) as monitor:
        train(monitor, steps=1)
    request.getfixturevalue("one_rank_group")  # the resumed run under torch.distributed
    monitor = Monitor(folder, quantities=[Loss(every(1))], resume=True)
    with pytest.warns(UserWarning, match=r"other settings \(distributed None -> \{'world_size': "
                                         r"1, 'mode': 'auto', 'gathered': True\}\)"):  # fmt: skip
        train(monitor, steps=1)
    monitor.close()


@pytest.mark.parametrize("tau", [None, 0.5])
@pytest.mark.parametrize("how", ["close", "raised"])
def test_a_resumed_run_closed_before_any_step_is_left_as_it_was(tmp_path, tau, how):
    # a resume that failed before its first watched call (a checkpoint that did not load)
    # appended a header with the default tau 0.01, warned "tau 0.05 -> 0.01: not comparable"
    # of records never logged, and the next resume warned "0.01 -> 0.05" again
    with Monitor(tmp_path, preset="cheap", every=1) as monitor:
        train(monitor, steps=3)  # tau from the loss: 0.05
    logged = (tmp_path / "metrics.jsonl").read_bytes()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        monitor = Monitor(tmp_path, preset="cheap", tau=tau, every=1, resume=True)
        if how == "close":
            monitor.close()
        else:
            with contextlib.suppress(FileNotFoundError), monitor:
                raise FileNotFoundError("checkpoint.pt")
        assert (tmp_path / "metrics.jsonl").read_bytes() == logged
        with Monitor(tmp_path, preset="cheap", every=1, resume=True) as monitor:
            train(monitor, steps=1)
    assert _steps(tmp_path) == [0, 1, 2, 3]


@pytest.mark.parametrize("value", ["no", 0, None])
def test_close_refuses_a_log_last_step_that_is_not_a_bool(tmp_path, value):
    # close(log_last_step="no") logged the last step: a truthy string
    monitor = Monitor(tmp_path, preset="cheap", every=1)
    with pytest.raises(GradlabError) as raised:
        monitor.close(log_last_step=value)
    assert str(raised.value) == f"log_last_step must be True or False; got {value!r}"
    monitor.close()


def test_a_run_logged_to_csv_alone_resumes_after_its_last_row_with_other_sinks(tmp_path):
    # resumed with the default JSONL sink, a run that had logged to metrics.csv alone started
    # again at step 0: only this Monitor's own sinks were asked for the last step
    with Monitor(tmp_path, sinks=["csv"], preset="cheap", every=1) as monitor:
        train(monitor, steps=3)
    with Monitor(tmp_path, resume=True, preset="cheap", every=1, tau=0.05) as monitor:
        assert monitor.step_count == 3
        train(monitor, steps=2)
    headers, records = read_jsonl(tmp_path)
    assert headers[-1]["resumed"] == {"from_step": 3, "files": ["metrics.csv"]}
    assert [record["step"] for record in records] == [3, 4]


@pytest.mark.slow
def test_a_monitor_collected_without_close_leaves_no_file_open(tmp_path):
    # its metrics.jsonl was left to the collector: a ResourceWarning "unclosed file"
    import gc

    def run():
        monitor = Monitor(tmp_path / "run", preset="cheap", every=1, sinks=["jsonl", "csv"])
        train(monitor, steps=2)  # stepped, never closed

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run()
        gc.collect()
    assert [str(w.message) for w in caught if w.category is ResourceWarning] == []
    assert _steps(tmp_path / "run") == [0, 1]


@pytest.mark.slow
def test_a_sink_object_serving_a_second_run_keeps_its_file_when_the_first_is_collected(
        tmp_path):
    import gc

    from gradlab.monitor import JSONLSink

    sink = JSONLSink()
    first = Monitor(tmp_path / "first", preset="cheap", every=1, sinks=[sink])
    train(first, steps=1)
    first.close()
    with Monitor(tmp_path / "second", preset="cheap", every=1, sinks=[sink]) as second:
        del first
        gc.collect()
        train(second, steps=2)
    assert _steps(tmp_path / "second") == [0, 1]


def test_stale_files_and_the_current_ones_are_listed_each(tmp_path):
    from gradlab.monitor import JSONLSink

    def sinks(*more):
        return ["jsonl", "csv", *more]

    with Monitor(tmp_path, preset="cheap", every=1,
                 sinks=sinks(JSONLSink("b.jsonl"), JSONLSink("c.jsonl"))) as monitor:
        train(monitor, steps=20)
    monitor = Monitor(tmp_path, preset="cheap", every=1, sinks=sinks(), resume=True)
    monitor.step_count = 5
    with monitor:
        train(monitor, steps=3)  # steps 5-7 to the two default files alone
    with pytest.warns(UserWarning) as caught:
        Monitor(tmp_path, preset="cheap",
                sinks=sinks(JSONLSink("b.jsonl"), JSONLSink("c.jsonl")), resume=True)
    assert [str(w.message) for w in caught] == [
        f"gradlab.Monitor: the run in {str(tmp_path)!r} resumes after step 7, the last its "
        "latest part logged ('metrics.csv', 'metrics.jsonl'), though 'b.jsonl' ends at step 19, "
        "'c.jsonl' ends at step 19: a file left out of a resumption that went back to a "
        "checkpoint. If the run did get there (resumed later without the JSONL sink), set "
        "monitor.step_count before the first step"]


def test_a_run_resumed_through_attach_is_not_said_to_read_its_losses_otherwise(tmp_path):
    # attach() reads the embeddings as a watched loss on embeddings does: a resumed run of the
    # same quantities and tau warns of nothing
    from gradlab.monitor.quantities import EmbeddingNorms

    with Monitor(tmp_path, quantities=[EmbeddingNorms(every(1))]) as monitor:
        train(monitor, steps=1)
    model = torch.nn.Linear(4, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Monitor(tmp_path, quantities=[EmbeddingNorms(every(1))], tau=0.05,  # the loss's
                     resume=True) as monitor:
            monitor.attach(model, torch.arange(6) % 2)
            model(torch.randn(6, 4)).sum().backward()
            monitor.step()
    assert not [str(w.message) for w in caught if "resume=True" in str(w.message)]
    headers, records = read_jsonl(tmp_path / "metrics.jsonl")
    assert [header.get("inputs") for header in headers] == [["embeddings"], ["embeddings"]]
    assert [record["step"] for record in records] == [0, 1]


def test_a_run_of_an_earlier_gradlab_without_a_distributed_mode_resumes_alike(tmp_path,
                                                                             one_rank_group):
    # its header names the world size alone: the same world size is no other setting

    from gradlab.monitor.quantities import Loss

    with Monitor(tmp_path, quantities=[Loss(every(1))]) as monitor:
        train(monitor, steps=1)
    _say_the_run_was_distributed(tmp_path, {"world_size": 1, "gathered": True})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Monitor(tmp_path, quantities=[Loss(every(1))], resume=True) as monitor:
            train(monitor, steps=1)
    assert not [str(w.message) for w in caught if "resume=True" in str(w.message)]


def test_a_distributed_run_closed_before_its_first_step_does_not_say_it_gathered(
        tmp_path, one_rank_group):  # fmt: skip
    # no batch was logged: "gathered" (of the first logged step's batch) has nothing to say
    # of a run that logged nothing (it said true, the mode's word, as it did above a first
    # record of the "disabled" note alone, which later records may belie)
    with Monitor(tmp_path, preset="cheap") as monitor:
        monitor.watch(gradlab.SmoothAPLoss(0.05))
    (header,), records = read_jsonl(tmp_path / "metrics.jsonl")
    assert header["distributed"] == {"world_size": 1, "mode": "auto", "gathered": None}
    assert records == []


def test_an_event_file_too_short_to_hold_a_header_is_no_run(tmp_path):
    # a file cut short (or another writer's, empty) named as gradlab named its event files
    # before they ended with ".gradlab": no header in it, so no run of gradlab's
    stub = tmp_path / "events.out.tfevents.1700000000.host.1.0"
    stub.write_bytes(b"\x00" * 11)  # less than one record's frame (12 bytes)
    with Monitor(tmp_path, preset="cheap", every=1) as monitor:
        train(monitor, steps=1)
    (header,), records = read_jsonl(tmp_path / "metrics.jsonl")
    assert "overwrote" not in header and [record["step"] for record in records] == [0]
    assert stub.read_bytes() == b"\x00" * 11


def _going_back_warnings(tmp_path, logged: int, resumed_at: int | None) -> list:
    """The "resumes at step" warnings of a run of ``logged`` steps resumed (at its own step
    count when ``resumed_at`` is None) for 2 more steps."""
    with Monitor(tmp_path, preset="cheap", every=1) as monitor:
        train(monitor, steps=logged)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Monitor(tmp_path, preset="cheap", every=1, resume=True) as monitor:
            assert monitor.step_count == logged
            if resumed_at is not None:
                monitor.step_count = resumed_at
            train(monitor, steps=2)
    return [w for w in caught if "resumes at step" in str(w.message)]


def test_a_resumption_at_a_step_the_run_logged_says_so_at_its_first_record(tmp_path):
    # A trainer resumed from an older checkpoint: the log ends at step 9, the loop goes on from
    # step 4. The earlier records of steps 4-9 stay in the file; only gradlab plot used to say.
    caught = _going_back_warnings(tmp_path, logged=10, resumed_at=4)
    assert [str(w.message) for w in caught] == [
        f"gradlab.Monitor: the run in {str(tmp_path)!r} resumes at step 4, at or before its "
        "last record (step 9): training went back to an earlier checkpoint. The records it "
        "logged from step 4 on stay in its files, ahead of this part's header, so a step this "
        "part logs again is in them twice; gradlab plot draws this part's records in their "
        "place, as read_jsonl(path, as_trained=True) reads them"
    ]
    # said at the line outside gradlab that made the record (the loop's, here the helper's)
    (where,) = [w.filename for w in caught]
    assert where.endswith(os.path.join("helpers", "training.py"))


def test_a_resumption_after_the_runs_last_step_says_nothing_of_going_back(tmp_path):
    assert _going_back_warnings(tmp_path, logged=3, resumed_at=None) == []
