"""What a step is checked on: the paired batch, its shards, the score matrix and the probe.

Expected values are independent of the module: refusal messages written out in full, shards laid
out by hand from the documented contiguous rank/row layout, cosine similarities from a float64
loop with explicit norms, and probe gradients of ``sum(weights * tensor)`` (whose gradient is
``weights``) placed at their global rows and columns by hand. ``GradientProbe.reduce`` runs in a
gloo group of one here; what it adds up between processes is checked by the two-process runs of
``test_distributed.py``.
"""

import math

import pytest
import torch

from gradlab.equivalence import GradientProbe, PairedBatch, cosine_scores, positive_mask
from gradlab.errors import GradlabError
from tests.helpers.refusals import wide_unsigned_refusal

INPUTS = ("query_inputs", "candidate_inputs")


def make_batch(count=4, **fields):
    """``count`` items with 3 input features each; ``fields`` replace or add arguments."""
    values = {
        "query_inputs": torch.arange(count * 3, dtype=torch.float32).reshape(count, 3),
        "candidate_inputs": -torch.arange(count * 3, dtype=torch.float32).reshape(count, 3),
        "labels": torch.arange(count) // 2,
    }
    return PairedBatch(**{**values, **fields})


def memory_fields(slots=3, width=2):
    return {
        "memory": torch.arange(slots * width, dtype=torch.float32).reshape(slots, width),
        "memory_labels": torch.arange(slots),
    }


def assert_refused(message, **fields):
    with pytest.raises(GradlabError) as error:
        make_batch(**fields)
    assert str(error.value) == message


# PairedBatch: what it accepts


def test_a_batch_without_rows_or_size_is_the_whole_batch():
    batch = make_batch(count=4)
    assert batch.rows.tolist() == [0, 1, 2, 3]
    assert batch.size == 4
    assert batch.memory_size == 0 and batch.columns == 4


def test_a_batch_of_one_item_is_accepted():
    batch = make_batch(count=1)
    assert batch.rows.tolist() == [0] and batch.size == 1 and batch.columns == 1


@pytest.mark.parametrize("ndim", [2, 3, 4, 5])
@pytest.mark.parametrize("side", INPUTS)
def test_inputs_of_two_to_five_dimensions_are_accepted(side, ndim):
    inputs = torch.zeros(4, *[2] * (ndim - 1))
    batch = make_batch(**{side: inputs})
    assert getattr(batch, side) is inputs


@pytest.mark.parametrize("side", INPUTS)
def test_integer_inputs_are_accepted(side):
    inputs = torch.ones(4, 3, dtype=torch.int64)  # token ids
    assert getattr(make_batch(**{side: inputs}), side) is inputs


def test_a_memory_adds_its_slots_after_the_batch_columns():
    batch = make_batch(count=4, **memory_fields(slots=3), memory_start=2)
    assert batch.memory_size == 3 and batch.columns == 7 and batch.memory_start == 2


@pytest.mark.parametrize("start", [0, 2])
def test_memory_start_may_be_any_slot_of_the_memory(start):
    assert make_batch(**memory_fields(slots=3), memory_start=start).memory_start == start


# PairedBatch: what it refuses, and the exact message


@pytest.mark.parametrize("side", INPUTS)
def test_inputs_that_are_not_tensors_are_refused(side):
    assert_refused(f"{side} must be a torch.Tensor; got list"
                   f"; pass torch.as_tensor({side})", **{side: [[0.0, 1.0]] * 4})


@pytest.mark.parametrize("shape", [(4,), (4, 1, 1, 1, 1, 1)])
@pytest.mark.parametrize("side", INPUTS)
def test_inputs_of_one_or_six_dimensions_are_refused(side, shape):
    assert_refused(
        f"{side} must be 2-D or 3-D or 4-D or 5-D; got shape {shape}", **{side: torch.zeros(shape)}
    )


