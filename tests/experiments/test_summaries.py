"""The studies' verdicts, computed once by each study's summarize(), on hand-made results."""

import math

import pytest

from gradlab.experiments import digit_scenes, loss_comparison, p_vs_batch_size
from gradlab.experiments.statistics import mean_std, separated


def test_mean_std_and_separation_by_hand():
    assert mean_std([1.0, float("nan"), 3.0]) == (2.0, 1.0)
    assert separated([1.0, 3.0], [4.1, 4.1])  # 2 +- 1 against 4.1 +- 0: gap 2.1 > 1
    assert not separated([1.0, 3.0], [2.5, 3.5])  # gap 1.0 <= 1 + 0.5


def _batch(settings):
    return {"batch_sizes": [16, 64, 256], "per_class": 4, "seeds": [0, 1, 2],
            "settings": {name: {"P": rows} for name, rows in settings.items()}}  # fmt: skip


def test_p_vs_batch_size_summary_reads_each_setting_and_the_claim():
    falling = [[0.40, 0.35, 0.30], [0.41, 0.36, 0.29], [0.39, 0.34, 0.31]]
    flat = [[0.30, 0.2, 0.31], [0.32, 0.5, 0.30], [0.31, 0.1, 0.32]]
    summary = p_vs_batch_size.summarize(_batch({"fixed_untrained": [[1.0] * 3] * 3,
                                                "fixed_trained": flat,
                                                "trained_at_m": falling}))  # fmt: skip
    assert list(summary["settings"]) == ["fixed_trained", "trained_at_m"]
    # changes -0.10, -0.12, -0.08: mean -0.10, sd 0.02, standard error 0.02 / sqrt(3), so
    # t = -0.10 / 0.01155 = -8.66 against t(0.975, df = 2) = 4.30, by hand
    assert summary["settings"]["trained_at_m"] == {
        "first": [0.40, 0.41, 0.39], "last": [0.30, 0.29, 0.31], "change": "falls",
        "trend": "falls", "parts": {},
        "trend_detail": "mean P 0.400 -> 0.300, change -0.100 +/- 0.012 (standard error over 3 "
                        "seeds), t = -8.66 against 4.30 (df = 2, two-sided 0.05)"}
    assert summary["settings"]["fixed_trained"]["change"] == "within_spread"
    assert summary["claim"]["verdict"] == "not-testable-here"  # the authors' data is needed
    assert summary["claim"]["miniature"]["outcome"] == "not-reproduced"
    rising = [[0.30, 0.35, 0.40], [0.31, 0.36, 0.41], [0.29, 0.34, 0.40]]
    summary = p_vs_batch_size.summarize(_batch({"trained_at_m": rising}))
    assert summary["settings"]["trained_at_m"]["change"] == "rises"
    assert summary["claim"]["miniature"]["outcome"] == "reproduced"


def _run(values, **extra):
    return {"metrics": {"MAP@R": values}, **extra}


def test_loss_comparison_summary_ranks_the_losses_that_train():
    results = {
        "before": {"MAP@R": [0.30, 0.30]},
        "losses": {
            "close": _run([0.48, 0.50]),  # 0.49 +- 0.01, within 0.50 +- 0.01 of the best
            "best": _run([0.49, 0.51]),
            "far": _run([0.10, 0.12]),  # below the untrained network by more than the spread
            "stuck": _run([0.99, 0.99], initial_gradient_norm=[0.0, 0.0]),
            "slightly_low": _run([0.20, 0.39]),  # mean 0.295 < 0.30, within the spread of it
            "ahead": _run([0.40, 0.42]),  # above the untrained network, behind the best
        },
    }
    summary = loss_comparison.summarize(results)
    assert summary["best"] == "best"  # "stuck" has the highest MAP@R but never trained
    assert summary["ranked"] == ["best", "close", "ahead"]
    assert summary["tied"] == ["close"]
    assert summary["behind"] == ["ahead"]  # 0.41 +- 0.01 against 0.50 +- 0.01: gap 0.09 > 0.02
    # Not above the untrained network by more than the spread: listed apart, never ranked.
    assert list(summary["apart"]) == ["far", "stuck", "slightly_low"]
    assert summary["apart"]["stuck"]["no_gradient"] and not summary["apart"]["far"]["no_gradient"]
    assert summary["no_gradient"] == ["stuck"]
    assert summary["below_untrained"] == ["far", "slightly_low"]
    assert summary["clearly_below_untrained"] == ["far"]


