"""The report's sections: each computes through gradlab, draws its figures, returns markdown."""

from __future__ import annotations

import json
from pathlib import Path

from gradlab.experiments.operating_region import (
    closed_form_curves,
    p_against_batch_size,
    training_dynamics,
)
from gradlab.jsonio import write_json
from gradlab.plotting.losses import plot_lemma1
from gradlab.plotting.operating_region import (
    plot_closed_forms,
    plot_p_against_batch_size,
    plot_training_dynamics,
)
from gradlab.plotting.tie_aware import plot_harmonic_error, plot_relaxation_gap
from gradlab.report.fappy_lemma import lemma1_gradient_support, lemma1_verdict
from gradlab.report.tie_aware import (
    harmonic_error_surface,
    relaxation_gap_against_scale,
    relaxation_summary,
)
from gradlab.report.verification import gradient_error_table

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


TIE_AWARE_FIGURES = {
    "tie_aware_harmonic_error": (lambda quick: harmonic_error_surface(), plot_harmonic_error),
    "tie_aware_relaxation_gap": (
        lambda quick: relaxation_gap_against_scale(quick=quick),
        plot_relaxation_gap,
    ),
}
"""Figure table of the harmonic-vs-log section (see ``OPERATING_REGION_FIGURES``)."""


def analysis_main(table: dict, description: str, conclusion=None) -> None:
    """Command line of an ``analyses/`` script: draw a figure table into ``--out``."""
    import argparse

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="small settings, for tests")
    parser.add_argument("--out", type=Path, default=Path.cwd() / "figures")
    arguments = parser.parse_args()
    results = draw_figures(table, arguments.out, arguments.quick)
    print(f"wrote {len(results)} figures into {arguments.out}")
    if conclusion is not None:
        print(conclusion(results))


