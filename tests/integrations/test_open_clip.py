"""RecordingClipLoss: the logits of open_clip's ClipLoss and SigLipLoss, read by a Monitor.

Against open_clip's own ``loss.py`` loaded by file from the installed package (``import
open_clip`` fails here, see tests/helpers/open_clip_losses.py), against stand-ins of its losses
(where open_clip is not installed at all) and, where ``import open_clip`` works, a tiny
``open_clip.model.CLIP``. References: dL/dlogits written out in float64 loops (softmax
cross-entropy; SigLIP's ``-log sigmoid``).
"""


import math
import warnings

import pytest
import torch

import gradlab
from gradlab import GradlabError
from gradlab.integrations.open_clip import RecordingClipLoss, open_clip_adapter
from gradlab.monitor import (
    ChanceLevel,
    Loss,
    OperatingRegion,
    RelaxationGap,
    Temperature,
    WeightedGradientCounts,
    default_schedule,
    every,
    read_jsonl,
)
from gradlab.monitor.anatomy import anatomy_values
from tests.helpers.open_clip_losses import (
    StandInClipLoss,
    StandInSigLipLoss,
    clip_worker,
    features,
    loss_classes,
    real_open_clip,
    tiny_clip,
)
from tests.helpers.processes import run_two_ranks
from tests.reference import geometry_loops as loops
from tests.reference.open_clip_loops import cross_entropy_grad, logits64, sigmoid_grad

SOURCES = ("loss.py", "stand-in")
"""open_clip's loss.py loaded by file, and the stand-ins (tests/helpers/open_clip_losses.py)."""


def recorded(loss, images, texts, scale, bias=None, output_dict=False):
    """Call the wrapped loss as a logged Monitor call does; backward; the BatchView."""
    wrapper = RecordingClipLoss(loss)
    adapter = open_clip_adapter(wrapper, None)
    with adapter.listening(score_grad=True) as (kept, _):
        value = wrapper(images, texts, scale, bias, output_dict=output_dict)
    batch = adapter.capture([], value, 0.01, recorded=kept, score_grad=True)
    (value["contrastive_loss"] if output_dict else value).backward()
    return batch


def close(actual, expected):
    torch.testing.assert_close(actual.to(torch.float64), torch.as_tensor(expected,
                               dtype=torch.float64), atol=1e-5, rtol=0)  # fmt: skip


@pytest.mark.parametrize("source", SOURCES)
def test_clip_loss_records_both_directions_with_their_gradients(source):
    clip_loss, _ = loss_classes(source)
    images, texts = features(1, 5)
    images.requires_grad_()
    batch = recorded(clip_loss(), images, texts, torch.tensor(10.0))
    i2t, t2i = batch.score_captures
    assert (i2t.direction, t2i.direction) == ("i2t", "t2i")
    per_image = logits64(images.detach(), texts, 10.0)
    per_text = logits64(texts, images.detach(), 10.0)
    close(i2t.scores, per_image)
    close(t2i.scores, torch.tensor(per_text).T)  # t2i: columns are the text queries
    close(i2t.grad, cross_entropy_grad(per_image, lambda row: row, 0.5))
    close(t2i.grad, cross_entropy_grad(per_text, lambda row: row, 0.5).T)
    assert torch.equal(i2t.positives, torch.eye(5, dtype=torch.bool))
    assert torch.equal(t2i.positives, torch.eye(5, dtype=torch.bool))


@pytest.mark.parametrize("source", SOURCES)
def test_siglip_loss_records_the_logits_with_the_bias_as_one_matrix_read_both_ways(source):
    _, siglip_loss = loss_classes(source)
    images, texts = features(1, 4)
    images.requires_grad_()
    batch = recorded(siglip_loss(), images, texts, torch.tensor(10.0), torch.tensor(-3.0))
    (capture,) = batch.score_captures
    assert capture.direction == "both"
    logits = logits64(images.detach(), texts, 10.0, -3.0)
    close(capture.scores, logits)
    close(capture.grad, sigmoid_grad(logits, 4, 4))


