"""An image-caption miniature of Bleeker & de Rijke's setting (2022, app. B), 10 classes.

A VSE++-style dual encoder on the digits: an image encoder made of a frozen backbone (PCA of
the training images, fitted once and not trained) and a trained linear projection; a caption
encoder with word embeddings trained from scratch and a unidirectional GRU whose last state is
projected; both outputs on the unit sphere. Each image gets five templated captions naming its
digit. A batch holds 10 images of distinct digits and their 50 captions, so, as in the paper,
an image query has 5 positive captions and a caption query 1 positive image.

Three losses are trained from the same initialization: SmoothAP (both directions), VSE++'s
max-violation triplet loss, and NT-Xent (InfoNCE, both directions). Evaluation: Recall@1/5/10 on
held-out images and their captions in both directions (relevance: the same digit), and, for
SmoothAP, the gradient counts of image-to-caption and caption-to-image queries over training.
The caption gallery holds the 50 distinct captions once each.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from gradlab.data import load_digits_split
from gradlab.functional import gradient_counts, recall_at_k, smooth_ap
from gradlab.progress import progress
from gradlab.validation import check_positive_int

WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
TEMPLATES = [
    "a handwritten {}",
    "the digit {}",
    "a small picture of the number {}",
    "{} written by hand",
    "an image that shows a {}",
]


def caption_tokens() -> tuple[torch.Tensor, dict[str, int]]:
    """``[10, 5, L]`` token ids of the five captions of each digit (0 pads), and the vocabulary."""
    sentences = [[template.format(word).split() for template in TEMPLATES] for word in WORDS]
    vocabulary = {"<pad>": 0}
    for per_digit in sentences:
        for sentence in per_digit:
            for token in sentence:
                vocabulary.setdefault(token, len(vocabulary))
    length = max(len(s) for per_digit in sentences for s in per_digit)
    tokens = torch.zeros(10, len(TEMPLATES), length, dtype=torch.long)
    for digit, per_digit in enumerate(sentences):
        for index, sentence in enumerate(per_digit):
            tokens[digit, index, : len(sentence)] = torch.tensor([vocabulary[t] for t in sentence])
    return tokens, vocabulary


class ImageEncoder(nn.Module):
    """Frozen PCA backbone (a buffer, never trained) and a trained projection."""

    def __init__(self, train_images: torch.Tensor, dims: int = 32, components: int = 24) -> None:
        super().__init__()
        mean = train_images.mean(dim=0)
        _, _, vectors = torch.linalg.svd(train_images - mean, full_matrices=False)
        self.register_buffer("mean", mean)
        self.register_buffer("basis", vectors[:components].T.contiguous())
        self.projection = nn.Linear(components, dims)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        features = (images - self.mean) @ self.basis
        return F.normalize(self.projection(features), dim=1)


class CaptionEncoder(nn.Module):
    """Word embeddings (from scratch) and a GRU; the last step's state is projected."""

    def __init__(self, vocabulary_size: int, dims: int = 32, hidden: int = 64) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocabulary_size, 32, padding_idx=0)
        self.gru = nn.GRU(32, hidden, batch_first=True)
        self.projection = nn.Linear(hidden, dims)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        lengths = (tokens != 0).sum(dim=1).clamp(min=1)
        packed = nn.utils.rnn.pack_padded_sequence(
            self.embedding(tokens), lengths.cpu(), batch_first=True, enforce_sorted=False
        )
        _, last = self.gru(packed)
        return F.normalize(self.projection(last[-1]), dim=1)


def smoothap_both_directions(
    scores: torch.Tensor, positives: torch.Tensor, tau: float = 0.01
) -> torch.Tensor:
    image_to_caption = smooth_ap(scores, positives, tau)
    caption_to_image = smooth_ap(scores.T.contiguous(), positives.T.contiguous(), tau)
    return 2.0 - image_to_caption.nanmean() - caption_to_image.nanmean()


def max_violation_triplet(
    scores: torch.Tensor, positives: torch.Tensor, margin: float = 0.2
) -> torch.Tensor:
    """VSE++ (Faghri et al.): hardest negative per positive pair, in both directions."""
    negatives_only = scores.masked_fill(positives, -torch.inf)
    hardest_caption = negatives_only.max(dim=1, keepdim=True).values  # per image
    hardest_image = negatives_only.max(dim=0, keepdim=True).values  # per caption
    cost = F.relu(margin - scores + hardest_caption) + F.relu(margin - scores + hardest_image)
    return (cost * positives).sum() / positives.sum()


def nt_xent(
    scores: torch.Tensor, positives: torch.Tensor, temperature: float = 0.1
) -> torch.Tensor:
    """InfoNCE both ways; an image's five captions are all positives (mean log-probability)."""
    logits = scores / temperature
    caption_to_image = -(logits.T.log_softmax(dim=1) * positives.T).sum(dim=1) / positives.T.sum(
        dim=1
    )
    image_to_caption = -(logits.log_softmax(dim=1) * positives).sum(dim=1) / positives.sum(dim=1)
    return caption_to_image.mean() + image_to_caption.mean()


