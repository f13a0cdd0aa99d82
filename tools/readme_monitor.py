"""Renderer of the README's Monitor overhead block (see tools/readme_blocks.py).

Every number comes from ``benchmarks/results/monitor.json`` (written by
``python benchmarks/bench_monitor.py``); each row states its target and whether it is met.
"""

from __future__ import annotations

from pathlib import Path

from tools.readme_blocks import load_json, register
from tools.readme_tables import duration


def ratio_text(value: float, target: float) -> str:
    """``value`` with two decimals, or as many more (up to six) as it takes not to print equal
    to ``target`` when it is not: 2.501 against a target of 2.5 reads 2.501x, not 2.50x beside
    "not met".

    Example:
        >>> ratio_text(2.96, 2.0), ratio_text(2.5012, 2.5), ratio_text(2.5, 2.5)
        ('2.96x', '2.501x', '2.50x')
    """
    for digits in range(2, 7):
        text = f"{value:.{digits}f}"
        if value == target or text != f"{target:.{digits}f}":
            return f"{text}x"
    return f"{value:.6f}x"


def _verdict(value: float, spread: list[float], target: float, alone: float | None = None) -> str:
    """``met`` when the block median and (if measured) ``monitor.step()`` alone are both within
    the target, else ``not met``; ``(noisy)`` when the rounds' q25-q75 straddle the target."""
    worst = value if alone is None else max(value, alone)
    verdict = "met" if worst <= target else "**not met**"
    return verdict + (" (noisy)" if spread[0] <= target < spread[1] else "")


def _alone(run: dict, config: str) -> float | None:
    return run.get("ratio_monitor_step_alone", {}).get(config)


def _row(name: str, run: dict, config: str, target: float | None) -> str:
    baseline = run["step_seconds_median"]["baseline"]
    value, spread = run["ratio"][config], run["ratio_round_q25_q75"][config]
    alone = _alone(run, config)
    seconds = run.get("monitor_step_seconds", {}).get(config)
    alone_cell = "-" if alone is None else f"{alone:.3f}x"
    if alone is not None and seconds is not None:
        alone_cell += f" ({duration(seconds)} per step)"
    cells = [name, duration(baseline), f"{value:.3f}x ({spread[0]:.2f}-{spread[1]:.2f})",
             alone_cell]  # fmt: skip
    if target is None:
        cells += ["", ""]
    else:
        cells += [f"<= {target:.2f}x", _verdict(value, spread, target, alone)]
    return "| " + " | ".join(cells) + " |"


def _where_the_time_goes(runs: list[dict]) -> list[str]:
    """One sentence per batch size: each full-preset quantity logged alone, over the loss."""
    sentences = []
    for run in runs:
        alone = run.get("logged_quantity_alone_over_loss")
        if not alone:
            continue
        parts = ", ".join(f"`{name}` {ratio:.2f}x" for name, ratio in alone.items())
        noise = ("; a negative value is a cost below the noise of the rounds, not a saving"
                 if min(alone.values()) < 0 else "")  # fmt: skip
        sentences.append(
            f"Where a logged full-preset step's time goes at B = {run['batch']}: each quantity "
            f"logged alone costs, over one SmoothAP forward+backward, {parts} (a quantity alone "
            f"pays for the sort or sigmoid block it shares with others in the full preset{noise})."
        )
        bare, fixed = run.get("one_thread_cpu_seconds_per_bare_op"), run.get(
            "one_thread_cpu_fixed_cost_seconds")  # fmt: skip
        if bare is None or fixed is None or "one_thread_cpu_fixed_cost_ops" not in run:
            continue
        ops, loss = run["one_thread_cpu_fixed_cost_ops"], run[
            "one_thread_cpu_loss_forward_backward_seconds"]  # fmt: skip
        sentences.append(
            f"At B = {run['one_thread_cpu_fixed_cost_batch']} (measured beside the B = "
            f"{run['batch']} rounds), where there is almost nothing to "
            f"compute, the same logged step still costs {duration(fixed)} of one-thread CPU time "
            f"({fixed / loss:.2f}x the B = {run['batch']} loss) for {ops} torch ops, "
            f"{fixed / ops * 1e6:.1f} us each; a bare small op costs {bare * 1e6:.1f} us here, "
            f"so dispatching those ops alone would take {duration(ops * bare)} "
            f"({ops * bare / loss:.2f}x): the rest is Python around them and memory traffic."
        )
    return sentences


