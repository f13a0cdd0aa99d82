"""Schedule constructors refuse values that would hang, be silently wrong, or never log."""

import json
import math
import pickle
import warnings

import pytest

from gradlab import GradlabError
from gradlab.monitor import schedules
from gradlab.monitor.config import MonitorConfig
from gradlab.monitor.schedules import default_schedule, dense_warmup, every, log_spaced, never


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: log_spaced(1), r"base must be a finite number > 1; got 1$"),
        (lambda: log_spaced(1.0), r"base must be a finite number > 1; got 1.0"),
        (lambda: log_spaced(0.5), r"base must be a finite number > 1; got 0.5"),
        (lambda: log_spaced(0), r"base must be a finite number > 1; got 0"),
        (lambda: log_spaced(-2), r"base must be a finite number > 1; got -2"),
        (lambda: log_spaced(math.nan), r"base must be a finite number > 1; got nan"),
        (lambda: log_spaced(math.inf), r"base must be a finite number > 1; got inf"),
        (lambda: log_spaced(True), r"base must be a finite number > 1; got True"),
        (lambda: log_spaced("2"), r"base must be a finite number > 1; got '2'"),
        (lambda: log_spaced(1 + 1e-9), r"base must be .* far enough from 1.*every\(1\)"),
        (lambda: every(0), r"n must be a positive integer; got 0"),
        (lambda: every(2.5), r"n must be a positive integer; got 2.5"),
        (lambda: dense_warmup(0), r"warmup must be a positive integer; got 0"),
        (lambda: dense_warmup(3, -1), r"then_every must be a positive integer; got -1"),
        (lambda: default_schedule(early=math.nan), r"early must be a positive integer; got nan"),
        (lambda: default_schedule(then_every=True), r"then_every must be .*; got True"),
    ],
)
def test_bad_schedule_arguments_are_refused(make, message):
    with pytest.raises(GradlabError, match=message):
        make()


@pytest.mark.parametrize("base", [1.5, 2, 3, 10])
def test_log_spaced_points_are_the_rounded_powers(base):
    expected = {0} | {round(base**k) for k in range(200) if base**k < 1e12}  # closed form
    schedule = log_spaced(base)
    assert {s for s in range(5000) if schedule(s)} == {p for p in expected if p < 5000}


def test_log_spaced_stops_below_1e12():
    # 10^12 is reached exactly by repeated multiplication by 10: it is past the last point.
    schedule = log_spaced(10)
    assert schedule(10**11) and not schedule(10**12)


@pytest.mark.parametrize(
    ("make", "step", "logged"),
    [
        # The warmup ends before step 10 (default 10): with early_every 7, step 10 is not logged.
        (lambda: default_schedule(early_every=7), 10, False),
        (lambda: default_schedule(early_every=7), 9, True),
        # The early phase ends before step 200 (default 200): 200 is a multiple of 8, not of 60.
        (lambda: default_schedule(early_every=8, then_every=60), 200, False),
        (lambda: default_schedule(early_every=8, then_every=60), 192, True),
        (lambda: default_schedule(early_every=8, then_every=60), 240, True),
        # dense_warmup's warmup ends before step 100 (default 100).
        (lambda: dense_warmup(then_every=7), 100, False),
        (lambda: dense_warmup(then_every=7), 99, True),
        (lambda: dense_warmup(then_every=7), 105, True),
    ],
)
def test_phases_end_where_documented(make, step, logged):
    assert make()(step) is logged


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: default_schedule(warmup=0), r"^warmup must be a positive integer; got 0$"),
        (lambda: default_schedule(early_every=-3), r"^early_every must be a positive integer"),
    ],
)
def test_default_schedule_names_each_argument(make, message):
    with pytest.raises(GradlabError, match=message):
        make()


def test_never_logs_any_step():
    from gradlab.monitor.schedules import never

    assert not any(never(step) for step in range(1000))


