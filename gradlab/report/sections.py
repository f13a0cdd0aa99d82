"""The report's sections: each runs its study, draws its figures and returns its markdown.

A section is ``(out, quick, device) -> (results, markdown)``. The numbers come from
:mod:`gradlab.experiments`, the words from :mod:`gradlab.report.prose`, the shared figure tables
from :mod:`gradlab.report.figure_tables`.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

from gradlab.experiments import digit_scenes, loss_comparison, p_vs_batch_size
from gradlab.experiments.pml_grouping import grouping_check
from gradlab.experiments.runtime import computed_once
from gradlab.experiments.verification import gradient_error_table
from gradlab.extras import install_hint
from gradlab.jsonio import write_json
from gradlab.progress import progress
from gradlab.report.figure_tables import (
    LOSS_FIGURES,
    OPERATING_REGION_FIGURES,
    TIE_AWARE_FIGURES,
    draw_figures,
)
from gradlab.report.monitor_captions import monitor_figure_caption
from gradlab.report.prose import (
    anatomy_text,
    check_label,
    geometry_text,
    lemma1_verdict,
    loss_comparison_text,
    p_vs_batch_size_text,
    pml_grouping_sentence,
    relaxation_summary,
    scenes_text,
    sweep_lines,
    timing_sentence,
    training_sentence,
    unswept_sentence,
)
from gradlab.report.summaries import cell, mutant_outcomes, mutants_sentence


@computed_once  # the audit and the operating-region section, side by side, share one run
def _p_vs_batch_size(quick: bool, device: str) -> dict:
    return p_vs_batch_size.measure(quick=quick, device=device)


def p_vs_batch_size_measurement(quick: bool, device: str) -> dict:
    """The report's P-vs-m measurement, measured once per settings and shared by the audit
    (which decides the batch-size claim from it) and the operating-region section."""
    return copy.deepcopy(_p_vs_batch_size(quick, device))


def audit_section(out: Path, quick: bool, device: str = "cpu") -> tuple[dict, str]:
    """The derivation audit: every printed claim of the seeds with its verdict; the empirical
    claim decided from the report's own P-vs-m measurement."""
    from gradlab.symbolic.audit import all_claims, paper_stages, run_audit, summary_counts

    measurement = p_vs_batch_size_measurement(quick, device)
    claims = all_claims(p_vs_batch_size=measurement)
    records = []
    for desc, own in paper_stages(claims, mutants=not quick):  # one progress line per paper
        stage = progress(total=len(own), unit="claim", desc=desc)
        records += run_audit(own, mutants=not quick)
        stage.update(len(own))
        stage.close()  # not on an exception: nothing is said done after Ctrl-C
    (out / "audit.json").write_text(json.dumps(records, indent=1))
    return {"counts": summary_counts(records), "records": records}, audit_markdown(records)


def audit_markdown(records: list[dict]) -> str:
    """The audit's markdown one level down: the audit is one section of the report (``##
    Derivation audit``), each paper a subsection headed by its citation. The claims' LaTeX
    lines are left out: the report's page renders no math (they showed as raw ``$...$``), and
    each claim's printed formula is there in words. Under the table of counts, the mutants by
    kind (:func:`gradlab.report.summaries.mutant_outcomes`): its last column counts a mutant
    as killed whether the check refutes it or cannot evaluate it."""
    from gradlab.symbolic.audit import format_markdown

    text = re.sub(r"^- LaTeX: .*\n?", "", format_markdown(records), flags=re.MULTILINE)
    outcomes = mutant_outcomes(records)
    if sum(outcomes.values()):
        split = ("\n\nThe last column counts a mutant as killed whether its check refutes it or "
                 f"cannot evaluate it. {mutants_sentence(outcomes)}")  # fmt: skip
        text = re.sub(r"^(\| all papers \|.*)$", lambda row: row.group(1) + split, text,
                      count=1, flags=re.MULTILINE)  # fmt: skip
    return re.sub(r"^(#{1,5}) ", r"#\1 ", text, flags=re.MULTILINE)


