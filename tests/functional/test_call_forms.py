"""A call that does not fit a functional API's signature is refused as gradlab's error, naming
the signature and, for a keyword-only argument given by position, how to pass it."""

import pytest
import torch

import gradlab
import gradlab.functional as F
from gradlab.errors import GradlabError
from gradlab.functional.precision import outside_autocast

SMOOTH_AP = ("smooth_ap(scores, positives, tau=0.01, *, candidate_mask=None, backward='exact', "
             "max_chunk_elements=1048576, validate=True)")  # fmt: skip


def _inputs():
    scores = torch.randn(3, 4, generator=torch.Generator().manual_seed(0))
    return scores, scores > 0, torch.ones(3, 4, dtype=torch.bool)


def test_a_keyword_only_argument_given_by_position_is_named_with_the_way_to_pass_it():
    scores, positives, mask = _inputs()
    with pytest.raises(GradlabError) as caught:
        F.smooth_ap(scores, positives, 0.1, mask)
    assert str(caught.value) == (
        f"{SMOOTH_AP}: too many positional arguments; candidate_mask, backward, "
        "max_chunk_elements, validate are keyword-only: pass them by name (candidate_mask=...)")
    assert isinstance(caught.value.__cause__, TypeError)
    expected = F.smooth_ap(scores, positives, 0.1, candidate_mask=mask)  # the form it names
    assert expected.shape == (3,)


@pytest.mark.parametrize(("call", "wrong"), [
    (lambda s, p: F.smooth_ap(s), "missing a required argument: 'positives'"),
    (lambda s, p: F.smooth_ap(s, p, bogus=1), "got an unexpected keyword argument 'bogus'"),
    # every positional place filled, none too many: no keyword-only argument was misplaced
    (lambda s, p: F.smooth_ap(s, p, 0.1, bogus=1), "got an unexpected keyword argument 'bogus'"),
])  # fmt: skip
def test_other_misfits_name_the_signature_without_the_keyword_advice(call, wrong):
    scores, positives, _ = _inputs()
    with pytest.raises(GradlabError) as caught:
        call(scores, positives)
    assert str(caught.value) == f"{SMOOTH_AP}: {wrong}"


def test_a_misfit_call_is_a_type_error_too_as_for_a_loss_class():
    # `except TypeError` caught a misspelt keyword of gradlab.SmoothAPLoss (Python's own error)
    # and missed the same mistake in gradlab.functional.smooth_ap (a GradlabError alone)
    scores, positives, _ = _inputs()
    with pytest.raises(TypeError) as functional:
        F.smooth_ap(scores, positives, tmp=0.1)
    with pytest.raises(TypeError) as module:
        gradlab.SmoothAPLoss(tmp=0.1)
    assert isinstance(functional.value, GradlabError) and isinstance(functional.value, ValueError)
    assert "got an unexpected keyword argument 'tmp'" in str(module.value)
    assert str(functional.value) == f"{SMOOTH_AP}: got an unexpected keyword argument 'tmp'"


def test_a_type_error_from_inside_the_function_is_left_as_it_is():
    @outside_autocast
    def fails_inside(scores, *, scale=1.0):
        raise TypeError("inside")

    with pytest.raises(TypeError, match=r"^inside$") as caught:
        fails_inside(torch.ones(2))
    assert not isinstance(caught.value, GradlabError)


def test_one_keyword_only_argument_is_said_in_the_singular():
    @outside_autocast
    def scaled(scores, *, scale=1.0):
        return scores * scale

    with pytest.raises(GradlabError) as caught:
        scaled(torch.ones(2), 2.0)
    assert str(caught.value) == ("scaled(scores, *, scale=1.0): too many positional arguments; "
                                 "scale is keyword-only: pass it by name (scale=...)")


def test_a_positional_only_argument_given_by_name_gets_no_keyword_advice():
    @outside_autocast
    def scaled(scores, /, *, scale=1.0):
        return scores * scale

    with pytest.raises(GradlabError) as caught:
        scaled(scores=torch.ones(2))
    assert str(caught.value) == ("scaled(scores, /, *, scale=1.0): 'scores' parameter is "
                                 "positional only, but was passed as a keyword")


@pytest.mark.parametrize("tau", [0.01, 1])
def test_smooth_ap_loss_given_tau_third_says_tau_is_taken_by_keyword(tau):
    # as smooth_ap(scores, positives, tau) takes it; the refusal spoke of the cross-modal form
    embeddings, labels = torch.randn(4, 3), torch.arange(4) % 2
    with pytest.raises(GradlabError) as raised:
        F.smooth_ap_loss(embeddings, labels, tau)
    assert str(raised.value) == (
        f"smooth_ap_loss takes tau by keyword: smooth_ap_loss(embeddings, labels, tau={tau!r}); "
        f"got 3 positional arguments, the third {tau!r}")
