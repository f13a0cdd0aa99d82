"""The Monitor under faulty input: it never logs an impossible value and reads any call form.

Table-driven, one row per case of the reliability probe:

* non-finite embeddings (or scores) under a loss that does not validate: every quantity that
  reads them logs NaN for every key, the others (the loss, the labels' counts) their value, one
  ``RuntimeWarning`` names the quantities and ``monitor.not_finite`` counts them;
* keyword orders and extra arguments (a ``weight=``, a positional extra): the record exists
  with the keys and values of the plain positional call;
* a call it truly cannot read: one warning that names the arguments it saw.

The expectations come from the documented rule (NaN for every key of a quantity that reads
non-finite input) and from the plain positional call, never from the code under test.
"""

from __future__ import annotations

import math
import re
import warnings

import pytest
import torch

import gradlab
from gradlab.errors import GradlabError
from gradlab.monitor import Monitor, Quantity, every
from gradlab.monitor.batch import BatchView, ScoreCapture
from gradlab.monitor.geometry import ChanceLevel, Temperature
from gradlab.monitor.quantities import OperatingRegion

B, D = 8, 4
LABELS = torch.arange(B) % 2
UNTOUCHED = {"step", "loss", "degenerate_batches", "degenerate_batch", "operating_region_width"}
"""Keys that do not read the embeddings or scores: logged as they are (the half-width is a
function of tau and eps alone)."""


def _embeddings(bad: float | None = None, row: int | list[int] = 3) -> torch.Tensor:
    values = torch.randn(B, D, generator=torch.Generator().manual_seed(0))
    if bad is not None:
        values[row] = bad
    return values.requires_grad_(True)


def _scores(bad: float | None = None) -> torch.Tensor:
    values = torch.randn(B, B, generator=torch.Generator().manual_seed(1))
    if bad is not None:
        values[1, 2] = bad
    return values.requires_grad_(True)


def _run(loss_fn, call, steps: int = 1, preset: str = "full", tmp_path=None):
    """Records of ``steps`` logged steps, the warnings raised, and the Monitor."""
    records = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Monitor(tmp_path, preset=preset, every=1) as monitor:
            watched = monitor.watch(loss_fn)
            for step in range(steps):
                loss = call(watched, step)
                if loss.requires_grad:
                    loss.backward()
                records.append(monitor.step())
    return records, [str(w.message) for w in caught], monitor


def _is_valid(key: str, value: float) -> bool:
    """A value a reader can trust: NaN, or inside the key's range."""
    if math.isnan(value):
        return True
    if "cosine" in key:
        return abs(value) <= 1 + 1e-12
    if key.startswith("p_") or key.endswith("_share"):
        return -1e-12 <= value <= 1 + 1e-12
    counts = ("count", "queries_without_gradient", "active_", "norm", "degenerate", "depth")
    if any(part in key for part in counts):
        return value >= 0
    return math.isfinite(value) or key == "loss"


# --- non-finite input: NaN for every key that reads it, said once --------------------------------

NAN_ROWS = {
    "SmoothAP, NaN row": (lambda: gradlab.SmoothAPLoss(0.1, validate=False),
                          lambda w, s: w(_embeddings(math.nan), LABELS)),
    "SmoothAP, two NaN rows (P was -0.06)": (
        lambda: gradlab.SmoothAPLoss(0.1, validate=False),
        lambda w, s: w(_embeddings(math.nan, row=[0, 1]), LABELS)),
    "SmoothAP, all rows NaN (P was -1, counts -3)": (
        lambda: gradlab.SmoothAPLoss(0.1, validate=False),
        lambda w, s: w(_embeddings(math.nan, row=list(range(B))), LABELS)),
    "SmoothAP include_query, inf row": (
        lambda: gradlab.SmoothAPLoss(0.1, include_query=True, validate=False),
        lambda w, s: w(_embeddings(math.inf), LABELS)),
    "plain loss on embeddings, NaN row": (lambda: lambda e, y: e.sum(),
                                          lambda w, s: w(_embeddings(math.nan), LABELS)),
    "FastAP, NaN row": (lambda: gradlab.FastAPLoss(validate=False),
                        lambda w, s: w(_embeddings(math.nan), LABELS)),
    "NT-Xent, NaN score": (lambda: gradlab.NTXentLoss(0.1, validate=False),
                           lambda w, s: w(_scores(math.nan), torch.eye(B, dtype=torch.bool))),
    "VSE++, -inf score": (lambda: gradlab.MaxViolationTripletLoss(validate=False),
                          lambda w, s: w(_scores(-math.inf), torch.eye(B, dtype=torch.bool))),
    "cross-modal queries, NaN candidate": (
        lambda: lambda queries, candidates, positives: queries.sum() + candidates.sum(),
        lambda w, s: w(_embeddings(), candidates=_embeddings(math.nan, row=5),
                       positives=torch.eye(B, dtype=torch.bool))),
}  # fmt: skip


