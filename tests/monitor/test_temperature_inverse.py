"""Temperature on a learnable temperature ``t = 1 / s`` (``inverse=True``): the closed form and
the parameter's gradient are both ``dL/d log s``, checked against float64 autograd on a scale of
its own; a temperature given as a scale is said once, naming ``inverse=True``."""

import math
import warnings

import pytest
import torch

import gradlab
from gradlab.errors import GradlabError
from gradlab.monitor import Temperature, every

T = 0.07
B = 12


def _scores():
    generator = torch.Generator().manual_seed(3)
    images, texts = (torch.nn.functional.normalize(torch.randn(B, 6, generator=generator), dim=1)
                     for _ in range(2))  # fmt: skip
    return images @ texts.T  # float32 cosines


def _reference_log_scale_grad(scores: torch.Tensor, scale: float) -> float:
    """dL/d log s of InfoNCE over the rows at ``scale``, by float64 autograd on log s itself."""
    log_s = torch.tensor(math.log(scale), dtype=torch.float64, requires_grad=True)
    logits = scores.double() * log_s.exp()
    loss = torch.nn.functional.cross_entropy(logits, torch.arange(B))
    (grad,) = torch.autograd.grad(loss, log_s)
    return float(grad)


def _info_nce(parameter, log_scale, extra=0.0):
    """A user's InfoNCE over the rows with a learnable temperature (``log t`` with
    ``log_scale``), plus ``extra * parameter``: another term of the objective on it."""

    def objective(scores, positives):
        temperature = parameter.exp() if log_scale else parameter
        loss = torch.nn.functional.cross_entropy(scores / temperature, positives.int().argmax(1))
        return loss + extra * parameter

    return objective


def _logged(tmp_path, parameter, log_scale, inverse, extra=0.0):
    """The record of one step of :func:`_info_nce` and what was said of the temperature."""
    quantity = Temperature(every(1), scale=parameter, log_scale=log_scale, inverse=inverse,
                           direction="i2t")  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, quantities=[quantity]) as monitor:
            watched = monitor.watch(_info_nce(parameter, log_scale, extra), inputs="scores")
            watched(_scores().requires_grad_(), torch.eye(B, dtype=torch.bool)).backward()
            record = monitor.step()
    return record, [str(w.message) for w in caught if "temperature" in str(w.message)]


@pytest.mark.parametrize("log_scale", [False, True])
def test_a_learnable_temperature_logs_its_scale_and_gradient_as_float64_autograd(
    tmp_path, log_scale
):
    held = math.log(T) if log_scale else T
    parameter = torch.nn.Parameter(torch.tensor(held))
    record, said = _logged(tmp_path, parameter, log_scale, inverse=True)
    # s = 1 / t of the float32 parameter, in float64
    held = parameter.item()
    scale = math.exp(-held) if log_scale else 1 / held
    reference = _reference_log_scale_grad(_scores(), scale)
    assert record["temperature_scale"] == pytest.approx(scale, rel=1e-12)
    assert record["temperature_log_scale_grad"] == pytest.approx(reference, rel=1e-9)
    # the parameter's float32 gradient, turned into dL/d log s
    assert record["temperature_log_scale_grad_observed"] == pytest.approx(reference, rel=1e-4)
    assert reference > 0.1  # a case where a flipped sign would show
    assert said == []


@pytest.mark.parametrize("log_scale", [False, True])
def test_a_temperature_given_as_a_scale_is_said_once_naming_inverse(tmp_path, log_scale):
    parameter = torch.nn.Parameter(torch.tensor(math.log(T) if log_scale else T))
    record, said = _logged(tmp_path, parameter, log_scale, inverse=False)
    assert record["temperature_scale"] == pytest.approx(T, rel=1e-6)  # read as s, wrongly
    assert len(said) == 1, said
    closed, observed, scale = (record[f"temperature_{key}"] for key in (
        "log_scale_grad", "log_scale_grad_observed", "scale"))  # fmt: skip
    assert said[0] == (
        f"gradlab.Monitor: step 0: temperature_log_scale_grad = {closed:.4g} (closed form) and "
        "the parameter's gradient as dL/d log s, temperature_log_scale_grad_observed = "
        f"{observed:.4g}, disagree: they agree when the watched loss is the objective's only "
        f"InfoNCE term and scale= is the s = {scale:.4g} it multiplies its scores by. A "
        "parameter holding log s (open_clip's logit_scale) needs log_scale=True; one "
        "holding the temperature t = 1 / s (logits S / t) needs "
        "Temperature(scale=..., inverse=True) (log_scale=True for log t); a wrong direction=, "
        "or another term of the objective on the parameter, also parts them")


