"""Pure torch functions: the math of gradlab lives here and only here.

Every function takes tensors in one convention (the glossary of the docs): ``scores [Q, C]``
with ``positives [Q, C]`` bool and an optional ``candidate_mask [Q, C]``, or ``embeddings
[B, d]`` with ``labels [B]``. By the question they answer:

- Which pairs receive gradient, for any loss on a score matrix: ``gradient_anatomy``
  (``GradientAnatomy``), ``false_negative_suspects``, ``suspect_summary``
  (``SuspectSummary``), ``content_hashes``.
- SmoothAP's sigmoid and its operating region (Brown et al. 2020; Bleeker & de Rijke 2022):
  ``smooth_ap``, ``tempered_sigmoid``, ``sigmoid_slope``, ``operating_region_width``,
  ``operating_region_widths``, ``operating_region_is_empty``, ``operating_region_proportion``,
  ``expected_operating_region_proportion``, ``gradient_counts`` (``GradientCountSummary``).
- SmoothAP's gradient in terms ``AD - CB``: ``smooth_ap_decomposition``
  (``SmoothAPDecomposition``), ``in_batch_decomposition``, ``decomposition_norms``.
- Losses as functions (the modules of :mod:`gradlab.losses` wrap them): ``smooth_ap_loss``,
  ``mean_ap_loss``, ``fastap``, ``fastap_loss``, ``blackbox_ap``, ``blackbox_ap_loss``,
  ``descending_ranks`` (``BlackboxRanks``), ``nt_xent_loss``, ``max_violation_triplet_loss``,
  ``sigmoid_pair_loss``, ``fappy_loss``.
- Exact retrieval metrics: ``tie_aware_ap``, ``tie_aware_dcg``, ``tie_aware_ndcg``,
  ``harmonic_number``, ``recall_at_k``, ``retrieval_report``, ``retrieval_at_scale``,
  ``precision_at_1``, ``r_precision``, ``map_at_r``, ``nearest_neighbours``.
- Relaxed tie-aware ranking and harmonic sums as logarithms (He et al. 2018):
  ``relaxed_tie_aware_ap``, ``relaxed_tie_aware_dcg``, ``soft_histogram``,
  ``triangular_kernel``, ``relaxed_hamming_distances``, ``minibatch_objective_terms``,
  ``minibatch_gradient_matrix_form``, ``harmonic_gap``, ``harmonic_rate``, ``discount_gap``,
  ``discount_rate``, ``harmonic_log_error`` (``HarmonicLogError``), ``logarithmic_integral``,
  ``HARMONIC_METHODS``.
- The false-positive probability (Zhong et al.): ``false_positive_probability``,
  ``fappy_deltas``, ``fappy_gradient_closed_form``, ``fappy_lemma1_as_printed``,
  ``cosine_from_euclidean``, ``euclidean_from_cosine``.
- Geometry and temperature of embeddings (Wang & Isola 2020; Garrido et al. 2023):
  ``alignment``, ``uniformity``, ``in_batch_alignment_uniformity``, ``effective_rank``
  (``EffectiveRank``), ``normalized_std``, ``modality_gap``, ``query_margins``,
  ``in_batch_margins`` (``QueryMargins``), ``chance_level``, ``temperature_gradient``.
- Score matrices from embeddings: ``in_batch_layout``, ``cross_modal_layout``
  (``RetrievalLayout``), ``in_batch_retrieval``, ``drop_diagonal``.

``smooth_ap``, ``fastap``, ``blackbox_ap``, ``gradient_anatomy`` and ``retrieval_at_scale``
are functions here that share their module's name: a module's other names are imported from
it (``from gradlab.functional.gradient_anatomy import DEFAULT_ABSOLUTE_THRESHOLD``).

Constants: ``HARMONIC_METHODS``, the continuous stand-ins that :func:`harmonic_gap` and
:func:`discount_gap` accept:

    >>> from gradlab.functional import HARMONIC_METHODS
    >>> HARMONIC_METHODS
    ('log', 'midpoint', 'exact')
"""

import inspect

