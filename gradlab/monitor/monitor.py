"""The Monitor: attach to any model and loss, log the gradient diagnostics while training runs.

Usage::

    monitor = gradlab.Monitor("runs/exp1", tau=0.01)
    loss_fn = monitor.watch(loss_fn)
    for x, y in loader:
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step(); optimizer.zero_grad()
        monitor.step()
    monitor.close()

On a step that no quantity's schedule selects, ``watch`` only calls the loss and ``step`` only
advances a counter. On a logged step the watched call keeps detached references to the batch and
hooks the embeddings to read (not change) their gradient; ``step`` computes every due quantity
under ``torch.no_grad()`` on the embeddings' device, stacks the scalars, moves them to the host
once and writes one record.
"""

from __future__ import annotations

import inspect
import json
import os
import platform
import time
import traceback
import warnings
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from gradlab._version import __version__
from gradlab.validation import (
    check_positive_finite,
    check_shape,
    check_tensor,
    skip_value_checks,
)
from gradlab.errors import GradlabError
from gradlab.functional.layouts import RetrievalLayout
from gradlab.functional.losses import recording
from gradlab.functional.score_losses import score_positives
from gradlab.monitor import lock
from gradlab.monitor.batch import BatchView, ScoreCapture
from gradlab.monitor.quantities import PRESETS, Quantity, WeightedGradientCounts
from gradlab.monitor.schedules import Schedule, default_schedule, every
from gradlab.monitor.sinks import SINKS, Sink


def _loss_kind(loss_fn: object) -> tuple[str | None, float | None]:
    """Recognize SmoothAP losses: ('exclude_query' | 'include_query', tau), else (None, None)."""
    from gradlab.losses import SmoothAPLoss

    if isinstance(loss_fn, SmoothAPLoss):
        return ("include_query" if loss_fn.include_query else "exclude_query"), loss_fn.tau
    if type(loss_fn).__name__ == "SmoothAPLoss" and hasattr(loss_fn, "temperature"):
        return "include_query", float(loss_fn.temperature)  # pytorch-metric-learning
    return None, None


DEFAULT_TAU = 0.01
"""The Monitor's tau when none is given and the watched loss is not SmoothAP."""

WATCH_INPUTS = ("embeddings", "scores")
"""What the first argument of a watched loss is."""

WATCH_FORMS = {
    "embeddings": "loss(embeddings [B, d], labels [B]) or loss(queries [Q, d], candidates "
    "[C, d], positives [Q, C] bool)",
    "scores": "loss(scores [Q, C], positives [Q, C] bool or labels [B] of a square batch)",
}


def _score_recorder_owner(loss_fn: object):
    """The object whose ``score_recorder`` a Monitor sets: a gradlab score-matrix loss, or the
    recording distance (gradlab.interop.pml) of a pytorch-metric-learning loss; else None."""
    for owner in (loss_fn, getattr(loss_fn, "distance", None)):
        if owner is not None and hasattr(owner, "score_recorder"):
            return owner
    return None


def _record_into(captured: list):
    """A ``score_recorder``: keep each recorded matrix and read its gradient with a hook."""

    def record(direction: str, scores: torch.Tensor, positives: torch.Tensor | None) -> None:
        # Copies: an optimizer may update a leaf score matrix in place before step() reads it.
        capture = ScoreCapture(direction, scores.detach().clone(), positives)
        if scores.requires_grad:
            scores.register_hook(_keep_into(capture))
        captured.append(capture)

    return record


def _keep_into(capture: ScoreCapture):
    def keep(grad: torch.Tensor) -> None:
        capture.grad = grad.detach().clone()  # read only: returning None keeps it as it is

    return keep


def _is_gradlab_smooth_ap(loss_fn: object) -> bool:
    from gradlab.losses import SmoothAPLoss

    return isinstance(loss_fn, SmoothAPLoss)


def _smooth_ap_capture(batch: BatchView) -> ScoreCapture:
    """The score matrix of a gradlab SmoothAP call: hooked in the graph when the loss recorded
    it (``batch.record``), else SmoothAP's exact ``dL/dS`` from the step's shared sigmoid block
    (:meth:`BatchView.smooth_ap_loss_grad`) when the step is logged. No value is read."""
    record = batch.record
    if record is not None:
        direction = "in_batch" if record.in_batch else "i2t"
        capture = ScoreCapture(direction, record.scores.detach(), record.positives,
                               record.candidate_mask)  # fmt: skip
        if record.scores.requires_grad:
            record.scores.register_hook(_keep_into(capture))
        return capture
    if batch.labels is None:
        return ScoreCapture("i2t", None, batch.positives, None, smooth_ap_tau=batch.loss_tau)
    positives = batch.labels.unsqueeze(0) == batch.labels.unsqueeze(1)
    candidates = None
    if batch.loss_kind != "include_query":
        positives.fill_diagonal_(False)
        candidates = torch.ones_like(positives).fill_diagonal_(False)
    return ScoreCapture("in_batch", None, positives, candidates, smooth_ap_tau=batch.loss_tau)


