"""RecordingClipLoss on one rank of several, in one process (fast; the gloo pair is in
test_open_clip.py): the other ranks' features are given, as a gather without gradient returns
them, so the recorded blocks, positives and ``dL/dlogits`` can be checked against float64 loops
(softmax cross-entropy, SigLIP's ``-log sigmoid``)."""


import pytest
import torch
import torch.nn.functional as F

from gradlab import GradlabError
from gradlab.integrations.open_clip import RecordingClipLoss, open_clip_adapter
from tests.helpers.open_clip_losses import StandInClipLoss, StandInSigLipLoss, features
from tests.reference.open_clip_loops import cross_entropy_grad, logits64, sigmoid_grad

SIZE, WORLD, SCALE, BIAS = 3, 2, 10.0, -2.0


def close(actual, expected):
    torch.testing.assert_close(actual.to(torch.float64), torch.as_tensor(expected,
                               dtype=torch.float64), atol=1e-5, rtol=0)  # fmt: skip


class GivenRanksClipLoss(StandInClipLoss):
    """The ClipLoss stand-in on rank ``rank`` whose gather returns the given global features
    with this rank's rows replaced by the local ones (they keep their gradient)."""

    def __init__(self, images, texts, **options):
        super().__init__(**options)
        self.all_images, self.all_texts = images, texts

    def gather(self, everything, local):
        rows = slice(self.rank * len(local), (self.rank + 1) * len(local))
        return torch.cat([everything[: rows.start], local, everything[rows.stop:]])

    def get_logits(self, image_features, text_features, logit_scale, logit_bias=None):
        images = self.gather(self.all_images, image_features)
        texts = self.gather(self.all_texts, text_features)
        if self.local_loss:
            return logit_scale * image_features @ texts.T, logit_scale * text_features @ images.T
        per_image = logit_scale * images @ texts.T
        return per_image, per_image.T


def recorded(loss, image, text, bias=None):
    wrapper = RecordingClipLoss(loss)
    adapter = open_clip_adapter(wrapper, "scores")
    with adapter.listening(score_grad=True) as (kept, _):
        value = wrapper(image, text, torch.tensor(SCALE), bias)
    batch = adapter.capture([], value, 0.01, recorded=kept, score_grad=True)
    value.backward()
    return batch


@pytest.mark.parametrize("rank", [0, 1])
def test_local_loss_puts_the_positive_of_row_i_at_rank_times_b_plus_i(rank):
    images, texts = features(WORLD, SIZE)
    local = slice(rank * SIZE, (rank + 1) * SIZE)
    loss = GivenRanksClipLoss(images, texts, local_loss=True, rank=rank, world_size=WORLD)
    batch = recorded(loss, images[local].clone().requires_grad_(), texts[local].clone())
    i2t, t2i = batch.score_captures
    assert (i2t.direction, t2i.direction) == ("i2t", "t2i")
    per_image = logits64(images[local], texts, SCALE)
    per_text = logits64(texts[local], images, SCALE)
    offset = rank * SIZE
    close(i2t.scores, per_image)
    close(t2i.scores, torch.tensor(per_text).T)
    close(i2t.grad, cross_entropy_grad(per_image, lambda row: offset + row, 0.5))
    close(t2i.grad, cross_entropy_grad(per_text, lambda row: offset + row, 0.5).T)
    positives = torch.zeros(SIZE, WORLD * SIZE, dtype=torch.bool)
    for row in range(SIZE):
        positives[row, offset + row] = True
    assert torch.equal(i2t.positives, positives) and torch.equal(t2i.positives, positives.T)


class GivenRanksGlobalLoss(GivenRanksClipLoss):
    """The global ClipLoss stand-in without a ``local_loss`` attribute at all: read as global,
    as open_clip's default (``local_loss=False``)."""

    def __init__(self, images, texts, **options):
        super().__init__(images, texts, local_loss=False, **options)
        del self.local_loss

    def get_logits(self, image_features, text_features, logit_scale, logit_bias=None):
        images = self.gather(self.all_images, image_features)
        per_image = logit_scale * images @ self.gather(self.all_texts, text_features).T
        return per_image, per_image.T

    def forward(self, image_features, text_features, logit_scale, logit_bias=None,
                output_dict=False):  # fmt: skip
        per_image, per_text = self.get_logits(image_features, text_features, logit_scale)
        labels = torch.arange(per_image.shape[0])
        return (F.cross_entropy(per_image, labels) + F.cross_entropy(per_text, labels)) / 2


