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

The Monitor names no quantity: it asks them. A quantity declares what it needs
(:mod:`gradlab.monitor.quantity`), the loss's adapter (:mod:`gradlab.monitor.adapters`) what it
provides; one whose needs cannot be met is left out, the reason in the header (``not_logged``).
Off schedule, ``watch`` only calls the loss and ``step`` only counts. On a logged step the
watched call keeps the batch (detached) and hooks the gradients to read them; ``step`` computes
the due quantities under ``torch.inference_mode()`` on the batch's device (each shared value once:
:class:`~gradlab.monitor.batch.BatchView` caches them), moves the scalars to the host once and
writes one record. Run folders: :mod:`~gradlab.monitor.run_folder`; ``torch.distributed``:
:mod:`~gradlab.monitor.distributed`.
"""

from __future__ import annotations

import hashlib
import math
import traceback
import warnings
import weakref
from collections.abc import Callable, Sequence
from dataclasses import fields
from pathlib import Path

import torch

from gradlab.errors import GradlabError, caller_stacklevel
from gradlab.monitor.adapters import (
    ATTACH_ADAPTER,
    LossAdapter,
    adapt,
    call_tensors,
    describe_call,
    ships_with_gradlab,
)
from gradlab.monitor.batch import BatchView, Workspace
from gradlab.monitor.config import PRESETS, MonitorConfig
from gradlab.monitor.distributed import (
    ANSWERS,
    DROPPED_BITS,
    PLAN_HORIZON,
    PLAN_STEPS,
    StepAgreement,
    agree_on_schedules,
    agree_on_step,
    gather_batch,
    is_distributed,
    is_rank_zero,
    rank_zero_step,
)
from gradlab.monitor.quantity import GRADIENT_NEEDS, Quantity, check_values
from gradlab.monitor.run_folder import RunFolder
from gradlab.monitor.schedules import Schedule, recorded_schedule
from gradlab.monitor.sinks import DISABLED_KEY, Sink
from gradlab.monitor.watched import WatchedCall, watched_like, watching_call
from gradlab.validation import check_bool, skip_value_checks

DEFAULT_TAU = 0.01
"""The Monitor's tau when none is given and the watched loss is not SmoothAP."""

TRAINER_PACKAGES = frozenset({"accelerate", "lightning", "sentence_transformers", "transformers"})
"""Packages whose frames are not the user's: where a trainer (through gradlab's callbacks) calls
the loss or ``monitor.step()``, a warning names the user's ``fit()`` or ``train()`` line."""

SCHEDULE_AHEAD = 64
"""Steps from the first one a schedule is asked at the run's first watched call (before the
run's first step): one that returns what is no bool for any of them (``step % 10``: 0, 1,
then 2) is refused then, not at the step that returns it, where it disables its quantity."""


def _scalar(value: torch.Tensor) -> torch.Tensor:
    """A logged value as a 0-d float64 tensor; most already are (no op then: each op costs
    microseconds, and a logged step stacks dozens of values)."""
    if value.dim() == 0 and value.dtype == torch.float64:
        return value
    return value.reshape(()).to(torch.float64)


_NO_KEYS: frozenset[str] = frozenset()


_PRESET_CLASSES = frozenset(cls for classes in PRESETS.values() for cls in classes)
"""gradlab's quantity classes that a preset holds."""


def _read_once(agreement: StepAgreement | None, batch: BatchView) -> bool:
    """Whether the ranks agreed that every rank holds ``batch`` alike, a batch of rows that
    is then read once rather than gathered (a score matrix, or queries against candidates,
    is never gathered anyway)."""
    return (agreement is not None and agreement.same
            and not (batch.on_scores or batch.candidates is not None))  # fmt: skip


def _own_batch(agreement: StepAgreement | None, batch: BatchView | None) -> bool:
    """Whether a logged step's ``batch`` is read as it is, not gathered (every rank's alike,
    read once; a score matrix, or queries against candidates, read on each rank as its own):
    what the run's header records as ``"gathered"``."""
    return batch is not None and (_read_once(agreement, batch) or batch.on_scores
                                  or batch.candidates is not None)  # fmt: skip


def _defined_by(quantity: Quantity, attribute: str) -> str:
    """The top-level package of the class that defines ``quantity``'s ``attribute`` (its
    instance first): ``"gradlab"`` for gradlab's own, even in a subclass of yours."""
    if attribute in vars(quantity):
        return ""
    owner = next((k for k in type(quantity).__mro__ if attribute in vars(k)), Quantity)
    return owner.__module__.split(".")[0]


def _whose_copy() -> str:
    """Which rank's copy of a quantity a warning that disables it speaks of, in a group of
    processes: each rank disables its own copy, and only rank 0's copy is written (``""`` for
    one process)."""
    if not is_distributed() or torch.distributed.get_world_size() < 2:
        return ""
    rank = torch.distributed.get_rank()
    if rank == 0:
        return " on rank 0, which writes the log: it is logged no more"
    # this rank cannot know rank 0's copy: it says what rank 0 does, not that it works
    return (f" on rank {rank}: rank 0, which writes the log, logs it on unless its own copy "
            "is disabled too (rank 0 warns of that)")


def _due_or_not(quantity: Quantity, step: int) -> bool:
    """Whether ``quantity``'s schedule logs ``step``, False where it raises (a step ahead, for
    the ranks' plans: it is asked again, and disabled, when that step comes)."""
    try:
        return quantity.should_compute(step)
    except Exception:  # any error of a schedule: reported when its step comes
        return False


def _answer(quantity: Quantity, step: int) -> int:
    """``quantity``'s schedule's answer for ``step`` as the ranks compare it: an index into
    :data:`~gradlab.monitor.distributed.ANSWERS` (2: it raises)."""
    try:
        return int(bool(quantity.should_compute(step)))
    except Exception:  # any error of a schedule: the ranks compare where it raises
        return 2


def _answer_ahead(quantity: Quantity, step: int) -> None:
    """Ask ``quantity``'s schedule for ``step``, a step ahead of the run's first: its refusal
    of an answer that is no bool is raised, saying when it was asked; an error of the
    schedule's own is left for when that step comes (a table of steps may end early)."""
    try:
        quantity.should_compute(step)
    except GradlabError as error:
        raise GradlabError(f"{error} (asked before the run's first step, as every schedule is "
                           f"for the {SCHEDULE_AHEAD} steps from it)") from error
    except Exception:  # reported when its step comes, as it always was
        pass


def _why_not(adapter: LossAdapter, quantity: Quantity) -> str | None:
    """Why ``adapter``'s loss cannot serve ``quantity`` (its needs, the loss's kind, or what
    the quantity as configured can read of that loss), or None."""
    reason = adapter.not_applicable(quantity.name)
    if reason:
        return reason
    try:
        said = quantity.not_applicable(adapter.loss_fn)
    except GradlabError:  # it says what it refuses
        raise
    except Exception as error:
        raise GradlabError(f"quantity {quantity.name!r}: its not_applicable() raised "
                           f"{type(error).__name__}: {error}") from error  # fmt: skip
    if said and not isinstance(said, str):  # False, like None and "", says it can
        raise GradlabError(f"quantity {quantity.name!r}: not_applicable() must return a str "
                           f"(why the watched loss cannot serve it) or None (it can); got "
                           f"{said!r}")  # fmt: skip
    if said:
        return said
    reason = adapter.why_not(quantity.needs)
    fewer = quantity.fewer_needs() if reason else None
    if fewer is not None and adapter.why_not(fewer[0]) is None:  # what would serve it
        reason += f"; {fewer[1]}"
    return reason


