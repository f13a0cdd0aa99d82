"""open_clip's ``ClipLoss`` and ``SigLipLoss`` with logits that a Monitor reads.

Wrap the loss once; the wrapper is called like the loss and returns what it returns::

    import open_clip
    from gradlab.integrations.open_clip import RecordingClipLoss

    loss_fn = monitor.watch(RecordingClipLoss(open_clip.ClipLoss(local_loss=True,
        gather_with_grad=True, rank=rank, world_size=world_size)))
    total = loss_fn(image_features, text_features, logit_scale)   # logit_bias, output_dict too

While a :class:`gradlab.Monitor` listens, the wrapper records the logits the loss computes (its
``get_logits``, not a second computation) and reads ``dL/dlogits`` with hooks that only read:

* ``ClipLoss`` on one process: ``logits_per_image`` ``[B, B]`` (``anatomy_i2t_*``) and
  ``logits_per_text`` (``anatomy_t2i_*``), positives on the diagonal.
* ``ClipLoss(local_loss=True)`` on ``world_size`` processes: local queries against global
  candidates, ``[B, world_size x B]`` both ways, the positive of local row ``i`` at column
  ``rank x B + i`` (``gather_with_grad`` or not).
* ``ClipLoss`` without ``local_loss`` on several processes: the global ``[N, N]`` matrix, whose
  gradient holds both terms (``logits_per_text`` is its transpose): rows read as image queries
  and columns as text queries.
* ``SigLipLoss``: every pair is its own binary term. The local ``[B, B]`` block (positives on
  its diagonal) and the negative-only blocks of the other processes' texts are joined into one
  ``[B, world_size x B]`` matrix, row chunks (``chunk_size``) stitched back; rows are read as
  image queries and columns as text queries (texts of other processes have no positive and
  are left out of that direction's summary).

The loss itself is unchanged (values, gradients and its own state); a dict returned with
``output_dict=True`` is logged as the sum of its values, as open_clip's training loop sums it.
Without open_clip installed the wrapper works with any loss object of the same interface
(``get_logits`` and ``forward(image_features, text_features, logit_scale, logit_bias,
output_dict)``).
"""

from __future__ import annotations

import inspect
import math
import numbers

import torch

from gradlab.errors import GradlabError
from gradlab.functional.precision import autocast_on
from gradlab.integrations.recorded import RecordedScoresAdapter, Stitch
from gradlab.losses import SoftmaxLogits
from gradlab.monitor.adapters import AT_TAU, LossAdapter, loss_name, register
from gradlab.monitor.batch import ScoreCapture
from gradlab.monitor.geometry import ChanceLevel
from gradlab.validation import (
    ScoreRecorderSlot,
    check_same_device,
    check_shape,
    check_tensor,
)

__all__ = ["RecordingClipLoss", "open_clip_adapter"]


