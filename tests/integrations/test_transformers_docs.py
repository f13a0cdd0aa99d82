"""The examples of docs/integrations_transformers.md run offline, as written.

Each block runs in a fresh folder with the names its text says the reader brings: a
SentenceTransformer and (anchor, positive) pairs, a tiny BERT with its pooling and token-id
pairs, and, for open_clip (which does not import on the development machine), its ClipLoss from
its own loss.py loaded by file (tests/helpers/open_clip_losses.py) with a small two-tower model;
where ``import open_clip`` works, the package itself with a tiny ``open_clip.model.CLIP``.
"""

import re
import types
import warnings
from pathlib import Path

import pytest
import torch

from gradlab.monitor import read_jsonl

PAGE = Path(__file__).resolve().parents[2] / "docs" / "integrations_transformers.md"
TRAIN_AGAIN, OPEN_CLIP, OPEN_CLIP_LOSS_FILE, OFFLINE_MODELS = 2, 3, 4, 5
"""The indexes of the page's blocks (0 and 1: sentence-transformers, the Trainer)."""


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


def test_the_page_has_one_example_per_integration_and_one_of_offline_models():
    assert len(blocks()) == 6  # and one of training a Trainer again


def test_the_offline_models_example_builds_a_model_and_a_guide_and_trains_gist(
    tmp_path, monkeypatch
):
    pytest.importorskip("sentence_transformers")
    namespace = run_block(OFFLINE_MODELS, {}, tmp_path, monkeypatch)
    assert (tmp_path / "models" / "model" / "config.json").is_file()
    assert (tmp_path / "models" / "guide" / "config.json").is_file()
    model, guide = namespace["model"], namespace["guide"]
    texts = ["digit 0 left of 4", "a scene with 1 left of the 5"]
    with torch.no_grad():
        first, second = (each.encode(texts, convert_to_tensor=True) for each in (model, guide))
    assert first.shape == second.shape == (2, 32)
    assert not torch.allclose(first, second)  # two models: the guide is not the model itself
    _, records = read_jsonl(tmp_path / "run" / "gradlab_logs" / "metrics.jsonl")
    assert [record["step"] for record in records] == [1, 2]
    assert all(record["anatomy_i2t_active_negatives_mean"] >= 0 for record in records)


@pytest.mark.slow
def test_the_offline_models_example_runs_again_in_the_same_folder(tmp_path, monkeypatch):
    """A reader who runs the script twice gets a second run, not an error about the first."""
    pytest.importorskip("sentence_transformers")
    for _ in range(2):
        run_block(OFFLINE_MODELS, {}, tmp_path, monkeypatch)
    _, records = read_jsonl(tmp_path / "run" / "gradlab_logs" / "metrics.jsonl")
    assert [record["step"] for record in records] == [1, 2]


def test_the_sentence_transformers_example(tmp_path, monkeypatch):
    pytest.importorskip("sentence_transformers")
    from datasets import Dataset

    from tests.helpers.hf_models import caption_pairs, static_model

    anchors, positives = caption_pairs(64)
    namespace = {"model": static_model(),
                 "train_dataset": Dataset.from_dict({"anchor": anchors, "positive": positives})}
    namespace = run_block(0, namespace, tmp_path, monkeypatch)
    assert_same_steps_and_keys(tmp_path, namespace["trainer"])


