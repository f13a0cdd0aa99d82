"""A Monitor's run folder: runs never merge, one writer at a time.

A ``log_dir`` that already holds a run (a file one of the sinks would append to) is refused
unless ``resume=True`` (continue it: steps go on from its last record, and the new header
records ``"resumed": {"from_step": ...}``) or ``overwrite=True`` (its files are removed when the
first record is written), the choice of Hugging Face's ``Trainer(overwrite_output_dir=...)``
and W&B's ``resume=``. The first write claims the folder with an exclusive lock file
(:mod:`gradlab.monitor.lock`), released at :meth:`RunFolder.release`, so a second Monitor on
the same folder is refused instead of interleaving records.
"""

from __future__ import annotations

import platform
import time
import weakref
from collections.abc import Sequence
from pathlib import Path

import torch

from gradlab._version import __version__
from gradlab.errors import GradlabError
from gradlab.monitor import lock
from gradlab.monitor.sinks import Sink
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
            folder is refused at once.

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
    ) -> None:
        self.path = check_output_folder(log_dir, argument="log_dir")
        self.sinks = list(sinks)
        self.start_step = 0
        self._token: str | None = None
        if self.path.is_dir() and claim_now:
            lock.refuse_if_in_use(self.path)  # a live Monitor writes there
        self.previous = self._previous_run(resume, overwrite)

    def _existing(self) -> list[Path]:
        return sorted({path for sink in self.sinks for path in sink.existing(self.path)})

    def _previous_run(self, resume: bool, overwrite: bool) -> dict:
        """Refuse, resume or mark for overwrite a run already in the folder (never merge)."""
        files = self._existing()
        if not files:
            return {}
        names = [path.name for path in files]
        if overwrite:
            return {"overwrite": files}
        if not resume:
            raise GradlabError(
                f"log_dir {str(self.path)!r} already holds a run ({', '.join(names)}); "
                "pass resume=True to continue it, overwrite=True to replace it, "
                "or choose a new log_dir"
            )
        known = [step for step in (sink.last_step(self.path) for sink in self.sinks)
                 if step is not None]  # fmt: skip
        blind = [type(sink).__name__ for sink in self.sinks
                 if sink.existing(self.path) and type(sink).last_step is Sink.last_step]
        if blind and not known:
            raise GradlabError(
                f"resume=True needs the last step of the run in log_dir {str(self.path)!r}, "
                f"which {', '.join(blind)} cannot read back; add the 'jsonl' sink"
            )
        self.start_step = max(known) + 1 if known else 0
        return {"resumed": {"from_step": self.start_step, "files": names}}

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
            "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
            **run,
        }
        if "resumed" in self.previous:
            header["resumed"] = self.previous["resumed"]
        if "overwrite" in self.previous:
            header["overwrote"] = [path.name for path in self.previous["overwrite"]]
        if device is not None and device.type == "cuda":
            header["device_name"] = torch.cuda.get_device_name(device)
        return header

    def open(self, run: dict, device: torch.device | None = None) -> None:
        """Claim the folder (:meth:`claim`) and open every sink with the run's header."""
        self.claim()
        header = self.header(run, device)
        for sink in self.sinks:
            sink.open(self.path, header)

    def claim(self) -> None:
        """Create the folder, claim it exclusively and remove a run marked for overwrite.

        Raises:
            GradlabError: another Monitor holds the folder, or wrote a run there since this
                one was made.
        """
        self.path.mkdir(parents=True, exist_ok=True)
        self._token = lock.acquire(self.path)
        appeared = [path.name for path in self._existing()]
        if not self.previous and appeared:
            self.release()
            raise GradlabError(
                f"log_dir {str(self.path)!r} already holds a run ({', '.join(appeared)}), "
                "written by another Monitor since this one was created; runs never merge: "
                "pass resume=True to continue it, overwrite=True to replace it, "
                "or choose a new log_dir"
            )
        self._unclaim = weakref.finalize(self, lock.release, self.path, self._token)
        for path in self.previous.get("overwrite", ()):
            path.unlink(missing_ok=True)

    def release(self) -> None:
        """Give the claim back (no op when not claimed)."""
        if self._token is not None:
            lock.release(self.path, self._token)
            self._token = None
