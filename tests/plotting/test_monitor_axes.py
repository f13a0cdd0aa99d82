"""The y axis gradlab plot gives a family (seconds, no training): a symmetric log axis's ticks,
threshold and limits, where values that differ by rounding alone are drawn flat, where a key
that skipped a step leaves a gap, and what a family's title says of its crosses. Expected
values are worked out by hand from the rules the docstrings state (decades of the values, a
tenth of the centre, the family's resolution)."""

from __future__ import annotations

import math
import warnings

import matplotlib.pyplot as plt
import pytest

from gradlab.plotting.monitor import PLOTS, draw_family


def _records(**series):
    steps = len(next(iter(series.values())))
    return [("run", [{"step": step, **{key: values[step] for key, values in series.items()}}
                     for step in range(steps)])]  # fmt: skip


def _drawn(family, key, values, steps=None):
    figure, axis = plt.subplots()
    runs = _records(**{key: values})
    if steps is not None:
        for record, step in zip(runs[0][1], steps, strict=True):
            record["step"] = step
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib's "identical low and high ylims", say
        draw_family(axis, family, [key], runs)
    figure.canvas.draw()
    return figure, axis


@pytest.mark.parametrize(("values", "ticks", "limits"), [
    # decades -6..0, seven powers: every one labelled, and 0
    ([0.0, 1e-6, 1.0], [0.0, 1.0, 1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6], (-5e-7, 1.0)),
    # decades -6..2, nine powers: every second one from the top, and 0
    ([0.0, 1e-6, 50.0], [0.0, 1e2, 1.0, 1e-2, 1e-4, 1e-6], (-5e-7, 1e2)),
    # decades -20..0, twenty-one powers: every third one from the top, and 0
    ([0.0, 1e-20, 0.5], [0.0, 1.0, 1e-3, 1e-6, 1e-9, 1e-12, 1e-15, 1e-18], (-5e-21, 1.0)),
], ids=["seven-decades", "nine-decades", "twenty-one-decades"])  # fmt: skip
@pytest.mark.slow
def test_a_symmetric_log_axis_labels_about_seven_powers_and_zero_below_its_lines(
    values, ticks, limits
):
    figure, axis = _drawn("embedding_gradients", "embedding_grad_norm", values)
    assert axis.get_yscale() == "symlog"
    smallest = min(value for value in values if value > 0)
    assert axis.yaxis.get_transform().linthresh == 10.0 ** math.floor(math.log10(smallest))
    assert axis.yaxis.get_major_locator().tick_values(0, 1) == pytest.approx(
        ticks, rel=1e-12, abs=0)  # fmt: skip
    assert axis.get_ylim() == pytest.approx(limits, rel=1e-12, abs=0)  # 0: half a decade up
    plt.close(figure)


@pytest.mark.slow
def test_values_up_to_1e250_keep_their_log_axis():
    # beyond 1e+-250 matplotlib's log scales overflow: linear there, log up to it
    axis = _drawn("embedding_gradients", "embedding_grad_norm", [1.0, 1e3, 5e249])[1]
    assert axis.get_yscale() == "log"
    beyond = _drawn("embedding_gradients", "embedding_grad_norm", [1.0, 1e3, 5e250])[1]
    assert beyond.get_yscale() == "linear"
    plt.close("all")


@pytest.mark.slow
def test_a_large_value_differing_by_rounding_alone_is_drawn_flat_a_tenth_around_it():
    # 1000 +- 1e-7 is a billionth of its size: rounding, drawn flat; the axis a tenth of the
    # value either side, without an offset label
    axis = _drawn("loss", "loss", [1000.0, 1000.0 + 2e-7, 1000.0])[1]
    centre = 1000.0 + 1e-7  # the middle of the values
    assert axis.get_ylim() == pytest.approx((0.9 * centre, 1.1 * centre), rel=1e-12, abs=0)
    assert axis.yaxis.get_major_formatter().get_useOffset() is False
    assert axis.yaxis.get_offset_text().get_text() == ""
    half = _drawn("loss", "loss", [0.5, 0.5 + 1e-12, 0.5])[1]
    centre = 0.5 + 5e-13
    assert half.get_ylim() == pytest.approx((0.9 * centre, 1.1 * centre), rel=1e-12, abs=0)
    plt.close("all")


