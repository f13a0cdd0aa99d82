"""The claim of a run folder: one Monitor writes into a ``log_dir`` at a time.

A Monitor claims its folder at its first write by creating ``.gradlab.lock`` there with an
exclusive create (a hard link of a complete file, or ``O_CREAT | O_EXCL``: of two writers
exactly one succeeds) and releases it at
``close()`` (or when the Monitor is garbage-collected unclosed). The file holds the host name,
the process id and a random token. A lock left by a crashed process is *stale* and is taken
over: on the same host, when no process with that id is alive (or the recorded id names no
single process: 0, negative, beyond ``pid_t``), or when the id is this process's own but the
lock is none this process holds (an earlier process with the same id: a restarted container),
and a lock that cannot be read is stale too. Of
two processes taking over one stale lock, one wins (see :func:`acquire`). A lock written on
another host cannot be checked and is honoured; delete the file by hand if that run is known
to be dead.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from pathlib import Path

from gradlab.errors import GradlabError

LOCK_NAME = ".gradlab.lock"
"""The file that marks a ``log_dir`` as in use by a live Monitor."""

_HELD: set[str] = set()
"""The tokens of the locks this process holds now (acquired, not yet released). A lock that
names this very process but holds none of them was left by an earlier process that had the
same id: a container restarted with a fresh process-id namespace (the same host name, the
training process again process 1 or 7) finds its predecessor's lock naming itself."""


def _pid_alive(pid: int) -> bool:
    """Whether a process with id ``pid`` exists on this host (signal 0: checks, sends nothing).

    Only positive ids name one process (0 and negative ids address process groups, and an id
    beyond the platform's range names none), so any other recorded id counts as dead.
    """
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    return True


def _read(path: Path) -> dict | None:
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None


def _live_owner(content: dict | None) -> dict | None:
    """``content`` if it is the lock of a live Monitor (or of another host: unverifiable, so
    honoured), else ``None``. A lock that cannot be read (a writer killed between create and
    write) counts as stale."""
    if not isinstance(content, dict) or type(content.get("pid")) is not int:
        return None
    if content.get("host") != socket.gethostname():
        return content  # cannot be checked from here: honoured
    if content["pid"] == os.getpid():  # this process: live only if it holds that lock now
        return content if content.get("token") in _HELD else None
    return content if _pid_alive(content["pid"]) else None


def holder(log_dir: Path) -> dict | None:
    """The live owner recorded in ``log_dir``'s lock, or ``None`` (no lock, or a stale one).

    A lock that cannot be read (a writer killed between create and write) counts as stale.
    """
    return _live_owner(_read(Path(log_dir) / LOCK_NAME))


def held_here(log_dir: Path) -> bool:
    """Whether this process holds ``log_dir``'s lock now (acquired and not yet released)."""
    content = _read(Path(log_dir) / LOCK_NAME)
    return isinstance(content, dict) and content.get("token") in _HELD


def refuse_if_in_use(log_dir: Path) -> None:
    """Raise a :class:`GradlabError` if a live Monitor holds ``log_dir``."""
    owner = holder(log_dir)
    if owner is not None:
        raise GradlabError(_in_use_message(log_dir, owner))


