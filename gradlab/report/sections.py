"""The report's sections: each computes through gradlab, draws its figures, returns markdown."""

from __future__ import annotations

import json
from pathlib import Path

from gradlab.plotting.operating_region import (
    plot_closed_forms,
    plot_p_against_batch_size,
    plot_training_dynamics,
)
from gradlab.report.operating_region import (
    closed_form_curves,
    p_against_batch_size,
    training_dynamics,
)
from gradlab.report.verification import smoothap_gradient_errors

OPERATING_REGION_FIGURES = {
    "operating_region_closed_forms": (lambda quick: closed_form_curves(), plot_closed_forms),
    "operating_region_p_vs_batch_size": (
        lambda quick: p_against_batch_size(quick=quick),
        plot_p_against_batch_size,
    ),
    "operating_region_training_dynamics": (
        lambda quick: training_dynamics(quick=quick),
        plot_training_dynamics,
    ),
}
"""Figure name -> (compute(quick) -> results, plot(results, path)); shared with analyses/."""


def draw_figures(table: dict, folder: Path, quick: bool) -> dict[str, dict]:
    """Compute every entry of a figure table, save its JSON and PNG in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    results = {}
    for name, (compute, plot) in table.items():
        results[name] = compute(quick)
        (folder / f"{name}.json").write_text(json.dumps(results[name], indent=1))
        plot(results[name], folder / f"{name}.png")
    return results


def verification_section(out: Path, quick: bool) -> tuple[dict, str]:
    """Analytic gradients against autograd and finite differences, float64."""
    errors = smoothap_gradient_errors(trials=3 if quick else 20)
    lines = [
        "## Numeric verification (float64)",
        "",
        "| check | max abs error |",
        "| --- | --- |",
        *(f"| {name} | {value:.2e} |" for name, value in errors.items()),
    ]
    return {"smoothap_gradients": errors}, "\n".join(lines)


def operating_region_section(out: Path, quick: bool) -> tuple[dict, str]:
    """Closed-form width, P against batch size, and P over a SmoothAP training run."""
    drawn = draw_figures(OPERATING_REGION_FIGURES, out / "figures", quick)
    closed = drawn["operating_region_closed_forms"]
    batch = drawn["operating_region_p_vs_batch_size"]
    dynamics = drawn["operating_region_training_dynamics"]
    last = dynamics["history"][-1]
    lines = [
        "## Operating region",
        "",
        f"At tau = 0.01 and eps = 0.005 (seed 002) the slope exceeds eps exactly when "
        f"|D| < w = {closed['seed_setting']['width']:.4f}.",
        "",
        "![width and expected P](figures/operating_region_closed_forms.png)",
        "",
        "### P against mini-batch size (seed 002, Fig. S7a)",
        "",
        batch["conclusion"],
        "",
        "![P against batch size](figures/operating_region_p_vs_batch_size.png)",
        "",
        "### Over a SmoothAP training run",
        "",
        f"After {last['step'] + 1} steps: P = {last['p_seed_definition']:.3f}, "
        f"share of queries without gradient = {last['share_without_gradient']:.3f}, "
        f"|AD| share = {last['ad_share']:.3f}.",
        "",
        "![training dynamics](figures/operating_region_training_dynamics.png)",
    ]
    results = {"closed_forms": closed["seed_setting"], "p_vs_batch_size": batch}
    results["training_dynamics_last_step"] = last
    return results, "\n".join(lines)
