"""Sinks: where logged records go. One small class per backend; optional imports deferred.

Every sink takes the same calls from the :class:`gradlab.Monitor`: :meth:`Sink.open` once with
the log folder and the header record, :meth:`Sink.write` once per logged step with a flat
record ``{"step": int, key: float, ...}``, :meth:`Sink.close` at the end. Sinks that need an
optional package check that it is installed when they are created (the error names the extra
to install: ``pip install 'gradlab-ranking[wandb]'``) and import it only when they open, or
when they are made with options to check against it (``wandb.init``'s keywords, an MLflow
tracking URI's scheme).

File sinks also say which files of a folder hold a previous run (:meth:`Sink.existing`) and,
where they can, the last step logged there (:meth:`Sink.last_step`): the Monitor uses both to
refuse, resume or overwrite a run, so that two runs never merge into one log.

A sink that raises (a full disk, a lost connection) never stops training: the Monitor drops
the record for that sink, warns once and retries at the next logged step. The first record a
sink takes after such a fault carries two more keys, :data:`DROPPED_KEYS`: ``dropped_records``
(how many records it missed since its last one) and ``dropped_steps`` (their steps).
``metrics.jsonl`` keeps them in that record; ``metrics.csv``, whose rows share one header, writes
instead one row per dropped step holding only its step (every value empty); the TensorBoard,
W&B and MLflow sinks log ``dropped_records`` as one more scalar. A record without a number
(the Monitor's note of disabled quantities alone) is a line of ``metrics.jsonl`` only. The
JSONL, CSV and TensorBoard sinks append each record whole or not at all: a write that fails
half way is cut back, so a fault never leaves half a line (or half an event).
"""

from __future__ import annotations

import contextlib
import csv
import glob
import importlib
import inspect
import io
import itertools
import json
import math
import os
import socket
import time
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path

from gradlab.errors import GradlabError, caller_stacklevel
from gradlab.extras import is_installed, missing_extra


