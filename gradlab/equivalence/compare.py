"""Compare a trick's gradients with the whole-batch reference: where they differ, by how much.

:func:`compare_gradients` runs a reference step (the loss of the whole batch in one process) and
a candidate step (the trick, in one process or ``world_size`` gloo processes) on the same model
and batch, in float64 by default, and compares ``dL/dtheta``, ``dL/dqueries``,
``dL/dcandidates`` and ``dL/dscores``. Each quantity agrees when its largest absolute
difference is at most ``atol + rtol * max|reference|``; the verdict is that every recorded
quantity agrees. Where one differs, the result says which parameters, rows (items), columns
(candidates, memory slots apart) and processes, the least-squares factor between the two
(``candidate = scale x reference``: a missing world-size factor shows as ``1/N``), and, for the
scores, how many the candidate never computed and how many negatives per query still receive
gradient.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import torch
from torch import nn

from gradlab.equivalence.objectives import score_objective
from gradlab.equivalence.problem import PairedBatch, positive_mask
from gradlab.equivalence.runner import (
    DEFAULT_TIMEOUT_S,
    Gradients,
    _check_problem,
    _check_step,
    _cuda_devices,
    run_distributed,
    run_step,
)
from gradlab.equivalence.steps import rank_of_rows
from gradlab.errors import GradlabError, UnknownKeyError
from gradlab.validation import (
    check_floating_dtype,
    check_non_negative_finite,
    check_positive_finite,
)

__all__ = [
    "QUANTITIES",
    "EquivalenceResult",
    "QuantityComparison",
    "compare",
    "compare_gradients",
    "default_tolerance",
]

QUANTITIES = ("dL/dtheta", "dL/dqueries", "dL/dcandidates", "dL/dscores", "scores")
"""The compared quantities, in table order: four gradients and the score values themselves
(where both steps computed them: a score computed from the wrong pair shows there)."""

UNMEASURED = ("max_abs", "reference_max", "relative", "threshold", "scale")
"""The measures of a :class:`QuantityComparison` that a quantity not recorded by both steps has
none of: ``null`` in :meth:`EquivalenceResult.to_dict` (its ``agrees`` and ``scaled_agrees``
are None already)."""


NO_GRADIENT = "the candidate left no gradient (no backward pass reached it)"
"""What the ``where`` column says of a quantity the candidate never back-propagated into."""


def default_tolerance(dtype: torch.dtype) -> tuple[float, float]:
    """``(atol, rtol)`` for a dtype: ``(1e-10, 1e-10)`` in float64, ``(1e-5, 1e-4)`` in float32.

    Example:
        >>> default_tolerance(torch.float64)
        (1e-10, 1e-10)
    """
    if dtype == torch.float64:
        return 1e-10, 1e-10
    if dtype == torch.float32:
        return 1e-5, 1e-4
    return 1e-2, 1e-2


@dataclass
class QuantityComparison:
    """One gradient of the candidate against the reference's.

    Attributes:
        name: one of :data:`QUANTITIES`.
        recorded: both steps recorded it (else the other fields are empty: ``agrees`` and
            ``scaled_agrees`` None, no verdict).
        max_abs: ``max |candidate - reference|``.
        reference_max: ``max |reference|``.
        relative: ``max_abs / reference_max`` (0 when both are 0, inf when only the
            reference is).
        threshold: ``atol + rtol * reference_max``.
        agrees: ``max_abs <= threshold`` (None when not recorded).
        scale: the least-squares factor ``<candidate, reference> / <reference, reference>``
            (NaN when the reference is zero).
        scaled_agrees: ``candidate`` agrees with ``scale x reference``: the two differ by a
            factor only (None when not recorded).
        parameters: ``dL/dtheta``: the parameters that differ.
        rows: the rows (items, queries) that differ beyond the threshold.
        columns: ``dL/dscores`` and ``scores``: the batch's candidate columns that differ.
        memory_slots: ``dL/dscores`` and ``scores``: the memory slots (the columns after the
            batch's) that differ.
        ranks: the processes whose rows differ (``world_size > 1``).
        worst: where the largest difference is, with both values: ``index`` in the compared
            tensor's shape (for ``dL/dtheta``, ``parameter`` names the parameter and ``index``
            is in its shape: ``[]`` for a scalar).
        unscored: ``dL/dscores``: scores the reference computed and the candidate never did.
        negatives_with_gradient: ``dL/dscores``: mean negatives per query with a non-zero
            gradient, ``{"reference": ..., "candidate": ...}``.
        no_gradient: the candidate left no gradient at all here where the reference did (no
            backward pass reached the parameters, or the tensors handed to the probe): its
            zeros are a step that never back-propagated, not a gradient ``0 x`` the reference.
    """

    name: str
    recorded: bool = True
    max_abs: float = 0.0
    reference_max: float = 0.0
    relative: float = 0.0
    threshold: float = 0.0
    agrees: bool | None = True
    scale: float = math.nan
    scaled_agrees: bool | None = True
    parameters: list[str] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)
    columns: list[int] = field(default_factory=list)
    memory_slots: list[int] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    worst: dict = field(default_factory=dict)
    unscored: int = 0
    negatives_with_gradient: dict = field(default_factory=dict)
    no_gradient: bool = False

    def __post_init__(self) -> None:
        if not self.recorded:  # nothing compared: no verdict (null in to_dict's JSON)
            self.agrees = self.scaled_agrees = None

    def where(self) -> str:
        """Where the candidate differs, in words (empty when it agrees)."""
        if not self.recorded:
            return "not recorded by both steps"
        parts = []
        if math.isnan(self.max_abs):  # NaN compares as neither agreeing nor differing
            parts.append("NaN in the candidate")
        if self.no_gradient and not self.agrees:
            parts.append(NO_GRADIENT)
        elif not self.agrees and self.scaled_agrees and math.isfinite(self.scale):
            parts.append(f"= {self.scale:.4g} x reference")
        if self.parameters:
            parts.append("parameters " + ", ".join(self.parameters))
        if self.rows:
            parts.append(f"rows {_ranges(self.rows)}")
        if self.columns:
            parts.append(f"columns {_ranges(self.columns)}")
        if self.memory_slots:
            parts.append(f"memory slots {_ranges(self.memory_slots)}")
        if self.ranks:
            parts.append(("rank " if len(self.ranks) == 1 else "ranks ")
                         + ", ".join(map(str, self.ranks)))  # fmt: skip
        if self.unscored:
            parts.append(f"{self.unscored} scores never computed")
        if self.negatives_with_gradient and not self.agrees:
            counts = self.negatives_with_gradient
            parts.append(f"negatives with gradient per query {counts['candidate']:.1f} "
                         f"(reference {counts['reference']:.1f})")  # fmt: skip
        return "; ".join(parts)


def _ranges(values: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2, 5"``."""
    spans = []
    for value in values:
        if spans and value == spans[-1][1] + 1:
            spans[-1][1] = value
        else:
            spans.append([value, value])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def _name(step: object) -> str:
    return str(getattr(step, "name", None) or getattr(step, "__name__", type(step).__name__))


