"""The anatomy study (Bleeker & de Rijke 2022, appendix B) in miniature: checkpoints after 1 and
2 training steps instead of 10 and 30. Which batch it scores, each loss's dL/dS per direction
and the per-query records are checked against float64 loops (tests/reference), the draws
against the seed, the training images against the held-out ones."""

from __future__ import annotations

import copy
import math

import pytest
import torch

import gradlab.experiments.gradient_anatomy as study
from gradlab.data import load_digits_split
from gradlab.functional.gradient_anatomy import (
    DEFAULT_ABSOLUTE_THRESHOLD,
    DEFAULT_RELATIVE_THRESHOLD,
)
from gradlab.jsonio import dumps
from tests.reference.anatomy_loops import anatomy_one_query
from tests.reference.score_losses_loops import score_loss
from tests.reference.smooth_ap_loops import cosine, smooth_ap_one_query_gradient

MINIATURE = (1, 2)


def _transpose(rows):
    return [list(column) for column in zip(*rows, strict=True)]


def _reference_grad(name, scores, positives):
    """dL/dS of one direction, its queries as the rows (images for i2t, captions for t2i)."""
    if name == "SmoothAP":
        tau = study.SETTINGS["smooth_ap_tau"]
        queries = [q for q in range(len(scores)) if any(positives[q])]
        return [
            [-g / len(queries) for g in smooth_ap_one_query_gradient(row, flags, tau)]
            for row, flags in zip(scores, positives, strict=True)
        ]
    option = study.SETTINGS["margin" if name.startswith("VSE++") else "temperature"]
    kind = "triplet" if name.startswith("VSE++") else "nt_xent"
    _, grad = score_loss(kind, scores, positives, option, direction="i2t")
    return grad


def _mass_share_by_rank(grad, scores, positives):
    shares = []
    for row, values, flags in zip(grad, scores, positives, strict=True):
        negatives = sorted(
            (c for c in range(len(row)) if not flags[c]), key=lambda c: (-values[c], c)
        )
        total = sum(abs(row[c]) for c in negatives)
        shares.append([abs(row[c]) / total if total > 0 else math.nan for c in negatives])
    means = []
    for rank in range(len(shares[0])):
        finite = [s[rank] for s in shares if not math.isnan(s[rank])]
        means.append(sum(finite) / len(finite) if finite else math.nan)
    return means


@pytest.fixture
def recorded(monkeypatch):
    """Run measure() with checkpoints of 1 and 2 steps, recording what it asked for, the models
    at each checkpoint, every image the encoder saw, and every anatomy call."""
    seen = {"inputs": [], "anatomy": [], "threads": []}

    class RecordingMLP(study.EmbeddingMLP):
        def forward(self, images):
            seen["inputs"].append(images.clone())
            return super().forward(images)

    real_train, real_anatomy = study.train_dual_encoder, study.gradient_anatomy

    def train(checkpoints, seed, *rest):
        seen.update(asked=tuple(checkpoints), checkpoints=[])
        for step, encoder, captions, held_out, losses in real_train(MINIATURE, seed, *rest):
            seen["threads"].append(torch.get_num_threads())
            seen["checkpoints"].append(
                {
                    "step": step,
                    "encoder": copy.deepcopy(encoder),
                    "captions": copy.deepcopy(captions),
                    "held_out": held_out,
                    "losses": list(losses),
                    "forward": len(seen["inputs"]),
                }
            )
            yield step, encoder, captions, held_out, losses

    def anatomy(grad, scores, positives, *rest):
        seen["anatomy"].append((grad.tolist(), scores.tolist(), positives.tolist()))
        return real_anatomy(grad, scores, positives, *rest)

    monkeypatch.setattr(study, "EmbeddingMLP", RecordingMLP)
    monkeypatch.setattr(study, "train_dual_encoder", train)
    monkeypatch.setattr(study, "gradient_anatomy", anatomy)
    return seen


