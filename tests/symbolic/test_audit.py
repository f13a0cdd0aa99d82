"""The audit runs end to end, in time, with the findings it establishes; CLI outputs."""

import json
import re

import numpy as np
import pytest
import torch

from gradlab.cli import main
from gradlab.functional import (
    euclidean_from_cosine,
    harmonic_gap,
    operating_region_width,
    smooth_ap_decomposition,
)
from gradlab.symbolic import VERDICTS, derivations, run_audit


@pytest.fixture(scope="module")
def records():
    return {record["id"]: record for record in run_audit()}


def test_every_record_is_complete(records):
    assert len(records) > 60
    for claim_id, record in records.items():
        assert re.fullmatch(
            r"00[0-4]_[0-9a-f]{16}:(eq\d+|lemma\d|prop\d|claim-[a-z0-9-]+)", claim_id
        )
        assert record["verdict"] in VERDICTS
        assert record["detail"] and record["method"] and record["claim"]["formula"]
    assert not [r for r in records.values() if r["verdict"] == "inconclusive"]


@pytest.mark.parametrize(
    ("claim_id", "verdict"),
    [
        ("000_e0f8edb24a02ffe3:eq3", "holds"),
        ("000_e0f8edb24a02ffe3:eq8", "holds-with-correction"),
        ("000_e0f8edb24a02ffe3:eq11", "holds-with-correction"),
        ("000_e0f8edb24a02ffe3:claim-ad-cb-rewrite", "holds"),
        ("000_e0f8edb24a02ffe3:eq13", "holds-with-correction"),
        ("001_69c8c92ba6da9a08:eq3", "holds-with-correction"),
        ("001_69c8c92ba6da9a08:claim-label-a", "holds-with-correction"),
        ("002_9d7d2555864f9baa:claim-table-s1", "holds-with-correction"),
        ("002_9d7d2555864f9baa:claim-p-grows-with-batch-size", "fails"),
        ("003_9ae9ec3ce43e30ad:eq2", "holds"),
        ("003_9ae9ec3ce43e30ad:claim-midpoint-rule", "fails"),
        ("003_9ae9ec3ce43e30ad:claim-eq13-first-bin", "fails"),
        ("003_9ae9ec3ce43e30ad:eq37", "holds"),
        ("004_e426679a66883031:lemma1", "holds-with-correction"),
        ("004_e426679a66883031:claim-l2-equivalence", "holds"),
    ],
)
def test_key_findings(records, claim_id, verdict):
    assert records[claim_id]["verdict"] == verdict, records[claim_id]["detail"]


def test_cli_writes_json_and_markdown(tmp_path, capsys):
    assert (
        main(["audit", "--json", str(tmp_path / "a.json"), "--markdown", str(tmp_path / "a.md")])
        == 0
    )
    table = capsys.readouterr().out
    assert "holds-with-correction" in table
    assert len(json.loads((tmp_path / "a.json").read_text())) > 60
    assert "# Derivation audit" in (tmp_path / "a.md").read_text()


# --- SymPy derivations tied to the torch implementations -------------------------------------


def test_sympy_smoothap_gradient_equals_the_decomposition():
    rng = np.random.default_rng(0)
    query, candidates = rng.normal(size=2) * 0.5, rng.normal(size=(5, 2)) * 0.5
    expected = derivations.smoothap_gradient(2, 3, 2)(query, candidates, 0.1)
    positives = torch.tensor([True, True, False, False, False])
    parts = smooth_ap_decomposition(torch.tensor(query), torch.tensor(candidates), positives, 0.1)
    np.testing.assert_allclose(parts.grad.numpy(), expected, atol=1e-12)


@pytest.mark.parametrize(("tau", "eps"), [(0.01, 0.005), (0.05, 0.5), (1.0, 0.2)])
def test_sympy_width_equals_the_closed_form(tau, eps):
    assert operating_region_width(tau, eps) == pytest.approx(
        derivations.operating_region_width(tau, eps), rel=1e-12
    )


@pytest.mark.parametrize(("a", "b"), [(0, 1), (3, 10), (20, 21)])
def test_sympy_harmonic_sum_equals_the_exact_gap(a, b):
    value = harmonic_gap(
        torch.tensor([float(a)], dtype=torch.float64), torch.tensor([float(b)], dtype=torch.float64)
    )
    assert value.item() == pytest.approx(derivations.harmonic_gap(a, b), abs=1e-13)


@pytest.mark.parametrize("cosine", [-1.0, -0.3, 0.0, 0.5, 0.99])
def test_sympy_l2_distance_equals_the_helper(cosine):
    value = euclidean_from_cosine(torch.tensor([cosine], dtype=torch.float64)).item()
    assert value == pytest.approx(derivations.unit_distance_from_cosine(cosine), abs=1e-12)
