"""The built-in steps of ``gradlab.equivalence.steps`` in one process, by their public behaviour.

Values are checked against float64 references built here by hand, not through the steps'
machinery: the loss recomputed by a loop over the queries of the synthetic problem (cosines by
explicit norms, the softmax by hand) on the batch's candidates and the memory's entries (the
memory enqueued before the loss by a loop over the ring buffer's next slots), its ``dL/dtheta``
by ``torch.autograd``. Refusals are checked with their whole message.
"""

import copy
import re
from dataclasses import replace

import pytest
import torch

from gradlab.equivalence import GradientProbe, compare_gradients, run_step, synthetic_problem
from gradlab.equivalence.steps import (
    Accumulation,
    AllGather,
    CrossBatchMemory,
    FullBatch,
    rank_of_rows,
)
from gradlab.errors import GradlabError

B = 8
M = 10
TEMPERATURE = 0.5
TIGHT = 1e-12


def soft_positives_loss(scores: torch.Tensor, positives: torch.Tensor) -> torch.Tensor:
    """The loss the steps run: mean over queries of minus the mean log-softmax of positives."""
    log_p = torch.log_softmax(scores / TEMPERATURE, dim=1)
    return -((log_p * positives).sum(dim=1) / positives.sum(dim=1)).mean()


def hand_loss(queries, pool, query_labels, pool_labels) -> torch.Tensor:
    """The same loss by a loop over the queries, independent of the steps' scoring."""
    terms = []
    for i in range(queries.shape[0]):
        q = queries[i]
        cosines = torch.stack([q @ p / (q.norm() * p.norm()) for p in pool]) / TEMPERATURE
        log_softmax = cosines - torch.log(torch.exp(cosines).sum())
        terms.append(-log_softmax[pool_labels == query_labels[i]].mean())
    return torch.stack(terms).mean()


def hand_cosines(queries, pool) -> torch.Tensor:
    return torch.tensor([[float(q @ p / (q.norm() * p.norm())) for p in pool] for q in queries],
                        dtype=torch.float64)  # fmt: skip


def enqueued(batch, candidates):
    """The memory and its labels after writing the batch's candidates (as constants) into the
    ring buffer's next slots, from ``batch.memory_start`` on, by a loop."""
    memory, labels = batch.memory.clone(), batch.memory_labels.clone()
    for i in range(batch.labels.shape[0]):
        slot = (batch.memory_start + i) % batch.memory_size
        memory[slot] = candidates[i].detach()
        labels[slot] = batch.labels[i]
    return memory, labels


def memory_problem(memory_size=M, memory_start=1):
    model, batch = synthetic_problem(batch_size=B, memory_size=memory_size, seed=4)
    return model, replace(batch, memory_start=memory_start)


def expect(step, model, batch, reference):
    """``run_step``'s loss and ``dL/dtheta`` equal ``reference(model)``'s, by autograd."""
    grads = run_step(step, model, batch)
    value = reference(model)
    expected = torch.autograd.grad(value, list(model.parameters()))
    assert grads.loss == pytest.approx(float(value.detach()), abs=TIGHT, rel=0)
    for (name, mine), theirs in zip(grads.parameters.items(), expected, strict=True):
        assert torch.allclose(mine, theirs, atol=TIGHT, rtol=0), name
    return grads


def whole_loss_with_memory(batch, memory=None):
    """The reference: every query against the batch's candidates, then the memory's entries;
    ``memory(candidates)``, if given, returns the memory and its labels to score instead."""

    def reference(model):
        queries, candidates = model(batch.query_inputs), model(batch.candidate_inputs)
        pool_memory, pool_labels = batch.memory, batch.memory_labels
        if memory is not None:
            pool_memory, pool_labels = memory(candidates)
        pool = torch.cat((candidates, pool_memory))
        return hand_loss(queries, pool, batch.labels, torch.cat((batch.labels, pool_labels)))

    return reference


def in_other_dtype(model, batch):
    """A float32 model and inputs with the float64 memory left as it is."""
    return copy.deepcopy(model).to(torch.float32), replace(
        batch, query_inputs=batch.query_inputs.float(),
        candidate_inputs=batch.candidate_inputs.float(),
    )  # fmt: skip


# --- FullBatch --------------------------------------------------------------------------------


def test_full_batch_scores_the_memory_as_constants_after_the_candidates():
    model, batch = memory_problem()
    grads = expect(FullBatch(soft_positives_loss), model, batch, whole_loss_with_memory(batch))
    assert grads.scored.shape == (B, B + M) and bool(grads.scored.all())
    with torch.no_grad():
        queries = model(batch.query_inputs)
    assert torch.allclose(grads.score_values[:, B:], hand_cosines(queries, batch.memory),
                          atol=TIGHT, rtol=0)  # fmt: skip


