"""One Monitor per log_dir at a time: an exclusive lock, released at close, stale when dead."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gradlab import GradlabError, Monitor, SmoothAPLoss
from gradlab.monitor import read_jsonl
from gradlab.monitor.lock import LOCK_NAME
from tests.helpers.training import train


def test_two_monitors_on_one_new_folder_do_not_interleave(tmp_path):
    run = tmp_path / "new"
    first = Monitor(run, preset="cheap", every=1)
    second = Monitor(run, preset="cheap", every=1)  # both made before any write
    train(first, steps=1)
    with pytest.raises(GradlabError, match=r"in use by another Monitor.*resume=True.*overwrite"):
        train(second, steps=1)
    train(first, steps=1)
    first.close()
    second.close()  # nothing to write: it was refused
    headers, records = read_jsonl(run / "metrics.jsonl")
    assert len(headers) == 1 and [r["step"] for r in records] == [0, 1]
    assert not (run / LOCK_NAME).exists()


def test_a_refused_monitor_says_why_at_every_later_step(tmp_path):
    # a training loop that catches the refusal and goes on must not be told it closed the
    # Monitor: each later step repeats the refusal
    run = tmp_path / "new"
    first = Monitor(run, preset="cheap", every=1)
    second = Monitor(run, preset="cheap", every=1)
    train(first, steps=1)
    with pytest.raises(GradlabError) as refused:
        train(second, steps=1)
    with pytest.raises(GradlabError) as later:
        second.step()
    assert str(later.value) == (
        "monitor.step() called on a Monitor whose log_dir was refused at its first record: "
        + str(refused.value)
    )
    first.close()


def test_a_watched_call_of_a_refused_monitor_says_it_was_refused_not_closed(tmp_path):
    # it warned "a watched call after close()" though nobody had called close()
    run = tmp_path / "new"
    first = Monitor(run, preset="cheap", every=1)
    second = Monitor(run, preset="cheap", every=1)
    watched = second.watch(SmoothAPLoss(0.05))  # the loop's, made before the refusal
    train(first, steps=1)
    with pytest.raises(GradlabError) as refused:
        train(None, steps=1, loss_fn=watched)
        second.step()
    with pytest.warns(RuntimeWarning) as caught:
        train(None, steps=1, loss_fn=watched)  # the loop goes on (it caught the refusal)
    assert [str(w.message) for w in caught] == [
        "gradlab.Monitor: a watched call of a Monitor whose log_dir was refused at its first "
        f"record ({refused.value}): the loss runs and nothing is read or logged"]
    first.close()


def test_a_monitor_made_while_another_writes_is_refused_at_construction(tmp_path):
    with Monitor(tmp_path, preset="cheap", every=1) as first:
        train(first, steps=1)
        for kwargs in ({}, {"resume": True}, {"overwrite": True}):
            with pytest.raises(GradlabError, match="in use by another Monitor"):
                Monitor(tmp_path, preset="cheap", **kwargs)
    with Monitor(tmp_path, preset="cheap", every=1, resume=True) as again:  # released at close
        train(again, steps=1)


def test_a_run_written_and_closed_after_construction_is_not_merged(tmp_path):
    late = Monitor(tmp_path, preset="cheap", every=1)
    with Monitor(tmp_path, preset="cheap", every=1) as first:
        train(first, steps=1)
    with pytest.raises(GradlabError, match=r"already holds a run.*resume=True"):
        train(late, steps=1)
    assert len(read_jsonl(tmp_path / "metrics.jsonl")[0]) == 1


def test_a_stale_lock_of_a_dead_process_is_taken_over(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    stale = {"host": socket.gethostname(), "pid": int(dead.stdout), "token": "x"}
    (tmp_path / LOCK_NAME).write_text(json.dumps(stale))
    with Monitor(tmp_path, preset="cheap", every=1) as monitor:
        train(monitor, steps=1)
    assert not (tmp_path / LOCK_NAME).exists()


def test_a_live_lock_of_another_process_is_honoured(tmp_path):
    live = {"host": socket.gethostname(), "pid": os.getppid(), "token": "x"}
    (tmp_path / LOCK_NAME).write_text(json.dumps(live))
    with pytest.raises(GradlabError, match=f"process {os.getppid()}"):
        Monitor(tmp_path, preset="cheap")


ROOT = Path(__file__).resolve().parents[2]
HOLDER = """
import sys, time
import gradlab
from tests.helpers.training import train
monitor = gradlab.Monitor(sys.argv[1], preset="cheap", every=1)
train(monitor, steps=1)
print("written", flush=True)
time.sleep(60)  # killed by the test: a crash that never calls close()
"""


@pytest.mark.slow
def test_a_killed_writer_blocks_while_alive_and_its_lock_is_taken_over_after(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)],
                             stdout=subprocess.PIPE, text=True, cwd=ROOT)  # fmt: skip
    try:
        assert child.stdout.readline().strip() == "written"
        with pytest.raises(GradlabError, match=f"in use by another Monitor \\(process {child.pid}"):
            Monitor(tmp_path, preset="cheap", resume=True)
    finally:
        child.kill()
        child.wait()
    assert (tmp_path / LOCK_NAME).exists()  # left behind by the crash
    with Monitor(tmp_path, preset="cheap", every=1, resume=True) as monitor:
        train(monitor, steps=1)
    assert [r["step"] for r in read_jsonl(tmp_path / "metrics.jsonl")[1]] == [0, 1]
    assert not (tmp_path / LOCK_NAME).exists()
