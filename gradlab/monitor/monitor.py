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

import os
import platform
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

import gradlab
from gradlab._validation import check_positive_finite
from gradlab.errors import GradlabError
from gradlab.monitor.batch import BatchView
from gradlab.monitor.quantities import PRESETS, Quantity
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


class Monitor:
    """Log SmoothAP gradient diagnostics during training (see the module docstring).

    Runs never merge: a ``log_dir`` that already holds a run (a file one of the sinks would
    append to) is refused unless ``resume=True`` (continue it: steps go on from its last
    record, and the new header records ``"resumed": {"from_step": ...}``) or ``overwrite=True``
    (its files are removed when the first record is written). This is the choice of Hugging
    Face's ``Trainer(overwrite_output_dir=...)`` and W&B's ``resume=``: nothing is appended
    silently, and the run is where you asked for it.

    Args:
        log_dir: folder of the run; created at the first record if missing.
        tau: temperature used by the diagnostics (operating region, decomposition, counts).
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
        tau: float = 0.01,
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
        self.tau = check_positive_finite("tau", tau)
        if quantities is None:
            if preset not in PRESETS:
                raise GradlabError(f"preset must be one of {sorted(PRESETS)}; got {preset!r}")
            schedule = _schedule(every) if every is not None else default_schedule()
            quantities = [cls(schedule) for cls in PRESETS[preset]]
        elif every is not None:
            for quantity in quantities:
                quantity.schedule = _schedule(every)
        self.quantities = list(quantities)
        self.sinks = [_sink(sink) for sink in sinks]
        if distributed not in ("auto", "local"):
            raise GradlabError(f"distributed must be 'auto' or 'local'; got {distributed!r}")
        self.distributed = distributed
        self.strict = strict
        self.config = {"tau": self.tau, "preset": preset, **(config or {})}
        self.step_count = 0
        self.disabled: dict[str, str] = {}
        self._pending: BatchView | None = None
        self._last_call: tuple | None = None  # (step, args, loss, kind, tau, loss_fn) of a watch
        self._opened = False
        self._closed = False
        self._previous_run = self._check_previous_run(resume, overwrite)

    def _check_previous_run(self, resume: bool, overwrite: bool) -> dict:
        """Refuse, resume or mark for overwrite a run already in ``log_dir`` (never merge)."""
        for name, value in (("resume", resume), ("overwrite", overwrite)):
            if not isinstance(value, bool):
                raise GradlabError(f"{name} must be True or False; got {value!r}")
        if resume and overwrite:
            raise GradlabError("resume=True and overwrite=True exclude each other; choose one")
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

    def watch(self, loss_fn: Callable) -> Callable:
        """Wrap ``loss_fn`` (``(embeddings, labels)`` or ``(queries, candidates, positives)``).

        Returns a callable that returns the loss unchanged and never alters gradients.
        """
        kind, loss_tau = _loss_kind(loss_fn)

        def watched(*args, **kwargs):
            loss = loss_fn(*args, **kwargs)
            self._last_call = (self.step_count, args, loss, kind, loss_tau, loss_fn)  # close()
            if self._logging_now() and args and isinstance(args[0], torch.Tensor):
                self._capture(args, loss, kind, loss_tau)
            return loss

        watched.__wrapped__ = loss_fn
        return watched

    def attach(self, module: torch.nn.Module, labels: torch.Tensor | Callable[[], torch.Tensor]):
        """Forward hook on ``module`` (its output are the embeddings); ``labels`` a tensor or a
        zero-argument callable giving the current batch's labels. Returns the hook handle."""

        def hook(_module, _inputs, output):
            if self._logging_now() and isinstance(output, torch.Tensor):
                current = labels() if callable(labels) else labels
                self._capture((output, current), None, None, None)

        return module.register_forward_hook(hook)

    def _logging_now(self) -> bool:
        step = self.step_count
        return any(q.should_compute(step) for q in self.quantities if q.name not in self.disabled)

    def _capture(self, args, loss, kind, loss_tau) -> None:
        embeddings = args[0]
        batch = BatchView(
            embeddings=embeddings.detach(),
            loss=None if loss is None else loss.detach(),
            tau=self.tau,
            loss_kind=kind,
            loss_tau=loss_tau,
        )
        if len(args) >= 3:
            batch.candidates, batch.positives = args[1].detach(), args[2]
        else:
            batch.labels = args[1]
        if embeddings.requires_grad and any(q.needs_grad for q in self.quantities):

            def keep_gradient(grad, batch=batch):
                batch.embedding_grad = grad.detach()  # read only: returning None keeps grad as is

            embeddings.register_hook(keep_gradient)
        self._pending = batch

    # --- the step ------------------------------------------------------------------------------

    def step(self) -> dict | None:
        """Close the optimizer step: compute and write the due quantities. Returns the record."""
        if self._closed:
            raise GradlabError("monitor.step() called after close()")
        step, batch = self.step_count, self._pending
        self._pending = None
        self.step_count += 1
        due = [q for q in self.quantities if q.name not in self.disabled and q.should_compute(step)]
        if not due or batch is None:
            return None
        return self._record(step, batch, due)

    def _record(self, step: int, batch: BatchView, due: list[Quantity]) -> dict | None:
        """Compute ``due`` on ``batch`` (global under torch.distributed), write the record."""
        batch = self._globalize(batch)
        if self._last_call is not None:  # a count kept by the watched loss (SmoothAPLoss)
            batch.degenerate_batches = getattr(self._last_call[-1], "degenerate_batches", None)
        values: dict[str, torch.Tensor] = {}
        with torch.no_grad():
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
            stacked = torch.stack([values[name].reshape(()).to(torch.float64) for name in names])
            record.update(zip(names, stacked.cpu().tolist(), strict=True))  # one transfer
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
            stacklevel=3,
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
        if batch.loss is not None:
            loss = batch.loss.clone().to(torch.float64)
            torch.distributed.all_reduce(loss)
            gathered.loss = loss / torch.distributed.get_world_size()
        return gathered

    def _open(self, device: torch.device | None) -> None:
        if self._opened:
            return
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for path in self._previous_run.get("overwrite", ()):
            path.unlink(missing_ok=True)
        header = {
            "gradlab": gradlab.__version__,
            "torch": torch.__version__,
            "python": platform.python_version(),
            "device": str(device) if device is not None else None,
            "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "quantities": [q.name for q in self.quantities],
            "config": self.config,
        }
        if "resumed" in self._previous_run:
            header["resumed"] = self._previous_run["resumed"]
        if "overwrite" in self._previous_run:
            header["overwrote"] = [path.name for path in self._previous_run["overwrite"]]
        if device is not None and device.type == "cuda":
            header["device_name"] = torch.cuda.get_device_name(device)
        for sink in self.sinks:
            sink.open(self.log_dir, header)
        self._opened = True

    def close(self) -> None:
        """Log the last step if its schedule skipped it, then flush and close every sink.

        The last step's record holds the quantities that need no gradient (off-schedule steps
        keep no gradient). Writes the header if nothing was logged. Under torch.distributed
        every rank must call ``close`` (the last step is gathered like any other).
        """
        if self._closed:
            return
        try:
            self._log_last_step()
        finally:
            if _is_rank_zero():
                self._open(None)
                for sink in self.sinks:
                    sink.close()
            self._closed = True

    def _log_last_step(self) -> None:
        if self._last_call is None:
            return
        step, args, loss, kind, loss_tau, _ = self._last_call
        self._last_call = None
        enabled = [q for q in self.quantities if q.name not in self.disabled]
        if step != self.step_count - 1 or any(q.should_compute(step) for q in enabled):
            return  # the last watched call was logged already (or its step never closed)
        due = [q for q in enabled if not q.needs_grad]
        if not due or not args or not isinstance(args[0], torch.Tensor):
            return
        self._capture(args, loss, kind, loss_tau)
        batch, self._pending = self._pending, None
        if batch is not None:
            self._record(step, batch, due)

    def __enter__(self) -> Monitor:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def _schedule(value: int | Schedule) -> Schedule:
    if callable(value):
        return value
    return every(value)


def _sink(value: str | Sink) -> Sink:
    if isinstance(value, Sink):
        return value
    if value not in SINKS:
        raise GradlabError(
            f"sinks must name one of {sorted(SINKS)} or be Sink instances; got {value!r}"
        )
    return SINKS[value]()


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
