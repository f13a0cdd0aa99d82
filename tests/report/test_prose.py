"""The report's sentences and tables, read whole from hand-made results: the word a conclusion
uses for a change, which numbers a sentence quotes, a table's header and separator rows.

Every "mean ± std" cell expected here is computed by ``_cell`` (a float64 loop, population std),
never by the report's own helpers."""

from __future__ import annotations

import math

import pytest

from gradlab.experiments import loss_comparison, p_vs_batch_size
from gradlab.functional import HARMONIC_METHODS
from gradlab.plotting.monitor import FAMILIES
from gradlab.report import prose


def _cell(values, digits=3):
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def test_check_labels_spell_out_every_abbreviation():
    assert prose.check_label("eq37_ap_log_vs_autograd") == "Eq. 37 AP log against autograd"
    assert prose.check_label("fappy_fastap_dcg_fd") == "FAPPY FastAP DCG finite differences"
    assert prose.check_label("exact") == "exact"


# --- P against batch size (Brown et al. 2020) ------------------------------------------------

SIZES = [16, 64, 256]
FALLING = [[0.40, 0.35, 0.30], [0.42, 0.36, 0.28]]
RISING = [[0.10, 0.15, 0.30], [0.12, 0.16, 0.32]]
FLAT = [[0.999, 0.5, 0.999], [0.999, 0.7, 0.999]]
EDGE = [[0.999, 1.0, 1.0], [1.0, 1.0, 0.999]]  # min exactly 0.999: not the untrained sentence,
# but within 0.01 of 1 everywhere: saturated, as the t-test's rule reads it


def _batch(**settings):
    return {"batch_sizes": SIZES, "per_class": 4, "seeds": [0, 1], "settings": settings}


def _setting(p, pn, nn, **extra):
    return {"P": p, "P_positive_negative": pn, "P_negative_negative": nn, **extra}


def _first_last(values):
    return [run[0] for run in values], [run[-1] for run in values]


def _moves(name, values, verb):
    first, last = _first_last(values)
    return (
        f"{name} {verb} from {_cell(first)} (m=16) to {_cell(last)} (m=256), more than the "
        "seed spread"
    )


def _stays(name, values):
    first, last = _first_last(values)
    return f"{name} stays within the seed spread: {_cell(first)} at m=16, {_cell(last)} at m=256"


def _saturated(name, values):
    first, last = _first_last(values)
    return (f"{name} is saturated, so it shows no trend: {_cell(first)} at m=16, {_cell(last)} "
            "at m=256")  # fmt: skip


def _claim_sentence(verdicts, verdict_words, miniature_words):
    return (
        "Brown et al. (2020) report P rising with m, measured on Stanford Online Products with a "
        f"ResNet-50; here, on this miniature, {verdicts}. The audit records the claim as "
        f"{verdict_words} (it needs the authors' data and network); its paired t-test over the "
        f"seeds, on the networks fine-tuned at each m, reads this miniature alone as: "
        f"{miniature_words}. At a fixed network, m changes only which "
        "items a batch holds (the diagonal's 1/m share; at small m a query's negatives come from "
        "few classes); beyond that, P moves with m only through what training at that m does to "
        "the scores."
    )


def test_p_vs_batch_size_text_words_each_setting_and_the_audits_verdict():
    batch = _batch(
        fixed_untrained=_setting([[1.0, 1.0, 0.9995], [1.0, 1.0, 1.0]], FALLING, FALLING),
        fixed_trained=_setting(EDGE, RISING, FALLING),
        trained_at_m=_setting(FALLING, FLAT, RISING, steps=[40, 10, 3]),
    )
    summary = {
        "settings": {
            "fixed_trained": {"change": "within_spread"},
            "trained_at_m": {"change": "falls"},
        },
        "claim": {"verdict": "not-testable-here", "miniature": {"outcome": "not-reproduced"}},
    }
    expected = [
        "Batches of m = 16 to 256 unseen 3-digit numbers, 4 images per number and m/4 numbers "
        "per batch (Smooth-AP's sampler), 2 seeds (each a different data set, initialization "
        "and batches).",
        "At the untrained network: P = 1 at every m and every seed (all cosine scores lie within "
        "the operating region's width of each other), so this setting cannot show a trend.",
        f"At a fixed network trained with SmoothAP at m = 64: {_saturated('P', EDGE)}; "
        f"{_moves('the positive-negative share', RISING, 'rises')}; "
        f"{_moves('the negative-negative share', FALLING, 'falls')}.",
        "With one network fine-tuned at each m from the network trained at m = 64 (same epochs): "
        f"{_moves('P', FALLING, 'falls')}; {_stays('the positive-negative share', FLAT)}; "
        f"{_moves('the negative-negative share', RISING, 'rises')}. (Optimizer steps per run: "
        "40 at m=16 down to 3 at m=256.)",
        _claim_sentence(
            "at a fixed trained network P does not move beyond the seed spread; with "
            "one network fine-tuned per m P falls",
            "not testable here",
            "not reproduced",
        ),
    ]
    assert prose.p_vs_batch_size_text(batch, summary) == " ".join(expected)


