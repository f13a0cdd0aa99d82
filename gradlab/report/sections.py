"""The report's sections: each computes through gradlab, draws its figures, returns markdown."""

from __future__ import annotations

import copy
import functools
import json
import re
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
from gradlab.report.summaries import cell, mean_std, separated, trend
from gradlab.report.tie_aware import (
    harmonic_error_surface,
    relaxation_gap_against_scale,
    relaxation_summary,
)
from gradlab.report.verification import gradient_error_table

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


@functools.lru_cache(maxsize=2)
def _p_vs_batch_size(quick: bool, device: str) -> dict:
    from gradlab.experiments import p_vs_batch_size

    return p_vs_batch_size.measure(quick=quick, device=device)


def p_vs_batch_size_measurement(quick: bool, device: str) -> dict:
    """The report's P-vs-m measurement, measured once per settings and shared by the audit
    (which decides the batch-size claim from it) and the operating-region section."""
    return copy.deepcopy(_p_vs_batch_size(quick, device))


def audit_section(out: Path, quick: bool, device: str = "cpu") -> tuple[dict, str]:
    """The derivation audit: every printed claim of the seeds with its verdict; the empirical
    claim decided from the report's own P-vs-m measurement."""
    from gradlab.symbolic.audit import format_markdown, run_audit, summary_counts

    measurement = p_vs_batch_size_measurement(quick, device)
    records = run_audit(mutants=not quick, p_vs_batch_size=measurement)
    (out / "audit.json").write_text(json.dumps(records, indent=1))
    # One level down: the audit is one section of the report, each paper a subsection.
    body = re.sub(r"^(#{1,5}) ", r"#\1 ", format_markdown(records), flags=re.MULTILINE)
    return {"counts": summary_counts(records), "records": records}, body


CHECK_WORDS = {"vs": "against", "fd": "finite differences", "eq37": "Eq. 37", "ap": "AP",
               "dcg": "DCG", "fappy": "FAPPY", "fastap": "FastAP"}  # fmt: skip


def check_label(name: str) -> str:
    """``"eq37_ap_log_vs_autograd"`` -> ``"Eq. 37 AP log against autograd"``.

    Example:
        >>> check_label("exact_vs_fd")
        'exact against finite differences'
    """
    return " ".join(CHECK_WORDS.get(word, word) for word in name.split("_"))


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
    return {"gradient_errors": table, "fappy_lemma1": summary}, "\n".join(lines)


def operating_region_section(out: Path, quick: bool, device: str = "cpu") -> tuple[dict, str]:
    """Closed-form width, P against batch size under the seed's sampler, P over training."""
    from gradlab.plotting.studies import plot_p_vs_batch_size

    drawn = draw_figures(OPERATING_REGION_FIGURES, out / "figures", quick)
    closed = drawn["operating_region_closed_forms"]
    dynamics = drawn["operating_region_training_dynamics"]
    batch = p_vs_batch_size_measurement(quick, device)
    write_json(out / "figures" / "p_vs_batch_size.json", batch)
    plot_p_vs_batch_size(batch, out / "figures" / "p_vs_batch_size.png")
    last = dynamics["history"][-1]
    lines = [
        "## Operating region",
        "",
        f"At tau = 0.01 and eps = 0.005 (seed 002) the slope exceeds eps exactly when "
        f"|D| < w = {closed['seed_setting']['width']:.4f}.",
        "",
        "![Width of the operating region against tau, and expected P against the score spread "
        "(lines) with simulations (dots)](figures/operating_region_closed_forms.png)",
        "",
        "### P against mini-batch size (seed 002, Fig. S7a), the seed's sampler",
        "",
        p_vs_batch_size_text(batch),
        "",
        "![P, and the close positive-negative and negative-negative pairs, against m: every seed "
        "faint, mean and std as error bars](figures/p_vs_batch_size.png)",
        "",
        "### Over a SmoothAP training run",
        "",
        f"After {last['step'] + 1} steps: P = {last['p_seed_definition']:.3f}, "
        f"share of queries without gradient = {last['share_without_gradient']:.3f}, "
        f"|AD| share = {last['ad_share']:.3f}.",
        "",
        "![P, gradient counts and the AD/CB split over one SmoothAP run on digits 0-4]"
        "(figures/operating_region_training_dynamics.png)",
    ]
    results = {"closed_forms": closed["seed_setting"], "p_vs_batch_size": batch}
    results["training_dynamics_last_step"] = last
    return results, "\n".join(lines)


SETTING_WORDS = {
    "fixed_untrained": "At the untrained network",
    "fixed_trained": "At a fixed network trained with SmoothAP at m = 64",
    "trained_at_m": "With one network fine-tuned at each m (same start, same epochs)",
}