@pytest.mark.parametrize(("make_loss", "call"), NAN_ROWS.values(), ids=NAN_ROWS.keys())
def test_non_finite_input_logs_nan_for_every_key_that_reads_it(tmp_path, make_loss, call):
    (record,), messages, monitor = _run(make_loss(), call, tmp_path=tmp_path)
    read = sorted(set(record) - UNTOUCHED)
    assert len(read) >= 2  # operating region at least (the cheapest form's quantities)
    assert {key: value for key, value in record.items() if not _is_valid(key, value)} == {}
    assert [key for key in read if not math.isnan(record[key])] == []
    assert not math.isnan(record["degenerate_batch"])  # from the labels or the mask: still valid
    warned = [m for m in messages if "not finite" in m]
    assert len(warned) == 1 and "operating_region" in warned[0] and "step 0" in warned[0]
    assert "operating_region" in monitor.not_finite and "loss" not in monitor.not_finite


def test_the_warning_comes_once_and_finite_steps_log_their_values(tmp_path):
    def call(watched, step):  # NaN at steps 0 and 2, finite at step 1
        return watched(_embeddings(math.nan if step != 1 else None), LABELS)

    records, messages, monitor = _run(gradlab.SmoothAPLoss(0.1, validate=False), call, steps=3,
                                      preset="default", tmp_path=tmp_path)  # fmt: skip
    assert len([m for m in messages if "not finite" in m]) == 1
    assert monitor.not_finite["operating_region"] == 2
    assert math.isnan(records[0]["p_seed"]) and math.isnan(records[2]["p_seed"])
    assert 0 < records[1]["p_seed"] <= 1 and records[1]["gradient_count_mean"] >= 0


def test_finite_input_says_nothing(tmp_path):
    (record,), messages, monitor = _run(gradlab.SmoothAPLoss(0.1), lambda w, s: w(
        _embeddings(), LABELS), tmp_path=tmp_path)  # fmt: skip
    assert monitor.not_finite == {} and not [m for m in messages if "not finite" in m]
    assert not math.isnan(record["p_seed"]) and not math.isnan(record["smooth_ap"])


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_watched_loss_that_is_not_finite_on_finite_input_is_said_once_and_counted(
    tmp_path, bad
):
    def loss_fn(embeddings, labels, broken=False):  # a log of 0 or a division by 0
        return embeddings.square().sum() + (bad if broken else 0.0)

    def call(watched, step):  # finite embeddings every step; the loss goes bad at steps 1, 2
        return watched(_embeddings(), LABELS, broken=step > 0)

    records, messages, monitor = _run(loss_fn, call, steps=3, preset="default",
                                      tmp_path=tmp_path)  # fmt: skip
    logged = [record["loss"] for record in records]
    assert math.isfinite(logged[0])
    assert [str(value) for value in logged[1:]] == [str(bad)] * 2  # logged as it is (NaN too)
    assert all(math.isfinite(record["p_seed"]) for record in records)  # inputs finite: values
    warned = [m for m in messages if "loss is" in m]
    assert len(warned) == 1 and f"step 1: loss is {bad} " in warned[0], messages
    assert monitor.not_finite == {"loss": 2}