@pytest.mark.parametrize(("off", "said"), [
    ("rises", " (without each query's own entry, 1/m of P, it rises)"),
    ("falls", " (without each query's own entry, 1/m of P, it falls)"),
    ("within_spread", ""),  # it does not move either, as P: nothing to add
    (None, ""),  # a summary without the off-diagonal share
])  # fmt: skip
def test_p_vs_batch_size_text_says_when_p_without_the_diagonal_moves_otherwise(off, said):
    batch = _batch(fixed_trained=_setting(RISING, RISING, RISING))
    within = {"change": "within_spread"}
    if off is not None:
        within["off_diagonal"] = {"change": off}
    summary = {"settings": {"fixed_trained": within, "trained_at_m": {"change": "falls"}},
               "claim": {"verdict": "not-testable-here",
                         "miniature": {"outcome": "not-reproduced"}}}  # fmt: skip
    text = prose.p_vs_batch_size_text(batch, summary)
    assert (f"here, on this miniature, at a fixed trained network P does not move beyond the "
            f"seed spread{said}; with one network fine-tuned per m P falls.") in text


def test_p_vs_batch_size_text_skips_missing_settings_and_computes_its_summary():
    batch = _batch(trained_at_m=_setting(RISING, RISING, RISING, steps=[8, 4, 2]))
    text = prose.p_vs_batch_size_text(batch)
    assert text == prose.p_vs_batch_size_text(batch, p_vs_batch_size.summarize(batch))
    assert "At the untrained network" not in text and "At a fixed network trained" not in text
    verdict = p_vs_batch_size.summarize(batch)["settings"]["trained_at_m"]["change"]
    assert f"here, on this miniature, with one network fine-tuned per m P {verdict}." in text
    # a setting after a missing one is still worded
    batch = _batch(fixed_trained=_setting(RISING, RISING, RISING))
    assert (
        f"At a fixed network trained with SmoothAP at m = 64: {_moves('P', RISING, 'rises')};"
        in (prose.p_vs_batch_size_text(batch))
    )


def test_training_sentence_says_which_way_map_moved():
    up, down = {"mAP": 0.25}, {"mAP": 0.125}
    assert prose.training_sentence(up, down, down, up) == (
        "mAP on held-out images of the training classes rises from 0.125 to 0.250; on the unseen "
        "classes it falls from 0.250 to 0.125. The untrained network's embeddings already "
        "retrieve well (the columns before training); the unseen 5-9 columns measure how much of "
        "what SmoothAP learns on 0-4 transfers."
    )
    # an unchanged mAP is not called a rise
    assert "training classes falls from 0.250 to 0.250" in prose.training_sentence(up, up, up, up)


# --- the loss comparison ---------------------------------------------------------------------


def _run(values, **extra):
    return {"metrics": {"MAP@R": values}, **extra}


def test_loss_comparison_text_names_the_best_the_tied_the_behind_and_the_apart():
    results = {
        "before": {"MAP@R": [0.30, 0.32]},
        "seeds": [0, 1],
        "settings": {"steps": 120, "gradient_steps": 5},
        "initial_score_range": [0.002, 0.0031],
        "losses": {
            "best": _run([0.5, 0.6]),
            "close": _run([0.45, 0.55]),
            "other": _run([0.40, 0.44]),
            "behind": _run([0.35, 0.37]),
            "last": _run([0.33, 0.34]),
            "dead": _run([0.31, 0.31], initial_gradient_norm=[0.0, 0.0]),
            "flat": _run([0.29, 0.33]),
        },
    }
    summary = {
        "metric": "MAP@R",
        "best": "best",
        "tied": ["close", "other"],
        "behind": ["behind", "last"],
        "apart": {
            "dead": {"no_gradient": True, "gap": 0.0, "spread": 0.01},
            "flat": {
                "no_gradient": False,
                "gap": -0.00005,
                "spread": 0.0321,
                "early_gradient_norm": 0.01234,
                "initial_gradient_norm": 9.0,
                "initial_loss": 0.5,
                "final_loss": 0.5,
            },
        },
    }
    expected = (
        f"Best MAP@R among the losses that beat the untrained network ({_cell([0.30, 0.32])}) by "
        f"more than the seed spread: best ({_cell([0.5, 0.6])}). Within the seed spread of it "
        "(gap below the sum of the two stds): close, other. Behind it by more than the spread: "
        "behind, last. Listed apart, not ranked (MAP@R not above the untrained network's by "
        f"more than the seed spread): dead, {_cell([0.31, 0.31])}: loss gradient exactly 0 on "
        "the first batch at the initialization in every seed (the untrained network's cosine "
        f"scores of a batch span at most 0.0031); flat, {_cell([0.29, 0.33])}: gap to the "
        "untrained network -0.0001 against a spread of 0.0321; loss gradient norm over the "
        "first 5 steps 0.0123; training loss fell from 0.500 to 0.500. This ranks the losses "
        "for one small CNN trained from scratch for 120 steps, 2 seeds, each loss at its "
        "paper's settings; it cannot show how they rank with a pre-trained backbone, longer "
        "training or a wider search, as on CUB-200 or Stanford Online Products."
    )
    assert prose.loss_comparison_text(results, summary) == expected