@pytest.mark.parametrize("source", SOURCES)
def test_the_monitor_logs_gradlab_s_anatomy_of_the_logits_both_ways(tmp_path, source):
    clip_loss, _ = loss_classes(source)
    images, texts = features(1, 6, seed=3)
    images.requires_grad_()
    with gradlab.Monitor(tmp_path, preset="full", every=1) as monitor:
        loss_fn = monitor.watch(RecordingClipLoss(clip_loss()))
        loss_fn(images, texts, torch.tensor(20.0), output_dict=True)["contrastive_loss"].backward()
        record = monitor.step()
    per_image = torch.tensor(logits64(images.detach(), texts, 20.0), dtype=torch.float64)
    per_text = torch.tensor(logits64(texts, images.detach(), 20.0), dtype=torch.float64)
    eye = torch.eye(6, dtype=torch.bool)
    expected = {
        **anatomy_values("anatomy_i2t_", cross_entropy_grad(per_image.tolist(), int, 0.5),
                         per_image, eye),
        **anatomy_values("anatomy_t2i_", cross_entropy_grad(per_text.tolist(), int, 0.5),
                         per_text, eye),
    }  # fmt: skip
    for key, value in expected.items():
        assert record[key] == pytest.approx(float(value), abs=1e-6, nan_ok=True), key
    # The logged loss of an output_dict call: its contrastive loss.
    labels = torch.arange(6)
    reference = (torch.nn.functional.cross_entropy(per_image, labels)
                 + torch.nn.functional.cross_entropy(per_text, labels)) / 2  # fmt: skip
    assert record["loss"] == pytest.approx(float(reference), rel=1e-5)


@pytest.mark.parametrize("source", SOURCES)
def test_the_monitor_logs_gradlab_s_anatomy_of_the_siglip_logits_both_ways(tmp_path, source):
    _, siglip_loss = loss_classes(source)
    images, texts = features(1, 5, seed=4)
    images.requires_grad_()
    with gradlab.Monitor(tmp_path, preset="full", every=1) as monitor:
        loss_fn = monitor.watch(RecordingClipLoss(siglip_loss()))
        loss_fn(images, texts, torch.tensor(10.0), torch.tensor(-3.0)).backward()
        record = monitor.step()
    logits = logits64(images.detach(), texts, 10.0, -3.0)
    grad = sigmoid_grad(logits, 5, 5)
    scores = torch.tensor(logits, dtype=torch.float64)
    eye = torch.eye(5, dtype=torch.bool)
    expected = {**anatomy_values("anatomy_i2t_", grad, scores, eye),
                **anatomy_values("anatomy_t2i_", grad.T, scores.T, eye)}  # fmt: skip
    for key, value in expected.items():
        assert record[key] == pytest.approx(float(value), abs=1e-6, nan_ok=True), key


@pytest.mark.parametrize("source", SOURCES)
def test_the_wrapper_returns_the_loss_s_value_and_gradients_unchanged(source):
    clip_loss, siglip_loss = loss_classes(source)
    images, texts = features(1, 5)
    for loss, bias in ((clip_loss(), None), (siglip_loss(), torch.tensor(-1.0))):
        grads = []
        for wrapped in (False, True):
            image = images.clone().requires_grad_()
            scale = torch.tensor(10.0, requires_grad=True)
            call = RecordingClipLoss(loss) if wrapped else loss
            if wrapped:
                call.score_recorder = lambda direction, matrix, where: None
            call(image, texts, scale, bias).backward()
            grads.append((image.grad, scale.grad))
        assert torch.equal(grads[0][0], grads[1][0]) and torch.equal(grads[0][1], grads[1][1])
        assert "get_logits" not in loss.__dict__  # restored after the call


@pytest.mark.slow
@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("kind", ["clip", "siglip"])
def test_local_loss_across_two_processes_puts_the_positives_at_rank_offsets(tmp_path, kind,
                                                                            source):  # fmt: skip
    loss_classes(source)  # skips here when open_clip is not installed
    world, size = 2, 3
    run_two_ranks(clip_worker, (str(tmp_path / "init"), str(tmp_path), kind, source))
    images, texts = features(world, size)
    for rank in range(world):
        captures = torch.load(tmp_path / f"rank{rank}.pt")
        assert torch.load(tmp_path / f"rank{rank}_none.pt")  # no geometry of gathered logits
        # Temperature's closed form reads one matrix: not the two of a local loss, not SigLIP's
        assert torch.load(tmp_path / f"rank{rank}_info_nce.pt") is False
        local = slice(rank * size, (rank + 1) * size)
        if kind == "clip":  # local queries x global candidates, both ways
            (d1, s1, p1, g1), (d2, s2, p2, g2) = captures
            assert (d1, d2) == ("i2t", "t2i") and s1.shape == s2.T.shape == (size, world * size)
            per_image = logits64(images[local], texts, 10.0)
            per_text = logits64(texts[local], images, 10.0)
            offset = rank * size
            close(s1, per_image)
            def positive(row, offset=offset):
                return offset + row

            close(g1, cross_entropy_grad(per_image, positive, 0.5))
            close(g2, cross_entropy_grad(per_text, positive, 0.5).T)
            positives = torch.zeros(size, world * size, dtype=torch.bool)
            for row in range(size):
                positives[row, offset + row] = True
            assert torch.equal(p1, positives) and torch.equal(p2, positives.T)
        else:  # the local block, then the other rank's texts as negatives
            ((direction, scores, positives, grad),) = captures
            other = slice((1 - rank) * size, (2 - rank) * size)
            order = torch.cat([texts[local], texts[other]])
            logits = logits64(images[local], order, 10.0, -2.0)
            assert direction == "both" and scores.shape == (size, world * size)
            close(scores, logits)
            close(grad, sigmoid_grad(logits, size, size))
            assert positives[:, :size].equal(torch.eye(size, dtype=torch.bool))
            assert not positives[:, size:].any()


