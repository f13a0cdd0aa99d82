"""The built-in candidates by name (``gradlab.equivalence.builtin``): the step and the loss each
name builds, the verdict ``check_builtin`` reaches for it, and every bad name or option refused
with a message that names the argument, the value and what is allowed.

The expected steps are read from :data:`CANDIDATES`' descriptions and the steps' docstrings; the
expected reference losses are computed here from ``synthetic_problem`` with the loss modules'
own call forms, not through the checker. Only the one-process candidates run, except one slow
test of a two-process default.
"""

import re

import pytest
import torch
import torch.nn.functional as F

import gradlab
from gradlab.equivalence import (
    Accumulation,
    AllGather,
    CachedMNRL,
    CrossBatchMemory,
    GradCache,
    synthetic_problem,
)
from gradlab.equivalence.builtin import (
    CANDIDATES,
    LOSSES,
    builtin_candidate,
    builtin_loss,
    check_builtin,
)
from gradlab.errors import GradlabError
from gradlab.siglip_loss import SigLIPLoss
from tests.helpers.hf_models import cached_replay_in_float32

B = 16
"""``check_builtin``'s default batch size."""

CANDIDATE_NAMES = (
    "gradient-cache, accumulation, gather, gather-no-grad, local-loss, local-loss-no-grad, "
    "memory, memory-before, cached-mnrl"
)

EXPECTED_STEPS = {
    # name: (type, options), with chunk_size=3 and micro_batches=2 passed.
    "gradient-cache": (GradCache, {"chunk_size": 3}),
    "accumulation": (Accumulation, {"micro_batches": 2}),
    "gather": (AllGather, {"gradient": True, "local_loss": False, "loss_scale": None}),
    # "loss times the world size": loss_scale None is the world size for gradient=False
    "gather-no-grad": (AllGather, {"gradient": False, "local_loss": False, "loss_scale": None}),
    "local-loss": (AllGather, {"gradient": True, "local_loss": True, "loss_scale": None}),
    "local-loss-no-grad": (AllGather, {"gradient": False, "local_loss": True, "loss_scale": None}),
    "memory": (CrossBatchMemory, {"enqueue": "after"}),
    "memory-before": (CrossBatchMemory, {"enqueue": "before"}),
    # temperature 1/20: scale 20; chunk_size is its mini-batch
    "cached-mnrl": (CachedMNRL, {"scale": 20.0, "mini_batch_size": 3}),
}

EXPECTED_LOSSES = {
    "smooth-ap": gradlab.SmoothAPLoss,
    "nt-xent": gradlab.NTXentLoss,
    "max-violation": gradlab.MaxViolationTripletLoss,
    "siglip": SigLIPLoss,
}


def _nt_xent_reference_loss(seed, dtype):
    """Default NT-Xent of the whole synthetic batch, by the loss module's own call form."""
    return _whole_loss(gradlab.NTXentLoss(), B, seed, dtype)


def _whole_loss(loss_fn, batch_size, seed=0, dtype=torch.float64, class_sizes=None):
    """``loss_fn`` of the whole synthetic batch (cosine scores, positives by label)."""
    model, batch = synthetic_problem(batch_size, seed=seed, dtype=dtype, class_sizes=class_sizes)
    with torch.no_grad():
        q, c = model(batch.query_inputs), model(batch.candidate_inputs)
        scores = F.normalize(q, dim=1) @ F.normalize(c, dim=1).T
        positives = batch.labels.unsqueeze(1) == batch.labels.unsqueeze(0)
        return float(loss_fn(scores, positives))


# --- the names ------------------------------------------------------------------------------


def test_the_names_are_the_documented_ones():
    assert LOSSES == ("smooth-ap", "nt-xent", "max-violation", "siglip")
    assert ", ".join(CANDIDATES) == CANDIDATE_NAMES
    assert all(isinstance(text, str) and text for text in CANDIDATES.values())


@pytest.mark.parametrize("name", list(EXPECTED_LOSSES))
def test_each_loss_name_is_its_gradlab_loss_with_default_options(name):
    loss = builtin_loss(name)
    expected = EXPECTED_LOSSES[name]
    assert type(loss) is expected
    assert repr(loss) == repr(expected())


