"""The image-caption miniature (Bleeker & de Rijke 2022, app. B, on the 10 digits): its captions,
its encoders, its losses against float64 loops, and a run of 2 steps against the protocol of the
module's docstring run by hand (each loss's numbers under its own name, one initialization for
all, recall on the held-out images)."""

from __future__ import annotations

import copy
import math
import re

import numpy as np
import pytest
import torch

from gradlab.data import load_digits_split
from gradlab.errors import GradlabError
from gradlab.experiments import captions_miniature as study
from gradlab.functional import gradient_counts
from tests.reference import score_losses_loops, smooth_ap_loops
from tests.reference.retrieval_loops import recall_at_k

STEPS = 2  # a few seconds per run; gradient counts at step 0

SEVEN = [
    "a handwritten seven",
    "the digit seven",
    "a small picture of the number seven",
    "seven written by hand",
    "an image that shows a seven",
]


def _step_zero_counts(forward, backward) -> dict:
    """The step-0 record of the gradient counts from the counts computed by hand (10 images,
    50 captions)."""
    return {
        "step": 0,
        "i2t_share_without_gradient": forward.queries_without_gradient / 10,
        "t2i_share_without_gradient": backward.queries_without_gradient / 50,
        "i2t_mean_count": forward.per_query.double().mean().item(),
        "t2i_mean_count": backward.per_query.double().mean().item(),
    }


def _sentence(tokens, vocabulary):
    words = {index: word for word, index in vocabulary.items()}
    return " ".join(words[t] for t in tokens.tolist() if t != 0)


def test_each_digit_has_five_captions_that_name_it():
    tokens, vocabulary = study.caption_tokens()
    assert tokens.shape == (10, 5, 7)  # the longest caption has 7 words
    assert vocabulary["<pad>"] == 0 and len(set(vocabulary.values())) == len(vocabulary)
    assert [_sentence(t, vocabulary) for t in tokens[7]] == SEVEN
    assert _sentence(tokens[0, 3], vocabulary) == "zero written by hand"
    assert tokens[7, 0, 3:].eq(0).all() and tokens[7, 2].ne(0).all()  # padding after the words


def test_the_image_encoder_projects_onto_the_top_principal_components():
    images = load_digits_split(seen_classes=tuple(range(10))).train_images[:300].double()
    encoder = study.ImageEncoder(images.float(), dims=5, components=6)
    assert [name for name, _ in encoder.named_parameters()] == [
        "projection.weight", "projection.bias"]  # fmt: skip
    centred = (images - images.mean(dim=0)).numpy()
    _, vectors = np.linalg.eigh(centred.T @ centred)
    top = vectors[:, ::-1][:, :6]  # eigenvectors of the 6 largest eigenvalues
    basis = encoder.basis.double().numpy()
    np.testing.assert_allclose(basis.T @ basis, np.eye(6), atol=1e-4)
    np.testing.assert_allclose(np.abs(top.T @ basis), np.eye(6), atol=1e-3)  # same directions
    np.testing.assert_allclose(encoder.mean.double().numpy(), images.mean(dim=0), atol=1e-6)
    out = encoder(images[:4].float())
    features = (images[:4] - images.mean(dim=0)) @ torch.from_numpy(basis)
    expected = features @ encoder.projection.weight.double().T + encoder.projection.bias.double()
    expected = expected / expected.norm(dim=1, keepdim=True)
    torch.testing.assert_close(out.double(), expected, atol=1e-5, rtol=0)


def test_the_caption_encoder_reads_only_the_words_and_returns_unit_vectors():
    torch.manual_seed(0)
    encoder = study.CaptionEncoder(12, dims=6, hidden=8)
    short = torch.tensor([[3, 5, 2, 0, 0, 0]])
    out = encoder(torch.cat([short, torch.tensor([[3, 5, 2, 7, 1, 4]])]))
    alone = encoder(short[:, :3])
    torch.testing.assert_close(out[0], alone[0], atol=1e-6, rtol=0)
    assert not torch.allclose(out[0], out[1], atol=1e-3)
    torch.testing.assert_close(out.norm(dim=1), torch.ones(2), atol=1e-6, rtol=0)
    assert encoder.embedding.embedding_dim == 32 and encoder.gru.hidden_size == 8