PROVIDED = [  # each schedule the package provides, with its first logged steps listed by hand
    (lambda: every(5), [0, 5, 10, 15, 20, 25, 30, 35]),
    (lambda: every(1), [0, 1, 2, 3, 4, 5, 6, 7]),
    (lambda: log_spaced(), [0, 1, 2, 4, 8, 16, 32, 64]),
    (lambda: log_spaced(3), [0, 1, 3, 9, 27, 81, 243, 729]),
    (lambda: dense_warmup(3, 5), [0, 1, 2, 5, 10, 15, 20, 25]),
    (lambda: default_schedule(warmup=2, early_every=3, early=10, then_every=7),
     [0, 1, 3, 6, 7, 9, 14, 21]),
    (lambda: never, []),
]  # fmt: skip


def _logged(schedule, steps=2000):
    return [step for step in range(steps) if schedule(step)]


@pytest.mark.parametrize(("make", "first"), PROVIDED)
def test_every_schedule_survives_a_pickle_round_trip(make, first):
    """Lightning's ddp_spawn pickles the callbacks, and with them their schedules."""
    schedule = make()
    assert _logged(schedule)[:8] == first
    copy = pickle.loads(pickle.dumps(schedule))
    assert _logged(copy) == _logged(schedule)
    assert all(type(copy(step)) is bool for step in range(50))
    assert repr(copy) == repr(schedule)


@pytest.mark.parametrize(("make", "first"), PROVIDED)
def test_every_schedule_gradlab_provides_is_recorded_and_read_back_from_the_header(make, first):
    """gradlab plot reads each quantity's due steps from the run header's record of it."""
    schedule = make()
    recorded = schedules.recorded_schedule(schedule)
    remade = schedules.schedule_from_record(json.loads(json.dumps(recorded)))
    assert _logged(remade) == _logged(schedule) and _logged(remade)[:8] == first


@pytest.mark.parametrize("recorded", [
    None, 5, "", "every", "every(5", "every(n=5)(1)", "print(5)", "every(5, **{})",
    "every('5')", "every(True)", "every(-1)", "log_spaced(1.0)", "every(5)" + " " * 300,
])  # fmt: skip
def test_a_record_that_is_no_schedule_gradlab_wrote_is_read_as_none(recorded):
    # a header edited by hand, or written by another program: its gaps are guessed instead
    assert schedules.schedule_from_record(recorded) is None
    assert schedules.recorded_schedule(lambda step: True) is None


@pytest.mark.parametrize(
    ("make", "text"),
    [
        (lambda: every(5), "every(5)"),
        (lambda: log_spaced(), "log_spaced(2.0)"),
        (lambda: log_spaced(3), "log_spaced(3.0)"),
        (lambda: dense_warmup(3, 5), "dense_warmup(warmup=3, then_every=5)"),
        (lambda: default_schedule(),
         "default_schedule(warmup=10, early_every=10, early=200, then_every=50)"),
    ],
)  # fmt: skip
def test_a_schedule_reads_as_the_call_that_made_it(make, text):
    schedule = make()
    assert repr(schedule) == text
    remade = eval(text, vars(schedules))  # the repr is the call: it makes the same schedule
    assert _logged(remade) == _logged(schedule)


def test_a_pickled_monitor_config_with_every_5_still_logs_every_fifth_step():
    options = pickle.loads(pickle.dumps(MonitorConfig(every=5, preset="cheap")))
    for quantity in options.make_quantities():
        assert [s for s in range(23) if quantity.should_compute(s)] == [0, 5, 10, 15, 20]


@pytest.mark.parametrize("schedule", [0, 10, -1, "x", True, every(1).__class__], ids=repr)
def test_a_quantity_refuses_a_schedule_that_is_not_a_step_callable_when_made(schedule):
    # Loss(10) was accepted and raised "'int' object is not callable" at the first loss call
    from gradlab.monitor import Loss

    with pytest.raises(GradlabError) as raised:
        Loss(schedule)
    assert str(raised.value) == (
        "Loss's schedule must be a callable step -> bool (gradlab.monitor.every(n), "
        f"log_spaced(), dense_warmup(), default_schedule()) or None; got {schedule!r}"
    )


