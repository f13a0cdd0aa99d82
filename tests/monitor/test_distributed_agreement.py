"""The step agreement and the global batch of the Monitor under ``torch.distributed``.

In process: a one-rank gloo group makes ``is_distributed()`` true, and a fake second rank
(``torch.distributed.get_world_size``, ``all_gather`` and ``all_reduce`` replaced) shows what
each rank offers, what the two-rank decision is and how the batch is put together.
"""

from __future__ import annotations

import pytest
import torch

from gradlab.monitor import DegenerateBatches
from gradlab.monitor.batch import BatchView
from gradlab.monitor.distributed import (
    NOT_GATHERED,
    agree_on_step,
    all_gather_rows,
    checksum,
    collective_device,
    decide,
    gather_batch,
    rank_zero_step,
)


class _SecondRank:
    """A fake rank 1: ``peer(tensor)`` is what it contributes where this rank gives ``tensor``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, peer) -> None:
        self.peer = peer
        self.offered: list[torch.Tensor] = []
        self.reductions = 0
        monkeypatch.setattr(torch.distributed, "get_world_size", lambda *a, **k: 2)
        monkeypatch.setattr(torch.distributed, "all_gather", self.all_gather)
        monkeypatch.setattr(torch.distributed, "all_reduce", self.all_reduce)

    def all_gather(self, out: list[torch.Tensor], tensor: torch.Tensor, *a, **k) -> None:
        self.offered.append(tensor.clone())
        if tensor.device.type == "meta":  # the offer's device is checked, its values are not
            out[:] = [torch.as_tensor(self.peer(tensor)) for _ in out]
            return
        out[0].copy_(tensor)
        out[1].copy_(self.peer(tensor))

    def all_reduce(self, tensor: torch.Tensor, *a, **k) -> None:
        self.reductions += 1
        tensor.add_(self.peer(tensor))


def _batch(rows: int = 3, width: int = 2, **extra) -> BatchView:
    embeddings = torch.arange(rows * width, dtype=torch.float64).reshape(rows, width)
    return BatchView(embeddings=embeddings, **extra)


# -- what each rank offers ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "held"),
    [
        ({}, [0, 0, 0]),
        ({"labels": torch.arange(3)}, [1, 0, 0]),
        ({"embedding_grad": torch.ones(3, 2)}, [0, 1, 0]),
        ({"loss": torch.tensor(0.5)}, [0, 0, 1]),
        ({"labels": torch.arange(3), "embedding_grad": torch.ones(3, 2),
          "loss": torch.tensor(0.5)}, [1, 1, 1]),
    ],
)  # fmt: skip
def test_a_rank_offers_its_step_calls_and_what_its_batch_holds(
    one_rank_group, monkeypatch, extra, held
):
    rank1 = _SecondRank(monkeypatch, lambda t: t)
    agreement = agree_on_step(7, 9, _batch(3, 2, **extra))
    # [step, calls, has batch, has labels, has gradient, has loss, rows, width, checksum]
    assert rank1.offered[0].tolist()[:8] == [7, 9, 1, *held, 3, 2]
    assert rank1.offered[0].dtype == torch.int64
    assert agreement.log is True
    assert agreement.rows == (3, 3)


def test_a_rank_without_a_batch_offers_zeros_after_its_step_and_calls(one_rank_group, monkeypatch):
    rank1 = _SecondRank(monkeypatch, lambda t: t)
    agree_on_step(4, 5, None)
    assert rank1.offered[0].tolist() == [4, 5, 0, 0, 0, 0, 0, 0, 0, 0]


def test_one_dimensional_embeddings_offer_width_minus_one(one_rank_group, monkeypatch):
    rank1 = _SecondRank(monkeypatch, lambda t: t)
    agree_on_step(2, 2, BatchView(embeddings=torch.arange(5.0)))
    assert rank1.offered[0].tolist()[:8] == [2, 2, 2, 0, 0, 0, 5, -1]  # 2: float32 rows


@pytest.mark.parametrize("kind", ["scores", "candidates"])
def test_a_batch_that_is_not_gathered_offers_its_kind_not_its_width(
    one_rank_group, monkeypatch, kind
):
    # a score loss whose last batch is smaller on rank 1 (a 6 x 6 matrix beside 8 x 8) was
    # skipped on every rank, "differ in what they hold": its matrix is never gathered
    code = {"scores": -2, "candidates": -3}[kind]  # neither a width nor 1-D's -1
    peer_offer = torch.tensor([6, 6, 1, 0, 0, 1, 6, code, 99, 0])
    rank1 = _SecondRank(monkeypatch, lambda t: peer_offer)
    extra = ({"on_scores": True} if kind == "scores" else
             {"candidates": torch.ones(5, 2), "positives": torch.ones(8, 5, dtype=torch.bool)})
    agreement = agree_on_step(6, 6, _batch(8, 8, loss=torch.tensor(1.0), **extra))
    assert rank1.offered[0].tolist()[:8] == [6, 6, 1, 0, 0, 1, 8, code]
    assert (agreement.log, agreement.rows, agreement.skipped) == (True, (8, 6), None)
    _SecondRank(monkeypatch, lambda t: torch.tensor([6, 6, 1, 0, 0, 1, 8, 8, 99, 0]))
    other = agree_on_step(6, 6, _batch(8, 8, loss=torch.tensor(1.0), **extra))
    assert other.log is False  # rank 1 holds embeddings of width 8: another loss
    words = {"scores": "a score matrix", "candidates": "queries against candidates"}[kind]
    assert f"rank 0: labels 0, grad 0, loss 1, rows 8, {words}; " in other.skipped


def test_ranks_that_hold_the_same_and_differ_only_in_rows_log_the_step(one_rank_group, monkeypatch):
    peer_offer = torch.tensor([6, 6, 1, 1, 1, 1, 5, 2, 99, 0])
    _SecondRank(monkeypatch, lambda t: peer_offer)
    batch = _batch(3, 2, labels=torch.arange(3), embedding_grad=torch.ones(3, 2),
                   loss=torch.tensor(1.0))  # fmt: skip
    agreement = agree_on_step(6, 6, batch)
    assert (agreement.log, agreement.rows, agreement.skipped, agreement.out_of_step) == (
        True, (3, 5), None, None)  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "peer_offer", "differing"),
    [
        ({}, [6, 6, 1, 1, 0, 0, 3, 2, 99, 0], "labels"),
        ({"labels": torch.arange(3)}, [6, 6, 1, 0, 0, 0, 3, 2, 99, 0], "labels"),
        ({}, [6, 6, 1, 0, 1, 0, 3, 2, 99, 0], "grad"),
        ({}, [6, 6, 1, 0, 0, 1, 3, 2, 99, 0], "loss"),
        ({}, [6, 6, 1, 0, 0, 0, 3, 7, 99, 0], "width"),
    ],
)  # fmt: skip
def test_ranks_whose_batches_hold_different_things_skip_the_step(
    one_rank_group, monkeypatch, extra, peer_offer, differing
):
    _SecondRank(monkeypatch, lambda t: torch.tensor(peer_offer))
    agreement = agree_on_step(6, 6, _batch(3, 2, **extra))
    assert agreement.log is False
    assert agreement.skipped.startswith("the ranks' batches for step 6 differ in what they hold")
    assert agreement.out_of_step is None


def test_a_batch_on_another_rank_without_a_batch_skips_the_step(one_rank_group, monkeypatch):
    _SecondRank(monkeypatch, lambda t: torch.tensor([1, 1, 0, 0, 0, 0, 0, 0, 0, 0]))
    agreement = agree_on_step(1, 1, _batch())
    assert agreement.log is False
    assert agreement.skipped == (
        "rank 1 has no batch for step 1 (its loss call was not read, or raised)"
    )


def test_one_dimensional_embeddings_agree_with_a_rank_of_one_dimensional_embeddings(
    one_rank_group, monkeypatch
):
    _SecondRank(monkeypatch, lambda t: torch.tensor([2, 2, 1, 0, 0, 0, 4, -1, 99, 0]))
    agreement = agree_on_step(2, 2, BatchView(embeddings=torch.arange(5.0)))
    assert (agreement.log, agreement.rows) == (True, (5, 4))


def test_the_offer_travels_on_the_device_of_the_batch_whatever_the_default_device(
    one_rank_group, monkeypatch
):
    peer_offer = torch.tensor([0, 1, 1, 0, 0, 0, 3, 2, 99, 0])
    rank1 = _SecondRank(monkeypatch, lambda t: peer_offer)
    batch = BatchView(embeddings=torch.empty(3, 2, device="meta"))
    agreement = agree_on_step(0, 1, batch)
    assert rank1.offered[0].device.type == "meta"
    assert agreement.rows == (3, 3)
    cpu_batch = _batch()
    with torch.device("meta"):
        rank1.offered.clear()
        agreement = agree_on_step(0, 1, cpu_batch)
    assert rank1.offered[0].device.type == "cpu"
    assert agreement.rows == (3, 3)


def test_without_a_process_group_the_agreement_is_the_one_rank_decision():
    agreement = agree_on_step(3, 4, _batch(6, 2))
    assert (agreement.log, agreement.rows, agreement.skipped, agreement.out_of_step) == (
        True, (6,), None, None)  # fmt: skip


# -- the collectives' device ----------------------------------------------------------------


def test_the_collectives_run_on_the_current_cuda_device_under_nccl(one_rank_group, monkeypatch):
    assert collective_device() == torch.device("cpu")  # gloo
    monkeypatch.setattr(torch.distributed, "get_backend", lambda *a, **k: "nccl")
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    assert collective_device() == torch.device("cuda", 1)


# -- decide's messages ----------------------------------------------------------------------


def test_ranks_at_different_steps_are_out_of_step_with_each_ranks_step_and_calls():
    agreement = decide([[3, 3, 1, 1, 1, 1, 8, 4, 99], [4, 5, 1, 1, 1, 1, 8, 4, 99]])
    assert agreement.log is False
    assert agreement.skipped is None
    assert agreement.out_of_step == (
        "the ranks are out of step (rank 0 at step 3 after 3 watched call(s), "
        "rank 1 at step 4 after 5 watched call(s))"
    )
    assert agreement.uneven_calls is False  # a step skipped: the steps differ
    calls = decide([[3, 3, 1, 1, 1, 1, 8, 4, 99], [3, 4, 1, 1, 1, 1, 8, 4, 99]])
    assert calls.out_of_step is not None and calls.uneven_calls is True  # a call more


def test_ranks_without_a_batch_are_named_in_the_skip():
    one = decide([[2, 2, 1, 1, 1, 1, 8, 4, 99], [2, 2, 0, 0, 0, 0, 0, 0, 0]])
    assert one.log is False
    assert one.out_of_step is None
    assert one.skipped == "rank 1 has no batch for step 2 (its loss call was not read, or raised)"
    two = decide([[2, 2, 0, 0, 0, 0, 0, 0, 0], [2, 2, 1, 1, 1, 1, 8, 4, 99],
                  [2, 2, 0, 0, 0, 0, 0, 0, 0]])
    assert two.skipped == (
        "rank 0, rank 2 have no batch for step 2 (its loss call was not read, or raised)"
    )


def test_ranks_whose_batches_differ_are_told_what_each_holds():
    agreement = decide([[5, 5, 1, 1, 1, 0, 8, 4, 99], [5, 5, 1, 1, 0, 0, 8, 4, 99]])
    assert agreement.log is False
    assert agreement.out_of_step is None
    assert agreement.skipped == (
        "the ranks' batches for step 5 differ in what they hold ("
        "rank 0: labels 1, grad 1, loss 0, rows 8, float64 embeddings of width 4; "
        "rank 1: labels 1, grad 0, loss 0, rows 8, float64 embeddings of width 4): every rank's "
        "Monitor needs the same options and the same watched loss, called alike (embeddings as "
        "wide and of one dtype on every rank, to be gathered into one batch), and "
        "monitor.step() after backward"
    )


@pytest.mark.parametrize(("width", "words"), [
    (-1, "1-D embeddings"), (-2, "a score matrix"), (-3, "queries against candidates"),
    (6, "float64 embeddings of width 6")])  # fmt: skip
def test_a_skip_names_each_ranks_kind_of_batch_in_words(width, words):
    # the offer's codes showed through: "width -2" for a score matrix
    agreement = decide([[5, 5, 1, 0, 0, 1, 8, width, 99], [5, 5, 1, 0, 0, 1, 8, 4, 99]])
    assert f"rank 0: labels 0, grad 0, loss 1, rows 8, {words}; rank 1: labels 0, grad 0, " \
        "loss 1, rows 8, float64 embeddings of width 4)" in agreement.skipped


def test_a_table_row_of_the_wrong_length_is_refused_not_cut():
    table = [[5, 5, 1, 1, 1, 1, 8, 4, 9, 9], [5, 5, 1, 1, 1, 1, 8, 4, 9, 9]]
    with pytest.raises(ValueError) as raised:
        decide(table)
    assert str(raised.value) == (
        "each rank's offer holds 9 values ('step', 'calls', 'batch', 'labels', 'grad', "
        f"'loss', 'rows', 'width', 'checksum'); got {table}"
    )


# -- ranks that hold one batch alike ---------------------------------------------------------


def _view(embeddings, labels=(0, 1, 1)):
    return BatchView(embeddings=embeddings, labels=torch.tensor(labels))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_the_checksum_of_equal_rows_and_labels_is_equal_and_a_change_changes_it(dtype):
    base = torch.tensor([[0.5, -1.25], [2.0, 3.0], [-0.75, 0.125]], dtype=dtype)
    first = checksum(_view(base.clone()))
    assert first.dtype == torch.int64 and first.dim() == 0
    assert int(checksum(_view(base.clone()))) == int(first)
    one_ulp = base.clone()
    one_ulp[1, 0] = torch.nextafter(one_ulp[1, 0], torch.tensor(10.0, dtype=dtype))
    changed = [one_ulp, base[[1, 0, 2]], base[:, [1, 0]]]  # a value, the rows' or columns' order
    assert all(int(checksum(_view(other))) != int(first) for other in changed)
    assert int(checksum(_view(base, labels=(0, 1, 2)))) != int(first)


def test_the_checksum_of_no_batch_or_no_rows_is_zero():
    for value in (checksum(None), checksum(BatchView(embeddings=torch.empty(0, 4)))):
        assert value.dtype == torch.int64 and value.shape == () and int(value) == 0


def _wrapped(value: int) -> int:
    """``value`` as int64 arithmetic leaves it (two's complement, wrapping)."""
    return (value + 2**63) % 2**64 - 2**63


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_the_checksum_is_its_documented_sum_of_bit_patterns(dtype):
    # sum over rows r of (r + 1) x (sum over columns c of (c + 1) x bits[r, c] + label[r]),
    # each value's bit pattern read as a signed integer of its width, in int64 (wrapping):
    # large values (bit patterns near 2^31 for float32) make any narrower product overflow
    generator = torch.Generator().manual_seed(6)
    embeddings = (torch.randn(5, 3, generator=generator) * 1e30).clamp(-6e4, 6e4).to(dtype)
    labels = torch.tensor([7, -2, 0, 3, 11])
    width = embeddings.element_size()
    patterns = embeddings.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[width]).tolist()
    expected = 0
    for r, row in enumerate(patterns):
        inner = sum((c + 1) * bits for c, bits in enumerate(row)) + int(labels[r])
        expected = _wrapped(expected + _wrapped((r + 1) * _wrapped(inner)))
    value = checksum(BatchView(embeddings=embeddings, labels=labels))
    assert value.dtype == torch.int64 and int(value) == expected


