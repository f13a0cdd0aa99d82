"""Gradient accumulation is not the big-batch gradient for an in-batch loss: by how much.

For k = 1, 2, 4, 8 micro-batches of a batch of 64 paired items (the synthetic problem of
``gradlab.equivalence``: a tiny MLP, classes of two), SmoothAP (tau 0.01) and NT-Xent
(temperature 0.1), 3 seeds, in float64, measure against the whole batch (k = 1):

* how far the accumulated dL/dtheta is: ``||g_k - g_1|| / ||g_1||`` and the cosine of the two;
* how many negatives per query receive gradient: candidates of another class whose
  ``|dL/ds_qc|`` exceeds 1e-8 times the largest ``|dL/ds|`` of the whole batch (a negative
  outside the query's micro-batch is never scored, so it receives none).

Writes benchmarks/results/accumulation.json, then draws figures/accumulation.png from it.

Usage: python analyses/accumulation.py [--out-json PATH] [--figure PATH] [--plot-only]
"""

from __future__ import annotations

import argparse
import platform
from pathlib import Path

import torch

import gradlab
from gradlab.equivalence import Accumulation, FullBatch, run_step, synthetic_problem
from gradlab.jsonio import write_json

ROOT = Path(__file__).resolve().parents[1]
BATCH_SIZE = 64
MICRO_BATCHES = (1, 2, 4, 8)
SEEDS = (0, 1, 2)
RELATIVE_THRESHOLD = 1e-8
LOSSES = {
    "SmoothAP (tau 0.01)": lambda: gradlab.SmoothAPLoss(tau=0.01),
    "NT-Xent (T 0.1)": lambda: gradlab.NTXentLoss(temperature=0.1),
}


def _flat(gradients) -> torch.Tensor:
    return torch.cat([value.flatten() for value in gradients.parameters.values()])


def _negatives_with_gradient(score_grad, negatives, threshold) -> float:
    return float(((score_grad.abs() > threshold) & negatives).sum(dim=1).double().mean())


def measure() -> dict:
    """Every loss x seed x k; lists are indexed [seed][k] in the order of ``micro_batches``."""
    results = {}
    for name, make in LOSSES.items():
        rows = {"relative_error": [], "cosine": [], "negatives_with_gradient": [],
                "negatives_scored": []}  # fmt: skip
        for seed in SEEDS:
            model, batch = synthetic_problem(batch_size=BATCH_SIZE, seed=seed)
            loss = make()
            whole = run_step(FullBatch(loss), model, batch)
            g1 = _flat(whole)
            negatives = batch.labels.unsqueeze(1) != batch.labels.unsqueeze(0)
            threshold = RELATIVE_THRESHOLD * float(whole.scores.abs().max())
            per_k = {key: [] for key in rows}
            for k in MICRO_BATCHES:
                grads = run_step(Accumulation(loss, k), model, batch)
                gk = _flat(grads)
                per_k["relative_error"].append(float((gk - g1).norm() / g1.norm()))
                per_k["cosine"].append(float(gk @ g1 / (gk.norm() * g1.norm())))
                per_k["negatives_with_gradient"].append(
                    _negatives_with_gradient(grads.scores, negatives, threshold)
                )
                per_k["negatives_scored"].append(
                    float((grads.scored & negatives).sum(dim=1).double().mean())
                )
            for key in rows:
                rows[key].append(per_k[key])
        results[name] = rows
    return {
        "what": "gradient accumulation over k micro-batches against the whole batch (k = 1)",
        "batch_size": BATCH_SIZE,
        "micro_batches": list(MICRO_BATCHES),
        "seeds": list(SEEDS),
        "dtype": "float64",
        "gradient_threshold": f"|dL/ds| > {RELATIVE_THRESHOLD:g} x max |dL/ds| (whole batch)",
        "negatives_per_query_in_the_batch": BATCH_SIZE - 2,
        "losses": results,
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "torch": torch.__version__,
        },
    }


def plot(results: dict, path: Path) -> Path:
    """Two panels against k: the gradient's relative error and the negatives with gradient."""
    import matplotlib.pyplot as plt

    from gradlab.plotting.style import apply_style, save_figure, series_style

    apply_style()
    ks = results["micro_batches"]
    figure, (error_axis, count_axis) = plt.subplots(1, 2, figsize=(10.5, 4.2))
    for index, (name, rows) in enumerate(results["losses"].items()):
        style = series_style(index)
        for axis, key in ((error_axis, "relative_error"), (count_axis, "negatives_with_gradient")):
            values = torch.tensor(rows[key])  # [seed, k]
            for seed_values in values:
                axis.plot(ks, seed_values, color=style["color"], alpha=0.25, linewidth=1)
            axis.plot(ks, values.mean(dim=0), label=name, color=style["color"],
                      linestyle=style["linestyle"], marker=style["marker"])  # fmt: skip
    scored = torch.tensor(next(iter(results["losses"].values()))["negatives_scored"]).mean(0)
    count_axis.plot(ks, scored, color="0.4", linestyle=":", label="negatives scored at all")
    for axis in (error_axis, count_axis):
        axis.set_xscale("log", base=2)
        axis.set_xticks(ks, [str(k) for k in ks])
        axis.set_xlabel("micro-batches k (batch of 64: micro-batches of 64/k)")
    error_axis.set_ylabel(r"$\|g_k - g_1\| \,/\, \|g_1\|$ of dL/d$\theta$")
    error_axis.set_title("distance from the whole-batch gradient")
    count_axis.set_ylabel("negatives per query with gradient")
    count_axis.set_title(f"of {results['negatives_per_query_in_the_batch']} negatives per query")
    count_axis.set_yscale("log", base=2)
    handles, labels = count_axis.get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncol=3, frameon=False,
                  bbox_to_anchor=(0.5, -0.01))  # fmt: skip
    figure.suptitle(f"Gradient accumulation is not the big-batch gradient "
                    f"({len(results['seeds'])} seeds: mean, thin lines per seed)")  # fmt: skip
    figure.tight_layout(rect=(0, 0.05, 1, 1))
    return save_figure(figure, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out-json", type=Path, default=ROOT / "benchmarks" / "results" / "accumulation.json"
    )
    parser.add_argument("--figure", type=Path, default=ROOT / "figures" / "accumulation.png")
    parser.add_argument(
        "--plot-only", action="store_true", help="draw the figure from the existing JSON"
    )
    arguments = parser.parse_args()
    from common import checked_figure, checked_path

    from gradlab.errors import GradlabError
    from gradlab.paths import check_output_file

    def earlier_json(path: Path, argument: str) -> Path:
        if not path.is_file():
            raise GradlabError(f"{argument} must be the JSON an earlier run wrote (--plot-only "
                               f"draws from it); got {str(path)!r}, which is no file")  # fmt: skip
        return path

    if arguments.plot_only:
        checked_path(earlier_json, arguments.out_json, "--out-json")
    else:
        checked_path(check_output_file, arguments.out_json, "--out-json")
    checked_figure(arguments.figure, "--figure")
    torch.set_num_threads(1)  # the same sums in the same order on every run
    if not arguments.plot_only:
        write_json(arguments.out_json, measure())
        print(f"wrote {arguments.out_json}")
    from gradlab.plotting.style import load_results

    print(f"wrote {plot(load_results(arguments.out_json), arguments.figure)}")


if __name__ == "__main__":
    main()
