"""Shared settings of the studies: CPU threads, worker processes, one progress line per task.

The studies' networks are tiny, so each runs on one torch thread (:func:`study_threads`) and a
machine's cores are used by running the independent parts of a study (its seeds, or its
losses) in parallel worker processes (:func:`run_tasks`). Every task seeds its own generators, so
a task's numbers do not depend on where, when or beside what it runs, and the results are
merged in task order: a parallel run returns exactly what the serial run returns.

Several studies can share the workers side by side (the report does): each runs in a thread
of its own inside :func:`parent_turn`, which lets one thread at a time run the parent's own code
(drawing, the audit, a study's merging) and hands the turn on while a thread waits for its
tasks, so the workers stay busy while the parent works.

Example:
    >>> run_tasks(divmod, [(7, 2), (9, 4)], stage="doctest", names=["a", "b"], workers=1)
    [(3, 1), (2, 1)]
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import multiprocessing
import os
import platform
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from numbers import Integral
from typing import Any

import torch

from gradlab.child_processes import starting_children
from gradlab.errors import GradlabError
from gradlab.progress import progress, progress_mode, set_progress_mode
from gradlab.validation import MAX_SEED, check_positive_finite, number_text

MAX_WORKERS = 8
"""The most worker processes the studies start, whatever the number of cores."""

_POLL_SECONDS = 0.5
"""The longest the parent waits for a task without looking at its pending signals."""

_JOIN_SECONDS = 10.0
"""The longest :meth:`_Pool.stop` waits for one worker (or the pool's thread) to end."""


class StudyError(RuntimeError):
    """A task of a study failed; the message names the study and the task (its seed).

    Example:
        >>> try:
        ...     run_tasks(int, [("7",), ("x",)], stage="parse", names=["seed 0", "seed 1"])
        ... except StudyError as error:
        ...     print(error)
        parse, seed 1 failed: ValueError: invalid literal for int() with base 10: 'x'
    """


@contextlib.contextmanager
def study_threads(device: str, threads: int = 1) -> Iterator[None]:
    """Run a study's small CPU kernels on ``threads`` intra-op threads, then restore the setting.

    The studies' networks are tiny: on a shared 2-core machine, torch's default of one thread
    per core made a training step 5-70x slower (measured: 0.01 s with one thread, 0.23-0.69 s
    with two while other processes ran). On other devices this does nothing.

    Example:
        >>> before = torch.get_num_threads()
        >>> with study_threads("cpu"):
        ...     torch.get_num_threads()
        1
        >>> torch.get_num_threads() == before
        True
    """
    if not str(device).startswith("cpu"):
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity mask where the system has one).

    Example:
        >>> usable_cores() >= 1
        True
    """
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def busy_machine_note(
    threads: int, cores: int | None = None, load: float | None = None, *, timed: bool = True
) -> str | None:
    """What to say before timing on ``threads`` torch threads while other processes hold the
    cores, else None: torch's threads wait for each other at every op, and a thread that
    loses its core makes the others wait, so the times can read many times too long (a
    SmoothAP forward + backward at m = 384: 7 ms on one thread, 400 ms on two beside two
    other busy processes, on a 2-core machine). Busy: the last minute's load average (the
    other processes: this one has not started timing yet) is at least 1 and leaves fewer free
    cores than ``threads``. One thread is never warned of: it waits for no other.

    Args:
        threads: the torch threads that will time.
        cores: the cores this process may use (default: :func:`usable_cores`).
        load: the last minute's load average (default: :func:`os.getloadavg`'s; None where
            the system has none, as on Windows: nothing is said).
        timed: whether the work records its times; work that records none (a study of P or
            of the gradient anatomy) is said to take longer instead.

    Example:
        >>> busy_machine_note(2, cores=2, load=0.1) is None  # an idle machine
        True
        >>> busy_machine_note(1, cores=2, load=3.0) is None  # one thread waits for no other
        True
        >>> print(busy_machine_note(2, cores=2, load=2.7))  # doctest: +NORMALIZE_WHITESPACE
        the machine is busy (load average 2.7 over the last minute, 2 cores): the times are
        taken on 2 torch threads, which wait for each other behind the other processes and can
        read many times too long; for times that mean something, measure on an idle machine
        or on one thread (OMP_NUM_THREADS=1)
    """
    if load is None and hasattr(os, "getloadavg"):
        with contextlib.suppress(OSError):
            load = os.getloadavg()[0]
    cores = usable_cores() if cores is None else cores
    if load is None or threads < 2 or load < 1 or load + threads <= cores:
        return None
    busy = (f"the machine is busy (load average {load:.1f} over the last minute, {cores} "
            f"core{'s' if cores > 1 else ''}): ")
    if not timed:  # no time to read wrong: the run itself is what waits
        return (busy + f"training runs on {threads} torch threads, which wait for each other "
                "behind the other processes, so it can take many times longer; on one thread "
                "(OMP_NUM_THREADS=1) it waits for no other")
    return (busy + f"the times are taken on {threads} torch threads, "
            "which wait for each other behind the other processes and can read many times too "
            "long; for times that mean something, measure on an idle machine or on one thread "
            "(OMP_NUM_THREADS=1)")


def processor_name(device: str = "cpu") -> str:
    """The processor a study's times were taken on: the GPU's name for a CUDA device, else the
    CPU's model name (Linux: ``/proc/cpuinfo``), else what :func:`platform.processor` says.

    Two machines of one kind can differ several-fold in what a sort costs next to a matmul: a
    time means little without it.

    Example:
        >>> isinstance(processor_name("cpu"), str)
        True
    """
    if str(device).startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.device(device))
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "an unnamed processor"


def timing_conditions(device: str, threads: int, processes: int) -> dict:
    """Where and how a study's times were taken, for the sentence beside its table.

    Args:
        device: the torch device the study ran on.
        threads: torch's intra-op threads of each process that timed.
        processes: processes that trained at once (the workers of :func:`run_tasks`).

    Returns:
        ``{"clock": "wall", "device", "processor", "cores", "threads", "processes"}``.

    Example:
        >>> conditions = timing_conditions("cpu", threads=1, processes=2)
        >>> conditions["clock"], conditions["threads"], conditions["processes"]
        ('wall', 1, 2)
    """
    return {"clock": "wall", "device": str(device), "processor": processor_name(device),
            "cores": usable_cores(), "threads": threads, "processes": processes}  # fmt: skip


def default_workers() -> int:
    """Worker processes by default: the usable cores, at most :data:`MAX_WORKERS`.

    Example:
        >>> 1 <= default_workers() <= MAX_WORKERS
        True
    """
    return min(usable_cores(), MAX_WORKERS)


def check_workers(workers: object, argument: str = "workers") -> int:
    """``workers`` if it is a whole number from 1 to :data:`MAX_WORKERS`, else a GradlabError.

    Example:
        >>> check_workers(2)
        2
        >>> check_workers(0)
        Traceback (most recent call last):
        ...
        gradlab.errors.GradlabError: workers must be a whole number from 1 to 8; got 0
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= MAX_WORKERS:
        raise GradlabError(
            f"{argument} must be a whole number from 1 to {MAX_WORKERS}; got {workers!r}"
        )
    return workers