@pytest.mark.slow
@pytest.mark.parametrize("dist_impl", ["bidir", "shift", "gather", "reduce"])
def test_siglip_across_two_processes_records_one_matrix_whatever_the_exchange(tmp_path,
                                                                             dist_impl):
    # "gather" and "reduce" compute the rank's own text block a second time, with weight 0:
    # recorded, its positives came back as negatives in a [B, 3B] matrix
    loss_classes("loss.py")  # skips here when open_clip is not installed
    world, size = 2, 3
    run_two_ranks(clip_worker, (str(tmp_path / "init"), str(tmp_path), "siglip",
                                "loss.py", dist_impl))
    images, texts = features(world, size)
    for rank in range(world):
        ((direction, scores, positives, grad),) = torch.load(tmp_path / f"rank{rank}.pt")
        local = slice(rank * size, (rank + 1) * size)
        other = slice((1 - rank) * size, (2 - rank) * size)
        logits = logits64(images[local], torch.cat([texts[local], texts[other]]), 10.0, -2.0)
        assert direction == "both" and scores.shape == (size, world * size)
        close(scores, logits)
        close(grad, sigmoid_grad(logits, size, size))
        expected = torch.zeros(size, world * size, dtype=torch.bool)
        expected[:, :size] = torch.eye(size, dtype=torch.bool)
        assert torch.equal(positives, expected)


def test_bad_arguments_are_refused():
    with pytest.raises(GradlabError, match="loss must be an open_clip ClipLoss"):
        RecordingClipLoss(torch.nn.Linear(2, 2))
    old_style = StandInClipLoss()
    old_style.forward = lambda image, text, scale, output_dict=False: image.sum()  # < 3.0
    with pytest.raises(GradlabError, match="logit_bias must be None"):
        RecordingClipLoss(old_style)(torch.eye(2), torch.eye(2), torch.tensor(1.0),
                                     torch.tensor(0.5))  # fmt: skip
    adapter = open_clip_adapter(RecordingClipLoss(StandInClipLoss()), None)
    with pytest.raises(GradlabError, match="recorded no score matrix"):
        adapter.capture([], None, 0.01, recorded=[])
    assert open_clip_adapter(StandInClipLoss(), None) is None
    with pytest.raises(GradlabError, match=r"^loss is wrapped already: pass the "
                       r"RecordingClipLoss itself, or the StandInClipLoss it wraps; got "
                       r"RecordingClipLoss\(StandInClipLoss\)$"):
        RecordingClipLoss(RecordingClipLoss(StandInClipLoss()))



def test_the_real_open_clip_losses_are_recorded_like_the_stand_ins():
    open_clip = real_open_clip()
    images, texts = features(1, 5)
    for real, stand_in, bias in (
        (open_clip.loss.ClipLoss(), StandInClipLoss(), None),
        (open_clip.loss.SigLipLoss(), StandInSigLipLoss(), torch.tensor(-2.0)),
    ):
        batches = [recorded(loss, images.clone().requires_grad_(), texts, torch.tensor(10.0),
                            bias) for loss in (real, stand_in)]  # fmt: skip
        for first, second in zip(*(batch.score_captures for batch in batches), strict=True):
            assert first.direction == second.direction
            close(first.scores, second.scores)
            close(first.grad, second.grad)



