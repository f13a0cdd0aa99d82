"""open_clip's own ``loss.py`` loaded by file, and stand-ins of its ``ClipLoss`` and
``SigLipLoss`` (open_clip 3.3.0, ``src/open_clip/loss.py``) written for these tests from its
documented interface.

``import open_clip`` fails on the development machine (it imports torchvision, whose wheel on
the package index does not load against the CPU torch build), but its ``loss.py`` imports only
torch: :func:`open_clip_loss_module` loads that file from the installed package (``make test``
installs open_clip_torch without its dependencies) and the wrapper is tested against it. The
stand-ins keep the tests meaningful where open_clip is not installed at all: the same
attributes (``local_loss``, ``gather_with_grad``, ``rank``, ``world_size``, ``dist_impl``), the
same ``get_logits`` and ``forward(image_features, text_features, logit_scale, logit_bias,
output_dict)``, the same arithmetic (CLIP: mean of the two cross-entropies, labels offset by
``rank x B`` under ``local_loss``; SigLIP: ``-log sigmoid`` of ``+-1`` labels times the logits,
summed and divided by ``B``, other ranks' texts as negative-only blocks).
tests/integrations/test_open_clip.py runs the same checks against the real package where it
imports. Also the two-process worker of the distributed test.
"""

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch
import torch.nn.functional as F

LOSS_FILE_MODULE = "gradlab_tests_open_clip_loss"
"""The name open_clip's ``loss.py`` is registered under when loaded by file (not
``open_clip.loss``: that would look like the package imported)."""


def open_clip_loss_file() -> Path | None:
    """``open_clip/loss.py`` of the installed package, found without importing the package."""
    spec = importlib.util.find_spec("open_clip")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "loss.py"
    return path if path.is_file() else None