def verification_section(out: Path, quick: bool, device: str = "cpu") -> tuple[dict, str]:
    """Analytic gradients against autograd and finite differences, float64."""
    table = gradient_error_table(trials=2 if quick else 10)
    lemma = draw_figures(LOSS_FIGURES, out / "figures", quick)["fappy_lemma1_gradient"]
    lines = ["## Numeric verification (float64)", "", "| family | check | max abs error |"]
    lines.append("| --- | --- | --- |")
    for family, errors in table.items():
        lines += [f"| {family} | {check_label(name)} | {value:.2e} |"
                  for name, value in errors.items()]  # fmt: skip
    lines += ["", "### FAPPY Lemma 1, measured", "", lemma1_verdict(lemma), ""]
    lines.append("![Where dP_ij/ds_ik is non-zero, by the negative's position relative to the "
                 "pair's bin: the pair's bin and the bin below it, never one bin as Lemma 1 "
                 "states](figures/fappy_lemma1_gradient.png)")  # fmt: skip
    summary = {k: v for k, v in lemma.items() if not isinstance(v, list)}
    grouping = grouping_check()
    lines += ["", "### pytorch-metric-learning's SmoothAPLoss, measured", ""]
    if grouping is None:
        lines.append(f"pytorch-metric-learning is not installed (`{install_hint('pml')}`): "
                     "not measured.")  # fmt: skip
    else:
        lines += [pml_grouping_sentence(grouping), "",
                  "| classes x per class | pytorch-metric-learning | SmoothAP, true classes | "
                  "SmoothAP, blocks of n_classes |", "| --- | --- | --- | --- |"]  # fmt: skip
        lines += [f"| {r['classes']} x {r['per_class']} | {r['pml_loss']:.6f} | "
                  f"{r['smooth_ap_loss_classes']:.6f} | {r['smooth_ap_loss_blocks']:.6f} |"
                  for r in grouping["rows"]]  # fmt: skip
        lines += ["", f"Each value is 1 - mean SmoothAP (tau = {grouping['tau']}, the query its "
                  "own candidate, as the library computes it) on one batch of random float64 "
                  "embeddings sorted by class."]  # fmt: skip
    results = {"gradient_errors": table, "fappy_lemma1": summary}
    if grouping is not None:
        results["pml_smooth_ap"] = grouping
    return results, "\n".join(lines)