LARGEST_LR = 3.4028234663852886e38 * (1 - 0.9)
"""The largest learning rate of a study: Adam's first step (beta1 = 0.9) is ``lr / (1 - beta1)``,
which must be a float32 number (a larger one ended in torch's overflow traceback)."""


def check_lr(lr: object, argument: str = "lr") -> float:
    """A study's learning rate: a positive finite number at most :data:`LARGEST_LR`.
    ``argument`` names it in the message (a command line passes ``--lr``).

    Example:
        >>> check_lr(1e-3)
        0.001
        >>> check_lr(1e38, "--lr")
        Traceback (most recent call last):
        ...
        gradlab.errors.GradlabError: --lr must be at most 3.4028234663852877e+37 (Adam's first ...
    """
    value = check_positive_finite(argument, lr)
    if value > LARGEST_LR:
        raise GradlabError(f"{argument} must be at most {number_text(LARGEST_LR)} (Adam's first "
                           f"step is lr / (1 - 0.9), a float32 number); got "
                           f"{number_text(value)}")  # fmt: skip
    return value


def check_device(device: object, argument: str = "device") -> str:
    """``device`` if torch can compute on it here (cpu, cuda[:N] that is visible, mps that is
    available); else :class:`GradlabError` naming ``argument`` (a command line passes
    ``--device``), before a study reads any image.

    Example:
        >>> check_device("cpu")
        'cpu'
        >>> check_device("banana")
        Traceback (most recent call last):
        ...
        gradlab.errors.GradlabError: device must be cpu, cuda[:N] or mps; got 'banana'
    """
    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError, TypeError):
        raise GradlabError(f"{argument} must be cpu, cuda[:N] or mps; got {device!r}") from None
    option = f"{argument} {device}" if argument.startswith("--") else f"{argument}={device!r}"
    cpu = "--device cpu" if argument.startswith("--") else f"{argument}='cpu'"
    if parsed.type == "cuda":
        if not torch.cuda.is_available():
            raise GradlabError(f"{option}: this torch build ({torch.__version__}) sees no CUDA "
                               f"device; use {cpu}")  # fmt: skip
        if parsed.index is not None and parsed.index >= torch.cuda.device_count():
            raise GradlabError(
                f"{option}: only {torch.cuda.device_count()} CUDA device(s) visible"
            )
    elif parsed.type == "mps":
        if not torch.backends.mps.is_available():
            raise GradlabError(f"{option}: MPS is not available here; use {cpu}")
    elif parsed.type != "cpu":
        raise GradlabError(f"{argument} must be cpu, cuda[:N] or mps; got {device!r}")
    elif parsed.index not in (None, 0):  # torch takes cpu:1, and computes on the one CPU
        raise GradlabError(f"{option}: torch has one CPU device, cpu (or cpu:0); use {cpu}")
    return device


