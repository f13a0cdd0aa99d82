"""A quantity the Monitor disables during a run is named in the log, not only in a warning.

Before, a quantity that raised (or returned what it cannot log) at step N was disabled with a
``RuntimeWarning`` and its keys simply stopped in ``metrics.jsonl``: a reader of the log, or
of ``gradlab plot``'s figures, could not tell a disabled quantity from a schedule that ended.
The first record written after the disabling carries ``{"disabled": {name: why}}``.
"""

from __future__ import annotations

import csv
import json
import warnings

import pytest
import torch

import gradlab
from gradlab.monitor import Loss, Monitor, Quantity, every, read_jsonl
from gradlab.plotting.monitor import load_runs


class Flaky(Quantity):
    """A quantity of the user's own that fails in one of its methods at one step."""

    name = "flaky"
    keys = ("flaky_mean",)
    needs = frozenset({"embeddings"})

    def __init__(self, fails_in, at_step, schedule=None):
        super().__init__(schedule)
        self.fails_in, self.at_step, self.calls = fails_in, at_step, 0

    def at_call(self, batch):
        self.calls += 1
        if self.fails_in == "at_call" and self.calls - 1 == self.at_step:
            raise KeyError("boom")

    def not_applicable(self, loss_fn):
        # asked at watch() and again at each logged call: it can serve until its step
        if self.fails_in == "not_applicable" and self.calls > self.at_step:
            return "the loss stopped giving embeddings"
        return None

    def compute(self, batch):
        if self.fails_in == "compute" and self.calls - 1 == self.at_step:
            raise ValueError("no value")
        return {"flaky_mean": batch.embeddings.double().mean()}


def _plot_warnings(log_dir) -> list[str]:
    """What ``gradlab plot`` reading ``log_dir`` warns of (it warns at least once), each
    warning pointing at the line that asked for the runs."""
    with pytest.warns(UserWarning) as caught:
        load_runs([log_dir])
    assert [w.filename for w in caught] == [__file__] * len(caught)
    return [str(w.message) for w in caught]


def _train(log_dir, quantities, steps=3, sinks=("jsonl",)):
    generator = torch.Generator().manual_seed(0)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        with Monitor(log_dir, quantities=quantities, sinks=list(sinks)) as monitor:
            loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.1))
            for _ in range(steps):
                embeddings = torch.randn(8, 4, generator=generator, requires_grad=True)
                loss_fn(embeddings, torch.arange(8) % 2).backward()
                monitor.step()
    return read_jsonl(log_dir / "metrics.jsonl")[1]


def test_a_quantity_that_raises_mid_run_is_named_in_that_steps_record_alone(tmp_path):
    records = _train(tmp_path, [Loss(every(1)), Flaky("compute", at_step=1)])
    assert [r["step"] for r in records] == [0, 1, 2]
    assert [("flaky_mean" in r, "disabled" in r) for r in records] == [
        (True, False), (False, True), (False, False)]  # fmt: skip
    assert records[1]["disabled"] == {"flaky": "step 1: raised in compute(): ValueError: no value"}


def test_a_quantity_that_was_alone_gets_a_record_of_its_note(tmp_path):
    # nothing else is due on the step it failed at: the note is not left waiting for a record
    records = _train(tmp_path, [Flaky("at_call", at_step=1)])
    assert records[0].keys() == {"step", "flaky_mean"}
    assert records[1:] == [{"step": 1, "disabled": {
        "flaky": "step 1: raised in at_call(): KeyError: 'boom'"}}]  # fmt: skip


def test_a_note_alone_as_the_runs_first_record_comes_with_the_batchs_device(tmp_path):
    # the call read a batch (then its only quantity raised): the header says where it lay
    records = _train(tmp_path, [Flaky("at_call", at_step=0)], steps=1)
    assert records == [{"step": 0, "disabled": {
        "flaky": "step 0: raised in at_call(): KeyError: 'boom'"}}]  # fmt: skip
    headers, _ = read_jsonl(tmp_path / "metrics.jsonl")
    assert [header["device"] for header in headers] == ["cpu"]


def test_a_quantity_the_loss_cannot_serve_after_all_is_named_in_the_log(tmp_path):
    # the header was written at step 0, when the quantity could still be served
    records = _train(tmp_path, [Loss(every(1)), Flaky("not_applicable", at_step=1)])
    header = read_jsonl(tmp_path / "metrics.jsonl")[0]
    assert "not_logged" not in header
    notes = [(r["step"], r["disabled"]) for r in records if "disabled" in r]
    assert notes == [(1, {"flaky": "step 1: the loss stopped giving embeddings"})]