def test_the_documented_loss_defaults():
    assert repr(builtin_loss("nt-xent")) == (
        "NTXentLoss(temperature=0.1, direction='both', reduction='mean')"
    )
    assert repr(builtin_loss("siglip")) == "SigLIPLoss(scale=10.0, bias=-10.0, reduction='mean')"


def test_an_unknown_loss_name_is_refused_with_the_choices():
    message = "--loss must be one of smooth-ap, nt-xent, max-violation, siglip; got 'hinge'"
    with pytest.raises(GradlabError) as error:
        builtin_loss("hinge")
    assert str(error.value) == message


# --- builtin_candidate ----------------------------------------------------------------------


@pytest.mark.parametrize("name", list(EXPECTED_STEPS))
def test_each_candidate_name_is_its_step_with_its_options(name):
    loss = builtin_loss("nt-xent")
    step = builtin_candidate(name, loss, chunk_size=3, micro_batches=2)
    kind, options = EXPECTED_STEPS[name]
    assert type(step) is kind
    assert {option: getattr(step, option) for option in options} == options
    if kind is not CachedMNRL:  # cached-mnrl computes its own loss
        assert step.loss is loss


def test_every_described_candidate_has_a_step():
    assert set(CANDIDATES) == set(EXPECTED_STEPS)


def test_the_default_chunk_and_micro_batches_are_four():
    loss = builtin_loss("smooth-ap")
    assert builtin_candidate("gradient-cache", loss).chunk_size == 4
    assert builtin_candidate("cached-mnrl", loss).mini_batch_size == 4
    assert builtin_candidate("accumulation", loss).micro_batches == 4


def test_the_documented_candidate_name():
    step = builtin_candidate("local-loss", builtin_loss("nt-xent"))
    assert step.name == "AllGather(gradient=True, local_loss=True, loss_scale=None)"


def test_an_unknown_candidate_name_is_refused_with_the_choices():
    with pytest.raises(GradlabError) as error:
        builtin_candidate("banana", builtin_loss("nt-xent"))
    assert str(error.value) == f"candidate must be one of {CANDIDATE_NAMES}; got 'banana'"


BAD_CANDIDATE_OPTIONS = [
    ("gradient-cache", {"chunk_size": 0}, "chunk_size must be a positive integer; got 0"),
    ("gradient-cache", {"chunk_size": True}, "chunk_size must be a positive integer; got True"),
    ("accumulation", {"micro_batches": -1}, "micro_batches must be a positive integer; got -1"),
    ("accumulation", {"micro_batches": 2.0}, "micro_batches must be a positive integer; got 2.0"),
]  # fmt: skip


def _case_id(candidate, options):
    return "-".join([candidate, *(f"{key}={value}" for key, value in options.items())])


@pytest.mark.parametrize(
    ("name", "options", "message"),
    BAD_CANDIDATE_OPTIONS,
    ids=[_case_id(name, options) for name, options, _ in BAD_CANDIDATE_OPTIONS],
)
def test_a_bad_candidate_option_is_refused_by_name(name, options, message):
    with pytest.raises(GradlabError) as error:
        builtin_candidate(name, builtin_loss("nt-xent"), **options)
    assert str(error.value) == message


# --- check_builtin: verdicts ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("candidate", "step_name", "equivalent"),
    [
        ("gradient-cache", "GradCache(chunk_size=4)", True),
        ("accumulation", "Accumulation(micro_batches=4)", False),  # lost negatives
        ("memory", "CrossBatchMemory(enqueue='after')", True),
        ("memory-before", "CrossBatchMemory(enqueue='before')", False),
    ],
)
def test_one_process_candidates_with_the_defaults(candidate, step_name, equivalent):
    result = check_builtin(candidate)
    assert result.equivalent is equivalent
    assert result.candidate == step_name
    assert result.reference == "FullBatch()"
    assert result.loss == "NTXentLoss"  # the default loss
    assert result.world_size == 1
    assert result.dtype == "float64"


def test_accumulation_loses_the_negatives_of_the_other_micro_batches():
    # B = 16 in 4 micro-batches of 4: each query scores its 4 candidates, 12 never.
    result = check_builtin("accumulation")
    scores = result["dL/dscores"]
    assert scores.unscored == B * B - 4 * 4 * 4
    # 16 candidates less the query's 2 positives (classes of two), whole batch
    assert scores.negatives_with_gradient["reference"] == B - 2
    assert scores.negatives_with_gradient["candidate"] < B - 2


