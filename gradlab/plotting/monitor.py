"""Figures from a Monitor log: one per quantity family, each skipped when its data is missing."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt

from gradlab.errors import GradlabError
from gradlab.monitor.sinks import read_jsonl
from gradlab.plotting.style import apply_style, save_figure

FAMILIES = {
    "loss": ("Loss", ("loss",), "loss"),
    "embeddings": ("Embeddings", ("embedding_norm_mean", "embedding_norm_min", "embedding_norm_max",
                                  "embedding_grad_norm", "embedding_grad_norm_row_mean"), "norm"),
    "operating_region": ("Operating-region proportion P", ("p_seed", "p_off_diagonal",
                         "p_without_query", "p_cross_modal"), "proportion"),
    "decomposition": ("AD - CB decomposition (medians over queries)", ("decomposition_ad_norm_q50",
                      "decomposition_cb_norm_q50", "decomposition_grad_norm_q50"), "norm"),
    "decomposition_shape": ("AD share and cosine(AD, CB) (means over queries)",
                            ("decomposition_ad_share_mean", "decomposition_cosine_mean"), "value"),
    "gradient_counts": ("Queries without gradient entries", ("queries_without_gradient",
                        "queries_without_gradient_weighted"), "queries"),
    "relaxation_gap": ("Smooth AP vs exact AP", ("smooth_ap", "exact_ap", "relaxation_gap"), "AP"),
    "gradient_agreement": ("Analytic vs backpropagated gradient", ("gradient_agreement_cosine",
                           "gradient_agreement_relative_error"), "value"),
    "anatomy_active_negatives": ("Negatives receiving gradient per query (mean; i2t / t2i: "
                                 "cross-modal directions)", ("anatomy_active_negatives_mean",
                                 "anatomy_i2t_active_negatives_mean",
                                 "anatomy_t2i_active_negatives_mean"), "negatives"),
    "anatomy_hardness": ("Hardness of the negatives receiving gradient: share of their gradient "
                         "on the hardest 10 %, relative rank depth", ("anatomy_hardest_10pct_share",
                         "anatomy_i2t_hardest_10pct_share", "anatomy_t2i_hardest_10pct_share",
                         "anatomy_active_rank_depth", "anatomy_i2t_active_rank_depth",
                         "anatomy_t2i_active_rank_depth"), "share / depth"),
    "anatomy_without_gradient": ("Queries receiving no gradient (anatomy)", (
                                 "anatomy_queries_without_gradient",
                                 "anatomy_i2t_queries_without_gradient",
                                 "anatomy_t2i_queries_without_gradient"), "share of queries"),
}  # fmt: skip
"""Family -> (title, keys, y label)."""


def plot_run(run_dir: str | Path, out: str | Path | None = None) -> list[Path]:
    """Draw every family present in ``RUN_DIR/metrics.jsonl``; return the written paths."""
    log = Path(run_dir) / "metrics.jsonl"
    if not log.exists():
        raise GradlabError(
            f"run_dir must hold a metrics.jsonl written by gradlab.Monitor; got {run_dir}"
        )
    _, records = read_jsonl(log)
    if not records:
        raise GradlabError(f"{log} holds no logged step yet")
    folder = Path(out) if out is not None else Path(run_dir) / "figures"
    apply_style()
    written = []
    for family, (title, keys, ylabel) in FAMILIES.items():
        present = [key for key in keys if any(key in r for r in records)]
        if not present:
            continue
        figure, axis = plt.subplots(figsize=(8, 4.2))
        for key in present:
            points = [(r["step"], r[key]) for r in records if key in r and _finite(r[key])]
            if points:
                axis.plot(*zip(*points, strict=True), marker=".", label=key)
        axis.set(xlabel="optimizer step", ylabel=ylabel, title=title)
        axis.legend(fontsize=8)
        written.append(save_figure(figure, folder / f"{family}.png"))
    return written


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)