def _with_a_term_on_the_parameter(tmp_path, share):
    """What was said of InfoNCE + c log t, a second term on the temperature that moves its
    gradient by ``c = share * dL/d log s`` of InfoNCE alone."""
    parameter = torch.nn.Parameter(torch.tensor(math.log(T)))
    extra = share * _reference_log_scale_grad(_scores(), math.exp(-parameter.item()))
    record, said = _logged(tmp_path, parameter, True, inverse=True, extra=extra)
    closed, observed = (record[f"temperature_log_scale_grad{end}"] for end in ("", "_observed"))
    assert observed == pytest.approx(closed * (1 - share), rel=1e-4, abs=1e-6)  # InfoNCE's - c
    return [message for message in said if "disagree" in message]


@pytest.mark.parametrize(("share", "parted"), [
    (0.0, False), (0.05, False), (0.098, False),  # within 10 % of the larger
    (0.11, True), (1.0, True), (-0.5, True),  # beyond it
    (2.0, True),  # opposite signs
])  # fmt: skip
def test_the_closed_form_and_the_gradient_are_said_to_part_beyond_ten_percent(
    tmp_path, share, parted
):
    said = _with_a_term_on_the_parameter(tmp_path, share)
    assert len(said) == int(parted), said


@pytest.mark.parametrize(("make", "match"), [
    (lambda: Temperature(scale=T, inverse="yes"), "inverse must be True or False; got 'yes'"),
    (lambda: Temperature(inverse=True), r"^inverse=True reads scale= as a temperature t = 1 / s, "
                                        r"but no scale was given; pass scale= the temperature "
                                        r"\(its log with log_scale=True\)$"),
    (lambda: Temperature(scale=-1.0, inverse=True),
     r"scale must be a temperature t > 0 and finite; got -1.0"),
    (lambda: Temperature(scale=math.inf, log_scale=True, inverse=True),
     r"scale must be a finite log t; got inf"),
])  # fmt: skip
def test_bad_inverse_settings_are_refused_naming_the_value(make, match):
    with pytest.raises(GradlabError, match=match):
        make()


def test_a_sigmoid_loss_with_a_learnable_scale_logs_its_gradient_and_says_nothing(tmp_path):
    # SigLIP's loss is no softmax: no closed form to compare the parameter's gradient with
    log_scale = torch.nn.Parameter(torch.tensor(math.log(10.0)))
    quantity = Temperature(every(1), scale=log_scale, log_scale=True, logits=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, quantities=[quantity]) as monitor:
            watched = monitor.watch(gradlab.SigLIPLoss(scale=1.0, bias=0.0), inputs="scores")
            logits = log_scale.exp() * _scores().requires_grad_()
            watched(logits, torch.eye(B, dtype=torch.bool)).backward()
            record = monitor.step()
    assert [str(w.message) for w in caught if w.category is RuntimeWarning] == []
    assert "temperature_log_scale_grad" not in record
    assert record["temperature_log_scale_grad_observed"] == pytest.approx(
        log_scale.grad.item(), rel=1e-6)  # log_scale: dL/d log s is its own gradient


def test_scores_that_are_not_finite_are_not_said_to_part_the_two(tmp_path):
    parameter = torch.nn.Parameter(torch.tensor(math.log(T)))
    quantity = Temperature(every(1), scale=parameter, log_scale=True, inverse=True,
                           direction="i2t")  # fmt: skip
    scores = _scores()
    scores[0, 1] = math.nan
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, quantities=[quantity]) as monitor:
            watched = monitor.watch(_info_nce(parameter, True), inputs="scores")
            watched(scores.requires_grad_(), torch.eye(B, dtype=torch.bool)).backward()
            record = monitor.step()
    assert math.isnan(record["temperature_log_scale_grad"])
    assert [str(w.message) for w in caught if "disagree" in str(w.message)] == []