def test_loss_comparison_text_computes_its_summary_when_not_given():
    results = {
        "before": {"MAP@R": [0.30, 0.30]},
        "seeds": [0, 1],
        "losses": {
            "best": _run([0.49, 0.51]),
            "ahead": _run([0.40, 0.42]),
            "far": _run([0.10, 0.12]),
        },
    }
    summary = loss_comparison.summarize(results)
    assert summary["best"] == "best" and summary["apart"]
    assert prose.loss_comparison_text(results) == prose.loss_comparison_text(results, summary)


def test_apart_reasons_fall_back_to_the_initial_gradient_and_an_unknown_score_range():
    results = {"losses": {"a": _run([0.1]), "b": _run([0.2]), "c": _run([0.3])}}  # no settings
    summary = {
        "metric": "MAP@R",
        "apart": {
            "a": {"no_gradient": True},
            "b": {
                "no_gradient": False,
                "gap": 0.01,
                "spread": 0.02,
                "early_gradient_norm": 3.0,
                "initial_gradient_norm": 0.5,
                "initial_loss": 0.2,
                "final_loss": 0.2001,
            },
            "c": {"no_gradient": False, "gap": 0.0, "spread": 0.0},
        },
    }
    text = prose.apart_text(results, summary)
    assert "batch span at most nan)" in text  # the range was not measured
    # no gradient_steps setting: the early norm is not quoted, the initial one is
    assert (
        "b, 0.200: gap to the untrained network +0.0100 against a spread of 0.0200; "
        "loss gradient norm at the initialization 0.5; training loss rose from 0.200 to "
        "0.200;"
    ) in text
    assert text.endswith(
        "c, 0.300: gap to the untrained network +0.0000 against a spread of 0.0000."
    )
    assert prose.apart_text(results, {"metric": "MAP@R", "apart": {}}) == ""


def test_loss_change_words_need_both_losses():
    assert prose.loss_change_words({"initial_loss": 0.8, "final_loss": 0.4}) == [
        "training loss fell from 0.800 to 0.400"
    ]
    assert prose.loss_change_words({"initial_loss": 0.4, "final_loss": 0.8}) == [
        "training loss rose from 0.400 to 0.800"
    ]
    assert prose.loss_change_words({"initial_loss": 0.4}) == []
    assert prose.loss_change_words({"final_loss": 0.4}) == []


def test_without_a_best_loss_the_sentence_says_none_beats_the_untrained_network():
    results = {"before": {"MAP@R": [0.2, 0.4]}, "losses": {}}
    summary = {"metric": "MAP@R", "best": None, "tied": [], "behind": [], "apart": {}}
    assert prose.loss_comparison_text(results, summary) == (
        f"No loss beats the untrained network's MAP@R ({_cell([0.2, 0.4])}) by more than the "
        "seed spread. This ranks the losses for one small CNN trained from scratch for ? steps, "
        "0 seeds, each loss at its paper's settings; it cannot show how they rank with a "
        "pre-trained backbone, longer training or a wider search, as on CUB-200 or Stanford "
        "Online Products."
    )


@pytest.mark.parametrize(
    ("candidates", "words"),
    [
        (1, ", each loss at its paper's settings;"),
        (
            2,
            ", each loss's hyperparameters chosen from at most 2 settings on held-out training "
            "numbers;",
        ),
    ],
)
def test_scope_names_the_sweep_only_when_a_loss_had_a_choice(candidates, words):
    results = {
        "seeds": [0, 1, 2],
        "settings": {"steps": 7},
        "losses": {"a": {"sweep": {"candidates": [{}] * candidates}}, "b": {}},
    }
    assert f"trained from scratch for 7 steps, 3 seeds{words} it cannot" in (
        prose.scope_sentence(results)
    )


