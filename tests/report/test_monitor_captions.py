"""The captions of the Monitor's figures in the report, read from hand-made logged records:
each says what to read and quotes the run's own numbers; the counts of the sigmoid's operating
region are said to count pairs already ordered where the loss stays about 0.

Every number expected here is written out by hand from the records below."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gradlab.monitor import Plot
from gradlab.plotting.monitor import FAMILIES
from gradlab.report.monitor_captions import LOW_LOSS, low_loss_step, monitor_figure_caption


def _run(losses, **series):
    """Records at steps 0, 2, 4, ... with these losses and other keys' values."""
    return [{"step": 2 * index, "loss": loss, **{k: v[index] for k, v in series.items()}}
            for index, loss in enumerate(losses)]  # fmt: skip


@pytest.mark.parametrize(("losses", "expected"), [
    ([0.5, 1e-4, 0.01, 0.0, 1e-5], 6),  # below 1e-3 from step 6 to the end
    ([0.5, 1e-4, 0.0, 1e-5], 2),
    ([0.5, 0.1, 0.0, 0.002], None),  # the last loss is above: never stays low
    ([0.5, 0.1, 0.0], None),  # one low step alone is not a stretch
    ([1e-4, 0.0], 0),
])  # fmt: skip
def test_the_low_loss_step_is_where_the_loss_stays_below_the_threshold(losses, expected):
    assert LOW_LOSS == 1e-3
    assert low_loss_step(_run(losses)) == expected


def test_a_low_loss_step_skips_steps_that_did_not_log_the_loss():
    records = [{"step": 0, "loss": 0.5}, {"step": 2, "loss": 1e-4}, {"step": 3, "p_seed": 0.2},
               {"step": 4, "loss": 0.0}, {"step": 6, "loss": 1e-5}]  # fmt: skip
    assert low_loss_step(records) == 2


@pytest.mark.parametrize("broken", [float("nan"), float("inf")])
def test_a_loss_that_is_not_finite_is_logged_and_not_low(broken):
    # a NaN was read as not logged: a run whose last loss was NaN "stayed below 0.001"
    assert low_loss_step(_run([0.5, 1e-4, 0.0, broken])) is None
    records = _run([0.5, broken, 1e-4, 0.0, 1e-5], p_seed=[0.7, 0.5, 0.3, 0.2, 0.2])
    assert low_loss_step(records) == 4
    assert "(the last 3 of 5 logged steps)" in monitor_figure_caption("operating_region", records)


def test_every_family_caption_says_what_to_read_and_quotes_first_and_last_values():
    records = _run([0.4, 0.1], smooth_ap=[0.55, 0.875], exact_ap=[0.6, 0.9])
    caption = monitor_figure_caption("relaxation_gap", records)
    title = FAMILIES["relaxation_gap"][0]
    assert caption.startswith(f"The Monitor's log of this run: {title}. ")
    assert caption.endswith("Smooth AP 0.55 at step 0, 0.875 at step 2; exact AP 0.6 at step 0, "
                            "0.9 at step 2.")  # fmt: skip
    assert len(caption) > len(title) + 120  # a reading sentence between title and numbers
    loss = monitor_figure_caption("loss", _run([0.4, 0.01, 5e-4, 0.0]))
    assert loss.endswith("Loss 0.4 at step 0, 0 at step 6. From step 4 on it stays below 0.001.")
    # the families of the full preset each have a reading beyond their title and numbers
    for family in ("loss", "embeddings", "embedding_gradients", "operating_region",
                   "decomposition", "decomposition_shape", "gradient_count_mean",
                   "relaxation_gap", "relaxation_gap_difference", "anatomy_active_negatives",
                   "anatomy_hardness", "anatomy_without_gradient", "geometry",
                   "geometry_collapse", "margins", "margin_violations"):  # fmt: skip
        bare = f"The Monitor's log of this run: {FAMILIES[family][0]}."
        assert len(monitor_figure_caption(family, [{"step": 0}])) > len(bare) + 20, family