def test_a_tiny_open_clip_model_trains_with_its_loss_recorded(tmp_path):
    open_clip = real_open_clip()
    model = tiny_clip(open_clip)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    generator = torch.Generator().manual_seed(2)
    images = torch.randn(4, 3, 16, 16, generator=generator)
    texts = torch.randint(0, 40, (4, 8), generator=generator)
    with gradlab.Monitor(tmp_path, preset="full", every=1) as monitor:
        loss_fn = monitor.watch(RecordingClipLoss(open_clip.ClipLoss()))
        for _ in range(2):
            image_features, text_features, logit_scale = model(images, texts)
            batch = recorded(open_clip.ClipLoss(), image_features.detach().requires_grad_(),
                             text_features.detach(), logit_scale.detach())  # fmt: skip
            loss_fn(image_features, text_features, logit_scale).backward()
            optimizer.step()
            optimizer.zero_grad()
            record = monitor.step()
            i2t, _ = batch.score_captures
            per_image = logits64(image_features.detach(), text_features.detach(),
                                 float(logit_scale))  # fmt: skip
            close(i2t.scores, per_image)
            close(i2t.grad, cross_entropy_grad(per_image, int, 0.5))
            assert record["anatomy_i2t_active_negatives_mean"] >= 0


@pytest.mark.parametrize("source", SOURCES)
def test_the_geometry_is_that_of_the_features_in_cosine_units_not_the_logits(tmp_path, source):
    clip_loss, _ = loss_classes(source)
    images, texts = features(1, 6, seed=5)
    images.requires_grad_()
    with gradlab.Monitor(tmp_path, preset="default", every=1) as monitor:
        loss_fn = monitor.watch(RecordingClipLoss(clip_loss()))
        loss_fn(images, texts, torch.tensor(20.0)).backward()  # logits: 20 x cosine
        record = monitor.step()
    a, b = images.detach().tolist(), texts.tolist()
    diagonal = [[i == j for j in range(6)] for i in range(6)]
    expected = loops.logged_geometry(a, b, diagonal)
    assert len(expected) == 6
    for key, value in expected.items():
        assert record[key] == pytest.approx(value, rel=1e-5, abs=1e-9), key


@pytest.mark.parametrize("output_dict", [False, True])
@pytest.mark.parametrize("kind", ["clip", "siglip"])
@pytest.mark.parametrize("source", SOURCES)
def test_the_observed_scale_gradient_is_the_calls_own_whatever_factor_the_loop_puts_on_it(
    tmp_path, source, kind, output_dict,
):
    # Two micro-batches of one optimizer step, the loss weighted 1/4 then 3 (accumulation, a
    # loss weight): the logged dL/dlog s is the last call's own, the parameter's gradient from
    # that call alone with the weight divided out (it came out multiplied by the weight).
    clip_loss, siglip_loss = loss_classes(source)
    loss, bias = (clip_loss(), None) if kind == "clip" else (siglip_loss(), torch.tensor(-3.0))
    logit_scale = torch.nn.Parameter(torch.tensor(math.log(20.0)))
    batches = [features(1, 6, seed=seed) for seed in (7, 8)]
    with gradlab.Monitor(tmp_path, quantities=[Temperature(every(1), scale=logit_scale,
                         log_scale=True, logits=True)]) as monitor:  # fmt: skip
        loss_fn = monitor.watch(RecordingClipLoss(loss))
        for (images, texts), weight in zip(batches, (0.25, 3.0), strict=True):
            value = loss_fn(images, texts, logit_scale.exp(), bias, output_dict=output_dict)
            total = sum(value.values()) if output_dict else value
            (total * weight).backward()
        record = monitor.step()
    alone = torch.nn.Parameter(logit_scale.detach().clone())  # the last call, unweighted
    value = loss(*batches[1], alone.exp(), *(() if bias is None else (bias,)))
    value.backward()
    assert record["temperature_log_scale_grad_observed"] == pytest.approx(float(alone.grad),
                                                                          rel=1e-6)  # fmt: skip
    assert float(logit_scale.grad) != pytest.approx(float(alone.grad), rel=1e-2)


@pytest.mark.parametrize("logits", [True, None])  # None: the wrapper says it records logits
@pytest.mark.parametrize("source", SOURCES)
def test_temperature_reads_the_calls_scale_and_the_sigmoid_loss_has_no_closed_form(tmp_path,
                                                                                     source,
                                                                                     logits):
    # Temperature() without logits=True read the recorded logits as cosines: a closed form
    # about the scale times too large (34.08 for a gradient of 3.095), without a warning
    clip_loss, siglip_loss = loss_classes(source)
    images, texts = features(1, 6, seed=5)
    logit_scale = torch.nn.Parameter(torch.tensor(math.log(20.0)))
    records = {}
    for name, loss, bias in (("clip", clip_loss(), None), ("siglip", siglip_loss(), -3.0)):
        with gradlab.Monitor(tmp_path / name, quantities=[Temperature(every(1), logits=logits)],
                             ) as monitor:  # fmt: skip
            loss_fn = monitor.watch(RecordingClipLoss(loss))
            value = loss_fn(images, texts, logit_scale.exp(),
                            None if bias is None else torch.tensor(bias))  # fmt: skip
            value.backward()
            records[name] = {**monitor.step(), "parameter": float(logit_scale.grad)}
        logit_scale.grad = None
    # ClipLoss: the call's logit_scale (not 1 / the Monitor's tau), and the closed form of
    # CLIP's mean of the two directions, which is the parameter's gradient
    assert records["clip"]["temperature_scale"] == pytest.approx(20.0, rel=1e-6)
    assert records["clip"]["temperature_log_scale_grad"] == pytest.approx(
        records["clip"]["parameter"], rel=1e-4)  # fmt: skip
    # SigLipLoss scores each pair with a sigmoid: no softmax closed form
    assert records["siglip"]["temperature_scale"] == pytest.approx(20.0, rel=1e-6)
    assert "temperature_log_scale_grad" not in records["siglip"]


