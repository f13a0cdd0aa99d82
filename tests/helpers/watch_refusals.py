"""What ``watch`` says when it refuses a loss, through the Monitor and through the Hugging Face
callback (both must say the same)."""

import pytest

import gradlab
from gradlab import GradlabError
from gradlab.integrations.transformers import GradlabTrainerCallback


def watch_refusals(loss, folder) -> tuple[str, str]:
    """``(the Monitor's message, the callback's message)`` refusing ``loss``; the Monitor
    writes into ``folder``."""
    with gradlab.Monitor(folder) as monitor, pytest.raises(GradlabError) as by_monitor:
        monitor.watch(loss)
    with pytest.raises(GradlabError) as by_callback:
        GradlabTrainerCallback().watch(loss)
    return str(by_monitor.value), str(by_callback.value)
