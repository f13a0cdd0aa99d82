"""The temperature closed form's claim: it holds, its slips fail, and gradlab's code computes it."""

from __future__ import annotations

import pytest
import sympy as sp
import torch

from gradlab.functional import temperature_gradient
from gradlab.symbolic import audit_claim, evaluate
from gradlab.symbolic.temperature_claims import claims


@pytest.mark.slow
def test_the_closed_form_holds_and_every_mutant_is_killed():
    (claim,) = claims()
    assert evaluate(claim).verdict == "holds"
    assert [evaluate(claim, slip).verdict for slip in claim.mutants] == ["fails"] * 4
    record = audit_claim(claim, mutants=True)
    assert record["mutants"] == record["mutants_killed"] > 4


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gradlab_computes_the_audited_form(seed):
    (claim,) = claims()
    symbols = sorted(claim.printed.value.free_symbols, key=str)  # S0, S1, S2, s
    formula = sp.lambdify(symbols, claim.printed.value, "math")
    generator = torch.Generator().manual_seed(seed)
    scores = torch.rand(1, 3, generator=generator, dtype=torch.float64) * 2 - 1
    scale = 5.0 + 10 * seed
    positives = torch.tensor([[True, False, False]])
    expected = formula(*scores[0].tolist(), scale)
    assert float(temperature_gradient(scores, positives, scale)) == pytest.approx(
        expected, rel=1e-12
    )


def _derivatives():
    """dL/ds and dL/d log s of -log softmax(s S)_0 for three scores, from SymPy's diff here."""
    scores, scale = sp.symbols("S0:3", real=True), sp.Symbol("s", positive=True)
    loss = -sp.log(sp.exp(scale * scores[0]) / sum(sp.exp(scale * x) for x in scores))
    by_scale = sp.diff(loss, scale)
    return scores, scale, by_scale, scale * by_scale


@pytest.mark.slow
def test_each_slip_is_the_form_its_name_says():
    scores, scale, by_scale, by_log_scale = _derivatives()
    (claim,) = claims()
    logits = [scale * x for x in scores]
    expected = {
        "the scale left out (dL/ds, not dL/d log s)": by_scale,
        "sign flipped": -by_log_scale,
        "the positive logit not subtracted": by_log_scale + logits[0],
        "a plain mean instead of the softmax": sum(logits) / 3 - logits[0],
    }
    assert [slip.name for slip in claim.mutants] == list(expected)
    for slip in claim.mutants:
        assert sp.simplify(sp.expand_log(slip.value - expected[slip.name])) == 0, slip.name
        assert slip.lhs == "dL/d log s"
    assert sp.simplify(claim.printed.value - by_log_scale) == 0


def test_the_claim_names_itself_the_loss_and_the_method():
    (claim,) = claims()
    assert (claim.id, claim.seed, claim.printed.lhs) == (
        "gradlab:claim-temperature-gradient", "gradlab", "dL/d log s")
    assert claim.statement == (
        "For InfoNCE with logits s * S, dL/d log s is the softmax-expected logit minus the "
        "positive logit (what gradlab's temperature quantity logs)")
    assert claim.method == "sympy.diff of -log softmax(s S)_0, times s (d/d log s = s d/ds)"