def _scalar(value: torch.Tensor) -> torch.Tensor:
    """A logged value as a 0-d float64 tensor; most already are (no op then: each op costs
    microseconds, and a logged step stacks dozens of values)."""
    if value.dim() == 0 and value.dtype == torch.float64:
        return value
    return value.reshape(()).to(torch.float64)


def _loss_name(loss_fn: object) -> str:
    return getattr(loss_fn, "__name__", None) or type(loss_fn).__name__


def _describe(values) -> str:
    parts = [f"{type(v).__name__}{list(v.shape) if isinstance(v, torch.Tensor) else ''}"
             for v in values]  # fmt: skip
    return f"{len(values)} tensor argument(s): ({', '.join(parts)})" if parts else "no tensor"


class Monitor:
    """Log SmoothAP gradient diagnostics during training (see the module docstring).

    Runs never merge: a ``log_dir`` that already holds a run (a file one of the sinks would
    append to) is refused unless ``resume=True`` (continue it: steps go on from its last
    record, and the new header records ``"resumed": {"from_step": ...}``) or ``overwrite=True``
    (its files are removed when the first record is written). This is the choice of Hugging
    Face's ``Trainer(overwrite_output_dir=...)`` and W&B's ``resume=``: nothing is appended
    silently, and the run is where you asked for it. One Monitor writes into a folder at a
    time: the first write claims it with an exclusive lock file (``.gradlab.lock``, released by
    :meth:`close`), so a second Monitor on the same folder, even a new one, is refused with a
    :class:`GradlabError` (at construction if the first already wrote, else at its own first
    write) instead of interleaving records. A lock left by a crashed process (its process id
    no longer alive on this host) is stale and taken over (see :mod:`gradlab.monitor.lock`).

    Args:
        log_dir: folder of the run; created at the first record if missing.
        tau: temperature used by the diagnostics (operating region, decomposition, counts).
            ``None`` (the default): the tau of the watched SmoothAP loss (gradlab's or
            pytorch-metric-learning's ``temperature``), else ``DEFAULT_TAU`` (0.01). Given
            explicitly and different from the watched SmoothAP loss's tau, it is kept and a
            ``UserWarning`` names both once. The header's ``config`` records the tau used
            (``"tau"``) and where it came from (``"tau_from"``).
        every: a schedule for every quantity: an int ``n`` (every n steps) or a ``step -> bool``
            callable. ``None``: for a preset, :func:`~gradlab.monitor.schedules.default_schedule`
            (steps 0-9, every 10 up to 200, then every 50); for explicit ``quantities``, each
            one's own schedule. The last step is also logged at :meth:`close` if its schedule
            skipped it (with the quantities that need no gradient), so short runs are visible.
        preset: ``"cheap"``, ``"default"`` or ``"full"`` (ignored when ``quantities`` is given).
        quantities: explicit :class:`Quantity` instances.
        sinks: names from ``gradlab.monitor.sinks.SINKS`` or :class:`Sink` instances.
        strict: raise a quantity's error instead of reporting it once and disabling it.
        distributed: ``"auto"`` computes on the global batch (all-gather) when
            ``torch.distributed`` is initialized, and only rank 0 writes; ``"local"`` never
            gathers.
        config: extra JSON-ready settings stored in the header record.
        resume: continue the run in ``log_dir`` (from the step after its last record).
        overwrite: replace the run in ``log_dir``.

    Raises:
        GradlabError: ``log_dir`` is a file, or cannot be created, or holds a run and neither
            ``resume`` nor ``overwrite`` is set; any other invalid option.
    """

    def __init__(
        self,
        log_dir: str | Path,
        tau: float | None = None,
        *,
        every: int | Schedule | None = None,
        preset: str = "default",
        quantities: Sequence[Quantity] | None = None,
        sinks: Sequence[str | Sink] = ("jsonl",),
        strict: bool = False,
        distributed: str = "auto",
        config: dict | None = None,
        resume: bool = False,
        overwrite: bool = False,
    ) -> None:
        self.log_dir = _check_log_dir(log_dir)
        options = _check_options(tau=tau, every=every, preset=preset, quantities=quantities,
                                 sinks=sinks, strict=strict, distributed=distributed,
                                 config=config, resume=resume, overwrite=overwrite)  # fmt: skip
        self._tau_given = tau is not None
        self.tau = options["tau"] if tau is not None else DEFAULT_TAU
        schedule = options["every"]
        if quantities is None:
            quantities = [cls(schedule or default_schedule()) for cls in PRESETS[preset]]
        elif schedule is not None:
            for quantity in quantities:
                quantity.schedule = schedule
        self.quantities = list(quantities)
        self.sinks = [_sink(sink) for sink in options["sinks"]]
        self.distributed = distributed
        self.strict = strict
        self.config = {"tau": self.tau, "tau_from": "argument" if self._tau_given else "default",
                       "preset": preset, **(config or {})}  # fmt: skip
        self.step_count = 0
        self.disabled: dict[str, str] = {}
        self._pending: BatchView | None = None
        self._last_call: tuple | None = None  # the last watched call, for close()
        self._opened = False
        self._closed = False
        self._lock_token: str | None = None
        if self.log_dir.is_dir() and _is_rank_zero():  # only rank 0 writes (and claims)
            lock.refuse_if_in_use(self.log_dir)  # a live Monitor writes there
        self._previous_run = self._check_previous_run(resume, overwrite)

    def _check_previous_run(self, resume: bool, overwrite: bool) -> dict:
        """Refuse, resume or mark for overwrite a run already in ``log_dir`` (never merge)."""
        files = sorted({path for sink in self.sinks for path in sink.existing(self.log_dir)})
        if not files:
            return {}
        names = [path.name for path in files]
        if overwrite:
            return {"overwrite": files}
        if not resume:
            raise GradlabError(
                f"log_dir {str(self.log_dir)!r} already holds a run ({', '.join(names)}); "
                "pass resume=True to continue it, overwrite=True to replace it, "
                "or choose a new log_dir"
            )
        steps = [sink.last_step(self.log_dir) for sink in self.sinks]
        known = [step for step in steps if step is not None]
        blind = [type(sink).__name__ for sink in self.sinks
                 if sink.existing(self.log_dir) and type(sink).last_step is Sink.last_step]
        if blind and not known:
            raise GradlabError(
                f"resume=True needs the last step of the run in log_dir {str(self.log_dir)!r}, "
                f"which {', '.join(blind)} cannot read back; add the 'jsonl' sink"
            )
        self.step_count = max(known) + 1 if known else 0
        return {"resumed": {"from_step": self.step_count, "files": names}}

    # --- hooks into the user's code ------------------------------------------------------------

    _watch_inputs = "embeddings"  # of the last watch(); class defaults, set per instance there
    not_logged: dict[str, str] = {}  # noqa: RUF012  (quantity -> why it cannot apply; replaced)
    skipped_calls = 0  # loss calls the Monitor could not read
    _watched = False  # whether watch() was called (attach() then keeps its explanations)

    def watch(self, loss_fn: Callable, inputs: str = "embeddings") -> Callable:
        """Wrap ``loss_fn``: the wrapper returns the loss unchanged and never alters gradients.

        Args:
            loss_fn: the loss, any callable. With ``inputs="embeddings"`` it is called as
                ``loss_fn(embeddings, labels)`` or ``loss_fn(queries, candidates, positives)``;
                with ``inputs="scores"`` as ``loss_fn(scores, positives)`` on a ``[Q, C]`` score
                matrix, ``positives`` a ``[Q, C]`` bool mask or ``[B]`` labels of a square
                paired batch (rows: images, columns: captions). Keyword arguments are passed
                through; tensors among them are read after the positional ones.
            inputs: ``"embeddings"`` or ``"scores"``.

        The anatomy (:class:`~gradlab.monitor.anatomy.Anatomy`) reads ``dL/dS`` with a hook
        on the score matrix: the ``scores`` argument (``inputs="scores"``); the matrix of each
        direction of gradlab's score-matrix losses; the matrix a pytorch-metric-learning loss
        computes through :mod:`gradlab.interop.pml`'s recording distance; for gradlab's
        ``SmoothAPLoss``, SmoothAP's exact ``dL/dS`` at the step's scores. For any other loss
        the anatomy is not logged and the run header says why (``"not_logged"``), as for every
        other quantity that cannot apply to the watched loss.

        A call whose arguments the Monitor cannot read (one argument, a non-tensor, wrong
        shapes) still returns the loss; it is reported once with a ``RuntimeWarning`` and not
        logged (``strict=True`` raises a :class:`GradlabError` instead).

        Raises:
            GradlabError: ``loss_fn`` is not callable or ``inputs`` is not allowed.
        """
        if not callable(loss_fn):
            raise GradlabError(
                "loss_fn must be callable (a loss module or function); got "
                f"{type(loss_fn).__name__} {loss_fn!r}"
            )
        if inputs not in WATCH_INPUTS:
            raise GradlabError(f"inputs must be one of {WATCH_INPUTS}; got {inputs!r}")
        kind, loss_tau = _loss_kind(loss_fn)
        self._adopt_tau(loss_fn, loss_tau)
        recorder = _score_recorder_owner(loss_fn)
        self._watch_inputs = inputs
        self._watched = True
        self._explain_not_logged(loss_fn, inputs, recorder, kind)

        def watched(*args, **kwargs):
            logging = self._logging_now()
            captured: list[ScoreCapture] = []
            if logging and recorder is not None and self._wants_score_grad():
                recorder.score_recorder = _record_into(captured)
            records: list = []
            try:
                if logging:  # gradlab's SmoothAP records its scores and ranks for the quantities
                    with recording() as records:
                        loss = loss_fn(*args, **kwargs)
                else:
                    loss = loss_fn(*args, **kwargs)
            finally:
                if recorder is not None:
                    recorder.score_recorder = None
            self._last_call = (self.step_count, args, loss, kind, loss_tau, loss_fn, kwargs)
            if logging:
                self._capture(args, loss, kind, loss_tau, kwargs=kwargs, inputs=inputs,
                              captured=captured, loss_fn=loss_fn,
                              loss_record=records[-1] if records else None)  # fmt: skip
            return loss

        watched.__wrapped__ = loss_fn
        return watched

    def _adopt_tau(self, loss_fn: object, loss_tau: float | None) -> None:
        """Take the watched SmoothAP loss's tau when none was given; warn once if they differ."""
        if loss_tau is None or loss_tau == self.tau:
            return
        if not self._tau_given and not self._opened:
            self.tau = float(loss_tau)
            self.config.update(tau=self.tau, tau_from=f"watched loss {_loss_name(loss_fn)}")
            return
        if not self._tau_warned:
            self._tau_warned = True
            warnings.warn(
                f"gradlab.Monitor: tau={self.tau} differs from the watched loss "
                f"{_loss_name(loss_fn)}'s tau={loss_tau}; the diagnostics (P, widths, counts, "
                f"decomposition) use tau={self.tau}. Leave the Monitor's tau out to use the "
                "loss's",
                UserWarning,
                stacklevel=3,
            )

    _tau_warned = False

    def attach(self, module: torch.nn.Module, labels: torch.Tensor | Callable[[], torch.Tensor]):
        """Forward hook on ``module`` (its output are the embeddings); ``labels`` a tensor or a
        zero-argument callable giving the current batch's labels. Returns the hook handle.

        The hook never breaks training: output it cannot read is reported once (see
        :meth:`watch`). Without the loss, the anatomy and gradient agreement are not logged.
        """
        if not isinstance(module, torch.nn.Module):
            raise GradlabError(
                f"module must be a torch.nn.Module; got {type(module).__name__} {module!r}"
            )
        if not (isinstance(labels, torch.Tensor) or callable(labels)):
            raise GradlabError(
                "labels must be a tensor or a zero-argument callable returning one; got "
                f"{type(labels).__name__} {labels!r}"
            )
        if not self._watched:  # a watched loss tells more than the embeddings alone
            self._explain_not_logged(None, "attach", None, None)

        def hook(_module, _inputs, output):
            if self._logging_now():
                current = labels() if callable(labels) else labels
                self._capture((output, current), None, None, None, inputs="embeddings")

        return module.register_forward_hook(hook)

    def _logging_now(self) -> bool:
        step = self.step_count
        return any(q.should_compute(step) for q in self.quantities if q.name not in self.disabled)

    def _capture(
        self, args, loss, kind, loss_tau, *, kwargs=None, inputs=None, captured=(), loss_fn=None,
        loss_record=None,
    ) -> None:
        """Keep the batch of a logged step (detached) and hook the gradients to read."""
        inputs = inputs or self._watch_inputs
        tensors = [*args, *(v for v in (kwargs or {}).values() if isinstance(v, torch.Tensor))]
        try:
            batch = self._interpret(tensors, loss, kind, loss_tau, inputs)
            if inputs == "embeddings":
                batch.loss_record = loss_record  # BatchView checks that it matches the layout
            self._hook_scores(batch, tensors[0], inputs, list(captured), loss_fn)
        except Exception as error:
            if self.strict:
                raise GradlabError(f"Monitor cannot read this loss call: {error}") from error
            self._skip_call(error)
            return
        embeddings = tensors[0]
        if (inputs == "embeddings" and embeddings.requires_grad
                and any(q.needs_grad for q in self.quantities)):  # fmt: skip

            def keep_gradient(grad, batch=batch):
                batch.embedding_grad = grad.detach()  # read only: returning None keeps grad as is

            embeddings.register_hook(keep_gradient)
        self._pending = batch

    def _interpret(self, tensors, loss, kind, loss_tau, inputs) -> BatchView:
        """The BatchView of a call (positional arguments, then tensor keyword arguments), or a
        GradlabError saying why the call cannot be read."""
        expected = WATCH_FORMS[inputs]
        if len(tensors) < 2 or not all(isinstance(t, torch.Tensor) for t in tensors[:3]):
            raise GradlabError(f"expected {expected}; got {_describe(tensors)}")
        first = tensors[0]
        if first.dim() != 2 or not first.is_floating_point():
            raise GradlabError(f"expected {expected}; got {_describe(tensors)}")
        batch = BatchView(
            embeddings=first.detach(),
            loss=None if loss is None else loss.detach(),
            tau=self.tau,
            loss_kind=kind,
            loss_tau=loss_tau,
        )
        if inputs == "scores":
            mask = score_positives(batch.embeddings, tensors[1])
            batch.positives = mask
            # The score matrix is the layout: P, counts and the relaxation gap read it directly.
            batch.__dict__["layout"] = RetrievalLayout(batch.embeddings, mask, None)
        elif len(tensors) >= 3:
            check_tensor("candidates", tensors[1], ndims=(2,), kind="float")
            check_tensor("positives", tensors[2], ndims=(2,), kind="bool")
            check_shape("positives", tensors[2], (first.shape[0], tensors[1].shape[0]), "[Q, C]")
            batch.candidates, batch.positives = tensors[1].detach(), tensors[2]
        else:
            check_tensor("labels", tensors[1], ndims=(1,), kind="integer")
            check_shape("labels", tensors[1], first.shape[:1], "one label per embedding")
            batch.labels = tensors[1]
        return batch

    def _hook_scores(self, batch, first, inputs, captured, loss_fn) -> None:
        """Collect the score matrices whose ``dL/dS`` the anatomy reads (hooks only read)."""
        if not self._wants_score_grad():
            return
        if inputs == "scores" and not captured:
            capture = ScoreCapture("both", batch.embeddings.clone(), batch.positives)
            if first.requires_grad:
                first.register_hook(_keep_into(capture))
            captured = [capture]
        elif inputs == "embeddings" and batch.labels is not None:
            size = batch.labels.shape[0]
            captured = [c for c in captured if tuple(c.scores.shape) == (size, size)][:1]
            for capture in captured:  # a recording distance: in-batch, the query not a candidate
                capture.direction = "in_batch"
                capture.positives = batch.layout.positives
                capture.candidates = batch.layout.candidate_mask
        if not captured and _is_gradlab_smooth_ap(loss_fn):
            captured = [_smooth_ap_capture(batch)]
        batch.score_captures = captured

    def _wants_score_grad(self) -> bool:
        return any(getattr(q, "needs_score_grad", False) and q.name not in self.disabled
                   for q in self.quantities)  # fmt: skip

    def _skip_call(self, error: Exception) -> None:
        """Report the first unreadable call; count all of them."""
        self.skipped_calls += 1
        if self.skipped_calls == 1:
            warnings.warn(
                f"gradlab.Monitor: a loss call it cannot read was not logged ({error}); "
                "training goes on, later such calls are skipped silently "
                "(strict=True raises instead)",
                RuntimeWarning,
                stacklevel=4,
            )

    def _explain_not_logged(self, loss_fn, inputs, recorder, kind) -> None:
        """Say in the header why a quantity cannot apply to the watched loss, and skip it."""
        name = "attach()" if inputs == "attach" else f"the watched loss {_loss_name(loss_fn)}"
        reasons = {}
        if inputs == "scores":
            for quantity in ("embedding_norm", "embedding_grad_norm", "decomposition"):
                reasons[quantity] = (
                    "needs the embeddings; the loss is watched on a score matrix (inputs='scores')"
                )
            reasons["gradient_agreement"] = (
                "needs embeddings and a SmoothAP loss; the loss is watched on a score matrix"
            )
            needs_vectors = (
                "needs the embeddings (SmoothAP's shared ranks and terms are computed from "
                "them); the loss is watched on a score matrix (inputs='scores')"
            )
            reasons["relaxation_gap"] = needs_vectors
            if any(isinstance(q, WeightedGradientCounts) for q in self.quantities):
                reasons["gradient_counts"] = needs_vectors
        elif kind is None:
            reasons["gradient_agreement"] = (
                "compares the backpropagated gradient with SmoothAP's analytic one; "
                f"{name} is not SmoothAP"
            )
        if inputs == "attach":
            reasons["anatomy"] = (
                "needs dL/dS of the loss's score matrix; attach() sees the embeddings only "
                "(use monitor.watch(loss_fn))"
            )
        elif inputs == "embeddings" and recorder is None and not _is_gradlab_smooth_ap(loss_fn):
            reasons["anatomy"] = (
                f"needs dL/dS of a score matrix; {name} takes embeddings and exposes none. "
                "Watch a loss written on a score matrix with inputs='scores', use gradlab's "
                "losses, or give a pytorch-metric-learning loss "
                "distance=gradlab.interop.pml.RecordingCosineSimilarity()"
            )
        present = {q.name for q in self.quantities}
        for quantity in list(self.not_logged):
            self.disabled.pop(quantity, None)
        self.not_logged = {q: why for q, why in reasons.items() if q in present}
        self.disabled.update(self.not_logged)

    # --- the step ------------------------------------------------------------------------------

    def step(self) -> dict | None:
        """Close the optimizer step: compute and write the due quantities. Returns the record."""
        if self._closed:
            raise GradlabError("monitor.step() called after close()")
        step, batch = self.step_count, self._pending
        self._pending = None
        self.step_count += 1
        if batch is None:  # nothing captured (off schedule): no schedule to ask, O(1)
            return None
        due = [q for q in self.quantities if q.name not in self.disabled and q.should_compute(step)]
        if not due:
            return None
        return self._record(step, batch, due)

    def _record(self, step: int, batch: BatchView, due: list[Quantity]) -> dict | None:
        """Compute ``due`` on ``batch`` (global under torch.distributed), write the record."""
        batch = self._globalize(batch)
        if self._last_call is not None:  # a count kept by the watched loss (SmoothAPLoss)
            batch.degenerate_batches = getattr(self._last_call[5], "degenerate_batches", None)
        values: dict[str, torch.Tensor] = {}
        # The step's sort keeps ties in column order only for a quantity that reads the order.
        batch.ties_by_column = any(getattr(q, "needs_ranked_order", False) for q in due)
        # No value is read back while computing (finite by construction: skip_value_checks);
        # the stacked scalars cross to the host once, below.
        with torch.no_grad(), skip_value_checks():
            for quantity in due:
                try:
                    values.update(quantity.compute(batch))
                except Exception as error:
                    if self.strict:
                        raise
                    self._disable(quantity, error)
        if not _is_rank_zero():
            return None
        record = {"step": step}
        if values:
            names = list(values)
            stacked = torch.stack([_scalar(values[name]) for name in names])
            record.update(zip(names, stacked.tolist(), strict=True))  # the one transfer
        self._open(batch.embeddings.device)
        for sink in self.sinks:
            sink.write(record)
        return record

    def _disable(self, quantity: Quantity, error: Exception) -> None:
        message = "".join(traceback.format_exception(error))
        self.disabled[quantity.name] = message
        warnings.warn(
            f"gradlab.Monitor: quantity {quantity.name!r} raised and is disabled "
            f"(strict=True raises instead):\n{message}",
            RuntimeWarning,
            stacklevel=4,  # the caller of step() (_disable <- _record <- step <- user)
        )

    def _globalize(self, batch: BatchView) -> BatchView:
        """Under torch.distributed, the batch of every rank (detached tensors all-gathered)."""
        if self.distributed != "auto" or not _distributed_ready():
            return batch
        gathered = BatchView(
            embeddings=_all_gather_rows(batch.embeddings),
            labels=None if batch.labels is None else _all_gather_rows(batch.labels),
            candidates=batch.candidates,
            positives=batch.positives,
            tau=batch.tau,
            loss_kind=batch.loss_kind,
            loss_tau=batch.loss_tau,
        )
        if batch.embedding_grad is not None:
            gathered.embedding_grad = _all_gather_rows(batch.embedding_grad)
        gathered.score_captures = batch.score_captures  # anatomy: this rank's score matrices
        if batch.loss is not None:
            loss = batch.loss.clone().to(torch.float64)
            torch.distributed.all_reduce(loss)
            gathered.loss = loss / torch.distributed.get_world_size()
        return gathered

    def _open(self, device: torch.device | None) -> None:
        if self._opened:
            return
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._claim()
        for path in self._previous_run.get("overwrite", ()):
            path.unlink(missing_ok=True)
        header = {
            "gradlab": __version__,
            "torch": torch.__version__,
            "python": platform.python_version(),
            "device": str(device) if device is not None else None,
            "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "quantities": [q.name for q in self.quantities],
            "config": self.config,
        }
        if self.not_logged:  # quantities that cannot apply to the watched loss, and why
            header["not_logged"] = dict(self.not_logged)
        if "resumed" in self._previous_run:
            header["resumed"] = self._previous_run["resumed"]
        if "overwrite" in self._previous_run:
            header["overwrote"] = [path.name for path in self._previous_run["overwrite"]]
        if device is not None and device.type == "cuda":
            header["device_name"] = torch.cuda.get_device_name(device)
        for sink in self.sinks:
            sink.open(self.log_dir, header)
        self._opened = True

    def _claim(self) -> None:
        """Claim ``log_dir`` exclusively (:mod:`gradlab.monitor.lock`) before the first write;
        refuse when another Monitor holds it, or wrote a run there since this one was made."""
        self._closed = True  # a refused Monitor writes nothing, not even at close()
        self._lock_token = lock.acquire(self.log_dir)
        appeared = sorted({p.name for sink in self.sinks for p in sink.existing(self.log_dir)})
        if not self._previous_run and appeared:
            self._release()
            raise GradlabError(
                f"log_dir {str(self.log_dir)!r} already holds a run ({', '.join(appeared)}), "
                "written by another Monitor since this one was created; runs never merge: "
                "pass resume=True to continue it, overwrite=True to replace it, "
                "or choose a new log_dir"
            )
        self._closed = False
        self._unclaim = weakref.finalize(self, lock.release, self.log_dir, self._lock_token)

    def _release(self) -> None:
        if self._lock_token is not None:
            lock.release(self.log_dir, self._lock_token)
            self._lock_token = None

    def close(self, log_last_step: bool = True) -> None:
        """Log the last step if its schedule skipped it, then flush and close every sink.

        The last step's record holds the quantities that need no gradient (off-schedule steps
        keep no gradient). Writes the header if nothing was logged. Under torch.distributed
        every rank must call ``close`` (the last step is gathered like any other), or pass
        ``log_last_step=False`` (as leaving a ``with`` block by an exception does).
        """
        if self._closed:
            return
        try:
            if log_last_step:
                self._log_last_step()
        finally:
            if _is_rank_zero():
                try:
                    self._open(None)
                    for sink in self.sinks:
                        sink.close()
                finally:
                    self._release()
            self._closed = True

    def _log_last_step(self) -> None:
        """Write the last closed step if the schedules skipped it (quantities without gradient).

        ``self._last_call`` is ``(step, args, loss, kind, loss_tau, loss_fn, kwargs)``, kept by
        the watched loss on every call (references only: no copy, no sync).
        """
        if self._last_call is None:
            return
        step, args, loss, kind, loss_tau, loss_fn, kwargs = self._last_call
        enabled = [q for q in self.quantities if q.name not in self.disabled]
        if step != self.step_count - 1 or any(q.should_compute(step) for q in enabled):
            return  # the last watched call was logged already (or its step never closed)
        due = [q for q in enabled if not q.needs_grad]
        if not due or not args or not isinstance(args[0], torch.Tensor):
            return
        self._capture(args, loss, kind, loss_tau, kwargs=kwargs, loss_fn=loss_fn)
        batch, self._pending = self._pending, None
        if batch is not None:
            self._record(step, batch, due)

    def __enter__(self) -> Monitor:
        return self

    def __exit__(self, exc_type, *exc_info) -> None:
        self.close(log_last_step=exc_type is None)


