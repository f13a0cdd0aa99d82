"""gradlab: gradient analysis and diagnostics for ranking losses."""

from gradlab.errors import GradlabError
from gradlab.losses import SmoothAPLoss

__version__ = "0.1.0"
__all__ = ["GradlabError", "SmoothAPLoss", "__version__"]
