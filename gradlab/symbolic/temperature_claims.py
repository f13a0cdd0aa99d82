"""The temperature's closed form, audited: ``dL/d log s`` of InfoNCE with logits ``s * S``.

A derivation gradlab relies on (:func:`gradlab.functional.temperature_gradient`, the
``temperature`` quantity of the Monitor), not a seed's printed equation: for one query with
scores ``S_0`` (the positive) ... ``S_(C-1)`` and a learnable scale ``s = e^t`` (open_clip's
``logit_scale`` is ``t``), InfoNCE (Oord et al. 2018; CLIP, Radford et al. 2021) is
``L = -log softmax(s S)_0`` and

    dL/dt = dL/d log s = sum_k softmax(s S)_k s S_k - s S_0,

the softmax-expected logit minus the positive logit. The check differentiates the loss with
SymPy (``C = 3`` candidates, the scale a positive symbol, ``d/d log s = s d/ds``); the mutants are the slips a reader makes: the
scale left out (``E[S] - S_0``, the gradient with respect to ``s``, not ``log s``), the sign
flipped, the positive logit not subtracted, and a plain mean instead of the softmax weights.

Example:
    >>> from gradlab.symbolic import audit_claim
    >>> record = audit_claim(claims()[0], mutants=True)
    >>> record["verdict"], record["mutants"] == record["mutants_killed"]
    ('holds', True)
"""

from __future__ import annotations

import sympy as sp

from gradlab.symbolic.claims import Claim, Form, mutant, negated, symbolic_equality

__all__ = ["claims"]

SEED = "gradlab"
"""Claims of gradlab's own derivations are filed under this name (no seed paper)."""

_SCORES = sp.symbols("S0:3", real=True)
_SCALE = sp.Symbol("s", positive=True)


def _softmax() -> list[sp.Expr]:
    exps = [sp.exp(_SCALE * score) for score in _SCORES]
    return [value / sum(exps) for value in exps]


def _loss() -> sp.Expr:
    """``-log softmax(s S)_0``, written out: ``-s S_0 + log sum_k exp(s S_k)``."""
    return -_SCALE * _SCORES[0] + sp.log(sum(sp.exp(_SCALE * score) for score in _SCORES))


def _check(form: Form):
    # d/d log s = s d/ds (chain rule, s = e^(log s))
    truth = _SCALE * sp.diff(_loss(), _SCALE)
    return symbolic_equality(form.value, truth, [*_SCORES, _SCALE])


def claims() -> list[Claim]:
    """The audited claim of the temperature's closed form (module docstring).

    Example:
        >>> [claim.id for claim in claims()]
        ['gradlab:claim-temperature-gradient']
    """
    scale = _SCALE
    weights = _softmax()
    logits = [scale * score for score in _SCORES]
    expected = sum(w * z for w, z in zip(weights, logits, strict=True))
    printed = Form(expected - logits[0], lhs="dL/d log s")
    plain_mean = sum(logits) / len(logits)
    slips = (
        mutant(printed, sum(w * s for w, s in zip(weights, _SCORES, strict=True)) - _SCORES[0],
               "the scale left out (dL/ds, not dL/d log s)"),
        negated(printed),
        mutant(printed, expected, "the positive logit not subtracted"),
        mutant(printed, plain_mean - logits[0], "a plain mean instead of the softmax"),
    )  # fmt: skip
    return [
        Claim(
            SEED,
            "claim-temperature-gradient",
            "For InfoNCE with logits s * S, dL/d log s is the softmax-expected logit minus the "
            "positive logit (what gradlab's temperature quantity logs)",
            printed,
            _check,
            method="sympy.diff of -log softmax(s S)_0, times s (d/d log s = s d/ds)",
            mutants=slips,
        )
    ]
