"""Backbones for the studies on your own data: timm, torchvision or your own function, with an
embedding head, built with random weights or from a local checkpoint (never downloaded).

A backbone is named by a spec string:

* ``timm:NAME``: ``timm.create_model(NAME, pretrained=False, num_classes=0)``;
* ``torchvision:NAME``: ``torchvision.models.get_model(NAME, weights=None)`` with its
  classifier (``fc``, ``classifier`` or ``heads``) replaced by the identity;
* ``module:function`` (e.g. ``mypackage.nets:resnet18``): ``function()`` returns an
  ``nn.Module`` mapping ``[B, 3, H, W]`` images to ``[B, F]`` features.

``weights`` names a local file (``torch.save`` of a state dict, or of a dict holding one under
``state_dict`` or ``model``) loaded into the backbone before the head is added, strictly: a
checkpoint of another architecture is refused with the keys that do not fit. The weights of the
classifier that the head replaces (torchvision's ``fc``, ``classifier``, ``heads`` or ``head``,
timm's ``pretrained_cfg["classifier"]``), which an ImageNet checkpoint holds, are left out.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import torch
from torch import nn

from gradlab.errors import GradlabError
from gradlab.validation import a_or_an, check_positive_int

KINDS = ("timm", "torchvision", "module:function")


class EmbeddingNet(nn.Module):
    """A backbone's ``[B, F]`` features through a linear head to ``[B, embedding_dim]``.

    Example:
        >>> net = EmbeddingNet(nn.Sequential(nn.Flatten(), nn.Linear(12, 5)), 5, 3)
        >>> tuple(net(torch.zeros(2, 3, 2, 2)).shape)
        (2, 3)
    """

    def __init__(self, backbone: nn.Module, features: int, embedding_dim: int) -> None:
        super().__init__()
        self.backbone = backbone
        self.head = nn.Linear(features, embedding_dim)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        features = self.backbone(images)
        if features.dim() != 2:
            features = features.flatten(1)
        return self.head(features)


def build_backbone(
    spec: str,
    *,
    embedding_dim: int = 128,
    weights: str | Path | None = None,
    image_size: int = 224,
) -> EmbeddingNet:
    """Build ``spec``'s backbone (random weights or ``weights``) with an embedding head.

    Args:
        spec: ``timm:NAME``, ``torchvision:NAME`` or ``module:function``.
        embedding_dim: the head's output size.
        weights: a local checkpoint of the backbone (never a download).
        image_size: the side of the images; used once to find the feature size of a backbone
            that does not state it (``num_features``).

    Returns:
        An :class:`EmbeddingNet`.

    Raises:
        GradlabError: an unknown spec, a library that cannot be imported, a function that does
            not return a module, a missing checkpoint or one of another architecture; each one
            line naming the spec or file.

    Example:
        >>> net = build_backbone("gradlab.backbones:tiny_resnet", embedding_dim=16, image_size=32)
        >>> tuple(net(torch.zeros(2, 3, 32, 32)).shape)
        (2, 16)
    """
    check_positive_int("embedding_dim", embedding_dim)
    check_positive_int("image_size", image_size)
    if not isinstance(spec, str) or ":" not in spec:
        raise GradlabError(
            f"backbone must be 'timm:NAME', 'torchvision:NAME' or 'module:function'; got {spec!r}"
        )
    kind, name = spec.split(":", 1)
    if not name:
        raise GradlabError(f"backbone {spec!r} names no model after the colon")
    classifier: tuple[str, ...] = ()  # the layers the head replaces, whose weights are dropped
    if kind == "timm":
        backbone = _timm(name)
        stated = (getattr(backbone, "pretrained_cfg", None) or {}).get("classifier") or ()
        classifier = (stated,) if isinstance(stated, str) else tuple(stated)
    elif kind == "torchvision":
        backbone, replaced = _torchvision(name)
        classifier = (replaced,)
    else:
        backbone = _user_function(kind, name, spec)
    if weights is not None:
        _load_weights(backbone, Path(weights), spec, classifier)
    features = _feature_size(backbone, image_size, spec)
    return EmbeddingNet(backbone, features, embedding_dim)


def _import(library: str, spec: str):
    try:
        return importlib.import_module(library)
    except Exception as error:
        package = library.split(".")[0]
        if (isinstance(error, ModuleNotFoundError)
                and (error.name or "").split(".")[0] == package):  # fmt: skip
            build = (", in the build that matches your torch (a CUDA build does not load "
                     "beside a CPU torch)") if package == "torchvision" else ""  # fmt: skip
            raise GradlabError(
                f"backbone {spec!r} needs {package}, which is not installed here (gradlab "
                f"installs no backbone library): pip install {package}{build}; or use "
                "--backbone gradlab.backbones:tiny_resnet or your own module:function"
            ) from None
        first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise GradlabError(
            f"backbone {spec!r} needs {library}, which cannot be imported here: {first_line}"
        ) from None


def _timm(name: str) -> nn.Module:
    timm = _import("timm", f"timm:{name}")
    try:
        return timm.create_model(name, pretrained=False, num_classes=0)
    except RuntimeError as error:  # timm: "Unknown model (NAME)"
        raise GradlabError(f"backbone 'timm:{name}': {error}") from None


def _torchvision(name: str) -> tuple[nn.Module, str]:
    """The model without its classifier, and the name of the classifier's attribute."""
    models = _import("torchvision.models", f"torchvision:{name}")
    try:
        model = models.get_model(name, weights=None)
    except ValueError as error:  # torchvision: "Unknown model NAME"
        raise GradlabError(f"backbone 'torchvision:{name}': {error}") from None
    for attribute in ("fc", "classifier", "heads", "head"):
        if isinstance(getattr(model, attribute, None), nn.Module):
            setattr(model, attribute, nn.Identity())
            return model, attribute
    raise GradlabError(
        f"backbone 'torchvision:{name}' has no fc, classifier, heads or head layer to replace"
    )