def check_seeds(seeds: object, argument: str = "seeds") -> list[int]:
    """The seeds of a study's runs: at least one, each a distinct whole number from 0 to
    :data:`~gradlab.validation.MAX_SEED`.

    A repeated seed would count one run twice in every mean and spread, and no study can run
    without a seed: both are refused before any work, with the seeds given. ``argument``
    names them in the message (a command line passes its option, ``--seeds``).

    Example:
        >>> check_seeds((0, 2))
        [0, 2]
        >>> check_seeds([0, 1, 0])
        Traceback (most recent call last):
        ...
        gradlab.errors.GradlabError: seeds must be distinct whole numbers >= 0; got [0, 1, 0]
    """
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Iterable):
        raise GradlabError(f"{argument} must be a sequence of distinct whole numbers >= 0; got "
                           f"{seeds!r}")  # fmt: skip
    given = list(seeds)
    if not given:
        raise GradlabError(f"{argument} must name at least one seed; got none")
    whole = all(isinstance(s, Integral) and not isinstance(s, bool) and s >= 0 for s in given)
    if not whole or len(set(given)) != len(given):
        raise GradlabError(f"{argument} must be distinct whole numbers >= 0; got {given!r}")
    if any(seed > MAX_SEED for seed in given):  # torch would overflow mid-run
        raise GradlabError(f"{argument} must be whole numbers from 0 to 2**32 - 1; got {given!r}")
    return [int(seed) for seed in given]