def test_sweep_lines_are_a_markdown_table_of_each_candidate():
    results = {
        "seeds": [3, 5, 8],
        "losses": {
            "single": {
                "sweep": {
                    "candidates": [{"tau": 0.01}],
                    "validation": [[0.1]] * 3,
                    "chosen": [0, 0, 0],
                }
            },
            "none": {},
            "swept": {
                "sweep": {
                    "candidates": [{"tau": 0.01, "margin": 0.5}, {"tau": 0.1}],
                    "validation": [[0.2, 0.3], [0.4, 0.5], [0.6, 0.7]],
                    "chosen": [1, 1, 1],
                }
            },
        },
    }
    assert prose.sweep_lines(results) == [
        "| loss | setting | validation MAP@R | chosen in seeds |",
        "| --- | --- | --- | --- |",
        f"| swept | tau 0.01, margin 0.5 | {_cell([0.2, 0.4, 0.6])} | - |",
        f"| swept | tau 0.1 | {_cell([0.3, 0.5, 0.7])} | 3, 5, 8 |",
    ]
    results["losses"]["swept"]["sweep"]["chosen"] = [0, 1, 0]
    assert prose.sweep_lines(results)[2].endswith("| 3, 8 |")
    # choices that do not match the seeds are refused, not paired up to the shorter list
    results["losses"]["swept"]["sweep"]["chosen"] = [1, 1]
    with pytest.raises(ValueError, match="zip"):
        prose.sweep_lines(results)
    del results["losses"]["swept"]
    assert prose.sweep_lines(results) == []


def test_the_losses_trained_at_one_setting_are_named_with_it():
    # a baseline at one margin was ranked last beside losses chosen from up to 4 settings
    results = {"losses": {
        "SmoothAP": {"sweep": {"candidates": [{"tau": 0.01}]}},
        "swept": {"sweep": {"candidates": [{"tau": 0.01}, {"tau": 0.1}]}},
        "none": {},
        "Contrastive": {"sweep": {"candidates": [{"margin": 0.5, "scale": 2.0}]}},
        "plain": {"sweep": {"candidates": [{}]}},  # no hyperparameter: its name alone
    }}  # fmt: skip
    assert prose.unswept_sentence(results) == (
        "Trained at one setting each, not swept: SmoothAP (tau 0.01); Contrastive (margin 0.5, "
        "scale 2); plain; the ranking does not show how they do at other settings.")
    del results["losses"]["SmoothAP"], results["losses"]["Contrastive"], results["losses"]["plain"]
    assert prose.unswept_sentence(results) == ""


# --- the digit scenes --------------------------------------------------------------------------


def _scene(i2t, t2i, rsum):
    return {"recall": {"i2t_R@1": i2t, "t2i_R@1": t2i, "rsum": rsum}}


def test_scenes_text_words_ties_leads_single_runs_and_unranked_encoders():
    runs = {
        "A": {
            "x": _scene([0.5, 0.6], [0.4, 0.5], [300.0, 310.0]),
            "y": _scene([0.1, 0.2], [0.3, 0.3], [250.0, 260.0]),
            "z": _scene([0.3, 0.3], [0.1, 0.1], [200.0, 202.0]),
        },
        "B": {
            "x": _scene([0.2, 0.2], [0.2, 0.2], [100.0, 100.0]),
            "gone": _scene([0.001, 0.0], [0.0, 0.0], [3.0, 3.0]),
        },
        "C": {"x": _scene([0.7, 0.8], [0.1, 0.1], [90.0, 90.0])},
        "D": {
            "x": _scene([0.2, 0.2], [0.2, 0.2], [100.0, 100.0]),
            "w": _scene([0.2, 0.2], [0.2, 0.2], [99.0, 99.5]),
        },
    }
    results = {"settings": {"steps": 30}, "seeds": [0, 1], "runs": runs}
    summary = {
        "chance": {"i2t": 0.002, "t2i": 0.0025},
        "chance_factor": 2.0,
        "best_recall_at_1": {
            "i2t": {"encoder": "A", "loss": "x", "tied": [["C", "x"], ["A", "z"]]},
            "t2i": {"encoder": "A", "loss": "x", "tied": []},
        },
        "best_rsum": {
            "A": {"loss": "x", "tied": ["y", "z"]},
            "B": {"loss": "x", "tied": []},
            "C": {"loss": None, "tied": []},
            "D": {"loss": "x", "tied": []},
        },
        "apart": {
            "A": {},
            "B": {
                "gone": {"i2t_R@1": 0.0005, "t2i_R@1": 0.0, "initial_loss": 2.0, "final_loss": 1.5,
                         "below_chance": True, "below_gate": ["i2t", "t2i"]}
            },
            "C": {"x": {"i2t_R@1": 0.75, "t2i_R@1": 0.001, "below_chance": True,
                        "below_gate": ["t2i"]}},
            "D": {},
        },
    }
    expected = [
        f"Best image -> caption R@1: the A encoder with x, {_cell([0.5, 0.6])}; within its seed "
        "spread: the C encoder with x, the A encoder with z.",
        f"Best caption -> image R@1: the A encoder with x, {_cell([0.4, 0.5])}.",
        f"A: highest rsum with x ({_cell([300.0, 310.0], 1)}), not separated from y, z by more "
        "than the seed spread.",
        f"B: highest rsum with x ({_cell([100.0, 100.0], 1)}), the only one of its losses above "
        "2 x chance R@1 both ways.",
        "C: no loss above 2 x chance R@1 both ways, so its losses are not ranked.",
        f"D: highest rsum with x ({_cell([100.0, 100.0], 1)}), ahead of the other compared "
        "losses by more than the seed spread.",
        "Listed apart, not ranked, as they did not train both ways here (mean R@1 not at least 2 "
        "x chance "
        "R@1 both ways; chance 0.0020 image -> caption, 0.0025 caption -> image): the B encoder "
        "with gone (R@1 0.0005 image -> caption, 0.0000 caption -> image, training loss fell from "
        "2.000 to 1.500); the C encoder with x (R@1 0.7500 image -> caption, 0.0010 caption -> "
        "image, below the gate "
        "caption -> image only).",
        "This compares losses on miniatures (a frozen digit backbone, 30 steps, 2 seeds, every "
        "loss at its paper's setting); a loss listed apart did not train both ways in this setup, "
        "so the comparison says nothing about it, and none of it shows how the losses rank on "
        "Flickr30k or MS-COCO with pre-trained encoders and full training.",
    ]
    assert prose.scenes_text(results, summary) == " ".join(expected)


