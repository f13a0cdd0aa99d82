"""Event files that another writer than gradlab leaves in a log folder."""

from __future__ import annotations

from pathlib import Path


def write_users_event_file(folder: Path) -> Path:
    """Log one scalar (``user/lr`` at step 0) with TensorBoard's own ``SummaryWriter``, as a
    training script of the user's does into the folder it shares with the Monitor.

    Args:
        folder: the log folder (created if missing).

    Returns:
        The event file the writer wrote (needs the ``tensorboard`` package).
    """
    from torch.utils.tensorboard import SummaryWriter

    before = set(folder.glob("events.out.tfevents.*"))
    writer = SummaryWriter(str(folder))
    writer.add_scalar("user/lr", 0.1, 0)
    writer.close()
    (written,) = set(folder.glob("events.out.tfevents.*")) - before
    return written
