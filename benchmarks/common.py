"""Timing and peak-memory helpers shared by the benchmark scripts.

Times are medians of interleaved repeats (every method once per round, so drift in machine
load hits all methods alike). Peak memory is measured beyond what exists before the call:
on CUDA with ``torch.cuda.max_memory_allocated``; on CPU with the kernel's peak resident set
(``VmHWM``), reset through ``/proc/self/clear_refs`` before each measured call.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from gradlab.experiments.runtime import processor_name

RESULTS = Path(__file__).resolve().parent / "results"
QUICK_RESULTS = RESULTS / "quick"
"""Where a ``--quick`` run writes its JSON and figures (git ignores it): a smoke run never
replaces the committed results that the docs quote."""


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_call(function: Callable[[], object], device: torch.device) -> float:
    synchronize(device)
    start = time.perf_counter()
    function()
    synchronize(device)
    return time.perf_counter() - start


def interleaved_medians(
    methods: dict[str, Callable[[], object]], device: torch.device, repeats: int, warmup: int = 1
) -> dict[str, float]:
    """Median seconds per method, the methods run in turn within each round."""
    for _ in range(warmup):
        for function in methods.values():
            function()
    samples: dict[str, list[float]] = {name: [] for name in methods}
    for _ in range(repeats):
        for name, function in methods.items():
            samples[name].append(time_call(function, device))
    return {name: statistics.median(values) for name, values in samples.items()}


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def peak_memory_mib(function: Callable[[], object], device: torch.device) -> float | None:
    """Peak memory the call adds on top of what was allocated before it (MiB)."""
    if device.type == "cuda":
        synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        function()
        synchronize(device)
        return (torch.cuda.max_memory_allocated(device) - before) / 2**20
    try:
        before = _status_kib("VmRSS")
        Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
        function()
        return (_status_kib("VmHWM") - before) / 1024
    except OSError:
        return None


def machine_info(device: torch.device) -> dict[str, object]:
    info: dict[str, object] = {
        "cpu": processor_name("cpu"),  # a sort next to a matmul differs per model
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "device": str(device),
    }
    if device.type == "cuda":
        info["device_name"] = torch.cuda.get_device_name(device)
    return info


def results_folder(quick: bool) -> Path:
    """:data:`RESULTS`, or :data:`QUICK_RESULTS` for a ``--quick`` run."""
    return QUICK_RESULTS if quick else RESULTS


def write_results(name: str, payload: dict, quick: bool = False) -> Path:
    """Write ``payload`` as ``name`` into :func:`results_folder`; return the path."""
    folder = results_folder(quick)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(payload, indent=2))
    return path


def refuse(parser: argparse.ArgumentParser, message: str) -> None:
    """End the script before any work: one line ``PROG: message`` on stderr, exit code 2."""
    print(f"{parser.prog}: {message}", file=sys.stderr)
    raise SystemExit(2)


def checked_output(parser: argparse.ArgumentParser, path: Path, argument: str) -> Path:
    """``path`` if a file can be written there (its folder exists and is writable), else
    :func:`refuse` with the reason, before any work."""
    from gradlab.errors import GradlabError
    from gradlab.paths import check_output_file

    try:
        return check_output_file(path, argument=argument)
    except GradlabError as error:
        refuse(parser, str(error))


def checked_device(parser: argparse.ArgumentParser, text: str) -> torch.device:
    """``--device`` as a torch device if it exists here, else :func:`refuse`."""
    from gradlab.cli import check_device
    from gradlab.errors import GradlabError

    try:
        return torch.device(check_device(text))
    except GradlabError as error:
        refuse(parser, str(error))


def at_least_one(parser: argparse.ArgumentParser, value: int | None, argument: str) -> None:
    """:func:`refuse` a count below 1 (``None``: not given, accepted)."""
    if value is not None and value < 1:
        refuse(parser, f"{argument} must be at least 1; got {value}")


def argument_parser(doc: str, whole: bool = True) -> argparse.ArgumentParser:
    """A parser whose ``--help`` shows the script's docstring as a terminal shows text: its
    lines and bullets as written (the whole docstring, or its first line), without reST's
    double backticks."""
    text = doc.strip() if whole else doc.strip().splitlines()[0]
    return argparse.ArgumentParser(description=re.sub(r"``(.+?)``", r"\1", text),
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