def test_a_schedule_that_returns_none_is_refused_at_the_first_watched_call(tmp_path):
    """A schedule function without its return statement returned None for every step: read
    as False, the run logged nothing and said nothing. A schedule returning 0 or 1 (or a
    NumPy bool) still works."""
    import torch

    import gradlab

    def forgot_its_return(step):
        step % 2 == 0  # noqa: B015 (the mistake under test)

    embeddings = torch.randn(8, 4, requires_grad=True)
    labels = torch.arange(8) % 2
    with pytest.raises(GradlabError) as raised:
        with gradlab.Monitor(tmp_path / "none", every=forgot_its_return, preset="cheap") as monitor:
            monitor.watch(gradlab.SmoothAPLoss(0.05))(embeddings, labels)
    assert str(raised.value) == (
        f"the schedule of the 'loss' quantity, {forgot_its_return!r}, returned None for step 0; "
        "a schedule returns True (log the step) or False: is its return statement missing?")
    with gradlab.Monitor(tmp_path / "ints", every=lambda step: step % 2, preset="cheap") as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        logged = []
        for _ in range(4):
            loss_fn(embeddings, labels).backward()
            logged.append(monitor.step() is not None)
    assert logged == [False, True, False, True]


def _first_call_refusal(log_dir, schedule) -> str:
    """The refusal a Monitor on ``every=schedule`` raises at its first watched call."""
    import torch

    import gradlab

    with pytest.raises(GradlabError) as raised:
        with gradlab.Monitor(log_dir, every=schedule, preset="cheap") as monitor:
            monitor.watch(gradlab.SmoothAPLoss(0.05))(torch.randn(8, 4), torch.arange(8) % 2)
    return str(raised.value)


@pytest.mark.parametrize("returned", [3, "yes", "no", 0.5, -1])
def test_a_schedule_returning_neither_a_bool_nor_0_or_1_is_refused(tmp_path, returned):
    # step % 10 logged every step but the tenths, "no" every step: read as bool, silently
    import gradlab

    def schedule(step):
        return returned

    assert _first_call_refusal(tmp_path / "bad", schedule) == (
        f"the schedule of the 'loss' quantity, {schedule!r}, returned {returned!r} for step 0; "
        "a schedule returns True (log the step) or False, or 1 or 0 (a comparison: "
        "step % 10 == 0, not step % 10)")
    import numpy as np

    for fine, due in ((np.True_, True), (np.int64(1), True), (np.int8(0), False), (0, False)):
        assert gradlab.monitor.Loss(lambda step, fine=fine: fine).should_compute(0) is due


def test_step_mod_10_is_refused_at_the_first_watched_call_not_at_step_2(tmp_path):
    # every=lambda s: s % 10 answered 0 at step 0 and 1 at step 1, both accepted, then 2 at
    # step 2: every quantity was disabled there, with eight warnings, and training went on
    # logging nothing. The steps ahead are asked before the run starts.
    import torch

    import gradlab
    from gradlab.monitor.monitor import SCHEDULE_AHEAD

    def schedule(step):
        return step % 10

    assert _first_call_refusal(tmp_path / "run", schedule) == (
        f"the schedule of the 'loss' quantity, {schedule!r}, returned 2 for step 2; a schedule "
        "returns True (log the step) or False, or 1 or 0 (a comparison: step % 10 == 0, not "
        f"step % 10) (asked before the run's first step, as every schedule is for the "
        f"{SCHEDULE_AHEAD} steps from it)")
    # from a resumed count the steps ahead are the run's own: 3 % 10 at step 3 is refused
    def late(step):
        return 3 if step == 40 + SCHEDULE_AHEAD - 1 else step % 2

    with pytest.raises(GradlabError, match=rf"returned 3 for step {40 + SCHEDULE_AHEAD - 1};"):
        with gradlab.Monitor(tmp_path / "late", every=late, preset="cheap") as monitor:
            monitor.step_count = 40
            monitor.watch(gradlab.SmoothAPLoss(0.05))(torch.randn(8, 4), torch.arange(8) % 2)
    def later(step):  # past the steps asked ahead: disabled when its step comes, as before
        return 3 if step == 40 + SCHEDULE_AHEAD else step % 2

    from gradlab.monitor import Loss

    with pytest.warns(RuntimeWarning, match=r"step 104: quantity 'loss' is disabled") as caught:
        with gradlab.Monitor(tmp_path / "later", quantities=[Loss(later)]) as monitor:
            monitor.step_count = 40
            loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
            logged = []
            for _ in range(SCHEDULE_AHEAD + 2):  # steps 40 to 105
                loss_fn(torch.randn(8, 4, requires_grad=True), torch.arange(8) % 2).backward()
                logged.append(monitor.step() is not None)
    assert 40 + SCHEDULE_AHEAD == 104
    assert logged[:4] == [False, True, False, True]  # the first call accepted it: it logged
    assert [str(w.message) for w in caught].count(str(caught[0].message)) == 1


