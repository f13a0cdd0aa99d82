"""A digit-scenes run whose embeddings collapsed passes the chance gate, yet is never ranked: it
is listed apart as collapsed, in the summary, the recall and geometry prose and the findings."""

import math

import torch

from gradlab.experiments import digit_scenes
from gradlab.functional.geometry import uniformity
from gradlab.report.findings import FINDERS
from gradlab.report.prose import geometry_text, scenes_apart_text, scenes_text


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
    assert apart["VSE++ max-violation"]["below_chance"] is False
    assert summary["best_rsum"]["VSRN"] == {"loss": "NT-Xent", "tied": []}
    geometry = geometry_text(results).splitlines()[-1]
    # its captions' effective rank is the highest, but it is not named for it
    assert "under NT-Xent for the captions" in geometry
    assert "not compared: VSE++ max-violation (collapsed)" in geometry
    text = scenes_text(results, summary)
    assert "as their embeddings collapsed" in text
    assert "the VSRN encoder with VSE++ max-violation" in text
    assert "ahead of the other compared losses" not in text
    finding = FINDERS["scenes"](results)[0].text
    assert "embeddings collapsed" in finding
    assert "the VSRN encoder with VSE++ max-violation" in finding


def test_the_runs_listed_apart_are_worded_in_full():
    # each collapsed run with its R@1, its training loss and its modalities' uniformity, after
    # the runs that did not train (one of which also collapsed: said, with its uniformity);
    # the threshold's words from the summary's numbers
    summary = {
        "chance": {"i2t": 0.002, "t2i": 0.004}, "chance_factor": 2.0,
        "collapse": {"uniformity": -0.0567, "cosine": 0.8, "share": 0.75},
        "apart": {
            "A": {"L1": {"i2t_R@1": 0.5, "t2i_R@1": 0.25, "initial_loss": 2.0, "final_loss": 1.5,
                         "below_chance": False, "below_gate": [],
                         "collapsed": {"images": -0.01, "captions": -0.02}},
                  "L2": {"i2t_R@1": 0.001, "t2i_R@1": 0.003, "below_chance": True,
                         "below_gate": ["i2t", "t2i"]},
                  "L4": {"i2t_R@1": 0.002, "t2i_R@1": 0.001, "below_chance": True,
                         "below_gate": ["i2t", "t2i"],
                         "collapsed": {"captions": -0.03}}},
            "B": {"L3": {"i2t_R@1": 0.125, "t2i_R@1": 0.0625, "below_chance": False,
                         "below_gate": [],
                         "collapsed": {"captions": -0.005}}},
        },
    }  # fmt: skip
    threshold = ("R@1 above the chance gate, but the mean uniformity of its images or of its "
                 "captions at the last logged step above -0.057 = log(1 - 0.75 (1 - exp(-2 x "
                 "0.4))), so that at most 75 % of their pairs are farther apart than cosine 0.8 "
                 "(squared distance 0.4): the embeddings of that modality nearly coincide")
    assert scenes_apart_text(summary) == (
        "Listed apart, not ranked, as they did not train both ways here (mean R@1 not at "
        "least 2 x "
        "chance R@1 both ways; chance 0.0020 image -> caption, 0.0040 caption -> image): the A "
        "encoder with L2 (R@1 0.0010 image -> caption, 0.0030 caption -> image); the A encoder "
        "with L4 (R@1 0.0020 image -> caption, 0.0010 caption -> image, its captions also "
        "collapsed (uniformity -0.030, above the collapse threshold -0.057)). Listed apart, not "
        f"ranked, as their embeddings collapsed ({threshold}): the A encoder with L1 (R@1 "
        "0.5000 image -> caption, 0.2500 caption -> image, training loss fell from 2.000 to "
        "1.500, uniformity images -0.010, captions -0.020); the B encoder with L3 (R@1 0.1250 "
        "image -> caption, 0.0625 caption -> "
        "image, uniformity captions -0.005).")


