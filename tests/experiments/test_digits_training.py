"""The report's training section on a miniature of the digits (100 seen-class images, 40 unseen):
its evaluations against float64 loops, the split it trains on, the run it logs, the seed it
keeps. The figures' own drawing is plotting/monitor's business: here ``plot_run`` is recorded."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

import gradlab.experiments.digits_training as study
from gradlab.data import DigitsSplit, load_digits_split
from gradlab.losses import SmoothAPLoss
from gradlab.models import EmbeddingMLP
from tests.reference.smooth_ap_loops import cosine

KS = (1, 2, 4, 8)


def _retrieval_loops(embeddings: torch.Tensor, labels: torch.Tensor) -> dict:
    """Each item queries all the others by cosine: Recall@K over queries with a positive, mAP
    (AP = mean precision at each positive's rank) over the same queries."""
    rows, labels = embeddings.double().tolist(), labels.tolist()
    recalls = {k: [] for k in KS}
    aps = []
    for q, query in enumerate(rows):
        others = [c for c in range(len(rows)) if c != q]
        order = sorted(others, key=lambda c: -cosine(query, rows[c]))
        relevant = [labels[c] == labels[q] for c in order]
        if not any(relevant):
            continue
        for k in KS:
            recalls[k].append(float(any(relevant[:k])))
        hits, precisions = 0, []
        for rank, flag in enumerate(relevant, start=1):
            if flag:
                hits += 1
                precisions.append(hits / rank)
        aps.append(sum(precisions) / len(precisions))
    return {
        **{f"recall@{k}": sum(v) / len(v) for k, v in recalls.items()},
        "mAP": sum(aps) / len(aps),
    }


def _close(got: dict, want: dict) -> bool:
    return got.keys() == want.keys() and all(
        math.isclose(got[k], want[k], abs_tol=1e-9) for k in want
    )


@pytest.fixture
def miniature(monkeypatch):
    full = load_digits_split()
    small = DigitsSplit(
        full.train_images[:100],
        full.train_labels[:100],
        full.test_images[:40],
        full.test_labels[:40],
    )
    monkeypatch.setattr(study, "load_digits_split", lambda: small)
    seen = {}
    real_train = study.train_embedding

    def recording_train(model, images, labels, loss_fn, **options):
        batches = seen.setdefault("batches", [])

        def recording_loss(embeddings, batch_labels):
            batches.append(batch_labels.tolist())
            return loss_fn(embeddings, batch_labels)

        seen.update(
            images=images.clone(),
            labels=labels.clone(),
            loss_fn=loss_fn,
            untrained=EmbeddingMLP(),
            options=options,
        )
        seen["untrained"].load_state_dict(model.state_dict())
        losses = real_train(model, images, labels, recording_loss, **options)
        seen.update(model=model, losses=list(losses))
        return losses

    def recording_plot(run_dir, out, overview=True):
        seen.update(plot_run=(Path(run_dir), Path(out)), overview=overview)
        return [Path(out) / "a.png", Path(out) / "b.png"]

    class MovedMLP(EmbeddingMLP):
        def to(self, *args, **kwargs):
            seen.setdefault("moved_to", []).append(torch.device(*args, **kwargs))
            return super().to(*args, **kwargs)

    monkeypatch.setattr(study, "train_embedding", recording_train)
    monkeypatch.setattr(study, "plot_run", recording_plot)
    monkeypatch.setattr(study, "EmbeddingMLP", MovedMLP)
    return small, seen


@pytest.mark.slow
def test_the_section_trains_on_four_fifths_and_evaluates_what_it_says(miniature, tmp_path):
    small, seen = miniature
    result = study.digits_training(tmp_path, quick=True, tau=0.05)
    assert result["seed"] == study.SEED  # the one seed the finding names
    # train on the images whose index is not a multiple of 5; the others are held out
    index = list(range(len(small.train_labels)))
    trained = [i for i in index if i % 5 != 0]
    held_out = [i for i in index if i % 5 == 0]
    assert torch.equal(seen["images"], small.train_images[trained])
    assert torch.equal(seen["labels"], small.train_labels[trained])
    assert not set(map(tuple, seen["images"].tolist())) & set(
        map(tuple, small.train_images[held_out].tolist())
    )  # no image both trained and held out
    # the evaluations are those of the untrained and the trained model, on both sets
    for model, when in ((seen["untrained"], "before"), (seen["model"], "after")):
        with torch.no_grad():
            unseen = _retrieval_loops(model.eval()(small.test_images), small.test_labels)
            kept = _retrieval_loops(
                model(small.train_images[held_out]), small.train_labels[held_out]
            )
        assert _close(result[f"unseen_classes_{when}"], unseen), when
        assert _close(result[f"seen_classes_held_out_{when}"], kept), when
    assert result["unseen_classes_after"] != result["unseen_classes_before"]  # it trained
    assert result["steps"] == len(seen["losses"]) and result["final_loss"] == seen["losses"][-1]
    assert result["epochs"] == 4 and seen["options"]["epochs"] == 4
    # the loss it trains is SmoothAP at the tau asked for, with the Monitor watching it
    embeddings = torch.randn(12, 5, generator=torch.Generator().manual_seed(1))
    labels = torch.arange(12) % 3
    assert torch.allclose(
        seen["loss_fn"](embeddings, labels), SmoothAPLoss(0.05)(embeddings, labels)
    )
    # the run log and the figures: under out, in the folders the report links
    run_dir = tmp_path / "runs" / "digits_smoothap"
    assert result["run_dir"] == str(Path("runs") / "digits_smoothap")
    assert seen["plot_run"] == (run_dir, tmp_path / "figures" / "training")
    assert seen["overview"] is False  # the report never shows it: not drawn
    assert result["figures"] == [
        str(Path("figures") / "training" / name) for name in ("a.png", "b.png")
    ]
    logged = [
        json.loads(line)
        for path in sorted(run_dir.rglob("*.jsonl"))
        for line in path.read_text().splitlines()
        if line.strip()
    ]
    # the Monitor's log: the run's settings, the full preset, every other step, the step's loss
    header, *records = logged
    config = header["header"]["config"]
    assert (config["tau"], config["preset"], config["epochs"]) == (0.05, "full", 4)
    assert config["tau_from"] == "argument"  # the study's tau, given to the Monitor
    steps = [r["step"] for r in records]  # and the last step, logged when the run closes
    assert [s for s in steps if s % 2 == 0] == list(range(0, result["steps"], 2))
    assert all(s % 2 == 0 or s == result["steps"] - 1 for s in steps)
    assert records[0]["loss"] == pytest.approx(seen["losses"][0], rel=1e-6)
    # class-balanced batches: every seen class, 8 images of each (the report's section says
    # "class-balanced batches of 5 classes x 8")
    for batch in seen["batches"]:
        counts = [batch.count(c) for c in sorted(set(batch))]
        assert sorted(set(batch)) == sorted(set(small.train_labels.tolist()))
        assert counts == [8] * 5
    assert seen["options"]["progress"] == "digits SmoothAP training"
    # the untrained model is the report's: EmbeddingMLP drawn from seed 0
    torch.manual_seed(0)
    reference = EmbeddingMLP()
    assert all(
        torch.equal(v, seen["untrained"].state_dict()[k]) for k, v in reference.state_dict().items()
    )
    # the report replaces its output: a second run into the same folder replaces the log
    seen["moved_to"] = []
    study.digits_training(tmp_path, quick=True, tau=0.05, device="cpu")
    assert seen["moved_to"] == [torch.device("cpu")]  # the model goes where it is asked


@pytest.mark.slow
def test_a_rerun_reproduces_the_numbers_and_the_full_run_trains_longer(miniature, tmp_path):
    _, seen = miniature
    first = study.digits_training(tmp_path / "a", quick=True)
    first_model = {k: v.clone() for k, v in seen["model"].state_dict().items()}
    again = study.digits_training(tmp_path / "b", quick=True)
    assert first == {**again, "figures": first["figures"]}
    assert all(torch.equal(v, seen["model"].state_dict()[k]) for k, v in first_model.items())
    embeddings = torch.randn(12, 5, generator=torch.Generator().manual_seed(2))
    labels = torch.arange(12) % 3  # the default tau: Smooth-AP's 0.01 (Brown et al. 2020)
    assert torch.allclose(
        seen["loss_fn"](embeddings, labels), SmoothAPLoss(0.01)(embeddings, labels)
    )
    full = study.digits_training(tmp_path / "c")  # the full run unless asked for the quick one
    assert full["epochs"] == seen["options"]["epochs"] > first["epochs"]
    assert full["steps"] == len(seen["losses"]) > first["steps"]


@pytest.mark.slow
def test_the_training_is_stable_no_later_loss_climbs_back_to_the_first(miniature, tmp_path):
    """Adam at a small learning rate on the digits: the SmoothAP loss falls from its first
    step and no later step's loss climbs back to it (a step too large overshoots and the loss
    jumps above where it started)."""
    _, seen = miniature
    study.digits_training(tmp_path, quick=True)
    first, *rest = seen["losses"]
    assert rest and max(rest) < first
