"""Monitor paths the other tests reach only in subprocesses or by part of a message.

* torch.distributed in this process: a one-rank gloo group, so the gathering code runs where
  coverage (and mutation testing) sees it; with one rank the global batch is the local one, so
  every value must equal the ``distributed="local"`` run's.
* Whole messages: what a user reads when a call cannot be read, a quantity is disabled, or an
  attach() argument is wrong.
* attach() with a labels tensor, and after a watch(inputs="scores").
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch

import gradlab
from gradlab import GradlabError, Monitor
from gradlab.monitor import PRESETS, Loss, Quantity, every, read_jsonl
from gradlab.monitor.distributed import all_gather_rows
from tests.reference.operating_region_loops import proportion
from tests.reference.smooth_ap_loops import cosine


@pytest.mark.parametrize(
    "tensor",
    [torch.randn(5, 3), torch.arange(7), torch.randn(4, 2, dtype=torch.float64)],
)
def test_gathering_over_one_rank_returns_the_rows(one_rank_group, tensor):
    gathered = all_gather_rows(tensor)
    assert gathered.dtype == tensor.dtype and torch.equal(gathered, tensor)


def _full_record(log_dir, distributed):
    generator = torch.Generator().manual_seed(5)
    embeddings = torch.randn(12, 4, generator=generator, dtype=torch.float64)
    embeddings.requires_grad_(True)
    labels = torch.arange(12) % 3
    # The Monitor's tau differs from the loss's: agreement must still use the loss's.
    with Monitor(log_dir, 0.3, preset="full", every=1, distributed=distributed) as monitor:
        with pytest.warns(UserWarning, match="differs from the watched loss"):
            loss = monitor.watch(gradlab.SmoothAPLoss(0.1))(embeddings, labels)
        loss.backward()
        return monitor.step()


def test_one_rank_global_batch_logs_the_local_values(one_rank_group, tmp_path):
    global_record = _full_record(tmp_path / "auto", "auto")
    local_record = _full_record(tmp_path / "local", "local")
    assert global_record.keys() == local_record.keys() and len(local_record) > 40
    for key, value in local_record.items():
        other = global_record[key]
        assert (math.isnan(value) and math.isnan(other)) or other == pytest.approx(
            value, rel=1e-12, abs=1e-15
        ), key


def test_one_rank_global_batch_logs_the_last_step_at_close_as_the_local_one(
    one_rank_group, tmp_path
):
    # every=3 over 5 steps: step 4 is logged by close(), through the ranks' agreement when the
    # batch is global, with the quantities that read no gradient
    generator = torch.Generator().manual_seed(3)
    batches = [torch.randn(12, 6, generator=generator) for _ in range(5)]
    labels = torch.arange(12) % 3

    class GradientSum(Quantity):  # a user's quantity reading the gradient, unguarded
        name = "gradient_sum"
        needs = frozenset({"embedding_grad"})
        keys = ("gradient_sum",)

        def compute(self, batch):
            return {"gradient_sum": batch.embedding_grad.double().sum()}

    class LossAtCall(Quantity):  # a user's quantity that takes its value at the call
        name = "loss_at_call"
        needs = frozenset({"loss"})
        keys = ("loss_at_call",)

        def at_call(self, batch):
            batch.loss_at_call = batch.loss.double()

        def compute(self, batch):  # gathered: at_call's view is the local one
            return {"loss_at_call": (batch.local or batch).loss_at_call}

    def run(distributed):
        folder = tmp_path / distributed
        quantities = [cls(every(3)) for cls in PRESETS["full"]]
        quantities += [GradientSum(every(3)), LossAtCall(every(3))]
        with Monitor(folder, 0.1, quantities=quantities, distributed=distributed) as monitor:
            watched = monitor.watch(gradlab.SmoothAPLoss(0.1))
            for embeddings in batches:
                watched(embeddings.clone().requires_grad_(), labels).backward()
                monitor.step()
        return read_jsonl(folder / "metrics.jsonl")[1]

    local = run("local")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the batch read again at close asks for no gradient
        gathered = run("auto")
    assert [record["step"] for record in local] == [0, 3, 4]
    assert {"p_seed", "loss_at_call"} <= set(local[-1])
    assert not {"embedding_grad_norm", "gradient_sum"} & set(local[-1])
    assert [record.keys() for record in gathered] == [record.keys() for record in local]
    for mine, theirs in zip(local, gathered, strict=True):
        for key, value in mine.items():
            assert (math.isnan(value) and math.isnan(theirs[key])) or theirs[key] == (
                pytest.approx(value, rel=1e-12, abs=1e-15)), key


def test_an_unreadable_call_names_what_it_got_in_full(tmp_path):
    with Monitor(tmp_path, quantities=[Loss(every(1))], strict=True) as monitor:
        watched = monitor.watch(lambda *args: torch.zeros(()))
        with pytest.raises(GradlabError) as raised:
            watched(torch.zeros(4, 3), 5)
        expected = (
            "Monitor cannot read this loss call: expected loss(embeddings [B, d], labels [B]) or "
            "loss(queries [Q, d], candidates=[C, d], positives=[Q, C] bool); got 2 "
            "argument(s): (Tensor[4, 3], int); the call's arguments: args[0]=Tensor[4, 3], "
            "args[1]=int"
        )
        assert str(raised.value) == expected
        with pytest.raises(GradlabError) as raised:
            watched()
        assert str(raised.value).endswith("; got no argument; the call's arguments: no argument")
        with pytest.raises(GradlabError) as raised:
            watched(torch.zeros(6), torch.zeros(2, 2))
        assert str(raised.value).endswith(
            "got 2 argument(s): (Tensor[6], Tensor[2, 2]): the first argument is a 1-D "
            "torch.float32 tensor, not a 2-D float one; the call's arguments: "
            "args[0]=Tensor[6], args[1]=Tensor[2, 2]"
        )


def test_the_first_unreadable_call_warns_with_the_whole_message(tmp_path):
    with Monitor(tmp_path, quantities=[Loss(every(1))]) as monitor:
        watched = monitor.watch(lambda *args: torch.zeros(()))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            watched(torch.zeros(4, 3))
            watched(torch.zeros(4, 3))
    assert [str(w.message) for w in caught] == [
        "gradlab.Monitor: a loss call it cannot read was not logged (expected loss(embeddings "
        "[B, d], labels [B]) or loss(queries [Q, d], candidates=[C, d], positives=[Q, C] bool); "
        "got 1 argument(s): (Tensor[4, 3]); the call's arguments: args[0]=Tensor[4, 3]); "
        "training goes on, later such calls are "
        "skipped silently (strict=True raises instead)"
    ]
    assert monitor.skipped_calls == 2


class Failing(Quantity):
    name = "failing"

    def compute(self, batch):
        raise ValueError("no value")


def test_a_disabled_quantity_keeps_the_formatted_traceback(tmp_path):
    with Monitor(tmp_path, quantities=[Failing(every(1)), Loss(every(1))]) as monitor:
        loss_fn = monitor.watch(lambda e, y: e.sum())
        with pytest.warns(RuntimeWarning) as caught:
            loss_fn(torch.randn(4, 2, requires_grad=True), torch.arange(4)).backward()
            monitor.step()
    message = monitor.disabled["failing"]
    lines = message.splitlines()
    assert lines[0] == "Traceback (most recent call last):" and lines[-1] == "ValueError: no value"
    assert all(line.startswith("  ") for line in lines[1:-1])  # frames, nothing between them
    assert str(caught[0].message) == (
        "gradlab.Monitor: step 0: quantity 'failing' raised in compute() and is disabled "
        f"(strict=True raises instead):\n{message}"
    )


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda m: m.attach(5, torch.zeros(3)), "module must be a torch.nn.Module; got int 5"),
        (
            lambda m: m.attach(torch.nn.Identity(), 5),
            "labels must be a tensor or a zero-argument callable returning one; got int 5",
        ),
    ],
)
def test_attach_errors_in_full(tmp_path, call, message):
    with Monitor(tmp_path) as monitor, pytest.raises(GradlabError) as raised:
        call(monitor)
    assert str(raised.value) == message


def test_attach_reads_a_labels_tensor_and_the_embeddings_after_a_score_watch(tmp_path):
    model = torch.nn.Linear(3, 4)
    images, labels = torch.randn(6, 3), torch.tensor([0, 0, 1, 1, 2, 2])
    with Monitor(tmp_path, preset="default", every=1) as monitor:
        monitor.watch(lambda s, p: s.sum(), inputs="scores")  # the watch is for scores...
        monitor.attach(model, labels)  # ...the hook still reads embeddings, labels a tensor
        embeddings = model(images)
        embeddings.sum().backward()
        record = monitor.step()
    # Read as in-batch embeddings (cosine scores), not as a score matrix.
    vectors = embeddings.detach().double().tolist()
    rows = [[cosine(a, b) for b in vectors] for a in vectors]
    expected = sum(proportion(r, 0.01, 0.005) for r in rows) / len(rows)
    assert record["p_seed"] == pytest.approx(expected, rel=1e-6)


class OddShapes(Quantity):
    name = "odd_shapes"
    keys = ("one_element", "count", "flag")

    def compute(self, batch):
        return {"one_element": torch.tensor([2.5], dtype=torch.float32),
                "count": torch.tensor(7), "flag": torch.tensor(True)}  # fmt: skip


def test_a_quantity_may_return_one_element_tensors_of_any_dtype(tmp_path):
    with Monitor(tmp_path, quantities=[OddShapes(every(1))], strict=True) as monitor:
        monitor.watch(lambda e, y: e.sum())(torch.randn(3, 2), torch.arange(3))
        record = monitor.step()
    assert record == {"step": 0, "one_element": 2.5, "count": 7.0, "flag": 1.0}
    assert all(type(value) is float for key, value in record.items() if key != "step")


def test_a_score_loss_watched_as_an_embedding_loss_is_told_to_say_inputs_scores(tmp_path):
    # loss(scores [Q, C], positives [Q, C] bool) is not an embedding loss's call: the warning
    # names the form it has and the one-word fix
    with Monitor(tmp_path, quantities=[Loss(every(1))]) as monitor:
        watched = monitor.watch(lambda scores, positives: scores.logsumexp(dim=1).mean())
        with pytest.warns(RuntimeWarning) as caught:
            watched(torch.zeros(6, 6), torch.eye(6, dtype=torch.bool))
    (message,) = [str(w.message) for w in caught]
    assert "the form of a loss on a score matrix: watch it with watch(loss, " \
           "inputs='scores'), the Monitor's or a callback's" in message  # fmt: skip
