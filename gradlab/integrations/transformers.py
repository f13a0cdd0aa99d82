"""The Monitor as a Hugging Face ``TrainerCallback`` (the ``transformers`` extra).

Usage with a ``transformers.Trainer`` whose ``compute_loss`` calls an in-batch loss::

    callback = GradlabTrainerCallback(preset="default")
    loss_fn = callback.watch(gradlab.NTXentLoss(0.05))   # called in compute_loss as before
    trainer = MyTrainer(model=model, args=args, train_dataset=data)
    callback.attach(trainer)                              # before the report_to callbacks
    trainer.train()

and with a ``SentenceTransformerTrainer`` (the loss keeps its class; its similarity records the
score matrix, :mod:`gradlab.integrations.sentence_transformers`)::

    loss = MultipleNegativesRankingLoss(model, similarity_fct=RecordingSimilarity())
    callback.watch(loss)                                  # returns the same module
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=data, loss=loss)
    callback.attach(trainer)

What it does:

* ``on_train_begin`` opens a :class:`gradlab.Monitor` in ``log_dir``, by default
  ``<args.output_dir>/gradlab_logs`` (:data:`DEFAULT_FOLDER`;
  :attr:`GradlabTrainerCallback.run_dir` names it, during training and after). Its steps are
  the Trainer's ``global_step`` after each optimizer step (1, 2, ...), the numbers
  ``state.log_history`` uses. Without an ``every`` option the Monitor logs on the Trainer's
  logging steps (``logging_steps``; with ``logging_strategy="epoch"``, the last step of each
  epoch, and ``max_steps`` when it cuts an epoch short; and step 1 with
  ``logging_first_step``).
* The watched loss feeds the Monitor only inside a training step (between ``on_step_begin`` and
  ``on_step_end``): evaluation calls are passed straight through. The Monitor steps once per
  optimizer step (``on_pre_optimizer_step``: after backward, so ``dL/dS`` is known); with
  gradient accumulation the last micro-batch of the step is the one logged.
* ``on_log`` adds the step's record, keys prefixed with ``prefix`` (``gradlab/anatomy_...``), to
  the Trainer's ``logs`` and to the matching entry of ``state.log_history`` (of a step that
  logs an evaluation and the training loss, the training loss's entry), so every
  ``report_to`` backend that runs after the callback receives them. The Trainer runs the
  reporting callbacks before the callbacks passed as ``callbacks=[...]``: :meth:`attach` puts
  this one in front of them (a callback that was not attached warns once when ``report_to``
  names a backend).
* Only the process of global rank 0 writes (the Monitor's own rule) and forwards values; under
  ``torch.distributed`` the quantities describe the gathered global batch.
* ``on_train_end`` closes the Monitor (the last step is logged then if its schedule skipped it).
  The Trainer has no exception event: :meth:`attach` wraps ``trainer.train``, so when training
  raises (an error, a ``KeyboardInterrupt``) the Monitor is closed without that last record and
  its folder's lock released; a new Trainer and callback can then train into the same folder in
  the same process (a notebook cell run again). Only this callback's Monitor is closed: another
  one, training elsewhere in the process, keeps its folder.
* A watched loss called inside a ``training_step`` of a Trainer that does not hold this callback
  (``attach`` forgotten) warns once: nothing can be logged.

The callback never changes what is trained: the Monitor's hooks only read (parameters are
bit-identical with and without it).
"""

from __future__ import annotations

import functools
import sys
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
from gradlab.monitor.lock import held_here
from gradlab.monitor.monitor import Monitor
from gradlab.monitor.sinks import scalars, sink_kinds
from gradlab.monitor.watched import WatchedCall, watched_like, watching_call
from gradlab.run_dirs import CALLBACK_FOLDER
from gradlab.validation import check_bool, check_positive_int

try:
    from transformers import TrainerCallback
except ImportError as error:  # pragma: no cover - exercised only without the package
    raise missing_extra(
        "transformers", "transformers", "gradlab.integrations.transformers"
    ) from error

__all__ = ["DEFAULT_FOLDER", "GradlabTrainerCallback", "LoggingSteps", "LossForward"]

DEFAULT_FOLDER = CALLBACK_FOLDER
"""The Monitor's folder under ``args.output_dir``."""

REPORTING_MODULE = "transformers.integrations"
"""Where the Trainer's ``report_to`` callbacks live (WandbCallback, TensorBoardCallback...)."""


class _WatchedCall(WatchedCall):
    """What :meth:`GradlabTrainerCallback.watch` wraps: the Monitor's watch inside a step. As
    every :class:`~gradlab.monitor.watched.WatchedCall`, its attributes are the loss's and a
    deep copy or a pickle is the loss itself, unwatched."""

    def __init__(
        self, callback: GradlabTrainerCallback, loss_fn: Callable, inputs: str | None = None
    ) -> None:  # named after the loss, as every WatchedCall
        super().__init__(loss_fn, lambda *args, **kwargs: callback.call(self, args, kwargs))
        self.callback, self.loss_fn, self.watch_inputs = callback, loss_fn, inputs
        self.watched: dict[int, Callable] = {}  # id(Monitor) -> its watch of loss_fn


