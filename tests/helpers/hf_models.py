"""Tiny offline Hugging Face models for the integration tests: nothing is downloaded.

* :func:`tiny_bert` and :class:`InBatchTrainer`: a randomly initialised one-layer BERT (hidden
  32) trained by a ``transformers.Trainer`` whose ``compute_loss`` calls an in-batch loss on the
  cosine scores of (query, document) token sequences.
* :func:`caption_pairs`, :func:`word_level_tokenizer`, :func:`static_model` and
  :func:`bert_sentence_model`: sentence-transformers models over a ``tokenizers`` WordLevel
  tokenizer built in code from a small caption grammar (digit scenes: "three left of seven").
* :func:`cached_replay_in_float32`: whether the installed sentence-transformers replays its
  cached losses' mini-batches in float32.
"""

from __future__ import annotations

import itertools
import random
from importlib.metadata import PackageNotFoundError, version

import torch
import torch.nn.functional as F


def cached_replay_in_float32() -> bool:
    """sentence-transformers 5.7 to 6.1 replay CachedMNRL's mini-batches with the surrogate
    ``dot(reps.float(), grad.float())`` (read in their source; 6.0.1 measured: dL/dtheta off by
    1.6e-7 in float64), so a float64 step matches the whole-batch loss only to float32 there;
    5.6 and earlier, and 6.2 on, keep the embeddings' dtype."""
    from packaging.version import Version

    try:
        installed = Version(version("sentence-transformers"))
    except PackageNotFoundError:
        return False
    return Version("5.7") <= installed < Version("6.2")


DIGITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
RELATIONS = ("left of", "right of", "above", "below")
SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def vocabulary() -> list[str]:
    """Every word of the caption grammar, after the special tokens."""
    words = {"a", "the", "digit", "is", "scene", "with", "and", "small", "large"}
    words |= set(DIGITS) | {w for relation in RELATIONS for w in relation.split()}
    return [*SPECIAL, *sorted(words)]


def caption_pairs(count: int = 64, seed: int = 0) -> tuple[list[str], list[str]]:
    """``count`` (anchor, positive) captions of distinct digit scenes, two phrasings each."""
    rng = random.Random(seed)
    scenes = list(itertools.permutations(range(10), 2))
    rng.shuffle(scenes)
    anchors, positives = [], []
    for index, (first, second) in enumerate(scenes[:count]):
        relation = RELATIONS[index % len(RELATIONS)]
        size = ("small", "large")[index % 2]
        anchors.append(f"{DIGITS[first]} {relation} {DIGITS[second]}")
        positives.append(f"a scene with a {size} {DIGITS[first]} {relation} the digit "
                         f"{DIGITS[second]}")  # fmt: skip
    return anchors, positives


def word_level_tokenizer():
    """A ``tokenizers.Tokenizer`` (WordLevel, whitespace) over :func:`vocabulary`."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {word: index for index, word in enumerate(vocabulary())}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return tokenizer


def fast_tokenizer():
    """The WordLevel tokenizer as a ``transformers.PreTrainedTokenizerFast`` (BERT's tokens)."""
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    tokenizer = word_level_tokenizer()
    words = vocabulary()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", words.index("[CLS]")),
                                                 ("[SEP]", words.index("[SEP]"))],
    )  # fmt: skip
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="[PAD]",
                                   unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]",
                                   mask_token="[MASK]", model_max_length=32)  # fmt: skip


def tiny_bert(seed: int = 0, dropout: float = 0.1):
    """A randomly initialised ``BertModel``: 1 layer, hidden 32, the grammar's vocabulary."""
    from transformers import BertConfig, BertModel

    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(vocabulary()), hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64,
                        max_position_embeddings=64, hidden_dropout_prob=dropout,
                        attention_probs_dropout_prob=dropout)  # fmt: skip
    return BertModel(config)


class PairDataset(torch.utils.data.Dataset):
    """(query, document) token ids of :func:`caption_pairs`, padded to one length."""

    def __init__(self, count: int = 64, seed: int = 0) -> None:
        tokenizer = fast_tokenizer()
        anchors, positives = caption_pairs(count, seed)
        self.queries = tokenizer(anchors, padding="max_length", max_length=16,
                                 return_tensors="pt")  # fmt: skip
        self.documents = tokenizer(positives, padding="max_length", max_length=16,
                                   return_tensors="pt")  # fmt: skip

    def __len__(self) -> int:
        return self.queries["input_ids"].shape[0]

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"query_ids": self.queries["input_ids"][index],
                "query_mask": self.queries["attention_mask"][index],
                "document_ids": self.documents["input_ids"][index],
                "document_mask": self.documents["attention_mask"][index]}  # fmt: skip


