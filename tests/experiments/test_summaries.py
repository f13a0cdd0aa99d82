"""The studies' verdicts, computed once by each study's summarize(), on hand-made results."""

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
    assert summary["settings"]["trained_at_m"] == {
        "first": [0.40, 0.41, 0.39], "last": [0.30, 0.29, 0.31], "change": "falls",
        "trend": "falls", "parts": {}}  # changes -0.10, -0.12, -0.08: t = -8.7, df = 2
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


def _scene_run(r1_i2t, r1_t2i, rsum):
    return {"recall": {"i2t_R@1": r1_i2t, "t2i_R@1": r1_t2i, "rsum": rsum}}


def test_digit_scenes_summary_names_the_best_pairs_and_their_ties():
    results = {"runs": {
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
