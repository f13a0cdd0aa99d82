"""A small Lightning module for the callback tests, and the DDP worker (importable by spawn)."""

import os

import torch
from lightning.pytorch import LightningModule, Trainer

from gradlab.models import EmbeddingMLP


def loader(steps: int, size: int = 24, seed: int = 0) -> torch.utils.data.DataLoader:
    """``steps`` batches of ``size`` 64-d inputs, 4 classes each."""
    generator = torch.Generator().manual_seed(seed)
    images = torch.randn(steps * size, 64, generator=generator)
    labels = torch.arange(steps * size) % 4
    dataset = torch.utils.data.TensorDataset(images, labels)
    return torch.utils.data.DataLoader(dataset, batch_size=size)


class LitRetrieval(LightningModule):
    """An MLP embedding trained with ``loss_fn``; keeps the loss of every training step."""

    def __init__(self, loss_fn, fail_at: int | None = None):
        super().__init__()
        torch.manual_seed(0)
        self.net = EmbeddingMLP(64, 16)
        self.loss_fn = loss_fn
        self.fail_at = fail_at
        self.train_losses: list[float] = []
        self.val_calls = 0

    def training_step(self, batch, batch_idx):
        if self.fail_at is not None and self.global_step == self.fail_at:
            raise RuntimeError("training failed on purpose")
        images, labels = batch
        loss = self.loss_fn(self.net(images), labels)
        self.train_losses.append(loss.item())
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        images, labels = batch
        self.val_calls += 1
        return self.loss_fn(self.net(images) * 2.0, labels)  # a different value on purpose

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def quiet_trainer(**options) -> Trainer:
    """A CPU Trainer without checkpoints, progress bar or model summary."""
    defaults = {"accelerator": "cpu", "enable_checkpointing": False,
                "enable_progress_bar": False, "enable_model_summary": False}  # fmt: skip
    return Trainer(**{**defaults, **options})


def rank_batch(rank: int, size: int = 12):
    generator = torch.Generator().manual_seed(100 + rank)
    return torch.randn(size, 64, generator=generator), torch.arange(size) % 3


class RankData(torch.utils.data.Dataset):
    """One batch per rank, as in the bare-loop DDP test (tests/helpers/workers.py)."""

    def __init__(self, rank: int):
        self.images, self.labels = rank_batch(rank)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        return self.images[index], self.labels[index]


def ddp_worker(rank: int, world: int, port: int, root: str) -> None:
    """One rank of a 2-process ``ddp`` fit on CPU (gloo), started as torchrun would start it."""
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(world), RANK=str(rank),
        LOCAL_RANK=str(rank), GROUP_RANK="0", LOCAL_WORLD_SIZE=str(world),
        TORCHELASTIC_RUN_ID="gradlab-test",
    )  # fmt: skip
    import gradlab
    from gradlab.integrations.lightning import GradlabCallback

    torch.set_num_threads(1)
    callback = GradlabCallback(preset="default", every=1)
    module = LitRetrieval(callback.watch(gradlab.SmoothAPLoss(0.05)))
    trainer = quiet_trainer(
        strategy="ddp", devices=world, max_steps=1, logger=False, default_root_dir=root,
        callbacks=[callback], use_distributed_sampler=False,
    )  # fmt: skip
    batches = torch.utils.data.DataLoader(RankData(rank), batch_size=12)
    trainer.fit(module, batches)
    if torch.distributed.is_initialized():  # gloo's threads joined before the process exits
        torch.distributed.barrier()  # (left running, one can abort the exit: SIGABRT)
        torch.distributed.destroy_process_group()
