"""Docs block ``studies`` (docs/studies.md): the three studies' findings, with their seed spreads.

Reads ``figures/studies/{p_vs_batch_size,loss_comparison,digit_scenes}.json`` (written by
``python analyses/studies.py``, the same experiment functions the report runs) and words them
with the report's own sentence builders, so the docs and the report cannot disagree.
"""

from __future__ import annotations

from pathlib import Path

from tools.readme_blocks import load_json, register

FOLDER = "figures/studies"


@register("studies")
def studies_block(root: Path) -> str:
    from gradlab.report.prose import (
        anatomy_comparison,
        loss_comparison_text,
        p_vs_batch_size_text,
        scenes_text,
        timing_sentence,
    )
    from gradlab.report.summaries import cell

    batch = load_json(root, f"{FOLDER}/p_vs_batch_size.json")
    losses = load_json(root, f"{FOLDER}/loss_comparison.json")
    scenes = load_json(root, f"{FOLDER}/digit_scenes.json")
    timing = load_json(root, f"{FOLDER}/report_timing.json")
    cpu = timing["user_cpu_seconds_total"] + timing["system_cpu_seconds_total"]
    sections = timing["sections"]
    # the P-vs-m study runs once, in whichever of the audit and the operating-region section
    # starts first (both read it): the four sections together hold the three studies
    held = ("audit", "operating_region", "losses", "scenes")
    studies_cpu = sum(sections[k]["cpu_seconds"] for k in held)
    lines = [
        f"A full report run (`{timing['command']}`, device {timing['device']}) took "
        f"{timing['wall_seconds_total'] / 60:.1f} min wall-clock and {cpu / 60:.1f} min of CPU "
        f"time on a {timing['conditions']}; the four sections that hold its three studies "
        f"(the audit, which shares the P-vs-m measurement with the operating-region section, "
        f"the losses and the scenes) took {studies_cpu / 60:.1f} min of CPU time of it.",
        "",
        "**P against batch size (Brown et al., 2020, Fig. S7a), on 1000-class digit strings "
        "with Smooth-AP's sampler.** " + p_vs_batch_size_text(batch),
        "",
        f"**Ranking losses on unseen digit strings** ({len(losses['seeds'])} seeds, "
        f"{losses['settings']['steps']} steps each, mean ± std):",
        "",
        "| loss | Recall@1 | mAP | MAP@R | loss fwd+bwd (ms) |",
        "| --- | --- | --- | --- | --- |",
        f"| untrained | {cell(losses['before']['recall@1'])} | {cell(losses['before']['mAP'])} "
        f"| {cell(losses['before']['MAP@R'])} | |",
    ]
    for name, run in losses["losses"].items():
        metrics = run["metrics"]
        milliseconds = cell([1e3 * v for v in run["loss_seconds"]], 2)
        lines.append(
            f"| {name} | {cell(metrics['recall@1'])} | {cell(metrics['mAP'])} | "
            f"{cell(metrics['MAP@R'])} | {milliseconds} |"
        )
    times = timing_sentence(losses["settings"].get("timing"))  # recorded since 0.2.0
    lines += [
        "",
        *([times, ""] if times else []),
        loss_comparison_text(losses),
        "",
        f"**Digit scenes, VSE++ and VSRN miniatures** ({len(scenes['seeds'])} seeds, "
        f"{scenes['settings']['steps']} steps, {scenes['settings']['test_scenes']} unseen "
        "test scenes, mean ± std):",
        "",
        "| encoder | loss | image->caption R@1 | caption->image R@1 | rsum |",
        "| --- | --- | --- | --- | --- |",
    ]
    for encoder, runs in scenes["runs"].items():
        for loss, run in runs.items():
            recall = run["recall"]
            lines.append(
                f"| {encoder} | {loss} | {cell(recall['i2t_R@1'])} | {cell(recall['t2i_R@1'])} "
                f"| {cell(recall['rsum'], 1)} |"
            )
    lines += ["", scenes_text(scenes), "", "Gradient anatomy at the last logged step (dL/dS of "
              "each direction's own term, `gradlab.functional.gradient_anatomy`): "
              + anatomy_comparison(scenes)]  # fmt: skip
    return "\n".join(lines)