def _differing(diff: torch.Tensor, threshold: float, dim: int) -> list[int]:
    if diff.numel() == 0:
        return []
    other = tuple(d for d in range(diff.dim()) if d != dim)
    largest = diff.amax(dim=other) if other else diff
    return torch.nonzero(~(largest <= threshold)).flatten().tolist()  # NaN differs too


def _measure(name: str, reference: torch.Tensor, candidate: torch.Tensor, atol: float,
             rtol: float) -> QuantityComparison:  # fmt: skip
    reference = reference.detach().to(torch.float64)
    candidate = candidate.detach().to(torch.float64)
    diff = (candidate - reference).abs()
    max_abs = float(diff.max()) if diff.numel() else 0.0
    reference_max = float(reference.abs().max()) if reference.numel() else 0.0
    threshold = atol + rtol * reference_max
    if reference_max > 0:
        relative = max_abs / reference_max
    else:
        relative = 0.0 if max_abs == 0 else math.inf
    norm = float((reference * reference).sum())
    scale = float((candidate * reference).sum()) / norm if norm > 0 else math.nan
    scaled = math.isfinite(scale) and float((candidate - scale * reference).abs().max()) <= (
        atol + rtol * abs(scale) * reference_max
    )
    result = QuantityComparison(
        name=name, max_abs=max_abs, reference_max=reference_max, relative=relative,
        threshold=threshold, agrees=max_abs <= threshold, scale=scale,
        scaled_agrees=max_abs <= threshold or scaled,
    )  # fmt: skip
    if diff.numel():
        flat = int(diff.argmax())
        index = list(torch.unravel_index(torch.tensor(flat), diff.shape))
        index = [int(i) for i in index]
        result.worst = {"index": index, "reference": float(reference.flatten()[flat]),
                        "candidate": float(candidate.flatten()[flat])}  # fmt: skip
    return result


def _compare_parameters(reference: Gradients, candidate: Gradients, atol: float,
                        rtol: float) -> QuantityComparison:  # fmt: skip
    names = list(reference.parameters)
    if set(names) != set(candidate.parameters):
        raise GradlabError(
            "the reference and the candidate must train the same parameters; got "
            f"{sorted(names)} and {sorted(candidate.parameters)}"
        )
    empty = [torch.zeros(0, dtype=torch.float64)]  # no trainable parameter: nothing differs
    ref = torch.cat(empty + [reference.parameters[n].detach().flatten().to(torch.float64)
                             for n in names])  # fmt: skip
    cand = torch.cat(empty + [candidate.parameters[n].detach().flatten().to(torch.float64)
                              for n in names])  # fmt: skip
    result = _measure("dL/dtheta", ref, cand, atol, rtol)
    offsets = [0]
    for n in names:
        offsets.append(offsets[-1] + reference.parameters[n].numel())
    diff = (cand - ref).abs()
    result.parameters = [n for n, a, b in zip(names, offsets, offsets[1:], strict=False)
                         if b > a and not float(diff[a:b].max()) <= result.threshold]  # fmt: skip
    if result.worst:
        flat = result.worst["index"][0]
        position = next(i for i in range(len(names)) if offsets[i] <= flat < offsets[i + 1])
        name = names[position]
        result.worst["parameter"] = name
        local = torch.tensor(flat - offsets[position])  # in the parameter's own shape
        shape = reference.parameters[name].shape
        result.worst["index"] = [int(i) for i in torch.unravel_index(local, shape)]
    return result


