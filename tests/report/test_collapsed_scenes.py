"""A digit-scenes run whose embeddings collapsed passes the chance gate, yet is never ranked: it
is listed apart as collapsed, in the summary, the recall and geometry prose and the findings."""

import math

import torch

from gradlab.experiments import digit_scenes
from gradlab.functional.geometry import uniformity
from gradlab.report.findings import FINDERS
from gradlab.report.prose import geometry_text, scenes_text


def _batch(spread: float) -> torch.Tensor:
    """160 embeddings in 64 dimensions: one shared direction plus noise of this size."""
    generator = torch.Generator().manual_seed(0)
    shared = torch.randn(1, 64, generator=generator, dtype=torch.float64)
    return shared + spread * torch.randn(160, 64, generator=generator, dtype=torch.float64)


def _run(r1: float, rsum: float, spread: float, rank_share: float) -> dict:
    value = uniformity(_batch(spread)).item()
    geometry = {key: [[0.5, 0.5]] * 2 for key in digit_scenes.GEOMETRY_KEYS}
    geometry |= {"uniformity_images": [[-1.0, value]] * 2,
                 "uniformity_captions": [[-1.0, value]] * 2,
                 "rank_share_captions": [[0.1, rank_share]] * 2}  # fmt: skip
    recall = {"i2t_R@1": [r1, r1], "t2i_R@1": [r1, r1], "rsum": [rsum, rsum]}
    return {"recall": recall, "geometry": geometry, "anatomy": {"steps": [0, 300]}}


def _results() -> dict:
    # chance R@1 is 0.002 both ways (500 scenes): 0.012 passes the 2 x chance gate
    runs = {"NT-Xent": _run(0.45, 420.0, 10.0, 0.2),
            "VSE++ max-violation": _run(0.012, 23.0, 0.01, 0.33)}  # fmt: skip
    results = {"settings": {"test_scenes": 500, "captions_per_image": 5}, "seeds": [0, 1],
               "runs": {"VSRN": runs}}  # fmt: skip
    results["summary"] = digit_scenes.summarize(results)
    return results


def test_the_collapse_threshold_is_the_uniformity_that_leaves_a_tenth_of_pairs_apart():
    # a tenth of the pairs at cosine 0.9 (squared distance 0.2), the rest coincident: the
    # largest uniformity a tenth of pairs that far apart allows
    assert math.isclose(digit_scenes.collapse_uniformity(),
                        math.log(0.9 + 0.1 * math.exp(-2 * 0.2)))  # fmt: skip
    assert uniformity(_batch(0.01)).item() > digit_scenes.collapse_uniformity()
    assert uniformity(_batch(10.0)).item() < -3


def test_a_collapsed_run_above_chance_is_listed_apart_and_never_ranked():
    results = _results()
    summary = results["summary"]
    apart = summary["apart"]["VSRN"]
    assert list(apart) == ["VSE++ max-violation"] and set(apart["VSE++ max-violation"]
                                                         ["collapsed"]) == {"images", "captions"}
    assert summary["best_rsum"]["VSRN"] == {"loss": "NT-Xent", "tied": []}
    geometry = geometry_text(results).splitlines()[-1]
    # its captions' effective rank is the highest, but it is not named for it
    assert "under NT-Xent for the captions" in geometry
    assert "not compared: VSE++ max-violation (collapsed)" in geometry
    text = scenes_text(results, summary)
    assert "as their embeddings collapsed" in text and "VSRN with VSE++ max-violation" in text
    assert "ahead of the other compared losses" not in text
    finding = FINDERS["scenes"](results)[0].text
    assert "embeddings collapsed" in finding and "VSRN with VSE++ max-violation" in finding
