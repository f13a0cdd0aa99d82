"""P against batch size: the batch proportions against a float64 loop, and measure()'s contract."""

import math
import statistics

import pytest
import torch

from gradlab import GradlabError
from gradlab.experiments.p_vs_batch_size import close_pair_proportions, measure, p_decomposition
from gradlab.symbolic.batch_size import SETTING_WORDS
from tests.reference.batch_proportion_loops import batch_proportions


def _reference(embeddings, labels, tau=0.01, eps=0.005):
    """Eq. 1 and the two close-pair splits by float64 loops (tests/reference)."""
    return batch_proportions(embeddings.tolist(), labels.tolist(), tau, eps)[:3]


@pytest.mark.parametrize("spread", [0.02, 0.1, 0.5])
def test_close_pair_proportions_match_the_definition(spread):
    generator = torch.Generator().manual_seed(int(spread * 100))
    labels = torch.arange(5).repeat_interleave(4)
    centre = torch.randn(1, 8, generator=generator)
    embeddings = centre + spread * torch.randn(20, 8, generator=generator)
    measured = close_pair_proportions(embeddings, labels).tolist()
    assert measured == pytest.approx(_reference(embeddings, labels), abs=1e-12)


def _parts_by_loops(embeddings, labels, tau=0.01, eps=0.005):
    """P's four parts by visiting every entry of every query's m x m matrix (tests/reference)."""
    return batch_proportions(embeddings.tolist(), labels.tolist(), tau, eps)[3:]


@pytest.mark.parametrize(
    ("spread", "classes", "per_class"), [(0.02, 5, 4), (0.1, 3, 4), (0.5, 4, 2), (0.05, 2, 3)]
)
def test_p_decomposition_matches_a_loop_over_every_entry(spread, classes, per_class):
    generator = torch.Generator().manual_seed(int(spread * 100) + classes)
    labels = torch.arange(classes).repeat_interleave(per_class)
    centre = torch.randn(1, 8, generator=generator)
    embeddings = centre + spread * torch.randn(len(labels), 8, generator=generator)
    parts = p_decomposition(embeddings, labels).tolist()
    assert parts == pytest.approx(_parts_by_loops(embeddings, labels), abs=1e-12)
    assert sum(parts) == pytest.approx(_reference(embeddings, labels)[0], abs=1e-12)  # = P


def test_p_decomposition_of_identical_embeddings_counts_the_entries_of_each_part():
    # Every entry inside: 1/m diagonal, 2(m-1)/m^2 own row and column, (k-1)(m-2)/m^2 positive
    # rows (k per class), (m-k)(m-2)/m^2 negative rows. m = 8, k = 4: 8, 14, 18, 24 of 64.
    parts = p_decomposition(torch.ones(8, 3), torch.arange(2).repeat_interleave(4)).tolist()
    assert parts == pytest.approx([8 / 64, 14 / 64, 18 / 64, 24 / 64], abs=1e-15)


def test_a_score_exactly_the_regions_width_from_the_querys_own_is_outside():
    """At |D| = w the slope equals eps, not above it: outside. tau = 0.5 and this eps make the
    width exactly 1.0, so orthogonal items (cosine 0) lie exactly at the query's own score 1
    minus w; identical items (D = 0) lie inside."""
    from gradlab.functional import operating_region_width

    tau, eps = 0.5, 0.20998717080701298
    assert operating_region_width(tau, eps) == 1.0
    embeddings = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    labels = torch.tensor([0, 0, 1, 1])
    # per query: its 4 diagonal entries, its own row and column with its twin only (2 of 16),
    # no entry of its twin's row, and in each negative's row the other negative (D = 0)
    parts = p_decomposition(embeddings, labels, tau, eps).tolist()
    assert parts == [4 / 16, 2 / 16, 0.0, 2 / 16]
    assert parts == pytest.approx(_parts_by_loops(embeddings, labels, tau, eps), abs=1e-15)


