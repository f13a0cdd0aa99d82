"""The audit takes the batch-size measurement as an argument: it reaches the measured claim,
is refused when it is not a dict or comes with the caller's own claims, and the output paths
are checked under the option's name."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradlab import GradlabError
from gradlab.symbolic.audit import all_claims, run_audit, write_outputs
from gradlab.symbolic.claims import Claim, Form, decide

LABEL = "claim-p-grows-with-batch-size"


def _batch_size_detail(claims) -> str:
    claim = next(c for c in claims if c.label == LABEL)
    return claim.check(claim.printed).detail


@pytest.mark.slow
def test_the_measurement_reaches_the_measured_claim():
    assert "not measured in this run" in _batch_size_detail(all_claims())
    # an empty measurement is decided from what it holds: nothing
    assert _batch_size_detail(all_claims(p_vs_batch_size={})).endswith("holds no setting")


@pytest.mark.parametrize(("value", "kind"), [("quick", "str"), ([1, 2], "list")])
def test_a_measurement_that_is_not_a_dict_is_refused_with_its_type(value, kind):
    with pytest.raises(GradlabError) as caught:
        all_claims(p_vs_batch_size=value)
    assert str(caught.value) == (
        "p_vs_batch_size must be a measurement dict (gradlab.experiments.p_vs_batch_size."
        f"measure) or None; got {kind}"
    )


def test_a_measurement_with_the_callers_claims_is_refused():
    claim = Claim("mine", "eq1", "1 + 1 is 2", Form(2), lambda f: decide(f.value == 2, "ok", "no"))
    with pytest.raises(GradlabError) as caught:
        run_audit([claim], p_vs_batch_size={})
    assert str(caught.value) == (
        "p_vs_batch_size is used only with the default claims; got it with claims=[...] "
        "(build the measured claim with supplementary_claims.claims(measurement) instead)"
    )
    (record,) = run_audit([claim])
    assert record["verdict"] == "holds"


@pytest.mark.parametrize("option", ["--json", "--markdown"])
def test_an_unwritable_output_is_refused_under_its_option_name(option):
    path = Path("/proc/gradlab-audit-out")
    paths = (path, None) if option == "--json" else (None, path)
    with pytest.raises(GradlabError) as caught:
        write_outputs([], *paths)
    assert str(caught.value).startswith(f"{option} must be a path gradlab can write; got ")
