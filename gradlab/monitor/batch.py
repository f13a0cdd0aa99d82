"""What a logged step hands to the quantities: the batch, detached, computed on once.

**Shared values.** The quantities of one logged step share:

* the score matrix: the watched loss's own (``loss_record``, when it is gradlab's SmoothAP)
  or one cosine matrix computed here; in-batch, the seed's ``m x m`` setting (query as its own
  candidate) and the query-excluded layout are the same matrix with different masks;
* ONE sort of its rows, searched for the window counts ``|s_qj - s_qi| < w``
  (:meth:`BatchView.pair_counts`, :meth:`BatchView.counts_at`): P, the gradient counts and the
  weighted counts read them, and the relaxation gap's exact AP searches it for the positives'
  ranks (:meth:`BatchView.above_and_tied`) when another quantity has made it;
* ONE sigmoid block over the positive rows (:meth:`BatchView.smooth_ap_terms`): the smooth AP,
  the ``AD``/``CB`` decomposition and the analytic gradient of gradient agreement; the ranks
  ``A`` and ``C`` come from the loss's forward when it computed them.

Everything is computed in the embeddings' dtype (half precision in float32) on their device,
and nothing is read back to the host: the Monitor moves the step's scalars once.

**Memory.** On a CPU the step's large ``[Q, C]`` buffers (the sort, its searches, the sigmoid
block, the anatomy's passes) come from a :class:`Workspace` that keeps them from one logged
step to the next: fresh multi-megabyte buffers every step cost page faults (about 2 us per
4 KiB page, a third of a logged step's time at B = 1024). The CUDA caching allocator already
reuses its blocks, so on other devices the buffers are plain allocations.
"""

from __future__ import annotations

import math
import sys
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import torch

from gradlab.functional import diagnostics
from gradlab.functional.diagnostics import SmoothAPTerms
from gradlab.functional.layouts import (
    RetrievalLayout,
    cross_modal_layout,
    in_batch_layout,
    unit_rows,
)
from gradlab.functional.losses import LossRecord, SmoothAPForward
from gradlab.functional.operating_region import bound_past_centre
from gradlab.functional.smooth_ap import (
    DEFAULT_CHUNK_ELEMENTS,
    PositiveGroup,
    RecordedColumnWeights,
)
from gradlab.losses import SoftmaxLogits

_LANE_WORDS = 255
"""Words of 8 flags one int64 lane sum may add: each of its 8 byte lanes stays below 256."""
_PACKED_FROM = 1 << 17
"""Masks of fewer entries take the byte sum: its temporary costs less than the packed sum's
few extra small operations (about 13 us against 34 us at 112 x 112, one CPU thread)."""


def _row_counts(mask: torch.Tensor) -> torch.Tensor:
    """``[Q]`` int32: True entries per row of a ``[Q, C]`` bool mask.

    A bool sum goes through int64, and a byte sum into int32 converts every entry first (a
    ``[Q, C]`` int32 temporary: most of its cost at B = 1024). A contiguous row of ``C = 8 k``
    flags is instead read as ``k`` int64 words of 8 bytes, each byte 0 or 1: summing words
    sums the 8 byte lanes side by side, without carries while a lane adds at most 255 bytes
    (chunks of 255 words), and the lanes of the sum add up to the row's count. About 10x
    faster on a CPU at B = 1024; small or other masks take the byte sum.
    """
    rows, columns = mask.shape
    if mask.numel() < _PACKED_FROM or not mask.is_contiguous() or columns % 8 or (
        mask.data_ptr() % 8
    ):
        return mask.view(torch.uint8).sum(dim=1, dtype=torch.int32)
    words = mask.view(torch.uint8).view(torch.int64)  # [Q, C / 8]
    counts = None
    for start in range(0, words.shape[1], _LANE_WORDS):
        lanes = words[:, start:start + _LANE_WORDS].sum(dim=1)  # [Q] int64: 8 byte lanes
        part = lanes.view(torch.uint8).view(rows, 8).sum(dim=1, dtype=torch.int32)
        counts = part if counts is None else counts.add_(part)
    return counts


def _row_any(mask: torch.Tensor) -> torch.Tensor:
    """``[Q]`` bool: rows with a True entry, as the largest byte (``any`` is ~50x slower on a
    CPU at B = 1024)."""
    return mask.view(torch.uint8).amax(dim=1) > 0


_NUMPY = torch.Tensor.numpy


def _cpu_array(tensor: torch.Tensor) -> np.ndarray:
    """A CPU tensor's memory as a NumPy array, in place (``Tensor.numpy``, bound once; about
    4x cheaper than ``np.from_dlpack``): the CPU paths below read and write the step's buffers
    through it. Nothing is transferred: no caller runs on another device."""
    return _NUMPY(tensor)


@dataclass
class ScoreCapture:
    """A score matrix a watched loss differentiated, and its gradient ``dL/dS`` once backward ran.

    ``direction`` says how to read it: ``"in_batch"`` (rows are queries, ``candidates`` masks the
    query itself), ``"i2t"`` (rows are queries: the loss's image->caption term alone), ``"t2i"``
    (columns are queries: the caption->image term alone) or ``"both"`` (the gradient of the whole
    loss on a cross-modal matrix: rows are read as i2t queries and columns as t2i queries).
    ``smooth_ap_tau`` set and ``grad`` unset: the loss is gradlab's SmoothAP with that tau and
    ``dL/dS`` is its exact gradient at the step's scores (:meth:`BatchView.smooth_ap_loss_grad`);
    ``scores`` is then ``None`` (the step's :attr:`BatchView.scores`), and ``candidates`` is
    ``None`` in-batch exactly when the query is its own candidate. ``hook``: the handle of
    the hook that fills ``grad``, removed once the step is read. ``recorded`` False: the loss
    recorded no matrix, and this one (the step's scores) stands for it with ``dL/dS = 0``
    when no gradient reached the embeddings (:meth:`BatchView.zero_unreached_score_grads`).
    """

    direction: str
    scores: torch.Tensor | None
    positives: torch.Tensor
    candidates: torch.Tensor | None = None
    grad: torch.Tensor | None = None
    smooth_ap_tau: float | None = None
    hook: torch.utils.hooks.RemovableHandle | None = field(default=None, repr=False, compare=False)
    recorded: bool = True


def _cpu_scale(scale: torch.Tensor) -> float | None:
    """The loss scale ``scale`` (0-d) read on a CPU (float32 or float64: no device to wait
    for); None elsewhere (not read back)."""
    if scale.device.type != "cpu" or scale.dtype not in (torch.float32, torch.float64):
        return None
    return float(_cpu_array(scale.detach()))


