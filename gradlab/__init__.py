"""gradlab: gradient analysis and diagnostics for ranking losses.

Installed as ``gradlab-ranking`` (``pip install gradlab-ranking``), imported as ``gradlab``.
``import gradlab`` needs torch and NumPy only and changes no global state; the optional parts
(figures, the derivation audit, the studies, logging backends) import their extras when used.
"""

from gradlab._version import __version__
from gradlab.errors import GradlabError
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
    "SmoothAPLoss",
    "__version__",
]