class RecordingClipLoss(ScoreRecorderSlot, torch.nn.Module):
    """An open_clip ``ClipLoss`` or ``SigLipLoss`` whose logits a Monitor reads (module docstring).

    Args:
        loss: the open_clip loss (or an object with its ``get_logits`` and ``forward``).

    Raises:
        GradlabError: ``loss`` has no ``get_logits`` method or is not callable, is a
            ``RecordingClipLoss`` already, or runs on several processes (``world_size`` above
            1) without a ``rank``.

    Example:
        >>> import torch
        >>> from gradlab.integrations.open_clip import RecordingClipLoss
        >>> class Loss(torch.nn.Module):  # the interface of open_clip's ClipLoss, one process
        ...     world_size, local_loss = 1, False
        ...     def get_logits(self, image, text, scale, bias=None):
        ...         return scale * image @ text.T, scale * text @ image.T
        ...     def forward(self, image, text, scale, bias=None, output_dict=False):
        ...         per_image, per_text = self.get_logits(image, text, scale, bias)
        ...         labels = torch.arange(len(image))
        ...         return (torch.nn.functional.cross_entropy(per_image, labels)
        ...                 + torch.nn.functional.cross_entropy(per_text, labels)) / 2
        >>> loss = RecordingClipLoss(Loss())
        >>> seen = []
        >>> loss.score_recorder = lambda direction, matrix, _: seen.append(direction)
        >>> value = loss(torch.eye(3), torch.eye(3), torch.tensor(10.0, requires_grad=True))
        >>> seen
        ['i2t', 't2i']
    """

    _recorder_signature = " (direction, matrix, mask)"
    operands: tuple[torch.Tensor, torch.Tensor] | None = None
    """``(image_features, text_features)`` of the call being recorded (else None)."""
    call_scale: torch.Tensor | None = None
    """The ``logit_scale`` of the call being recorded (else None)."""
    pairwise: bool = False
    """Whether the last recorded logits were one matrix of pairs (``SigLipLoss``), not a pair
    of softmax logits (``ClipLoss``)."""

    def __init__(self, loss: torch.nn.Module) -> None:
        super().__init__()
        if isinstance(loss, RecordingClipLoss):
            raise GradlabError(f"loss is wrapped already: pass the RecordingClipLoss itself, "
                               f"or the {type(loss.loss).__name__} it wraps; got "
                               f"RecordingClipLoss({type(loss.loss).__name__})")  # fmt: skip
        if not callable(getattr(loss, "get_logits", None)) or not callable(loss):
            raise GradlabError(
                "loss must be an open_clip ClipLoss or SigLipLoss (with get_logits and forward); "
                f"got {type(loss).__name__} {loss!r}"
            )
        world = getattr(loss, "world_size", 1) or 1
        if world != 1 and getattr(loss, "rank", None) is None:
            raise GradlabError(
                f"loss has world_size {world} but no rank: on several processes the positives' "
                "columns depend on the rank (set loss.rank, as open_clip's losses do)"
            )
        self.loss = loss

    def forward(
        self,
        image_features: torch.Tensor,
        text_features: torch.Tensor,
        logit_scale: torch.Tensor,
        logit_bias: torch.Tensor | None = None,
        output_dict: bool = False,
    ):
        """The wrapped loss's value (a tensor, or a dict with ``output_dict=True``).

        Raises:
            GradlabError: features that are not ``[B, d]`` float tensors of one shape, dtype
                and device, with ``B >= 1``, or a ``logit_scale`` / ``logit_bias`` that is no
                tensor or number, holds more than one value, or is a number that is not finite
                (a tensor's value is not read: that would synchronise with the device).
        """
        _check_call(image_features, text_features, logit_scale, logit_bias)
        recorder = self.score_recorder
        if recorder is None:
            return self._call(image_features, text_features, logit_scale, logit_bias,
                              output_dict)  # fmt: skip
        original = self.loss.get_logits
        batch = image_features.shape[0]
        calls = [0]

        def recording_get_logits(*args, **kwargs):
            logits = original(*args, **kwargs)
            self._record(recorder, logits, calls[0], batch)
            calls[0] += 1
            return logits

        self.loss.get_logits = recording_get_logits  # this call only: restored below
        try:
            # plain attributes for the collector, never registered on the module (a
            # Parameter logit_scale would be, and a second call would find it there)
            self.__dict__.update(operands=(image_features, text_features),
                                 call_scale=logit_scale)  # fmt: skip
            return self._call(image_features, text_features, logit_scale, logit_bias,
                              output_dict)  # fmt: skip
        finally:
            del self.loss.get_logits
            self.__dict__.update(operands=None, call_scale=None)

    def _call(self, image_features, text_features, logit_scale, logit_bias, output_dict):
        if "logit_bias" in inspect.signature(self.loss.forward).parameters:
            return self.loss(image_features, text_features, logit_scale, logit_bias=logit_bias,
                             output_dict=output_dict)  # fmt: skip
        if logit_bias is not None:  # open_clip < 3.0: ClipLoss without a bias
            raise GradlabError(
                f"logit_bias must be None for {type(self.loss).__name__}, whose forward takes "
                f"no logit_bias; got a {type(logit_bias).__name__}"
            )
        return self.loss(image_features, text_features, logit_scale, output_dict=output_dict)

    def _record(self, recorder, logits, call: int, batch: int) -> None:
        """Name one ``get_logits`` result and hand it to the recorder (``(direction, matrix,
        (block, offset))``: the stitch's column block and the positives' offset)."""
        world = int(getattr(self.loss, "world_size", 1) or 1)
        rank = int(getattr(self.loss, "rank", 0) or 0)
        self.pairwise = not isinstance(logits, tuple)  # SigLipLoss: one matrix per call
        if isinstance(logits, tuple):  # ClipLoss: (logits_per_image, logits_per_text)
            per_image, per_text = logits
            if world > 1 and not getattr(self.loss, "local_loss", False):
                recorder("both", per_image, (0, 0))  # global: per_text is its transpose
                return
            offset = rank * batch if world > 1 else 0
            recorder("i2t", per_image, (0, offset))
            recorder("t2i", per_text, (0, offset))
            return
        # SigLipLoss: one call per row chunk of each text block (the local block first).
        chunk = int(getattr(self.loss, "chunk_size", 0) or 0)
        chunks = math.ceil(batch / min(chunk, batch)) if chunk > 0 else 1
        block = call // chunks
        # "gather" and "reduce" compute every rank's block after the local one, in rank order,
        # this rank's own again with weight 0: a copy of block 0, not negatives
        again = getattr(self.loss, "dist_impl", None) in ("gather", "reduce")
        if world > 1 and again and block == 1 + rank:
            return
        recorder("both", logits, (block, 0))


