"""A file sink whose first write fails: the write's own error reaches the caller, the file is
left as it was and the sink is not open.

Two faults: a log file that is a link to ``/dev/full`` (every write fails with ENOSPC, and the
device cannot be cut back to its old size either), and a file system that reports ENOSPC at the
write and again when the file is closed (as network file systems do), for the JSONL log and
for a TensorBoard event file. In each, the error raised is the first write's ``OSError``; the
clean-up after it never replaces it.
"""

from __future__ import annotations

import builtins
import errno
import os

import pytest

from gradlab.monitor import JSONLSink
from gradlab.monitor import sinks as sinks_module

HEADER = {"quantities": ["loss"], "config": {"tau": 0.01}}


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs Linux's /dev/full")
def test_a_log_file_on_a_full_device_raises_the_write_error_and_leaves_the_sink_closed(tmp_path):
    (tmp_path / "metrics.jsonl").symlink_to("/dev/full")
    sink = JSONLSink()
    with pytest.raises(OSError) as raised:
        sink.open(tmp_path, HEADER)
    assert raised.value.errno == errno.ENOSPC
    assert sink.handle is None
    sink.close()  # nothing left to close


class _FailsAtWriteAndClose:
    """A real file on a file system that refuses the write and reports it again at close."""

    def __init__(self, real) -> None:
        self.real = real
        self.closed_once = False

    def fileno(self) -> int:
        return self.real.fileno()

    def write(self, data) -> int:
        raise OSError(errno.ENOSPC, "No space left on device (write)")

    def close(self) -> None:
        self.real.close()
        self.closed_once = True
        raise OSError(errno.EIO, "Input/output error (close)")


def _tensorboard_sink():
    pytest.importorskip("tensorboard", reason="the TensorBoard sink needs its extra")
    from gradlab.monitor import TensorBoardSink

    return TensorBoardSink()


@pytest.mark.parametrize(("make_sink", "left"), [
    (JSONLSink, ["metrics.jsonl"]),  # the log, empty
    (_tensorboard_sink, []),  # the new event file, removed
])  # fmt: skip
def test_an_error_at_close_after_a_failed_write_does_not_hide_the_write_error(
    tmp_path, monkeypatch, make_sink, left
):
    opened: list[_FailsAtWriteAndClose] = []

    def failing_append(file, mode="r", *args, **kwargs):
        handle = builtins.open(file, mode, *args, **kwargs)
        if mode != "ab":  # creating the file (an event file's exclusive creation) succeeds
            return handle
        opened.append(_FailsAtWriteAndClose(handle))
        return opened[-1]

    sink = make_sink()
    monkeypatch.setattr(sinks_module, "open", failing_append, raising=False)
    with pytest.raises(OSError, match=r"\(write\)") as raised:
        sink.open(tmp_path, HEADER)
    assert raised.value.errno == errno.ENOSPC
    assert sink.handle is None
    assert len(opened) == 1 and opened[0].closed_once
    assert sorted(path.name for path in tmp_path.iterdir()) == left
    assert all(path.read_bytes() == b"" for path in tmp_path.iterdir())
