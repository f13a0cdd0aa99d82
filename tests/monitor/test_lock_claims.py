"""The lock of a log_dir, function by function, against real processes and real files.

No Monitor and no training here (tests/monitor/test_lock.py covers the Monitor's use of the lock):
a live process of someone else is a ``sleep`` child, a dead one a reaped ``true`` child, and a
rival process acting in a race window is played by a wrapper around ``os.kill`` (the liveness
check, signal 0), so every race runs the same way each time. The lock file format (host, pid,
token as JSON) is the one documented in :mod:`gradlab.monitor.lock`.
"""

import errno
import json
import os
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gradlab import GradlabError, Monitor
from gradlab.monitor import read_jsonl
from gradlab.monitor.lock import LOCK_NAME, acquire, held_here, holder, refuse_if_in_use, release
from tests.helpers.training import train

ADVICE = (
    "runs never merge: choose another log_dir, or close() that Monitor first (then resume=True "
    "continues its run, overwrite=True replaces it)"
)
"""The remedy every refusal spells out (what the user reads when two runs meet)."""


@pytest.fixture
def live_pid() -> Iterator[int]:
    """The id of a live process that is not this one (killed after the test)."""
    child = subprocess.Popen(["sleep", "60"])
    yield child.pid
    child.kill()
    child.wait()


@pytest.fixture
def dead_pid() -> int:
    """The id of a process that has exited and been reaped."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def write_lock(folder: Path, pid: object, host: str | None = None, token: str = "other") -> dict:
    record = {"host": socket.gethostname() if host is None else host, "pid": pid, "token": token}
    (folder / LOCK_NAME).write_text(json.dumps(record))
    return record


def read_lock(folder: Path) -> dict:
    return json.loads((folder / LOCK_NAME).read_text())


def test_acquire_records_host_pid_and_the_returned_token_and_leaves_no_temporary(tmp_path):
    token = acquire(tmp_path)
    assert len(token) == 32 and int(token, 16) >= 0
    assert read_lock(tmp_path) == {"host": socket.gethostname(), "pid": os.getpid(), "token": token}
    assert sorted(p.name for p in tmp_path.iterdir()) == [LOCK_NAME]


def test_a_second_claim_is_refused_naming_the_folder_the_process_and_the_host(tmp_path):
    first = acquire(tmp_path)
    for attempt in (acquire, refuse_if_in_use):
        with pytest.raises(GradlabError) as refused:
            attempt(tmp_path)
        message = str(refused.value)
        assert f"log_dir {str(tmp_path)!r} is in use by another Monitor" in message
        assert (
            f"(process {os.getpid()} on {socket.gethostname()!r}, lock file {LOCK_NAME})" in message
        )
        # this very process holds it: the advice is to close that Monitor (the other cases'
        # ADVICE is tested with a lock of another process)
        assert ("runs never merge: close() that Monitor (or leave its with block) first, then "
                "resume=True continues its run and overwrite=True replaces it") in message
    assert read_lock(tmp_path)["token"] == first  # the refused claim changed nothing


SIGNAL_RECORDER = """
import signal, sys
received = []
for number in signal.valid_signals():
    try:
        signal.signal(number, lambda number, frame: received.append(number))
    except (OSError, ValueError, RuntimeError):  # SIGKILL, SIGSTOP: cannot be caught
        pass