def encode_value(value: object) -> object:
    """JSON has no NaN or infinity: write them as the strings ``"NaN"``, ``"Infinity"``, in
    lists and dicts too (a header's ``config``).

    Example:
        >>> [encode_value(v) for v in (1.5, float("nan"), float("-inf"))]
        [1.5, 'NaN', '-Infinity']
        >>> encode_value({"lr": float("inf"), "betas": [0.9, float("nan")]})
        {'lr': 'Infinity', 'betas': [0.9, 'NaN']}
    """
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {key: encode_value(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode_value(item) for item in value]
    return value


def decode_value(value: object) -> object:
    """Inverse of :func:`encode_value`.

    Example:
        >>> decode_value({"lr": "Infinity", "betas": [0.9, "NaN"]})
        {'lr': inf, 'betas': [0.9, nan]}
    """
    if value in ("NaN", "Infinity", "-Infinity"):
        return float(value.replace("Infinity", "inf"))
    if isinstance(value, dict):
        return {key: decode_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [decode_value(item) for item in value]
    return value


_NUMBERS = frozenset({int, float})
"""The types of JSON values that :func:`decode_value` returns as they are."""

DROPPED_KEYS = ("dropped_records", "dropped_steps")
"""The keys the first record a sink takes after a fault carries: ``dropped_records``, how
many records it missed since its last one, and ``dropped_steps``, their steps."""

DISABLED_KEY = "disabled"
"""The note of the first record written after the Monitor disabled quantities during the run
(one raised, or returned what it cannot log; a loss's call showed it cannot serve one):
``{name: why}``, each quantity once (a record of the note alone when no other comes, at the
latest at ``close()``; a watched call after the last ``monitor.step()`` that disabled one is
said by its warning alone: its step never closed). ``metrics.jsonl`` keeps it; the CSV,
TensorBoard, W&B and MLflow sinks, which hold numbers, leave it out (:attr:`Sink.keeps_notes`),
and where no sink of a run keeps it the Monitor's warning says so."""


def require_extra(module: str, extra: str, sink: str) -> None:
    """Raise a :class:`~gradlab.extras.MissingExtraError` (a GradlabError and an ImportError,
    as for the integrations and plotting) naming the extra when ``module`` is not installed.

    Args:
        module: the module the sink imports.
        extra: the extra that installs it.
        sink: the sink's name in :data:`SINKS` (the message names its class and that name).

    Example:
        >>> require_extra("json", "tensorboard", "tensorboard")  # installed: nothing happens
    """
    if not is_installed(module):
        own = SINKS.get(sink)  # defined below, read when a sink is made
        feature = f"{own.__name__ if own else sink} (sinks=[{sink!r}])"
        raise missing_extra(module, extra, feature)


def scalars(record: dict) -> dict[str, float]:
    """The numeric entries of a record other than ``step``, as floats (NaN/infinity kept).

    Example:
        >>> scalars({"step": 3, "loss": 0.5, "note": "x", "flag": True})
        {'loss': 0.5}
    """
    return {
        key: float(value)
        for key, value in record.items()
        if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool)
    }


class Sink:
    """A destination for records: :meth:`open`, :meth:`write` (a flat dict), :meth:`close`.

    Any method may raise (a full disk, a lost connection): the Monitor drops the record for
    that sink, warns once and retries at the next logged step; training goes on. The first
    record a sink takes after such a fault holds the
    :data:`DROPPED_KEYS` too.

    Attributes:
        patterns: glob patterns of the files this sink writes into the log folder (empty for
            sinks that write elsewhere, such as W&B and MLflow).
        failed: set True by the Monitor before :meth:`close` when training raised inside its
            ``with`` block: a run the sink started ends marked as failed (W&B's exit code 1,
            MLflow's ``FAILED``), as the trackers' own context managers mark it.
        keeps_notes: whether the sink keeps the Monitor's :data:`DISABLED_KEY` note: True for
            ``metrics.jsonl`` and a sink of your own (it takes the records whole), False for
            the CSV file and the :class:`NumericSink` sinks, which hold numbers alone. When no
            sink of a run keeps it, the Monitor's warning says that it is the only place the
            note is said.

    Example:
        >>> from gradlab.monitor import Sink
        >>> import tempfile, torch, gradlab
        >>> class ListSink(Sink):  # a sink of your own: records kept in memory
        ...     def __init__(self):
        ...         self.records = []
        ...     def write(self, record):
        ...         self.records.append(record)
        >>> sink = ListSink()
        >>> with gradlab.Monitor(tempfile.mkdtemp(), preset="cheap", every=1,
        ...                      sinks=[sink]) as monitor:
        ...     loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        ...     loss_fn(torch.randn(8, 4, requires_grad=True), torch.arange(8) % 2).backward()
        ...     _ = monitor.step()
        >>> [record["step"] for record in sink.records], "loss" in sink.records[0]
        ([0], True)
    """

    patterns: tuple[str, ...] = ()
    failed: bool = False
    keeps_notes: bool = True

    def existing(self, log_dir: Path) -> list[Path]:
        """Files of ``log_dir`` that this sink would append to: a previous run."""
        if not log_dir.is_dir():
            return []
        return sorted({path for pattern in self.patterns for path in log_dir.glob(pattern)})

    def last_step(self, log_dir: Path) -> int | None:
        """The last step a previous run logged in ``log_dir``, if this sink can read it back."""
        return None

    def location(self, log_dir: Path) -> str:
        """Where this sink's records go, as the warning of a fault names it: its file in
        ``log_dir`` (its ``filename``, if it has one), else ``log_dir``."""
        filename = getattr(self, "filename", None)
        return str(log_dir / filename if isinstance(filename, str) else log_dir)

    def open(self, log_dir: Path, header: dict) -> None:
        """Called once by the monitor with the log folder and the header record."""

    def write(self, record: dict) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def close(self) -> None:
        """Release files or writers."""


class NumericSink(Sink):
    """A sink that logs numbers alone (TensorBoard, W&B, MLflow, a Lightning Trainer's
    loggers): :meth:`write` passes a record's :func:`scalars` and its step to
    :meth:`write_scalars`. A record without a number (the Monitor's :data:`DISABLED_KEY` note
    alone) is not passed on, and the note itself is left out.

    Example:
        >>> class Printed(NumericSink):
        ...     def write_scalars(self, step, values):
        ...         print(step, values)
        >>> Printed().write({"step": 3, "loss": 0.5, "disabled": {"spread": "step 3: ..."}})
        3 {'loss': 0.5}
        >>> Printed().write({"step": 4, "disabled": {"spread": "step 4: ..."}})  # nothing
    """

    keeps_notes = False

    def write(self, record: dict) -> None:
        values = scalars(record)
        if values:  # else the Monitor's note of disabled quantities alone: no number to log
            self.write_scalars(int(record["step"]), values)

    def write_scalars(self, step: int, values: dict[str, float]) -> None:  # pragma: no cover
        """Log ``values`` (a record's numbers, ``step`` left out; never empty) at ``step``."""
        raise NotImplementedError


class JSONLSink(Sink):
    """``metrics.jsonl``: a header record, then one object per logged step, each appended whole.

    A resumed run appends (a new header, holding ``"resumed"``, marks where it starts), so a
    crash loses at most the record being written. A last line that a killed writer left cut
    short (no line end, not a whole JSON object) is removed when the file is opened again, as
    the CSV sink removes its cut row: the resumed run writes that step again and every line
    stays strict JSON (a whole object missing only its line end is kept, the line ended). The
    first record after a fault holds ``dropped_records`` and ``dropped_steps`` (see the module
    docstring).

    Example:
        >>> from gradlab.monitor import JSONLSink, read_jsonl
        >>> import tempfile, torch, gradlab
        >>> folder = tempfile.mkdtemp()
        >>> with gradlab.Monitor(folder, preset="cheap", every=1,
        ...                      sinks=[JSONLSink()]) as monitor:
        ...     loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        ...     loss_fn(torch.randn(8, 4, requires_grad=True), torch.arange(8) % 2).backward()
        ...     _ = monitor.step()
        >>> headers, records = read_jsonl(f"{folder}/metrics.jsonl")
        >>> len(headers), [record["step"] for record in records]
        (1, [0])
    """

    def __init__(self, filename: str = "metrics.jsonl") -> None:
        self.filename = filename
        self.patterns = (glob.escape(filename),)  # the very name, not a glob
        self.handle = None

    def last_step(self, log_dir: Path) -> int | None:
        path = log_dir / self.filename
        if not path.is_file():
            return None
        return last_jsonl_step(path)

    def open(self, log_dir: Path, header: dict) -> None:
        path = log_dir / self.filename
        unended = path.is_file() and path.stat().st_size > 0 and not _ends_with_newline(path)
        complete = _complete_size(path) if unended else 0
        if unended and not _is_an_object(path, complete):  # a killed writer's: never whole
            removed = path.stat().st_size - complete
            os.truncate(path, complete)
            unended = False
            warnings.warn(
                f"gradlab.Monitor: removed the last line of {str(path)!r} ({removed} bytes with "
                "no line end that are not a whole JSON object: a write cut short by a killed "
                "process), so that every line is JSON; the run goes on after the last whole "
                "record, and logs the cut record's step again if its schedule logs that step",
                UserWarning,
                stacklevel=caller_stacklevel(),
            )
        self.handle = _open_append(path)
        _append_or_close(self, (b"\n" if unended else b"") + _json_line({"header": header}))

    def write(self, record: dict) -> None:
        _append(self.handle, _json_line(record))

    def close(self) -> None:
        if self.handle is not None:
            handle, self.handle = self.handle, None
            handle.close()


def records_text(steps: list[int]) -> str:
    """How many records ``steps`` are, and their first and last step (in warnings of the run
    folder and of the sinks).

    Example:
        >>> records_text([7]), records_text([3, 4, 9])
        ('1 record (step 7)', '3 records (steps 3 to 9)')
    """
    if len(steps) == 1:
        return f"1 record (step {steps[0]})"
    return f"{len(steps)} records (steps {steps[0]} to {steps[-1]})"


def _json_line(record: dict) -> bytes:
    # A record's values are mostly finite floats: only the others go through encode_value.
    encoded = {key: value if type(value) is float and math.isfinite(value)
               else encode_value(value) for key, value in record.items()}  # fmt: skip
    return (json.dumps(encoded) + "\n").encode("utf-8")


def _open_append(path: Path):
    """``path`` opened to append, unbuffered: each write reaches the file system at once."""
    return open(path, "ab", buffering=0)


def _append(handle, data: bytes) -> None:
    """Append ``data`` to the file ``handle`` whole or not at all: a write that fails part way
    (a full disk writes what fits, then raises) is cut back to where it started, then raised."""
    start = os.fstat(handle.fileno()).st_size
    try:
        view = memoryview(data)
        while view:
            view = view[handle.write(view) :]
    except BaseException:
        with contextlib.suppress(OSError):
            os.ftruncate(handle.fileno(), start)
        raise


def _append_or_close(sink: JSONLSink, data: bytes) -> None:
    """:func:`_append` into ``sink.handle``; if that fails, the handle is closed (the sink is
    not open) and the error raised."""
    try:
        _append(sink.handle, data)
    except BaseException:
        handle, sink.handle = sink.handle, None
        with contextlib.suppress(OSError):
            handle.close()
        raise


def _is_an_object(path: Path, start: int) -> bool:
    """Whether the bytes of ``path`` from ``start`` on (its last line) are a whole JSON object."""
    with path.open("rb") as handle:
        handle.seek(start)
        try:  # bytes that are not UTF-8 in a whole object (a hand edit) keep it: not cut short
            return isinstance(json.loads(handle.read().decode("utf-8", "surrogateescape")), dict)
        except ValueError:  # cut short
            return False


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as handle:
        handle.seek(-1, 2)
        return handle.read(1) == b"\n"


def _complete_size(path: Path, block: int = 1 << 16) -> int:
    """The size of ``path`` up to and including its last line end (0 if it has none)."""
    with path.open("rb") as handle:
        end = handle.seek(0, 2)
        while end > 0:
            start = max(0, end - block)
            handle.seek(start)
            found = handle.read(end - start).rfind(b"\n")
            if found >= 0:
                return start + found + 1
            end = start
    return 0


def _complete_lines(path: Path) -> Iterator[str]:
    """The lines of ``path`` that end with a line end (a last line cut short is left out)."""
    with path.open("rb") as handle:
        for line in handle:
            if line.endswith(b"\n"):
                yield line.decode("utf-8")


def _note_alone(record: dict) -> bool:
    """Whether ``record`` holds the Monitor's :data:`DISABLED_KEY` note and no value: the CSV
    file has no row for it."""
    return DISABLED_KEY in record and record.keys() - {DISABLED_KEY, *DROPPED_KEYS} == {"step"}


class CSVSink(Sink):
    """``metrics.csv``: one row per logged step; the columns are the first record's keys.

    A record with keys the header lacks (a quantity on a sparser schedule than the first
    record's, a resumed run with more quantities) widens it: the file is rewritten under the
    wider header, the earlier rows' new cells empty, beside itself and moved over it whole
    (a writer killed before the move leaves that copy, ``.metrics.csv.widened``: opening the
    folder again removes it, the CSV file itself being whole).
    A reopened file (``resume=True``) keeps its header row and its columns: the new run's
    records are written under the old header (columns a record lacks stay empty), so no row
    is shifted against the header. A last row cut short by a killed
    writer (no line end) is incomplete: :meth:`last_step` ignores it and reopening the file
    removes it, so that no row is left half empty; the steps the file then lacks before the
    step the run resumes at (that row's, or rows never written: a process killed between the
    two files' writes, or a run resumed without this sink) are copied from the
    ``metrics.jsonl`` beside it, with a warning, and a resumed run writes the others again. A
    resumption from a checkpoint before the last row writes those steps again below it: the
    rows that stand are those whose step is below every later row's step (what ``gradlab plot``
    keeps of the same run's ``metrics.jsonl``). NaN and
    infinities are written as ``nan``, ``inf``, ``-inf`` (``float()`` reads them back). Steps
    the sink missed after a fault are written, before the next record, as rows holding only
    their step (every other value empty); the Monitor's :data:`DISABLED_KEY` note is left
    out, and a record of that note alone gets no row.

    Example:
        >>> import csv, tempfile, torch, gradlab
        >>> folder = tempfile.mkdtemp()
        >>> with gradlab.Monitor(folder, preset="cheap", every=1, sinks=["csv"]) as monitor:
        ...     loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        ...     for _ in range(2):
        ...         loss_fn(torch.randn(8, 4, requires_grad=True), torch.arange(8) % 2).backward()
        ...         _ = monitor.step()
        >>> with open(f"{folder}/metrics.csv", newline="") as handle:
        ...     rows = list(csv.DictReader(handle))
        >>> [row["step"] for row in rows], "loss" in rows[0]
        (['0', '1'], True)
    """

    keeps_notes = False  # a table of numbers: the note has no column (see the class docstring)

    def __init__(self, filename: str = "metrics.csv") -> None:
        self.filename = filename
        self.patterns = (glob.escape(filename),)  # the very name, not a glob
        self.handle = None
        self.writer = None
        self.columns: list[str] | None = None  # the header of a reopened file
        self._buffer = io.StringIO()
        self._header_due = True

    def last_step(self, log_dir: Path) -> int | None:
        path = log_dir / self.filename
        if not path.is_file():
            return None
        # the last row's step (a run gone back to a checkpoint goes on from there, as in
        # last_jsonl_step), not the largest
        last = None
        for row in csv.DictReader(_complete_lines(path)):
            if row.get("step"):
                last = int(float(row["step"]))
        return last

    def open(self, log_dir: Path, header: dict) -> None:
        path = self.path = log_dir / self.filename
        # A sink object can serve one run after another: nothing of the last file carries over.
        self.writer, self.columns = None, None
        # A writer killed while widening leaves its rewrite beside the file, which still holds
        # every complete row (the rewrite had not replaced it): the Monitor holds the folder's
        # lock, so the stale copy is no one's and goes.
        with contextlib.suppress(FileNotFoundError):
            self._widened(log_dir).unlink()
        removed, existed = 0, path.is_file() and path.stat().st_size > 0
        if path.is_file():
            complete = _complete_size(path)
            removed = path.stat().st_size - complete
            if removed:  # a killed writer's last row: incomplete
                os.truncate(path, complete)
            if complete:
                self.columns = next(csv.reader(_complete_lines(path)), None)
        self._header_due = self.columns is None
        self.handle = _open_append(path)
        resumed = header.get("resumed") if isinstance(header, dict) else None
        start = resumed.get("from_step") if isinstance(resumed, dict) else None
        # the run's JSONL, as the header lists its sinks' files (a JSONL sink of another name)
        sinks = header.get("sinks") if isinstance(header, dict) else None
        journal = next((name for name in sinks if isinstance(name, str)
                        and name.endswith(".jsonl")), "metrics.jsonl") if isinstance(
            sinks, list) else "metrics.jsonl"  # fmt: skip
        if existed:
            self._resume_missing_steps(log_dir, start if _is_step(start) else None, removed,
                                       journal=journal)  # fmt: skip
        elif _is_step(start):  # new in a resumed run (logged without it): the run's records
            self._resume_missing_steps(log_dir, start, removed, new=True, journal=journal)

    def _resume_missing_steps(self, log_dir: Path, start: int | None, removed: int,
                              new: bool = False, journal: str = "metrics.jsonl") -> None:
        """Copy into the reopened file the records of ``metrics.jsonl`` for the steps it lacks
        before ``start``, the step the run resumes at (a row cut by a killed writer, removed
        here, or one never written: killed between the two files' writes; ``new``: the file is
        new in this resumption, the run logged without it), and say so; a cut row is otherwise
        logged again, when the run resumes at or before it and its schedule logs that step,
        or lost."""
        last = self.last_step(log_dir)  # of the complete rows
        first_missing = 0 if last is None else last + 1
        copied: list[int] = []
        log = log_dir / journal
        if start is not None and first_missing < start and log.is_file():
            held: dict[int, dict] = {}
            with warnings.catch_warnings():  # its own sink reports a cut line
                warnings.simplefilter("ignore")
                for _, records in read_segments(log):
                    for record in records:  # the later record of a step stands
                        if first_missing <= record["step"] < start and not _note_alone(record):
                            held[record["step"]] = record
            copied = sorted(held)
            for step in copied:
                self.write(held[step])
        steps = ", ".join(map(str, copied))
        if removed:
            if copied:
                fate = (f"the run resumes at step {start}, and the steps it lacks before that "
                        f"({steps}) are copied from {str(log)!r}")  # fmt: skip
            elif start is None or start <= first_missing:
                fate = ("the run goes on after the last whole row, and logs the cut row's step "
                        "again if its schedule logs that step")
            else:
                one = start == first_missing + 1
                lost = (f"step {first_missing} is" if one
                        else f"steps {first_missing}-{start - 1} are")  # fmt: skip
                fate = (f"the run resumes at step {start}, after it: {lost} not in it (no "
                        f"{journal} beside it holds {'it' if one else 'them'})")
            warnings.warn(
                f"gradlab.Monitor: removed the last row of {str(self.path)!r} ({removed} bytes "
                "with no line end: a write cut short by a killed process), so that no row is "
                f"left half empty; {fate}",
                UserWarning,
                stacklevel=caller_stacklevel(),
            )
        elif copied and new:
            warnings.warn(
                f"gradlab.Monitor: {str(self.path)!r} is new in this resumed run: the run's "
                f"{records_text(copied)} before step {start} are copied into it from "
                f"{str(log)!r}, so that it holds the whole run",
                UserWarning,
                stacklevel=caller_stacklevel(),
            )
        elif copied:
            warnings.warn(
                f"gradlab.Monitor: {str(self.path)!r} lacks steps that {str(log)!r} holds "
                f"({steps}), before the step the run resumes at ({start}): a process killed "
                "between the two files' writes, or a run resumed without the CSV sink; they "
                "are copied from it",
                UserWarning,
                stacklevel=caller_stacklevel(),
            )

    def write(self, record: dict) -> None:
        missed = record.get("dropped_steps") or ()
        # the Monitor's note alone gets no row: one holding only its step reads as a missed step
        note_alone = _note_alone(record)
        if missed or "dropped_records" in record or DISABLED_KEY in record:
            record = {key: value for key, value in record.items()
                      if key not in DROPPED_KEYS and key != DISABLED_KEY}  # fmt: skip
        if note_alone and not missed:
            return
        if self.writer is None:
            self.writer = csv.DictWriter(
                self._buffer, fieldnames=self.columns or list(record), extrasaction="ignore"
            )
        added = [key for key in record if key not in self.writer.fieldnames]
        if added and not self._header_due:
            self._widen(added)
        elif added:  # a reopened file's header not yet written: none exists to rewrite
            self.writer.fieldnames = [*self.writer.fieldnames, *added]
        self._buffer.seek(0)
        self._buffer.truncate()
        if self._header_due:
            self.writer.writeheader()
        for step in missed:
            self.writer.writerow({"step": step})
        if not note_alone:
            self.writer.writerow(record)
        _append(self.handle, self._buffer.getvalue().encode("utf-8"))
        self._header_due = False

    def _widened(self, log_dir: Path) -> Path:
        """The file a widening writes before it is moved over the CSV file."""
        return log_dir / f".{self.filename}.widened"

    def _widen(self, added: list[str]) -> None:
        """Rewrite the file under a header with the ``added`` columns, the earlier rows' new
        cells empty. Written beside the file and moved over it whole (the file is the old one
        or the new one, and no temporary file is left behind when it fails)."""
        columns = [*self.writer.fieldnames, *added]
        rows = list(csv.reader(_complete_lines(self.path)))
        text = io.StringIO()
        writer = csv.writer(text)
        writer.writerow(columns)
        writer.writerows(row + [""] * (len(columns) - len(row)) for row in rows[1:])
        temporary = self._widened(self.path.parent)
        try:
            temporary.write_bytes(text.getvalue().encode("utf-8"))
            os.replace(temporary, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                temporary.unlink()
            raise
        handle, self.handle = self.handle, _open_append(self.path)
        handle.close()
        self.writer.fieldnames = columns

    def close(self) -> None:
        if self.handle is not None:
            handle, self.handle = self.handle, None
            handle.close()


EVENT_SUFFIX = ".gradlab"
"""The end of the name of every event file the TensorBoard sink writes, which tells them apart
from the event files of other writers in the same folder (TensorBoard reads every file whose
name holds ``tfevents``)."""


class TensorBoardSink(NumericSink):
    """TensorBoard event files in the log folder (the ``tensorboard`` extra).

    A record is one event holding all its scalars (``SummaryWriter.add_scalar`` writes one event
    per scalar, several times slower for a preset's keys), appended to the run's event file as
    it is written, whole or not at all, by the process that logs it (no writer thread). A write
    that fails (a full disk) is cut back and raised, and the next record goes into the same
    file once the file system recovers; an event file whose ``open`` fails is removed, so a
    folder retried at every step while the disk is full gains no empty files.

    Its event files end with :data:`EVENT_SUFFIX` (``events.out.tfevents.<time>.<host>.<pid>.<n>
    .gradlab``): only they, and those an earlier gradlab wrote without it
    (:func:`gradlab_event_files`), are a run's files; the event files of another writer in the
    folder (a ``SummaryWriter`` of yours) are never listed, resumed or removed.

    Its tags are the keys of ``metrics.jsonl``, each after ``prefix``. TensorBoard shows every
    event file of a folder as one run, so a ``SummaryWriter`` of yours that writes into the
    log folder shares its tags: your ``loss`` and gradlab's would be one line. Where the
    folder holds another writer's event files when the sink opens, it warns unless a prefix
    keeps the tags apart (``TensorBoardSink(prefix="gradlab/")``).

    Args:
        prefix: prepended to every tag (default: none, the keys as they are).

    Raises:
        GradlabError: ``prefix`` is not a string.

    Example:
        >>> from gradlab.monitor import TensorBoardSink
        >>> TensorBoardSink().patterns  # the files a previous run left in the log folder
        ('events.out.tfevents.*.gradlab',)
        >>> TensorBoardSink(prefix="gradlab/").prefix
        'gradlab/'
    """

    patterns = (f"events.out.tfevents.*{EVENT_SUFFIX}",)

    def __init__(self, prefix: str = "") -> None:
        require_extra("tensorboard", "tensorboard", "tensorboard")
        if not isinstance(prefix, str):
            raise GradlabError(f"prefix must be a string; got {prefix!r}")
        self.prefix = prefix
        self.handle = None
        self.path: Path | None = None

    def existing(self, log_dir: Path) -> list[Path]:
        """The event files of ``log_dir`` that gradlab wrote (:func:`gradlab_event_files`)."""
        return gradlab_event_files(log_dir)

    def open(self, log_dir: Path, header: dict) -> None:
        from tensorboard.compat.proto.event_pb2 import Event, SessionLog
        from torch.utils.tensorboard.summary import text

        own = set(gradlab_event_files(log_dir))  # read once, not once per file listed
        others = [path for path in log_dir.glob("events.out.tfevents.*")
                  if path.is_file() and path not in own]
        if others and not self.prefix:  # one run in TensorBoard: shared tags become one line
            warnings.warn(
                f"gradlab.Monitor: {str(log_dir)!r} holds event files of another TensorBoard "
                f"writer ({others[0].name}, a SummaryWriter of yours?): TensorBoard shows every "
                "event file of a folder as one run, so a tag it writes under one of gradlab's "
                "keys (loss, ...) becomes one line with gradlab's; pass "
                "sinks=[TensorBoardSink(prefix='gradlab/')], or write yours into another folder",
                UserWarning,
                stacklevel=caller_stacklevel(),
            )
        self.path, self.handle = _new_event_file(log_dir)
        first = Event(wall_time=time.time(), file_version="brain.Event:2")
        described = Event(wall_time=time.time(), summary=text("gradlab/header", json.dumps(header)))
        events = _tfrecord(first) + _tfrecord(described)
        resumed = header.get("resumed") if isinstance(header, dict) else None
        start = resumed.get("from_step") if isinstance(resumed, dict) else None
        if _is_step(start):  # a restart at its first step, as SummaryWriter(purge_step=) marks
            # one: TensorBoard drops the earlier files' events from that step on, so a run
            # resumed from an earlier checkpoint is not drawn twice over the steps it redoes
            events += _tfrecord(Event(wall_time=time.time(), step=start,
                                      session_log=SessionLog(status=SessionLog.START)))  # fmt: skip
        try:
            _append(self.handle, events)
        except BaseException:
            handle, self.handle = self.handle, None
            with contextlib.suppress(OSError):
                handle.close()
            with contextlib.suppress(OSError):
                self.path.unlink()  # empty (cut back): a retried open makes another
            raise

    def write_scalars(self, step: int, values: dict[str, float]) -> None:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary

        summary = Summary(value=[Summary.Value(tag=f"{self.prefix}{key}", simple_value=value)
                                 for key, value in values.items()])  # fmt: skip
        event = Event(wall_time=time.time(), step=step, summary=summary)
        _append(self.handle, _tfrecord(event))

    def close(self) -> None:
        if self.handle is not None:
            handle, self.handle = self.handle, None
            handle.close()


def _new_event_file(log_dir: Path):
    """A new event file of ``log_dir``, named as TensorBoard's writer names one with the
    ``filename_suffix`` :data:`EVENT_SUFFIX`, and its handle (:func:`_open_append`); created
    exclusively, so no other writer's file is appended to."""
    for uid in itertools.count():
        name = (f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}."
                f"{os.getpid()}.{uid}{EVENT_SUFFIX}")  # fmt: skip
        with contextlib.suppress(FileExistsError):
            open(log_dir / name, "xb").close()
            return log_dir / name, _open_append(log_dir / name)
    raise AssertionError("unreachable")  # pragma: no cover


def gradlab_event_files(log_dir: Path) -> list[Path]:
    """The event files of ``log_dir`` that gradlab's TensorBoard sink wrote: those whose name
    ends with :data:`EVENT_SUFFIX`, and those of a gradlab that named them without it, told
    from another writer's by the run header they hold as their second event (the
    ``gradlab/header`` text), so that a run logged before stays a run: refused, resumed or
    replaced whole. The event files of other writers (a ``SummaryWriter`` of yours, a trainer's
    logger) are left out.

    Example:
        >>> import tempfile
        >>> from pathlib import Path
        >>> folder = Path(tempfile.mkdtemp())
        >>> for name in ("events.out.tfevents.1.a.7.0.gradlab", "events.out.tfevents.1.a.8.0"):
        ...     _ = (folder / name).write_bytes(b"")
        >>> [path.name for path in gradlab_event_files(folder)]  # the other is no header's
        ['events.out.tfevents.1.a.7.0.gradlab']
    """
    if not log_dir.is_dir():
        return []
    return sorted(path for path in log_dir.glob("events.out.tfevents.*") if path.is_file()
                  and (path.name.endswith(EVENT_SUFFIX) or _holds_run_header(path)))  # fmt: skip


_HEADER_TAG = b"gradlab/header/text_summary"
"""The tag of the run header's event (the text summary ``gradlab/header``), as its bytes."""


def _holds_run_header(path: Path) -> bool:
    """Whether the second record of the event file ``path`` is gradlab's run header: the
    sink's first two events (the file version, then the header); the tag is near the start
    of the record, so only its first bytes are read."""
    try:
        with path.open("rb") as handle:
            data = b""
            for _ in range(2):
                frame = handle.read(12)  # the record's length (8 bytes) and its checksum
                if len(frame) < 12:
                    return False
                length = int.from_bytes(frame[:8], "little")
                data = handle.read(min(length, 256))
                handle.seek(length - len(data) + 4, 1)  # the rest, and the data's checksum
            return _HEADER_TAG in data
    except OSError:
        return False


def _tfrecord(event) -> bytes:
    """``event`` framed as one record of an event file (length, data, their checksums)."""
    from tensorboard.summary.writer.record_writer import RecordWriter

    buffer = io.BytesIO()
    RecordWriter(buffer).write(event.SerializeToString())
    return buffer.getvalue()


_PREFIX = "gradlab/"
"""The key prefix of the W&B and MLflow sinks by default."""


class WandbSink(NumericSink):
    """Weights & Biases: log into the active run (``wandb.run``) or start one.

    Keys are ``prefix + key`` of ``metrics.jsonl``; the step is logged as the metric
    ``prefix + "step"`` and declared the x-axis of every ``prefix + "*"`` key
    (``wandb.define_metric``), so the plots show the Monitor's steps even when the run is
    shared with a training framework that advances W&B's own ``_step``. Each record is one
    ``run.log`` call, which advances ``_step`` too: in a shared run, log your own values without
    ``step=`` (W&B drops a step below its current one). NaN and infinities are
    logged as they are. A run this sink started (``wandb.init(dir=log_dir, config=header,
    **init_kwargs)``) is finished by :meth:`close`; an active run is left open.

    Needs ``pip install 'gradlab-ranking[wandb]'``. Runs offline with ``WANDB_MODE=offline``.

    Args:
        prefix: prepended to every key, so gradlab's ``loss`` never collides with the
            training loop's own.
        **init_kwargs: passed to ``wandb.init`` when no run is active (``project``, ``id``,
            ``resume``, ``mode``...); their names are checked against ``wandb.init``'s own
            keywords when the sink is made (which imports ``wandb`` then).

    Raises:
        GradlabError: ``prefix`` is not a string, or an option is no keyword of ``wandb.init``.

    Example:
        >>> from gradlab.monitor import WandbSink
        >>> sink = WandbSink(prefix="diagnostics/", project="retrieval", mode="offline")
        >>> sink.prefix, sink.init_kwargs  # wandb.init runs at the Monitor's first record
        ('diagnostics/', {'project': 'retrieval', 'mode': 'offline'})
    """

    def __init__(self, prefix: str = _PREFIX, **init_kwargs) -> None:
        require_extra("wandb", "wandb", "wandb")
        if not isinstance(prefix, str):
            raise GradlabError(f"prefix must be a string; got {prefix!r}")
        _check_init_options(init_kwargs)
        self.prefix = prefix
        self.init_kwargs = init_kwargs
        self.run = None
        self.owned = False

    def location(self, log_dir: Path) -> str:
        """The run's folder (``run.dir``), else the folder ``wandb.init`` writes runs into
        (``<dir>/wandb``; ``dir`` is ``log_dir`` unless given)."""
        if self.run is not None:
            return str(self.run.dir)
        return str(Path(self.init_kwargs.get("dir", log_dir)).resolve() / "wandb")

    def open(self, log_dir: Path, header: dict) -> None:
        wandb = importlib.import_module("wandb")
        self.run = wandb.run
        self.owned = self.run is None
        # the folder whose log this run mirrors: a resumption's new run, and the earlier one,
        # name the same folder (their headers alone do not say which log they are parts of)
        config = {"gradlab": header, "gradlab_log_dir": str(log_dir.resolve())}
        if self.owned:
            options = {"dir": str(log_dir.resolve()), "config": config,
                       **self.init_kwargs}  # absolute: W&B's service has its own working dir
            self.run = wandb.init(**options)
        else:
            self.run.config.update(config, allow_val_change=True)
        self.run.define_metric(f"{self.prefix}step")
        self.run.define_metric(f"{self.prefix}*", step_metric=f"{self.prefix}step")

    def write_scalars(self, step: int, values: dict[str, float]) -> None:
        logged = {f"{self.prefix}{key}": value for key, value in values.items()}
        logged[f"{self.prefix}step"] = step
        self.run.log(logged)

    def close(self) -> None:
        if self.run is not None and self.owned:
            self.run.finish(exit_code=1 if self.failed else 0)
        self.run = None


def _check_init_options(options: dict) -> None:
    """Each name of ``options`` is a keyword of ``wandb.init`` (read from its signature, which
    imports ``wandb``; nothing is checked when no option is given or ``wandb.init`` takes any
    keyword)."""
    if not options:
        return
    try:
        parameters = inspect.signature(importlib.import_module("wandb").init).parameters
    except (TypeError, ValueError):  # no signature to read
        return
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    if any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters.values()):
        return
    allowed = [name for name, parameter in parameters.items() if parameter.kind in kinds]
    unknown = [name for name in options if name not in allowed]
    if unknown:
        raise GradlabError(
            f"WandbSink options must be among wandb.init's keywords {allowed}; got {unknown}"
        )