def _in_use_message(log_dir: Path, owner: dict) -> str:
    """Why ``log_dir`` is refused, and the way out: a lock of this host names a live process;
    one of another host cannot be checked from here, so deleting it is left to the user."""
    if owner.get("host") == socket.gethostname() and owner.get("pid") == os.getpid():
        return (
            f"log_dir {str(log_dir)!r} is in use by another Monitor of this very process "
            f"(process {owner.get('pid')} on {owner.get('host')!r}, lock file {LOCK_NAME}); "
            "runs never merge: close() that Monitor (or leave its with "
            "block) first, then resume=True continues its run and overwrite=True replaces it; "
            "or choose another log_dir"
        )
    if owner.get("host") == socket.gethostname():
        stale = (
            "A lock of a crashed process is stale and taken over; if no Monitor runs as process "
            f"{owner.get('pid')} (its number taken by another process since), delete "
            f"{str(Path(log_dir) / LOCK_NAME)!r} and start again."
        )
    else:
        stale = (
            f"The lock was written on another host, where this process cannot check whether "
            f"process {owner.get('pid')} still runs, so it is honoured: if that run is dead (a "
            "job restarted on another node after a crash or a preemption), delete "
            f"{str(Path(log_dir) / LOCK_NAME)!r} and start again."
        )
    return (
        f"log_dir {str(log_dir)!r} is in use by another Monitor (process {owner.get('pid')} on "
        f"{owner.get('host')!r}, lock file {LOCK_NAME}); runs never merge: choose another "
        "log_dir, or close() that Monitor first (then resume=True continues its run, "
        f"overwrite=True replaces it). {stale}"
    )


def acquire(log_dir: Path) -> str:
    """Create ``log_dir``'s lock exclusively; return its token. Takes over a stale lock.

    Three attempts: each creates the lock, or reads the one in place and, if it is stale,
    removes that very file (:func:`_remove_if_unchanged`), so of two processes taking over the
    same stale lock exactly one wins and the other then finds the winner's live lock.

    Raises:
        GradlabError: a live Monitor holds the folder, or the lock kept being replaced.
    """
    path = Path(log_dir) / LOCK_NAME
    token = uuid.uuid4().hex
    content = json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "token": token})
    for _ in range(3):
        if _create_exclusive(path, content.encode()):
            _HELD.add(token)
            return token
        found = _read(path)
        owner = _live_owner(found)
        if owner is not None:
            raise GradlabError(_in_use_message(log_dir, owner))
        _remove_if_unchanged(path, found)
    raise GradlabError(f"log_dir {str(log_dir)!r}: could not claim {LOCK_NAME}; try again")


def _remove_if_unchanged(path: Path, judged: dict | None) -> None:
    """Remove the lock at ``path`` if it is still the one read as ``judged`` (stale).

    The file is first moved aside (a rename is atomic: of two processes removing the same stale
    lock, one moves it and the other finds nothing). If what was moved is not the stale lock
    judged but a live one created since by a faster process, it is put back. (A third process
    claiming the folder in the instant the faster one's lock is moved aside can still win too:
    closing that window would need a kernel lock, which network file systems do not all keep.)
    """
    aside = path.with_name(f"{path.name}.{uuid.uuid4().hex}")
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return  # another process removed it first
    try:
        if _read(aside) != judged:
            _create_exclusive(path, aside.read_bytes())
    finally:
        aside.unlink()


def _create_exclusive(path: Path, content: bytes) -> bool:
    """Create ``path`` holding ``content`` unless it exists (atomic: a hard link of a complete
    temporary file, so no reader sees it empty; ``O_EXCL`` where links are unsupported).

    A failure (a full disk: ``OSError``, raised) leaves no file behind: neither the temporary
    file nor a lock created but not written.
    """
    temporary = path.with_name(f"{path.name}.{uuid.uuid4().hex}")
    try:
        temporary.write_bytes(content)
        try:
            os.link(temporary, path)
            return True
        except FileExistsError:
            return False
        except OSError:  # no hard links on this file system
            return _create_without_link(path, content)
    finally:
        temporary.unlink(missing_ok=True)


def _create_without_link(path: Path, content: bytes) -> bool:
    """``O_CREAT | O_EXCL``, then the content; a lock that could not be written is removed."""
    try:
        descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(content)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return True


def release(log_dir: Path, token: str) -> None:
    """Remove ``log_dir``'s lock if it is still the one created with ``token``."""
    _HELD.discard(token)
    path = Path(log_dir) / LOCK_NAME
    content = _read(path)
    if isinstance(content, dict) and content.get("token") == token:
        path.unlink(missing_ok=True)
