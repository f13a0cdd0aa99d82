"""The Monitor's tau: taken from the watched SmoothAP loss when not given; a mismatch warns once."""

import math
import warnings

import pytest
import torch

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


def _agreement_after_a_tau_change(tmp_path, tau_before, tau_after):
    """Two logged steps; the loss's tau is set to ``tau_after`` between them."""
    generator = torch.Generator().manual_seed(3)
    embeddings = torch.randn(12, 5, generator=generator)
    labels = torch.arange(12) % 3
    loss = gradlab.SmoothAPLoss(tau_before)
    with Monitor(tmp_path, preset="full", every=1) as monitor:
        watched = monitor.watch(loss)
        watched(embeddings.clone().requires_grad_(), labels).backward()
        monitor.step()
        loss.tau = tau_after  # a tau schedule
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            watched(embeddings.clone().requires_grad_(), labels).backward()
            record = monitor.step()
    return record, [str(w.message) for w in caught]


def test_a_tau_changed_on_the_loss_after_watch_is_read_at_each_call(tmp_path):
    # the Monitor kept the tau it saw at watch(): the gradient agreement compared the loss's
    # gradient at tau 0.1 with SmoothAP's at 0.01 and flagged a genuine SmoothAP (cosine 0.74)
    record, messages = _agreement_after_a_tau_change(tmp_path, 0.01, 0.1)
    assert record["gradient_agreement_cosine"] == pytest.approx(1.0, abs=1e-6)
    assert record["gradient_agreement_relative_error"] < 1e-5
    assert messages == [
        "gradlab.Monitor: step 1: the watched loss SmoothAPLoss's tau changed from 0.01 to 0.1 "
        "since watch(); the diagnostics (P, widths, counts, decomposition) keep tau=0.01, as "
        "the run's header records, and the gradient agreement and anatomy read the loss at its "
        "own tau. Pass Monitor(tau=...) to choose the tau the diagnostics use; later changes "
        "are not warned about"]
    header, _ = _header_and_records(tmp_path)
    assert (header["config"]["tau"], record["operating_region_width"]) == (
        0.01, pytest.approx(_width(0.01), rel=1e-9))


def test_a_tau_changed_before_the_first_step_is_taken_as_the_runs(tmp_path):
    loss = gradlab.SmoothAPLoss(0.05)
    with Monitor(tmp_path, quantities=[OperatingRegion(every(1))]) as monitor:
        watched = monitor.watch(loss)
        loss.tau = 0.1  # before anything is written: the header takes the loss's tau as it is
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            watched(torch.randn(8, 3, requires_grad=True), torch.arange(8) % 2).backward()
            record = monitor.step()
    header, _ = _header_and_records(tmp_path)
    assert (header["config"]["tau"], monitor.tau) == (0.1, 0.1)
    assert record["operating_region_width"] == pytest.approx(_width(0.1), rel=1e-9)


def _warnings_under_a_tau_schedule(tmp_path, taus, **options):
    """One logged step per tau of ``taus`` (set on the loss before each step's call); the
    warnings, as ``(category, message)``, that each step raised."""
    loss = gradlab.SmoothAPLoss(taus[0])
    embeddings = torch.randn(8, 3, generator=torch.Generator().manual_seed(4))
    labels = torch.arange(8) % 2
    per_step = []
    with Monitor(tmp_path, quantities=[OperatingRegion(every(1))], **options) as monitor:
        with warnings.catch_warnings():  # a given tau that differs warns at watch(): not here
            warnings.simplefilter("ignore")
            watched = monitor.watch(loss)
        for tau in taus:
            loss.tau = tau
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                watched(embeddings.clone().requires_grad_(), labels).backward()
                monitor.step()
            per_step.append([(w.category, str(w.message)) for w in caught])
    return per_step


def _tau_change_message(step, before, after, kept):
    return (f"gradlab.Monitor: step {step}: the watched loss SmoothAPLoss's tau changed from "
            f"{before} to {after} since watch(); the diagnostics (P, widths, counts, "
            f"decomposition) keep tau={kept}, as the run's header records, and the gradient "
            "agreement and anatomy read the loss at its own tau. Pass Monitor(tau=...) to "
            "choose the tau the diagnostics use; later changes are not warned about")


def test_a_tau_schedule_warns_at_its_first_change_alone(tmp_path):
    caught = _warnings_under_a_tau_schedule(tmp_path, [0.01, 0.02, 0.03, 0.04])
    assert caught == [[], [(UserWarning, _tau_change_message(1, 0.01, 0.02, 0.01))], [], []]


def test_a_given_tau_is_warned_about_when_the_losss_moves_away_from_it_alone(tmp_path):
    # the loss keeps its own tau (0.01, not the Monitor's 0.05), then takes the Monitor's:
    # neither is a change away from the diagnostics' tau; the move to 0.2 is
    caught = _warnings_under_a_tau_schedule(tmp_path, [0.01, 0.01, 0.05, 0.2], tau=0.05)
    assert caught == [[], [], [], [(UserWarning, _tau_change_message(3, 0.05, 0.2, 0.05))]]


def test_the_tau_change_warning_points_at_the_loss_call(tmp_path):
    loss = gradlab.SmoothAPLoss(0.01)
    embeddings, labels = torch.randn(8, 3), torch.arange(8) % 2
    with Monitor(tmp_path, quantities=[OperatingRegion(every(1))]) as monitor:
        watched = monitor.watch(loss)
        watched(embeddings.clone().requires_grad_(), labels).backward()
        monitor.step()
        loss.tau = 0.02
        with pytest.warns(UserWarning, match="tau changed from 0.01 to 0.02") as caught:
            watched(embeddings.clone().requires_grad_(), labels).backward()
        monitor.step()
    assert [w.filename for w in caught] == [__file__]
