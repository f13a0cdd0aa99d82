"""Run a training step and collect its gradients: in this process, or in N gloo processes.

:func:`run_step` runs a step on the whole batch here. :func:`run_distributed` spawns ``N``
processes on this machine (``torch.distributed`` with the gloo backend, CPU), gives each its
shard of the batch and a copy of the model, runs the step in every process, averages the
parameters' gradients over the processes (as DistributedDataParallel does) and the probes'
gradients likewise, and returns the result of rank 0. Every run is time-boxed: a process that
still runs after ``timeout`` seconds (a collective that one process never joins) is killed and
:class:`TimeoutError` raised, never a hang.

Steps, the model and the batch travel to the processes by pickle: a step of your own must be
importable by module and name (not defined in ``__main__`` or a notebook cell).
"""

from __future__ import annotations

import copy
import inspect
import os
import pickle
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import torch
from torch import nn
from torch.nn.parameter import is_lazy

from gradlab.child_processes import starting_children
from gradlab.equivalence.problem import GradientProbe, PairedBatch
from gradlab.equivalence.steps import Step
from gradlab.errors import GradlabError
from gradlab.losses import RankingLoss
from gradlab.validation import check_finite, check_positive_finite, count_noun

__all__ = ["Gradients", "run_distributed", "run_step"]

DEFAULT_TIMEOUT_S = 120.0
"""Seconds a distributed run may take before its processes are killed."""

FAILURE_GRACE_S = 2.0
"""Seconds the other processes get, once one has raised, to finish on their own (and record
their own error) before they are stopped: a report then names every process that raised."""


@dataclass
class Gradients:
    """The gradients of one step (float64 by default), at the whole batch's positions, on the
    CPU whatever the device the step ran on.

    Attributes:
        parameters: ``name -> dL/dtheta`` of every parameter that requires a gradient (zeros
            where the step left none).
        queries: ``[B, d]`` ``dL/dqueries``, or ``None`` when the step recorded none.
        candidates: ``[B, d]`` ``dL/dcandidates``, or ``None``.
        scores: ``[B, B + M]`` ``dL/dscores``, or ``None``.
        scored: ``[B, B + M]`` bool, the scores the step computed (with ``scores``).
        score_values: ``[B, B + M]``, their values (0 where not computed).
        loss: the step's loss (averaged over processes); ``None`` when the step returned none
            (in any process).
        world_size: the number of processes it ran in.
        without_gradient: the quantities (names of
            :data:`~gradlab.equivalence.QUANTITIES`) the step left with no gradient at all:
            ``"dL/dtheta"`` when every parameter's ``.grad`` is still ``None`` (no backward pass
            reached the model), a probe's quantity when no backward pass reached a tensor
            handed to it; in every process.
    """

    parameters: dict[str, torch.Tensor]
    queries: torch.Tensor | None
    candidates: torch.Tensor | None
    scores: torch.Tensor | None
    scored: torch.Tensor | None
    score_values: torch.Tensor | None
    loss: float | None
    world_size: int = 1
    without_gradient: list[str] = field(default_factory=list)


def _check_step(name: str, step: object) -> None:
    """Refuse, before any work, what cannot be called as ``step(model, batch, probe)``: not a
    callable, a loss (called as ``loss(scores, positives)``), or a callable whose signature
    cannot take those three arguments."""
    if not callable(step):
        raise GradlabError(
            f"{name} must be a step: a callable step(model, batch, probe) such as "
            f"gradlab.equivalence.FullBatch(loss); got {type(step).__name__}"
        )
    if isinstance(step, RankingLoss):
        form = ("loss(embeddings, labels)" if step.input_form == "embeddings"
                else "loss(scores, positives)")  # fmt: skip
        raise GradlabError(
            f"{name} must be a step, called as step(model, batch, probe); got the loss "
            f"{type(step).__name__}, called as {form}: wrap it in a step, e.g. "
            f"gradlab.equivalence.FullBatch(loss) or GradCache(loss, chunk_size)"
        )
    if isinstance(step, Step):
        return
    target = step.forward if isinstance(step, nn.Module) else step
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):  # a builtin without one: let the call decide
        return
    try:
        signature.bind(None, None, None)
    except TypeError:
        raise GradlabError(
            f"{name} must be a step, called as step(model, batch, probe); got "
            f"{type(step).__name__} whose signature {signature} cannot take those three "
            "arguments"
        ) from None


