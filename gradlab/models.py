"""Small embedding networks for the bundled experiments (CPU-friendly)."""

from __future__ import annotations

import torch
from torch import nn


class EmbeddingMLP(nn.Module):
    """``in -> hidden -> hidden -> out`` MLP with ReLU: an embedding network for the digits.

    Example:
        >>> EmbeddingMLP(64, 32)(torch.zeros(5, 64)).shape
        torch.Size([5, 32])
    """

    def __init__(self, in_features: int = 64, out_features: int = 32, hidden: int = 128) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(in_features, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, out_features),
        )

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.layers(inputs)


class SmallConvNet(nn.Module):
    """Three conv layers and a linear head for ``3 x 32 x 32`` inputs (the overhead benchmark).

    Example:
        >>> SmallConvNet(out_features=16)(torch.zeros(2, 3, 32, 32)).shape
        torch.Size([2, 16])
    """

    def __init__(self, out_features: int = 64, channels: int = 32) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, channels, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(channels, 2 * channels, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(2 * channels, 4 * channels, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(4 * channels, out_features)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(inputs).flatten(1))


class DigitStringNet(nn.Module):
    """A small CNN for digit-string images ``[N, 1, 10, 10 k]``: one feature column per digit.

    A 3 x 3 conv layer, a 2 x 2 max-pool, two more conv layers, then average pooling to one
    feature vector per digit cell (``num_digits`` columns, so the order of the digits is kept)
    and a linear head to the embedding. About 0.5 MFLOP per image: CPU-friendly.

    Example:
        >>> DigitStringNet(out_features=16)(torch.zeros(2, 1, 10, 30)).shape
        torch.Size([2, 16])
    """

    def __init__(self, out_features: int = 64, channels: int = 8, num_digits: int = 3) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, channels, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(channels, 2 * channels, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(2 * channels, 4 * channels, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d((1, num_digits)),
        )
        self.head = nn.Linear(4 * channels * num_digits, out_features)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(images).flatten(1))