def test_scenes_without_compared_runs_say_so_each_way():
    summary = {
        "chance_factor": 1.5,
        "best_recall_at_1": {"i2t": None, "t2i": None},
        "best_rsum": {},
        "apart": {},
        "chance": {"i2t": 0.1, "t2i": 0.1},
    }
    assert prose.scenes_apart_text(summary) == ""
    assert prose.best_recall_sentences({"runs": {}}, summary) == [
        "No image -> caption R@1 is compared: no run is above 1.5 x chance R@1 both ways.",
        "No caption -> image R@1 is compared: no run is above 1.5 x chance R@1 both ways.",
    ]
    assert prose.scenes_scope_sentence({}).startswith(
        "This compares losses on miniatures (a frozen digit backbone, ? steps, 0 seeds,"
    )


def _anatomy(active_i2t, active_t2i, share=0.25, hardest=0.5):
    def per_seed(last):
        return [[99.0, 98.0, value] for value in last]

    return {
        direction: {
            "active_negatives": per_seed(active),
            "share_without_gradient": per_seed([share, share]),
            "hardest_10pct_share": per_seed([hardest, hardest]),
        }
        for direction, active in (("i2t", active_i2t), ("t2i", active_t2i))
    }


def test_anatomy_text_tabulates_the_last_step_and_compares_smoothap_with_nt_xent():
    runs = {
        "VSRN": {"SmoothAP": {"anatomy": _anatomy([1.0, 1.0], [1.0, 1.0])}},
        "VSE++": {
            "SmoothAP": {"anatomy": _anatomy([40.0, 42.0], [3.0, 5.0])},
            "NT-Xent": {"anatomy": _anatomy([10.0, 12.0], [4.0, 6.0], 0.125, 0.75)},
        },
    }
    lines = prose.anatomy_text({"settings": {"batch_images": 8}, "runs": runs}).splitlines()
    assert lines[0] == (
        "Read from dL/dS of each direction's own term (gradlab.functional.gradient_anatomy: an "
        "entry is active above 1 % of its query's largest |dL/dS|), at the last logged step, "
        "mean ± std (population) over seeds. An image query has 5 positive "
        "and 35 negative captions; a "
        "caption query 1 positive and 7 negative images."
    )
    assert lines[1] == ""
    assert lines[2] == (
        "| encoder | loss | active negatives i2t | t2i | queries without gradient "
        "i2t | t2i | hardest-10 % share i2t | t2i |"
    )
    assert lines[3] == "| --- | --- | --- | --- | --- | --- | --- | --- |"
    cells = [
        _cell([10.0, 12.0], 2),
        _cell([4.0, 6.0], 2),
        *[_cell([0.125] * 2, 2)] * 2,
        *[_cell([0.75] * 2, 2)] * 2,
    ]
    assert lines[4].startswith("| VSRN | SmoothAP | 1.00 ± 0.00 |")
    assert lines[6] == "| VSE++ | NT-Xent | " + " | ".join(cells) + " |"
    assert lines[7] == ""
    assert lines[8] == (
        f"VSE++, image queries: SmoothAP sends gradient to {_cell([40.0, 42.0], 1)} negatives, "
        f"NT-Xent to {_cell([10.0, 12.0], 1)} (more than the seed spread apart). VSE++, caption "
        f"queries: SmoothAP sends gradient to {_cell([3.0, 5.0], 1)} negatives, NT-Xent to "
        f"{_cell([4.0, 6.0], 1)} (within the seed spread)."
    )
    assert len(lines) == 9