@pytest.mark.slow
def test_the_study_scores_one_held_out_batch_and_reads_each_direction_s_own_gradient(recorded):
    seed = 2
    threads = torch.get_num_threads()
    result = study.measure(quick=True, seed=seed)
    seen = recorded
    assert torch.get_num_threads() == threads and seen["threads"] == [1, 1]
    assert len(seen["asked"]) == 2 and seen["asked"][-1] < 60  # quick: short of the full 60
    settings = result["settings"]
    assert settings["training_loss"] == "NT-Xent (both directions)"
    assert result["batch"] == "10 held-out images of distinct digits x their 50 captions"
    assert settings["seed"] == seed and settings["smooth_ap_tau"] == study.SETTINGS["smooth_ap_tau"]
    assert settings["absolute_threshold"] == DEFAULT_ABSOLUTE_THRESHOLD
    assert settings["relative_threshold"] == DEFAULT_RELATIVE_THRESHOLD
    # the batch: per digit one held-out image (every fifth of the ten classes' training images),
    # drawn with the seed's own generator
    digits = load_digits_split(seen_classes=tuple(range(10)))
    held_out = torch.arange(len(digits.train_labels)) % 5 == 0
    images, labels = digits.train_images[held_out], digits.train_labels[held_out]
    generator = torch.Generator().manual_seed(seed + 2)
    chosen = []
    for digit in range(10):
        members = torch.nonzero(labels == digit).flatten()
        chosen.append(int(members[torch.randint(len(members), (1,), generator=generator)]))
    batch = images[chosen]
    # training batches: one image per digit among the other four fifths, from seed + 1
    train_images, train_labels = digits.train_images[~held_out], digits.train_labels[~held_out]
    generator = torch.Generator().manual_seed(seed + 1)
    training = []
    for _ in range(max(MINIATURE)):
        picks = []
        for digit in range(10):
            members = torch.nonzero(train_labels == digit).flatten()
            picks.append(int(members[torch.randint(len(members), (1,), generator=generator)]))
        training.append(train_images[picks])
    forwards = [c["forward"] for c in seen["checkpoints"]]
    assert forwards == [1, 3]  # one training step, its checkpoint, one more step, its checkpoint
    assert len(seen["inputs"]) == 4
    for index, inputs in enumerate(seen["inputs"]):
        if index in forwards:
            assert torch.equal(inputs, batch)
        else:
            assert torch.equal(inputs, training.pop(0))
    positives = [[c // 5 == labels[i] for c in range(50)] for i in chosen]
    assert len(result["checkpoints"]) == 2
    calls = iter(seen["anatomy"])
    for checkpoint, state in zip(result["checkpoints"], seen["checkpoints"], strict=True):
        assert checkpoint["steps"] == state["step"]
        assert checkpoint["first_loss"] == state["losses"][0]
        assert checkpoint["last_loss"] == state["losses"][-1]
        with torch.no_grad():
            embedded = state["encoder"](batch).double().tolist()
            table = state["captions"].table.weight.double().tolist()
        scores = [[cosine(e, t) for t in table] for e in embedded]
        assert list(checkpoint["losses"]) == list(study.LOSSES)
        for name, directions in checkpoint["losses"].items():
            assert list(directions) == ["i2t", "t2i"]
            for direction, record in directions.items():
                grad, got_scores, got_positives = next(calls)
                rows, flags = (
                    (scores, positives)
                    if direction == "i2t"
                    else (_transpose(scores), _transpose(positives))
                )
                assert got_positives == flags
                assert all(
                    math.isclose(a, b, abs_tol=1e-6)
                    for got, want in zip(got_scores, rows, strict=True)
                    for a, b in zip(got, want, strict=True)
                )
                want = _reference_grad(name, got_scores, got_positives)  # scores: checked above
                assert all(
                    math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)
                    for got, ref in zip(grad, want, strict=True)
                    for a, b in zip(got, ref, strict=True)
                ), (name, direction)
                loops = [
                    anatomy_one_query(
                        g,
                        s,
                        f,
                        [True] * len(g),
                        DEFAULT_ABSOLUTE_THRESHOLD,
                        DEFAULT_RELATIVE_THRESHOLD,
                    )
                    for g, s, f in zip(grad, got_scores, got_positives, strict=True)
                ]
                assert record["queries"] == len(rows)
                assert record["negatives_per_query"] == loops[0]["num_negatives"]
                assert record["positives_per_query"] == loops[0]["num_positives"]
                for key, loop_key in (
                    ("active_negatives", "active_negatives"),
                    ("active_positives", "active_positives"),
                ):
                    assert record[key] == [q[loop_key] for q in loops], (name, direction, key)
                assert record["queries_without_gradient"] == sum(q["without"] for q in loops)
                assert record["largest_abs_grad"] == max(abs(v) for row in grad for v in row)
                for key, loop_key in (
                    ("hardest_1pct_share", "share_1"),
                    ("hardest_10pct_share", "share_10"),
                    ("active_negative_rank_max", "rank_max"),
                ):
                    for a, b in zip(record[key], (q[loop_key] for q in loops), strict=True):
                        assert (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9)
                shares = _mass_share_by_rank(grad, got_scores, got_positives)
                assert len(record["mass_share_by_rank"]) == len(shares)
                for a, b in zip(record["mass_share_by_rank"], shares, strict=True):
                    assert (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9)


@pytest.mark.slow
def test_the_full_study_asks_for_the_documented_checkpoints_and_the_seed_changes_the_draws(
    recorded,
):
    """The module says: anatomy at 60 and 400 steps of one run. Another seed, other numbers."""
    full = study.measure(quick=False, seed=0)
    assert recorded["asked"] == (60, 400)
    other = study.measure(quick=False, seed=1)
    assert other["settings"]["seed"] == 1
    assert full["checkpoints"][0]["first_loss"] != other["checkpoints"][0]["first_loss"]
    recorded["asked"] = None
    # the full study and seed 0 unless asked; a rerun: the same JSON
    assert dumps(study.measure()) == dumps(full)
    assert recorded["asked"] == (60, 400)


def test_tied_negatives_rank_by_index_and_a_query_without_negative_gradient_is_left_out(
    monkeypatch,
):
    """Stand-in encoders give exact scores: every negative 0 (all tied), the positives 0.1 for
    digits 0-4 (VSE++ violated: all of its negative gradient goes to one tied negative) and 1
    for digits 5-9 (no violation: no negative gradient, so the query has no mass to share).
    Ties are ranked by index and the queries without negative gradient are left out of the
    mean share at each rank, as the float64 loop does."""
    dims = 20
    basis = torch.eye(dims)
    images, labels = basis[:10], torch.arange(10)  # the encoder passes each image on as is
    table = []
    for caption in range(50):
        digit = caption // 5
        score = 0.1 if digit < 5 else 1.0
        table.append(score * basis[digit] + math.sqrt(1 - score**2) * basis[10 + digit])
    table = torch.stack(table)

    def stand_in(checkpoints, seed, *rest):
        yield 1, torch.nn.Identity(), lambda ids: table[ids], (images, labels), [1.0]

    seen = []

    def anatomy(grad, scores, positives, *rest):
        seen.append((grad.tolist(), scores.tolist(), positives.tolist()))
        return real_anatomy(grad, scores, positives, *rest)

    real_anatomy = study.gradient_anatomy
    monkeypatch.setattr(study, "train_dual_encoder", stand_in)
    monkeypatch.setattr(study, "gradient_anatomy", anatomy)
    (checkpoint,) = study.measure(quick=True)["checkpoints"]
    calls = iter(seen)
    for name, directions in checkpoint["losses"].items():
        for direction, record in directions.items():
            grad, scores, positives = next(calls)
            assert {v for row, flags in zip(scores, positives, strict=True)
                    for v, f in zip(row, flags, strict=True) if not f} == {0.0}  # fmt: skip
            shares = _mass_share_by_rank(grad, scores, positives)
            assert len(record["mass_share_by_rank"]) == len(shares)
            for a, b in zip(record["mass_share_by_rank"], shares, strict=True):
                assert (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9), (
                    name,
                    direction,
                )
    vse = checkpoint["losses"]["VSE++ max-violation"]["i2t"]["mass_share_by_rank"]
    assert vse[0] == 1.0 and vse[1:] == [0.0] * (len(vse) - 1)  # the violated half, by index


def _nt_xent_by_hand(scores, positives, temperature):
    """NT-Xent of both directions (SimCLR's Eq. 1 with several positives), in torch."""
    logits = scores / temperature
    image_to_caption = -(logits.log_softmax(dim=1) * positives).sum(dim=1) / positives.sum(dim=1)
    caption_to_image = -(logits.T.log_softmax(dim=1) * positives.T).sum(dim=1)
    return image_to_caption.mean() + caption_to_image.mean()


@pytest.mark.slow  # seconds: the digits loaded and two steps trained twice
def test_train_dual_encoder_is_adam_on_nt_xent_of_unit_embeddings_from_seed_0():
    """The module's protocol by hand, two steps: torch seed 0 draws the image MLP then the
    caption table (32 dimensions), training batches from seed 1, both embeddings on the unit
    sphere, NT-Xent at the report's temperature, Adam at 3e-3 (the captions study's rate)."""
    digits = load_digits_split(seen_classes=tuple(range(10)))
    held_out = torch.arange(len(digits.train_labels)) % 5 == 0
    images, labels = digits.train_images[~held_out], digits.train_labels[~held_out]
    torch.manual_seed(0)
    encoder, captions = study.EmbeddingMLP(64, 32), study.CaptionTable(32)
    optimizer = torch.optim.Adam([*encoder.parameters(), *captions.parameters()], lr=3e-3)
    generator = torch.Generator().manual_seed(1)
    ids = torch.arange(50)
    losses = []
    for _ in range(2):
        picks = []
        for digit in range(10):
            members = torch.nonzero(labels == digit).flatten()
            picks.append(int(members[torch.randint(len(members), (1,), generator=generator)]))
        image_rows = encoder(images[picks])
        unit_images = image_rows / image_rows.norm(dim=1, keepdim=True)
        caption_rows = captions.table(ids)
        unit_captions = caption_rows / caption_rows.norm(dim=1, keepdim=True)
        positives = labels[picks].unsqueeze(1) == (ids // 5).unsqueeze(0)
        loss = _nt_xent_by_hand(unit_images @ unit_captions.T, positives, 0.1)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    *_, (step, got_encoder, got_captions, held, got_losses) = study.train_dual_encoder((1, 2))
    assert step == 2 and got_losses == pytest.approx(losses, rel=1e-5)
    assert torch.equal(held[0], digits.train_images[held_out])
    for got, want in ((got_encoder, encoder), (got_captions, captions)):
        for key, value in want.state_dict().items():
            assert torch.allclose(got.state_dict()[key], value, atol=1e-6), key