@pytest.mark.parametrize(("settings", "said"), [
    ({"log_scale": True, "clamp": (0.0, 100.0)}, True),  # the scale's bounds given for log s
    ({"log_scale": True, "clamp": (-60.0, 0.0)}, True),
    ({"log_scale": True, "clamp": (0.0, math.log(100))}, False),
    ({"log_scale": True, "clamp": (0.0, 50.0)}, False),  # at the largest bound taken
    ({"clamp": (1.0, 100.0)}, False),  # the scale itself: any bound
    ({"clamp": (1.0, 1e6)}, False),
])  # fmt: skip
def test_log_bounds_too_large_for_any_scale_are_said_where_the_quantity_is_made(settings, said):
    parameter = torch.nn.Parameter(torch.tensor(2.0))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Temperature(scale=parameter, **settings)
    messages = [(str(w.message), w.filename) for w in caught]
    if not said:
        assert messages == []
        return
    bound = max(map(abs, settings["clamp"]))
    clamp = tuple(map(float, settings["clamp"]))
    assert messages == [(
        f"Temperature(clamp={clamp!r}, log_scale=True) bounds log s: a bound of {bound:g} is a "
        f"factor e^{bound:g} on the logits; for bounds on the scale itself, pass their logs "
        "(open_clip: clamp=(0, math.log(100)))", __file__)]


def _past_clamp(logged, **settings):
    """What Temperature(**settings) says of a logged scale ``logged`` (None: nothing)."""
    return Temperature(**settings).said_of_logged({"temperature_scale": logged}, None)


ADVICE = ("so temperature_clamp_hit is 1: a loop that clamps the parameter keeps it on a bound, "
          "not past it (after its first clamp). clamp= bounds the parameter as held: log s with "
          "log_scale=True (open_clip: clamp=(0, math.log(100))), s without it (clamp=(1, "
          "100)); if the parameter is clamped nowhere, leave clamp= out")


@pytest.mark.parametrize(("scale", "settings", "said"), [
    # the parameter as each setting holds it: s, log s, t = 1 / s, log t
    (20.0, {"clamp": (1.0, 10.0)}, "s = 20, lies past its clamp=(1, 10)"),
    (20.0, {"clamp": (0.0, 2.0), "log_scale": True}, "log s = 2.996, lies past its clamp=(0, 2)"),
    (20.0, {"clamp": (0.1, 1.0), "inverse": True, "scale": 0.05},
     "t = 0.05, lies past its clamp=(0.1, 1)"),
    (20.0, {"clamp": (-2.0, 0.0), "inverse": True, "log_scale": True, "scale": -3.0},
     "log t = -2.996, lies past its clamp=(-2, 0)"),
])  # fmt: skip
def test_a_parameter_past_its_clamp_is_named_as_it_is_held(scale, settings, said):
    assert _past_clamp(scale, **settings) == f"the parameter as held, {said}, {ADVICE}"


@pytest.mark.parametrize(("scale", "clamp", "past"), [
    (1001.0, (0.0, 1000.0), False),  # a thousandth of the larger bound past it: rounding
    (1001.5, (0.0, 1000.0), True),
    (998.0, (1000.0, 2000.0), False),  # the same below the lower bound (slack 2)
    (997.5, (1000.0, 2000.0), True),
    (1000.0, (1000.0, 2000.0), False),  # on a bound: clamped
    (0.5008, (0.0, 0.5), False),  # bounds below 1: a thousandth of 1
    (0.5015, (0.0, 0.5), True),
    (1.0015, (0.0, 1.0), True),
    (0.9, (1.0, 2.0), True),  # past the lower bound, below 1
    (20.015, (0.0, 20.0), False),  # the larger bound in magnitude is the upper one...
    (0.98, (-20.0, 0.97), False),  # ...or the lower one
    (0.0, (1.0, 2.0), False),  # no positive scale: nothing to read as held
    (-1.0, (1.0, 2.0), False),
    (math.nan, (1.0, 2.0), False),
    (math.inf, (1.0, 2.0), False),
])  # fmt: skip
def test_a_parameter_is_past_its_clamp_only_beyond_its_rounding(scale, clamp, past):
    said = _past_clamp(scale, clamp=clamp)
    assert (said is not None) == past, said


def test_a_log_temperature_bound_too_large_names_log_t():
    with pytest.warns(UserWarning, match=r"log_scale=True\) bounds log t: a bound of 100 "):
        Temperature(scale=torch.nn.Parameter(torch.tensor(-2.0)), log_scale=True,
                    inverse=True, clamp=(0.0, 100.0))  # fmt: skip
