"""The scene encoders: deterministic pre-training, padding that cannot leak, unit-norm outputs."""

import pytest
import torch

from gradlab.data.digit_strings import digit_pools
from gradlab.models import (
    CaptionGRU,
    DigitStringNet,
    RegionRelationEncoder,
    pretrain_digit_backbone,
)


def _pool_tensors(pools):
    images = torch.cat(pools).reshape(-1, 1, 8, 8)
    labels = torch.cat([torch.full((len(p),), v) for v, p in enumerate(pools)])
    return images, labels


@pytest.mark.slow
def test_backbone_pretraining_is_deterministic_frozen_and_accurate():
    train_pools, test_pools = digit_pools(torch.Generator().manual_seed(0))
    images, labels = _pool_tensors(train_pools)
    first = pretrain_digit_backbone(images, labels, seed=3)
    second = pretrain_digit_backbone(images, labels, seed=3)
    for a, b in zip(first.state_dict().values(), second.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    assert not any(p.requires_grad for p in first.parameters())
    test_images, test_labels = _pool_tensors(test_pools)  # unseen handwriting
    with torch.no_grad():
        accuracy = (first(test_images).argmax(dim=1) == test_labels).double().mean()
    assert accuracy > 0.85


def test_region_encoder_ignores_padding_and_is_normalised():
    torch.manual_seed(0)
    encoder = RegionRelationEncoder(66, 32)
    regions = torch.randn(3, 4, 66)
    counts = torch.tensor([2, 3, 4])
    noisy = regions.clone()
    noisy[0, 2:] = torch.randn(2, 66) * 100
    noisy[1, 3:] = torch.randn(1, 66) * 100
    out, out_noisy = encoder(regions, counts), encoder(noisy, counts)
    assert torch.allclose(out, out_noisy, atol=1e-6)
    assert torch.allclose(out.norm(dim=1), torch.ones(3), atol=1e-6)


def test_caption_encoder_ignores_trailing_padding():
    torch.manual_seed(0)
    encoder = CaptionGRU(25, 16)
    short = torch.tensor([[3, 7, 16, 17, 3, 8]])
    padded = torch.tensor([[3, 7, 16, 17, 3, 8, 0, 0, 0]])
    assert torch.allclose(encoder(short), encoder(padded), atol=1e-6)


def test_digit_string_net_keeps_the_digit_order():
    torch.manual_seed(0)
    net = DigitStringNet(out_features=8)
    image = torch.zeros(1, 1, 10, 30)
    image[0, 0, 2:8, 2:8] = 1.0
    flipped = image.flip(dims=(3,))
    assert not torch.allclose(net(image), net(flipped))