def test_keys_that_read_no_input_value_keep_it_on_a_non_finite_step(tmp_path):
    tau, eps = 0.1, 0.005
    log_scale = torch.nn.Parameter(torch.tensor(math.log(10.0), dtype=torch.float64))

    def loss_fn(embeddings, labels):  # finite whatever the embeddings: the scale itself
        return embeddings.nan_to_num(0.0, 0.0, 0.0).sum() * 0 + log_scale

    quantities = [OperatingRegion(eps=eps), ChanceLevel(),
                  Temperature(scale=log_scale, log_scale=True, clamp=(0.0, math.log(100.0)))]
    records = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Monitor(tmp_path, tau, quantities=quantities, every=1) as monitor:
            watched = monitor.watch(loss_fn)
            for step in range(2):  # NaN embeddings at step 0, finite at step 1
                log_scale.grad = None
                watched(_embeddings(math.nan if step == 0 else None), LABELS).backward()
                records.append(monitor.step())
    nan_step, finite_step = records
    # w solves sigmoid'(w / tau) / tau = eps: sigma(1 - sigma) = eps tau at sigma = G(w / tau)
    slope_share = (1 + math.sqrt(1 - 4 * eps * tau)) / 2
    width = tau * math.log(slope_share / (1 - slope_share))
    expected = {
        "operating_region_width": width,
        "chance_level": math.log(B - 1),  # ln C, C = B - 1 candidates in-batch
        "loss_minus_chance": math.log(10.0) - math.log(B - 1),
        "temperature_scale": 10.0,
        "temperature_log_scale_grad_observed": 1.0,  # dL/d log s of L = log s
        "temperature_clamp_hit": 0.0,
    }
    for record in (nan_step, finite_step):
        assert {key: record[key] for key in expected} == pytest.approx(expected, rel=1e-9)
    assert math.isnan(nan_step["p_seed"]) and math.isnan(nan_step["temperature_log_scale_grad"])
    assert math.isfinite(finite_step["p_seed"])
    assert math.isfinite(finite_step["temperature_log_scale_grad"])
    assert set(monitor.not_finite) == {"operating_region", "temperature"}
    assert len([w for w in caught if "not finite" in str(w.message)]) == 1


class AlwaysNaN(Quantity):
    """A user's quantity that reads nothing and logs NaN (its own business, as a count of 0)."""

    name = "always_nan"
    keys = ("always_nan",)

    def compute(self, batch):
        return {"always_nan": torch.tensor(math.nan, dtype=torch.float64)}


class AlwaysNaNAndSays(AlwaysNaN):
    name = "always_nan_says"
    keys = ("always_nan_says",)
    warns_if_not_finite = True

    def compute(self, batch):
        return {"always_nan_says": torch.tensor(math.nan, dtype=torch.float64)}


class AlwaysNaNAndMeansIt(AlwaysNaN):
    name = "always_nan_means_it"
    keys = ("always_nan_means_it",)
    warns_if_not_finite = False  # its NaN means something

    def compute(self, batch):
        return {"always_nan_means_it": torch.tensor(math.nan, dtype=torch.float64)}


@pytest.mark.parametrize(("quantity", "said"), [
    (AlwaysNaN(), True), (AlwaysNaNAndSays(), True), (AlwaysNaNAndMeansIt(), False),
    (gradlab.monitor.Margins(), False),  # gradlab's own say what their NaN means
])  # fmt: skip
def test_a_quantity_of_yours_is_said_when_its_value_is_not_finite_unless_it_declines(
    tmp_path, quantity, said
):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Monitor(tmp_path, quantities=[quantity]) as monitor:
            watched = monitor.watch(gradlab.SmoothAPLoss(0.1))
            for _ in range(2):
                watched(_embeddings(), LABELS).backward()
                record = monitor.step()
    if isinstance(quantity, AlwaysNaN):
        assert math.isnan(record[quantity.name])
    messages = [str(w.message) for w in caught if "is nan while" in str(w.message)]
    assert len(messages) == int(said)
    assert monitor.not_finite == ({quantity.name: 2} if said else {})


# --- call forms: any keyword order, extra arguments ignored ---------------------------------------