class _LogitsCollector:
    """The ``score_recorder`` of one logged call: one :class:`Stitch` per direction."""

    def __init__(self, wrapper: RecordingClipLoss) -> None:
        self.stitches: dict[str, Stitch] = {}
        self.wrapper = wrapper
        self.operands: tuple[torch.Tensor, torch.Tensor] | None = None
        self.scale: torch.Tensor | float | None = None
        self.sigmoid = False

    def record(self, direction: str, matrix: torch.Tensor, where: tuple[int, int]) -> None:
        if not isinstance(matrix, torch.Tensor) or not matrix.requires_grad:
            return
        if self.operands is None and self.wrapper.operands is not None:
            self.operands = tuple(x.detach() for x in self.wrapper.operands)
            scale = self.wrapper.call_scale
            self.scale = scale.detach() if isinstance(scale, torch.Tensor) else scale
            self.sigmoid = self.wrapper.pairwise
        block, offset = where
        if direction not in self.stitches:
            self.stitches[direction] = Stitch(direction, offset)
        self.stitches[direction].add(matrix, block=block)

    def finish(self) -> list[ScoreCapture]:
        order = ("both", "i2t", "t2i")
        return [self.stitches[name].finish() for name in order if name in self.stitches]

    def softmax(self) -> SoftmaxLogits:
        """What the wrapped loss's logits are (:class:`gradlab.losses.SoftmaxLogits`):
        ``ClipLoss`` averages the two directions' InfoNCE of ``logit_scale`` times the cosine
        (Radford et al. 2021); ``SigLipLoss`` scores each pair with a sigmoid."""
        world = int(getattr(self.wrapper.loss, "world_size", 1) or 1)
        # SigLipLoss: a sigmoid of each pair (Zhai et al. 2023), no softmax. ClipLoss with
        # local_loss on several processes: the text queries score another matrix than the
        # image queries, and the closed form reads one matrix.
        local = world > 1 and "t2i" in self.stitches
        # the recorded matrices are get_logits' output: logit_scale times the cosines
        return SoftmaxLogits(self.scale, "both", info_nce=not (self.sigmoid or local),
                             logits=True)  # fmt: skip

    def features(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """This process's image and text features: the first capture's rows and columns in
        one process (gathered logits have more: then the adapter leaves them out)."""
        return self.operands


def _check_call(image_features, text_features, logit_scale, logit_bias) -> None:
    """What open_clip's losses need of a call, checked before they fail deep inside."""
    check_tensor("image_features", image_features, ndims=(2,), kind="float")
    check_tensor("text_features", text_features, ndims=(2,), kind="float")
    check_shape("text_features", text_features, tuple(image_features.shape),
                "one text per image, of the images' width")  # fmt: skip
    # Under autocast the loss's products cast both to autocast's dtype (a bfloat16 image tower
    # beside a float32 text one is then a call open_clip accepts); outside, they fail.
    if text_features.dtype != image_features.dtype and not autocast_on(
            image_features.device.type):  # fmt: skip
        raise GradlabError(f"image_features and text_features must have one dtype outside "
                           f"torch.autocast; got {image_features.dtype} and "
                           f"{text_features.dtype}")  # fmt: skip
    check_same_device(image_features=image_features, text_features=text_features)
    if image_features.shape[0] == 0:  # no pair: the loss's mean over none is NaN
        raise GradlabError("image_features must hold at least one row (an image of a pair); "
                           f"got shape {tuple(image_features.shape)}")  # fmt: skip
    for name, value in (("logit_scale", logit_scale), ("logit_bias", logit_bias)):
        number = isinstance(value, numbers.Real) and not isinstance(value, bool)
        if not (isinstance(value, torch.Tensor) or number or (value is None and name ==
                                                                "logit_bias")):  # fmt: skip
            raise GradlabError(f"{name} must be a tensor or a number; got "
                               f"{type(value).__name__} {value!r}")  # fmt: skip
        if isinstance(value, torch.Tensor) and value.numel() != 1:
            raise GradlabError(f"{name} must hold one value; got shape {tuple(value.shape)}")
        if number and not math.isfinite(value):  # a tensor's value is not read: no sync
            raise GradlabError(f"{name} must be finite; got {value!r}")


class _LogitsAdapter(RecordedScoresAdapter):
    """open_clip's recorded matrices hold logits (``logit_scale`` times the cosine, plus a
    bias for SigLIP): a sigmoid of width tau on them measures nothing of the loss. SigLIP's
    loss is a sum of binary terms, one per pair (Zhai et al. 2023, Eq. 1), no mean of InfoNCE
    terms: ``ln C`` is not its chance level."""

    def not_applicable(self, name: str) -> str | None:
        if name in AT_TAU:
            return ("reads SmoothAP's sigmoid at the Monitor's tau on cosine scores; open_clip's "
                    "recorded matrix holds logits (logit_scale x cosine)")  # fmt: skip
        # by its class, or, for a stand-in of its interface, once a call has shown one matrix
        pairwise = self.recorder.pairwise  # a RecordingClipLoss: False before its first call
        if name == ChanceLevel.name and (pairwise or _is_sigmoid_loss(self.loss_fn)):
            return (f"does not apply to {loss_name(self.loss_fn)}: a sigmoid of each pair, no "
                    "mean of InfoNCE terms, so ln C is not its chance level")  # fmt: skip
        return super().not_applicable(name)


def _is_sigmoid_loss(loss: object) -> bool:
    """Whether ``loss`` is open_clip's ``SigLipLoss`` (or a class derived from it, or named
    after it: a stand-in of its interface), whose ``get_logits`` gives one matrix of pairs."""
    return any("siglip" in kind.__name__.lower() for kind in type(loss).__mro__)


def open_clip_adapter(loss_fn: object, inputs: str | None) -> LossAdapter | None:
    """The adapter maker for :class:`RecordingClipLoss` (registered with
    :func:`gradlab.monitor.adapters.register` when this module is imported).

    Example:
        >>> from gradlab.integrations.open_clip import open_clip_adapter
        >>> open_clip_adapter(len, None) is None
        True
    """
    if not isinstance(loss_fn, RecordingClipLoss):
        return None
    if inputs not in (None, "scores"):  # what the wrapper records: its loss's logits
        raise GradlabError(
            f"RecordingClipLoss is read through the logits its loss computes, so it is watched "
            f"with inputs=None (or 'scores'); got inputs={inputs!r}"
        )
    return _LogitsAdapter(
        f"the watched loss {loss_name(loss_fn.loss)}", loss_fn, lambda: _LogitsCollector(loss_fn),
        loss_fn=loss_fn.loss, features=True, hint=": does the call run with gradients enabled?",
    )  # fmt: skip


register(open_clip_adapter)