def test_the_csv_sink_leaves_the_note_out(tmp_path):
    _train(tmp_path, [Loss(every(1)), Flaky("compute", at_step=1)], sinks=("jsonl", "csv"))
    with open(tmp_path / "metrics.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [row["step"] for row in rows] == ["0", "1", "2"]
    assert "disabled" not in rows[0] and rows[1]["flaky_mean"] == ""


def test_gradlab_plot_says_which_quantity_was_disabled_and_why(tmp_path):
    _train(tmp_path, [Loss(every(1)), Flaky("compute", at_step=1)])
    assert _plot_warnings(tmp_path) == [
        f"{tmp_path / 'metrics.jsonl'}: the Monitor disabled the quantity 'flaky' (step 1: "
        "raised in compute(): ValueError: no value) during the run: its keys end there"
    ]


class OtherFlaky(Flaky):
    """A second quantity of the user's own that fails in one of its methods at one step."""

    name = "other_flaky"
    keys = ("other_flaky_mean",)

    def compute(self, batch):
        return {"other_flaky_mean": super().compute(batch)["flaky_mean"]}


def test_gradlab_plot_names_two_disabled_quantities_in_one_sentence(tmp_path):
    _train(tmp_path, [Loss(every(1)), Flaky("compute", at_step=1),
                      OtherFlaky("compute", at_step=2)], steps=4)  # fmt: skip
    assert _plot_warnings(tmp_path) == [
        f"{tmp_path / 'metrics.jsonl'}: the Monitor disabled the quantities 'flaky' (step 1: "
        "raised in compute(): ValueError: no value); 'other_flaky' (step 2: raised in "
        "compute(): ValueError: no value) during the run: their keys end there"
    ]


def test_gradlab_plot_says_a_reason_shared_by_several_quantities_once(tmp_path):
    # ranks out of step disable every quantity with one reason: it was said once per quantity
    _train(tmp_path, [Loss(every(1)), Flaky("compute", at_step=1)], steps=3)
    log = tmp_path / "metrics.jsonl"
    lines = log.read_text(encoding="utf-8").splitlines()
    why = "step 3: the ranks are out of step; the Monitor stops logging"
    lines.append(json.dumps({"step": 3, "disabled": {"loss": why, "other": why}}))
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert _plot_warnings(tmp_path) == [
        f"{log}: the Monitor disabled the quantities 'flaky' (step 1: raised in compute(): "
        f"ValueError: no value); 'loss', 'other' ({why}) during the run: their keys end there"
    ]


def _raises_at(failing_step):
    def schedule(step):
        if step == failing_step:
            raise RuntimeError("bad step")
        return True

    return schedule


def test_a_quantity_whose_schedule_raises_when_nothing_else_is_due_is_named_in_the_log(
    tmp_path,
):
    # the schedule is asked at the watched call: with nothing due then, no batch is kept and
    # step() wrote nothing, so the note waited for a record that never came
    records = _train(tmp_path, [Flaky("compute", at_step=99, schedule=_raises_at(2))], steps=4)
    assert [r["step"] for r in records] == [0, 1, 2]
    assert records[2] == {"step": 2, "disabled": {
        "flaky": "step 2: raised in its schedule: RuntimeError: bad step"}}  # fmt: skip


def test_the_csv_sink_writes_no_row_for_a_record_of_the_note_alone(tmp_path):
    # a row holding only its step is, in the CSV file, a step the sink missed after a fault
    _train(tmp_path, [Flaky("compute", at_step=1)], sinks=("jsonl", "csv"))
    with open(tmp_path / "metrics.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [row["step"] for row in rows] == ["0"]


def test_a_run_resumed_after_a_note_alone_copies_no_step_into_its_csv_file(tmp_path):
    # the note's step has no row in metrics.csv: resuming is not a file that lacks a step
    _train(tmp_path, [Flaky("compute", at_step=1)], steps=2, sinks=("jsonl", "csv"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Monitor(tmp_path, quantities=[Flaky("compute", at_step=99)], sinks=["jsonl", "csv"],
                     resume=True) as monitor:  # fmt: skip
            loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.1))
            loss_fn(torch.randn(8, 4, requires_grad=True), torch.arange(8) % 2).backward()
            monitor.step()
    assert [str(w.message) for w in caught if "lacks steps" in str(w.message)] == []
    with open(tmp_path / "metrics.csv", newline="") as handle:
        assert [row["step"] for row in csv.DictReader(handle)] == ["0", "2"]


def test_a_resumption_whose_first_record_is_a_note_alone_says_where_it_resumed(tmp_path):
    # the loop resumes from a checkpoint of step 1, which the run had logged; its only
    # quantity raises there: the note alone opens the resumption, and names that step
    _train(tmp_path, [Flaky("compute", at_step=99)], steps=3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Monitor(tmp_path, quantities=[Flaky("at_call", at_step=0)],
                     resume=True) as monitor:  # fmt: skip
            monitor.step_count = 1
            loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.1))
            loss_fn(torch.randn(8, 4, requires_grad=True), torch.arange(8) % 2).backward()
            monitor.step()
    headers, records = read_jsonl(tmp_path / "metrics.jsonl")
    assert records[-1] == {"step": 1, "disabled": {
        "flaky": "step 1: raised in at_call(): KeyError: 'boom'"}}  # fmt: skip
    assert headers[-1]["resumed"]["from_step"] == 1
    assert sum("resumes at step 1," in str(w.message) for w in caught) == 1


def test_gradlab_plot_says_when_a_resumed_run_logs_a_disabled_quantity_again(tmp_path):
    # "its keys end there" was said of a quantity that the resumed run logged again
    _train(tmp_path, [Loss(every(1)), Flaky("compute", at_step=1)], steps=3)
    for _ in range(2):  # resumed twice: the first resumption that logs it again is named
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with Monitor(tmp_path, quantities=[Loss(every(1)), Flaky("compute", at_step=99)],
                         resume=True) as monitor:  # fmt: skip
                loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.1))
                loss_fn(torch.randn(8, 4, requires_grad=True), torch.arange(8) % 2).backward()
                monitor.step()
    assert [r.get("flaky_mean") is not None for r in read_jsonl(tmp_path)[1]] == [
        True, False, False, True, True]  # fmt: skip
    assert _plot_warnings(tmp_path) == [
        f"{tmp_path / 'metrics.jsonl'}: the Monitor disabled the quantity 'flaky' (step 1: "
        "raised in compute(): ValueError: no value) during the run: its keys end there "
        "('flaky' is logged again from step 3, where the run resumed)"
    ]


