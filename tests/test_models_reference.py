"""The study models against float64 references written from their documented architectures.

Each reference takes the model's own parameters (in ``parameters()`` order) and recomputes the
forward pass with plain functional ops and loops, as the class docstrings describe it; default
sizes are checked through output shapes and parameter counts computed from the documented layer
list. Pre-training is checked against the documented recipe (seeded initialisation, Adam at
1e-2, seeded minibatches) run by hand.
"""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from gradlab.models import (
    CaptionGRU,
    DigitBackbone,
    DigitStringNet,
    EmbeddingMLP,
    GlobalImageProjection,
    RegionRelationEncoder,
    SmallConvNet,
    pretrain_digit_backbone,
)
from tests.helpers.default_device import assert_unchanged_under_another_default_device


def _params(model):
    return [p.detach() for p in model.parameters()]


def _count(model):
    return sum(p.numel() for p in model.parameters())


def _linear_count(i, o):
    return (i + 1) * o


def _conv_count(i, o, k=3):
    return i * o * k * k + o


def _gru_count(i, h):
    return 3 * (i * h + h * h + 2 * h)


def _unit(rows):
    return rows / torch.sqrt((rows**2).sum(dim=1, keepdim=True))


def test_embedding_mlp_is_two_hidden_relu_layers_with_its_default_sizes():
    torch.manual_seed(0)
    net = EmbeddingMLP().double()
    assert _count(net) == _linear_count(64, 128) + _linear_count(128, 128) + _linear_count(128, 32)
    x = torch.randn(5, 64, dtype=torch.float64)
    w1, b1, w2, b2, w3, b3 = _params(net)
    expected = (x @ w1.T + b1).clamp(min=0)
    expected = (expected @ w2.T + b2).clamp(min=0)
    expected = expected @ w3.T + b3
    assert torch.allclose(net(x), expected, atol=1e-12)
    assert EmbeddingMLP(7, 3, hidden=5)(torch.zeros(2, 7)).shape == (2, 3)