def test_a_small_value_moving_by_a_millionth_of_itself_keeps_its_spread():
    # 1e-3 +- 1e-9 is a millionth of its size: a spread worth reading, not rounding
    figure, axis = _drawn("loss", "loss", [1e-3, 1e-3 + 1e-9, 1e-3])
    low, high = axis.get_ylim()
    assert high - low < 1e-8
    plt.close(figure)


def test_a_gap_within_its_resolution_is_drawn_flat_ten_resolutions_around_it():
    # the relaxation gap's resolution is 1e-12: 0 and 1e-12 apart by exactly that are flat,
    # the axis ten resolutions either side of their middle
    figure, axis = _drawn("relaxation_gap_difference", "relaxation_gap", [0.0, 1e-12, 0.0])
    centre = 5e-13
    assert axis.get_ylim() == pytest.approx((centre - 1e-11, centre + 1e-11), rel=1e-9, abs=0)
    plt.close(figure)


@pytest.mark.parametrize(("family", "key"), [
    ("loss", "loss"), ("relaxation_gap_difference", "relaxation_gap")])  # fmt: skip
@pytest.mark.slow
def test_a_family_at_one_value_keeps_matplotlib_s_own_padding(family, key):
    # one value, 0 included: nothing to flatten (an axis from 0 to 0 would warn)
    for value in (0.0, 0.5):
        figure, axis = _drawn(family, key, [value] * 3)
        low, high = axis.get_ylim()
        assert low < value < high
        plt.close(figure)


def test_a_family_whose_every_value_is_nan_is_drawn_as_crosses_alone():
    figure, axis = _drawn("loss", "loss", [math.nan, math.inf, math.nan])
    (crosses,) = axis.get_lines()
    assert list(crosses.get_xdata()) == [0, 1, 2]
    # no value axis to read: matplotlib's made-up -0.04..0.04 ticks are left out, said in text
    assert list(axis.get_yticks()) == []
    assert [text.get_text() for text in axis.texts] == [
        "no finite value:\nevery value is NaN or infinite (the crosses)"]
    (text,) = axis.texts  # in the middle of the frame, grey, whatever the data limits
    assert text.get_position() == (0.5, 0.5) and text.get_transform() is axis.transAxes
    assert (text.get_ha(), text.get_va(), text.get_color()) == ("center", "center", "0.35")
    plt.close(figure)
    figure, axis = _drawn("loss", "loss", [math.nan, 0.5, math.nan])  # one finite value
    assert list(axis.texts) == [] and len(axis.get_yticks()) > 0
    plt.close(figure)


def test_a_family_that_starts_at_0_leaves_the_step_axis_to_the_steps():
    # its value axis takes 0 in: its step axis does not (a run resumed at step 1000)
    figure, axis = _drawn("margin_violations", "margin_recall_at_1", [0.2, 0.4, 0.5, 0.6],
                          steps=[1000, 1001, 1002, 1003])  # fmt: skip
    low, high = axis.get_xlim()
    assert 999 < low < 1000 and 1003 < high < 1004
    assert axis.get_ylim()[0] < 0 < 0.6 < axis.get_ylim()[1]
    plt.close(figure)


def _title(axis):
    return " ".join(axis.get_title().split())  # as read, the title's line breaks aside


@pytest.mark.parametrize(("family", "key"), [
    ("decomposition_shape", "decomposition_cosine_mean"), ("margins", "margin_mean"),
    ("margin_violations", "margin_recall_at_1"),
    ("gradient_agreement", "gradient_agreement_cosine")])  # fmt: skip
