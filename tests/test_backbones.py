"""Backbones from a spec: your own function here; timm and torchvision where they import; local
weights loaded strictly; every bad spec or checkpoint one clear error."""

from __future__ import annotations

import importlib
import sys
import types

import pytest
import torch
from torch import nn

from gradlab.backbones import EmbeddingNet, build_backbone, tiny_resnet
from gradlab.errors import GradlabError

TINY = "gradlab.backbones:tiny_resnet"


def _importable(name):
    try:
        importlib.import_module(name)
    except Exception as error:  # a CUDA torchvision wheel raises RuntimeError on this machine
        return str(error).splitlines()[0] or type(error).__name__
    return None


def test_a_module_function_backbone_gets_a_head_of_the_asked_size():
    net = build_backbone(TINY, embedding_dim=24, image_size=32)
    assert isinstance(net, EmbeddingNet) and net.head.in_features == 64  # 4 x width 16
    out = net(torch.randn(3, 3, 32, 32))
    assert out.shape == (3, 24)
    out.sum().backward()
    assert all(p.grad is not None for p in net.parameters() if p.requires_grad)


def test_the_feature_size_is_measured_when_the_backbone_does_not_state_it(monkeypatch):
    plain = types.ModuleType("user_nets")
    plain.maps = lambda: nn.Conv2d(3, 5, 3, stride=2)  # [B, 5, 4, 4] feature maps, not flat
    monkeypatch.setitem(sys.modules, "user_nets", plain)
    net = build_backbone("user_nets:maps", embedding_dim=4, image_size=9)
    assert net.head.in_features == 5 * 4 * 4  # (9 - 3) / 2 + 1 = 4
    assert net(torch.randn(2, 3, 9, 9)).shape == (2, 4)


def test_local_weights_are_loaded_exactly(tmp_path):
    source = tiny_resnet()
    with torch.no_grad():
        for parameter in source.parameters():
            parameter.normal_()
    path = tmp_path / "backbone.pt"
    torch.save({"state_dict": source.state_dict()}, path)
    net = build_backbone(TINY, weights=path, image_size=32)
    for key, value in source.state_dict().items():
        assert torch.equal(net.backbone.state_dict()[key], value), key


def test_weights_of_another_architecture_are_refused_with_the_keys(tmp_path):
    path = tmp_path / "other.pt"
    torch.save(tiny_resnet(width=8).state_dict(), path)
    with pytest.raises(GradlabError, match=r"do not fit backbone .*shape differs 0\.weight"):
        build_backbone(TINY, weights=path, image_size=32)
    torch.save({"encoder.weight": torch.zeros(2)}, path)
    with pytest.raises(GradlabError, match=r"missing 0\.weight.*unexpected encoder\.weight"):
        build_backbone(TINY, weights=path, image_size=32)