from gradlab.functional.blackbox_ap import (
    BlackboxRanks,
    blackbox_ap,
    blackbox_ap_loss,
    descending_ranks,
)
from gradlab.functional.decomposition import SmoothAPDecomposition, smooth_ap_decomposition
from gradlab.functional.diagnostics import decomposition_norms, in_batch_decomposition
from gradlab.functional.fappy import (
    cosine_from_euclidean,
    euclidean_from_cosine,
    false_positive_probability,
    fappy_deltas,
    fappy_gradient_closed_form,
    fappy_lemma1_as_printed,
    fappy_loss,
)
from gradlab.functional.fastap import fastap
from gradlab.functional.geometry import (
    EffectiveRank,
    QueryMargins,
    alignment,
    chance_level,
    effective_rank,
    in_batch_alignment_uniformity,
    in_batch_margins,
    modality_gap,
    normalized_std,
    query_margins,
    temperature_gradient,
    uniformity,
)
from gradlab.functional.gradient_anatomy import GradientAnatomy, gradient_anatomy
from gradlab.functional.harmonic import (
    HARMONIC_METHODS,
    HarmonicLogError,
    discount_gap,
    discount_rate,
    harmonic_gap,
    harmonic_log_error,
    harmonic_rate,
    logarithmic_integral,
)
from gradlab.functional.layouts import (
    RetrievalLayout,
    cross_modal_layout,
    drop_diagonal,
    in_batch_layout,
)
from gradlab.functional.losses import fastap_loss, mean_ap_loss, smooth_ap_loss
from gradlab.functional.operating_region import (
    GradientCountSummary,
    expected_operating_region_proportion,
    gradient_counts,
    operating_region_is_empty,
    operating_region_proportion,
    operating_region_width,
    operating_region_widths,
)
from gradlab.functional.precision import call_form_checked
from gradlab.functional.relaxed_ranking import (
    minibatch_gradient_matrix_form,
    minibatch_objective_terms,
    relaxed_hamming_distances,
    relaxed_tie_aware_ap,
    relaxed_tie_aware_dcg,
    soft_histogram,
    triangular_kernel,
)
from gradlab.functional.retrieval_at_scale import (
    map_at_r,
    nearest_neighbours,
    precision_at_1,
    r_precision,
    retrieval_at_scale,
)
from gradlab.functional.retrieval_metrics import in_batch_retrieval, recall_at_k, retrieval_report
from gradlab.functional.score_losses import max_violation_triplet_loss, nt_xent_loss
from gradlab.functional.siglip import sigmoid_pair_loss
from gradlab.functional.sigmoid import sigmoid_slope, tempered_sigmoid
from gradlab.functional.smooth_ap import smooth_ap
from gradlab.functional.suspects import (
    SuspectSummary,
    content_hashes,
    false_negative_suspects,
    suspect_summary,
)
from gradlab.functional.tie_aware import (
    harmonic_number,
    tie_aware_ap,
    tie_aware_dcg,
    tie_aware_ndcg,
)

__all__ = [
    "HARMONIC_METHODS",
    "BlackboxRanks",
    "EffectiveRank",
    "GradientAnatomy",
    "GradientCountSummary",
    "HarmonicLogError",
    "QueryMargins",
    "RetrievalLayout",
    "SmoothAPDecomposition",
    "SuspectSummary",
    "alignment",
    "blackbox_ap",
    "blackbox_ap_loss",
    "chance_level",
    "content_hashes",
    "cosine_from_euclidean",
    "cross_modal_layout",
    "decomposition_norms",
    "descending_ranks",
    "discount_gap",
    "discount_rate",
    "drop_diagonal",
    "effective_rank",
    "euclidean_from_cosine",
    "expected_operating_region_proportion",
    "false_negative_suspects",
    "false_positive_probability",
    "fappy_deltas",
    "fappy_gradient_closed_form",
    "fappy_lemma1_as_printed",
    "fappy_loss",
    "fastap",
    "fastap_loss",
    "gradient_anatomy",
    "gradient_counts",
    "harmonic_gap",
    "harmonic_log_error",
    "harmonic_number",
    "harmonic_rate",
    "in_batch_alignment_uniformity",
    "in_batch_decomposition",
    "in_batch_layout",
    "in_batch_margins",
    "in_batch_retrieval",
    "logarithmic_integral",
    "map_at_r",
    "max_violation_triplet_loss",
    "mean_ap_loss",
    "minibatch_gradient_matrix_form",
    "minibatch_objective_terms",
    "modality_gap",
    "nearest_neighbours",
    "normalized_std",
    "nt_xent_loss",
    "operating_region_is_empty",
    "operating_region_proportion",
    "operating_region_width",
    "operating_region_widths",
    "precision_at_1",
    "query_margins",
    "r_precision",
    "recall_at_k",
    "relaxed_hamming_distances",
    "relaxed_tie_aware_ap",
    "relaxed_tie_aware_dcg",
    "retrieval_at_scale",
    "retrieval_report",
    "sigmoid_pair_loss",
    "sigmoid_slope",
    "smooth_ap",
    "smooth_ap_decomposition",
    "smooth_ap_loss",
    "soft_histogram",
    "suspect_summary",
    "temperature_gradient",
    "tempered_sigmoid",
    "tie_aware_ap",
    "tie_aware_dcg",
    "tie_aware_ndcg",
    "triangular_kernel",
    "uniformity",
]


def _refusing_misfit_calls() -> None:
    """Export each public function of this package as :func:`call_form_checked` of itself: a
    call that does not fit its signature is a ``GradlabError`` showing it. Wrapped here, where
    users call them, not where they are defined: mutation testing (mutmut) leaves decorated
    functions out, and gradlab's own calls of them pay no wrapper."""
    names = globals()
    for name in __all__:
        function = names[name]
        # outside_autocast's functions refuse them already
        if inspect.isfunction(function) and not getattr(function, "refuses_misfit_calls", False):
            names[name] = call_form_checked(function)


_refusing_misfit_calls()