def _check_options(
    *,
    tau: object = None,
    every: object = None,
    preset: object = "default",
    quantities: object = None,
    sinks: object = ("jsonl",),
    strict: object = False,
    distributed: object = "auto",
    config: object = None,
    resume: object = False,
    overwrite: object = False,
) -> dict:
    """Check the values of :class:`Monitor`'s options (all but ``log_dir``); the one check shared
    by ``Monitor`` and :class:`gradlab.integrations.lightning.GradlabCallback`, so a bad value
    is refused where it is given. Returns ``tau`` (or ``None``), ``every`` as a schedule (or
    ``None``) and ``sinks`` as a list.

    Raises:
        GradlabError: naming the option, the value received and what is allowed.
    """
    if tau is not None:
        tau = check_positive_finite("tau", tau)
    schedule = None if every is None else _schedule(every)
    if quantities is None:
        if not isinstance(preset, str) or preset not in PRESETS:
            raise GradlabError(f"preset must be one of {sorted(PRESETS)}; got {preset!r}")
    elif isinstance(quantities, (str, Quantity)) or not isinstance(quantities, Sequence) or \
            not all(isinstance(q, Quantity) for q in quantities):  # fmt: skip
        raise GradlabError(f"quantities must be a list of Quantity instances; got {quantities!r}")
    sink_list = _sink_list(sinks)
    for name, value in (("strict", strict), ("resume", resume), ("overwrite", overwrite)):
        if not isinstance(value, bool):
            raise GradlabError(f"{name} must be True or False; got {value!r}")
    if resume and overwrite:
        raise GradlabError("resume=True and overwrite=True exclude each other; choose one")
    if distributed not in ("auto", "local"):
        raise GradlabError(f"distributed must be 'auto' or 'local'; got {distributed!r}")
    _check_config(config)
    return {"tau": tau, "every": schedule, "sinks": sink_list}