def test_training_the_sentence_transformers_example_again_as_the_page_says(tmp_path,
                                                                          monkeypatch):
    pytest.importorskip("sentence_transformers")
    from datasets import Dataset

    from gradlab.errors import RunExistsError
    from gradlab.monitor import read_segments
    from gradlab.plotting.monitor import load_runs
    from tests.helpers.hf_models import caption_pairs, static_model

    anchors, positives = caption_pairs(64)
    namespace = {"model": static_model(),
                 "train_dataset": Dataset.from_dict({"anchor": anchors, "positive": positives})}
    namespace = run_block(0, namespace, tmp_path, monkeypatch)
    with pytest.raises(RunExistsError, match="to train that trainer again, replace the callback"):
        namespace["trainer"].train()  # what the page says a second train() does
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_block(TRAIN_AGAIN, namespace, tmp_path, monkeypatch)
    # each training in its folder, nothing said: the first run is still drawn (with resume=True
    # in its folder, as the page said before, a warning advised otherwise and gradlab plot drew
    # the second training in place of the first)
    assert [str(w.message) for w in caught if "gradlab" in str(w.message).lower()] == []
    for folder in (tmp_path / "run" / "gradlab_logs", tmp_path / "runs" / "second_train"):
        segments = read_segments(folder / "metrics.jsonl")
        assert [[record["step"] for record in records] for _, records in segments] == [
            [1, 2, 3, 4, 5]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no resumption to warn of
        runs = load_runs([tmp_path / "run" / "gradlab_logs", tmp_path / "runs" / "second_train"])
    assert [[record["step"] for record in records] for _, records in runs] == [[1, 2, 3, 4, 5]] * 2


def test_the_hugging_face_trainer_example(tmp_path, monkeypatch):
    pytest.importorskip("transformers")
    from tests.helpers.hf_models import PairDataset, mean_pool, tiny_bert

    namespace = {"model": tiny_bert(), "train_dataset": PairDataset(32),
                 "eval_dataset": PairDataset(16, seed=1), "embed": mean_pool}  # fmt: skip
    namespace = run_block(1, namespace, tmp_path, monkeypatch)
    trainer = namespace["trainer"]
    assert_same_steps_and_keys(tmp_path, trainer)
    # The example evaluates (its compute_loss returns the outputs evaluation asks for), and the
    # evaluation's loss calls are not logged (one record per training step above).
    (evaluation,) = [entry for entry in trainer.state.log_history if "eval_loss" in entry]
    assert evaluation["step"] == 5 and evaluation["eval_loss"] > 0


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


def run_open_clip_example(tmp_path, monkeypatch, open_clip, model, loader) -> None:
    """The open_clip block with ``open_clip`` and ``model`` given; its log holds one record
    per step with both directions' anatomy."""
    namespace = {"open_clip": open_clip, "model": model, "loader": loader,
                 "optimizer": torch.optim.SGD(model.parameters(), lr=0.1)}  # fmt: skip
    run_block(OPEN_CLIP, namespace, tmp_path, monkeypatch)
    _, records = read_jsonl(tmp_path / "run" / "gradlab_logs" / "metrics.jsonl")
    assert [record["step"] for record in records] == list(range(len(loader)))
    for record in records:
        assert record["anatomy_i2t_active_negatives_mean"] >= 0
        assert record["anatomy_t2i_active_negatives_mean"] >= 0


@pytest.mark.parametrize("source", ["loss.py", "stand-in"])
def test_the_open_clip_example(tmp_path, monkeypatch, source):
    """open_clip's ClipLoss from its own loss.py, loaded by file (``import open_clip`` fails
    here), or the stand-in where open_clip is not installed, with a two-tower model."""
    from tests.helpers.open_clip_losses import loss_classes

    clip_loss, _ = loss_classes(source)
    generator = torch.Generator().manual_seed(1)
    loader = [(torch.randn(6, 12, generator=generator), torch.randn(6, 10, generator=generator))
              for _ in range(3)]  # fmt: skip
    run_open_clip_example(tmp_path, monkeypatch, types.SimpleNamespace(ClipLoss=clip_loss),
                          TwoTowers(), loader)  # fmt: skip


def test_the_open_clip_example_with_the_loss_file_the_page_loads(tmp_path, monkeypatch):
    """Where ``import open_clip`` fails: the page's block loads open_clip's loss.py by file,
    without importing the package, and the example runs with its ClipLoss."""
    import sys

    from tests.helpers.open_clip_losses import open_clip_loss_file

    if open_clip_loss_file() is None:
        pytest.skip("open_clip is not installed")
    imported = "open_clip" in sys.modules
    namespace = run_block(OPEN_CLIP_LOSS_FILE, {}, tmp_path, monkeypatch)
    assert ("open_clip" in sys.modules) == imported  # the package itself is not imported
    loss_file = namespace["open_clip_loss"]
    assert Path(loss_file.__file__) == open_clip_loss_file()
    assert loss_file.ClipLoss.__module__ == "open_clip_loss"
    generator = torch.Generator().manual_seed(1)
    loader = [(torch.randn(6, 12, generator=generator), torch.randn(6, 10, generator=generator))
              for _ in range(3)]  # fmt: skip
    run_open_clip_example(tmp_path, monkeypatch, loss_file, TwoTowers(), loader)


def test_the_open_clip_example_with_the_package_and_a_tiny_clip(tmp_path, monkeypatch):
    from tests.helpers.open_clip_losses import real_open_clip, tiny_clip

    open_clip = real_open_clip()
    generator = torch.Generator().manual_seed(1)
    loader = [(torch.randn(4, 3, 16, 16, generator=generator),
               torch.randint(0, 40, (4, 8), generator=generator)) for _ in range(3)]  # fmt: skip
    run_open_clip_example(tmp_path, monkeypatch, open_clip, tiny_clip(open_clip), loader)