def test_the_operating_region_counts_are_said_to_read_ordered_pairs_at_low_loss():
    records = _run(
        [0.3, 0.02, 4e-4, 0.0, 1e-6],
        p_seed=[0.7, 0.3, 0.25, 0.21, 0.26],
        embedding_grad_norm=[1.5, 0.2, 3e-6, 1e-9, 2e-8],
        margin_mean=[-0.1, 0.1, 0.3, 0.45, 0.4],
        operating_region_width=[0.099] * 5,
        gradient_count_mean=[150.0, 60.0, 41.0, 38.0, 40.0],
    )
    said = ("From step 4 on (the last 3 of 5 logged steps) the loss stays below 0.001 and the "
            "margin of the hardest positive over the hardest negative (mean over the queries) "
            "is at least 0.3, more than the operating region's width w = 0.099. There every batch "
            "is ranked almost perfectly (mean smooth AP above 0.999), so this figure counts "
            "pairs the loss has already ordered: it reads ")  # fmt: skip
    # the gradient norm's median over steps 4, 6, 8 (3e-6, 1e-9, 2e-8) against 1.5 at step 0
    norm = (", while the embeddings' gradient norm has a median of 2.0e-08 there against 1.5 at "
            "step 0.")
    p_caption = monitor_figure_caption("operating_region", records)
    assert p_caption.endswith(said + "P (Brown et al. 2020, suppl. Eq. 1) 0.21 to 0.26" + norm)
    count = monitor_figure_caption("gradient_count_mean", records)
    assert count.endswith(said + "entries per query (count) 38 to 41" + norm)
    assert "weighted count first divides each slope by R^2" in count
    # a run whose loss does not stay low: nothing said of it, and the loss's own caption neither
    rising = [{**record, "loss": 0.01} if record["step"] == 8 else record for record in records]
    assert "From step" not in monitor_figure_caption("operating_region", rising)
    assert "From step" not in monitor_figure_caption("loss", rising)
    # logged without the gradient norm and the margins: only the loss is quoted
    bare = _run([0.3, 0.0, 0.0], p_seed=[0.7, 0.2, 0.25])
    assert monitor_figure_caption("operating_region", bare).endswith(
        "From step 2 on (the last 2 of 3 logged steps) the loss stays below 0.001. There every "
        "batch is ranked almost perfectly (mean smooth AP above 0.999), so this figure counts "
        "pairs the loss has already ordered: it reads P (Brown et al. 2020, suppl. Eq. 1) 0.2 "
        "to 0.25.")


def test_the_variants_of_p_have_one_name_each_in_the_captions_and_the_glossary():
    # "off-diagonal P", "P without the diagonal" and "P without the query's own row and column"
    # named two quantities three ways across the report's text and figures
    names = ["P (Brown et al. 2020, suppl. Eq. 1)", "P without the diagonal",
             "P without the query's row and column"]  # fmt: skip
    records = _run([0.5, 0.4], p_seed=[0.7, 0.3], p_off_diagonal=[0.69, 0.29],
                   p_without_query=[0.72, 0.28])  # fmt: skip
    caption = monitor_figure_caption("operating_region", records)
    assert caption.endswith(f"{names[0]} 0.7 at step 0, 0.3 at step 2; {names[1]} 0.69 at step 0, "
                            f"0.29 at step 2; {names[2]} 0.72 at step 0, 0.28 at step 2.")
    glossary = (Path(__file__).resolve().parents[2] / "docs" / "glossary.md").read_text()
    assert all(name in glossary for name in names[1:])
    assert "off-diagonal P" not in glossary and "own row and column" not in caption


def test_a_series_logged_at_one_step_is_quoted_once():
    # "Loss 0.4 at step 0, 0.4 at step 0." quoted one value as the first and the last
    records = [{"step": 0, "loss": 0.4, "smooth_ap": 0.55}, {"step": 2, "smooth_ap": 0.875}]
    assert monitor_figure_caption("loss", records).endswith(" Loss 0.4 at step 0.")
    assert monitor_figure_caption("relaxation_gap", records).endswith(
        " Smooth AP 0.55 at step 0, 0.875 at step 2.")


def test_a_family_of_ones_own_is_captioned_by_its_name_alone():
    # a quantity's own figure: no reading, no key known here
    assert monitor_figure_caption("row_spread_mean", [{"step": 0, "row_spread_mean": 0.5}]) == (
        "The Monitor's log of this run: row spread mean.")


def test_a_loss_at_the_threshold_is_not_below_it():
    assert low_loss_step(_run([0.5, LOW_LOSS, LOW_LOSS])) is None
    assert low_loss_step(_run([0.5, LOW_LOSS / 2, LOW_LOSS / 2])) == 2


