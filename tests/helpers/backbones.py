"""Backbones small enough for CPU tests, named by ``module:function`` specs."""

from __future__ import annotations

from gradlab.backbones import tiny_resnet


def four_channel_resnet(width: int = 4):
    """:func:`gradlab.backbones.tiny_resnet` with 4 channels in its first stage (16 features)."""
    return tiny_resnet(width)
