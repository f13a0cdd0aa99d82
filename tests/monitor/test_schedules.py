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