@pytest.mark.parametrize(("embeddings", "labels", "argument"), [
    (torch.ones(4), torch.arange(4), "embeddings"),
    (torch.ones(4, 2, dtype=torch.int64), torch.arange(4), "embeddings"),
    (torch.tensor([[1.0, float("nan")]] * 4), torch.arange(4), "embeddings"),
    (torch.ones(4, 2), torch.arange(3), "labels"),
    (torch.ones(4, 2), torch.zeros(4), "labels"),
])  # fmt: skip
def test_p_decomposition_refuses_bad_input_naming_the_argument(embeddings, labels, argument):
    with pytest.raises(GradlabError, match=f"^{argument} must"):
        p_decomposition(embeddings, labels)


def test_p_decomposition_builds_its_masks_on_the_embeddings_device_not_torchs_default():
    # A user who set torch's default device elsewhere (torch.set_default_device("cuda")) while
    # the embeddings live on the CPU; "meta" stands in for the other device: factory calls
    # without a device land there, and mixing them with the CPU scores fails.
    embeddings = torch.tensor([[1.0, 0.0], [1.0, 0.01], [0.0, 1.0], [0.01, 1.0]])
    labels = torch.tensor([0, 0, 1, 1])
    with torch.device("meta"):
        parts = p_decomposition(embeddings, labels)
    assert parts.device == embeddings.device
    assert parts.tolist() == pytest.approx(_parts_by_loops(embeddings, labels), abs=1e-15)


def test_identical_embeddings_put_every_pair_inside():
    values = close_pair_proportions(torch.ones(8, 3), torch.arange(2).repeat_interleave(4))
    assert values.tolist() == [1.0, 1.0, 1.0]


@pytest.fixture(scope="module")
def quick_result():
    return measure(quick=True, seeds=(0, 1, 2))


@pytest.mark.slow
def test_measure_returns_the_audited_interface(quick_result):
    result = quick_result
    assert result["per_class"] == 4 and result["seeds"] == [0, 1, 2]
    sizes = result["batch_sizes"]
    assert sizes == sorted(sizes) and sizes[0] == 16 and all(m % 4 == 0 for m in sizes)
    assert {"fixed_untrained", "fixed_trained"} <= set(result["settings"])
    parts = ("P_diagonal", "P_own_row_column", "P_positive_rows", "P_negative_rows")
    for setting in result["settings"].values():
        for key in ("P", "P_positive_negative", "P_negative_negative", *parts):
            assert len(setting[key]) == 3
            for per_seed in setting[key]:
                assert len(per_seed) == len(sizes)
                assert all(0.0 <= value <= 1.0 for value in per_seed)
        for seed in range(3):  # the four parts add up to P; the diagonal alone is 1/m
            for k, m in enumerate(sizes):
                total = sum(setting[key][seed][k] for key in parts)
                assert total == pytest.approx(setting["P"][seed][k], abs=1e-12)
                assert setting["P_diagonal"][seed][k] == pytest.approx(1 / m, abs=1e-15)


@pytest.mark.slow
def test_measure_is_deterministic_and_seeds_differ(quick_result):
    again = measure(quick=True, seeds=(1,))
    assert (
        again["settings"]["fixed_trained"]["P"][0]
        == quick_result["settings"]["fixed_trained"]["P"][1]
    )
    first, second = quick_result["settings"]["fixed_trained"]["P"][:2]
    assert first != second


@pytest.mark.parametrize(("tau", "eps"), [(0.05, 0.004), (0.002, 0.02)])
def test_the_proportions_use_the_given_tau_and_eps(tau, eps):
    generator = torch.Generator().manual_seed(11)
    labels = torch.arange(4).repeat_interleave(3)
    embeddings = torch.randn(1, 6, generator=generator) + 0.6 * torch.randn(
        12, 6, generator=generator
    )
    values = close_pair_proportions(embeddings, labels, tau, eps).tolist()
    loops = batch_proportions(embeddings.tolist(), labels.tolist(), tau, eps)
    assert values == pytest.approx(loops[:3], abs=1e-12)
    assert p_decomposition(embeddings, labels, tau, eps).tolist() == pytest.approx(
        loops[3:], abs=1e-12
    )
    defaults = batch_proportions(embeddings.tolist(), labels.tolist(), 0.01, 0.005)
    assert loops != pytest.approx(defaults, abs=1e-3)  # the settings change the numbers