_CALLBACKS: weakref.WeakSet[GradlabTrainerCallback] = weakref.WeakSet()
"""The callbacks of this process (to say which one holds a folder another is refused)."""


def _holding(folder: object, asking: GradlabTrainerCallback) -> GradlabTrainerCallback | None:
    """Another callback of this process whose open Monitor holds ``folder``'s lock, or None;
    None too when another process holds it, or another Monitor of this process (a plain one,
    while a callback that opened its Monitor there has logged nothing: no claim yet)."""
    wanted = Path(str(folder)).resolve()
    if not held_here(wanted):
        return None
    for callback in list(_CALLBACKS):
        monitor = callback.monitor
        if callback is not asking and monitor is not None and monitor.folder.claimed and (
            Path(str(monitor.log_dir)).resolve() == wanted
        ):  # fmt: skip (a callback's Monitor is None once its train() ended)
            return callback
    return None


def _training_trainer() -> Any | None:
    """The trainer whose ``training_step`` is on the call stack (a watched loss called from its
    ``compute_loss``), else ``None``: any object with a ``callback_handler``, as for attach."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "training_step":
            owner = frame.f_locals.get("self")
            if isinstance(getattr(getattr(owner, "callback_handler", None), "callbacks", None),
                          list):  # fmt: skip
                return owner
        frame = frame.f_back
    return None


def _logging_interval(args: Any, state: Any, train_dataloader: Any) -> tuple[int, bool]:
    """Every how many optimizer steps the Trainer logs, and whether that is once per epoch.

    ``logging_strategy="epoch"``: the optimizer steps of an epoch, from the training
    dataloader's length as the Trainer counts them (a last partial accumulation is a step);
    without a length (an iterable dataset), ``logging_steps``. Else ``logging_steps``
    (``state.logging_steps``: a ratio of the run made a number of steps).
    """
    # TrainingArguments holds an IntervalStrategy, a str enum: equal to "epoch" as a string is
    if getattr(args, "logging_strategy", None) == "epoch":
        try:
            batches = len(train_dataloader)
        except TypeError:
            batches = 0
        if batches > 0:
            accumulation = max(1, int(getattr(args, "gradient_accumulation_steps", 1) or 1))
            return max(1, -(-batches // accumulation)), True
    return max(1, int(state.logging_steps or args.logging_steps or 1)), False


class LoggingSteps:
    """The Trainer's logging steps: every ``n``-th, step 1 with ``logging_first_step``
    (``first``), and ``last``, the run's last step, where a Trainer that logs once per epoch
    logs the epoch that ``max_steps`` cut short.

    Example:
        >>> from gradlab.integrations.transformers import LoggingSteps
        >>> schedule = LoggingSteps(4)
        >>> schedule, [step for step in range(1, 10) if schedule(step)]
        (LoggingSteps(4), [1, 4, 8])
        >>> epochs = LoggingSteps(4, first=False, last=10)  # epochs of 4 steps, max_steps 10
        >>> epochs, [step for step in range(1, 11) if epochs(step)]
        (LoggingSteps(4, first=False, last=10), [4, 8, 10])

    Raises:
        GradlabError: ``n`` (or ``last``, when given) is not a positive integer, or ``first``
            is not a bool.
    """

    def __init__(self, n: int, *, first: bool = True, last: int | None = None) -> None:
        self.n = check_positive_int("n", n)  # the Trainer's logging_steps: 1 or more
        self.first = check_bool("first", first)
        self.last = None if last is None else check_positive_int("last", last)

    def __call__(self, step: int) -> bool:
        return (step % self.n == 0 or (self.first and step == 1)
                or (self.last is not None and step == self.last))  # fmt: skip

    def __repr__(self) -> str:
        options = "" if self.first else ", first=False"
        options += "" if self.last is None else f", last={self.last!r}"
        return f"LoggingSteps({self.n!r}{options})"


CONSOLE_CALLBACKS = frozenset({"PrinterCallback", "ProgressCallback",
                               "NotebookProgressCallback"})
"""The Trainer's callbacks that print each ``logs`` on the console (or a notebook's table)."""

REPORTED_BACKENDS = frozenset({"tensorboard", "wandb", "mlflow"})
"""The Monitor's sinks that a Trainer's ``report_to`` can also name (``"all"``: every one)."""

FRAMEWORK_PACKAGES = frozenset({"transformers", "sentence_transformers", "accelerate"})
"""Packages whose frames are not the user's: a warning about a loss that the trainer itself
calls (sentence-transformers' ``compute_loss``) points past them, at ``trainer.train()``."""


class LossForward:
    """The bound ``forward`` of a loss module, as :meth:`gradlab.Monitor.watch` sees it.

    :meth:`GradlabTrainerCallback.watch` replaces a module's ``forward`` by a watched call of
    this object (the module keeps its class, which trainers check). ``loss_module`` is the
    module: adapters (:mod:`gradlab.integrations.sentence_transformers`) recognise it.

    Args:
        loss_module: the loss module.

    Example:
        >>> import torch
        >>> from gradlab.integrations.transformers import LossForward
        >>> call = LossForward(torch.nn.MSELoss())
        >>> call(torch.zeros(2), torch.ones(2)).item(), call.__name__
        (1.0, 'MSELoss')
    """

    def __init__(self, loss_module: torch.nn.Module) -> None:
        self.loss_module = loss_module
        self.forward = loss_module.forward  # the class's forward, bound: never the patched one
        self.__name__ = type(loss_module).__name__

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)