def _without_schedules(log_dir) -> None:
    """Drop ``schedules`` from the log's last header (a log of an earlier gradlab)."""
    log = log_dir / "metrics.jsonl"
    lines = log.read_text().splitlines()
    last = max(i for i, line in enumerate(lines) if line.startswith('{"header": '))
    line = json.loads(lines[last])
    del line["header"]["schedules"]
    lines[last] = json.dumps(line)
    log.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("resumed_with", ["loss alone", "flaky never due", "no schedules"])
def test_a_resumption_that_does_not_log_the_quantity_again_is_not_said_to(tmp_path,
                                                                         resumed_with):
    # a resumption without the quantity, with it on a schedule that never logs it, or whose
    # header records no schedules (an earlier gradlab's): its keys end where it was disabled
    _train(tmp_path, [Loss(every(1)), Flaky("compute", at_step=1)], steps=3)
    quantities = [Loss(every(1))] + ([Flaky("compute", 99, every(1000))]
                                     if resumed_with == "flaky never due" else [])  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with Monitor(tmp_path, quantities=quantities, resume=True) as monitor:
            loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.1))
            for _ in range(2):
                loss_fn(torch.randn(8, 4, requires_grad=True), torch.arange(8) % 2).backward()
                monitor.step()
    if resumed_with == "no schedules":
        _without_schedules(tmp_path)
    assert _plot_warnings(tmp_path) == [
        f"{tmp_path / 'metrics.jsonl'}: the Monitor disabled the quantity 'flaky' (step 1: "
        "raised in compute(): ValueError: no value) during the run: its keys end there"
    ]


def _train_then_call(log_dir, quantities, steps, sinks=("jsonl",)):
    """``steps`` steps, then one more watched call and ``close()`` with no ``monitor.step()``
    between them (a loop that ends after its last batch's backward)."""
    generator = torch.Generator().manual_seed(0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Monitor(log_dir, quantities=quantities, sinks=list(sinks)) as monitor:
            loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.1))
            for step in range(steps + 1):
                embeddings = torch.randn(8, 4, generator=generator, requires_grad=True)
                loss_fn(embeddings, torch.arange(8) % 2).backward()
                if step < steps:
                    monitor.step()
    return [str(w.message) for w in caught]