def _check_problem(model: object, batch: object) -> None:
    """Refuse, before any work, a model or batch the steps cannot run on or compare."""
    if not isinstance(model, nn.Module):
        raise GradlabError(f"model must be a torch.nn.Module; got {type(model).__name__}")
    if not isinstance(batch, PairedBatch):
        raise GradlabError("batch must be a gradlab.equivalence.PairedBatch; got "
                           f"{type(batch).__name__}")  # fmt: skip
    for side in ("query_inputs", "candidate_inputs", "memory"):
        if getattr(batch, side) is not None:  # the gradient of a non-finite input is NaN
            check_finite(f"batch.{side}", getattr(batch, side))
    lazy = [name for name, tensor in (*model.named_parameters(), *model.named_buffers())
            if is_lazy(tensor)]  # fmt: skip
    if lazy:
        raise GradlabError(
            f"model has lazy parameters that are not initialised yet ({', '.join(lazy)}): each "
            "step's copy of the model would initialise them with its own random values, and the "
            "check would compare two different models; run one forward pass first to initialise "
            "its lazy parameters"
        )
    parameters = list(model.parameters())
    inputs_live = batch.query_inputs.requires_grad or batch.candidate_inputs.requires_grad
    if not inputs_live and not any(p.requires_grad for p in parameters):
        held = ("no parameters" if not parameters else
                f"{count_noun(len(parameters), 'parameter')}, all with requires_grad=False")
        raise GradlabError(
            "model must have a parameter that requires grad (else no step can leave a "
            f"gradient to compare); got {type(model).__name__} with {held}, and the batch's "
            "inputs do not require grad either"
        )  # fmt: skip


def _cuda_devices(model: nn.Module, batch: PairedBatch) -> list[int]:
    """The CUDA devices the model or the batch is on: their random states matter too."""
    tensors = [*model.parameters(), *model.buffers(), batch.query_inputs,
               batch.candidate_inputs, batch.memory]  # fmt: skip
    devices = {t.device.index if t.device.index is not None else torch.cuda.current_device()
               for t in tensors if t is not None and t.device.type == "cuda"}  # fmt: skip
    return sorted(devices)