def mean_pool(model, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of the last hidden states over the tokens, L2-normalised."""
    hidden = model(input_ids=ids, attention_mask=mask).last_hidden_state
    weights = mask.unsqueeze(-1).to(hidden.dtype)
    return F.normalize((hidden * weights).sum(1) / weights.sum(1), dim=-1)


def in_batch_trainer_class():
    """A ``transformers.Trainer`` subclass whose ``compute_loss`` calls ``self.loss_fn`` on the
    cosine scores of the batch's queries and documents (positives on the diagonal); it keeps
    every training loss value in ``self.losses``."""
    from transformers import Trainer

    class InBatchTrainer(Trainer):
        def __init__(self, *args, loss_fn=None, **kwargs):
            super().__init__(*args, **kwargs)
            self.loss_fn = loss_fn
            self.losses: list[float] = []

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            queries = mean_pool(model, inputs["query_ids"], inputs["query_mask"])
            documents = mean_pool(model, inputs["document_ids"], inputs["document_mask"])
            scores = queries @ documents.T
            positives = torch.eye(len(scores), dtype=torch.bool, device=scores.device)
            loss = self.loss_fn(scores, positives)
            if model.training:
                self.losses.append(loss.item())
            return (loss, {}) if return_outputs else loss

        def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
            with torch.no_grad():
                return self.compute_loss(model, inputs).detach(), None, None

    return InBatchTrainer


def training_arguments(output_dir, **overrides):
    """CPU ``TrainingArguments`` without checkpoints, progress bars or reporting."""
    from transformers import TrainingArguments

    options = {"output_dir": str(output_dir), "max_steps": 5, "per_device_train_batch_size": 8,
               "learning_rate": 1e-3, "logging_steps": 1, "save_strategy": "no",
               "report_to": "none", "use_cpu": True, "disable_tqdm": True, "seed": 0,
               "remove_unused_columns": False, "dataloader_num_workers": 0}  # fmt: skip
    return TrainingArguments(**{**options, **overrides})


def static_model(seed: int = 0, dim: int = 16):
    """A ``SentenceTransformer`` of one ``StaticEmbedding`` over :func:`word_level_tokenizer`."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import StaticEmbedding

    torch.manual_seed(seed)
    return SentenceTransformer(modules=[StaticEmbedding(word_level_tokenizer(), embedding_dim=dim)],
                               device="cpu")  # fmt: skip


def bert_sentence_model(folder, seed: int = 0):
    """A ``SentenceTransformer`` of :func:`tiny_bert` (no dropout) and mean pooling, saved to and
    loaded from ``folder`` (no hub). Unlike a StaticEmbedding, its inputs split into
    mini-batches (the cached losses) and its tokenizer is a transformers one (GIST)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    tiny_bert(seed, dropout=0.0).save_pretrained(folder)
    fast_tokenizer().save_pretrained(folder)
    return SentenceTransformer(modules=[Transformer(str(folder)), Pooling(32, "mean")],
                               device="cpu")  # fmt: skip


def sentence_features(model, *columns: list[str]) -> list[dict]:
    """The model's inputs for each column of texts, as a loss receives them."""
    return [model.preprocess(list(texts)) for texts in columns]


def sentence_training_arguments(output_dir, **overrides):
    """CPU ``SentenceTransformerTrainingArguments``: 5 steps, no checkpoint, no reporting."""
    from sentence_transformers import SentenceTransformerTrainingArguments

    options = {"output_dir": str(output_dir), "max_steps": 5, "per_device_train_batch_size": 16,
               "learning_rate": 0.05, "logging_steps": 1, "save_strategy": "no",
               "report_to": "none", "use_cpu": True, "disable_tqdm": True, "seed": 0}  # fmt: skip
    return SentenceTransformerTrainingArguments(**{**options, **overrides})


def embed(model, texts) -> torch.Tensor:
    """The sentence model's embeddings of ``texts`` in float64, without gradient."""
    with torch.no_grad():
        return model.encode(list(texts), convert_to_tensor=True).to(torch.float64)


def cosine64(first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
    """The cosine matrix of two sets of rows (the references' float64 scores)."""
    return F.normalize(first, dim=-1) @ F.normalize(second, dim=-1).T


def captured(loss, features, inputs=None):
    """Call a sentence-transformers ``loss`` as a logged Monitor call does, backward, and return
    the step's BatchView (its recorded matrices and their dL/dS)."""
    from gradlab.integrations.sentence_transformers import sentence_transformers_adapter

    adapter = sentence_transformers_adapter(loss, inputs)
    with adapter.listening(score_grad=True) as (recorded, _):
        value = loss(features, None)
    batch = adapter.capture([], value, 0.01, recorded=recorded, score_grad=True)
    value.backward()
    return batch


def scores_and_positives(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A 6 x 6 score matrix that requires grad and its diagonal positives: a watched score-matrix
    loss's call in the Trainer-callback tests."""
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randn(6, 6, generator=generator, requires_grad=True)
    return scores, torch.eye(6, dtype=torch.bool)
