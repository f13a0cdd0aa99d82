"""What the loss modules add to their functional cores: call-form messages that name the class,
which check refuses a NaN input with ``validate`` on and off, Blackbox AP's cross-modal form
(its parameters, meta tensors, degenerate accounting), the base class's rules for a user's
subclass, and a degenerate-batch warning that never points into gradlab's own files."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import gradlab
from gradlab import GradlabError
from gradlab.functional.blackbox_ap import blackbox_ap
from gradlab.losses import DegenerateBatchWarning, RankingLoss

CROSS_MODAL = "loss(queries, candidates=candidates, positives=positives)"
CLASS_FORM = {
    "SmoothAPLoss": f"loss(embeddings, labels) or {CROSS_MODAL}",
    "BlackboxAPLoss": f"loss(embeddings, labels) or {CROSS_MODAL}",
    "FastAPLoss": "loss(embeddings, labels)",
    "FAPPYLoss": "loss(embeddings, labels)",
}


def _batch(seed=0):
    generator = torch.Generator().manual_seed(seed)
    embeddings = torch.randn(8, 3, generator=generator, dtype=torch.float64)
    return embeddings, torch.arange(8) % 3


def _cross_modal(seed=0):
    generator = torch.Generator().manual_seed(seed)
    queries = torch.randn(4, 3, generator=generator, dtype=torch.float64)
    candidates = torch.randn(6, 3, generator=generator, dtype=torch.float64)
    return queries, candidates


def _message(call) -> str:
    with pytest.raises(GradlabError) as caught:
        call()
    return str(caught.value)


@pytest.mark.parametrize("name", sorted(CLASS_FORM))
def test_a_wrong_call_form_names_the_class_and_its_forms(name):
    loss_fn = getattr(gradlab, name)()
    embeddings, labels = _batch()
    cross_modal = CROSS_MODAL in CLASS_FORM[name]
    hint = " (cross-modal: pass candidates and positives by keyword)" if cross_modal else ""
    assert _message(lambda: loss_fn(embeddings, labels, torch.ones(8))) == (
        f"{name} takes {CLASS_FORM[name]}; got 3 positional arguments{hint}"
    )
    missing = f"{name} takes {CLASS_FORM[name]}; labels is missing"
    assert _message(lambda: loss_fn(embeddings)) == missing


@pytest.mark.parametrize("name", sorted(CLASS_FORM))
def test_a_matrix_where_labels_go_is_named_with_the_form_it_resembles(name):
    # was: "labels must be 1-D; got shape (6, 3)" (and (4, 6) for a mask), from the modules
    # and smooth_ap_loss alike; only blackbox_ap_loss explained the cross-modal form
    loss_fn = getattr(gradlab, name)()
    queries, candidates = _cross_modal()
    cross_modal = CROSS_MODAL in CLASS_FORM[name]
    hint = (" (cross-modal: pass candidates and positives by keyword)" if cross_modal
            else ": it has no cross-modal form (its functional core is in-batch retrieval)")
    assert _message(lambda: loss_fn(queries, candidates)) == (
        f"{name} takes {CLASS_FORM[name]}; got a [C, d] float tensor where labels go{hint}")
    scores, mask = queries @ candidates.T, torch.eye(4, 6, dtype=torch.bool)
    assert _message(lambda: loss_fn(scores, mask)) == (
        f"{name} takes {CLASS_FORM[name]}; got a [Q, C] bool mask where labels go: it takes "
        "embeddings, not a score matrix and its positives (gradlab's losses on a score matrix, "
        "such as NTXentLoss, take those)")


@pytest.mark.parametrize("function", ["smooth_ap_loss", "blackbox_ap_loss"])
def test_the_functional_losses_name_a_matrix_where_labels_go_as_their_modules_do(function):
    queries, candidates = _cross_modal()
    form = f"loss(embeddings, labels) or {CROSS_MODAL}"
    assert _message(lambda: getattr(gradlab.functional, function)(queries, candidates)) == (
        f"{function} takes {form}; got a [C, d] float tensor where labels go (cross-modal: pass "
        "candidates and positives by keyword)")


@pytest.mark.parametrize("name", ["NTXentLoss", "MaxViolationTripletLoss", "SigLIPLoss"])
def test_a_score_loss_called_without_its_positives_names_its_call_form(name):
    # loss(scores) alone, or a stray third argument, is a GradlabError naming the class and
    # loss(scores, positives), not Python's TypeError about forward()'s arguments
    loss_fn = getattr(gradlab, name)()
    scores = torch.randn(3, 3, dtype=torch.float64)
    form = (f"{name} takes loss(scores, positives): scores [Q, C] and positives, a [Q, C] "
            "bool mask or [B] integer labels")  # fmt: skip
    assert _message(lambda: loss_fn(scores)) == f"{form}; positives is missing"
    three = lambda: loss_fn(scores, torch.eye(3, dtype=torch.bool), 0.1)  # noqa: E731
    assert _message(three) == f"{form}; got 3 positional arguments"


@pytest.mark.parametrize(
    ("make", "on", "off"),
    [
        # FAPPY's bins and Blackbox's ranks refuse what has none, naming the caller's tensor
        (lambda **kw: gradlab.FAPPYLoss(0.25, **kw),
         "embeddings must be finite; got NaN in row 1 (1 row of 8)",
         "embeddings must be finite; got NaN in row 1 (1 row of 8)"),
        (lambda **kw: gradlab.BlackboxAPLoss(**kw),
         "embeddings must be finite; got NaN in row 1 (1 row of 8)",
         "embeddings must be finite; got NaN in row 1 (1 row of 8)"),
        (lambda **kw: gradlab.FastAPLoss(**kw),
         "embeddings must be finite; got NaN in row 1 (1 row of 8)", None),
    ],
)  # fmt: skip
def test_validate_off_leaves_a_nan_embedding_to_the_functional_core(make, on, off):
    """With validate=False the module checks nothing and asks its core not to either: what
    remains is the core's own rule (FAPPY's and Blackbox AP's refuse NaN, FastAP's gives NaN)."""
    embeddings, labels = _batch()
    embeddings[1, 0] = math.nan
    assert _message(lambda: make()(embeddings, labels)) == on
    if off is None:
        assert math.isnan(make(validate=False)(embeddings, labels).item())
    else:
        assert _message(lambda: make(validate=False)(embeddings, labels)) == off


def test_cross_modal_blackbox_ap_refuses_nan_only_under_validate():
    queries, candidates = _cross_modal()
    queries[0, 0] = math.nan
    positives = torch.eye(4, 6, dtype=torch.bool)

    def call(**kw):
        return gradlab.BlackboxAPLoss(**kw)(queries, candidates=candidates, positives=positives)

    assert _message(call) == "queries must be finite; got NaN in row 0 (1 row of 4)"
    candidates[2, 1] = math.inf  # the message names the tensor that holds it, as SmoothAP's
    queries[0, 0] = 0.0
    assert _message(call) == "candidates must be finite; got inf in row 2 (1 row of 6)"
    queries[0, 0] = math.nan  # the ranking refuses it too, under the caller's name
    assert _message(lambda: call(validate=False)) == (
        "queries must be finite; got NaN in row 0 (1 row of 4)"
    )
    queries[0, 0] = 0.0  # candidates alone
    assert _message(lambda: call(validate=False)) == (
        "candidates must be finite; got inf in row 2 (1 row of 6)"
    )


@pytest.mark.parametrize("meta", ["queries", "candidates", "positives"])
def test_cross_modal_blackbox_ap_refuses_a_meta_tensor_by_name(meta):
    queries, candidates = _cross_modal()
    tensors = {"queries": queries, "candidates": candidates,
               "positives": torch.eye(4, 6, dtype=torch.bool)}  # fmt: skip
    tensors[meta] = tensors[meta].to("meta")
    loss_fn = gradlab.BlackboxAPLoss()

    def call():
        return loss_fn(tensors["queries"], candidates=tensors["candidates"],
                       positives=tensors["positives"])  # fmt: skip

    assert _message(call) == (
        f"{meta} is a meta tensor (a shape without values); pass a tensor on a real device "
        "(cpu, cuda, ...)"
    )


def test_cross_modal_blackbox_ap_uses_its_interpolation_and_margin():
    queries, candidates = _cross_modal(3)
    queries.requires_grad_(True)
    positives = torch.zeros(4, 6, dtype=torch.bool)
    positives[torch.arange(4), torch.tensor([0, 2, 4, 5])] = True
    positives[0, 1] = True
    loss_fn = gradlab.BlackboxAPLoss(interpolation=40.0, margin=0.5)
    value = loss_fn(queries, candidates=candidates, positives=positives)
    (grad,) = torch.autograd.grad(value, queries)
    # the same loss from the functional core, written out here: cosine scores, mean AP
    scores = F.normalize(queries, dim=1) @ F.normalize(candidates, dim=1).T
    expected = 1.0 - blackbox_ap(scores, positives, 40.0, 0.5).mean()
    (expected_grad,) = torch.autograd.grad(expected, queries)
    assert value.item() == pytest.approx(expected.item(), abs=1e-12)
    torch.testing.assert_close(grad, expected_grad, rtol=0, atol=1e-12)
    assert torch.count_nonzero(grad) > 0


@pytest.mark.parametrize(
    ("rows", "counted"),
    [
        ([[0, 1], [1], [2, 3, 4], [5]], 0),  # ordinary rows, one to three positives
        ([[0], [1], [2], [3]], 0),  # one positive per row still ranks it among negatives
        ([[0, 1, 2, 3], [0, 1, 2, 3, 4, 5], [0, 1, 2, 3, 4, 5], [1, 2]], 0),  # many positives
        ([[], [], [], []], 1),  # no positive anywhere
        ([[0, 1, 2, 3, 4, 5]] * 4, 1),  # every candidate positive: no negative to rank below
        ([[0, 1, 2, 3, 4, 5], [], [0, 1, 2, 3, 4, 5], []], 1),
    ],
)
def test_cross_modal_blackbox_ap_counts_batches_without_ranking_signal(rows, counted):
    queries, candidates = _cross_modal()
    positives = torch.zeros(4, 6, dtype=torch.bool)
    for row, columns in enumerate(rows):
        positives[row, columns] = True
    loss_fn = gradlab.BlackboxAPLoss()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loss_fn(queries, candidates=candidates, positives=positives)
    assert loss_fn.degenerate_batches == counted
    assert len([w for w in caught if w.category is DegenerateBatchWarning]) == counted


SIX = ["SmoothAPLoss", "FastAPLoss", "FAPPYLoss", "BlackboxAPLoss", "NTXentLoss",
       "MaxViolationTripletLoss", "SigLIPLoss"]


@pytest.mark.parametrize("name", SIX)
def test_a_misspelt_keyword_of_a_loss_or_its_constructor_is_a_call_form_error(name):
    # the functional twins said it as a CallFormError (a GradlabError and a TypeError), the
    # modules as Python's bare TypeError: `except GradlabError` caught one and not the other
    from gradlab.errors import CallFormError

    cls = getattr(gradlab, name)
    with pytest.raises(CallFormError) as caught:
        cls()(torch.randn(4, 4), torch.arange(4) % 2, validat=False)
    assert str(caught.value).startswith(f"{name}.forward(")
    assert "self" not in str(caught.value).split(":")[0]  # the signature as the user calls it
    assert str(caught.value).endswith("got an unexpected keyword argument 'validat'")
    with pytest.raises(CallFormError) as caught:
        cls(validat=False)
    assert str(caught.value).startswith(f"{name}(") and "'validat'" in str(caught.value)


def test_a_users_subclass_refuses_a_misfit_call_and_keeps_its_own_type_errors():
    from gradlab.errors import CallFormError

    class MyLoss(RankingLoss):
        input_form = "scores"

        def forward(self, scores, positives):
            return scores.sum() + "text"  # a TypeError inside a call that fits

    with pytest.raises(CallFormError, match=r"^MyLoss.forward\(scores, positives\): "):
        MyLoss()(torch.ones(2, 2), torch.eye(2, dtype=torch.bool), extra=1)
    with pytest.raises(TypeError) as caught:
        MyLoss()(torch.ones(2, 2), torch.eye(2, dtype=torch.bool))
    assert not isinstance(caught.value, GradlabError)

    class Scaled(RankingLoss):  # its own constructor, and a forward taken from another loss
        input_form = "scores"
        forward = MyLoss.forward

        def __init__(self, scale: float = 1.0) -> None:
            super().__init__()
            self.scale = scale

    with pytest.raises(CallFormError, match=r"^Scaled\(scale=1.0\): got an unexpected "
                       r"keyword argument 'scael'$"):
        Scaled(scael=2.0)
    with pytest.raises(CallFormError, match=r"^Scaled.forward\(scores, positives\): ") as caught:
        Scaled()(torch.ones(2, 2), torch.eye(2, dtype=torch.bool), extra=1)
    # said once: the forward MyLoss checks already is not checked again, so the error's cause
    # is Python's own TypeError, not a second CallFormError in the traceback
    assert type(caught.value.__cause__) is TypeError


def test_a_users_subclass_validates_by_default_and_must_declare_a_known_form():
    class MyLoss(RankingLoss):
        input_form = "scores"

    assert MyLoss().validate is True and MyLoss(validate=False).validate is False
    with pytest.raises(GradlabError) as caught:

        class Odd(RankingLoss):
            input_form = "logits"

    assert str(caught.value) == (
        "Odd.input_form must be one of ('embeddings', 'scores', 'in_batch_scores'); got "
        "'logits'"
    )


@pytest.mark.parametrize(
    ("make", "degenerate"),
    [
        (lambda: gradlab.SmoothAPLoss(0.1), lambda: (torch.randn(4, 3), torch.arange(4))),
        (lambda: gradlab.FastAPLoss(), lambda: (torch.randn(4, 3), torch.arange(4))),
        (lambda: gradlab.NTXentLoss(), lambda: (torch.rand(3, 4), torch.zeros(3, 4) > 0)),
    ],
)
def test_the_degenerate_batch_warning_never_points_into_gradlab(make, degenerate):
    """Under mutation testing too: the first frame outside gradlab is then a trampoline of the
    mutation tool; either way not a file of the package."""
    package = Path(gradlab.__file__).resolve().parent
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        make()(*degenerate())
    (flagged,) = [w for w in caught if w.category is DegenerateBatchWarning]
    assert package not in Path(flagged.filename).resolve().parents


def test_a_learnable_tau_is_refused_naming_the_form_that_learns_it():
    # "pass float(x), or x.item()" was the advice, which would freeze a learnable tau
    import gradlab.functional as F

    tau = torch.tensor(0.1, dtype=torch.float64, requires_grad=True)
    with pytest.raises(GradlabError, match=r"^tau must be a number, not a tensor \(a learnable "
                       r"tau: SmoothAPLoss scores cosines, so no scaling of the embeddings "
                       r"stands in for one; 1 - gradlab.functional.smooth_ap\(scores / tau, "
                       r"positives, tau=1.0\)"):
        gradlab.SmoothAPLoss(tau=tau)
    with pytest.raises(GradlabError, match=r"pass float\(x\), or x.item\(\)"):
        gradlab.SmoothAPLoss(tau=torch.tensor(0.1))  # no gradient: a number is meant
    # the scaled embeddings do not stand in: the module's cosines are scale-free
    embeddings, labels = _batch()
    assert torch.equal(gradlab.SmoothAPLoss(1.0)(embeddings / 0.1**0.5, labels),
                       gradlab.SmoothAPLoss(1.0)(embeddings, labels))  # fmt: skip
    # the form the message names gives tau = 0.1's values and a gradient for tau
    generator = torch.Generator().manual_seed(3)
    scores = torch.randn(5, 7, generator=generator, dtype=torch.float64)
    positives = torch.rand(5, 7, generator=generator) < 0.4
    positives[:, 0], positives[:, 1] = True, False
    learned = 1 - F.smooth_ap(scores / tau, positives, tau=1.0).mean()
    fixed = [1 - F.smooth_ap(scores, positives, tau=0.1 + h).mean().item()
             for h in (0, 1e-6, -1e-6)]  # fmt: skip
    assert learned.item() == pytest.approx(fixed[0], rel=1e-12)
    learned.backward()
    assert tau.grad.item() == pytest.approx((fixed[1] - fixed[2]) / 2e-6, rel=1e-5)