@pytest.mark.parametrize(("maker", "call"), [(log_spaced, "log_spaced()"),
                                             (dense_warmup, "dense_warmup()"),
                                             (default_schedule, "default_schedule()"),
                                             (every, "every(n)")])  # fmt: skip
def test_a_schedule_maker_given_for_a_schedule_says_to_call_it(tmp_path, maker, call):
    # every=log_spaced was read as a schedule and called with the step: "base must be a
    # finite number > 1; got 0", about an argument the user never gave
    from gradlab import Monitor
    from gradlab.monitor import Loss

    with pytest.raises(GradlabError) as raised:
        Monitor(tmp_path, every=maker)
    assert str(raised.value) == (f"every must be a schedule; got the function {maker.__name__}, "
                                 f"which makes one: call it ({call})")  # fmt: skip
    with pytest.raises(GradlabError) as raised:
        Loss(maker)
    assert str(raised.value) == (f"Loss's schedule must be a schedule; got the function "
                                 f"{maker.__name__}, which makes one: call it ({call})")


def test_every_replacing_a_schedule_a_quantity_was_given_warns_naming_it(tmp_path):
    # Geometry(every(2)) logged at 0, 5, 10 under every=5 without a word
    import warnings

    from gradlab import Monitor
    from gradlab.monitor import Geometry, Loss

    with pytest.warns(UserWarning) as caught:
        monitor = Monitor(tmp_path, every=5, quantities=[Loss(), Geometry(every(2))])
    monitor.close()
    assert [(str(w.message), w.filename) for w in caught] == [(
        "gradlab.Monitor: every=5 replaces the schedules the quantities were given (geometry "
        "every(2)); leave every out to keep theirs", __file__)]
    assert [repr(q.schedule) for q in monitor.quantities] == ["every(5)", "every(5)"]
    with warnings.catch_warnings():  # quantities on their default schedule: nothing replaced
        warnings.simplefilter("error")
        Monitor(tmp_path / "quiet", every=5, quantities=[Loss(), Geometry()]).close()


def test_every_replacing_an_every_1_the_quantity_was_given_warns_too(tmp_path):
    # Loss(every(1)) logged at 0 and 5 under every=5 without a word: every(1) was taken for the
    # schedule of a quantity made without one
    from gradlab import Monitor
    from gradlab.monitor import Geometry, Loss

    with pytest.warns(UserWarning) as caught:
        monitor = Monitor(tmp_path, every=5, quantities=[Loss(every(1)), Geometry()])
    monitor.close()
    assert [str(w.message) for w in caught] == [
        "gradlab.Monitor: every=5 replaces the schedules the quantities were given (loss "
        "every(1)); leave every out to keep theirs"]


def test_a_schedule_given_as_every_is_shown_by_its_repr_naming_each_replaced(tmp_path):
    from gradlab import Monitor
    from gradlab.monitor import Geometry, Loss, Margins, log_spaced

    with pytest.warns(UserWarning) as caught:
        monitor = Monitor(tmp_path, every=log_spaced(), quantities=[
            Loss(), Geometry(every(2)), Margins(every(3))])  # fmt: skip
    monitor.close()
    assert [(str(w.message), w.category) for w in caught] == [(
        f"gradlab.Monitor: every={log_spaced()!r} replaces the schedules the quantities were "
        "given (geometry every(2), margins every(3)); leave every out to keep theirs",
        UserWarning)]


