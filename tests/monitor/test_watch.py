"""Monitor.watch / attach: errors at the call, keyword arguments, unreadable calls never break
training, and gradients bit-identical with and without the monitor for every capture path."""

import math
import warnings

import pytest
import torch

import gradlab
from gradlab.errors import GradlabError
from gradlab.functional import max_violation_triplet_loss
from gradlab.models import EmbeddingMLP
from gradlab.monitor import Monitor, every, read_jsonl
from gradlab.monitor.anatomy import Anatomy
from tests.helpers.host_reads import host_reads


def _monitor(tmp_path, **options):
    options.setdefault("quantities", [gradlab.monitor.Loss(every(1)), Anatomy(every(1))])
    return Monitor(tmp_path / "run", **options)


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda m: m.watch(42), "loss_fn"),
        (lambda m: m.watch(None), "loss_fn"),
        (lambda m: m.watch("SmoothAPLoss"), "loss_fn"),
        (lambda m: m.watch(gradlab.SmoothAPLoss(), inputs="logits"), "inputs"),
        (lambda m: m.attach(42, torch.zeros(3)), "module"),
        (lambda m: m.attach(torch.nn.Linear(2, 2), [0, 1]), "labels"),
    ],
)
def test_bad_watch_and_attach_calls_name_the_argument(tmp_path, call, argument):
    with _monitor(tmp_path) as monitor, pytest.raises(GradlabError, match=argument):
        call(monitor)


def test_keyword_arguments_pass_through_and_are_read(tmp_path):
    def loss_fn(embeddings, labels, *, scale=1.0):
        return gradlab.SmoothAPLoss(0.05)(embeddings, labels) * scale

    with _monitor(tmp_path) as monitor:
        watched = monitor.watch(loss_fn)
        embeddings = torch.randn(8, 4, requires_grad=True)
        loss = watched(embeddings=embeddings, labels=torch.arange(8) % 2, scale=2.0)
        loss.backward()
        record = monitor.step()
    assert record["loss"] == pytest.approx(loss.item())


@pytest.mark.parametrize(
    ("loss_fn", "arguments"),
    [
        (lambda e: e.pow(2).sum(), lambda e: (e,)),  # one-argument loss
        (lambda e, y: e.sum(), lambda e: (e, torch.arange(5))),  # labels of the wrong length
        (lambda e, y: e.sum(), lambda e: (e, "labels")),  # not a tensor
        (lambda e, y: e.sum(), lambda e: (e, torch.zeros(8))),  # float labels
        (lambda e, y: e.sum(), lambda e: (e.flatten(), torch.arange(32))),  # 1-D embeddings
    ],
)
def test_an_unreadable_call_is_reported_once_and_never_breaks_training(
    tmp_path, loss_fn, arguments
):
    with _monitor(tmp_path) as monitor:
        watched = monitor.watch(loss_fn)
        embeddings = torch.randn(8, 4, requires_grad=True)
        with pytest.warns(RuntimeWarning, match="cannot read") as caught:
            for _ in range(3):
                watched(*arguments(embeddings)).backward()
                monitor.step()
        assert len([w for w in caught if "cannot read" in str(w.message)]) == 1
        assert monitor.skipped_calls == 3
    with _monitor(tmp_path / "strict", strict=True) as monitor:
        watched = monitor.watch(loss_fn)
        with pytest.raises(GradlabError, match="cannot read"):
            watched(*arguments(embeddings))


@pytest.mark.parametrize("inputs", ["embeddings", "scores"])
def test_labels_wider_than_a_byte_and_unsigned_are_read_as_int64_labels(tmp_path, inputs):
    # a user's loss may take uint32 labels; gradlab's functions refuse them (torch has few
    # operations for them), so the Monitor reads them as int64 and logs the step all the same
    generator = torch.Generator().manual_seed(4)
    rows = torch.randn(8, 4, generator=generator)
    labels = torch.arange(8) % 3 + 8  # no column of the score matrix: labels, not targets
    logged = {}
    for dtype in (torch.int64, torch.uint32):
        with Monitor(tmp_path / str(dtype), preset="full", every=1) as monitor:
            watched = monitor.watch(lambda first, second: first.sum(), inputs=inputs)
            first = rows.clone().requires_grad_(True)
            unit = torch.nn.functional.normalize(first, dim=1)
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # nothing unreadable, nothing disabled
                watched(first if inputs == "embeddings" else unit @ unit.T,
                        labels.to(dtype)).backward()
                logged[dtype] = monitor.step()
    assert logged[torch.uint32].keys() == logged[torch.int64].keys()
    assert len(logged[torch.int64]) > 20
    for key, value in logged[torch.int64].items():
        same = logged[torch.uint32][key]
        assert same == value or (isinstance(value, float) and math.isnan(value)
                                 and math.isnan(same)), key  # fmt: skip


