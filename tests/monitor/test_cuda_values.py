"""On a CUDA device the Monitor logs the values it logs on the CPU, for every quantity of the
full preset and each kind of watched loss (embeddings, a cross-modal call, a score matrix).

Marked ``gpu``: they run where a GPU is (``bash tools/device_check.sh``) and skip elsewhere.
The CPU run is the reference: float64 inputs, so the two devices differ only by the order of
their floating-point sums.
"""

from __future__ import annotations

import math

import pytest
import torch

import gradlab

CASES = {
    "smooth_ap_in_batch": (lambda: gradlab.SmoothAPLoss(0.05), "in_batch"),
    "fast_ap_in_batch": (lambda: gradlab.FastAPLoss(), "in_batch"),
    "smooth_ap_cross_modal": (lambda: gradlab.SmoothAPLoss(0.05), "cross_modal"),
    "nt_xent_scores": (lambda: gradlab.NTXentLoss(0.1), "scores"),
}


def _inputs(layout: str, device: str) -> tuple[tuple, dict]:
    generator = torch.Generator().manual_seed(7)
    embeddings = torch.randn(48, 16, generator=generator, dtype=torch.float64)
    embeddings = torch.nn.functional.normalize(embeddings, dim=1)
    labels = torch.arange(48) % 12
    if layout == "in_batch":
        leaf = embeddings.to(device).requires_grad_(True)
        return (leaf, labels.to(device)), {}
    if layout == "cross_modal":
        queries = embeddings[:12].to(device).requires_grad_(True)
        candidates = embeddings.to(device).requires_grad_(True)
        positives = (torch.arange(12).unsqueeze(1) == labels.unsqueeze(0)).to(device)
        return (queries,), {"candidates": candidates, "positives": positives}
    scores = (embeddings[:12] @ embeddings.T).to(device).requires_grad_(True)
    positives = (torch.arange(12).unsqueeze(1) == labels.unsqueeze(0)).to(device)
    return (scores, positives), {}


def _logged(case: str, device: str, folder) -> dict:
    make, layout = CASES[case]
    with gradlab.Monitor(folder, tau=0.05, preset="full", every=1) as monitor:
        loss_fn = monitor.watch(make())
        for _ in range(2):  # the second step also has a previous step to compare with
            args, kwargs = _inputs(layout, device)
            loss_fn(*args, **kwargs).backward()
            record = monitor.step()
    return record


@pytest.mark.gpu
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_logged_value_on_cuda_equals_the_cpus(case, tmp_path):
    cpu = _logged(case, "cpu", tmp_path / "cpu")
    cuda = _logged(case, "cuda", tmp_path / "cuda")
    assert sorted(cuda) == sorted(cpu)
    numbers = [key for key, value in cpu.items() if isinstance(value, (int, float))]
    assert len(numbers) > 20, numbers  # the full preset logged, not only the loss
    for key in numbers:
        expected, got = float(cpu[key]), float(cuda[key])
        if math.isnan(expected):
            assert math.isnan(got), (key, got)
        else:
            assert got == pytest.approx(expected, rel=1e-6, abs=1e-9), key


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_logits_far_beyond_the_window_width_count_their_ties_on_cuda(dtype, tmp_path):
    """Multiples of 2^30 (2^60 in float64) watched as a score matrix: s + w rounds back to s
    for the window width w, and on a GPU (where the step moves such bounds without reading
    the scores first) a pair is inside exactly when it is tied, as in exact arithmetic."""
    generator = torch.Generator().manual_seed(8)
    scale = 2.0**60 if dtype == torch.float64 else 2.0**30
    scores = (torch.randn(24, 24, generator=generator, dtype=torch.float64) * 3).round()
    scores = (scores * scale).to(dtype)
    positives = torch.eye(24, dtype=torch.bool)
    ties = scores.unsqueeze(1) == scores.unsqueeze(2)  # [q, anchor, j]
    with gradlab.Monitor(tmp_path, tau=0.05, preset="default", every=1) as monitor:
        loss_fn = monitor.watch(gradlab.NTXentLoss(0.1), inputs="scores")
        loss_fn(scores.cuda().requires_grad_(True), positives.cuda()).backward()
        record = monitor.step()
    assert record["p_cross_modal"] == pytest.approx(ties.double().mean().item(), rel=1e-12)
    # each positive (the diagonal) counts the other candidates tied with it
    others = ties[torch.arange(24), torch.arange(24)].sum(dim=1) - 1
    assert record["gradient_count_mean"] == pytest.approx(others.double().mean().item())


class _HostValues(gradlab.monitor.Quantity):
    """A quantity of one's own that answers a CUDA step with a Python number and a CPU tensor."""

    name = "host_values"
    keys = ("host_values_count", "host_values_cpu_mean")

    def compute(self, batch):
        embeddings = batch.embeddings.detach().cpu().double()
        return {"host_values_count": embeddings.shape[0],
                "host_values_cpu_mean": embeddings.mean()}  # fmt: skip


@pytest.mark.gpu
def test_a_quantity_of_ones_own_may_answer_a_cuda_step_with_host_values(tmp_path):
    embeddings = torch.randn(8, 3, generator=torch.Generator().manual_seed(9))
    with gradlab.Monitor(tmp_path, quantities=[_HostValues(gradlab.monitor.every(1))]) as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        leaf = embeddings.cuda().requires_grad_(True)
        loss_fn(leaf, (torch.arange(8) % 2).cuda()).backward()
        record = monitor.step()
    assert (record["host_values_count"], record["host_values_cpu_mean"]) == (
        8.0, pytest.approx(embeddings.double().mean().item(), rel=1e-12))



def _info_nce(scores, targets):  # a user's own score loss, on cross_entropy targets
    return torch.nn.functional.cross_entropy(scores / 0.1, targets)


@pytest.mark.gpu
def test_labels_of_a_users_score_loss_on_cuda_are_read_or_refused_as_on_the_cpu(tmp_path):
    # 0..B-1 in order: one reading, logged; shuffled: two readings, refused (not logged)
    import warnings

    scores = torch.randn(8, 8, generator=torch.Generator().manual_seed(0)).cuda()
    with gradlab.Monitor(tmp_path, every=1) as monitor:
        watched = monitor.watch(_info_nce, inputs="scores")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            watched(scores.clone().requires_grad_(), torch.arange(8).cuda()).backward()
        monitor.step()
        with pytest.warns(RuntimeWarning, match="holds 0..B-1 in another order"):
            watched(scores.clone().requires_grad_(), torch.arange(8).flip(0).cuda()).backward()
        monitor.step()
    _, records = gradlab.monitor.read_jsonl(tmp_path)
    assert [record["step"] for record in records] == [0]
