"""The synthetic problem of the equivalence checker: its shapes, classes, model, memory, seeding
and refusals.

Expected values come from the documented contract, not from the code: ``batch_size // 2``
classes of exactly two items; a candidate input is its query input plus noise of scale 0.3, the
two queries of a class scatter around their centre with noise of scale 0.5 (so do the inputs
behind the memory's embeddings); the model is ``input_size -> 16 -> embedding_size`` with tanh;
the memory's next enqueue slot is 1 when it has more than one slot; a seed fixes everything and
the global RNG is left alone. The noise scales are checked statistically on large batches.
"""

import re

import pytest
import torch

from gradlab.equivalence import synthetic_problem
from gradlab.errors import GradlabError

BATCH_TENSORS = ("query_inputs", "candidate_inputs", "labels", "memory", "memory_labels")


def _tensors(model, batch):
    """Every tensor a user gets back: the model's parameters, then the batch's tensors."""
    batch_tensors = [getattr(batch, name) for name in BATCH_TENSORS]
    return [p.detach() for p in model.parameters()] + [t for t in batch_tensors if t is not None]


def _call_under_global_seed(global_seed, **kwargs):
    """``synthetic_problem(**kwargs)`` with the global RNG seeded to ``global_seed`` first."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(global_seed)
        return synthetic_problem(**kwargs)


def test_defaults_are_sixteen_items_of_width_eight_embedded_in_four_dimensions_in_float64():
    model, batch = synthetic_problem()
    assert batch.query_inputs.shape == (16, 8)
    assert batch.candidate_inputs.shape == (16, 8)
    assert batch.labels.shape == (16,)
    assert batch.memory is None and batch.memory_labels is None and batch.memory_start == 0
    assert model(batch.query_inputs).shape == (16, 4)
    assert batch.query_inputs.dtype == batch.candidate_inputs.dtype == torch.float64
    assert all(p.dtype == torch.float64 for p in model.parameters())


def test_default_seed_is_zero():
    default = synthetic_problem()
    zero = synthetic_problem(seed=0)
    one = synthetic_problem(seed=1)
    assert all(torch.equal(a, b) for a, b in zip(_tensors(*default), _tensors(*zero), strict=True))
    assert not torch.equal(default[1].query_inputs, one[1].query_inputs)


@pytest.mark.parametrize("batch_size", [2, 6, 16, 64])
def test_batch_has_half_as_many_classes_of_exactly_two_items(batch_size):
    _, batch = synthetic_problem(batch_size=batch_size)
    assert batch.labels.shape == (batch_size,)
    assert not batch.labels.is_floating_point()
    assert batch.labels.bincount().tolist() == [2] * (batch_size // 2)


def test_docstring_example():
    _, batch = synthetic_problem(batch_size=6, memory_size=8)
    assert batch.labels.bincount().tolist() == [2, 2, 2]
    assert batch.memory.shape == (8, 4)


@pytest.mark.parametrize(("input_size", "embedding_size"), [(8, 4), (3, 5)])
def test_model_is_a_tanh_mlp_through_sixteen_hidden_units(input_size, embedding_size):
    model, batch = synthetic_problem(input_size=input_size, embedding_size=embedding_size)
    weight1, bias1, weight2, bias2 = (p.detach() for p in model.parameters())
    assert weight1.shape == (16, input_size) and bias1.shape == (16,)
    assert weight2.shape == (embedding_size, 16) and bias2.shape == (embedding_size,)
    x = batch.query_inputs
    expected = torch.tanh(x @ weight1.T + bias1) @ weight2.T + bias2
    torch.testing.assert_close(model(x), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_model_inputs_and_memory_are_in_the_requested_dtype(dtype):
    model, batch = synthetic_problem(batch_size=4, memory_size=3, dtype=dtype)
    assert batch.query_inputs.dtype == dtype
    assert batch.candidate_inputs.dtype == dtype
    assert batch.memory.dtype == dtype
    assert all(p.dtype == dtype for p in model.parameters())


def test_same_seed_gives_a_bit_identical_problem_whatever_the_global_rng():
    first = _call_under_global_seed(1, seed=3, memory_size=5)
    second = _call_under_global_seed(2, seed=3, memory_size=5)
    for a, b in zip(_tensors(*first), _tensors(*second), strict=True):
        assert torch.equal(a, b)
    assert first[1].memory_start == second[1].memory_start


def test_different_seeds_give_different_models_and_batches():
    model3, batch3 = synthetic_problem(batch_size=64, memory_size=32, seed=3)
    model4, batch4 = synthetic_problem(batch_size=64, memory_size=32, seed=4)
    for a, b in zip(model3.parameters(), model4.parameters(), strict=True):
        assert not torch.equal(a, b)
    for name in BATCH_TENSORS:
        assert not torch.equal(getattr(batch3, name), getattr(batch4, name)), name


def test_labels_are_shuffled():
    _, batch = synthetic_problem(batch_size=64)
    unshuffled = torch.arange(64) % 32
    assert not torch.equal(batch.labels, unshuffled)
    assert not torch.equal(batch.labels, unshuffled.sort().values)


def test_leaves_the_global_rng_state_untouched():
    before = torch.random.get_rng_state()
    synthetic_problem(memory_size=5, seed=7)
    assert torch.equal(torch.random.get_rng_state(), before)


def test_candidate_input_is_the_query_input_plus_noise_of_scale_0_3():
    _, batch = synthetic_problem(batch_size=4096)
    noise = batch.candidate_inputs - batch.query_inputs
    # Independent per item and per column: the variance across items in each column is 0.3**2.
    per_column = noise.var(dim=0)
    assert torch.allclose(per_column, torch.full_like(per_column, 0.09), rtol=0.1)
    assert noise.mean().abs() < 0.01


def test_the_two_queries_of_a_class_differ_by_noise_of_scale_0_5():
    _, batch = synthetic_problem(batch_size=4096)
    order = batch.labels.argsort(stable=True)  # the two items of each class side by side
    pairs = batch.query_inputs[order].reshape(2048, 2, 8)
    difference = pairs[:, 0] - pairs[:, 1]  # centre cancels: 0.5 * (n1 - n2), variance 0.5
    per_column = difference.var(dim=0)
    assert torch.allclose(per_column, torch.full_like(per_column, 0.5), rtol=0.1)


def test_memory_has_memory_size_constant_embeddings_with_labels_among_the_classes():
    _, batch = synthetic_problem(batch_size=10, embedding_size=4, memory_size=200)
    assert batch.memory.shape == (200, 4)
    assert batch.memory_labels.shape == (200,)
    assert not batch.memory_labels.is_floating_point()
    assert set(batch.memory_labels.tolist()) <= set(range(5))
    assert not batch.memory.requires_grad and batch.memory.grad_fn is None
    assert batch.memory.unique(dim=0).shape[0] == 200  # no two slots alike, even in one class


def _memory_inputs(model, memory):
    """Invert the model (``embedding_size == 16``: square, invertible last layer) on the memory."""
    weight1, bias1, weight2, bias2 = (p.detach() for p in model.parameters())
    hidden = torch.linalg.solve(weight2, (memory - bias2).T).T
    return torch.linalg.lstsq(weight1, (torch.atanh(hidden) - bias1).T).solution.T


def test_memory_embeds_inputs_drawn_like_the_queries_of_its_class():
    model, batch = synthetic_problem(batch_size=64, embedding_size=16, memory_size=4096)
    inputs = _memory_inputs(model, batch.memory)
    torch.testing.assert_close(model(inputs), batch.memory)  # the inversion is exact
    class_means, scatter = [], []
    for label in range(32):
        rows = inputs[batch.memory_labels == label]
        class_means.append(rows.mean(dim=0))
        scatter.append(rows.var(dim=0))
    # Around its class centre, a memory input has noise of scale 0.5 (variance 0.25).
    scatter = torch.stack(scatter)
    assert torch.allclose(
        scatter.mean(dim=0), torch.full((8,), 0.25, dtype=torch.float64), rtol=0.1
    )
    # Its class centre is the queries' one: the mean of a class's two queries is off it by
    # 0.5 * (n1 + n2) / 2 (variance 0.125), the memory's class mean by much less.
    query_means = torch.stack(
        [batch.query_inputs[batch.labels == label].mean(dim=0) for label in range(32)]
    )
    offset = torch.stack(class_means) - query_means
    assert 0.09 < offset.var() < 0.17


@pytest.mark.parametrize(("memory_size", "start"), [(0, 0), (1, 0), (2, 1), (5, 1)])
def test_next_enqueue_slot_is_one_when_the_memory_has_more_than_one_slot(memory_size, start):
    _, batch = synthetic_problem(batch_size=4, memory_size=memory_size)
    assert batch.memory_start == start
    assert batch.memory_size == memory_size


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batch_size": 0}, "batch_size must be a positive integer; got 0"),
        ({"batch_size": True}, "batch_size must be a positive integer; got True"),
        ({"batch_size": 4.0}, "batch_size must be a positive integer; got 4.0"),
        ({"batch_size": 7}, "batch_size must be even (classes of two); got 7"),
        ({"input_size": 0}, "input_size must be a positive integer; got 0"),
        ({"embedding_size": 0}, "embedding_size must be a positive integer; got 0"),
        ({"memory_size": -1}, "memory_size must be a non-negative integer; got -1"),
        ({"memory_size": True}, "memory_size must be a non-negative integer; got True"),
        ({"memory_size": 1.5}, "memory_size must be a non-negative integer; got 1.5"),
        # were torch's RuntimeError or overflow ValueError
        ({"seed": "0"}, "seed must be a whole number from 0 to 2**32 - 1; got '0'"),
        ({"seed": 1.5}, "seed must be a whole number from 0 to 2**32 - 1; got 1.5"),
        ({"seed": 2**64}, f"seed must be a whole number from 0 to 2**32 - 1; got {2**64}"),
    ],
)
def test_bad_arguments_are_refused_with_their_name_and_value(kwargs, message):
    before = torch.random.get_rng_state()
    with pytest.raises(GradlabError, match=f"^{re.escape(message)}$"):
        synthetic_problem(**kwargs)
    assert torch.equal(torch.random.get_rng_state(), before)


def test_leaves_the_accelerators_generators_alone(monkeypatch):
    # Only the CPU generator is seeded (and restored): seeding the CUDA generators, or queueing
    # a seed for them before CUDA starts, would change a user's GPU random stream.
    def refuse(*args, **kwargs):
        raise AssertionError("synthetic_problem seeded a CUDA generator")

    monkeypatch.setattr(torch.cuda, "manual_seed", refuse)
    monkeypatch.setattr(torch.cuda, "manual_seed_all", refuse)
    _, batch = synthetic_problem(batch_size=4, seed=2)
    assert batch.labels.bincount().tolist() == [2, 2]


@pytest.mark.parametrize("dtype", ["float64", torch.int64, torch.bool])
def test_a_dtype_that_is_not_a_floating_torch_dtype_is_refused(dtype):
    with pytest.raises(GradlabError, match=re.escape(f"dtype must be a floating torch dtype; got "
                                                     f"{dtype!r}")):  # fmt: skip
        synthetic_problem(dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_every_dtype_compares_the_float64_problem_rounded_to_it(dtype):
    # --dtype chooses the precision of the comparison, not another problem
    wide_model, wide = synthetic_problem(memory_size=3)
    model, batch = synthetic_problem(memory_size=3, dtype=dtype)
    assert torch.equal(batch.query_inputs, wide.query_inputs.to(dtype))
    assert torch.equal(batch.candidate_inputs, wide.candidate_inputs.to(dtype))
    assert torch.equal(batch.labels, wide.labels)
    assert torch.equal(batch.memory_labels, wide.memory_labels)
    for narrow, reference in zip(model.parameters(), wide_model.parameters(), strict=True):
        assert torch.equal(narrow, reference.to(dtype))


def test_classes_of_the_sizes_asked_in_the_seeded_order():
    batch = synthetic_problem(9, class_sizes=[2, 3, 4], seed=1)[1]
    assert batch.labels.bincount().tolist() == [2, 3, 4]
    again = synthetic_problem(9, class_sizes=[2, 3, 4], seed=1)[1]
    assert torch.equal(batch.labels, again.labels)
    assert torch.equal(batch.query_inputs, again.query_inputs)
    other = synthetic_problem(9, class_sizes=[2, 3, 4], seed=2)[1]
    assert not torch.equal(batch.labels, other.labels)  # the order is the seed's
    assert synthetic_problem(4, class_sizes=[2, 2])[1].labels.bincount().tolist() == [2, 2]


@pytest.mark.parametrize(("sizes", "message"), [
    ([2, 3], "class_sizes must add up to batch_size (6); got [2, 3], which adds up to 5"),
    ([], "class_sizes must be a non-empty list of positive whole numbers or None; got []"),
    ([3, 0, 3], "class_sizes must be a non-empty list of positive whole numbers or None; "
                "got [3, 0, 3]"),
    ([3, 3.0], "class_sizes must be a non-empty list of positive whole numbers or None; "
               "got [3, 3.0]"),
    ([True, 5], "class_sizes must be a non-empty list of positive whole numbers or None; "
                "got [True, 5]"),
    ("33", "class_sizes must be a non-empty list of positive whole numbers or None; "
           "got '33'"),
    (b"\x03\x03", "class_sizes must be a non-empty list of positive whole numbers or None; "
                  "got b'\\x03\\x03'")])  # fmt: skip (bytes hold whole numbers: 3 and 3)
def test_class_sizes_that_cannot_make_the_batch_are_refused(sizes, message):
    with pytest.raises(GradlabError) as raised:
        synthetic_problem(6, class_sizes=sizes)
    assert str(raised.value) == message