class Monitor:
    """Log the gradient diagnostics of a watched loss, any loss, while training runs.

    ``monitor.watch(loss_fn)`` returns the loss to train with, ``monitor.step()`` after each
    optimizer step logs the due quantities, ``monitor.close()`` (or a ``with`` block) ends the
    run. The documentation's Monitor page says what each quantity logs and how a step is read.

    Runs never merge: a ``log_dir`` that already holds a run is refused unless ``resume=True``
    (steps go on from its last record) or ``overwrite=True``; one Monitor writes into a folder
    at a time (a lock file, released by :meth:`close`). See :mod:`gradlab.monitor.run_folder`.

    Args:
        log_dir: folder of the run; created at the first record if missing.
        tau: temperature of the diagnostics; ``None``: the watched SmoothAP loss's, else
            ``DEFAULT_TAU``. An explicit tau that differs from the loss's warns once.
        every: one schedule for every quantity (an int ``n`` or a ``step -> bool`` callable);
            ``None``: the preset's :func:`~gradlab.monitor.schedules.default_schedule`, or each
            explicit quantity's own. :meth:`close` logs a last step the schedule skipped.
        preset: ``"cheap"``, ``"default"`` or ``"full"``; ``None``: ``"default"``, or none when
            ``quantities`` are given (they replace a preset: naming one beside them is refused).
        quantities: explicit :class:`~gradlab.monitor.quantity.Quantity` instances (at least one).
        sinks: names from ``gradlab.monitor.sinks.SINKS`` or :class:`Sink` instances (at least one;
            ``gradlab plot`` reads the ``"jsonl"`` sink's ``metrics.jsonl``: keep it beside the
            others to plot the run).
        strict: raise a quantity's error instead of reporting it once and disabling it, and a
            sink's fault instead of warning (the record is dropped either way).
        distributed: ``"auto"`` (the global batch under ``torch.distributed``, rank 0 writes)
            or ``"local"`` (rank 0's own batch, no collective; in either mode only rank 0
            writes, so a Monitor of another rank writes nothing, even into a ``log_dir`` of its
            own).
        config: extra JSON-ready settings stored in the header record (not its own keys
            ``preset``, ``tau`` and ``tau_from``, which the Monitor writes from its options).
        resume: continue the run in ``log_dir``; a folder without a run starts a new one at
            step 0 (one command serves a job's first launch and each restart; check the
            path: a mistyped one starts afresh too).
        overwrite: replace the run in ``log_dir``.

    Every option but ``log_dir`` is a field of :class:`~gradlab.monitor.config.MonitorConfig`
    (documented and checked there); :meth:`from_config` opens a Monitor from one.

    No impossible value is logged: a quantity that reads non-finite embeddings or scores logs
    NaN for its keys but those that read no input value (:meth:`step`); ``not_finite`` counts
    such steps per quantity (and, for the loss, the steps on which it alone was NaN or
    infinite, with finite inputs: logged as it is, the first one warned), and
    ``skipped_calls`` the loss calls it could not read (the first one warns with the
    arguments it saw).

    Logging never stops training: a sink that raises (a full disk: ``OSError``) drops that
    record, ``dropped_records`` counts the dropped records per sink (by file name, else class
    name), the first fault of each sink warns once (``RuntimeWarning`` with the sink, its path
    and the error), the sink is retried at each logged step and the first record it takes
    again notes the steps it missed (``dropped_steps``; :mod:`~gradlab.monitor.sinks`).
    ``strict=True`` raises a :class:`GradlabError` naming the path and the error instead of the
    warning, and the Monitor goes on as well. The folder's lock is released once, at close.

    ``step_count`` is the step the next :meth:`step` closes: 0, or with ``resume=True`` the
    run's last logged step + 1. A loop that restarts from a checkpoint at step ``n`` sets
    ``monitor.step_count = n`` before training, so the records keep the loop's own steps (the
    Lightning and Hugging Face integrations do this from the trainer's step).

    Under ``torch.distributed`` every rank agrees on each logged step before gathering
    (:func:`~gradlab.monitor.distributed.agree_on_step`): a step some rank cannot log (its
    loss call was unreadable or raised) is skipped on every rank and counted in
    ``skipped_steps``; ranks out of step (one skipped ``monitor.step()``) stop logging, the
    reason in ``out_of_step``, rather than mix the ranks' steps. No rank waits alone where the
    Monitor's are the only collectives between two steps (under ``DistributedDataParallel`` a
    rank that skips ``monitor.step()`` meets a gradient all-reduce: the group's timeout).

    Raises:
        GradlabError: ``log_dir`` cannot become a writable folder, or holds a run and neither
            ``resume`` nor ``overwrite`` is set; any other invalid option.

    Example:
        >>> import tempfile
        >>> import torch
        >>> import gradlab
        >>> from gradlab import Monitor
        >>> with Monitor(tempfile.mkdtemp(), preset="cheap", every=1) as monitor:
        ...     loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        ...     embeddings = torch.randn(8, 4, requires_grad=True)
        ...     loss_fn(embeddings, torch.arange(8) % 2).backward()
        ...     record = monitor.step()
        >>> record["step"], len(record) > 1
        (0, True)
    """

    def __init__(
        self,
        log_dir: str | Path,
        tau: float | None = None,
        *,
        every: int | Schedule | None = None,
        preset: str | None = None,
        quantities: Sequence[Quantity] | None = None,
        sinks: Sequence[str | Sink] = ("jsonl",),
        strict: bool = False,
        distributed: str = "auto",
        config: dict | None = None,
        resume: bool = False,
        overwrite: bool = False,
    ) -> None:
        options = MonitorConfig(tau=tau, every=every, preset=preset, quantities=quantities,
                                sinks=sinks, strict=strict, distributed=distributed,
                                config=config, resume=resume, overwrite=overwrite)  # fmt: skip
        self.options = options
        self._tau_given = options.tau is not None
        self.tau = options.tau if self._tau_given else DEFAULT_TAU
        # every= replacing the quantities' own schedules: of the options, alike on every rank
        self.quantities = options.make_quantities(warn=is_rank_zero())
        self.sinks = options.make_sinks()
        self.distributed = options.distributed
        self.strict = options.strict
        # explicit quantities replace the preset: the header then names none
        self.config = {"tau": self.tau, "tau_from": "argument" if self._tau_given else "default",
                       "preset": options.preset_name, **(options.config or {})}  # fmt: skip
        self.disabled: dict[str, str] = {}
        self.not_logged: dict[str, str] = {}  # quantity -> why it cannot apply to the loss
        self.skipped_calls = 0  # loss calls the Monitor could not read
        self._first_skip = ""  # why the first of them could not be read
        # quantity -> logged steps on which it logged NaN because its input was not finite
        self.not_finite: dict[str, int] = {}
        self._inputs_not_finite_warned = False  # a loss value's own warning does not count
        self.calls = 0  # watched calls (and attached forwards) seen
        self._raised_calls = 0  # of them, those that raised (their error said what went wrong)
        # torch.distributed: logged steps skipped on every rank (a rank had no batch), and why
        # the ranks fell out of step (then nothing more is logged)
        self.skipped_steps = 0
        self.out_of_step: str | None = None
        self._stepped = False
        # armed at the first watched call, disarmed by the first step() or by close(): warns
        # when the Monitor is collected (or the program ends) with neither
        self._never_stepped: weakref.finalize | None = None
        self._watched = False
        self._tau_warned = False
        self._tau_change_warned = False
        self._warned_call_after_close = False
        self._unwatched_warned = False
        self._calls_at_step: int | None = None  # self.calls at the previous step()
        self._repeat_warned = False
        self._second_loss_warned = False  # two watched losses called before one step()
        self._same_warned = False  # every rank held the same batch (torch.distributed)
        self._no_gradient_warned = False
        self._zero_scale_warned = False
        self._outside_graph_warned = False
        self._no_graph_warned = False
        self._scores_checked = False  # a user's score matrix against cosines' range: once
        # the large CPU buffers of a logged step, reused by the next one; freed by close()
        self.workspace = Workspace()
        self._pending: BatchView | None = None
        self._pending_adapter: LossAdapter | None = None  # the adapter that read _pending
        self._pending_trained = False  # _pending was read with gradients on
        self._changed_warned = False  # a call's tensors changed in place before the step
        self._not_backpropagated_warned = False  # a step's last call was not backpropagated
        self._said: set[str] = set()  # quantities whose said_of_logged was warned
        # quantities disabled since the last record written, and why: the next record says so
        # (or close(), when none comes); the largest step they name
        self._disabled_notes: dict[str, str] = {}
        self._notes_step: int | None = None
        self._trained = False  # a watched call (or attached forward) ran with gradients on
        # calls with gradients off before the first training call: a rank may evaluate alone
        # before training, so the ranks' agreement leaves them out of its count
        self._calls_before_training = 0
        self._adapters: list[LossAdapter] = []  # every watched loss's (or the attach hook's)
        self._served: list[list[str | None]] = []  # per adapter, _why_not of each quantity
        self._said_not_served: set[str] = set()  # passed quantities a loss cannot serve, said
        self._asked_ahead: set[str] = set()  # quantities whose schedules SCHEDULE_AHEAD asked
        self._last_call: tuple | None = None  # (step, args, kwargs, loss, adapter)
        # the last call of the last step that step() closed: what close() logs when the
        # schedules skipped that step (a call after it, as a final validation, is no step's)
        self._closed_call: tuple | None = None
        self._opened = False
        self._closed = False
        self._rank_in_group: int | None = None  # at the first step, under torch.distributed
        # torch.distributed: the quantities every rank leaves out, and why: from the step
        # where their schedules answer differently on the ranks, or from step 0 (rank 0
        # disabled them for the rest of the run); the steps whose schedules the ranks compared
        # last (from, to)
        self._dead: dict[str, tuple[int, str]] = {}
        self._compared: tuple[int, int] | None = None
        self._refused: str | None = None  # why the folder was refused at the first record
        self.folder = RunFolder(log_dir, self.sinks, resume=options.resume, strict=self.strict,
                                overwrite=options.overwrite, claim_now=is_rank_zero(),
                                not_callers=TRAINER_PACKAGES)  # fmt: skip
        self.log_dir = self.folder.path
        self.dropped_records = self.folder.dropped_records  # sink name -> records it missed
        self._step_count = self.folder.start_step
        self._first_step: int | None = None

    @classmethod
    def from_config(cls, log_dir: str | Path, options: MonitorConfig) -> Monitor:
        """A Monitor with the options of ``options``.

        Example:
            >>> from gradlab import Monitor
            >>> from gradlab.monitor import MonitorConfig
            >>> import tempfile
            >>> Monitor.from_config(tempfile.mkdtemp(), MonitorConfig(preset="cheap")).close()
        """
        if not isinstance(options, MonitorConfig):
            raise GradlabError(f"options must be a MonitorConfig; got {options!r}")
        return cls(log_dir, **{field.name: getattr(options, field.name)
                               for field in fields(options)})  # fmt: skip

    # --- hooks into the user's code ------------------------------------------------------------

    @property
    def step_count(self) -> int:
        """The step the next :meth:`step` closes (see the class docstring)."""
        return self._step_count

    @step_count.setter
    def step_count(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise GradlabError(f"step_count must be a non-negative integer; got {value!r}")
        self._step_count = value

    @property
    def stepped(self) -> bool:
        """Whether :meth:`step` has been called on this Monitor (by the user, or by a trainer's
        callback): a Monitor that was never stepped has logged nothing but a last step.

        Example:
            >>> import torch
            >>> from gradlab import Monitor
            >>> import tempfile
            >>> import gradlab
            >>> monitor = Monitor(tempfile.mkdtemp(), preset="cheap")
            >>> loss_fn = monitor.watch(gradlab.NTXentLoss(0.1))
            >>> scores = torch.randn(4, 4, requires_grad=True)
            >>> loss_fn(scores, torch.eye(4, dtype=torch.bool)).backward()
            >>> monitor.stepped
            False
            >>> _ = monitor.step()
            >>> monitor.stepped
            True
            >>> monitor.close()
        """
        return self._stepped

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has run: a closed Monitor reads and logs nothing more.

        Example:
            >>> from gradlab import Monitor
            >>> import tempfile
            >>> monitor = Monitor(tempfile.mkdtemp(), preset="cheap")
            >>> monitor.close()
            >>> monitor.closed
            True
        """
        return self._closed

    def watch(self, loss_fn: Callable, inputs: str | None = None) -> Callable:
        """Wrap ``loss_fn``: the wrapper returns the loss unchanged and never alters gradients.

        Args:
            loss_fn: the loss, any callable: ``loss_fn(embeddings, labels)``,
                ``loss_fn(queries, candidates=..., positives=...)`` or, for a loss on a ``[Q, C]``
                score matrix, ``loss_fn(scores, positives)`` with ``positives`` a ``[Q, C]``
                bool mask or ``[B]`` labels of a square paired batch. Keyword arguments are
                passed through (:func:`~gradlab.monitor.adapters.call_tensors` reads them).
            inputs: ``"embeddings"``, ``"scores"`` or ``"in_batch_scores"`` (a ``[B, B]``
                score matrix of a batch against itself, such as ``z @ z.T``: each query's own
                column, the diagonal, is then no candidate and its value is not read, so it
                may hold the ``-inf`` that masks it); ``None``: the loss's own
                ``input_form`` (gradlab's losses declare it), else ``"embeddings"``.

        The loss's adapter (:mod:`gradlab.monitor.adapters`) says how it is read. A call the
        Monitor cannot read still returns the loss, reported once with a ``RuntimeWarning``.
        Several calls before one :meth:`step` (gradient accumulation's micro-batches, or two
        watched losses) log the last one: a step describes one batch, not a mix of several,
        and logs what that loss can serve (:attr:`not_logged` lists what no watched loss can);
        :attr:`calls` counts them all. A ``torch.nn.Module`` loss comes back as a
        :class:`~gradlab.monitor.watched.WatchedLoss`, a module whose parameters are the loss's
        own (a loss with learnable weights, held by a model, is still trained and saved).
        ``watch`` may be called again at every step (inside ``compute_loss``, say), with the
        same loss or a new one of the same kind: the Monitor keeps one reading per kind of
        loss, so the calls cost no memory and log what one watch before the loop logs.

        Raises:
            GradlabError: ``loss_fn`` is not callable or ``inputs`` is not allowed.

        Example:
            >>> import torch
            >>> from gradlab import Monitor
            >>> import tempfile, gradlab
            >>> with Monitor(tempfile.mkdtemp(), preset="full", every=1) as monitor:
            ...     loss_fn = monitor.watch(gradlab.NTXentLoss(0.1))
            ...     scores = torch.randn(4, 4, requires_grad=True)
            ...     loss_fn(scores, torch.eye(4, dtype=torch.bool)).backward()
            ...     record = monitor.step()
            >>> len(monitor.not_logged), len(record) > 20  # six cannot read a score matrix
            (6, True)
        """
        self._refuse_when_closed("watch")
        watching = watching_call(loss_fn)
        if isinstance(watching, WatchedCall) and watching.__dict__.get("_gradlab_monitor") is self:
            return loss_fn  # watched already (loss_fn = monitor.watch(loss_fn) in a loop)
        # Another Monitor's watched loss is read as the loss it wraps (its tau, its form, its
        # records), and called through that Monitor's wrapper, which reads it too.
        inner = loss_fn
        while isinstance(watching_call(inner), WatchedCall):
            inner = watching_call(inner).__wrapped__
        adapter = adapt(inner, inputs)
        self._adopt_tau(adapter)
        self._watched = True
        self._explain_not_logged(adapter)

        def watched(*args, **kwargs):
            if self._behind_a_training_call():  # a validation call: passed through
                return loss_fn(*args, **kwargs)
            if self._closed:  # the loss runs; a closed Monitor reads nothing more
                self._warn_call_after_close()
                return loss_fn(*args, **kwargs)
            try:
                due = self._count_call()
                if not due and not self._read_for_the_group():  # off schedule: only the call
                    loss = loss_fn(*args, **kwargs)
                    # close() may read it for the last step: a change in place since then
                    # (an optimizer step on an embedding table) shows in the version counters
                    self._last_call = (self.step_count, args, kwargs, loss, adapter,
                                       _versions(args, kwargs))  # fmt: skip
                    return loss
                wanted = self._wanted()
                args = adapter.own_scores(args, "score_grad" in wanted)  # dL/dS: the loss's own
                with adapter.listening("score_grad" in wanted) as (recorded, records):
                    loss = loss_fn(*args, **kwargs)
                # a logged step is never read again at close(): no versions to keep
                self._last_call = (self.step_count, args, kwargs, loss, adapter, ())
                self._capture(args, kwargs, loss, adapter, recorded,
                              records[-1] if records else None, due=due, wanted=wanted)
                return loss
            except Exception:  # a schedule, the loss or strict=True raised: its error says
                self._raised_calls += 1  # what failed
                if self._never_stepped is not None and not self._stepped:
                    self._disarm_never_stepped_warning()
                raise

        # a loss module's parameters stay the model's; a copy or a pickle is the loss alone
        call = WatchedCall(loss_fn, watched)
        call.__dict__["_gradlab_monitor"] = self  # what watch() finds on a loss it watches already
        return watched_like(loss_fn, call)

    def _warn_call_after_close(self) -> None:
        """Warn once that a watched call came after ``close()`` (evaluation with gradients off
        after training says nothing): it is not read, and ``step()`` would raise."""
        if self._warned_call_after_close or not torch.is_grad_enabled():
            return
        self._warned_call_after_close = True
        what = (f"a watched call of a Monitor whose log_dir was refused at its first record "
                f"({self._refused}): the loss runs and nothing is read or logged"
                if self._refused is not None else
                f"a watched call after close() of the Monitor of {str(self.log_dir)!r}: the loss "
                "runs and nothing is read or logged; make a new Monitor (resume=True continues "
                "this run in its log_dir) and watch the loss again to log more steps")  # fmt: skip
        warnings.warn(f"gradlab.Monitor: {what}", RuntimeWarning,
                      stacklevel=caller_stacklevel(TRAINER_PACKAGES))  # fmt: skip

    def _refuse_when_closed(self, method: str) -> None:
        """A closed Monitor logs nothing more: refuse a new watch where it is made, not at the
        first ``step()`` of the loop that follows."""
        if self._closed:
            raise GradlabError(
                f"monitor.{method}() called after close(); make a new Monitor (resume=True "
                "continues this run in its log_dir)"
            )

    def _adopt_tau(self, adapter: LossAdapter) -> None:
        """Take the watched SmoothAP loss's tau when none was given; warn once if they differ."""
        loss_tau = adapter.loss_tau
        if loss_tau is None:
            return
        # the first watched loss's, even when it is the default; a later one's is compared
        if not self._tau_given and not self._opened and self.config["tau_from"] == "default":
            self.tau = float(loss_tau)
            self.config.update(tau=self.tau, tau_from=adapter.name.removeprefix("the "))
            return
        if loss_tau == self.tau:
            return
        # of the Monitor's options and the loss's, alike on every rank: said once, by rank 0
        if not self._tau_warned and is_rank_zero():
            self._tau_warned = True
            # no tau given: an earlier loss's (or the default), kept as the header records it
            source, remedy = ("", "Leave the Monitor's tau out to use the loss's")
            if not self._tau_given:
                source = f" (from the {self.config['tau_from']}, recorded in the run's header)"
                remedy = "Pass Monitor(tau=...) to choose the tau they use"
            warnings.warn(
                f"gradlab.Monitor: tau={self.tau}{source} differs from {adapter.name}'s "
                f"tau={loss_tau}; the diagnostics (P, widths, counts, decomposition) use "
                f"tau={self.tau}. {remedy}",
                UserWarning,
                stacklevel=caller_stacklevel(TRAINER_PACKAGES),  # watch() or the loss call
            )

    def _follow_loss_tau(self, adapter: LossAdapter) -> None:
        """Read the watched SmoothAP loss's tau as it is at this call (a tau schedule changes it
        after ``watch``): the gradient agreement and the anatomy read the loss at its own tau.
        Before the run's header is written a tau taken from this loss follows it; after, the
        diagnostics keep the header's tau, and the first change away from it warns once."""
        if adapter.read_tau is None:
            return
        tau = adapter.read_tau()
        if tau is None or tau == adapter.loss_tau:
            return
        before, adapter.loss_tau = adapter.loss_tau, tau
        if (not self._tau_given and not self._opened
                and self.config["tau_from"] == adapter.name.removeprefix("the ")):  # fmt: skip
            self.tau = float(tau)
            self.config["tau"] = self.tau
            return
        if tau != self.tau and not self._tau_change_warned:
            self._tau_change_warned = True
            warnings.warn(
                f"gradlab.Monitor: step {self.step_count}: {adapter.name}'s tau changed from "
                f"{before} to {tau} since watch(); the diagnostics (P, widths, counts, "
                f"decomposition) keep tau={self.tau}, as the run's header records, and the "
                "gradient agreement and anatomy read the loss at its own tau. Pass "
                "Monitor(tau=...) to choose the tau the diagnostics use; later changes are not "
                "warned about",
                UserWarning,
                stacklevel=caller_stacklevel(TRAINER_PACKAGES),  # the loss call
            )

    def attach(self, module: torch.nn.Module, labels: torch.Tensor | Callable[[], torch.Tensor]):
        """Forward hook on ``module`` (its output are the embeddings); ``labels`` a tensor or a
        zero-argument callable giving the current batch's labels. Returns the hook handle.

        The hook never breaks training: output it cannot read is reported once (see
        :meth:`watch`). Without the loss, the quantities that need it are not logged.

        Example:
            >>> import torch
            >>> from gradlab import Monitor
            >>> import tempfile
            >>> with Monitor(tempfile.mkdtemp(), preset="cheap", every=1) as monitor:
            ...     handle = monitor.attach(torch.nn.Linear(3, 2), torch.arange(4) % 2)
            ...     [why.split(";")[0] for why in monitor.not_logged.values()]
            ['needs the loss value']
        """
        self._refuse_when_closed("attach")
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
            self._explain_not_logged(ATTACH_ADAPTER)

        def hook(_module, _inputs, output):
            if self._behind_a_training_call():  # an evaluation forward: passed through
                return
            due = self._count_call()
            if due or self._read_for_the_group():
                current = labels() if callable(labels) else labels
                self._capture((output, current), {}, None, ATTACH_ADAPTER, due=due)

        return module.register_forward_hook(hook)

    def _behind_a_training_call(self) -> bool:
        """Whether a call now, with gradients off (``torch.no_grad()``, ``inference_mode``),
        comes after the run has trained through this Monitor (a call made with them on, at any
        step): a validation batch, between backward and ``monitor.step()`` or between two
        steps, logged or not, which must not replace the batch that was trained on, be logged
        by ``close()`` for the last step, or count as a call (under torch.distributed, a rank
        validating alone would put the ranks out of step). A call with gradients off and no
        training call before it (a loss watched for its values alone, or an evaluation before
        training starts) is read as any other."""
        return self._trained and not torch.is_grad_enabled()

    def _count_call(self) -> list[Quantity]:
        """Count a watched call (the first arms the end-of-run warning) and return the
        quantities due now. A schedule that raises leaves the warning to the watched call,
        which disarms it: the error says what went wrong, not a missing ``monitor.step()``."""
        self.calls += 1
        if not self._trained and not torch.is_grad_enabled():  # an evaluation before training
            self._calls_before_training += 1
        self._trained = self._trained or torch.is_grad_enabled()
        if self.calls == 1:
            self._arm_never_stepped_warning()
        return self._due_now()

    def _due_now(self) -> list[Quantity]:
        """The enabled quantities whose schedules log the current step (each asked once).

        Under torch.distributed, on a step the ranks have not compared yet (``step_count`` set
        past the steps compared), a schedule that raises is read as not logging the step: the
        ranks compare at this step's ``monitor.step()`` first, and only then is its error
        reported or raised (``strict=True``), alike on every rank; raised here, at the loss
        call of one rank, it would leave the others waiting in the comparison."""
        step, disabled = self.step_count, self.disabled
        if self._dead:
            self._retire(step)
        ask = _due_or_not if self._uncompared(step) else self._asked
        return [q for q in self.quantities if q.name not in disabled and ask(q, step)]

    def _uncompared(self, step: int) -> bool:
        """Whether ``step`` lies outside the steps whose schedules the ranks compared last
        (never without a process group: the ranks compare only when logged steps gather)."""
        return self._compared is not None and not self._compared[0] <= step < self._compared[1]

    def _live(self, name: str, step: int) -> bool:
        """Whether quantity ``name`` is still logged at ``step``: the ranks did not agree to
        leave it out by then (:attr:`_dead`)."""
        dead = self._dead.get(name)
        return dead is None or step < dead[0]

    def _retire(self, step: int) -> None:
        """Disable on this rank each quantity the ranks agreed to leave out by ``step``; rank
        0, which writes, notes it in the log at the step agreed (unless it was disabled there
        already, and noted). Once disabled it is left out at every step, as a quantity
        disabled on rank 0 is: a loop gone back before that step neither logs it nor gathers
        a batch for it."""
        for name, (start, why) in self._dead.items():
            if start <= step:
                if name not in self.disabled:
                    self.disabled[name] = why
                    if is_rank_zero():
                        self._note(name, start, why)
                self._dead[name] = (0, why)  # a key's value replaced: the dict keeps its size

    def _read_for_the_group(self) -> bool:
        """Whether this rank reads its batch though none of its enabled quantities is due:
        under torch.distributed (``distributed="auto"``) a quantity disabled on this rank alone
        (its ``compute`` raised here) is still logged by rank 0, which gathers every rank's
        batch on the steps its schedule logs."""
        if not self.disabled or not self._gathers():
            return False
        step, disabled = self.step_count, self.disabled
        return any(_due_or_not(q, step) for q in self.quantities
                   if q.name in disabled and q.name not in self.not_logged
                   and self._live(q.name, step))  # fmt: skip

    def _wanted(self) -> set[str]:
        """What the enabled quantities need (a gradient is hooked when one of them reads it);
        under torch.distributed the disabled ones too: rank 0 may log one disabled on this rank
        alone, and every rank offers the same gradients to gather."""
        skipped = ({name for name in self._dead if not self._live(name, self.step_count)}
                   if self._gathers() else self.disabled)  # fmt: skip
        return set().union(*(q.needs for q in self.quantities if q.name not in skipped))

    def _capture(self, args, kwargs, loss, adapter: LossAdapter, recorded=(), record=None, *,
                 due: list[Quantity], wanted: set[str] | None = None,
                 step: int | None = None):  # fmt: skip
        """Keep the batch of a logged step (detached), its gradients hooked to be read. A call
        that cannot be read, or whose part a quantity cannot take (:meth:`Quantity.at_call`
        raises), is not kept: the step logs what it held before the call. ``due``: the
        quantities whose :meth:`Quantity.at_call` runs; ``wanted``: :meth:`_wanted`, when the
        caller has it; ``step``: the step the call belongs to (the current one when None; the
        last closed step when ``close()`` reads its call again)."""
        batch = None
        self._follow_loss_tau(adapter)
        try:
            wanted = self._wanted() if wanted is None else wanted
            batch = adapter.capture(
                call_tensors(args, kwargs), loss, self.tau, record=record, recorded=recorded,
                score_grad="score_grad" in wanted, embedding_grad="embedding_grad" in wanted,
                loss_scale=True,  # a quantity reading a parameter's gradient unscales it too
            )  # fmt: skip
            batch.provides = adapter.provides
        except Exception as error:
            if batch is not None:  # read, but not kept: its gradient hooks go with it
                adapter.remove_hooks()
            call = describe_call(args, kwargs)
            if self.strict:
                raise GradlabError(f"Monitor cannot read this loss call: {error}; the call's "
                                   f"arguments: {call}") from error  # fmt: skip
            self._skip_call(error, call)
            return
        for quantity in due:  # what the optimizer step will move, taken now
            if quantity.name in self.disabled:
                continue
            try:
                quantity.at_call(batch)
            except Exception as error:  # this quantity alone: the call is kept for the others
                self._fail(quantity, error, "at_call()",
                           self.step_count if step is None else step)  # fmt: skip
        if (self._pending is not None and self._pending_adapter is not adapter
                and self._pending_trained):  # an evaluation before it: replaced, no sum
            self._warn_second_loss(self._pending_adapter, adapter)
        self._pending, self._pending_adapter = batch, adapter
        self._pending_trained = torch.is_grad_enabled()

    def _warn_nothing_read(self, stacklevel: int) -> None:
        """At close: say that a run whose calls could not be read logged nothing at all (the
        first unreadable call was warned of, the later ones were skipped without a word)."""
        warnings.warn(
            f"gradlab.Monitor: nothing was logged in {str(self.log_dir)!r}: "
            f"{self.skipped_calls} of the {self.calls} watched call(s) could not be read (the "
            f"first: {self._first_skip}); strict=True raises at the call instead",
            RuntimeWarning,
            stacklevel=stacklevel,
        )

    def _skip_call(self, error: Exception, call: str) -> None:
        """Report the first unreadable call (with the arguments it saw); count all of them."""
        self.skipped_calls += 1
        if self.skipped_calls == 1:
            self._first_skip = str(error)
            warnings.warn(
                f"gradlab.Monitor: a loss call it cannot read was not logged ({error}; the "
                f"call's arguments: {call}); "
                "training goes on, later such calls are skipped silently "
                "(strict=True raises instead)",
                RuntimeWarning,
                stacklevel=caller_stacklevel(TRAINER_PACKAGES),  # the loss call, or train()
            )

    def _explain_not_logged(self, adapter: LossAdapter) -> None:
        """Leave out, with the reason, each quantity that none of the watched losses can serve
        (with several, a step logs what the loss read on that step can serve: :meth:`_record`).

        A loss that serves exactly what an earlier one serves (the same loss watched again, as
        when ``watch`` is called inside the training loop) changes nothing and is not kept:
        the list stays as long as the number of different kinds of loss watched."""
        served = [_why_not(adapter, quantity) for quantity in self.quantities]
        self._say_not_served(adapter, served)
        if served in self._served:
            return
        for name in self.not_logged:
            self.disabled.pop(name, None)
        self._adapters.append(adapter)
        self._served.append(served)
        self.not_logged = {}
        for index, quantity in enumerate(self.quantities):
            reasons = [each[index] for each in self._served]
            if all(reasons):
                self.not_logged[quantity.name] = "; and ".join(dict.fromkeys(reasons))
        self.disabled.update(self.not_logged)

    def _say_not_served(self, adapter: LossAdapter, served: list[str | None]) -> None:
        """Warn once per quantity that ``adapter``'s loss cannot serve a quantity the user
        chose by name (``quantities=``: one of their own, or one of gradlab's that no preset
        holds): it would otherwise be left out with its reason in the header alone. A preset's
        quantities, passed as a preset or one by one, are left out quietly (every preset holds
        some that a given loss cannot serve), unless none of the quantities passed can be
        served: the run would log nothing, said nowhere."""
        if self.options.quantities is None or not is_rank_zero():
            return  # of the options and the loss, alike on every rank: said by rank 0 alone
        nothing = all(reason is not None for reason in served)
        for quantity, reason in zip(self.quantities, served, strict=True):
            if (reason is None or quantity.name in self._said_not_served
                    or (type(quantity) in _PRESET_CLASSES and not nothing)):  # fmt: skip
                continue
            self._said_not_served.add(quantity.name)
            warnings.warn(
                f"gradlab.Monitor: the {quantity.name} quantity, which you passed, cannot be "
                f"logged for {adapter.name}: {reason} (monitor.not_logged and the run header "
                "keep the reason)",
                UserWarning,
                stacklevel=caller_stacklevel(TRAINER_PACKAGES),  # watch() or attach()
            )

    def _servable(self, adapter: LossAdapter, due: list[Quantity], step: int) -> list[Quantity]:
        """The quantities of ``due`` that ``adapter``'s loss can serve now. With one watched
        loss, one that it cannot serve after all (its call showed it: the watch could not)
        joins :attr:`not_logged` with the reason and is not computed again."""
        kept = []
        for quantity in due:
            reason = _why_not(adapter, quantity)
            if reason is None:
                kept.append(quantity)
            elif len(self._adapters) == 1:
                self.not_logged[quantity.name] = self.disabled[quantity.name] = reason
                if self._opened:  # a header written already does not name it: the record will
                    self._note(quantity.name, step, reason)
                unkept = self._unkept_note()
                if unkept:  # nor will any record (nor a header: metrics.csv has none)
                    warnings.warn(
                        f"gradlab.Monitor: step {step}: quantity {quantity.name!r} is logged no "
                        f"more: {reason}{unkept}",
                        RuntimeWarning,
                        stacklevel=caller_stacklevel(TRAINER_PACKAGES),
                    )
        return kept

    # --- the step ------------------------------------------------------------------------------

    def step(self, *given: object, **named: object) -> dict | None:
        """Close the optimizer step: compute and write the due quantities. Returns the record
        written, or None: off schedule, on a step not logged, and under torch.distributed on
        every rank but 0 (which alone writes; the other ranks still compute and agree).

        It takes no argument: the Monitor counts its steps (:attr:`step_count`, which may be
        set to start elsewhere). A step number passed as other loggers take one is refused.

        Never an impossible value: on a step whose embeddings or scores are not finite (a loss
        that does not validate them), every quantity that reads them logs NaN for each of its
        keys but its :attr:`~gradlab.monitor.quantity.Quantity.input_free_keys` (the operating
        region's half-width, a chance level, a temperature's scale: settings, shapes and
        parameters, logged as they are); the first such step warns (``RuntimeWarning``) and
        :attr:`not_finite` counts the steps per quantity.
        """
        if given or named:
            passed = ", ".join([*map(repr, given), *(f"{k}={v!r}" for k, v in named.items())])
            raise GradlabError(
                f"monitor.step() takes no argument; got monitor.step({passed}): the Monitor "
                "counts its optimizer steps itself (set monitor.step_count = N once to number "
                "them from N)"
            )
        if self._closed:
            if self._refused is not None:
                raise GradlabError(f"monitor.step() called on a Monitor whose log_dir was "
                                   f"refused at its first record: {self._refused}")  # fmt: skip
            raise GradlabError(
                f"monitor.step() called after close() of the Monitor of {str(self.log_dir)!r}; "
                "make a new Monitor (resume=True continues this run in its log_dir)"
            )
        step, batch = self.step_count, self._pending
        closing, last_call = step, self._last_call
        self._pending, self._stepped = None, True
        if self._never_stepped is not None:
            self._disarm_never_stepped_warning()
        if batch is not None:  # backward has run: the hooks have read what they read
            self._pending_adapter.remove_hooks()
        if self._first_step is None:  # where this Monitor's steps start (a resumption's)
            if self._gathers():  # every rank numbers its steps as rank 0, which writes
                step = self._follow_rank_zero(step, batch)
                self._compared = (step, step + PLAN_HORIZON)  # its schedules compared there
            self._first_step = step
            # this rank in its group, kept for close(): the group may be gone by then
            self._rank_in_group = torch.distributed.get_rank() if is_distributed() else None
        self.step_count = step + 1
        if last_call is not None and last_call[0] == closing:  # a call of the step closed
            self._closed_call = (step, *last_call[1:])
        if batch is None and self.calls == 0:  # nothing watched was ever called
            self._warn_unwatched(step)
        elif self.calls == self._calls_at_step:  # no call since the previous step()
            self._warn_repeated_step(step)
        self._calls_at_step = self.calls
        if self._gathers():
            return self._step_distributed(step, batch)
        if batch is None:  # nothing captured (off schedule): no schedule to ask, O(1)
            # but a schedule that raised when the call asked it: its note is written now
            return self._write_notes(step, None)
        due = [q for q in self.quantities if q.name not in self.disabled and self._asked(q, step)]
        if not due:
            return self._write_notes(step, batch)
        return self._record(step, batch, due)

    def _write_notes(self, step: int, batch: BatchView | None) -> dict | None:
        """Write a record of the step alone with the note of the quantities disabled since the
        last record (:data:`~gradlab.monitor.sinks.DISABLED_KEY`), when there is one: on a step
        on which nothing else is due, it would otherwise wait for a record that may never
        come. Under torch.distributed rank 0 alone writes it (no collective is needed). As the
        run's first record, it holds no step's values: the header cannot say whether they
        are gathered (:meth:`_open`)."""
        if not self._disabled_notes or not is_rank_zero():
            return None
        self._open(batch.embeddings.device if batch is not None else None,
                   first_step=self._first_step)  # fmt: skip
        record = {"step": step, DISABLED_KEY: self._take_notes()}
        self.folder.write(record)
        return record

    def _note(self, name: str, step: int, why: str) -> None:
        """Keep the log's one line on quantity ``name``, disabled at ``step``, for the next
        record written (:meth:`_write_notes`, :meth:`_record`, or :meth:`close`)."""
        self._disabled_notes[name] = f"step {step}: {why}"
        self._notes_step = step if self._notes_step is None else max(self._notes_step, step)

    def _take_notes(self) -> dict[str, str]:
        """The notes kept since the last record, which this record now carries."""
        notes, self._disabled_notes, self._notes_step = self._disabled_notes, {}, None
        return notes

    def _follow_rank_zero(self, step: int, batch: BatchView | None) -> int:
        """Rank 0's step number at this Monitor's first step (one broadcast, on the batch's
        device when there is one); warn once on a rank that was elsewhere."""
        logs = [any(q.name not in self.not_logged and _due_or_not(q, step + k)
                    for q in self.quantities) for k in range(PLAN_HORIZON)]  # fmt: skip
        plan = sum(1 << k for k in range(PLAN_STEPS) if logs[k])
        digest = int.from_bytes(hashlib.blake2b(bytes(logs), digest_size=7).digest(), "little")
        agreed = rank_zero_step(step, batch.embeddings.device if batch is not None else None,
                                plan, digest)  # fmt: skip
        if agreed != step:
            warnings.warn(
                f"gradlab.Monitor: rank {torch.distributed.get_rank()} was at step {step} at its "
                f"first monitor.step(), rank 0 at step {agreed}: it numbers its steps as rank 0, "
                "which writes (resume=True read the run folder before rank 0 had written its "
                "last record, or the folder is not shared between the nodes; set "
                "monitor.step_count alike on every rank)",
                RuntimeWarning,
                stacklevel=caller_stacklevel(TRAINER_PACKAGES),  # step()'s caller, or fit()'s
            )
        return agreed

    def _warn_unwatched(self, step: int) -> None:
        """Warn once when a step that would log finds no call of anything watched."""
        if self._unwatched_warned or not self._scheduled(step):
            return
        self._unwatched_warned = True
        what = ("the loss that monitor.watch() returned was never called" if self._watched
                else "no watched loss or attached module has run")  # fmt: skip
        warnings.warn(
            f"gradlab.Monitor: step {step} logs nothing in {str(self.log_dir)!r}: {what}. "
            "Train with the wrapped loss "
            "(loss_fn = monitor.watch(loss_fn), or a callback's callback.watch(loss_fn), then "
            "call loss_fn), or attach the Monitor to the embedding module with "
            "monitor.attach(module) (a callback's attach(trainer) only wires it to the Trainer)",
            RuntimeWarning,
            stacklevel=caller_stacklevel(TRAINER_PACKAGES),  # step()'s caller, or fit()'s
        )

    def _warn_repeated_step(self, step: int) -> None:
        """Warn once when a step closes without a watched call since the previous one: most
        often ``monitor.step()`` called twice per optimizer step, which silently numbers the
        records twice as fast as the optimizer steps."""
        if self._repeat_warned:
            return
        self._repeat_warned = True
        warnings.warn(
            f"gradlab.Monitor: monitor.step() closed step {step} without a call of the watched "
            f"loss since it closed step {step - 1}; if monitor.step() runs twice per optimizer "
            "step, the logged step numbers run ahead of the optimizer's: call monitor.step() "
            "once per optimizer step, after backward (later such steps are not warned about)",
            RuntimeWarning,
            stacklevel=caller_stacklevel(),
        )

    def _warn_second_loss(self, first: LossAdapter, second: LossAdapter) -> None:
        """Warn once when two different watched losses are called before one step() (a
        compute_loss that adds two losses): the step logs the last one's batch alone, and
        its ``loss`` key is that loss's value, not the sum the optimizer follows."""
        if self._second_loss_warned:
            return
        self._second_loss_warned = True
        same = first.name == second.name  # two losses of one class: told apart by their order
        later = f"another {second.name.removeprefix('the ')}" if same else second.name
        logged = "the one called last" if same else second.name
        warnings.warn(
            f"gradlab.Monitor: step {self.step_count}: two watched losses were called before "
            f"monitor.step() ({first.name}, then {later}); the step logs the last call's "
            f"batch, so its values (the loss among them) are those of {logged} alone, not "
            "of their sum (later such steps are not warned about)",
            RuntimeWarning,
            stacklevel=caller_stacklevel(TRAINER_PACKAGES),
        )

    def _warn_gradient_unread(self, flag: str, due: list[Quantity], needs: frozenset[str],
                              message: str, packages: frozenset[str] = frozenset()) -> None:
        """Warn once per Monitor (``flag``: the attribute that remembers it) that the due
        quantities reading one of ``needs`` got no gradient of their own on this step, which
        would otherwise pass unseen: ``message``, its ``{reading}`` their names. Nothing when
        no due quantity reads one."""
        reading = [q.name for q in due if q.needs & needs]
        if getattr(self, flag) or not reading:
            return
        setattr(self, flag, True)
        warnings.warn(message.format(reading=", ".join(reading)), RuntimeWarning,
                      stacklevel=caller_stacklevel(packages))  # fmt: skip

    def _warn_no_gradient(self, step: int, due: list[Quantity],
                          loss: torch.Tensor | None = None) -> None:  # fmt: skip
        """A logged step closed before backward reached its watched call; said apart when
        the call's loss was not finite (one host read, at the first such step): a loop that
        skips backward for it."""
        if self._no_gradient_warned:
            return
        value = None
        if isinstance(loss, torch.Tensor) and loss.numel() == 1 and loss.device.type != "meta":
            value = float(loss.detach())
        if value is not None and not math.isfinite(value):
            self._warn_gradient_unread(
                "_no_gradient_warned", due, GRADIENT_NEEDS,
                f"gradlab.Monitor: step {step}'s watched loss was {value} and got no backward, "
                "so {reading} logged nothing for it: a loop that skips backward and the "
                "optimizer step for a loss that is not finite should skip monitor.step() too, "
                "so that the records stay one per optimizer step (later such steps are not "
                "warned about)",
            )  # fmt: skip
            return
        self._warn_gradient_unread(
            "_no_gradient_warned", due, GRADIENT_NEEDS,
            f"gradlab.Monitor: monitor.step() closed step {step} before backward reached the "
            "inputs of its last watched call, so {reading} logged nothing for it: call "
            "monitor.step() after loss.backward(), and make a call that is not trained after "
            "it (an evaluation, a display) under torch.no_grad() (later such steps are not "
            "warned about)",
        )  # fmt: skip

    def _warn_loss_not_backpropagated(self, step: int, due: list[Quantity],
                                      parameter: bool = False) -> None:  # fmt: skip
        """Backward reached a logged call's inputs (or a parameter a quantity follows) but not
        its loss (a second call of the step, for display): its gradient quantities would read
        another call's gradient, or zeros."""
        if self._not_backpropagated_warned:
            return
        reading = [q.name for q in due if q.needs & GRADIENT_NEEDS]
        if parameter:  # a followed parameter's gradient (a learnable scale's, observed)
            reading.append("the observed parameter gradient")
        if not reading:
            return
        self._not_backpropagated_warned = True
        warnings.warn(
            f"gradlab.Monitor: step {step}: backward reached the watched call's inputs but not "
            "its loss: the step's last watched call was not backpropagated (a second call for "
            "display, such as loss_fn(...).item(): make it under torch.no_grad()), so "
            f"{', '.join(reading)} logged nothing for it (later such steps are not warned "
            "about)",
            RuntimeWarning,
            stacklevel=caller_stacklevel(),
        )

    def _warn_scaled_by_zero(self, step: int, due: list[Quantity]) -> None:
        """The watched loss reached backward multiplied by 0 (a loss weight that starts at 0):
        the gradient quantities read zeros that look like measurements."""
        self._warn_gradient_unread(
            "_zero_scale_warned", due, GRADIENT_NEEDS,
            f"gradlab.Monitor: step {step}: the watched loss reached backward multiplied by 0 "
            "(a loss weight of 0?), so {reading} read a zero gradient, not the loss's own "
            "(later such steps are not warned about)",
            TRAINER_PACKAGES,  # step()'s caller, or fit()'s
        )  # fmt: skip

    def _warn_embeddings_outside_graph(self, step: int, due: list[Quantity]) -> None:
        """A logged call's embeddings take no part in the loss's graph (a frozen encoder)."""
        self._warn_gradient_unread(
            "_outside_graph_warned", due, frozenset({"embedding_grad"}),
            f"gradlab.Monitor: step {step}: the embeddings the watched loss was called on do not "
            "require grad (made under torch.no_grad() or detached: a frozen encoder), so "
            "{reading} logged nothing; the other quantities are logged (later such steps are "
            "not warned about)",
        )  # fmt: skip

    def _warn_no_graph(self, step: int, due: list[Quantity]) -> None:
        """A logged call built no graph: no gradient will reach it."""
        self._warn_gradient_unread(
            "_no_graph_warned", due, GRADIENT_NEEDS,
            f"gradlab.Monitor: step {step}: the watched call built no graph ("
            + ("neither the embeddings nor the loss require grad: an evaluation outside "
               "torch.no_grad(), or a frozen model" if self._pending_trained else
               "it was made with gradients off: under torch.no_grad() or "
               "torch.inference_mode()")
            + "), so {reading} logged nothing; the other quantities are logged (later such "
            "steps are not warned about)",
        )  # fmt: skip

    def _warn_scores_beyond_cosines(self, step: int, batch: BatchView,
                                    due: list[Quantity]) -> None:
        """Once, at the first step with a quantity at the Monitor's tau (one host read): a
        score matrix of the watched loss beyond cosines' range, where SmoothAP's sigmoid at a
        tau chosen for cosines says nothing of the loss."""
        at_tau = [q.name for q in due if q.reads_tau]
        if not at_tau:
            return
        self._scores_checked = True
        if batch.scores.device.type == "meta" or batch.scores.numel() == 0:
            return
        largest = float(batch.scores.detach().abs().amax())
        if math.isfinite(largest) and largest > 1.0 + 1e-3:  # a cosine, rounded, is at most 1
            warnings.warn(
                f"gradlab.Monitor: step {step}: the watched score matrix holds values up to "
                f"{largest:.4g} in magnitude, but {', '.join(at_tau)} read it through "
                f"SmoothAP's sigmoid at the Monitor's tau = {batch.tau:g}, a width for cosine "
                "scores in [-1, 1]: on these scores they describe that sigmoid, not your loss. "
                "Score cosines (normalised embeddings), or give Monitor(tau=...) a width on "
                "your scores' scale",
                RuntimeWarning,
                stacklevel=caller_stacklevel(TRAINER_PACKAGES),
            )

    def _gathers(self) -> bool:
        """Whether logged steps gather the global batch (``distributed="auto"`` in a group)."""
        return self.distributed == "auto" and is_distributed()

    def _answers(self, quantity: Quantity, step: int) -> bytes:
        """``quantity``'s answer for each of the :data:`PLAN_HORIZON` steps from ``step``
        (:func:`_answer`), 0 where it is left out (:attr:`not_logged`, or by the ranks)."""
        if quantity.name in self.not_logged:
            return bytes(PLAN_HORIZON)
        return bytes(_answer(quantity, at) if self._live(quantity.name, at) else 0
                     for at in range(step, step + PLAN_HORIZON))  # fmt: skip

    def _scheduled(self, step: int) -> list[Quantity]:
        """The quantities due at ``step`` by the schedule alone: the same on every rank (but
        those the ranks agreed to leave out)."""
        dead = self._dead
        if dead:
            self._retire(step)
        return [q for q in self.quantities if q.name not in self.not_logged
                and (not dead or self._live(q.name, step)) and (
                    _due_or_not(q, step) if q.name in self.disabled
                    else self._asked(q, step))]  # fmt: skip

    def _step_distributed(self, step: int, batch: BatchView | None) -> dict | None:
        """A step under torch.distributed: every rank agrees first, even one without a batch
        (:func:`~gradlab.monitor.distributed.agree_on_step`), so none waits alone."""
        if self.out_of_step is not None:
            return None
        if self._compared is not None:
            lower, upper = self._compared
            if not lower <= step < upper:  # a step set elsewhere: compared from it
                self._compare_schedules(step)
            elif step + 1 == upper:  # the last step compared: the next ones, before the next
                self._compare_schedules(step + 1)  # step's watched call asks its schedules
        if not self._scheduled(step):  # a schedule that raised when the call asked it: rank 0
            return self._write_notes(step, batch)  # writes its note
        agreement = self._agree(step, batch, stacklevel=4)  # the caller of step()
        if agreement is None:  # skipped on every rank (or out of step: noted there)
            return None if self.out_of_step is not None else self._write_notes(step, batch)
        scheduled = self._scheduled(step)
        if not scheduled:  # rank 0 had disabled what was due: no rank computes or gathers
            return self._write_notes(step, batch)
        due = [q for q in scheduled if q.name not in self.disabled]
        return self._record(step, batch, due, agreement)

    def _compare_schedules(self, step: int) -> None:
        """Compare the ranks' schedules over the :data:`PLAN_HORIZON` steps from ``step``
        (:func:`~gradlab.monitor.distributed.agree_on_schedules`): a quantity whose schedule
        logs a step on one rank and not on another (one of the user's own that raises there on
        one rank) is disabled on every rank from that step, with a warning by rank 0 (and by a
        rank whose schedule raises, with its error); ``strict=True`` raises on every rank. Every
        :data:`PLAN_HORIZON` steps, on every rank: one all-gather of three integers."""
        # gradlab's schedules answer by their description alone (the header's): compared as
        # it, not asked for every step; a schedule of the user's own is asked for each
        compared, asked = [], {}  # asked: a user's schedule's answers, asked once
        for quantity in self.quantities:
            dead = self._dead.get(quantity.name)
            until = "" if dead is None else f" until {dead[0]}"
            recorded = (recorded_schedule(quantity.schedule) if type(quantity).should_compute
                        is Quantity.should_compute else None)  # fmt: skip
            if quantity.name in self.not_logged:
                compared.append(b"-")
            elif recorded is not None:
                compared.append(f"{recorded}{until}".encode())
            else:
                asked[quantity.name] = self._answers(quantity, step)
                compared.append(bytes(a == 1 for a in asked[quantity.name]))
        parted = agree_on_schedules(
            step, len(self.quantities), b"\n".join(compared),
            lambda: b"".join(asked.get(q.name) or self._answers(q, step)
                             for q in self.quantities))  # fmt: skip
        self._compared = (step, step + PLAN_HORIZON)
        rank = torch.distributed.get_rank()
        for index, (at, said) in parted.items():
            quantity = self.quantities[index]
            ranks = ", ".join(f"rank {r} {ANSWERS[a]}" for r, a in enumerate(said))
            why = (f"its schedule answers differently on the ranks for step {at} ({ranks}): "
                   "under torch.distributed a schedule must answer alike on every rank")
            message = (
                f"gradlab.Monitor: step {step}: quantity {quantity.name!r}: {why}, or a rank "
                f"would wait at step {at} for one that never comes until the process group "
                "times out"
            )
            if said[rank] == 2:  # this rank's own error: said here, where it is known
                try:
                    quantity.should_compute(at)
                except Exception as error:
                    warnings.warn(
                        f"gradlab.Monitor: the schedule of quantity {quantity.name!r} raises "
                        f"for step {at} on rank {rank}: {type(error).__name__}: {error}",
                        RuntimeWarning, stacklevel=caller_stacklevel(TRAINER_PACKAGES),
                    )  # fmt: skip
            if self.strict:
                raise GradlabError(f"{message} (strict=True raises, on every rank, rather than "
                                   "disable the quantity on every rank)")  # fmt: skip
            self._dead[quantity.name] = (at, f"disabled on every rank: {why}")
            if is_rank_zero():  # of the whole group: said once, by rank 0
                warnings.warn(f"{message}. It is disabled on every rank from step {at} on "
                              "(strict=True raises instead)", RuntimeWarning,
                              stacklevel=caller_stacklevel(TRAINER_PACKAGES))  # fmt: skip

    def _agree(self, step: int, batch: BatchView | None, stacklevel: int) -> StepAgreement | None:
        """The ranks' decision on a logged step when it is logged, else ``None`` (a skipped
        step is counted and warned once; ranks out of step stop logging). Ranks that hold the
        same batch warn once.

        Raises:
            GradlabError: the collective failed (it timed out, or a rank ended), with what every
                rank must do (:func:`~gradlab.monitor.distributed.agree_on_step`).
        """
        dropped = 0  # what rank 0, which writes, has disabled: no rank computes it any more
        if is_rank_zero():
            dropped = sum(1 << index for index, q in enumerate(self.quantities[:DROPPED_BITS])
                          if q.name in self.disabled and q.name not in self.not_logged
                          and q.name not in self._dead)  # fmt: skip
        agreement = agree_on_step(step, self.calls - self._calls_before_training, batch, dropped)
        for index, quantity in enumerate(self.quantities[:DROPPED_BITS]):
            if agreement.dropped >> index & 1 and quantity.name not in self._dead:
                # from step 0: rank 0 disabled it for the rest of the run, so it stays left out
                # at any step, one that a loop gone back to an earlier checkpoint runs again too
                self._dead[quantity.name] = (0, "disabled on rank 0, which writes the log")
        if self._dead:
            self._retire(step)
        if agreement.out_of_step is not None:
            self.out_of_step = f"at step {step}, {agreement.out_of_step}"
            if is_rank_zero():  # the log says so too: every quantity's keys end here
                for quantity in self.quantities:
                    if quantity.name not in self.disabled:
                        self._note(quantity.name, step,
                                   f"{agreement.out_of_step}; the Monitor stops logging")
                self._write_notes(step, batch)
                # of the whole group, the same on every rank: said once, by rank 0
                cause = ("a rank made a watched call the others did not (an extra micro-batch, "
                         "or a call with gradients on outside training). The Monitor stops "
                         "logging for the rest of the run rather than mix the ranks' calls; make "
                         "the same watched calls on every rank between two monitor.step() calls, "
                         "and run a call that is not trained under torch.no_grad()"
                         if agreement.uneven_calls else
                         "a rank skipped monitor.step() or called the loss more often than the "
                         "others. The Monitor stops logging for the rest of the run rather than "
                         "mix the ranks' steps; call monitor.step() once per optimizer step on "
                         "every rank")  # fmt: skip
                warnings.warn(f"gradlab.Monitor: {self.out_of_step}: {cause}", RuntimeWarning,
                              stacklevel=stacklevel)  # fmt: skip
            return None
        if not agreement.log:
            self.skipped_steps += 1  # on every rank; said once, by rank 0
            if self.skipped_steps == 1 and is_rank_zero():
                warnings.warn(
                    f"gradlab.Monitor: step {step} is not logged on any rank: "
                    f"{agreement.skipped}; later such steps are counted in "
                    "monitor.skipped_steps without a warning",
                    RuntimeWarning,
                    stacklevel=stacklevel,
                )
            return None
        if _read_once(agreement, batch) and not self._same_warned and is_rank_zero():
            self._same_warned = True
            warnings.warn(
                f"gradlab.Monitor: at step {step} every rank holds the same batch "
                f"({agreement.rows[0]} rows, the same values and labels): the watched loss is "
                "called on embeddings gathered from every rank already, or every rank loads "
                "the same data (a DataLoader without a DistributedSampler). The Monitor reads "
                "that batch once rather than gather one copy per rank; pass "
                "distributed='local' when the loss sees the global batch (later such steps "
                "are not warned about)",
                RuntimeWarning,
                stacklevel=stacklevel,
            )
        return agreement

    def _record(
        self, step: int, batch: BatchView, due: list[Quantity],
        agreement: StepAgreement | None = None,
    ) -> dict | None:  # fmt: skip
        """Compute ``due`` on ``batch`` (global under torch.distributed, as the ranks agreed),
        write the record."""
        if not due:  # read for the other ranks alone (a quantity disabled here): their gather
            if self.distributed == "auto":
                gather_batch(batch, agreement.rows if agreement else None,
                             same=agreement is not None and agreement.same)  # fmt: skip
            # rank 0 writes the note of one disabled here, which nothing else logged at this
            # step carries (the step's schedule gave it no other quantity)
            return self._write_notes(step, batch)
        changed = batch.changed_since_call()
        if changed and not self._changed_warned:
            self._changed_warned = True
            warnings.warn(
                f"gradlab.Monitor: step {step}: the {' and '.join(changed)} of the watched call "
                "were changed in place before monitor.step() read them; the record describes "
                "the changed values, not those the loss saw. Change a copy, or call "
                "monitor.step() before changing them",
                RuntimeWarning,
                stacklevel=caller_stacklevel(TRAINER_PACKAGES),
            )
        if ((batch.gradient_arrived or batch.parameter_grads) and batch.loss_hooked
                and batch.loss_scale is None):  # fmt: skip
            # what reached the inputs (or a scale parameter) was another call's gradient (the
            # same tensors given to a call that was backpropagated): this call's never existed
            self._warn_loss_not_backpropagated(step, due, bool(batch.parameter_grads))
            batch.gradient_arrived, batch.embedding_grad = False, None
            batch.parameter_grads.clear()
            batch.not_backpropagated = True
        elif batch.gradient_arrived is False:
            self._warn_no_gradient(step, due, batch.loss)
        if batch.no_graph:
            self._warn_no_graph(step, due)
        if batch.embeddings_outside_graph:
            self._warn_embeddings_outside_graph(step, due)
        batch.unscale_gradients()  # the loss's own gradients, before any gather
        if batch.scaled_by_zero:
            self._warn_scaled_by_zero(step, due)
        batch.zero_unreached_score_grads()  # a matrix the loss did not use: dL/dS = 0
        # the run's header says whether the first step's batch was gathered: not when every
        # rank held it alike (read once), nor for a score matrix or queries against candidates,
        # which are read on rank 0's own call
        own_batch = _own_batch(agreement, batch)
        if self.distributed == "auto":
            batch = gather_batch(batch, agreement.rows if agreement else None,
                                 same=agreement is not None and agreement.same)  # fmt: skip
        if batch.workspace is None:
            batch.workspace = self.workspace
        if batch.embeddings.numel() == 0:  # no rows: only what is defined on none this step
            due = [q for q in due if q.reads_empty_batches]
        if self._pending_adapter is not None:
            # only what the loss read on this step can serve (several watched losses; or a
            # loss whose call showed what it is, as a sigmoid loss of open_clip's interface)
            due = self._servable(self._pending_adapter, due, step)
        if not self._scores_checked and batch.on_scores:  # a matrix of the user's loss
            self._warn_scores_beyond_cosines(step, batch, due)
        computed: list[tuple[Quantity, dict[str, torch.Tensor]]] = []
        # The step's sort keeps ties in column order only for a quantity that reads the order.
        batch.ties_by_column = any("descending_order" in q.needs for q in due)
        # No value is read back while computing (skip_value_checks); the stacked scalars cross
        # to the host once, in _transfer.
        device = batch.embeddings.device
        # gradlab's quantities first: one of yours that changes a shared tensor in place (it
        # is named below) cannot change what theirs read; the record keeps the order of due
        rank = {id(quantity): index for index, quantity in enumerate(due)}
        ordered = sorted(((ships_with_gradlab(quantity), quantity) for quantity in due),
                         key=lambda pair: not pair[0])  # stable: each side in its order
        with torch.inference_mode():
            with skip_value_checks():
                for own, quantity in ordered:
                    if "embedding_grad" in quantity.needs and batch.embedding_grad is None:
                        continue  # no gradient reached the embeddings: warned of above
                    before = None if own else batch.tensor_versions()
                    try:
                        values = quantity.compute(batch)
                        if before is not None and (changed := batch.changed_in_place(before)):
                            raise GradlabError(
                                f"its compute() changed the step's {' and '.join(changed)} in "
                                "place, which the quantities computed after it read; compute "
                                "from a copy (x.clone()) or out of place (x / 2, not "
                                "x.div_(2))")  # fmt: skip
                    except Exception as error:
                        self._fail(quantity, error, "compute()", step)
                        continue
                    if own:  # its own tests hold it to its keys
                        computed.append((quantity, values))
                        continue
                    try:  # what it returned against what it declares
                        computed.append((quantity, check_values(quantity, values, device)))
                    except GradlabError as error:
                        if self.strict:
                            raise
                        self._disable(quantity, error, returned=True, step=step)
            computed.sort(key=lambda pair: rank[id(pair[0])])
            if not is_rank_zero():
                return None
            record: dict = {"step": step}
            record.update(self._transfer(step, batch, computed))
        for quantity, _ in computed:  # what a quantity says of its numbers, once per run
            try:
                said = quantity.said_of_logged(record, batch)
                if said and not isinstance(said, str):  # False, like None: nothing to say
                    raise GradlabError(f"said_of_logged must return a str or None; got "
                                       f"{said!r}")  # fmt: skip
            except Exception as error:  # its values are written; later steps leave it out
                self._fail(quantity, error, "said_of_logged()", step)
                continue
            if said and quantity.name not in self._said:
                self._said.add(quantity.name)
                warnings.warn(f"gradlab.Monitor: step {step}: {said}", RuntimeWarning,
                              stacklevel=caller_stacklevel(TRAINER_PACKAGES))  # fmt: skip
        # a record without a value (every due quantity disabled on it) tells no batch either
        self._open(batch.embeddings.device, first_step=self._first_step,
                   own_batch=own_batch if len(record) > 1 else None)  # fmt: skip
        if self._disabled_notes:  # disabled since the last record (this step's included)
            record[DISABLED_KEY] = self._take_notes()
        self.folder.write(record)
        return record

    def _transfer(
        self, step: int, batch: BatchView, computed: list[tuple[Quantity, dict[str, torch.Tensor]]]
    ) -> dict[str, float]:
        """The step's values on the host, in the one transfer of the step.

        A quantity whose values need finite input (:attr:`Quantity.trust`) logs NaN for every
        key when the batch's embeddings or scores (or the ``dL/dS`` it reads) are not finite:
        the flags are computed on the device (:meth:`BatchView.finite_flags`) and travel with
        the values, in one stack (a value of such a level is replaced by NaN on the host). Its
        :attr:`~Quantity.input_free_keys` (a setting, a shape, a parameter) keep their value.
        The quantities concerned are counted in :attr:`not_finite` and the first such step
        warns once (``RuntimeWarning``).
        """
        # Per level, (quantity, its keys at that level): a quantity's input-free keys go to 0;
        # per level, (key, position of its value in the one stack).
        levels: list[list[tuple[Quantity, list[str]]]] = [[], [], []]
        placed: list[list[tuple[str, int]]] = [[], [], []]
        scalars: list[torch.Tensor] = []
        for quantity, values in computed:
            if not values:
                continue
            trust = quantity.trust
            free = quantity.input_free_keys if trust else _NO_KEYS
            own: list[list[str]] = [[], [], []]
            for key, value in values.items():
                level = 0 if key in free else trust
                own[level].append(key)
                placed[level].append((key, len(scalars)))
                scalars.append(_scalar(value))
            for level in (0, trust) if trust else (0,):
                if own[level]:
                    levels[level].append((quantity, own[level]))
        if not scalars:
            return {}
        flags = batch.finite_flags() if placed[1] or placed[2] else None
        # The flags travel with the values (1.0: finite) and are applied on the host: a value
        # whose level's input was not finite is NaN, as torch.where would make it.
        host = torch.stack(scalars if flags is None else [*scalars, *flags]).tolist()
        trusted = (True, True, True) if flags is None else (True, *map(bool, host[-2:]))
        record = {}
        for level in (0, 1, 2):
            for key, position in placed[level]:
                record[key] = host[position] if trusted[level] else math.nan
        broken = [q.name for level in (1, 2) if not trusted[level] for q, _ in levels[level]]
        if broken:
            self._report_not_finite(step, broken, batch)
        else:  # finite inputs: a value that is not finite is the quantity's own
            own_bad = []
            for quantity, keys in (pair for level in levels for pair in level):
                warns = quantity.warns_if_not_finite  # None: yours warn, gradlab's do not
                if warns is None:
                    warns = not ships_with_gradlab(quantity)
                bad = [key for key in keys if warns and not math.isfinite(record[key])]
                if bad:
                    own_bad.append((quantity, bad[0], record[bad[0]]))
            if own_bad:
                self._report_values_not_finite(step, own_bad)
        # The record's keys in the order the quantities computed them.
        return {name: record[name] for _, values in computed for name in values}

    def _report_not_finite(self, step: int, names: list[str], batch: BatchView) -> None:
        """Count the quantities that logged NaN for non-finite input; warn at the first (with
        a hint where the diagonal of a square score matrix alone is not finite: a batch
        scored against itself, its own column masked, watched as ``inputs="scores"``)."""
        for name in names:
            self.not_finite[name] = self.not_finite.get(name, 0) + 1
        if not self._inputs_not_finite_warned:
            self._inputs_not_finite_warned = True
            hint = ""
            if _only_the_diagonal_not_finite(batch):  # one host read, at this warning alone
                hint = ("; only the score matrix's diagonal is, the mask of each query's own "
                        "column in a batch scored against itself: watched with "
                        "inputs='in_batch_scores', that column is no candidate and its value "
                        "is not read")  # fmt: skip
            warnings.warn(
                f"gradlab.Monitor: step {step}: the embeddings or scores (or dL/dS) are not "
                f"finite (NaN or infinite), so {', '.join(names)} logged NaN for every key "
                f"that reads them{hint}; "
                "later such steps are counted in monitor.not_finite without a warning",
                RuntimeWarning,
                stacklevel=caller_stacklevel(TRAINER_PACKAGES),  # step()'s caller, or fit()'s
            )

    def _report_values_not_finite(self, step: int,
                                  bad: list[tuple[Quantity, str, float]]) -> None:  # fmt: skip
        """Count a step on which quantities that :attr:`Quantity.warns_if_not_finite` (the
        loss, the embeddings' gradient norm) logged a NaN or infinite value, by name, with its
        first such key and value, though the inputs and ``dL/dS`` are finite: the training
        itself made it (a log of 0, a division by 0 in the loss; or in a quantity of your
        own, its ``compute``), which the warning of non-finite inputs does not cover; warn at
        the first of each, in one warning per step."""
        first = []
        for quantity, key, value in bad:
            name = quantity.name
            self.not_finite[name] = self.not_finite.get(name, 0) + 1
            if self.not_finite[name] == 1:
                first.append((quantity, key, value))
        if not first:
            return
        values = ", ".join(f"{key} is {value}" if key == quantity.name
                           else f"{key} (of {quantity.name}) is {value}"
                           for quantity, key, value in first)  # fmt: skip
        counters = " and ".join(f"monitor.not_finite[{q.name!r}]" for q, _, _ in first)
        logged = "it is logged as it is" if len(first) == 1 else "they are logged as they are"
        yours = [q.name for q, _, _ in first if _defined_by(q, "compute") != "gradlab"]
        where = (f"the compute() of {', '.join(yours)}" if len(yours) == len(first)
                 else f"the loss, or the compute() of {', '.join(yours)}" if yours
                 else "the loss")  # fmt: skip
        warnings.warn(
            f"gradlab.Monitor: step {step}: {values} while the embeddings and scores are "
            f"finite: {logged} (a log or a square root of 0, or a division by 0, in "
            f"{where}?); later such steps are counted in {counters} without a warning",
            RuntimeWarning,
            stacklevel=caller_stacklevel(TRAINER_PACKAGES),  # step()'s caller, or fit()'s
        )

    def _asked(self, quantity: Quantity, step: int) -> bool:
        """Whether ``quantity``'s schedule logs ``step``. A schedule that raises, or returns no
        bool, is refused before the run's first step (the first watched call asks it); later
        it disables its quantity with a warning, as a ``compute`` that raises does, and
        training goes on (``strict=True`` raises). Before the first step, the steps to come
        are asked too (:data:`SCHEDULE_AHEAD`): one they answer with no bool is refused then;
        one they raise for is reported when its step comes."""
        try:
            due = quantity.should_compute(step)
            if self._first_step is None and quantity.name not in self._asked_ahead:
                self._asked_ahead.add(quantity.name)
                for ahead in range(step + 1, step + SCHEDULE_AHEAD):
                    _answer_ahead(quantity, ahead)
            return due
        except GradlabError as error:  # it names the quantity, the schedule, what it returned
            if self.strict or self._first_step is None:
                raise
            self._disable(quantity, error, method="its schedule", step=step,
                          shared=self._sharing_schedule(quantity))  # fmt: skip
            return False
        except Exception as error:
            if self.strict or self._first_step is None:
                raise GradlabError(
                    f"the schedule of the {quantity.name!r} quantity, {quantity.schedule!r}, "
                    f"raised for step {step}: {type(error).__name__}: {error} (a schedule is "
                    "called as schedule(step) and returns True or False)"
                ) from error
            self._disable(quantity, error, method="its schedule", step=step,
                          shared=self._sharing_schedule(quantity))  # fmt: skip
            return False

    def _sharing_schedule(self, quantity: Quantity) -> list[Quantity]:
        """The other enabled quantities on ``quantity``'s own schedule object (``every=``
        gives every quantity the same one): a schedule that raises disables them together,
        under one warning."""
        return [q for q in self.quantities if q is not quantity and q.name not in self.disabled
                and q.schedule is quantity.schedule]  # fmt: skip

    def _fail(self, quantity: Quantity, error: Exception, method: str, step: int) -> None:
        """``quantity``'s ``method`` raised at ``step``: with ``strict=True`` a GradlabError
        naming the quantity, the method and the step (the error chained); else the quantity is
        disabled, with a warning (:meth:`_disable`)."""
        if self.strict:
            said = str(error) if isinstance(error, GradlabError) else (
                f"{type(error).__name__}: {error}")  # gradlab's own refusal: its words alone
            raise GradlabError(f"quantity {quantity.name!r} raised in {method} at step {step}: "
                               f"{said}") from error
        self._disable(quantity, error, method=method, step=step)

    def _disable(self, quantity: Quantity, error: Exception, returned: bool = False,
                 method: str | None = None, step: int | None = None,
                 shared: list[Quantity] = ()) -> None:  # fmt: skip
        """Disable ``quantity`` for the rest of the run and warn once: it raised (the warning
        holds the traceback; a GradlabError, which says what of the input it refuses, its
        message alone), or ``returned`` what it cannot log (the reason alone). ``shared``: the
        quantities on the same schedule that raised, disabled with it under the same warning."""
        where = f" in {method}" if method else ""
        whose = _whose_copy()
        step = self.step_count if step is None else step
        unkept = self._unkept_note()
        if returned or isinstance(error, GradlabError):
            message = str(error)  # it says what it refuses
            refused = f", refused{where}" if method else ""
            said = f"is disabled{refused}{whose}: {message} (strict=True raises instead){unkept}"
            note = message if returned else f"refused{where}: {message}"
        else:
            message = "".join(traceback.format_exception(error))
            said = (f"raised{where} and is disabled{whose} (strict=True raises instead)"
                    f"{unkept}:\n{message}")
            note = f"raised{where}: {type(error).__name__}: {error}"  # its last line, not all
        for each in (quantity, *shared):
            self.disabled[each.name] = message
            self._note(each.name, step, note)  # the log's one line
        who = f"quantity {quantity.name!r}"
        if shared:  # one schedule, one warning
            names = ", ".join(repr(q.name) for q in shared)
            who = (f"quantity {quantity.name!r} (and {names}, on the same schedule, with "
                   "it)")  # fmt: skip
        warnings.warn(
            f"gradlab.Monitor: step {step}: {who} {said}",
            RuntimeWarning,
            stacklevel=caller_stacklevel(TRAINER_PACKAGES),  # step()'s caller, or fit()'s
        )

    def _unkept_note(self) -> str:
        """What a warning that disables a quantity adds where no sink of the run keeps the
        log's note of it (:attr:`~gradlab.monitor.sinks.Sink.keeps_notes`: the CSV file and the
        trackers hold numbers alone), on the rank that writes: that the warning is the only
        place it is said. Else ``""``."""
        if not is_rank_zero() or any(sink.keeps_notes for sink in self.sinks):
            return ""
        return ("; the run's sinks hold numbers alone, so no log of it says so (add the "
                "'jsonl' sink: its metrics.jsonl notes it)")

    def _open(self, device: torch.device | None, first_step: int | None = None,
              own_batch: bool | None = None) -> None:  # fmt: skip
        """Write the run's header (once); ``own_batch``: the first logged step's batch was not
        gathered (every rank's alike, read once; or a score matrix, or queries against
        candidates, read on each rank as its own); ``None``: the header comes with no step's
        values (a record of the ``"disabled"`` note alone, or ``close()`` of a run that logged
        nothing), and under ``distributed="auto"`` its ``gathered`` is ``null``: no batch
        says."""
        if self._opened:
            return
        self._closed = True  # a refused Monitor writes nothing, not even at close()
        run = {"quantities": [q.name for q in self.quantities], "config": self.config}
        if self.not_logged:  # quantities that cannot apply to the watched loss, and why
            run["not_logged"] = dict(self.not_logged)
        own = [plot.as_header() for q in self.quantities if not ships_with_gradlab(q)
               for plot in q.plots]  # fmt: skip
        if own:  # the figures of the user's quantities: gradlab plot draws them from here
            run["plots"] = own
        # each quantity's keys and the steps it is due (None: a schedule of the user's own):
        # gradlab plot leaves a gap where a key was due and not logged, and only there
        run["schedules"] = {q.name: {"schedule": recorded_schedule(q.schedule),
                                     "keys": list(q.keys)} for q in self.quantities}  # fmt: skip
        if self._adapters:  # how the watched losses were read: the same numbers mean the same
            run["inputs"] = sorted({adapter.inputs for adapter in self._adapters})
        if is_distributed():  # whose batch the records describe: the global one, or rank 0's
            gathered = (self._gathers() and not own_batch) if own_batch is not None else (
                None if self._gathers() else False)  # fmt: skip
            run["distributed"] = {"world_size": torch.distributed.get_world_size(),
                                  "mode": self.distributed, "gathered": gathered}  # fmt: skip
        self._warn_if_resumed_otherwise(run, first_step)
        try:
            self.folder.open(run, device, first_step)
        except GradlabError as error:
            self._refused = str(error)
            raise
        self._closed, self._opened = False, True

    def _warn_if_resumed_otherwise(self, run: dict, first_step: int | None = None) -> None:
        """Warn when a resumed run goes on with another tau, preset, set of quantities, way of
        reading its losses (``inputs``) or world size (another global batch under
        torch.distributed): its records after the resumption
        (from ``first_step``, this Monitor's first step; the run's next one when None) are not
        comparable with those before."""
        previous = self.folder.previous_header
        if previous is None:
            return
        before, after = previous.get("config", {}), run["config"]
        changed = [f"{key} {before.get(key)!r} -> {after.get(key)!r}" for key in ("tau", "preset")
                   if before.get(key) != after.get(key)]  # fmt: skip
        if previous.get("quantities") != run["quantities"]:
            changed.append(f"quantities {previous.get('quantities')} -> {run['quantities']}")
        if previous.get("inputs", run.get("inputs")) != run.get("inputs", previous.get("inputs")):
            changed.append(f"inputs {previous['inputs']} -> {run['inputs']}")  # both known
        def world(header: dict) -> tuple | None:  # "gathered" follows the data: not compared
            distributed = header.get("distributed")
            if not isinstance(distributed, dict):
                return None
            return distributed.get("world_size"), distributed.get("mode")

        before_world, after_world = world(previous), world(run)
        if before_world is not None and after_world is not None and before_world[1] is None:
            after_world = (after_world[0], None)  # a header of an earlier gradlab: no mode
        if before_world != after_world:  # another global batch, or rank 0's own
            changed.append(f"distributed {previous.get('distributed')} -> "
                           f"{run.get('distributed')}")  # fmt: skip
        if changed:
            warnings.warn(
                f"gradlab.Monitor: resume=True continues the run in {str(self.log_dir)!r} with "
                f"other settings ({'; '.join(changed)}): its records from step "
                f"{self.folder.start_step if first_step is None else first_step} on are not "
                "comparable with those before; use a new "
                "log_dir (or overwrite=True) for a new run",
                UserWarning,
                stacklevel=caller_stacklevel(TRAINER_PACKAGES),  # a callback's: train()
            )

    def close(self, log_last_step: bool = True) -> None:
        """Log the last step if its schedule skipped it, then flush and close every sink.

        The last step's record holds the quantities that need no gradient (off-schedule steps
        keep no gradient), read again from the last call's arguments: a loss read through the
        score matrices it records while a logged call runs (a sentence-transformers loss, an
        open_clip loss wrapped in :class:`~gradlab.integrations.open_clip.RecordingClipLoss`)
        adds no last step, nor does a call whose first argument is not a tensor. Writes the
        header if nothing was logged in a new folder (a resumed or overwritten run that logged
        nothing is left as it was). Warns (``RuntimeWarning``)
        when watched calls were made but :meth:`step` was never called: nothing was logged.
        Under torch.distributed every rank must call ``close`` (the last step is gathered like
        any other), or pass ``log_last_step=False`` (as leaving a ``with`` block by an
        exception does).
        """
        # the warnings of _close (one frame down) name the user's line: close() itself, or the
        # fit() / train() of a trainer whose callback closes the Monitor
        self._close(check_bool("log_last_step", log_last_step),
                    stacklevel=caller_stacklevel(TRAINER_PACKAGES) + 1)  # fmt: skip

    def _arm_never_stepped_warning(self) -> None:
        """At the first watched call: warn if this Monitor is collected, or the program ends,
        before any step() or close() (nothing would be logged, and close() is not there to
        say so)."""
        self._never_stepped = weakref.finalize(
            self, _warn_never_stepped,
            f"gradlab.Monitor: the Monitor of {str(self.log_dir)!r} ended (collected, or the "
            "program exited) after watched calls but without monitor.step() or close(), so "
            "nothing was logged; call monitor.step() after each optimizer step and close() "
            "at the end (or use `with gradlab.Monitor(...) as monitor:`)",
        )  # fmt: skip

    def _disarm_never_stepped_warning(self) -> None:
        """At the first step() or close(): the Monitor's end warns of nothing."""
        self._never_stepped.detach()
        self._never_stepped = None

    def _close(self, log_last_step: bool, stacklevel: int, raised: bool = False) -> None:
        if self._closed:
            return
        if self._never_stepped is not None:  # close() says it itself
            self._disarm_never_stepped_warning()
        completed = self.calls - self._raised_calls  # a call that raised: its error said why
        if completed > 0 and not self._stepped and not raised:  # an error says what went wrong
            warnings.warn(
                f"gradlab.Monitor: {completed} watched call(s) but monitor.step() was never "
                f"called, so nothing was logged in {str(self.log_dir)!r}; call monitor.step() "
                "after each optimizer step",
                RuntimeWarning,
                stacklevel=stacklevel,
            )
        # stepped in a group of processes that is gone now (destroy_process_group() before
        # close()): only rank 0 still writes, and a last step is gathered by no one
        group_gone = self._rank_in_group is not None and not is_distributed()
        writes = self._rank_in_group == 0 if group_gone else is_rank_zero()
        try:
            if log_last_step and group_gone:
                self._warn_group_gone(writes, stacklevel + 1)
            elif log_last_step:
                self._log_last_step()
            # of the log, which rank 0 alone writes (another rank's unread calls were warned
            # of on that rank, at the call)
            if self.skipped_calls and self._stepped and not self._opened and not raised and writes:
                self._warn_nothing_read(stacklevel + 1)  # one frame more: this method
        finally:
            if writes:
                try:
                    # a note no record carried yet, of a step that step() closed (under
                    # torch.distributed, one nothing was logged at since): written now, at the
                    # step it names; once out of step, the Monitor logs nothing more. A note
                    # of a watched call after the last step() is not: a record of that step,
                    # which was never closed, would have resume=True number on past it (its
                    # warning said it at the call)
                    if (self._disabled_notes and self.out_of_step is None
                            and self._notes_step is not None
                            and self._notes_step < self.step_count):  # fmt: skip
                        self._write_notes(self._notes_step, None)
                    # a new run that logged nothing gets its header; a resume or an overwrite
                    # that wrote no record leaves the old run as it was (an overwrite's files
                    # go at the first record; a resume's header would say settings, as tau,
                    # that no record was logged with)
                    if self._opened or not self.folder.previous:
                        self._open(None)
                finally:
                    self.folder.close(failed=raised)  # a run a sink started ends failed
            self.workspace.release()
            self._closed = True

    def _warn_group_gone(self, writes: bool, stacklevel: int) -> None:
        """At close, on the rank that writes, when the process group the Monitor stepped in was
        destroyed first and the schedules skipped the last step: it is not logged."""
        last = self.step_count - 1
        if not writes or self._closed_call is None or self._scheduled(last):
            return
        warnings.warn(
            f"gradlab.Monitor: close() after the process group was destroyed: the last step "
            f"({last}), which the schedules skipped, is not logged (no rank can be asked for "
            "its batch any more); close the Monitor before "
            "torch.distributed.destroy_process_group()",
            RuntimeWarning,
            stacklevel=stacklevel,
        )

    def _log_last_step(self) -> None:
        """Write the last closed step if the schedules skipped it (quantities without gradient),
        from the references the watched loss kept on its last call (no copy, no sync).

        Under torch.distributed the decision to log it depends on the step number alone (the
        same on every rank) and the ranks agree on it like on any logged step."""
        last = self.step_count - 1
        if self._gathers():
            # a Monitor that never stepped has no last step of its own (its ranks' starts, read
            # from the folder, may differ: none of them is agreed on)
            if (self._first_step is None or last < 0 or self.out_of_step is not None
                    or self._scheduled(last)):  # fmt: skip
                return
            if not any(q.name not in self.not_logged and self._live(q.name, last)
                       and not q.needs_grad for q in self.quantities):  # fmt: skip
                return  # none left to log on any rank (as every rank agreed): no collective
            batch = self._last_batch(last, [q for q in self.quantities if q.name not in
                                            self.disabled and not q.needs_grad])  # fmt: skip
            agreement = self._agree(last, batch, stacklevel=5)  # the caller of close()
            if agreement is not None:
                due = [q for q in self.quantities if q.name not in self.disabled
                       and not q.needs_grad]  # fmt: skip
                self._record(last, batch, due, agreement)
            return
        enabled = [q for q in self.quantities if q.name not in self.disabled]
        if self._closed_call is None or any(self._asked(q, last) for q in enabled):
            return  # nothing watched, or the last step was logged already
        due = [q for q in enabled if not q.needs_grad]
        batch = self._last_batch(last, due) if due else None
        if batch is not None:  # less a quantity whose at_call() raised on reading it again
            self._record(last, batch, [q for q in due if q.name not in self.disabled])

    def _last_batch(self, step: int, due: list[Quantity]) -> BatchView | None:
        """The batch of the last watched call of ``step`` (the last step ``step()`` closed;
        calls after it, a final validation or micro-batches left over, are no step's) if it
        can be read, for the quantities ``due`` (none reads a gradient: the call is read again
        without its recordings, so no score matrix and no gradient is asked of it)."""
        if self._closed_call is None or self._closed_call[0] != step:
            return None  # no call, or its step never closed
        _, args, kwargs, loss, adapter, versions = self._closed_call
        tensors = call_tensors(args, kwargs)
        if not adapter.reads_calls_again or not tensors or not isinstance(tensors[0],
                                                                          torch.Tensor):
            return None  # a loss read through what it records while a logged call runs
        if any(tensor._version != version for tensor, version in versions):
            warnings.warn(
                f"gradlab.Monitor: close() does not log the last step ({step}): the tensors of "
                "its last watched call were changed in place since the call (an optimizer step "
                "on an embedding table, a memory bank enqueued), so the values the loss saw are "
                "gone (a step the schedule logs is read at its call: every=1 logs each one)",
                RuntimeWarning,
                stacklevel=caller_stacklevel(TRAINER_PACKAGES),
            )
            return None
        self._capture(args, kwargs, loss, adapter, due=due, step=step,
                      wanted=set().union(*(q.needs for q in due)))  # fmt: skip
        batch, self._pending = self._pending, None
        adapter.remove_hooks()  # a backward already ran: they would never fire for this batch
        return batch

    def __enter__(self) -> Monitor:
        return self

    def __exit__(self, exc_type, exc_value=None, *exc_info) -> None:
        # sys.exit() or sys.exit(0): the script finished, not the training failed
        finished = exc_type is None or (
            issubclass(exc_type, SystemExit) and exc_value is not None
            and exc_value.code in (None, 0))  # fmt: skip
        self._close(log_last_step=finished, stacklevel=3, raised=not finished)


def _only_the_diagonal_not_finite(batch: BatchView) -> bool:
    """Whether ``batch`` holds a square score matrix watched with its own columns counted
    (``inputs="scores"``) whose entries off the diagonal are finite and whose diagonal is not."""
    scores = batch.embeddings
    if not batch.on_scores or batch.query_column_excluded or scores.shape[0] != scores.shape[1]:
        return False
    finite = torch.isfinite(scores)
    finite.diagonal().logical_not_()  # True off the diagonal where finite, and on it where not
    return bool(finite.all())


def _versions(args: tuple, kwargs: dict) -> tuple[tuple[torch.Tensor, int], ...]:
    """The version counter of each tensor a watched call was given (read, not copied)."""
    return tuple((tensor, tensor._version) for tensor in call_tensors(args, kwargs)
                 if isinstance(tensor, torch.Tensor)
                 and not tensor.is_inference())  # inference tensors keep no version  # fmt: skip


def _warn_never_stepped(message: str) -> None:
    """The warning of a Monitor collected without step() or close(): from a finalizer, where
    no frame of the caller's is left to point at."""
    warnings.warn_explicit(message, RuntimeWarning, filename="gradlab.Monitor", lineno=0)