print("ready", flush=True)
sys.stdin.read()
print(received, flush=True)
"""
"""A live process that reports every signal it received once its stdin closes."""


def test_the_lock_of_another_live_process_is_honoured_and_not_signalled(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", SIGNAL_RECORDER], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert child.stdout.readline() == "ready\n"
        record = write_lock(tmp_path, child.pid)
        assert holder(tmp_path) == record
        with pytest.raises(GradlabError, match=f"process {child.pid} on"):
            acquire(tmp_path)
        assert read_lock(tmp_path) == record
        received, _ = child.communicate("", timeout=30)
    finally:
        child.kill()
        child.wait()
    assert received == "[]\n"  # checking liveness sent no signal


def test_a_process_of_another_user_counts_as_alive(tmp_path, live_pid, monkeypatch):
    """kill(pid, 0) answers EPERM for a live process this user may not signal (pid 1 when not
    root); played here by refusing the check for the child, as the kernel would."""
    real_kill = os.kill

    def kill_refusing(pid: int, signal: int) -> None:
        if pid == live_pid:
            raise PermissionError(errno.EPERM, "Operation not permitted")
        real_kill(pid, signal)

    monkeypatch.setattr(os, "kill", kill_refusing)
    record = write_lock(tmp_path, live_pid)
    assert holder(tmp_path) == record


def test_a_dead_process_lock_is_stale_and_taken_over_without_leftovers(tmp_path, dead_pid):
    write_lock(tmp_path, dead_pid)
    assert holder(tmp_path) is None
    refuse_if_in_use(tmp_path)  # no error
    token = acquire(tmp_path)
    assert read_lock(tmp_path) == {"host": socket.gethostname(), "pid": os.getpid(), "token": token}
    assert sorted(p.name for p in tmp_path.iterdir()) == [LOCK_NAME]


def test_a_lock_of_another_host_is_honoured_even_with_a_dead_pid(tmp_path, dead_pid):
    record = write_lock(tmp_path, dead_pid, host=socket.gethostname() + "-elsewhere")
    assert holder(tmp_path) == record
    with pytest.raises(GradlabError, match=f"{record['host']!r}, lock file"):
        acquire(tmp_path)


def test_a_lock_of_another_host_is_refused_with_the_path_to_delete_not_a_takeover(tmp_path,
                                                                                  dead_pid):
    # a job restarted on another node after a preemption: the lock cannot be checked from
    # here, so the message must not promise that a crashed process's lock is taken over
    record = write_lock(tmp_path, dead_pid, host=socket.gethostname() + "-elsewhere")
    for attempt in (acquire, refuse_if_in_use):
        with pytest.raises(GradlabError) as refused:
            attempt(tmp_path)
        message = str(refused.value)
        assert message.startswith(
            f"log_dir {str(tmp_path)!r} is in use by another Monitor (process {dead_pid} on "
            f"{record['host']!r}, lock file {LOCK_NAME}); ")
        assert ADVICE in message
        assert "is stale and taken over" not in message
        assert f"cannot check whether process {dead_pid} still runs" in message
        assert f"delete {str(tmp_path / LOCK_NAME)!r}" in message
    assert read_lock(tmp_path) == record  # nothing was taken over


def test_a_live_lock_of_this_host_says_a_crashed_ones_would_be_taken_over(tmp_path, live_pid):
    # and what to do when the process number now belongs to another process (a PID reused
    # after a crash): the lock was honoured forever without a word of it
    write_lock(tmp_path, live_pid)
    with pytest.raises(GradlabError) as refused:
        refuse_if_in_use(tmp_path)
    assert str(refused.value).endswith(
        f"A lock of a crashed process is stale and taken over; if no Monitor runs as process "
        f"{live_pid} (its number taken by another process since), delete "
        f"{str(tmp_path / LOCK_NAME)!r} and start again.")


def test_a_lock_of_this_very_process_says_to_close_the_other_monitor(tmp_path):
    # two Monitors of one program on one folder: the advice to delete the lock of a process
    # that might be gone named this very process, whose Monitor is alive
    acquire(tmp_path)
    with pytest.raises(GradlabError) as refused:
        refuse_if_in_use(tmp_path)
    assert str(refused.value) == (  # said once, not twice
        f"log_dir {str(tmp_path)!r} is in use by another Monitor of this very process "
        f"(process {os.getpid()} on {socket.gethostname()!r}, lock file {LOCK_NAME}); runs never "
        "merge: close() that Monitor (or leave its with block) "
        "first, then resume=True continues its run and overwrite=True replaces it; or choose "
        "another log_dir")


@pytest.mark.parametrize(
    "content",
    [b"", b'{"host": "h", "pi', b"\xff\xfe\x00garbage", b"[1, 2]", b'"text"',
     b'{"host": "HOST", "token": "t"}', b'{"host": "HOST", "pid": "1", "token": "t"}',
     b'{"host": "HOST", "pid": true, "token": "t"}', b'{"host": "HOST", "pid": 1.0, "token": "t"}'],
    ids=["empty", "truncated", "not-utf8", "list", "string", "no-pid", "pid-text", "pid-bool",
         "pid-float"],
)  # fmt: skip
def test_an_unreadable_lock_is_stale_and_taken_over(tmp_path, content):
    """A writer killed between create and write leaves an empty or partial file: stale."""
    host = socket.gethostname().encode()
    (tmp_path / LOCK_NAME).write_bytes(content.replace(b"HOST", host))
    assert holder(tmp_path) is None
    token = acquire(tmp_path)
    assert read_lock(tmp_path)["token"] == token


@pytest.mark.parametrize("pid", [0, -1, "minus own pid", 2**31, 2**64])
def test_a_pid_that_names_no_single_process_is_stale(tmp_path, pid):
    """0 and negative ids address process groups (kill(0, 0) succeeds for this very group) and
    ids beyond pid_t name nothing: such a lock is corrupt, not held. (The test's own id is read
    inside the test: a parameter would differ between pytest-xdist workers.)"""
    write_lock(tmp_path, -os.getpid() if pid == "minus own pid" else pid)
    assert holder(tmp_path) is None
    token = acquire(tmp_path)
    assert read_lock(tmp_path)["token"] == token


def test_pid_1_is_a_live_process(tmp_path):
    """The smallest valid id: init (or a container's first process) is always alive."""
    record = write_lock(tmp_path, 1)
    assert holder(tmp_path) == record


def test_release_removes_only_the_lock_made_with_its_token(tmp_path, live_pid):
    token = acquire(tmp_path)
    release(tmp_path, "not-" + token)
    assert read_lock(tmp_path)["token"] == token
    release(tmp_path, token)
    assert not (tmp_path / LOCK_NAME).exists()
    release(tmp_path, token)  # nothing left to release: no error
    record = write_lock(tmp_path, live_pid, token=token[::-1])
    release(tmp_path, token)  # a lock another Monitor took since is not ours to remove
    assert read_lock(tmp_path) == record
    (tmp_path / LOCK_NAME).write_bytes(b"")
    release(tmp_path, token)  # unreadable: not provably ours
    assert (tmp_path / LOCK_NAME).read_bytes() == b""


def test_release_tolerates_the_lock_vanishing_while_it_checks(tmp_path, monkeypatch):
    """The lock deleted by hand between release's read and its removal: nothing to fail on.
    (Played by a read of the lock file that deletes it once its bytes are read.)"""
    token = acquire(tmp_path)
    real_read_bytes = Path.read_bytes

    def read_then_vanish(path: Path) -> bytes:
        content = real_read_bytes(path)
        if path.name == LOCK_NAME:
            path.unlink()
        return content

    monkeypatch.setattr(Path, "read_bytes", read_then_vanish)
    release(tmp_path, token)
    assert not (tmp_path / LOCK_NAME).exists()


def rival_after_judgement(monkeypatch, act) -> list[int]:
    """Let a rival process ``act`` right after this process judged a recorded pid's liveness (the
    window between reading a stale lock and removing it): the liveness check, ``kill(pid, 0)``,
    finds no such process and the rival acts before the answer comes back. Returns the pids
    judged."""
    judged = []
    real_kill = os.kill

    def judge_then_rival_acts(pid: int, signal: int) -> None:
        if signal != 0:  # a real signal (the fixtures' clean-up): not a judgement
            real_kill(pid, signal)
            return
        judged.append(pid)
        try:
            real_kill(pid, signal)
        except ProcessLookupError:
            act()
            raise

    monkeypatch.setattr(os, "kill", judge_then_rival_acts)
    return judged


def test_of_two_takeovers_of_one_stale_lock_only_the_first_wins(tmp_path, monkeypatch, dead_pid,
                                                                 live_pid):  # fmt: skip
    """Both processes judge the lock stale; the rival removes it and claims the folder first.
    This process must then find the rival's live lock, not delete it and claim too."""
    write_lock(tmp_path, dead_pid)
    rival = {"host": socket.gethostname(), "pid": live_pid, "token": "rival"}

    def rival_takes_over() -> None:
        if (tmp_path / LOCK_NAME).exists() and read_lock(tmp_path)["pid"] == dead_pid:
            (tmp_path / LOCK_NAME).unlink()
            (tmp_path / LOCK_NAME).write_text(json.dumps(rival))

    rival_after_judgement(monkeypatch, rival_takes_over)
    with pytest.raises(GradlabError, match=f"in use by another Monitor \\(process {live_pid} on"):
        acquire(tmp_path)
    assert read_lock(tmp_path) == rival
    assert sorted(p.name for p in tmp_path.iterdir()) == [LOCK_NAME]


def test_a_stale_lock_removed_by_a_rival_first_is_claimed(tmp_path, monkeypatch, dead_pid):
    write_lock(tmp_path, dead_pid)
    rival_after_judgement(monkeypatch, lambda: (tmp_path / LOCK_NAME).unlink(missing_ok=True))
    token = acquire(tmp_path)
    assert read_lock(tmp_path)["token"] == token
    assert sorted(p.name for p in tmp_path.iterdir()) == [LOCK_NAME]


def test_a_claim_gives_up_after_three_attempts_when_stale_locks_keep_appearing(
    tmp_path, monkeypatch, dead_pid
):
    """Each time this process judged the lock stale, another stale one replaced it (a crash
    loop of another writer): the documented three attempts, then a 'try again' refusal."""
    write_lock(tmp_path, dead_pid, token="stale-0")
    replaced = []

    def another_stale_lock() -> None:
        replaced.append(len(replaced) + 1)
        write_lock(tmp_path, dead_pid, token=f"stale-{len(replaced)}")

    judged = rival_after_judgement(monkeypatch, another_stale_lock)
    with pytest.raises(GradlabError) as refused:
        acquire(tmp_path)
    assert (
        str(refused.value) == f"log_dir {str(tmp_path)!r}: could not claim {LOCK_NAME}; try again"
    )
    assert judged == [dead_pid] * 3
    assert read_lock(tmp_path)["token"] == "stale-3"  # the newest is left, not ours
    assert sorted(p.name for p in tmp_path.iterdir()) == [LOCK_NAME]


def ordinary_file_mode(folder: Path) -> int:
    probe = folder / "ordinary"
    probe.write_text("x")
    mode = stat.S_IMODE(probe.stat().st_mode)
    probe.unlink()
    return mode


@pytest.fixture
def umask_022() -> Iterator[None]:
    previous = os.umask(0o022)
    yield
    os.umask(previous)


@pytest.fixture
def no_hard_links(monkeypatch) -> None:
    """A file system without hard links (some network and FAT mounts): link() fails with EPERM."""

    def refuse(source, target) -> None:
        raise OSError(errno.EPERM, "Operation not permitted", str(source), None, str(target))

    monkeypatch.setattr(os, "link", refuse)


@pytest.mark.parametrize("links", [True, False], ids=["hard-link", "o_excl"])
def test_claims_with_and_without_hard_links_behave_alike(tmp_path, request, umask_022, dead_pid,
                                                         live_pid, links):  # fmt: skip
    if not links:
        request.getfixturevalue("no_hard_links")
    token = acquire(tmp_path)
    assert read_lock(tmp_path) == {"host": socket.gethostname(), "pid": os.getpid(), "token": token}
    assert sorted(p.name for p in tmp_path.iterdir()) == [LOCK_NAME]
    mode = stat.S_IMODE((tmp_path / LOCK_NAME).stat().st_mode)
    assert mode == ordinary_file_mode(tmp_path)  # rw-r--r-- under umask 022
    with pytest.raises(GradlabError, match=f"process {os.getpid()} on"):
        acquire(tmp_path)
    release(tmp_path, token)
    write_lock(tmp_path, dead_pid)
    taken_over = acquire(tmp_path)
    assert read_lock(tmp_path)["token"] == taken_over
    assert sorted(p.name for p in tmp_path.iterdir()) == [LOCK_NAME]


def test_a_temporary_removed_by_someone_else_does_not_fail_a_claim(tmp_path, monkeypatch):
    """A cleaner deleting stray files right after the link: the claim itself succeeded."""
    real_link = os.link

    def link_then_cleaned(source, target) -> None:
        real_link(source, target)
        os.unlink(source)

    monkeypatch.setattr(os, "link", link_then_cleaned)
    token = acquire(tmp_path)
    assert read_lock(tmp_path)["token"] == token


def test_a_lock_naming_this_process_that_it_does_not_hold_is_stale(tmp_path):
    # a container restarted with a fresh process-id namespace: same host name, and the training
    # process gets its predecessor's id, so the lock it left names this very process
    write_lock(tmp_path, os.getpid(), token="left-by-the-process-before-the-restart")
    assert holder(tmp_path) is None
    refuse_if_in_use(tmp_path)  # no error
    token = acquire(tmp_path)
    assert read_lock(tmp_path) == {"host": socket.gethostname(), "pid": os.getpid(), "token": token}
    with pytest.raises(GradlabError, match=f"process {os.getpid()} on"):
        acquire(tmp_path)  # the lock this process holds now is live
    release(tmp_path, token)
    assert not (tmp_path / LOCK_NAME).exists()


def test_a_monitor_resumes_a_run_whose_lock_names_this_process_from_before_a_restart(tmp_path):
    with Monitor(tmp_path, preset="cheap", every=1) as first:
        train(first, steps=1)
    write_lock(tmp_path, os.getpid(), token="left-by-the-process-before-the-restart")
    with Monitor(tmp_path, preset="cheap", every=1, resume=True) as again:
        train(again, steps=1)
    _, records = read_jsonl(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in records] == [0, 1]
    assert not (tmp_path / LOCK_NAME).exists()


def test_held_here_is_true_only_while_this_process_holds_the_lock(tmp_path):
    assert not held_here(tmp_path)  # no lock
    token = acquire(tmp_path)
    assert held_here(tmp_path)
    left = read_lock(tmp_path)
    release(tmp_path, token)
    assert not held_here(tmp_path)
    (tmp_path / LOCK_NAME).write_text(json.dumps(left))  # the released lock put back (a sync)
    assert not held_here(tmp_path) and holder(tmp_path) is None  # released: stale
    write_lock(tmp_path, os.getpid(), token="not-acquired")  # this pid, a token never acquired
    assert not held_here(tmp_path)
    (tmp_path / LOCK_NAME).write_text("{")  # unreadable
    assert not held_here(tmp_path)
