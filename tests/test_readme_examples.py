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


def test_the_smoothap_example_runs_as_written_in_both_forms():
    """Every line of "SmoothAP in two lines" runs (the cross-modal call by keyword) and each
    loss is 1 - the mean of the float64 loop reference's AP over the queries."""
    generator = torch.Generator().manual_seed(3)
    embeddings = torch.randn(12, 5, dtype=torch.float64, generator=generator)
    labels = torch.arange(4).repeat_interleave(3)
    image_emb = torch.randn(4, 5, dtype=torch.float64, generator=generator)
    caption_emb = torch.randn(9, 5, dtype=torch.float64, generator=generator)
    positives = torch.rand(4, 9, generator=generator) < 0.4
    positives[:, 0] = True
    namespace = {"embeddings": embeddings, "labels": labels, "image_emb": image_emb,
                 "caption_emb": caption_emb, "positives": positives}  # fmt: skip
    lines = _block_after("## SmoothAP in two lines").splitlines()
    calls = [line for line in lines if line.startswith("loss = ")]
    assert len(calls) == 2
    setup = "\n".join(line for line in lines if not line.startswith("loss = "))
    exec(setup, namespace)
    assert isinstance(namespace["loss_fn"], gradlab.SmoothAPLoss)
    tau = namespace["loss_fn"].tau

    def cosine(a, b):
        a = torch.nn.functional.normalize(a, dim=1)
        return a @ torch.nn.functional.normalize(b, dim=1).T

    scores = cosine(embeddings, embeddings)
    same = labels[:, None] == labels[None, :]
    in_batch = []
    for q in range(12):
        others = [j for j in range(12) if j != q]
        in_batch.append(smooth_ap_one_query(scores[q, others].tolist(),
                                            same[q, others].tolist(), tau))  # fmt: skip
    cross = cosine(image_emb, caption_emb)
    cross_modal = [smooth_ap_one_query(cross[q].tolist(), positives[q].tolist(), tau)
                   for q in range(4)]  # fmt: skip
    for call, aps in zip(calls, (in_batch, cross_modal), strict=True):
        exec(call, namespace)
        expected = 1 - sum(aps) / len(aps)
        assert abs(namespace["loss"].item() - expected) < 1e-10, call