@pytest.mark.parametrize("dtype", [torch.bool, torch.complex64])
@pytest.mark.parametrize("side", INPUTS)
def test_bool_or_complex_inputs_are_refused(side, dtype):
    assert_refused(
        f"{side} must have a real floating or integer dtype; got {dtype}",
        **{side: torch.zeros(4, 3, dtype=dtype)},
    )


def test_labels_must_be_a_one_dimensional_integer_tensor():
    assert_refused("labels must be 1-D; got shape (4, 1)"
                   "; pass labels.reshape(-1)", labels=torch.zeros(4, 1, dtype=int))
    assert_refused("labels must have an integer dtype; got torch.float32"
                   " (whole-number ids: pass labels.long())", labels=torch.zeros(4))


@pytest.mark.parametrize("side", INPUTS)
def test_inputs_need_one_row_per_label(side):
    assert_refused(
        f"{side} must hold one row per label (4); got shape (3, 3)", **{side: torch.zeros(3, 3)}
    )


def test_an_empty_batch_is_refused():
    empty = torch.zeros(0, 3)
    assert_refused(
        "labels must hold at least one item; got an empty batch",
        query_inputs=empty, candidate_inputs=empty, labels=torch.zeros(0, dtype=torch.int64),
    )  # fmt: skip


def test_a_memory_without_its_labels_is_refused():
    assert_refused(
        "memory and memory_labels go together; got memory=a tensor and memory_labels=None",
        memory=memory_fields()["memory"],
    )


def test_memory_labels_without_a_memory_are_refused():
    assert_refused(
        "memory and memory_labels go together; got memory=None and memory_labels=a tensor",
        memory_labels=memory_fields()["memory_labels"],
    )


def test_the_memory_must_be_a_two_dimensional_float_tensor():
    labels = memory_fields(slots=3)["memory_labels"]
    assert_refused(
        "memory must have a floating dtype; got torch.int64; pass memory.float()",
        memory=torch.zeros(3, 2, dtype=torch.int64), memory_labels=labels,
    )  # fmt: skip
    assert_refused(
        "memory must be 2-D; got shape (3,)", memory=torch.zeros(3), memory_labels=labels
    )


def test_memory_labels_must_be_a_one_dimensional_integer_tensor():
    memory = memory_fields(slots=3)["memory"]
    assert_refused(
        "memory_labels must have an integer dtype; got torch.float32"
        " (whole-number ids: pass memory_labels.long())",
        memory=memory, memory_labels=torch.zeros(3),
    )  # fmt: skip
    assert_refused(
        "memory_labels must be 1-D; got shape (3, 1); pass memory_labels.reshape(-1)",
        memory=memory, memory_labels=torch.zeros(3, 1, dtype=torch.int64),
    )  # fmt: skip


def test_memory_labels_need_one_label_per_memory_row():
    assert_refused(
        "memory_labels must hold one label per memory row (3); got 2",
        memory=torch.zeros(3, 5), memory_labels=torch.zeros(2, dtype=torch.int64),
    )  # fmt: skip


@pytest.mark.parametrize("start", [3, -1, True, 1.0, "1"])
def test_memory_start_outside_the_memory_or_not_an_integer_is_refused(start):
    assert_refused(
        f"memory_start must be an integer in [0, 3); got {start!r}",
        **memory_fields(slots=3), memory_start=start,
    )  # fmt: skip


@pytest.mark.parametrize("start", [1, -1, False, 0.0])
def test_without_a_memory_memory_start_can_only_be_0(start):
    assert_refused(f"memory_start must be an integer in [0, 1); got {start!r}", memory_start=start)


# PairedBatch.shard and PairedBatch.to