def _located(
    name: str,
    reference: torch.Tensor,
    candidate: torch.Tensor,
    atol: float,
    rtol: float,
    batch: PairedBatch,
    owner: torch.Tensor | None,
) -> QuantityComparison:
    """:func:`_measure`, and the rows (and columns, memory slots, processes) that differ."""
    result = _measure(name, reference, candidate, atol, rtol)
    diff = (candidate.to(torch.float64) - reference.to(torch.float64)).abs()
    result.rows = _differing(diff, result.threshold, 0)
    if owner is not None:
        result.ranks = sorted({int(owner[r]) for r in result.rows})
    if diff.shape[1] == batch.columns and name in ("dL/dscores", "scores"):
        columns = _differing(diff, result.threshold, 1)
        result.columns = [c for c in columns if c < batch.size]
        result.memory_slots = [c - batch.size for c in columns if c >= batch.size]
    return result


def _negatives_with_gradient(grad: torch.Tensor, negatives: torch.Tensor, threshold: float):
    counts = ((grad.abs() > threshold) & negatives).sum(dim=1).to(torch.float64)
    return float(counts.mean()) if counts.numel() else 0.0


def _refuse_zero_reference(reference: Gradients) -> None:
    """A reference whose every recorded gradient is exactly zero leaves nothing to compare; one
    with NaN or infinite values leaves no value a candidate could agree with."""
    recorded = {"dL/dtheta": list(reference.parameters.values())}
    for name, attribute in zip(QUANTITIES[1:4], ("queries", "candidates", "scores"),
                               strict=True):  # fmt: skip
        if getattr(reference, attribute) is not None:
            recorded[name] = [getattr(reference, attribute)]
    non_finite = [name for name, tensors in recorded.items()
                  if not all(bool(t.detach().isfinite().all()) for t in tensors)]  # fmt: skip
    if non_finite:
        raise GradlabError(
            "the reference's gradient holds NaN or infinite values (" + ", ".join(non_finite)
            + "), so no candidate could agree with it; the reference step's loss or its backward "
            "is not finite on this batch"
        )
    if any(bool(t.detach().ne(0).any()) for tensors in recorded.values() for t in tensors):
        return
    raise GradlabError(
        "the reference's gradient is exactly zero everywhere (" + ", ".join(recorded) + "), so "
        "the check would compare nothing and any candidate that leaves zeros would agree; "
        "likely the loss is constant on this batch (e.g. every label equal: no query has a "
        "negative to rank), or the reference step never calls backward"
    )


def compare(
    reference: Gradients,
    candidate: Gradients,
    batch: PairedBatch,
    *,
    atol: float | None = None,
    rtol: float | None = None,
    reference_name: str = "reference",
    candidate_name: str = "candidate",
    loss_name: str = "",
) -> EquivalenceResult:
    """Compare two steps' :class:`~gradlab.equivalence.runner.Gradients` on ``batch``.

    :func:`compare_gradients` runs the steps and calls this; call it yourself on the results
    of :func:`~gradlab.equivalence.run_distributed` (several steps per start of the processes).

    Args:
        reference: the reference's gradients.
        candidate: the candidate's gradients.
        batch: the whole batch they ran on (for the positives and the memory).
        atol: absolute tolerance; ``None``: :func:`default_tolerance` of the gradients' dtype.
        rtol: relative tolerance, times ``max|reference|``; ``None``: as ``atol``.
        reference_name: the reference's name in the table.
        candidate_name: the candidate's name in the table.
        loss_name: the loss's name in the table.

    Returns:
        The :class:`EquivalenceResult`.

    Raises:
        GradlabError: a bad tolerance; or every gradient the reference recorded is exactly
            zero (its loss is constant on this batch, or it never calls backward): the check
            would compare nothing, so no verdict is given; or a gradient the reference recorded
            holds NaN or infinite values.

    Example:
        >>> import gradlab
        >>> from gradlab.equivalence import FullBatch, run_step, synthetic_problem
        >>> model, batch = synthetic_problem(batch_size=4)
        >>> grads = run_step(FullBatch(gradlab.SmoothAPLoss()), model, batch)
        >>> compare(grads, grads, batch).equivalent
        True
    """
    for name, value in (("reference", reference), ("candidate", candidate)):
        if not isinstance(value, Gradients):
            raise GradlabError(f"{name} must be the Gradients that run_step or run_distributed "
                               f"returns; got {type(value).__name__}")  # fmt: skip
    if not isinstance(batch, PairedBatch):
        raise GradlabError(f"batch must be a gradlab.equivalence.PairedBatch; got "
                           f"{type(batch).__name__}")  # fmt: skip
    dtype = next(iter(reference.parameters.values())).dtype if reference.parameters else (
        torch.float64)  # fmt: skip
    default_atol, default_rtol = default_tolerance(dtype)
    atol = default_atol if atol is None else check_non_negative_finite("atol", atol)
    rtol = default_rtol if rtol is None else check_non_negative_finite("rtol", rtol)
    _refuse_zero_reference(reference)
    world = candidate.world_size
    owner = rank_of_rows(batch.size, world)
    quantities = [_compare_parameters(reference, candidate, atol, rtol)]
    for name, attribute in zip(QUANTITIES[1:4], ("queries", "candidates", "scores"),
                               strict=True):  # fmt: skip
        ref, cand = getattr(reference, attribute), getattr(candidate, attribute)
        if ref is None or cand is None:
            quantities.append(QuantityComparison(name=name, recorded=False))
            continue
        if ref.shape != cand.shape:
            raise GradlabError(f"{name}: the reference's shape {tuple(ref.shape)} and the "
                               f"candidate's {tuple(cand.shape)} differ")  # fmt: skip
        result = _located(name, ref, cand, atol, rtol, batch, owner if world > 1 else None)
        if attribute == "scores":
            result.unscored = int((reference.scored & ~candidate.scored).sum())
            labels = batch.labels if batch.memory is None else torch.cat(
                (batch.labels, batch.memory_labels))  # fmt: skip
            negatives = ~positive_mask(batch.labels.cpu(), labels.cpu())  # the probe's device
            result.negatives_with_gradient = {
                "reference": _negatives_with_gradient(ref, negatives, result.threshold),
                "candidate": _negatives_with_gradient(cand, negatives, result.threshold),
            }
        quantities.append(result)
    for quantity in quantities:
        quantity.no_gradient = quantity.recorded and (
            quantity.name in candidate.without_gradient
            and quantity.name not in reference.without_gradient
        )
    if reference.score_values is None or candidate.score_values is None:
        quantities.append(QuantityComparison(name="scores", recorded=False))
    else:
        both = reference.scored & candidate.scored
        ref = torch.where(both, reference.score_values, 0.0)
        cand = torch.where(both, candidate.score_values, 0.0)
        quantities.append(_located("scores", ref, cand, atol, rtol, batch,
                                   owner if world > 1 else None))  # fmt: skip
    return EquivalenceResult(
        reference=reference_name, candidate=candidate_name, loss=loss_name,
        dtype=str(dtype).removeprefix("torch."), world_size=world, atol=atol, rtol=rtol,
        reference_loss=reference.loss, candidate_loss=candidate.loss, quantities=quantities,
        class_size=_shared_class_size(batch.labels), batch_size=batch.size,
    )  # fmt: skip