def test_the_batch_size_and_micro_batches_reach_the_problem_and_the_step():
    # B = 8 in 2 micro-batches of 4: 2 x 4 x 4 of the 8 x 8 scores are computed.
    result = check_builtin("accumulation", "max-violation", batch_size=8, micro_batches=2)
    assert result.candidate == "Accumulation(micro_batches=2)"
    assert result.loss == "MaxViolationTripletLoss"
    assert result["dL/dscores"].unscored == 8 * 8 - 2 * 4 * 4


def test_the_memory_holds_twice_the_batch():
    # Columns: the B candidates and a memory of 2B = 32; every memory entry belongs to one of
    # the 8 classes of two queries, so a query has 2 + 2 * 32 / 16 = 6 positives on average.
    result = check_builtin("memory")
    assert result["dL/dscores"].negatives_with_gradient["reference"] == B + 2 * B - 6


def test_the_chunk_size_reaches_gradient_caching():
    result = check_builtin("gradient-cache", "siglip", chunk_size=5)
    assert result.equivalent
    assert result.candidate == "GradCache(chunk_size=5)"
    assert result.loss == "SigLIPLoss"


@pytest.mark.parametrize("seed", [0, 3])
def test_the_seed_picks_the_model_and_the_batch(seed):
    expected = _nt_xent_reference_loss(seed, torch.float64)
    result = check_builtin("gradient-cache", seed=seed)
    assert result.reference_loss == pytest.approx(expected, rel=1e-12, abs=0)


def test_the_default_seed_is_zero():
    expected = _nt_xent_reference_loss(0, torch.float64)
    assert check_builtin("gradient-cache").reference_loss == pytest.approx(expected, rel=1e-12)
    assert expected != pytest.approx(_nt_xent_reference_loss(1, torch.float64), rel=1e-6)


@pytest.mark.parametrize("sizes", [[2, 3, 4], [1, 3, 5]], ids=["three sizes", "a singleton"])
def test_the_class_sizes_reach_the_problem(sizes):
    # a class of one item is a class too: its item has no positive but itself
    result = check_builtin("gradient-cache", batch_size=9, class_sizes=sizes)
    expected = _whole_loss(gradlab.NTXentLoss(), 9, class_sizes=sizes)
    assert result.reference_loss == pytest.approx(expected, rel=1e-12)
    assert (result.equivalent, result.class_size) == (True, None)  # classes of three sizes
    assert check_builtin("gradient-cache").class_size == 2  # the default: classes of two


@pytest.mark.parametrize(("options", "message"), [
    ({"class_sizes": 16}, "--class-sizes must be positive whole numbers separated by commas, "
     "e.g. 2,3,4,7; got 16"),
    ({"class_sizes": [8, 8.0]}, "--class-sizes must be positive whole numbers separated by "
     "commas, e.g. 2,3,4,7; got 8,8.0"),
    ({"class_sizes": [8, 8], "batch_size": 8}, "--class-sizes must add up to --batch-size 8; "
     "got 8,8, which adds up to 16"),
])  # fmt: skip
def test_bad_class_sizes_are_refused_by_the_option_name(options, message):
    with pytest.raises(GradlabError) as raised:
        check_builtin("gather", **options)
    assert str(raised.value) == message


def test_the_dtype_is_the_problems_and_the_comparisons():
    result = check_builtin("gradient-cache", dtype=torch.float32)
    assert result.dtype == "float32"
    assert (result.atol, result.rtol) == (1e-5, 1e-4)  # float32's tolerance
    expected = _nt_xent_reference_loss(0, torch.float32)
    assert result.reference_loss == pytest.approx(expected, rel=1e-6, abs=0)


@pytest.mark.parametrize(
    ("candidate", "options", "message"),
    [
        ("cached-mnrl", {"loss": "smooth-ap"}, "--loss does not apply to cached-mnrl, which "
         "computes its own loss (NT-Xent, temperature 1/20, rows as queries); got --loss "
         "smooth-ap"),
        ("gradient-cache", {"micro_batches": 3}, "--micro-batches does not apply to "
         "gradient-cache (read only by accumulation); got --micro-batches 3"),
        ("accumulation", {"chunk_size": 2}, "--chunk-size does not apply to accumulation (read "
         "only by gradient-cache and cached-mnrl); got --chunk-size 2"),
        # given, even at its default value: the candidate would not read it
        ("gather", {"micro_batches": 4}, "--micro-batches does not apply to gather"),
    ],
)
def test_an_option_the_candidate_does_not_read_is_refused(candidate, options, message):
    with pytest.raises(GradlabError, match="^" + re.escape(message)):
        check_builtin(candidate, **options)