class _Pool:
    """A spawn-context process pool started on first use, and the processes it started."""

    def __init__(self, workers: int):
        self.workers = workers
        self.executor: concurrent.futures.ProcessPoolExecutor | None = None
        self.before: set = set()
        self.stopped = False

    def get(self) -> concurrent.futures.ProcessPoolExecutor:
        if self.stopped:  # another study's failure or a signal ended it: start nothing new
            raise StudyError("the worker processes were stopped (another study failed, or the "
                             "run was interrupted)")  # fmt: skip
        if self.executor is None:
            self.before = set(multiprocessing.active_children())
            self.executor = concurrent.futures.ProcessPoolExecutor(
                max_workers=self.workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_start_worker,
            )
        return self.executor

    def close(self) -> None:
        """Wait for the workers to exit (after the work is done)."""
        if self.executor is not None:
            self.executor.shutdown(wait=True)
            self.executor = None

    def stop(self) -> None:
        """Cancel what has not started and end the workers now (Ctrl-C, SIGTERM, a failure).

        Called outside any lock of ``concurrent.futures`` (the signal's exception has left the
        wait by then), it never waits unboundedly: the workers are terminated (then killed)
        with bounded joins, and the executor's management thread gets a bounded join too, so
        that the interpreter's exit (which joins that thread) does not wait on it either.
        """
        executor, self.executor = self.executor, None
        self.stopped = True
        if executor is None:
            return
        # The executor's own processes and management thread (read before shutdown, which
        # drops them, and before the thread may reap the processes) and any other child
        # started since: end every process first, so that no queued task starts meanwhile.
        owned = list((getattr(executor, "_processes", None) or {}).values())
        manager = getattr(executor, "_executor_manager_thread", None)
        started = [p for p in multiprocessing.active_children() if p not in self.before]
        workers = list({id(p): p for p in [*owned, *started]}.values())
        for process in workers:
            process.terminate()
        executor.shutdown(wait=False, cancel_futures=True)
        for process in workers:
            process.join(timeout=_JOIN_SECONDS)
            if process.is_alive():
                process.kill()
                process.join(timeout=_JOIN_SECONDS)
        if manager is not None:
            manager.join(timeout=_JOIN_SECONDS)


_workers = 1
_shared: _Pool | None = None

_starting = threading.Lock()
"""Held while a thread starts worker processes (:func:`_starting_workers`)."""


@contextlib.contextmanager
def _starting_workers() -> Iterator[None]:
    """Start worker processes in the block, out of an interrupt's reach
    (:func:`~gradlab.child_processes.starting_children`); :func:`stop_starting_workers`
    waits for the block, so that a section's thread is not interrupted while it starts one."""
    while not _starting.acquire(timeout=_POLL_SECONDS):  # an interrupt lands between tries
        pass
    try:
        with starting_children():
            yield
    finally:
        _starting.release()


def stop_starting_workers(timeout: float) -> None:
    """Start no more worker processes in this :func:`study_workers` block, once a thread that
    is starting one has done so (waiting at most ``timeout`` seconds for it).

    Call it before interrupting the threads that run studies: an exception raised in a thread
    while it starts a process leaves that process behind.

    Example:
        >>> with study_workers(1):
        ...     stop_starting_workers(1.0)
    """
    acquired = _starting.acquire(timeout=timeout)
    try:
        if _shared is not None:
            _shared.stopped = True  # the next start raises StudyError
    finally:
        if acquired:
            _starting.release()


@contextlib.contextmanager
def study_workers(workers: int) -> Iterator[None]:
    """Run the studies called in this block on ``workers`` processes (1: in this process).

    One pool of spawned processes serves every study of the block; it starts when a study first
    needs it and its workers end with the block (at once if the block is left by an exception,
    Ctrl-C or SIGTERM included, so that no worker outlives it).

    Workers are spawned, so a script that asks for more than one must guard its entry point
    with ``if __name__ == "__main__":`` (each worker imports the script's module).

    Example:
        >>> with study_workers(1):
        ...     run_tasks(pow, [(2, 3)], stage="doctest", names=["a"])
        [8]
    """
    global _workers, _shared
    workers = check_workers(workers)
    previous = (_workers, _shared)
    _workers, _shared = workers, _Pool(workers) if workers > 1 else None
    pool = _shared
    try:
        yield
    except BaseException:
        if pool is not None:
            pool.stop()
        raise
    else:
        if pool is not None:
            pool.close()
    finally:
        _workers, _shared = previous


def current_workers() -> int:
    """The worker processes of the enclosing :func:`study_workers` block (1 outside any).

    Example:
        >>> current_workers()
        1
    """
    return _workers


_turn = threading.RLock()
"""The parent's turn. An RLock knows its owner (recorded in C as it is taken), so a thread
gives the turn back exactly when it holds it, even when an exception raised in it from
outside (the report's Ctrl-C) arrives just after it took the turn."""


def _holds_turn() -> bool:
    return _turn._is_owned()  # the owner check of threading's RLock (C-level in CPython)