def test_an_encoder_with_a_collapsed_run_says_its_ranked_losses_did_not_collapse():
    results = _results()
    best = ("VSRN: highest rsum with NT-Xent (420.0 ± 0.0), the only one of its losses above 2 x "
            "chance R@1 both ways whose embeddings did not collapse.")
    assert best in scenes_text(results, results["summary"])
    results["runs"]["VSRN"]["NT-Xent"] = _run(0.001, 2.0, 10.0, 0.2)  # below the chance gate
    results["summary"] = digit_scenes.summarize(results)
    none = ("VSRN: no loss above 2 x chance R@1 both ways whose embeddings did not collapse, so "
            "its losses are not ranked.")
    assert none in scenes_text(results, results["summary"])
    results["runs"]["VSRN"]["VSE++ max-violation"] = _run(0.001, 2.0, 10.0, 0.2)  # no collapse
    results["summary"] = digit_scenes.summarize(results)
    assert ("VSRN: no loss above 2 x chance R@1 both ways, so its losses are not ranked."
            in scenes_text(results, results["summary"]))


def test_the_finding_names_every_collapsed_run():
    results = _results()
    results["runs"]["VSE++"] = {"SmoothAP": _run(0.012, 23.0, 0.01, 0.33),
                                "NT-Xent": _run(0.45, 400.0, 10.0, 0.2)}  # fmt: skip
    results["summary"] = digit_scenes.summarize(results)
    finding = FINDERS["scenes"](results)[0].text
    threshold = f"{digit_scenes.collapse_uniformity():.3f}"
    assert finding.endswith(f"Listed apart, not compared (embeddings collapsed: uniformity above "
                            f"{threshold}): the VSRN encoder with VSE++ max-violation, the "
                            "VSE++ encoder with SmoothAP.")


def test_a_run_below_chance_whose_embeddings_collapsed_is_listed_as_untrained_and_collapsed():
    # below the chance gate and collapsed: it did not train, and its collapse is not hidden
    results = _results()
    results["runs"]["VSRN"]["VSE++ max-violation"] = _run(0.001, 2.0, 0.01, 0.33)
    results["summary"] = summary = digit_scenes.summarize(results)
    numbers = summary["apart"]["VSRN"]["VSE++ max-violation"]
    assert numbers["below_chance"] is True
    assert set(numbers["collapsed"]) == {"images", "captions"}
    assert summary["best_rsum"]["VSRN"] == {"loss": "NT-Xent", "tied": []}
    text = scenes_apart_text(summary)
    assert text.startswith("Listed apart, not ranked, as they did not train both ways here")
    assert "its images and captions also collapsed (uniformity images " in text
    assert f"above the collapse threshold {digit_scenes.collapse_uniformity():.3f})" in text
    # the geometry sentence names the reason it is apart
    geometry = geometry_text(results).splitlines()[-1]
    assert "not compared: VSE++ max-violation (did not train both ways; collapsed)" in geometry
    assert "as their embeddings collapsed" not in text
    # the ranked loss is not said to be the only one "whose embeddings did not collapse":
    # the other one is apart for being below chance
    assert ("the only one of its losses above 2 x chance R@1 both ways."
            in scenes_text(results, summary))
    finding = FINDERS["scenes"](results)[0].text
    assert ("(R@1 not at least 2 x chance both ways): the VSRN encoder with VSE++ "
            "max-violation.") in finding
    assert "embeddings collapsed" not in finding


def _summary_with_uniformity(histories: list[list[float]], r1: float = 0.45) -> dict:
    """The summary of one run whose image uniformity per seed is ``histories``."""
    run = _run(r1, 420.0, 10.0, 0.2)
    run["geometry"]["uniformity_images"] = histories
    results = {"settings": {"test_scenes": 500, "captions_per_image": 5}, "seeds": [0, 1],
               "runs": {"VSRN": {"NT-Xent": run}}}  # fmt: skip
    return digit_scenes.summarize(results)


def test_collapse_is_read_at_the_last_logged_step_and_strictly_above_the_threshold():
    at = digit_scenes.collapse_uniformity()
    # collapsed at the second step only, recovered by the last: not collapsed
    assert _summary_with_uniformity([[-2.0, -0.001, -2.0]] * 2)["apart"] == {"VSRN": {}}
    # exactly at the threshold at the last step: not above it
    assert _summary_with_uniformity([[-2.0, -2.0, at]] * 2)["apart"] == {"VSRN": {}}
    apart = _summary_with_uniformity([[-2.0, -2.0, -0.001]] * 2)["apart"]["VSRN"]["NT-Xent"]
    assert apart["collapsed"] == {"images": -0.001}


def test_a_run_below_chance_that_did_not_collapse_carries_no_collapsed_entry():
    apart = _summary_with_uniformity([[-2.0, -2.0]] * 2, r1=0.001)["apart"]["VSRN"]["NT-Xent"]
    assert apart["below_chance"] is True and "collapsed" not in apart
