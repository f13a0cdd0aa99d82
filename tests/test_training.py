"""The training glue against Adam loops written out by hand: the steps, their order, the seed.

Both loops are compared with a reference that builds the same optimiser and walks the batches
itself; ``embed`` is compared with one whole forward pass in evaluation mode.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from gradlab.data.samplers import ClassBalancedBatches
from gradlab.models import EmbeddingMLP
from gradlab.progress import set_progress_mode
from gradlab.training import embed, train_embedding, train_on_batches


def _spread(embeddings, labels):
    centres = torch.stack([embeddings[labels == c].mean(0) for c in labels.unique()])
    return (embeddings - centres[labels.unique(return_inverse=True)[1]]).pow(2).mean()


def _data(count=24, classes=4, features=5):
    generator = torch.Generator().manual_seed(7)
    return (torch.randn(count, features, generator=generator),
            torch.arange(classes).repeat(count // classes))  # fmt: skip


def _model(seed=0):
    torch.manual_seed(seed)
    return EmbeddingMLP(5, 3, hidden=6)


def _adam_by_hand(model, images, labels, batch_lists, lr):
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for batch in batch_lists:
        loss = _spread(model(images[batch]), labels[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def _same_parameters(a, b):
    return all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))


@pytest.mark.parametrize(("settings", "epochs", "lr", "seed", "classes"), [
    ({}, 10, 1e-3, 0, None),
    ({"epochs": 2, "lr": 0.05, "seed": 3, "classes_per_batch": 2}, 2, 0.05, 3, 2),
])  # fmt: skip
def test_train_embedding_is_adam_over_seeded_class_balanced_epochs(settings, epochs, lr, seed,
                                                                   classes):
    images, labels = _data()
    seen = []
    model = _model()
    losses = train_embedding(model, images, labels, _spread, per_class=2,
                             on_step=lambda *args: seen.append(args), **settings)  # fmt: skip
    batches = ClassBalancedBatches(labels, 2, classes, seed=seed)
    batch_lists = [batch for _ in range(epochs) for batch in batches]
    reference = _model()
    expected = _adam_by_hand(reference, images, labels, batch_lists, lr)
    assert losses == expected
    assert _same_parameters(model, reference)
    assert [args[0] for args in seen] == list(range(len(expected)))
    assert [args[3] for args in seen] == expected
    for (_, embeddings, step_labels, _), batch in zip(seen, batch_lists, strict=True):
        assert torch.equal(step_labels, labels[batch])
        assert embeddings.shape == (len(batch), 3) and not embeddings.requires_grad


def test_train_embedding_reports_its_steps_when_asked(capsys):
    images, labels = _data()
    set_progress_mode("lines")
    try:
        train_embedding(_model(), images, labels, _spread, per_class=2, classes_per_batch=2,
                        epochs=3, progress="tiny training")  # fmt: skip
        shown = capsys.readouterr().err
        train_embedding(_model(), images, labels, _spread, per_class=2, epochs=1)
        hidden = capsys.readouterr().err
    finally:
        set_progress_mode("auto")
    steps = 3 * math.ceil(len(labels) / (2 * 2))  # epochs x ceil(N / batch size)
    assert f"gradlab: tiny training ({steps} steps) ..." in shown
    assert f"gradlab: tiny training done ({steps} steps," in shown
    assert hidden == ""


class _FirstParameterElsewhere(nn.Module):
    """A model whose first parameter sits on the meta device (standing in for an accelerator).

    Its output comes from a CPU parameter, so a step completes wherever the batch was sent; the
    devices of the images it is given are recorded.
    """

    def __init__(self):
        super().__init__()
        self.place = nn.Parameter(torch.empty(0, device="meta"))
        self.weight = nn.Parameter(torch.ones(3))
        self.devices: list[torch.device] = []

    def forward(self, x):
        self.devices.append(x.device)
        return self.weight.expand(len(x), 3)


def test_train_embedding_sends_each_batch_to_the_device_of_the_models_parameters():
    images, labels = _data(count=8, classes=2)
    model = _FirstParameterElsewhere()
    label_devices = []

    def total(embeddings, batch_labels):
        label_devices.append(batch_labels.device)
        return embeddings.sum()

    losses = train_embedding(model, images, labels, total, per_class=2, epochs=1)
    meta = torch.device("meta")
    assert model.devices == [meta, meta] and label_devices == [meta, meta]
    # 4 rows x 3 ones, then Adam's first step moves each weight by lr: 12 x 0.999
    assert losses == [12.0, pytest.approx(12 * 0.999)]


class _Recorder(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(2.0))
        self.dropout = nn.Dropout(0.5)
        self.sizes: list[int] = []

    def forward(self, x):
        self.sizes.append(len(x))
        return self.dropout(x * self.scale)


@pytest.mark.parametrize("training", [True, False])
def test_embed_runs_in_eval_mode_in_chunks_and_restores_the_mode(training):
    images = torch.randn(2500, 2)
    model = _Recorder().train(training)
    out = embed(model, images)
    assert torch.equal(out, images * 2.0)  # no dropout: evaluation mode
    assert not out.requires_grad
    assert model.sizes == [1024, 1024, 2500 - 2048]
    assert model.training is training
    model.sizes.clear()
    assert torch.equal(embed(model, images[:7], batch_size=3), images[:7] * 2.0)
    assert model.sizes == [3, 3, 1]


def test_train_on_batches_is_adam_over_the_given_batches_and_skips_frozen_parameters():
    images, labels = _data()
    batch_lists = [torch.tensor([0, 1, 2, 3, 4, 5]), torch.tensor([6, 7, 8, 9]),
                   torch.tensor([10, 11, 12, 13, 14, 15, 16, 17])]  # fmt: skip
    for lr, settings in ((1e-3, {}), (0.05, {"lr": 0.05})):
        seen = []
        model = _model()
        model.layers[0].weight.requires_grad_(False)
        losses = train_on_batches(model, images, labels, _spread, batch_lists,
                                  on_step=lambda *args, seen=seen: seen.append(args),
                                  **settings)  # fmt: skip
        reference = _model()
        frozen = reference.layers[0].weight.detach().clone()
        reference.layers[0].weight.requires_grad_(False)
        expected = _adam_by_hand(reference, images, labels, batch_lists, lr)
        assert losses.dtype == torch.float32 and losses.tolist() == expected
        assert _same_parameters(model, reference)
        assert torch.equal(model.layers[0].weight, frozen)
        assert [args[0] for args in seen] == [0, 1, 2]
        assert all(args[3].dim() == 0 for args in seen)
        assert [args[3].item() for args in seen] == expected
        for (_, embeddings, step_labels, _), batch in zip(seen, batch_lists, strict=True):
            assert torch.equal(step_labels, labels[batch])
            assert embeddings.shape == (len(batch), 3) and not embeddings.requires_grad
    assert train_on_batches(_model(), images, labels, _spread, []).shape == (0,)
