"""GradlabCallback checks the Monitor option values where they are given, not in Trainer.fit."""

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