def operating_region_section(out: Path, quick: bool, device: str = "cpu") -> tuple[dict, str]:
    """Closed-form width, P against batch size under Smooth-AP's sampler, P over training."""
    from gradlab.plotting.studies import plot_p_vs_batch_size

    drawn = draw_figures(OPERATING_REGION_FIGURES, out / "figures", quick)
    closed = drawn["operating_region_closed_forms"]
    dynamics = drawn["operating_region_training_dynamics"]
    batch = p_vs_batch_size_measurement(quick, device)
    summary = p_vs_batch_size.summarize(batch)
    write_json(out / "figures" / "p_vs_batch_size.json", batch)
    plot_p_vs_batch_size(batch, out / "figures" / "p_vs_batch_size.png")
    last = dynamics["history"][-1]
    lines = [
        "## Operating region",
        "",
        f"At tau = 0.01 and eps = 0.005 (Brown et al., 2020) the slope exceeds eps exactly when "
        f"|D| < w = {closed['seed_setting']['width']:.4f}. The closed form of P (right panel) "
        "leaves out a query's diagonal entry D_ii = 0, always inside the region: it is P "
        "without the diagonal. The other figures count it, as Eq. 1 does (the Monitor logs "
        "both: p_seed and p_off_diagonal); it adds (1 - P without the diagonal) / m to P for m "
        "candidates per query.",
        "",
        "![Width of the operating region against tau, and the expected P without the diagonal "
        "against the score spread (lines) with simulations (dots)]"
        "(figures/operating_region_closed_forms.png)",
        "",
        "### P against mini-batch size (Brown et al., 2020, Fig. S7a), Smooth-AP's sampler",
        "",
        p_vs_batch_size_text(batch, summary),
        "",
        "![P, and the close positive-negative and negative-negative pairs, against m: every seed "
        "faint, mean and std as error bars](figures/p_vs_batch_size.png)",
        "",
        "### Over a SmoothAP training run",
        "",
        _dynamics_run_text(dynamics),
        "",
        f"After {last['step'] + 1} steps: P = {last['p_seed_definition']:.3f}, "
        f"share of queries with no difference-matrix entry of slope above eps (Bleeker & de "
        f"Rijke's count; an entry there can still carry no gradient of the loss) = "
        f"{last['share_without_gradient']:.3f}, |AD| share (the AD term's share of Bleeker & de "
        f"Rijke's (2022, appendix A) AD - CB form of the gradient) = {last['ad_share']:.3f}. "
        "In that form a positive's gradient is (A D - C B) / R^2: A is its rank among the "
        "positives and C the count of negatives ranked above it (both smoothed, R = A + C), B "
        "and D sum the sigmoid-slope-weighted differences to the other positives and to the "
        "negatives. The figure counts an entry by its sigmoid slope alone (slope > eps) and by "
        "Bleeker & de Rijke's weighted count, its slope divided by that R^2, the factor of "
        "their Eq. 13 (slope / R^2 > eps)."
        f"{_saturated_text(dynamics['history'])}",
        "",
        "![Loss, P, queries with no entry of slope above eps and the AD/CB split at every step "
        "of this run (a quantity that keeps one value over the run is stated under the figure, "
        "not drawn)]"
        "(figures/operating_region_training_dynamics.png)",
    ]
    results = {"closed_forms": closed["seed_setting"], "p_vs_batch_size": batch,
               "p_vs_batch_size_summary": summary}  # fmt: skip
    results["training_dynamics_last_step"] = last
    return results, "\n".join(lines)


def _dynamics_run_text(dynamics: dict) -> str:
    """Which run the operating region's training figure follows: its own, not the Monitor's
    run of the training section, which has other batches."""
    return (f"One SmoothAP run of its own (tau = {dynamics['tau']:g}): an MLP embedding of the "
            f"digits 0-4 in batches of {dynamics['classes_per_batch']} classes x "
            f"{dynamics['per_class']} images, measured at each of its "
            f"{len(dynamics['history'])} steps by gradlab's functions. The Monitor's log in "
            "[SmoothAP training on real data](#smoothap-training-on-real-data-digits) is of "
            "another run, described there.")


def _saturated_text(history: list[dict]) -> str:
    """What to add when the run's loss reached exactly 0 (every query's smooth AP rounds to 1):
    the count above is of slopes, which then carry next to no gradient; else nothing. A loss 0
    at every step from its first 0 on is a saturated run; one that leaves 0 again is said to be
    0 at so many of those steps (a run said to stay at 0 while its loss rose again misled)."""
    first = next((index for index, entry in enumerate(history) if entry.get("loss") == 0.0), None)
    if first is None:
        return ""
    since = history[first:]
    zeros = sum(entry.get("loss") == 0.0 for entry in since)
    step = history[first]["step"]
    if zeros < len(since):
        return (f" The loss is exactly 0 at {zeros} of the {len(since)} logged steps from step "
                f"{step} on (every query's smooth AP rounds to 1 there): at those steps the "
                "slopes above eps counted here carry next to no gradient.")
    norm = history[-1].get("grad_norm")
    ends = f" and the embeddings' gradient norm ends at {norm:.1e}" if norm is not None else ""
    return (f" The loss is exactly 0 from step {step} on (every query's smooth AP rounds to "
            f"1){ends}: the run saturated, and the slopes above eps counted here carry next to "
            "no gradient.")