def p_vs_batch_size_text(batch: dict) -> str:
    """What the P-vs-m study shows, setting by setting, with seed spreads."""
    sizes = batch["batch_sizes"]
    parts = [
        f"Batches of m = {sizes[0]} to {sizes[-1]} unseen 3-digit numbers, {batch['per_class']} "
        f"images per number and m/{batch['per_class']} numbers per batch (seed 002's sampler), "
        f"{len(batch['seeds'])} seeds (each a different data set, initialization and batches)."
    ]
    for name, words in SETTING_WORDS.items():
        if name not in batch["settings"]:
            continue
        setting = batch["settings"][name]
        if min(min(values) for values in setting["P"]) > 0.999:
            parts.append(
                f"{words}: P = 1 at every m and every seed (all cosine scores lie within "
                "the operating region's width of each other), so this setting cannot show a trend."
            )
            continue
        sentence = (
            f"{words}: {trend(setting['P'], sizes, 'P')}; "
            f"{trend(setting['P_positive_negative'], sizes, 'the positive-negative share')}; "
            f"{trend(setting['P_negative_negative'], sizes, 'the negative-negative share')}."
        )
        if name == "trained_at_m":
            sentence += (
                f" (Optimizer steps per run: {setting['steps'][0]} at m={sizes[0]} down to "
                f"{setting['steps'][-1]} at m={sizes[-1]}.)"
            )
        parts.append(sentence)
    verdicts = []
    for name, words in (("fixed_trained", "at a fixed trained network"),
                        ("trained_at_m", "with one network fine-tuned per m")):  # fmt: skip
        if name not in batch["settings"]:
            continue
        values = batch["settings"][name]["P"]
        first, last = [run[0] for run in values], [run[-1] for run in values]
        if not separated(first, last):
            verdicts.append(f"{words} P does not move beyond the seed spread")
        else:
            rises = mean_std(last)[0] > mean_std(first)[0]
            verdicts.append(f"{words} P {'rises' if rises else 'falls'}")
    from gradlab.symbolic.batch_size import decide_trend

    verdict, _ = decide_trend(batch, "rises")
    parts.append(
        f"Seed 002 reports P rising with m; here, {'; '.join(verdicts)} (the audit's decision "
        f"rule on this measurement: {verdict}; the audit above decides the claim from this "
        "measurement, and `gradlab audit --measure` from its quick settings, where one network "
        "is trained per m for one epoch). At a fixed network, m "
        "changes only which items a batch holds (the diagonal's 1/m share; at small m a query's "
        "negatives come from few classes); beyond that, P moves with m only through what "
        "training at that m does to the scores."
    )
    return " ".join(parts)


def tie_aware_section(out: Path, quick: bool, device: str = "cpu") -> tuple[dict, str]:
    """Harmonic vs log: the error surface and relaxed vs exact AP / DCG."""
    drawn = draw_figures(TIE_AWARE_FIGURES, out / "figures", quick)
    surface = drawn["tie_aware_harmonic_error"]
    gap = drawn["tie_aware_relaxation_gap"]
    lines = [
        "## Harmonic sums vs logarithms (seed 003)",
        "",
        "The error of ln((N+n)/N) against H(N+n) - H(N) "
        + ("stays below" if surface["bound_holds"] else "exceeds")
        + " the paper's bound n/(2N^2) on the whole grid; the largest error/bound ratio is "
        f"{surface['largest_error_over_bound']:.3f}.",
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
        "![Recall@K and mAP before and after training, on the unseen digits 5-9 and on "
        "held-out images of the trained digits 0-4](figures/training_retrieval.png)",
        "",
        *(f"![The Monitor's log of this run: {_family_title(Path(f).stem)}]({f})" + "\n"
          for f in results["figures"]),
    ]  # fmt: skip
    return results, "\n".join(lines)


def _family_title(stem: str) -> str:
    """The title ``gradlab plot`` gives a quantity family (its file stem), for a caption."""
    from gradlab.plotting.monitor import FAMILIES

    family = FAMILIES.get(stem)
    return family[0] if family else stem.replace("_", " ")


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