@pytest.mark.parametrize("source", SOURCES)
def test_the_chance_level_is_clip_s_ln_c_and_not_logged_for_the_sigmoid_loss(tmp_path, source):
    # CLIP's loss averages two InfoNCE means over B = 6 candidates: chance is ln 6. SigLIP's
    # is a sum of binary terms per pair: ln C is no level of it, and the header says so
    clip_loss, siglip_loss = loss_classes(source)
    images, texts = features(1, 6, seed=5)
    records, reasons = {}, {}
    for name, loss, bias in (("clip", clip_loss(), None), ("siglip", siglip_loss(), -3.0)):
        with gradlab.Monitor(tmp_path / name, quantities=[ChanceLevel(every(1))]) as monitor:
            loss_fn = monitor.watch(RecordingClipLoss(loss))
            # open_clip's SigLipLoss is known by its class before any call
            assert ("chance_level" in monitor.not_logged) == (name == "siglip")
            value = loss_fn(images.clone().requires_grad_(), texts, torch.tensor(10.0),
                            None if bias is None else torch.tensor(bias))  # fmt: skip
            value.backward()
            records[name] = {**(monitor.step() or {}), "loss": float(value)}
            reasons[name] = monitor.not_logged.get("chance_level")
    assert records["clip"]["chance_level"] == pytest.approx(math.log(6), rel=1e-12)
    assert records["clip"]["loss_minus_chance"] == pytest.approx(
        records["clip"]["loss"] - math.log(6), rel=1e-6)  # fmt: skip
    assert reasons["clip"] is None
    assert "loss_minus_chance" not in records["siglip"]
    assert reasons["siglip"] == (f"does not apply to {type(siglip_loss()).__name__}: a sigmoid of "
                                 "each pair, no mean of InfoNCE terms, so ln C is not its chance "
                                 "level")  # fmt: skip


def test_a_sigmoid_loss_of_open_clip_s_interface_named_otherwise_has_no_chance_level(tmp_path):
    # a pairwise loss not named after SigLIP: its first call shows one matrix of pairs (the
    # watch cannot know), and from then on ln C is neither logged nor left unexplained
    class PairLoss(torch.nn.Module):
        def get_logits(self, image, text, scale, bias=None):
            return scale * image @ text.T + bias

        def forward(self, image, text, scale, logit_bias=None, output_dict=False):
            logits = self.get_logits(image, text, scale, logit_bias)
            signs = 2 * torch.eye(image.shape[0]) - 1
            return -torch.nn.functional.logsigmoid(signs * logits).sum() / image.shape[0]

    images, texts = features(1, 6, seed=4)
    with gradlab.Monitor(tmp_path, quantities=[Loss(every(1)), ChanceLevel(every(1))]) as monitor:
        loss_fn = monitor.watch(RecordingClipLoss(PairLoss()))
        assert "chance_level" not in monitor.not_logged
        records = []
        for _ in range(2):
            loss_fn(images.clone().requires_grad_(), texts, torch.tensor(10.0),
                    torch.tensor(-3.0)).backward()  # fmt: skip
            records.append(monitor.step() or {})
    assert all("loss" in r and "chance_level" not in r for r in records), records
    assert monitor.not_logged["chance_level"] == (
        "does not apply to PairLoss: a sigmoid of each pair, no mean of InfoNCE terms, so ln C "
        "is not its chance level")  # fmt: skip