def test_the_low_loss_sentence_quotes_only_what_the_stretch_logged():
    # the margin without the region's width, and a gradient norm logged before the stretch
    # alone: neither comparison is made
    records = _run([0.3, 0.0, 0.0], p_seed=[0.7, 0.2, 0.25], margin_mean=[0.1, 0.3, 0.4],
                   embedding_grad_norm=[1.5, None, None])  # fmt: skip
    records = [{k: v for k, v in r.items() if v is not None} for r in records]
    caption = monitor_figure_caption("operating_region", records)
    assert caption.endswith("the loss stays below 0.001. There every batch is ranked almost "
                            "perfectly (mean smooth AP above 0.999), so this figure counts pairs "
                            "the loss has already ordered: it reads P (Brown et al. 2020, suppl. "
                            "Eq. 1) 0.2 to 0.25.")  # fmt: skip


ROW_SPREAD = Plot("row_spread", "Spread of each row", "std", (("row_spread_mean", "mean spread"),),
                  reading="How far apart each query's scores lie: near 0, no candidate stands out")


def test_a_caption_says_what_the_family_declares_to_read_from_its_figure():
    # the reading is the family's own declaration (gradlab.monitor.Plot's reading), not a
    # table the report keeps: a family of one's own that declares one is captioned with it,
    # its series by their legend labels, and a reading without a full stop gets one
    records = [{"step": 0, "row_spread_mean": 0.5}, {"step": 3, "row_spread_mean": 0.25}]
    assert monitor_figure_caption("row_spread", records, plots={"row_spread": ROW_SPREAD}) == (
        "The Monitor's log of this run: Spread of each row. How far apart each query's scores "
        "lie: near 0, no candidate stands out. Mean spread 0.5 at step 0, 0.25 at step 3.")
    asks = {"row_spread": dataclasses.replace(ROW_SPREAD, reading=" Do the rows spread? ")}
    assert monitor_figure_caption("row_spread", records, plots=asks) == (
        "The Monitor's log of this run: Spread of each row. Do the rows spread? Mean spread 0.5 "
        "at step 0, 0.25 at step 3.")
    bare = {"row_spread": dataclasses.replace(ROW_SPREAD, reading=None)}
    assert monitor_figure_caption("row_spread", records, plots=bare) == (
        "The Monitor's log of this run: Spread of each row. Mean spread 0.5 at step 0, 0.25 at "
        "step 3.")


def test_the_loss_caption_says_what_the_run_s_loss_is():
    # the Monitor's reading of its loss family speaks of any watched loss; the report's run
    # trains SmoothAP, whose "about 0" the count captions read as a mean smooth AP above 0.999
    caption = monitor_figure_caption("loss", _run([0.4, 0.1]))
    assert "SmoothAP's, 1 - the batch's mean smooth AP." in caption
    assert caption.endswith(" Loss 0.4 at step 0, 0.1 at step 2.")


def test_a_reading_that_ends_with_its_own_full_stop_keeps_one():
    said = {"row_spread": dataclasses.replace(ROW_SPREAD, reading="Do the rows spread apart.")}
    records = [{"step": 0, "row_spread_mean": 0.5}, {"step": 3, "row_spread_mean": 0.25}]
    assert monitor_figure_caption("row_spread", records, plots=said) == (
        "The Monitor's log of this run: Spread of each row. Do the rows spread apart. Mean "
        "spread 0.5 at step 0, 0.25 at step 3.")


def test_a_series_logged_at_one_step_is_named_by_its_family_s_legend_label():
    records = [{"step": 0, "row_spread_mean": 0.5}, {"step": 3}]
    assert monitor_figure_caption("row_spread", records, plots={"row_spread": ROW_SPREAD}) == (
        "The Monitor's log of this run: Spread of each row. How far apart each query's scores "
        "lie: near 0, no candidate stands out. Mean spread 0.5 at step 0.")


def test_the_low_loss_sentence_names_each_series_by_its_label_apart():
    # a count family declared with labels of its own, two of its series logged in the stretch
    region = Plot("operating_region", "Share in the region", "share",
                  (("p_seed", "share of all pairs"), ("p_off_diagonal", "share off the diagonal")))
    records = _run([0.3, 0.0, 0.0], p_seed=[0.7, 0.2, 0.25], p_off_diagonal=[0.69, 0.19, 0.24])
    caption = monitor_figure_caption("operating_region", records,
                                     plots={"operating_region": region})  # fmt: skip
    assert caption.endswith(
        "so this figure counts pairs the loss has already ordered: it reads share of all pairs "
        "0.2 to 0.25; share off the diagonal 0.19 to 0.24.")
