"""How much memory and time a loss needs at a batch size: ``gradlab plan``.

Users of the official Smooth-AP code ask why a batch of 384 does not fit a 32 GB V100 (its
difference tensors are ``[m, m, m]``). :func:`plan` answers for gradlab's losses: the peak
*extra* memory of one forward + backward pass of the loss on ``[m, d]`` float32 embeddings
with the 4-per-class sampler's labels (the backbone's activations come on top), and its time.

* **Measured** on the device when it is here: on CUDA ``torch.cuda.max_memory_allocated`` above
  the allocation before the call; on CPU the C allocator's bytes in use (glibc's
  ``mallinfo2``), read after every torch operation of the call (:class:`PeakBytes`), so the peak
  is the largest sum of live tensors, without the resident-set noise of a process.
* **Estimated** where the device is not here (``--device cuda`` on a machine without one), and
  on MPS (here or not: it is not measured), from the stated model of
  :func:`estimate_smooth_ap`: the tensors gradlab's chunked SmoothAP keeps and the blocks it
  computes in (:mod:`gradlab.functional.smooth_ap`), and a time that grows as ``m^2`` at fixed
  ``d`` and images per class, scaled from a measurement at a small batch here.
"""

from __future__ import annotations

import ctypes
import gc
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

from gradlab.errors import GradlabError
from gradlab.experiments.runtime import busy_machine_note
from gradlab.memory import refuse_beyond_free, refused_when_out_of_memory
from gradlab.validation import check_positive_int

PLAN_LOSSES = {
    "smooth_ap": "SmoothAP (query excluded)",
    "smooth_ap_query_included": "SmoothAP (query included)",
    "fast_ap": "FastAP",
    "blackbox_ap": "Blackbox AP",
    "fappy": "FAPPY",
    "contrastive": "Contrastive",
}
"""``--loss`` name -> the loss of :func:`gradlab.experiments.loss_comparison.loss_functions`."""

ESTIMATED = ("smooth_ap", "smooth_ap_query_included")
"""The losses with a stated memory model (:func:`estimate_smooth_ap`)."""

CALIBRATION_BATCH = 256
"""The batch size :func:`timing_batch` starts from (its largest multiple of the class size,
or two classes where it holds fewer)."""

TIMING_SECONDS = 10.0
"""About how long the timed runs of a measurement may take: a loss whose warm-up pass takes
longer than ``TIMING_SECONDS / repeats`` is timed fewer times (at least once)."""

LONG_PASS_SECONDS = 5.0
"""A warm-up pass at least this long says so on stderr, with the passes still to come."""

UNIT_ROW_TENSORS = 6
"""``[m, d]`` float32 tensors alive together in the backward of the embeddings' scaling to
unit rows (:func:`gradlab.functional.layouts.unit_rows`), after the scores' gradient is
spent: the rows it saved (scaled and unit), the gradient of the unit rows, autograd's three
temporaries of the division by the norm. Read from :class:`PeakBytes` at ``d >> m``, where
they are the peak: ``24 m d`` bytes."""

TRANSIENT_ROWS = 8
"""``[rows, C]`` float32 temporaries alive beside the block in the backward's chunk loop
(the row slice of the scores, its differences, the ``[rows, 2, C]`` column sums, the row
gradients), read from :mod:`gradlab.functional.smooth_ap`'s backward."""


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]  # fmt: skip