def test_a_wrapped_loss_that_declares_no_infonce_mean_has_no_chance_level(tmp_path):
    # the wrapper's adapter keeps the base's reasons: a loss of open_clip's interface that says
    # (gradlab's SoftmaxLogits) it is no mean of InfoNCE terms logs no loss_minus_chance
    from gradlab.losses import SoftmaxLogits

    class SummedClipLoss(StandInClipLoss):
        softmax_logits = SoftmaxLogits(direction="both", info_nce=False)

    images, texts = features(1, 4, seed=2)
    with gradlab.Monitor(tmp_path, quantities=[ChanceLevel(every(1))]) as monitor:
        loss_fn = monitor.watch(RecordingClipLoss(SummedClipLoss()))
        loss_fn(images.clone().requires_grad_(), texts, torch.tensor(10.0)).backward()
        record = monitor.step() or {}
    assert "loss_minus_chance" not in record
    assert monitor.not_logged["chance_level"] == (
        "does not apply to SummedClipLoss: it is no mean of InfoNCE terms, so ln C is not its "
        "chance level")  # fmt: skip


@pytest.mark.parametrize("preset", ["default", "full"])
def test_quantities_of_smooth_ap_s_sigmoid_are_not_read_on_logits(tmp_path, preset):
    # a sigmoid of width tau on logit_scale x cosine measures nothing of CLIP's loss
    clip_loss, _ = loss_classes("stand-in")
    images, texts = features(1, 6, seed=6)
    images.requires_grad_()
    with gradlab.Monitor(tmp_path, preset=preset, every=1) as monitor:
        loss_fn = monitor.watch(RecordingClipLoss(clip_loss()))
        loss_fn(images, texts, torch.tensor(20.0)).backward()
        record = monitor.step()
        reasons = dict(monitor.not_logged)
    for name in ("operating_region", "gradient_counts", "relaxation_gap"):
        if preset == "default" and name == "relaxation_gap":
            continue  # not in the default preset
        assert reasons[name] == (
            "reads SmoothAP's sigmoid at the Monitor's tau on cosine scores; open_clip's "
            "recorded matrix holds logits (logit_scale x cosine)"), name  # fmt: skip
    at_tau = {*OperatingRegion.keys, *WeightedGradientCounts.keys, *RelaxationGap.keys}
    assert not at_tau & set(record) and "margin_mean" in record


@pytest.mark.parametrize(("call", "message"), [
    (lambda i, t: (i[:5], t), r"text_features must have shape \(5, 8\) \(one text per image"),
    (lambda i, t: (i, t[:, :4]), r"text_features must have shape \(6, 8\)"),
    (lambda i, t: (i[0], t), "image_features must be 2-D"),
    (lambda i, t: (i, t.long()), "text_features must have a floating dtype; got torch.int64"
                                 "; pass text_features.float()"),
    (lambda i, t: (i.long(), t), "image_features must have a floating dtype; got torch.int64"
                                 "; pass image_features.float()"),
    (lambda i, t: (i, t.to("meta")), "tensors must be on one device; got image_features on "
                                     "cpu, text_features on meta"),
    (lambda i, t: (i.to("meta"), t), "tensors must be on one device; got image_features on "
                                     "meta, text_features on cpu"),
    (lambda i, t: (i, t.half()), r"image_features and text_features must have one dtype "
                                 r"outside torch.autocast; got torch.float32 and torch.float16"),
    (lambda i, t: (i, t, torch.ones(2)), r"logit_scale must hold one value; got shape \(2,\)"),
    (lambda i, t: (i, t, torch.tensor(10.0), torch.ones(3)), "logit_bias must hold one value"),
    (lambda i, t: (i[:0], t[:0]), r"image_features must hold at least one row \(an image of a "
                                  r"pair\); got shape \(0, 8\)$"),
    (lambda i, t: (i, t, "14"), "logit_scale must be a tensor or a number; got str '14'$"),
    (lambda i, t: (i, t, 10.0, "0"), "logit_bias must be a tensor or a number; got str '0'$"),
    (lambda i, t: (i, t, math.nan), "logit_scale must be finite; got nan$"),
    (lambda i, t: (i, t, 10.0, -math.inf), "logit_bias must be finite; got -inf$"),
])  # fmt: skip
def test_a_bad_call_is_one_error_naming_the_argument(call, message):
    clip_loss, _ = loss_classes("stand-in")
    images, texts = features(1, 6)
    arguments = call(images, texts)
    if len(arguments) == 2:
        arguments = (*arguments, torch.tensor(10.0))
    with pytest.raises(GradlabError, match=message):
        RecordingClipLoss(clip_loss())(*arguments)