@pytest.mark.parametrize(
    ("candidate", "options", "message"),
    [*((name, {"processes": 1}, f"--processes 1 leaves {name} nothing to gather: the check "
       "would compare the whole batch with itself and could not fail; pass at least 2")
       for name in ("gather", "gather-no-grad", "local-loss", "local-loss-no-grad")),
     ("accumulation", {"micro_batches": 1}, "--micro-batches 1 leaves accumulation one "
      "micro-batch, the whole batch: the check would compare it with itself and could not "
      "fail; pass at least 2")],
)
def test_an_option_that_leaves_the_trick_nothing_to_do_is_refused(candidate, options, message):
    # each passed as EQUIVALENT: the whole batch compared with itself
    with pytest.raises(GradlabError) as raised:
        check_builtin(candidate, **options)
    assert str(raised.value) == message


def test_one_micro_batch_per_process_of_several_is_still_checked():
    # two processes, each its own loss: the trick is there (and loses negatives)
    result = check_builtin("accumulation", processes=2, micro_batches=1, batch_size=8)
    assert not result.equivalent


def test_the_candidate_name_is_checked_before_its_options():
    with pytest.raises(GradlabError, match=r"^candidate must be one of gradient-cache, "):
        check_builtin("gradient-caches", micro_batches=3)


@pytest.mark.parametrize(
    ("candidate", "options", "name"),
    [("gradient-cache", {"loss": "max-violation", "chunk_size": 3}, "GradCache(chunk_size=3)"),
     ("accumulation", {"loss": "siglip", "micro_batches": 2}, "Accumulation(micro_batches=2)")],
)
def test_the_options_a_candidate_reads_are_taken(candidate, options, name):
    result = check_builtin(candidate, **options, batch_size=8)
    assert result.candidate == name
    expected = _whole_loss(EXPECTED_LOSSES[options["loss"]](), 8)
    assert result.reference_loss == pytest.approx(expected, rel=1e-12)


def test_cached_mnrl_is_checked_against_its_own_loss():
    pytest.importorskip("sentence_transformers")
    # Its own loss: NT-Xent, temperature 1/20, rows as queries, every item its own class.
    result = check_builtin("cached-mnrl", chunk_size=3)
    # sentence-transformers 5.7 to 6.1 replay in float32: the float64 check tells them apart
    assert result.equivalent is not cached_replay_in_float32(), str(result)
    assert result.candidate == "CachedMNRL(scale=20.0, mini_batch_size=3)"
    assert result["dL/dtheta"].recorded
    model, batch = synthetic_problem(B)
    with torch.no_grad():
        q, c = model(batch.query_inputs), model(batch.candidate_inputs)
        scores = F.normalize(q, dim=1) @ F.normalize(c, dim=1).T
    expected = float(F.cross_entropy(20.0 * scores, torch.arange(B)))
    assert result.reference_loss == pytest.approx(expected, rel=1e-12)
    # --class-sizes does not apply, so the result suggests none: it says why instead
    assert result.fixed_classes == ("cached-mnrl's loss takes the pair's own item as the only "
                                    "positive")  # fmt: skip


@pytest.mark.slow
def test_gather_without_gradient_runs_in_two_processes_and_is_equivalent():
    # Own rows live, the loss times the world size: the whole-batch gradient, 2 processes.
    result = check_builtin("gather-no-grad", timeout=60)
    assert result.equivalent, str(result)
    assert result.world_size == 2
    assert result.candidate == "AllGather(gradient=False, local_loss=False, loss_scale=None)"


@pytest.mark.slow
def test_the_timeout_reaches_the_distributed_run():
    # Starting two gloo processes takes far longer than 10 ms: the run is stopped.
    with pytest.raises(TimeoutError):
        check_builtin("gather", timeout=0.01)


# --- check_builtin: bad options -------------------------------------------------------------