@pytest.mark.parametrize("attribute", [True, False])
def test_a_global_loss_is_one_matrix_read_both_ways(attribute):
    images, texts = features(WORLD, SIZE, seed=1)
    if attribute:
        loss = GivenRanksClipLoss(images, texts, local_loss=False, rank=1, world_size=WORLD)
    else:
        loss = GivenRanksGlobalLoss(images, texts, rank=1, world_size=WORLD)
        assert not hasattr(loss, "local_loss")
    batch = recorded(loss, images[SIZE:].clone().requires_grad_(), texts[SIZE:].clone())
    (capture,) = batch.score_captures
    assert capture.direction == "both"
    logits = logits64(images, texts, SCALE)
    close(capture.scores, logits)
    transposed = torch.tensor(logits).T.tolist()
    grad = (cross_entropy_grad(logits, int, 0.5) + cross_entropy_grad(transposed, int, 0.5).T)
    close(capture.grad, grad)
    assert torch.equal(capture.positives, torch.eye(WORLD * SIZE, dtype=torch.bool))


class GivenRanksSigLipLoss(StandInSigLipLoss):
    """The SigLipLoss stand-in on rank ``rank``: the other ranks' texts are given; ``dist_impl``
    ``"gather"`` or ``"reduce"`` computes every block again, its own with weight 0, as open_clip
    3.3 does;
    ``chunk_size`` splits every block's rows into chunks (one ``get_logits`` call each; None:
    a loss without the attribute, one call per block)."""

    def __init__(self, texts, dist_impl, chunk_size=0, **options):
        super().__init__(**options)
        self.all_texts = texts
        if chunk_size is not None:
            self.chunk_size = chunk_size
        if dist_impl is not None:  # None: a loss without the attribute (exchanges like shift)
            self.dist_impl = dist_impl

    def _loss(self, image_features, text_features, logit_scale, logit_bias, negative_only):
        rows = getattr(self, "chunk_size", 0) or len(image_features)
        total = 0.0
        for start in range(0, len(image_features), rows):
            chunk = image_features[start:start + rows]
            logits = self.get_logits(chunk, text_features, logit_scale, logit_bias)
            labels = -torch.ones_like(logits)
            if not negative_only:
                labels[:, start:start + rows] += 2 * torch.eye(len(chunk), dtype=logits.dtype)
            total = total - F.logsigmoid(labels * logits).sum() / image_features.shape[0]
        return total

    def forward(self, image_features, text_features, logit_scale, logit_bias, output_dict=False):
        loss = self._loss(image_features, text_features, logit_scale, logit_bias, False)
        texts = list(self.all_texts.chunk(self.world_size))
        texts[self.rank] = text_features
        if getattr(self, "dist_impl", None) in ("gather", "reduce"):
            for index in range(self.world_size):
                loss = loss + float(index != self.rank) * self._loss(
                    image_features, texts[index], logit_scale, logit_bias, True)
        else:  # the shift exchange: left neighbours first
            for step in range(1, self.world_size):
                source = texts[(self.rank - step) % self.world_size]
                loss = loss + self._loss(image_features, source, logit_scale, logit_bias, True)
        return {"contrastive_loss": loss} if output_dict else loss


@pytest.mark.parametrize("dist_impl", ["gather", "reduce", "shift", None])
@pytest.mark.parametrize("chunk_size", [None, 0, 1, 2, 5])
@pytest.mark.parametrize("rank", [0, 1])
def test_siglip_blocks_of_other_ranks_join_the_local_block_once(rank, chunk_size, dist_impl):
    images, texts = features(WORLD, SIZE, seed=2)
    local = slice(rank * SIZE, (rank + 1) * SIZE)
    other = slice((1 - rank) * SIZE, (2 - rank) * SIZE)
    loss = GivenRanksSigLipLoss(texts, dist_impl, chunk_size, rank=rank, world_size=WORLD)
    batch = recorded(loss, images[local].clone().requires_grad_(), texts[local].clone(),
                     torch.tensor(BIAS))  # fmt: skip
    (capture,) = batch.score_captures
    assert capture.direction == "both" and capture.scores.shape == (SIZE, WORLD * SIZE)
    logits = logits64(images[local], torch.cat([texts[local], texts[other]]), SCALE, BIAS)
    close(capture.scores, logits)
    close(capture.grad, sigmoid_grad(logits, SIZE, SIZE))
    positives = torch.zeros(SIZE, WORLD * SIZE, dtype=torch.bool)
    positives[:, :SIZE] = torch.eye(SIZE, dtype=torch.bool)
    assert torch.equal(capture.positives, positives)


