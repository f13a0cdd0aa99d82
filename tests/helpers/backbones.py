"""Backbones small enough for CPU tests, named by ``module:function`` specs."""

from __future__ import annotations

from gradlab.backbones import tiny_resnet


def four_channel_resnet(width: int = 4):
    """:func:`gradlab.backbones.tiny_resnet` with 4 channels in its first stage (16 features)."""
    return tiny_resnet(width)


def flat_features():
    """A convolution whose features are flattened, not pooled: ``2 x side x side`` features, so
    the head fits only images of the side the network was built for; no ``num_features``."""
    from torch import nn

    return nn.Sequential(nn.Conv2d(3, 2, 3, padding=1), nn.Flatten())