def loss_comparison_section(out: Path, quick: bool, device: str = "cpu") -> tuple[dict, str]:
    """Ranking losses on unseen digit strings, per seed, with their cost per step."""
    from gradlab.experiments import loss_comparison
    from gradlab.plotting.studies import plot_loss_comparison

    results = loss_comparison.measure(quick=quick, device=device)
    write_json(out / "figures" / "loss_comparison.json", results)
    plot_loss_comparison(results, out / "figures" / "loss_comparison.png")
    config = results["settings"]
    metrics = ["recall@1", "recall@2", "recall@4", "recall@8", "mAP", "MAP@R"]
    lines = [
        "## Ranking losses on unseen digit strings",
        "",
        f"The same CNN, initialization, batches ({config['batch_size']} images: 4 of each of "
        f"{config['classes_per_batch']} numbers) and {config['steps']} Adam steps for every loss, "
        f"trained on 500 of the 3-digit numbers and evaluated on {config['test_numbers']} of "
        f"the 500 unseen ones ("
        f"{config['per_class']} images each; every image queries all the others). Mean ± std "
        f"over {len(results['seeds'])} seeds:",
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
        lines.append(
            f"| {name} | " + " | ".join(cell(run["metrics"][m]) for m in metrics) + f" | {timing} |"
        )
    lines += ["", loss_comparison_text(results), "",
              "![Recall@1, mAP and MAP@R of each loss on the unseen numbers (dots: seeds, bars: "
              "mean ± std; dashed: untrained) and the loss's own cost per step]"
              "(figures/loss_comparison.png)"]  # fmt: skip
    return results, "\n".join(lines)


def loss_comparison_text(results: dict) -> str:
    """Which losses are ahead on MAP@R, and which gaps are within the seed spread."""
    runs = results["losses"]
    flat = [n for n in runs if max(runs[n].get("initial_gradient_norm", [1.0])) == 0.0]
    moved = [n for n in runs if n not in flat] or list(runs)
    ranked = sorted(moved, key=lambda name: -mean_std(runs[name]["metrics"]["MAP@R"])[0])
    best = ranked[0]
    best_values = runs[best]["metrics"]["MAP@R"]
    tied = [n for n in ranked[1:] if not separated(runs[n]["metrics"]["MAP@R"], best_values)]
    behind = [n for n in ranked[1:] if n not in tied]
    text = f"Best MAP@R among the losses that train: {best} ({cell(best_values)})."
    if tied:
        text += (
            f" Within the seed spread of it (gap below the sum of the two stds): "
            f"{', '.join(tied)}."
        )
    if behind:
        text += f" Behind it by more than the spread: {', '.join(behind)}."
    if flat:
        text += (
            f" {', '.join(flat)}: loss gradient exactly 0 at the initialization in every seed "
            "(the untrained network's cosine scores of a batch span at most "
            f"{max(results.get('initial_score_range', [float('nan')])):.4f}), so training "
            "never moves the network: its numbers are the untrained ones."
        )
    before = results["before"]["MAP@R"]
    worse = [n for n in runs if mean_std(runs[n]["metrics"]["MAP@R"])[0] < mean_std(before)[0]]
    clearly = [n for n in worse if separated(runs[n]["metrics"]["MAP@R"], before)]
    if worse:
        text += f" Mean MAP@R below the untrained network's ({cell(before)}): {', '.join(worse)}"
        text += (
            f"; by more than the spread: {', '.join(clearly)}." if clearly else
            ", all within the seed spread."
        )
    return text


def scenes_section(out: Path, quick: bool, device: str = "cpu") -> tuple[dict, str]:
    """Digit scenes: VSE++ and VSRN miniatures, three losses, recall and gradient anatomy."""
    from gradlab.experiments import digit_scenes
    from gradlab.plotting.studies import plot_scene_anatomy, plot_scene_recall

    results = digit_scenes.measure(quick=quick, device=device)
    write_json(out / "figures" / "digit_scenes.json", results)
    plot_scene_recall(results, out / "figures" / "digit_scenes_recall.png")
    plot_scene_anatomy(results, out / "figures" / "digit_scenes_anatomy.png")
    config = results["settings"]
    metrics = ["i2t_R@1", "i2t_R@5", "i2t_R@10", "t2i_R@1", "t2i_R@5", "t2i_R@10", "rsum"]
    lines = [
        "## Image-caption retrieval on digit scenes (seed 001, appendix B)",
        "",
        f"Scenes of 2-4 handwritten digits on a 3 x 3 grid with five captions each from a "
        f"relation grammar ({config['train_scenes']} training scenes, {config['test_scenes']} "
        f"unseen test scenes drawn from unseen handwriting). VSE++: a frozen digit-classifier "
        f"CNN over the canvas (backbone test accuracy "
        f"{cell(results['backbone_accuracy'])}) and a trained linear projection; VSRN: the "
        f"same backbone on each digit box, a GCN over the regions and a GRU over them; both with "
        f"a GRU caption encoder. Batches of {config['batch_images']} images and their "
        f"{5 * config['batch_images']} captions, {config['steps']} Adam steps, the same "
        f"initialization and batches for every loss. Recall on the test scenes, mean ± std over "
        f"{len(results['seeds'])} seeds (rsum: sum of the six recalls, in percent):",
        "",
        "| encoder | loss | " + " | ".join(metrics) + " |",
        "| --- | --- |" + " --- |" * len(metrics),
    ]
    for encoder, runs in results["runs"].items():
        for loss, run in runs.items():
            values = [cell(run["recall"][m], 1 if m == "rsum" else 3) for m in metrics]
            lines.append(f"| {encoder} | {loss} | " + " | ".join(values) + " |")
    lines += ["", scenes_text(results), "",
              "![Recall in both directions per encoder and loss (bars: mean ± std over seeds)]"
              "(figures/digit_scenes_recall.png)", "",
              "### Gradient anatomy over training", "",
              anatomy_text(results), "",
              "![How many negatives per query receive gradient, the share of queries without "
              "gradient and the hardest negatives' share of the gradient, over training, both "
              "directions](figures/digit_scenes_anatomy.png)"]  # fmt: skip
    return results, "\n".join(lines)


def scenes_text(results: dict) -> str:
    """Best R@1 each way, whether anything saturates, and which gaps exceed the seed spread."""
    parts = []
    for direction, words in (("i2t", "image -> caption"), ("t2i", "caption -> image")):
        key = f"{direction}_R@1"
        entries = {
            (encoder, loss): run["recall"][key]
            for encoder, runs in results["runs"].items()
            for loss, run in runs.items()
        }
        best = max(entries, key=lambda k: mean_std(entries[k])[0])
        tied = [k for k in entries if k != best and not separated(entries[k], entries[best])]
        sentence = f"Best {words} R@1: {best[0]} with {best[1]}, {cell(entries[best])}"
        if tied:
            named = ", ".join(f"{encoder} with {loss}" for encoder, loss in tied)
            sentence += f"; within its seed spread: {named}"
        parts.append(sentence + ".")
    for encoder, runs in results["runs"].items():
        rsums = {loss: run["recall"]["rsum"] for loss, run in runs.items()}
        best = max(rsums, key=lambda loss: mean_std(rsums[loss])[0])
        tied = [loss for loss in rsums if loss != best and not separated(rsums[loss], rsums[best])]
        sentence = f"{encoder}: highest rsum with {best} ({cell(rsums[best], 1)})"
        sentence += (
            f", not separated from {', '.join(tied)} by more than the seed spread."
            if tied
            else ", ahead of the other losses by more than the seed spread."
        )
        parts.append(sentence)
    return " ".join(parts)


def anatomy_text(results: dict) -> str:
    """The last logged step's anatomy, per encoder, loss and direction."""
    lines = [
        "Read from dL/dS of each direction's own term (gradlab.functional.gradient_anatomy: an "
        "entry is active above 1 % of its query's largest |dL/dS|), at the last logged step, "
        "mean ± std over seeds. An image query has 5 positive and "
        f"{5 * results['settings']['batch_images'] - 5} negative captions; a caption query 1 "
        f"positive and {results['settings']['batch_images'] - 1} negative images.",
        "",
        "| encoder | loss | active negatives i2t | t2i | queries without gradient i2t | t2i | "
        "hardest-10 % share i2t | t2i |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for encoder, runs in results["runs"].items():
        for loss, run in runs.items():
            anatomy = run["anatomy"]
            cells = []
            for key in ("active_negatives", "share_without_gradient", "hardest_10pct_share"):
                for direction in ("i2t", "t2i"):
                    cells.append(cell([seed[-1] for seed in anatomy[direction][key]], 2))
            lines.append(f"| {encoder} | {loss} | " + " | ".join(cells) + " |")
    lines += ["", _anatomy_comparison(results)]
    return "\n".join(lines)


def _anatomy_comparison(results: dict) -> str:
    """How many negatives SmoothAP updates at the end next to NT-Xent, per encoder and direction
    (Bleeker & de Rijke's comparison), and whether the gap exceeds the seed spread."""
    parts = []
    for encoder, runs in results["runs"].items():
        if "SmoothAP" not in runs or "NT-Xent" not in runs:
            continue
        for direction, words in (("i2t", "image queries"), ("t2i", "caption queries")):
            smooth = [s[-1] for s in runs["SmoothAP"]["anatomy"][direction]["active_negatives"]]
            softmax = [s[-1] for s in runs["NT-Xent"]["anatomy"][direction]["active_negatives"]]
            relation = (
                "more than the seed spread apart" if separated(smooth, softmax)
                else "within the seed spread"
            )  # fmt: skip
            parts.append(
                f"{encoder}, {words}: SmoothAP sends gradient to {cell(smooth, 1)} negatives, "
                f"NT-Xent to {cell(softmax, 1)} ({relation})."
            )
    return " ".join(parts)