def test_ranks_holding_the_same_rows_and_checksum_hold_one_batch():
    row = [3, 3, 1, 1, 1, 1, 8, 4, 17]
    assert decide([row, list(row)]).same is True
    assert decide([row, list(row), list(row)]).same is True
    assert decide([row, [*row[:8], 18]]).same is False  # another batch
    assert decide([row, [*row[:6], 7, 4, 17]]).same is False  # other rows
    assert decide([row]).same is False  # one rank: nothing is copied
    empty = [3, 3, 1, 1, 1, 1, 0, 4, 0]
    assert decide([empty, list(empty)]).same is False  # no rows: nothing to copy
    one = [3, 3, 1, 1, 1, 1, 1, 4, 17]
    assert decide([one, list(one)]).same is True  # a batch of one row held alike is one too


def test_a_batch_held_alike_is_not_gathered_and_its_loss_is_still_averaged(
    one_rank_group, monkeypatch
):
    rank1 = _SecondRank(monkeypatch, lambda t: t)
    embeddings = torch.arange(6, dtype=torch.float64).reshape(3, 2)
    batch = BatchView(embeddings=embeddings, labels=torch.tensor([0, 1, 1]),
                      embedding_grad=-embeddings, loss=torch.tensor(0.25))  # fmt: skip
    agreement = agree_on_step(2, 2, batch)
    assert agreement.same is True
    rank1.offered.clear()
    view = gather_batch(batch, agreement.rows, same=agreement.same)
    assert view is batch and rank1.offered == []  # no rows exchanged
    assert torch.equal(view.embeddings, embeddings) and view.labels.tolist() == [0, 1, 1]
    assert view.loss.item() == 0.25 and rank1.reductions == 1