def test_two_negatives_make_one_pair_each_way_and_one_makes_none():
    # m = 4, two classes of two: each query has two negatives, so two ordered negative pairs
    two = close_pair_proportions(torch.ones(4, 2), torch.tensor([0, 0, 1, 1])).tolist()
    assert two == [1.0, 1.0, 1.0]
    # two singletons: each query has one negative (no pair of two) and no other positive
    one = close_pair_proportions(torch.ones(2, 2), torch.tensor([0, 1]))
    assert one[0].item() == 1.0 and math.isnan(one[1].item()) and math.isnan(one[2].item())


def test_a_window_of_zero_width_holds_no_entry_not_even_the_diagonal():
    # the slope of the sigmoid never exceeds 1 / (4 tau) = 0.25 < eps: the window is empty
    parts = p_decomposition(torch.ones(8, 3), torch.arange(2).repeat_interleave(4), 1.0, 0.5)
    assert parts.tolist() == [0.0, 0.0, 0.0, 0.0]
    assert close_pair_proportions(torch.ones(8, 3), torch.arange(8) // 4, 1.0, 0.5).tolist() == [
        0.0,
        0.0,
        0.0,
    ]


def test_labels_of_the_wrong_shape_are_refused_under_their_name():
    with pytest.raises(GradlabError, match=r"^labels must"):
        p_decomposition(torch.ones(4, 2), torch.zeros(4, 1, dtype=torch.int64))


def test_the_summary_reads_each_settings_own_parts_and_quotes_the_measurement():
    from gradlab.experiments.p_vs_batch_size import summarize

    measurement = {"batch_sizes": [16, 64], "per_class": 4, "seeds": [0, 1, 2], "settings": {
        "fixed_trained": {"P": [[0.3, 0.4], [0.31, 0.42], [0.29, 0.41]],
                          "P_diagonal": [[1 / 16, 1 / 64]] * 3},
        "trained_at_m": {"P": [[0.5, 0.3], [0.52, 0.31], [0.49, 0.29]],
                         "P_negative_rows": [[0.2, 0.1], [0.21, 0.1], [0.19, 0.11]]}}}  # fmt: skip
    summary = summarize(measurement)
    fixed, trained = summary["settings"]["fixed_trained"], summary["settings"]["trained_at_m"]
    # every seed's P rises by about 0.1 on fixed_trained and falls by 0.2 on trained_at_m
    assert (fixed["change"], fixed["trend"]) == ("rises", "rises")
    assert (trained["change"], trained["trend"]) == ("falls", "falls")
    assert fixed["parts"] == {"P_diagonal": "falls", "P without the diagonal": "rises"}
    assert trained["parts"] == {"P_negative_rows": "falls"}
    assert set(summary["claim"]) == {"verdict", "detail", "miniature"}
    assert set(summary["claim"]["miniature"]) == {"outcome", "detail"}
    assert summary["claim"]["miniature"]["outcome"] == "not-reproduced"  # predicted: rises
    detail = summary["claim"]["detail"]
    assert "not-reproduced" in detail and SETTING_WORDS["trained_at_m"] in detail
    assert "predicted: rises" in summary["claim"]["miniature"]["detail"]