def _random_state(devices: list[int]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The CPU random state and that of each CUDA device of ``devices``."""
    return torch.get_rng_state(), [torch.cuda.get_rng_state(d) for d in devices]


def _set_random_state(state: tuple[torch.Tensor, list[torch.Tensor]], devices: list[int]) -> None:
    """Restore a state of :func:`_random_state` (taken for the same ``devices``)."""
    cpu, cuda = state
    torch.set_rng_state(cpu)
    for device, value in zip(devices, cuda, strict=True):
        torch.cuda.set_rng_state(value, device)


def _embedding_size(model: nn.Module, batch: PairedBatch) -> int:
    """The model's output width, from one row of each side in eval mode (each module's mode
    is restored): a BatchNorm in training mode would refuse a single row and move its running
    statistics, and a dropout would draw; in eval mode neither happens.

    A failure of this first forward (inputs the model cannot take) is raised as a
    :class:`GradlabError` naming the batch's field and the shapes, the model's own message
    kept (and chained); so is an output that is not one tensor of embeddings (a tuple or a
    dict, as a Hugging Face model returns).
    """
    modes = [module.training for module in model.modules()]
    model.eval()
    widths = {}
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=_cuda_devices(model, batch)):
            for side in ("query_inputs", "candidate_inputs"):
                inputs = getattr(batch, side)
                try:
                    output = model(inputs[:1])
                except (RuntimeError, IndexError) as error:
                    first = str(error).strip().splitlines()[0] if str(error).strip() else ""
                    raise GradlabError(
                        f"batch.{side} must be inputs the model takes: its first forward, "
                        f"model(batch.{side}[:1]) on shape {tuple(inputs[:1].shape)} "
                        f"(batch.{side} has shape {tuple(inputs.shape)}), raised "
                        f"{type(error).__name__}: {first}"
                    ) from error
                if not isinstance(output, torch.Tensor) or output.dim() == 0:
                    got = ("a 0-d tensor" if isinstance(output, torch.Tensor)
                           else type(output).__name__)  # fmt: skip
                    raise GradlabError(
                        f"model must return the embeddings as one tensor [b, d]; "
                        f"model(batch.{side}[:1]) returned {got}: wrap the model so that its "
                        f"forward returns the embeddings (e.g. one field of a tuple or dict)"
                    )
                widths[side] = int(output.shape[-1])
    finally:
        for module, training in zip(model.modules(), modes, strict=True):
            module.training = training
    return widths["query_inputs"]


def _execute(step, model: nn.Module, batch: PairedBatch, rank: int, world: int,
             random_state: tuple | None = None) -> Gradients:  # fmt: skip
    """Run ``step`` on this process's shard of ``batch`` with a fresh copy of ``model``.

    The step starts from ``random_state`` (:func:`_random_state`; ``None``: this process's
    current state), and this process's random state is left as it was: every step run from
    one state draws the same dropout masks, whatever ran before it.
    """
    devices = _cuda_devices(model, batch)
    with torch.random.fork_rng(devices=devices):
        if random_state is not None:
            _set_random_state(random_state, devices)
        return _execute_here(step, model, batch, rank, world)


def _check_returned_loss(step: object, returned: object) -> None:
    """A step returns its loss (a number or a one-element tensor) or None.

    Raises:
        GradlabError: anything else (a per-query tensor, a dict), named with the step.
    """
    if returned is None or (isinstance(returned, (int, float)) and not isinstance(returned, bool)):
        return
    if isinstance(returned, torch.Tensor) and returned.numel() == 1:
        return
    got = (f"a tensor of shape {list(returned.shape)}" if isinstance(returned, torch.Tensor)
           else f"{type(returned).__name__} {returned!r}")  # fmt: skip
    name = getattr(step, "name", None) or getattr(step, "__name__", type(step).__name__)
    raise GradlabError(f"step {name} must return its loss (a number or a 0-d tensor) or None; "
                       f"got {got}")  # fmt: skip


def _execute_here(step, model: nn.Module, batch: PairedBatch, rank: int, world: int) -> Gradients:
    """:func:`_execute` without the random state's bracket."""
    model = copy.deepcopy(model)
    model.zero_grad(set_to_none=True)
    dtype = next((p.dtype for p in model.parameters()), torch.float64)
    width = _embedding_size(model, batch)
    if batch.memory is not None and batch.memory.shape[1] != width:
        raise GradlabError(
            f"the memory's entries must be as wide as the model's embeddings ({width}); got "
            f"memory of shape {tuple(batch.memory.shape)}"
        )
    probe = GradientProbe(batch.labels.shape[0], batch.columns, width, dtype=dtype)
    returned = step(model, batch.shard(rank, world), probe)
    _check_returned_loss(step, returned)
    # A step that returns nothing has no loss to show (None), not a loss of 0.
    loss = torch.as_tensor(0.0 if returned is None else returned,
                           dtype=torch.float64).detach().clone()  # fmt: skip
    returns = torch.tensor(returned is not None, dtype=torch.int64)
    trainable = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    # on the CPU, beside the probe's accumulators, whatever the model's device
    parameters = {name: (p.grad.detach().to("cpu", copy=True) if p.grad is not None
                         else torch.zeros_like(p, device="cpu"))
                  for name, p in trainable}  # fmt: skip
    touched = torch.tensor(any(p.grad is not None for _, p in trainable), dtype=torch.int64)
    if world > 1:
        for value in parameters.values():
            torch.distributed.all_reduce(value)
            value.div_(world)
        torch.distributed.all_reduce(loss)
        loss /= world
        torch.distributed.all_reduce(returns, op=torch.distributed.ReduceOp.MIN)
        torch.distributed.all_reduce(touched, op=torch.distributed.ReduceOp.MAX)
        probe.reduce()
    recorded = probe.recorded
    without = ["dL/dtheta"] if trainable and not touched else []
    without += [quantity for quantity, name in (("dL/dqueries", "queries"),
                                                ("dL/dcandidates", "candidates"),
                                                ("dL/dscores", "scores"))
                if recorded[name] and not probe.reached[name]]  # fmt: skip
    return Gradients(
        parameters=parameters,
        queries=probe.gradients["queries"] if recorded["queries"] else None,
        candidates=probe.gradients["candidates"] if recorded["candidates"] else None,
        scores=probe.gradients["scores"] if recorded["scores"] else None,
        scored=probe.scored if recorded["scores"] else None,
        score_values=probe.values if recorded["scores"] else None,
        loss=float(loss) if returns else None,
        world_size=world,
        without_gradient=without,
    )