def _shared_class_size(labels: torch.Tensor) -> int | None:
    """The number of items every class of the batch holds, when they all hold as many."""
    sizes = torch.unique(labels.cpu(), return_counts=True)[1].tolist()
    return sizes[0] if sizes and len(set(sizes)) == 1 else None


_EXAMPLE_BATCH = 16
"""The batch size of the note's example of classes of several sizes where the compared batch is
too small for one (a batch of 2: two classes of one item each are of one size)."""


def _several_class_sizes(batch_size: int | None) -> tuple[int, list[int]]:
    """``(batch size, class sizes)``: distinct class sizes that add up to ``batch_size``, for the
    note of an EQUIVALENT verdict on classes of one size (2, 3, 4, ... with the remainder on the
    last; two classes where that gives one), or ``_EXAMPLE_BATCH``'s where ``batch_size`` has
    none (None, or below 3).

    Example:
        >>> _several_class_sizes(16), _several_class_sizes(8), _several_class_sizes(2)
        ((16, [2, 3, 4, 7]), (8, [2, 6]), (16, [2, 3, 4, 7]))
    """
    if batch_size is None or batch_size < 3:
        return _several_class_sizes(_EXAMPLE_BATCH)
    sizes: list[int] = []
    rest, size = batch_size, 2
    while rest >= size:
        sizes.append(size)
        rest, size = rest - size, size + 1
    if len(sizes) < 2:  # 3 and 4: a class of one item beside the rest
        return batch_size, [1, batch_size - 1]
    sizes[-1] += rest  # below the next size: the last stays the largest, every size distinct
    return batch_size, sizes


LOSS_PRECISION = 1e-4
"""Relative difference of two steps' losses below which a NOT EQUIVALENT verdict says they may
compute one objective in two precisions (float32 scores differ from float64 by about 1e-8)."""


def _loss_text(loss: float | None) -> str:
    """A step's loss as the table shows it: ``none returned`` for a step that returned none."""
    return "none returned" if loss is None else f"{loss:.6g}"


