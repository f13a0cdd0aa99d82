"""Moved: the image-caption miniature lives in :mod:`gradlab.experiments.captions_miniature`.

Kept as a re-export so existing imports keep working; the report itself renders the digit-scenes
study (:mod:`gradlab.experiments.digit_scenes`) instead.
"""

from gradlab.experiments.captions_miniature import *  # noqa: F403
from gradlab.experiments.captions_miniature import (  # noqa: F401
    LOSSES,
    caption_miniature,
    max_violation_triplet,
    nt_xent,
    smoothap_both_directions,
)
