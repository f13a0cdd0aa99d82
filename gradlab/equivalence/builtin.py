"""The built-in candidates by name, on the synthetic problem: what ``gradlab check-equivalence``
runs.

Each name is one trick, as its users write it; :func:`check_builtin` runs it against the
whole-batch reference (:class:`~gradlab.equivalence.FullBatch`) on
:func:`~gradlab.equivalence.synthetic_problem` and returns the
:class:`~gradlab.equivalence.EquivalenceResult`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import torch

from gradlab.equivalence.compare import EquivalenceResult, compare_gradients
from gradlab.equivalence.runner import DEFAULT_TIMEOUT_S
from gradlab.equivalence.sentence_transformers import CachedMNRL
from gradlab.equivalence.steps import (
    Accumulation,
    AllGather,
    CrossBatchMemory,
    FullBatch,
    GradCache,
    Step,
)
from gradlab.equivalence.synthetic import synthetic_problem
from gradlab.errors import GradlabError
from gradlab.memory import refuse_beyond_free
from gradlab.validation import (
    check_floating_dtype,
    check_positive_finite,
    check_positive_int,
    check_seed,
)

__all__ = ["CANDIDATES", "DEFAULTS", "LOSSES", "OPTION_USERS", "builtin_candidate",
           "builtin_loss", "check_builtin"]

CANDIDATES = {
    "gradient-cache": "gradient caching: embeddings without graph, then a chunked re-forward",
    "accumulation": "gradient accumulation over micro-batches (not equivalent: lost negatives)",
    "gather": "all-gather with gradient, the whole loss in every process",
    "gather-no-grad": "all-gather without gradient, own rows live, loss times the world size",
    "local-loss": "all-gather with gradient, each process its own queries (open_clip)",
    "local-loss-no-grad": "all-gather without gradient, local loss (not equivalent)",
    "memory": "cross-batch memory, the batch enqueued after the loss",
    "memory-before": "cross-batch memory, the batch enqueued before the loss (not equivalent)",
    "cached-mnrl": "sentence-transformers' CachedMultipleNegativesRankingLoss (its own loss: "
    "NT-Xent, temperature 1/20, rows as queries; every item its own class)",
}
"""Candidate name -> what it does."""

LOSSES = ("smooth-ap", "nt-xent", "max-violation", "siglip")
"""Loss names: gradlab's SmoothAPLoss, NTXentLoss, MaxViolationTripletLoss and SigLIPLoss,
defaults."""

DEFAULT_PROCESSES = {"gather": 2, "gather-no-grad": 2, "local-loss": 2, "local-loss-no-grad": 2}
"""Processes per candidate when not given (1 for the others)."""

OPTION_USERS = {
    "--loss": frozenset(CANDIDATES) - {"cached-mnrl"},
    "--chunk-size": frozenset({"gradient-cache", "cached-mnrl"}),
    "--micro-batches": frozenset({"accumulation"}),
}
"""The candidates that read each option; given for another one, the option is refused (it
would be ignored)."""

DEFAULTS = {"--loss": "nt-xent", "--chunk-size": 4, "--micro-batches": 4}
"""The value of each option of :data:`OPTION_USERS` when it is not given."""


PEAK_SCORE_MATRICES = 8
"""A check's peak memory in its own process, in float64 ``[B, C]`` score matrices (``C = B``,
plus the memory's ``2 B`` rows for the memory candidates), whatever ``--dtype``: the
comparison holds float64 copies of the two runs' score gradients beside their own. Measured
peaks (resident memory above the command's at ``B = 16``, gradient-cache): 9.8 at
``B = 4000`` in float64; 8.8 and 8.4 (17.6 and 16.7 float32 matrices) at ``B = 4000`` and
8000 in float32. They fall towards 8 as ``B`` grows (the fixed share shrinks): the estimate
stays below them, so only a check that cannot fit is refused."""

PROCESS_MATRICES = {"gather": 7, "gather-no-grad": 7}
"""The peak of each process of a candidate run in several processes, in the same matrices,
for the candidates whose every process computes the whole loss; :data:`OTHER_PROCESS_MATRICES`
for the others. Measured at ``B = 3200`` in float64, above a process's own at ``B = 16``:
7.1 per process for both gathers (7.2 with 3 processes), 5.1 for both local losses, 5.0 for
accumulation and 5.8 for gradient-cache in 2 processes (the parent's 9.6 to 9.8 beside)."""

OTHER_PROCESS_MATRICES = 5
"""See :data:`PROCESS_MATRICES`."""

PEAK_ENTRY_BYTES = 8
"""The bytes of one entry of these matrices (float64's), for either dtype."""


def _check_fits(candidate: str, rows: int, columns: int, processes: int) -> None:
    """Refuse, before any allocation, a check that cannot fit in the free memory: past it the
    allocator fails mid-run, or the system's out-of-memory killer ends the command."""
    matrices = PEAK_SCORE_MATRICES  # the reference here, each of the candidate's processes there
    if processes > 1:
        matrices += processes * PROCESS_MATRICES.get(candidate, OTHER_PROCESS_MATRICES)
    refuse_beyond_free(matrices * rows * columns * PEAK_ENTRY_BYTES, "cpu",
                       lambda need, free: (
        f"--batch-size {rows}: checking {candidate} needs about {need} GiB ({matrices} "
        f"[{rows}, {columns}] float64 matrices, in float32 too: the comparison is made in "
        f"float64), more than the {free} GiB available; try a smaller --batch-size"))  # fmt: skip


def _check_class_sizes(candidate: str, class_sizes: object, batch_size: int) -> None:
    """``--class-sizes``, named as the command line names it, before any work."""
    if class_sizes is None:
        return
    sizes = list(class_sizes) if isinstance(class_sizes, (list, tuple)) else None
    text = repr(class_sizes) if sizes is None else ",".join(map(str, sizes)) or "none"
    if not sizes or any(isinstance(size, bool) or not isinstance(size, int) or size < 1
                        for size in sizes):  # fmt: skip
        raise GradlabError(f"--class-sizes must be positive whole numbers separated by commas, "
                           f"e.g. 2,3,4,7; got {text}")  # fmt: skip
    if candidate == "cached-mnrl":  # its loss's only positive is the pair's own
        raise GradlabError(f"--class-sizes does not apply to cached-mnrl, whose every item is its "
                           f"own class; got --class-sizes {text}")  # fmt: skip
    if sum(sizes) != batch_size:
        raise GradlabError(f"--class-sizes must add up to --batch-size {batch_size}; got {text}, "
                           f"which adds up to {sum(sizes)}")  # fmt: skip


def builtin_loss(name: str) -> torch.nn.Module:
    """The gradlab loss of a name of :data:`LOSSES`, with its default options.

    Raises:
        GradlabError: an unknown name.

    Example:
        >>> builtin_loss("nt-xent")
        NTXentLoss(temperature=0.1, direction='both', reduction='mean')
        >>> builtin_loss("siglip")
        SigLIPLoss(scale=10.0, bias=-10.0, reduction='mean')
    """
    import gradlab
    from gradlab.siglip_loss import SigLIPLoss

    factories = {"smooth-ap": gradlab.SmoothAPLoss, "nt-xent": gradlab.NTXentLoss,
                 "max-violation": gradlab.MaxViolationTripletLoss,
                 "siglip": SigLIPLoss}  # fmt: skip
    if name not in factories:
        raise GradlabError(f"--loss must be one of {', '.join(LOSSES)}; got {name!r}")
    return factories[name]()


def builtin_candidate(name: str, loss: object, chunk_size: int = 4, micro_batches: int = 4) -> Step:
    """The step of a name of :data:`CANDIDATES`.

    Args:
        name: a key of :data:`CANDIDATES`.
        loss: the loss of the step.
        chunk_size: ``gradient-cache``'s chunk (``cached-mnrl``'s mini-batch).
        micro_batches: ``accumulation``'s ``k``.

    Raises:
        GradlabError: an unknown name or a bad option.

    Example:
        >>> builtin_candidate("local-loss", builtin_loss("nt-xent")).name
        'AllGather(gradient=True, local_loss=True, loss_scale=None)'
    """
    steps = {
        "gradient-cache": lambda: GradCache(loss, check_positive_int("chunk_size", chunk_size)),
        "accumulation": lambda: Accumulation(loss,
                                             check_positive_int("micro_batches", micro_batches)),
        "gather": lambda: AllGather(loss, gradient=True),
        "gather-no-grad": lambda: AllGather(loss, gradient=False),
        "local-loss": lambda: AllGather(loss, gradient=True, local_loss=True),
        "local-loss-no-grad": lambda: AllGather(loss, gradient=False, local_loss=True),
        "memory": lambda: CrossBatchMemory(loss, "after"),
        "memory-before": lambda: CrossBatchMemory(loss, "before"),
        "cached-mnrl": lambda: CachedMNRL(mini_batch_size=chunk_size),
    }  # fmt: skip
    if name not in steps:
        raise GradlabError(f"candidate must be one of {', '.join(CANDIDATES)}; got {name!r}")
    return steps[name]()


def check_builtin(
    candidate: str,
    loss: str | None = None,
    *,
    processes: int | None = None,
    batch_size: int = 16,
    chunk_size: int | None = None,
    micro_batches: int | None = None,
    dtype: torch.dtype = torch.float64,
    seed: int = 0,
    timeout: float = DEFAULT_TIMEOUT_S,
    class_sizes: Sequence[int] | None = None,
) -> EquivalenceResult:
    """Run a built-in candidate against the whole-batch reference on the synthetic problem.

    Args:
        candidate: a name of :data:`CANDIDATES`.
        loss: a name of :data:`LOSSES`; ``None``: ``"nt-xent"`` (``cached-mnrl`` computes its
            own loss and refuses one).
        processes: gloo processes of the candidate; ``None``: 2 for the gathers, else 1.
        batch_size: ``B`` of :func:`~gradlab.equivalence.synthetic_problem` (even).
        chunk_size: ``gradient-cache``'s chunk (``cached-mnrl``'s mini-batch); ``None``: 4.
        micro_batches: ``accumulation``'s ``k``; ``None``: 4.
        dtype: floating dtype of the comparison.
        seed: seeds the model and the batch.
        timeout: seconds before a distributed run is stopped.
        class_sizes: the items of each class, adding up to ``batch_size`` (which may then be
            odd); ``None``: classes of two. Classes of one size cannot tell apart losses that
            weigh a query by its number of positives otherwise. ``cached-mnrl`` makes every
            item its own class, so its ``batch_size`` may be odd without them.

    Returns:
        The :class:`~gradlab.equivalence.EquivalenceResult`.

    Raises:
        GradlabError: a bad name or option, or an option the candidate does not read
            (:data:`OPTION_USERS`: it would be ignored), or one that leaves the trick nothing
            to do (one process to gather from, one micro-batch to accumulate: a check that
            could not fail), checked before any work; a batch
            whose check would need more memory than this machine has free
            (:data:`PEAK_SCORE_MATRICES`).

    Example:
        >>> check_builtin("gradient-cache", "smooth-ap", batch_size=8).equivalent
        True
    """
    if candidate not in CANDIDATES:
        raise GradlabError(f"candidate must be one of {', '.join(CANDIDATES)}; got {candidate!r}")
    given = {"--loss": loss, "--chunk-size": chunk_size, "--micro-batches": micro_batches}
    for option, value in given.items():
        if value is None or candidate in OPTION_USERS[option]:
            continue
        if option == "--loss":  # only cached-mnrl has none
            raise GradlabError(f"--loss does not apply to {candidate}, which computes its own "
                               f"loss (NT-Xent, temperature 1/20, rows as queries); got --loss "
                               f"{value}")  # fmt: skip
        readers = " and ".join(name for name in CANDIDATES if name in OPTION_USERS[option])
        raise GradlabError(f"{option} does not apply to {candidate} (read only by {readers}); "
                           f"got {option} {value}")  # fmt: skip
    loss, chunk_size, micro_batches = (
        DEFAULTS[option] if value is None else value for option, value in given.items()
    )
    loss_fn = builtin_loss(loss)
    if processes is None:
        processes = DEFAULT_PROCESSES.get(candidate, 1)
    for option, value in (
        ("--processes", processes),
        ("--chunk-size", chunk_size),
        ("--micro-batches", micro_batches),
        ("--batch-size", batch_size),
    ):
        check_positive_int(option, value)  # fmt: skip
    _check_class_sizes(candidate, class_sizes, batch_size)
    if candidate == "cached-mnrl" and batch_size % 2:  # every item its own class below
        class_sizes = [1] * batch_size  # an odd batch has no classes of two to draw from
    elif batch_size % 2 and class_sizes is None:
        raise GradlabError(f"--batch-size must be even (classes of two); got {batch_size}")
    check_seed("--seed", seed)  # past 2**32 - 1: torch's overflow, mid-run
    check_floating_dtype("dtype", dtype)
    check_positive_finite("timeout", timeout)
    step = builtin_candidate(candidate, loss_fn, chunk_size, micro_batches)
    if candidate.startswith("memory") and processes != 1:
        raise GradlabError(f"--processes must be 1 for {candidate} (the memory is one "
                           f"process's); got {processes}")  # fmt: skip
    if candidate == "cached-mnrl" and processes != 1:  # the step's own check names world_size
        raise GradlabError(f"--processes must be 1 for {candidate} (sentence-transformers' "
                           f"loss runs in one process here); got {processes}")  # fmt: skip
    if batch_size % processes:
        raise GradlabError(f"--processes must divide --batch-size {batch_size}; got {processes}")
    if candidate == "accumulation" and (batch_size // processes) % micro_batches:
        raise GradlabError(f"--micro-batches must divide the batch size per process "
                           f"({batch_size // processes}); got {micro_batches}")  # fmt: skip
    if candidate in DEFAULT_PROCESSES and processes == 1:
        raise GradlabError(f"--processes 1 leaves {candidate} nothing to gather: the check would "
                           "compare the whole batch with itself and could not fail; pass at "
                           "least 2")  # fmt: skip
    if candidate == "accumulation" and micro_batches == 1 and processes == 1:
        raise GradlabError("--micro-batches 1 leaves accumulation one micro-batch, the whole "
                           "batch: the check would compare it with itself and could not fail; "
                           "pass at least 2")  # fmt: skip
    memory = 2 * batch_size if candidate.startswith("memory") else 0
    _check_fits(candidate, batch_size, batch_size + memory, processes)
    model, batch = synthetic_problem(batch_size, memory_size=memory, seed=seed, dtype=dtype,
                                     class_sizes=class_sizes)  # fmt: skip
    reference = FullBatch(loss_fn)
    if isinstance(step, CachedMNRL):  # its own loss, whose only positive is the pair's own
        reference = step.reference()
        batch = replace(batch, labels=torch.arange(batch_size))
    result = compare_gradients(reference, step, model, batch, world_size=processes,
                               dtype=dtype, timeout=timeout)  # fmt: skip
    if isinstance(step, CachedMNRL):  # --class-sizes does not apply: suggest none
        result = replace(result, fixed_classes="cached-mnrl's loss takes the pair's own item "
                                               "as the only positive")  # fmt: skip
    return result
