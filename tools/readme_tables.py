"""Renderers of the README's benchmark blocks (see tools/readme_blocks.py)."""

from __future__ import annotations

from pathlib import Path

from tools.readme_blocks import load_json, register


def duration(seconds: float) -> str:
    """``0.0037`` -> ``3.7 ms``; one second and more in seconds (``1.66 s``)."""
    if seconds >= 1.0:
        return f"{seconds:.2f} s"
    milliseconds = seconds * 1e3
    return f"{milliseconds:.0f} ms" if milliseconds >= 100 else f"{milliseconds:.1f} ms"


@register("loss-cost")
def loss_cost(root: Path) -> str:
    """Forward+backward time of the four AP losses against M (benchmarks/results/losses.json)."""
    result = load_json(root, "benchmarks/results/losses.json")
    losses = list(result["fitted_order"])
    timing = {(t["loss"], t["batch_size"]): t["median_seconds"] for t in result["timings"]}
    sizes = sorted({t["batch_size"] for t in result["timings"]})
    lines = [f"| M | {' | '.join(losses)} |", "| --- |" + " --- |" * len(losses)]
    for size in sizes:
        cells = [duration(timing[(loss, size)]) if (loss, size) in timing else "-"
                 for loss in losses]
        lines.append(f"| {size} | {' | '.join(cells)} |")
    orders = ", ".join(f"{loss} M^{order:.2f}" for loss, order in result["fitted_order"].items())
    lines += ["", f"Fitted batch-level orders ({result['fit_range']}): {orders}."]
    cheapest = [min(losses, key=lambda loss, s=size: timing.get((loss, s), float("inf")))
                for size in sizes]  # fmt: skip
    from_size = next(
        (size for i, size in enumerate(sizes) if all(c == losses[0] for c in cheapest[i:])), None
    )
    if from_size is not None:
        lines.append(f"{losses[0]} is the cheapest of the {len(losses)} from M = {from_size} up.")
    return "\n".join(lines)


@register("smoothap-speed")
def smoothap_speed(root: Path) -> str:
    """gradlab's SmoothAP against pml and the dense baseline (benchmarks/results/smoothap.json)."""
    result = load_json(root, "benchmarks/results/smoothap.json")
    runs = {(r["batch_size"], r["method"]): r for r in result["comparison"] if "method" in r}
    sizes = sorted({size for size, _ in runs})

    def cell(size: int, method: str) -> str:
        run = runs[(size, method)]
        return f"{duration(run['median_seconds'])}, {run['peak_extra_mib']:.0f} MiB"

    lines = [
        "| B | gradlab | pytorch-metric-learning | dense O(B^3) baseline | pml / gradlab |",
        "| --- | --- | --- | --- | --- |",
    ]
    for size in sizes:
        ratio = result["ratios"][str(size)]["pml_over_gradlab"]
        lines.append(
            f"| {size} | {cell(size, 'gradlab')} | {cell(size, 'pml')} | {cell(size, 'dense')} "
            f"| {ratio:.0f}x |"
        )
    alone = ", ".join(
        f"{run['batch_size']} {duration(run['median_seconds'])} ({run['peak_extra_mib']:.0f} MiB)"
        for run in result["scaling"]
    )
    lines += ["", f"gradlab alone: B = {alone}."]
    return "\n".join(lines)


@register("p-10-classes")
def p_ten_classes(root: Path) -> str:
    """The 10-class digits measurement of P against m (figures/operating_region_p_*.json)."""
    result = load_json(root, "figures/operating_region_p_vs_batch_size_10_classes.json")
    fixed = result["fixed_model"]

    def span(rows: list[dict], key: str) -> str:
        values = [row[key] for row in rows]
        return f"{min(values):.3f} to {max(values):.3f}"

    rows = fixed["untrained_uniform"] + fixed["trained_uniform"]
    error = max(abs(r["p_seed_definition"] - r["sampling_only_prediction"]) for r in rows)
    sizes = [r["batch_size"] for r in fixed["untrained_uniform"]]
    untrained = span(fixed["untrained_uniform"], "p_without_query")
    trained = span(fixed["trained_uniform"], "p_without_query")
    return (
        f"At a fixed model, uniformly drawn batches of {sizes[0]} to {sizes[-1]} hold the same "
        f"proportion of close pairs of two candidates ({untrained} untrained, {trained} "
        "trained). P as Brown et al. (2020) define it in Eq. 1 (`p_seed_definition` in the JSON) "
        "still moves with m, because Eq. 1 counts the m diagonal entries and the query's own "
        "column (self-score exactly 1). Those two shares predict that P to within "
        f"{error:.3f} at every size."
    )


@register("finding-p-vs-batch-size")
def finding_p_vs_batch_size(root: Path) -> str:
    """The README's top finding on Fig. S7a, worded as the report's key finding."""
    from gradlab.report.findings import FINDERS

    batch = load_json(root, "figures/studies/p_vs_batch_size.json")
    records = load_json(root, "benchmarks/results/audit.json")
    (finding,) = FINDERS["operating_region"]({"p_vs_batch_size": batch, "audit_records": records})
    return f"- **P against batch size (Brown et al., 2020, Fig. S7a).** {finding.text}"


@register("fappy-lemma1")
def fappy_lemma1(root: Path) -> str:
    """FAPPY's Lemma 1 as measured (figures/fappy_lemma1_gradient.json)."""
    result = load_json(root, "figures/fappy_lemma1_gradient.json")
    both = min(result["nonzero_share_in_pair_bin"], result["nonzero_share_in_bin_below"])
    exact = (
        "exactly" if result["max_abs_closed_form_error"] == 0
        else f"to {result['max_abs_closed_form_error']:.1e}"
    )  # fmt: skip
    return (
        f"  Over {result['configurations']} random configurations, {both:.0%} of negatives in "
        f"either bin get a non-zero gradient, {result['nonzero_share_elsewhere']:.0%} elsewhere, "
        f"and the closed form matches autograd {exact}"
    )