def test_shards_are_contiguous_equal_rows_of_the_whole_batch():
    memory = memory_fields(slots=3)
    batch = make_batch(count=6, **memory, memory_start=1)
    for rank in range(3):
        shard = batch.shard(rank, 3)
        rows = [2 * rank, 2 * rank + 1]  # rank r of 3 holds rows 2r and 2r + 1
        assert shard.rows.tolist() == rows
        assert shard.size == 6 and shard.columns == 9
        assert shard.labels.tolist() == [row // 2 for row in rows]
        features = [[3.0 * row + k for k in range(3)] for row in rows]
        assert shard.query_inputs.tolist() == features
        assert shard.candidate_inputs.tolist() == [[-value for value in item] for item in features]
        assert shard.memory is memory["memory"] and shard.memory_labels is memory["memory_labels"]
        assert shard.memory_start == 1


def test_a_shard_of_a_shard_keeps_the_global_rows():
    shard = make_batch(count=8).shard(1, 2).shard(1, 2)
    assert shard.rows.tolist() == [6, 7] and shard.size == 8


def test_a_world_of_one_is_the_whole_batch():
    shard = make_batch(count=4).shard(0, 1)
    assert shard.rows.tolist() == [0, 1, 2, 3] and shard.size == 4


@pytest.mark.parametrize("world", [0, -2, 4, True, 2.0, "2"])
def test_a_world_size_that_does_not_divide_the_batch_is_refused(world):
    with pytest.raises(GradlabError) as error:
        make_batch(count=6).shard(0, world)
    assert str(error.value) == (
        f"world_size must be a positive integer that divides the batch size 6; got {world!r}"
    )


@pytest.mark.parametrize("rank", [3, -1, True, 1.0, "1"])
def test_a_rank_outside_the_world_is_refused(rank):
    with pytest.raises(GradlabError) as error:
        make_batch(count=6).shard(rank, 3)
    assert str(error.value) == f"rank must be an integer in [0, 3); got {rank!r}"


def test_to_casts_the_floating_tensors_only():
    batch = make_batch(
        count=2, candidate_inputs=torch.ones(2, 3, dtype=torch.int64), **memory_fields()
    ).to(torch.float64)
    assert batch.query_inputs.dtype == torch.float64 and batch.memory.dtype == torch.float64
    assert batch.candidate_inputs.dtype == torch.int64
    assert batch.labels.dtype == batch.memory_labels.dtype == batch.rows.dtype == torch.int64
    assert batch.query_inputs.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]


# cosine_scores and positive_mask


def test_cosine_scores_match_a_float64_loop_with_explicit_norms():
    generator = torch.Generator().manual_seed(0)
    queries = torch.randn(3, 4, generator=generator, dtype=torch.float64)
    candidates = 5 * torch.randn(5, 4, generator=generator, dtype=torch.float64)
    expected = torch.zeros(3, 5, dtype=torch.float64)
    for q in range(3):
        for c in range(5):
            dot = sum(float(queries[q, k]) * float(candidates[c, k]) for k in range(4))
            norm_q = math.sqrt(sum(float(queries[q, k]) ** 2 for k in range(4)))
            norm_c = math.sqrt(sum(float(candidates[c, k]) ** 2 for k in range(4)))
            expected[q, c] = dot / (norm_q * norm_c)
    torch.testing.assert_close(cosine_scores(queries, candidates), expected, rtol=0, atol=1e-12)


def test_positive_mask_is_true_where_labels_are_equal():
    query_labels, candidate_labels = [2, 0, 2], [0, 2, 1, 2]
    expected = [[q == c for c in candidate_labels] for q in query_labels]
    mask = positive_mask(torch.tensor(query_labels), torch.tensor(candidate_labels))
    assert mask.dtype == torch.bool and mask.tolist() == expected


# GradientProbe: embeddings


def test_a_new_probe_has_recorded_nothing():
    probe = GradientProbe(size=3, columns=5, embedding_size=2)
    assert probe.recorded == {"queries": False, "candidates": False, "scores": False}
    assert probe.gradients["queries"].shape == probe.gradients["candidates"].shape == (3, 2)
    assert probe.gradients["scores"].shape == probe.values.shape == probe.scored.shape == (3, 5)
    assert not probe.scored.any()


