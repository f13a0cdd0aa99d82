"""A tiny training loop shared by the monitor tests."""

import torch

import gradlab
from gradlab.models import EmbeddingMLP


def batches(steps, size=24, seed=0):
    generator = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        images = torch.randn(size, 64, generator=generator)
        labels = torch.arange(size) % 4
        yield images, labels


def train(monitor=None, steps=4, loss_fn=None, seed=0):
    """Run a few SmoothAP steps; return the model's gradients of the last step."""
    torch.manual_seed(seed)
    model = EmbeddingMLP(64, 16)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = loss_fn or gradlab.SmoothAPLoss(0.05)
    if monitor is not None:
        loss_fn = monitor.watch(loss_fn)
    grads = None
    for images, labels in batches(steps, seed=seed):
        loss = loss_fn(model(images), labels)
        loss.backward()
        grads = [p.grad.clone() for p in model.parameters()]
        optimizer.step()
        optimizer.zero_grad()
        if monitor is not None:
            monitor.step()
    return grads