@pytest.mark.parametrize("source", SOURCES)
def test_under_autocast_features_of_two_dtypes_are_a_call_the_loss_accepts(tmp_path, source):
    # a bfloat16 image tower beside a float32 text tower under autocast: open_clip's loss
    # casts both in its products, and the wrapper refused the call
    clip_loss, _ = loss_classes(source)
    images, texts = features(1, 6, seed=9)
    logit_scale = torch.nn.Parameter(torch.tensor(math.log(10.0)))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = clip_loss()(images.bfloat16(), texts, logit_scale.exp())
        with gradlab.Monitor(tmp_path, quantities=[Temperature(every(1))]) as monitor:
            loss_fn = monitor.watch(RecordingClipLoss(clip_loss()))
            loss = loss_fn(images.bfloat16(), texts, logit_scale.exp())
            loss.backward()
            record = monitor.step()
    assert loss.item() == expected.item()
    assert record["temperature_log_scale_grad"] == pytest.approx(float(logit_scale.grad),
                                                                 rel=2e-2)  # bfloat16 logits


@pytest.mark.parametrize("inputs", ["embeddings", "in_batch_scores"])
def test_the_wrapper_watched_with_another_form_is_refused_at_watch(tmp_path, inputs):
    # it was read as embeddings: the call warned that logit_scale "must be 2-D positives"
    clip_loss, _ = loss_classes("stand-in")
    with gradlab.Monitor(tmp_path, every=1) as monitor:
        with pytest.raises(GradlabError) as caught:
            monitor.watch(RecordingClipLoss(clip_loss()), inputs=inputs)
        assert str(caught.value) == (
            "RecordingClipLoss is read through the logits its loss computes, so it is watched "
            f"with inputs=None (or 'scores'); got inputs={inputs!r}")
        monitor.watch(RecordingClipLoss(clip_loss()), inputs="scores")  # its own form


@pytest.mark.parametrize("source", SOURCES)
def test_watching_the_bare_loss_names_its_wrapper(tmp_path, source):
    clip_loss, siglip_loss = loss_classes(source)
    with gradlab.Monitor(tmp_path, every=1) as monitor:
        for loss in (clip_loss(), siglip_loss()):
            with pytest.raises(GradlabError, match=r"watch it wrapped: monitor.watch\("
                               r"gradlab.integrations.open_clip.RecordingClipLoss\("):
                monitor.watch(loss)
        monitor.watch(RecordingClipLoss(clip_loss()))  # the wrapper is watched


def test_a_logit_scale_given_as_a_number_is_read_as_the_scale(tmp_path):
    # open_clip's losses multiply by whatever they are given: a number works as a tensor does
    clip_loss, _ = loss_classes("stand-in")
    images, texts = features(1, 6, seed=7)
    images.requires_grad_()
    with gradlab.Monitor(tmp_path, quantities=[Temperature(every(1), logits=True)]) as monitor:
        loss_fn = monitor.watch(RecordingClipLoss(clip_loss()))
        loss_fn(images, texts, 20.0).backward()
        record = monitor.step()
    assert record["temperature_scale"] == 20.0


@pytest.mark.parametrize("source", SOURCES)
def test_a_parameter_given_as_logit_scale_is_a_call_like_any_other(tmp_path, source):
    # a model that holds s itself: the wrapper kept the call's scale as a module attribute,
    # which registered the Parameter, and the call failed (KeyError) half-patched
    clip_loss, _ = loss_classes(source)
    images, texts = features(1, 6, seed=5)
    scale = torch.nn.Parameter(torch.tensor(10.0))
    expected = clip_loss()(images, texts, scale)
    (expected_grad,) = torch.autograd.grad(expected, scale)
    wrapper = RecordingClipLoss(clip_loss())
    with gradlab.Monitor(tmp_path, quantities=[Loss(every(1))]) as monitor:
        loss_fn = monitor.watch(wrapper)
        for _ in range(2):  # the second call finds nothing left of the first
            loss = loss_fn(images, texts, scale)
            (grad,) = torch.autograd.grad(loss, scale)
            monitor.step()
    assert loss.item() == expected.item() and torch.equal(grad, expected_grad)
    assert list(wrapper.parameters()) == [] and wrapper.call_scale is None
    assert wrapper.loss.get_logits.__func__ is type(wrapper.loss).get_logits


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("kind", ["clip", "siglip"])
def test_close_adds_no_last_step_and_says_nothing_for_the_recorded_logits(tmp_path, source,
                                                                          kind):  # fmt: skip
    # the logits are recorded during a logged call only: close() read the last call again
    # and warned that it recorded no matrix (ClipLoss) or that its tensors had changed in
    # place (SigLipLoss, whose logit_bias the optimizer moves)
    clip_loss, siglip_loss = loss_classes(source)
    images, texts = features(1, 6, seed=2)
    bias = torch.nn.Parameter(torch.tensor(-3.0))
    steps = 24
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        monitor = gradlab.Monitor(tmp_path)  # the default schedule
        loss_fn = monitor.watch(RecordingClipLoss(siglip_loss() if kind == "siglip"
                                                  else clip_loss()))  # fmt: skip
        optimizer = torch.optim.SGD([bias], lr=0.1)
        for _ in range(steps):
            loss = loss_fn(images.requires_grad_(), texts, torch.tensor(10.0),
                           bias if kind == "siglip" else None)  # fmt: skip
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            monitor.step()
        monitor.close()
    schedule = default_schedule()
    logged = [record["step"] for record in read_jsonl(tmp_path / "metrics.jsonl")[1]]
    assert logged == [step for step in range(steps) if schedule(step)]