def _weighted_smooth_ap(embeddings, labels, weight=None, margin=0.0):
    loss = gradlab.SmoothAPLoss(0.1)(embeddings, labels)
    return loss if weight is None else loss * weight.mean() + margin


def _features_smooth_ap(features, labels, weight=None):
    return gradlab.SmoothAPLoss(0.1)(features, labels)


def _cross_modal(queries, candidates, positives, weight=None):
    return (queries @ candidates.T).masked_fill(~positives, 0).sum()


def _on_scores(scores, positives, weight=None):
    return gradlab.NTXentLoss(0.1)(scores, positives)


_on_scores.input_form = "scores"  # read as a score matrix, as gradlab's losses declare

POSITIVES = torch.eye(B, dtype=torch.bool)
CALL_ROWS = {
    "labels= before embeddings=": (_weighted_smooth_ap,
                                   lambda w, e: w(labels=LABELS, embeddings=e)),
    "labels= after a positional": (_weighted_smooth_ap, lambda w, e: w(e, labels=LABELS)),
    "labels= before features= (another name)": (
        _features_smooth_ap, lambda w, e: w(labels=LABELS, features=e, weight=torch.ones(B))),
    "extra weight= keyword": (_weighted_smooth_ap, lambda w, e: w(e, LABELS, weight=torch.ones(B))),
    "extra weight= before labels=": (
        _weighted_smooth_ap, lambda w, e: w(e, weight=torch.ones(B), labels=LABELS)),
    "extra positional tensor": (_weighted_smooth_ap, lambda w, e: w(e, LABELS, torch.ones(B))),
    "extra positional number": (_weighted_smooth_ap,
                                lambda w, e: w(e, LABELS, torch.ones(B), 0.0)),
    "cross-modal, positives= before candidates=": (
        _cross_modal, lambda w, e: w(e, positives=POSITIVES, candidates=e.detach() * 2)),
    "cross-modal, extra weight= keyword": (
        _cross_modal, lambda w, e: w(e, e.detach() * 2, POSITIVES, weight=torch.ones(B))),
    "scores, extra weight= keyword": (
        _on_scores, lambda w, e: w(_scores(), POSITIVES, weight=torch.ones(B))),
}  # fmt: skip
PLAIN = {  # the same loss called plainly, positionally
    _weighted_smooth_ap: lambda w, e: w(e, LABELS),
    _cross_modal: lambda w, e: w(e, e.detach() * 2, POSITIVES),
    _features_smooth_ap: lambda w, e: w(e, LABELS),
}


@pytest.mark.parametrize(("loss_fn", "call"), CALL_ROWS.values(), ids=CALL_ROWS.keys())
def test_any_keyword_order_and_extra_arguments_log_the_plain_calls_record(
    tmp_path, loss_fn, call
):
    def run(how, folder):
        return _run(loss_fn, lambda watched, step: how(watched, _embeddings()),
                    preset="default", tmp_path=tmp_path / folder)  # fmt: skip

    (record,), messages, monitor = run(call, "call")
    plain = PLAIN.get(loss_fn, lambda w, e: w(_scores(), POSITIVES))
    (expected,), _, _ = run(plain, "plain")
    assert monitor.skipped_calls == 0 and not [m for m in messages if "cannot read" in m]
    assert record is not None and record.keys() == expected.keys() and len(record) > 4
    for key, value in expected.items():
        if key != "loss":  # a weight or margin may change the loss, never the diagnostics
            assert record[key] == pytest.approx(value, nan_ok=True), key


# --- a call it truly cannot read: one warning naming the arguments it saw -------------------------

UNREADABLE_ROWS = {
    "1-D first argument, keywords": (
        lambda w: w(torch.zeros(B), labels=LABELS, weight=torch.ones(B)),
        "args[0]=Tensor[8], labels=Tensor[8], weight=Tensor[8]"),
    "labels missing, extra keyword": (
        lambda w: w(torch.zeros(B, D), weight=torch.ones(B)),
        "args[0]=Tensor[8, 4], weight=Tensor[8]"),
    "candidates without positives": (
        lambda w: w(torch.zeros(B, D), torch.zeros(B, D), margin=0.2),
        "args[0]=Tensor[8, 4], args[1]=Tensor[8, 4], margin=float"),
    # a shape without values: nothing to compute, and a transfer would stop training
    "meta embeddings": (
        lambda w: w(torch.zeros(B, D, device="meta"), LABELS.to("meta")),
        "args[0]=Tensor[8, 4], args[1]=Tensor[8]"),
    "meta labels": (
        lambda w: w(torch.zeros(B, D), LABELS.to("meta")),
        "args[0]=Tensor[8, 4], args[1]=Tensor[8]"),
}  # fmt: skip