def _where_to_look(error: Exception, module_name: str) -> str:
    """A hint for a module that was not found: a file of that name in the working folder
    (which the installed ``gradlab`` command does not search), else PYTHONPATH."""
    if not isinstance(error, ModuleNotFoundError) or error.name != module_name.split(".")[0]:
        return ""  # found, but failed to import: its own error says why
    top = module_name.split(".")[0]
    beside = [name for name in (f"{top}.py", top) if Path(name).exists()]
    if beside:
        return (f"; {beside[0]} is in the working folder, which Python does not search for the "
                "installed gradlab command: run it with PYTHONPATH=. (or python -m gradlab)")
    return "; is its folder on PYTHONPATH?"


def _user_function(module_name: str, function_name: str, spec: str) -> nn.Module:
    if not module_name:
        raise GradlabError(f"backbone {spec!r} names no module before the colon "
                           "('module:function', e.g. 'gradlab.backbones:tiny_resnet')")  # fmt: skip
    try:
        module = importlib.import_module(module_name)
    except (ImportError, ValueError, TypeError) as error:  # "a..b", ".a": not a module name
        raise GradlabError(f"backbone {spec!r}: module {module_name!r} cannot be imported "
                           f"({error}){_where_to_look(error, module_name)}") from None  # fmt: skip
    except GradlabError:  # gradlab's own words (its build_backbone called at import)
        raise
    except (Exception, SystemExit) as error:  # its own code failed as it ran (a SyntaxError
        # names its line; a script's sys.exit or argparse at import is a SystemExit)
        raise GradlabError(f"backbone {spec!r}: importing module {module_name!r} raised "
                           f"{_raised(error)} (import it in Python to see the "
                           "traceback)") from None  # fmt: skip
    function = getattr(module, function_name, None)
    if not callable(function):
        raise GradlabError(f"backbone {spec!r}: {module_name} has no function {function_name!r}")
    try:
        inspect.signature(function).bind()
    except TypeError:
        raise GradlabError(
            f"backbone {spec!r}: {function_name} must be callable without arguments; its "
            f"signature is {inspect.signature(function)}"
        ) from None
    except ValueError:  # no signature to read (some built-ins): the call says
        pass
    try:
        model = function()
    except GradlabError:  # gradlab's own words (the function called build_backbone, say)
        raise
    except (Exception, SystemExit) as error:
        raise GradlabError(f"backbone {spec!r}: {function_name}() raised {_raised(error)} "
                           "(call it in Python to see the traceback)") from None  # fmt: skip
    if not isinstance(model, nn.Module):
        raise GradlabError(
            f"backbone {spec!r}: {function_name}() must return a torch.nn.Module; "
            f"got {type(model).__name__}"
        )
    return model


