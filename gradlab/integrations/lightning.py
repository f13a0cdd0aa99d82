"""The Monitor as a PyTorch Lightning callback (``pip install 'gradlab-ranking[lightning]'``).

Usage::

    callback = GradlabCallback(tau=0.05)                # Monitor options; log_dir from the Trainer
    module.loss_fn = callback.watch(SmoothAPLoss(0.05))  # used in training_step as before
    trainer = lightning.pytorch.Trainer(callbacks=[callback], logger=WandbLogger(...))
    trainer.fit(module)

What it does:

* ``setup`` (fit) opens a :class:`gradlab.Monitor` in ``log_dir``, by default
  ``<trainer.log_dir>/gradlab_logs`` (``<trainer.log_dir>/gradlab_logs/<run id>`` for loggers
  such as W&B and MLflow whose folder is not per run, often the working directory: a folder
  named ``gradlab`` there would shadow the package on the next run). Rank 0 chooses the folder
  and broadcasts it. :attr:`GradlabCallback.run_dir` names it, during the fit and after.
* The watched loss feeds the Monitor during training only (validation and test calls are passed
  straight through), and the Monitor steps once per optimizer step
  (``on_before_optimizer_step`` of the first optimizer: after backward, so the gradient of the
  embeddings is known; with gradient accumulation the last micro-batch is logged).
* Every record goes to the Monitor's sinks and, keys prefixed with ``prefix``, to each of the
  Trainer's loggers (``logger.log_metrics(values, step=record["step"])``), from global rank 0
  only; under DDP the quantities are computed on the global batch like in a bare loop.
* The Monitor is closed at the end of training (the last step is logged then if its schedule
  skipped it) or, without that last record, when fitting raises. Another ``fit`` of the same
  Trainer (training further) goes on with the same run, in the same folder.
* Lightning's tuner (``Tuner(trainer).lr_find``, ``scale_batch_size``) trains a few trial
  steps with the Trainer's callbacks set aside: those steps are not logged, and the tuner's
  own ``fit`` opens no Monitor (its folder stays free for the training that follows). A
  ``LearningRateFinder`` among the callbacks searches at the start of the fit it is in: the
  Monitor logs the training after the search, from its first step.
* Pickled (``save_hyperparameters()`` of a module holding the watched loss, a checkpoint,
  ``torch.save(model)``), the callback leaves its Monitor and its Trainer behind.
"""

from __future__ import annotations

import copy
import warnings
import weakref
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from gradlab.errors import GradlabError, RunExistsError, caller_stacklevel
from gradlab.extras import missing_extra
from gradlab.integrations.settings import (
    callback_settings,
    resumed_behind_message,
    warn_closed_during_training,
    warn_overwrite_on_resumed_trainer,
)
from gradlab.monitor.adapters import adapt
from gradlab.monitor.config import MonitorConfig
from gradlab.monitor.distributed import is_rank_zero
from gradlab.monitor.monitor import TRAINER_PACKAGES, Monitor
from gradlab.monitor.sinks import NumericSink, scalars, sink_kinds
from gradlab.monitor.watched import watched_like, watching_call
from gradlab.run_dirs import CALLBACK_FOLDER

try:
    from lightning.pytorch import Callback
    from lightning.pytorch.callbacks import BatchSizeFinder, LearningRateFinder
    from lightning.pytorch.loggers import CSVLogger, MLFlowLogger, TensorBoardLogger, WandbLogger
except ImportError as error:  # pragma: no cover - exercised by a subprocess test
    raise missing_extra("lightning", "lightning", "gradlab.integrations.lightning") from error

__all__ = ["DEFAULT_FOLDER", "GradlabCallback", "TrainerLoggersSink"]

DEFAULT_FOLDER = CALLBACK_FOLDER
"""The Monitor's folder under ``trainer.log_dir`` (never ``gradlab``: it would shadow the
package when ``trainer.log_dir`` is the working directory, as with the W&B and MLflow loggers)."""


