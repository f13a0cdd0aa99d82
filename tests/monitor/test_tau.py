"""The Monitor's tau: taken from the watched SmoothAP loss when not given; a mismatch warns once."""

import math
import warnings

import pytest

import gradlab
from gradlab import Monitor
from gradlab.monitor import read_jsonl
from gradlab.monitor.monitor import DEFAULT_TAU
from gradlab.monitor.quantities import OperatingRegion
from gradlab.monitor.schedules import every
from tests.helpers.training import train


def _width(tau, eps=0.005):
    """Independent: the |D| at which the sigmoid's slope falls to eps, by bisection."""
    def slope(d):
        s = 1 / (1 + math.exp(-d / tau))
        return s * (1 - s) / tau

    low, high = 0.0, 50 * tau
    for _ in range(200):
        middle = (low + high) / 2
        low, high = (middle, high) if slope(middle) > eps else (low, middle)
    return low


def _header_and_records(run):
    headers, records = read_jsonl(run / "metrics.jsonl")
    return headers[0], records


def test_no_tau_given_takes_the_watched_smooth_ap_loss_tau(tmp_path):
    with Monitor(tmp_path, quantities=[OperatingRegion(every(1))]) as monitor:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            train(monitor, steps=1, loss_fn=gradlab.SmoothAPLoss(0.1))
    header, records = _header_and_records(tmp_path)
    assert header["config"]["tau"] == 0.1
    assert header["config"]["tau_from"] == "watched loss SmoothAPLoss"
    assert monitor.tau == 0.1
    assert records[0]["operating_region_width"] == pytest.approx(_width(0.1), rel=1e-9)


def test_a_watched_loss_whose_tau_is_the_default_is_named_as_its_source(tmp_path):
    with Monitor(tmp_path, quantities=[OperatingRegion(every(1))]) as monitor:
        train(monitor, steps=1, loss_fn=gradlab.SmoothAPLoss(DEFAULT_TAU))
    header, _ = _header_and_records(tmp_path)
    assert header["config"]["tau"] == DEFAULT_TAU
    assert header["config"]["tau_from"] == "watched loss SmoothAPLoss"


def test_a_tau_that_differs_from_the_loss_warns_once_naming_both(tmp_path):
    with Monitor(tmp_path, tau=0.01, quantities=[OperatingRegion(every(1))]) as monitor:
        with pytest.warns(UserWarning, match=r"tau=0.01 differs .*SmoothAPLoss's tau=0.1") as w:
            train(monitor, steps=1, loss_fn=gradlab.SmoothAPLoss(0.1))
            monitor.watch(gradlab.SmoothAPLoss(0.1))  # a second watch: no second warning
    assert sum("differs" in str(x.message) for x in w) == 1
    header, records = _header_and_records(tmp_path)
    assert header["config"]["tau"] == 0.01 and header["config"]["tau_from"] == "argument"
    assert records[0]["operating_region_width"] == pytest.approx(_width(0.01), rel=1e-9)


def test_a_later_loss_with_another_tau_does_not_tell_to_leave_out_a_tau_never_given(tmp_path):
    # no tau was passed: the first watched loss's was taken and recorded; a SmoothAP loss with
    # another tau watched after the first record was told "Leave the Monitor's tau out"
    with Monitor(tmp_path, quantities=[OperatingRegion(every(1))]) as monitor:
        train(monitor, steps=1, loss_fn=gradlab.SmoothAPLoss(0.1))
        with pytest.warns(UserWarning) as w:
            monitor.watch(gradlab.SmoothAPLoss(0.05))
    (told,) = [x for x in w if "differs" in str(x.message)]
    assert str(told.message) == (
        "gradlab.Monitor: tau=0.1 (from the watched loss SmoothAPLoss, recorded in the run's "
        "header) differs from the watched loss SmoothAPLoss's tau=0.05; the diagnostics (P, "
        "widths, counts, decomposition) use tau=0.1. Pass Monitor(tau=...) to choose the tau "
        "they use"
    )


def test_a_second_loss_with_another_tau_before_the_first_record_keeps_the_first_and_warns(tmp_path):
    # two SmoothAP losses watched before any record: the second's tau silently replaced the
    # first's, and the first loss's steps were read at the other tau
    with Monitor(tmp_path, quantities=[OperatingRegion(every(1))]) as monitor:
        first = monitor.watch(gradlab.SmoothAPLoss(0.1))
        with pytest.warns(UserWarning, match=r"tau=0.1 \(from the watched loss SmoothAPLoss"):
            monitor.watch(gradlab.SmoothAPLoss(0.05))
        train(monitor, steps=1, loss_fn=first)
    header, records = _header_and_records(tmp_path)
    assert header["config"]["tau"] == 0.1 and monitor.tau == 0.1
    assert records[0]["operating_region_width"] == pytest.approx(_width(0.1), rel=1e-9)


def test_an_equal_tau_does_not_warn(tmp_path):
    with Monitor(tmp_path, tau=0.05, preset="cheap", every=1) as monitor:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            train(monitor, steps=1, loss_fn=gradlab.SmoothAPLoss(0.05))


def test_a_loss_without_tau_uses_the_default(tmp_path):
    with Monitor(tmp_path, preset="cheap", every=1) as monitor:
        train(monitor, steps=1, loss_fn=lambda e, y: e.pow(2).sum())
    header, _ = _header_and_records(tmp_path)
    assert header["config"]["tau"] == 0.01 and header["config"]["tau_from"] == "default"


def test_a_given_tau_that_differs_from_the_losss_says_how_to_use_the_losss(tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Monitor(tmp_path, tau=0.05, preset="cheap") as monitor:
            monitor.watch(gradlab.SmoothAPLoss(0.01))
    assert [(w.category, w.filename, str(w.message)) for w in caught] == [(UserWarning, __file__, (
        "gradlab.Monitor: tau=0.05 differs from the watched loss SmoothAPLoss's tau=0.01; the "
        "diagnostics (P, widths, counts, decomposition) use tau=0.05. Leave the Monitor's tau "
        "out to use the loss's"))]  # fmt: skip