@dataclass
class EquivalenceResult:
    """The comparison of a candidate step with the reference: a verdict and where they differ.

    ``str(result)`` is a readable table; :meth:`to_dict` is JSON-ready.

    Attributes:
        reference: the reference step's name.
        candidate: the candidate step's name.
        loss: the loss's name.
        dtype: the dtype the steps ran in.
        world_size: the candidate's number of processes.
        atol: absolute tolerance used.
        rtol: relative tolerance used (times ``max|reference|``).
        reference_loss: the reference's loss value; ``None`` when its step returned none.
        candidate_loss: the candidate's loss value (averaged over processes, or summed for a
            step whose processes' losses add up, ``process_losses_add_up``); ``None`` when
            its step returned none.
        quantities: one :class:`QuantityComparison` per entry of :data:`QUANTITIES`.
        class_size: the number of items every class of the compared batch holds, when they
            all hold as many, one included (None: classes of several sizes). Losses that weigh
            a query by its number of positives otherwise (a mean over positive pairs, or over
            queries) agree on such a batch: the verdict says so.
        batch_size: the number of items of the compared batch (the note of an EQUIVALENT
            verdict on classes of one size suggests class sizes that add up to it); None: not
            known.
        fixed_classes: why the compared step's classes cannot be chosen (``cached-mnrl``'s
            loss takes the pair's own item as the only positive): the verdict then suggests no
            class sizes; None: they can.
        cause: what makes the candidate, as configured, differ from the whole-batch gradient
            when it does (its ``known_difference``: a built-in step's local loss, a memory
            written before the loss); printed beside a NOT EQUIVALENT verdict. None: nothing
            known.
        unsplit: why the candidate, as configured, ran its part of the batch whole (a
            gradient cache of one chunk, one micro-batch), so that the verdict says nothing of
            the trick; printed as a note under either verdict. None: it split it.
    """

    reference: str
    candidate: str
    loss: str
    dtype: str
    world_size: int
    atol: float
    rtol: float
    reference_loss: float | None
    candidate_loss: float | None
    quantities: list[QuantityComparison]
    class_size: int | None = None
    cause: str | None = None
    batch_size: int | None = None
    fixed_classes: str | None = None
    unsplit: str | None = None

    @property
    def equivalent(self) -> bool:
        """Every quantity recorded by both steps agrees."""
        return all(q.agrees for q in self.quantities if q.recorded)

    @property
    def differing(self) -> list[str]:
        """The names of the quantities that differ."""
        return [q.name for q in self.quantities if q.recorded and not q.agrees]

    def _losses_differ(self) -> bool:
        """Both losses returned and finite, and apart by more than the tolerance."""
        losses = (self.reference_loss, self.candidate_loss)
        if any(loss is None or not math.isfinite(loss) for loss in losses):
            return False
        return abs(losses[0] - losses[1]) > self.atol + self.rtol * abs(losses[0])

    def __getitem__(self, name: str) -> QuantityComparison:
        """The comparison of one quantity: ``result["dL/dscores"]``."""
        for quantity in self.quantities:
            if quantity.name == name:
                return quantity
        raise UnknownKeyError(
            f"{name!r} is not a quantity; the quantities are {list(QUANTITIES)}"
        )

    def to_dict(self) -> dict:
        """The result as plain JSON-ready values (NaN and inf as strings); a quantity not
        recorded by both steps has ``null`` measures (:data:`UNMEASURED`), not zeros that would
        read as agreement."""

        def plain(value):
            if isinstance(value, float) and not math.isfinite(value):
                return str(value)
            if isinstance(value, dict):
                return {k: plain(v) for k, v in value.items()}
            if isinstance(value, list):
                return [plain(v) for v in value]
            return value

        return plain({
            "reference": self.reference, "candidate": self.candidate, "loss": self.loss,
            "dtype": self.dtype, "world_size": self.world_size,
            "tolerance": {"atol": self.atol, "rtol": self.rtol},
            "reference_loss": self.reference_loss, "candidate_loss": self.candidate_loss,
            "equivalent": self.equivalent, "differing": self.differing,
            "class_size": self.class_size, "cause": self.cause, "unsplit": self.unsplit,
            "quantities": {q.name: asdict(q) | ({} if q.recorded else dict.fromkeys(UNMEASURED))
                           for q in self.quantities},
        })  # fmt: skip

    def __str__(self) -> str:
        processes = f"{self.world_size} process" + ("es" if self.world_size != 1 else "")
        lines = [
            f"candidate {self.candidate} against reference {self.reference}"
            + (f", {self.loss}" if self.loss else "")
            + f"; {self.dtype}, {processes}",
            f"loss: reference {_loss_text(self.reference_loss)}, "
            f"candidate {_loss_text(self.candidate_loss)}",
            f"tolerance per quantity: max|diff| <= {self.atol:g} + {self.rtol:g} x max|reference|",
            "",
            f"{'quantity':<16}{'max|diff|':>11}{'relative':>11}{'scale':>9}  {'verdict':<9}where",
        ]
        for q in self.quantities:
            if not q.recorded:
                lines.append(f"{q.name:<16}{'-':>11}{'-':>11}{'-':>9}  {'skipped':<9}"
                             f"{q.where()}")  # fmt: skip
                continue
            verdict = "agrees" if q.agrees else "DIFFERS"
            scale = f"{q.scale:.4g}" if math.isfinite(q.scale) else "-"
            # " " + >8, not >9: a scale of 9 characters (-0.004449) kept a space before it
            lines.append(f"{q.name:<16}{q.max_abs:>11.2e}{q.relative:>11.2e} {scale:>8}  "
                         f"{verdict:<9}{q.where()}".rstrip())  # fmt: skip
        lines.append("")
        if self.equivalent:
            lines.append("verdict: EQUIVALENT")
            # one item each too: one positive per query (unless no other classes can be had)
            if self.class_size is not None and self.fixed_classes is None:
                total, sizes = _several_class_sizes(self.batch_size)
                batch = "" if total == self.batch_size else f"--batch-size {total} "
                lines.append(
                    f"note: every class of this batch holds {self.class_size} "
                    f"item{'s' if self.class_size != 1 else ''}, so losses "
                    "that weigh a query by its number of positives otherwise (a mean over "
                    "positive pairs, or over queries) agree on it; for a loss that takes "
                    "several positives per query, compare on classes of several sizes too, "
                    "adding up to the batch size: on the command line gradlab "
                    f"check-equivalence ... {batch}--class-sizes {','.join(map(str, sizes))}, "
                    f"in Python synthetic_problem({total}, class_sizes={sizes}), or on a "
                    "batch of your own, labels in classes of several sizes"
                )
        else:
            untouched = [q.name for q in self.quantities
                         if q.recorded and not q.agrees and q.no_gradient]  # fmt: skip
            why = (f"; the candidate left no gradient in {', '.join(untouched)}: does it call "
                   "backward?") if untouched else ""  # fmt: skip
            unscored = sum(q.unscored for q in self.quantities if not q.agrees)
            if unscored:  # the usual cause of a trick that does not gather: say it
                why += (f"; the candidate never computed {unscored} of the reference's scores: "
                        "its queries were ranked against part of the candidates only (scores "
                        "within each process or chunk, none gathered)")  # fmt: skip
            if self._losses_differ():
                apart = (abs(self.candidate_loss - self.reference_loss)
                         / max(abs(self.reference_loss), 1e-300))  # fmt: skip
                kind = ("the candidate computes another objective" if apart > LOSS_PRECISION
                        else "another objective, or the same one in another precision (float32 "
                        "scores, say)")  # fmt: skip
                why += (f"; the losses differ too (reference {_loss_text(self.reference_loss)}, "
                        f"candidate {_loss_text(self.candidate_loss)}, relative difference "
                        f"{apart:.1e}): {kind}")  # fmt: skip
            if self.cause:
                why += f"; {self.cause}"
            lines.append(f"verdict: NOT EQUIVALENT ({', '.join(self.differing)} differ{why})")
        if self.unsplit:
            lines.append(f"note: {self.unsplit}")
        not_finite = self._loss_not_finite()
        if not_finite:
            lines.append(f"note: {not_finite}")
        return "\n".join(lines)

    def _loss_not_finite(self) -> str | None:
        """What to say of a returned loss that is NaN or infinite: the verdict rests on the
        gradients, but the loss a step returns is what a training loop logs."""
        bad = [(name, loss) for name, loss in (("reference", self.reference_loss),
                                                ("candidate", self.candidate_loss))
               if loss is not None and not math.isfinite(loss)]  # fmt: skip
        if not bad:
            return None
        said = " and ".join(f"the {name}'s loss is {loss}" for name, loss in bad)
        return (f"{said}: the verdict compares the gradients only, but a step that returns "
                f"{'such a loss' if len(bad) == 1 else 'such losses'} logs no number; check "
                f"how {'it computes' if len(bad) == 1 else 'they compute'} the value it returns")