def run_step(step: Callable, model: nn.Module, batch: PairedBatch) -> Gradients:
    """Run ``step(model, batch, probe)`` once, in this process, on a copy of ``model``.

    The step starts from this process's random state (CPU, and the CUDA devices of the model
    and the batch), which is left unchanged: two calls in a row draw the same dropout masks.

    Args:
        step: a built-in step or any callable ``step(model, batch, probe)``.
        model: the encoder; it is copied, never changed.
        batch: the whole batch.

    Returns:
        The step's :class:`Gradients`.

    Raises:
        GradlabError: before the step runs: ``step`` not callable as ``step(model, batch,
            probe)`` (a loss passed where a step belongs); ``model`` not a module, with lazy
            parameters not yet initialised, or with no parameter that requires grad;
            ``batch`` not a :class:`PairedBatch`, with NaN or infinite inputs or memory (the
            field and the rows named), or inputs the model's first forward fails on (the
            field and the shapes named).

    Example:
        >>> import gradlab
        >>> from gradlab.equivalence import FullBatch, synthetic_problem
        >>> model, batch = synthetic_problem(batch_size=4)
        >>> grads = run_step(FullBatch(gradlab.NTXentLoss()), model, batch)
        >>> grads.scores.shape, grads.queries.dtype
        (torch.Size([4, 4]), torch.float64)
    """
    _check_step("step", step)
    _check_problem(model, batch)
    return _execute(step, model, batch, 0, 1)


def _worker(rank: int, world: int, folder: str, timeout: float) -> None:
    """One process of :func:`run_distributed` (importable by ``spawn``)."""
    torch.set_num_threads(1)
    torch.distributed.init_process_group(
        "gloo", init_method=f"file://{os.path.join(folder, 'rendezvous')}", rank=rank,
        world_size=world, timeout=timedelta(seconds=2 * timeout + 30),  # the parent's box first
    )  # fmt: skip
    try:
        job = torch.load(os.path.join(folder, "job.pt"), weights_only=False)
        try:
            results = [_execute(step, job["model"], job["batch"], rank, world,
                                job["random_state"]) for step in job["steps"]]  # fmt: skip
        except BaseException as error:
            if isinstance(error, GradlabError):  # a refusal: the parent raises it again
                _save_refusal(Path(folder, f"refusal-{rank}.pickle"), error)
            with open(os.path.join(folder, f"error-{rank}.txt"), "w") as handle:
                handle.write(f"{time.time()!r}\n{traceback.format_exc()}")
            raise
        if rank == 0:
            partial = os.path.join(folder, "results.partial")
            torch.save(results, partial)
            os.replace(partial, os.path.join(folder, "results.pt"))
        torch.distributed.barrier()
    finally:
        torch.distributed.destroy_process_group()


def _save_refusal(path: Path, error: GradlabError) -> None:
    """Keep a process's :class:`GradlabError` for the parent (left out if it cannot be
    pickled: the parent then reports its traceback)."""
    try:  # an exception pickles without its traceback: the live one keeps it; its message
        # travels beside it, to tell a faithful rebuild (_first_refusal)
        path.write_bytes(pickle.dumps((str(error), error)))
    except Exception:  # one that cannot be pickled: the parent reports its traceback
        pass


def _errors(folder: str) -> list[tuple[float, int, str]]:
    """``(time, rank, traceback)`` of each process that raised, the first first."""
    errors = []
    for path in Path(folder).glob("error-*.txt"):
        stamp, _, text = path.read_text().partition("\n")
        errors.append((float(stamp), int(path.stem.removeprefix("error-")), text.rstrip()))
    return sorted(errors)


def _first_refusal(folder: str) -> GradlabError | None:
    """The :class:`GradlabError` of the process that raised first (a refusal that names the
    argument, raised again as it is), or None when that process raised anything else or its
    error does not come back as it was (the parent then reports the traceback)."""
    errors = _errors(folder)
    path = Path(folder, f"refusal-{errors[0][1]}.pickle") if errors else None
    if path is None or not path.is_file():
        return None
    try:
        message, error = pickle.loads(path.read_bytes())
    except Exception:  # a subclass that cannot be rebuilt: the traceback reports it
        return None
    # a subclass whose __init__ formats its message is rebuilt with another: the traceback
    return error if str(error) == message else None


def _first_error(folder: str) -> str | None:
    """The traceback of the process that raised first (the others usually fail after it, in a
    collective it left), and the last line of each other one."""
    errors = _errors(folder)
    if not errors:
        return None
    _, rank, text = errors[0]
    others = "".join(f"\nthen rank {r}: {t.splitlines()[-1]}" for _, r, t in errors[1:])
    return f"rank {rank} of the distributed run raised first:\n{text}{others}"