def test_full_batch_casts_a_memory_of_another_dtype_to_the_models():
    model, batch = memory_problem()
    model32, batch32 = in_other_dtype(model, batch)
    probe = GradientProbe(B, batch.columns, 4, dtype=torch.float32)
    loss = FullBatch(soft_positives_loss)(model32, batch32, probe)
    assert loss.dtype == torch.float32
    with torch.no_grad():
        expected = whole_loss_with_memory(batch)(model)
    assert float(loss) == pytest.approx(float(expected), abs=1e-5)


# --- Accumulation -----------------------------------------------------------------------------


def micro_batch_losses(batch, k):
    """Sum over the ``k`` consecutive micro-batches of each one's loss (its own candidates,
    then the memory, if any) divided by ``k``."""

    def reference(model):
        total = torch.zeros((), dtype=torch.float64)
        for start in range(0, B, B // k):
            part = slice(start, start + B // k)
            queries = model(batch.query_inputs[part])
            pool, labels = model(batch.candidate_inputs[part]), batch.labels[part]
            pool_labels = labels
            if batch.memory is not None:
                pool = torch.cat((pool, batch.memory))
                pool_labels = torch.cat((labels, batch.memory_labels))
            total = total + hand_loss(queries, pool, labels, pool_labels) / k
        return total

    return reference


@pytest.mark.parametrize("k", [1, 2, 4])
def test_accumulation_returns_the_sum_of_the_scaled_micro_batch_losses(k):
    model, batch = synthetic_problem(batch_size=B, seed=4)
    expect(Accumulation(soft_positives_loss, k), model, batch, micro_batch_losses(batch, k))


def test_accumulation_scores_each_micro_batch_against_the_memory_after_the_whole_batch():
    model, batch = memory_problem()
    grads = expect(Accumulation(soft_positives_loss, 2), model, batch,
                   micro_batch_losses(batch, 2))  # fmt: skip
    blocks = torch.block_diag(*[torch.ones(B // 2, B // 2)] * 2).bool()
    expected = torch.cat((blocks, torch.ones(B, M, dtype=torch.bool)), dim=1)
    assert torch.equal(grads.scored, expected)  # the memory in columns B.., as in the batch
    with torch.no_grad():
        queries = model(batch.query_inputs)
    assert torch.allclose(grads.score_values[:, B:], hand_cosines(queries, batch.memory),
                          atol=TIGHT, rtol=0)  # fmt: skip


# --- AllGather --------------------------------------------------------------------------------


@pytest.mark.parametrize("scale", [0.5, 2, 3.0])
def test_a_positive_loss_scale_multiplies_the_gradient_but_not_the_returned_loss(scale):
    model, batch = synthetic_problem(batch_size=B, seed=4)
    step = AllGather(soft_positives_loss, loss_scale=scale)
    assert step.name == f"AllGather(gradient=True, local_loss=False, loss_scale={scale!r})"
    reference = run_step(FullBatch(soft_positives_loss), model, batch)
    grads = run_step(step, model, batch)
    assert grads.loss == pytest.approx(reference.loss, abs=TIGHT, rel=0)
    for name, value in reference.parameters.items():
        assert torch.allclose(grads.parameters[name], scale * value, atol=TIGHT, rtol=0), name


@pytest.mark.parametrize("scale", [True, False, 0, 0.0, -1.0, float("inf"), float("nan"), "2"])
def test_a_loss_scale_that_is_not_a_positive_finite_number_is_refused(scale):
    with pytest.raises(GradlabError) as caught:
        AllGather(soft_positives_loss, loss_scale=scale)
    assert str(caught.value) == (
        f"loss_scale must be None or a positive finite number; got {scale!r}"
    )


@pytest.mark.parametrize("option", ["gradient", "local_loss"])
def test_gradient_and_local_loss_must_be_bools(option):
    with pytest.raises(GradlabError) as caught:
        AllGather(soft_positives_loss, **{option: 1})
    assert str(caught.value) == f"{option} must be True or False; got 1"


def test_all_gather_refuses_a_batch_with_a_memory():
    model, batch = memory_problem()
    with pytest.raises(GradlabError) as caught:
        compare_gradients(FullBatch(soft_positives_loss), AllGather(soft_positives_loss),
                          model, batch)  # fmt: skip
    assert str(caught.value) == (
        "AllGather(gradient=True, local_loss=False, loss_scale=None) scores the batch only; got a "
        f"batch with a memory of {M} entries (that is for CrossBatchMemory)"
    )


# --- CrossBatchMemory -------------------------------------------------------------------------


def test_memory_enqueued_after_the_loss_scores_the_memory_as_it_was():
    model, batch = memory_problem()
    expect(CrossBatchMemory(soft_positives_loss, "after"), model, batch,
           whole_loss_with_memory(batch))  # fmt: skip


@pytest.mark.parametrize("start", [1, 6])  # 6: the batch wraps round the ring buffer
def test_memory_enqueued_before_the_loss_scores_constant_copies_in_the_next_slots(start):
    model, batch = memory_problem(memory_start=start)
    reference = whole_loss_with_memory(batch, memory=lambda c: enqueued(batch, c))
    grads = expect(CrossBatchMemory(soft_positives_loss, "before"), model, batch, reference)
    with torch.no_grad():
        queries, candidates = model(batch.query_inputs), model(batch.candidate_inputs)
        memory, _ = enqueued(batch, candidates)
    assert torch.allclose(grads.score_values[:, B:], hand_cosines(queries, memory),
                          atol=TIGHT, rtol=0)  # fmt: skip


@pytest.mark.parametrize("enqueue", ["after", "before"])
def test_memory_of_another_dtype_than_the_model_is_enqueued_and_scored(enqueue):
    model, batch = memory_problem()
    model32, batch32 = in_other_dtype(model, batch)
    probe = GradientProbe(B, batch.columns, 4, dtype=torch.float32)
    loss = CrossBatchMemory(soft_positives_loss, enqueue)(model32, batch32, probe)
    assert loss.dtype == torch.float32
    memory = (lambda c: enqueued(batch, c)) if enqueue == "before" else None
    with torch.no_grad():
        expected = whole_loss_with_memory(batch, memory=memory)(model)
    assert float(loss) == pytest.approx(float(expected), abs=1e-5)


@pytest.mark.parametrize("enqueue", ["after", "before"])
def test_a_step_leaves_the_batch_memory_as_it_was_given(enqueue):
    model, batch = memory_problem(memory_start=6)
    memory, labels = batch.memory.clone(), batch.memory_labels.clone()
    run_step(CrossBatchMemory(soft_positives_loss, enqueue), model, batch)
    assert torch.equal(batch.memory, memory) and torch.equal(batch.memory_labels, labels)


def test_a_memory_as_large_as_the_batch_is_enough():
    model, batch = memory_problem(memory_size=B)
    result = compare_gradients(FullBatch(soft_positives_loss),
                               CrossBatchMemory(soft_positives_loss), model, batch)  # fmt: skip
    assert result.equivalent


def test_cross_batch_memory_refuses_a_batch_without_a_memory():
    model, batch = synthetic_problem(batch_size=B, seed=4)
    with pytest.raises(GradlabError) as caught:
        compare_gradients(FullBatch(soft_positives_loss), CrossBatchMemory(soft_positives_loss),
                          model, batch)  # fmt: skip
    assert str(caught.value) == (
        "CrossBatchMemory needs a batch with a memory (memory=, memory_labels=); got a batch "
        "without one"
    )


def test_cross_batch_memory_refuses_a_memory_smaller_than_the_batch():
    model, batch = memory_problem(memory_size=B - 1)
    with pytest.raises(GradlabError) as caught:
        compare_gradients(FullBatch(soft_positives_loss), CrossBatchMemory(soft_positives_loss),
                          model, batch)  # fmt: skip
    assert str(caught.value) == f"the memory must hold at least the batch ({B} items); got 7 slots"


def test_cross_batch_memory_refuses_more_than_one_process_before_any_work():
    model, batch = memory_problem()
    with pytest.raises(GradlabError) as caught:
        compare_gradients(FullBatch(soft_positives_loss), CrossBatchMemory(soft_positives_loss),
                          model, batch, world_size=2)  # fmt: skip
    assert str(caught.value) == "CrossBatchMemory runs in one process; got world_size=2"


# --- rank_of_rows -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "world", "ranks"),
    [(4, 2, [0, 0, 1, 1]), (6, 3, [0, 0, 1, 1, 2, 2]), (3, 1, [0, 0, 0]), (3, 3, [0, 1, 2])],
)
def test_rank_of_rows_gives_each_item_the_process_of_its_contiguous_shard(size, world, ranks):
    owner = rank_of_rows(size, world)
    assert owner.tolist() == ranks
    assert torch.equal(torch.arange(world)[owner], torch.tensor(ranks))  # usable as an index


@pytest.mark.parametrize(
    ("size", "world", "message"),
    [
        (5, 2, "world must divide size (equal shards); got size=5, world=2"),
        (2, 3, "world must divide size (equal shards); got size=2, world=3"),
        (0, 1, "size must be a positive integer; got 0"),
        (4, 0, "world must be a positive integer; got 0"),
        (4, True, "world must be a positive integer; got True"),
    ],
)
def test_rank_of_rows_refuses_shards_that_cannot_be_equal(size, world, message):
    with pytest.raises(GradlabError, match=f"^{re.escape(message)}$"):
        rank_of_rows(size, world)