def test_a_one_word_caption_reads_its_word_alone_and_every_word_is_trained():
    torch.manual_seed(1)
    encoder = study.CaptionEncoder(12, dims=6, hidden=8)
    padded = encoder(torch.tensor([[1, 0, 0], [4, 2, 0]]))
    torch.testing.assert_close(padded[0], encoder(torch.tensor([[1]]))[0], atol=1e-6, rtol=0)
    padded.sum().backward()
    used = encoder.embedding.weight.grad.abs().sum(dim=1)
    assert (used[[1, 2, 4]] > 0).all()  # each word's embedding is trained, "a" (id 1) too


def test_the_quick_and_full_studies_train_60_and_400_steps_per_loss(monkeypatch):
    seen = []

    def stop_at_the_bar(iterable, total, desc):
        seen.append((total, desc))
        raise _StopError

    monkeypatch.setattr(study, "progress", stop_at_the_bar)
    for options in ({}, {"quick": True}, {"quick": True, "steps": 7}):
        with pytest.raises(_StopError):
            study.caption_miniature(**options)
    assert seen == [(400, "captions miniature, SmoothAP"), (60, "captions miniature, SmoothAP"),
                    (7, "captions miniature, SmoothAP")]  # fmt: skip


class _StopError(Exception):
    """Ends a study at its first progress bar."""


def _batch(seed=0, images=3, per_image=5):
    generator = torch.Generator().manual_seed(seed)
    scores = torch.rand(images, images * per_image, generator=generator, dtype=torch.float64)
    positives = torch.eye(images, dtype=torch.bool).repeat_interleave(per_image, dim=1)
    return 2 * scores - 1, positives


def _smoothap_loop(scores, positives, tau):
    rows, cols = scores.tolist(), positives.tolist()
    forward = [
        smooth_ap_loops.smooth_ap_one_query(r, p, tau) for r, p in zip(rows, cols, strict=True)
    ]
    backward = [smooth_ap_loops.smooth_ap_one_query(r, p, tau) for r, p in
                zip(scores.T.tolist(), positives.T.tolist(), strict=True)]  # fmt: skip
    return 2.0 - math.fsum(forward) / len(forward) - math.fsum(backward) / len(backward)


@pytest.mark.parametrize("tau", [0.01, 0.3])
def test_smoothap_both_ways_matches_a_loop(tau):
    scores, positives = _batch()
    found = study.smoothap_both_directions(scores, positives, tau).item()
    assert found == pytest.approx(_smoothap_loop(scores, positives, tau), rel=1e-12)


def test_the_default_smoothap_temperature_is_the_papers():
    scores, positives = _batch(seed=1)
    found = study.smoothap_both_directions(scores, positives).item()
    assert found == pytest.approx(_smoothap_loop(scores, positives, 0.01), rel=1e-12)


def _loop(name, scores, positives, option):
    return score_losses_loops.score_loss(name, scores.tolist(), positives.tolist(), option)[0]


@pytest.mark.parametrize("seed", [0, 1])
def test_the_triplet_and_info_nce_losses_match_loops_at_their_defaults(seed):
    scores, positives = _batch(seed)
    # VSE++ (Faghri et al. 2018) margin 0.2; NT-Xent at temperature 0.1, both directions
    assert study.max_violation_triplet(scores, positives).item() == pytest.approx(
        _loop("triplet", scores, positives, 0.2), rel=1e-12)  # fmt: skip
    assert study.nt_xent(scores, positives).item() == pytest.approx(
        _loop("nt_xent", scores, positives, 0.1), rel=1e-12)  # fmt: skip
    assert study.max_violation_triplet(scores, positives, margin=0.5).item() == pytest.approx(
        _loop("triplet", scores, positives, 0.5), rel=1e-12)  # fmt: skip


def test_info_nce_averages_over_every_positive_of_a_query_both_ways():
    generator = torch.Generator().manual_seed(4)
    scores = torch.rand(4, 6, generator=generator, dtype=torch.float64) * 2 - 1
    positives = torch.tensor([[1, 1, 0, 0, 0, 0], [0, 0, 1, 0, 0, 1], [1, 0, 0, 1, 0, 0],
                              [0, 0, 0, 0, 1, 0]], dtype=torch.bool)  # fmt: skip
    # a caption (column 0) with two positive images, an image with two positive captions
    assert study.nt_xent(scores, positives).item() == pytest.approx(
        _loop("nt_xent", scores, positives, 0.1), rel=1e-12)  # fmt: skip


def test_a_step_count_that_is_not_a_positive_integer_is_refused_before_training():
    with pytest.raises(GradlabError, match=r"^steps must be a positive integer; got 0$"):
        study.caption_miniature(steps=0)


