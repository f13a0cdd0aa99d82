"""Output paths checked before any work: the one rule for the CLI, the Monitor and the audit.

gradlab creates what you name and nothing else:

- a **file** option (``--json``, ``--markdown``) writes that one file; its folder must already
  exist. ``--json /nonexistent/dir/x.json`` is refused, never creates ``/nonexistent/dir``.
  A file that exists already is replaced only if it is empty or the same command's earlier
  output (:func:`check_own_output_file`): ``--json runs/a/metrics.jsonl`` is refused.
- a **folder** option (``--out``, the Monitor's ``log_dir``) may name a folder that does not
  exist yet; it is created, with its missing parents, when the work writes into it (as
  ``mkdir -p`` would). Its nearest existing ancestor must be a folder gradlab can write into.

A name longer than the file system takes (255 bytes), or a path longer than it takes, is
refused before the work, not found when the result is written.

A leading ``~`` (``~user``) is expanded to the home folder, for every caller, as a shell
would: ``Monitor("~/runs/a")`` writes under the home folder, never into a folder named ``~``.

Writability is probed, not inferred from permission bits (which say nothing for root, or for
``/proc``): an anonymous temporary file is opened in the folder and discarded, so the check
leaves nothing behind. Every refusal is a :class:`~gradlab.errors.GradlabError` whose message
names the argument, the path and what is allowed.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from gradlab.errors import GradlabError

__all__ = ["check_output_file", "check_output_folder", "check_own_output_file", "write_text"]


def _as_path(path: object, argument: str, kind: str) -> Path:
    """``path`` as a Path, a leading ``~`` or ``~user`` expanded (as a shell would: a quoted
    ``"~/run"`` or ``--out=~/figures`` reaches gradlab unexpanded)."""
    if not isinstance(path, (str, os.PathLike)):
        raise GradlabError(f"{argument} must be a {kind} path (str or os.PathLike); got {path!r}")
    if str(path).strip() == "":  # an empty shell variable, --out ""
        raise GradlabError(f"{argument} must be a non-empty {kind} path; got {str(path)!r}")
    if isinstance(path, str) and path == "-":  # standard output in shells; Path("-") is a name
        raise GradlabError(f"{argument} must be a {kind} path; got '-', which gradlab does not "
                           f"read as standard output: name a {kind} (./- or Path('-') for one "
                           "named -)")
    try:
        return Path(path).expanduser()
    except RuntimeError as error:  # ~user of no known user, or no home folder
        raise GradlabError(
            f"{argument} must be a {kind} path; got {str(path)!r}, whose leading "
            f"{Path(path).parts[0]!r} names no home folder known here"
        ) from error


NAME_BYTES = 255
"""The longest file or folder name common file systems take (Linux's ``NAME_MAX``)."""
PATH_BYTES = 4096
"""The longest path Linux takes (``PATH_MAX``, its terminating zero included)."""


def _refuse_long_names(path: Path, argument: str) -> None:
    """Refuse a path whose name, or one of its folders' names, is longer than the file system
    takes (:data:`NAME_BYTES`), or that is longer than a path may be (:data:`PATH_BYTES`, or
    what the system says when it looks the path up): the write would fail after the work.
    Counted from the path itself, so a folder that does not exist yet is counted too."""
    longest = max(path.parts, key=lambda part: len(os.fsencode(part)), default="")
    size = len(os.fsencode(longest))
    whole = len(os.fsencode(os.path.abspath(path)))
    too_long = size > NAME_BYTES or whole >= PATH_BYTES
    if not too_long:
        try:
            os.lstat(path)
        except OSError as error:  # a file system of its own limits
            too_long = error.errno == errno.ENAMETOOLONG
    if too_long:
        what = (f"a name of {size} bytes ({longest[:40]!r}...)" if size > NAME_BYTES
                else f"a path of {whole} bytes")  # fmt: skip
        raise GradlabError(
            f"{argument} must be a path the file system takes; got {what}, longer than it "
            "allows"
        )


def _writable_folder(folder: Path) -> bool:
    """Whether a file can be created in ``folder`` (an existing folder), tried and discarded."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            return True
    except OSError:
        return False


def check_output_file(path: str | os.PathLike, *, argument: str) -> Path:
    """Return ``path`` as a :class:`~pathlib.Path` if a file can be written there.

    The file's folder must already exist and accept new files; ``path`` must not be a folder,
    and an existing file must be writable. Nothing is created or changed.

    Args:
        path: Where a file is to be written.
        argument: The option or argument name quoted in the error message, e.g. ``"--json"``.

    Returns:
        ``path`` as a Path, a leading ``~`` expanded.

    Raises:
        GradlabError: ``path`` is empty or not a path, starts with the ``~user`` of no known
            user, is a folder (or ends in a separator), its folder does not exist
            or is a file, or the folder (or an existing file) cannot be written.

    Example:
        >>> import tempfile
        >>> from pathlib import Path
        >>> folder = Path(tempfile.mkdtemp())
        >>> check_output_file(folder / "records.json", argument="--json").name
        'records.json'
        >>> try:
        ...     check_output_file("/nonexistent/dir/x.json", argument="--json")
        ... except GradlabError as error:
        ...     print(error)  # doctest: +ELLIPSIS
        --json must be a file in an existing folder; got '/nonexistent/dir/x.json', ...
    """
    if isinstance(path, (str, os.PathLike)) and str(path).endswith(("/", os.sep)):
        raise GradlabError(f"{argument} must be a file path; got {str(path)!r}, which names a "
                           "folder (it ends in a separator): add the file's name")  # fmt: skip
    path = _as_path(path, argument, "file")
    _refuse_long_names(path, argument)
    if path.is_dir():
        raise GradlabError(f"{argument} must be a file path; got {str(path)!r}, which is a folder")
    folder = path.parent
    if path.is_symlink() and not path.exists():  # a dangling link: written where it points
        target = path.resolve()
        if not target.parent.is_dir():
            raise GradlabError(
                f"{argument} must be a file in an existing folder; got {str(path)!r}, a link to "
                f"{str(target)!r}, whose folder does not exist (remove the link or create the "
                "folder first)"
            )
        folder = target.parent
    if not folder.exists():
        raise GradlabError(
            f"{argument} must be a file in an existing folder; got {str(path)!r}, but the folder "
            f"{str(folder)!r} does not exist (gradlab creates no folder for a file: create it "
            "first)"
        )
    if not folder.is_dir():
        raise GradlabError(
            f"{argument} must be a file in an existing folder; got {str(path)!r}, but "
            f"{str(folder)!r} is a file, not a folder"
        )
    if not _writable_folder(folder) or (path.exists() and not os.access(path, os.W_OK)):
        raise GradlabError(
            f"{argument} must be a path gradlab can write; got {str(path)!r}, and files cannot be "
            f"written in {str(folder)!r}"
        )
    return path


def check_own_output_file(
    path: str | os.PathLike, *, argument: str, written_by: str,
    recognise: Callable[[Path], bool],
) -> Path:  # fmt: skip
    """:func:`check_output_file`, and a file already there is replaced only if it holds nothing
    or is an earlier output of the same command.

    A command's output file is rewritten on every run, so its own earlier output must be
    replaceable; any other file (a Monitor's ``metrics.jsonl``, one's notes) is refused rather
    than lost. A path that is not a regular file (``/dev/null``) is left to
    :func:`check_output_file`.

    Args:
        path: Where the file is to be written.
        argument: The option quoted in the error message, e.g. ``"--json"``.
        written_by: What the error message calls an earlier output, e.g. ``"an earlier gradlab
            audit --json output"``.
        recognise: Given the existing file, whether it is such an output (read by its content);
            a file it cannot read (an :class:`OSError` or a :class:`ValueError`) is not one.

    Returns:
        ``path`` as a Path, a leading ``~`` expanded.

    Raises:
        GradlabError: what :func:`check_output_file` refuses; a file there that is not empty and
            not recognised.

    Example:
        >>> import tempfile
        >>> from pathlib import Path
        >>> log = Path(tempfile.mkdtemp()) / "metrics.jsonl"
        >>> _ = log.write_text('{"step": 0}\\n')
        >>> try:
        ...     check_own_output_file(log, argument="--json", written_by="an earlier output",
        ...                           recognise=lambda path: path.read_text().startswith("["))
        ... except GradlabError as error:
        ...     print(error)  # doctest: +ELLIPSIS
        --json would replace '.../metrics.jsonl', an existing file that is not an earlier ...
    """
    path = check_output_file(path, argument=argument)
    if not path.is_file() or path.stat().st_size == 0:
        return path
    try:
        recognised = bool(recognise(path))
    except (OSError, ValueError):  # unreadable, or not text: not the command's output
        recognised = False
    if not recognised:
        raise GradlabError(f"{argument} would replace {str(path)!r}, an existing file that is not "
                           f"{written_by}; name another file, or move that one away first")
    return path


def check_output_folder(path: str | os.PathLike, *, argument: str) -> Path:
    """Return ``path`` as a :class:`~pathlib.Path` if it is, or can become, a writable folder.

    An existing ``path`` must be a folder that accepts new files. A missing one will be created
    with its missing parents by whoever writes into it; its nearest existing ancestor must be a
    folder that accepts new files. Nothing is created here.

    Args:
        path: The output folder.
        argument: The option or argument name quoted in the error message, e.g. ``"--out"``
            or ``"log_dir"``.

    Returns:
        ``path`` as a Path, a leading ``~`` expanded.

    Raises:
        GradlabError: ``path`` is empty or not a path, starts with the ``~user`` of no known
            user, is an existing file, lies under a file or a link to nothing,
            or cannot be written.

    Example:
        >>> import tempfile
        >>> from pathlib import Path
        >>> folder = Path(tempfile.mkdtemp())
        >>> check_output_folder(folder / "runs" / "a", argument="log_dir").name
        'a'
        >>> (folder / "notes.txt").write_text("a file")
        6
        >>> try:
        ...     check_output_folder(folder / "notes.txt" / "figures", argument="--out")
        ... except GradlabError as error:
        ...     print(error)  # doctest: +ELLIPSIS
        --out must be a folder or a path where one can be created; got '...', but '...' is a file
    """
    path = _as_path(path, argument, "folder")
    _refuse_long_names(path, argument)
    if path.exists() and not path.is_dir():
        raise GradlabError(
            f"{argument} must be a folder or a path where one can be created; got {str(path)!r}, "
            "which is an existing file"
        )
    ancestor = path
    while not ancestor.exists() and ancestor != ancestor.parent:
        if ancestor.is_symlink():  # a dangling link: no folder can be created in its place
            raise GradlabError(
                f"{argument} must be a folder or a path where one can be created; got "
                f"{str(path)!r}, but {str(ancestor)!r} is a link to {str(ancestor.resolve())!r}, "
                "which does not exist (remove the link or create its target first)"
            )
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise GradlabError(
            f"{argument} must be a folder or a path where one can be created; got {str(path)!r}, "
            f"but {str(ancestor)!r} is a file"
        )
    if not _writable_folder(ancestor):
        raise GradlabError(
            f"{argument} must be a folder gradlab can write; got {str(path)!r}, and nothing can "
            f"be created in {str(ancestor)!r}"
        )
    return path


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` into the file ``path``; an :class:`OSError` names ``path``.

    A write that fails after the file was opened (a full disk, a quota) raises an
    :class:`OSError` without a file name; this one carries ``path`` as its ``filename``, so
    that the command line's one-line message can name it.

    Example:
        >>> import tempfile
        >>> from pathlib import Path
        >>> target = Path(tempfile.mkdtemp()) / "notes.txt"
        >>> write_text(target, "one line")
        >>> target.read_text()
        'one line'
    """
    try:
        Path(path).write_text(text)
    except OSError as error:
        if error.filename is None:
            error.filename = str(path)
        raise
