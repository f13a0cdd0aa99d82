"""What every loss module shares, one table over all six: the documented call form (against an
independent float64 reference), validate on and off, input errors that name the argument,
degenerate batches (value 0, gradient 0, counted, one warning) and a warning that points at
the caller's line."""

from __future__ import annotations

import inspect
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch

import gradlab
import gradlab.losses
from gradlab import GradlabError
from gradlab.losses import INPUT_FORMS, DegenerateBatchWarning, RankingLoss
from tests.helpers.refusals import wide_unsigned_refusal
from tests.reference.histogram_losses_loops import fappy_algorithm1, fastap_query, ranked_ap
from tests.reference.score_losses_loops import score_loss, siglip_loss
from tests.reference.smooth_ap_loops import (
    cosine,
    cross_modal_smooth_ap,
    in_batch_smooth_ap,
    loss_from_aps,
)

TAU, BINS, DELTA_MIN, MARGIN, TEMPERATURE = 0.2, 10, 0.25, 0.2, 0.5
SIGLIP_SCALE, SIGLIP_BIAS = 5.0, -2.0


def _mean_defined(values):
    defined = [v for v in values if not math.isnan(v)]
    return 1.0 - sum(defined) / len(defined) if defined else 0.0


def _fastap_reference(embeddings, labels):
    return _mean_defined([fastap_query(embeddings, labels, q, BINS) for q in range(len(labels))])


def _blackbox_reference(embeddings, labels):
    aps = []
    for q in range(len(labels)):
        others = [c for c in range(len(labels)) if c != q]
        aps.append(ranked_ap([cosine(embeddings[q], embeddings[c]) for c in others],
                             [labels[c] == labels[q] for c in others], 0.02))  # fmt: skip
    return _mean_defined(aps)


@dataclass(frozen=True)
class Case:
    """One loss: how to build it, its input form and an independent reference of its value."""

    make: Callable[..., RankingLoss]
    input_form: str
    reference: Callable[[list, list], float]


CASES = {
    "SmoothAPLoss": Case(
        lambda **kw: gradlab.SmoothAPLoss(TAU, **kw), "embeddings",
        lambda e, y: loss_from_aps(in_batch_smooth_ap(e, y, TAU, False)),
    ),
    "FastAPLoss": Case(lambda **kw: gradlab.FastAPLoss(BINS, **kw), "embeddings",
                       _fastap_reference),
    "BlackboxAPLoss": Case(lambda **kw: gradlab.BlackboxAPLoss(**kw), "embeddings",
                           _blackbox_reference),
    "FAPPYLoss": Case(
        lambda **kw: gradlab.FAPPYLoss(DELTA_MIN, **kw), "embeddings",
        lambda e, y: fappy_algorithm1(e, y, DELTA_MIN),
    ),
    "NTXentLoss": Case(
        lambda **kw: gradlab.NTXentLoss(TEMPERATURE, **kw), "scores",
        lambda s, p: score_loss("nt_xent", s, p, TEMPERATURE)[0],
    ),
    "MaxViolationTripletLoss": Case(
        lambda **kw: gradlab.MaxViolationTripletLoss(MARGIN, **kw), "scores",
        lambda s, p: score_loss("triplet", s, p, MARGIN)[0],
    ),
    "SigLIPLoss": Case(
        lambda **kw: gradlab.SigLIPLoss(SIGLIP_SCALE, SIGLIP_BIAS, **kw), "scores",
        lambda s, p: siglip_loss(s, p, SIGLIP_SCALE, SIGLIP_BIAS)[0],
    ),
}  # fmt: skip
NAMES = sorted(CASES)
PAIRWISE = {"SigLIPLoss"}
"""Losses that classify each pair on its own (SigLIP, Zhai et al. 2023, Eq. 1): a batch without
a positive, or without a negative, still has signal, so no batch is degenerate for them."""
RANKING = [name for name in NAMES if name not in PAIRWISE]
CORE_REFUSES_NON_FINITE = {"BlackboxAPLoss", "FAPPYLoss"}
"""Losses whose functional core checks finiteness itself, so validate=False cannot skip it."""