def _geometry(rank_images, rank_captions, other=0.5):
    geometry = {key: [[9.0, 8.0, other], [9.0, 8.0, other]] for key in prose.GEOMETRY_COLUMNS}
    geometry["rank_share_images"] = [[9.0, 8.0, value] for value in rank_images]
    geometry["rank_share_captions"] = [[9.0, 8.0, value] for value in rank_captions]
    return {"geometry": geometry, "anatomy": {"steps": [0, 7, 12]}}


GEOMETRY_HEADER = (
    "Each logged step's batch (its images and their captions, unit vectors), mean ± std "
    "(population) over "
    "seeds at the last logged step: alignment of the (image, caption) positives, mean |u - v|^2 "
    "(Wang & Isola 2020, Eq. 4; 0: they coincide); uniformity of each modality, log mean "
    "exp(-2 |u - v|^2) (Eq. 5; lower: more spread); effective rank of each modality's centred "
    "embeddings over min(N - 1, d) (RankMe, Garrido et al. 2023; 1: the spread around the "
    "centroid uses every direction alike, 1/min(N - 1, d): it lies along a line; it does not "
    "see how large that spread is, so a batch shrunk to nearly one point can read 1 there, as a "
    "uniformity near 0 shows); modality gap, the distance between the two centroids (Liang et "
    "al. 2022)."
)


def test_geometry_text_tabulates_and_names_the_highest_rank_with_its_ties():
    runs = {
        "VSE++": {"gone": _geometry([0.9, 0.9], [0.9, 0.9])},  # every run apart: no sentence
        "VSRN": {
            "a": _geometry([0.4, 0.52], [0.9, 0.9], 0.25),
            "b": _geometry([0.5, 0.6], [0.1, 0.1]),
            "d": _geometry([0.45, 0.55], [0.1, 0.1]),
            "c": _geometry([0.1, 0.1], [0.2, 0.2]),
            "e": _geometry([0.99, 0.99], [0.99, 0.99]),  # apart: its rank is not compared
        },
    }
    below, collapsed = {"below_chance": True}, {"below_chance": False, "collapsed": {"images": 0}}
    apart = {"VSE++": {"gone": below}, "VSRN": {"c": below, "e": collapsed}}
    lines = prose.geometry_text({"runs": runs, "summary": {"apart": apart}}).splitlines()
    assert lines[:4] == [
        GEOMETRY_HEADER,
        "",
        "| encoder | loss | alignment | uniformity images | captions | effective rank / "
        "min(N - 1, d) images | captions | modality gap |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    assert lines[5] == (
        "| VSRN | a | 0.250 ± 0.000 | 0.250 ± 0.000 | 0.250 ± 0.000 | "
        f"{_cell([0.4, 0.52])} | {_cell([0.9, 0.9])} | 0.250 ± 0.000 |"
    )
    assert len(lines) == 12 and lines[-2] == ""
    # b's images (0.55 ± 0.05), a's (0.46 ± 0.06) and d's (0.5 ± 0.05) are within the spread
    assert lines[-1] == (
        f"VSRN at step 12: the highest effective rank under b for the images ({_cell([0.5, 0.6])}"
        f"; within its seed spread: a, d) and under a for the captions ({_cell([0.9, 0.9])}) "
        "(listed apart, not compared: c (did not train both ways), e (collapsed))."
    )


def test_geometry_names_the_highest_mean_rank_of_each_encoder():
    # one seed at 0.6 against three at 0.5: the mean decides, not the sum
    runs = {
        "A": {"many": _geometry([0.5, 0.5, 0.5], [0.2, 0.2, 0.2]), "one": _geometry([0.6], [0.3])},
        "B": {"only": _geometry([0.25, 0.25], [0.125, 0.125])},
    }
    sentence = prose.geometry_text({"runs": runs}).splitlines()[-1]
    assert sentence == (
        "A at step 12: the highest effective rank under one for the images (0.600) and "
        "under one for the captions (0.300). B at step 12: the highest effective rank "
        "under only for the images (0.250 ± 0.000) and under only for the captions "
        "(0.125 ± 0.000)."
    )


def test_family_titles_are_the_plot_titles():
    stem, family = next(iter(FAMILIES.items()))
    assert prose.family_title(stem) == family[0]
    assert prose.family_title("no_such_family") == "no such family"