def _said_of_temperature(tmp_path, quantity, logit_scale):
    """What a logged ClipLoss step with ``quantity`` warned (gradlab's warnings only)."""
    clip_loss, _ = loss_classes("stand-in")
    images, texts = features(1, 6, seed=5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, quantities=[quantity]) as monitor:
            loss_fn = monitor.watch(RecordingClipLoss(clip_loss()))
            loss_fn(images, texts, logit_scale.exp()).backward()
            record = monitor.step()
    return record, [str(w.message) for w in caught if "gradlab" in str(w.message)]


@pytest.mark.parametrize(("settings", "held", "beyond"), [
    ({"clamp": (0.0, math.log(100))}, 20.0, True),  # log bounds on s itself: 20 > 4.6
    ({"log_scale": True, "clamp": (0.0, math.log(100))}, math.log(20.0), False),
    ({"log_scale": True, "clamp": (0.0, math.log(20.0))}, math.log(20.0), False),  # on it
    ({"clamp": (1.0, 20.0)}, 20.0, False),
    ({"clamp": (1.0, 10.0)}, 20.0, True),  # past it: never clamped, or other units
    ({"log_scale": True, "clamp": (3.5, 100.0)}, math.log(20.0), True),  # 3.0 < 3.5
])  # fmt: skip
def test_a_parameter_past_its_clamp_is_said_to_be_in_other_units(tmp_path, settings, held,
                                                                  beyond):  # fmt: skip
    # Temperature(clamp=(0, ln 100)) without log_scale compared s = 20 with ln 100 and logged
    # a clamp hit without a word
    logit_scale = torch.nn.Parameter(torch.tensor(math.log(20.0)))
    record, said = _said_of_temperature(tmp_path, Temperature(every(1), **settings), logit_scale)
    low, high = settings["clamp"]
    assert record["temperature_clamp_hit"] == float(not low < held < high)
    past = [message for message in said if "lies past its clamp" in message]
    assert len(past) == int(beyond), said
    if beyond:
        what = "log s" if settings.get("log_scale") else "s"
        assert f"the parameter as held, {what} = {held:.4g}, lies past its clamp=" in past[0]


def test_a_scale_computed_from_the_parameter_is_refused_naming_what_to_pass():
    # Temperature(scale=model.logit_scale.exp()) logged the value at construction at every
    # step while the parameter trained, and read .grad of a non-leaf tensor
    logit_scale = torch.nn.Parameter(torch.tensor(math.log(20.0)))
    with pytest.raises(GradlabError) as caught:
        Temperature(every(1), scale=logit_scale.exp())
    assert str(caught.value) == (
        "scale must be the parameter itself, not a tensor computed from it (made by "
        "ExpBackward0): it keeps the value it had when made while the parameter trains; pass "
        "the parameter (open_clip's log s: scale=model.logit_scale, log_scale=True) or a "
        "callable returning the scale (scale=lambda: model.logit_scale.exp())")
    with torch.no_grad():  # a constant: a number as good as any
        Temperature(every(1), scale=logit_scale.exp())
    Temperature(every(1), scale=lambda: logit_scale.exp())


def test_a_log_scale_parameter_read_as_the_scale_is_said_to_need_log_scale(tmp_path):
    logit_scale = torch.nn.Parameter(torch.tensor(math.log(20.0)))
    record, said = _said_of_temperature(tmp_path, Temperature(every(1), scale=logit_scale),
                                        logit_scale)  # fmt: skip
    assert record["temperature_scale"] == pytest.approx(math.log(20.0), rel=1e-6)  # read as s
    (disagree,) = [message for message in said if "disagree" in message]
    assert "A parameter holding log s (open_clip's logit_scale) needs log_scale=True" in disagree