def test_the_settings_are_those_the_documentation_states():
    """measure()'s and settings()'s docstrings: quick m in 16, 64, 256, 3 batches per m, 30
    steps of the fixed trained model at m = 64, one epoch per m, 4 images per number; full m
    from 16 to 1024 (doubling), 5 batches per m, 400 steps, two epochs per m, 6 images per
    number; both 3-digit strings (1000 classes) and Adam at 1e-3."""
    from gradlab.experiments.p_vs_batch_size import settings

    quick, full = settings(quick=True), settings(quick=False)
    assert quick["batch_sizes"] == [16, 64, 256]
    assert full["batch_sizes"] == [16 * 2**k for k in range(7)]
    assert (quick["fixed_steps"], quick["epochs"], full["fixed_steps"], full["epochs"]) == (
        30, 1, 400, 2)  # fmt: skip
    for sizes in (quick, full):
        assert sizes["fixed_batch_size"] == 64 and sizes["num_digits"] == 3
        assert sizes["lr"] == 1e-3
    assert (quick["draws"], quick["images_per_number"]) == (3, 4)
    assert (full["draws"], full["images_per_number"]) == (5, 6)


@pytest.mark.parametrize("proportions", [close_pair_proportions, p_decomposition])
def test_float32_embeddings_are_scored_in_float64(proportions):
    # the docstrings: cosine scores in float64. At tau = 1e-6 the window is about 1e-6 wide,
    # where float32 scores (rounding near 6e-8 per entry, summed over 16 dimensions) move entries
    # across its edges: the float32 input must give what its float64 copy gives
    generator = torch.Generator().manual_seed(5)
    labels = torch.arange(4).repeat_interleave(4)
    embeddings = (torch.randn(1, 16, generator=generator)
                  + 0.01 * torch.randn(16, 16, generator=generator)).float()  # fmt: skip
    single = proportions(embeddings, labels, 1e-6, 0.005)
    double = proportions(embeddings.double(), labels, 1e-6, 0.005)
    assert single.dtype == torch.float64
    assert single.tolist() == double.tolist()
    # entries on both sides of the window's edges
    assert 0 < close_pair_proportions(embeddings.double(), labels, 1e-6, 0.005)[0] < 1


def _stand_in_tasks(monkeypatch, steps):
    """run_tasks stood in: it records what measure() hands it and answers each task with a
    table whose every value is the task's seed (so each seed's numbers can be told apart)."""
    from gradlab.experiments import p_vs_batch_size as study

    handed: list = []

    def run_tasks(function, tasks, **options):
        handed.append((tasks, options))
        outputs = []
        for sizes, seed, *_ in tasks:
            table = {key: [float(seed)] * len(sizes["batch_sizes"]) for key in study.KEYS}
            settings = ("fixed_untrained", "fixed_trained", "trained_at_m")
            outputs.append(({name: table for name in settings}, steps))
        return outputs

    monkeypatch.setattr(study, "run_tasks", run_tasks)
    return handed


def test_measure_hands_each_seed_its_task_with_the_defaults_of_the_docstring(monkeypatch):
    from gradlab.experiments.p_vs_batch_size import settings

    handed = _stand_in_tasks(monkeypatch, steps=[7, 3, 1])
    result = measure()
    # quick sizes, seeds 0, 1, 2, the CPU, Brown et al.'s tau = 0.01 and eps = 0.005, and the
    # workers of the enclosing block
    ((tasks, options),) = handed
    assert tasks == [(settings(quick=True), seed, "cpu", 0.01, 0.005) for seed in (0, 1, 2)]
    assert options["workers"] is None
    assert options["names"] == ["seed 0", "seed 1", "seed 2"]
    assert result["settings"]["fixed_trained"]["P"] == [[0.0] * 3, [1.0] * 3, [2.0] * 3]
    assert result["settings"]["trained_at_m"]["steps"] == [7, 3, 1]
    assert (result["tau"], result["eps"], result["seeds"]) == (0.01, 0.005, [0, 1, 2])


def test_measure_passes_its_arguments_on_and_reads_one_seeds_steps(monkeypatch):
    from gradlab.experiments.p_vs_batch_size import settings

    handed = _stand_in_tasks(monkeypatch, steps=[5, 2])
    result = measure(quick=False, seeds=(9,), device="meta", tau=0.02, eps=0.001, workers=3)
    ((tasks, options),) = handed
    assert tasks == [(settings(quick=False), 9, "meta", 0.02, 0.001)]
    assert options["workers"] == 3
    assert result["settings"]["trained_at_m"]["steps"] == [5, 2]  # one seed: its own steps
    assert result["settings"]["trained_at_m"]["P"] == [[9.0] * 7]