@pytest.mark.parametrize(("call", "seen"), UNREADABLE_ROWS.values(), ids=UNREADABLE_ROWS.keys())
def test_an_unreadable_call_warns_once_with_the_arguments_it_saw(tmp_path, call, seen):
    def loss_fn(*args, **kwargs):
        return args[0].sum()

    records, messages, monitor = _run(loss_fn, lambda watched, step: call(watched), steps=2,
                                      preset="cheap", tmp_path=tmp_path)  # fmt: skip
    warned = [m for m in messages if "cannot read" in m]
    assert len(warned) == 1 and f"the call's arguments: {seen}" in warned[0]
    assert monitor.skipped_calls == 2 and records == [None, None]


@pytest.mark.parametrize(
    ("inputs", "call", "named"),
    [("embeddings", lambda w: w(torch.zeros(B, D, device="meta"), LABELS), "embeddings"),
     ("embeddings", lambda w: w(torch.zeros(B, D), LABELS.to("meta")), "second argument"),
     ("scores", lambda w: w(torch.zeros(B, B, device="meta"), torch.eye(B, dtype=torch.bool)),
      "scores")],
)  # fmt: skip
def test_a_meta_tensor_in_a_call_is_named(tmp_path, inputs, call, named):
    def loss_fn(*args, **kwargs):
        return args[0].sum()

    with gradlab.Monitor(tmp_path, preset="cheap", every=1) as monitor:
        watched = monitor.watch(loss_fn, inputs=inputs)
        with pytest.warns(RuntimeWarning, match=f"cannot read was not logged \\({named} is a "
                                                "meta tensor"):
            call(watched)
        assert monitor.step() is None and monitor.skipped_calls == 1


# --- the device-side finiteness flags, against a loop over the entries ---------------------------


@pytest.mark.parametrize("where", ["embeddings", "candidates", "grad", "nowhere"])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_finite_flags_match_a_loop_over_the_entries(where, bad, dtype):
    generator = torch.Generator().manual_seed(2)
    tensors = {name: torch.randn(shape, generator=generator).to(dtype)
               for name, shape in (("embeddings", (5, 3)), ("candidates", (6, 3)),
                                   ("grad", (5, 6)))}  # fmt: skip
    if where != "nowhere":
        tensors[where][4, 2] = bad
    batch = BatchView(tensors["embeddings"], candidates=tensors["candidates"],
                      positives=torch.eye(5, 6, dtype=torch.bool))  # fmt: skip
    batch.score_captures = [ScoreCapture("i2t", None, batch.positives, grad=tensors["grad"]),
                            ScoreCapture("t2i", None, batch.positives)]  # fmt: skip

    def finite(name):
        return all(math.isfinite(float(v)) for v in tensors[name].flatten().tolist())

    expected_inputs = finite("embeddings") and finite("candidates")
    inputs, grads = batch.finite_flags()
    assert (bool(inputs), bool(grads)) == (expected_inputs, expected_inputs and finite("grad"))


def test_finite_flags_of_an_empty_batch_are_true():
    flags = BatchView(torch.zeros(0, 3), labels=torch.zeros(0, dtype=torch.long)).finite_flags()
    assert [bool(flag) for flag in flags] == [True, True]