def _raised(error: BaseException) -> str:
    """``Type: first line of the message``, or the type alone for an empty message (one line:
    torch's load_state_dict messages run over several)."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


def _load_weights(
    backbone: nn.Module, path: Path, spec: str, classifier: tuple[str, ...] = ()
) -> None:
    if not path.is_file():
        raise GradlabError(f"weights {str(path)!r} is not a file")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:
        # torch's messages run over several lines; the first sentence says what failed
        first = (str(error).strip().splitlines() or [""])[0].split(". ")[0]
        raise GradlabError(
            f"weights {str(path)!r} cannot be read as a checkpoint of tensors (torch.load "
            f"raised {type(error).__name__}{': ' + first if first else ''})"
        ) from None
    if isinstance(state, dict):
        for key in ("state_dict", "model"):
            if isinstance(state.get(key), dict):
                state = state[key]
                break
    tensors = isinstance(state, dict) and all(isinstance(v, torch.Tensor) for v in state.values())
    if not tensors:
        raise GradlabError(f"weights {str(path)!r} holds no state dict of tensors")
    own = backbone.state_dict()
    replaced = tuple(f"{name}." for name in classifier)
    state = {key: value for key, value in state.items()
             if key in own or not key.startswith(replaced)}  # fmt: skip
    mismatched = {
        "missing": [key for key in own if key not in state],
        "unexpected": [key for key in state if key not in own],
        "shape differs": [
            key for key, value in state.items() if key in own and own[key].shape != value.shape
        ],
    }
    if any(mismatched.values()):
        parts = [
            f"{label} {', '.join(keys[:3])}{' ...' if len(keys) > 3 else ''}"
            for label, keys in mismatched.items()
            if keys
        ]
        raise GradlabError(
            f"weights {str(path)!r} do not fit backbone {spec!r}: {'; '.join(parts)}"
        )
    backbone.load_state_dict(state)


def _feature_size(backbone: nn.Module, image_size: int, spec: str) -> int:
    stated = getattr(backbone, "num_features", None)
    if isinstance(stated, int) and stated > 0:
        return stated
    was_training = backbone.training
    backbone.eval()
    try:
        with torch.no_grad():
            parameter = next(backbone.parameters(), None)
            device = parameter.device if parameter is not None else torch.device("cpu")
            features = backbone(torch.zeros(1, 3, image_size, image_size, device=device))
    except Exception as error:
        raise GradlabError(
            f"backbone {spec!r} failed on a [1, 3, {image_size}, {image_size}] image: {error}"
        ) from None
    finally:
        backbone.train(was_training)
    if not isinstance(features, torch.Tensor) or features.dim() < 2:
        fix = ("one row per image: keep the batch dimension" if isinstance(features, torch.Tensor)
               else "wrap it in a module whose forward returns the pooled features alone")
        raise GradlabError(
            f"backbone {spec!r} must return [B, F] features (one tensor); got "
            f"{_described(features)}: {fix}"
        )
    return int(features[0].numel())


def _described(value: object) -> str:
    """What a backbone returned, in words: tensors by shape, containers by what they hold."""
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {list(value.shape)}"
    if isinstance(value, (tuple, list)):
        held = ", ".join(_described(item) for item in value[:3])
        more = f" and {len(value) - 3} more" if len(value) > 3 else ""
        return f"{a_or_an(type(value).__name__)} of {len(value)}: {held}{more}"
    if isinstance(value, dict):
        held = ", ".join(f"{key!r}: {_described(item)}" for key, item in list(value.items())[:3])
        return f"a dict of {len(value)}: {held}" + (" ..." if len(value) > 3 else "")
    if value is None:
        return "None"
    return f"a value of type {type(value).__name__}"


class _BasicBlock(nn.Module):
    def __init__(self, inputs: int, outputs: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inputs, outputs, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(outputs)
        self.conv2 = nn.Conv2d(outputs, outputs, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(outputs)
        self.shortcut = (
            nn.Sequential(
                nn.Conv2d(inputs, outputs, 1, stride, bias=False), nn.BatchNorm2d(outputs)
            )
            if stride != 1 or inputs != outputs
            else nn.Identity()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


def tiny_resnet(width: int = 16) -> nn.Module:
    """A small ResNet in plain torch (He et al., 2016, basic blocks), for tests and CPU runs.

    Three stages of one basic block (``width``, ``2 width``, ``4 width`` channels), global
    average pooling; ``num_features = 4 width``. Usable as ``--backbone
    gradlab.backbones:tiny_resnet``.

    Example:
        >>> net = tiny_resnet(8)
        >>> net.num_features, tuple(net(torch.zeros(2, 3, 32, 32)).shape)
        (32, (2, 32))
    """
    check_positive_int("width", width)
    net = nn.Sequential(
        nn.Conv2d(3, width, 3, 1, 1, bias=False),
        nn.BatchNorm2d(width),
        nn.ReLU(),
        _BasicBlock(width, width, 1),
        _BasicBlock(width, 2 * width, 2),
        _BasicBlock(2 * width, 4 * width, 2),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
    )
    net.num_features = 4 * width
    return net
