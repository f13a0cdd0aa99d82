"""The one exception type of gradlab.

Every input error raised by gradlab is a :class:`GradlabError`. It subclasses
:class:`ValueError`, so code that already catches ``ValueError`` keeps working.
Messages name the argument, what was received and what is allowed.
"""

from __future__ import annotations


class GradlabError(ValueError):
    """Invalid input to a gradlab function or class.

    Example:
        >>> import torch
        >>> from gradlab.functional import smooth_ap
        >>> try:
        ...     smooth_ap(torch.zeros(2, 3), torch.ones(2, 3, dtype=torch.bool), tau=-1.0)
        ... except GradlabError as error:
        ...     print(error)
        tau must be a positive finite number; got -1.0
    """
