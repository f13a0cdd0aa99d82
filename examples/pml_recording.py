"""A pytorch-metric-learning loss under the Monitor, through gradlab's recording distance.

pytorch-metric-learning's ``MultiSimilarityLoss`` computes its own similarity matrix; with
``RecordingCosineSimilarity`` as its distance the Monitor reads ``dL/dS`` of that matrix and
logs the gradient anatomy (which negatives receive gradient, how concentrated it is on the
hardest) with the ``full`` preset. The recording never changes the gradient (the ``pml``
extra).

    python examples/pml_recording.py --out runs/examples/pml_recording
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from pytorch_metric_learning import losses

import gradlab
from gradlab.interop.pml import RecordingCosineSimilarity
from gradlab.monitor import read_jsonl

STEPS = 20


def main(out: Path) -> None:
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    centres = torch.randn(32, 24, generator=generator)
    model = torch.nn.Sequential(torch.nn.Linear(24, 48), torch.nn.ReLU(), torch.nn.Linear(48, 16))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    monitor = gradlab.Monitor(out / "run", preset="full", overwrite=True)
    loss_fn = monitor.watch(losses.MultiSimilarityLoss(distance=RecordingCosineSimilarity()))
    for _ in range(STEPS):
        labels = torch.randperm(32, generator=generator)[:8].repeat_interleave(4)
        x = centres[labels] + 0.7 * torch.randn(len(labels), 24, generator=generator)
        loss = loss_fn(model(x), labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        monitor.step()
    monitor.close()

    headers, records = read_jsonl(out / "run" / "metrics.jsonl")
    print(f"{len(records)} logged steps of {STEPS}; not logged for this loss: "
          f"{', '.join(sorted(headers[0].get('not_logged', {})))}")
    anatomy = [record for record in records if "anatomy_active_negatives_mean" in record]
    for record in (anatomy[0], anatomy[-1]):  # close() logs the last step without gradients
        print(f"step {record['step']:>2}: loss {record['loss']:.3f}, active negatives per query "
              f"{record['anatomy_active_negatives_mean']:.1f} of 28, hardest 10 % share "
              f"{record['anatomy_hardest_10pct_share']:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/examples/pml_recording"))
    main(parser.parse_args().out)
