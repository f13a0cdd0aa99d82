"""Each Monitor keeps its logged steps' large buffers in its own workspace and frees them at
close(): nothing stays allocated after the run, and the thread's default workspace is unused."""

import torch

import gradlab
from gradlab.monitor.batch import BatchView, Workspace, thread_workspace


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


def test_sigmoid_blocks_of_one_step_keep_their_own_buffers():
    """A step that evaluates the sigmoid block at two temperatures and both query conventions
    (a quantity's own tau beside the loss's) keeps each result: none is overwritten by the next,
    though all come from one workspace (B = 130: buffers large enough to be kept)."""
    generator = torch.Generator().manual_seed(3)
    embeddings = torch.randn(130, 8, generator=generator)
    labels = torch.arange(130) % 13
    settings = [(0.05, False), (0.1, False), (0.05, True)]
    shared = BatchView(embeddings, labels=labels, workspace=Workspace())
    kept = [shared.smooth_ap_terms(tau, include_query) for tau, include_query in settings]
    assert shared.workspace.kept_bytes > 0
    for (tau, include_query), terms in zip(settings, kept, strict=True):
        alone = BatchView(embeddings, labels=labels, workspace=Workspace())
        expected = alone.smooth_ap_terms(tau, include_query)
        for name in ("ap", "score_grad", "ad_term", "cb_term"):
            torch.testing.assert_close(getattr(terms, name), getattr(expected, name),
                                       rtol=0, atol=0, equal_nan=True)  # fmt: skip


def test_buffers_from_128_x_128_entries_up_are_kept():
    """Smaller buffers are plain allocations (the allocator's heap serves them again without
    page faults); from 16384 entries up they are kept for the next step."""
    workspace = Workspace()
    view = BatchView(torch.eye(3), labels=torch.arange(3), workspace=workspace)
    view.buffer("small", (127, 128), torch.float32)
    assert workspace.kept_bytes == 0
    view.buffer("kept", (128, 128), torch.float32)
    assert workspace.kept_bytes == 128 * 128 * 4