_DROPOUT = (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout,
            nn.FeatureAlphaDropout)  # fmt: skip


def _forward_draws(model: nn.Module, batch: PairedBatch) -> bool:
    """Whether the model's forward, in its own modes, draws random numbers (a functional
    ``F.dropout``, added noise, stochastic depth): one forward of two rows of each side on a
    copy, under ``no_grad``, inside a fork of the random state, which is compared before and
    after it. The caller's state and model (BatchNorm statistics) are left unchanged. A
    forward that fails on two rows in training mode tells nothing here (False): the steps
    themselves report what they cannot run."""
    probe = copy.deepcopy(model)
    devices = _cuda_devices(model, batch)
    with torch.no_grad(), torch.random.fork_rng(devices=devices):
        before = [torch.get_rng_state(), *(torch.cuda.get_rng_state(d) for d in devices)]
        try:
            for inputs in (batch.query_inputs, batch.candidate_inputs):
                probe(inputs[:2])
        except (RuntimeError, ValueError, IndexError):
            return False
        after = [torch.get_rng_state(), *(torch.cuda.get_rng_state(d) for d in devices)]
    return any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))


def _refuse_dropout(model: nn.Module, batch: PairedBatch, world_size: int) -> None:
    """Several processes cannot draw the whole batch's dropout masks: refuse the check."""
    active = _dropouts_in_training(model)
    if not active and _forward_draws(model, batch):
        raise GradlabError(
            f"world_size={world_size} needs a model whose forward draws no random numbers; "
            "the model's forward drew some (in training mode, on two rows of each side: a "
            "functional dropout such as F.dropout, added noise, stochastic depth): each process "
            "would draw for its own shard, not what the whole-batch reference draws for its "
            "rows, so the gradients would differ whatever the trick; make the forward "
            "deterministic for the check (model.eval(), p=0), or check with world_size=1"
        )
    if active:
        raise GradlabError(
            f"world_size={world_size} needs a model without active dropout; got dropout in "
            f"training mode in {'module' if len(active) == 1 else 'modules'} "
            f"{', '.join(repr(name) for name in active)}: each "
            "process draws the masks of its own shard, not those the whole-batch reference "
            "draws for its rows, so the gradients would differ whatever the trick; set the "
            "dropout's p to 0 (or call model.eval()) for the check, or check with world_size=1"
        )


