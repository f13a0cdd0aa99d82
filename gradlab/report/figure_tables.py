"""Figure tables: name -> (compute(quick) -> results, plot(results, path)).

The report's sections and the ``analyses/`` scripts draw the same figures from the same tables;
:func:`draw_figures` computes each entry through :mod:`gradlab.experiments`, writes its JSON and
draws its PNG.
"""

from __future__ import annotations

from pathlib import Path

from gradlab.experiments.fappy_lemma import lemma1_gradient_support
from gradlab.experiments.operating_region import (
    closed_form_curves,
    p_against_batch_size,
    training_dynamics,
)
from gradlab.experiments.tie_aware import harmonic_error_surface, relaxation_gap_against_scale
from gradlab.jsonio import write_json
from gradlab.plotting.losses import plot_lemma1
from gradlab.plotting.operating_region import (
    plot_closed_forms,
    plot_p_against_batch_size,
    plot_training_dynamics,
)
from gradlab.plotting.tie_aware import plot_harmonic_error, plot_relaxation_gap

OPERATING_REGION_FIGURES = {
    "operating_region_closed_forms": (lambda quick: closed_form_curves(), plot_closed_forms),
    "operating_region_training_dynamics": (
        lambda quick: training_dynamics(quick=quick),
        plot_training_dynamics,
    ),
}
"""Figure name -> (compute(quick) -> results, plot(results, path)); shared with analyses/."""


P_VS_BATCH_SIZE_10_CLASSES = {
    "operating_region_p_vs_batch_size_10_classes": (
        lambda quick: p_against_batch_size(quick=quick),
        plot_p_against_batch_size,
    ),
}
"""The 10-class digits version of P vs m (uniform vs 8-class batches): analyses/ only."""


TIE_AWARE_FIGURES = {
    "tie_aware_harmonic_error": (lambda quick: harmonic_error_surface(), plot_harmonic_error),
    "tie_aware_relaxation_gap": (
        lambda quick: relaxation_gap_against_scale(quick=quick),
        plot_relaxation_gap,
    ),
}
"""Figure table of the harmonic-vs-log section (see ``OPERATING_REGION_FIGURES``)."""


LOSS_FIGURES = {
    "fappy_lemma1_gradient": (
        lambda quick: lemma1_gradient_support(configurations=60 if quick else 300),
        plot_lemma1,
    ),
}
"""Figure table of the other AP losses (FAPPY's Lemma 1 measured)."""


def draw_figures(table: dict, folder: Path, quick: bool) -> dict[str, dict]:
    """Compute every entry of a figure table, save its JSON and PNG in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    results = {}
    for name, (compute, plot) in table.items():
        results[name] = compute(quick)
        write_json(folder / f"{name}.json", results[name])
        plot(results[name], folder / f"{name}.png")
    return results
