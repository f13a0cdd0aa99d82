"""The scenes section's geometry sentence: which loss keeps the highest effective rank, among
the runs that trained (a loss listed apart is not crowned for a collapse it never escaped)."""

from __future__ import annotations

from gradlab.report.prose import GEOMETRY_COLUMNS, geometry_text


def _run(rank_images: float, rank_captions: float) -> dict:
    geometry = {key: [[0.0, 0.5]] * 3 for key in GEOMETRY_COLUMNS}
    geometry["rank_share_images"] = [[0.9, rank_images + 0.001 * seed] for seed in range(3)]
    geometry["rank_share_captions"] = [[0.9, rank_captions + 0.001 * seed] for seed in range(3)]
    return {"geometry": geometry, "anatomy": {"steps": [0, 299]}}


def _sentence(results: dict) -> str:
    return geometry_text(results).splitlines()[-1]


def test_the_highest_rank_is_named_among_the_losses_that_trained():
    runs = {"SmoothAP": _run(0.57, 0.26), "Max-violation": _run(0.23, 0.33),
            "NT-Xent": _run(0.59, 0.28)}  # fmt: skip
    apart = {"summary": {"apart": {"VSRN": {"Max-violation": {"i2t_R@1": 0.007,
                                                               "below_chance": True}}}}}
    sentence = _sentence({"runs": {"VSRN": runs}, **apart})
    # The captions' largest rank belongs to the run listed apart: NT-Xent is named instead.
    assert "under NT-Xent for the images" in sentence
    assert "under NT-Xent for the captions" in sentence
    assert "under Max-violation" not in sentence
    assert "(listed apart, not compared: Max-violation (did not train both ways))" in sentence
    # Without the listing the apart run wins the captions: the filter is what changes it.
    assert "under Max-violation for the captions" in _sentence({"runs": {"VSRN": runs}})


def test_an_encoder_whose_runs_are_all_apart_gets_no_sentence():
    runs = {"SmoothAP": _run(0.5, 0.2)}
    apart = {"summary": {"apart": {"VSE++": {"SmoothAP": {"below_chance": True}}}}}
    assert "VSE++ at step" not in _sentence({"runs": {"VSE++": runs}, **apart})