_BATCH_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm,
                nn.LazyBatchNorm1d, nn.LazyBatchNorm2d, nn.LazyBatchNorm3d)  # fmt: skip


def _batch_norms_in_training(model: nn.Module) -> list[str]:
    """The names of ``model``'s BatchNorm modules in training mode: they normalise with the
    statistics of the rows of each forward, so a trick that runs its forward in chunks or
    processes normalises each with its own."""
    return [name or type(module).__name__ for name, module in model.named_modules()
            if isinstance(module, _BATCH_NORMS) and module.training]  # fmt: skip


def _with_frozen_batch_norms(model: nn.Module) -> nn.Module:
    """A copy of ``model`` whose BatchNorm modules normalise with their running statistics
    (eval mode), the rest in its own modes."""
    frozen = copy.deepcopy(model)
    for module in frozen.modules():
        if isinstance(module, _BATCH_NORMS):
            module.eval()
    return frozen


def _dropouts_in_training(model: nn.Module) -> list[str]:
    """The names of ``model``'s dropout modules in training mode that drop something
    (``p > 0``): each forward draws its masks from the random state."""
    return [name or type(module).__name__ for name, module in model.named_modules()
            if isinstance(module, _DROPOUT) and module.training and module.p > 0]  # fmt: skip


def _without_dropout(model: nn.Module) -> nn.Module:
    """A copy of ``model`` whose dropout modules are in eval mode (they drop nothing), the
    rest in its own modes."""
    quiet = copy.deepcopy(model)
    for module in quiet.modules():
        if isinstance(module, _DROPOUT):
            module.eval()
    return quiet


def _dropout_cause(names: list[str], quiet: EquivalenceResult | None, refused: str = "") -> str:
    """What dropout in training mode does to a candidate that differs, told by the same
    comparison with those modules in eval mode (``quiet``; None: ``refused`` says why it could
    not run)."""
    which = (f"{'module' if len(names) == 1 else 'modules'} "
             f"{', '.join(repr(name) for name in names)}")  # fmt: skip
    said = (f"the model has dropout in training mode ({which}): both steps start from the same "
            "random state, so a candidate that runs a forward again (a gradient cache's "
            "second pass) draws other masks unless it replays the random state of the first "
            "(torch.get_rng_state before it, torch.set_rng_state before the second)")
    if quiet is None:
        return f"{said}; the steps could not run again without dropout: {refused}"
    if quiet.equivalent:
        return (f"{said}; with dropout in eval mode the two steps are EQUIVALENT: the masks are "
                "the whole difference")
    return (f"{said}; with dropout in eval mode they still differ "
            f"({', '.join(quiet.differing)}): the trick differs beyond dropout")


def _batch_norm_cause(names: list[str], frozen: EquivalenceResult | None,
                      refused: str = "") -> str:
    """What BatchNorm in training mode does to a candidate that differs, told by the same
    comparison with the BatchNorm statistics frozen (``frozen``; None: ``refused`` says why
    it could not run)."""
    which = (f"{'module' if len(names) == 1 else 'modules'} "
             f"{', '.join(repr(name) for name in names)}")  # fmt: skip
    said = (f"the model has BatchNorm in training mode ({which}): it normalises each forward's "
            "rows by their own statistics, and the reference runs two forwards, one of the "
            "queries and one of the candidates, so a candidate that runs its forwards on other "
            "rows (in chunks, in processes, or both sides in one forward) normalises by other "
            "statistics")
    if frozen is None:
        return f"{said}; the steps could not run again with its running statistics: {refused}"
    if frozen.equivalent:
        return (f"{said}; with BatchNorm's running statistics (eval mode) the two steps are "
                "EQUIVALENT: BatchNorm's per-forward statistics are the whole difference (in "
                "training, SyncBatchNorm across processes shares the statistics; chunks of a "
                "gradient cache cannot)")
    return (f"{said}; with BatchNorm's running statistics (eval mode) they still differ "
            f"({', '.join(frozen.differing)}): the trick differs beyond BatchNorm")