def test_a_schedule_set_on_a_quantity_after_it_was_made_is_named_when_every_replaces_it(
    tmp_path,
):
    # made without one (the default), then given a schedule by assignment: not an every(n)
    # schedule, and replaced by every=5 all the same
    from gradlab import Monitor
    from gradlab.monitor import Geometry, Loss, log_spaced

    later = Geometry()
    later.schedule = log_spaced()
    with pytest.warns(UserWarning) as caught:
        monitor = Monitor(tmp_path, every=5, quantities=[Loss(), later])
    monitor.close()
    assert [str(w.message) for w in caught] == [
        f"gradlab.Monitor: every=5 replaces the schedules the quantities were given (geometry "
        f"{log_spaced()!r}); leave every out to keep theirs"]


def _logged_with_warnings(folder, quantities, steps):
    """``(monitor, records, warnings)`` of ``steps`` SmoothAP steps logged with ``quantities``
    (a warning expected among them)."""
    import torch

    import gradlab

    embeddings = torch.randn(8, 4, requires_grad=True)
    labels = torch.arange(8) % 2
    with gradlab.Monitor(folder, quantities=quantities) as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        with pytest.warns(RuntimeWarning) as caught:
            records = []
            for _ in range(steps):
                loss_fn(embeddings, labels).backward()
                records.append(monitor.step())
    return monitor, records, caught


def test_a_schedule_that_raises_mid_run_disables_its_quantity_and_training_goes_on(tmp_path):
    """A schedule read from a list of planned steps ran past its end at step 3: IndexError
    came out of monitor.step() and ended the training loop. The quantity is disabled with a
    warning, as one whose compute raises, and the others are logged; strict=True raises."""
    import torch

    import gradlab
    from gradlab.monitor import EmbeddingNorms, Loss

    planned = [0, 1, 5]
    _, records, caught = _logged_with_warnings(tmp_path / "run", [
        Loss(), EmbeddingNorms(lambda step: planned[step] == step)], steps=5)  # fmt: skip
    said = [str(w.message) for w in caught if "embedding_norm" in str(w.message)]
    assert len(said) == 1
    # planned[3] does not exist: its schedule raises when asked for step 3
    assert said[0].startswith("gradlab.Monitor: step 3: quantity 'embedding_norm' raised in its "
                              "schedule and is disabled (strict=True raises instead):\nTraceback")
    assert said[0].rstrip().endswith("IndexError: list index out of range")
    assert [sorted(r) for r in records] == [
        ["embedding_norm_max", "embedding_norm_mean", "embedding_norm_min", "loss", "step"],
        ["embedding_norm_max", "embedding_norm_mean", "embedding_norm_min", "loss", "step"],
        ["loss", "step"], ["disabled", "loss", "step"], ["loss", "step"]]
    assert records[3]["disabled"] == {"embedding_norm": "step 3: raised in its schedule: "
                                                        "IndexError: list index out of range"}
    embeddings, labels = torch.randn(8, 4, requires_grad=True), torch.arange(8) % 2
    with gradlab.Monitor(tmp_path / "strict", strict=True, quantities=[
            Loss(), EmbeddingNorms(lambda step: planned[step] == step)]) as monitor:  # fmt: skip
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        with pytest.raises(GradlabError, match=r"^the schedule of the 'embedding_norm' "
                           r"quantity, .* raised for step 3: IndexError") as raised:
            for _ in range(5):
                loss_fn(embeddings, labels).backward()
                monitor.step()
    assert isinstance(raised.value.__cause__, IndexError)


