"""The README's loss example runs as written and gives what its loop reference gives."""

from __future__ import annotations

import re
from pathlib import Path

import torch

import gradlab
from tests.reference.smooth_ap_loops import smooth_ap_one_query

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def _block_after(heading: str) -> str:
    section = README[README.index(heading):]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, f"README.md lost the code block under {heading!r}"
    return match.group(1)


def test_the_loss_example_runs_verbatim_in_both_forms():
    """The block under "A first loss" runs as written, with no name supplied from outside: it
    is executed in two consecutive pieces (up to the in-batch call, then the rest), and each
    loss is 1 - the mean of the float64 loop reference's AP over the queries."""
    block = _block_after("## A first loss")
    split = block.index("\n", block.index("loss = loss_fn(embeddings, labels)")) + 1
    namespace: dict = {}
    torch.manual_seed(3)
    exec(compile(block[:split], "README.md", "exec"), namespace)
    assert isinstance(namespace["loss_fn"], gradlab.SmoothAPLoss)
    in_batch_loss = namespace["loss"].item()
    exec(compile(block[split:], "README.md", "exec"), namespace)
    cross_modal_loss = namespace["loss"].item()
    tau = namespace["loss_fn"].tau
    embeddings, labels = namespace["embeddings"].detach().double(), namespace["labels"]
    image_emb, caption_emb = namespace["image_emb"].double(), namespace["caption_emb"].double()
    positives = namespace["positives"]

    def cosine(a, b):
        a = torch.nn.functional.normalize(a, dim=1)
        return a @ torch.nn.functional.normalize(b, dim=1).T

    scores = cosine(embeddings, embeddings)
    same = labels[:, None] == labels[None, :]
    batch = len(labels)
    in_batch = []
    for q in range(batch):
        others = [j for j in range(batch) if j != q]
        in_batch.append(smooth_ap_one_query(scores[q, others].tolist(),
                                            same[q, others].tolist(), tau))  # fmt: skip
    cross = cosine(image_emb, caption_emb)
    cross_modal = [smooth_ap_one_query(cross[q].tolist(), positives[q].tolist(), tau)
                   for q in range(len(image_emb))]  # fmt: skip
    assert abs(in_batch_loss - (1 - sum(in_batch) / len(in_batch))) < 1e-5
    assert abs(cross_modal_loss - (1 - sum(cross_modal) / len(cross_modal))) < 1e-5
