"""The logged gradients are the watched loss's own, whatever factor the loop puts on the loss
before backward: a trainer's division over accumulated micro-batches, AMP's GradScaler, a loss
weight. The factor reaches the watched call's value in backward; the Monitor divides by it."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

import gradlab
from gradlab.monitor.batch import BatchView, ScoreCapture

LABELS = torch.arange(4).repeat_interleave(4)


def _record(tmp_path, factor, preset="full", loss_fn=None):
    torch.manual_seed(0)
    embeddings = torch.randn(16, 8, requires_grad=True)
    folder = tmp_path / f"run-{factor}"
    with gradlab.Monitor(folder, preset=preset, every=1, strict=True) as monitor:
        watched = monitor.watch(loss_fn or gradlab.SmoothAPLoss(0.05))
        loss = watched(embeddings, LABELS)
        (loss if factor is None else loss * factor).backward()
        return monitor.step()


@pytest.mark.parametrize("preset", ["cheap", "full"])  # cheap: the embeddings' gradient only
@pytest.mark.parametrize("factor", [0.25, 0.5, 4.0, 65536.0])
def test_a_power_of_two_on_the_loss_logs_every_value_bit_for_bit(tmp_path, factor, preset):
    # 1/N of accumulation, AMP's scale: a power of two divides out exactly
    plain = _record(tmp_path, None, preset)
    scaled = _record(tmp_path, factor, preset)
    assert "embedding_grad_norm" in plain
    assert scaled.keys() == plain.keys()
    for key, value in plain.items():
        same = value == scaled[key] or (math.isnan(value) and math.isnan(scaled[key]))
        assert same, (key, value, scaled[key])


def test_another_factor_logs_the_same_values_to_rounding(tmp_path):
    plain, scaled = _record(tmp_path, None), _record(tmp_path, 1 / 3)
    assert scaled["embedding_grad_norm"] == pytest.approx(plain["embedding_grad_norm"], rel=1e-6)
    # SmoothAP agrees with its analytic gradient: the factor is not read as a wrong loss
    assert scaled["gradient_agreement_relative_error"] < 1e-5
    assert scaled["anatomy_active_negatives_mean"] == plain["anatomy_active_negatives_mean"]


def test_a_loss_multiplied_by_zero_logs_a_zero_gradient_and_says_so(tmp_path):
    # a loss weight warm-up that starts at 0: zeros that read as measurements, said once
    with pytest.warns(RuntimeWarning) as caught:
        record = _record(tmp_path, 0.0)
    assert record["embedding_grad_norm"] == 0.0
    assert record["anatomy_active_negatives_mean"] == 0.0
    assert [str(w.message) for w in caught] == [
        "gradlab.Monitor: step 0: the watched loss reached backward multiplied by 0 (a loss "
        "weight of 0?), so embedding_grad_norm, gradient_agreement, anatomy read a zero "
        "gradient, not the loss's own (later such steps are not warned about)"
    ]
    assert caught[0].filename == __file__  # the monitor.step() of _record
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any other factor: no warning
        _record(tmp_path, 0.5)


def test_a_loss_multiplied_by_zero_for_several_steps_is_said_once(tmp_path):
    embeddings = torch.randn(16, 8, generator=torch.Generator().manual_seed(0))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, preset="cheap", every=1) as monitor:
            watched = monitor.watch(gradlab.SmoothAPLoss(0.05))
            for _ in range(3):  # a warm-up whose weight stays 0 for three steps
                (watched(embeddings.clone().requires_grad_(), LABELS) * 0.0).backward()
                monitor.step()
    told = [str(w.message) for w in caught if "multiplied by 0" in str(w.message)]
    assert told == [
        "gradlab.Monitor: step 0: the watched loss reached backward multiplied by 0 (a loss "
        "weight of 0?), so embedding_grad_norm read a zero gradient, not the loss's own (later "
        "such steps are not warned about)"
    ]


def test_a_loss_of_a_score_matrix_is_unscaled_too(tmp_path):
    # NT-Xent watched on a score matrix: the anatomy reads dL/dS of the call's own matrix
    def run(factor):
        torch.manual_seed(1)
        scores = torch.randn(6, 6, requires_grad=True)
        with gradlab.Monitor(tmp_path / f"scores-{factor}", preset="full", every=1) as monitor:
            watched = monitor.watch(gradlab.NTXentLoss(0.1))
            loss = watched(scores, torch.eye(6, dtype=torch.bool))
            (loss * factor).backward()
            return monitor.step()

    plain, scaled = run(1.0), run(8.0)
    keys = [key for key in plain if key.startswith("anatomy_")]
    assert keys and all(plain[key] == scaled[key] or math.isnan(plain[key]) for key in keys)


def test_unscaling_divides_each_captured_gradient_once():
    view = BatchView(torch.zeros(2, 2), labels=torch.arange(2),
                     embedding_grad=torch.full((2, 2), 3.0), loss_scale=torch.tensor(0.5))
    original = view.embedding_grad
    view.unscale_gradients()
    assert view.embedding_grad.tolist() == [[6.0, 6.0], [6.0, 6.0]]
    assert original.tolist() == [[3.0, 3.0], [3.0, 3.0]]  # autograd's tensor is left alone
    view.unscale_gradients()  # a second call changes nothing
    assert view.embedding_grad.tolist() == [[6.0, 6.0], [6.0, 6.0]]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_each_captured_gradient_is_divided_by_the_scale_in_its_own_dtype(dtype):
    # Gradients 3 h of a loss multiplied by 3, with 3 h exact in the dtype: the loss's own
    # gradient is h exactly. A reciprocal rounded to the gradient's dtype (or to the scale's
    # float32) misses it: float16(1/3) = 0.33325, float32(1/3) = 0.33333334.
    own = torch.tensor([1.0, -0.5, 0.25, 3.0, -7.0, 0.125, 10.0, -1.5]).to(dtype)
    arrived = (own * 3).reshape(2, 4)  # exact: at most 6 significant bits
    positives = torch.eye(2, 4, dtype=torch.bool)
    capture = ScoreCapture("in_batch", None, positives, grad=arrived.clone())
    parameter = arrived[0, 0].clone()
    view = BatchView(torch.zeros(2, 4), labels=torch.arange(2), embedding_grad=arrived,
                     score_captures=[capture], loss_scale=torch.tensor(3.0),
                     parameter_grads={"temperature": parameter})  # fmt: skip
    view.unscale_gradients()
    for name, grad, expected in (
        ("embedding_grad", view.embedding_grad, own.reshape(2, 4)),
        ("dL/dS", capture.grad, own.reshape(2, 4)),
        ("parameter", view.parameter_grads["temperature"], own[0]),
    ):
        assert grad.dtype == dtype, name
        assert torch.equal(grad, expected), (name, grad, expected)
    assert parameter.item() == 3 * own[0].item()  # autograd's tensor is left alone


@pytest.mark.parametrize("scale", [1.0, 0.0, -0.0, 2.0, 3.0, math.nan])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_every_scale_read_on_a_cpu_unscales_bit_for_bit(scale, dtype):
    # On a CPU the scale is read: at 1 (loss.backward()) and at 0 no gradient is divided, at
    # any other scale each is; the reference divides in NumPy, in the gradient's dtype (IEEE
    # division, correctly rounded), by 1 where the scale is 0.
    import numpy as np

    tiny = torch.finfo(dtype).tiny / 4  # a subnormal
    values = [1.0, -0.0, 0.0, math.inf, -math.inf, math.nan, tiny, 3.0, -7.5, 1e30]
    grad = torch.tensor(values, dtype=dtype).reshape(2, 5)
    capture = ScoreCapture("in_batch", None, torch.eye(2, 5, dtype=torch.bool),
                           grad=grad.clone())  # fmt: skip
    view = BatchView(torch.zeros(2, 5, dtype=dtype), labels=torch.arange(2),
                     embedding_grad=grad.clone(), score_captures=[capture],
                     loss_scale=torch.tensor(scale, dtype=dtype))  # fmt: skip
    view.unscale_gradients()
    numpy_dtype = np.float32 if dtype == torch.float32 else np.float64
    divisor = numpy_dtype(1.0 if scale == 0 else scale)
    with np.errstate(all="ignore"):
        expected = np.array(values, dtype=numpy_dtype).reshape(2, 5) / divisor
    for name, got in (("embedding_grad", view.embedding_grad), ("dL/dS", capture.grad)):
        got = got.numpy()
        assert got.dtype == numpy_dtype, name
        assert np.array_equal(np.isnan(got), np.isnan(expected)), name
        finite = ~np.isnan(expected)  # every bit, the sign of zero included
        assert got[finite].tobytes() == expected[finite].tobytes(), (name, got, expected)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_half_precision_scale_is_divided_by_not_read(dtype):
    # Only float32/float64 CPU scales are read back (to skip a division by 1); a half-precision
    # scale of 4 still divides every gradient.
    view = BatchView(torch.zeros(2, 2), labels=torch.arange(2),
                     embedding_grad=torch.full((2, 2), 3.0),
                     loss_scale=torch.tensor(4.0, dtype=dtype))  # fmt: skip
    view.unscale_gradients()
    assert view.embedding_grad.tolist() == [[0.75, 0.75], [0.75, 0.75]]


def test_a_scale_off_the_cpu_is_not_read_back():
    # meta stands in for an accelerator: the scale there is never read on the host (that would
    # wait for the device); the division runs on the device instead.
    grad = torch.full((2, 2), 3.0, device="meta")
    view = BatchView(torch.zeros(2, 2, device="meta"), labels=torch.arange(2, device="meta"),
                     embedding_grad=grad, loss_scale=torch.tensor(1.0, device="meta"))  # fmt: skip
    view.unscale_gradients()
    assert view.embedding_grad.device.type == "meta" and view.loss_scale is None


@pytest.mark.parametrize(("scale", "dtype"), [(0.0, torch.float16), (1.0, torch.float32),
                                              (0.0, torch.float64)])  # fmt: skip
def test_a_scale_of_zero_or_one_leaves_the_gradients_and_is_used_once(scale, dtype):
    # 1 (loss.backward()) and 0 (which divides by 1) leave every gradient as it arrived,
    # whether the scale is read (float32/float64 on a CPU) or divided by (float16); a second
    # call finds no scale left.
    view = BatchView(torch.zeros(2, 2), labels=torch.arange(2),
                     embedding_grad=torch.full((2, 2), 3.0),
                     loss_scale=torch.tensor(scale, dtype=dtype))  # fmt: skip
    for _ in range(2):
        view.unscale_gradients()
        assert view.loss_scale is None
        assert view.embedding_grad.tolist() == [[3.0, 3.0], [3.0, 3.0]]
    # a 0 read on the CPU is said (the Monitor warns); a float16 one is not read back
    assert view.scaled_by_zero is (scale == 0.0 and dtype != torch.float16)
