"""Each Monitor keeps its logged steps' large buffers in its own workspace and frees them at
close(): nothing stays allocated after the run, and the thread's default workspace is unused."""

import torch

import gradlab
from gradlab.monitor.batch import thread_workspace


def _logged_steps(monitor, steps=2, batch=256):
    loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
    for _ in range(steps):
        embeddings = torch.randn(batch, 16, requires_grad=True)
        loss_fn(embeddings, torch.arange(batch) % 64).backward()
        monitor.step()


def test_the_monitor_owns_its_buffers_and_frees_them_at_close(tmp_path):
    before = thread_workspace().kept_bytes
    monitor = gradlab.Monitor(tmp_path, preset="full", every=1)
    _logged_steps(monitor)
    # a [256, 256] sort and its searches at least: far above the small-buffer cut
    assert monitor.workspace.kept_bytes >= 256 * 256 * 4
    assert thread_workspace().kept_bytes == before
    monitor.close()
    assert monitor.workspace.kept_bytes == 0


def test_two_monitors_do_not_share_buffers(tmp_path):
    first = gradlab.Monitor(tmp_path / "a", preset="full", every=1)
    second = gradlab.Monitor(tmp_path / "b", preset="full", every=1)
    try:
        _logged_steps(first, steps=1)
        assert first.workspace is not second.workspace
        assert second.workspace.kept_bytes == 0 < first.workspace.kept_bytes
    finally:
        first.close()
        second.close()
