"""Temperature and ChanceLevel on a loss of one's own watched on its score matrix: what they
cannot read from the loss (whether the matrix holds logits, the scale itself) is said once, and
what the loss can say of itself (its directions) by an attribute."""

import math
import warnings

import pytest
import torch

import gradlab
from gradlab.monitor import ChanceLevel, Temperature, every

LOG_SCALE = math.log(1 / 0.07)


def clip_loss(scores, positives):  # a user's symmetric InfoNCE on logits
    targets = positives.int().argmax(dim=1)
    return (torch.nn.functional.cross_entropy(scores, targets)
            + torch.nn.functional.cross_entropy(scores.T, targets)) / 2  # fmt: skip


def _told(tmp_path, quantity, loss_fn=clip_loss, steps=2):
    generator = torch.Generator().manual_seed(0)
    logit_scale = quantity.scale if isinstance(quantity.scale, torch.Tensor) else None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, quantities=[quantity]) as monitor:
            watched = monitor.watch(loss_fn, inputs="scores")
            for _ in range(steps):
                images, texts = (torch.nn.functional.normalize(torch.randn(
                    6, 4, generator=generator, requires_grad=True), dim=1) for _ in range(2))
                scale = logit_scale.exp() if logit_scale is not None else 1 / 0.07
                scores = scale * images @ texts.T
                watched(scores, torch.eye(6, dtype=torch.bool)).backward()
                monitor.step()
    return [w for w in caught if "Temperature" in str(w.message)]


def test_logits_read_as_cosines_are_said_once_with_their_largest_entry(tmp_path):
    logit_scale = torch.nn.Parameter(torch.tensor(LOG_SCALE))
    told = _told(tmp_path, Temperature(every(1), scale=logit_scale, log_scale=True))
    assert len(told) == 1  # the first monitor.step() only
    message = str(told[0].message)
    shown = float(message.split("holds values up to ")[1].split(" ")[0])
    assert 1.0 < shown <= math.exp(LOG_SCALE)  # the largest |logit|: at most the scale
    assert message == (
        "gradlab.Monitor: Temperature(logits=False) reads the watched score matrix as the scores "
        "S that the scale multiplies (cosines, on embeddings), but it holds values up to "
        f"{shown:.4g} in magnitude: if they are the logits s * S already, pass "
        "Temperature(..., logits=True) (temperature_log_scale_grad is off by the scale "
        "otherwise)"
    )
    said_logits = Temperature(every(1), scale=logit_scale, log_scale=True, logits=True)
    assert _told(tmp_path / "logits", said_logits) == []


def test_the_monitors_tau_taken_for_a_scale_is_said_once(tmp_path):
    told = _told(tmp_path, Temperature(every(1), logits=True))
    assert [str(w.message) for w in told] == [
        "gradlab.Monitor: Temperature() was given no scale= and the watched loss declares none, "
        "so it logs 1 / tau = 100 (the Monitor's tau) as the softmax scale; pass "
        "Temperature(scale=...) the scale (or parameter) the loss multiplies its scores by"
    ]


def test_both_warnings_point_at_the_callers_step(tmp_path):
    told = _told(tmp_path, Temperature(every(1)))  # no scale, logits read as scores
    assert len(told) == 2 and {w.filename for w in told} == {__file__}


@pytest.mark.parametrize("loss_fn", [gradlab.NTXentLoss(0.07)])
def test_a_loss_that_declares_its_scale_is_not_questioned(tmp_path, loss_fn):
    # gradlab's losses say their scale and that they are read on the scores they scale
    assert _told(tmp_path, Temperature(every(1)), loss_fn=loss_fn) == []


def test_a_loss_of_ones_own_says_it_averages_both_directions_by_an_attribute(tmp_path):
    # CLIP's mean of two InfoNCE terms on a non-square matrix: chance is the mean of ln C and ln Q
    def symmetric(scores, positives):
        return (torch.logsumexp(scores, 1).mean() + torch.logsumexp(scores, 0).mean()) / 2

    symmetric.softmax_logits = gradlab.losses.SoftmaxLogits(direction="both", terms=1)
    with gradlab.Monitor(tmp_path, quantities=[gradlab.monitor.ChanceLevel(every(1))]) as monitor:
        scores = torch.randn(8, 7, requires_grad=True)
        watched = monitor.watch(symmetric, inputs="scores")
        watched(scores, torch.eye(8, 7, dtype=torch.bool)).backward()
        record = monitor.step()
    assert record["chance_level"] == pytest.approx((math.log(7) + math.log(8)) / 2, rel=1e-12)