MLFLOW_TAG_LENGTH = 5000
"""The characters of one MLflow tag that :class:`MLflowSink` writes: MLflow cuts a tag's value
past its limit (8,000 characters in MLflow 3.18, where a header with 20 quantities of one's own
reached 8,852)."""


class MLflowSink(NumericSink):
    """MLflow: log into the active run (``mlflow.active_run()``) or start one.

    A new run is started against the configured tracking URI (``MLFLOW_TRACKING_URI`` or
    ``mlflow.set_tracking_uri``; ``tracking_uri`` overrides it) in ``experiment`` if given, and
    ended by :meth:`close`; an active run is left open. Keys are ``prefix + key`` of
    ``metrics.jsonl`` and MLflow's ``step`` is the Monitor's step; the header is stored as the
    run tag ``gradlab.header`` (JSON in tags of at most :data:`MLFLOW_TAG_LENGTH`
    characters, which MLflow keeps whole: a longer header continues in ``gradlab.header.1``,
    ``gradlab.header.2``, ...; join them in order). NaN
    and infinities are logged as they are: MLflow's file store
    keeps both, its SQL stores keep NaN and store +-infinity as +-1.797e308 (MLflow's own
    behaviour).

    Needs ``pip install 'gradlab-ranking[mlflow]'``.

    Args:
        prefix: prepended to every key.
        tracking_uri: a tracking URI for a run this sink starts (default: MLflow's configured
            one); set with ``mlflow.set_tracking_uri``, so it stays MLflow's URI afterwards.
            A local path, or a URI whose scheme MLflow supports: the scheme is checked when the
            sink is made (which imports ``mlflow`` then) against the stores MLflow has
            registered, its plugins' included; whether the store can be reached is not (that
            needs the network or the store itself), and a fault there is warned about at the
            first record, naming the URI.

    Raises:
        GradlabError: ``prefix`` is not a string; ``tracking_uri`` is not a string or a path,
            or its scheme is no store's of MLflow.
        experiment: experiment name for a run this sink starts (default: MLflow's active one).
        run_name: name of a run this sink starts.

    Example:
        >>> from gradlab.monitor import MLflowSink
        >>> sink = MLflowSink(experiment="retrieval", run_name="smoothap-tau-0.01")
        >>> sink.prefix, sink.experiment  # the run starts at the Monitor's first record
        ('gradlab/', 'retrieval')
    """

    def __init__(
        self,
        prefix: str = _PREFIX,
        tracking_uri: str | None = None,
        experiment: str | None = None,
        run_name: str | None = None,
    ) -> None:
        require_extra("mlflow", "mlflow", "mlflow")
        if not isinstance(prefix, str):
            raise GradlabError(f"prefix must be a string; got {prefix!r}")
        _check_tracking_uri(tracking_uri)
        self.prefix = prefix
        self.tracking_uri = tracking_uri
        self.experiment = experiment
        self.run_name = run_name
        self.run_id: str | None = None
        self.owned = False

    def location(self, log_dir: Path) -> str:
        """The tracking URI of the run's store: ``tracking_uri`` for a run this sink starts,
        else the one MLflow is set to (``log_dir`` holds none of it)."""
        if self.tracking_uri is not None and (self.owned or self.run_id is None):
            return str(self.tracking_uri)
        return str(importlib.import_module("mlflow").get_tracking_uri())

    def open(self, log_dir: Path, header: dict) -> None:
        mlflow = importlib.import_module("mlflow")
        active = mlflow.active_run()
        self.owned = active is None
        if self.owned:
            if self.tracking_uri is not None:
                mlflow.set_tracking_uri(self.tracking_uri)
            if self.experiment is not None:
                mlflow.set_experiment(self.experiment)
            active = mlflow.start_run(run_name=self.run_name)
        self.run_id = active.info.run_id
        self.client = mlflow.tracking.MlflowClient()
        # the folder whose log this run mirrors: a resumption's new run, and the earlier one,
        # name the same folder (their headers alone do not say which log they are parts of)
        self.client.set_tag(self.run_id, "gradlab.log_dir", str(log_dir.resolve()))
        text = json.dumps(header)
        parts = range(0, max(len(text), 1), MLFLOW_TAG_LENGTH)
        for index, start in enumerate(parts):
            name = "gradlab.header" + (f".{index}" if index else "")
            self.client.set_tag(self.run_id, name, text[start:start + MLFLOW_TAG_LENGTH])
        # an active run another Monitor logged into may hold more parts of a longer header
        for name in self.client.get_run(self.run_id).data.tags:
            suffix = name.removeprefix("gradlab.header.")
            if suffix != name and suffix.isdigit() and int(suffix) >= len(parts):
                self.client.delete_tag(self.run_id, name)

    def write_scalars(self, step: int, values: dict[str, float]) -> None:
        from mlflow.entities import Metric

        timestamp = int(time.time() * 1000)
        metrics = [Metric(f"{self.prefix}{key}", value, timestamp, step)
                   for key, value in values.items()]  # fmt: skip
        self.client.log_batch(self.run_id, metrics=metrics)

    def close(self) -> None:
        if self.run_id is not None and self.owned:
            mlflow = importlib.import_module("mlflow")
            active = mlflow.active_run()
            status = "FAILED" if self.failed else "FINISHED"
            if active is not None and active.info.run_id == self.run_id:
                mlflow.end_run(status=status)
            else:
                self.client.set_terminated(self.run_id, status=status)
        self.run_id = None