class _ImageNetNet(nn.Module):
    """A library's classification network: features, then a 10-class classifier ``fc``."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 4, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.fc = nn.Linear(4, 10)

    def forward(self, images):
        return self.fc(self.features(images))


def _library(monkeypatch, name: str, **functions) -> None:
    """A stand-in for timm or torchvision (neither imports here), under its own module name."""
    module = types.ModuleType(name)
    for attribute, function in functions.items():
        setattr(module, attribute, function)
    monkeypatch.setitem(sys.modules, name, module)
    if "." in name:
        parent = types.ModuleType(name.split(".")[0])
        setattr(parent, name.split(".")[1], module)
        monkeypatch.setitem(sys.modules, name.split(".")[0], parent)


def _timm_model(name, pretrained, num_classes):
    net = _ImageNetNet()
    net.fc, net.num_features = nn.Identity(), 4  # as timm builds num_classes=0
    net.pretrained_cfg = {"classifier": "fc"}
    return net


@pytest.mark.parametrize(("library", "spec", "functions"), [
    ("torchvision.models", "torchvision:net", {"get_model": lambda name, weights: _ImageNetNet()}),
    ("timm", "timm:net", {"create_model": _timm_model}),
])  # fmt: skip
def test_a_checkpoint_with_the_classifier_the_head_replaces_loads(
    tmp_path, monkeypatch, library, spec, functions
):
    # an ImageNet checkpoint holds fc.weight and fc.bias; they were refused as "unexpected"
    _library(monkeypatch, library, **functions)
    trained = _ImageNetNet()
    with torch.no_grad():
        for parameter in trained.parameters():
            parameter.normal_()
    path = tmp_path / "imagenet.pt"
    torch.save(trained.state_dict(), path)
    net = build_backbone(spec, embedding_dim=3, weights=path, image_size=8)
    assert list(net.backbone.state_dict()) == ["features.0.weight", "features.0.bias"]
    for key, value in net.backbone.state_dict().items():
        assert torch.equal(value, trained.state_dict()[key]), key
    torch.save({**trained.state_dict(), "extra.weight": torch.zeros(1)}, path)
    with pytest.raises(GradlabError, match=r"do not fit backbone .*: unexpected extra\.weight$"):
        build_backbone(spec, embedding_dim=3, weights=path, image_size=8)


@pytest.mark.parametrize(
    "spec, message",
    [
        ("resnet50", "backbone must be 'timm:NAME', 'torchvision:NAME' or 'module:function'"),
        ("timm:", "names no model after the colon"),
        ("no_such_module_xyz:net", "module 'no_such_module_xyz' cannot be imported"),
        ("gradlab.backbones:missing", "has no function 'missing'"),
        ("gradlab.backbones:KINDS", "has no function 'KINDS'"),
        (":tiny_resnet", "names no module before the colon"),
        (".backbones:tiny_resnet", "module '.backbones' cannot be imported"),
        ("math:sqrt", r"sqrt must be callable without arguments; its signature is \(x, /\)"),
    ],
)
def test_a_bad_spec_is_one_clear_error(spec, message):
    with pytest.raises(GradlabError, match=message):
        build_backbone(spec)


def test_a_function_returning_no_module_or_failing_is_named(monkeypatch):
    nets = types.ModuleType("bad_nets")
    nets.numbers = lambda: 3
    nets.broken = lambda: nn.Linear(7, 2)  # cannot take images
    monkeypatch.setitem(sys.modules, "bad_nets", nets)
    with pytest.raises(GradlabError, match=r"numbers\(\) must return a torch.nn.Module; got int"):
        build_backbone("bad_nets:numbers")
    with pytest.raises(GradlabError, match=r"failed on a \[1, 3, 16, 16\] image"):
        build_backbone("bad_nets:broken", image_size=16)


def test_bad_weights_files_are_named(tmp_path):
    with pytest.raises(GradlabError, match="is not a file"):
        build_backbone(TINY, weights=tmp_path / "absent.pt")
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(GradlabError, match="cannot be read as a checkpoint"):
        build_backbone(TINY, weights=junk)
    # a text file torch.load reads as a bad magic number (a KeyError of a bare number): the
    # message names what torch raised, not only the number
    junk.write_bytes(b"junk\n")
    with pytest.raises(GradlabError, match=r"checkpoint of tensors \(torch\.load raised "
                                           r"KeyError: 174812789\)$"):
        build_backbone(TINY, weights=junk)
    listing = tmp_path / "list.pt"
    torch.save([1, 2], listing)
    with pytest.raises(GradlabError, match="holds no state dict of tensors"):
        build_backbone(TINY, weights=listing)


@pytest.mark.parametrize(
    "library, spec", [("timm", "timm:resnet18"), ("torchvision.models", "torchvision:resnet18")]
)
def test_a_library_that_cannot_be_imported_is_one_line(library, spec):
    reason = _importable(library)
    if reason is None:
        pytest.skip(f"{library} imports here; the error path is not reachable")
    with pytest.raises(GradlabError) as caught:
        build_backbone(spec)
    assert "\n" not in str(caught.value) and f"needs {library.split('.')[0]}" in str(caught.value)


@pytest.mark.parametrize(
    "library, spec, features",
    [("timm", "timm:test_resnet", None), ("torchvision.models", "torchvision:resnet18", 512)],
)
def test_timm_and_torchvision_backbones_where_they_import(library, spec, features):
    reason = _importable(library)
    if reason is not None:
        pytest.skip(
            f"{library} cannot be imported here ({reason}); development keeps torchvision (which "
            "timm imports) out: the index's wheel is a CUDA build that does not load against "
            "the CPU torch wheel"
        )
    net = build_backbone(spec, embedding_dim=8, image_size=64)
    assert net(torch.randn(2, 3, 64, 64)).shape == (2, 8)
    if features is not None:
        assert net.head.in_features == features
