"""Pure torch functions: the math of gradlab lives here and only here."""

from gradlab.functional.decomposition import SmoothAPDecomposition, smooth_ap_decomposition
from gradlab.functional.diagnostics import decomposition_norms, in_batch_decomposition
from gradlab.functional.layouts import (
    RetrievalLayout,
    cross_modal_layout,
    drop_diagonal,
    in_batch_layout,
)
from gradlab.functional.operating_region import (
    GradientCounts,
    expected_operating_region_proportion,
    gradient_counts,
    operating_region_is_empty,
    operating_region_proportion,
    operating_region_width,
)
from gradlab.functional.sigmoid import sigmoid_slope, tempered_sigmoid
from gradlab.functional.smooth_ap import smooth_ap

__all__ = [
    "GradientCounts",
    "RetrievalLayout",
    "SmoothAPDecomposition",
    "cross_modal_layout",
    "decomposition_norms",
    "drop_diagonal",
    "expected_operating_region_proportion",
    "gradient_counts",
    "in_batch_decomposition",
    "in_batch_layout",
    "operating_region_is_empty",
    "operating_region_proportion",
    "operating_region_width",
    "sigmoid_slope",
    "smooth_ap",
    "smooth_ap_decomposition",
    "tempered_sigmoid",
]
