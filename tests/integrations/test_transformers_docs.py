"""The examples of docs/integrations_transformers.md run offline, as written.

Each block runs in a fresh folder with the names its text says the reader brings: a
SentenceTransformer and (anchor, positive) pairs, a tiny BERT with its pooling and token-id
pairs, and, for open_clip (which does not import on the development machine), the stand-in of
its ClipLoss from tests/helpers/open_clip_losses.py with a small two-tower model.
"""

import re
import types
from pathlib import Path

import pytest
import torch

from gradlab.monitor import read_jsonl

PAGE = Path(__file__).resolve().parents[2] / "docs" / "integrations_transformers.md"


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.DOTALL)


def run_block(index: int, namespace: dict, folder: Path, monkeypatch) -> dict:
    monkeypatch.chdir(folder)
    exec(compile(blocks()[index], f"{PAGE.name}[{index}]", "exec"), namespace)
    return namespace


def assert_same_steps_and_keys(folder: Path, trainer) -> None:
    """metrics.jsonl and the Trainer's history hold the same keys at the same steps."""
    _, records = read_jsonl(folder / "run" / "gradlab_logs" / "metrics.jsonl")
    entries = [entry for entry in trainer.state.log_history if "gradlab/loss" in entry]
    assert [r["step"] for r in records] == [e["step"] for e in entries] == [1, 2, 3, 4, 5]
    for record, entry in zip(records, entries, strict=True):
        keys = {key.removeprefix("gradlab/") for key in entry if key.startswith("gradlab/")}
        assert keys == set(record) - {"step"}
        assert any(key.startswith("anatomy_") for key in keys)


def test_the_page_has_one_example_per_integration():
    assert len(blocks()) == 3


def test_the_sentence_transformers_example(tmp_path, monkeypatch):
    pytest.importorskip("sentence_transformers")
    from datasets import Dataset

    from tests.helpers.hf_models import caption_pairs, static_model

    anchors, positives = caption_pairs(64)
    namespace = {"model": static_model(),
                 "train_dataset": Dataset.from_dict({"anchor": anchors, "positive": positives})}
    namespace = run_block(0, namespace, tmp_path, monkeypatch)
    assert_same_steps_and_keys(tmp_path, namespace["trainer"])


def test_the_hugging_face_trainer_example(tmp_path, monkeypatch):
    pytest.importorskip("transformers")
    from tests.helpers.hf_models import PairDataset, mean_pool, tiny_bert

    namespace = {"model": tiny_bert(), "train_dataset": PairDataset(32), "embed": mean_pool}
    namespace = run_block(1, namespace, tmp_path, monkeypatch)
    assert_same_steps_and_keys(tmp_path, namespace["trainer"])


class TwoTowers(torch.nn.Module):
    """Normalised image and text features and a learnable logit scale, as open_clip's CLIP."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.image = torch.nn.Linear(12, 8)
        self.text = torch.nn.Linear(10, 8)
        self.logit_scale = torch.nn.Parameter(torch.tensor(2.0))

    def forward(self, images, texts):
        normalize = torch.nn.functional.normalize
        return (normalize(self.image(images), dim=-1), normalize(self.text(texts), dim=-1),
                self.logit_scale.exp())  # fmt: skip


def test_the_open_clip_example(tmp_path, monkeypatch):
    from tests.helpers.open_clip_losses import StandInClipLoss

    model = TwoTowers()
    generator = torch.Generator().manual_seed(1)
    loader = [(torch.randn(6, 12, generator=generator), torch.randn(6, 10, generator=generator))
              for _ in range(3)]  # fmt: skip
    namespace = {"open_clip": types.SimpleNamespace(ClipLoss=StandInClipLoss), "model": model,
                 "loader": loader, "optimizer": torch.optim.SGD(model.parameters(), lr=0.1)}
    run_block(2, namespace, tmp_path, monkeypatch)
    _, records = read_jsonl(tmp_path / "run" / "gradlab_logs" / "metrics.jsonl")
    assert [record["step"] for record in records] == [0, 1, 2]
    for record in records:
        assert record["anatomy_i2t_active_negatives_mean"] >= 0
        assert record["anatomy_t2i_active_negatives_mean"] >= 0