LOGGED_BACKENDS = {"tensorboard": TensorBoardLogger, "wandb": WandbLogger, "mlflow": MLFlowLogger}
"""The Monitor's sinks whose backend a Lightning logger also writes to."""


def _tuner_search(trainer: Any) -> bool:
    """Whether this ``fit`` is Lightning's tuner searching (``Tuner.lr_find`` or
    ``Tuner.scale_batch_size``): its finder callback then ends the fit once the search is done
    (Lightning marks it ``_early_exit``), so nothing of it is training to log."""
    return any(isinstance(callback, (BatchSizeFinder, LearningRateFinder))
               and getattr(callback, "_early_exit", False)
               for callback in trainer.callbacks)  # fmt: skip


def _next_version(folder: Path, resume: bool = False) -> int:
    """One more than the largest ``version_N`` folder in ``folder`` (0 when there is none);
    with ``resume``, the largest itself (the run to go on with)."""
    taken = [int(path.name[8:]) for path in folder.glob("version_*")
             if path.is_dir() and path.name[8:].isdigit()]  # fmt: skip
    return max(taken, default=-1) + (0 if resume and taken else 1)


class TrainerLoggersSink(NumericSink):
    """A sink that writes each record into a Lightning Trainer's loggers (rank 0 only).

    Args:
        trainer: the ``lightning.pytorch.Trainer``.
        prefix: prepended to every key (``gradlab/loss``), so gradlab's keys never collide with
            the module's own ``self.log`` keys.
    """

    def __init__(self, trainer: Any, prefix: str = "gradlab/") -> None:
        self.trainer = trainer
        self.prefix = prefix

    def write_scalars(self, step: int, values: dict[str, float]) -> None:
        if not self.trainer.is_global_zero:  # the Monitor writes on rank 0 only; so do we
            return
        logged = {f"{self.prefix}{key}": value for key, value in values.items()}
        for logger in self.trainer.loggers:
            logger.log_metrics(logged, step=step)


class _WatchedLoss:
    """The loss returned by :meth:`GradlabCallback.watch`: the Monitor's watch while training."""

    def __init__(
        self, callback: GradlabCallback, loss_fn: Callable, inputs: str | None = None
    ) -> None:
        self.callback = callback
        self.loss_fn = loss_fn
        self.watch_inputs = inputs
        self.__wrapped__ = loss_fn
        self._inner: tuple[Monitor, Callable] | None = None

    def __call__(self, *args, **kwargs):
        monitor, trainer = self.callback.monitor, self.callback._trainer
        if monitor is None or trainer is None or not trainer.training:
            loss = self.loss_fn(*args, **kwargs)
            if trainer is None and isinstance(loss, torch.Tensor) and loss.requires_grad:
                self.callback._warn_unattached()
            return loss
        if monitor.closed:  # by hand, during training: the loss alone
            self.callback._warn_closed_during_training(monitor)
            return self.loss_fn(*args, **kwargs)
        if self._inner is None or self._inner[0] is not monitor:
            self._inner = (monitor, monitor.watch(self.loss_fn, self.watch_inputs))
        return self._inner[1](*args, **kwargs)

    def __getattr__(self, name: str):
        """The wrapped loss's attributes (``tau``, ``degenerate_batches``...)."""
        if name.startswith("__") or name in ("callback", "loss_fn", "watch_inputs", "_inner"):
            raise AttributeError(name)
        return getattr(self.loss_fn, name)

    def __getstate__(self) -> dict:  # picklable for ddp_spawn: the Monitor is per process
        return {**self.__dict__, "_inner": None}

    def __deepcopy__(self, memo: dict) -> Callable:
        """A deep copy of the model (an EMA or SWA copy) holds a copy of the loss, unwatched."""
        return copy.deepcopy(self.loss_fn, memo)


