"""Schedule constructors refuse values that would hang, be silently wrong, or never log."""

import math

import pytest

from gradlab import GradlabError
from gradlab.monitor.schedules import default_schedule, dense_warmup, every, log_spaced


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