# -- the global batch -----------------------------------------------------------------------


def test_rows_that_do_not_match_the_ranks_are_refused_not_cut(one_rank_group):
    with pytest.raises(ValueError):
        all_gather_rows(torch.arange(3), rows=(3, 2))


def test_the_global_batch_concatenates_both_ranks_and_averages_the_loss(
    one_rank_group, monkeypatch
):
    _SecondRank(monkeypatch, lambda t: t + 10)
    embeddings = torch.arange(6, dtype=torch.float64).reshape(3, 2)
    batch = BatchView(embeddings=embeddings, labels=torch.tensor([0, 1, 1]),
                      embedding_grad=-embeddings, loss=torch.tensor(0.25),
                      score_direction="i2t")  # fmt: skip
    gathered = gather_batch(batch, rows=(3, 2))  # rank 1 holds two rows
    assert gathered.score_direction == "i2t"  # what the integration said of the loss
    assert torch.equal(gathered.embeddings, torch.cat([embeddings, embeddings[:2] + 10]))
    assert gathered.labels.tolist() == [0, 1, 1, 10, 11]
    assert torch.equal(gathered.embedding_grad, torch.cat([-embeddings, -embeddings[:2] + 10]))
    assert gathered.loss.dtype == torch.float64
    assert gathered.loss.item() == (0.25 + 10.25) / 2
    assert gathered.candidates is None and gathered.local is batch