def as_called(tensor: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """``tensor`` detached as a watched call saw it, and whether that is a copy: a leaf, or a
    view of one (a parameter, a buffer, a memory bank, a tensor made under no_grad), is copied,
    as an optimizer step or the loop may change it in place before ``monitor.step()`` reads it;
    a model's output, which autograd keeps for backward, is shared (one copy of ``[B, d]``).

    Example:
        >>> table = torch.nn.Parameter(torch.zeros(2, 2))
        >>> seen, copied = as_called(table)
        >>> with torch.no_grad():
        ...     _ = table.add_(1.0)
        >>> copied, seen.sum().item()
        (True, 0.0)
    """
    base = tensor if tensor._base is None else tensor._base
    if base.grad_fn is None:
        return tensor.detach().clone(), True
    return tensor.detach(), False


def _all_finite(values: torch.Tensor) -> torch.Tensor:
    """0-d bool on the device: no NaN or infinite entry. The smallest and largest entries
    (NaN propagates into both) cost one pass without a ``[B, B]`` bool mask: ~20x faster on a
    CPU at 1024 x 1024 than ``isfinite(values).all()``."""
    if values.numel() == 0:
        return torch.ones((), dtype=torch.bool, device=values.device)
    low, high = torch.aminmax(values)
    # x * 0 is 0 for a finite x, NaN for NaN or an infinity: four ops on 0-d tensors, where
    # torch.isfinite (itself four) twice and their "and" make nine
    return low.mul(0.0).add_(high.mul(0.0)).eq(0.0)


class Workspace:
    """Buffers that one :class:`BatchView` at a time borrows, kept for the next one (CPU).

    A view claims the workspace the first time it needs a buffer; while it is alive another
    view gets plain allocations instead, so no two live views share memory. Buffers are kept
    by name and grow to the largest size asked; at most ``max_bytes`` in all are kept (a
    request beyond that is a plain allocation, released as usual). A full-preset step keeps
    about 75 MiB at B = 1024 (240 MiB at B = 2048); :meth:`release` frees them.

    Args:
        max_bytes: the most memory kept between steps.

    Example:
        >>> workspace = Workspace()
        >>> view = BatchView(torch.eye(3), labels=torch.arange(3), workspace=workspace)
        >>> workspace.claim(view), workspace.claim(BatchView(torch.eye(3)))  # one at a time
        (True, False)
        >>> a = workspace.take("scratch", (3, 3), torch.float32)
        >>> b = workspace.take("scratch", (2, 2), torch.float32)  # the same memory, reshaped
        >>> a.data_ptr() == b.data_ptr(), workspace.kept_bytes
        (True, 36)
    """

    def __init__(self, max_bytes: int = 256 << 20) -> None:
        self.max_bytes = max_bytes
        self._owner: weakref.ref | None = None
        self._buffers: dict[tuple[str, torch.dtype], torch.Tensor] = {}

    @property
    def kept_bytes(self) -> int:
        """Bytes held between steps."""
        return sum(b.numel() * b.element_size() for b in self._buffers.values())

    def release(self) -> None:
        """Free the kept buffers (a view that holds some keeps its own until it is gone).

        Example:
            >>> workspace = Workspace()
            >>> _ = workspace.take("scratch", (4, 4), torch.float32)
            >>> workspace.release()
            >>> workspace.kept_bytes
            0
        """
        self._buffers.clear()

    def claim(self, owner: object) -> bool:
        """Whether ``owner`` may use the buffers: no other live owner holds them."""
        current = None if self._owner is None else self._owner()
        if current is not None and current is not owner:
            return False
        if current is None:
            self._owner = weakref.ref(owner)
        return True

    def take(self, name: str, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """A CPU tensor of ``shape`` and ``dtype``, uninitialised, kept under ``name``."""
        size = 1
        for extent in shape:
            size *= extent
        key = (name, dtype)
        kept = self._buffers.get(key)
        if kept is None or kept.numel() < size:
            fresh = torch.empty(size, dtype=dtype)
            spare = self.max_bytes - self.kept_bytes
            if kept is not None:
                spare += kept.numel() * kept.element_size()
            if size * fresh.element_size() > spare:
                return fresh.view(shape)
            self._buffers[key] = kept = fresh
        return (kept if kept.numel() == size else kept[:size]).view(shape)


_THREAD = threading.local()


def thread_workspace() -> Workspace:
    """This thread's :class:`Workspace`, the one a :class:`BatchView` uses when given none.

    Example:
        >>> thread_workspace() is thread_workspace()
        True
    """
    workspace = getattr(_THREAD, "workspace", None)
    if workspace is None:
        workspace = _THREAD.workspace = Workspace()
    return workspace


@dataclass
class BatchView:
    """The embeddings, targets and loss of one step, with shared derived values cached.

    Either ``labels`` (in-batch retrieval) or ``candidates`` and ``positives`` (cross-modal) are
    set. ``embedding_grad`` is the gradient backpropagated into ``embeddings`` (if captured).
    """

    embeddings: torch.Tensor
    labels: torch.Tensor | None = None
    candidates: torch.Tensor | None = None
    positives: torch.Tensor | None = None
    loss: torch.Tensor | None = None
    embedding_grad: torch.Tensor | None = None
    tau: float = 0.01
    loss_kind: str | None = None
    loss_tau: float | None = None
    loss_record: LossRecord | None = None
    """What the watched gradlab loss computed (``gradlab.functional.losses.recording``)."""
    loss_column_weights: RecordedColumnWeights | None = None
    """The column weights the same call's exact backward recorded
    (``gradlab.functional.smooth_ap.recording_column_weights``): once it ran,
    :meth:`smooth_ap_terms` at the loss's tau starts from them instead of a sigmoid block."""
    on_scores: bool = False
    """The watched call's first argument is a score matrix: ``embeddings`` holds it."""
    query_column_excluded: bool = False
    """With ``on_scores``: the ``[B, B]`` matrix compares a batch with itself (watched with
    ``inputs="in_batch_scores"``); each query's own column (the diagonal) is no candidate, and
    ``embeddings`` holds 0 there in place of whatever the loss was given."""
    features: tuple[torch.Tensor, torch.Tensor] | None = None
    """With ``on_scores``: the embeddings that matrix compares, ``(queries [Q, d], candidates
    [C, d])``, when the integration that recorded it saw them (the matrix may be logits, a
    scale times their cosine)."""
    _cache: dict = field(default_factory=dict, repr=False, compare=False)
    degenerate_batches: int | torch.Tensor | None = None
    """Batches without ranking signal so far, the watched loss's count (under
    torch.distributed, every rank's summed: a 0-d tensor)."""
    score_captures: list[ScoreCapture] = field(default_factory=list)  # anatomy (dL/dS)
    ties_by_column: bool = True
    """Whether the step's sort keeps tied scores in column order (a stable sort, which the
    anatomy's ranks need); the Monitor turns it off when no due quantity reads the order
    (counts and P do not depend on it, and an unstable sort is about 10 % cheaper; a float32
    CPU matrix of fewer than :data:`KEYED_SORT_FROM` entries then sorts its keys alone, about
    2x cheaper, and :attr:`descending_order` sorts the order only if asked)."""
    workspace: Workspace | None = field(default=None, repr=False, compare=False)
    """Where the step's large CPU buffers come from (None: :func:`thread_workspace`). Tensors
    this view hands out (its sort, its sigmoid block's gradient) live in it as long as the view
    does: copy one to keep it after the view is gone."""

    on_workspace: Callable[[Workspace], None] | None = field(default=None, repr=False,
                                                              compare=False)  # fmt: skip
    """Called with the workspace when one is given to this view (the Monitor gives its own at
    the step): a loss adapter remembers it for the next step's backward."""
    parameter_grads: dict = field(default_factory=dict, repr=False, compare=False)
    """Gradients that the watched call's own backward sent to a parameter a quantity follows
    (a learnable scale: :class:`~gradlab.monitor.geometry.Temperature`), by the quantity's key;
    :meth:`unscale_gradients` divides them like the others."""
    local: BatchView | None = field(default=None, repr=False, compare=False)
    """Under torch.distributed, in the gathered view of a step: this rank's own view, what its
    watched call saw and backpropagated (a quantity about the call itself reads it)."""
    gradient_arrived: bool | None = None
    """Whether backward has reached the watched call's first input since the call: None when
    no due quantity reads a gradient or that input has none to receive (no graph), False until
    backward reaches it, then True. The Monitor warns when a step closes at False."""
    no_graph: bool = False
    """The watched call built no graph (neither its first input nor its loss requires grad: an
    evaluation outside ``torch.no_grad()``, a frozen model): no gradient will arrive. The Monitor
    warns once, naming the quantities that read one."""
    embeddings_outside_graph: bool = False
    """The watched call's embeddings require no grad while its loss does (a frozen or detached
    encoder under a loss with parameters): no embedding gradient will arrive. The Monitor
    warns once."""
    not_backpropagated: bool = False
    """Backward reached this call's inputs (or a parameter a quantity follows) but not its
    loss (a second call of the step, for display): no gradient of its own exists, and what
    the tensors hold is another call's (the Monitor sets it at the step)."""
    loss_hooked: bool = False
    """The watched call's value is a one-element tensor in the graph, hooked for
    :attr:`loss_scale`: backward through it sets that (still None at the step: the call was
    not backpropagated, whatever reached its inputs)."""
    read_at_call: dict = field(default_factory=dict, repr=False, compare=False)
    """The call's tensors this view holds without a copy (a model's output), by what they are,
    with their version counters then: a change in place before the step shows
    (:meth:`changed_since_call`). A parameter's or buffer's values, which an optimizer or the
    loop may change before the step, are copies (:func:`as_called`)."""
    loss_scale: torch.Tensor | None = None
    """The gradient that reached the watched call's value in backward (0-d, on the device): 1
    for ``loss.backward()``, ``1/N`` when a trainer divides the loss over ``N`` accumulated
    micro-batches, the scale of AMP's ``GradScaler``; None when not captured (a loss that is
    not a scalar, or no backward). :meth:`unscale_gradients` divides the captured gradients by
    it."""
    scaled_by_zero: bool = False
    """:meth:`unscale_gradients` read a loss scale of exactly 0 (a loss multiplied by 0: a
    weight warm-up that starts at 0): the gradients read are zero, not the loss's own. Known on
    a CPU only (elsewhere the scale is not read back: False)."""
    score_direction: str | None = None
    """The directions whose softmax the watched loss computes on the step's scores, when an
    integration knows them: ``"i2t"`` (the rows are the queries: sentence-transformers'
    MultipleNegativesRankingLoss), ``"t2i"`` or ``"both"``; None: not said (a quantity that
    needs it takes its own default)."""
    softmax: SoftmaxLogits | None = None
    """What the watched loss says of its logits (:class:`gradlab.losses.SoftmaxLogits`: its
    scale, directions, summed terms, whether InfoNCE's closed form is its gradient), when it
    or its integration says; None: not said."""
    provides: frozenset[str] | None = field(default=None, repr=False, compare=False)
    """What the watched loss's adapter can provide (names of
    :data:`~gradlab.monitor.quantity.NEEDS`); None: everything (a view built by hand)."""

    def __setattr__(self, name: str, value: object) -> None:
        object.__setattr__(self, name, value)
        if name == "embedding_grad" and value is not None:
            self._leave_graph()
        elif name == "workspace" and value is not None:
            listener = self.__dict__.get("on_workspace")
            if listener is not None:
                listener(value)

    def unscale_gradients(self) -> None:
        """Divide the captured gradients (``embedding_grad``, each ``dL/dS`` and the
        :attr:`parameter_grads`) by
        :attr:`loss_scale`, so that they are the watched loss's own, whatever factor the
        training loop put on the loss before backward (accumulation, AMP, a loss weight).
        Each gradient is divided by the scale itself (one rounding in the gradient's own
        precision, not a multiplication by a rounded reciprocal cast to it: a float16 gradient
        of a loss divided by 3 comes back as the correctly rounded quotient where one exists).
        A scale of 0 (a loss multiplied by 0) leaves them as they are, zero. A float32 or
        float64 scale on a CPU is read (no device to wait for): at 1 (``loss.backward()``) or
        0 no gradient is divided, ``x / 1`` being ``x`` bit for bit; elsewhere nothing is read
        back. Call it once, after backward.

        Example:
            >>> view = BatchView(torch.zeros(2, 2), labels=torch.arange(2),
            ...                  embedding_grad=torch.full((2, 2), 0.5),
            ...                  loss_scale=torch.tensor(0.25))  # loss / 4 was backpropagated
            >>> view.unscale_gradients()
            >>> view.embedding_grad.tolist()
            [[2.0, 2.0], [2.0, 2.0]]
        """
        scale = self.loss_scale
        if scale is None:
            return
        read = _cpu_scale(scale)
        if read in (0.0, 1.0):  # no gradient changes (0 divides by 1); a NaN is no 0 or 1
            self.loss_scale = None  # once
            self.scaled_by_zero = read == 0.0
            return
        # A 0-d divisor keeps each gradient's dtype; the kernel divides in its opmath type.
        divisor = torch.where(scale != 0, scale, torch.ones_like(scale))
        if self.embedding_grad is not None:  # autograd's own tensor: not in place
            self.embedding_grad = self.embedding_grad / divisor
        for capture in self.score_captures:
            if capture.grad is not None:  # the capture's own copy
                capture.grad.div_(divisor)
        for key, grad in self.parameter_grads.items():  # autograd's own tensors: not in place
            # 0-d by 0-d promotes to the wider dtype: divide there, round once to the grad's
            self.parameter_grads[key] = (grad / divisor.to(grad.device)).to(grad.dtype)
        self.loss_scale = None  # once

    def tensor_versions(self) -> list[tuple[str, torch.Tensor, int]]:
        """``(name, tensor, version counter)`` of every tensor the step's quantities share
        that keeps a version counter: the fields, the properties computed once (``scores``)
        and the step's cache, a tuple's or a record's tensors one level down, but not those
        made under ``torch.inference_mode`` (where the quantities compute), which keep none.
        Read before a quantity of the user's runs, so that :meth:`changed_in_place` can name
        what it changed (no value is read).

        Example:
            >>> view = BatchView(torch.ones(2, 2), labels=torch.arange(2))
            >>> [name for name, _, _ in view.tensor_versions()]
            ['embeddings', 'labels']
        """
        found: list[tuple[str, torch.Tensor, int]] = []
        seen: set[int] = set()

        def add(name: str, value: object) -> None:
            # a tensor made under inference_mode (the step's own) keeps no version counter
            if isinstance(value, torch.Tensor) and id(value) not in seen \
                    and not value.is_inference():  # fmt: skip
                seen.add(id(value))
                found.append((name, value, value._version))

        for name, value in vars(self).items():  # the fields, then the cached properties
            if not name.startswith("_"):  # a watched score matrix is held as the embeddings
                add("scores" if name == "embeddings" and self.on_scores else name, value)
        for key, value in self._cache.items():
            add(str(key), value)
            parts = (value if isinstance(value, (tuple, list)) else
                     vars(value).values() if hasattr(value, "__dict__") else ())  # fmt: skip
            for part in parts:
                add(str(key), part)
        return found

    def changed_in_place(self, versions: list[tuple[str, torch.Tensor, int]]) -> list[str]:
        """The names of :meth:`tensor_versions`' tensors changed in place since it was read.

        Example:
            >>> view = BatchView(torch.ones(2, 2), labels=torch.arange(2))
            >>> before = view.tensor_versions()
            >>> _ = view.embeddings.mul_(2.0)
            >>> view.changed_in_place(before)
            ['embeddings']
        """
        return list(dict.fromkeys(name for name, tensor, version in versions
                                  if tensor._version != version))  # fmt: skip

    def changed_since_call(self) -> list[str]:
        """What of :attr:`read_at_call` was changed in place since the watched call (read from
        version counters: no value is read).

        Example:
            >>> embeddings = torch.ones(2, 2).exp()  # not a leaf: shared, not copied
            >>> view = BatchView(embeddings, labels=torch.arange(2))
            >>> view.read_at_call["embeddings"] = (embeddings, embeddings._version)
            >>> _ = embeddings.mul_(2.0)
            >>> view.changed_since_call()
            ['embeddings']
        """
        return [name for name, (tensor, version) in self.read_at_call.items()
                if tensor._version != version]  # fmt: skip

    def zero_unreached_score_grads(self) -> None:
        """Give ``dL/dS = 0`` to each recorded score matrix that backward never reached
        while it reached the watched call's input (:attr:`gradient_arrived`): the loss's
        value does not depend on that matrix (a pytorch-metric-learning loss whose pairs all
        lie inside its margin returns a zero of the embeddings, one whose miner found no pair
        never scores them), so no pair receives gradient through it. The stand-in of a call
        that recorded no matrix (``recorded`` False) is dropped instead when the embeddings'
        gradient is not zero: the loss scored its pairs some other way, and its ``dL/dS`` is
        unknown. A step whose backward reached nothing keeps its captures without gradient
        (nothing is logged from them).

        Example:
            >>> scores = torch.eye(2)
            >>> view = BatchView(torch.eye(2), labels=torch.arange(2), gradient_arrived=True,
            ...                  score_captures=[ScoreCapture("in_batch", scores, scores > 0)])
            >>> view.zero_unreached_score_grads()
            >>> view.score_captures[0].grad.tolist()
            [[0.0, 0.0], [0.0, 0.0]]
        """
        if self.gradient_arrived is not True:
            return
        for capture in list(self.score_captures):  # SmoothAP's own (no scores): at the step
            if capture.scores is not None and capture.grad is None:
                if (not capture.recorded and self.embedding_grad is not None
                        and bool(self.embedding_grad.any())):  # fmt: skip
                    # the loss recorded no matrix, yet its gradient reached the embeddings: it
                    # scored its pairs without its distance (one host read, on this path only)
                    self.score_captures.remove(capture)
                    continue
                capture.grad = torch.zeros_like(capture.scores)

    def _leave_graph(self) -> None:
        """Once the embeddings' gradient has arrived, hold the recorded scores out of the
        autograd graph (the view reads only their values).

        The graph leads back to the embeddings, whose gradient hook holds this view: a cycle
        through autograd's C++ objects that Python's collector cannot see, which kept every
        logged step's view, its sort and its sigmoid block alive (~40 MB a step at B = 1024).
        """
        record = self.__dict__.get("loss_record")
        if record is None or not record.scores.requires_grad:
            return
        # the call's own input tensors too (the adapter has matched them with the call's)
        detached = record._replace(scores=record.scores.detach(), embeddings=None,
                                   candidates=None)  # fmt: skip
        object.__setattr__(self, "loss_record", detached)
        if self.__dict__.get("record") is record:
            self.__dict__["record"] = detached

    @cached_property
    def _claimed(self) -> Workspace | None:
        if self.embeddings.device.type != "cpu":
            return None
        workspace = self.workspace if self.workspace is not None else thread_workspace()
        return workspace if workspace.claim(self) else None

    def buffer(self, name: str, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """An uninitialised tensor on the batch's device, from the workspace when it has one
        for this view (see :class:`Workspace`) and the tensor has at least 16384 entries (a
        128 x 128 matrix), else a plain allocation. Each name is one buffer: a caller uses a
        name only while nothing else of the view holds it."""
        workspace = self._claimed
        size = 1
        for extent in shape:
            size *= extent
        if workspace is None or size < _KEPT_FROM:  # small: the heap reuses it without faults
            return torch.empty(shape, dtype=dtype, device=self.embeddings.device)
        return workspace.take(name, shape, dtype)

    @cached_property
    def record(self) -> LossRecord | None:
        """``loss_record`` when it describes this batch's layout (else ``None``)."""
        record = self.loss_record
        if record is None or record.in_batch != (self.labels is not None):
            return None
        rows = self.embeddings.shape[0]
        columns = rows if self.labels is not None else self.candidates.shape[0]
        return record if tuple(record.scores.shape) == (rows, columns) else None

    @cached_property
    def layout(self) -> RetrievalLayout:
        """Cosine scores and masks (the query not its own candidate in-batch).

        The scores are the watched loss's when it recorded them (the same matrix: cosine of
        the same embeddings), else computed here, and so are the in-batch masks when the loss
        recorded them for this view's labels tensor (without the query as a candidate); no
        value is read (no host sync).
        """
        record = self.record
        if self.labels is not None:
            if record is None:
                layout = in_batch_layout(self.embeddings, self.labels, validate=False)
            elif record.labels is self.labels and record.candidate_mask is not None:
                # the loss's own masks of these labels, the query left out: not built again
                layout = RetrievalLayout(record.scores.detach(), record.positives,
                                         record.candidate_mask)  # fmt: skip
            else:
                positives = self.labels.unsqueeze(0) == self.labels.unsqueeze(1)
                positives.fill_diagonal_(False)
                candidates = torch.ones_like(positives).fill_diagonal_(False)
                layout = RetrievalLayout(record.scores.detach(), positives, candidates)
            self._cache["labels layout"] = layout  # see every_candidate_but_the_query
            return layout
        if record is not None:
            return RetrievalLayout(record.scores.detach(), self.positives, None)
        scores = cross_modal_layout(
            self.embeddings, self.candidates, self.positives, validate=False
        )
        return RetrievalLayout(scores, self.positives, None)

    @property
    def query_not_candidate(self) -> bool:
        """Whether each query's own column (the diagonal) is in the matrix but no candidate:
        in-batch with labels, or a score matrix watched as a batch against itself
        (:attr:`query_column_excluded`). The step's sort holds that column; counts and ranks
        that read the sort take it out."""
        return self.labels is not None or self.query_column_excluded

    @property
    def every_candidate_but_the_query(self) -> bool:
        """Whether :attr:`layout` is the in-batch one built from the labels: every entry a
        candidate but the query's own (the diagonal), the positives the other entries of the
        query's label. False for a layout an integration or a caller set (its candidate mask
        may drop more). Read from the objects only (no value)."""
        layout = self.__dict__.get("layout")
        return layout is not None and self._cache.get("labels layout") is layout

    @property
    def ranking_queries(self) -> torch.Tensor | None:
        """``[Q]`` bool: the queries with both a positive and a negative among their
        candidates (those with a ranking to learn); ``None`` without labels or positives.

        Computed once per step for every quantity that asks (the degenerate-batch flag, the
        gradient counts), on the device, from the layout when the step has built one (an
        integration's layout may mask candidates out: counted), else from the labels or the
        positive mask alone (no score matrix is built for it). Kept per source (the layout, the
        labels or the mask it was read from), so a view whose masks change reads them again.
        """
        layout = self.__dict__.get("layout")
        source = next((s for s in (layout, self.labels, self.positives) if s is not None), None)
        kept = self._cache.get("ranking queries")
        if kept is None or kept[0] is not source:  # the source itself kept: no id reused
            kept = (source, None if source is None else self._ranking_queries(layout))
            self._cache["ranking queries"] = kept
        return kept[1]

    def positive_counts(self, layout: RetrievalLayout) -> torch.Tensor:
        """``[Q]`` int32: the True entries of each row of ``layout.positives``, counted once
        per step for every quantity that asks (:attr:`ranking_queries`, the margins); kept per
        mask, so a view whose masks change counts them again."""
        kept = self._cache.get("positive counts")
        if kept is None or kept[0] is not layout.positives:  # the mask itself kept: no id reused
            kept = (layout.positives, _row_counts(layout.positives))
            self._cache["positive counts"] = kept
        return kept[1]

    def _ranking_queries(self, layout: RetrievalLayout | None) -> torch.Tensor:
        """:attr:`ranking_queries` computed (a source exists)."""
        if layout is not None:
            positives = self.positive_counts(layout)
            mask, columns = layout.candidate_mask, layout.positives.shape[1]
            if mask is None:
                candidates = columns
            elif self.every_candidate_but_the_query:
                candidates = columns - 1
            else:
                candidates = _row_counts(mask)
        elif self.labels is not None:
            same = _row_counts(self.labels.unsqueeze(0) == self.labels.unsqueeze(1))
            positives, candidates = same - 1, self.labels.shape[0] - 1  # the query left out
        else:
            positives, candidates = _row_counts(self.positives), self.positives.shape[1]
        return (positives > 0) & (positives < candidates)

    @cached_property
    def compared(self) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor] | None:
        """The embeddings the step's scores compare: ``(queries, candidates, cosine)``.

        ``candidates`` is None in-batch (the queries are the candidates); ``cosine`` is their
        ``[Q, C]`` cosine matrix, laid out as :attr:`layout` (the layout's own scores when the
        call was on embeddings). On a score matrix: from :attr:`features`, or None when the
        integration did not see them (a matrix gathered from other processes).
        """
        if not self.on_scores:
            return self.embeddings, self.candidates, self.layout.scores
        if self.features is None:
            return None
        queries, candidates = self.features
        return queries, candidates, cross_modal_layout(queries, candidates, self.layout.positives,
                                                       validate=False)  # fmt: skip

    @cached_property
    def self_scores(self) -> torch.Tensor:
        """The seed's per-query ``m x m`` setting: in-batch scores with the query as candidate.

        The same matrix as ``layout.scores`` (only the masks differ), not a second product.
        """
        return self.layout.scores

    @cached_property
    def float64_embeddings(self) -> torch.Tensor:
        """:attr:`embeddings` in float64 (the tensor itself when it is float64): the embedding
        norms and the geometry read one copy."""
        return self.embeddings.to(torch.float64)

    @cached_property
    def embedding_norms(self) -> torch.Tensor:
        """``[N]`` float64 L2 norms of the rows of :attr:`float64_embeddings`, computed once for
        the norms logged and the geometry's normalised rows (``norm(dim=1)``'s kernel, without
        its Python dispatch)."""
        return torch.linalg.vector_norm(self.float64_embeddings, dim=1)

    @cached_property
    def compute_dtype(self) -> torch.dtype:
        """The embeddings' dtype, half precision promoted to float32 (as SmoothAP computes)."""
        dtype = self.embeddings.dtype
        return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype

    def provided(self, need: str) -> bool:
        """Whether the watched loss provides ``need`` (a quantity's optional need).

        Example:
            >>> BatchView(embeddings=torch.eye(2), provides=frozenset({"scores"})).provided(
            ...     "smooth_ap_terms")
            False
        """
        return self.provides is None or need in self.provides

    def finite_flags(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Two 0-d bool tensors on the batch's device (nothing read back): whether the inputs
        (``embeddings``, ``candidates``) are finite, and whether they and every captured
        ``dL/dS`` are.

        Example:
            >>> batch = BatchView(torch.tensor([[1.0, float("nan")]]), labels=torch.tensor([0]))
            >>> [bool(flag) for flag in batch.finite_flags()]
            [False, False]
        """
        inputs = _all_finite(self.embeddings)
        if self.candidates is not None:
            inputs = inputs & _all_finite(self.candidates)
        grads = inputs
        for capture in self.score_captures:
            if capture.grad is not None:
                grads = grads & _all_finite(capture.grad)
        return inputs, grads

    @cached_property
    def scores(self) -> torch.Tensor:
        """``layout.scores`` in :attr:`compute_dtype`."""
        return self.layout.scores.to(self.compute_dtype)

    @cached_property
    def _sorted(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        # Negated, ascending and stable: the rows best first with ties by column (the order
        # the anatomy ranks by), ascending values for the searches, and no flip of either.
        if self.scores.device.type == "cpu" and self.scores.dtype == torch.float32:
            if not self.ties_by_column and self.scores.numel() < KEYED_SORT_FROM:
                # no order read: the keys alone, sorted (about 2x cheaper); see descending_order
                values, keys = _sorted_keys_on_cpu(self.scores, self.buffer)
                self._cache["sorted keys"] = keys
                return values, None
            values, order, keys = _sorted_rows_on_cpu(self.scores, self.buffer)
            self._cache["sorted keys"] = keys  # the searches of _upper compare these
            return values, order  # stable: ties by column
        negated = -self.scores
        stable = self.ties_by_column
        # Integer keys pay back their few extra ops on large batches only.
        key = float_order_keys(negated) if negated.numel() >= KEYED_SORT_FROM else None
        if key is None:
            return tuple(negated.sort(dim=1, stable=stable))
        order = key.sort(dim=1, stable=stable).indices
        return negated.gather(1, order), order

    @property
    def negated_sorted(self) -> torch.Tensor:
        """The one sort of the step: every row of ``-scores``, ascending (query included)."""
        return self._sorted[0]

    @property
    def descending_order(self) -> torch.Tensor:
        """``[Q, C]`` columns of each row by descending score, ties by column index (stable)
        when :attr:`ties_by_column`: ``scores.gather(1, order)`` is ``-negated_sorted``.

        A float32 CPU matrix of fewer than :data:`KEYED_SORT_FROM` entries whose step reads no
        order (:attr:`ties_by_column` False) sorts its keys alone; the order is then sorted
        when first asked for (stable), once."""
        order = self._sorted[1]
        if order is None:
            order = self._cache.get("descending order")
            if order is None:  # the step's own buffers hold its sort: the order's are its own
                _, order, _ = _sorted_rows_on_cpu(
                    self.scores, lambda name, shape, dtype: self.buffer(f"order {name}", shape,
                                                                        dtype))  # fmt: skip
                self._cache["descending order"] = order
        return order

    # The searches below count ``s_j < x`` as ``-s_j > -x``: negation is exact, so
    # ``-(a + w)`` is ``(-a) - w`` bit for bit and every count equals the ascending search's.

    def pair_counts(self, width: float) -> torch.Tensor:
        """``[Q]``: pairs ``(i, j)`` of row ``q`` (``i = j`` and, in-batch, the query included)
        inside the window, ``s_j < s_i + width`` and ``s_i < s_j + width``.

        With ``u_i = #{j: s_j < s_i + width}`` the pairs inside number ``2 sum_i u_i - C^2``
        (the pairs outside on one side are, with ``i`` and ``j`` swapped, the complement of
        those counted by ``u``). On a float32 CPU matrix only the row sums of ``u`` are needed:
        one sort of each row's order keys merged with those of the shifted row
        (:func:`_row_sums_at_or_below`); otherwise, or when the counts of every entry are
        already cached, one search of every entry in the sorted rows. Cached per width.
        """
        key = ("pairs", width)
        if key not in self._cache:
            size = self.negated_sorted.shape[1]
            keys = self._cache.get("sorted keys")
            if width > 0 and keys is not None and ("upper", width) not in self._cache:
                # only the row sums: one sort of the merged rows beats a search of every entry
                needles = _float_keys(self._shifted(width), self.buffer)
                # rows and shifts below 2 in magnitude (cosines): int32 keys, bounds not read
                within_two = self._end_magnitude() + width < _BELOW_TWO  # False for NaN
                below = _row_sums_at_or_below(keys, needles, self.buffer, within_two)
                self._cache[key] = size * size - 2 * below  # 2 sum_i u_i - C^2, u = C - below
                return self._cache[key]
            upper = self._upper(width)
            # summed in int32 while C^2 fits (a sum into int64 converts every entry first)
            exact_in = torch.int32 if upper.dtype == torch.int32 and size < 1 << 15 else None
            pairs = 2 * upper.sum(dim=1, dtype=exact_in).long() - size * size
            self._cache[key] = pairs if width > 0 else torch.zeros_like(pairs)
        return self._cache[key]

    def _upper(self, width: float) -> torch.Tensor:
        """``u`` of every sorted entry: ``#{j: s_j < s_(k) + width}``. The sorted entries serve
        as anchors (the same numbers as the entries, searched in order: about twice as fast
        on a CPU at B = 1024)."""
        key = ("upper", width)
        if key not in self._cache:
            ordered = self.negated_sorted  # s_j < a + w  <=>  -s_j > (-a) - w
            into = self.buffer(f"upper {width}", ordered.shape, torch.int32)
            keys = self._cache.get("sorted keys")
            if keys is not None and ordered.numel() >= KEYED_SORT_FROM:  # integers: ~20 % faster
                needles = _float_keys(self._shifted(width), self.buffer)
                below = _search_rows(keys, needles, side="right", out=into)
            else:
                below = _search_rows(ordered, self._shifted(width), side="right", out=into)
            self._cache[key] = below.neg_().add_(ordered.shape[1])  # in place: C - below
        return self._cache[key]

    def _shifted(self, width: float) -> torch.Tensor:
        """``negated_sorted - width`` (ascending too), cached per width: P's search and the
        counts' searches read it. An entry whose shift rounds back onto it (a width under half
        an ulp of a large score) becomes its neighbouring float below instead
        (:func:`~gradlab.functional.operating_region.bound_past_centre`): every window keeps
        its centre and its ties."""
        key = ("shifted", width)
        if key not in self._cache:
            ordered = self.negated_sorted
            shifted = self.buffer(f"shifted {width}", ordered.shape, ordered.dtype)
            torch.sub(ordered, width, out=shifted)
            if self._bounds_move(width):
                shifted = bound_past_centre(shifted, ordered, -math.inf)
            self._cache[key] = shifted
        return self._cache[key]

    def _bounds_move(self, width: float | torch.Tensor) -> bool:
        """Whether a bound ``s +- width`` of this step's scores may round back onto ``s`` (then
        :func:`~gradlab.functional.operating_region.bound_past_centre` moves it), cached per
        width: on a CPU read once from the sorted rows' ends, so that cosine scores pay no
        extra kernel; elsewhere, and for a tensor of widths (not read), assumed."""
        if isinstance(width, torch.Tensor):
            return True
        key = ("bounds move", width)
        if key not in self._cache:
            ordered = self.negated_sorted
            moves = ordered.device.type != "cpu" or _rounds_back(
                self._end_magnitude(), width, ordered.dtype)  # fmt: skip
            self._cache[key] = width > 0 and moves
        return self._cache[key]

    def _end_magnitude(self) -> float:
        """The largest magnitude of the sorted rows (at their ends; NaN, sorted last,
        propagates), read once on a CPU (no device to wait for); NaN elsewhere (not read)."""
        if "end magnitude" not in self._cache:
            ordered = self.negated_sorted
            on_cpu = ordered.device.type == "cpu"
            self._cache["end magnitude"] = _largest_end(ordered) if on_cpu else math.nan
        return self._cache["end magnitude"]

    def entry_counts(self, width: float) -> torch.Tensor:
        """:meth:`counts_at` of every entry ``[Q, C]``, from sorted anchors put back in place;
        without the order (a sort of the keys alone), :meth:`counts_at` of the scores."""
        if self._sorted[1] is None and "descending order" not in self._cache:
            return self.counts_at(self.scores, width)  # searched in place: no second sort
        ordered = self.negated_sorted
        if width <= 0:
            return torch.zeros(ordered.shape, dtype=torch.long, device=ordered.device)
        # s_j + w <= a  <=>  (-s_j) - w >= -a: C minus the entries below -a
        below = ordered.shape[1] - _search_rows(self._shifted(width), ordered, side="left")
        counts = (self._upper(width) - below).long()
        return torch.empty_like(counts).scatter_(1, self.descending_order, counts)

    def counts_at(
        self,
        anchors: torch.Tensor,
        width: float | torch.Tensor,
        queries: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """How many scores of each anchor's row lie in its window (the anchor's own entry and,
        in-batch, the query included), with the window test of :meth:`pair_counts`.

        Args:
            anchors: ``[k, n]`` scores of rows ``queries`` (``[k]`` indices; all rows if None).
            width: one width or a ``[k, n]`` tensor of widths (a width <= 0 counts nothing).
            queries: the rows the anchors belong to.
        """
        ordered = self.negated_sorted if queries is None else self.negated_sorted[queries]
        negated = -anchors
        # C - #{-s_j <= (-a) - w} entries with s_j < a + w; the size C cancels below. Bounds
        # that round back onto their anchor move past it, as in _shifted (anchors are scores
        # of this step: a number's test is the step's).
        low = negated - width
        if self._bounds_move(width):
            low = bound_past_centre(low, negated, -math.inf)
        outside_above = torch.searchsorted(ordered, low, side="right")
        if not isinstance(width, torch.Tensor):  # s_j + w <= a: the test of pair_counts
            shifted = self._shifted(width)
            shifted = shifted if queries is None else shifted[queries]
            not_below = torch.searchsorted(shifted, negated, side="left")
            return not_below - outside_above if width > 0 else torch.zeros_like(outside_above)
        high = bound_past_centre(negated + width, negated, math.inf)  # s_j > a - w
        not_below = torch.searchsorted(ordered, high, side="left")
        return torch.where(width > 0, not_below - outside_above, 0)

    def above_and_tied(
        self, anchors: torch.Tensor, queries: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``[k, g]``: candidates of rows ``queries`` (all rows if None) scoring strictly above
        each anchor, and scoring equal to it (the anchor's own entry included), for exact
        (tie-aware) ranks.

        A search of the step's one sort (``O(k g log C)``). In-batch the query, not a
        candidate, is taken out of both counts.
        """
        ordered = self.negated_sorted if queries is None else self.negated_sorted[queries]
        negated = -anchors
        above = torch.searchsorted(ordered, negated, side="left")  # -s_c < -a
        tied = torch.searchsorted(ordered, negated, side="right") - above
        if self.query_not_candidate:
            own = self.scores.diagonal()
            own = (own if queries is None else own[queries]).unsqueeze(1)
            above, tied = above - (own > anchors).long(), tied - (own == anchors).long()
        return above, tied

    @property
    def has_sort(self) -> bool:
        """Whether the step's one sort has been made (a quantity that can do without it then
        reuses it instead of paying for it)."""
        return "_sorted" in self.__dict__

    def query_inside(
        self,
        anchors: torch.Tensor,
        width: float | torch.Tensor,
        queries: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """In-batch: whether the query's own score lies in each anchor's window (same test)."""
        own = self.scores.diagonal()
        own = (own if queries is None else own[queries]).unsqueeze(1)
        high, own_high = anchors + width, own + width
        if self._bounds_move(width):  # as in counts_at
            high = bound_past_centre(high, anchors, math.inf)
            own_high = bound_past_centre(own_high, own, math.inf)
        inside = (own < high) & (anchors < own_high)
        if not isinstance(width, torch.Tensor):  # a number: no op for its sign
            return inside if width > 0 else torch.zeros_like(inside)
        return inside & (width > 0)

    def positive_anchors(self, group: PositiveGroup) -> torch.Tensor:
        """``[G, n]``: the scores of ``group``'s positives, gathered from its rows once per step
        for every quantity that reads them (the gradient counts' windows, the margins' hardest
        positive); kept per group."""
        key = ("anchors", id(group))
        kept = self._cache.get(key)
        if kept is None or kept[0] is not group:  # the group itself kept: no id reused
            rows = self.rows_of(group.queries)  # None: every row (no indexing)
            scores = self.scores if rows is None else self.scores[rows]
            kept = (group, scores.gather(1, group.positive_columns))
            self._cache[key] = kept
        return kept[1]

    def lowest_positives(self, layout: RetrievalLayout) -> torch.Tensor | None:
        """``[Q]``: each row's smallest score among ``layout``'s positives (``inf`` without
        one; NaN when one is NaN), from the positives' scores of the watched loss's groups
        (:meth:`positive_anchors`) when they are this layout's and at most two groups hold its
        rows; else None (a masked pass over ``[Q, C]`` is cheaper than more groups)."""
        record = self.record
        if record is None or record.forward is None or record.positives is not layout.positives:
            return None
        groups = record.forward.groups
        if len(groups) > 2:
            return None
        if len(groups) == 1 and self.rows_of(groups[0].queries) is None:
            return self.positive_anchors(groups[0]).amin(dim=1)
        lowest = self.scores.new_full(self.scores.shape[:1], math.inf)
        for group in groups:
            lowest.index_put_((group.queries,), self.positive_anchors(group).amin(dim=1))
        return lowest

    def rows_of(self, queries: torch.Tensor) -> torch.Tensor | None:
        """``queries`` (a group's rows, ascending), or None when they are every row in order:
        then the callers skip indexing (a copy per tensor). Read from the shape only."""
        return None if queries.shape[0] == self.scores.shape[0] else queries

    @cached_property
    def vectors(self) -> torch.Tensor:
        """``[C, d]`` normalized candidate vectors in :attr:`compute_dtype` (``s = q . v``)."""
        source = self.embeddings if self.labels is not None else self.candidates
        return unit_rows(source.to(self.compute_dtype))

    def _masks(self, include_query: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        layout = self.layout
        if include_query and self.labels is not None:
            return self.labels.unsqueeze(0) == self.labels.unsqueeze(1), None
        return layout.positives, layout.candidate_mask

    def _recorded_forward(self, tau: float, include_query: bool) -> SmoothAPForward | None:
        record = self.record
        if record is None or record.forward is None or record.tau != tau:
            return None
        if self.labels is not None and record.include_query != include_query:
            return None
        return record.forward

    def known_forward(self, tau: float, include_query: bool = False) -> SmoothAPForward | None:
        """The groups and ranks at ``tau`` if already known (recorded or computed), else None."""
        recorded = self._recorded_forward(tau, include_query)
        if recorded is not None:
            return recorded
        terms = self._cache.get(("terms", tau, include_query))
        return None if terms is None else SmoothAPForward(*terms.forward)

    def smooth_ap_forward(self, tau: float, include_query: bool = False) -> SmoothAPForward:
        """Groups and ``(A, C)`` ranks at ``tau``: the loss's when it computed them, else those
        of :meth:`smooth_ap_terms` (its one sigmoid block; one sync for the group sizes)."""
        recorded = self._recorded_forward(tau, include_query)
        if recorded is not None:
            return recorded
        return SmoothAPForward(*self.smooth_ap_terms(tau, include_query).forward)

    def smooth_ap_terms(self, tau: float, include_query: bool = False) -> SmoothAPTerms:
        """SmoothAP, ``dAP/dS`` and the ``AD``/``CB`` terms from one sigmoid block (cached).

        :func:`gradlab.functional.diagnostics.smooth_ap_terms` of the step's scores: a query
        without a positive has NaN ``ad_term`` and ``cb_term`` rows (undefined, as the
        Monitor's summaries leave them out), where
        :func:`gradlab.functional.in_batch_decomposition` gives such a query zero terms and a
        NaN gradient; read the two alike by their defined rows."""
        key = ("terms", tau, include_query)
        if key not in self._cache:
            forward = self._recorded_forward(tau, include_query)
            positives, candidates = self._masks(include_query)
            # the step's own tensors: the unchecked core (the public function checks)
            self._cache[key] = diagnostics._smooth_ap_terms(
                self.scores,
                positives,
                tau,
                self.vectors,
                candidate_mask=candidates,
                forward=forward,
                buffer=lambda name, shape, dtype: self.buffer(f"{name} {key}", shape, dtype),
                column_weights_split=None if forward is None else self._recorded_split(tau),
            )
        return self._cache[key]

    def _recorded_split(self, tau: float) -> torch.Tensor | None:
        """The column weights the loss's backward recorded for the recorded call (whose tau and
        query convention the caller has matched), handed out once; ``None`` if there are none
        or they were computed otherwise (another tau, chunk size or dtype)."""
        recorded = self.loss_column_weights
        if recorded is None or recorded.split is None:
            return None
        split = recorded.split
        if (recorded.tau != tau or recorded.budget != DEFAULT_CHUNK_ELEMENTS
                or split.shape[1:] != self.scores.shape
                or split.dtype != self.scores.dtype):  # fmt: skip
            return None
        recorded.split = None  # smooth_ap_terms writes dAP/dS into it
        return split

    def smooth_ap_loss_grad(self, tau: float, include_query: bool = False) -> torch.Tensor:
        """``dL/dS`` ``[Q, C]`` of gradlab's ``1 - mean smooth AP`` at the step's scores.

        From :meth:`smooth_ap_terms` (the step's one sigmoid block): the mean runs over the
        queries with a positive, so ``dL/dS = -dAP/dS / (their number)``. No value is read.
        """
        key = ("loss grad", tau, include_query)
        if key not in self._cache:
            terms = self.smooth_ap_terms(tau, include_query)
            defined = (~torch.isnan(terms.ap)).sum().clamp(min=1)
            into = self.buffer(str(key), terms.score_grad.shape, terms.score_grad.dtype)
            # (-x) / d is x / (-d) bit for bit: one pass less
            self._cache[key] = torch.div(terms.score_grad, -defined, out=into)
        return self._cache[key]


_KEPT_FROM = 1 << 14
"""Buffers of at least this many entries come from the workspace (smaller ones cost no page
faults: the allocator's heap serves them again)."""

KEYED_SORT_FROM = 1 << 16
"""Score matrices of at least this many entries (B >= 256 in-batch) are sorted by integer keys
(:func:`float_order_keys`), and on a CPU searched by them, row by row: the same order and
counts as the floats', faster; smaller ones sort and search the floats."""

_KEY_TYPES = {torch.float32: (torch.int32, 0x7FFFFFFF), torch.float64: (torch.int64, 2**63 - 1)}


def float_order_keys(values: torch.Tensor) -> torch.Tensor | None:
    """Integers in the order of the floats ``values``: a (stable) sort of the keys is the sort
    of the floats, and a CPU sorts them about 1.3-1.5x faster.

    Floats of one sign order as their bits read as integers; a negative float's other bits
    are flipped so that the negatives run the other way. That is IEEE 754's ``totalOrder``
    (IEEE 754-2008, Sec. 5.10) except where ``torch.sort`` differs from it: ``-0.0`` and
    ``+0.0`` get one key (they tie), and every NaN, whatever its sign, the largest key (last).
    Equal floats get equal keys.

    Args:
        values: a float32 or float64 tensor, any shape, on any device.

    Returns:
        int32 keys for float32, int64 for float64, of ``values``' shape; None for other
        dtypes (sort those floats themselves).

    Example:
        >>> nan, inf = float("nan"), float("inf")
        >>> values = torch.tensor([0.5, -2.0, -0.0, nan, 0.0, -inf, -nan])
        >>> keys = float_order_keys(values)
        >>> keys.dtype, bool(keys[2] == keys[4]), bool(keys[3] == keys[6])  # -0 ties +0
        (torch.int32, True, True)
        >>> torch.equal(keys.sort(stable=True).indices, values.sort(stable=True).indices)
        True
        >>> float_order_keys(values.half()) is None
        True
    """
    if values.dtype not in _KEY_TYPES:
        return None
    integer, magnitude = _KEY_TYPES[values.dtype]
    bits = (values + 0.0).view(integer)  # + 0.0: -0.0 and +0.0 tie, as floats do
    key = bits ^ ((bits >> (bits.element_size() * 8 - 1)) & magnitude)  # negatives reversed
    return key.masked_fill_(torch.isnan(values), magnitude)


def _sorted_rows_on_cpu(
    scores: torch.Tensor, buffer
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(-scores).sort(dim=1, stable=True)`` of a float32 CPU matrix, 2-3x faster (same result),
    and the sorted rows' int32 order keys (the floats' order, as :func:`_float_keys` maps them).

    Each entry becomes one int64 ``(order key << 32) | column`` (the key of
    :func:`float_order_keys`): distinct, so NumPy's sort of the rows (vectorised on CPUs that
    have it; torch's CPU sort is not) leaves them in the stable order, and the sorted keys and
    columns are read back from the halves, the floats from the keys. The floats come back bit
    for bit, except that ``-0.0`` comes back as ``+0.0`` (they tie, and every count and
    difference taken of the sorted rows is the same for both) and a NaN as the NaN
    ``0x7FFFFFFF``. The keys are sorted as the floats' bits give them; a NaN's key lies past
    the infinities', found at an end of its sorted row (two reads of ``Q`` entries), and only
    then are the rows sorted again with every NaN's key the largest (NaN last, as in
    torch.sort): finite rows pay no pass for NaN. Every pass writes into the buffers
    ``buffer(name, shape, dtype)`` gives (:meth:`BatchView.buffer`): a fresh ``[Q, C]``
    temporary costs page faults.
    """
    rows, columns = scores.shape
    shape = (rows, columns)
    sorted_values = buffer("sorted_values", shape, torch.float32)  # the sorted floats
    order = buffer("sorted_order", shape, torch.int64)  # the sorted keys, then the order
    values, combined = _cpu_array(sorted_values), _cpu_array(order)
    spare = _scratch(buffer, "sort_spare", shape, torch.int32)
    key = _combined_keys(_cpu_array(scores.detach()), values, spare, combined)
    _sort_rows(combined)
    if rows and columns and (combined[:, 0].min() < _BELOW_KEYS
                             or combined[:, -1].max() > _ABOVE_KEYS):  # fmt: skip
        # a NaN (its key lies past the infinities'): sorted again, every NaN's key the largest
        nan = _scratch(buffer, "sort_nan", shape, torch.bool)
        _combined_keys(_cpu_array(scores.detach()), values, spare, combined, nan)
        _sort_rows(combined)
    high = 1 if sys.byteorder == "little" else 0  # the int32 half that holds the key
    sorted_keys = buffer("sorted_keys", shape, torch.int32)
    host_keys = _cpu_array(sorted_keys)
    np.copyto(host_keys, combined.view(np.int32)[:, high::2])
    _flip_into(host_keys, spare, key)  # the map is its own inverse
    np.bitwise_and(combined, 0xFFFFFFFF, out=combined)
    return sorted_values, order, sorted_keys


def _sorted_keys_on_cpu(scores: torch.Tensor, buffer) -> tuple[torch.Tensor, torch.Tensor]:
    """``(-scores).sort(dim=1).values`` of a float32 CPU matrix and the sorted rows' int32 order
    keys, without the order: :func:`_sorted_rows_on_cpu` for a step that reads no order.

    The int32 keys of the floats are sorted themselves (equal keys are equal floats, so any
    order of them is the sorted rows; NumPy's SIMD sort takes twice the int32 keys of int64 per
    register), about 2x faster than the combined keys' sort at B = 112; the floats come back
    from the keys, with ``-0.0`` as ``+0.0`` and a NaN as the NaN ``0x7FFFFFFF`` (a NaN's key
    lies past the infinities', found at an end of its row: only then are its keys made the
    largest and sorted again)."""
    rows, columns = scores.shape
    shape = (rows, columns)
    sorted_values = buffer("sorted_values", shape, torch.float32)
    sorted_keys = buffer("sorted_keys", shape, torch.int32)
    values, keys = _cpu_array(sorted_values), _cpu_array(sorted_keys)
    spare = _scratch(buffer, "sort_spare", shape, torch.int32)
    np.subtract(0.0, _cpu_array(scores.detach()), out=values)  # -s, and +0.0 for both zeros
    _flip_into(values.view(np.int32), spare, keys)
    _sort_rows(keys)
    if rows and columns and (keys[:, 0].min() < -_INFINITY_KEY - 1
                             or keys[:, -1].max() > _INFINITY_KEY):  # fmt: skip
        nan = _scratch(buffer, "sort_nan", shape, torch.bool)
        np.isnan(values, out=nan)
        _flip_into(values.view(np.int32), spare, keys)
        np.copyto(keys, _LARGEST_KEY, where=nan)  # NaN last, as in torch.sort
        _sort_rows(keys)
    _flip_into(keys, spare, values.view(np.int32))  # the map is its own inverse
    return sorted_values, sorted_keys


_HOST_TYPES = {torch.bool: np.bool_, torch.int32: np.int32, torch.int64: np.int64}


def _scratch(buffer, name: str, shape: tuple[int, ...], dtype: torch.dtype) -> np.ndarray:
    """A NumPy scratch array of the CPU paths below: ``buffer``'s (the workspace's, kept from
    one step to the next) from :data:`_KEPT_FROM` entries, as :meth:`BatchView.buffer` keeps
    them; a smaller one is a NumPy allocation (the heap serves it again, and no torch tensor is
    made only to be viewed)."""
    if math.prod(shape) < _KEPT_FROM:
        return np.empty(shape, dtype=_HOST_TYPES[dtype])
    return _cpu_array(buffer(name, shape, dtype))


_LARGEST_KEY = _KEY_TYPES[torch.float32][1]
_INFINITY_KEY = 0x7F800000
"""The order key of float32 ``+inf`` (its bits); ``-inf``'s is ``-_INFINITY_KEY - 1``."""
_BELOW_KEYS = (-_INFINITY_KEY - 1) << 32
_ABOVE_KEYS = (_INFINITY_KEY << 32) | 0xFFFFFFFF
"""Combined keys (:func:`_sorted_rows_on_cpu`) below the first or above the second hold a key
past an infinity's: a NaN's, before it is made the largest key."""