@pytest.mark.parametrize("side", ["queries", "candidates"])
@pytest.mark.parametrize("index_dtype", [torch.int8, torch.int16, torch.int32, torch.int64])
def test_embedding_gradients_add_up_at_their_global_rows(side, index_dtype):
    probe = GradientProbe(size=4, columns=4, embedding_size=2)
    record = getattr(probe, side)
    first = torch.ones(2, 2, requires_grad=True)  # float32 pieces into float64 accumulators
    second = torch.ones(2, 2, requires_grad=True)
    weights_first = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    weights_second = torch.tensor([[10.0, 20.0], [30.0, 40.0]])
    out_first = record(first, torch.tensor([3, 1], dtype=index_dtype))
    out_second = record(second, torch.tensor([1, 0], dtype=index_dtype))
    assert out_first is first and out_second is second
    ((weights_first * out_first).sum() + (weights_second * out_second).sum()).backward()
    expected = torch.zeros(4, 2, dtype=torch.float64)
    expected[3] += torch.tensor([1.0, 2.0], dtype=torch.float64)
    expected[1] += torch.tensor([3.0, 4.0], dtype=torch.float64)
    expected[1] += torch.tensor([10.0, 20.0], dtype=torch.float64)
    expected[0] += torch.tensor([30.0, 40.0], dtype=torch.float64)
    torch.testing.assert_close(probe.gradients[side], expected, rtol=0, atol=0)
    assert probe.recorded[side] and not probe.recorded["scores"]


@pytest.mark.parametrize("method", ["queries", "candidates"])
def test_embeddings_of_another_width_are_refused_at_the_probe_call(method):
    # were accepted, and the backward pass then failed inside the probe's hook with torch's
    # "source tensor shape must match self tensor shape"
    probe = GradientProbe(size=2, columns=2, embedding_size=4)
    embeddings = torch.ones(2, 3, requires_grad=True)
    with pytest.raises(GradlabError) as error:
        getattr(probe, method)(embeddings, torch.tensor([0, 1]))
    assert str(error.value) == (
        f"probe.{method} must be handed embeddings of the model's width 4 (the last dimension "
        "of its output); got shape (2, 3)"
    )
    assert not any(probe.recorded.values())


@pytest.mark.parametrize("method", ["queries", "candidates", "scores"])
@pytest.mark.parametrize("how", ["no_grad", "detached", "plain"])
def test_a_tensor_without_gradient_is_refused_at_the_probe_call(method, how):
    # Its gradient could never be recorded: accepted, it would read as 0 x reference later.
    probe = GradientProbe(size=2, columns=2, embedding_size=2)
    source = torch.ones(2, 2, requires_grad=True)
    if how == "no_grad":
        with torch.no_grad():
            tensor = 2 * source
    else:
        tensor = (2 * source).detach() if how == "detached" else torch.ones(2, 2)
    arguments = [tensor, torch.tensor([0, 1])] + ([torch.tensor([0, 1])] if method == "scores"
                                                  else [])  # fmt: skip
    with pytest.raises(GradlabError) as error:
        getattr(probe, method)(*arguments)
    assert str(error.value) == (
        f"probe.{method} must be handed a tensor the loss is computed from, one that requires "
        "grad; got a tensor of shape (2, 2) with no gradient (computed under torch.no_grad(), "
        "or detached): its gradient would read as 0"
    )
    assert not any(probe.recorded.values()) and not probe.scored.any()


@pytest.mark.parametrize("side", ["queries", "candidates"])
def test_embeddings_must_be_a_float_matrix(side):
    probe = GradientProbe(size=4, columns=4, embedding_size=2)
    with pytest.raises(GradlabError) as error:
        getattr(probe, side)(torch.ones(2, 2, dtype=torch.int64), torch.tensor([0, 1]))
    assert str(error.value) == (f"{side} must have a floating dtype; got torch.int64; pass "
                                f"{side}.float()")
    with pytest.raises(GradlabError) as error:
        getattr(probe, side)(torch.ones(2), torch.tensor([0, 1]))
    assert str(error.value) == f"{side} must be 2-D; got shape (2,)"