def run_distributed(
    steps: Sequence[Callable], model: nn.Module, batch: PairedBatch, world_size: int = 2,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> list[Gradients]:  # fmt: skip
    """Run each step in ``world_size`` gloo processes on this machine; rank 0's gradients.

    The processes are started once for all ``steps`` (starting them costs seconds). Each
    process runs every step on its shard (``batch.shard(rank, world_size)``) with a fresh copy
    of ``model``; the parameters' gradients are averaged over the processes after each step.
    Every step, in every process, starts from this process's random state at the call (as
    :func:`run_step` does), which is left unchanged.

    Args:
        steps: a sequence of steps (picklable: importable by module and name).
        model: the encoder (picklable).
        batch: the whole batch; ``world_size`` must divide its size.
        world_size: the number of processes.
        timeout: seconds before the processes are killed.

    Returns:
        One :class:`Gradients` per step, in order.

    Raises:
        GradlabError: ``world_size`` does not divide the batch, ``timeout`` is not positive,
            a step cannot be pickled, or any refusal of :func:`run_step`; before any process
            starts. Or the process that raised first raised a :class:`GradlabError` (a step
            that returns no single loss): the same error, raised again here.
        TimeoutError: a process still ran after ``timeout`` seconds (it was killed).
        RuntimeError: a process raised another exception (a step's own): the message holds
            the traceback of the first one and the exception line of each other one that
            raised within :data:`FAILURE_GRACE_S` seconds after it (the others are then
            stopped).

    Example:
        A script that starts the processes needs the ``__main__`` guard (spawn re-imports it)::

            if __name__ == "__main__":
                model, batch = synthetic_problem(batch_size=16)
                loss = gradlab.NTXentLoss()
                gather, local = run_distributed(
                    [AllGather(loss), AllGather(loss, local_loss=True)], model, batch, 2)
                print(compare(run_step(FullBatch(loss), model, batch), gather, batch))
    """
    import torch.multiprocessing as mp

    if callable(steps) or isinstance(steps, (str, bytes)) or not isinstance(steps, Iterable):
        raise GradlabError(f"steps must be a sequence of steps, e.g. [AllGather(loss)]; got "
                           f"{type(steps).__name__}")  # fmt: skip
    steps = list(steps)
    if not steps:  # the processes would start for nothing
        raise GradlabError("steps must name at least one step; got none")
    for index, step in enumerate(steps):
        _check_step(f"steps[{index}]", step)
    _check_problem(model, batch)
    batch.shard(0, world_size)  # checks world_size against the batch
    check_positive_finite("timeout", timeout)
    _embedding_size(model, batch)  # inputs the model cannot take: named here, not in a process
    devices = _cuda_devices(model, batch)
    with tempfile.TemporaryDirectory(prefix="gradlab-equivalence-") as folder:
        try:
            torch.save({"steps": steps, "model": model, "batch": batch,
                        "random_state": _random_state(devices)}, Path(folder, "job.pt"))
        except (pickle.PicklingError, AttributeError, TypeError) as error:
            raise GradlabError(
                "steps, model and batch must be picklable to reach the processes (a step "
                "defined at module level, not a lambda or a local function); got "
                f"{type(error).__name__}: {error}"
            ) from None
        context = None
        try:
            with starting_children():  # none left half started; Ctrl-C is this process's
                context = mp.start_processes(_worker, args=(world_size, folder, float(timeout)),
                                             nprocs=world_size, join=False,
                                             start_method="spawn")  # fmt: skip
            deadline = time.monotonic() + timeout
            while not context.join(timeout=0.5, grace_period=FAILURE_GRACE_S):
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"the distributed run still ran after {timeout:g} s and was stopped (a "
                        "process waits in a collective that another never joins?)"
                    )
        except mp.ProcessRaisedException as error:
            refusal = _first_refusal(folder)
            if refusal is not None:  # gradlab's one line, as run_step raises it
                raise refusal from None
            raise RuntimeError(_first_error(folder) or f"a process raised:\n{error}") from None
        except mp.ProcessExitedException as error:
            raise RuntimeError(f"a process of the distributed run died: {error}") from None
        finally:
            for process in context.processes if context is not None else []:
                if process.is_alive():
                    process.kill()
                    process.join(5)
        return torch.load(Path(folder, "results.pt"), weights_only=False)
