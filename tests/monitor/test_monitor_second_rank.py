"""The Monitor's logged steps under ``torch.distributed``, in process, beside a simulated rank.

A one-rank gloo group makes the Monitor gather; ``get_world_size``, ``all_gather`` and
``all_reduce`` are replaced by a second rank that holds the same values as this one (so a record
holds this rank's values) but offers another checksum (its batch is another one), and whose
offer at the step agreement can be changed: another step
number (it skipped ``monitor.step()``: the ranks are out of step) or no batch (its loss call
was not read: the step is skipped on every rank). The expectations are the documented contract
of :class:`gradlab.Monitor`: which steps are written, the counters, the one warning and its
words, and how many collectives a logged step costs.
"""

from __future__ import annotations

import hashlib
import inspect
import warnings

import pytest
import torch

import gradlab
from gradlab.monitor import read_jsonl
from tests.helpers.second_rank import MirrorRank

ROWS, WIDTH = 6, 4
def _batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(step)
    embeddings = torch.randn(ROWS, WIDTH, generator=generator, dtype=torch.float64)
    return embeddings.requires_grad_(True), torch.arange(ROWS) % 2


def _train(monitor: gradlab.Monitor, steps: int) -> tuple[list, list[float]]:
    """Train ``steps`` steps; returns what each ``monitor.step()`` returned and the losses."""
    loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
    returned, losses = [], []
    for step in range(steps):
        embeddings, labels = _batch(step)
        loss = loss_fn(embeddings, labels)
        loss.backward()
        losses.append(float(loss))
        returned.append(monitor.step())
    return returned, losses


def _run(tmp_path, steps: int):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        monitor = gradlab.Monitor(tmp_path / "run", preset="cheap", every=1)
        returned, losses = _train(monitor, steps)
        monitor.close()
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    return monitor, returned, losses, records, caught


def _runtime_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if w.category is RuntimeWarning]


def test_ranks_that_agree_log_every_step_with_one_exchange_per_tensor(tmp_path, one_rank_group,
                                                                       monkeypatch):  # fmt: skip
    rank1 = MirrorRank(monkeypatch)
    monitor, returned, losses, records, caught = _run(tmp_path, steps=3)
    assert [r["step"] for r in records] == [0, 1, 2]
    assert [r["step"] for r in returned] == [0, 1, 2]
    # the mean over two ranks that computed the same loss
    assert [r["loss"] for r in records] == pytest.approx(losses, rel=1e-12)
    assert _runtime_warnings(caught) == []
    assert (monitor.skipped_steps, monitor.out_of_step) == (0, None)
    # per logged step: the agreement, then embeddings, labels and their gradient, each once
    # (the agreed row counts are reused: no exchange of sizes); the loss averaged once
    assert rank1.gathers == ["start", *["offer", "rows", "rows", "rows"] * 3]  # start: once
    assert rank1.reduces == 3


def test_a_rank_without_a_batch_skips_the_step_counts_it_and_warns_once(tmp_path, one_rank_group,
                                                                        monkeypatch):  # fmt: skip
    def no_batch_at_odd_steps(step, offer):
        return offer[:2] + [0] * 7 if step % 2 else offer

    MirrorRank(monkeypatch, no_batch_at_odd_steps)
    monitor, returned, _, records, caught = _run(tmp_path, steps=5)
    assert [r["step"] for r in records] == [0, 2, 4]
    assert [r is None for r in returned] == [False, True, False, True, False]
    assert monitor.skipped_steps == 2
    assert monitor.out_of_step is None
    assert _runtime_warnings(caught) == [
        "gradlab.Monitor: step 1 is not logged on any rank: rank 1 has no batch for step 1 "
        "(its loss call was not read, or raised); later such steps are counted in "
        "monitor.skipped_steps without a warning"
    ]


