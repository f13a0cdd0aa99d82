"""tiny_resnet against a ResNet written here from its description, and how build_backbone finds
the feature size: a stated ``num_features`` is trusted, otherwise one image is run, on the
backbone's own device."""

from __future__ import annotations

import sys
import types

import pytest
import torch
from torch import nn

from gradlab.backbones import build_backbone, tiny_resnet
from gradlab.errors import GradlabError


class _Residual(nn.Module):
    """He et al. (2016)'s basic block: relu(bn(conv3x3(relu(bn(conv3x3(x))))) + shortcut(x)),
    the shortcut a 1x1 convolution and batch norm where the shape changes, else the identity."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(cin, cout, kernel_size=3, stride=stride, padding=1, bias=False),
            nn.BatchNorm2d(cout),
            nn.ReLU(),
            nn.Conv2d(cout, cout, kernel_size=3, stride=1, padding=1, bias=False),
            nn.BatchNorm2d(cout),
        )
        projection = stride != 1 or cin != cout
        self.skip = (
            nn.Sequential(nn.Conv2d(cin, cout, kernel_size=1, stride=stride, bias=False),
                          nn.BatchNorm2d(cout))
            if projection else nn.Identity()
        )  # fmt: skip

    def forward(self, x):
        return torch.relu(self.main(x) + self.skip(x))


def _reference(width: int) -> nn.Module:
    """The documented architecture: a 3x3 stem (stride 1, 'same' padding, no bias), batch norm,
    ReLU, three stages of one basic block (width, 2 width, 4 width channels; strides 1, 2, 2),
    global average pooling, flattened to [B, 4 width]."""
    return nn.Sequential(
        nn.Conv2d(3, width, kernel_size=3, stride=1, padding=1, bias=False),
        nn.BatchNorm2d(width),
        nn.ReLU(),
        _Residual(width, width, 1),
        _Residual(width, 2 * width, 2),
        _Residual(2 * width, 4 * width, 2),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
    )


def _parameter_count(w: int) -> int:
    """By hand: 3x3 convolutions without bias hold 9 * in * out weights, a 1x1 projection in *
    out, every batch norm 2 * channels (weight and bias)."""
    stem = 9 * 3 * w + 2 * w
    stage1 = 9 * w * w + 9 * w * w + 2 * (2 * w)  # no projection: same shape
    stage2 = 9 * w * 2 * w + 9 * (2 * w) ** 2 + w * 2 * w + 3 * 2 * (2 * w)
    stage3 = 9 * 2 * w * 4 * w + 9 * (4 * w) ** 2 + 2 * w * 4 * w + 3 * 2 * (4 * w)
    return stem + stage1 + stage2 + stage3


@pytest.mark.parametrize("width", [2, 5])
def test_tiny_resnet_has_the_parameters_of_the_documented_architecture(width):
    net = tiny_resnet(width)
    assert sum(p.numel() for p in net.parameters()) == _parameter_count(width)
    assert net.num_features == 4 * width and isinstance(net.num_features, int)


@pytest.mark.parametrize("size", [20, 9])
def test_tiny_resnet_computes_what_a_resnet_written_from_its_description_computes(size):
    torch.manual_seed(0)
    net, reference = tiny_resnet(4), _reference(4)
    with torch.no_grad():  # every weight and running statistic away from its initial value
        for tensor in net.state_dict().values():
            if tensor.is_floating_point():
                tensor.copy_(torch.rand_like(tensor) + 0.5)
    ours, theirs = list(net.state_dict().values()), list(reference.state_dict().values())
    assert [tuple(t.shape) for t in ours] == [tuple(t.shape) for t in theirs]
    reference.load_state_dict(dict(zip(reference.state_dict(), ours, strict=True)))
    net.eval()
    reference.eval()
    images = torch.randn(2, 3, size, size)
    out = net(images)
    assert out.shape == (2, 16)
    torch.testing.assert_close(out, reference(images))


def test_tiny_resnet_names_a_bad_width():
    with pytest.raises(GradlabError, match=r"^width must be a positive integer; got 0$"):
        tiny_resnet(0)


class _Probe(nn.Module):
    """A parameter-free backbone that records the images it is given and returns the first
    ``features`` pixel values of each, optionally stating ``num_features``."""

    def __init__(self, features: int, stated=None, shape=None) -> None:
        super().__init__()
        self.features, self.shape, self.seen = features, shape, []
        if stated is not None:
            self.num_features = stated

    def forward(self, images):
        self.seen.append(tuple(images.shape))
        out = images.flatten(1)[:, : self.features]
        return out if self.shape is None else out.reshape(len(images), *self.shape)


def _user_module(monkeypatch, **functions) -> None:
    module = types.ModuleType("probe_nets")
    for name, function in functions.items():
        setattr(module, name, function)
    monkeypatch.setitem(sys.modules, "probe_nets", module)


@pytest.mark.parametrize("stated", [1, 7])
def test_a_stated_feature_size_is_trusted_without_running_the_backbone(monkeypatch, stated):
    probe = _Probe(stated, stated=stated)
    _user_module(monkeypatch, net=lambda: probe)
    net = build_backbone("probe_nets:net", embedding_dim=2, image_size=4)
    assert probe.seen == [] and net.head.in_features == stated


@pytest.mark.parametrize("stated", [None, 0, -3, 5.0])
def test_without_a_positive_integer_stated_one_image_of_image_size_is_run(monkeypatch, stated):
    probe = _Probe(5, stated=stated)  # parameter-free: the image is made on the CPU
    _user_module(monkeypatch, net=lambda: probe)
    net = build_backbone("probe_nets:net", embedding_dim=2, image_size=6)
    assert probe.seen == [(1, 3, 6, 6)] and net.head.in_features == 5
    assert net.head.out_features == 2


def test_the_defaults_are_a_224_image_and_a_128_embedding(monkeypatch):
    probe = _Probe(5)
    _user_module(monkeypatch, net=lambda: probe)
    net = build_backbone("probe_nets:net")
    assert probe.seen == [(1, 3, 224, 224)] and net.head.out_features == 128


def test_the_probe_image_is_made_on_the_backbone_s_device(monkeypatch):
    # "meta" stands in for a GPU: a CPU image does not run through batch norm on another device
    def on_meta():
        return nn.Sequential(nn.Conv2d(3, 5, 3, stride=2), nn.BatchNorm2d(5)).to("meta")

    _user_module(monkeypatch, net=on_meta)
    net = build_backbone("probe_nets:net", embedding_dim=2, image_size=9)
    assert net.head.in_features == 5 * 4 * 4  # (9 - 3) // 2 + 1 = 4


def test_token_features_are_flattened_before_the_head(monkeypatch):
    probe = _Probe(6, shape=(2, 3))  # [B, 2, 3]: e.g. two tokens of three features
    _user_module(monkeypatch, net=lambda: probe)
    net = build_backbone("probe_nets:net", embedding_dim=4, image_size=2)
    assert net.head.in_features == 6
    images = torch.randn(5, 3, 2, 2)
    out = net(images)
    assert out.shape == (5, 4)
    torch.testing.assert_close(out, images.flatten(1)[:, :6] @ net.head.weight.T + net.head.bias)


@pytest.mark.parametrize("returns", ["flat", "tuple"])
def test_a_backbone_without_batch_and_feature_dimensions_is_refused(monkeypatch, returns):
    class Odd(nn.Module):
        def forward(self, images):
            flat = images.flatten()  # [B * 3 * H * W]: one dimension
            return flat if returns == "flat" else (flat,)

    _user_module(monkeypatch, odd=Odd)
    got = {"flat": "a tensor of shape [12]: one row per image: keep the batch dimension",
           "tuple": "a tuple of 1: a tensor of shape [12]: wrap it in a module whose forward "
                    "returns the pooled features alone"}[returns]
    with pytest.raises(GradlabError) as raised:
        build_backbone("probe_nets:odd", image_size=2)
    assert str(raised.value) == (
        f"backbone 'probe_nets:odd' must return [B, F] features (one tensor); got {got}")