def test_attach_never_breaks_training(tmp_path):
    model = torch.nn.Linear(4, 3)
    quantities = [gradlab.monitor.EmbeddingNorms(every(1)), Anatomy(every(1))]
    with _monitor(tmp_path, quantities=quantities) as monitor:
        monitor.attach(model, labels=lambda: torch.arange(2))  # wrong length
        with pytest.warns(RuntimeWarning, match="cannot read"):
            model(torch.randn(5, 4)).sum().backward()
        monitor.step()
    headers, _ = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert "attach()" in headers[0]["not_logged"]["anatomy"]


def _train(loss_fn, forward, monitor=None, steps=3):
    """Gradients of the parameters after each step, with or without the monitor."""
    torch.manual_seed(0)
    model = EmbeddingMLP(64, 16)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    if monitor is not None:
        loss_fn = monitor.watch(loss_fn, inputs=getattr(forward, "inputs", "embeddings"))
    generator = torch.Generator().manual_seed(1)
    history = []
    for _ in range(steps):
        images = torch.randn(24, 64, generator=generator)
        labels = torch.arange(24) % 6
        loss = forward(loss_fn, model, images, labels)
        loss.backward()
        history.append([p.grad.clone() for p in model.parameters()])
        optimizer.step()
        optimizer.zero_grad()
        if monitor is not None:
            monitor.step()
    return history


def _embeddings_call(loss_fn, model, images, labels):
    return loss_fn(model(images), labels)


def _scores_call(loss_fn, model, images, labels):
    embeddings = torch.nn.functional.normalize(model(images), dim=1)
    images_part, captions_part = embeddings[:6], embeddings[6:]
    positives = torch.arange(6).unsqueeze(1) == (torch.arange(18) % 6).unsqueeze(0)
    return loss_fn(images_part @ captions_part.T, positives)


_scores_call.inputs = "scores"


def _pml(name):
    pml_losses = pytest.importorskip("pytorch_metric_learning.losses")
    from gradlab.interop.pml import RecordingCosineSimilarity

    return getattr(pml_losses, name)(distance=RecordingCosineSimilarity())