def test_close_writes_no_record_of_a_step_that_was_never_closed(tmp_path):
    # the call of step 2 disabled the quantity and close() came before any step(): a record of
    # step 2 (the note alone) made resume=True number on from step 3, one past the steps the
    # loop trained; the warning at the call says it, and the resumed run starts at step 2
    said = _train_then_call(tmp_path, [Loss(every(1)), Flaky("at_call", at_step=2)], steps=2)
    assert any("'flaky'" in message and "KeyError" in message for message in said)
    records = read_jsonl(tmp_path / "metrics.jsonl")[1]
    assert [r["step"] for r in records] == [0, 1]
    with Monitor(tmp_path, quantities=[Loss(every(1))], resume=True) as monitor:
        assert monitor.step_count == 2


def test_close_writes_no_record_of_a_schedule_that_raised_at_a_call_never_closed(tmp_path):
    said = _train_then_call(tmp_path, [Flaky("compute", at_step=99, schedule=_raises_at(3))],
                            steps=3)  # fmt: skip
    assert any("bad step" in message for message in said)
    records = read_jsonl(tmp_path / "metrics.jsonl")[1]
    assert [r["step"] for r in records] == [0, 1, 2]
    with Monitor(tmp_path, quantities=[Loss(every(1))], resume=True) as monitor:
        assert monitor.step_count == 3


def test_with_the_csv_sink_alone_the_warning_says_it_is_the_only_place(tmp_path):
    # metrics.csv is a table of numbers and the run's one file: it gets no note (no column, no
    # row of the note alone), so the warning says that no log holds it, and how to get one
    told = [w for w in _train_then_call(tmp_path, [Loss(every(1)), Flaky("compute", at_step=1)],
                                        steps=3, sinks=("csv",)) if "'flaky'" in w]  # fmt: skip
    assert sorted(path.name for path in tmp_path.iterdir()) == ["metrics.csv"]
    with open(tmp_path / "metrics.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == ["step", "loss", "flaky_mean"]
    assert [(row["step"], row["flaky_mean"] != "") for row in rows] == [
        ("0", True), ("1", False), ("2", False)]  # fmt: skip
    assert len(told) == 1 and told[0].startswith(
        "gradlab.Monitor: step 1: quantity 'flaky' raised in compute() and is disabled "
        "(strict=True raises instead); the run's sinks hold numbers alone, so no log of it "
        "says so (add the 'jsonl' sink: its metrics.jsonl notes it):\n")


def test_beside_the_jsonl_sink_the_warning_says_nothing_of_the_log(tmp_path):
    quantities = [Loss(every(1)), Flaky("compute", at_step=1)]
    told = [w for w in _train_then_call(tmp_path, quantities, steps=3, sinks=("jsonl", "csv"))
            if "'flaky'" in w]  # fmt: skip
    assert len(told) == 1 and told[0].startswith(
        "gradlab.Monitor: step 1: quantity 'flaky' raised in compute() and is disabled "
        "(strict=True raises instead):\n")


def test_with_the_csv_sink_alone_a_quantity_the_loss_cannot_serve_after_all_is_warned_of(
    tmp_path,
):
    # with metrics.jsonl its note says so; metrics.csv holds none, and nothing else said it
    told = [w for w in _train_then_call(tmp_path, [Loss(every(1)),
                                                   Flaky("not_applicable", at_step=1)],
                                        steps=3, sinks=("csv",)) if "'flaky'" in w]  # fmt: skip
    assert told == [
        "gradlab.Monitor: step 1: quantity 'flaky' is logged no more: the loss stopped giving "
        "embeddings; the run's sinks hold numbers alone, so no log of it says so (add the "
        "'jsonl' sink: its metrics.jsonl notes it)"
    ]


def test_an_at_call_that_raises_when_close_reads_the_last_step_again_names_that_step(tmp_path):
    # the schedule skips step 1, so close() reads its call again to log it: the quantity's
    # at_call raises there, for step 1; the record of step 1 holds no value of it
    schedule = lambda step: step % 2 == 0  # noqa: E731
    quantities = [Loss(schedule), Flaky("at_call", at_step=1, schedule=schedule)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Monitor(tmp_path, quantities=quantities) as monitor:
            loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.1))
            for _ in range(2):
                loss_fn(torch.randn(8, 4, requires_grad=True), torch.arange(8) % 2).backward()
                monitor.step()
    told = [str(w.message) for w in caught if "'flaky'" in str(w.message)]
    assert len(told) == 1 and told[0].startswith("gradlab.Monitor: step 1: quantity 'flaky'")
    records = read_jsonl(tmp_path / "metrics.jsonl")[1]
    assert [sorted(r) for r in records] == [
        ["flaky_mean", "loss", "step"], ["disabled", "loss", "step"]]  # fmt: skip
    assert records[1]["disabled"] == {"flaky": "step 1: raised in at_call(): KeyError: 'boom'"}