def test_an_old_loss_without_a_bias_argument_is_called_without_it():
    seen = []

    class OldClipLoss(StandInClipLoss):  # open_clip < 3.0: forward without logit_bias
        def forward(self, image_features, text_features, logit_scale, output_dict=False):
            seen.append(output_dict)
            return super().forward(image_features, text_features, logit_scale, None, output_dict)

    images, texts = features(1, 4)
    value = RecordingClipLoss(OldClipLoss())(images, texts, torch.tensor(SCALE), None,
                                             output_dict=True)  # fmt: skip
    expected = StandInClipLoss()(images, texts, torch.tensor(SCALE), None, output_dict=True)
    assert seen == [True] and value.keys() == {"contrastive_loss"}
    assert torch.equal(value["contrastive_loss"], expected["contrastive_loss"])
    with_bias = StandInSigLipLoss()
    outputs = RecordingClipLoss(with_bias)(images, texts, torch.tensor(SCALE), torch.tensor(BIAS),
                                           output_dict=True)  # fmt: skip
    reference = with_bias(images, texts, torch.tensor(SCALE), torch.tensor(BIAS))
    assert torch.equal(outputs["contrastive_loss"], reference)


def test_a_failing_loss_leaves_its_get_logits_and_the_operands_as_they_were():
    class Failing(StandInClipLoss):
        def forward(self, *args, **kwargs):
            self.get_logits(*args[:3])
            raise RuntimeError("loss failed")

    loss = Failing()
    wrapper = RecordingClipLoss(loss)
    wrapper.score_recorder = lambda direction, matrix, where: None
    images, texts = features(1, 3)
    with pytest.raises(RuntimeError, match="loss failed"):
        wrapper(images.clone().requires_grad_(), texts, torch.tensor(SCALE))
    assert "get_logits" not in loss.__dict__ and wrapper.operands is None


def test_the_adapter_takes_the_wrapper_for_scores_only():
    wrapper = RecordingClipLoss(StandInClipLoss())
    assert open_clip_adapter(wrapper, None) is not None
    assert open_clip_adapter(wrapper, "scores") is not None
    with pytest.raises(GradlabError, match=r"got inputs='embeddings'$"):  # no other reader
        open_clip_adapter(wrapper, "embeddings")
    assert open_clip_adapter(StandInClipLoss(), None) is None  # not the wrapper: not its


class MinimalClipLoss(torch.nn.Module):
    """Only the interface (``get_logits`` and ``forward``): no ``world_size``, ``rank``,
    ``local_loss`` attributes; with ``attributes`` they are all None."""

    def __init__(self, attributes=False):
        super().__init__()
        if attributes:
            self.world_size = self.rank = self.local_loss = None
        self.degenerate_batches = 2  # counts a step reads from the loss

    def get_logits(self, image, text, scale, bias=None):
        return scale * image @ text.T, scale * text @ image.T

    def forward(self, image, text, scale, bias=None, output_dict=False):
        per_image, per_text = self.get_logits(image, text, scale, bias)
        labels = torch.arange(len(image))
        return (F.cross_entropy(per_image, labels) + F.cross_entropy(per_text, labels)) / 2


class MinimalSigLipLoss(torch.nn.Module):
    """SigLIP's interface only: no ``world_size``, ``rank`` or ``chunk_size`` (or all None)."""

    def __init__(self, attributes=False):
        super().__init__()
        if attributes:
            self.world_size = self.rank = self.chunk_size = None

    def get_logits(self, image, text, scale, bias=None):
        return scale * image @ text.T + bias

    def forward(self, image_features, text_features, logit_scale, logit_bias, output_dict=False):
        logits = self.get_logits(image_features, text_features, logit_scale, bias=logit_bias)
        labels = 2 * torch.eye(len(logits)) - 1
        return -F.logsigmoid(labels * logits).sum() / len(image_features)


@pytest.mark.parametrize("attributes", [False, True])
def test_a_loss_with_only_the_interface_is_read_as_one_process(attributes):
    images, texts = features(1, 4, seed=6)
    batch = recorded(MinimalClipLoss(attributes), images.clone().requires_grad_(), texts)
    i2t, t2i = batch.score_captures
    assert (i2t.direction, t2i.direction) == ("i2t", "t2i")
    per_image = logits64(images, texts, SCALE)
    close(i2t.grad, cross_entropy_grad(per_image, int, 0.5))
    assert torch.equal(i2t.positives, torch.eye(4, dtype=torch.bool))
    assert batch.degenerate_batches == 2  # the loss's own count reaches the step
    batch = recorded(MinimalSigLipLoss(attributes), images.clone().requires_grad_(), texts,
                     torch.tensor(BIAS))  # fmt: skip
    (capture,) = batch.score_captures
    logits = logits64(images, texts, SCALE, BIAS)
    assert capture.direction == "both" and capture.scores.shape == (4, 4)
    close(capture.scores, logits)
    close(capture.grad, sigmoid_grad(logits, 4, 4))