@pytest.mark.parametrize("side", ["queries", "candidates"])
def test_embeddings_need_one_row_index_per_row(side):
    probe = GradientProbe(size=4, columns=4, embedding_size=5)
    with pytest.raises(GradlabError) as error:
        getattr(probe, side)(torch.ones(3, 5), torch.tensor([0, 1]))
    assert str(error.value) == f"rows must give one index per row of {side} (3); got 2"


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64])
def test_labels_and_indices_wider_than_a_byte_and_unsigned_are_refused(dtype):
    # the package's rule for integer tensors: torch cannot index with them, nor take their
    # min (the probe's index check ended in torch's "min_all" error)
    assert_refused(wide_unsigned_refusal("labels", dtype),
                   labels=(torch.arange(4) // 2).to(dtype))  # fmt: skip
    assert_refused(wide_unsigned_refusal("rows", dtype), rows=torch.arange(4).to(dtype), size=4)
    assert_refused(wide_unsigned_refusal("memory_labels", dtype),
                   **{**memory_fields(), "memory_labels": torch.arange(3).to(dtype)})  # fmt: skip
    probe = GradientProbe(size=4, columns=4, embedding_size=2)
    with pytest.raises(GradlabError) as error:
        probe.queries(torch.ones(2, 2, requires_grad=True), torch.tensor([3, 1]).to(dtype))
    assert str(error.value) == wide_unsigned_refusal("rows", dtype)


def test_embedding_rows_must_be_global_indices_of_the_batch():
    probe = GradientProbe(size=4, columns=4, embedding_size=2)
    with pytest.raises(GradlabError) as error:
        probe.queries(torch.ones(2, 2), torch.tensor([0, 4]))
    assert str(error.value) == "rows must hold global indices in [0, 4); got values from 0 to 4"
    assert not probe.recorded["queries"]


# GradientProbe: scores


def test_score_gradients_and_values_land_at_their_rows_and_columns():
    probe = GradientProbe(size=3, columns=4, embedding_size=2)
    block = torch.tensor([[0.5, -0.25], [0.75, 0.125]], requires_grad=True)  # float32
    out = probe.scores(block, torch.tensor([2, 0], dtype=torch.int16), torch.tensor([3, 1]))
    assert out is block
    (torch.tensor([[1.0, 2.0], [3.0, 4.0]]) * out).sum().backward()
    gradient = torch.zeros(3, 4, dtype=torch.float64)
    gradient[2, 3], gradient[2, 1], gradient[0, 3], gradient[0, 1] = 1.0, 2.0, 3.0, 4.0
    values = torch.zeros(3, 4, dtype=torch.float64)
    values[2, 3], values[2, 1], values[0, 3], values[0, 1] = 0.5, -0.25, 0.75, 0.125
    scored = torch.zeros(3, 4, dtype=torch.bool)
    scored[2, 3] = scored[2, 1] = scored[0, 3] = scored[0, 1] = True
    torch.testing.assert_close(probe.gradients["scores"], gradient, rtol=0, atol=0)
    torch.testing.assert_close(probe.values, values, rtol=0, atol=0)
    assert torch.equal(probe.scored, scored)
    assert probe.recorded == {"queries": False, "candidates": False, "scores": True}


def test_score_blocks_that_overlap_add_up_their_gradients():
    probe = GradientProbe(size=2, columns=2, embedding_size=1)
    rows, columns = torch.tensor([0, 1]), torch.tensor([0, 1])
    first = probe.scores(torch.zeros(2, 2, requires_grad=True), rows, columns)
    second = probe.scores(torch.zeros(2, 2, requires_grad=True), rows, columns)
    (first.sum() + 2 * second.sum()).backward()
    expected = torch.full((2, 2), 3.0, dtype=torch.float64)
    torch.testing.assert_close(probe.gradients["scores"], expected, rtol=0, atol=0)


def test_owned_rows_alone_count_their_scores():
    probe = GradientProbe(size=3, columns=2, embedding_size=1)
    block = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], requires_grad=True)
    everyone = torch.tensor([0, 1, 2])
    probe.scores(block, everyone, torch.tensor([1, 0]), owned_rows=torch.tensor([1]))
    (10 * block).sum().backward()
    expected_gradient = torch.zeros(3, 2, dtype=torch.float64)
    expected_gradient[1] = 10.0
    expected_values = torch.zeros(3, 2, dtype=torch.float64)
    expected_values[1, 1], expected_values[1, 0] = 3.0, 4.0
    torch.testing.assert_close(probe.gradients["scores"], expected_gradient, rtol=0, atol=0)
    torch.testing.assert_close(probe.values, expected_values, rtol=0, atol=0)
    assert probe.scored.tolist() == [[False, False], [True, True], [False, False]]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ((torch.zeros(2, 2, dtype=torch.int64), [0, 1], [0, 1], None),
         "scores must have a floating dtype; got torch.int64; pass scores.float()"),
        ((torch.zeros(2), [0, 1], [0, 1], None), "scores must be 2-D; got shape (2,)"),
        ((torch.zeros(2, 2), [0, 3], [0, 1], None),
         "rows must hold global indices in [0, 3); got values from 0 to 3"),
        ((torch.zeros(2, 2), [0, 1], [-1, 0], None),
         "columns must hold global indices in [0, 5); got values from -1 to 0"),
        ((torch.zeros(2, 2), [0, 1], [0, 1], [1, 3]),
         "owned_rows must hold global indices in [0, 3); got values from 1 to 3"),
        ((torch.zeros(2, 3), [0, 1], [0, 1], None),
         "rows and columns must index the score block of shape (2, 3); got 2 rows and 2 columns"),
    ],
)  # fmt: skip
def test_scores_refuse_a_block_they_cannot_place(arguments, message):
    probe = GradientProbe(size=3, columns=5, embedding_size=2)
    scores, rows, columns, owned = arguments
    owned = None if owned is None else torch.tensor(owned)
    with pytest.raises(GradlabError) as error:
        probe.scores(scores, torch.tensor(rows), torch.tensor(columns), owned_rows=owned)
    assert str(error.value) == message
    assert not probe.recorded["scores"]