def _cold_step(runs: dict, targets: dict) -> list[str]:
    """One sentence: the default preset's ``monitor.step()`` right after the CNN's step against
    the same logged step right after another Monitor's (``cnn_cold_step``), and what the CNN
    target leaves per step."""
    cold = runs.get("cnn_cold_step")
    if cold is None or "cnn" not in runs:
        return []
    seconds = cold["monitor_step_seconds_median"]
    after_cnn, warm = seconds["after_the_cnn"], seconds["after_another_monitor"]
    baseline = runs["cnn"]["step_seconds_median"]["baseline"]
    allowed = (targets["cnn_default_every_step"] - 1) * baseline
    return [
        f"Where the CNN's default-preset step goes: right after the CNN's backward and optimizer "
        f"step, `monitor.step()` takes {duration(after_cnn)} (median of {cold['steps']} steps); "
        f"a second Monitor logging the same batch right after it takes {duration(warm)}, the "
        f"same work with its code and buffers back in the caches the CNN's step evicted "
        f"({after_cnn / warm:.2f}x). The target of "
        f"{targets['cnn_default_every_step']:.2f}x leaves {duration(allowed)} per step."
    ]


@register("monitor-overhead")
def monitor_overhead(root: Path) -> str:
    """Step-time ratios with the Monitor against the same step without it, and the logged step."""
    result = load_json(root, "benchmarks/results/monitor.json")
    runs, targets = result["results"], result["targets"]
    lines = [
        "| setting | baseline step | with the Monitor: block ratio (round q25-q75) "
        "| `monitor.step()` alone (logged step: one-thread CPU time) | target | |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    rows = [
        ("CNN 3x32x32, batch 112, SmoothAP: default preset every step", "cnn",
         "default_every_step", "cnn_default_every_step"),
        ("CNN, batch 112, SmoothAP: default preset without its geometry and margins, every "
         "step", "cnn", "default_without_geometry_every_step", None),
        ("CNN, batch 112, SmoothAP: full preset every step", "cnn", "full_every_step",
         "cnn_full_every_step"),
        ("CNN, batch 112, SmoothAP: default preset, default schedule (every 50)",
         "cnn_default_schedule", "default_schedule", None),
        ("MLP on digits, batch 100, SmoothAP: default preset, default schedule", "mlp",
         "default_schedule", "mlp_default_schedule"),
        ("CNN, batch 112, PML MultiSimilarityLoss via the recording distance: default preset "
         "every step", "cnn_pml", "default_every_step", "cnn_pml_default_every_step"),
    ]  # fmt: skip
    for label, setting, config, target_key in rows:
        if setting not in runs or config not in runs[setting]["ratio"]:
            lines.append(f"| {label} | - | not measured | | | |")
            continue
        target = None if target_key is None else targets[target_key]
        lines.append(_row(label, runs[setting], config, target))
    cpu_targets = targets.get("one_thread_cpu_logged_full_step_over_loss", {})
    for run in runs["logged_step_vs_loss"]:
        ratio = run["logged_full_step_over_loss"]
        spread = run["logged_full_step_over_loss_round_q25_q75"]
        cpu = run.get("one_thread_cpu_logged_full_step_over_loss")
        target = cpu_targets.get(str(run["batch"]))
        if cpu is None or target is None:  # a run from before the one-thread CPU measurement
            cpu_cell, target_cell, verdict = "-", "", ""
        else:
            cpu_cell = f"one-thread CPU time: {ratio_text(cpu, target)}"
            target_cell = f"<= {target:.2f}x (CPU)"
            verdict = "met" if cpu <= target else "**not met**"
        lines.append(
            f"| one logged full-preset step / one SmoothAP forward+backward, B = {run['batch']} "
            f"| {duration(run['loss_forward_backward_seconds'])} | {ratio:.2f}x "
            f"({spread[0]:.2f}-{spread[1]:.2f}) | {cpu_cell} | {target_cell} | {verdict} |"
        )
    machine, conditions = result["machine"], result["conditions"]
    where = _cold_step(runs, targets) + _where_the_time_goes(runs["logged_step_vs_loss"])
    for sentence in where:  # a paragraph each: one run-on paragraph was hard to read
        lines += ["", sentence]
    before = ", ".join(f"{value:.1f}" for value in conditions["load_average_1_5_15_before"])
    after = ", ".join(f"{value:.1f}" for value in conditions["load_average_1_5_15_after"])
    lines += [
        "",
        f"Measured {conditions['started'][:16].replace('T', ' ')} on {machine['device']} "
        f"({machine.get('cpu', 'CPU not recorded')}, {machine['cpu_count']} cores, "
        f"{machine['torch_threads']} torch threads, torch "
        f"{machine['torch']}), load average {before} before and {after} after: other "
        "processes shared the cores, so the configurations run their blocks in turn, round after "
        "round, and each ratio is the median block time over the baseline's median block time; "
        "in parentheses the 25th-75th percentiles of the per-round ratios (a spread of ratios "
        "round by round, which need not contain the ratio of the medians when the load "
        "drifts); `monitor.step()` alone is 1 + the "
        "time inside `monitor.step()` per step over the median baseline step (it leaves out "
        "the capture in the watched call). A target counts as met only when both are within it."
        + (f" torch ran on {machine['torch_threads']} thread(s) of {machine['cpu_count']} cores "
           "because other processes shared them: the baseline steps are longer than on a quiet "
           "machine using both cores, so the ratios are smaller than they would be there; the "
           "seconds per step let one rescale." if machine["torch_threads"] < machine["cpu_count"]
           else "")
        + (" A `--quick` run: few rounds." if conditions.get("quick") else ""),
    ]
    if "cockpit" in result:
        lines.append(
            f"For comparison, Cockpit's cheapest preset (`economy`, every step) costs "
            f"**{result['cockpit']['ratio_economy_every_step']:.2f}x** on the same CNN "
            "(its own run of `benchmarks/bench_cockpit.py`)."
        )
    return "\n".join(lines)