@pytest.mark.parametrize("cross_modal", [False, True])  # gathered, or this rank's matrix
@pytest.mark.parametrize(("rows", "holding"), [((3, 0), 1), ((3, 1), 2), (None, 2)])
def test_a_rank_with_an_empty_batch_is_left_out_of_the_mean_loss(
    one_rank_group, monkeypatch, cross_modal, rows, holding
):
    # rank 1 holds no row (its loss, 0, measures nothing): the logged loss was half this
    # rank's; one row is a batch; without the agreed rows every rank counts, as before
    _SecondRank(monkeypatch, lambda t: torch.zeros_like(t))
    embeddings = torch.arange(6, dtype=torch.float64).reshape(3, 2)
    options = (dict(candidates=torch.ones(4, 2), positives=torch.zeros(3, 4, dtype=torch.bool))
               if cross_modal else dict(labels=torch.tensor([0, 1, 1])))  # fmt: skip
    batch = BatchView(embeddings=embeddings, loss=torch.tensor(0.25), **options)
    gathered = gather_batch(batch, rows=rows)
    assert gathered.loss.item() == 0.25 / holding


@pytest.mark.parametrize("cross_modal", [False, True])
def test_the_degenerate_count_is_every_ranks_in_the_loss_s_one_reduction(
    one_rank_group, monkeypatch, cross_modal
):
    # rank 1's sampler gave it 5 degenerate batches where rank 0 saw 2: the log says 7
    def peer(tensor):  # rank 1's loss 1.5 and count 5; its rows are rank 0's plus 10
        if tensor.shape == (2,) and tensor.dtype == torch.float64:
            return torch.tensor([1.5, 5.0], dtype=torch.float64)
        return tensor + 10

    second = _SecondRank(monkeypatch, peer)
    extra = ({"candidates": torch.ones(4, 2), "positives": torch.zeros(3, 4, dtype=torch.bool)}
             if cross_modal else {"labels": torch.tensor([0, 1, 1])})  # fmt: skip
    batch = _batch(loss=torch.tensor(0.5), degenerate_batches=2, **extra)
    gathered = gather_batch(batch, rows=(3, 3))
    assert gathered.loss.item() == (0.5 + 1.5) / 2 and gathered.degenerate_batches.item() == 7.0
    values = DegenerateBatches().compute(gathered)
    assert values["degenerate_batches"].dtype == torch.float64
    assert values["degenerate_batches"].item() == 7.0
    assert second.reductions == 1  # one all-reduce carries both