def test_a_recorded_schedule_is_read_up_to_200_characters():
    # a record longer than that is no schedule gradlab wrote: left unread, not parsed
    from gradlab.monitor.schedules import schedule_from_record

    def padded(length):
        return "every(" + " " * (length - len("every(3)")) + "3)"

    assert len(padded(200)) == 200 and len(padded(201)) == 201
    read = schedule_from_record(padded(200))
    assert read is not None and [step for step in range(7) if read(step)] == [0, 3, 6]
    assert schedule_from_record(padded(201)) is None


def test_one_schedule_that_raises_for_every_quantity_is_one_warning_naming_them_all(tmp_path):
    """every= gives every quantity the same schedule: when it raised, each of the preset's
    quantities warned with its own traceback (eight warnings for one error). Now the first
    asked is disabled with the others on that schedule, under one warning; a quantity on a
    schedule of its own is asked as before."""
    from gradlab.monitor import EmbeddingNorms, Loss, Margins

    def shared(step):
        return step < 2 or 1 // 0

    quantities = [Loss(), EmbeddingNorms(), Margins(lambda step: True)]
    for quantity in quantities[:2]:
        quantity.schedule = shared
    monitor, records, caught = _logged_with_warnings(tmp_path, quantities, steps=3)
    said = [str(w.message) for w in caught if "schedule" in str(w.message)]
    assert len(said) == 1, said
    assert said[0].startswith("gradlab.Monitor: step 2: quantity 'loss' (and 'embedding_norm', "
                              "on the same schedule, with it) raised in its schedule and is "
                              "disabled")
    assert sorted(monitor.disabled) == ["embedding_norm", "loss"]
    assert sorted(records[2]["disabled"]) == ["embedding_norm", "loss"]
    assert "margin_mean" in records[2]  # its own schedule: still logged


def test_one_schedule_refused_past_the_steps_asked_ahead_is_one_warning_naming_them_all(
        tmp_path):
    # as a shared schedule that raises: one that answers no bool, past the steps asked ahead,
    # disables every quantity on it under one warning and one note each
    from gradlab.monitor import DegenerateBatches, EmbeddingNorms, Loss, Margins
    from gradlab.monitor.monitor import SCHEDULE_AHEAD

    late = SCHEDULE_AHEAD + 1

    def shared(step):
        return None if step == late else step % 2 == 0

    quantities = [Loss(), EmbeddingNorms(), DegenerateBatches(), Margins(lambda step: True)]
    for quantity in quantities[:3]:
        quantity.schedule = shared
    monitor, records, caught = _logged_with_warnings(tmp_path, quantities, steps=late + 1)
    said = [str(w.message) for w in caught if "schedule" in str(w.message)]
    assert len(said) == 1, said
    assert said[0].startswith(f"gradlab.Monitor: step {late}: quantity 'loss' (and "
                              "'embedding_norm', 'degenerate_batches', on the same schedule, "
                              "with it) is disabled, refused in its schedule")
    shared_names = ["degenerate_batches", "embedding_norm", "loss"]
    assert sorted(monitor.disabled) == shared_names
    assert sorted(records[late]["disabled"]) == shared_names


def test_a_schedule_that_answers_no_bool_past_the_steps_asked_ahead_disables_its_quantity(
        tmp_path):
    # asked ahead before the first step, the first SCHEDULE_AHEAD steps answer bools; one past
    # them that answers None is refused by should_compute (a GradlabError naming it): it
    # disables its quantity with the same warning and note as a schedule that raises
    from gradlab.monitor import EmbeddingNorms, Loss
    from gradlab.monitor.monitor import SCHEDULE_AHEAD

    late = SCHEDULE_AHEAD + 1

    def schedule(step):
        return None if step == late else step == 0

    _, records, caught = _logged_with_warnings(tmp_path / "run", [
        Loss(), EmbeddingNorms(schedule)], steps=late + 2)  # fmt: skip
    said = [str(w.message) for w in caught if "embedding_norm" in str(w.message)]
    assert len(said) == 1, said
    refusal = (f"the schedule of the 'embedding_norm' quantity, {schedule!r}, returned None "
               f"for step {late}; a schedule returns True (log the step) or False: is its "
               "return statement missing?")
    assert said == [f"gradlab.Monitor: step {late}: quantity 'embedding_norm' is disabled, "
                    f"refused in its schedule: {refusal} (strict=True raises instead)"]
    assert records[late]["disabled"] == {
        "embedding_norm": f"step {late}: refused in its schedule: {refusal}"}
    assert "embedding_norm_mean" in records[0] and "disabled" not in records[late + 1]