CASES = {
    "SmoothAPLoss": (lambda: gradlab.SmoothAPLoss(0.05), _embeddings_call),
    "MaxViolationTripletLoss": (lambda: gradlab.MaxViolationTripletLoss(), _scores_call),
    "NTXentLoss": (lambda: gradlab.NTXentLoss(), _scores_call),
    "function on scores": (lambda: max_violation_triplet_loss, _scores_call),
    "pml MultiSimilarityLoss": (lambda: _pml("MultiSimilarityLoss"), _embeddings_call),
    "pml NTXentLoss": (lambda: _pml("NTXentLoss"), _embeddings_call),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_gradients_are_bit_identical_with_and_without_the_monitor(tmp_path, case):
    make_loss, forward = CASES[case]
    plain = _train(make_loss(), forward)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no quantity may fail on these losses
        with Monitor(tmp_path / "run", preset="full", every=1) as monitor:
            watched = _train(make_loss(), forward, monitor)
    for before, after in zip(plain, watched, strict=True):
        for a, b in zip(before, after, strict=True):
            assert torch.equal(a, b)
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert any(key.startswith("anatomy_") for key in records[0]), sorted(records[0])


@pytest.mark.parametrize("inputs", ["embeddings", "scores"])
def test_off_schedule_watched_calls_do_not_touch_the_host(tmp_path, monkeypatch, inputs):
    """Off-schedule, watch adds no host synchronisation to the loss call (GPU pipelines)."""
    # validate=False: the loss's own one read (finite check, degenerate count) is off, so only
    # what watch adds is measured.
    loss = (
        gradlab.NTXentLoss(validate=False) if inputs == "scores" else lambda e, y: e.pow(2).sum()
    )
    scores = torch.randn(4, 8, requires_grad=True)
    positives = torch.rand(4, 8) < 0.3
    with _monitor(tmp_path, quantities=[Anatomy(every(1000))]) as monitor:
        watched = monitor.watch(loss, inputs=inputs)
        monitor.step()  # step 0 is logged by every(1000); step 1 is not
        assert host_reads(monkeypatch, lambda: watched(
            scores, positives if inputs == "scores" else torch.arange(4))) == []
        assert monitor._pending is None


def test_scores_with_paired_labels_are_read(tmp_path):
    scores = torch.randn(6, 6, requires_grad=True)
    labels = torch.tensor([0, 1, 2, 0, 1, 2])
    with _monitor(tmp_path) as monitor:
        watched = monitor.watch(gradlab.NTXentLoss(), inputs="scores")
        watched(scores, labels).backward()
        record = monitor.step()
    # labels[q] == labels[c]: two positives per row and per column
    assert record["anatomy_i2t_active_positives"] == 2.0
    assert record["anatomy_t2i_active_positives"] == 2.0


@pytest.mark.slow  # compiling takes about 10 s; it still runs in `make test`
def test_a_watched_score_loss_runs_under_torch_compile(tmp_path):
    """Graph breaks are allowed; loss, gradients and the logged anatomy match eager."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(8, 8)
    images, captions = torch.randn(6, 8), torch.randn(18, 8)
    positives = torch.arange(6).unsqueeze(1) == (torch.arange(18) % 6).unsqueeze(0)

    def step(loss_fn):
        normalize = torch.nn.functional.normalize
        loss = loss_fn(normalize(layer(images), dim=1) @ normalize(captions, dim=1).T, positives)
        loss.backward()
        grad = layer.weight.grad.clone()
        layer.zero_grad()
        return loss.detach(), grad

    with _monitor(tmp_path) as monitor:
        watched = monitor.watch(gradlab.NTXentLoss(), inputs="scores")
        eager_loss, eager_grad = step(watched)
        eager = monitor.step()
        compiled_loss, compiled_grad = torch.compile(step, backend="aot_eager")(watched)
        compiled = monitor.step()
    torch.testing.assert_close(compiled_loss, eager_loss)
    torch.testing.assert_close(compiled_grad, eager_grad)
    anatomy_keys = [key for key in eager if key.startswith("anatomy_")]
    assert anatomy_keys
    for key in anatomy_keys:
        assert compiled[key] == pytest.approx(eager[key], rel=1e-5), key


def test_a_last_step_called_by_keywords_is_logged_at_close(tmp_path):
    with Monitor(tmp_path / "run", preset="cheap", every=every(5)) as monitor:
        watched = monitor.watch(gradlab.SmoothAPLoss(0.05))
        for _ in range(3):  # steps 0, 1, 2: only 0 is on the schedule
            embeddings = torch.randn(8, 4, requires_grad=True)
            watched(embeddings=embeddings, labels=torch.arange(8) % 2).backward()
            monitor.step()
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [r["step"] for r in records] == [0, 2]
    assert "loss" in records[1] and "embedding_grad_norm" not in records[1]


@pytest.mark.slow
@pytest.mark.parametrize("fresh_loss", [False, True], ids=["same_loss", "new_loss_each_call"])
def test_watch_called_inside_the_loop_logs_as_one_watch_and_holds_nothing_per_call(
    tmp_path, fresh_loss
):
    """A loop that calls ``monitor.watch(loss)`` at every step (the same loss object, or a loss
    built at every step) logs what one watch before the loop logs, and the Monitor keeps no
    state per call: its memory does not grow with the number of watch calls."""
    import tracemalloc

    generator = torch.Generator().manual_seed(3)
    batches = [torch.randn(12, 5, generator=generator) for _ in range(4)]
    labels = torch.arange(3).repeat_interleave(4)

    def run(folder, inside):
        loss_fn = gradlab.SmoothAPLoss(0.05)
        with Monitor(tmp_path / folder, every=1) as monitor:
            watched = monitor.watch(loss_fn)
            for embeddings in batches:
                if inside:
                    watched = monitor.watch(gradlab.SmoothAPLoss(0.05) if fresh_loss else loss_fn)
                watched(embeddings.clone().requires_grad_(), labels).backward()
                monitor.step()
            not_logged = dict(monitor.not_logged)
        headers, records = read_jsonl(tmp_path / folder / "metrics.jsonl")
        for header in headers:  # the wall-clock start differs when the runs straddle a second
            header.pop("started")
        return (headers, records), not_logged

    assert run("inside", True) == run("once", False)

    with Monitor(tmp_path / "memory", every=1) as monitor:
        loss_fn = gradlab.SmoothAPLoss(0.05)

        def watch_calls(count):
            for _ in range(count):
                monitor.watch(gradlab.SmoothAPLoss(0.05) if fresh_loss else loss_fn)

        watch_calls(50)  # anything made once (caches, first adapters) is made by now
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            watch_calls(500)
            grown = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
    # one kept adapter per call would be 500 of them (about a kilobyte each)
    assert grown < 50_000, grown


@pytest.mark.parametrize(
    "make_loss", [lambda: gradlab.SmoothAPLoss(0.05), lambda: lambda e, y: e.square().mean()],
    ids=["module", "function"],
)
def test_watching_a_loss_this_monitor_watches_already_changes_nothing(tmp_path, make_loss):
    # loss_fn = monitor.watch(loss_fn) inside the loop nested one more wrapper per step: every
    # call counted once per wrapper, and each step took about twice as long as the one before
    with Monitor(tmp_path / "run", preset="cheap", every=1) as monitor:
        original = loss_fn = make_loss()
        for _ in range(4):
            loss_fn = monitor.watch(loss_fn)
            loss_fn(torch.randn(8, 4, requires_grad=True), torch.arange(8) % 2).backward()
            monitor.step()
        assert monitor.calls == 4
        assert loss_fn is not original and monitor.watch(loss_fn) is loss_fn
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [record["step"] for record in records] == [0, 1, 2, 3]


def test_an_unreadable_call_leaves_the_steps_readable_call_and_its_gradient_hooks(tmp_path):
    # the step logs what it held before the unreadable call: the first call's gradient too
    def flattening_smooth_ap(embeddings, labels):
        return gradlab.SmoothAPLoss(0.05)(embeddings.reshape(len(labels), -1), labels)

    generator = torch.Generator().manual_seed(5)
    first = torch.randn(8, 3, generator=generator, requires_grad=True)
    unreadable = torch.randn(8, 1, 3, generator=generator, requires_grad=True)  # not [B, d]
    labels = torch.arange(8) % 2
    with Monitor(tmp_path, every=1) as monitor:
        watched = monitor.watch(flattening_smooth_ap)
        loss = watched(first, labels)
        with pytest.warns(RuntimeWarning, match="a loss call it cannot read was not logged"):
            loss = loss + watched(unreadable, labels)
        loss.backward()
        record = monitor.step()
    with torch.no_grad():
        expected = flattening_smooth_ap(first, labels).item()
    assert record["loss"] == pytest.approx(expected, rel=1e-6)
    assert record["embedding_grad_norm"] == pytest.approx(
        first.grad.double().norm().item(), rel=1e-6)


@pytest.mark.parametrize("make", [lambda: gradlab.SmoothAPLoss(0.05),
                                  lambda: gradlab.NTXentLoss(0.1)])
def test_a_loss_another_monitor_watches_is_read_as_the_loss_it_wraps(tmp_path, make):
    # m2.watch(m1.watch(SmoothAPLoss(0.05))) took the default tau 0.01 (P of another sigmoid)
    # and read the wrapper as a loss of the user's own, in silence
    first = Monitor(tmp_path / "first", preset="full", every=1)
    second = Monitor(tmp_path / "second", preset="full", every=1)
    loss_fn = second.watch(first.watch(make()))
    generator = torch.Generator().manual_seed(0)
    for _ in range(2):
        if isinstance(make(), gradlab.NTXentLoss):
            arguments = (torch.randn(6, 6, generator=generator, requires_grad=True),
                         torch.eye(6, dtype=torch.bool))  # fmt: skip
        else:
            arguments = (torch.randn(12, 6, generator=generator, requires_grad=True),
                         torch.arange(12) % 3)  # fmt: skip
        loss_fn(*arguments).backward()
        first.step()
        second.step()
    first.close()
    second.close()
    (first_header,), first_records = read_jsonl(tmp_path / "first" / "metrics.jsonl")
    (second_header,), second_records = read_jsonl(tmp_path / "second" / "metrics.jsonl")
    assert second_header["config"] == first_header["config"]  # tau and where it came from
    assert second_header.get("not_logged") == first_header.get("not_logged")
    for mine, theirs in zip(second_records, first_records, strict=True):
        assert set(mine) == set(theirs)
        for key, value in theirs.items():  # the same records, scores and dL/dS: the same values
            assert mine[key] == value or (math.isnan(mine[key]) and math.isnan(value)), key
