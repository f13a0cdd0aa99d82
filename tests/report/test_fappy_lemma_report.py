"""FAPPY Lemma 1 measured: the support is two bins and the printed value does not match."""

from gradlab.plotting.losses import plot_lemma1
from gradlab.report.fappy_lemma import lemma1_gradient_support, lemma1_verdict


def test_lemma1_measurement(tmp_path):
    results = lemma1_gradient_support(configurations=80)
    assert results["max_abs_closed_form_error"] < 1e-12
    assert results["nonzero_share_in_pair_bin"] > 0.9
    assert results["nonzero_share_in_bin_below"] > 0.9
    assert results["nonzero_share_elsewhere"] == 0.0
    assert results["sign_of_nonzero"] == "positive"
    assert results["lemma_value_matches"] is False
    assert "bin below" in lemma1_verdict(results)
    assert plot_lemma1(results, tmp_path / "l.png").stat().st_size > 10_000