def test_relaxation_summary_says_where_each_variant_settles():
    runs = []
    for objective in ("ap", "dcg"):
        for method in HARMONIC_METHODS:
            for bits, settles in ((8, 0.5), (16, 2.0 if method == "exact" else None)):
                settled = settles if method == "exact" or objective == "ap" else None
                runs.append(
                    {
                        "objective": objective,
                        "method": method,
                        "bits": bits,
                        "settles_at": settled,
                        "gap_at_largest_scale": 1e-3 * bits,
                    }
                )
    runs.append(
        {
            "objective": "other",
            "method": "log",
            "bits": 8,
            "settles_at": None,
            "gap_at_largest_scale": 9.0,
        }
    )
    text = prose.relaxation_summary(
        {"runs": runs, "tolerance": 1e-4, "scales": [0.1, 50.0, 1234.5]}
    )
    sentences = text.split(". ")
    assert len(sentences) == 2 * len(HARMONIC_METHODS)
    assert sentences[0] == (
        f"AP {HARMONIC_METHODS[0]}: within 0.0001 of the exact value for 8 bits "
        "from scale 0.5; at the largest scale tried, 1.23e+03, the gap is at most 1.60e-02"
    )
    exact_ap = next(s for s in sentences if s.startswith("AP exact"))
    assert exact_ap == (
        "AP exact: within 0.0001 of the exact value for 8 bits from scale 0.5, 16 bits from scale "
        "2; at the largest scale tried, 1.23e+03, the gap is at most 1.60e-02"
    )
    log_dcg = next(s for s in sentences if s.startswith("DCG log"))
    assert log_dcg.startswith("DCG log: within 0.0001 of the exact value at no scale tried;")


@pytest.mark.parametrize("matches", [True, False])
def test_lemma1_verdict_quotes_the_shares_and_whether_the_printed_value_holds(matches):
    results = {
        "configurations": 60,
        "delta": 0.25,
        "nonzero_share_in_pair_bin": 0.956,
        "nonzero_share_in_bin_below": 0.75,
        "nonzero_share_elsewhere": 0.6,
        "sign_of_nonzero": "positive",
        "max_abs_closed_form_error": 3.4e-13,
        "lemma_value_matches": matches,
    }
    ending = "agrees with that value." if matches else "does not agree with that value."
    assert prose.lemma1_verdict(results) == (
        "Over 60 configurations (Delta = 0.25), dP_ij/ds_ik is non-zero for 96% of negatives in "
        "the pair's bin, 75% of those in the bin below it and 60% elsewhere; every non-zero value "
        "is positive and the closed form (h_left or h_right)/(|N| Delta) matches autograd to "
        "3.4e-13. Lemma 1 claims one bin and the value -h_right; the measurement " + ending
    )


def _row(classes, per_class, blocks, true_classes, difference=0.0):
    return {
        "classes": classes,
        "per_class": per_class,
        "batch": classes * per_class,
        "equals_blocks": blocks,
        "equals_classes": true_classes,
        "difference_classes": difference,
    }


def test_pml_grouping_sentence_every_batch_in_blocks_classes_only_when_square():
    rows = [_row(2, 2, True, True), _row(28, 4, True, False, 0.00712), _row(3, 5, True, False)]
    assert prose.pml_grouping_sentence(
        {"pml_version": "2.9.0", "agreement": 1e-6, "rows": rows}
    ) == (
        "pytorch-metric-learning 2.9.0's SmoothAPLoss equals SmoothAP over consecutive blocks of "
        "n_classes items in every measured batch (classes x items per class: 2 x 2, 28 x 4, "
        "3 x 5; to 1e-06), and SmoothAP over the true classes only where there are as many "
        "classes as items per class (2 x 2): at 28 classes of 4 (B = 112) it optimises another "
        "grouping, 7.1e-03 away from SmoothAP's loss."
    )


def test_pml_grouping_sentence_some_batches_and_the_largest_one_agreeing():
    rows = [_row(2, 2, False, False), _row(4, 2, True, True), _row(8, 8, False, True)]
    assert prose.pml_grouping_sentence({"pml_version": "1.0", "agreement": 1e-6, "rows": rows}) == (
        "pytorch-metric-learning 1.0's SmoothAPLoss equals SmoothAP over consecutive blocks of "
        "n_classes items in 1 of 3 measured batches (4 x 2), and SmoothAP over the true classes "
        "in these batches (4 x 2, 8 x 8)."
    )
    rows = [_row(2, 3, False, False), _row(3, 3, False, False)]
    text = prose.pml_grouping_sentence({"pml_version": "1.0", "agreement": 1e-6, "rows": rows})
    assert "items in 0 of 2 measured batches (none), and SmoothAP over the true classes" in text