def _combined_keys(
    scores: np.ndarray,
    values: np.ndarray,
    spare: np.ndarray,
    combined: np.ndarray,
    nan: np.ndarray | None = None,
) -> np.ndarray:
    """Write ``(order key of -scores) << 32 | column`` into ``combined`` (int64, through the
    float32 ``values`` and int32 ``spare`` buffers) and return the keys (a view of
    ``values``). ``nan`` (a bool buffer): every NaN's key is the largest (NaN last, as in
    torch.sort); without it a NaN keeps the key its bits give, past the infinities'."""
    np.subtract(0.0, scores, out=values)  # -s, and +0.0 for both zeros: -0.0 and +0.0 tie
    key = values.view(np.int32)
    if nan is not None:
        np.isnan(values, out=nan)
    _flip_negatives(key, spare)
    if nan is not None:
        np.copyto(key, _LARGEST_KEY, where=nan)
    np.left_shift(key, 32, out=combined, dtype=np.int64)  # widened, then shifted
    np.bitwise_or(combined, np.arange(scores.shape[1], dtype=np.int64), out=combined)
    return key


def _sort_rows(rows: np.ndarray) -> None:
    """Sort each row of a C-contiguous ``[Q, C]`` integer array in place (ascending).

    NumPy's default sort (introsort, vectorised with AVX-512 or AVX2 where the CPU has them;
    torch's CPU sort is not): the step's combined keys carry their column and are distinct,
    and equal int32 keys are equal floats, so any correct sort leaves the same rows. At
    C = 1024, one thread, it sorts the combined int64 keys about 4x faster than sorting
    256-entry runs and merging them with the stable sort (2.1 ms against 8.1 ms with
    AVX-512; 4.5 ms against 11.1 ms with AVX2 only).
    """
    rows.sort(axis=1)


