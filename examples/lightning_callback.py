"""The Monitor inside Lightning: ``GradlabCallback`` steps it once per optimizer step.

A LightningModule trains a small MLP with gradlab's SmoothAP for 30 steps on CPU; the callback
watches the loss, logs the ``cheap`` preset into ``metrics.jsonl`` and forwards every record to
the Trainer's loggers as ``gradlab/<key>`` (here a CSV logger). The ``lightning`` extra.

    python examples/lightning_callback.py --out runs/examples/lightning_callback
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import torch
from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.loggers import CSVLogger

import gradlab
from gradlab.integrations.lightning import GradlabCallback
from gradlab.monitor import read_jsonl

STEPS = 30


class Retrieval(LightningModule):
    """An MLP embedding trained with the loss it is given."""

    def __init__(self, loss_fn) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(24, 48), torch.nn.ReLU(),
                                       torch.nn.Linear(48, 16))  # fmt: skip
        self.loss_fn = loss_fn

    def training_step(self, batch, batch_idx):
        x, labels = batch
        return self.loss_fn(self.net(x), labels)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def loader(steps: int, batch: int = 24) -> torch.utils.data.DataLoader:
    """``steps`` batches of 6 classes of 4 noisy copies of random centres."""
    generator = torch.Generator().manual_seed(0)
    centres = torch.randn(6, 24, generator=generator)
    labels = torch.arange(steps * batch) % 6
    x = centres[labels] + 0.8 * torch.randn(len(labels), 24, generator=generator)
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, labels), batch_size=batch)


def main(out: Path) -> None:
    torch.manual_seed(0)
    callback = GradlabCallback(out / "gradlab", preset="cheap", overwrite=True)
    module = Retrieval(loss_fn=callback.watch(gradlab.SmoothAPLoss(0.05)))
    trainer = Trainer(max_steps=STEPS, callbacks=[callback], logger=CSVLogger(out, name="csv"),
                      accelerator="cpu", enable_checkpointing=False, enable_progress_bar=False,
                      enable_model_summary=False, log_every_n_steps=1)  # fmt: skip
    trainer.fit(module, loader(STEPS))

    _, records = read_jsonl(out / "gradlab" / "metrics.jsonl")
    with open(trainer.logger.log_dir + "/metrics.csv") as handle:
        rows = [row for row in csv.DictReader(handle) if row.get("gradlab/loss")]
    print(f"metrics.jsonl: {len(records)} records; the Trainer's CSV logger: {len(rows)} rows "
          "with gradlab/loss")
    first, last = records[0], records[-1]
    print(f"loss {first['loss']:.3f} at step {first['step']} -> {last['loss']:.3f} at step "
          f"{last['step']}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/examples/lightning_callback"))
    main(parser.parse_args().out)