def test_the_steps_ahead_are_asked_once_each_from_the_runs_first_step(tmp_path):
    # from a count set to 40, with two micro-batches before the first step(): the steps
    # 41 to 40 + SCHEDULE_AHEAD - 1 once each, none before the run's first step
    import torch

    import gradlab
    from gradlab.monitor import Loss
    from gradlab.monitor.monitor import SCHEDULE_AHEAD

    asked = []

    def schedule(step):
        asked.append(step)
        return step % 2 == 0

    with gradlab.Monitor(tmp_path, quantities=[Loss(schedule)]) as monitor:
        monitor.step_count = 40
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        for _ in range(2):
            loss_fn(torch.randn(8, 4, requires_grad=True), torch.arange(8) % 2).backward()
        record = monitor.step()
    assert record["step"] == 40
    assert sorted(step for step in asked if step != 40) == list(range(41, 40 + SCHEDULE_AHEAD))


@pytest.mark.parametrize(("answer", "error"), [
    (ValueError("no plan that far"), "ValueError: no plan that far"),
    ("yes", "returned 'yes' for step 99"),
])  # fmt: skip
def test_a_schedule_failing_only_when_close_asks_it_is_named_at_that_step(tmp_path, answer,
                                                                          error):  # fmt: skip
    # close() asks the schedules for the last step (the count less one): with the count set
    # past the steps trained (and those asked ahead), a step no call asked; its failure names
    # that step, not the count
    import torch

    import gradlab
    from gradlab.monitor import EmbeddingNorms, Loss, read_jsonl

    def schedule(step):
        if step == 99:
            if isinstance(answer, Exception):
                raise answer
            return answer
        return step % 2 == 0

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        monitor = gradlab.Monitor(tmp_path, quantities=[EmbeddingNorms(schedule), Loss()])
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        for _ in range(3):
            loss_fn(torch.randn(8, 4, requires_grad=True), torch.arange(8) % 2).backward()
            monitor.step()
        monitor.step_count = 100
        monitor.close()
    said = [str(w.message) for w in caught if "embedding_norm" in str(w.message)]
    assert len(said) == 1 and said[0].startswith(
        "gradlab.Monitor: step 99: quantity 'embedding_norm' ")  # fmt: skip
    assert error in said[0]
    # the log's note of it, written by close() at the step it names
    last = read_jsonl(tmp_path / "metrics.jsonl")[1][-1]
    assert last["step"] == 99 and list(last["disabled"]) == ["embedding_norm"]


@pytest.mark.parametrize("answer", [ValueError("no plan that far"), "yes"])
def test_a_quantity_disabled_at_the_call_reads_no_batch_there(tmp_path, answer):
    # its schedule fails when the call asks it (past the steps asked ahead): the quantity is
    # not due, so the call reads no batch and the run's first record, the note that it was
    # disabled, comes with a header that names no step's device
    import torch

    import gradlab
    from gradlab.monitor import EmbeddingNorms, read_jsonl

    failing = 70

    def schedule(step):
        if step == failing:
            if isinstance(answer, Exception):
                raise answer
            return answer
        return False

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with gradlab.Monitor(tmp_path, quantities=[EmbeddingNorms(schedule)]) as monitor:
            loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
            for _ in range(failing + 1):
                loss_fn(torch.randn(8, 4, requires_grad=True), torch.arange(8) % 2).backward()
                monitor.step()
    (header,), records = read_jsonl(tmp_path / "metrics.jsonl")
    assert [record["step"] for record in records] == [failing]
    assert list(records[0]["disabled"]) == ["embedding_norm"]
    assert header["device"] is None