@pytest.mark.parametrize(("loss", "count"), [(torch.tensor(0.5), None), (None, 2)])
def test_a_loss_or_a_count_alone_is_reduced_alone(one_rank_group, monkeypatch, loss, count):
    _SecondRank(monkeypatch, lambda t: t + 1)  # rank 1's value is rank 0's plus 1
    gathered = gather_batch(_batch(loss=loss, degenerate_batches=count,
                                   labels=torch.tensor([0, 1, 1])), rows=(3, 3))  # fmt: skip
    if loss is None:
        assert gathered.loss is None and gathered.degenerate_batches.item() == 2 + 3
    else:
        assert gathered.loss.item() == (0.5 + 1.5) / 2 and gathered.degenerate_batches is None


def test_the_count_is_reduced_on_the_embeddings_device(one_rank_group, monkeypatch):
    # meta: a device that is not the host's, as a GPU is (its values are not read)
    _SecondRank(monkeypatch, lambda t: t)
    batch = BatchView(embeddings=torch.zeros(3, 2, device="meta"), loss=torch.zeros((),
                      device="meta"), degenerate_batches=2, candidates=torch.zeros(
                      4, 2, device="meta"), positives=torch.zeros(3, 4, dtype=torch.bool,
                      device="meta"))  # fmt: skip
    gathered = gather_batch(batch, rows=(3, 3))
    assert gathered.loss.device.type == gathered.degenerate_batches.device.type == "meta"