def test_ranks_out_of_step_stop_logging_for_the_rest_of_the_run(tmp_path, one_rank_group,
                                                                 monkeypatch):  # fmt: skip
    def one_step_ahead_at_step_2(step, offer):
        return [step + 1, *offer[1:]] if step == 2 else offer

    MirrorRank(monkeypatch, one_step_ahead_at_step_2)
    monitor, returned, _, records, caught = _run(tmp_path, steps=5)
    # the ranks agree again after step 2, but the run is not trusted any more
    assert [r["step"] for r in records] == [0, 1, 2]
    assert [r is None for r in returned] == [False, False, True, True, True]
    assert monitor.skipped_steps == 0
    where = ("the ranks are out of step (rank 0 at step 2 after 3 watched call(s), rank 1 at "
             "step 3 after 3 watched call(s))")  # fmt: skip
    assert monitor.out_of_step == f"at step 2, {where}"
    # the log ends with why: a record of the step alone, naming every quantity (its keys end)
    assert records[2] == {"step": 2, "disabled": {
        q.name: f"step 2: {where}; the Monitor stops logging" for q in monitor.quantities}}
    assert _runtime_warnings(caught) == [
        f"gradlab.Monitor: at step 2, {where}: a rank skipped monitor.step() or called the loss "
        "more often than the others. The Monitor stops logging for the rest of the run rather "
        "than mix the ranks' steps; call monitor.step() once per optimizer step on every rank"
    ]


def test_a_rank_with_a_watched_call_more_at_the_same_step_is_told_that_cause(
    tmp_path, one_rank_group, monkeypatch
):
    # an extra micro-batch on rank 1 (its steps called monitor.step() as the others did) was
    # told to call monitor.step() once per optimizer step, which it did
    def a_call_more_at_step_2(step, offer):
        return [offer[0], offer[1] + 1, *offer[2:]] if step == 2 else offer

    MirrorRank(monkeypatch, a_call_more_at_step_2)
    monitor, _, _, records, caught = _run(tmp_path, steps=4)
    assert monitor.out_of_step.startswith("at step 2, the ranks are out of step")
    assert [r["step"] for r in records] == [0, 1, 2]  # it stops logging all the same
    where = ("the ranks are out of step (rank 0 at step 2 after 3 watched call(s), rank 1 at "
             "step 2 after 4 watched call(s))")  # fmt: skip
    assert _runtime_warnings(caught) == [
        f"gradlab.Monitor: at step 2, {where}: a rank made a watched call the others did not "
        "(an extra micro-batch, or a call with gradients on outside training). The Monitor "
        "stops logging for the rest of the run rather than mix the ranks' calls; make the same "
        "watched calls on every rank between two monitor.step() calls, and run a call that is "
        "not trained under torch.no_grad()"
    ]


def test_a_rank_that_evaluates_alone_before_training_stays_in_step(tmp_path, one_rank_group,
                                                                  monkeypatch):  # fmt: skip
    # a no_grad evaluation on rank 0 alone before the first training call counted as a call,
    # and the ranks were out of step from step 0 (nothing logged for the whole run)
    def one_training_call_per_step(step, offer):  # rank 1 evaluated nothing
        return [offer[0], step + 1, *offer[2:]]

    MirrorRank(monkeypatch, one_training_call_per_step)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        monitor = gradlab.Monitor(tmp_path / "run", preset="cheap", every=1)
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        with torch.no_grad():  # two evaluation batches, both before training
            loss_fn(*_batch(98))
            loss_fn(*_batch(99))
        _, losses = _train(monitor, steps=3)
        monitor.close()
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [r["step"] for r in records] == [0, 1, 2]
    assert [r["loss"] for r in records] == pytest.approx(losses, rel=1e-12)  # the training's
    assert (monitor.out_of_step, _runtime_warnings(caught)) == (None, [])