class GradlabCallback(Callback):
    """Run a :class:`gradlab.Monitor` inside ``Trainer.fit`` (see the module docstring).

    Args:
        log_dir: the Monitor's folder; ``None``: ``<trainer.log_dir>/gradlab_logs`` (per run,
            :data:`DEFAULT_FOLDER`), or without a logger the next free
            ``<default_root_dir>/gradlab_logs/version_N``.
        prefix: key prefix of the scalars forwarded to the Trainer's loggers.
        forward_to_loggers: forward each record to ``trainer.loggers``.
        options: the Monitor's options as a :class:`~gradlab.monitor.config.MonitorConfig`
            (instead of ``monitor_options``).
        **monitor_options: any field of :class:`~gradlab.monitor.config.MonitorConfig`
            (``tau``, ``preset``, ``every``, ``sinks``, ``resume``...), checked here.

    Raises:
        GradlabError: an unknown Monitor option or a bad option value (the Monitor's own check,
            here rather than inside ``Trainer.fit``), a ``log_dir`` that is a file, a bad
            prefix.

    Example:
        >>> from gradlab.integrations.lightning import GradlabCallback
        >>> callback = GradlabCallback(tau=0.05, preset="cheap")
        >>> callback.monitor is None  # opened when fitting starts
        True
    """

    def __init__(
        self,
        log_dir: str | Path | None = None,
        *,
        prefix: str = "gradlab/",
        forward_to_loggers: bool = True,
        options: MonitorConfig | None = None,
        **monitor_options: Any,
    ) -> None:
        super().__init__()
        log_dir, prefix, options = callback_settings(
            log_dir, prefix, options, monitor_options, callback="GradlabCallback",
            own=("log_dir", "prefix", "forward_to_loggers", "options"))  # named if one is unknown
        if not isinstance(forward_to_loggers, bool):
            raise GradlabError(
                f"forward_to_loggers must be True or False; got {forward_to_loggers!r}"
            )
        self.log_dir = log_dir
        self.prefix = prefix
        self.forward_to_loggers = forward_to_loggers
        self.options = options
        self.monitor: Monitor | None = None
        self._trainer = None
        self._warned_unattached = False
        self._warned_closed: Monitor | None = None  # the Monitor closed by hand, warned of
        self._warned_taken = False  # keys the module logs itself, under gradlab's names
        # The Trainer (weakly) and the folder of the last fit: its next fit goes on there.
        self._last_fit: tuple[weakref.ref, Path] | None = None
        self._restored = False  # a copy unpickled with a checkpoint, never set up since
        self._synced_step: int | None = None  # the Trainer's step last given to the Monitor
        self._run_dir: Path | None = None  # the folder of the last fit's Monitor

    @property
    def run_dir(self) -> Path | None:
        """The folder of the run this callback writes or last wrote: the Monitor's ``log_dir``
        of the latest fit (``log_dir`` when given, else the default folder it chose, such as
        ``<default_root_dir>/gradlab_logs/version_1``), kept after the fit ends; ``None``
        before a fit opened a Monitor. Pass it to ``gradlab plot`` or
        :func:`gradlab.monitor.read_jsonl` (``run_dir / "metrics.jsonl"``). Under
        ``strategy="ddp_spawn"`` the fit runs in spawned processes, whose copies of the
        callback open the Monitor: this process's stays ``None`` (give ``log_dir`` to know the
        folder ahead)."""
        return self._run_dir

    def __getstate__(self) -> dict:
        """Pickled without its Monitor (open files) and its Trainer: a checkpoint's
        ``save_hyperparameters()`` or ``torch.save(model)`` of a module holding the watched
        loss saves the options only. The copy knows it is one: a callback that watches its loss
        again (after ``load_from_checkpoint``) takes it over without a warning."""
        return {**self.__dict__, "monitor": None, "_trainer": None, "_warned_closed": None,
                "_last_fit": None, "_restored": True}  # fmt: skip

    def watch(self, loss_fn: Callable, inputs: str | None = None) -> Callable:
        """Wrap the module's loss once; returns a callable with the same signature and value
        (for a ``torch.nn.Module`` loss a :class:`~gradlab.monitor.watched.WatchedLoss`: its
        parameters stay the LightningModule's, trained and saved). A loss this callback
        returned comes back as it is; another callback's is unwrapped first, with a warning:
        it is this callback's from then on, and the other one logs none of its calls.

        Args:
            loss_fn: the loss, as in :meth:`gradlab.Monitor.watch`.
            inputs: what its first argument is, as in :meth:`gradlab.Monitor.watch`:
                ``"embeddings"``, ``"scores"`` (a loss of your own written on a ``[Q, C]``
                score matrix, ``loss_fn(scores, positives)``) or ``"in_batch_scores"`` (on
                a ``[B, B]`` matrix of a batch against itself); ``None``: the loss's own
                ``input_form`` (gradlab's losses declare it), else ``"embeddings"``.

        Raises:
            GradlabError: ``loss_fn`` is not callable or is a class, or ``inputs`` is not
                allowed (the Monitor's checks, here rather than inside ``Trainer.fit``).
        """
        watching = watching_call(loss_fn)
        if isinstance(watching, _WatchedLoss):  # a loss this or another callback returned
            if watching.callback is self:
                return loss_fn  # watched already (a cell run again): wrapped once
            loss_fn = watching.loss_fn  # another callback's: its own wrapper stays its own
            name = getattr(loss_fn, "__name__", type(loss_fn).__name__)
            # a checkpoint's copy (unpickled, never set up since) is replaced without a word
            # (one pickled by gradlab 0.2.0 has no _restored: it is such a copy too); two
            # callbacks in one Trainer: the first would log nothing
            if not getattr(watching.callback, "_restored", True):
                warnings.warn(
                    f"GradlabCallback: loss_fn {name} was watched by another GradlabCallback; it "
                    "is now watched by this one alone, and the other logs none of its calls (a "
                    "loss is watched by one callback at a time: a notebook cell run again, or two "
                    "callbacks given one loss?)",
                    RuntimeWarning,
                    stacklevel=caller_stacklevel(),  # the watch() call
                )
        adapt(loss_fn, inputs)
        return watched_like(loss_fn, _WatchedLoss(self, loss_fn, inputs))

    # --- Lightning hooks -------------------------------------------------------------------------

    def _warn_unattached(self) -> None:
        """Warn, once, that a loss this callback watches computes a gradient while no Trainer
        has set the callback up: nothing is logged (a callback left out of ``callbacks``)."""
        if self._warned_unattached:
            return
        self._warned_unattached = True
        warnings.warn(
            "gradlab: a loss watched by this GradlabCallback computed a gradient, but no Trainer "
            "has set the callback up, so nothing is logged; if this is training, pass the "
            "callback to the Trainer: Trainer(callbacks=[callback])",
            RuntimeWarning,
            stacklevel=caller_stacklevel(),
        )

    def _warn_closed_during_training(self, monitor: Monitor) -> None:
        """Warn once that the Monitor was closed by hand while the Trainer trains."""
        if self._warned_closed is monitor:  # once per Monitor (per fit)
            return
        self._warned_closed = monitor
        warn_closed_during_training(type(self).__name__, monitor, TRAINER_PACKAGES)

    def _warn_taken_keys(self, trainer: Any, record: dict) -> None:
        """Warn once that keys of gradlab's record, prefixed, are keys the module logs itself
        (``self.log("loss", ...)`` with ``prefix=""``): the loggers would hold two values of
        one key at one step. Read within the step, ``trainer.logged_metrics`` holds the step's
        own values (no epoch aggregate is computed, so no collective runs on rank 0 alone)."""
        if not trainer.loggers:
            return
        values = {f"{self.prefix}{key}" for key in scalars(record) if key != "step"}
        taken = sorted(values & set(trainer.logged_metrics))
        if not taken:
            return
        self._warned_taken = True
        warnings.warn(
            f"GradlabCallback: the module logs {taken} itself (self.log), which gradlab's "
            f"record also has under prefix={self.prefix!r}: the Trainer's loggers receive two "
            "values of each at the same step (Lightning's CSVLogger writes two rows per step); "
            "give a prefix (the default 'gradlab/') to tell them apart (later such steps are "
            "not warned about)",
            RuntimeWarning,
            stacklevel=caller_stacklevel(TRAINER_PACKAGES),  # trainer.fit()
        )

    def on_init_end(self, *args, **kwargs) -> None:
        """A Hugging Face Trainer's first event: this is Lightning's callback (refused)."""
        self._refuse_hugging_face()

    def on_train_begin(self, *args, **kwargs) -> None:
        """A Hugging Face Trainer's first event of ``train()`` (a callback added with
        ``trainer.add_callback``): refused, as :meth:`on_init_end`."""
        self._refuse_hugging_face()

    @staticmethod
    def _refuse_hugging_face() -> None:
        raise GradlabError(
            "GradlabCallback is the callback of Lightning's Trainer; a Hugging Face (or "
            "sentence-transformers) Trainer takes "
            "gradlab.integrations.transformers.GradlabTrainerCallback"
        )

    def setup(self, trainer, pl_module, stage: str) -> None:
        if stage != "fit":
            return
        self._close(log_last_step=False)  # a previous fit that was not closed
        self._trainer, self._restored, self._synced_step = trainer, False, None
        if _tuner_search(trainer):  # lr_find / scale_batch_size: no training to log
            return
        options = self.options
        further = self._trains_further(trainer)
        if further:  # the same Trainer trains further
            options = replace(options, resume=True, overwrite=False)
        folder = self._folder(trainer)
        self._refuse_a_twin(trainer, folder)
        sinks = list(options.sinks)
        if self.forward_to_loggers:
            self._warn_logged_twice(trainer, sinks)
            sinks.append(TrainerLoggersSink(trainer, self.prefix))
        try:
            self.monitor = Monitor.from_config(folder, replace(options, sinks=sinks))
        except RunExistsError as error:  # the options are this callback's arguments; the
            # Monitor's message is quoted whole: its traceback would say it twice
            raise RunExistsError(f"{error} (resume and overwrite are arguments of "
                                 f"{type(self).__name__}(...))") from None  # fmt: skip
        self._last_fit = (weakref.ref(trainer), Path(folder))
        self._run_dir = Path(self.monitor.log_dir)
        step = int(getattr(trainer, "global_step", 0))
        if further and self.monitor.step_count > step:
            # the Trainer's step lags the run's: a raw optimizer (manual optimization) never
            # moved it, and the Monitor was stepped by hand; its count goes on from the run's
            self._synced_step = step

    def _warn_logged_twice(self, trainer, sinks: list) -> None:
        """Warn when a sink of the Monitor and one of the Trainer's loggers write to one backend
        (a ``"wandb"`` sink beside a ``WandbLogger``): every record is forwarded to the loggers
        already, so each value would be logged twice per step (in W&B twice in one run, in
        MLflow in two runs)."""
        named = sink_kinds(sinks)
        loggers = list(getattr(trainer, "loggers", None) or [])
        both = [(name, type(logger).__name__) for name, kind in LOGGED_BACKENDS.items()
                if name in named for logger in loggers if isinstance(logger, kind)]  # fmt: skip
        if both and is_rank_zero():
            warnings.warn(
                f"GradlabCallback: sinks {sorted({name for name, _ in both})} and the "
                f"Trainer's {', '.join(sorted({kind for _, kind in both}))} both send "
                "gradlab's values to the same backend, so each is logged twice per step: the "
                "callback forwards every record to the Trainer's loggers already; drop those "
                "sinks (or pass forward_to_loggers=False)",
                RuntimeWarning,
                stacklevel=caller_stacklevel(TRAINER_PACKAGES),  # trainer.fit()
            )

    def _trains_further(self, trainer) -> bool:
        """Whether ``trainer`` is the Trainer of this callback's last fit (trained further)."""
        last = self._last_fit
        return last is not None and last[0]() is trainer

    def _folder(self, trainer) -> Path:
        """The folder this callback's Monitor takes in a fit of ``trainer``: its last fit's
        when the same Trainer trains further, else ``log_dir`` or the default folder."""
        if self._trains_further(trainer):
            return self._last_fit[1]
        if self.log_dir is not None:
            return Path(self.log_dir)
        return self._default_folder(trainer, self.options.resume)

    def _refuse_a_twin(self, trainer, folder: Path) -> None:
        """Refuse two callbacks of ``trainer`` writing to one folder (the second's Monitor
        failed at the first step, on the other's lock), or forwarding to the Trainer's loggers
        under one prefix (the loggers got two values of each key at one step, silently).
        Checked against every other callback of the Trainer, those not set up yet included
        (with the folder their own setup would take), so the first of the two refuses before
        its Monitor opens: nothing is written, and the fit with the clash mended runs."""
        for other in getattr(trainer, "callbacks", None) or []:
            if not isinstance(other, GradlabCallback) or other is self:
                continue
            if other.monitor is not None and other._trainer is trainer:  # set up before this
                other_folder = Path(other.monitor.log_dir)
            elif other.monitor is None:  # set up after this one (or closed: its next folder)
                other_folder = other._folder(trainer)
            else:  # another Trainer's
                continue
            if other_folder.resolve() == folder.resolve():
                raise GradlabError(
                    f"trainer already holds a GradlabCallback writing to "
                    f"{str(folder.resolve())!r}; one folder takes one Monitor: watch every loss "
                    "with one callback, or give each callback its own log_dir"
                )
            if (self.forward_to_loggers and other.forward_to_loggers and trainer.loggers
                    and other.prefix == self.prefix):  # fmt: skip
                raise GradlabError(
                    f"trainer already holds a GradlabCallback forwarding to its loggers under "
                    f"prefix={self.prefix!r}; the loggers would get two values of each key at "
                    "one step: give this callback its own prefix (prefix='gradlab_2/'), or "
                    "watch every loss with one callback"
                )

    def on_train_start(self, trainer, pl_module) -> None:
        # After a checkpoint's restore: a fit that starts over (step 0), or resumes from a
        # checkpoint before the run's last step, in a resumed folder whose run logged steps
        # already logs them again after the earlier ones.
        monitor, first = self.monitor, int(trainer.global_step)
        if monitor is None or not is_rank_zero() or self._synced_step is not None:
            return  # (synced already: the same Trainer trains on, its step lagging the run's)
        resumed_at = monitor.folder.start_step  # the folder's last logged step + 1, or 0
        if first != 0:  # restored from a checkpoint: an overwrite would lose the steps before
            warn_overwrite_on_resumed_trainer(type(self).__name__, monitor, first,
                                              TRAINER_PACKAGES)  # fmt: skip
        if resumed_at > first:  # the Trainer already resumed (first > 0): no advice to resume it
            advice = "trainer.fit(model, ckpt_path=...)" if first == 0 else None
            warnings.warn(
                resumed_behind_message(type(self).__name__, monitor.log_dir, resumed_at - 1,
                                       first, advice),
                RuntimeWarning,
                stacklevel=caller_stacklevel(TRAINER_PACKAGES),  # trainer.fit()
            )
            monitor.folder.going_back_said = True  # the Monitor's own would say it again

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        # The Monitor's steps are the Trainer's (a fit resumed from a checkpoint at step k logs
        # k, k + 1, ...): its loggers then hold gradlab's values at their own steps. Given only
        # when the Trainer's step moved: a raw optimizer under manual optimization never moves
        # it, and a Monitor the user steps by hand then counts its own steps (not step 0 again).
        step = int(trainer.global_step)
        if self.monitor is not None and step != self._synced_step:
            self.monitor.step_count, self._synced_step = step, step

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        monitor = self.monitor
        if monitor is None or optimizer is not trainer.optimizers[0]:
            return
        if monitor.closed:  # by hand, during training: nothing more to log
            self._warn_closed_during_training(monitor)
            return
        record = monitor.step()
        if record is not None and self.forward_to_loggers and not self._warned_taken:
            self._warn_taken_keys(trainer, record)

    def on_train_end(self, trainer, pl_module) -> None:
        monitor = self.monitor
        if (monitor is not None and monitor.calls and not monitor.closed and not monitor.stepped
                and getattr(pl_module, "automatic_optimization", True) is False):  # fmt: skip
            self._warn_never_stepped(monitor)
            with warnings.catch_warnings():  # the Monitor's own, said above with its cause
                warnings.filterwarnings("ignore", message=r"gradlab\.Monitor: \d+ watched "
                                        r"call\(s\) but monitor\.step\(\) was never called")
                self._close(log_last_step=True)
            return
        self._close(log_last_step=True)

    @staticmethod
    def _warn_never_stepped(monitor: Monitor) -> None:
        """Warn that a fit under manual optimization made watched calls but never reached
        ``on_before_optimizer_step``, where the callback steps the Monitor."""
        warnings.warn(
            f"GradlabCallback: {monitor.calls} watched call(s) but Lightning never called "
            "on_before_optimizer_step, where the callback steps the Monitor, so nothing was "
            f"logged in {str(monitor.log_dir)!r}: under manual optimization step the "
            "LightningOptimizer that self.optimizers() returns (optimizer.step()), not the "
            "optimizer itself (self.optimizers(use_pl_optimizer=False))",
            RuntimeWarning,
            stacklevel=caller_stacklevel(TRAINER_PACKAGES),  # trainer.fit()
        )

    def on_fit_end(self, trainer, pl_module) -> None:
        self._close(log_last_step=True)

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        self._close(log_last_step=False)  # other ranks may be gone: no collective

    def teardown(self, trainer, pl_module, stage: str) -> None:
        if stage == "fit":
            self._close(log_last_step=False)
            # No Trainer has it set up now: a watched loss that trains again without it (a
            # new Trainer without the callback) warns that nothing is logged.
            self._trainer = None
            self._warned_unattached = False

    # --- helpers ---------------------------------------------------------------------------------

    def _close(self, log_last_step: bool) -> None:
        if self.monitor is not None:
            monitor, self.monitor = self.monitor, None
            monitor.close(log_last_step=log_last_step)

    @staticmethod
    def _default_folder(trainer, resume: bool = False) -> Path:
        """``<trainer.log_dir>/gradlab_logs``, plus the run id for loggers whose folder is
        shared; without a logger (``logger=False``, ``fast_dev_run``), the next free
        ``<default_root_dir>/gradlab_logs/version_N``, as Lightning numbers its own runs: a
        second run from the same folder is a new run, not a refusal; with ``resume``, the
        last ``version_N`` (the run it goes on with; ``version_0`` when there is none)."""
        base = trainer.log_dir  # a collective: every rank calls it
        # Without a logger Lightning's log_dir is None (fast_dev_run) or its default_root_dir
        # (logger=False, Lightning 2.x): no folder of this run's own either way.
        own = base is not None and bool(trainer.loggers)
        folder = Path(base if own else trainer.default_root_dir) / DEFAULT_FOLDER
        if not own:
            folder = folder / f"version_{_next_version(folder, resume)}"
        loggers = trainer.loggers
        if trainer.is_global_zero and loggers and not isinstance(
            loggers[0], (TensorBoardLogger, CSVLogger)
        ):
            version = loggers[0].version
            if version is not None:
                folder = folder / str(version)
        return Path(trainer.strategy.broadcast(str(folder)))
