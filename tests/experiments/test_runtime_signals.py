"""The study pool's parent acts on a signal while it waits for its workers' tasks."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.helpers.processes import descendants, sigint_as_at_a_terminal

ROOT = Path(__file__).resolve().parents[2]


def _record_and_sleep(folder: str) -> None:
    """A task that writes its worker's pid into ``folder`` and sleeps past the test's bound."""
    (Path(folder) / str(os.getpid())).write_text(str(os.getpid()))
    time.sleep(600)


# The SIGINT is sent to a thread other than the main one (as the kernel may deliver a signal
# sent to the process): its C handler runs there, and the main thread, asleep in its wait for
# the tasks, is not interrupted. It must still raise KeyboardInterrupt before any task ends.
SCRIPT = textwrap.dedent(
    """
    import signal, sys, threading, time
    from pathlib import Path
    sys.path.insert(0, {root!r})
    from gradlab.experiments import runtime
    from gradlab.progress import set_progress_mode
    from tests.experiments.test_runtime_signals import _record_and_sleep

    folder = Path({folder!r})

    def interrupt_from_another_thread():
        while len(list(folder.iterdir())) < 2:
            time.sleep(0.1)
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)

    threading.Thread(target=interrupt_from_another_thread, daemon=True).start()
    set_progress_mode("off")
    try:
        runtime.run_tasks(_record_and_sleep, [({folder!r},)] * 2, stage="sleep",
                          names=["seed 0", "seed 1"], workers=2)
    except KeyboardInterrupt:
        print("stopped", flush=True)
    """
)


def _stops(folder: Path) -> tuple[bool, str, str]:
    """Run SCRIPT; whether the parent exited within 90 s (its tasks sleep 600 s), its output."""
    script = SCRIPT.format(root=str(ROOT), folder=str(folder))
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               preexec_fn=sigint_as_at_a_terminal)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while len(list(folder.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        with contextlib.suppress(subprocess.TimeoutExpired):
            stdout, stderr = process.communicate(timeout=90)
            return True, stdout, stderr
        return False, "", ""
    finally:
        recorded = {int(path.name) for path in folder.iterdir()}
        for pid in {*recorded, *descendants(process.pid)}:  # none outlives a failed run
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pthread_kill, spawned pool")
def test_a_signal_handled_off_the_main_thread_still_stops_the_pool(tmp_path):
    exited, stdout, stderr = _stops(tmp_path)
    assert exited, "the parent slept through a SIGINT handled on another thread"
    assert stdout == "stopped\n", stderr
    assert "Traceback" not in stderr, stderr
