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


class DigitBackbone(nn.Module):
    """A small CNN pre-trained to classify 8 x 8 digits; frozen, it is the scene encoders' backbone.

    Plays the part of the ImageNet ResNet (VSE++) and the Faster R-CNN region features (VSRN)
    of Bleeker & de Rijke (2022), appendix B. :meth:`feature_map` runs the conv layers on any
    image size (a whole scene canvas for VSE++); :meth:`region_features` pools an 8 x 8 crop
    to 64 numbers (one detector region for VSRN); :meth:`forward` classifies 8 x 8 digits
    (pre-training only).

    Example:
        >>> backbone = DigitBackbone()
        >>> backbone(torch.zeros(2, 1, 8, 8)).shape, backbone.region_features(
        ...     torch.zeros(2, 1, 8, 8)).shape
        (torch.Size([2, 10]), torch.Size([2, 64]))
    """

    def __init__(self, channels: int = 8) -> None:
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(1, channels, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(channels, 2 * channels, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.feature_size = 2 * channels * 4
        self.classifier = nn.Linear(self.feature_size, 10)

    def feature_map(self, images: torch.Tensor) -> torch.Tensor:
        """``[N, 2c, H/2, W/2]`` conv features of images of any size."""
        return self.conv(images)

    def region_features(self, crops: torch.Tensor) -> torch.Tensor:
        """``[N, 64]`` features of ``[N, 1, 8, 8]`` crops (2 x 2 average pool of the map)."""
        return nn.functional.adaptive_avg_pool2d(self.conv(crops), 2).flatten(1)

    def forward(self, digits: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.region_features(digits))


def pretrain_digit_backbone(
    images: torch.Tensor,
    labels: torch.Tensor,
    steps: int = 150,
    seed: int = 0,
    batch_size: int = 128,
) -> DigitBackbone:
    """Pre-train :class:`DigitBackbone` on 8 x 8 digits (Adam, minibatches), then freeze it.

    Deterministic given ``seed`` on a CPU (its own generator for the initialization and the
    batches; the global RNG is left as it was); well under a second on one CPU thread.

    Args:
        images: ``[N, 1, 8, 8]`` or ``[N, 8, 8]`` digits in ``[0, 1]``.
        labels: ``[N]`` digit values.
        steps: Adam steps (learning rate 1e-2) on random minibatches of ``batch_size``.
        seed: initialization and batch seed.
        batch_size: images per step.

    Returns:
        The backbone in evaluation mode with ``requires_grad`` off for every parameter.
    """
    images = images.reshape(len(images), 1, 8, 8)
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    backbone = DigitBackbone().to(images.device)
    torch.random.set_rng_state(state)
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(backbone.parameters(), lr=1e-2)
    for _ in range(steps):
        batch = torch.randint(len(images), (batch_size,), generator=generator).to(images.device)
        loss = nn.functional.cross_entropy(backbone(images[batch]), labels[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    backbone.eval()
    for parameter in backbone.parameters():
        parameter.requires_grad_(False)
    return backbone


class GlobalImageProjection(nn.Module):
    """VSE++'s image side (Bleeker & de Rijke, 2022, B.1): frozen global features, a trained
    linear projection.

    Input: ``[N, F]`` features of the frozen backbone (computed once; see
    :func:`gradlab.experiments.digit_scenes.scene_features`); output on the unit sphere.

    Example:
        >>> out = GlobalImageProjection(576, 32)(torch.randn(3, 576))
        >>> bool(torch.allclose(out.norm(dim=1), torch.ones(3)))
        True
    """

    def __init__(self, in_features: int, dims: int = 64) -> None:
        super().__init__()
        self.projection = nn.Linear(in_features, dims)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return nn.functional.normalize(self.projection(features), dim=1)


class RegionRelationEncoder(nn.Module):
    """VSRN's image side without its caption decoder (Bleeker & de Rijke, 2022, B.2), in miniature.

    Region vectors (frozen backbone features of each detector box, with the box centre appended:
    the 8 x 8 crops alone carry no position, and the captions are about positions) are embedded
    by a linear layer, refined by ``gcn_layers`` graph-convolution layers over the fully connected
    region graph (VSRN's relation reasoning: affinities ``phi(v_i) . psi(v_j)``, normalised over
    the scene's regions, residual update), then read in order by a GRU whose last state, on the
    unit sphere, is the image embedding.

    Input: ``regions [N, R, F]`` and ``counts [N]`` (regions after ``counts[n]`` are padding).

    Example:
        >>> encoder = RegionRelationEncoder(66, 32)
        >>> encoder(torch.randn(2, 4, 66), torch.tensor([2, 4])).shape
        torch.Size([2, 32])
    """

    def __init__(self, in_features: int, dims: int = 64, gcn_layers: int = 2) -> None:
        super().__init__()
        self.embed = nn.Linear(in_features, dims)
        self.phi = nn.ModuleList(nn.Linear(dims, dims) for _ in range(gcn_layers))
        self.psi = nn.ModuleList(nn.Linear(dims, dims) for _ in range(gcn_layers))
        self.update = nn.ModuleList(nn.Linear(dims, dims) for _ in range(gcn_layers))
        self.gru = nn.GRU(dims, dims, batch_first=True)
        self.dims = dims

    def forward(self, regions: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        valid = torch.arange(regions.shape[1], device=regions.device) < counts.unsqueeze(1)
        nodes = torch.relu(self.embed(regions))
        for phi, psi, update in zip(self.phi, self.psi, self.update, strict=True):
            affinity = phi(nodes) @ psi(nodes).transpose(1, 2) / self.dims**0.5
            affinity = affinity.masked_fill(~valid.unsqueeze(1), -torch.inf).softmax(dim=2)
            nodes = nodes + torch.relu(update(affinity @ nodes))
        packed = nn.utils.rnn.pack_padded_sequence(
            nodes, counts.cpu(), batch_first=True, enforce_sorted=False
        )
        _, last = self.gru(packed)
        return nn.functional.normalize(last[-1], dim=1)


class CaptionGRU(nn.Module):
    """The caption encoder of VSE++ and VSRN (Bleeker & de Rijke, 2022, B.1): word embeddings
    trained from scratch, a unidirectional GRU, the last step's state projected onto the unit
    sphere.

    Example:
        >>> CaptionGRU(25, 32)(torch.tensor([[3, 7, 16, 17, 3, 8], [3, 9, 0, 0, 0, 0]])).shape
        torch.Size([2, 32])
    """

    def __init__(self, vocabulary_size: int, dims: int = 64, words: int = 32, hidden: int = 64):
        super().__init__()
        self.embedding = nn.Embedding(vocabulary_size, words, padding_idx=0)
        self.gru = nn.GRU(words, hidden, batch_first=True)
        self.projection = nn.Linear(hidden, dims)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        lengths = (tokens != 0).sum(dim=1).clamp(min=1)
        packed = nn.utils.rnn.pack_padded_sequence(
            self.embedding(tokens), lengths.cpu(), batch_first=True, enforce_sorted=False
        )
        _, last = self.gru(packed)
        return nn.functional.normalize(self.projection(last[-1]), dim=1)