def tie_aware_section(out: Path, quick: bool, device: str = "cpu") -> tuple[dict, str]:
    """Harmonic vs log: the error surface and relaxed vs exact AP / DCG."""
    drawn = draw_figures(TIE_AWARE_FIGURES, out / "figures", quick)
    surface = drawn["tie_aware_harmonic_error"]
    gap = drawn["tie_aware_relaxation_gap"]
    summary = {k: v for k, v in surface.items() if k in ("largest_error_over_bound", "bound_holds")}
    summary["grid"] = {axis: [min(surface[axis]), max(surface[axis])]
                       for axis in ("before", "in_bin")}  # fmt: skip
    before, in_bin = summary["grid"]["before"], summary["grid"]["in_bin"]
    lines = [
        "## Harmonic sums vs logarithms (He et al., 2018)",
        "",
        "The error of ln((N+n)/N) against H(N+n) - H(N) "
        + ("stays below" if surface["bound_holds"] else "exceeds")
        + f" the paper's bound n/(2N^2) on the whole grid (N = {before[0]:g} to {before[1]:g} "
        f"items before the bin, n = {in_bin[0]:g} to {in_bin[1]:g} in it); the largest "
        f"error/bound ratio is {surface['largest_error_over_bound']:.3f}. The grid starts at "
        "N = 1: at the first bin (N = 0) the logarithm is infinite and the bound undefined, "
        "which the [derivation audit](#derivation-audit) corrects.",
        "",
        "![Error of the log stand-in over (items before the bin, items in it), with the paper's "
        "bound as contours (left); the log, midpoint and bound against N (right): the log error "
        "stays under its bound everywhere](figures/tie_aware_harmonic_error.png)",
        "",
        relaxation_summary(gap),
        "",
        "![Gap between the relaxed and the exact tie-aware AP/DCG as the tanh scale grows, per "
        "harmonic stand-in: only the exact (digamma) stand-in falls below 1e-3]"
        "(figures/tie_aware_relaxation_gap.png)",
    ]
    runs = [{k: r[k] for k in r if k != "gaps"} for r in gap["runs"]]
    return {"harmonic_error": summary, "relaxation_gap": runs}, "\n".join(lines)


def training_section(out: Path, quick: bool, device: str = "cpu") -> tuple[dict, str]:
    """SmoothAP on real data (digits) with the Monitor: retrieval before and after, and figures."""
    from gradlab.experiments.digits_training import digits_training
    from gradlab.plotting.monitor import flat_families, load_runs
    from gradlab.plotting.report_figures import plot_retrieval_before_after

    results = digits_training(out, quick=quick, device=device)
    plot_retrieval_before_after(results, out / "figures" / "training_retrieval.png")
    runs = load_runs([out / results["run_dir"]])
    flat = flat_families(runs)
    records = runs[0][1]  # the one run's logged steps, which the captions read
    # a flat family is stated, not drawn: its figure is not left in the report unreferenced
    for figure in results["figures"]:
        if Path(figure).stem in flat:
            (out / figure).unlink(missing_ok=True)
    results["figures"] = [f for f in results["figures"] if Path(f).stem not in flat]
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
        training_sentence(unseen_before, unseen_after, seen_before, seen_after),
        "",
        "![Recall@K and mAP before and after training, on the unseen digits 5-9 and on "
        "held-out images of the trained digits 0-4](figures/training_retrieval.png)",
        "",
        *(f"![{monitor_figure_caption(Path(f).stem, records)}]({f})" + "\n"
          for f in results["figures"] if Path(f).stem not in flat and Path(f).stem != "overview"),
    ]  # fmt: skip
    # the overview repeats the figures above; a flat family's values say more than its lines
    if flat:
        lines += ["Flat over the whole run, so not drawn:", "",
                  *(f"- {sentence}" for sentence in flat.values())]  # fmt: skip
    return results, "\n".join(lines)