def test_ranks_out_of_step_exchange_nothing_more_at_close(tmp_path, one_rank_group,
                                                          monkeypatch):  # fmt: skip
    # step 3, skipped by the schedule, is not logged at close: no rank may wait there for an
    # agreement the others, which stopped logging too, never offer
    rank1 = MirrorRank(monkeypatch, lambda step, offer: [step + 1, *offer[1:]] if step == 2
                       else offer)  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path / "run", preset="cheap", every=2) as monitor:
            _train(monitor, steps=4)  # 0 and 2 on schedule; out of step at 2
            exchanged = list(rank1.gathers)
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [sorted(r) for r in records][1:] == [["disabled", "step"]]  # step 2: the note alone
    assert [r["step"] for r in records] == [0, 2]
    assert rank1.gathers == exchanged  # close() offered nothing
    assert len(_runtime_warnings(caught)) == 1


def test_the_distributed_warnings_point_at_the_callers_step_and_close(tmp_path, one_rank_group,
                                                                      monkeypatch):  # fmt: skip
    def skipped_then_out_of_step(step, offer):
        if step == 1:  # skipped at monitor.step()
            return offer[:2] + [0] * 7
        if step == 3:  # out of step at close(), which logs the step the schedule skipped
            return [step + 1, *offer[1:]]
        return offer

    MirrorRank(monkeypatch, skipped_then_out_of_step)
    every_other = [gradlab.monitor.Loss(lambda step: step % 2 == 1 and step < 3)]
    monitor = gradlab.Monitor(tmp_path / "run", quantities=every_other)
    loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
    lines = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in range(4):
            embeddings, labels = _batch(step)
            loss_fn(embeddings, labels).backward()
            lines.append(inspect.currentframe().f_lineno + 1)
            monitor.step()
        close_line = inspect.currentframe().f_lineno + 1
        monitor.close()
    told = [w for w in caught if w.category is RuntimeWarning]
    assert [("not logged on any rank" in str(w.message), "out of step" in str(w.message))
            for w in told] == [(True, False), (False, True)]  # fmt: skip
    assert [(w.filename, w.lineno) for w in told] == [(__file__, lines[1]), (__file__, close_line)]


def test_ranks_that_hold_the_same_batch_log_it_once_and_warn_once(tmp_path, one_rank_group,
                                                                  monkeypatch):  # fmt: skip
    # rank 1 offers this rank's own checksum: the loss is called on the batch every rank
    # gathered, so the Monitor gathers no second copy of it
    rank1 = MirrorRank(monkeypatch, lambda step, offer: [*offer[:-1], offer[-1] - 1])
    _, _, losses, records, caught = _run(tmp_path, steps=3)
    assert [r["step"] for r in records] == [0, 1, 2]
    assert [r["loss"] for r in records] == pytest.approx(losses, rel=1e-12)
    assert rank1.gathers == ["start", *["offer"] * 3]  # no rows exchanged; the loss averaged
    # once a step
    assert rank1.reduces == 3
    expected_norms = [float(_batch(step)[0].detach().norm(dim=1).mean()) for step in range(3)]
    assert [r["embedding_norm_mean"] for r in records] == pytest.approx(expected_norms)
    told = _runtime_warnings(caught)
    assert told == [
        f"gradlab.Monitor: at step 0 every rank holds the same batch ({ROWS} rows, the same "
        "values and labels): the watched loss is called on embeddings gathered from every rank "
        "already, or every rank loads the same data (a DataLoader without a "
        "DistributedSampler). The Monitor reads that batch once rather than gather one copy "
        "per rank; pass distributed='local' when the loss sees the global batch (later such "
        "steps are not warned about)"
    ]


def test_the_header_of_a_batch_every_rank_holds_alike_says_it_was_not_gathered(
    tmp_path, one_rank_group, monkeypatch
):
    # the Monitor reads that batch once (it warns so), but the header said "gathered": true
    MirrorRank(monkeypatch, lambda step, offer: [*offer[:-1], offer[-1] - 1])
    _run(tmp_path, steps=2)
    headers, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [r["step"] for r in records] == [0, 1]
    assert [header.get("distributed") for header in headers] == [
        {"world_size": 2, "mode": "auto", "gathered": False}]  # fmt: skip