def _mallinfo2() -> Callable[[], int] | None:
    """Bytes the C allocator has handed out (heap and mmapped), or ``None`` off glibc >= 2.33."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        function = libc.mallinfo2
    except (OSError, AttributeError):
        return None
    function.restype = _MallInfo2

    def in_use() -> int:
        info = function()
        return int(info.uordblks + info.hblkhd)

    return in_use


class PeakBytes:
    """Peak of the CPU allocator's bytes in use over a block, read after every torch operation.

    A :class:`torch.utils._python_dispatch.TorchDispatchMode` sees every operation of the
    forward and of the backward (autograd's too); after each it reads glibc's ``mallinfo2``.
    ``peak`` is the largest reading above the one at entry: the most bytes the block's tensors
    held at once (a temporary freed inside one kernel is not seen). ``available`` is False off
    glibc, where nothing is measured.

    The reading is the whole process's, so the meter collects Python's garbage on entry and
    holds the cyclic collector off inside the block (restoring it on exit): the garbage of
    earlier code, freed by a collection inside the block, would lower the readings below the
    entry's and hide the block's own tensors. Another thread's allocations still count.

    Example:
        >>> with PeakBytes() as meter:
        ...     _ = torch.ones(1 << 20) * 2.0  # two 4 MiB tensors, alive together
        >>> not meter.available or meter.peak >= 8 << 20
        True
    """

    def __init__(self) -> None:
        self._in_use = _mallinfo2()
        self.available = self._in_use is not None
        self.peak = 0
        self._mode: Any = None
        self._collecting = False

    def __enter__(self) -> PeakBytes:
        from torch.utils._python_dispatch import TorchDispatchMode

        if self._in_use is None:
            return self
        meter, read = self, self._in_use
        start = read()

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                meter.peak = max(meter.peak, read() - start)
                return out

        with _Mode():  # the first dispatch in a process imports and caches (tens of MiB)
            torch.zeros(2).add(1.0).sum()
        gc.collect()
        self._collecting = gc.isenabled()
        gc.disable()
        try:
            self.peak, start = 0, read()
            mode = _Mode()
            mode.__enter__()
        except BaseException:
            if self._collecting:
                gc.enable()
            raise
        self._mode = mode
        return self

    def __exit__(self, *exc: object) -> None:
        if self._mode is not None:
            self._mode.__exit__(*exc)
            if self._collecting:
                gc.enable()


def _inputs(batch_size: int, dim: int, per_class: int, device: str, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    embeddings = torch.randn(batch_size, dim, generator=generator).to(device)
    labels = (torch.arange(batch_size) // per_class).to(device)
    return embeddings.requires_grad_(True), labels


def least_bytes(batch_size: int, dim: int) -> int:
    """A lower bound of the memory any plan loss allocates at ``m = batch_size``: the
    ``[m, d]`` float32 embeddings and their gradient (``8 m d``) and the ``[m, m]`` float32
    scores and their gradient (``8 m^2``); every loss of :data:`PLAN_LOSSES` scores all pairs.

    Example:
        >>> least_bytes(1024, 128) / 2**20  # MiB
        9.0
    """
    return 8 * batch_size * (batch_size + dim)


def _check_fits(loss: str, batch_size: int, dim: int, device: str) -> None:
    """Refuse, before any allocation, a measurement whose least memory exceeds what is free."""
    larger = "--dim" if dim > batch_size else "--batch-size"  # the larger term of m (m + d)
    instead = (f"pass --estimate for the stated model's answer, or a smaller {larger}"
               if loss in ESTIMATED else f"try a smaller {larger}")  # fmt: skip
    refuse_beyond_free(least_bytes(batch_size, dim), device, lambda need, free: (
        f"measuring {PLAN_LOSSES[loss]} at m = {batch_size}, d = {dim} needs at least {need} GiB "
        f"on {device} (the [m, m] scores and their gradient, the embeddings and theirs), more "
        f"than the {free} GiB available; {instead}"))


def plan_loss(name: str, tau: float, batch_size: int):
    """The loss ``gradlab plan`` measures for ``--loss name``: the loss comparison's own
    (:func:`gradlab.experiments.loss_comparison.loss_functions`) at ``tau``, called as
    ``loss(embeddings, labels)``.

    Example:
        >>> type(plan_loss("smooth_ap", 0.01, 64)).__name__
        'SmoothAPLoss'
    """
    from gradlab.experiments.loss_comparison import loss_functions

    return loss_functions(tau, batch_size)[PLAN_LOSSES[name]]


def calibration_batch(batch_size: int, per_class: int) -> int:
    """The batch size a time is measured at to foretell ``batch_size``'s: the largest multiple
    of ``per_class`` up to :data:`CALIBRATION_BATCH`, two classes at least (a batch of one
    class gives no query a negative; 256 holds no class of 300), and ``batch_size`` at most.

    Example:
        >>> calibration_batch(4096, 4), calibration_batch(4096, 3), calibration_batch(64, 4)
        (256, 255, 64)
    """
    return min(batch_size, max(CALIBRATION_BATCH - CALIBRATION_BATCH % per_class,
                               2 * per_class))  # fmt: skip


FORETELLING_SECONDS = 0.1
"""A pass at least this long is the one :func:`timing_batch` scales: below it, a pass's
fixed costs (dispatch, the chunk loop's bookkeeping) weigh against its ``m^2`` work, and
scaling by ``(m / m_small)^2`` reads too long (SmoothAP, d = 512, one thread: 1.5x from
m = 256 to 4096, exact from m = 1024)."""

LARGEST_TIMING_BATCH = 4096
"""The largest batch :func:`timing_batch` times (a few MiB of scores)."""

MOST_TIMING_PASSES = 20
""":func:`timing_batch` times a batch size until its passes add up to twice
:data:`FORETELLING_SECONDS` (two at least, this many at most) and keeps the fastest."""

LARGEST_TIMING_BYTES = 2**30
""":func:`timing_batch` doubles no further than a batch whose :func:`least_bytes` exceed this."""


def timing_batch(loss_fn, batch_size: int, dim: int, per_class: int, device: str,
                 ) -> tuple[int, float]:  # fmt: skip
    """``(m_small, seconds)``: the batch size whose pass, scaled by ``(m / m_small)^2``,
    foretells a pass at ``m = batch_size``, and its time here (the fastest of its passes).

    It starts at :func:`calibration_batch` and doubles while a pass takes less than
    :data:`FORETELLING_SECONDS`, up to half of ``batch_size``, at most
    :data:`LARGEST_TIMING_BATCH` and :data:`LARGEST_TIMING_BYTES`: about a second of passes.
    Each size's time is the fastest of its passes (:data:`MOST_TIMING_PASSES`); a first pass
    pays for lazy initialisation and is not timed.

    Example:
        >>> from gradlab.experiments.loss_comparison import loss_functions
        >>> small, seconds = timing_batch(loss_functions(0.01, 64)["Contrastive"], 64, 8, 4, "cpu")
        >>> small, seconds > 0  # no half of 64 above 64: timed at the batch itself
        (64, True)
    """
    small = calibration_batch(batch_size, per_class)
    first = True
    while True:
        embeddings, labels = _inputs(small, dim, per_class, device)
        if first:  # lazy initialisation: not timed
            loss_fn(embeddings, labels).backward()
            first = False
        times: list[float] = []  # the fastest of a few: a busy machine slows some passes
        while len(times) < MOST_TIMING_PASSES and (
                len(times) < 2 or sum(times) < 2 * FORETELLING_SECONDS):  # fmt: skip
            times.append(_timed_pass(loss_fn, embeddings, labels, device))
        taken = min(times)
        if (taken >= FORETELLING_SECONDS or 4 * small > batch_size
                or 2 * small > LARGEST_TIMING_BATCH
                or least_bytes(2 * small, dim) > LARGEST_TIMING_BYTES):  # fmt: skip
            return small, taken
        small *= 2


def _foretell_a_long_pass(loss_fn, loss: str, batch_size: int, dim: int, per_class: int,
                          device: str, repeats: int = 5) -> None:  # fmt: skip
    """Say on stderr, before the first pass at ``batch_size`` (at least twice
    :func:`calibration_batch`: a smaller one is about as fast), when one pass there should take
    :data:`LONG_PASS_SECONDS` or more (:func:`timing_batch`'s pass scaled by
    ``(m / m_small)^2``); a first pass at m = 16384 took minutes with no word."""
    small, taken = timing_batch(loss_fn, batch_size, dim, per_class, device)
    seconds = taken * (batch_size / small) ** 2
    if seconds >= LONG_PASS_SECONDS:  # warm-up, peak and the timed passes, as measure_loss
        passes = 2 + max(1, min(repeats, int(TIMING_SECONDS // seconds)))
        instead = "; --estimate answers in seconds" if loss in ESTIMATED else ""
        print(f"gradlab plan: one pass at m = {batch_size} should take about {seconds:.0f} s here "
              f"(one at m = {small}, scaled by (m / {small})^2), so the {passes} passes of the "
              f"measurement about {_rounded_time(passes * seconds)}{instead}",
              file=sys.stderr, flush=True)  # fmt: skip


def _timed_pass(loss_fn, embeddings: torch.Tensor, labels: torch.Tensor, device: str) -> float:
    """Seconds of one forward + backward of ``loss_fn``, the device synchronised on both sides
    (the embeddings' gradient cleared first)."""
    embeddings.grad = None
    _sync(device)
    started = time.perf_counter()
    loss_fn(embeddings, labels).backward()
    _sync(device)
    return time.perf_counter() - started


def _sync(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def measure_loss(
    loss: str, batch_size: int, dim: int, per_class: int = 4, device: str = "cpu",
    repeats: int = 5, tau: float = 0.01,
) -> dict:  # fmt: skip
    """Peak extra bytes and median seconds of one forward + backward of ``loss``, measured here.

    One warm-up pass (under the CPU peak meter's mode, so that the measured pass is not the
    mode's first), one pass for the peak, then ``repeats`` timed passes, fewer when the
    warm-up shows they would take more than :data:`TIMING_SECONDS` (at least one); a warm-up
    of :data:`LONG_PASS_SECONDS` or more says on stderr how many passes are still to come.

    Returns:
        ``{"peak_extra_bytes", "seconds", "method"}``; ``peak_extra_bytes`` is ``None`` on a
        CPU without glibc's ``mallinfo2``.

    Example:
        >>> cost = measure_loss("contrastive", 64, 16)
        >>> cost["seconds"] > 0, cost["method"].split(":")[0]
        (True, 'measured on cpu')
    """
    check_loss_plan(loss, batch_size, dim, per_class)
    check_positive_int("repeats", repeats)
    loss_fn = plan_loss(loss, tau, batch_size)
    embeddings, labels = _inputs(batch_size, dim, per_class, device)
    if torch.device(device).type == "cpu":  # said before the first pass: what its times mean
        note = busy_machine_note(torch.get_num_threads())
        if note is not None:
            print(f"gradlab plan: {note}", file=sys.stderr, flush=True)
    _sync(device)
    with PeakBytes():  # the CPU meter's mode: a first pass under it reads about 1 MB low
        # timed inside: the meter's entry pays the process's first dispatch (seconds), which
        # is no part of a pass and would cut the timed passes short
        started = time.perf_counter()
        loss_fn(embeddings, labels).backward()  # warm-up: kernels and lazy initialisation
        _sync(device)
        warm_up = time.perf_counter() - started
    repeats = max(1, min(repeats, int(TIMING_SECONDS // max(warm_up, 1e-9))))
    if warm_up >= LONG_PASS_SECONDS:
        print(f"gradlab plan: one pass takes {warm_up:.0f} s here; {1 + repeats} more to "
              "measure the peak and the time", file=sys.stderr)  # stderr: line-buffered
    embeddings.grad = None
    if torch.device(device).type == "cuda":
        _sync(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        loss_fn(embeddings, labels).backward()
        _sync(device)
        peak: int | None = torch.cuda.max_memory_allocated(device) - before
        method = f"measured on {device}: torch.cuda.max_memory_allocated above the start"
    else:
        embeddings.grad = None
        with PeakBytes() as meter:
            loss_fn(embeddings, labels).backward()
        peak = meter.peak if meter.available else None
        method = "measured on cpu: the C allocator's bytes in use (mallinfo2) after every op"
    times = [_timed_pass(loss_fn, embeddings, labels, device) for _ in range(repeats)]
    method += f"; time: the median of {repeats} run{'s' if repeats > 1 else ''}"
    if torch.device(device).type == "cpu":  # on a busy machine, threads > 1 wait for each other
        threads = torch.get_num_threads()
        method += f" on {threads} torch thread{'s' if threads > 1 else ''}"
    return {"peak_extra_bytes": peak, "seconds": statistics.median(times), "method": method}


def estimate_smooth_ap(
    batch_size: int, dim: int, per_class: int = 4, include_query: bool = False,
    budget: int | None = None,
) -> int:  # fmt: skip
    """Peak extra bytes of gradlab's SmoothAP forward + backward, from its stated model.

    The in-batch call on ``[m, d]`` float32 embeddings with ``m / k`` classes of ``k`` keeps
    (:mod:`gradlab.functional.smooth_ap`): the ``[m, m]`` scores and, in the backward, their
    ``[m, m]`` gradient (``8 m^2`` bytes); two ``[m, m]`` bool masks, the positives and the
    candidates (``2 m^2``); the ``[m, d]`` unit embeddings and their gradient (``8 m d``); one
    block of ``rows x n x m`` entries (``n = k - 1`` positives per query, ``k`` with the query
    included; ``rows = budget // (n m)``, at least 1 and at most m) and
    :data:`TRANSIENT_ROWS` ``[rows, m]`` temporaries of the chunk loop. Later, in the
    backward of the scaling to unit rows, :data:`UNIT_ROW_TENSORS` ``[m, d]`` tensors are alive
    together, which is the peak once ``d`` exceeds about ``2 m`` (``d = 2048`` at ``m = 256``):

        bytes = max(10 m^2 + 8 m d + 4 rows m (n + TRANSIENT_ROWS), 24 m d)

    A model of this implementation, checked against :class:`PeakBytes` on CPU at small sizes
    (``tests/experiments/test_planner.py``); the official code's dense ``[m, m, m]`` tensors
    are not in it.

    Example:
        >>> round(estimate_smooth_ap(384, 512) / 2**20, 1)  # MiB at the issue's batch
        9.1
    """
    from gradlab.functional.smooth_ap import DEFAULT_CHUNK_ELEMENTS

    check_loss_plan("smooth_ap", batch_size, dim, per_class)
    budget = DEFAULT_CHUNK_ELEMENTS if budget is None else check_positive_int("budget", budget)
    m = batch_size
    positives = per_class if include_query else per_class - 1
    rows = min(m, max(1, budget // (positives * m)))
    scores = 10 * m * m + 8 * m * dim + 4 * rows * m * (positives + TRANSIENT_ROWS)
    return max(scores, 4 * UNIT_ROW_TENSORS * m * dim)


PLAN_ARGUMENTS = {"loss": "loss", "batch_size": "batch size", "dim": "dim",
                  "per_class": "per_class"}  # fmt: skip
"""How :func:`check_loss_plan` names its arguments by default (``gradlab plan`` passes its
options' names instead: ``--batch-size``, ``--per-class``)."""


def check_loss_plan(
    loss: str, batch_size: int, dim: int, per_class: int, *, names: dict[str, str] | None = None
) -> None:
    """Refuse an unknown loss, a non-positive size, or a batch the sampler cannot make (or of one
    class, which gives no query a negative).

    ``names``: how the messages name each argument, by parameter name (default
    :data:`PLAN_ARGUMENTS`; a command line passes its options' names).

    Example:
        >>> check_loss_plan("smooth_ap", 8, 8, -1, names={"per_class": "--per-class"})
        Traceback (most recent call last):
        ...
        gradlab.errors.GradlabError: --per-class must be a positive integer; got -1
    """
    named = {**PLAN_ARGUMENTS, **(names or {})}
    if loss not in PLAN_LOSSES:
        raise GradlabError(f"{named['loss']} must be one of {', '.join(PLAN_LOSSES)}; got "
                           f"{loss!r}")  # fmt: skip
    check_positive_int(named["batch_size"], batch_size)
    check_positive_int(named["dim"], dim)
    check_positive_int(named["per_class"], per_class)
    if per_class < 2:
        raise GradlabError(f"{named['per_class']} must be at least 2 (a query needs a positive); "
                           f"got {per_class}")  # fmt: skip
    if batch_size % per_class:
        raise GradlabError(f"{named['batch_size']} must be a multiple of {per_class} ({per_class} "
                           f"images per class); got {batch_size}")  # fmt: skip
    if batch_size < 2 * per_class:
        raise GradlabError(f"{named['batch_size']} must hold at least two classes "
                           f"({2 * per_class} or more at {per_class} per class: a query needs a "
                           f"negative); got {batch_size}")  # fmt: skip


def plan(
    loss: str, batch_size: int, dim: int, per_class: int = 4, device: str = "cpu",
    estimate: bool = False, tau: float = 0.01,
) -> dict:  # fmt: skip
    """Peak extra memory and time per step of ``loss``: measured on ``device`` when it is here
    (cpu, or cuda) and ``estimate`` is False, else estimated (:func:`estimate_smooth_ap`).

    Returns:
        ``{"loss", "batch_size", "dim", "per_class", "device", "peak_extra_bytes", "seconds",
        "method"}``; the estimate's time is this machine's CPU time at
        :func:`timing_batch`'s batch scaled by ``(m / m_small)^2`` and says so, for
        ``device="cpu"``;
        for another device ``seconds`` is None (this CPU's time says nothing about a GPU's).

    Raises:
        GradlabError: bad arguments; an estimate asked for a loss without a stated model; a
            measurement whose least memory (:func:`least_bytes`) exceeds what the device has
            free (checked before any allocation), or that ran out of memory.

    Example:
        >>> result = plan("smooth_ap", 384, 512, estimate=True)
        >>> result["method"].startswith("estimated"), round(result["peak_extra_bytes"] / 2**20, 1)
        (True, 9.1)
    """
    check_loss_plan(loss, batch_size, dim, per_class)
    kind = torch.device(device).type
    present = kind == "cpu" or (kind == "cuda" and torch.cuda.is_available())
    result = {"loss": PLAN_LOSSES[loss], "batch_size": batch_size, "dim": dim,
              "per_class": per_class, "device": device}  # fmt: skip
    if present and not estimate:
        _check_fits(loss, batch_size, dim, device)
        with refused_when_out_of_memory(
            f"{device} ran out of memory measuring {PLAN_LOSSES[loss]} at m = {batch_size}, "
            f"d = {dim}; try a smaller --batch-size" + (" or --estimate" if loss in ESTIMATED
                                                         else "")
        ):  # fmt: skip
            if 2 * calibration_batch(batch_size, per_class) <= batch_size:  # else as fast
                _foretell_a_long_pass(plan_loss(loss, tau, batch_size), loss, batch_size, dim,
                                      per_class, device)  # fmt: skip
            return result | measure_loss(loss, batch_size, dim, per_class, device, tau=tau)
    if loss not in ESTIMATED:
        where = ("without --estimate; --device cpu runs here" if estimate else
                 f"{_unmeasured(kind) or f'no {kind} device is here'}; --device cpu runs "
                 "here")  # fmt: skip
        raise GradlabError(f"loss {loss!r} has no stated memory model; measure it where the "
                           f"device is ({where})")  # fmt: skip
    include = loss == "smooth_ap_query_included"
    memory = ("estimated: memory from estimate_smooth_ap's model (the larger of 10 m^2 + 8 m d "
              "+ the chunk's block and temporaries, and 24 m d, bytes)")  # fmt: skip
    if kind != "cpu":  # this CPU's time says nothing about another device's
        return result | {
            "peak_extra_bytes": estimate_smooth_ap(batch_size, dim, per_class, include),
            "seconds": None,
            "method": f"{memory}; time: not estimated, "
                      f"{_unmeasured(kind) or f'no {kind} device here to measure'}",
        }
    small = calibration_batch(batch_size, per_class)
    refuse_beyond_free(least_bytes(small, dim), "cpu", lambda need, free: (
        f"the estimate's time is measured on this CPU at m = {small} ({small // per_class} "
        f"classes of {per_class}), which needs at least {need} GiB on cpu (the [m, m] scores and "
        f"their gradient, the embeddings and theirs), more than the {free} GiB available; try a "
        "smaller class size (per_class; --per-class on the command line)"))
    if 4 * small <= batch_size:  # room to double: a pass long enough to scale
        small, _ = timing_batch(plan_loss(loss, tau, small), batch_size, dim, per_class, "cpu")
    calibration = measure_loss(loss, small, dim, per_class, "cpu", tau=tau)
    seconds = calibration["seconds"] * (batch_size / small) ** 2
    return result | {
        "peak_extra_bytes": estimate_smooth_ap(batch_size, dim, per_class, include),
        "seconds": seconds,
        "method": f"{memory}; time: this CPU's at m = {small}, scaled by (m / {small})^2",
    }


def _unmeasured(kind: str) -> str | None:
    """Why a device of ``kind`` that is here is estimated for all the same (MPS:
    :func:`measure_loss` has no peak meter for it); None where it is simply not here."""
    if kind == "mps" and torch.backends.mps.is_available():
        return "gradlab plan measures on cpu and cuda only"
    return None


def format_plan(result: dict) -> str:
    """The plan as the lines ``gradlab plan`` prints.

    Example:
        >>> print(format_plan({"loss": "FastAP", "batch_size": 8, "dim": 4, "per_class": 4,
        ...     "device": "cpu", "peak_extra_bytes": 3 << 20, "seconds": 0.002,
        ...     "method": "measured on cpu"}))
        FastAP at m = 8 (4 per class), d = 4, on cpu
        peak extra memory: 3.0 MiB (the loss's forward + backward; the backbone's come on top)
        time per step:     2.00 ms (forward + backward of the loss)
        how: measured on cpu
    """
    peak = result["peak_extra_bytes"]
    memory = "not measurable here" if peak is None else _bytes_in_words(peak)
    return "\n".join([
        f"{result['loss']} at m = {result['batch_size']} ({result['per_class']} per class), "
        f"d = {result['dim']}, on {result['device']}",
        f"peak extra memory: {memory} (the loss's forward + backward; the backbone's come on "
        "top)",
        "time per step:     " + ("not estimated (see how)" if result["seconds"] is None else
                                 f"{_seconds_in_words(result['seconds'])} (forward + backward "
                                 "of the loss)"),
        f"how: {result['method']}",
    ])  # fmt: skip


def _bytes_in_words(size: float) -> str:
    """``size`` bytes in the unit that keeps it readable: KiB below 1 MiB, then MiB, GiB, TiB
    (a model's estimate at a batch of 10^8 is no number of MiB anyone reads)."""
    for unit, power in (("KiB", 10), ("MiB", 20), ("GiB", 30)):
        if size < 2 ** (power + 10):
            return f"{size / 2**power:.1f} {unit}"
    return f"{size / 2**40:.1f} TiB"


def _rounded_time(seconds: float) -> str:
    """A foretold time: whole seconds below two minutes, else whole minutes."""
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def _seconds_in_words(seconds: float) -> str:
    """``seconds`` in ms below a second, in s below an hour, else in hours."""
    if seconds < 1.0:
        return f"{1e3 * seconds:.2f} ms"
    return f"{seconds:.2f} s" if seconds < 3600.0 else f"{seconds / 3600.0:.1f} h"
