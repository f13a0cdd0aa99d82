"""Each Monitor keeps its logged steps' large buffers in its own workspace and frees them at
close(): nothing stays allocated after the run, and the thread's default workspace is unused."""

import contextlib
import gc
import math

import pytest
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


# --- a tensor that outlives its step keeps none of the step's hooks ----------------------------


@contextlib.contextmanager
def _only_new_objects_collected():
    """Freeze what exists before the block, so that ``gc.collect()`` inside it scans only the
    objects the block made (collecting the whole suite's heap at every step cost seconds)."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _live_views() -> int:
    """BatchViews made since the enclosing ``_only_new_objects_collected`` and still alive
    (the frozen, older objects are not listed by ``gc.get_objects``)."""
    gc.collect()
    return sum(type(thing) is BatchView for thing in gc.get_objects())


def _leaf_cases():
    """(loss, the leaf a training loop optimises directly and passes every step, its second
    argument): embeddings for SmoothAP, a score matrix for NT-Xent (its score recorder hooks
    the matrix itself)."""
    generator = torch.Generator().manual_seed(5)
    labels = torch.arange(160) % 40
    embeddings = torch.randn(160, 8, generator=generator).requires_grad_(True)
    scores = torch.randn(40, 160, generator=generator).requires_grad_(True)
    positives = torch.arange(40).unsqueeze(1) == labels.unsqueeze(0)

    class HandsOverItsInput(torch.nn.Module):
        """A score loss that hands its recorder the caller's matrix itself (no alias)."""

        score_recorder = None

        def forward(self, scores, positives):
            if self.score_recorder is not None:
                self.score_recorder("i2t", scores, positives)
            return -(scores * positives).sum() + scores.logsumexp(dim=1).sum()

    return {
        "embeddings": (gradlab.SmoothAPLoss(0.05), embeddings, labels),
        "scores": (gradlab.NTXentLoss(0.1), scores, positives),
        "recorded": (HandsOverItsInput(), scores.detach().clone().requires_grad_(True),
                     positives),
    }  # fmt: skip


@pytest.mark.slow
def test_a_leaf_optimised_directly_keeps_no_hook_and_no_step_after_step(tmp_path):
    """A leaf passed to the watched loss at every step (embeddings learned directly, a score
    matrix held by the model) once kept each logged step's gradient hooks, and through them
    each step's batch and its buffers: 13 MiB a step at B = 512, and no workspace to reuse."""
    for name, (loss, leaf, second) in _leaf_cases().items():
        with _only_new_objects_collected():
            before = _live_views()
            with gradlab.Monitor(tmp_path / name, tau=0.05, preset="full", every=1) as monitor:
                loss_fn = monitor.watch(loss, inputs="scores" if name == "recorded" else None)
                optimizer = torch.optim.SGD([leaf], lr=0.01)
                records = []
                for _ in range(6):
                    optimizer.zero_grad()
                    loss_fn(leaf, second).backward()
                    optimizer.step()
                    records.append(monitor.step())
                    assert not leaf._backward_hooks, (name, len(leaf._backward_hooks))
                    assert _live_views() <= before + 1, name  # at most the step just read
        # the gradients were still read: the anatomy needs dL/dS from the hooks
        assert all(not math.isnan(r[key]) for r in records for key in r
                   if key.startswith("anatomy") and key.endswith("share")), name  # fmt: skip


def test_two_calls_before_one_step_leave_the_hooks_of_the_last_only(tmp_path):
    loss, leaf, labels = _leaf_cases()["embeddings"]
    with gradlab.Monitor(tmp_path, tau=0.05, preset="full", every=1) as monitor:
        loss_fn = monitor.watch(loss)
        loss_fn(leaf, labels)
        hooks_of_one_call = len(leaf._backward_hooks)
        assert hooks_of_one_call > 0
        loss_fn(leaf, labels).backward()
        assert len(leaf._backward_hooks) == hooks_of_one_call
        record = monitor.step()
        assert not leaf._backward_hooks
    assert record["embedding_grad_norm"] > 0  # read by a hook of the last call