def _inputs(form, seed=0, degenerate=None):
    """A batch in the loss's documented form; ``degenerate`` picks a batch without signal."""
    generator = torch.Generator().manual_seed(seed)
    if form == "embeddings":
        embeddings = torch.randn(8, 3, generator=generator, dtype=torch.float64)
        labels = {None: torch.arange(8) % 3, "singletons": torch.arange(8),
                  "one class": torch.zeros(8, dtype=torch.long)}[degenerate]  # fmt: skip
        return embeddings.requires_grad_(True), labels
    scores = torch.rand(5, 6, generator=generator, dtype=torch.float64)
    positives = {None: torch.eye(5, 6, dtype=torch.bool),
                 "singletons": torch.zeros(5, 6, dtype=torch.bool),
                 "one class": torch.ones(5, 6, dtype=torch.bool)}[degenerate]  # fmt: skip
    return scores.requires_grad_(True), positives


def test_the_table_covers_every_loss_of_the_package():
    found, pending = set(), [RankingLoss]
    while pending:
        for cls in pending.pop().__subclasses__():
            pending.append(cls)
            if not cls.__name__.startswith("_") and cls.__module__.startswith("gradlab."):
                found.add(cls.__name__)
    exported = {name for name in gradlab.__all__ if inspect.isclass(getattr(gradlab, name))
                and issubclass(getattr(gradlab, name), RankingLoss) and name != "RankingLoss"}
    assert found | exported == set(CASES)
    assert {name for name in CASES if hasattr(gradlab, name)} == set(CASES)  # exported


def test_a_star_import_of_the_losses_brings_their_public_names_only():
    # without __all__ it brought torch, nn, warnings and some 30 validation helpers
    namespace: dict = {}
    exec("from gradlab.losses import *", namespace)  # the statement under test
    brought = {name for name in namespace if name != "__builtins__"}
    public = {name for name, value in vars(gradlab.losses).items()
              if inspect.isclass(value) and value.__module__ == "gradlab.losses"
              and not name.startswith("_")}  # fmt: skip
    assert brought == public
    assert {name for name in gradlab.__all__ if name in public} == public - {"SoftmaxLogits"}


@pytest.mark.parametrize("name", NAMES)
def test_each_loss_derives_from_the_base_and_declares_its_input_form(name):
    cls = getattr(gradlab, name)
    assert issubclass(cls, RankingLoss) and issubclass(cls, torch.nn.Module)
    assert cls.input_form == CASES[name].input_form and cls.input_form in INPUT_FORMS
    parameters = list(inspect.signature(cls.forward).parameters)
    expected = ["embeddings", "labels"] if cls.input_form == "embeddings" else ["scores",
                                                                                "positives"]
    assert parameters[1:3] == expected  # after self: pytorch-metric-learning's order


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("name", NAMES)
def test_the_documented_call_matches_its_float64_reference(name, seed):
    case = CASES[name]
    first, second = _inputs(case.input_form, seed)
    loss = case.make()(first, second)
    expected = case.reference(first.tolist(), second.tolist())
    assert loss.shape == () and loss.item() == pytest.approx(expected, abs=1e-9)
    loss.backward()
    assert torch.isfinite(first.grad).all()


@pytest.mark.parametrize("name", ["SmoothAPLoss", "BlackboxAPLoss"])
def test_cross_modal_by_keyword(name):
    generator = torch.Generator().manual_seed(3)
    queries = torch.randn(4, 3, generator=generator, dtype=torch.float64)
    candidates = torch.randn(6, 3, generator=generator, dtype=torch.float64)
    positives = torch.rand(4, 6, generator=generator) < 0.4
    positives[:, 0] = True
    got = CASES[name].make()(queries, candidates=candidates, positives=positives).item()
    rows = [[cosine(q, c) for c in candidates.tolist()] for q in queries.tolist()]
    if name == "SmoothAPLoss":
        aps = cross_modal_smooth_ap(queries.tolist(), candidates.tolist(), positives.tolist(), TAU)
    else:
        aps = [ranked_ap(row, flags, 0.02) for row, flags in zip(rows, positives.tolist(),
                                                                   strict=True)]  # fmt: skip
    assert got == pytest.approx(loss_from_aps(aps), abs=1e-9)
    with pytest.raises(GradlabError, match=r"positives=positives\); got 3 positional arguments "
                                           r"\(cross-modal: pass candidates and positives by"):
        CASES[name].make()(queries, candidates, positives)