def _check_config(config: object) -> None:
    """``config`` is None or a dict with string keys whose values JSON can write."""
    if config is None:
        return
    if not isinstance(config, dict):
        raise GradlabError(f"config must be a dict of JSON-ready settings; got {config!r}")
    for key, value in config.items():
        if not isinstance(key, str):
            raise GradlabError(f"config keys must be strings; got key {key!r}")
        try:
            json.dumps(value)
        except (TypeError, ValueError) as error:
            raise GradlabError(
                f"config must hold JSON-ready values (numbers, strings, bools, None, lists, "
                f"dicts); config[{key!r}] is {type(value).__name__} {value!r} ({error})"
            ) from None


def _schedule(value: object) -> Schedule:
    """``every`` as a schedule: a positive int n (every n steps) or a ``step -> bool`` callable
    that accepts one positional argument (checked on its signature, not called)."""
    allowed = "a positive integer n (every n steps) or a callable step -> bool"
    if callable(value) and not isinstance(value, type):
        try:
            signature = inspect.signature(value)
        except (TypeError, ValueError):
            return value  # no signature to read (some builtins): accepted as it is
        try:
            signature.bind(0)
        except TypeError:
            raise GradlabError(
                f"every must be {allowed} taking one argument (the step); got {value!r} with "
                f"signature {signature}"
            ) from None
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise GradlabError(f"every must be {allowed}; got {value!r}")
    return every(value)