def test_queries_against_candidates_are_not_gathered(one_rank_group, monkeypatch):
    # each rank's candidates are its own: its rows stacked on rank 0's would be another matrix
    _SecondRank(monkeypatch, lambda t: t + 10)
    embeddings = torch.arange(6, dtype=torch.float64).reshape(3, 2)
    candidates, positives = torch.ones(4, 2), torch.zeros(3, 4, dtype=torch.bool)
    batch = BatchView(embeddings=embeddings, candidates=candidates, positives=positives,
                      loss=torch.tensor(0.25))  # fmt: skip
    gathered = gather_batch(batch, rows=(3, 2))
    assert gathered is batch and torch.equal(gathered.embeddings, embeddings)
    assert gathered.loss.dtype == torch.float64
    assert gathered.loss.item() == (0.25 + 10.25) / 2  # the loss: the ranks' mean


def test_the_averaged_loss_is_summed_in_float64(one_rank_group, monkeypatch):
    _SecondRank(monkeypatch, lambda t: torch.full_like(t, 2.0**-30))
    gathered = gather_batch(_batch(loss=torch.tensor(1.0, dtype=torch.float32)), rows=(3, 3))
    assert gathered.loss.item() == (1.0 + 2.0**-30) / 2


def test_a_batch_without_labels_gradient_or_loss_gathers_only_the_embeddings(
    one_rank_group, monkeypatch
):
    rank1 = _SecondRank(monkeypatch, lambda t: t)
    gathered = gather_batch(_batch(), rows=(3, 3))
    assert gathered.labels is None
    assert gathered.embedding_grad is None
    assert gathered.loss is None
    assert len(rank1.offered) == 1


@pytest.mark.parametrize(("rows", "exchanges"), [((3, 3), 3), (None, 6)])
def test_agreed_rows_save_one_exchange_per_tensor(one_rank_group, monkeypatch, rows, exchanges):
    rank1 = _SecondRank(monkeypatch, lambda t: t)
    batch = _batch(labels=torch.arange(3), embedding_grad=torch.ones(3, 2))
    gathered = gather_batch(batch, rows=rows)
    assert len(rank1.offered) == exchanges
    assert gathered.embeddings.shape == (6, 2)


def test_gradient_agreement_compares_this_rank_s_own_call(one_rank_group, monkeypatch):
    # Each rank backpropagates SmoothAP of its own batch; the gathered batch's SmoothAP is
    # another loss. Agreement reads the rank's own view: the same values as without a group.
    import gradlab
    from gradlab.monitor.quantities import GradientAgreement

    torch.manual_seed(0)
    embeddings = torch.randn(8, 4, requires_grad=True)
    labels = torch.arange(4).repeat_interleave(2)
    gradlab.SmoothAPLoss(0.05)(embeddings, labels).backward()
    local = BatchView(embeddings=embeddings.detach(), labels=labels, loss_kind="exclude_query",
                      loss_tau=0.05, tau=0.05, embedding_grad=embeddings.grad)  # fmt: skip
    alone = GradientAgreement().compute(local)
    assert float(alone["gradient_agreement_relative_error"]) < 1e-5
    # rank 1 holds 8 other points, of classes past rank 0's (its row count is rank 0's)
    def peer(tensor):
        if tensor.is_floating_point():
            return tensor.flip(0) * 1.5
        return tensor + 4 if tensor.shape == labels.shape else tensor

    _SecondRank(monkeypatch, peer)
    gathered = gather_batch(local)
    assert gathered.embeddings.shape[0] == 16 and gathered.local is local
    together = GradientAgreement().compute(gathered)
    assert {key: float(value) for key, value in together.items()} == {
        key: float(value) for key, value in alone.items()}
    # what the gathered batch's SmoothAP would have said: not the loss this rank trained on
    global_view = BatchView(embeddings=gathered.embeddings, labels=gathered.labels,
                            loss_kind="exclude_query", loss_tau=0.05, tau=0.05,
                            embedding_grad=gathered.embedding_grad)  # fmt: skip
    wrong = GradientAgreement().compute(global_view)
    assert float(wrong["gradient_agreement_relative_error"]) > 0.1