REFERENCE_LOSSES = {  # name -> the paper's loss as a loop, at the study's settings
    "SmoothAP": lambda s, p: _smoothap_loop(s, p, 0.01),
    "VSE++ max-violation": lambda s, p: _loop("triplet", s, p, 0.2),
    "NT-Xent": lambda s, p: _loop("nt_xent", s, p, 0.1),
}


def _by_hand():
    """The docstring's protocol: every 5th image held out; one initialization (torch seed 0);
    batches of one training image per digit (generator seed 1); Adam at 3e-3."""
    digits = load_digits_split(seen_classes=tuple(range(10)))
    images, labels = digits.train_images, digits.train_labels
    held = torch.arange(len(labels)) % 5 == 0
    tokens, vocabulary = study.caption_tokens()
    torch.manual_seed(0)
    initial = study.ImageEncoder(images[~held]), study.CaptionEncoder(len(vocabulary))
    generator = torch.Generator().manual_seed(1)
    train = torch.nonzero(~held).flatten()
    members = [torch.nonzero(labels[~held] == d).flatten() for d in range(10)]
    batches = [train[torch.stack([m[torch.randint(len(m), (1,), generator=generator)][0]
                                  for m in members])] for _ in range(STEPS)]  # fmt: skip
    positives = torch.eye(10, dtype=torch.bool).repeat_interleave(5, dim=1)
    captions = tokens.reshape(50, -1)
    first = (initial[0](images[batches[0]]) @ initial[1](captions).T).detach().double()
    counts = [gradient_counts(first, positives, 0.01),
              gradient_counts(first.T.contiguous(), positives.T.contiguous(), 0.01)]  # fmt: skip
    out = {"initial": {n: loss(first, positives) for n, loss in REFERENCE_LOSSES.items()},
           "counts": counts}  # fmt: skip
    image_encoder, caption_encoder = copy.deepcopy(initial[0]), copy.deepcopy(initial[1])
    parameters = [*image_encoder.parameters(), *caption_encoder.parameters()]
    optimizer = torch.optim.Adam(parameters, lr=3e-3)
    for batch in batches:  # NT-Xent: 5 positive captions per image, 1 positive image per caption
        logits = image_encoder(images[batch]) @ caption_encoder(captions).T / 0.1
        image_to_caption = -(logits.log_softmax(dim=1) * positives).sum(dim=1) / 5
        caption_to_image = -(logits.T.log_softmax(dim=1) * positives.T).sum(dim=1)
        loss = image_to_caption.mean() + caption_to_image.mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        scores = (image_encoder(images[held]) @ caption_encoder(captions).T).double()
    relevant = labels[held].unsqueeze(1) == torch.arange(10).repeat_interleave(5).unsqueeze(0)
    out["recall"] = {f"i2t_recall@{k}": recall_at_k(scores, relevant, k) for k in (1, 5, 10)}
    out["recall"] |= {f"t2i_recall@{k}": recall_at_k(scores.T, relevant.T, k) for k in (1, 5, 10)}
    return out


def _each_loss_starts_from_the_same_network_on_the_same_batch(run, by_hand):
    assert run["steps"] == STEPS and list(run["losses"]) == list(REFERENCE_LOSSES)
    for name, result in run["losses"].items():
        assert len(result["loss_history"]) == STEPS
        assert result["loss_history"][0] == pytest.approx(by_hand["initial"][name], rel=1e-4), name
        assert result["loss_history"][-1] != result["loss_history"][0]


def _smoothaps_gradient_counts_are_read_from_the_first_step_in_both_directions(run, by_hand):
    forward, backward = by_hand["counts"]
    for result in run["losses"].values():
        counts = result["gradient_counts"]
        assert [c["step"] for c in counts] == [0]  # then every 10th step
        assert counts[0] == pytest.approx(_step_zero_counts(forward, backward))
    assert forward.per_query.double().mean() != backward.per_query.double().mean()


def _recall_is_read_on_the_held_out_images_against_each_distinct_caption(run, by_hand):
    recall = run["losses"]["NT-Xent"]["recall"]
    assert recall == pytest.approx(by_hand["recall"], abs=1e-9)