def compare_gradients(
    reference: object,
    candidate: object,
    model: nn.Module,
    batch: PairedBatch,
    *,
    world_size: int = 1,
    dtype: torch.dtype = torch.float64,
    atol: float | None = None,
    rtol: float | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> EquivalenceResult:
    """Does ``candidate`` give the same gradient as ``reference`` on ``model`` and ``batch``?

    Both steps run on copies of ``model`` and ``batch`` cast to ``dtype`` (``model`` itself is
    not changed): ``reference`` in this process, ``candidate`` here too when ``world_size`` is
    1, else in ``world_size`` gloo processes on this machine (:func:`run_distributed`).

    Both steps start from the caller's random state (CPU, and every CUDA device the model or
    the batch is on), so a dropout draws the same masks in both; the caller's random state is
    left unchanged. A candidate that re-runs a forward without replaying the random state
    (a gradient cache without it) draws other masks and is reported as differing. With
    ``world_size > 1`` each process would draw the masks of its own shard, never the
    reference's, so a model with dropout in training mode is refused.

    Args:
        reference: the reference step, usually :class:`~gradlab.equivalence.FullBatch`.
        candidate: the step to check: a built-in one or any callable
            ``step(model, batch, probe)``.
        model: the encoder of both sides.
        batch: the whole batch.
        world_size: processes of the candidate; must divide the batch size.
        dtype: floating dtype of the comparison (float64 by default).
        atol: absolute tolerance; ``None``: :func:`default_tolerance` of ``dtype``.
        rtol: relative tolerance (times ``max|reference|``); ``None``: likewise.
        timeout: seconds before a distributed run is stopped.

    Returns:
        The :class:`EquivalenceResult`: ``result.equivalent``, ``print(result)``.

    Raises:
        GradlabError: a bad argument, or a step that cannot run on this batch, before any
            work: a step that is not callable as ``step(model, batch, probe)`` (a loss passed
            where a step belongs), a model with lazy parameters not yet initialised or with
            no parameter that requires grad, NaN or infinite inputs, inputs the model's first
            forward fails on (see :func:`~gradlab.equivalence.run_step`); ``world_size > 1``
            with dropout in training mode, or a forward that draws random numbers otherwise
            (``F.dropout``, noise: one forward of two rows on a copy tells).
            A model with BatchNorm in training mode is not refused: its statistics are those
            of each forward's rows, which a trick that splits the forward changes in training
            too. When the candidate differs, the two steps run again with BatchNorm in eval
            mode, and ``result.cause`` says whether that removes the difference.
            After the reference's run, before the candidate's: a reference whose every
            recorded gradient is exactly zero (nothing to compare, see :func:`compare`), or
            one with NaN or infinite values. During the candidate's run: what it refuses
            (a step that returns no single loss), in one process or, with ``world_size > 1``,
            in the first of its processes to raise (:func:`run_distributed`).

    Example:
        >>> import gradlab
        >>> from gradlab.equivalence import Accumulation, FullBatch, GradCache, synthetic_problem
        >>> model, batch = synthetic_problem(batch_size=8)
        >>> loss = gradlab.NTXentLoss(temperature=0.5)
        >>> compare_gradients(FullBatch(loss), GradCache(loss, chunk_size=3), model,
        ...                   batch).equivalent
        True
        >>> result = compare_gradients(FullBatch(loss), Accumulation(loss, 2), model, batch)
        >>> result.equivalent, result["dL/dscores"].unscored
        (False, 32)
    """
    _check_step("reference", reference)
    _check_step("candidate", candidate)
    _check_problem(model, batch)
    check_floating_dtype("dtype", dtype)
    batch.shard(0, world_size)  # world_size: a positive integer that divides the batch
    check_positive_finite("timeout", timeout)
    for name, value in (("atol", atol), ("rtol", rtol)):
        if value is not None:
            check_non_negative_finite(name, value)
    for step, world in ((reference, 1), (candidate, world_size)):
        if hasattr(step, "check"):
            step.check(batch, world)
    model = copy.deepcopy(model).to(dtype)
    batch = batch.to(dtype)
    if world_size > 1:  # probed as the steps run it: a float32 model on float64 rows fails
        _refuse_dropout(model, batch, world_size)
    loss = getattr(reference, "loss", None)
    loss_name = score_objective(loss).name if loss is not None else ""

    def compared(model: nn.Module) -> EquivalenceResult:
        reference_grads = run_step(reference, model, batch)
        _refuse_zero_reference(reference_grads)  # before the candidate's run: else wasted
        if world_size == 1:
            candidate_grads = run_step(candidate, model, batch)
        else:
            (candidate_grads,) = run_distributed([candidate], model, batch, world_size, timeout)
            if getattr(candidate, "process_losses_add_up", False) is True and (
                    candidate_grads.loss is not None):  # averaged by the run: the sum is whole
                candidate_grads = dataclasses.replace(candidate_grads,
                                                      loss=candidate_grads.loss * world_size)
        return compare(
            reference_grads, candidate_grads, batch, atol=atol, rtol=rtol,
            reference_name=_name(reference), candidate_name=_name(candidate),
            loss_name=loss_name,
        )  # fmt: skip

    result = compared(model)
    unsplit = getattr(candidate, "unsplit", None)  # a step of one's own: any object
    if callable(unsplit) and isinstance(said := unsplit(batch, world_size), str):
        result.unsplit = said
    cause = getattr(candidate, "known_difference", None)  # a step of one's own: any object
    if not result.equivalent and isinstance(cause, str):
        result.cause = cause
    elif not result.equivalent and (norms := _batch_norms_in_training(model)):
        # the model's rows, not the trick: told by the same steps with the statistics frozen
        result.cause = _told_apart(compared, _with_frozen_batch_norms(model), norms,
                                   _batch_norm_cause)  # fmt: skip
    elif not result.equivalent and (drops := _dropouts_in_training(model)):
        # in one process (more refuse dropout): the masks, told by the steps without them
        result.cause = _told_apart(compared, _without_dropout(model), drops, _dropout_cause)
    return result


def _told_apart(compared: Callable, variant: nn.Module, names: list[str],
                cause: Callable) -> str:  # fmt: skip
    """``cause(names, result)`` of the same comparison on ``variant`` (the model with its
    BatchNorm frozen, or its dropout off), or ``cause(names, None, why)`` where it fails."""
    try:
        other = compared(variant)
    except GradlabError as error:
        return cause(names, None, f"{error}")
    return cause(names, other)
