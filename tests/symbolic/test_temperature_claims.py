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
