"""A training step with gradlab's SmoothAP loss, watched by a Monitor, under ``torch.compile``.

Backend ``aot_eager``: Dynamo captures the step and AOTAutograd traces the forward and the
backward (including SmoothAP's ``autograd.Function`` with its closed-form backward), without
inductor's code generation, which takes minutes on a 2-core CPU. Graph breaks are accepted
(the group sizes are read back once per loss call, the Monitor's hooks are Python).
"""

from __future__ import annotations

import math

import pytest
import torch

import gradlab
from gradlab.models import EmbeddingMLP


def _train(tmp_path, compiled: bool):
    torch.manual_seed(0)
    model = EmbeddingMLP(16, 8)
    monitor = gradlab.Monitor(tmp_path, preset="full", every=2)
    loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))

    def step(images, labels):
        loss = loss_fn(model(images), labels)
        loss.backward()
        return loss

    if compiled:
        torch._dynamo.reset()
        step = torch.compile(step, backend="aot_eager")
    generator = torch.Generator().manual_seed(1)
    results = []
    for _ in range(2):  # step 0 logged, step 1 off schedule
        images = torch.randn(12, 16, generator=generator)
        labels = torch.arange(12) % 3
        loss = step(images, labels)
        grads = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        results.append((loss.detach(), grads, monitor.step()))
    monitor.close()
    return results


@pytest.mark.slow
def test_compiled_step_gives_the_eager_loss_gradients_and_records(tmp_path):
    eager = _train(tmp_path / "eager", compiled=False)
    compiled = _train(tmp_path / "compiled", compiled=True)
    for (loss_e, grads_e, record_e), (loss_c, grads_c, record_c) in zip(eager, compiled,
                                                                          strict=True):
        assert loss_c.item() == pytest.approx(loss_e.item(), rel=1e-6)
        for grad_e, grad_c in zip(grads_e, grads_c, strict=True):
            torch.testing.assert_close(grad_c, grad_e, rtol=1e-5, atol=1e-7)
            assert grad_e.abs().sum() > 0
        assert (record_e is None) == (record_c is None)
        if record_e is not None:
            assert record_c.keys() == record_e.keys()
            for key, value in record_e.items():
                assert math.isclose(record_c[key], value, rel_tol=1e-5, abs_tol=1e-7) or (
                    math.isnan(value) and math.isnan(record_c[key])
                ), key