def open_clip_loss_module() -> ModuleType:
    """open_clip's ``loss.py`` loaded by file (it imports only torch); skips the calling test
    when open_clip is not installed."""
    if LOSS_FILE_MODULE in sys.modules:
        return sys.modules[LOSS_FILE_MODULE]
    path = open_clip_loss_file()
    if path is None:
        pytest.skip("open_clip is not installed (make test installs open_clip_torch without its "
                    "dependencies, for its loss.py)")  # fmt: skip
    spec = importlib.util.spec_from_file_location(LOSS_FILE_MODULE, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[LOSS_FILE_MODULE] = module
    spec.loader.exec_module(module)
    return module


def loss_classes(source: str) -> tuple[type, type]:
    """``(ClipLoss, SigLipLoss)`` of ``source``: ``"loss.py"`` (open_clip's file) or
    ``"stand-in"``."""
    if source == "loss.py":
        module = open_clip_loss_module()
        return module.ClipLoss, module.SigLipLoss
    return StandInClipLoss, StandInSigLipLoss


def gathered(features: torch.Tensor, with_grad: bool, keep_local: bool) -> torch.Tensor:
    """Every rank's features in rank order (open_clip's gather_features, for one tensor)."""
    import torch.distributed as dist
    import torch.distributed.nn

    if with_grad:
        return torch.cat(torch.distributed.nn.all_gather(features), dim=0)
    parts = [torch.zeros_like(features) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, features)
    if keep_local:
        parts[dist.get_rank()] = features  # the local rows keep their gradient
    return torch.cat(parts, dim=0)


class StandInClipLoss(torch.nn.Module):
    """open_clip's ``ClipLoss`` interface (see the module docstring)."""

    def __init__(self, local_loss=False, gather_with_grad=False, rank=0, world_size=1):
        super().__init__()
        self.local_loss, self.gather_with_grad = local_loss, gather_with_grad
        self.rank, self.world_size = rank, world_size

    def get_logits(self, image_features, text_features, logit_scale, logit_bias=None):
        if self.world_size > 1:
            keep = not self.local_loss
            images = gathered(image_features, self.gather_with_grad, keep)
            texts = gathered(text_features, self.gather_with_grad, keep)
            if self.local_loss:
                per_image = logit_scale * image_features @ texts.T
                per_text = logit_scale * text_features @ images.T
            else:
                per_image = logit_scale * images @ texts.T
                per_text = per_image.T
        else:
            per_image = logit_scale * image_features @ text_features.T
            per_text = logit_scale * text_features @ image_features.T
        if logit_bias is not None:
            per_image = per_image + logit_bias
            per_text = per_text + logit_bias
        return per_image, per_text

    def forward(self, image_features, text_features, logit_scale, logit_bias=None,
                output_dict=False):  # fmt: skip
        per_image, per_text = self.get_logits(image_features, text_features, logit_scale,
                                              logit_bias)  # fmt: skip
        labels = torch.arange(per_image.shape[0])
        if self.world_size > 1 and self.local_loss:
            labels = labels + per_image.shape[0] * self.rank
        total = (F.cross_entropy(per_image, labels) + F.cross_entropy(per_text, labels)) / 2
        return {"contrastive_loss": total} if output_dict else total


class StandInSigLipLoss(torch.nn.Module):
    """open_clip's ``SigLipLoss`` interface (see the module docstring); other ranks' texts
    arrive by an all-gather, in the order of the ``shift`` exchange (left neighbours first)."""

    def __init__(self, rank=0, world_size=1):
        super().__init__()
        self.rank, self.world_size = rank, world_size

    def get_logits(self, image_features, text_features, logit_scale, logit_bias=None):
        logits = logit_scale * image_features @ text_features.T
        return logits if logit_bias is None else logits + logit_bias

    def _loss(self, image_features, text_features, logit_scale, logit_bias, negative_only):
        logits = self.get_logits(image_features, text_features, logit_scale, logit_bias)
        labels = -torch.ones_like(logits)
        if not negative_only:
            labels = labels + 2 * torch.eye(len(logits), dtype=logits.dtype)
        return -F.logsigmoid(labels * logits).sum() / image_features.shape[0]

    def forward(self, image_features, text_features, logit_scale, logit_bias, output_dict=False):
        loss = self._loss(image_features, text_features, logit_scale, logit_bias, False)
        if self.world_size > 1:
            texts = gathered(text_features, True, False).chunk(self.world_size)
            for step in range(1, self.world_size):
                source = (self.rank - step) % self.world_size
                loss = loss + self._loss(image_features, texts[source], logit_scale, logit_bias,
                                         True)  # fmt: skip
        return {"contrastive_loss": loss} if output_dict else loss


def features(world: int, size: int, dim: int = 8, seed: int = 0):
    """Normalised image and text features of every rank, ``[world x size, dim]`` each."""
    generator = torch.Generator().manual_seed(seed)
    images = F.normalize(torch.randn(world * size, dim, generator=generator), dim=-1)
    texts = F.normalize(torch.randn(world * size, dim, generator=generator) + images, dim=-1)
    return images, texts


def clip_worker(rank: int, world: int, init_file: str, out: str, kind: str,
                source: str = "stand-in", dist_impl: str | None = None) -> None:  # fmt: skip
    """One rank of the distributed test: record the logits of ``source``'s loss (see
    :func:`loss_classes`), save the captures. ``dist_impl``: open_clip's ``SigLipLoss``
    exchange of the other ranks' texts (None: its default)."""
    from gradlab.integrations.open_clip import RecordingClipLoss, open_clip_adapter

    clip_loss, siglip_loss = loss_classes(source)

    torch.distributed.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                                         world_size=world)  # fmt: skip
    size = 3
    images, texts = features(world, size)
    local = slice(rank * size, (rank + 1) * size)
    image = images[local].clone().requires_grad_()
    text = texts[local].clone().requires_grad_()
    if kind == "siglip":
        options = {} if dist_impl is None else {"dist_impl": dist_impl}
        loss = siglip_loss(rank=rank, world_size=world, **options)
        bias = torch.tensor(-2.0)
    else:
        loss = clip_loss(local_loss=True, gather_with_grad=True, rank=rank, world_size=world)
        bias = None
    wrapper = RecordingClipLoss(loss)
    adapter = open_clip_adapter(wrapper, None)
    with adapter.listening(score_grad=True) as (recorded, _):
        value = wrapper(image, text, torch.tensor(10.0), bias)
    batch = adapter.capture([], value, 0.01, recorded=recorded, score_grad=True)
    value.backward()
    torch.save([(c.direction, c.scores, c.positives, c.grad) for c in batch.score_captures],
               f"{out}/rank{rank}.pt")  # fmt: skip
    # local features against gathered candidates: not the matrix's, so no geometry is read
    torch.save(batch.features is None and batch.compared is None, f"{out}/rank{rank}_none.pt")
    torch.save(batch.softmax.info_nce, f"{out}/rank{rank}_info_nce.pt")
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
    # Leave without the interpreter's teardown: in about one full-suite run in three, a rank
    # of this worker (after its all_gather with grad) aborted there with "terminate called
    # without an active exception", after its results were saved. An exception raised above
    # still reaches spawn; this only skips the C++ destructors at exit.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def real_open_clip():
    """The open_clip package, or a skip that says why it does not import here."""
    try:
        import open_clip
    except Exception as error:  # ImportError, or torchvision's RuntimeError against this torch
        pytest.skip(f"open_clip does not import here ({type(error).__name__}: {error}); "
                    "development installs it without torchvision, whose wheel does not load "
                    "against the CPU torch build it pins; its loss.py is tested by file")
    return open_clip


def tiny_clip(open_clip):
    """A randomly initialised ``open_clip.model.CLIP``: one layer per tower, width 32."""
    torch.manual_seed(0)
    return open_clip.model.CLIP(
        embed_dim=16,
        vision_cfg=open_clip.model.CLIPVisionCfg(layers=1, width=32, head_width=16,
                                                 patch_size=8, image_size=16),
        text_cfg=open_clip.model.CLIPTextCfg(context_length=8, vocab_size=40, width=32,
                                             heads=2, layers=1),
    )  # fmt: skip