def _scene_run(r1_i2t, r1_t2i, rsum, history=None):
    run = {"recall": {"i2t_R@1": r1_i2t, "t2i_R@1": r1_t2i, "rsum": rsum}}
    return run | ({"loss_history": history} if history else {})


def test_digit_scenes_summary_names_the_best_pairs_and_their_ties():
    results = {"settings": {"test_scenes": 100, "captions_per_image": 5}, "runs": {
        "VSE++": {"SmoothAP": _scene_run([0.50, 0.52], [0.30, 0.31], [300, 302]),
                  "NT-Xent": _scene_run([0.49, 0.51], [0.10, 0.11], [250, 251])},
        "VSRN": {"SmoothAP": _scene_run([0.20, 0.21], [0.40, 0.42], [310, 330])},
    }}  # fmt: skip
    summary = digit_scenes.summarize(results)
    assert summary["best_recall_at_1"]["i2t"] == {
        "encoder": "VSE++", "loss": "SmoothAP", "tied": [["VSE++", "NT-Xent"]]}
    assert summary["best_recall_at_1"]["t2i"] == {"encoder": "VSRN", "loss": "SmoothAP",
                                                  "tied": []}  # fmt: skip
    assert summary["best_rsum"] == {"VSE++": {"loss": "SmoothAP", "tied": []},
                                    "VSRN": {"loss": "SmoothAP", "tied": []}}  # fmt: skip
    assert summary["apart"] == {"VSE++": {}, "VSRN": {}}


def test_scene_chance_is_the_random_ranking_recall_from_the_test_sizes():
    # Brute force: R@1 averaged over every ordering of the candidates, for 3 test scenes with
    # 2 captions each (an image query: 2 positives among 6 captions; a caption query: 1 of 3).
    import itertools

    import torch

    from gradlab.functional import recall_at_k

    scenes, per_image = 3, 2
    relevant = torch.eye(scenes, dtype=torch.bool).repeat_interleave(per_image, dim=1)
    expected = {}
    for direction, positives in (("i2t", relevant), ("t2i", relevant.T.contiguous())):
        hits = []
        for order in itertools.permutations(range(positives.shape[1])):
            scores = torch.tensor(order, dtype=torch.float64).expand(positives.shape[0], -1)
            hits.append(recall_at_k(scores.contiguous(), positives, (1,))[1])
        expected[direction] = sum(hits) / len(hits)
    chance = digit_scenes.chance_recall_at_1(
        {"settings": {"test_scenes": scenes, "captions_per_image": per_image}})
    assert chance == pytest.approx(expected, abs=1e-12)