def test_score_rows_must_be_an_integer_tensor():
    probe = GradientProbe(size=3, columns=5, embedding_size=2)
    with pytest.raises(GradlabError) as error:
        probe.scores(torch.zeros(2, 2), [0, 1], torch.tensor([0, 1]))
    assert str(error.value) == "rows must be a torch.Tensor; got list; pass torch.as_tensor(rows)"


# GradientProbe.reduce


def test_reduce_in_a_group_of_one_keeps_this_process_accumulators(group_of_one):
    probe = GradientProbe(size=2, columns=3, embedding_size=2)
    queries = probe.queries(torch.ones(2, 2, requires_grad=True), torch.tensor([1, 0]))
    block = torch.tensor([[0.5, -0.75]], requires_grad=True)
    scores = probe.scores(block, torch.tensor([1]), torch.tensor([2, 0]))
    ((torch.tensor([[1.0, 2.0], [3.0, 4.0]]) * queries).sum() + (6 * scores).sum()).backward()
    probe.reduce()
    query_gradient = torch.tensor([[3.0, 4.0], [1.0, 2.0]], dtype=torch.float64)
    score_gradient = torch.tensor([[0.0, 0.0, 0.0], [6.0, 0.0, 6.0]], dtype=torch.float64)
    values = torch.tensor([[0.0, 0.0, 0.0], [-0.75, 0.0, 0.5]], dtype=torch.float64)
    torch.testing.assert_close(probe.gradients["queries"], query_gradient, rtol=0, atol=0)
    torch.testing.assert_close(probe.gradients["scores"], score_gradient, rtol=0, atol=0)
    assert not probe.gradients["candidates"].any()
    torch.testing.assert_close(probe.values, values, rtol=0, atol=0)
    assert probe.scored.dtype == torch.bool
    assert probe.scored.tolist() == [[False, False, False], [True, False, True]]
    assert probe.recorded == {"queries": True, "candidates": False, "scores": True}
    assert all(type(flag) is bool for flag in probe.recorded.values())


