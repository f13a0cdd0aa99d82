"""gradlab: gradient analysis and diagnostics for ranking losses."""

from gradlab.errors import GradlabError
from gradlab.losses import (
    BlackboxAPLoss,
    FAPPYLoss,
    FastAPLoss,
    MaxViolationTripletLoss,
    NTXentLoss,
    SmoothAPLoss,
)
from gradlab.monitor import Monitor

__version__ = "0.1.0"
__all__ = [
    "BlackboxAPLoss",
    "FAPPYLoss",
    "FastAPLoss",
    "GradlabError",
    "MaxViolationTripletLoss",
    "Monitor",
    "NTXentLoss",
    "SmoothAPLoss",
    "__version__",
]