@pytest.mark.parametrize("on_scores", [False, True])
def test_the_gathered_view_describes_the_same_loss_call(one_rank_group, monkeypatch, on_scores):
    local = _batch(labels=torch.arange(3), loss_kind="include_query", loss_tau=0.25,
                   tau=0.5, on_scores=on_scores)  # fmt: skip
    _SecondRank(monkeypatch, lambda tensor: tensor)
    gathered = gather_batch(local)
    assert (gathered.loss_kind, gathered.loss_tau, gathered.tau) == ("include_query", 0.25, 0.5)
    assert gathered.on_scores is on_scores
    # a score matrix is not gathered (rank 0's own matrix); rows of embeddings are
    assert gathered is local if on_scores else gathered.local is local


def test_a_rank_without_a_batch_offers_on_the_collectives_device_whatever_the_default(
    one_rank_group, monkeypatch
):
    rank1 = _SecondRank(monkeypatch, lambda t: t)
    with torch.device("meta"):
        agreement = agree_on_step(4, 5, None)
    assert rank1.offered[0].device.type == "cpu"
    assert rank1.offered[0].tolist() == [4, 5, 0, 0, 0, 0, 0, 0, 0, 0]
    assert agreement.skipped.startswith("rank 0, rank 1 have no batch for step 4")


def test_the_checksum_reads_labels_held_on_another_device_than_the_embeddings():
    # pytorch-metric-learning's losses take CPU labels beside CUDA embeddings; the meta device
    # stands for the accelerator here
    view = BatchView(embeddings=torch.empty(3, 2, device="meta"), labels=torch.arange(3))
    assert checksum(view).device.type == "meta"


def test_labels_held_on_the_cpu_are_gathered_on_the_embeddings_device(one_rank_group, monkeypatch):
    # NCCL gathers CUDA tensors only: CPU labels beside CUDA embeddings (pytorch-metric-learning
    # takes them) travel on the embeddings' device; the meta device stands for CUDA here
    rank1 = _SecondRank(monkeypatch, lambda t: t)
    batch = BatchView(embeddings=torch.empty(3, 2, device="meta"), labels=torch.arange(3))
    gather_batch(batch, rows=(3, 3))
    assert {tensor.device.type for tensor in rank1.offered} == {"meta"}
    assert len(rank1.offered) == 2  # the embeddings and the labels


def test_rank_zeros_step_travels_on_the_given_device_else_the_collectives(
    one_rank_group, monkeypatch
):
    sent = []

    def all_gather(out, tensor, *args, **kwargs):
        sent.append(tensor.device.type)
        out[0].copy_(torch.tensor([9, 1, 0], device=tensor.device))  # rank 0's step, plan, digest

    monkeypatch.setattr(torch.distributed, "all_gather", all_gather)
    with pytest.raises(RuntimeError, match="meta"):  # a meta tensor has no value to read back
        rank_zero_step(3, torch.device("meta"), plan=1)
    assert rank_zero_step(3, plan=1) == 9
    assert sent == ["meta", "cpu"]  # the batch's device; gloo's CPU without one


def test_without_a_process_group_a_step_is_its_own():
    assert rank_zero_step(4) == 4


@pytest.mark.parametrize(("codes", "words"), [
    ((1, 2), ("float64", "float32")), ((3, 4), ("float16", "bfloat16")),
    ((2, 5), ("float32", "other dtype"))])  # fmt: skip
