"""A watched loss module stays the loss's module: a model that holds it still trains and saves
the loss's own parameters (learnable class proxies, a learnable temperature), with the same
state_dict keys as without the Monitor."""

from __future__ import annotations

import copy
import pickle

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import gradlab
from gradlab.monitor.watched import WatchedLoss

LABELS = torch.arange(4).repeat_interleave(2)


class ProxyLoss(nn.Module):
    """Learnable class proxies, as ProxyAnchor's or ArcFace's weights, and a call counter."""

    def __init__(self):
        super().__init__()
        self.proxies = nn.Parameter(torch.randn(4, 3, generator=torch.Generator().manual_seed(0)))
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))
        self.temperature = 0.1

    def forward(self, embeddings, labels):
        self.calls += 1
        logits = F.normalize(embeddings, dim=1) @ F.normalize(self.proxies, dim=1).T
        return F.cross_entropy(logits / self.temperature, labels)


class Model(nn.Module):
    def __init__(self, loss_fn):
        super().__init__()
        self.encoder = nn.Linear(5, 3)
        self.loss_fn = loss_fn


def _train(model, steps=3):
    torch.manual_seed(1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    for _ in range(steps):
        inputs = torch.randn(8, 5)
        model.loss_fn(model.encoder(inputs), LABELS).backward()
        optimizer.step()
        optimizer.zero_grad()


def test_the_loss_parameters_are_trained_and_saved_as_without_the_monitor(tmp_path):
    torch.manual_seed(0)
    plain = Model(ProxyLoss())
    watched_model = Model(ProxyLoss())
    watched_model.load_state_dict(plain.state_dict())
    with gradlab.Monitor(tmp_path, preset="cheap", every=1) as monitor:
        watched_model.loss_fn = monitor.watch(watched_model.loss_fn)
        assert isinstance(watched_model.loss_fn, WatchedLoss)
        _train(plain)
        _train(watched_model)
    assert plain.state_dict().keys() == watched_model.state_dict().keys()
    for key, value in plain.state_dict().items():
        assert torch.equal(value, watched_model.state_dict()[key]), key
    assert not torch.equal(plain.loss_fn.proxies, ProxyLoss().proxies)  # the proxies moved
    assert int(watched_model.loss_fn.calls) == 3  # the buffer is the loss's


def test_a_checkpoint_loads_into_the_loss_itself(tmp_path):
    loss = ProxyLoss()
    with gradlab.Monitor(tmp_path, preset="cheap") as monitor:
        model = Model(monitor.watch(loss))
        state = {key: torch.zeros_like(value) for key, value in model.state_dict().items()}
        model.load_state_dict(state)
    assert torch.count_nonzero(loss.proxies) == 0 and int(loss.calls) == 0


def test_moving_and_modes_reach_the_loss(tmp_path):
    loss = ProxyLoss()
    with gradlab.Monitor(tmp_path, preset="cheap") as monitor:
        watched = monitor.watch(loss)
        watched.to(torch.float64)
        assert loss.proxies.dtype == torch.float64 and watched.proxies is loss.proxies
        watched.eval()
        assert not loss.training and not watched.training
        watched.train()
        assert loss.training


def test_the_loss_attributes_read_through_and_a_function_stays_a_function(tmp_path):
    def mean_square(embeddings, labels):
        return (embeddings**2).mean()

    with gradlab.Monitor(tmp_path, preset="cheap") as monitor:
        watched = monitor.watch(gradlab.SmoothAPLoss(0.05))
        assert watched.tau == 0.05 and watched.degenerate_batches == 0
        assert repr(watched) == "watched SmoothAPLoss(tau=0.05, include_query=False)"
        assert not isinstance(monitor.watch(mean_square), nn.Module)
        with pytest.raises(AttributeError, match="no_such_attribute"):
            watched.no_such_attribute  # noqa: B018


def test_an_attribute_set_on_the_watched_loss_is_set_on_the_loss(tmp_path):
    # watched.tau = 0.05 landed on the wrapper: it read back 0.05 while the loss computed at
    # 0.01 (and the Monitor read 0.01)
    loss = gradlab.SmoothAPLoss(0.01)
    embeddings, labels = torch.randn(8, 3), torch.arange(8) % 2
    with gradlab.Monitor(tmp_path, preset="cheap") as monitor:
        watched = monitor.watch(loss)
        watched.tau = 0.05
        assert loss.tau == 0.05 and "tau" not in watched.__dict__
        assert torch.equal(watched(embeddings, labels),
                           gradlab.SmoothAPLoss(0.05)(embeddings, labels))  # fmt: skip
        watched.eval()  # the wrapper's own mode still is the wrapper's, and reaches the loss
        assert not watched.training and not loss.training

    def weighted(embeddings, labels):
        return weighted.weight * embeddings.sum()

    weighted.weight = 1.0
    with gradlab.Monitor(tmp_path / "function", preset="cheap") as monitor:
        watched_function = monitor.watch(weighted)
        watched_function.weight = 2.0  # the function's own attribute
        watched_function.note = "new"  # no such attribute on the loss: the wrapper's
    assert (weighted.weight, "note" in weighted.__dict__, watched_function.note) == (
        2.0, False, "new")


def test_the_lightning_callback_s_watched_loss_is_a_module_that_pickles(tmp_path):
    # ddp_spawn pickles the LightningModule, its watched loss included
    pytest.importorskip("lightning")
    from gradlab.integrations.lightning import GradlabCallback

    lightning_watched = GradlabCallback(tmp_path / "l").watch(ProxyLoss())
    assert "loss_fn.proxies" in Model(lightning_watched).state_dict()  # the model holds them
    again = pickle.loads(pickle.dumps(lightning_watched))
    assert torch.equal(again.proxies, lightning_watched.proxies) and again.callback.monitor is None


def test_the_trainer_callback_s_watched_loss_is_a_module_too():
    pytest.importorskip("transformers")
    from gradlab.integrations.transformers import GradlabTrainerCallback

    watched = GradlabTrainerCallback().watch(ProxyLoss())
    assert "loss_fn.proxies" in Model(watched).state_dict() and watched.temperature == 0.1


def test_the_watched_module_is_named_after_the_loss_keeps_its_mode_and_passes_keywords(tmp_path):
    loss = ProxyLoss().eval()
    with gradlab.Monitor(tmp_path, preset="cheap") as monitor:
        watched = monitor.watch(loss)
        assert watched.__name__ == "ProxyLoss" and watched.training is False
        assert monitor.watch(ProxyLoss()).training is True
        embeddings = torch.randn(8, 3)
        assert torch.equal(watched(embeddings, labels=LABELS), loss(embeddings, LABELS))


def test_dunder_names_are_not_read_through(tmp_path):
    # copy, pickle and other protocols probe dunder names: the loss's own must not answer
    loss = ProxyLoss()
    loss.__probe__ = "the loss's"
    with gradlab.Monitor(tmp_path, preset="cheap") as monitor:
        watched = monitor.watch(loss)
    with pytest.raises(AttributeError, match="__probe__"):
        watched.__probe__  # noqa: B018


def mean_square(embeddings, labels):
    """A loss function at module level (picklable by reference)."""
    return (embeddings**2).mean()


def _watchers(tmp_path):
    """Each way to watch a loss: the Monitor's, Lightning's and the Trainer's callbacks."""
    monitor = gradlab.Monitor(tmp_path / "m", preset="cheap", every=1)
    watchers = {"Monitor.watch": monitor.watch}
    try:
        from gradlab.integrations.lightning import GradlabCallback

        watchers["GradlabCallback.watch"] = GradlabCallback(tmp_path / "l").watch
    except gradlab.GradlabError:  # the extra is missing
        pass
    try:
        from gradlab.integrations.transformers import GradlabTrainerCallback

        watchers["GradlabTrainerCallback.watch"] = GradlabTrainerCallback().watch
    except gradlab.GradlabError:
        pass
    return monitor, watchers


@pytest.mark.parametrize("how", ["Monitor.watch", "GradlabCallback.watch",
                                 "GradlabTrainerCallback.watch"])  # fmt: skip
def test_a_deep_copy_of_the_model_holds_the_loss_itself_with_its_own_parameters(tmp_path, how):
    # An EMA or SWA copy (copy.deepcopy of the model): its loss must read its own proxies, not
    # the original's, and its calls are not the watched training's.
    monitor, watchers = _watchers(tmp_path)
    if how not in watchers:
        pytest.skip(f"{how}: its extra is not installed")
    with monitor:
        loss = ProxyLoss()
        model = Model(watchers[how](loss))
        model.same_loss = loss  # a second reference: the copy keeps them one object
        twin = copy.deepcopy(model)
        assert type(twin.loss_fn) is ProxyLoss and twin.same_loss is twin.loss_fn
        assert any(p is twin.loss_fn.proxies for p in twin.parameters())
        assert twin.loss_fn.proxies.data_ptr() != model.loss_fn.proxies.data_ptr()
        with torch.no_grad():
            twin.loss_fn.proxies.mul_(-1.0)
        embeddings = torch.randn(8, 3, generator=torch.Generator().manual_seed(2))
        reference = ProxyLoss()
        with torch.no_grad():
            reference.proxies.copy_(-model.loss_fn.proxies)
        assert torch.equal(twin.loss_fn(embeddings, LABELS), reference(embeddings, LABELS))
        assert monitor.calls == 0  # the copy's call fed no Monitor
        assert copy.deepcopy(watchers[how](mean_square)) is mean_square  # a function loss too


def test_a_saved_model_loads_with_the_loss_alone_and_the_original_stays_watched(tmp_path):
    # torch.save(model) pickles the whole model: the Monitor (an open run folder) stays here
    with gradlab.Monitor(tmp_path / "m", preset="cheap", every=1) as monitor:
        model = Model(monitor.watch(ProxyLoss()))
        function_loss = monitor.watch(mean_square)
        torch.save({"model": model, "function": function_loss}, tmp_path / "whole.pt")
        loaded = torch.load(tmp_path / "whole.pt", weights_only=False)
        embeddings = torch.randn(8, 3, generator=torch.Generator().manual_seed(3))
        expected = model.loss_fn.__wrapped__(embeddings, LABELS)
        assert torch.equal(loaded["model"].loss_fn(embeddings, LABELS), expected)
        assert loaded["function"] is mean_square and monitor.calls == 0
        model.loss_fn(embeddings, LABELS)
        function_loss(embeddings, LABELS)
        assert monitor.calls == 2  # the originals are still watched
        assert monitor.step() is not None


def test_a_saved_model_loads_the_loss_itself_not_a_wrapper_that_says_watched(tmp_path):
    # as a deep copy does: a loaded WatchedLoss read "watched ProxyLoss" with no Monitor behind
    # it, and watching it again gave "watched watched ProxyLoss"
    with gradlab.Monitor(tmp_path / "m", preset="cheap", every=1) as monitor:
        torch.save(Model(monitor.watch(ProxyLoss())), tmp_path / "whole.pt")
    loaded = torch.load(tmp_path / "whole.pt", weights_only=False)
    assert type(loaded.loss_fn) is ProxyLoss
    assert "loss_fn.proxies" in loaded.state_dict()


class ScaledLoss:
    """A loss object that is not a module and has no ``__name__``: state in plain attributes."""

    def __init__(self):
        self.scale = torch.tensor(2.0)

    def __call__(self, embeddings, labels):
        return self.scale * embeddings.square().mean()


def test_a_watched_function_is_named_and_read_through_as_the_loss(tmp_path):
    mean_square.tau = 0.25  # an attribute of the function, read through the watched call
    try:
        with gradlab.Monitor(tmp_path, preset="cheap") as monitor:
            watched_function = monitor.watch(mean_square)
            watched_object = monitor.watch(ScaledLoss())
        assert watched_function.__name__ == "mean_square" and watched_function.tau == 0.25
        assert watched_object.__name__ == "ScaledLoss" and torch.equal(watched_object.scale,
                                                                        torch.tensor(2.0))
        blank = type(watched_function).__new__(type(watched_function))  # as copy sees it
        for missing in ("_call", "__wrapped__"):  # no recursion through the missing loss
            with pytest.raises(AttributeError, match=f"^{missing}$"):
                getattr(blank, missing)
        with pytest.raises(AttributeError, match="no_such_attribute"):
            watched_function.no_such_attribute  # noqa: B018
        with pytest.raises(AttributeError, match="__probe__"):
            mean_square.__probe__ = "the loss's"
            watched_function.__probe__  # noqa: B018
    finally:
        del mean_square.tau
        mean_square.__dict__.pop("__probe__", None)


def test_a_deep_copy_of_a_watched_loss_object_shares_the_copy_with_the_rest(tmp_path):
    monitor, watchers = _watchers(tmp_path)
    with monitor:
        for how, watch in watchers.items():
            loss = ScaledLoss()
            twin_loss, twin_watched = copy.deepcopy([loss, watch(loss)])  # one memo: one copy
            assert twin_watched is twin_loss and twin_loss is not loss, how
            assert twin_loss.scale is not loss.scale and torch.equal(twin_loss.scale, loss.scale)


def test_a_loss_watched_again_by_its_monitor_comes_back_as_it_is(tmp_path):
    # watch() inside the loop: a module loss or a function watched twice was wrapped twice
    def plain(embeddings, labels):
        return embeddings.sum()

    with gradlab.Monitor(tmp_path, every=1) as monitor:
        for loss_fn in (ProxyLoss(), plain):
            watched = monitor.watch(loss_fn)
            assert monitor.watch(watched) is watched
            assert monitor.watch(monitor.watch(watched)) is watched
        other = gradlab.Monitor(tmp_path / "other", every=1)  # another Monitor's: wrapped again
        again = other.watch(watched)
        assert again is not watched
        other.close()


def test_an_attribute_deleted_from_a_watched_loss_object_goes_where_it_was_set(tmp_path):
    loss = ScaledLoss()
    loss.tau = 0.1
    with gradlab.Monitor(tmp_path, preset="cheap") as monitor:
        watched = monitor.watch(loss)
        watched.note = "the wrapper's"  # no such attribute on the loss
        del watched.tau  # the loss's: deleted from the loss
        del watched.note  # the wrapper's: deleted from the wrapper
        assert not hasattr(loss, "tau") and "note" not in vars(watched)
        assert torch.equal(watched.scale, torch.tensor(2.0))  # the rest read through still
        with pytest.raises(AttributeError):
            del watched.no_such_attribute


def test_an_attribute_deleted_from_a_watched_loss_module_goes_where_it_was_set(tmp_path):
    loss = ProxyLoss()
    with gradlab.Monitor(tmp_path, preset="cheap") as monitor:
        watched = monitor.watch(loss)
        watched.note = "the wrapper's"
        watched.extra = nn.Parameter(torch.zeros(2))  # a new parameter: the registries both share
        del watched.temperature  # a plain attribute of the loss: deleted from the loss
        del watched.note
        del watched.extra  # a registered tensor: from the shared registry, on either side
        del watched.calls  # a buffer of the loss
        assert not hasattr(loss, "temperature") and "note" not in vars(watched)
        assert ("extra" in dict(loss.named_parameters()), "calls" in dict(loss.named_buffers()),
                "calls" in vars(loss)) == (False, False, False)  # fmt: skip
        assert [name for name, _ in watched.named_parameters()] == ["proxies"]
        with pytest.raises(AttributeError):
            del watched.no_such_attribute


class CallingLoss:
    """A loss object with an attribute named as the wrapper's own (``_call``)."""

    __probe__ = "the loss's"  # a dunder name the loss has

    def __init__(self):
        self._call = "the loss's own"

    def __call__(self, embeddings, labels):
        return embeddings.square().mean()


def test_what_the_wrapper_sets_for_itself_stays_its_own_where_the_loss_has_the_name(tmp_path):
    loss = CallingLoss()
    embeddings = torch.randn(8, 3, requires_grad=True)
    with gradlab.Monitor(tmp_path, preset="cheap") as monitor:
        watched = monitor.watch(loss)
        watched.__probe__ = "the wrapper's"  # a dunder name: never the loss's
        value = watched(embeddings, LABELS)
        value.backward()
        monitor.step()
    assert torch.equal(value, embeddings.square().mean())
    assert (loss._call, loss.__probe__, "__probe__" in vars(loss)) == (
        "the loss's own", "the loss's", False)
    assert vars(watched)["__probe__"] == "the wrapper's"