def loss_comparison_section(out: Path, quick: bool, device: str = "cpu") -> tuple[dict, str]:
    """Ranking losses on unseen digit strings, per seed, with their cost per step."""
    from gradlab.plotting.studies import plot_loss_comparison

    results = loss_comparison.measure(quick=quick, device=device)
    write_json(out / "figures" / "loss_comparison.json", results)
    results["summary"] = loss_comparison.summarize(results)
    plot_loss_comparison(results, out / "figures" / "loss_comparison.png")
    config = results["settings"]
    metrics = ["recall@1", "recall@2", "recall@4", "recall@8", "mAP", "MAP@R"]
    apart = results["summary"]["apart"]
    fit = 500 - config["validation_numbers"]
    # a quick run trains each loss at one setting: no candidate is chosen on the held-out ones
    swept = any(len((run.get("sweep") or {}).get("candidates") or []) > 1
                for run in results["losses"].values())  # fmt: skip
    lines = [
        "## Ranking losses on unseen digit strings",
        "",
        f"The same CNN, initialization (its head's bias centred on the training images, so the "
        f"untrained network's cosine scores of a batch span "
        f"{min(results['initial_score_range']):.2f} or more), batches "
        f"({config['batch_size']} images: 4 of each of {config['classes_per_batch']} numbers) "
        f"and {config['steps']} Adam steps for every loss, trained on {fit} of the 500 training "
        f"3-digit numbers ({config['validation_numbers']} more are held out to choose each "
        + (f"loss's hyperparameters: {config['selection_rule']})" if swept else
           "loss's hyperparameters, which this run does not sweep: each loss trains at one "
           "setting)")
        + f" and evaluated on "
        f"{config['test_numbers']} of the 500 unseen ones ({config['per_class']} images each; "
        f"every image queries all the others). Mean ± std (population) "
        f"over {len(results['seeds'])} seeds; "
        + ("losses listed apart (not ranked) are marked (apart):" if apart
           else "no loss is listed apart:"),
        "",
        "| loss | " + " | ".join(metrics) + " | loss fwd+bwd (ms) | training step (ms) |",
        "| --- |" + " --- |" * (len(metrics) + 2),
        "| untrained | " + " | ".join(cell(results["before"][m]) for m in metrics) + " | | |",
    ]
    for name, run in results["losses"].items():
        timing = (
            f"{cell([1e3 * v for v in run['loss_seconds']], 2)} | "
            f"{cell([1e3 * v for v in run['step_seconds']], 1)}"
        )
        label = f"{name} (apart)" if name in apart else name
        lines.append(
            f"| {label} | "
            + " | ".join(cell(run["metrics"][m]) for m in metrics)
            + f" | {timing} |"
        )
    timing = timing_sentence(config.get("timing"))
    lines += ["", *([timing, ""] if timing else []),
              loss_comparison_text(results, results["summary"]), ""]
    sweep = sweep_lines(results)
    if sweep:
        lines += ["Each loss's sweep, the paper's recommendation first (Brown et al. 2020 for "
                  "SmoothAP and, from Cakir et al. 2019 and Rolinek et al. 2020, for FastAP and "
                  "Blackbox AP; Zhong et al., Table 1 for FAPPY). Blackbox AP's lambda is on the "
                  "official code's scale (ranks divided by the batch size), interpolation on "
                  "gradlab's (ranks 1..m). Validation MAP@R on the held-out training numbers, "
                  "mean ± std (population) over seeds:", "", *sweep, ""]  # fmt: skip
    unswept = unswept_sentence(results)
    if unswept:
        lines += [unswept, ""]
    apart = "; grey: listed apart" if results["summary"].get("apart") else ""
    lines += ["![Recall@1, mAP and MAP@R of each loss on the unseen numbers (dots: seeds, bars: "
              f"mean ± std; dashed: untrained{apart}) and the loss's own cost per "
              "step](figures/loss_comparison.png)"]  # fmt: skip
    return results, "\n".join(lines)


