"""The report's rendering of a study run on your own data (``gradlab study``).

``gradlab study NAME`` writes the study's JSON (the bundled study's schema) and hands it here:
the report's figure functions (:mod:`gradlab.plotting.studies`) draw it, its verdict functions
(:func:`gradlab.experiments.p_vs_batch_size.summarize`,
:func:`gradlab.experiments.loss_comparison.summarize`) read it and :func:`write_study_report`
writes ``summary.md`` and ``index.html`` beside it, as the report writes its own. The same call
renders the JSON of an earlier run (:func:`render_study_folder`).
"""

from __future__ import annotations

import json
from pathlib import Path

from gradlab.errors import GradlabError
from gradlab.experiments import loss_comparison, p_vs_batch_size
from gradlab.experiments.digit_scenes import ANATOMY_KEYS
from gradlab.report.html import markdown_to_html
from gradlab.report.prose import best_loss_sentence
from gradlab.report.summaries import cell

STUDY_FILES = {
    "p-vs-batch-size": "p_vs_batch_size.json",
    "losses": "loss_comparison_m*.json",
    "anatomy": "gradient_anatomy.json",
}
"""Study name -> the JSON file(s) ``gradlab study NAME`` writes (a glob for one per m)."""


def p_vs_batch_size_markdown(measurement: dict, figure: str) -> str:
    """P per m (mean ± std over seeds) and the paired t-test's trend of P and of its parts."""
    summary = p_vs_batch_size.summarize(measurement)
    setting = measurement["settings"]["trained_at_m"]
    sizes = measurement["batch_sizes"]
    lines = [
        "## P against the batch size (Brown et al., 2020, Fig. S7a), on your data",
        "",
        f"{measurement['data']}; {measurement['model']}. For each m one network from the same "
        f"weights, {setting['epochs']} epoch(s) of Smooth-AP (tau = {measurement['tau']}) with "
        f"{measurement['per_class']} images per class; P (slope above {measurement['eps']}) "
        f"averaged over the last epoch's batches. Mean ± std over "
        f"{len(measurement['seeds'])} seed(s):",
        "",
        "| m | steps | P | P without the diagonal | positive-negative | negative-negative |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for index, size in enumerate(sizes):
        column = {key: [run[index] for run in setting[key]] for key in setting
                  if isinstance(setting[key], list) and setting[key]
                  and isinstance(setting[key][0], list)}  # fmt: skip
        without = [p - d for p, d in zip(column["P"], column["P_diagonal"], strict=True)]
        lines.append(f"| {size} | {setting['steps'][index]} | {cell(column['P'], 4)} | "
                     f"{cell(without, 4)} | {cell(column['P_positive_negative'], 4)} | "
                     f"{cell(column['P_negative_negative'], 4)} |")  # fmt: skip
    trend = summary["settings"].get("trained_at_m", {})
    if trend:
        parts = "; ".join(f"{name}: {word}" for name, word in trend["parts"].items())
        lines += ["", f"P from m = {sizes[0]} to m = {sizes[-1]}: {trend['trend']} (paired "
                  "t-test over the seeds; one seed cannot show a trend). Its parts: "
                  f"{parts}."]  # fmt: skip
    lines += ["", f"![P and the close pairs against m: every seed faint, mean and std as error "
              f"bars]({figure})"]  # fmt: skip
    return "\n".join(lines)


def loss_comparison_markdown(results: dict, figure: str) -> str:
    """The losses' retrieval on the test split and their cost per step, as the report's table."""
    config = results["settings"]
    order = ("recall@1", "recall@2", "recall@4", "recall@8", "mAP", "R-Precision", "MAP@R")
    metrics = [metric for metric in order if metric in results["before"]]
    lines = [
        f"## Ranking losses at m = {config['batch_size']}, on your data",
        "",
        f"{config['data']}; {config['model']}. The same initialization and batches "
        f"({config['batch_size']} images: 4 of each of {config['classes_per_batch']} classes) and "
        f"{config['steps']} Adam steps for every loss; retrieval on the {config['test_data']}, "
        f"every image querying all the others. Mean ± std over {len(results['seeds'])} seed(s):",
        "",
        "| loss | " + " | ".join(metrics) + " | loss fwd+bwd (ms) | training step (ms) |",
        "| --- |" + " --- |" * (len(metrics) + 2),
        "| untrained | " + " | ".join(cell(results["before"][m]) for m in metrics) + " | | |",
    ]
    for name, run in results["losses"].items():
        timing = (f"{cell([1e3 * v for v in run['loss_seconds']], 2)} | "
                  f"{cell([1e3 * v for v in run['step_seconds']], 1)}")  # fmt: skip
        lines.append(f"| {name} | " + " | ".join(cell(run["metrics"][m]) for m in metrics)
                     + f" | {timing} |")  # fmt: skip
    lines += ["", _losses_text(results), "",
              f"![Each loss's retrieval on the test split (dots: seeds, bars: mean ± std; "
              f"dashed: untrained) and its own cost per step]({figure})"]  # fmt: skip
    return "\n".join(lines)


def _losses_text(results: dict) -> str:
    """The verdicts of :func:`gradlab.experiments.loss_comparison.summarize`, in words that hold
    for any backbone (batch norm and augmentation move a network whose loss has no gradient)."""
    summary = loss_comparison.summarize(results)
    text = best_loss_sentence(results, summary)
    if summary["tied"]:
        text += (" Within the seed spread of it (gap below the sum of the two stds): "
                 f"{', '.join(summary['tied'])}.")  # fmt: skip
    if summary["behind"]:
        text += f" Behind it by more than the spread: {', '.join(summary['behind'])}."
    if summary["no_gradient"]:
        spread = max(results.get("initial_score_range", [float("nan")]))
        text += (f" {', '.join(summary['no_gradient'])}: loss gradient exactly 0 on the first "
                 f"batch at the initialization in every seed (its cosine scores span at most "
                 f"{spread:.4f}); it is ranked apart from the losses that train.")  # fmt: skip
    if summary["below_untrained"]:
        text += (f" Mean MAP@R below the untrained network's ({cell(results['before']['MAP@R'])}"
                 f"): {', '.join(summary['below_untrained'])}.")  # fmt: skip
    return text


def anatomy_markdown(results: dict, figure: str) -> str:
    """The anatomy at the last logged step and the test-split retrieval, per m and loss."""
    config = results["settings"]
    lines = [
        "## Gradient anatomy over training (Bleeker & de Rijke, 2022), on your data",
        "",
        f"{config['data']}; {config['model']}. Each loss trains its own network from the same "
        f"weights on the same 4-per-class batches for {config['epochs']} epoch(s); dL/dS of the "
        "batch's in-batch scores (each image querying the others) read by "
        "gradlab.functional.gradient_anatomy (an entry is active above 1 % of its query's "
        "largest |dL/dS|). At the last logged step, mean ± std over "
        f"{len(results['seeds'])} seed(s); MAP@R on the {config['test_data']}:",
        "",
        "| batch | loss | active negatives | queries without gradient | hardest-10 % share "
        "| MAP@R |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for encoder, runs in results["runs"].items():
        for loss, run in runs.items():
            anatomy = run["anatomy"]
            direction = next(key for key in anatomy if key != "steps")
            cells = [cell([seed[-1] for seed in anatomy[direction][key]], 2)
                     for key in ANATOMY_KEYS]  # fmt: skip
            lines.append(f"| {encoder} | {loss} | " + " | ".join(cells)
                         + f" | {cell(run['recall']['MAP@R'])} |")  # fmt: skip
    lines += ["", "![How many negatives per query receive gradient, the share of queries "
              "without gradient and the hardest negatives' share, over training]"
              f"({figure})"]  # fmt: skip
    return "\n".join(lines)


def write_study_report(name: str, results: dict, out: Path) -> list[Path]:
    """Draw the figures of a ``gradlab study NAME`` result and write ``summary.md`` and
    ``index.html`` into ``out``; return the written files.

    ``results`` is the study's JSON: one measurement for ``p-vs-batch-size`` and ``anatomy``,
    ``{m: measurement}`` for ``losses``.
    """
    from gradlab.plotting.studies import (
        plot_loss_comparison,
        plot_p_vs_batch_size,
        plot_scene_anatomy,
    )

    out = Path(out)
    if name == "p-vs-batch-size":
        figures = [plot_p_vs_batch_size(results, out / "p_vs_batch_size.png")]
        sections = [p_vs_batch_size_markdown(results, figures[0].name)]
    elif name == "losses":
        figures, sections = [], []
        for size, measurement in results.items():
            figures.append(plot_loss_comparison(measurement, out / f"loss_comparison_m{size}.png"))
            sections.append(loss_comparison_markdown(measurement, figures[-1].name))
    elif name == "anatomy":
        figures = [plot_scene_anatomy(results, out / "gradient_anatomy.png")]
        sections = [anatomy_markdown(results, figures[0].name)]
    else:
        raise GradlabError(f"study must be one of {list(STUDY_FILES)}; got {name!r}")
    text = "\n\n".join(["# gradlab study: " + name, *sections]) + "\n"
    (out / "summary.md").write_text(text)
    (out / "index.html").write_text(markdown_to_html(text, out, title=f"gradlab study {name}"))
    return [*figures, out / "summary.md", out / "index.html"]


def render_study_folder(name: str, folder: Path) -> list[Path]:
    """Render the JSON a ``gradlab study NAME`` run left in ``folder`` (figures, ``summary.md``,
    ``index.html``), e.g. after copying it from the GPU machine."""
    folder = Path(folder)
    if name not in STUDY_FILES:
        raise GradlabError(f"study must be one of {list(STUDY_FILES)}; got {name!r}")
    paths = sorted(folder.glob(STUDY_FILES[name]))
    if not paths:
        raise GradlabError(f"{str(folder)!r} holds no {STUDY_FILES[name]} of a gradlab study")
    if name == "losses":
        loaded = [json.loads(path.read_text()) for path in paths]
        results = {data["settings"]["batch_size"]: data for data in
                   sorted(loaded, key=lambda data: data["settings"]["batch_size"])}  # fmt: skip
    else:
        results = json.loads(paths[0].read_text())
    return write_study_report(name, results, folder)