def test_p_vs_batch_size_text_says_saturated_when_p_is_pinned_at_1():
    pinned = [[0.5, 0.75, 1.0], [0.5, 0.5, 1.0]]  # both seeds alike at the ends, 1 at m = 256
    batch = _batch(trained_at_m=_setting(pinned, pinned, pinned, steps=[8, 4, 2]))
    text = prose.p_vs_batch_size_text(batch)
    assert "with one network fine-tuned per m P is saturated, so it shows no trend." in text
    assert "P rises" not in text and "P is saturated, so it shows no trend: " in text


def test_one_seed_ranks_no_loss_and_sets_apart_only_a_loss_without_gradient():
    # one seed has no measured spread: "beats it by more than the seed spread" (of 0) would
    # rank any gap, however small
    results = {
        "losses": {
            "A": {"metrics": {"MAP@R": [0.5]}, "initial_gradient_norm": [0.3]},
            "B": {"metrics": {"MAP@R": [0.1]}, "initial_gradient_norm": [0.2]},
            "C": {"metrics": {"MAP@R": [0.12]}, "initial_gradient_norm": [0.0]},
            "D": {"metrics": {"MAP@R": [0.13]}, "initial_gradient_norm": [0.0]},
        },
        "before": {"MAP@R": [0.11]},
        "initial_score_range": [0.001],
    }
    summary = loss_comparison.summarize(results)
    assert summary["single_seed"] is True
    assert (summary["best"], summary["ranked"], summary["tied"]) == (None, [], [])
    assert list(summary["apart"]) == ["C", "D"] and summary["apart"]["C"]["no_gradient"]
    sentence = prose.best_loss_sentence(results, summary)
    assert sentence == ("One seed: the losses are not ranked against the untrained network's "
                        "MAP@R (0.110) or one another, as one seed measures no spread to "
                        "compare their gaps with (run two seeds or more).")  # fmt: skip
    apart = prose.apart_text(results, summary)
    assert apart.startswith(" Listed apart: C, 0.120: loss gradient exactly 0")
    assert "; D, 0.130: loss gradient exactly 0" in apart
    assert "seed spread" not in apart
    two = {**results, "before": {"MAP@R": [0.11, 0.11]},
           "losses": {name: {**run, "metrics": {"MAP@R": run["metrics"]["MAP@R"] * 2}}
                      for name, run in results["losses"].items()}}  # fmt: skip
    assert loss_comparison.summarize(two)["best"] == "A"  # two seeds: ranked as before


@pytest.mark.parametrize(("conditions", "expected"), [
    ({"clock": "wall", "device": "cpu", "processor": "AMD EPYC 9R14", "cores": 2, "threads": 1,
      "processes": 2},
     "Times are wall-clock on AMD EPYC 9R14 (2 cores), 1 torch thread per process, 2 training "
     "processes at once; other load on the machine moves them."),
    ({"clock": "wall", "device": "cpu", "processor": "Xeon", "cores": 1, "threads": 4,
      "processes": 1},
     "Times are wall-clock on Xeon (1 core), 4 torch threads per process, one training process "
     "at a time; other load on the machine moves them."),
    ({"clock": "wall", "device": "cuda:1", "processor": "NVIDIA H200", "cores": 16, "threads": 16,
      "processes": 1},
     "Times are wall-clock on NVIDIA H200 (cuda:1); other load on the machine moves them."),
    (None, ""),
])  # fmt: skip
def test_the_timing_sentence_says_where_the_times_were_taken(conditions, expected):
    # the loss tables printed milliseconds with no word of the machine, its threads or the
    # training processes running beside each other
    assert prose.timing_sentence(conditions) == expected


MEANING = "the false positive probability loss of Zhong, Li & Li"


@pytest.mark.parametrize("kept", [
    "![FAPPY's lemma](figures/FAPPY.png)",  # an image: its alt text and its file name
    "see [FAPPY](#fappy)",  # a link's text and target
    "```\nloss = FAPPY()\n```",  # a fenced code block
    "    FAPPY = 1",  # an indented code block
    "| FAPPY | 0.5 |",  # a table's cell
    "## FAPPY",  # a heading: its anchor
    "FAPPY's Lemma 1",  # a possessive: the parentheses would split it
    "`FAPPY` and FAPPYLoss",  # a code span, a longer name
])  # fmt: skip
def test_spelled_out_leaves_what_is_not_running_text_and_spells_out_the_next_use(kept):
    # the image's file name was rewritten (a broken figure), code and possessives were split
    text = f"{kept}\n\nThen FAPPY wins."
    assert prose.spelled_out(text) == f"{kept}\n\nThen FAPPY ({MEANING}) wins."


def test_spelled_out_spells_out_once_and_leaves_text_without_the_word_alone():
    assert prose.spelled_out("FAPPY and FAPPY.") == f"FAPPY ({MEANING}) and FAPPY."
    assert prose.spelled_out("FastAP only.") == "FastAP only."