def _sink_list(sinks: object) -> list:
    """``sinks`` as a list: one name or Sink is one sink; every entry a known name or a Sink."""
    if isinstance(sinks, (str, Sink)):
        sinks = [sinks]
    if not isinstance(sinks, (list, tuple)):
        raise GradlabError(
            f"sinks must be a sink name, a Sink, or a list of them (names: {sorted(SINKS)}); "
            f"got {sinks!r}"
        )
    for value in sinks:
        if not isinstance(value, Sink) and (not isinstance(value, str) or value not in SINKS):
            raise GradlabError(
                f"sinks must name one of {sorted(SINKS)} or be Sink instances; got {value!r}"
            )
    return list(sinks)


def _sink(value: str | Sink) -> Sink:
    return value if isinstance(value, Sink) else SINKS[value]()


def _distributed_ready() -> bool:
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def _is_rank_zero() -> bool:
    return not _distributed_ready() or torch.distributed.get_rank() == 0


def _all_gather_rows(tensor: torch.Tensor) -> torch.Tensor:
    """Concatenate ``tensor`` over ranks along dim 0 (batches may differ in size)."""
    world = torch.distributed.get_world_size()
    size = torch.tensor([tensor.shape[0]], device=tensor.device)
    sizes = [torch.zeros_like(size) for _ in range(world)]
    torch.distributed.all_gather(sizes, size)
    largest = int(max(s.item() for s in sizes))
    padded = torch.zeros((largest, *tensor.shape[1:]), dtype=tensor.dtype, device=tensor.device)
    padded[: tensor.shape[0]] = tensor
    parts = [torch.zeros_like(padded) for _ in range(world)]
    torch.distributed.all_gather(parts, padded)
    return torch.cat([part[: int(s.item())] for part, s in zip(parts, sizes, strict=True)])


def _check_log_dir(log_dir: object) -> Path:
    """``log_dir`` as a Path: an existing folder, or a path where one can be created."""
    if not isinstance(log_dir, (str, os.PathLike)) or str(log_dir) == "":
        raise GradlabError(f"log_dir must be a folder path (str or os.PathLike); got {log_dir!r}")
    path = Path(log_dir)
    if path.exists() and not path.is_dir():
        raise GradlabError(
            f"log_dir must be a folder or a path where one can be created; got {str(path)!r}, "
            "which is an existing file"
        )
    ancestor = path
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise GradlabError(
            f"log_dir must be a folder or a path where one can be created; got {str(path)!r}, "
            f"but {str(ancestor)!r} is a file"
        )
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise GradlabError(
            f"log_dir must be a folder or a path where one can be created; got {str(path)!r}, "
            f"but {str(ancestor)!r} is not writable"
        )
    return path