def test_a_scale_that_cannot_be_read_at_the_call_disables_temperature_alone(tmp_path):
    # Temperature reads its scale at the watched call (Quantity.at_call); a callable scale that
    # raises there made the whole call unreadable: the loss and P of the step were lost too,
    # under a warning that blamed the loss call. Now the temperature alone is disabled, named
    asked = []

    def scale():
        asked.append(len(asked))
        if len(asked) == 1:
            raise RuntimeError("the scale is not ready")
        return 20.0

    quantities = [OperatingRegion(every(1)), Temperature(every(1), scale=scale)]
    scores = torch.randn(B, B, generator=torch.Generator().manual_seed(3),
                         dtype=torch.float64).tanh()  # cosines: in [-1, 1]
    eye = torch.eye(B, dtype=torch.bool)
    records = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Monitor(tmp_path, quantities=quantities) as monitor:
            loss_fn = monitor.watch(gradlab.NTXentLoss(0.05, direction="i2t"))
            for _ in range(2):
                loss_fn(scores.clone().requires_grad_(), eye).backward()
                records.append(monitor.step())
    warned = [str(w.message) for w in caught if w.category is RuntimeWarning]
    assert len(warned) == 1
    assert warned[0].startswith("gradlab.Monitor: step 0: quantity 'temperature' raised in "
                                "at_call() and is disabled (strict=True raises instead):\n")
    assert warned[0].rstrip().endswith("RuntimeError: the scale is not ready")
    assert monitor.skipped_calls == 0 and list(monitor.disabled) == ["temperature"]
    assert [r["step"] for r in records] == [0, 1]
    assert all("p_cross_modal" in r and "temperature_scale" not in r for r in records)
    with Monitor(tmp_path / "strict", quantities=[Temperature(every(1), scale=scale)],
                 strict=True) as monitor:  # fmt: skip
        asked.clear()
        loss_fn = monitor.watch(gradlab.NTXentLoss(0.05, direction="i2t"))
        with pytest.raises(GradlabError, match=r"^quantity 'temperature' raised in at_call\(\) "
                           "at step 0: RuntimeError: the scale is not ready$"):
            loss_fn(scores.clone().requires_grad_(), eye)


# --- a quantity of one's own whose other methods fail: that quantity alone, named ---------------


class _Own(Quantity):
    """A quantity of the user's own: the mean embedding entry, and a hook that fails."""

    name = "own"
    keys = ("own_mean",)
    needs = frozenset({"embeddings"})

    def __init__(self, schedule=None, fails=None):
        super().__init__(schedule)
        self.fails = fails

    def at_call(self, batch):
        if self.fails == "at_call":
            raise KeyError("boom")

    def said_of_logged(self, logged, batch):
        if self.fails == "said_of_logged":
            raise ValueError("cannot say")
        return 7 if self.fails == "said_a_number" else None

    def compute(self, batch):
        return {"own_mean": batch.embeddings.double().mean()}


def _train_own(tmp_path, own, steps=3, strict=False):
    """Three SmoothAP steps with the loss and ``own``; the records and the warnings' texts."""
    generator = torch.Generator().manual_seed(0)
    records = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Monitor(tmp_path, quantities=[gradlab.monitor.Loss(every(1)), own],
                     strict=strict) as monitor:  # fmt: skip
            loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.1))
            for _ in range(steps):
                embeddings = torch.randn(8, 4, generator=generator, requires_grad=True)
                loss_fn(embeddings, torch.arange(8) % 2).backward()
                records.append(monitor.step())
    said = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    return records, said, monitor


@pytest.mark.parametrize(("fails", "method", "error"), [
    ("at_call", "at_call()", "KeyError: 'boom'"),
    ("said_of_logged", "said_of_logged()", "ValueError: cannot say"),
])  # fmt: skip
def test_a_hook_that_raises_disables_its_quantity_alone_and_names_it(tmp_path, fails, method,
                                                                     error):  # fmt: skip
    # a raising at_call dropped the whole step (the loss too) under a warning blaming the loss
    # call; a raising said_of_logged raised out of monitor.step() on every logged step
    records, said, monitor = _train_own(tmp_path, _Own(every(1), fails=fails))
    assert [r["step"] for r in records] == [0, 1, 2] and all("loss" in r for r in records)
    own = [r for r in records if "own_mean" in r]
    assert len(own) == (1 if fails == "said_of_logged" else 0)  # step 0's values were written
    assert len(said) == 1 and said[0].startswith(
        f"gradlab.Monitor: step 0: quantity 'own' raised in {method} and is disabled "
        "(strict=True raises instead):\nTraceback")  # fmt: skip
    assert said[0].rstrip().endswith(error)
    assert list(monitor.disabled) == ["own"] and monitor.skipped_calls == 0
    with pytest.raises(GradlabError, match=rf"^quantity 'own' raised in {re.escape(method)} at "
                       rf"step 0: {re.escape(error)}$"):  # fmt: skip
        _train_own(tmp_path / "strict", _Own(every(1), fails=fails), strict=True)