@pytest.mark.parametrize("cross_modal", [False, True])
def test_the_header_of_a_loss_read_on_each_ranks_own_call_says_it_was_not_gathered(
    tmp_path, one_rank_group, monkeypatch, cross_modal
):
    # a score matrix (NT-Xent's), or queries against candidates, is read on rank 0's own call,
    # as its records describe; the header said "gathered": true
    MirrorRank(monkeypatch)
    with gradlab.Monitor(tmp_path / "run", preset="cheap", every=1) as monitor:
        loss_fn = monitor.watch(gradlab.NTXentLoss() if not cross_modal
                                else gradlab.SmoothAPLoss(0.05))  # fmt: skip
        for step in range(2):
            queries, candidates = _batch(step)[0], _batch(step + 10)[0]
            if cross_modal:
                loss = loss_fn(queries, candidates=candidates, positives=torch.eye(ROWS) > 0)
            else:
                loss = loss_fn(queries @ candidates.T, torch.arange(ROWS))
            loss.backward()
            monitor.step()
    headers, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [r["step"] for r in records] == [0, 1]
    assert [header.get("distributed") for header in headers] == [
        {"world_size": 2, "mode": "auto", "gathered": False}]  # fmt: skip


def test_the_last_step_logged_at_close_reads_a_batch_held_alike_once(tmp_path, one_rank_group,
                                                                     monkeypatch):  # fmt: skip
    # as at a scheduled step: the agreement at close says the batch is every rank's, so it is
    # read once (a batch held twice would make every point's copy one of its positives)
    def run(distributed):
        with gradlab.Monitor(tmp_path / distributed, preset="default", every=2,
                             distributed=distributed) as monitor:  # fmt: skip
            _train(monitor, steps=4)  # 0 and 2 on schedule, 3 at close
        return read_jsonl(tmp_path / distributed / "metrics.jsonl")[1]

    local = run("local")
    MirrorRank(monkeypatch, lambda step, offer: [*offer[:-1], offer[-1] - 1])
    with pytest.warns(RuntimeWarning, match="every rank holds the same batch"):
        gathered = run("auto")
    assert [r["step"] for r in gathered] == [r["step"] for r in local] == [0, 2, 3]
    for mine, theirs in zip(local, gathered, strict=True):  # margins would count each copy
        assert theirs.keys() == mine.keys()
        for key, value in mine.items():
            assert theirs[key] == pytest.approx(value, rel=1e-12, nan_ok=True), key


def test_a_score_matrix_held_alike_is_no_gathered_batch_to_warn_about(tmp_path, one_rank_group,
                                                                      monkeypatch):  # fmt: skip
    # a loss on a score matrix is read on this rank's own matrix, never gathered: the same
    # checksum on both ranks is no copy of a batch
    MirrorRank(monkeypatch, lambda step, offer: [*offer[:-1], offer[-1] - 1])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path / "run", preset="cheap", every=1) as monitor:
            loss_fn = monitor.watch(gradlab.NTXentLoss(0.1))
            for step in range(2):
                scores = _batch(step)[0] @ _batch(step)[0].T
                loss_fn(scores.detach().requires_grad_(True),
                        torch.eye(ROWS, dtype=torch.bool)).backward()  # fmt: skip
                monitor.step()
    assert not [m for m in _runtime_warnings(caught) if "same batch" in m]


