"""Host synchronisations of SmoothAP and the Monitor, counted on CPU and checked on CUDA.

On a GPU, reading a device value on the host (``.item()``, ``bool(t)``, ``.tolist()``, a copy to
the CPU) or an op whose output shape depends on values (``nonzero``, boolean-mask indexing,
``unique``, ``masked_select``, ``bincount`` on CUDA, a one-argument ``torch.where``) waits for
the device; so does copying host data to the device (``torch.tensor(..., device=...)``, and
``x[index] = 1.0`` with a tensor index: PyTorch makes the Python number a CPU tensor and copies
it to the device before ``index_put_``). On CPU
nothing waits, so :class:`SyncCounter` patches those transfer points and counts every call on
the code path: the count is what the same path would cost on a GPU. The CUDA test checks the
same budgets with ``torch.cuda.set_sync_debug_mode`` (skipped without a GPU).

Budgets: SmoothAP's loss reads the group sizes once per call;
an off-schedule Monitor step adds nothing; a logged step moves its scalars to the host once.
"""

from __future__ import annotations

import math
import traceback
import warnings
from pathlib import Path

import pytest
import torch

import gradlab
from gradlab.functional.losses import recording
from gradlab.models import EmbeddingMLP
from gradlab.monitor import PRESETS
from gradlab.monitor.batch import BatchView

ROOT = Path(__file__).resolve().parents[2]
"""The repository's root: the transfer points are named relative to it."""

TENSOR_READS = ("item", "tolist", "cpu", "numpy", "__bool__", "__float__", "__int__",
                "__index__", "__complex__", "__array__", "nonzero", "argwhere", "unique",
                "unique_consecutive", "masked_select", "bincount", "histc")  # fmt: skip
TORCH_READS = ("nonzero", "argwhere", "unique", "unique_consecutive", "masked_select",
               "bincount", "histc", "equal", "allclose")  # fmt: skip


def _is_mask(index) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in items)


def _copies_a_host_number(index, value) -> bool:
    """``x[index] = value``: a Python number through a tensor index becomes a CPU tensor that
    ``index_put_`` copies to the device (integer and slice indices fill in place instead)."""
    items = index if isinstance(index, tuple) else (index,)
    number = isinstance(value, (bool, int, float))
    return number and any(isinstance(i, torch.Tensor) for i in items)