def test_scene_runs_below_twice_chance_are_listed_apart_with_their_numbers_not_ranked():
    # 100 test scenes: chance R@1 0.01 both ways, so a run is compared from 0.02 both ways on.
    history = [[0.9, 0.5] + [0.4] * 10, [0.7, 0.5] + [0.4] * 9 + [0.5]]
    results = {"settings": {"test_scenes": 100, "captions_per_image": 5}, "runs": {
        # never trained, but its R@5/R@10 lift the rsum above every other run's
        "VSE++": {"stuck": _scene_run([0.010, 0.012], [0.009, 0.011], [900, 900], history),
                  "one_way": _scene_run([0.60, 0.62], [0.015, 0.016], [500, 500]),
                  "at_the_bound": _scene_run([0.02, 0.02], [0.02, 0.02], [30, 31]),
                  "trains": _scene_run([0.30, 0.31], [0.30, 0.32], [200, 201])},
        "VSRN": {"stuck": _scene_run([0.0, 0.01], [0.01, 0.02], [5, 6])},
    }}  # fmt: skip
    summary = digit_scenes.summarize(results)
    assert summary["chance"] == pytest.approx({"i2t": 1 / 100, "t2i": 1 / 100})
    assert {encoder: list(runs) for encoder, runs in summary["apart"].items()} == {
        "VSE++": ["stuck", "one_way"], "VSRN": ["stuck"]}
    stuck = summary["apart"]["VSE++"]["stuck"]
    assert stuck["i2t_R@1"] == pytest.approx(0.011) and stuck["t2i_R@1"] == pytest.approx(0.010)
    assert stuck["initial_loss"] == pytest.approx(0.8)  # first steps 0.9 and 0.7
    assert stuck["final_loss"] == pytest.approx((0.4 + 0.41) / 2)  # last 10: 0.4 and 0.41
    assert "initial_loss" not in summary["apart"]["VSE++"]["one_way"]  # no history recorded
    # the directions below 0.02: both for "stuck", caption -> image alone for "one_way"
    assert stuck["below_gate"] == ["i2t", "t2i"]
    assert summary["apart"]["VSE++"]["one_way"]["below_gate"] == ["t2i"]
    assert summary["apart"]["VSRN"]["stuck"]["below_gate"] == ["i2t", "t2i"]
    # The ranking reads only the compared runs: "one_way" has the best i2t R@1 and "stuck" the
    # best rsum, yet neither is named.
    assert summary["best_recall_at_1"]["i2t"] == {
        "encoder": "VSE++", "loss": "trains", "tied": []}
    assert summary["best_rsum"]["VSE++"] == {"loss": "trains", "tied": []}
    assert summary["best_rsum"]["VSRN"] == {"loss": None, "tied": []}
    # The same numbers on 1000 test scenes (chance 0.001 both ways): every run is compared,
    # and the highest rsum now wins.
    results["settings"]["test_scenes"] = 1000
    summary = digit_scenes.summarize(results)
    assert summary["chance"] == pytest.approx({"i2t": 1 / 1000, "t2i": 1 / 1000})
    assert summary["apart"] == {"VSE++": {}, "VSRN": {}}
    assert summary["best_rsum"]["VSE++"]["loss"] == "stuck"


def test_a_scene_run_whose_recall_is_nan_one_way_is_below_the_gate_that_way_only():
    # 100 test scenes: gate 0.02 both ways. A NaN mean R@1 (every seed NaN) is not at least the
    # gate, so the run is listed apart, and the text names the one direction (image -> caption)
    # below it, as the summary decided.
    from gradlab.report.prose import scenes_apart_text

    results = {"settings": {"test_scenes": 100, "captions_per_image": 5}, "runs": {
        "VSE++": {"broken": _scene_run([math.nan, math.nan], [0.30, 0.32], [200, 201]),
                  "trains": _scene_run([0.30, 0.31], [0.30, 0.32], [200, 201])}}}
    summary = digit_scenes.summarize(results)
    broken = summary["apart"]["VSE++"]["broken"]
    assert broken["below_chance"] is True and broken["below_gate"] == ["i2t"]
    assert "below the gate image -> caption only" in scenes_apart_text(summary)


def test_scenes_text_ranks_only_the_compared_runs_and_quotes_the_apart_ones():
    from gradlab.report.findings import findings_markdown
    from gradlab.report.prose import scenes_text

    history = [[0.9] + [0.4] * 10]
    results = {"settings": {"test_scenes": 100, "captions_per_image": 5, "steps": 11},
               "seeds": [0], "runs": {
        "VSE++": {"stuck": _scene_run([0.010], [0.012], [900], history),
                  "trains": _scene_run([0.30], [0.31], [200])},
        "VSRN": {"stuck": _scene_run([0.01], [0.01], [5])},
    }}  # fmt: skip
    text = scenes_text(results)
    ranked, apart = text.split("Listed apart")
    assert "stuck" not in ranked
    assert "VSE++: highest rsum with trains (200.0), the only one of its losses" in ranked
    assert "VSRN: no loss above 2 x chance R@1 both ways, so its losses are not ranked." in ranked
    assert "chance 0.0100 image -> caption, 0.0100 caption -> image" in apart
    assert ("the VSE++ encoder with stuck (R@1 0.0100 image -> caption, 0.0120 caption -> "
            "image, training loss fell from 0.900 to 0.400)") in apart
    assert ("the VSRN encoder with stuck (R@1 0.0100 image -> caption, 0.0100 caption -> "
            "image)") in apart
    assert "says nothing about it" in apart
    finding = findings_markdown({"scenes": (results, "## Scenes")})
    assert "Best image -> caption R@1: the VSE++ encoder with trains" in finding
    assert ("Listed apart, not compared (R@1 not at least 2 x chance both ways): the VSE++ "
            "encoder with stuck, the VSRN encoder with stuck.") in finding