def test_measure_refuses_no_seeds_before_any_work(monkeypatch):
    handed = _stand_in_tasks(monkeypatch, steps=[])
    with pytest.raises(GradlabError, match=r"^seeds must name at least one seed; got none$"):
        measure(seeds=())
    assert handed == []


def test_p_pinned_at_1_in_every_seed_is_summarized_as_saturated_everywhere():
    from gradlab.experiments.p_vs_batch_size import summarize, trend_sentence

    # every seed: P 0.5 at m = 8 and exactly 1 at m = 16; the changes have zero variance
    pinned = {"batch_sizes": [8, 16], "per_class": 4, "seeds": [0, 1, 2],
              "settings": {"trained_at_m": {"P": [[0.5, 1.0]] * 3}}}  # fmt: skip
    summary = summarize(pinned)
    setting = summary["settings"]["trained_at_m"]
    assert (setting["trend"], setting["change"]) == ("saturated", "saturated")
    assert summary["claim"]["miniature"]["outcome"] == "inconclusive"
    # no t-test was run: the sentence says that the bound decided, not that a test did; from
    # the first m to the last, whatever lies between
    assert trend_sentence({"batch_sizes": [8, 12, 16], "seeds": [0, 1]}, "saturated").startswith(
        "P from m = 8 to m = 16: saturated (P lies within 0.01 of its bound")
    assert trend_sentence(pinned, setting["trend"]) == (
        "P from m = 8 to m = 16: saturated (P lies within 0.01 of its bound, 0 or 1, at every m "
        "and seed, or at its bound at one end with every seed changing alike: the bound, not a "
        "t-test, decides)"
    )


@pytest.mark.parametrize("seeds", [[0, 1], [0]])
def test_the_trend_sentence_of_one_batch_size_names_it_alone_and_reads_no_trend(seeds):
    from gradlab.experiments.p_vs_batch_size import trend_sentence

    # "P from m = 8 to m = 8: unclear" named a range of one value and a test that never ran
    measurement = {"batch_sizes": [8], "seeds": seeds}
    assert trend_sentence(measurement, "unclear") == (
        "P at m = 8 alone: no trend (a trend needs P at two or more batch sizes)")
    assert trend_sentence(measurement, "unclear", "mean P 0.26") == (
        "P at m = 8 alone: no trend (a trend needs P at two or more batch sizes; mean P 0.26)")


@pytest.mark.parametrize(("sizes", "seeds", "why"), [
    ([8, 16, 32], [0], "one seed cannot show a trend"),
    ([8, 16, 32], [0, 1], "2 seeds"),
    ([16, 64], [0, 1, 2], "3 seeds"),
])  # fmt: skip
def test_the_trend_sentence_names_the_first_and_last_m_and_what_the_run_lacked(sizes, seeds,
                                                                                why):
    from gradlab.experiments.p_vs_batch_size import trend_sentence

    measurement = {"batch_sizes": sizes, "seeds": seeds}
    assert trend_sentence(measurement, "unclear") == (
        f"P from m = {sizes[0]} to m = {sizes[-1]}: unclear (paired t-test over the seeds; {why})"
    )


def test_the_trend_sentence_appends_its_detail_inside_the_parentheses():
    from gradlab.experiments.p_vs_batch_size import trend_sentence

    measurement = {"batch_sizes": [8, 16, 32], "seeds": [0, 1]}
    assert trend_sentence(measurement, "rises", "P at its bound at m = 32") == (
        "P from m = 8 to m = 32: rises (paired t-test over the seeds; 2 seeds; P at its bound "
        "at m = 32)"
    )


