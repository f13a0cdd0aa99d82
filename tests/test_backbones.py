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


def test_a_module_in_the_working_folder_that_is_not_on_the_path_is_told_so(tmp_path,
                                                                         monkeypatch):
    # the installed gradlab command does not search the working folder: mybb.py beside the
    # user was "No module named 'mybb'", with no hint why
    (tmp_path / "my_backbone_xyz.py").write_text("def net():\n    return None\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    with pytest.raises(GradlabError) as raised:
        build_backbone("my_backbone_xyz:net")
    assert str(raised.value) == (
        "backbone 'my_backbone_xyz:net': module 'my_backbone_xyz' cannot be imported (No module "
        "named 'my_backbone_xyz'); my_backbone_xyz.py is in the working folder, which Python "
        "does not search for the installed gradlab command: run it with PYTHONPATH=. (or "
        "python -m gradlab)")
    with pytest.raises(GradlabError) as raised:  # nowhere at all: where to look
        build_backbone("no_such_module_xyz:net")
    assert str(raised.value) == (
        "backbone 'no_such_module_xyz:net': module 'no_such_module_xyz' cannot be imported (No "
        "module named 'no_such_module_xyz'); is its folder on PYTHONPATH?")


@pytest.mark.parametrize(("source", "said"), [
    ("def net(:\n    pass\n",  # a module that is not Python: its file and line named
     "importing module '{module}' raised SyntaxError: invalid syntax ({module}.py, line 1) "
     "(import it in Python to see the traceback)"),
    ("raise RuntimeError('no GPU here')\n",  # its own code fails as it is imported
     "importing module '{module}' raised RuntimeError: no GPU here (import it in Python to see "
     "the traceback)"),
    ("def net():\n    raise KeyError('depth')\n",  # the function fails when called
     "net() raised KeyError: 'depth' (call it in Python to see the traceback)"),
    ("def net():\n    assert False\n",  # no message: the type alone, no dangling colon
     "net() raised AssertionError (call it in Python to see the traceback)"),
    ("def net():\n    raise RuntimeError('Error(s) in loading:\\n\\tMissing key(s)')\n",
     "net() raised RuntimeError: Error(s) in loading: (call it in Python to see the "
     "traceback)"),  # torch's several lines: the first
    ("import sys\nsys.exit('usage: train.py DATA')\n",  # a script, run at import
     "importing module '{module}' raised SystemExit: usage: train.py DATA (import it in "
     "Python to see the traceback)"),
])  # fmt: skip
def test_a_user_backbone_whose_code_fails_is_one_clear_error(tmp_path, monkeypatch, source,
                                                              said):
    # a SyntaxError or a raise in the user's module or function ended `gradlab study` in a
    # 40-line traceback (exit 1), where an ImportError was one line (exit 2)
    module = f"broken_backbone_{len(source)}"
    (tmp_path / f"{module}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(GradlabError) as raised:
        build_backbone(f"{module}:net")
    assert str(raised.value) == f"backbone '{module}:net': " + said.format(module=module)


def test_gradlab_s_own_refusal_inside_a_user_backbone_is_passed_on_as_it_is(tmp_path,
                                                                            monkeypatch):
    # the user's function building a gradlab backbone with a bad spec: gradlab's own advice,
    # not wrapped as "net() raised GradlabError: ..."
    (tmp_path / "wrapping_backbone_xyz.py").write_text(
        "from gradlab.backbones import build_backbone\n"
        "def net():\n    return build_backbone('timm:')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(GradlabError) as raised:
        build_backbone("wrapping_backbone_xyz:net")
    with pytest.raises(GradlabError) as direct:
        build_backbone("timm:")
    assert str(raised.value) == str(direct.value)


def test_a_package_in_the_working_folder_that_is_not_on_the_path_is_told_so(tmp_path,
                                                                           monkeypatch):
    # a dotted module: the package named by its first part is what is looked for
    (tmp_path / "my_package_xyz").mkdir()
    (tmp_path / "my_package_xyz" / "__init__.py").write_text("")
    (tmp_path / "my_package_xyz" / "nets.py").write_text("def net():\n    return None\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    with pytest.raises(GradlabError) as raised:
        build_backbone("my_package_xyz.nets:net")
    assert str(raised.value) == (
        "backbone 'my_package_xyz.nets:net': module 'my_package_xyz.nets' cannot be imported "
        "(No module named 'my_package_xyz'); my_package_xyz is in the working folder, which "
        "Python does not search for the installed gradlab command: run it with PYTHONPATH=. "
        "(or python -m gradlab)")
    (tmp_path / "broken_module_xyz.py").write_text("import missing_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # found, and failing inside: its error alone
    with pytest.raises(GradlabError) as raised:
        build_backbone("broken_module_xyz:net")
    assert str(raised.value) == (
        "backbone 'broken_module_xyz:net': module 'broken_module_xyz' cannot be imported (No "
        "module named 'missing_dependency_xyz')")
    with pytest.raises(GradlabError) as raised:
        build_backbone("no_package_xyz.nets:net")
    assert str(raised.value) == (
        "backbone 'no_package_xyz.nets:net': module 'no_package_xyz.nets' cannot be imported "
        "(No module named 'no_package_xyz'); is its folder on PYTHONPATH?")


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


# Each error names the spec or the file, in one line.


def _path(path) -> str:
    return repr(str(path))


@pytest.mark.parametrize(
    "spec, message",
    [
        ("gradlab.backbones:missing",
         "backbone 'gradlab.backbones:missing': gradlab.backbones has no function 'missing'"),
        (":tiny_resnet", "backbone ':tiny_resnet' names no module before the colon "
                         "('module:function', e.g. 'gradlab.backbones:tiny_resnet')"),
    ],
)  # fmt: skip
def test_a_bad_spec_error_is_the_whole_sentence(spec, message):
    with pytest.raises(GradlabError) as caught:
        build_backbone(spec)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    "name, value", [("embedding_dim", 0), ("embedding_dim", 2.0), ("image_size", -1)]
)
def test_bad_sizes_are_named(name, value):
    with pytest.raises(GradlabError) as caught:
        build_backbone(TINY, **{name: value})
    assert str(caught.value) == f"{name} must be a positive integer; got {value!r}"


def test_a_failing_backbone_is_named_with_its_spec(monkeypatch):
    nets = types.ModuleType("bad_nets")
    nets.broken = lambda: nn.Linear(7, 2)
    monkeypatch.setitem(sys.modules, "bad_nets", nets)
    with pytest.raises(GradlabError, match=r"^backbone 'bad_nets:broken' failed on a \[1, 3, 4, "
                                           r"4\] image: "):  # fmt: skip
        build_backbone("bad_nets:broken", image_size=4)


class _TwoOutputs(nn.Module):
    """A backbone returning its pooled features and its feature map (as many do)."""

    def forward(self, images):
        return images.mean(dim=(2, 3)), images


class _Named(nn.Module):
    def forward(self, images):
        return {"pooled": images.mean(dim=(2, 3))}


class _Nothing(nn.Module):
    def forward(self, images):
        return None


class _Many(nn.Module):
    def __init__(self, count: int, keyed: bool):
        super().__init__()
        self.count, self.keyed = count, keyed

    def forward(self, images):
        outputs = [images.mean(dim=(2, 3))[:, :1] for _ in range(self.count)]
        return {f"o{i}": out for i, out in enumerate(outputs)} if self.keyed else tuple(outputs)


ONE = "a tensor of shape [1, 1]"


class _Constant(nn.Module):
    def forward(self, images):
        return 7


WRAP = "wrap it in a module whose forward returns the pooled features alone"


@pytest.mark.parametrize(("make", "got"), [
    (_TwoOutputs, "a tuple of 2: a tensor of shape [1, 3], a tensor of shape [1, 3, 4, 4]: "
                  + WRAP),
    (_Named, "a dict of 1: 'pooled': a tensor of shape [1, 3]: " + WRAP),
    (_Nothing, "None: " + WRAP),
    (lambda: _Many(3, False), f"a tuple of 3: {ONE}, {ONE}, {ONE}: " + WRAP),
    (lambda: _Many(4, False), f"a tuple of 4: {ONE}, {ONE}, {ONE} and 1 more: " + WRAP),
    (lambda: _Many(5, False), f"a tuple of 5: {ONE}, {ONE}, {ONE} and 2 more: " + WRAP),
    (lambda: _Many(3, True), f"a dict of 3: 'o0': {ONE}, 'o1': {ONE}, 'o2': {ONE}: " + WRAP),
    (lambda: _Many(4, True), f"a dict of 4: 'o0': {ONE}, 'o1': {ONE}, 'o2': {ONE} ...: " + WRAP),
    (lambda: _Constant(), "a value of type int: " + WRAP),
    (lambda: nn.Flatten(0), "a tensor of shape [48]: one row per image: keep the batch "
                            "dimension"),
])  # fmt: skip
def test_a_backbone_returning_other_than_features_is_told_what_it_returned(monkeypatch, make,
                                                                           got):
    # a tuple was shown as its truncated repr, "(tensor([[0., 0., 0.]]), tensor([[[[0., 0."
    nets = types.ModuleType("odd_nets")
    nets.odd = make
    monkeypatch.setitem(sys.modules, "odd_nets", nets)
    with pytest.raises(GradlabError) as raised:
        build_backbone("odd_nets:odd", image_size=4)
    assert str(raised.value) == (
        f"backbone 'odd_nets:odd' must return [B, F] features (one tensor); got {got}")


def _mlp_nets(monkeypatch):
    nets = types.ModuleType("mlp_nets")
    # keys 1.weight [4, 12], 1.bias [4], 2.weight [4, 4], 2.bias [4]; 3 x 2 x 2 = 12 inputs
    nets.mlp = lambda: nn.Sequential(nn.Flatten(), nn.Linear(12, 4), nn.Linear(4, 4))
    monkeypatch.setitem(sys.modules, "mlp_nets", nets)


def test_a_misfit_names_at_most_three_keys_of_each_kind(tmp_path, monkeypatch):
    _mlp_nets(monkeypatch)
    path = tmp_path / "misfit.pt"
    extra = {f"extra.{letter}": torch.zeros(1) for letter in "abcd"}
    torch.save({"1.weight": torch.zeros(4, 5), **extra}, path)
    with pytest.raises(GradlabError) as caught:
        build_backbone("mlp_nets:mlp", weights=path, image_size=2)
    assert str(caught.value) == (
        f"weights {_path(path)} do not fit backbone 'mlp_nets:mlp': "
        "missing 1.bias, 2.weight, 2.bias; unexpected extra.a, extra.b, extra.c ...; "
        "shape differs 1.weight"
    )


def test_a_checkpoint_under_model_loads(tmp_path, monkeypatch):
    _mlp_nets(monkeypatch)
    source = sys.modules["mlp_nets"].mlp()
    path = tmp_path / "trained.pt"
    torch.save({"model": source.state_dict(), "epoch": 3}, path)
    net = build_backbone("mlp_nets:mlp", weights=path, image_size=2)
    for key, value in source.state_dict().items():
        assert torch.equal(net.backbone.state_dict()[key], value), key


def test_bad_weights_errors_name_the_file(tmp_path):
    absent = tmp_path / "absent.pt"
    with pytest.raises(GradlabError) as caught:
        build_backbone(TINY, weights=absent)
    assert str(caught.value) == f"weights {_path(absent)} is not a file"
    listing = tmp_path / "list.pt"
    torch.save([1, 2], listing)
    with pytest.raises(GradlabError) as caught:
        build_backbone(TINY, weights=listing)
    assert str(caught.value) == f"weights {_path(listing)} holds no state dict of tensors"
    # an empty file (a save that never finished): torch raises an EOFError without a message
    empty = tmp_path / "empty.pt"
    empty.write_bytes(b"")
    with pytest.raises(GradlabError) as caught:
        build_backbone(TINY, weights=empty)
    assert str(caught.value) == (
        f"weights {_path(empty)} cannot be read as a checkpoint of tensors (torch.load raised "
        "EOFError)"
    )


class _Payload:
    """Unpickled as a call of os.mkdir: code that a checkpoint of tensors must never run."""

    def __init__(self, path) -> None:
        self.path = str(path)

    def __reduce__(self):
        import os

        return (os.mkdir, (self.path,))


def test_a_checkpoint_is_read_weights_only_whatever_the_environment_says(tmp_path, monkeypatch):
    # torch.load falls back to full unpickling under this variable unless asked for weights only
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    ran = tmp_path / "payload-ran"
    path = tmp_path / "unsafe.pt"
    torch.save({"0.weight": _Payload(ran)}, path)
    with pytest.raises(GradlabError) as caught:
        build_backbone(TINY, weights=path, image_size=8)
    assert not ran.exists()
    # torch's message runs over many lines and sentences; the first sentence is kept
    assert str(caught.value) == (
        f"weights {_path(path)} cannot be read as a checkpoint of tensors (torch.load raised "
        "UnpicklingError: Weights only load failed)"
    )


def _as_saved_on_cuda(path) -> None:
    """Rewrite a torch.save checkpoint's storage locations from "cpu" to "cuda:0", as a GPU run
    writes them (torch.save pickles each storage's location as a string)."""
    import zipfile

    with zipfile.ZipFile(path) as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    (pickle_name,) = [name for name in files if name.endswith("/data.pkl")]
    cpu, cuda = b"X\x03\x00\x00\x00cpu", b"X\x06\x00\x00\x00cuda:0"  # BINUNICODE, length 3 or 6
    assert files[pickle_name].count(cpu) > 0
    files[pickle_name] = files[pickle_name].replace(cpu, cuda)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)


def test_a_checkpoint_saved_on_a_gpu_loads_on_the_cpu(tmp_path, monkeypatch):
    _mlp_nets(monkeypatch)
    source = sys.modules["mlp_nets"].mlp()
    path = tmp_path / "gpu.pt"
    torch.save(source.state_dict(), path)
    _as_saved_on_cuda(path)
    if not torch.cuda.is_available():  # the rewrite took: torch alone would look for a GPU
        with pytest.raises(RuntimeError, match="CUDA"):
            torch.load(path, weights_only=True)
    net = build_backbone("mlp_nets:mlp", weights=path, image_size=2)
    for key, value in source.state_dict().items():
        assert torch.equal(net.backbone.state_dict()[key], value), key


# timm and torchvision through stand-ins (neither imports here): what is asked of them, and
# what comes back.


def _recording_timm(monkeypatch, calls, cfg=True, classifier="fc"):
    def create_model(name, pretrained, num_classes):
        calls.append((name, pretrained, num_classes))
        net = _ImageNetNet()
        net.fc, net.num_features = nn.Identity(), 4
        if cfg:
            net.pretrained_cfg = {"classifier": classifier}
        return net

    _library(monkeypatch, "timm", create_model=create_model)


def test_timm_is_asked_for_the_named_model_without_weights_or_classifier(monkeypatch):
    calls = []
    _recording_timm(monkeypatch, calls)
    # a Hugging Face hub name holds a colon of its own
    net = build_backbone("timm:hf-hub:timm/resnet18.a1_in1k", embedding_dim=3, image_size=8)
    assert calls == [("hf-hub:timm/resnet18.a1_in1k", False, 0)]
    assert calls[0][1] is False and net.head.in_features == 4


def test_a_timm_model_without_a_pretrained_cfg_builds(monkeypatch):
    _recording_timm(monkeypatch, [], cfg=False)
    net = build_backbone("timm:net", embedding_dim=3, image_size=8)
    assert net(torch.randn(2, 3, 8, 8)).shape == (2, 3)


def test_timm_s_classifiers_stated_as_a_tuple_are_left_out_of_a_checkpoint(tmp_path, monkeypatch):
    # distilled models (DeiT) state two classifiers: ("head", "head_dist")
    _recording_timm(monkeypatch, [], classifier=("fc", "fc_dist"))
    trained = _ImageNetNet()
    path = tmp_path / "distilled.pt"
    torch.save({**trained.state_dict(), "fc_dist.weight": torch.zeros(10, 4),
                "fc_dist.bias": torch.zeros(10)}, path)  # fmt: skip
    net = build_backbone("timm:deit", embedding_dim=3, weights=path, image_size=8)
    for key, value in net.backbone.state_dict().items():
        assert torch.equal(value, trained.state_dict()[key]), key


def test_an_unknown_timm_model_is_named(monkeypatch):
    def create_model(name, pretrained, num_classes):
        raise RuntimeError(f"Unknown model ({name})")

    _library(monkeypatch, "timm", create_model=create_model)
    with pytest.raises(GradlabError) as caught:
        build_backbone("timm:nope")
    assert str(caught.value) == "backbone 'timm:nope': Unknown model (nope)"


def _classified(attribute: str):
    """A torchvision-like network whose classifier lives under ``attribute``."""

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(3, 4, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten()
            )
            setattr(self, attribute, nn.Linear(4, 10))

        def forward(self, images):
            return getattr(self, attribute)(self.features(images))

    return Net


@pytest.mark.parametrize("attribute", ["fc", "classifier", "heads", "head"])
def test_torchvision_s_classifier_is_replaced_wherever_it_lives(tmp_path, monkeypatch, attribute):
    calls = []

    def get_model(name, weights):
        calls.append((name, weights))
        return _classified(attribute)()

    _library(monkeypatch, "torchvision.models", get_model=get_model)
    trained = _classified(attribute)()
    path = tmp_path / "imagenet.pt"
    torch.save(trained.state_dict(), path)  # the classifier's weights included
    net = build_backbone("torchvision:vit_b_16", embedding_dim=3, weights=path, image_size=8)
    assert calls == [("vit_b_16", None)]
    assert net.head.in_features == 4  # the features, not the 10 classes
    images = torch.randn(2, 3, 8, 8)
    torch.testing.assert_close(net.backbone(images), trained.features(images))


def test_torchvision_errors_are_named(monkeypatch):
    def get_model(name, weights):
        if name == "nope":
            raise ValueError(f"Unknown model {name}")
        return _classified("logits")()

    _library(monkeypatch, "torchvision.models", get_model=get_model)
    with pytest.raises(GradlabError) as caught:
        build_backbone("torchvision:nope")
    assert str(caught.value) == "backbone 'torchvision:nope': Unknown model nope"
    with pytest.raises(GradlabError) as caught:
        build_backbone("torchvision:odd")
    assert str(caught.value) == (
        "backbone 'torchvision:odd' has no fc, classifier, heads or head layer to replace"
    )


@pytest.mark.parametrize(
    "library, spec, module", [("timm", "timm:net", "timm"),
                              ("torchvision", "torchvision:resnet18", "torchvision.models")]
)  # fmt: skip
@pytest.mark.parametrize(
    "raises, reason",
    [("RuntimeError('libcudart.so.12: cannot open\\nmore detail')", "libcudart.so.12: cannot open"),
     ("OSError()", "OSError")],
)  # fmt: skip
def test_a_library_that_fails_to_import_is_named_with_its_first_line(
    tmp_path, monkeypatch, library, spec, module, raises, reason
):
    # a stand-in library that fails as it imports, as a CUDA wheel does against a CPU torch
    (tmp_path / f"{library}.py").write_text(f"raise {raises}\n")
    for name in (library, module):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(GradlabError) as caught:
        build_backbone(spec)
    assert str(caught.value) == (
        f"backbone {spec!r} needs {module}, which cannot be imported here: {reason}"
    )


@pytest.mark.parametrize(("spec", "library", "modules"), [
    ("timm:resnet18", "timm", ("timm",)),
    ("torchvision:resnet18", "torchvision", ("torchvision", "torchvision.models"))])  # fmt: skip
def test_a_library_that_is_not_installed_is_named_with_what_to_install(monkeypatch, spec,
                                                                        library, modules):
    for name in modules:
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setitem(sys.modules, library, None)  # as if absent: ModuleNotFoundError
    with pytest.raises(GradlabError) as caught:
        build_backbone(spec)
    build = (", in the build that matches your torch (a CUDA build does not load beside a CPU "
             "torch)") if library == "torchvision" else ""  # fmt: skip
    assert str(caught.value) == (
        f"backbone {spec!r} needs {library}, which is not installed here (gradlab installs no "
        f"backbone library): pip install {library}{build}; or use --backbone "
        "gradlab.backbones:tiny_resnet or your own module:function"
    )
