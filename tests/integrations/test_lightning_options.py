"""GradlabCallback checks the Monitor option values where they are given, not in Trainer.fit."""

import pickle

import pytest

from tests.helpers.monitor_options import BAD_OPTIONS

pytest.importorskip("lightning")
from gradlab import GradlabError
from gradlab.integrations.lightning import GradlabCallback


@pytest.mark.parametrize(("kwargs", "message"), BAD_OPTIONS)
def test_bad_monitor_option_values_are_refused_by_the_callback(tmp_path, kwargs, message):
    with pytest.raises(GradlabError, match=message):
        GradlabCallback(tmp_path / "run", **kwargs)
    assert not (tmp_path / "run").exists()



def test_a_pickled_callback_with_every_5_still_logs_every_fifth_step(tmp_path):
    """Lightning's ddp_spawn pickles the callbacks to start its processes."""
    callback = pickle.loads(pickle.dumps(GradlabCallback(tmp_path / "run", every=5)))
    assert callback.monitor is None and callback.log_dir == tmp_path / "run"
    quantities = callback.options.make_quantities()
    assert quantities
    for quantity in quantities:
        assert [s for s in range(23) if quantity.should_compute(s)] == [0, 5, 10, 15, 20]


def test_a_loss_restored_from_a_checkpoint_is_watched_again_without_a_takeover_warning(tmp_path):
    # load_from_checkpoint unpickles the module's watched loss with a copy of its callback:
    # watching it with the new callback warned that "another GradlabCallback" lost it
    import warnings

    import gradlab

    first = GradlabCallback(tmp_path / "a")
    restored = pickle.loads(pickle.dumps(first.watch(gradlab.SmoothAPLoss(0.05))))
    second = GradlabCallback(tmp_path / "b")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        watched = second.watch(restored)
    assert second.watch(watched) is watched  # now the second's own
    with pytest.warns(RuntimeWarning, match="was watched by another GradlabCallback"):
        GradlabCallback(tmp_path / "c").watch(first.watch(gradlab.SmoothAPLoss(0.05)))