@pytest.mark.parametrize(("p", "change"), [
    ([[0.30, 0.9, 0.30], [0.31, 0.9, 0.31], [0.29, 0.9, 0.29]], "rises"),  # 1/m hid a rise
    ([[0.30, 0.1, 0.20], [0.31, 0.1, 0.21], [0.29, 0.1, 0.19]], "falls"),
    ([[0.30, 0.5, 0.25], [0.40, 0.5, 0.40], [0.20, 0.5, 0.15]], "within_spread"),  # seeds apart
])  # fmt: skip
def test_the_summary_gives_p_without_each_querys_own_entry(p, change):
    from gradlab.experiments.p_vs_batch_size import summarize

    diagonal = [[1 / 16, 1 / 64, 1 / 256]] * 3  # m = 16, 64, 256: the middle one is not read
    measurement = {"batch_sizes": [16, 64, 256], "per_class": 4, "seeds": [0, 1, 2],
                   "settings": {"fixed_trained": {"P": p, "P_diagonal": diagonal}}}  # fmt: skip
    off = summarize(measurement)["settings"]["fixed_trained"]["off_diagonal"]
    first = [run[0] - 1 / 16 for run in p]
    last = [run[2] - 1 / 256 for run in p]
    assert off["first"] == pytest.approx(first) and off["last"] == pytest.approx(last)
    # the rule of P's own change: the two means apart by more than the sum of their stds
    spread = statistics.pstdev(first) + statistics.pstdev(last)
    gap = statistics.fmean(last) - statistics.fmean(first)
    expected = "within_spread" if abs(gap) <= spread else ("rises" if gap > 0 else "falls")
    assert off["change"] == expected == change
    assert off["diagonal_first"] == pytest.approx(1 / 16)
    del measurement["settings"]["fixed_trained"]["P_diagonal"]  # not measured: not given
    assert "off_diagonal" not in summarize(measurement)["settings"]["fixed_trained"]


def test_a_diagonal_of_other_seeds_than_p_is_refused_not_paired_with_the_wrong_rows():
    from gradlab.experiments.p_vs_batch_size import summarize

    measurement = {"batch_sizes": [16, 256], "per_class": 4, "seeds": [0, 1, 2],
                   "settings": {"fixed_trained": {"P": [[0.3, 0.3]] * 3,
                                                  "P_diagonal": [[1 / 16, 1 / 256]] * 2}}}
    with pytest.raises(ValueError):
        summarize(measurement)
    measurement["settings"]["fixed_trained"]["P_diagonal"] = [[1 / 16]] * 3
    with pytest.raises(ValueError):
        summarize(measurement)


def test_the_trend_says_the_numbers_of_its_t_test_as_scipy_computes_them():
    # the study printed "unclear (paired t-test over the seeds; 3 seeds)" with no t, critical
    # value, degrees of freedom or change, which the audit's detail of the same test gives
    from scipy import stats

    from gradlab.experiments.p_vs_batch_size import summarize

    per_seed = [[0.30, 0.33, 0.40], [0.35, 0.30, 0.32], [0.29, 0.36, 0.41]]
    measurement = {"batch_sizes": [8, 16, 32], "per_class": 4, "seeds": [0, 1, 2],
                   "settings": {"trained_at_m": {"P": per_seed}}}  # fmt: skip
    detail = summarize(measurement)["settings"]["trained_at_m"]["trend_detail"]
    first, last = [run[0] for run in per_seed], [run[-1] for run in per_seed]
    test = stats.ttest_rel(last, first)
    critical = stats.t.ppf(0.975, df=len(per_seed) - 1)
    change = [b - a for a, b in zip(first, last, strict=True)]
    error = stats.sem(change)
    assert detail == (
        f"mean P {sum(first) / 3:.3f} -> {sum(last) / 3:.3f}, change {sum(change) / 3:+.3f} +/- "
        f"{error:.3f} (standard error over 3 seeds), t = {test.statistic:.2f} against "
        f"{critical:.2f} (df = 2, two-sided 0.05)")
