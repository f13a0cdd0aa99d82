"""Optional dependencies: import one, or raise a :class:`GradlabError` naming the extra.

gradlab's core (the losses, :mod:`gradlab.functional`, the :class:`gradlab.Monitor` with its
JSONL and CSV sinks) needs torch and NumPy only. Everything else is an extra of the
``gradlab-ranking`` distribution, imported where it is used through :func:`require`, so that a
missing package is one clear error (``pip install 'gradlab-ranking[plot]'``) instead of an
``ImportError`` from deep inside a module. That error, :class:`MissingExtraError`, is a
:class:`GradlabError` and an ``ImportError`` at once.

Example:
    >>> require("json", "plot").__name__  # installed: the module itself
    'json'
    >>> install_hint("plot", installed_from=None)
    "pip install 'gradlab-ranking[plot]'"
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import importlib.util
import json
import shlex
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from urllib.parse import unquote, urlparse

from gradlab.errors import GradlabError

DISTRIBUTION = "gradlab-ranking"
"""The name gradlab is installed under (the import name stays ``gradlab``)."""

EXTRAS = (
    "audit",
    "plot",
    "studies",
    "pml",
    "faiss",
    "tensorboard",
    "wandb",
    "mlflow",
    "lightning",
    "transformers",
    "sentence-transformers",
    "open-clip",
    "all",
    "browser",
    "mutation",
    "docs",
    "cockpit",
    "dev",
)
"""The extras of the distribution, as declared in ``pyproject.toml``."""


class MissingExtraError(GradlabError, ImportError):
    """An optional package is not installed; the message names the extra that installs it.

    A :class:`~gradlab.GradlabError` and an :class:`ImportError` at once, so code that skips a
    part on ``except ImportError`` keeps working. ``extra`` is the extra's name and ``name`` the
    missing module's, as for any ``ImportError``.

    Example:
        >>> error = missing_extra("seaborn", "plot")
        >>> isinstance(error, ImportError), isinstance(error, GradlabError), error.extra
        (True, True, 'plot')
    """

    extra: str


@functools.cache  # how this copy was installed does not change while it runs
def local_source() -> tuple[Path, bool] | None:
    """The folder this copy of gradlab was installed from, and whether editably (``pip install
    -e``), from pip's record of the install (``direct_url.json``, PEP 610); ``None`` for an
    install from a package index or a wheel file, or when that folder is gone.

    Example:
        >>> source = local_source()  # a clone installed with pip install -e . gives its folder
        >>> source is None or (source[0] / "pyproject.toml").is_file()
        True
    """
    # the installed record (a build's egg-info in a clone's root, first on the path there,
    # has no direct_url.json)
    recorded = next((text for found in importlib.metadata.distributions(name=DISTRIBUTION)
                     if (text := found.read_text("direct_url.json"))), None)  # fmt: skip
    try:
        info = json.loads(recorded or "{}")
    except ValueError:
        return None
    url = urlparse(str(info.get("url", "")))
    if url.scheme != "file" or not isinstance(info.get("dir_info"), dict):
        return None
    folder = Path(unquote(url.path))
    if not (folder / "pyproject.toml").is_file():
        return None
    return folder, bool(info["dir_info"].get("editable"))


def install_hint(extra: str, installed_from: tuple[Path, bool] | str | None = "auto") -> str:
    """The command that installs ``extra``: ``pip install 'gradlab-ranking[<extra>]'``; for a
    copy installed from a folder (a clone), first the command that adds the extra to that copy.

    Args:
        extra: one of :data:`EXTRAS`.
        installed_from: ``(folder, editable)`` of a copy installed from a folder, ``None`` for
            one installed from a package index; ``"auto"`` (the default): how this copy was
            installed (:func:`local_source`).

    Returns:
        The pip command as a string.

    Raises:
        GradlabError: ``extra`` is not an extra of the distribution.

    Example:
        >>> install_hint("lightning", installed_from=None)
        "pip install 'gradlab-ranking[lightning]'"
        >>> print(install_hint("plot", installed_from=(Path("/src/clone"), True)))
        pip install -e '/src/clone[plot]' (the folder this copy was installed from; from the package index: pip install 'gradlab-ranking[plot]')
    """  # noqa: E501
    _check_extra(extra)
    hint = f"pip install '{DISTRIBUTION}[{extra}]'"
    source = local_source() if installed_from == "auto" else installed_from
    if source is None:
        return hint
    folder, editable = source
    local = shlex.quote(f"{folder}[{extra}]")
    # the folder's command first: it works whether or not the name is on the index yet
    return (f"pip install {'-e ' if editable else ''}{local} (the folder this copy was "
            f"installed from; from the package index: {hint})")  # fmt: skip


def _check_extra(extra: str) -> None:
    if extra not in EXTRAS:
        raise GradlabError(f"extra must be one of {list(EXTRAS)}; got {extra!r}")


def is_installed(module: str) -> bool:
    """Whether ``module`` can be imported, without importing it (its parents are imported).

    Args:
        module: a dotted module name such as ``"torch.utils.tensorboard"``.

    Returns:
        ``True`` when an import system finds a spec for it.

    Example:
        >>> is_installed("json"), is_installed("gradlab_no_such_package.child")
        (True, False)
    """
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a missing parent package, or a module without a spec
        return False


def missing_extra(module: str, extra: str, feature: str | None = None) -> MissingExtraError:
    """The error that says ``feature`` needs ``module``, which ``extra`` installs.

    Args:
        module: the module that is missing (its top-level package is named).
        extra: the extra that installs it, one of :data:`EXTRAS`.
        feature: what needs it (default: ``module``), the start of the message.

    Returns:
        A :class:`MissingExtraError` for the caller to raise.

    Example:
        >>> print(missing_extra("seaborn", "plot", "gradlab.plotting"))  # doctest: +ELLIPSIS
        gradlab.plotting needs the seaborn package, which is not installed; install it with: pip install ...[plot]'...
    """  # noqa: E501
    hint = install_hint(extra)
    package = module.split(".")[0]
    error = MissingExtraError(
        f"{feature or module} needs the {package} package, which is not installed; "
        f"install it with: {hint}"
    )
    error.name, error.extra = module, extra
    return error


def require_installed(modules: Sequence[str], extra: str, feature: str | None = None) -> None:
    """Check that ``modules`` are installed without importing them, or raise a
    :class:`GradlabError` that names the extra to install (for a package whose submodules import
    them later, when an import would cost seconds up front).

    Args:
        modules: dotted module names, checked in order.
        extra: the extra of ``gradlab-ranking`` that installs them, one of :data:`EXTRAS`.
        feature: what needs them, for the message (default: the missing module).

    Raises:
        MissingExtraError: the first of ``modules`` that is not installed; the message names
            ``pip install 'gradlab-ranking[<extra>]'``.
        GradlabError: ``extra`` is not one of :data:`EXTRAS`.

    Example:
        >>> require_installed(["json", "math"], "audit")
    """
    _check_extra(extra)
    for module in modules:
        if not is_installed(module):
            raise missing_extra(module, extra, feature)


def require(module: str, extra: str, feature: str | None = None) -> ModuleType:
    """Import ``module``, or raise a :class:`GradlabError` that names the extra to install.

    Args:
        module: a dotted module name, e.g. ``"matplotlib.pyplot"``.
        extra: the extra of ``gradlab-ranking`` that installs it, one of :data:`EXTRAS`.
        feature: what needs it, for the message (default: ``module``).

    Returns:
        The imported module.

    Raises:
        MissingExtraError: ``module`` (or a package it imports) is not installed; the message
            names ``pip install 'gradlab-ranking[<extra>]'``.
        GradlabError: ``extra`` is not one of :data:`EXTRAS` (checked before the import).

    Example:
        >>> require("math", "audit").sqrt(4.0)
        2.0
    """
    _check_extra(extra)  # before any import (the hint itself is built only on failure)
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise missing_extra(error.name or module, extra, feature) from error