def _check_tracking_uri(uri: object) -> None:
    """``uri`` is None, a path, or a URI whose scheme a store registered with MLflow takes,
    as MLflow resolves it to a store (offline, building nothing). An MLflow without that
    registry leaves the URI to be checked when the run starts."""
    if uri is None:
        return
    if not isinstance(uri, (str, Path)):
        raise GradlabError(f"tracking_uri must be a local path or a URI string; got {uri!r}")
    try:
        from mlflow.tracking._tracking_service.utils import _tracking_store_registry as stores
        from mlflow.tracking.registry import UnsupportedModelRegistryStoreURIException
    except ImportError:  # pragma: no cover - another MLflow
        return
    try:
        stores.get_store_builder(str(uri))
    except UnsupportedModelRegistryStoreURIException as error:
        schemes = ", ".join(scheme for scheme in error.supported_uri_schemes if scheme)
        raise GradlabError(
            f"tracking_uri must be a local path or a URI of a scheme MLflow supports "
            f"({schemes}); got {str(uri)!r}"
        ) from None


RUN_FILES = ("metrics.jsonl", "metrics.csv")
"""Names of the files the sinks write into a log folder by default: a folder holding any of
them, or an event file of gradlab's (:func:`gradlab_event_files`), holds a run, whichever sinks
the next Monitor there uses."""