def _flip_negatives(key: np.ndarray, spare: np.ndarray) -> None:
    """``key ^= (key >> 31) & 0x7FFFFFFF`` in place, through ``spare``: float32 bits to integers
    in the floats' order (and back). Branch-free: a masked ``where=`` pass is ~25x slower."""
    _flip_into(key, spare, key)


def _flip_into(key: np.ndarray, spare: np.ndarray, out: np.ndarray) -> None:
    """``out = key ^ ((key >> 31) & 0x7FFFFFFF)`` (:func:`_flip_negatives` into ``out``)."""
    np.right_shift(key, 31, out=spare)
    np.bitwise_and(spare, _LARGEST_KEY, out=spare)
    np.bitwise_xor(key, spare, out=out)


def _largest_end(ordered: torch.Tensor) -> float:
    """The largest magnitude of the ascending rows of a CPU tensor, read at their ends (0 for
    no entry; NaN, sorted last, propagates)."""
    if ordered.numel() == 0:
        return 0.0
    rows = _cpu_array(ordered.detach())  # in place; the ends a NumPy view of it
    return float(np.abs(rows[:, :: max(rows.shape[1] - 1, 1)]).max())


def _rounds_back(largest: float, width: float, dtype: torch.dtype) -> bool:
    """Whether ``x - width`` can round back onto some ``x`` with ``|x| <= largest``: ``width``
    at most half an ulp of ``largest`` in ``dtype`` (NaN or inf: True)."""
    return not width > largest * torch.finfo(dtype).eps / 2