@pytest.mark.parametrize("loss_fn", [gradlab.SmoothAPLoss(0.01), gradlab.FastAPLoss(),
                                     gradlab.FAPPYLoss(), gradlab.BlackboxAPLoss()],
                         ids=lambda loss: type(loss).__name__)  # fmt: skip
def test_an_ap_loss_logs_no_temperature_nor_chance_level_and_says_why(tmp_path, loss_fn):
    """An AP loss on embeddings is no softmax over logits: InfoNCE's closed form and ln C
    would be numbers about another loss (a scale of 1 / tau, a chance level below its loss)."""
    name = type(loss_fn).__name__
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, quantities=[Temperature(every(1)),
                                                   ChanceLevel(every(1))]) as monitor:  # fmt: skip
            watched = monitor.watch(loss_fn)
            embeddings = torch.randn(8, 4, requires_grad=True)
            watched(embeddings, torch.arange(8) // 2).backward()
            record = monitor.step()
    assert record is None
    assert monitor.not_logged == {
        "temperature": f"has no scale to log for {name}: it is no softmax and holds no scale "
                       "(1 / the Monitor's tau is no scale of it); give Temperature(scale=...) "
                       "a parameter of the loss to follow it",
        "chance_level": f"does not apply to {name}: it is no mean of InfoNCE terms, so ln C is "
                        "not its chance level",
    }  # fmt: skip
    said = [str(w.message) for w in caught]
    assert [m for m in said if m.startswith("gradlab.Monitor: the temperature quantity")]
    assert [m for m in said if m.startswith("gradlab.Monitor: the chance_level quantity")]


def _said_for_largest(tmp_path, largest: float) -> list:
    """The Temperature warnings of one step of a loss of one's own on a float64 score matrix
    whose largest magnitude is ``largest`` (a scale given: only the matrix can be told of)."""
    scores = torch.full((4, 4), 0.5, dtype=torch.float64)
    scores[0, 1] = -largest
    scores.requires_grad_(True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, quantities=[Temperature(every(1), scale=20.0)]) as monitor:
            watched = monitor.watch(clip_loss, inputs="scores")
            watched(scores, torch.eye(4, dtype=torch.bool)).backward()
            monitor.step()
    return [w for w in caught if "Temperature" in str(w.message)]


@pytest.mark.parametrize(("largest", "said"), [
    (1.0, False),  # a cosine of 1: a cosine
    (1.0 + 1e-3, False),  # the bound itself: a cosine rounded up
    (1.0 + 2e-3, True),  # beyond it: logits, most likely
])  # fmt: skip
def test_a_matrix_is_questioned_only_beyond_a_cosines_rounding(tmp_path, largest, said):
    told = _said_for_largest(tmp_path, largest)
    assert len(told) == int(said)
    assert all(w.category is RuntimeWarning for w in told)


def _closed_form_loop(scores: torch.Tensor, positive: list[int], scale: float) -> float:
    """Mean over the rows of InfoNCE's dL/d log s, softmax-expected logit minus the positive
    logit, each row's candidates all columns but its own (float64 loops)."""
    rows = scores.shape[0]
    total = 0.0
    for i in range(rows):
        logits = [scale * float(scores[i, j]) for j in range(rows) if j != i]
        top = max(logits)
        weights = [math.exp(value - top) for value in logits]
        expected = sum(w * v for w, v in zip(weights, logits, strict=True)) / sum(weights)
        total += expected - scale * float(scores[i, positive[i]])
    return total / rows


def test_an_in_batch_matrix_of_ones_own_is_read_over_its_rows(tmp_path):
    # a loss of one's own on a batch against itself declares no direction: its rows are the
    # queries (the in-batch convention), not the mean of rows and columns; the matrix here is
    # not symmetric, so the two differ
    generator = torch.Generator().manual_seed(3)
    scores = torch.rand(6, 6, generator=generator, dtype=torch.float64) * 2 - 1
    positive = [1, 0, 3, 2, 5, 4]
    mask = torch.zeros(6, 6, dtype=torch.bool)
    mask[torch.arange(6), torch.tensor(positive)] = True
    scale = 5.0
    with gradlab.Monitor(tmp_path, quantities=[Temperature(every(1), scale=scale)]) as monitor:
        watched = monitor.watch(lambda s, p: (s * scale).logsumexp(1).mean(),
                                inputs="in_batch_scores")  # fmt: skip
        watched(scores.clone().requires_grad_(True), mask).backward()
        record = monitor.step()
    rows = _closed_form_loop(scores, positive, scale)
    columns = _closed_form_loop(scores.T, positive, scale)
    assert abs(rows - columns) > 1e-3  # the test can tell the two readings apart
    assert record["temperature_log_scale_grad"] == pytest.approx(rows, rel=1e-9)


def _told_on_embeddings(tmp_path, quantity, loss_fn):
    generator = torch.Generator().manual_seed(1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, quantities=[quantity]) as monitor:
            watched = monitor.watch(loss_fn)  # on embeddings: the Monitor makes the cosines
            for _ in range(2):
                embeddings = torch.randn(8, 4, generator=generator, requires_grad=True)
                watched(embeddings, torch.arange(8) % 4).backward()
                monitor.step()
    return [str(w.message) for w in caught if "Temperature" in str(w.message)]


def supervised_contrastive(embeddings, labels, temperature=0.07):  # a SupCon of one's own
    unit = torch.nn.functional.normalize(embeddings, dim=1)
    logits = (unit @ unit.T / temperature).fill_diagonal_(-1e9)
    same = (labels[:, None] == labels[None, :]).fill_diagonal_(False)
    return -(logits.log_softmax(dim=1)[same]).mean()


def test_the_monitors_tau_taken_for_a_loss_on_embeddings_is_said_once_too(tmp_path):
    # it was said on a watched score matrix only: a SupCon on embeddings at T = 0.07 logged
    # s = 1 / tau = 100 and its closed form without a word
    assert _told_on_embeddings(tmp_path, Temperature(every(1)), supervised_contrastive) == [
        "gradlab.Monitor: Temperature() was given no scale= and the watched loss declares none, "
        "so it logs 1 / tau = 100 (the Monitor's tau) as the softmax scale; pass "
        "Temperature(scale=...) the scale (or parameter) the loss multiplies its scores by"]
    given = Temperature(every(1), scale=1 / 0.07)
    assert _told_on_embeddings(tmp_path / "given", given, supervised_contrastive) == []


@pytest.mark.parametrize(("scale", "told"), [(5.0, True), (20.0 * 1.02, True), (20.0, False),
                                              (20.0 * 1.009, False)])  # fmt: skip
def test_a_given_scale_that_is_not_the_losss_own_is_said_once(tmp_path, scale, told):
    # NTXentLoss(0.05) declares s = 20; Temperature(scale=5) took 5 in silence
    told_here = _told(tmp_path, Temperature(every(1), scale=scale), gradlab.NTXentLoss(0.05))
    assert [str(w.message) for w in told_here] == ([
        f"gradlab.Monitor: Temperature(scale=...) logs s = {scale:g}, but the watched loss "
        "declares its own scale s = 20: the closed form temperature_log_scale_grad is taken at "
        "the given one; leave scale= out to follow the loss's"] if told else [])


def test_a_given_scale_of_logits_beside_the_losss_own_is_not_questioned(tmp_path):
    # logits s * S made before NTXentLoss(temperature=1.0): the loss's s = 1 scales them again
    logit_scale = torch.nn.Parameter(torch.tensor(LOG_SCALE))
    quantity = Temperature(every(1), scale=logit_scale, log_scale=True, logits=True)
    assert _told(tmp_path, quantity, loss_fn=gradlab.NTXentLoss(1.0)) == []
