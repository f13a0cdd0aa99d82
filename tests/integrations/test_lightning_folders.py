"""GradlabCallback's default folder never shadows the package.

With the W&B and MLflow loggers ``trainer.log_dir`` is the working directory. A Monitor folder
named ``gradlab`` there is found by ``import gradlab`` of the next script started from that
folder (the script's folder comes first on ``sys.path``), which then fails with ``module
'gradlab' has no attribute 'SmoothAPLoss'``. Each run here is a fresh ``python -c`` started in
the same folder, as a user would start the training script twice.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("lightning")
pytest.importorskip("wandb")
pytest.importorskip("mlflow")

SCRIPT = """
import torch
import wandb
from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.loggers import MLFlowLogger, WandbLogger

import gradlab
from gradlab.integrations.lightning import GradlabCallback


class Retrieval(LightningModule):
    def __init__(self, loss_fn):
        super().__init__()
        self.net, self.loss_fn = torch.nn.Linear(8, 4), loss_fn

    def training_step(self, batch, batch_idx):
        inputs, labels = batch
        return self.loss_fn(self.net(inputs), labels)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


data = torch.utils.data.TensorDataset(torch.randn(36, 8), torch.arange(36) % 3)
callback = GradlabCallback(preset="cheap")
module = Retrieval(callback.watch(gradlab.SmoothAPLoss(0.05)))
loggers = [WandbLogger(project="retrieval", offline=True),
           MLFlowLogger(tracking_uri="file:./mlruns")]
Trainer(max_steps=3, callbacks=[callback], logger=loggers, enable_progress_bar=False,
        enable_model_summary=False, enable_checkpointing=False,
        ).fit(module, torch.utils.data.DataLoader(data, batch_size=12))
wandb.finish()
print("CLOSED", callback.monitor is None)
"""


@pytest.mark.slow
@pytest.mark.usefixtures("offline_trackers")
def test_two_runs_with_wandb_and_mlflow_from_one_folder_work_and_write_no_gradlab_folder(
    tmp_path,
):
    # gradlab as installed (an editable install's finder comes after the working folder on
    # sys.path, so a folder named gradlab there would be imported instead); MLflow's file store.
    environment = {**os.environ, "MLFLOW_ALLOW_FILE_STORE": "true", "WANDB_DIR": str(tmp_path)}
    environment.pop("PYTHONPATH", None)
    # a W&B service an earlier test of this process started would take the runs, and write
    # them under its own working folder (the repository's ./wandb), not this one
    for name in [name for name in environment if name.startswith("WANDB_SERVICE")]:
        environment.pop(name)
    for _ in range(2):
        run = subprocess.run([sys.executable, "-c", SCRIPT], cwd=tmp_path, env=environment,
                             capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr[-3000:]
        assert "CLOSED True" in run.stdout  # the Monitor was opened and closed
    assert not (tmp_path / "gradlab").exists()
    assert len(list((tmp_path / "wandb").glob("offline-run-*"))) == 2  # here, nowhere else
    logs = sorted(tmp_path.glob("gradlab_logs/*/metrics.jsonl"))
    assert len(logs) == 2  # one folder per W&B run id: the second run did not refuse or merge
    for log in logs:
        assert '"step": 2' in log.read_text(encoding="utf-8")  # the last of the 3 steps