@register("tie-aware-gap")
def tie_aware_gap(root: Path) -> str:
    """How close each stand-in gets to AP_T and DCG_T (figures/tie_aware_relaxation_gap.json)."""
    result = load_json(root, "figures/tie_aware_relaxation_gap.json")
    runs = result["runs"]
    bits = sorted({run["bits"] for run in runs})
    methods = list(dict.fromkeys(run["method"] for run in runs))
    reaching = [m for m in methods
                if all(r["settles_at"] is not None for r in runs if r["method"] == m)]  # fmt: skip

    def largest_gap(objective: str, method: str) -> float:
        return max(r["gap_at_largest_scale"] for r in runs
                   if r["objective"] == objective and r["method"] == method)  # fmt: skip

    who = f"only the {' and '.join(reaching)} stand-in" if reaching else "no stand-in"
    return (
        f"  On random {bits[0]} to {bits[-1]}-bit codes with saturated tanh, {who} reaches "
        f"{result['tolerance']:g} of AP_T and DCG_T. The log form stays "
        f"{largest_gap('ap', 'log'):.1e} (AP) and {largest_gap('dcg', 'log'):.2g} (DCG) away at "
        "the largest scale (`figures/tie_aware_relaxation_gap.png`)."
    )


@register("retrieval-at-scale")
def retrieval_at_scale_table(root: Path) -> str:
    """gradlab's chunked retrieval metrics against pytorch-metric-learning + faiss-cpu
    (benchmarks/results/retrieval.json)."""
    result = load_json(root, "benchmarks/results/retrieval.json")
    sizes, median, ratio = result["sizes"], result["median"], result["ratio_gradlab_over_pml_faiss"]
    conditions = result["conditions"]
    names = {"gradlab": "gradlab `retrieval_at_scale`",
             "pml_faiss": "pytorch-metric-learning `AccuracyCalculator` + faiss-cpu"}  # fmt: skip
    lines = ["| method | wall | CPU | peak extra memory |", "| --- | --- | --- | --- |"]
    for key, name in names.items():
        row = median[key]
        lines.append(
            f"| {name} | {duration(row['wall_seconds'])} | {duration(row['cpu_seconds'])} "
            f"| {row['peak_extra_mib']:.0f} MiB |"
        )
    target = result["targets"]["peak_extra_mib"]
    memory_met = median["gradlab"]["peak_extra_mib"] <= target
    time_met = ratio["cpu_seconds"] <= result["targets"]["cpu_ratio_gradlab_over_pml_faiss"]
    load = ", ".join(f"{value:.1f}" for value in conditions["load_average_1_5_15_before"])
    difference = result["largest_metric_difference"]
    agreement = (
        "Both give the same Precision@1, R-Precision and MAP@R to the last digit."
        if difference == 0
        else f"Their Precision@1, R-Precision and MAP@R differ by at most {difference:.1e} "
        "(faiss ranks by L2 distance, gradlab by cosine: on unit vectors the same order up to "
        "float32 rounding)."
    )
    lines += [
        "",
        f"N = {sizes['count']:,} embeddings of dimension {sizes['dim']} in {sizes['classes']:,} "
        f"classes, each querying all the others; one thread each, {len(result['rounds'])} "
        f"interleaved round(s), load average {load} at the start. gradlab / faiss: "
        f"**{ratio['cpu_seconds']:.2f}x** CPU time, {ratio['wall_seconds']:.2f}x wall "
        f"(target <= 1: {'met' if time_met else '**not met**'}); gradlab's peak extra memory "
        f"{median['gradlab']['peak_extra_mib']:.0f} MiB (target <= {target} MiB: "
        f"{'met' if memory_met else '**not met**'}). {agreement}",
    ]
    return "\n".join(lines)


LAYOUTS = {"one_class": "one class", "two_classes": "two classes",
           "four_per_class": "4 per class", "singletons": "singletons (no positive)"}  # fmt: skip
"""benchmarks/bench_memory.py's label layouts, as the table names them."""


@register("smoothap-memory")
def smoothap_memory(root: Path) -> str:
    """SmoothAP's peak extra resident memory by batch and label layout
    (benchmarks/results/memory.json)."""
    result = load_json(root, "benchmarks/results/memory.json")
    config, cases = result["config"], result["cases"]
    sizes = sorted({case["batch_size"] for case in cases})
    layouts = [layout for layout in LAYOUTS if any(c["layout"] == layout for c in cases)]
    peak = {(c["batch_size"], c["layout"]): c["peak_extra_mib"] for c in cases}
    lines = [f"| B | {' | '.join(LAYOUTS[layout] for layout in layouts)} |",
             "| --- |" + " --- |" * len(layouts)]  # fmt: skip
    for size in sizes:
        cells = [f"{peak[(size, layout)]:.0f} MiB" if (size, layout) in peak else "-"
                 for layout in layouts]  # fmt: skip
        lines.append(f"| {size} | {' | '.join(cells)} |")
    machine = result["machine"]
    within = "every case within" if result["all_within_limit"] else "**not every case within**"
    lines += ["", f"Forward and backward of SmoothAP (tau {config['tau']}) on {config['dims']}-d "
              f"{config['dtype']} embeddings, each case in a fresh process capped at "
              f"{config['cap_gib']:g} GiB: {config['measure']}; {within} the "
              f"{config['limit_mib']} MiB limit (torch {machine['torch']}, {machine['device']}, "
              f"{machine['torch_threads']} threads)."]  # fmt: skip
    return "\n".join(lines)
