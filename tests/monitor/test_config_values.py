"""MonitorConfig: what it stores after checking, and the message of the options that exclude
each other (the user's only hint which two options clash)."""

from __future__ import annotations

import pytest

from gradlab import GradlabError
from gradlab.monitor import MonitorConfig


@pytest.mark.parametrize("tau", [1, 2, 0.05])
def test_tau_is_stored_as_a_float(tau):
    options = MonitorConfig(tau=tau)
    assert type(options.tau) is float and options.tau == tau


def test_tau_none_stays_none():
    assert MonitorConfig().tau is None


def test_resume_and_overwrite_together_are_refused_naming_both():
    with pytest.raises(GradlabError) as caught:
        MonitorConfig(resume=True, overwrite=True)
    assert str(caught.value) == "resume=True and overwrite=True exclude each other; choose one"