def test_a_rank_elsewhere_at_its_first_step_takes_rank_zero_s_and_is_told_where(
    tmp_path, one_rank_group, monkeypatch
):
    # rank 0 (here: the first step's answer) is at step 7 while this rank starts at 0
    import gradlab.monitor.monitor as monitor_module

    devices = []

    def rank_zero_at_seven(step, device=None, plan=0, digest=0):
        devices.append(device)
        return 7

    monkeypatch.setattr(monitor_module, "rank_zero_step", rank_zero_at_seven)
    MirrorRank(monkeypatch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        monitor = gradlab.Monitor(tmp_path / "run", preset="cheap", every=1)
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        embeddings, labels = _batch(0)
        loss_fn(embeddings, labels).backward()
        line = inspect.currentframe().f_lineno + 1
        record = monitor.step()
        monitor.close()
    assert record["step"] == 7 and monitor.step_count == 8
    assert devices == [embeddings.device]  # the exchange on the batch's device
    told = [w for w in caught if w.category is RuntimeWarning]
    assert [str(w.message) for w in told] == [
        "gradlab.Monitor: rank 0 was at step 0 at its first monitor.step(), rank 0 at step 7: "
        "it numbers its steps as rank 0, which writes (resume=True read the run folder before "
        "rank 0 had written its last record, or the folder is not shared between the nodes; "
        "set monitor.step_count alike on every rank)"
    ]
    assert (told[0].filename, told[0].lineno) == (__file__, line)


@pytest.mark.parametrize("where", ["step", "close"])
def test_an_agreement_that_times_out_says_every_rank_must_make_the_monitor(
    tmp_path, one_rank_group, monkeypatch, where
):
    # a Monitor made (or closed) on rank 0 alone: the other rank never joins the agreement,
    # and the process group's timeout is what the user would otherwise read
    timeout = RuntimeError("Timed out waiting 1800000ms for recv operation to complete")

    rank1 = MirrorRank(monkeypatch)  # it joins the first step's exchange, then no other

    def never_joined(out, tensor, *args, **kwargs):
        if not rank1.gathers:
            return rank1.all_gather(out, tensor)
        raise timeout

    monitor = gradlab.Monitor(tmp_path / "run", preset="cheap",
                              every=1 if where == "step" else (lambda step: False))  # fmt: skip
    loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
    embeddings, labels = _batch(0)
    loss_fn(embeddings, labels).backward()
    monkeypatch.setattr(torch.distributed, "all_gather", never_joined)
    with pytest.raises(gradlab.GradlabError) as raised:
        monitor.step()
        monitor.close()  # the last step, which the schedule skipped, is agreed on too
    assert str(raised.value) == (
        f"gradlab.Monitor: the ranks' agreement on step 0 failed (RuntimeError: {timeout}): "
        "another rank ended (see its own error) or never joined. Under torch.distributed every "
        "rank must make the Monitor (only rank 0 writes), call the watched loss and "
        "monitor.step() as often, and close() it: a Monitor made or closed on rank 0 alone "
        "(inside 'if rank == 0:'), or made with distributed='local' on some ranks only, waits "
        "here for ranks that never come until the process group times out. Make it on every "
        "rank with the same distributed=, or pass distributed='local' on every rank to log "
        "rank 0's own batch without collectives"
    )
    assert raised.value.__cause__ is timeout


def test_the_header_names_the_world_size_and_a_resumption_on_another_warns(
    tmp_path, one_rank_group, monkeypatch
):
    # P, the counts and the geometry describe the global batch: a run resumed on another
    # number of processes is not comparable with its records before
    with gradlab.Monitor(tmp_path / "run", preset="cheap", every=1) as one:
        _train(one, 1)  # a one-rank group: the batch is this rank's
    MirrorRank(monkeypatch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path / "run", preset="cheap", every=1, resume=True) as two:
            _train(two, 1)
    headers, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [r["step"] for r in records] == [0, 1]
    assert [header.get("distributed") for header in headers] == [
        {"world_size": 1, "mode": "auto", "gathered": True},
        {"world_size": 2, "mode": "auto", "gathered": True}]  # fmt: skip
    told = [str(w.message) for w in caught if w.category is UserWarning]
    assert len(told) == 1 and "with other settings (distributed {'world_size': 1" in told[0]
    assert "-> {'world_size': 2, 'mode': 'auto', 'gathered': True})" in told[0]


def test_a_rank_numbers_its_steps_as_rank_0_from_its_first_step(tmp_path, one_rank_group,
                                                                 monkeypatch):  # fmt: skip
    # this process plays rank 1, which resumed at step 0 while rank 0 resumed at step 5
    rank1 = MirrorRank(monkeypatch, rank_zero_start=lambda mine: [5, *mine[1:]])
    monkeypatch.setattr(torch.distributed, "get_rank", lambda *a, **k: 1)
    monitor = gradlab.Monitor(tmp_path / "run", preset="cheap", every=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _train(monitor, steps=2)
        monitor.close()
    assert [start[0] for start in rank1.starts] == [0]  # once, at the first step
    assert monitor.step_count == 7
    told = _runtime_warnings(caught)
    assert len(told) == 1
    assert told[0].startswith("gradlab.Monitor: rank 1 was at step 0 at its first monitor.step(), "
                              "rank 0 at step 5: it numbers its steps as rank 0")  # fmt: skip


def test_ranks_that_start_alike_are_told_nothing(tmp_path, one_rank_group, monkeypatch):
    MirrorRank(monkeypatch)
    monitor, _, _, records, caught = _run(tmp_path, steps=2)
    assert [r["step"] for r in records] == [0, 1]
    assert monitor.step_count == 2 and _runtime_warnings(caught) == []


def test_a_first_step_that_no_other_rank_joins_says_every_rank_must_make_the_monitor(
    tmp_path, one_rank_group, monkeypatch
):
    timeout = RuntimeError("Timed out waiting 1800000ms for send operation to complete")

    def never_joined(*args, **kwargs):
        raise timeout

    MirrorRank(monkeypatch)
    monkeypatch.setattr(torch.distributed, "all_gather", never_joined)
    monitor = gradlab.Monitor(tmp_path / "run", preset="cheap", every=1)
    with pytest.raises(gradlab.GradlabError) as raised:
        _train(monitor, steps=1)
    assert str(raised.value).startswith("gradlab.Monitor: the ranks' agreement on their first "
                                        f"step (0 here) failed (RuntimeError: {timeout})")
    assert "every rank must make the Monitor" in str(raised.value)
    assert raised.value.__cause__ is timeout


def test_a_monitor_that_never_stepped_agrees_on_no_last_step(tmp_path, one_rank_group,
                                                             monkeypatch):  # fmt: skip
    # a resumed Monitor closed before its first step (a phase of no steps) has no last step of
    # its own: its ranks, which may have read other starts from the folder, exchange nothing
    with gradlab.Monitor(tmp_path / "run", preset="cheap", every=1) as first:
        _train(first, 3)
    rank1 = MirrorRank(monkeypatch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = gradlab.Monitor(tmp_path / "run", preset="cheap", every=lambda step: step == 0,
                                resume=True)  # fmt: skip
        again.watch(gradlab.SmoothAPLoss(0.05))
        again.close()
    assert rank1.gathers == [] and rank1.reduces == 0
    assert _runtime_warnings(caught) == []
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [r["step"] for r in records] == [0, 1, 2]


def test_a_rank_zero_that_logs_other_steps_is_refused_at_the_first_step(tmp_path, one_rank_group,
                                                                         monkeypatch):  # fmt: skip
    # this process plays rank 1 (every step); rank 0 logs every third step from step 0
    every_third = sum(1 << k for k in range(0, 62, 3))
    MirrorRank(monkeypatch, rank_zero_start=lambda mine: [mine[0], every_third, mine[2] + 1])
    monitor = gradlab.Monitor(tmp_path / "run", preset="cheap", every=1)
    with pytest.raises(gradlab.GradlabError) as raised:
        _train(monitor, steps=1)
    assert str(raised.value) == (
        "gradlab.Monitor: the ranks' Monitors log different steps from step 0: rank 0 logs "
        "steps 0, 3, 6, 9, 12, ..., rank 1 logs steps 0, 1, 2, 3, 4, ...; under "
        "torch.distributed every rank's Monitor must log the same steps (the same every=, "
        "preset and quantities' schedules; a schedule of your own that raises reads as logging "
        "no step where it raises, so it must raise alike on every rank): each would wait at a "
        "step another does not log until the process group times out")


def test_ranks_that_part_after_the_first_62_steps_are_refused_too(tmp_path, one_rank_group,
                                                                   monkeypatch):  # fmt: skip
    # every=100 and every=200 log the same first 62 steps (step 0 alone), then part at 100
    def rank_zero_every_200(mine):
        logs = [k % 200 == 0 for k in range(4096)]
        digest = int.from_bytes(hashlib.blake2b(bytes(logs), digest_size=7).digest(), "little")
        return [mine[0], mine[1], digest]

    rank1 = MirrorRank(monkeypatch, rank_zero_start=rank_zero_every_200)
    monitor = gradlab.Monitor(tmp_path / "run", preset="cheap", every=100)
    with pytest.raises(gradlab.GradlabError) as raised:
        _train(monitor, steps=1)
    assert rank1.starts[0][1] == 1  # the same first 62 steps: step 0 alone
    assert str(raised.value) == (
        "gradlab.Monitor: the ranks' Monitors log different steps from step 0: rank 0 and "
        "rank 1 log the same steps up to step 61, not later ones (before step 4096); under "
        "torch.distributed every rank's Monitor must log the same steps (the same every=, "
        "preset and quantities' schedules; a schedule of your own that raises reads as logging "
        "no step where it raises, so it must raise alike on every rank): each would wait at a "
        "step another does not log until the process group times out")


def test_ranks_with_one_schedule_agree_on_its_steps_past_the_first_62(tmp_path, one_rank_group,
                                                                      monkeypatch):  # fmt: skip
    # rank 0 offers the plan and digest of the same schedule (steps 0 and 73 of every 200,
    # so that steps counted backwards would differ), computed here as the protocol states
    # them: the first 62 steps as bits, then a blake2b of the first 4096 as bytes
    from gradlab.monitor.quantities import Loss

    def schedule(step: int) -> bool:
        return step % 200 in (0, 73)

    def rank_zero_alike(mine):
        logs = [schedule(k) for k in range(4096)]
        plan = sum(1 << k for k in range(62) if logs[k])
        digest = int.from_bytes(hashlib.blake2b(bytes(logs), digest_size=7).digest(), "little")
        return [0, plan, digest]

    rank1 = MirrorRank(monkeypatch, rank_zero_start=rank_zero_alike)
    with gradlab.Monitor(tmp_path / "run", quantities=[Loss(schedule)]) as monitor:
        _train(monitor, steps=1)
    assert rank1.starts[0] == rank_zero_alike(None)  # this rank offered the same
    assert [r["step"] for r in read_jsonl(tmp_path / "run" / "metrics.jsonl")[1]] == [0]


def test_a_run_resumed_with_its_batch_read_once_is_no_other_setting(tmp_path, one_rank_group,
                                                                    monkeypatch):  # fmt: skip
    # "gathered" follows the data of a run's first step: a run written by an earlier gradlab
    # (gathered: true) and resumed unchanged warned of "other settings"
    with pytest.MonkeyPatch.context() as first:
        MirrorRank(first)  # another batch on rank 1: gathered
        with gradlab.Monitor(tmp_path / "run", preset="cheap", every=1) as one:
            _train(one, 1)
    MirrorRank(monkeypatch, lambda step, offer: [*offer[:-1], offer[-1] - 1])  # the same batch
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path / "run", preset="cheap", every=1, resume=True) as two:
            _train(two, 1)
    headers, _ = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [header["distributed"]["gathered"] for header in headers] == [True, False]
    assert not [w for w in caught if "other settings" in str(w.message)]


@pytest.mark.parametrize(("plan", "said"), [
    (0, "no step"),  # none of the first 62
    (0b11111, "steps 0, 1, 2, 3, 4"),  # five: all of them, no ellipsis
    (0b111111, "steps 0, 1, 2, 3, 4, ..."),  # six: the first five
])  # fmt: skip
def test_the_refusal_names_the_steps_rank_0_would_log(tmp_path, one_rank_group, monkeypatch,
                                                      plan, said):  # fmt: skip
    MirrorRank(monkeypatch, rank_zero_start=lambda mine: [mine[0], plan, mine[2] + 1])
    monitor = gradlab.Monitor(tmp_path / "run", preset="cheap", every=1)
    with pytest.raises(gradlab.GradlabError) as raised:
        _train(monitor, steps=1)
    assert str(raised.value).startswith(
        f"gradlab.Monitor: the ranks' Monitors log different steps from step 0: rank 0 logs "
        f"{said}, rank 1 logs steps 0, 1, 2, 3, 4, ...; under torch.distributed")


def test_a_run_resumed_with_distributed_local_is_another_setting(tmp_path, one_rank_group,
                                                                  monkeypatch):  # fmt: skip
    # from the global batch to rank 0's own: the records are not comparable
    MirrorRank(monkeypatch)
    with gradlab.Monitor(tmp_path / "run", preset="cheap", every=1) as one:
        _train(one, 1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path / "run", preset="cheap", every=1, resume=True,
                             distributed="local") as two:  # fmt: skip
            _train(two, 1)
    told = [str(w.message) for w in caught if "other settings" in str(w.message)]
    assert len(told) == 1 and ("distributed {'world_size': 2, 'mode': 'auto', 'gathered': "
                               "True} -> {'world_size': 2, 'mode': 'local', 'gathered': "
                               "False}") in told[0]  # fmt: skip


class _RaisesAtCall(gradlab.monitor.Quantity):
    """A quantity of the user's own whose ``at_call`` raises at the call of step ``at``."""

    name = "raises_at_call"
    keys = ("raises_at_call_mean",)
    needs = frozenset({"embeddings"})

    def __init__(self, at: int) -> None:
        super().__init__(gradlab.monitor.every(1))
        self.at, self.calls = at, 0

    def at_call(self, batch):
        self.calls += 1
        if self.calls - 1 == self.at:
            raise KeyError("at its call")

    def compute(self, batch):
        return {"raises_at_call_mean": batch.embeddings.double().mean()}


NOTE = "raised in at_call(): KeyError: 'at its call'"


@pytest.mark.parametrize("case", ["rank 1 skips it", "alone", "out of step"])
@pytest.mark.parametrize("at", [0, 1])
def test_a_note_alone_is_written_at_its_step_under_a_header_that_names_the_device(
        tmp_path, one_rank_group, monkeypatch, case, at):  # fmt: skip
    # a step that logs no value but a note: rank 1 has no batch for it (the step is skipped
    # on every rank), its one quantity was disabled on rank 0 at the call, or the ranks are out
    # of step there; at step 0 the note is the run's first record, and its header still says
    # where the batch lay
    offers = {"rank 1 skips it": lambda step, offer: offer[:2] + [0] * 7 if step == at else offer,
              "out of step": lambda step, offer: [step + 1, *offer[1:]] if step == at else offer}
    MirrorRank(monkeypatch, offers.get(case))
    quantities = {"rank 1 skips it": [gradlab.monitor.Loss(gradlab.monitor.every(1)),
                                      _RaisesAtCall(at)],
                  "alone": [_RaisesAtCall(at)],
                  "out of step": [gradlab.monitor.Loss(gradlab.monitor.every(1))]}[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        monitor = gradlab.Monitor(tmp_path / "run", quantities=quantities)
        _train(monitor, steps=3)
        monitor.close()
    headers, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [header["device"] for header in headers] == ["cpu"]
    notes = [record for record in records if "disabled" in record]
    name = quantities[-1].name
    why = f"step {at}: {NOTE}" if case != "out of step" else (
        f"step {at}: the ranks are out of step (rank 0 at step {at} after {at + 1} watched "
        f"call(s), rank 1 at step {at + 1} after {at + 1} watched call(s)); the Monitor stops "
        "logging")  # fmt: skip
    assert notes == [{"step": at, "disabled": {name: why}}]
    assert [record["step"] for record in records].index(at) == at  # in its place, at its step