_BELOW_TWO = 1.999
"""Rows whose largest magnitude plus the width stays below this have every entry and every
shift below 2 in magnitude (the shifts round to within an ulp): their order keys lie in
``[-2^30, 2^30)`` (:func:`_row_sums_at_or_below`)."""


def _float_keys(values: torch.Tensor, buffer) -> torch.Tensor:
    """int32 keys in the order of the float32 CPU tensor ``values`` (the map of
    :func:`float_order_keys`): for floats without ``-0.0`` whose NaNs are the NaN
    ``0x7FFFFFFF`` (the sorted rows and their shifts) ``a <= b`` exactly when
    ``key(a) <= key(b)``, as NumPy compares floats."""
    keys = buffer("float keys", tuple(values.shape), torch.int32)
    spare = _scratch(buffer, "sort_spare", tuple(values.shape), torch.int32)
    _flip_into(_cpu_array(values.detach()).view(np.int32), spare, _cpu_array(keys))
    return keys


def _row_sums_at_or_below(
    keys: torch.Tensor, needles: torch.Tensor, buffer, within_two: bool = False
) -> torch.Tensor:
    """``[Q]`` int64: per row, the sum over the needles of ``#{j: keys_j <= needle}``, the row
    sums of ``searchsorted(keys, needles, side="right")``, for rows of int32 ``keys`` and
    ``needles`` that each ascend (the sorted rows and their shifts).

    One sort of each row's keys and needles merged (``2 key + 1`` for a needle, so a needle
    follows the keys equal to it): the ``k``-th needle lands at position ``p_k`` after the
    ``p_k - k`` keys at or below it. The sort is NumPy's default one (:func:`_sort_rows`;
    equal values cannot be told apart, so stable or not the sorted rows are the same). Each
    merged row is two ascending runs, which the stable sort (timsort) would merge in linear
    time, but the vectorised sort is faster at C = 112 (6x with AVX-512, 2.5x with AVX2 only)
    and, with AVX-512, at C = 1024 too (2.7 ms against 4.1 ms, one thread; with AVX2 only
    4.1 ms against 3.4 ms).

    The doubled keys fit in int32 when every key and needle lies in ``[-2^30, 2^30)`` (the
    order keys of floats below 2 in magnitude: cosine scores and their shifts): the rows are
    then merged as int32, about 25 % faster than as int64 at C = 1024 (half the memory), and
    the needles' positions summed in int32 while they fit; other keys (NaN, large logits) take
    int64. The counts are the same either way. The rows ascend, so the bounds are read from
    their first and last columns (without four passes over every entry), unless the caller
    knows them: ``within_two``, every key and needle is the order key of a float below 2 in
    magnitude.
    """
    rows, columns = keys.shape
    low, high = _cpu_array(keys), _cpu_array(needles)
    narrow = low.size > 0 and 3 * columns * columns < _NARROW_LIMIT and (within_two or all(
        -_NARROW_LIMIT // 2 <= int(bound) < _NARROW_LIMIT // 2
        for bound in (low[:, 0].min(), low[:, -1].max(), high[:, 0].min(), high[:, -1].max())
    ))  # fmt: skip
    dtype = torch.int32 if narrow else torch.int64
    merged = _scratch(buffer, "merged keys", (rows, 2 * columns), dtype)
    np.left_shift(low, 1, out=merged[:, :columns], dtype=merged.dtype)  # 2 key (widened)
    np.left_shift(high, 1, out=merged[:, columns:], dtype=merged.dtype)
    np.bitwise_or(merged[:, columns:], 1, out=merged[:, columns:])  # 2 needle + 1
    _sort_rows(merged)
    np.bitwise_and(merged, 1, out=merged)  # 1 where a needle landed
    # positions of a row's needles sum to less than 3 C^2 / 2: in int32 when narrow
    positions = np.einsum("ij,j->i", merged, np.arange(2 * columns, dtype=merged.dtype))
    return torch.from_numpy(positions.astype(np.int64) - columns * (columns - 1) // 2)


_NARROW_LIMIT = 1 << 31
"""int32's range: doubled keys and needles (plus 1), and sums of needle positions, below it
are merged and summed in int32 by :func:`_row_sums_at_or_below`."""


def _search_rows(
    ordered: torch.Tensor, needles: torch.Tensor, side: str, out: torch.Tensor | None = None
) -> torch.Tensor:
    """``torch.searchsorted(ordered, needles, side=side)`` of ``[Q, C]`` rows (int64, or int32
    from the NumPy path, written into ``out`` (int32) when given).

    A large float32 CPU matrix is searched row by row by NumPy, whose search starts from the
    previous needle's position when the needles ascend (they do here): about 1.5x faster.
    """
    if ordered.device.type != "cpu" or ordered.dtype not in (torch.float32, torch.int32) or (
        ordered.numel() < KEYED_SORT_FROM
    ):
        return torch.searchsorted(ordered, needles, side=side)
    # int32 (a row holds fewer than 2^31 entries): half the memory of the step's largest cache
    found = torch.empty(needles.shape, dtype=torch.int32) if out is None else out
    rows = zip(_cpu_array(ordered.detach()), _cpu_array(needles.detach()), _cpu_array(found),
               strict=True)  # fmt: skip
    for values, targets, into in rows:
        into[...] = np.searchsorted(values, targets, side=side)
    return found