def test_crosses_of_a_family_that_can_be_undefined_say_why_in_its_title(family, key):
    plot = PLOTS[family]
    said = f"[crosses: {plot.undefined}]"
    figure, axis = _drawn(family, key, [math.nan, 0.5, math.nan])
    assert _title(axis) == " ".join(f"{plot.title} {said}".split())
    plt.close(figure)
    figure, axis = _drawn(family, key, [0.4, 0.5, 0.6])  # no cross: the title alone
    assert _title(axis) == " ".join(plot.title.split())
    plt.close(figure)


def test_crosses_of_a_family_that_declares_no_reason_add_nothing_to_its_title():
    assert PLOTS["loss"].undefined is None  # a NaN loss is the training's fault
    figure, axis = _drawn("loss", "loss", [math.nan, 0.5, math.nan])
    assert _title(axis) == PLOTS["loss"].title
    plt.close(figure)


@pytest.mark.slow
def test_the_step_axis_reads_alike_beside_a_flat_family_and_a_moving_one():
    # flattening a family's y axis leaves its step axis as every other family's
    steps = [1_000_000 + 2 * step for step in range(6)]
    flat = _drawn("loss", "loss", [0.5, 0.5 + 1e-12] * 3, steps)[1]
    moving = _drawn("loss", "loss", [0.5, 0.6] * 3, steps)[1]
    assert flat.get_ylim()[1] - flat.get_ylim()[0] > 0.09  # the flat one was flattened

    def read(axis):
        return ([tick.get_text() for tick in axis.get_xticklabels()],
                axis.xaxis.get_offset_text().get_text())  # fmt: skip

    assert read(flat) == read(moving)
    plt.close("all")


@pytest.mark.parametrize(("logged", "gaps"), [
    # logged at 0 and 2 of 0..2: step 1 skipped, a gap
    ([0, 2], [False, True, False]),
    # logged at 0 and 3 of 0..3: half of its span's steps, a sparser schedule, one line
    ([0, 3], None),
    # logged at 0, 1 and 3 of 0..3: step 2 skipped, a gap
    ([0, 1, 3], [False, False, True, False]),
], ids=["two-of-three", "half", "three-of-four"])  # fmt: skip
def test_a_key_that_skipped_a_step_of_its_span_leaves_a_gap_there(logged, gaps):
    records = [{"step": step, "loss": 1.0} for step in range(logged[-1] + 1)]
    for record in records:
        if record["step"] in logged:
            record["embedding_grad_norm"] = float(record["step"] + 1)
    figure, axis = plt.subplots()
    draw_family(axis, "embedding_gradients", ["embedding_grad_norm"], [("run", records)])
    (line,) = axis.get_lines()
    if gaps is None:
        assert list(line.get_xdata()) == logged
    else:
        assert list(line.get_xdata()) == list(range(logged[-1] + 1))
        assert [math.isnan(value) for value in line.get_ydata()] == gaps
    plt.close(figure)


@pytest.mark.parametrize("without_loss", [0, 1], ids=["first-step", "second-step"])
def test_a_key_logged_without_another_at_one_of_its_steps_takes_no_gaps_from_it(without_loss):
    """The loss, logged with the key at every step but one, is no mate of it: the steps 3-5,
    where the loss alone was logged, were not due for the key, and its line has no gap."""
    records = [{"step": step, "loss": 1.0} for step in range(7)]
    for record in records:
        if record["step"] in (0, 1, 2, 6):
            record["embedding_grad_norm"] = float(record["step"] + 1)
    del records[without_loss]["loss"]
    figure, axis = plt.subplots()
    draw_family(axis, "embedding_gradients", ["embedding_grad_norm"], [("run", records)])
    (line,) = axis.get_lines()
    assert list(line.get_xdata()) == [0, 1, 2, 6]
    assert list(line.get_ydata()) == [1.0, 2.0, 3.0, 7.0]
    plt.close(figure)