@register("monitor-overhead-cuda")
def monitor_overhead_cuda(root: Path) -> str:
    """The same settings on a GPU (``benchmarks/results/monitor_cuda.json``, written by
    ``python benchmarks/bench_monitor.py --device cuda``), without the CPU targets."""
    result = load_json(root, "benchmarks/results/monitor_cuda.json")
    runs = result["results"]
    lines = [
        "| setting | baseline step | with the Monitor: block ratio (round q25-q75) "
        "| `monitor.step()` alone |",
        "| --- | --- | --- | --- |",
    ]
    rows = [
        ("CNN, batch 112: default preset every step", "cnn", "default_every_step"),
        ("CNN, batch 112: default preset without geometry and margins, every step", "cnn",
         "default_without_geometry_every_step"),
        ("CNN, batch 112: full preset every step", "cnn", "full_every_step"),
        ("CNN, batch 112: default preset, default schedule (every 50)", "cnn_default_schedule",
         "default_schedule"),
        ("MLP on digits, batch 100: default preset, default schedule", "mlp", "default_schedule"),
        ("CNN, batch 112, PML MultiSimilarityLoss: default preset every step", "cnn_pml",
         "default_every_step"),
    ]  # fmt: skip
    for label, setting, config in rows:
        if setting not in runs or config not in runs[setting]["ratio"]:
            lines.append(f"| {label} | - | not measured | |")
            continue
        lines.append(_row(label, runs[setting], config, None).removesuffix("  |  |"))
    for run in runs["logged_step_vs_loss"]:
        spread = run["logged_full_step_over_loss_round_q25_q75"]
        lines.append(
            f"| one logged full-preset step / one SmoothAP forward+backward, B = {run['batch']} "
            f"| {duration(run['loss_forward_backward_seconds'])} "
            f"| {run['logged_full_step_over_loss']:.2f}x ({spread[0]:.2f}-{spread[1]:.2f}) | |"
        )
    machine, conditions = result["machine"], result["conditions"]
    cnn = runs["cnn"]
    per_step = cnn["monitor_step_seconds"]
    geometry = per_step["default_every_step"] - per_step["default_without_geometry_every_step"]
    schedule = runs["cnn_default_schedule"]["ratio"]["default_schedule"]
    lines += [
        "",
        f"Measured {conditions['started'][:16].replace('T', ' ')} on one {machine['device_name']} "
        f"(torch {machine['torch']}, {machine['cpu_count']} CPU cores)"
        + (", a `--quick` run: few rounds" if conditions.get("quick") else "")
        + f". The CNN's step takes {duration(cnn['step_seconds_median']['baseline'])} there, "
        f"and a logged default-preset step {duration(per_step['default_every_step'])} inside "
        "`monitor.step()`: it launches a few hundred small kernels, and on a GPU launching, "
        "not arithmetic, sets its time. Logging every step is for short diagnostic runs there; "
        f"with the default schedule the CNN's steps cost {schedule:.2f}x. Geometry and margins "
        f"take {duration(geometry)} of the default preset's logged step (the effective rank's "
        "`eigvalsh` also waits for the device).",
    ]  # fmt: skip
    return "\n".join(lines)