def _float32_call(loss_fn, first, second, keywords, autocast: bool):
    """The loss and the first input's gradient of one float32 call, under CPU autocast
    (bfloat16) or not; the backward outside the autocast block, as torch advises."""
    leaf = first.detach().float().requires_grad_(True)
    others = {key: value.float() if value.is_floating_point() else value
              for key, value in keywords.items()}  # fmt: skip
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        value = loss_fn(leaf, second, **others) if second is not None else loss_fn(leaf, **others)
    value.backward()
    return value, leaf.grad


@pytest.mark.parametrize("form", ["documented", "cross-modal"])
@pytest.mark.parametrize("name", NAMES)
def test_under_autocast_a_loss_computes_in_its_inputs_dtype(name, form):
    # Autocast would run the cosine products (and SmoothAP's own bmm) in bfloat16: FastAP's
    # and Blackbox AP's gradients then point elsewhere (cosine ~0 to float32's on 32 x 16).
    if form == "cross-modal" and name not in ("SmoothAPLoss", "BlackboxAPLoss"):
        pytest.skip("no cross-modal form")
    generator = torch.Generator().manual_seed(5)
    if form == "cross-modal":
        first = torch.randn(8, 16, generator=generator)
        positives = torch.rand(8, 12, generator=generator) < 0.3
        positives[:, 0] = True
        second, keywords = None, {"candidates": torch.randn(12, 16, generator=generator),
                                  "positives": positives}  # fmt: skip
    elif CASES[name].input_form == "embeddings":
        first, second, keywords = torch.randn(32, 16, generator=generator), torch.arange(32) % 8, {}
    else:
        first, second, keywords = torch.rand(12, 12, generator=generator), torch.eye(12) > 0, {}
    loss_fn = CASES[name].make()
    plain, plain_grad = _float32_call(loss_fn, first, second, keywords, False)
    value, grad = _float32_call(loss_fn, first, second, keywords, True)
    assert plain.dtype == value.dtype == grad.dtype == torch.float32
    assert torch.equal(value, plain) and torch.equal(grad, plain_grad)


@pytest.mark.parametrize("name", ["FastAPLoss", "FAPPYLoss"])
def test_in_batch_only_losses_refuse_the_cross_modal_keywords(name):
    queries, candidates = torch.randn(4, 3), torch.randn(6, 3)
    message = (rf"^{name} takes loss\(embeddings, labels\): it has no cross-modal form .*; "
               r"got candidates and positives$")
    with pytest.raises(GradlabError, match=message):
        CASES[name].make()(queries, candidates=candidates, positives=torch.ones(4, 6) > 0)


@pytest.mark.parametrize("name", NAMES)
def test_validate_refuses_non_finite_input_and_off_lets_it_through(name):
    case = CASES[name]
    first, second = _inputs(case.input_form)
    first = first.detach().clone()
    first[1, 0] = math.nan
    argument = case.input_form  # "embeddings" or "scores"
    with pytest.raises(GradlabError, match=rf"^{argument} must be finite"):
        case.make()(first, second)
    if name in CORE_REFUSES_NON_FINITE:  # their ranks of NaN are undefined: the core refuses
        with pytest.raises(GradlabError, match=r"finite|NaN"):
            case.make(validate=False)(first, second)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # and no warning either
        value = case.make(validate=False)(first, second)
    assert value.shape == ()


@pytest.mark.parametrize("name", NAMES)
def test_validate_must_be_a_bool(name):
    with pytest.raises(GradlabError, match=r"^validate must be True or False; got 'yes'$"):
        CASES[name].make(validate="yes")