def draw_figures(table: dict, folder: Path, quick: bool) -> dict[str, dict]:
    """Compute every entry of a figure table, save its JSON and PNG in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    results = {}
    for name, (compute, plot) in table.items():
        results[name] = compute(quick)
        write_json(folder / f"{name}.json", results[name])
        plot(results[name], folder / f"{name}.png")
    return results


LOSS_FIGURES = {
    "fappy_lemma1_gradient": (
        lambda quick: lemma1_gradient_support(configurations=60 if quick else 300),
        plot_lemma1,
    ),
}
"""Figure table of the other AP losses (FAPPY's Lemma 1 measured)."""


def audit_section(out: Path, quick: bool, device: str = "cpu") -> tuple[dict, str]:
    """The derivation audit: every printed claim of the seeds with its verdict."""
    from gradlab.symbolic.audit import format_markdown, run_audit, summary_counts

    records = run_audit()
    (out / "audit.json").write_text(json.dumps(records, indent=1))
    body = format_markdown(records).replace("# Derivation audit", "## Derivation audit", 1)
    body = body.replace("\n## 00", "\n### 00").replace("\n### `", "\n#### `")
    return {"counts": summary_counts(records), "records": records}, body


def verification_section(out: Path, quick: bool, device: str = "cpu") -> tuple[dict, str]:
    """Analytic gradients against autograd and finite differences, float64."""
    table = gradient_error_table(trials=2 if quick else 10)
    lemma = draw_figures(LOSS_FIGURES, out / "figures", quick)["fappy_lemma1_gradient"]
    lines = ["## Numeric verification (float64)", "", "| family | check | max abs error |"]
    lines.append("| --- | --- | --- |")
    for family, errors in table.items():
        lines += [f"| {family} | {name} | {value:.2e} |" for name, value in errors.items()]
    lines += ["", "### FAPPY Lemma 1, measured", "", lemma1_verdict(lemma), ""]
    lines.append("![FAPPY Lemma 1](figures/fappy_lemma1_gradient.png)")
    summary = {k: v for k, v in lemma.items() if not isinstance(v, list)}
    return {"gradient_errors": table, "fappy_lemma1": summary}, "\n".join(lines)


def operating_region_section(out: Path, quick: bool, device: str = "cpu") -> tuple[dict, str]:
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


def tie_aware_section(out: Path, quick: bool, device: str = "cpu") -> tuple[dict, str]:
    """Harmonic vs log: the error surface and relaxed vs exact AP / DCG."""
    drawn = draw_figures(TIE_AWARE_FIGURES, out / "figures", quick)
    surface = drawn["tie_aware_harmonic_error"]
    gap = drawn["tie_aware_relaxation_gap"]
    lines = [
        "## Harmonic sums vs logarithms (seed 003)",
        "",
        f"The error of ln((N+n)/N) against H(N+n) - H(N) stays below the paper's bound n/(2N^2) "
        f"on the whole grid: {surface['bound_holds']}; the largest error/bound ratio is "
        f"{surface['largest_error_over_bound']:.3f}.",
        "",
        "![harmonic error](figures/tie_aware_harmonic_error.png)",
        "",
        relaxation_summary(gap),
        "",
        "![relaxed vs exact](figures/tie_aware_relaxation_gap.png)",
    ]
    summary = {k: v for k, v in surface.items() if k in ("largest_error_over_bound", "bound_holds")}
    runs = [{k: r[k] for k in r if k != "gaps"} for r in gap["runs"]]
    return {"harmonic_error": summary, "relaxation_gap": runs}, "\n".join(lines)


def training_section(out: Path, quick: bool, device: str = "cpu") -> tuple[dict, str]:
    """SmoothAP on real data (digits) with the Monitor: retrieval before and after, and figures."""
    from gradlab.experiments.digits_training import digits_training
    from gradlab.plotting.report_figures import plot_retrieval_before_after

    results = digits_training(out, quick=quick, device=device)
    plot_retrieval_before_after(results, out / "figures" / "training_retrieval.png")
    unseen_before, unseen_after = results["unseen_classes_before"], results["unseen_classes_after"]
    seen_before = results["seen_classes_held_out_before"]
    seen_after = results["seen_classes_held_out_after"]
    rows = [
        f"| {name} | {unseen_before[name]:.3f} | {unseen_after[name]:.3f} | "
        f"{seen_before[name]:.3f} | {seen_after[name]:.3f} |"
        for name in unseen_before
    ]
    lines = [
        "## SmoothAP training on real data (digits)",
        "",
        "An MLP embedding trained with SmoothAP (tau = 0.01) on classes 0-4 for "
        f"{results['epochs']} epochs ({results['steps']} steps, class-balanced batches of 5 "
        "classes x 8), the Monitor logging the full preset every other step. Each image queries "
        "all the others.",
        "",
        "| metric | unseen 5-9 before | unseen 5-9 after | seen 0-4 (held out) before "
        "| seen 0-4 after |",
        "| --- | --- | --- | --- | --- |",
        *rows,
        "",
        _training_sentence(unseen_before, unseen_after, seen_before, seen_after),
        "",
        "![retrieval before and after](figures/training_retrieval.png)",
        "",
        *(f"![{Path(f).stem}]({f})" + "\n" for f in results["figures"]),
    ]
    return results, "\n".join(lines)


def _training_sentence(unseen_before, unseen_after, seen_before, seen_after) -> str:
    def change(before, after):
        delta = after["mAP"] - before["mAP"]
        return f"{'rises' if delta > 0 else 'falls'} from {before['mAP']:.3f} to {after['mAP']:.3f}"

    return (
        "mAP on held-out images of the training classes "
        f"{change(seen_before, seen_after)}; on the unseen classes it "
        f"{change(unseen_before, unseen_after)}. Raw digit pixels already retrieve well; how much "
        "of what SmoothAP learns on 0-4 transfers to 5-9 is what this row measures."
    )


def captions_section(out: Path, quick: bool, device: str = "cpu") -> tuple[dict, str]:
    """The image-caption miniature of Bleeker & de Rijke's setting, three losses."""
    from gradlab.experiments.captions_miniature import caption_miniature
    from gradlab.plotting.report_figures import plot_captions

    results = caption_miniature(quick=quick, device=device)
    plot_captions(results, out / "figures" / "captions.png")
    keys = list(next(iter(results["losses"].values()))["recall"])
    lines = [
        "## Image-caption miniature (seed 001, appendix B)",
        "",
        "A VSE++-style dual encoder on the digits: a frozen PCA backbone with a trained projection "
        "for images, a GRU over word embeddings trained from scratch for five templated captions "
        "per image, both on the unit sphere. Batches of 10 images of distinct digits with their 50 "
        f"captions ({results['steps']} steps): an image query has 5 positive captions, a caption "
        "query 1 positive image. Held-out recall (relevance: the same digit; held-out images "
        "against the 50 distinct captions, and each caption against the held-out images):",
        "",
        "| loss | " + " | ".join(keys) + " |",
        "| --- |" + " --- |" * len(keys),
    ]
    for name, run in results["losses"].items():
        lines.append(f"| {name} | " + " | ".join(f"{run['recall'][k]:.3f}" for k in keys) + " |")
    lines += [
        "",
        "Share of queries whose SmoothAP terms carry no gradient (slope > 0.005 at tau = 0.01), "
        "last logged step:",
        "",
    ]
    lines += ["| loss | image -> caption | caption -> image |", "| --- | --- | --- |"]
    for name, run in results["losses"].items():
        last = run["gradient_counts"][-1]
        forward, backward = last["i2t_share_without_gradient"], last["t2i_share_without_gradient"]
        lines.append(f"| {name} | {forward:.2f} | {backward:.2f} |")
    lines += ["", "![captions](figures/captions.png)"]
    summary = {
        name: {"recall": run["recall"], "gradient_counts_last": run["gradient_counts"][-1]}
        for name, run in results["losses"].items()
    }
    return {"steps": results["steps"], "losses": summary}, "\n".join(lines)
