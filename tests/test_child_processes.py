"""starting_children: signals held back while children start; the children leave Ctrl-C to us."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest

from gradlab.child_processes import starting_children

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32" or not hasattr(signal, "pthread_sigmask"),
                       reason="POSIX signals"),
    pytest.mark.usefixtures("ctrl_c_raises"),  # whatever this process inherited (nohup)
]



# A child that prints whether Ctrl-C is blocked in it, as it starts.
BLOCKED_IN_CHILD = [
    sys.executable, "-c",
    "import signal; print(signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, []))",
]  # fmt: skip


def _blocked_here() -> bool:
    return signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])


def test_ctrl_c_in_the_block_is_raised_as_it_ends_after_the_block_ran_to_its_end():
    ran = []
    with pytest.raises(KeyboardInterrupt), starting_children():
        os.kill(os.getpid(), signal.SIGINT)
        ran.append("after the signal")
    assert ran == ["after the signal"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_sigterm_in_the_block_goes_to_the_handler_in_place_once_as_it_ends():
    calls = []
    previous = signal.signal(signal.SIGTERM, lambda number, frame: calls.append(number))
    try:
        with starting_children():
            os.kill(os.getpid(), signal.SIGTERM)
            seen_in_block = list(calls)
        assert seen_in_block == [] and calls == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_block_without_a_signal_leaves_handlers_and_mask_as_they_were():
    handlers = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    before = _blocked_here()
    with starting_children():
        assert _blocked_here()
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers
    assert not before and not _blocked_here()


def test_an_exception_in_the_block_passes_and_restores_the_mask():
    with pytest.raises(ValueError, match="inside"), starting_children():
        raise ValueError("inside")
    assert not _blocked_here()


def test_a_child_started_in_the_block_has_ctrl_c_blocked_and_one_started_after_has_not():
    with starting_children():
        inside = subprocess.run(BLOCKED_IN_CHILD, capture_output=True, text=True, check=True)
    after = subprocess.run(BLOCKED_IN_CHILD, capture_output=True, text=True, check=True)
    assert (inside.stdout.strip(), after.stdout.strip()) == ("True", "False")


def test_in_another_thread_children_start_with_ctrl_c_blocked_and_no_handler_is_touched():
    seen = {}

    def start():
        with starting_children():
            seen["child"] = subprocess.run(BLOCKED_IN_CHILD, capture_output=True, text=True,
                                           check=True).stdout.strip()  # fmt: skip
        seen["thread after"] = _blocked_here()

    handler = signal.getsignal(signal.SIGINT)
    thread = threading.Thread(target=start)
    thread.start()
    thread.join(60)
    assert seen == {"child": "True", "thread after": False}
    assert signal.getsignal(signal.SIGINT) is handler


def test_ctrl_c_stays_blocked_for_children_started_after_multiprocessing_starts_its_tracker():
    # The first spawn of a process starts multiprocessing's resource tracker, which unblocked
    # Ctrl-C as it went: the workers started after it saw Ctrl-C again. A fresh interpreter,
    # for a tracker not yet running.
    script = (
        "import multiprocessing, subprocess, sys\n"
        "from gradlab.child_processes import starting_children\n"
        "with starting_children():\n"
        "    lock = multiprocessing.get_context('spawn').Lock()\n"
        f"    subprocess.run({BLOCKED_IN_CHILD!r}, check=True)\n"
    )
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           env=environment, check=True)  # fmt: skip
    assert child.stdout.strip() == "True"


def test_an_ignored_signal_stays_ignored_and_children_inherit_it():
    # nohup's SIG_IGN: replaced by a handler, the children started in the block would have
    # had Ctrl-C back (exec resets a handled signal, not an ignored one)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    ignored = [sys.executable, "-c",
               "import signal; print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)"]
    with starting_children():
        inside = signal.getsignal(signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)  # ignored: nothing after the block either
        child = subprocess.run(ignored, capture_output=True, text=True, check=True)
    assert inside is signal.SIG_IGN and child.stdout.strip() == "True"