@pytest.mark.parametrize(
    ("position", "bad", "message"),
    [(0, "not a tensor", "must be a torch.Tensor; got str"),
     (0, torch.zeros(8), "must be 2-D; got shape (8,)"),
     (1, None, None)],
)  # fmt: skip
@pytest.mark.parametrize("name", NAMES)
def test_bad_input_raises_an_error_naming_the_argument(name, position, bad, message):
    case = CASES[name]
    arguments = list(_inputs(case.input_form))
    names = ["embeddings", "labels"] if case.input_form == "embeddings" else ["scores",
                                                                              "positives"]
    if bad is None:  # the second argument in the wrong dtype
        bad = arguments[1].double()
        message = ("must have an integer dtype" if case.input_form == "embeddings"
                   else "must be a [Q, C] bool mask or [B] integer labels")  # fmt: skip
    arguments[position] = bad
    with pytest.raises(GradlabError) as caught:
        case.make()(*arguments)
    text = str(caught.value)
    assert text.startswith(names[position]) and message in text


def _labels_input(form):
    """A batch whose second argument is ``[B]`` labels: the embedding losses' in-batch form,
    the score losses' square paired matrix with labels for its mask."""
    if form == "embeddings":
        return _inputs(form)
    scores = torch.rand(6, 6, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    return scores.requires_grad_(True), torch.tensor([0, 0, 1, 1, 2, 2])


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64])
@pytest.mark.parametrize("name", NAMES)
def test_labels_wider_than_a_byte_and_unsigned_are_refused_by_every_loss(name, dtype):
    # the package's one rule for labels: torch lacks most operations for these dtypes
    case = CASES[name]
    first, labels = _labels_input(case.input_form)
    argument = "labels" if case.input_form == "embeddings" else "positives"
    with pytest.raises(GradlabError) as caught:
        case.make()(first, labels.to(dtype))
    assert str(caught.value) == wide_unsigned_refusal(argument, dtype)


@pytest.mark.parametrize("name", NAMES)
def test_byte_labels_give_the_float64_reference(name):
    case = CASES[name]
    first, labels = _labels_input(case.input_form)
    loss = case.make()(first, labels.to(torch.uint8))
    positives = labels.tolist()
    if case.input_form == "scores":  # the reference takes the mask the labels stand for
        positives = [[a == b for b in positives] for a in positives]
    assert loss.item() == pytest.approx(case.reference(first.tolist(), positives), abs=1e-9)


@pytest.mark.parametrize("degenerate", ["singletons", "one class"])
@pytest.mark.parametrize("name", sorted(PAIRWISE))
def test_a_pairwise_loss_trains_on_batches_without_ranking_signal(name, degenerate):
    case = CASES[name]
    loss_fn = case.make()
    first, second = _inputs(case.input_form, degenerate=degenerate)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = loss_fn(first, second)
        value.backward()
    assert value.item() == pytest.approx(case.reference(first.tolist(), second.tolist()),
                                         rel=1e-12)  # fmt: skip
    assert first.grad.abs().max() > 0 and loss_fn.degenerate_batches == 0
    assert not [w for w in caught if w.category is DegenerateBatchWarning]


@pytest.mark.parametrize("degenerate", ["singletons", "one class"])
@pytest.mark.parametrize("name", RANKING)
def test_a_degenerate_batch_is_zero_with_zero_gradient_counted_and_warned_once(name, degenerate):
    case = CASES[name]
    loss_fn = case.make()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            first, second = _inputs(case.input_form, degenerate=degenerate)
            value = loss_fn(first, second)
            value.backward()
            if not (name == "NTXentLoss" and degenerate == "one class"):
                # NT-Xent over positives only is a softmax spread over them: not 0, by design.
                # Exactly 0, as the glossary says (FastAP's one class gave about 2e-16, 6e-8
                # in float32: the histogram's AP of 1 up to rounding)
                assert value.item() == 0.0
                assert first.grad.abs().max() == 0.0
        loss_fn(*_inputs(case.input_form))  # a batch with signal is not counted
    flagged = [w for w in caught if w.category is DegenerateBatchWarning]
    assert len(flagged) == 1 and loss_fn.degenerate_batches == 3
    said = str(flagged[0].message)
    assert said.startswith(f"{name}: no query in this batch has both"), said
    # it names what the call was given: a positives mask, or labels and their classes
    masked = "no row of positives holds both a True and a False"
    assert (masked in said, "check the sampler (a batch needs" in said) == (
        (True, False) if case.input_form == "scores" else (False, True)), said