@contextlib.contextmanager
def parent_turn() -> Iterator[None]:
    """Run the block as the parent's one running thread among those that take turns.

    Threads that each run a study (the report's sections side by side) enter this block: one
    runs at a time, and :func:`run_tasks` hands the turn on while its thread waits for the
    worker processes, taking it back before it merges the results. Code in the block never
    runs beside another thread's, so the parent's global state (matplotlib's, torch's random
    generator) is used by one study at a time, as in a serial run.

    Example:
        >>> with parent_turn():
        ...     run_tasks(abs, [(-2,)], stage="doctest", names=["a"], workers=1)
        [2]
    """
    try:
        _turn.acquire()  # inside the try: an interrupt right after it still gives it back
        yield
    finally:
        if _holds_turn():
            _turn.release()


@contextlib.contextmanager
def _turn_handed_on() -> Iterator[None]:
    """Within :func:`parent_turn`, let the other threads run while this one waits."""
    if not _holds_turn():  # not within parent_turn: nothing to hand on
        yield
        return
    _turn.release()
    try:
        yield
    finally:
        _turn.acquire()


def computed_once(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` computed once per (hashable) arguments in this process, and shared.

    Unlike :func:`functools.lru_cache`, a call made while the first call with the same
    arguments is still running (another section side by side, while the first waits for its
    workers) waits for that result, handing on the parent's turn (:func:`parent_turn`),
    instead of computing it again. A call that raised is not kept: the next one computes.

    Example:
        >>> calls = []
        >>> square = computed_once(lambda x: calls.append(x) or x * x)
        >>> square(3), square(3), calls
        (9, 9, [3])
    """
    results: dict = {}
    lock = threading.Lock()

    @functools.wraps(function)
    def once(*arguments: Any) -> Any:
        with lock:
            entry = results.get(arguments)
            first = entry is None
            if first:
                entry = results[arguments] = concurrent.futures.Future()
        if first:
            try:
                entry.set_result(function(*arguments))
            except BaseException as error:
                with lock:
                    results.pop(arguments, None)
                entry.set_exception(error)
                raise
            return entry.result()
        with _turn_handed_on():  # the first call's section needs the turn to finish
            while True:
                with contextlib.suppress(concurrent.futures.TimeoutError):
                    return entry.result(timeout=_POLL_SECONDS)

    return once


def _start_worker() -> None:
    """A worker: one torch thread, no progress output of its own, Ctrl-C left to the parent."""
    torch.set_num_threads(1)
    set_progress_mode("off")
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _say(text: str) -> None:
    print(f"gradlab: {text}", file=sys.stderr, flush=True)


def _timed(function: Callable, arguments: tuple) -> tuple[Any, float]:
    started = time.perf_counter()
    return function(*arguments), time.perf_counter() - started


def _failure(error: BaseException, stage: str, name: str) -> BaseException:
    """The error a failed task raises: a missing dependency stays itself (a report skips its
    section), a GradlabError stays one (bad input, said in one line), both naming the task;
    anything else becomes a StudyError naming the study and the task."""
    if isinstance(error, ImportError):
        error.add_note(f"in {stage}, {name}")
        return error
    if isinstance(error, GradlabError):
        return GradlabError(f"{stage}, {name}: {error}")
    return StudyError(f"{stage}, {name} failed: {type(error).__name__}: {error}")


def run_tasks(
    function: Callable[..., Any],
    arguments: Sequence[tuple],
    *,
    stage: str,
    names: Sequence[str],
    parts: Sequence[str] | None = None,
    detail: str = "",
    unit: str = "seed",
    workers: int | None = None,
) -> list:
    """``[function(*a) for a in arguments]``, on worker processes when more than one is asked.

    Each task runs in a spawned process with one torch thread (or here, one after the other,
    with ``workers=1``); the results come back in the order of ``arguments`` whatever the order
    the tasks finish in. ``function`` must be a module-level function and the arguments and
    results picklable. Tasks with the same name form a group (a seed whose losses are separate
    tasks); progress is one line per finished group when it goes to a log (``gradlab: <stage>:
    <name> done (<detail>, <s> s; <k> of <n> <unit>s done)``, the seconds summed over the
    group's tasks), a bar on a terminal.

    Args:
        function: what each task calls; it must seed every generator it uses from its
            arguments (never from a generator shared between tasks).
        arguments: one tuple of positional arguments per task.
        stage: the study, as the progress lines and errors name it.
        names: one group name per task (``"seed 2"``), in the progress lines and errors.
        parts: one label per task within its group (``"FAPPY"``), in errors; optional.
        detail: what one group does (``"6 losses trained"``), for the progress lines.
        unit: what a group is (``"seed"``), for the progress lines.
        workers: worker processes; ``None``: those of the enclosing :func:`study_workers`
            block (1 outside any). Never more processes than tasks.

    Returns:
        The results, in the order of ``arguments``.

    Raises:
        StudyError: a task raised; the message names the stage and the task (a GradlabError
            stays a GradlabError with that message; an ImportError is raised as it is, with
            the task in a note).

    Example:
        >>> run_tasks(max, [(1, 5), (7, 2)], stage="doctest", names=["a", "b"], workers=1)
        [5, 7]
    """
    arguments = [tuple(a) for a in arguments]
    names = list(names)
    parts = [""] * len(arguments) if parts is None else list(parts)
    if len(names) != len(arguments) or len(parts) != len(arguments):
        raise GradlabError(
            f"names and parts must hold one entry per task ({len(arguments)}); got "
            f"{len(names)} names and {len(parts)} parts"
        )
    workers = current_workers() if workers is None else check_workers(workers)
    workers = min(workers, len(arguments)) if arguments else 1
    groups = list(dict.fromkeys(names))
    left = {group: names.count(group) for group in groups}
    seconds = dict.fromkeys(groups, 0.0)
    plural = lambda n: f"{n} {unit}{'' if n == 1 else 's'}"  # noqa: E731
    mode = progress_mode()
    bar = progress(total=len(groups), desc=stage, unit=unit) if mode == "bar" else None
    if mode == "lines":
        where = "in this process" if workers == 1 else f"on {workers} worker processes"
        tasks = "" if len(arguments) == len(groups) else f", {len(arguments)} tasks"
        _say(f"{stage}: {plural(len(groups))}{tasks} {where} ...")
    started = time.perf_counter()
    results: list = [None] * len(arguments)

    def finished(index: int, took: float) -> None:
        group = names[index]
        left[group] -= 1
        seconds[group] += took
        if left[group]:
            return
        if bar is not None:
            bar.update(1)
        elif mode == "lines":
            done = sum(1 for g in groups if not left[g])
            what = f"{detail}, " if detail else ""
            _say(f"{stage}: {group} done ({what}{seconds[group]:.0f} s; "
                 f"{done} of {plural(len(groups))} done)")  # fmt: skip

    def failure(error: Exception, index: int) -> BaseException:
        task = names[index] + (f" ({parts[index]})" if parts[index] else "")
        return _failure(error, stage, task)

    if workers == 1:
        for index, task in enumerate(arguments):
            try:
                results[index], took = _timed(function, task)
            except Exception as error:
                raise failure(error, index) from error
            finished(index, took)
    else:
        own = None if _shared is not None and _shared.workers >= workers else _Pool(workers)
        pool = own if own is not None else _shared
        try:
            with _starting_workers():  # submit starts the processes
                executor = pool.get()
                futures = {executor.submit(_timed, function, task): i
                           for i, task in enumerate(arguments)}  # fmt: skip
            pending = set(futures)
            while pending:
                # A bounded wait, not as_completed's unbounded one: the main thread comes back
                # to Python code at least every _POLL_SECONDS, so a signal whose C handler ran
                # while it slept in a lock raises here instead of when a task next finishes.
                with _turn_handed_on():  # other studies' parent code runs meanwhile
                    done, pending = concurrent.futures.wait(
                        pending, timeout=_POLL_SECONDS,
                        return_when=concurrent.futures.FIRST_COMPLETED,
                    )  # fmt: skip
                for future in sorted(done, key=futures.__getitem__):
                    index = futures[future]
                    try:
                        results[index], took = future.result()
                    except Exception as error:
                        raise failure(error, index) from error
                    finished(index, took)
        except BaseException:
            pool.stop()  # Ctrl-C, SIGTERM or a failed task: no worker goes on
            raise
        if own is not None:
            own.close()
    if bar is not None:
        bar.close()
    elif mode == "lines":
        _say(f"{stage} done ({plural(len(groups))}, {time.perf_counter() - started:.0f} s)")
    return results