def _reference(trainer: Any) -> Callable[[], Any]:
    """A weak reference to ``trainer`` (the callback does not keep it alive), or a plain one to
    a trainer that takes none."""
    try:
        return weakref.ref(trainer)
    except TypeError:
        return lambda: trainer


class GradlabTrainerCallback(TrainerCallback):
    """Run a :class:`gradlab.Monitor` inside ``transformers.Trainer.train`` (module docstring).

    Args:
        log_dir: the Monitor's folder; ``None``: ``<args.output_dir>/gradlab_logs``.
        prefix: key prefix of the values added to the Trainer's logs.
        options: the Monitor's options as a :class:`~gradlab.monitor.config.MonitorConfig`
            (instead of ``monitor_options``).
        **monitor_options: any field of :class:`~gradlab.monitor.config.MonitorConfig`
            (``tau``, ``preset``, ``every``, ``sinks``, ``resume``...), checked here.

    Raises:
        GradlabError: an unknown Monitor option or a bad option value, a ``log_dir`` that is a
            file, a prefix that is not a string.

    Example:
        >>> from gradlab.integrations.transformers import GradlabTrainerCallback
        >>> callback = GradlabTrainerCallback(preset="cheap")
        >>> callback.monitor is None  # opened when training starts
        True
    """

    def __init__(
        self,
        log_dir: str | Path | None = None,
        *,
        prefix: str = "gradlab/",
        options: MonitorConfig | None = None,
        **monitor_options: Any,
    ) -> None:
        log_dir, prefix, options = callback_settings(
            log_dir, prefix, options, monitor_options, callback="GradlabTrainerCallback",
            own=("log_dir", "prefix", "options"))  # named if one is unknown
        self.log_dir = log_dir
        self.prefix = prefix
        self.options = options
        self.monitor: Monitor | None = None
        self.in_step = False
        self.last_record: dict | None = None
        self.attached = False
        self._forwarded_step: int | None = None
        self._added_keys: frozenset[str] = frozenset()  # in the last logs: off the console
        self._first_step = 0  # state.global_step when training began
        self._calls_at_step = 0  # the Monitor's watched calls at its previous step
        self._logging_interval: tuple[int, bool] | None = None  # (steps, per epoch)
        self._warned_idle = False
        self._began = False  # a train() opened this callback's Monitor
        self._trainer: Callable[[], Any] | None = None  # the Trainer it was last attached to
        self._several_losses = False  # the attached trainer's loss is a dict (one per dataset)
        self._warned_order = False
        self._warned_closed: Monitor | None = None  # the Monitor closed by hand, warned of
        self._warned_taken = False  # keys of the Trainer's logs that the record has too
        self._warned_unattached = False
        self._run_dir: Path | None = None  # the folder of the last train()'s Monitor
        _CALLBACKS.add(self)

    @property
    def run_dir(self) -> Path | None:
        """The folder of the run this callback writes or last wrote: the Monitor's ``log_dir``
        of the latest ``train()`` (``log_dir`` when given, else
        ``<args.output_dir>/gradlab_logs``), kept after training ends; ``None`` before a
        ``train()`` opened a Monitor. Pass it to ``gradlab plot`` or
        :func:`gradlab.monitor.read_jsonl` (``run_dir / "metrics.jsonl"``)."""
        return self._run_dir

    # --- wiring --------------------------------------------------------------------------------

    def watch(self, loss_fn: Callable, inputs: str | None = None) -> Callable:
        """Feed the Monitor from ``loss_fn`` during training steps.

        A sentence-transformers loss module is returned itself, its ``forward`` replaced by a
        watched call (the trainer checks the loss's class and reads its attributes; the
        Monitor reads its :class:`~gradlab.integrations.sentence_transformers.RecordingSimilarity`).
        Watched by another callback before (a notebook cell run again with a new Trainer and
        callback), it is this callback's from then on: the earlier one sees no more calls;
        watched by this callback already, it is returned as it is. Any other loss (a gradlab
        loss, a function) is wrapped, for a ``compute_loss`` that calls it. Values and
        gradients are unchanged.

        Args:
            loss_fn: the loss.
            inputs: what its first argument is, as in :meth:`gradlab.Monitor.watch`:
                ``"embeddings"``, ``"scores"`` (a loss of your own written on a ``[Q, C]``
                score matrix, ``loss_fn(scores, positives)``) or ``"in_batch_scores"`` (on
                a ``[B, B]`` matrix of a batch against itself); ``None``: the loss's own
                ``input_form`` (gradlab's losses declare it), else ``"embeddings"``.

        Returns:
            The sentence-transformers module itself, a
            :class:`~gradlab.monitor.watched.WatchedLoss` for another ``torch.nn.Module`` loss
            (its parameters stay the model's), or a callable with the loss's signature.

        Raises:
            GradlabError: ``loss_fn`` is not callable or is a class, ``inputs`` is not allowed,
                or a cached loss inside ``MatryoshkaLoss``.

        Example:
            >>> import torch
            >>> from gradlab.integrations.transformers import GradlabTrainerCallback
            >>> import gradlab
            >>> callback = GradlabTrainerCallback()
            >>> loss_fn = callback.watch(gradlab.NTXentLoss(0.1))
            >>> scores, positives = torch.eye(2), torch.eye(2, dtype=torch.bool)
            >>> loss_fn.temperature, float(loss_fn(scores, positives)) > 0
            (0.1, True)
        """
        if not callable(loss_fn):
            raise GradlabError(
                f"loss_fn must be callable (a loss module or function); got {loss_fn!r}"
            )
        watching = watching_call(loss_fn)
        if isinstance(watching, _WatchedCall):  # a loss this or another callback returned
            if watching.callback is self:
                return loss_fn  # watched already (loss_fn = callback.watch(loss_fn) run again)
            loss_fn = watching.loss_fn  # another callback's: its own wrapper stays its own
        module = type(loss_fn).__module__.split(".")[0]
        if not isinstance(loss_fn, torch.nn.Module) or module != "sentence_transformers":
            adapt(loss_fn, inputs)  # the Monitor's checks, now rather than inside train()
            return watched_like(loss_fn, _WatchedCall(self, loss_fn, inputs))  # a
            # module's parameters stay the model's
        if inputs not in (None, "scores"):  # read through its similarity's score matrices
            raise GradlabError(
                f"inputs must be None or 'scores' for the sentence-transformers loss "
                f"{type(loss_fn).__name__} (its RecordingSimilarity records its score "
                f"matrices); got {inputs!r}"
            )
        earlier = loss_fn.__dict__.get("forward")
        if isinstance(earlier, _WatchedCall) and earlier.callback is self:
            return loss_fn  # watched already, in place (a notebook cell run again)
        if isinstance(earlier, _WatchedCall):  # another callback's (a notebook cell run again)
            loss_fn.forward = _WatchedCall(self, earlier.loss_fn)  # now this one's alone
            first = earlier.callback
            if first._began and first.monitor is None:  # its train() ended: trained again
                return loss_fn
            warnings.warn(  # two callbacks alive: the first would log nothing, said nowhere
                f"GradlabTrainerCallback: loss_fn {type(loss_fn).__name__} was watched by "
                "another GradlabTrainerCallback; it is now watched by this one alone, and the "
                "other logs none of its calls (a loss module is watched by one callback at a "
                "time: a notebook cell run again, or the callback attached to the Trainer?)",
                RuntimeWarning,
                stacklevel=caller_stacklevel(),  # the watch() call (under mutmut too)
            )
            return loss_fn
        from gradlab.integrations.sentence_transformers import refuse_cached_matryoshka

        refuse_cached_matryoshka(loss_fn)  # wrapped by MatryoshkaLoss before it is watched
        call = LossForward(loss_fn)
        adapt(call)
        loss_fn.forward = _WatchedCall(self, call)
        return loss_fn

    def attach(self, trainer: Any) -> GradlabTrainerCallback:
        """Put this callback in ``trainer``'s callbacks before its reporting callbacks.

        The Trainer calls its callbacks in order and hands every ``on_log`` the same ``logs``;
        the ``report_to`` callbacks come before those passed as ``callbacks=[...]``. Placed in
        front of them, the callback adds gradlab's values to ``logs`` before they are reported.
        Called once after the Trainer is made (a callback already in its list is moved).

        It also wraps ``trainer.train`` (the Trainer has no exception event): when training
        raises, the Monitor is closed without logging the last step and the folder's lock is
        released, so a new Trainer and callback can use the folder in this process (the
        Lightning callback's ``on_exception``). Only this callback's Monitor is closed.

        Args:
            trainer: a ``transformers.Trainer`` (or a subclass).

        Returns:
            The callback.

        Raises:
            GradlabError: ``trainer`` has no ``callback_handler``; it holds another
                GradlabTrainerCallback with the same folder or the same ``prefix``; or this
                callback is in another Trainer's callbacks (a callback logs one run: each
                trainer gets its own).
        """
        handler = getattr(trainer, "callback_handler", None)
        callbacks = getattr(handler, "callbacks", None)
        if not isinstance(callbacks, list):
            raise GradlabError(
                "trainer must be a transformers.Trainer (with a callback_handler); got "
                f"{type(trainer).__name__}"
            )
        self._refuse_a_second_trainer(trainer)
        self._refuse_a_second_callback_in_the_same_folder(trainer, callbacks)
        self._trainer = _reference(trainer)
        # a loss per dataset (sentence-transformers): a step may call only unwatched ones
        self._several_losses = isinstance(getattr(trainer, "loss", None), dict)
        if self in callbacks:
            callbacks.remove(self)
        first = next((index for index, callback in enumerate(callbacks)
                      if type(callback).__module__.startswith(REPORTING_MODULE)),
                     len(callbacks))  # fmt: skip
        callbacks.insert(first, self)
        self.attached = True
        self._quiet_console(callbacks)
        self._close_when_raising(trainer)
        return self

    def _refuse_a_second_trainer(self, trainer: Any) -> None:
        """Refuse ``trainer`` while another Trainer still holds this callback: both would log
        into this callback's one run, the second train() refused as the first's rerun, or
        (``overwrite=True``) replacing its records."""
        other = self._trainer() if self._trainer is not None else None
        if other is None or other is trainer:
            return
        handler = getattr(other, "callback_handler", None)
        if not any(callback is self for callback in getattr(handler, "callbacks", ())):
            return  # taken off the other trainer: free to move
        name = type(self).__name__
        raise GradlabError(
            f"this {name} is attached to another Trainer already ({type(other).__name__} "
            f"at {id(other):#x}); a callback logs one run: give each trainer its own {name} "
            "with its own log_dir, or take it off the other first: "
            "other_trainer.remove_callback(callback)"
        )

    def _quiet_console(self, callbacks: list) -> None:
        """Keep gradlab's values off the Trainer's console lines: its printing callbacks run
        last and print every key of ``logs`` (with a ``report_to`` backend, after this
        callback added its values: some 3,000 characters a logged step with the full preset).
        Their ``on_log`` gets ``logs`` without the keys this callback added; the backends,
        ``state.log_history`` and the callbacks passed as ``callbacks=[...]`` keep them."""
        for callback in callbacks:
            if type(callback).__name__ not in CONSOLE_CALLBACKS:
                continue
            if getattr(callback, "_gradlab_quiet", None) is self:  # attached again
                continue
            printing = callback.on_log

            def on_log(args, state, control, logs=None, _printing=printing, **kwargs):
                added = self._added_keys
                if logs is not None and added:
                    logs = {key: value for key, value in logs.items() if key not in added}
                return _printing(args, state, control, logs=logs, **kwargs)

            callback.on_log = on_log
            callback._gradlab_quiet = self

    def _folder(self, args: Any) -> Path:
        """The Monitor's folder for training arguments ``args``."""
        if self.log_dir is not None:
            return Path(self.log_dir)
        return Path(getattr(args, "output_dir", None) or ".") / DEFAULT_FOLDER

    def _refuse_a_second_callback_in_the_same_folder(self, trainer: Any, callbacks: list) -> None:
        """Two callbacks of one trainer writing to one folder: the second one's Monitor met the
        first one's run when training began ('written by another Monitor ... pass resume=True'),
        advice that does not apply."""
        args = getattr(trainer, "args", None)
        folder = self._folder(args).resolve()
        for other in callbacks:
            if not isinstance(other, GradlabTrainerCallback) or other is self:
                continue
            if other._folder(args).resolve() == folder:
                ended = other._began and other.monitor is None  # its train() has ended
                raise GradlabError(
                    f"trainer already holds a {type(other).__name__} writing to {str(folder)!r}; "
                    "one folder takes one Monitor: watch every loss with one callback and attach "
                    "it once, or give each callback its own log_dir" + (
                        "; that callback's train() has ended: to train again, remove it first "
                        "(trainer.remove_callback(that_callback))" if ended else "")
                )
            if other.prefix == self.prefix:  # the Trainer's logs keep the first value of a key
                raise GradlabError(
                    f"trainer already holds a {type(other).__name__} reporting to the Trainer's "
                    f"logs under prefix={self.prefix!r}; the logs keep one value per key, so "
                    "this callback's would be lost: give it its own prefix (prefix='gradlab_2/'"
                    "), or watch every loss with one callback"
                )

    def _close_when_raising(self, trainer: Any) -> None:
        """Wrap ``trainer.train`` (once per callback) to close the Monitor when it raises."""
        train = getattr(trainer, "train", None)
        if not callable(train):
            return
        wrapped = train
        while wrapped is not None:  # attached twice: wrapped once
            if getattr(wrapped, "_gradlab_callback", None) is self:
                return
            wrapped = getattr(wrapped, "__wrapped__", None)

        @functools.wraps(train)
        def train_closing_on_error(*args, **kwargs):
            try:
                return train(*args, **kwargs)
            except BaseException:
                self._close_after_error()
                raise

        train_closing_on_error._gradlab_callback = self
        trainer.train = train_closing_on_error

    state_key = "GradlabTrainerCallback"
    """What Lightning names a callback by before it calls one (:meth:`setup` refuses it)."""

    def setup(self, *args, **kwargs) -> None:
        """Lightning's first event of a fit: this is the Hugging Face callback (refused)."""
        raise GradlabError(
            "GradlabTrainerCallback is the callback of Hugging Face's (and sentence-transformers') "
            "Trainer; Lightning's Trainer takes gradlab.integrations.lightning.GradlabCallback"
        )

    def on_exception(self, *args, **kwargs) -> None:
        """Lightning's event after a failed fit (the refusal of :meth:`setup`): nothing."""

    def call(self, wrapper: _WatchedCall, args: tuple, kwargs: dict):
        """One call of a watched loss: through the Monitor inside a training step."""
        monitor = self.monitor
        if monitor is None or not self.in_step:
            if monitor is None and not self._warned_unattached:
                self._warn_if_training_without_this_callback(wrapper)
            return wrapper.loss_fn(*args, **kwargs)
        if monitor.closed:  # by hand, during training: the loss alone
            self._warn_closed_during_training(monitor)
            return wrapper.loss_fn(*args, **kwargs)
        watched = wrapper.watched.get(id(monitor))
        if watched is None:  # a new Monitor (a new train() call): forget the previous ones
            wrapper.watched = {id(monitor): monitor.watch(wrapper.loss_fn, wrapper.watch_inputs)}
            watched = wrapper.watched[id(monitor)]
        return watched(*args, **kwargs)

    # --- Trainer events ------------------------------------------------------------------------

    def on_train_begin(self, args, state, control, **kwargs):
        trained_before = self._began  # an earlier train() of this callback
        self._close(log_last_step=False)  # a previous run that was not closed
        folder = self._folder(args)
        options = self.options
        self._logging_interval = _logging_interval(args, state, kwargs.get("train_dataloader"))
        if options.every is None and options.quantities is None:
            steps, per_epoch = self._logging_interval
            first = bool(getattr(args, "logging_first_step", False)) and steps > 1
            # once per epoch, the Trainer logs the last epoch that max_steps cut short too
            end = int(getattr(state, "max_steps", 0) or 0)
            last = end if per_epoch and end > 0 and end % steps else None
            every = LoggingSteps(steps, first=first, last=last) if first or last else steps
            options = replace(options, every=every)
        try:
            self.monitor = Monitor.from_config(folder, options)
        except RunExistsError as error:  # the options are this callback's arguments
            resumed = int(state.global_step)  # a checkpoint's step, set before train begins
            name = type(self).__name__
            hint = (f"; the Trainer resumes from a checkpoint at step {resumed}: "
                    f"{name}(resume=True) continues the run's records from "
                    "there" if resumed > 0 else "")  # fmt: skip
            again = (f"; this {name} logged an earlier train() there (a callback logs one "
                     "run): to train that trainer again, replace the callback: "
                     "trainer.remove_callback(callback), then watch the loss with a new "
                     f"{name}(log_dir=...) in a folder of its own (gradlab plot draws the two "
                     f"runs side by side), {name}(overwrite=True) (this run replaced) or "
                     f"{name}(resume=True) (the new records follow this run's and replace "
                     "its steps in gradlab plot), and attach it; to train another trainer, "
                     f"give it its own {name} with its own log_dir"
                     if trained_before else "")  # fmt: skip
            # the Monitor's message is quoted whole: its traceback would say it twice
            raise RunExistsError(f"{error} (resume and overwrite are arguments of "
                                 f"{name}(...){hint}){again}") from None  # fmt: skip
        except GradlabError as error:  # the folder is held: by a callback of this process?
            holder = _holding(folder, self)
            if holder is None:
                raise
            raise GradlabError(
                f"{str(error).rstrip('.')}. Here it is the Monitor of another "
                "GradlabTrainerCallback of this process, whose train() did not end (it failed "
                "with the callback passed as callbacks=[...]: callback.attach(trainer) "
                "releases the folder when training "
                "fails): close it with that_callback.monitor.close(), or give this callback "
                "another folder"
            ) from error
        self._run_dir = Path(self.monitor.log_dir)
        self._warn_twice_reported(args)
        warn_overwrite_on_resumed_trainer(type(self).__name__, self.monitor,
                                          int(state.global_step), FRAMEWORK_PACKAGES)  # fmt: skip
        resumed_at = self.monitor.step_count  # the folder's last logged step + 1 (resume)
        self.monitor.step_count = int(state.global_step) + 1  # steps as log_history counts them
        # A Trainer resumed from a checkpoint (global_step > 0) before the run's last logged
        # step is the documented case (the interrupted run logged past its checkpoint); one
        # that starts over (global_step 0) logs its steps again after the earlier ones.
        if resumed_at > self.monitor.step_count and int(state.global_step) == 0:
            self._warn_resumed_behind(folder, resumed_at - 1, self.monitor.step_count)
            self.monitor.folder.going_back_said = True  # the Monitor's own would repeat it
        self._began = True
        self._first_step = int(state.global_step)  # a resumed run starts past 0
        self._calls_at_step = 0
        self.last_record = None
        self._forwarded_step = None

    def on_step_begin(self, args, state, control, **kwargs):
        if self.monitor is not None:
            self.monitor.step_count = int(state.global_step) + 1
        self.in_step = True

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        monitor = self.monitor
        if monitor is None:
            return
        if monitor.closed:  # by hand, during training: nothing more to log
            self._warn_closed_during_training(monitor)
            return
        # A step that called no watched loss after others did: a train_dataset dict whose
        # losses are not all watched. The Monitor's warning about it assumes that the user calls
        # monitor.step() twice per optimizer step; this callback says what happened instead.
        idle = monitor.calls == self._calls_at_step and (monitor.calls > 0 or self._several_losses)
        with warnings.catch_warnings():
            if idle:
                warnings.filterwarnings("ignore", r"gradlab\.Monitor: monitor\.step\(\) closed "
                                        r"step \d+ without a call", RuntimeWarning)  # fmt: skip
                warnings.filterwarnings("ignore", r"gradlab\.Monitor: step \d+ logs nothing in "
                                        r".*: no watched loss", RuntimeWarning)  # fmt: skip
            record = monitor.step()
        self._calls_at_step = monitor.calls
        if record is not None:
            self.last_record = record
        if idle and not self._warned_idle and is_rank_zero():
            self._warned_idle = True
            warnings.warn(
                f"GradlabTrainerCallback: training step {state.global_step + 1} called none of "
                "the losses it watches, so it is not logged (a train_dataset dict with a loss "
                "per dataset: only the steps of the watched losses are logged; watch each loss "
                "with callback.watch to log every step); later such steps are not warned about",
                RuntimeWarning,
                stacklevel=caller_stacklevel(FRAMEWORK_PACKAGES),
            )

    def on_step_end(self, args, state, control, **kwargs):
        self.in_step = False

    def on_log(self, args, state, control, logs=None, **kwargs):
        record = self.last_record
        if logs is None or record is None or record.get("step") != state.global_step:
            return
        if self._forwarded_step == state.global_step:  # the closing summary of the same step
            return
        if "loss" not in logs and self._training_entry_follows(args, state):
            return  # an evaluation's entry: the Trainer's training entry of the step comes next
        self._forwarded_step = state.global_step
        values = {f"{self.prefix}{key}": value for key, value in scalars(record).items()}
        taken = sorted(key for key in values if key in logs)  # the Trainer's own: kept
        if taken:
            values = {key: value for key, value in values.items() if key not in logs}
            self._warn_taken_keys(taken)
        logs.update(values)
        self._added_keys = frozenset(values)  # kept off the console lines (_quiet_console)
        history = state.log_history
        if history and history[-1].get("step") == state.global_step:
            history[-1].update(values)  # the Trainer appended its copy before calling on_log
        if not self.attached and args.report_to and not self._warned_order:
            self._warned_order = True
            warnings.warn(
                "GradlabTrainerCallback was not attached with callback.attach(trainer): the "
                f"report_to callbacks ({', '.join(args.report_to)}) ran before it and did not "
                "receive gradlab's values (metrics.jsonl and state.log_history have them)",
                RuntimeWarning,
                stacklevel=caller_stacklevel(FRAMEWORK_PACKAGES),  # trainer.train()
            )

    def _training_entry_follows(self, args: Any, state: Any) -> bool:
        """Whether the Trainer logs its training loss at this step after the entry it logs now.
        With ``logging_strategy="epoch"`` an evaluation on ``eval_steps`` (and the one at
        ``max_steps``) runs when its step ends, and the epoch's training entry of the same step
        when the epoch ends, after it: at each epoch's last step, and at ``max_steps``, which
        ends the epoch it cuts (the one epoch of a dataloader without length, whose epochs are
        not counted). In every other order the training entry comes first."""
        if getattr(args, "logging_strategy", None) != "epoch":
            return False
        steps, per_epoch = self._logging_interval  # set with the Monitor, when training began
        step, end = int(state.global_step), int(getattr(state, "max_steps", 0) or 0)
        return step == end or (per_epoch and step % steps == 0)

    def _warn_twice_reported(self, args: Any) -> None:
        """Warn when a sink of the Monitor and the Trainer's ``report_to`` send gradlab's values
        to one backend: on_log hands them to ``report_to`` already, so each is logged twice."""
        report_to = getattr(args, "report_to", None) or []
        report_to = [report_to] if isinstance(report_to, str) else list(report_to)
        if not self.attached or not report_to:
            return
        sinks = sink_kinds(self.options.sinks)
        reported = REPORTED_BACKENDS if "all" in report_to else set(report_to)
        both = sorted(sinks & REPORTED_BACKENDS & reported)
        if both:
            warnings.warn(
                f"GradlabTrainerCallback: sinks {both} and report_to {report_to} both send "
                "gradlab's values to the same backend, so each is logged twice per step: the "
                "Trainer's report_to receives them through on_log already; drop those sinks",
                RuntimeWarning,
                stacklevel=caller_stacklevel(FRAMEWORK_PACKAGES),  # trainer.train()
            )

    @staticmethod
    def _warn_resumed_behind(folder: object, last: int, first: int) -> None:
        """Warn that ``resume=True`` continues a run whose last logged step lies at or past the
        Trainer's first step (the Trainer itself was not resumed from a checkpoint)."""
        warnings.warn(
            resumed_behind_message("GradlabTrainerCallback", folder, last, first,
                                   "trainer.train(resume_from_checkpoint=True)"),
            RuntimeWarning,
            stacklevel=caller_stacklevel(FRAMEWORK_PACKAGES),  # trainer.train()
        )

    def _warn_closed_during_training(self, monitor: Monitor) -> None:
        """Warn once that the Monitor was closed by hand while the Trainer trains."""
        if self._warned_closed is monitor:  # once per Monitor (per train() call)
            return
        self._warned_closed = monitor
        warn_closed_during_training(type(self).__name__, monitor, FRAMEWORK_PACKAGES)

    def _warn_taken_keys(self, taken: list[str]) -> None:
        """Warn once that the Trainer's logs hold keys of gradlab's record already (an empty
        ``prefix``): the Trainer's values are kept, gradlab's are in ``metrics.jsonl``."""
        if self._warned_taken:
            return
        self._warned_taken = True
        if self.prefix and all(key.startswith(self.prefix) for key in taken):
            # another gradlab callback (passed in callbacks=[...]: attach refuses it) was first
            message = (
                f"GradlabTrainerCallback: the Trainer's logs hold {taken} already, under this "
                f"callback's prefix={self.prefix!r}: another gradlab callback of the Trainer "
                "reports there, its values are kept and this callback's are in metrics.jsonl "
                "only; give each callback its own prefix (prefix='gradlab_2/') to report both "
                "(later such steps are not warned about)"
            )
        else:
            message = (
                f"GradlabTrainerCallback: the Trainer's logs hold {taken} already, which "
                f"gradlab's record also has under prefix={self.prefix!r}: the Trainer's values "
                "are kept and gradlab's are in metrics.jsonl only; give a prefix (the default "
                "'gradlab/') to report both (later such steps are not warned about)"
            )
        warnings.warn(message, RuntimeWarning,
                      stacklevel=caller_stacklevel(FRAMEWORK_PACKAGES))  # trainer.train()

    def on_train_end(self, args, state, control, **kwargs):
        self.in_step = False
        monitor = self.monitor
        if (monitor is not None and monitor.calls and self.last_record is None and is_rank_zero()
                and not monitor.closed  # closed by hand: warned of already
                and self.options.every is None and self.options.quantities is None
                and not self._logging_step_passed(args, state)):  # fmt: skip
            steps, per_epoch = self._logging_interval  # set with the Monitor
            schedule = (f"logging_strategy='epoch': every {steps} steps" if per_epoch
                        else f"logging_steps={steps}")  # fmt: skip
            if not per_epoch and getattr(args, "logging_strategy", None) == "epoch":
                schedule = ("logging_strategy='epoch' with a training dataloader that has no "
                            f"length, so epochs are not counted: logging_steps={steps} instead")
            warnings.warn(
                f"GradlabTrainerCallback logged none of the {state.global_step} training steps "
                f"while training: it logs on the Trainer's logging steps ({schedule}) and the "
                "run ended first (the last step alone, without its "
                "gradients, is added when training ends, if the loss allows); set logging_steps "
                "in the training arguments (or GradlabTrainerCallback(every=n)) below the number "
                "of steps",
                RuntimeWarning,
                stacklevel=caller_stacklevel(FRAMEWORK_PACKAGES),
            )
        self._close(log_last_step=True)

    # --- helpers -------------------------------------------------------------------------------

    def _logging_step_passed(self, args, state) -> bool:
        """Whether a logging step fell inside this run: then its schedule is not why nothing was
        logged (the Monitor has said why it skipped the calls it could not read)."""
        steps = self._logging_interval[0]  # set with the Monitor, when training began
        if getattr(args, "logging_first_step", False) and self._first_step == 0 < state.global_step:
            return True  # step 1 is a logging step
        return int(state.global_step) // steps > self._first_step // steps

    def _close(self, log_last_step: bool) -> None:
        if self.monitor is not None:
            monitor, self.monitor = self.monitor, None
            monitor.close(log_last_step=log_last_step)

    def _close_after_error(self) -> None:
        """Close the Monitor of a training that raised: no last record (other ranks may be
        gone: no collective), and no advice to call ``monitor.step()`` (training stopped)."""
        self.in_step = False
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", r".*monitor\.step\(\) was never called",
                                    RuntimeWarning)  # fmt: skip
            try:
                self._close(log_last_step=False)
            except Exception as error:  # never hide the training's own exception
                warnings.warn(
                    f"GradlabTrainerCallback could not close its Monitor after training raised: "
                    f"{type(error).__name__}: {error}",
                    RuntimeWarning,
                    stacklevel=3,
                )

    def _warn_if_training_without_this_callback(self, wrapper: _WatchedCall) -> None:
        """Warn once when the watched loss is called in a training step of a Trainer that does
        not hold this callback: nothing is logged."""
        trainer = _training_trainer()
        if trainer is None or self in trainer.callback_handler.callbacks:
            return
        self._warned_unattached = True
        warnings.warn(
            f"the loss {wrapper.__name__} watched by a GradlabTrainerCallback was called in a "
            f"training step of {type(trainer).__name__}, but that trainer does not hold the "
            "callback, so nothing is logged; call callback.attach(trainer) after making the "
            "trainer, before trainer.train()",
            RuntimeWarning,
            stacklevel=caller_stacklevel(FRAMEWORK_PACKAGES),
        )