@pytest.mark.parametrize("name", NAMES)
def test_validate_off_counts_nothing_for_the_losses_that_would_read_for_it(name):
    loss_fn = CASES[name].make(validate=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loss_fn(*_inputs(CASES[name].input_form, degenerate="singletons"))
    # SmoothAP reads its group sizes anyway, so it counts at no cost; the others read nothing.
    counted = int(name == "SmoothAPLoss")
    assert loss_fn.degenerate_batches == counted
    assert len([w for w in caught if w.category is DegenerateBatchWarning]) == counted


@pytest.mark.parametrize("name", ["SmoothAPLoss", "BlackboxAPLoss"])
def test_validate_off_counts_nothing_in_the_cross_modal_form_but_smooth_ap(name):
    # the cross-modal form reads nothing for the count with validate=False (SmoothAP's group
    # sizes excepted), as the in-batch form: no positive anywhere is a degenerate batch
    loss_fn = CASES[name].make(validate=False)
    queries, candidates = torch.randn(3, 4), torch.randn(5, 4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loss_fn(queries, candidates=candidates, positives=torch.zeros(3, 5, dtype=torch.bool))
    counted = int(name == "SmoothAPLoss")
    assert loss_fn.degenerate_batches == counted
    assert len([w for w in caught if w.category is DegenerateBatchWarning]) == counted
    checked = CASES[name].make()  # validate=True counts it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateBatchWarning)
        checked(queries, candidates=candidates, positives=torch.zeros(3, 5, dtype=torch.bool))
    assert checked.degenerate_batches == 1


@pytest.mark.slow
@pytest.mark.parametrize("watched", [False, True])
@pytest.mark.parametrize("name", RANKING)
def test_the_warning_points_at_the_line_that_called_the_loss(name, watched, tmp_path):
    case = CASES[name]
    loss_fn = case.make()
    arguments = _inputs(case.input_form, degenerate="singletons")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if watched:  # a Monitor's wrapper adds gradlab frames; the warning still names us
            with gradlab.Monitor(tmp_path, every=1) as monitor:
                wrapped = monitor.watch(loss_fn)
                line = inspect.currentframe().f_lineno + 1
                wrapped(*arguments)
        else:
            line = inspect.currentframe().f_lineno + 1
            loss_fn(*arguments)
    flagged = [w for w in caught if w.category is DegenerateBatchWarning]
    assert len(flagged) == 1
    assert (flagged[0].filename, flagged[0].lineno) == (__file__, line)


def test_nt_xent_warning_does_not_claim_zero_on_a_batch_of_positives_only():
    # NT-Xent over positives only spreads its softmax over them: a loss and a gradient, so
    # the warning must not say "0, with a zero gradient" as the other losses' warning does.
    loss_fn = CASES["NTXentLoss"].make()
    first, second = _inputs("scores", degenerate="one class")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = loss_fn(first, second)
        value.backward()
    (flagged,) = [w for w in caught if w.category is DegenerateBatchWarning]
    message = str(flagged.message)
    assert value.item() > 0 and first.grad.abs().max() > 0
    assert "(0, with a zero gradient)" not in message  # true without positives only
    assert "only positives" in message and "an empty batch" not in message  # that one raises


SCORE_LOSSES = [name for name, case in CASES.items() if case.input_form == "scores"]


@pytest.mark.parametrize("name", [name for name in SCORE_LOSSES if name != "NTXentLoss"])
@pytest.mark.parametrize("degenerate", ["one class", "singletons"])
def test_a_score_loss_warns_of_what_it_returns_and_not_of_an_empty_batch(name, degenerate):
    """The score losses refuse an empty matrix; on a batch without ranking signal they return
    0 with a zero gradient, which their warning says."""
    loss_fn = CASES[name].make()
    first, second = _inputs("scores", degenerate=degenerate)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = loss_fn(first, second)
        value.backward()
    flagged = [str(w.message) for w in caught if w.category is DegenerateBatchWarning]
    if name == "SigLIPLoss":  # every pair is a binary term: a loss, and no batch to warn of
        assert flagged == [] and value.item() > 0
        return
    assert value.item() == 0 and first.grad.abs().max() == 0
    assert "(0, with a zero gradient)" in flagged[0] and "an empty batch" not in flagged[0]
