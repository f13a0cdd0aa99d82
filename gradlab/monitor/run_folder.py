"""A Monitor's run folder: runs never merge, one writer at a time.

A ``log_dir`` that already holds a run (a file one of the sinks would append to) is refused
unless ``resume=True`` (continue it: steps go on from its last record, and the new header
records ``"resumed": {"from_step": ...}``) or ``overwrite=True`` (its files are removed when the
first record is written), the choice of Hugging Face's ``Trainer(overwrite_output_dir=...)``
and W&B's ``resume=``. The first write claims the folder with an exclusive lock file
(:mod:`gradlab.monitor.lock`), released at :meth:`RunFolder.release`, so a second Monitor on
the same folder is refused instead of interleaving records; a resumption made before another
Monitor wrote to the run it read is refused at its first write.

Logging never stops training: :meth:`RunFolder.write` and :meth:`RunFolder.close` catch what a
sink raises (``OSError`` from a full disk, a lost connection, any ``Exception``), and a claim
that fails for want of space. The record is dropped for that sink (counted in
:attr:`RunFolder.dropped_records`), the first failure of each sink (and of the claim) is
reported in one ``RuntimeWarning`` naming the sink, its path and the error, and the sink is
retried at the next logged step; the first record it then takes notes the steps it missed
(:data:`~gradlab.monitor.sinks.DROPPED_KEYS`). Recovery is silent. The records a sink dropped
after the last one it wrote, which no record of it notes (a second fault is not reported
again), are reported at :meth:`RunFolder.close` in one more ``RuntimeWarning`` naming each such
sink, how many records and their first and last step. Under ``strict`` the same bookkeeping is
done and a :class:`~gradlab.errors.GradlabError` naming the path and the error is raised
instead of the fault's warning. A fault never leaves a lock or temporary file behind, and the
claim is released exactly once, at :meth:`RunFolder.close`.
"""

from __future__ import annotations

import contextlib
import datetime
import platform
import warnings
import weakref
from collections.abc import Sequence
from pathlib import Path

import torch

from gradlab._version import __version__
from gradlab.errors import GradlabError, RunExistsError, caller_stacklevel
from gradlab.monitor import lock
from gradlab.monitor.sinks import (
    DROPPED_KEYS,
    RUN_FILES,
    CSVSink,
    JSONLSink,
    Sink,
    gradlab_event_files,
    last_jsonl_header,
    records_text,
)
from gradlab.paths import check_output_folder

__all__ = ["RunFolder"]


