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
    >>> install_hint("plot")
    "pip install 'gradlab-ranking[plot]'"
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

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


def install_hint(extra: str) -> str:
    """The command that installs ``extra``: ``pip install 'gradlab-ranking[<extra>]'``.

    Args:
        extra: one of :data:`EXTRAS`.

    Returns:
        The pip command as a string.

    Raises:
        GradlabError: ``extra`` is not an extra of the distribution.

    Example:
        >>> install_hint("lightning")
        "pip install 'gradlab-ranking[lightning]'"
    """
    if extra not in EXTRAS:
        raise GradlabError(f"extra must be one of {list(EXTRAS)}; got {extra!r}")
    return f"pip install '{DISTRIBUTION}[{extra}]'"


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
        >>> print(missing_extra("seaborn", "plot", "gradlab.plotting"))
        gradlab.plotting needs the seaborn package, which is not installed; install it with: pip install 'gradlab-ranking[plot]'
    """  # noqa: E501
    hint = install_hint(extra)
    package = module.split(".")[0]
    error = MissingExtraError(
        f"{feature or module} needs the {package} package, which is not installed; "
        f"install it with: {hint}"
    )
    error.name, error.extra = module, extra
    return error


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
    install_hint(extra)  # check the extra before any import
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise missing_extra(error.name or module, extra, feature) from error