def test_ranks_whose_embeddings_differ_in_dtype_skip_the_step_saying_so(codes, words):
    # the rows were gathered anyway, and gloo aborted the process ("Received data size doesn't
    # match expected size": 256 vs 128 bytes)
    agreement = decide([[5, 5, codes[0], 1, 1, 1, 8, 4, 99], [5, 5, codes[1], 1, 1, 1, 8, 4, 99]])
    assert agreement.log is False and agreement.out_of_step is None
    assert (f"rank 0: labels 1, grad 1, loss 1, rows 8, {words[0]} embeddings of width 4; "
            f"rank 1: labels 1, grad 1, loss 1, rows 8, {words[1]} embeddings of width 4)"
            ) in agreement.skipped  # fmt: skip


def test_score_matrices_of_different_dtypes_are_not_compared():
    # a score matrix is not gathered: each rank reads its own, whatever its dtype
    code = NOT_GATHERED["scores"]
    agreement = decide([[5, 5, 1, 0, 0, 1, 8, code, 99], [5, 5, 2, 0, 0, 1, 8, code, 98]])
    assert agreement.log is True


@pytest.mark.parametrize(("dtype", "code"), [
    (torch.float64, 1), (torch.float32, 2), (torch.float16, 3), (torch.bfloat16, 4),
    (torch.int64, 5)])  # fmt: skip
def test_a_rank_offers_the_dtype_of_its_embeddings(one_rank_group, monkeypatch, dtype, code):
    rank1 = _SecondRank(monkeypatch, lambda t: t)
    agree_on_step(1, 1, BatchView(embeddings=torch.ones(3, 2, dtype=dtype)))
    assert rank1.offered[0].tolist()[2] == code  # 5: another dtype


@pytest.mark.parametrize("dtype", [torch.int32, torch.int16, torch.uint8])
def test_labels_of_any_integer_dtype_are_gathered_as_int64(one_rank_group, dtype):
    # a rank's int32 labels beside another's int64 aborted the all-gather (gloo: the sizes
    # differ); every rank sends int64
    view = BatchView(embeddings=torch.ones(3, 2), labels=torch.tensor([0, 1, 1], dtype=dtype))
    gathered = gather_batch(view, (3,))
    assert gathered.labels.dtype == torch.int64
    assert gathered.labels.tolist() == [0, 1, 1]


def test_a_step_read_for_the_other_ranks_alone_gathers_no_copy_of_a_batch_held_alike(
    one_rank_group, monkeypatch, tmp_path
):
    # A quantity disabled on this rank (its compute raised at step 1) is still due by its
    # schedule, so this rank reads step 2 for the other ranks' gather. Every rank holds the
    # same batch (a loss on all-gathered embeddings): that step exchanges the agreement's offer
    # alone, as a step it logs does, and gathers no copy of the rows.
    import warnings

    import gradlab
    from gradlab.monitor import Loss, Quantity

    class FailsAtStepOne(Quantity):
        name = "fails_at_step_one"
        needs = frozenset({"embeddings"})
        keys = ("fails_at_step_one",)
        step = 0

        def compute(self, batch):
            if self.step == 1:
                raise RuntimeError("fails here at step 1")
            return {"fails_at_step_one": torch.tensor(1.0)}

    rank1 = _SecondRank(monkeypatch, lambda tensor: tensor)  # holds what this rank holds
    failing = FailsAtStepOne(lambda step: step >= 0)
    embeddings, labels = torch.randn(8, 4), torch.arange(8) % 4
    offered = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the same batch on every rank; the quantity's fault
        with gradlab.Monitor(tmp_path / "run",
                             quantities=[Loss(lambda step: step < 2), failing]) as monitor:
            loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
            for step in range(3):
                failing.step, before = step, len(rank1.offered)
                loss_fn(embeddings.clone().requires_grad_(), labels).backward()
                monitor.step()
                offered.append([tuple(t.shape) for t in rank1.offered[before:]])
    assert list(monitor.disabled) == ["fails_at_step_one"]
    agreement = offered[1]  # the step's one offer: step, calls, what the batch holds
    assert len(agreement) == 1 and offered[2] == agreement


def test_rank_zeros_disabled_quantities_reach_every_rank(one_rank_group, monkeypatch):
    # this process is rank 0: its mask (quantities 1 and 2) is what the agreement carries,
    # whatever rank 1 offers there
    _SecondRank(monkeypatch, lambda t: torch.tensor([*t[:-1].tolist(), 1]))
    assert agree_on_step(6, 6, _batch(), dropped=0b110).dropped == 0b110


def test_without_a_process_group_the_agreement_keeps_this_ranks_disabled_quantities():
    assert agree_on_step(6, 6, _batch(), dropped=0b101).dropped == 0b101