class RunFolder:
    """The folder a Monitor writes into: previous run, claim and release.

    Args:
        log_dir: the folder; created at the first record if missing.
        sinks: the Monitor's sinks (each says which of its files hold a run).
        resume: continue a run found there.
        overwrite: replace a run found there.
        claim_now: whether this process writes (rank 0): then a live Monitor holding the
            folder is refused at once, and a file of the run that ends later than the run's
            latest part is warned of (by this process alone: every rank reads the folder).
        strict: raise a sink's fault (as a :class:`GradlabError`) instead of warning.
        not_callers: top-level packages whose frames are not the user's (a trainer that calls
            the loss and ``monitor.step()``): the warning of a resumption at a logged step
            names the line that called them (``trainer.train()``).

    Attributes:
        dropped_records: by sink name (its file name, else its class name), the records that
            sink could not write.

    Raises:
        GradlabError: ``log_dir`` cannot become a writable folder, is in use, or holds a run
            and neither ``resume`` nor ``overwrite`` is set.

    Example:
        >>> import tempfile
        >>> folder = RunFolder(tempfile.mkdtemp(), [], resume=False, overwrite=False)
        >>> folder.start_step, folder.previous
        (0, {})
    """

    def __init__(
        self,
        log_dir: str | Path,
        sinks: Sequence[Sink],
        *,
        resume: bool,
        overwrite: bool,
        claim_now: bool = True,
        strict: bool = False,
        not_callers: frozenset[str] = frozenset(),
    ) -> None:
        self.path = check_output_folder(log_dir, argument="log_dir")
        # top-level packages whose frames are not the user's (a trainer that calls the loss
        # and monitor.step()): a warning of the folder's points past them
        self.not_callers = not_callers
        self.sinks = list(sinks)
        self.strict = strict
        self.start_step = 0
        # a resumption at a step the run logged was said already (an integration's warning,
        # which knows the Trainer): the folder's own is not given too
        self.going_back_said = False
        self._token: str | None = None
        self._unclaim: weakref.finalize | None = None
        self._names = _sink_names(self.sinks)
        # a Monitor collected without close(): its files are closed, not left to the collector
        # (a ResourceWarning each); nothing else of a sink is done then (W&B's run stays open)
        self._handles: list = []  # the files this run's sinks opened
        weakref.finalize(self, _close_files, self._handles)
        self.dropped_records: dict[str, int] = dict.fromkeys(self._names, 0)
        self._missed: list[list[int]] = [[] for _ in self.sinks]  # dropped, not yet noted
        self._wrote: set[int] = set()  # the sinks that took a record of this run
        self._opened: set[int] = set()  # indices of the sinks open now
        self._header: dict | None = None
        self._claim_error: OSError | None = None  # of open(), not yet reported
        self._open_errors: dict[int, Exception] = {}  # sinks open() failed, not yet reported
        self._reported: set[str] = set()  # sinks (and the claim) whose fault was reported
        if self.path.is_dir() and claim_now:
            lock.refuse_if_in_use(self.path)  # a live Monitor writes there
        self.previous_header: dict | None = None  # the resumed run's last header, if read
        self._writes = claim_now  # a warning of the folder's run is given by the writer alone
        self.previous = self._previous_run(resume, overwrite)
        # what a resumption read: the run files' sizes (a log only grows), checked at the claim
        self._read_sizes = self._sizes() if "resumed" in self.previous else None

    def _existing(self) -> list[Path]:
        """The run files in the folder: this Monitor's sinks' and any sink's default files (a
        run written with other sinks is still a run: replaced whole, never merged); the event
        files of gradlab's TensorBoard sink, not those of another writer."""
        found = {path for sink in self.sinks for path in sink.existing(self.path)}
        found.update(path for name in RUN_FILES for path in self.path.glob(name))
        found.update(gradlab_event_files(self.path))
        return sorted(found)

    def _sizes(self) -> dict[str, int]:
        """The run files' sizes in bytes, by name (a vanished file is left out)."""
        sizes = {}
        for path in self._existing():
            with contextlib.suppress(OSError):
                sizes[path.name] = path.stat().st_size
        return sizes

    def _previous_run(self, resume: bool, overwrite: bool) -> dict:
        """Refuse, resume or mark for overwrite a run already in the folder (never merge)."""
        files = self._existing()
        if not files:
            return {}
        names = [path.name for path in files]
        if overwrite:
            return {"overwrite": files}
        if not resume:
            # a run stopped before its first record (an error before the first step) holds
            # headers alone: replacing it loses nothing, which is worth saying
            headers_only = set(names) <= {"metrics.jsonl", "metrics.csv"} and all(
                sink.last_step(self.path) is None for sink in (JSONLSink(), CSVSink()))
            nothing = (" (it logged no step: a run stopped before its first record, which "
                       "overwrite=True replaces losing nothing)" if headers_only else "")
            raise RunExistsError(
                f"log_dir {str(self.path)!r} already holds a run ({', '.join(names)}){nothing}; "
                "pass resume=True to continue it, overwrite=True to replace it, "
                "or choose a new log_dir"
            )
        # the run's last step from every file that says it: this Monitor's sinks', and the
        # default files of the others (a run logged to metrics.csv alone, resumed with the
        # JSONL sink, goes on from its last row, not from step 0)
        readers = [*self.sinks, *(sink() for sink in (JSONLSink, CSVSink)
                                  if not any(type(own) is sink for own in self.sinks))]
        ends = {self._where(sink).name: step for sink in readers
                if (step := sink.last_step(self.path)) is not None}  # fmt: skip
        # the run's JSONL (this Monitor's, whatever its file name), else the default file
        log = next((self._where(sink) for sink in readers if isinstance(sink, JSONLSink)),
                   self.path / "metrics.jsonl")  # fmt: skip
        if log.is_file():  # what the resumed run was logged with (Monitor compares it)
            self.previous_header = last_jsonl_header(log)
        known = self._current_ends(ends)
        blind = [type(sink).__name__ for sink in self.sinks
                 if sink.existing(self.path) and type(sink).last_step is Sink.last_step]
        if blind and not known:
            raise GradlabError(
                f"resume=True needs the last step of the run in log_dir {str(self.path)!r}, "
                f"which {', '.join(blind)} cannot read back; add the 'jsonl' sink"
            )
        self.start_step = max(known) + 1 if known else 0
        return {"resumed": {"from_step": self.start_step, "files": names}}

    def _current_ends(self, ends: dict[str, int]) -> list[int]:
        """The last steps, by file, that say where the run is: those of the files its latest
        part wrote (the ``sinks`` of the last header of ``metrics.jsonl``), when it says.
        Another file may end later: left out of a resumption that went back to a checkpoint,
        its end is stale (or a later resumption wrote it without the JSONL sink); that is
        warned about, and the run goes on after the current files' end."""
        written = (self.previous_header or {}).get("sinks")
        current = {name: step for name, step in ends.items()
                   if not isinstance(written, list) or name in written}  # fmt: skip
        if not current:
            return list(ends.values())
        end = max(current.values())
        later = {name: step for name, step in ends.items() if step > end}
        # of the run folder that every rank reads: said once, by the rank that writes
        if later and self._writes:
            files = ", ".join(f"{name!r} ends at step {step}" for name, step in later.items())
            warnings.warn(
                f"gradlab.Monitor: the run in {str(self.path)!r} resumes after step {end}, the "
                f"last its latest part logged ({', '.join(map(repr, sorted(current)))}), though "
                f"{files}: a file left out of a resumption that went back to a checkpoint. If "
                "the run did get there (resumed later without the JSONL sink), set "
                "monitor.step_count before the first step",
                UserWarning,
                stacklevel=caller_stacklevel(self.not_callers),
            )
        return [end]

    def header(self, run: dict, device: torch.device | None = None) -> dict:
        """The run's header record: versions, device and start time, then ``run`` (the
        Monitor's quantities and config), then the folder's previous run (``resumed``,
        ``overwrote``).

        Example:
            >>> import tempfile
            >>> folder = RunFolder(tempfile.mkdtemp(), [], resume=False, overwrite=False)
            >>> list(folder.header({"config": {}}))[:3]
            ['gradlab', 'torch', 'python']
        """
        header = {
            "gradlab": __version__,
            "torch": torch.__version__,
            "python": platform.python_version(),
            "device": str(device) if device is not None else None,
            # local time with its UTC offset: runs of machines in other zones compare
            "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            **run,
        }
        header["sinks"] = list(self._names)  # the files a resumption reads the run's end from
        if "resumed" in self.previous:
            header["resumed"] = self.previous["resumed"]
        if "overwrite" in self.previous:
            header["overwrote"] = [path.name for path in self.previous["overwrite"]]
        if device is not None and device.type == "cuda":
            header["device_name"] = torch.cuda.get_device_name(device)
        return header

    def open(
        self, run: dict, device: torch.device | None = None, first_step: int | None = None
    ) -> None:
        """Claim the folder (:meth:`claim`) and open every sink with the run's header;
        ``first_step``: the first step of this run's Monitor, which a resumption's
        ``from_step`` then names (a training loop may resume from an earlier checkpoint than
        the log's last step).

        A fault (a full disk) is not raised here: the record that follows (:meth:`write`, or
        :meth:`close`) reports it, and the next one tries again. A claim that another
        Monitor refuses raises.
        """
        try:
            self.claim()
        except OSError as error:
            self._claim_error = error
        if first_step is not None and "resumed" in self.previous:
            if first_step < self.start_step and not self.going_back_said:  # say it now
                self._went_back(first_step)
            self.previous["resumed"]["from_step"] = first_step
        self._header = self.header(run, device)  # not reached when the claim is refused
        if self._token is not None:
            for index in range(len(self.sinks)):
                try:
                    self._open_sink(index)
                except Exception as error:
                    self._open_errors[index] = error

    def _went_back(self, first_step: int) -> None:
        """Warn that this resumption starts at ``first_step``, which the run had logged: its
        files keep those records, before the new header."""
        last = self.start_step - 1
        warnings.warn(
            f"gradlab.Monitor: the run in {str(self.path)!r} resumes at step {first_step}, at or "
            f"before its last record (step {last}): training went back to an earlier "
            f"checkpoint. The records it logged from step {first_step} on stay in its files, "
            "ahead of this part's header, so a step this part logs again is in them twice; "
            "gradlab plot draws this part's records in their place, as "
            "read_jsonl(path, as_trained=True) reads them",
            UserWarning,
            stacklevel=caller_stacklevel(self.not_callers),  # trainer.train(), not inside it
        )

    def write(self, record: dict) -> None:
        """Write ``record`` into every sink, opening those not open yet; never raises for a
        sink's fault unless ``strict`` (see the module docstring).

        Raises:
            GradlabError: the folder was claimed by another Monitor meanwhile; under
                ``strict``, a sink (or the claim) failed.

        Example:
            >>> import tempfile
            >>> from gradlab.monitor.sinks import JSONLSink
            >>> folder = RunFolder(tempfile.mkdtemp(), [JSONLSink()], resume=False,
            ...                    overwrite=False)
            >>> folder.open({"config": {}})
            >>> folder.write({"step": 0, "loss": 0.5})
            >>> folder.close()
            >>> folder.dropped_records
            {'metrics.jsonl': 0}
        """
        step = record["step"]
        if self._header is None:
            raise GradlabError(f"log_dir {str(self.path)!r} was refused to this Monitor")
        faults: list[tuple[str, str | Path, BaseException]] = []
        if not self._claimed(faults):
            for index in range(len(self.sinks)):
                self._drop(index, step)
        else:
            for index, sink in enumerate(self.sinks):
                try:
                    if index in self._open_errors:  # open() tried it for this very record
                        raise self._open_errors.pop(index)
                    self._open_sink(index)
                    missed = self._missed[index]
                    sink.write(_noted(record, missed) if missed else record)
                except Exception as error:
                    self._drop(index, step)
                    faults.append((self._names[index], self._location(sink), error))
                else:
                    missed.clear()
                    self._wrote.add(index)
        self._report(faults, f"the record of step {step}")

    def close(self, failed: bool = False) -> None:
        """Open the sinks not open yet (a run that logged nothing gets its header), close
        every sink and release the claim, once; a fault is handled as in :meth:`write`.
        ``failed``: training raised (each sink's :attr:`~Sink.failed` is set before it closes).

        Raises:
            GradlabError: under ``strict``, a sink (or the claim) failed.

        Example:
            >>> import tempfile
            >>> folder = RunFolder(tempfile.mkdtemp(), [], resume=False, overwrite=False)
            >>> folder.open({"config": {}})
            >>> folder.close()
            >>> folder.close()  # once is enough: the claim is already given back
        """
        faults: list[tuple[str, str | Path, BaseException]] = []
        try:
            if self._header is not None and self._claimed(faults):
                for index, sink in enumerate(self.sinks):
                    try:
                        if index in self._open_errors:  # open() tried it just now
                            raise self._open_errors.pop(index)
                        self._open_sink(index)
                    except Exception as error:
                        faults.append((self._names[index], self._location(sink), error))
            for index in sorted(self._opened):
                sink = self.sinks[index]
                try:
                    sink.failed = failed  # this run's: a sink object may serve the next
                    sink.close()
                except Exception as error:
                    faults.append((self._names[index], self._location(sink), error))
        finally:
            self._opened.clear()
            self._handles.clear()
            self._header = None
            self.release()
        self._report(faults, "the end of the run")
        self._report_unnoted()

    def _claimed(self, faults: list) -> bool:
        """Whether the folder is claimed, trying again if it is not; a failure joins
        ``faults``."""
        if self._token is not None:
            return True
        error, self._claim_error = self._claim_error, None  # open()'s try is this step's
        if error is None:
            try:
                self.claim()
                return True
            except OSError as raised:
                error = raised
            except GradlabError:  # another Monitor took the folder meanwhile: refused for good
                self._header = None
                raise
        faults.append(("the claim of log_dir", self.path / lock.LOCK_NAME, error))
        return False

    def _open_sink(self, index: int) -> None:
        if index in self._opened:
            return
        sink = self.sinks[index]
        try:
            sink.open(self.path, self._header)
            handle = getattr(sink, "handle", None)  # a file sink's (a sink object may serve
            if hasattr(handle, "close"):  # another run later: its handle then is not ours)
                self._handles.append(handle)
        except Exception:
            # what the failed open left (a file handle, a writer) is given back; the open's
            # error is the one reported
            with contextlib.suppress(Exception):
                sink.close()
            raise
        self._opened.add(index)

    def _drop(self, index: int, step: int) -> None:
        self.dropped_records[self._names[index]] += 1
        self._missed[index].append(step)

    def _location(self, sink: Sink) -> str:
        """Where ``sink``'s records go, as a fault's warning names it (:meth:`Sink.location`);
        the folder when the sink cannot say."""
        try:
            return sink.location(self.path)
        except Exception:
            return str(self.path)

    def _where(self, sink: Sink) -> Path:
        filename = getattr(sink, "filename", None)
        return self.path / filename if isinstance(filename, str) else self.path

    def _report(self, faults: list[tuple[str, str | Path, BaseException]], what: str) -> None:
        """Warn once per sink (one warning for all those failing at once), or raise under
        ``strict``."""
        if self.strict and faults:
            name, where, error = faults[0]
            raise GradlabError(
                f"{name} could not write {what} to {str(where)!r}: {type(error).__name__}: {error} "
                "(strict=True; without it the record is dropped, counted in "
                "monitor.dropped_records, and training goes on)"
            ) from error
        new = [(name, where, error) for name, where, error in faults if name not in self._reported]
        if not new:
            return
        self._reported.update(name for name, _, _ in new)
        listed = "; ".join(f"{name} ({str(where)!r}): {error}" for name, where, error in new)
        warnings.warn(
            f"gradlab.Monitor: could not write {what} ({listed}). Training goes on: a record "
            "that cannot be written is dropped (monitor.dropped_records counts them per sink), "
            "the sink is tried again at every logged step and the first record it takes notes "
            "the steps it missed (dropped_steps); later faults of the same sink are not "
            "reported again (strict=True raises instead)",
            RuntimeWarning,
            stacklevel=caller_stacklevel(self.not_callers),
        )

    def _report_unnoted(self) -> None:
        """At the end of the run, warn once about the records each sink dropped after the last
        one it wrote: no record of that sink notes them (the note rides on the next record it
        takes), and a later fault of a sink is not reported again."""
        unnoted = [(index, name, missed) for index, (name, missed)
                   in enumerate(zip(self._names, self._missed, strict=True)) if missed]
        if not unnoted:
            return
        after = "; ".join(f"{name} dropped {records_text(missed)}"
                          for index, name, missed in unnoted if index in self._wrote)
        never = "; ".join(f"{name} dropped all {records_text(missed)}"
                          for index, name, missed in unnoted if index not in self._wrote)
        for missed in self._missed:
            missed.clear()  # said once: a second close() says nothing
        said = []
        if after:
            said.append(
                f"records dropped after the last record a sink wrote ({after}) are noted in no "
                "record of it (the note, dropped_steps, rides on the next record the sink takes, "
                "and a later fault of a sink is not reported again): its log ends before them, "
                "as if the run had stopped there")  # fmt: skip
        if never:  # no record of it to end before: the first fault said why
            said.append(f"a sink wrote no record of the run ({never})")
        warnings.warn(
            f"gradlab.Monitor: {'; '.join(said)}; monitor.dropped_records counts them per sink",
            RuntimeWarning,
            stacklevel=caller_stacklevel(self.not_callers),
        )

    def claim(self) -> None:
        """Create the folder, claim it exclusively and remove a run marked for overwrite.

        Raises:
            GradlabError: another Monitor holds the folder, or wrote a run there since this
                one was made (or, resuming, wrote to the run this one read).
        """
        self.path.mkdir(parents=True, exist_ok=True)
        self._token = lock.acquire(self.path)
        self._unclaim = weakref.finalize(self, lock.release, self.path, self._token)
        try:
            appeared = [path.name for path in self._existing()]
            if not self.previous and appeared:
                raise GradlabError(
                    f"log_dir {str(self.path)!r} already holds a run ({', '.join(appeared)}), "
                    "written by another Monitor since this one was created; runs never merge: "
                    "pass resume=True to continue it, overwrite=True to replace it, "
                    "or choose a new log_dir"
                )
            if self._read_sizes is not None:
                sizes = self._sizes()
                changed = sorted(name for name in {*sizes, *self._read_sizes}
                                 if sizes.get(name) != self._read_sizes.get(name))  # fmt: skip
                if changed:
                    raise GradlabError(
                        f"log_dir {str(self.path)!r} changed since this Monitor read it to resume "
                        f"(another Monitor wrote {', '.join(changed)} meanwhile); runs never "
                        "merge: make the Monitor again with resume=True to go on from the run's "
                        "new last record"
                    )
            for path in self.previous.get("overwrite", ()):
                path.unlink(missing_ok=True)
        except BaseException:
            self.release()
            raise

    @property
    def claimed(self) -> bool:
        """Whether this folder holds its claim now (:meth:`claim` ran, :meth:`release` not yet)."""
        return self._token is not None

    def release(self) -> None:
        """Give the claim back, once (no op when not claimed)."""
        if self._token is not None:
            token, self._token = self._token, None
            self._unclaim.detach()
            lock.release(self.path, token)


def _close_files(handles: list) -> None:
    """Close the files a run's sinks opened (their records are written whole already)."""
    for handle in handles:
        with contextlib.suppress(Exception):
            handle.close()


def _noted(record: dict, missed: list[int]) -> dict:
    """``record`` with the note of the steps a sink missed (:data:`DROPPED_KEYS`)."""
    return {**record, DROPPED_KEYS[0]: len(missed), DROPPED_KEYS[1]: list(missed)}


def _sink_names(sinks: Sequence[Sink]) -> list[str]:
    """Each sink's name: its file name, else its class name; a repeated name gets `` #2``..."""
    names: list[str] = []
    for sink in sinks:
        filename = getattr(sink, "filename", None)
        name = filename if isinstance(filename, str) else type(sink).__name__
        count = sum(1 for taken in names if taken == name or taken.startswith(f"{name} #"))
        names.append(name if not count else f"{name} #{count + 1}")
    return names
