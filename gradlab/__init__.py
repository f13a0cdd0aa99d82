"""gradlab: gradient analysis and diagnostics for ranking losses.

Distributed as ``gradlab-ranking`` (not on the package index yet: ``pip install .`` in a clone),
imported as ``gradlab``.
``import gradlab`` needs torch and NumPy only and changes no global state; the optional parts
(figures, the derivation audit, the studies, logging backends) import their extras when used.

The top-level names load on first use (PEP 562), so ``import gradlab`` itself is cheap and the
``gradlab`` command can refuse a bad option before torch is imported:

    >>> import gradlab
    >>> loss_fn = gradlab.SmoothAPLoss(tau=0.01)
    >>> type(loss_fn).__module__
    'gradlab.losses'

``gradlab.__version__`` is the installed version (PEP 440):

    >>> gradlab.__version__.count(".") >= 2
    True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gradlab._version import __version__
from gradlab.errors import GradlabError

if TYPE_CHECKING:  # what static tools see; at run time __getattr__ loads these on first use
    from gradlab import functional, losses, monitor  # noqa: F401
    from gradlab.losses import (
        BlackboxAPLoss,
        DegenerateBatchWarning,
        FAPPYLoss,
        FastAPLoss,
        MaxViolationTripletLoss,
        NTXentLoss,
        RankingLoss,
        SmoothAPLoss,
    )
    from gradlab.monitor import Monitor
    from gradlab.siglip_loss import SigLIPLoss

_FROM_LOSSES = frozenset({
    "BlackboxAPLoss",
    "DegenerateBatchWarning",
    "FAPPYLoss",
    "FastAPLoss",
    "MaxViolationTripletLoss",
    "NTXentLoss",
    "RankingLoss",
    "SmoothAPLoss",
})
_SUBMODULES = frozenset({"functional", "losses", "monitor"})

__all__ = [
    "BlackboxAPLoss",
    "DegenerateBatchWarning",
    "FAPPYLoss",
    "FastAPLoss",
    "GradlabError",
    "MaxViolationTripletLoss",
    "Monitor",
    "NTXentLoss",
    "RankingLoss",
    "SigLIPLoss",
    "SmoothAPLoss",
    "__version__",
]


def __getattr__(name: str) -> Any:
    """Load a top-level name (a loss, the Monitor, a library subpackage) on first use."""
    # ``import gradlab.x as y``, not ``from gradlab import x``: the latter asks this very
    # function for ``x`` before importing it.
    if name in _FROM_LOSSES:
        import gradlab.losses as losses

        value = getattr(losses, name)
    elif name == "Monitor":
        from gradlab.monitor import Monitor

        value = Monitor
    elif name == "SigLIPLoss":
        from gradlab.siglip_loss import SigLIPLoss

        value = SigLIPLoss
    elif name == "functional":
        import gradlab.functional as value
    elif name == "losses":
        import gradlab.losses as value
    elif name == "monitor":
        import gradlab.monitor as value
    else:
        raise AttributeError(f"module 'gradlab' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(__all__) | _SUBMODULES)