class SyncCounter:
    """Count calls that would synchronise a GPU with the host (see the module docstring)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[str] = []
        self.active = False
        self._patch = monkeypatch

    def _note(self, name: str) -> None:
        if self.active:
            self.active = False  # the traceback machinery must not count itself
            frames = [f for f in traceback.extract_stack() if "test_sync" not in f.filename]
            where = frames[-1]
            place = Path(where.filename).resolve()  # relative to the clone, wherever it is
            shown = place.relative_to(ROOT) if place.is_relative_to(ROOT) else place
            self.calls.append(f"{name} at {shown}:{where.lineno}")
            self.active = True

    def __enter__(self) -> SyncCounter:
        def wrap(owner, name, condition=None):
            original = getattr(owner, name)

            def counted(*args, **kwargs):
                if condition is None or condition(*args, **kwargs):
                    self._note(name)
                return original(*args, **kwargs)

            self._patch.setattr(owner, name, counted)

        for name in TENSOR_READS:
            if hasattr(torch.Tensor, name):
                wrap(torch.Tensor, name)
        for name in TORCH_READS:
            wrap(torch, name)
        wrap(torch.Tensor, "__getitem__", lambda _self, index: _is_mask(index))
        wrap(torch.Tensor, "__setitem__", lambda _self, index, value: _is_mask(index)
             or _copies_a_host_number(index, value))  # fmt: skip
        wrap(torch, "where", lambda *args, **kwargs: len(args) + len(kwargs) == 1)
        wrap(torch, "repeat_interleave", lambda *a, **k: "output_size" not in k
             and any(isinstance(x, torch.Tensor) for x in a[1:2]))  # fmt: skip
        to_device = (torch.device, str)  # a host-to-device (or device-to-host) copy
        wrap(torch, "tensor", lambda *a, **k: k.get("device") is not None)
        wrap(torch, "as_tensor", lambda *a, **k: k.get("device") is not None)
        wrap(torch.Tensor, "to", lambda _self, *a, **k: "device" in k
             or any(isinstance(x, to_device) for x in a))  # fmt: skip
        self.active = True
        return self

    def __exit__(self, *exc_info) -> None:
        self.active = False
        self._patch.undo()

    @property
    def count(self) -> int:
        return len(self.calls)


@pytest.fixture
def counter(monkeypatch):
    return SyncCounter(monkeypatch)


def _batch(size=24, classes=6, dim=8, seed=0, dtype=torch.float32):
    generator = torch.Generator().manual_seed(seed)
    embeddings = torch.randn(size, dim, generator=generator, dtype=dtype).requires_grad_(True)
    labels = torch.arange(size) % classes
    labels[-1] = classes  # a singleton: a query without positives
    return embeddings, labels


# --- the counter itself ----------------------------------------------------------------------


def test_counter_sees_each_kind_of_transfer(counter):
    x = torch.randn(5)
    with counter:
        x.sum().item()
        bool(x.sum() > 0)
        float(x[0])
        x[x > 0]
        torch.nonzero(x > 0)
        x.tolist()
        torch.tensor([1.0], device="cpu")
        range(torch.tensor(2))
        x.sum()  # not a transfer
        x[torch.tensor([0, 1])]  # integer indexing: no data-dependent shape
        x[torch.tensor([0, 1])] = 1.0  # a host number copied to the device
        x[torch.tensor([0, 1])] = x[2:4] * 2  # a tensor on the device: no copy
        x[0] = 2.0  # an integer index fills in place: no copy
        x.index_fill_(0, torch.tensor([0, 1]), 3.0)  # the number is a kernel argument
    assert counter.count == 9, counter.calls


# --- the loss --------------------------------------------------------------------------------


@pytest.mark.parametrize("validate", [True, False])
@pytest.mark.parametrize("include_query", [False, True])
def test_smooth_ap_loss_synchronises_once_per_call(counter, validate, include_query):
    embeddings, labels = _batch()
    loss_fn = gradlab.SmoothAPLoss(0.05, include_query=include_query, validate=validate)
    with counter:
        loss = loss_fn(embeddings, labels)
        loss.backward()
    assert counter.count == 1, counter.calls  # the group sizes


def test_cross_modal_smooth_ap_loss_synchronises_once(counter):
    generator = torch.Generator().manual_seed(1)
    queries = torch.randn(6, 8, generator=generator, requires_grad=True)
    candidates = torch.randn(10, 8, generator=generator, requires_grad=True)
    positives = torch.rand(6, 10, generator=generator) < 0.3
    with counter:
        gradlab.SmoothAPLoss(0.05)(queries, candidates=candidates, positives=positives).backward()
    assert counter.count == 1, counter.calls


def test_the_finiteness_check_costs_no_extra_sync_and_still_refuses_nan(counter):
    embeddings, labels = _batch()
    with torch.no_grad():
        embeddings[3, 0] = float("nan")
    with counter, pytest.raises(gradlab.GradlabError, match="embeddings must be finite; got NaN "
                                                          r"in row 3 \(1 row of 24\)"):
        gradlab.SmoothAPLoss(0.05)(embeddings, labels)
    # The NaN is found in the call's one transfer; only then does the refusal read the values
    # again, to name the rows (an error path: the passing one stays at one sync, tests above).
    first, *naming = counter.calls
    assert first.startswith("tolist at gradlab/functional/smooth_ap.py"), counter.calls
    assert naming and all(call.split(" at ")[1].startswith("gradlab/validation.py")
                          for call in naming), counter.calls  # fmt: skip
    gradlab.SmoothAPLoss(0.05, validate=False)(embeddings, labels)  # skipped: no error


def test_a_batch_without_positives_gives_zero_loss_without_a_sync_of_its_own(counter):
    embeddings = torch.randn(5, 4, requires_grad=True)
    with counter:
        loss = gradlab.SmoothAPLoss(0.05)(embeddings, torch.arange(5))
        loss.backward()
    assert counter.count == 1, counter.calls
    assert loss.item() == 0.0 and torch.equal(embeddings.grad, torch.zeros(5, 4))


# --- the Monitor -----------------------------------------------------------------------------


def _train_steps(monitor, steps, counter, start_counting_at):
    torch.manual_seed(0)
    model = EmbeddingMLP(8, 8)
    loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
    counts = []
    for step in range(steps):
        embeddings, labels = _batch(seed=step)
        embeddings = model(embeddings.detach())
        if step >= start_counting_at:
            counter.__enter__()
        loss = loss_fn(embeddings, labels)
        loss.backward()
        monitor.step()
        if step >= start_counting_at:
            counter.__exit__()
            counts.append(list(counter.calls))
            counter.calls.clear()
    return counts


@pytest.mark.parametrize("preset", ["default", "full"])
def test_off_schedule_steps_add_no_sync(tmp_path, counter, preset):
    monitor = gradlab.Monitor(tmp_path, preset=preset, every=100)
    counts = _train_steps(monitor, 4, counter, start_counting_at=1)  # step 0 is logged
    monitor.close()
    assert all(len(calls) == 1 for calls in counts), counts  # the loss's own, nothing more


def _full_preset_values(batch):
    values = {}
    with torch.no_grad():
        for cls in PRESETS["full"]:
            values.update(cls().compute(batch))
    return values


def _recorded_batch(loss_fn, embeddings, labels, tau):
    with recording() as records:
        loss = loss_fn(embeddings, labels)
    loss.backward()
    return BatchView(
        embeddings=embeddings.detach(),
        labels=labels,
        loss=loss.detach(),
        embedding_grad=embeddings.grad.detach(),
        tau=tau,
        loss_kind="exclude_query",
        loss_tau=tau,
        loss_record=records[-1],
    )


def test_a_logged_full_step_moves_its_scalars_once_when_the_loss_recorded(counter):
    embeddings, labels = _batch()
    batch = _recorded_batch(gradlab.SmoothAPLoss(0.05), embeddings, labels, 0.05)
    with counter:
        values = _full_preset_values(batch)
        host = torch.stack([v.reshape(()).double() for v in values.values()]).tolist()
    assert counter.count == 1, counter.calls  # the one transfer
    assert len(host) == len(values) > 30


@pytest.mark.parametrize("preset", ["cheap", "default", "full"])
def test_a_logged_monitor_step_transfers_once(tmp_path, counter, preset):
    # The full preset reuses the watched loss's groups and ranks (same tau): nothing to regroup.
    monitor = gradlab.Monitor(tmp_path, tau=0.05, preset=preset, every=1)
    monitor.step()  # opens the sinks outside the counted steps
    embeddings, labels = _batch()
    with counter:
        loss = monitor.watch(gradlab.SmoothAPLoss(0.05))(embeddings, labels)
        loss.backward()
    assert counter.count == 1, counter.calls  # the loss's own: the capture adds none
    counter.calls.clear()
    with counter:
        record = monitor.step()
    monitor.close()
    assert counter.count == 1, counter.calls
    assert "loss" in record


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_non_finite_input_logs_nan_in_the_same_one_transfer(tmp_path, counter, bad):
    monitor = gradlab.Monitor(tmp_path, tau=0.05, preset="full", every=1)
    monitor.step()  # opens the sinks outside the counted steps
    embeddings, labels = _batch()
    with torch.no_grad():
        embeddings[2] = bad
    monitor.watch(gradlab.SmoothAPLoss(0.05, validate=False))(embeddings, labels).backward()
    with counter, pytest.warns(RuntimeWarning, match="not finite"):
        record = monitor.step()
    monitor.close()
    assert counter.count == 1, counter.calls  # the finiteness flags travel with the values
    assert math.isnan(record["p_seed"]) and math.isnan(record["anatomy_active_negatives_mean"])


def _cuda_syncs(action) -> list[str]:
    """Run ``action`` under ``torch.cuda.set_sync_debug_mode("warn")``: the gradlab line of
    each call that synchronised the host with the device."""
    found = []

    def note(message, *args, **kwargs):
        if "called a synchronizing" in str(message):
            frames = [f for f in traceback.extract_stack()[:-1] if "/gradlab/" in f.filename]
            where = frames[-1] if frames else None
            found.append(f"{where.filename.split('/gradlab/')[-1]}:{where.lineno} {where.line}"
                         if where else "outside gradlab")  # fmt: skip

    torch.cuda.synchronize()
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = note
        torch.cuda.set_sync_debug_mode("warn")
        try:
            action()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return found


@pytest.mark.gpu
def test_cuda_sync_budgets(tmp_path):
    # The budgets the CPU counter checks above, on a GPU: the loss reads its group sizes once;
    # an off-schedule step synchronises never; a logged step once for its values, and once
    # more for the effective rank's eigvalsh (torch checks its convergence on the host).
    device = torch.device("cuda")
    embeddings, labels = _batch()
    embeddings = embeddings.detach().to(device).requires_grad_(True)
    labels = labels.to(device)
    monitor = gradlab.Monitor(tmp_path, tau=0.05, preset="full", every=2)
    loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
    loss_fn(embeddings, labels).backward()
    monitor.step()  # step 0, logged: opens the sinks outside the counted steps
    for step in range(1, 5):
        embeddings.grad = None
        in_loss = _cuda_syncs(lambda: loss_fn(embeddings, labels).backward())
        in_step = _cuda_syncs(monitor.step)
        assert len(in_loss) == 1, in_loss
        assert len(in_step) == (2 if step % 2 == 0 else 0), (step, in_step)
    monitor.close()