def test_a_call_without_gradient_names_the_loss_and_what_to_check():
    images, texts = features(1, 3)
    wrapper = RecordingClipLoss(StandInClipLoss())
    adapter = open_clip_adapter(wrapper, None)
    with adapter.listening(score_grad=True) as (kept, _), torch.no_grad():
        value = wrapper(images, texts, torch.tensor(SCALE))
    with pytest.raises(GradlabError) as caught:
        adapter.capture([], value, 0.01, recorded=kept, score_grad=True)
    assert str(caught.value) == ("the watched loss StandInClipLoss recorded no score matrix with "
                                 "a gradient: does the call run with gradients enabled?")


def test_refusals_name_the_loss_and_the_value():
    with pytest.raises(GradlabError) as caught:
        RecordingClipLoss(torch.nn.Linear(2, 2))
    assert str(caught.value).startswith("loss must be an open_clip ClipLoss or SigLipLoss (with "
                                        "get_logits and forward); got Linear Linear(")
    old_style = StandInClipLoss()
    old_style.forward = lambda image, text, scale, output_dict=False: image.sum()
    with pytest.raises(GradlabError, match=r"^logit_bias must be None for StandInClipLoss, whose "
                       r"forward takes no logit_bias; got a Tensor$"):
        RecordingClipLoss(old_style)(torch.eye(2), torch.eye(2), torch.tensor(1.0),
                                     torch.tensor(0.5))  # fmt: skip


class BareClipLoss(torch.nn.Module):
    """ClipLoss's interface and nothing else: no ``world_size``, ``rank`` or ``local_loss``."""

    def get_logits(self, image_features, text_features, logit_scale, logit_bias=None):
        return (logit_scale * image_features @ text_features.T,
                logit_scale * text_features @ image_features.T)  # fmt: skip

    def forward(self, image_features, text_features, logit_scale, logit_bias=None,
                output_dict=False):  # fmt: skip
        per_image, per_text = self.get_logits(image_features, text_features, logit_scale)
        labels = torch.arange(per_image.shape[0])
        return (F.cross_entropy(per_image, labels) + F.cross_entropy(per_text, labels)) / 2


@pytest.mark.parametrize("attributes", [{}, {"world_size": None, "rank": None},
                                        {"world_size": 0, "rank": 0}])  # fmt: skip
def test_a_loss_without_process_attributes_is_read_as_one_process(attributes):
    images, texts = features(1, SIZE, seed=3)
    loss = BareClipLoss()
    for name, value in attributes.items():
        setattr(loss, name, value)
    batch = recorded(loss, images.clone().requires_grad_(), texts.clone())
    i2t, t2i = batch.score_captures
    assert (i2t.direction, t2i.direction) == ("i2t", "t2i")
    per_image, per_text = logits64(images, texts, SCALE), logits64(texts, images, SCALE)
    close(i2t.scores, per_image)
    close(t2i.scores, torch.tensor(per_text).T)
    close(i2t.grad, cross_entropy_grad(per_image, int, 0.5))
    eye = torch.eye(SIZE, dtype=torch.bool)
    assert torch.equal(i2t.positives, eye) and torch.equal(t2i.positives, eye)


@pytest.mark.parametrize("count", [None, 3])
def test_the_loss_s_own_degenerate_batch_count_is_read(count):
    images, texts = features(1, SIZE)
    loss = StandInClipLoss()
    if count is not None:
        loss.degenerate_batches = count
    batch = recorded(loss, images.clone().requires_grad_(), texts.clone())
    assert batch.degenerate_batches == count


def test_a_loss_on_several_processes_without_a_rank_is_refused():
    loss = BareClipLoss()
    loss.world_size = WORLD
    with pytest.raises(GradlabError) as caught:
        RecordingClipLoss(loss)
    assert str(caught.value) == (
        f"loss has world_size {WORLD} but no rank: on several processes the positives' columns "
        "depend on the rank (set loss.rank, as open_clip's losses do)"
    )
    loss.rank = None
    with pytest.raises(GradlabError, match="but no rank"):
        RecordingClipLoss(loss)
    loss.rank = 1
    assert RecordingClipLoss(loss).loss is loss