SINKS = {
    "jsonl": JSONLSink,
    "csv": CSVSink,
    "tensorboard": TensorBoardSink,
    "wandb": WandbSink,
    "mlflow": MLflowSink,
}
"""Sink classes by name (``Monitor(sinks=["jsonl", "csv"])``)."""


def sink_kinds(sinks: Sequence[Sink | str]) -> set[str]:
    """The names of :data:`SINKS` among ``sinks``, given by name or as objects (a subclass
    counts as its kind): the backends a framework's own loggers may also write to.

    Example:
        >>> sorted(sink_kinds(["jsonl", CSVSink("copy.csv")]))
        ['csv', 'jsonl']
    """
    return {name for name, kind in SINKS.items() for sink in sinks
            if sink == name or isinstance(sink, kind)}  # fmt: skip


def destinations(sink: Sink | str) -> tuple[str, ...]:
    """Where ``sink`` writes its records, as the Monitor compares its sinks: two sinks that
    share a destination would write every record twice, and are refused. A name of
    :data:`SINKS` stands for the sink it makes, with its defaults.

    Two sinks are of the same kind when they write to the same place, however they are given
    (a name or an object): file sinks that write one file of ``log_dir`` (their
    :attr:`~Sink.patterns`: two JSONL sinks of one file name append to one ``metrics.jsonl``,
    while ``JSONLSink("train.jsonl")`` beside ``"jsonl"`` writes a file of its own); any two
    TensorBoard sinks (each writes an event file of its own, and TensorBoard shows the event
    files of a folder as one run, each step twice); W&B or MLflow sinks with one key prefix,
    whatever their other options: both log into the tracker's one active run (a second sink
    finds the run the first started), under the same keys. A sink of your own shares a
    destination only through ``patterns`` that name one file (a glob such as ``"*.npz"`` names
    the files it may write, not where two sinks meet: sinks that write ``a.npz`` and ``b.npz``
    are two); one that declares no ``patterns`` shares none.

    Example:
        >>> destinations("jsonl") == destinations(JSONLSink()), destinations(JSONLSink("a.jsonl"))
        (True, ("'a.jsonl' in log_dir",))
    """
    if isinstance(sink, str):
        cls = SINKS[sink]
        if cls in (JSONLSink, CSVSink):  # needs no extra: made as the name makes it
            return destinations(cls())
        return _destinations(cls, cls.patterns, _PREFIX)
    filename = getattr(sink, "filename", None)  # a file sink's one file, whatever its name
    if isinstance(filename, str) and not isinstance(sink, (TensorBoardSink, WandbSink,
                                                           MLflowSink)):  # fmt: skip
        return (f"{filename!r} in log_dir",)
    return _destinations(type(sink), sink.patterns, getattr(sink, "prefix", None))