BAD_OPTIONS = [
    ("gather", {"loss": "hinge"},
        "--loss must be one of smooth-ap, nt-xent, max-violation, siglip; got 'hinge'"),
    ("banana", {}, f"candidate must be one of {CANDIDATE_NAMES}; got 'banana'"),
    ("gather", {"processes": 0}, "--processes must be a positive integer; got 0"),
    ("gradient-cache", {"chunk_size": 0}, "--chunk-size must be a positive integer; got 0"),
    ("accumulation", {"micro_batches": 0},
        "--micro-batches must be a positive integer; got 0"),
    ("gradient-cache", {"batch_size": 0}, "--batch-size must be a positive integer; got 0"),
    ("gradient-cache", {"batch_size": 7}, "--batch-size must be even (classes of two); got 7"),
    ("gradient-cache", {"seed": -1}, "--seed must be a whole number from 0 to 2**32 - 1; got -1"),
    ("gradient-cache", {"seed": True},
     "--seed must be a whole number from 0 to 2**32 - 1; got True"),
    ("gradient-cache", {"seed": 1.5}, "--seed must be a whole number from 0 to 2**32 - 1; got 1.5"),
    ("memory", {"processes": 2},
        "--processes must be 1 for memory (the memory is one process's); got 2"),
    ("memory-before", {"processes": 4},
        "--processes must be 1 for memory-before (the memory is one process's); got 4"),
    ("gather", {"processes": 3}, "--processes must divide --batch-size 16; got 3"),
    ("gradient-cache", {"timeout": 0}, "timeout must be a positive finite number; got 0"),
    ("gradient-cache", {"dtype": "float64"},
        "dtype must be a floating torch dtype; got 'float64'"),
    ("gradient-cache", {"dtype": torch.int64},
        "dtype must be a floating torch dtype; got torch.int64"),
    # were the steps' own messages, with their Python names (micro_batches, world_size)
    ("accumulation", {"micro_batches": 3},
        "--micro-batches must divide the batch size per process (16); got 3"),
    ("accumulation", {"micro_batches": 16, "processes": 2},
        "--micro-batches must divide the batch size per process (8); got 16"),
    ("cached-mnrl", {"processes": 2}, "--processes must be 1 for cached-mnrl "
        "(sentence-transformers' loss runs in one process here); got 2"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("candidate", "options", "message"),
    BAD_OPTIONS,
    ids=[_case_id(candidate, options) for candidate, options, _ in BAD_OPTIONS],
)
def test_check_builtin_refuses_a_bad_name_or_option(candidate, options, message):
    with pytest.raises(GradlabError) as error:
        check_builtin(candidate, **options)
    assert str(error.value) == message


B_LARGE = 2**15
"""A batch whose check needs tens of GiB (so that the message's GiB are not 0.0)."""


@pytest.mark.parametrize(
    ("candidate", "options", "matrices", "shape"),
    [
        # one process: 8 [B, B] float64 matrices, 8 bytes an entry (B = 2^15: 64 GiB)
        ("gradient-cache", {}, 8, (B_LARGE, B_LARGE)),
        # the memory's 2B more columns; float32 too needs 8 bytes an entry: the comparison's
        # float64 copies (a new user's float32 check at B = 20000 passed at 4 bytes, with
        # 22 GiB free, and was killed for memory)
        ("memory", {"dtype": torch.float32}, 8, (B_LARGE, 3 * B_LARGE)),
        # the reference here (8), the whole loss again in each of the candidate's processes
        # (7 each: measured 7.1), and 5 in each process of a local loss (measured 5.1)
        ("gather", {}, 8 + 2 * 7, (B_LARGE, B_LARGE)),
        ("gather", {"processes": 4}, 8 + 4 * 7, (B_LARGE, B_LARGE)),
        ("local-loss", {}, 8 + 2 * 5, (B_LARGE, B_LARGE)),
        ("accumulation", {"processes": 2}, 8 + 2 * 5, (B_LARGE, B_LARGE)),
    ],
)
def test_a_check_that_cannot_fit_is_refused_before_any_work(
    monkeypatch, candidate, options, matrices, shape
):
    need = matrices * shape[0] * shape[1] * 8
    built = []
    monkeypatch.setattr("gradlab.equivalence.builtin.synthetic_problem",
                        lambda *args, **kwargs: built.append(args))  # fmt: skip
    monkeypatch.setattr("gradlab.memory.available_bytes", lambda device: need - 1)
    with pytest.raises(GradlabError) as caught:
        check_builtin(candidate, batch_size=B_LARGE, **options)
    assert str(caught.value) == (
        f"--batch-size {B_LARGE}: checking {candidate} needs about {need / 2**30:.1f} GiB "
        f"({matrices} [{shape[0]}, {shape[1]}] float64 matrices, in float32 too: the "
        f"comparison is made in float64), more than the {(need - 1) / 2**30:.1f} GiB "
        "available; try a smaller --batch-size"
    )
    assert built == []  # nothing built
    # exactly enough, or a machine that does not say: the check runs
    for free in (need, None):
        monkeypatch.setattr("gradlab.memory.available_bytes",
                            lambda device, free=free: free)  # fmt: skip
        with pytest.raises(TypeError):  # the stand-in problem: past the memory check
            check_builtin(candidate, batch_size=B_LARGE, **options)


@pytest.mark.parametrize(("options", "says"), [
    ({"gradient": False, "local_loss": True}, "receives gradient only from its own process"),
    ({"gradient": True, "local_loss": True}, "holds as many of them"),
    ({"gradient": False, "loss_scale": 1.0}, "loss_scale=1.0 given by hand"),
    # a factor by hand is named before a local mean: it was blamed on the mean's terms
    ({"gradient": True, "local_loss": True, "loss_scale": 3.0}, "loss_scale=3.0 given by hand"),
    ({"gradient": True}, None),
    ({"gradient": False}, None),
])  # fmt: skip
def test_each_gathered_variant_says_what_can_make_it_differ(options, says):
    cause = AllGather(gradlab.MaxViolationTripletLoss(), **options).known_difference
    assert cause is None if says is None else says in cause


def test_a_local_loss_summed_has_no_mean_to_blame():
    loss = gradlab.NTXentLoss(reduction="sum")
    assert AllGather(loss, gradient=True, local_loss=True).known_difference is None


@pytest.mark.slow
def test_a_local_mean_over_unevenly_split_pairs_says_why_it_differs():
    # Classes 2, 3, 4, 7 split between two processes of 8 rows: the first holds 17 positive
    # pairs (1 + 1 + 2 + 2 + 2 + 3 + 3 + 3), the second 45 (3 + 7 x 6), so max-violation's
    # mean over pairs differs; each holds 8 queries with a positive, so NT-Xent's agrees.
    labels = torch.repeat_interleave(torch.arange(4), torch.tensor([2, 3, 4, 7]))
    same = labels[:, None] == labels[None, :]
    pairs = [int((same[rows].sum(1) - 1).sum()) for rows in (range(8), range(8, 16))]
    assert pairs == [17, 45]
    result = check_builtin("local-loss", loss="max-violation", class_sizes=[2, 3, 4, 7])
    assert not result.equivalent
    assert result.cause == AllGather(gradlab.MaxViolationTripletLoss(), gradient=True,
                                     local_loss=True).known_difference  # fmt: skip
    assert str(result).splitlines()[-1].endswith(f"; {result.cause})")
    even = check_builtin("local-loss", loss="nt-xent", class_sizes=[2, 3, 4, 7])
    assert even.equivalent and even.cause is None


@pytest.mark.slow
def test_a_local_summed_loss_reports_the_sum_of_the_processes_losses():
    # each process holds its part of the sum; the average read as half the whole-batch loss,
    # and a NOT EQUIVALENT verdict blamed "another objective" on it
    from gradlab.equivalence import FullBatch, compare_gradients, synthetic_problem

    loss = gradlab.NTXentLoss(temperature=0.5, reduction="sum")
    model, batch = synthetic_problem(16)
    assert AllGather(loss, local_loss=True).process_losses_add_up
    assert not AllGather(gradlab.NTXentLoss(temperature=0.5), local_loss=True).process_losses_add_up
    good = compare_gradients(FullBatch(loss), AllGather(loss, local_loss=True), model, batch,
                             world_size=2)  # fmt: skip
    assert good.equivalent
    assert good.candidate_loss == pytest.approx(good.reference_loss, rel=1e-12)
    lost = compare_gradients(FullBatch(loss), AllGather(loss, gradient=False, local_loss=True),
                             model, batch, world_size=2)  # fmt: skip
    assert not lost.equivalent and "the losses differ" not in str(lost)