def scenes_section(out: Path, quick: bool, device: str = "cpu") -> tuple[dict, str]:
    """Digit scenes: VSE++ and VSRN miniatures, three losses, recall, gradient anatomy and the
    embeddings' geometry."""
    from gradlab.plotting.scene_geometry import plot_scene_geometry
    from gradlab.plotting.studies import DIRECTION_TITLES, plot_scene_anatomy, plot_scene_recall

    results = digit_scenes.measure(quick=quick, device=device)
    write_json(out / "figures" / "digit_scenes.json", results)
    results["summary"] = digit_scenes.summarize(results)
    plot_scene_recall(results, out / "figures" / "digit_scenes_recall.png")
    plot_scene_anatomy(results, out / "figures" / "digit_scenes_anatomy.png")
    plot_scene_geometry(results, out / "figures" / "digit_scenes_geometry.png")
    config = results["settings"]
    metrics = ["i2t_R@1", "i2t_R@5", "i2t_R@10", "t2i_R@1", "t2i_R@5", "t2i_R@10", "rsum"]
    headings = [f"{DIRECTION_TITLES[m.split('_')[0]]} {m.split('_', 1)[1]}" if "_" in m else m
                for m in metrics]  # "i2t_R@1" -> "image -> caption R@1"  # fmt: skip
    lines = [
        "## Image-caption retrieval on digit scenes (Bleeker & de Rijke, 2022, appendix B)",
        "",
        f"Scenes of 2-4 handwritten digits on a 3 x 3 grid with five captions each from a "
        f"relation grammar ({config['train_scenes']} training scenes, {config['test_scenes']} "
        f"unseen test scenes drawn from unseen handwriting). VSE++: a frozen digit-classifier "
        f"CNN over the canvas (backbone test accuracy "
        f"{cell(results['backbone_accuracy'])}), its pooled features "
        f"{config.get('global_features', 'raw')}, and a trained linear projection; VSRN: the "
        f"same backbone on each digit's box, given from the scene (ground truth: an advantage "
        f"the pooled canvas features of VSE++ do not have, so the two encoders' gap is not the "
        f"architecture's alone), a GCN over the regions and a GRU over them; both with "
        f"a GRU caption encoder. Batches of {config['batch_images']} images and their "
        f"{5 * config['batch_images']} captions, {config['steps']} Adam steps, the same "
        f"initialization and batches for every loss. Recall on the test scenes, "
        "mean ± std (population) over "
        f"{len(results['seeds'])} seeds (rsum: sum of the six recalls, in percent):",
        "",
        "| encoder | loss | " + " | ".join(headings) + " |",
        "| --- | --- |" + " --- |" * len(metrics),
    ]
    for encoder, runs in results["runs"].items():
        for loss, run in runs.items():
            values = [cell(run["recall"][m], 1 if m == "rsum" else 3) for m in metrics]
            lines.append(f"| {encoder} | {loss} | " + " | ".join(values) + " |")
    lines += ["", scenes_text(results, results["summary"]), "",
              "![Recall in both directions per encoder and loss (bars: mean ± std "
              "(population) over seeds)]"
              "(figures/digit_scenes_recall.png)", "",
              "### Gradient anatomy over training", "",
              anatomy_text(results), "",
              "![How many negatives per query receive gradient, the share of queries without "
              "gradient and the hardest negatives' share of the gradient, over training, both "
              "directions](figures/digit_scenes_anatomy.png)", "",
              "### Embedding geometry over training", "",
              geometry_text(results), "",
              "![Alignment, uniformity, effective rank and modality gap of each batch's images "
              "and captions over training, per encoder and loss]"
              "(figures/digit_scenes_geometry.png)"]  # fmt: skip
    return results, "\n".join(lines)