def _destinations(cls: type, patterns: tuple[str, ...], prefix: str | None) -> tuple[str, ...]:
    if issubclass(cls, TensorBoardSink):
        return ("TensorBoard event files into log_dir (TensorBoard shows them as one run)",)
    if issubclass(cls, (WandbSink, MLflowSink)):
        tracker = "W&B" if issubclass(cls, WandbSink) else "MLflow"
        return (f"the {prefix + '*'!r} keys of the active {tracker} run",)
    return tuple(f"{pattern!r} in log_dir" for pattern in patterns
                 if not any(wild in pattern for wild in "*?["))  # one file, not a glob


def _is_step(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _why_unreadable(raw: bytes) -> tuple[str | None, object]:
    """``(None, object)`` for a line holding a header or a record, else ``(reason, None)``."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "not UTF-8 text", None
    try:
        value = json.loads(line)
    except json.JSONDecodeError:
        if raw.endswith(b"\n"):  # a whole line: no write of gradlab's was cut short there
            return "not valid JSON (a line edited by hand, or written by another program?)", None
        return "not valid JSON (a write cut short?)", None  # the last line, without its end
    if not isinstance(value, dict):
        kind = {list: "array", str: "string", bool: "boolean", type(None): "null"}
        return f"not a JSON object (a JSON {kind.get(type(value), 'number')})", None
    if "header" in value:
        if not isinstance(value["header"], dict):
            return "a header that is not a JSON object", None
    elif not _is_step(value.get("step")):
        return 'a record without an integer "step"', None
    return None, value


def _lines(numbers: list[int], limit: int = 5) -> str:
    shown = ", ".join(map(str, numbers[:limit]))
    if len(numbers) == 1:
        return f"line {shown}"
    more = f" and {len(numbers) - limit} more" if len(numbers) > limit else ""
    return f"lines {shown}{more}"


def _log_file(path: str | Path) -> str | Path:
    """``path``, or the ``metrics.jsonl`` of the run folder ``path`` (``gradlab plot`` takes
    either; a folder was an ``IsADirectoryError``).

    Raises:
        GradlabError: a folder without a ``metrics.jsonl``.
    """
    if not isinstance(path, (str, Path)) or not Path(path).is_dir():
        return path
    log = Path(path) / "metrics.jsonl"
    if not log.is_file():
        raise GradlabError(f"path must be a metrics.jsonl file or a run folder that holds one; "
                           f"got the folder {str(path)!r}, which holds none")  # fmt: skip
    return log


def _json_objects(
    path: str | Path, strict: bool, to_user: bool = False, decode: bool = True,
    quiet_cut_end: bool = False,
) -> Iterator[dict]:
    """The headers and records of a JSONL file, in order, read one line at a time (a log of
    500,000 records is never held whole here), with ``decode`` their values decoded
    (:func:`decode_value`) and every record's keys the same string objects: a record's own
    copies of 60 key strings take twice the memory of its values. A line that is neither (cut
    short by a killed writer, not UTF-8, not a JSON object, a record without an integer
    ``"step"``) is skipped, all of them reported in one warning with their count and line
    numbers once the file is read, at the line that called the consumer (``to_user``: the
    first line outside gradlab); under ``strict`` the first one raises :class:`GradlabError`
    instead. ``quiet_cut_end``: a last line without a line end that is no record is skipped
    without a word (the JSONL sink removes it with its own warning when it reopens the file)."""
    if not isinstance(strict, bool):
        raise GradlabError(f"strict must be True or False; got {strict!r}")
    path = _log_file(path)
    skipped: dict[str, list[int]] = {}
    keys: dict[str, str] = {}  # one string object per key
    total = 0
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            if not raw.strip():
                continue
            total += 1
            reason, value = _why_unreadable(raw)
            if reason is not None and quiet_cut_end and not raw.endswith(b"\n"):
                continue  # the last line (only it lacks a line end), cut short
            if reason is None and not decode:
                yield value
            elif reason is None and "header" in value:
                yield {"header": decode_value(value["header"])}
            elif reason is None:  # numbers, most values, need no decoding
                yield {keys.setdefault(key, key): item if type(item) in _NUMBERS
                       else decode_value(item) for key, item in value.items()}  # fmt: skip
            elif strict:
                raise GradlabError(
                    f"{path}:{number}: every line must be a gradlab header or record (a JSON "
                    f'object with an integer "step"); this one is {reason}'
                )
            else:
                skipped.setdefault(reason, []).append(number)
    if skipped:
        first = min(number for numbers in skipped.values() for number in numbers)
        count = sum(map(len, skipped.values()))
        if count == 1:
            message = f"{path}:{first}: skipped a line that is {next(iter(skipped))}"
        else:
            reasons = "; ".join(f"{_lines(n)}: {reason}" for reason, n in skipped.items())
            message = f"{path}:{first}: skipped {count} of {total} lines ({reasons})"
        # this generator's frame, its consumer's, then the consumer's caller
        warnings.warn(message, UserWarning,
                      stacklevel=caller_stacklevel() if to_user else 3)  # fmt: skip


def last_jsonl_step(path: str | Path) -> int | None:
    """The step of the last record of a ``metrics.jsonl`` file, or None: where a resumed run
    goes on from. The last in file order, not the largest: a run that went back to an earlier
    checkpoint logged its steps again, and its later records replace those of the same steps
    and beyond (as :func:`read_segments` and ``gradlab plot`` read them). Read one line at
    a time, so resuming a run of any length holds one record in memory, not the log. Lines
    that are not a header or a record are skipped, with one warning (as by :func:`read_jsonl`)
    at the first line outside gradlab (the ``Monitor(..., resume=True)`` that reads it).

    Example:
        >>> import tempfile
        >>> from pathlib import Path
        >>> path = Path(tempfile.mkdtemp()) / "metrics.jsonl"
        >>> _ = path.write_text('{"header": {}}\\n{"step": 4}\\n{"step": 7}\\n{"step": 5}\\n')
        >>> last_jsonl_step(path)  # back to step 5 after step 7
        5
    """
    objects = _json_objects(path, strict=False, to_user=True, decode=False, quiet_cut_end=True)
    last = None
    for value in objects:
        if "header" not in value:
            last = value["step"]
    return last


def read_jsonl(
    path: str | Path, *, strict: bool = False, as_trained: bool = False
) -> tuple[list[dict], list[dict]]:
    """``(headers, records)`` of a ``metrics.jsonl`` file; NaN/infinity strings decoded.

    Args:
        path: The ``metrics.jsonl`` file, or the run folder that holds it.
        strict: Raise on the first line that is not a header or a record. By default such
            lines (a write cut short by a killed process, bytes that are not UTF-8, JSON that is
            not an object, a record without an integer ``"step"``) are skipped, and one
            ``UserWarning`` gives their count and line numbers.
        as_trained: The records the training went on with, as ``gradlab plot`` draws them:
            where a resumption (or ``monitor.step_count`` set back) starts at a step the run
            had logged, going back to an earlier checkpoint, its records replace those logged
            before from that step on, so each step appears once. False (the default): every
            record in file order. A log that holds several runs one after the other (a header
            without ``"resumed"`` starts one) keeps each run's records, in turn.

    Returns:
        The headers (the ``"header"`` objects) and the records, each in file order.

    Raises:
        GradlabError: under ``strict``, a line that is not a header or a record; ``strict``
            or ``as_trained`` not a bool; a folder without a ``metrics.jsonl``.
        OSError: ``path`` cannot be read.

    Example:
        >>> from gradlab.monitor import read_jsonl
        >>> import tempfile, warnings
        >>> from pathlib import Path
        >>> path = Path(tempfile.mkdtemp()) / "metrics.jsonl"
        >>> _ = path.write_text('{"header": {"run": 1}}\\n{"step": 0, "loss": "NaN"}\\n[1, 2]\\n')
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     read_jsonl(path)
        ([{'run': 1}], [{'step': 0, 'loss': nan}])
        >>> str(caught[0].message).split(": ", 1)[1]
        'skipped a line that is not a JSON object (a JSON array)'
        >>> resumed = '{"header": {"resumed": {"from_step": 1}}}\\n{"step": 1, "x": 5}\\n'
        >>> _ = path.write_text('{"header": {}}\\n{"step": 0}\\n{"step": 1}\\n{"step": 2}\\n'
        ...                     + resumed)
        >>> read_jsonl(path, as_trained=True)[1]  # resumed at step 1: steps 1 and 2 replaced
        [{'step': 0}, {'step': 1, 'x': 5}]
    """
    if not isinstance(as_trained, bool):
        raise GradlabError(f"as_trained must be True or False; got {as_trained!r}")
    headers, records = [], []
    run: list[dict] = []  # as_trained: the records of the run being read
    for record in _json_objects(path, strict):
        if "header" in record:
            headers.append(record["header"])
            if as_trained and not record["header"].get("resumed"):  # another run starts
                records += run
                run = []
        elif as_trained:
            step = record["step"]
            if run and step <= run[-1]["step"]:  # back to an earlier checkpoint
                run = [earlier for earlier in run if earlier["step"] < step]
            run.append(record)
        else:
            records.append(record)
    return headers, records + run


def last_jsonl_header(path: str | Path) -> dict | None:
    """The last header of a ``metrics.jsonl`` file (what its latest run was logged with), or
    None. Decodes only the header lines (each written as ``{"header": ...}``), so a resumed
    run of 100,000 steps does not decode every record a second time; unreadable lines are
    skipped in silence (:func:`read_jsonl` reports them).

    Example:
        >>> import tempfile
        >>> from pathlib import Path
        >>> path = Path(tempfile.mkdtemp()) / "metrics.jsonl"
        >>> lines = ['{"header": {"tau": 0.1}}', '{"step": 0}', '{"header": {"tau": 0.2}}']
        >>> _ = path.write_text("\\n".join(lines) + "\\n")
        >>> last_jsonl_header(path)
        {'tau': 0.2}
    """
    headers = jsonl_headers(path)
    return headers[-1] if headers else None


def jsonl_headers(path: str | Path) -> list[dict]:
    """Every header of a ``metrics.jsonl`` file, in file order (a resumed run has one per
    resumption), decoding only the header lines; unreadable lines are skipped in silence
    (:func:`read_jsonl` reports them).

    Example:
        >>> import tempfile
        >>> from pathlib import Path
        >>> log = Path(tempfile.mkdtemp(), "metrics.jsonl")
        >>> _ = log.write_text('{"header": {"run": 1}}\\n{"step": 0}\\n{"header": {"run": 2}}\\n')
        >>> [header["run"] for header in jsonl_headers(log)]
        [1, 2]
    """
    return [header for header, _ in _headers_and_steps(path)]


def stepped_jsonl_headers(path: str | Path) -> list[dict]:
    """The headers of a ``metrics.jsonl`` file that a logged step follows (a run, or a
    resumption, that logged one), in file order; as :func:`jsonl_headers`, only header lines
    are decoded.

    Example:
        >>> import tempfile
        >>> from pathlib import Path
        >>> log = Path(tempfile.mkdtemp(), "metrics.jsonl")
        >>> _ = log.write_text('{"header": {"run": 1}}\\n{"header": {"run": 2}}\\n{"step": 0}\\n')
        >>> [header["run"] for header in stepped_jsonl_headers(log)]
        [2]
    """
    return [header for header, stepped in _headers_and_steps(path) if stepped]


def _headers_and_steps(path: str | Path) -> list[tuple[dict, bool]]:
    """Each readable header line's header, and whether a record line follows it."""
    headers: list[tuple[dict, bool]] = []
    with open(_log_file(path), "rb") as handle:
        for raw in handle:
            line = raw.lstrip()
            if line.startswith(b'{"header"'):
                reason, value = _why_unreadable(raw)
                if reason is None:
                    headers.append((decode_value(value["header"]), False))
            elif headers and not headers[-1][1] and line.startswith(b'{"step"'):
                headers[-1] = (headers[-1][0], True)
    return headers


def read_segments(path: str | Path, *, strict: bool = False) -> list[tuple[dict, list[dict]]]:
    """``[(header, records), ...]``: each run (or resumption) of a ``metrics.jsonl`` apart.

    Logs written before runs were kept apart may hold several runs whose steps restart; this
    splits them at each header so they can be drawn as separate lines. Records before any
    header form a segment with the header ``{}``. Lines that are not a header or a record are
    skipped with one warning, or refused under ``strict``, as by :func:`read_jsonl`. ``path``:
    the ``metrics.jsonl`` file, or the run folder that holds it.

    Example:
        >>> from gradlab.monitor import read_segments
        >>> import tempfile
        >>> from pathlib import Path
        >>> path = Path(tempfile.mkdtemp()) / "metrics.jsonl"
        >>> _ = path.write_text('{"header": {"run": 1}}\\n{"step": 0}\\n{"header": {"run": 2}}\\n')
        >>> read_segments(path)
        [({'run': 1}, [{'step': 0}]), ({'run': 2}, [])]
    """
    segments: list[tuple[dict, list[dict]]] = []
    for record in _json_objects(path, strict):
        if "header" in record:
            segments.append((record["header"], []))
        else:
            if not segments:
                segments.append(({}, []))
            segments[-1][1].append(record)
    return segments
