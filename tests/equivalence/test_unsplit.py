"""A trick configured so that it splits nothing (a gradient cache of one chunk, one
micro-batch) agrees with the whole batch by construction: the verdict says that it checked
nothing of the trick, and how to check it."""

import json

import pytest

import gradlab
from gradlab.equivalence import (
    Accumulation,
    FullBatch,
    GradCache,
    compare_gradients,
    synthetic_problem,
)

B = 8
LOSS = gradlab.NTXentLoss(temperature=0.5)


@pytest.fixture
def problem():
    return synthetic_problem(batch_size=B, seed=3)


@pytest.mark.parametrize("chunk_size", [B, B + 1, 100])
def test_a_cache_of_one_chunk_says_it_checked_nothing_of_the_cache(problem, chunk_size):
    result = compare_gradients(FullBatch(LOSS), GradCache(LOSS, chunk_size), *problem)
    assert result.equivalent
    said = (f"chunk_size={chunk_size} is at least the batch size per process ({B}): the cache "
            "encodes the batch in one chunk, so this compares the batch's own forward and says "
            f"nothing of the cache's chunking; a chunk_size below {B} checks it")
    assert result.unsplit == said and str(result).endswith(f"\nnote: {said}")
    assert json.loads(json.dumps(result.to_dict()))["unsplit"] == said


@pytest.mark.parametrize("chunk_size", [1, B - 1])
def test_a_cache_of_several_chunks_has_no_such_note(problem, chunk_size):
    result = compare_gradients(FullBatch(LOSS), GradCache(LOSS, chunk_size), *problem)
    assert result.equivalent and result.unsplit is None and "nothing of" not in str(result)
    assert result.to_dict()["unsplit"] is None


def test_one_micro_batch_says_it_checked_nothing_of_accumulation(problem):
    one = compare_gradients(FullBatch(LOSS), Accumulation(LOSS, 1), *problem)
    assert one.equivalent and one.unsplit == (
        "micro_batches=1: the one micro-batch is the whole batch, so this compares the batch's "
        "own step and says nothing of accumulation; 2 or more check it")
    two = compare_gradients(FullBatch(LOSS), Accumulation(LOSS, 2), *problem)
    assert two.unsplit is None


@pytest.mark.slow  # two gloo processes
def test_the_note_counts_the_batch_per_process(problem):
    half = B // 2
    result = compare_gradients(FullBatch(LOSS), GradCache(LOSS, half), *problem, world_size=2)
    assert result.unsplit.startswith(
        f"chunk_size={half} is at least the batch size per process ({half}):")


def test_a_step_of_one_s_own_may_say_it_too(problem):
    class Whole:
        def __call__(self, model, batch, probe):
            return FullBatch(LOSS)(model, batch, probe)

        def unsplit(self, batch, world):
            return f"one piece of {batch.labels.shape[0] // world}"

    assert compare_gradients(FullBatch(LOSS), Whole(), *problem).unsplit == f"one piece of {B}"
