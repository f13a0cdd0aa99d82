"""A loss of one's own that declares its score matrix holds logits (``SoftmaxLogits(logits=
True)``): Temperature reads it as logits, and SmoothAP's sigmoid at tau is not applied to it."""

import math

import pytest
import torch

import gradlab
from gradlab.losses import SoftmaxLogits
from gradlab.monitor import Temperature, every


class OwnInfoNCE:
    """CLIP's image-to-text InfoNCE on its logits ``s * S``, as a user writes it."""

    def __init__(self, log_scale: torch.Tensor, declares: bool):
        self.log_scale = log_scale
        if declares:
            self.softmax_logits = SoftmaxLogits(direction="i2t", logits=True)

    def __call__(self, logits, positives):
        return torch.nn.functional.cross_entropy(logits, positives.float().argmax(dim=1))


def _step(tmp_path, declares):
    generator = torch.Generator().manual_seed(4)
    images = torch.nn.functional.normalize(torch.randn(6, 8, generator=generator), dim=1)
    texts = torch.nn.functional.normalize(torch.randn(6, 8, generator=generator), dim=1)
    log_scale = torch.nn.Parameter(torch.tensor(math.log(10.0)))
    loss_fn = OwnInfoNCE(log_scale, declares)
    quantities = [cls(every(1)) for cls in gradlab.monitor.PRESETS["default"]]
    quantities.append(Temperature(every(1), scale=log_scale, log_scale=True))
    with gradlab.Monitor(tmp_path, quantities=quantities) as monitor:
        watched = monitor.watch(loss_fn, inputs="scores")
        logits = log_scale.exp() * images @ texts.T
        watched(logits, torch.eye(6, dtype=torch.bool)).backward()
        return monitor.step(), dict(monitor.not_logged), float(log_scale.grad)


def test_declared_logits_give_the_closed_form_and_leave_out_the_sigmoid_at_tau(tmp_path):
    record, not_logged, observed = _step(tmp_path, declares=True)
    assert record["temperature_log_scale_grad"] == pytest.approx(observed, rel=1e-5)
    assert not any(key.startswith(("p_", "gradient_count", "queries_without")) for key in record)
    reason = ("reads SmoothAP's sigmoid at the Monitor's tau on cosine scores; the watched loss "
              "OwnInfoNCE declares that its matrix holds logits (SoftmaxLogits(logits=True))")
    assert not_logged["operating_region"] == reason
    assert not_logged["gradient_counts"] == reason


def test_without_the_declaration_they_are_logged_as_on_cosines(tmp_path):
    with pytest.warns(RuntimeWarning, match=r"pass Temperature\(\.\.\., logits=True\)"):
        record, not_logged, observed = _step(tmp_path / "plain", declares=False)
    assert "p_seed" in record or "p_cross_modal" in record
    assert "operating_region" not in not_logged
    # read as cosines, the closed form is about the scale times the gradient
    assert record["temperature_log_scale_grad"] != pytest.approx(observed, rel=1e-2)
