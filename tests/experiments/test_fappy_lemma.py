"""FAPPY Lemma 1 measured: the support is two bins and the printed value does not match."""

import numpy as np

import gradlab.plotting.losses as plot_module
from gradlab.experiments.fappy_lemma import lemma1_gradient_support
from gradlab.plotting.losses import plot_lemma1
from gradlab.report.prose import lemma1_verdict
from tests.helpers.figure_layout import captured_figures, layout_problems


def test_lemma1_measurement(tmp_path, monkeypatch):
    results = lemma1_gradient_support(configurations=80)
    assert results["max_abs_closed_form_error"] < 1e-12
    assert results["nonzero_share_in_pair_bin"] > 0.9
    assert results["nonzero_share_in_bin_below"] > 0.9
    assert results["nonzero_share_elsewhere"] == 0.0
    assert results["sign_of_nonzero"] == "positive"
    assert results["lemma_value_matches"] is False
    assert "bin below" in lemma1_verdict(results)
    with captured_figures(monkeypatch, plot_module) as figures:
        plot_lemma1(results, tmp_path / "l.png")
    assert layout_problems(figures[0]) == []
    # The three point sets drawn are the measured, closed-form and printed values at their
    # positions (compared as sets of points: the closed form is drawn in sorted order).
    drawn = [sorted(map(tuple, c.get_offsets().tolist())) for c in figures[0].axes[0].collections
             if len(c.get_offsets())]  # fmt: skip
    position = results["position"]
    expected = [sorted(zip(position, results[key], strict=True))
                for key in ("measured", "closed_form", "lemma_as_printed")]  # fmt: skip
    assert len(drawn) == 3
    for got, want in zip(drawn, expected, strict=True):
        assert np.allclose(got, want, rtol=0, atol=0)