@pytest.mark.slow
def test_a_short_run_is_the_protocol_run_by_hand():
    """Each check reads the same run, computed once in this one test (a mutation tool credits a
    function to the test that first calls it, so a run shared by several tests would be
    credited to the first alone)."""
    run, by_hand = study.caption_miniature(steps=STEPS), _by_hand()
    _each_loss_starts_from_the_same_network_on_the_same_batch(run, by_hand)
    _smoothaps_gradient_counts_are_read_from_the_first_step_in_both_directions(run, by_hand)
    _recall_is_read_on_the_held_out_images_against_each_distinct_caption(run, by_hand)


def _first_batch_scores():
    """The scores of the first training batch under the shared initialization, as the
    docstring's protocol makes them (see ``_by_hand``)."""
    digits = load_digits_split(seen_classes=tuple(range(10)))
    images, labels = digits.train_images, digits.train_labels
    held = torch.arange(len(labels)) % 5 == 0
    tokens, vocabulary = study.caption_tokens()
    torch.manual_seed(0)
    image_encoder = study.ImageEncoder(images[~held])
    caption_encoder = study.CaptionEncoder(len(vocabulary))
    generator = torch.Generator().manual_seed(1)
    members = [torch.nonzero(labels[~held] == d).flatten() for d in range(10)]
    first = torch.stack([m[torch.randint(len(m), (1,), generator=generator)][0] for m in members])
    batch = torch.nonzero(~held).flatten()[first]
    with torch.no_grad():
        return (image_encoder(images[batch]) @ caption_encoder(tokens.reshape(50, -1)).T).double()


@pytest.mark.slow
def test_the_gradient_counts_use_the_temperature_asked_every_tenth_step():
    # at tau = 1e-4 few entries are inside SmoothAP's window: some image queries carry no
    # gradient at step 0 (a share neither 0 nor 1), and most caption queries
    tau = 1e-4
    run = study.caption_miniature(steps=12, tau=tau)
    assert set(run) == {"steps", "batch", "losses"} and run["steps"] == 12
    scores = _first_batch_scores()
    positives = torch.eye(10, dtype=torch.bool).repeat_interleave(5, dim=1)
    forward = gradient_counts(scores, positives, tau)
    backward = gradient_counts(scores.T.contiguous(), positives.T.contiguous(), tau)
    assert 0 < forward.queries_without_gradient < 10
    for name, result in run["losses"].items():
        counts = result["gradient_counts"]
        assert [c["step"] for c in counts] == [0, 10], name  # steps 0..11, every 10th
        assert counts[0] == pytest.approx(_step_zero_counts(forward, backward)), name


class _StandInDevice:
    """Tensor.to and Module.to that keep what is sent to ``cuda:1`` on the CPU and say so."""

    def __init__(self, monkeypatch):
        self.tensors, self.modules = [], []
        tensor_to, module_to = torch.Tensor.to, torch.nn.Module.to

        def target(args, kwargs):
            device = kwargs.get("device", args[0] if args else None)
            return str(device) if isinstance(device, (str, torch.device)) else None

        def to_tensor(tensor, *args, **kwargs):
            if target(args, kwargs) == "cuda:1":
                self.tensors.append((tuple(tensor.shape), tensor.dtype))
                return tensor
            return tensor_to(tensor, *args, **kwargs)

        def to_module(module, *args, **kwargs):
            if target(args, kwargs) == "cuda:1":
                self.modules.append(type(module).__name__)
                return module
            return module_to(module, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, "to", to_tensor)
        monkeypatch.setattr(torch.nn.Module, "to", to_module)


@pytest.mark.slow
def test_the_networks_and_every_tensor_they_read_go_to_the_device_asked(monkeypatch):
    from collections import Counter

    device = _StandInDevice(monkeypatch)
    steps = 2
    run = study.caption_miniature(steps=steps, device="cuda:1")
    digits = load_digits_split(seen_classes=tuple(range(10)))
    count, pixels = digits.train_images.shape
    held_out = len(range(0, count, 5))  # every 5th image
    trained = len(study.LOSSES) * steps  # batches, over the three losses
    assert device.modules == ["ImageEncoder", "CaptionEncoder"]
    assert Counter(device.tensors) == {
        ((held_out, pixels), torch.float32): 1,  # the held-out images
        ((50, 7), torch.int64): 1 + trained,  # the caption gallery, then each batch's captions
        ((10, 50), torch.bool): 1,  # which captions are each image's
        ((10, pixels), torch.float32): trained,  # each batch's images
    }
    # what the results say a batch holds: the images and captions per image fed each step
    shown = re.fullmatch(r"(\d+) images of distinct digits x (\d+) captions", run["batch"])
    assert shown and (int(shown[1]), int(shown[2])) == (10, 50 // 10)