LOSSES = {
    "SmoothAP": smoothap_both_directions,
    "VSE++ max-violation": max_violation_triplet,
    "NT-Xent": nt_xent,
}


def _batches(labels: torch.Tensor, steps: int, generator: torch.Generator):
    members = [torch.nonzero(labels == digit).flatten() for digit in range(10)]
    for _ in range(steps):
        yield torch.stack([m[torch.randint(len(m), (1,), generator=generator)][0] for m in members])


def _evaluate(
    images, image_labels, captions, caption_labels, image_encoder, caption_encoder
) -> dict:
    with torch.no_grad():
        scores = image_encoder(images) @ caption_encoder(captions).T
    relevant = image_labels.unsqueeze(1) == caption_labels.unsqueeze(0)
    i2t = recall_at_k(scores.double(), relevant, (1, 5, 10))
    t2i = recall_at_k(scores.T.contiguous().double(), relevant.T.contiguous(), (1, 5, 10))
    return {
        **{f"i2t_recall@{k}": v for k, v in i2t.items()},
        **{f"t2i_recall@{k}": v for k, v in t2i.items()},
    }


def _count_record(step: int, forward, backward) -> dict:
    return {
        "step": step,
        "i2t_share_without_gradient": forward.queries_without_gradient
        / forward.queries_with_positive,
        "t2i_share_without_gradient": backward.queries_without_gradient
        / backward.queries_with_positive,
        "i2t_mean_count": forward.per_query.double().mean().item(),
        "t2i_mean_count": backward.per_query.double().mean().item(),
    }


def caption_miniature(
    quick: bool = False, device: str = "cpu", tau: float = 0.01, steps: int | None = None
) -> dict:
    """Train the dual encoder with each loss; recall both ways and SmoothAP's gradient counts.

    Args:
        quick: 60 training steps per loss instead of 400.
        device: torch device.
        tau: SmoothAP's temperature, for its loss and for the gradient counts.
        steps: training steps per loss, overriding ``quick`` (tests use a few).

    Returns:
        ``{"steps", "batch", "losses": {name: {"loss_history": [per step], "gradient_counts":
        [every 10th step], "recall": {"i2t_recall@K", "t2i_recall@K"}}}}``.

    Raises:
        GradlabError: ``steps`` not a positive integer (before any training).
    """
    if steps is not None:
        check_positive_int("steps", steps)
    digits = load_digits_split(seen_classes=tuple(range(10)))
    images, labels = digits.train_images, digits.train_labels
    held_out = torch.arange(len(labels)) % 5 == 0
    tokens, vocabulary = caption_tokens()
    eval_images, eval_labels = images[held_out].to(device), labels[held_out]
    # The gallery holds each distinct caption once: repeating a digit's five templated captions
    # for every image would fill an image's top-K with tied copies of one caption.
    eval_captions = tokens.reshape(-1, tokens.shape[2]).to(device)
    eval_caption_labels = torch.arange(10).repeat_interleave(len(TEMPLATES))
    positives = torch.eye(10, dtype=torch.bool).repeat_interleave(len(TEMPLATES), dim=1).to(device)
    torch.manual_seed(0)
    initial = (
        ImageEncoder(images[~held_out]).to(device),
        CaptionEncoder(len(vocabulary)).to(device),
    )
    steps = steps if steps is not None else 60 if quick else 400
    results = {"steps": steps, "batch": "10 images of distinct digits x 5 captions", "losses": {}}
    for name, loss_fn in LOSSES.items():
        image_encoder, caption_encoder = (copy.deepcopy(m) for m in initial)
        parameters = list(image_encoder.parameters()) + list(caption_encoder.parameters())
        optimizer = torch.optim.Adam(parameters, lr=3e-3)
        generator = torch.Generator().manual_seed(1)
        history, counts = [], []
        train_indices = torch.nonzero(~held_out).flatten()
        bar = progress(
            _batches(labels[~held_out], steps, generator),
            total=steps,
            desc=f"captions miniature, {name}",
        )
        for step, batch in enumerate(bar):
            chosen = train_indices[batch]
            batch_images = images[chosen].to(device)
            batch_captions = tokens[labels[chosen]].reshape(-1, tokens.shape[2]).to(device)
            scores = image_encoder(batch_images) @ caption_encoder(batch_captions).T
            loss = loss_fn(scores, positives)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            history.append(loss.item())
            if step % 10 == 0:
                detached = scores.detach().double()
                forward = gradient_counts(detached, positives, tau)
                backward = gradient_counts(detached.T.contiguous(), positives.T.contiguous(), tau)
                counts.append(_count_record(step, forward, backward))
        results["losses"][name] = {
            "loss_history": history,
            "gradient_counts": counts,
            "recall": _evaluate(
                eval_images,
                eval_labels,
                eval_captions,
                eval_caption_labels,
                image_encoder,
                caption_encoder,
            ),
        }
    return results