def test_said_of_logged_returning_no_text_disables_its_quantity(tmp_path):
    records, said, _ = _train_own(tmp_path, _Own(every(1), fails="said_a_number"))
    assert said == ["gradlab.Monitor: step 0: quantity 'own' is disabled, refused in "
                    "said_of_logged(): said_of_logged must return a str or None; got 7 "
                    "(strict=True raises instead)"]
    assert [sorted(r) for r in records] == [["disabled", "loss", "own_mean", "step"],
                                            ["loss", "step"], ["loss", "step"]]  # fmt: skip
    assert records[0]["disabled"] == {"own": "step 0: refused in said_of_logged(): "
                                             "said_of_logged must return a str or None; got 7"}


@pytest.mark.parametrize(("returned", "message"), [
    (True, "quantity 'own': not_applicable() must return a str (why the watched loss cannot "
           "serve it) or None (it can); got True"),
    (ZeroDivisionError("x"), "quantity 'own': its not_applicable() raised ZeroDivisionError: x"),
])  # fmt: skip
def test_not_applicable_other_than_a_reason_or_none_is_refused_at_watch(tmp_path, returned,
                                                                        message):  # fmt: skip
    # True (read as "yes, not applicable") ended in "sequence item 0: expected str instance"
    class Judging(_Own):
        def not_applicable(self, loss):
            if isinstance(returned, Exception):
                raise returned
            return returned

    with Monitor(tmp_path, quantities=[gradlab.monitor.Loss(every(1)), Judging(every(1))]) as m:
        with pytest.raises(GradlabError) as refused:
            m.watch(gradlab.SmoothAPLoss(0.1))
    assert str(refused.value) == message


def test_false_from_not_applicable_and_said_of_logged_says_nothing(tmp_path):
    # False reads as "it applies" / "nothing to say", as None does: refused, it broke a
    # quantity that worked before
    class Modest(_Own):
        def not_applicable(self, loss):
            return False

        def said_of_logged(self, logged, batch):
            return False

    records, said, monitor = _train_own(tmp_path, Modest(every(1)))
    assert said == [] and monitor.disabled == {} and monitor.not_logged == {}
    assert all("own_mean" in r for r in records)


def test_a_quantity_needing_the_embeddings_gradient_is_not_computed_without_it(tmp_path):
    # step() before backward: the warning said the quantity "logged nothing", but its compute
    # ran on embedding_grad=None, raised AttributeError, and it was disabled for the whole run
    class GradMean(_Own):
        name = "grad_mean"
        keys = ("grad_mean",)
        needs = frozenset({"embeddings", "embedding_grad"})

        def compute(self, batch):
            return {"grad_mean": batch.embedding_grad.double().abs().mean()}

    generator = torch.Generator().manual_seed(0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Monitor(tmp_path, quantities=[gradlab.monitor.Loss(every(1)), GradMean(every(1))]) \
                as monitor:  # fmt: skip
            loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.1))
            embeddings = torch.randn(8, 4, generator=generator, requires_grad=True)
            loss = loss_fn(embeddings, torch.arange(8) % 2)
            early = monitor.step()  # before backward
            loss.backward()
            loss_fn(embeddings, torch.arange(8) % 2).backward()
            late = monitor.step()
    said = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(said) == 1 and "so grad_mean logged nothing for it" in said[0]
    assert sorted(early) == ["loss", "step"] and monitor.disabled == {}
    assert late["grad_mean"] == pytest.approx(float(embeddings.grad.double().abs().mean() / 2))