# PairedBatch: a shard's place in the whole batch


def test_a_shard_may_name_any_distinct_rows_of_a_larger_batch():
    batch = make_batch(rows=torch.tensor([7, 2, 5, 0]), size=8)
    assert batch.rows.tolist() == [7, 2, 5, 0] and batch.size == 8


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"size": 3}, "size must be an int >= 4; got 3"),
        ({"size": True}, "size must be an int >= 4; got True"),
        ({"rows": torch.tensor([0, 1, 2])},
         "rows must hold 4 distinct indices in [0, 4) (one per item of the whole batch); got "
         "[0, 1, 2]"),
        ({"rows": torch.tensor([0, 1, 1, 2]), "size": 8},
         "rows must hold 4 distinct indices in [0, 8) (one per item of the whole batch); got "
         "[0, 1, 1, 2]"),
        ({"rows": torch.tensor([0, 1, 2, 8]), "size": 8},
         "rows must hold 4 distinct indices in [0, 8) (one per item of the whole batch); got "
         "[0, 1, 2, 8]"),
        ({"rows": torch.tensor([-1, 1, 2, 3]), "size": 8},
         "rows must hold 4 distinct indices in [0, 8) (one per item of the whole batch); got "
         "[-1, 1, 2, 3]"),
    ],
)  # fmt: skip
def test_rows_and_size_must_place_the_shard_in_the_whole_batch(fields, message):
    assert_refused(message, **fields)


def test_rows_must_be_an_integer_vector():
    with pytest.raises(GradlabError, match=r"^rows must"):
        make_batch(rows=torch.tensor([0.0, 1.0, 2.0, 3.0]))


@pytest.mark.gpu
def test_the_probe_records_cuda_tensors_and_indices_on_the_cpu():
    # a step on a CUDA model hands the probe CUDA embeddings, scores and (a custom step's)
    # CUDA indices; the accumulators stay on the CPU and hold what a CPU step's would
    def recorded(device):
        probe = GradientProbe(size=3, columns=3, embedding_size=2)
        generator = torch.Generator().manual_seed(4)
        embeddings = torch.randn(3, 2, generator=generator, dtype=torch.float64)
        rows = torch.tensor([2, 0, 1], device=device)
        # two leaves (on the CPU, to() would hand back the same tensor twice)
        queries = probe.queries(embeddings.clone().to(device).requires_grad_(True), rows=rows)
        candidates = probe.candidates(embeddings.clone().to(device).requires_grad_(True),
                                      rows=rows)  # fmt: skip
        scores = probe.scores(queries @ candidates.T, rows=rows, columns=rows)
        (scores * torch.arange(9.0, device=device, dtype=torch.float64).view(3, 3)).sum().backward()
        return probe

    cpu, cuda = recorded("cpu"), recorded("cuda")
    for name in ("queries", "candidates", "scores"):
        assert cuda.gradients[name].device.type == "cpu"
        torch.testing.assert_close(cuda.gradients[name], cpu.gradients[name])
    assert cuda.values.device.type == "cpu" and torch.equal(cuda.scored, cpu.scored)
    torch.testing.assert_close(cuda.values, cpu.values)