def _max_pool_2(maps):
    n, c, h, w = maps.shape
    return maps[:, :, : h // 2 * 2, : w // 2 * 2].reshape(n, c, h // 2, 2, w // 2, 2).amax((3, 5))


def test_small_conv_net_matches_its_three_conv_layers():
    torch.manual_seed(0)
    net = SmallConvNet().double()
    assert _count(net) == (_conv_count(3, 32) + _conv_count(32, 64) + _conv_count(64, 128)
                           + _linear_count(128, 64))  # fmt: skip
    small = SmallConvNet(out_features=5, channels=4).double()
    x = torch.randn(2, 3, 12, 12, dtype=torch.float64)
    w1, b1, w2, b2, w3, b3, wh, bh = _params(small)
    maps = _max_pool_2(F.conv2d(x, w1, b1, padding=1).clamp(min=0))
    maps = _max_pool_2(F.conv2d(maps, w2, b2, padding=1).clamp(min=0))
    maps = F.conv2d(maps, w3, b3, padding=1).clamp(min=0)
    expected = maps.mean(dim=(2, 3)) @ wh.T + bh
    assert torch.allclose(small(x), expected, atol=1e-12)


def test_digit_string_net_pools_one_column_per_digit():
    torch.manual_seed(0)
    net = DigitStringNet().double()
    assert _count(net) == (_conv_count(1, 8) + _conv_count(8, 16) + _conv_count(16, 32)
                           + _linear_count(32 * 3, 64))  # fmt: skip
    small = DigitStringNet(out_features=6, channels=2, num_digits=4).double()
    x = torch.rand(3, 1, 10, 40, dtype=torch.float64)
    w1, b1, w2, b2, w3, b3, wh, bh = _params(small)
    maps = _max_pool_2(F.conv2d(x, w1, b1, padding=1).clamp(min=0))
    maps = F.conv2d(maps, w2, b2, padding=1).clamp(min=0)
    maps = F.conv2d(maps, w3, b3, padding=1).clamp(min=0)  # [3, 8, 5, 20]
    cells = maps.reshape(3, 8, 5, 4, 5).mean(dim=(2, 4))  # digit cell j: columns 5j .. 5j+4
    expected = cells.reshape(3, 32) @ wh.T + bh  # channel-major, then digit order
    assert torch.allclose(small(x), expected, atol=1e-12)


def test_digit_backbone_feature_map_regions_and_classes():
    torch.manual_seed(0)
    backbone = DigitBackbone().double()
    assert backbone.feature_size == 64
    assert _count(backbone) == _conv_count(1, 8) + _conv_count(8, 16) + _linear_count(64, 10)
    w1, b1, w2, b2, wc, bc = _params(backbone)
    canvas = torch.rand(2, 1, 12, 20, dtype=torch.float64)
    maps = _max_pool_2(F.conv2d(F.conv2d(canvas, w1, b1, padding=1).clamp(min=0),
                                w2, b2, padding=1).clamp(min=0))  # fmt: skip
    assert torch.allclose(backbone.feature_map(canvas), maps, atol=1e-12)
    crops = torch.rand(4, 1, 8, 8, dtype=torch.float64)
    crop_maps = backbone.feature_map(crops)  # [4, 16, 4, 4]
    pooled = crop_maps.reshape(4, 16, 2, 2, 2, 2).mean(dim=(3, 5)).reshape(4, 64)
    assert torch.allclose(backbone.region_features(crops), pooled, atol=1e-12)
    assert torch.allclose(backbone(crops), pooled @ wc.T + bc, atol=1e-12)


def test_global_image_projection_is_a_linear_map_onto_the_sphere():
    torch.manual_seed(0)
    projection = GlobalImageProjection(10).double()
    x = torch.randn(3, 10, dtype=torch.float64)
    w, b = _params(projection)
    assert w.shape == (64, 10)
    assert torch.allclose(projection(x), _unit(x @ w.T + b), atol=1e-12)


def _gru_last(x, w_ih, w_hh, b_ih, b_hh):
    """PyTorch's GRU equations, one step at a time, from a zero state: the last state."""
    hidden = torch.zeros(w_hh.shape[1], dtype=x.dtype)
    for step in x:
        gi, gh = w_ih @ step + b_ih, w_hh @ hidden + b_hh
        r_i, z_i, n_i = gi.chunk(3)
        r_h, z_h, n_h = gh.chunk(3)
        reset, update = torch.sigmoid(r_i + r_h), torch.sigmoid(z_i + z_h)
        new = torch.tanh(n_i + reset * n_h)
        hidden = (1 - update) * new + update * hidden
    return hidden


def test_region_relation_encoder_matches_a_per_scene_loop():
    torch.manual_seed(0)
    dims, layers = 6, 3
    encoder = RegionRelationEncoder(5, dims, gcn_layers=layers).double()
    regions = torch.randn(3, 4, 5, dtype=torch.float64) * 3
    counts = torch.tensor([4, 2, 3])  # unsorted: the packing must not reorder the scenes
    out = encoder(regions, counts)
    params = _params(encoder)
    w_e, b_e = params[:2]
    phi, psi, upd = params[2 : 2 + 2 * layers], params[2 + 2 * layers : 2 + 4 * layers], \
        params[2 + 4 * layers : 2 + 6 * layers]  # fmt: skip
    gru = params[2 + 6 * layers :]
    for n in range(3):
        nodes = (regions[n, : counts[n]] @ w_e.T + b_e).clamp(min=0)
        for k in range(layers):
            a = nodes @ phi[2 * k].T + phi[2 * k + 1]
            b = nodes @ psi[2 * k].T + psi[2 * k + 1]
            weights = torch.zeros(len(nodes), len(nodes), dtype=torch.float64)
            for i in range(len(nodes)):
                scores = torch.stack([a[i] @ b[j] / dims**0.5 for j in range(len(nodes))])
                shifted = torch.exp(scores - scores.max())
                weights[i] = shifted / shifted.sum()
            nodes = nodes + ((weights @ nodes) @ upd[2 * k].T + upd[2 * k + 1]).clamp(min=0)
        expected = _gru_last(nodes, *gru)
        assert torch.allclose(out[n], expected / expected.norm(), atol=1e-10), n
    assert _count(RegionRelationEncoder(66)) == (_linear_count(66, 64) + 6 * _linear_count(64, 64)
                                                 + _gru_count(64, 64))  # fmt: skip


def test_region_relation_encoder_masks_on_the_regions_device():
    torch.manual_seed(0)
    encoder = RegionRelationEncoder(5, 4)
    regions, counts = torch.randn(2, 3, 5), torch.tensor([1, 3])
    assert_unchanged_under_another_default_device(lambda: encoder(regions, counts),
                                                  regions.device)  # fmt: skip


def test_caption_gru_reads_up_to_the_last_word_and_treats_0_as_padding():
    torch.manual_seed(0)
    encoder = CaptionGRU(12, 5, words=4, hidden=6).double()
    embedding, w_ih, w_hh, b_ih, b_hh, w_p, b_p = _params(encoder)
    tokens = torch.tensor([[3, 7, 1, 0, 0], [2, 0, 0, 0, 0], [0, 0, 0, 0, 0], [4, 5, 6, 8, 9]])
    out = encoder(tokens)
    for row, caption in enumerate(tokens):
        words = [int(t) for t in caption if t != 0] or [0]  # an empty caption reads one pad
        inputs = torch.stack([embedding[w] if w != 0 else torch.zeros(4, dtype=torch.float64)
                              for w in words])  # fmt: skip
        last = _gru_last(inputs, w_ih, w_hh, b_ih, b_hh)
        expected = last @ w_p.T + b_p
        assert torch.allclose(out[row], expected / expected.norm(), atol=1e-10), row
    assert _count(CaptionGRU(25)) == 25 * 32 + _gru_count(32, 64) + _linear_count(64, 64)
    assert CaptionGRU(25)(tokens).shape == (4, 64)


def _data(count=96, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return (torch.rand(count, 8, 8, generator=generator),
            torch.randint(10, (count,), generator=generator))  # fmt: skip


def _pretrain_by_hand(images, labels, steps, seed, batch_size):
    torch.manual_seed(seed)
    backbone = DigitBackbone()
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(backbone.parameters(), lr=1e-2)
    images = images.reshape(-1, 1, 8, 8)
    for _ in range(steps):
        batch = torch.randint(len(images), (batch_size,), generator=generator)
        loss = F.cross_entropy(backbone(images[batch]), labels[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return backbone


@pytest.mark.parametrize("seed", [0, 5])
def test_pretraining_follows_the_documented_recipe_and_keeps_the_global_rng(seed):
    images, labels = _data()
    torch.manual_seed(1234)
    expected_draw = torch.rand(4)
    torch.manual_seed(1234)
    trained = pretrain_digit_backbone(images, labels, steps=3, seed=seed, batch_size=16)
    assert torch.equal(torch.rand(4), expected_draw)
    reference = _pretrain_by_hand(images, labels, 3, seed, 16)
    for ours, theirs in zip(trained.parameters(), reference.parameters(), strict=True):
        assert torch.equal(ours, theirs.detach())
        assert not ours.requires_grad
    assert not trained.training


@pytest.mark.slow  # 150 training steps, twice: seconds
def test_pretraining_defaults_are_150_steps_of_128_from_seed_0():
    images, labels = _data(count=40, seed=1)
    trained = pretrain_digit_backbone(images, labels)
    reference = _pretrain_by_hand(images, labels, 150, 0, 128)
    for ours, theirs in zip(trained.parameters(), reference.parameters(), strict=True):
        assert torch.equal(ours, theirs.detach())


def test_pretraining_builds_the_backbone_on_the_images_device():
    # meta stands in for a GPU: a backbone left on the CPU could not read meta images
    images, labels = _data(count=20)
    trained = pretrain_digit_backbone(images.to("meta"), labels.to("meta"), steps=2, batch_size=4)
    assert {parameter.device for parameter in trained.parameters()} == {torch.device("meta")}