def test_a_schedule_that_cannot_be_called_with_the_step_is_refused_naming_its_quantity(tmp_path):
    # a raw TypeError came out of the first watched call
    with Monitor(tmp_path, quantities=[gradlab.monitor.Loss(lambda: True)]) as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.1))
        with pytest.raises(GradlabError, match=r"^the schedule of the 'loss' quantity, .*, raised "
                           r"for step 0: TypeError: .*\(a schedule is called as schedule\(step\) "
                           r"and returns True or False\)$") as refused:  # fmt: skip
            loss_fn(torch.randn(8, 4, requires_grad=True), torch.arange(8) % 2)
    assert isinstance(refused.value.__cause__, TypeError)


def test_a_quantity_class_where_its_object_goes_is_refused_saying_so(tmp_path):
    with pytest.raises(GradlabError) as refused:
        Monitor(tmp_path, quantities=[gradlab.monitor.Loss(), _Own])
    assert str(refused.value).endswith(" (a quantity is an object, not its class: pass _Own())")
    with pytest.raises(GradlabError) as refused:
        Monitor(tmp_path, quantities=[gradlab.monitor.Loss, _Own])
    assert str(refused.value).endswith(" (a quantity is an object, not its class: pass Loss(), "
                                       "_Own())")


# --- one quantity's failure or message leaves the others of its step alone ----------------------


class _Second(_Own):
    """A second quantity of one's own, after the first in the Monitor's list: says a line."""

    name = "second"
    keys = ("second_mean",)

    def said_of_logged(self, logged, batch):
        return "the second quantity has something to say"

    def compute(self, batch):
        return {"second_mean": batch.embeddings.double().abs().mean()}


def _train_two(tmp_path, first):
    """One logged SmoothAP step with ``first`` then :class:`_Second`; the record and warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Monitor(tmp_path, quantities=[first, _Second(every(1))]) as monitor:
            loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.1))
            loss_fn(_embeddings(), LABELS).backward()
            record = monitor.step()
    return record, [w for w in caught if issubclass(w.category, RuntimeWarning)]


@pytest.mark.parametrize("fails", ["compute", "said_of_logged"])
def test_a_quantity_that_raises_leaves_the_next_one_its_values_and_its_say(tmp_path, fails):
    class Failing(_Own):
        def compute(self, batch):
            if fails == "compute":
                raise ValueError("no values")
            return super().compute(batch)

    record, said = _train_two(tmp_path, Failing(every(1), fails=fails))
    expected = _embeddings().detach().double().abs().mean().item()
    assert record["second_mean"] == pytest.approx(expected, rel=1e-12)
    assert [str(w.message) for w in said if "second quantity" in str(w.message)] == [
        "gradlab.Monitor: step 0: the second quantity has something to say"]


def test_what_a_quantity_says_of_its_values_points_at_the_line_that_stepped(tmp_path):
    _, said = _train_two(tmp_path, _Own(every(1)))
    (second,) = [w for w in said if "second quantity" in str(w.message)]
    assert second.filename == __file__


def test_a_number_a_quantity_returns_is_logged_on_the_batchs_device(tmp_path):
    # made on torch's default device, it would not stack with the step's other values
    class Count(_Own):
        def compute(self, batch):
            return {"own_mean": 3}

    embeddings = _embeddings()
    with Monitor(tmp_path, quantities=[gradlab.monitor.Loss(every(1)), Count(every(1))]) as m:
        loss_fn = m.watch(gradlab.SmoothAPLoss(0.1))
        loss_fn(embeddings, LABELS).backward()
        torch.set_default_device("meta")
        try:
            record = m.step()
        finally:
            torch.set_default_device(None)
    assert record["own_mean"] == 3.0 and math.isfinite(record["loss"])


def test_the_warning_of_non_finite_inputs_names_the_line_that_stepped(tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Monitor(tmp_path, preset="default", every=1) as monitor:
            watched = monitor.watch(gradlab.SmoothAPLoss(0.1, validate=False))
            watched(_embeddings(math.nan), LABELS).backward()
            monitor.step()
    said = [w for w in caught if "are not finite" in str(w.message)]
    assert [w.filename for w in said] == [__file__]
