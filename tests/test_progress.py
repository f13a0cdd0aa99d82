"""gradlab.progress as a user meets it: which mode ``"auto"`` picks, the exact ``gradlab: ...``
lines that plain logs get (start, done, stopped, counts and units), silence in ``"off"`` mode, a
tqdm bar in ``"bar"`` mode, and the error for a mode that does not exist."""

from __future__ import annotations

import re
import sys
import time

import pytest

from gradlab.errors import GradlabError
from gradlab.extras import install_hint
from gradlab.progress import MODES, progress, progress_mode, set_progress_mode


@pytest.fixture
def set_mode():
    """``set_progress_mode`` for the test; the process-global mode goes back to "auto" after."""
    yield set_progress_mode
    set_progress_mode("auto")


@pytest.fixture
def lines(set_mode):
    set_mode("lines")


def _expect(err: str, *expected: str) -> None:
    """``err`` is exactly the ``expected`` lines, where ``<s>`` stands for the seconds."""
    found = err.splitlines()
    assert len(found) == len(expected), found
    for line, want in zip(found, expected, strict=True):
        pattern = re.escape(want).replace(re.escape("<s>"), r"\d+\.\d")
        assert re.fullmatch(pattern, line), (want, line)


class _Stderr:
    """A stand-in for sys.stderr that answers ``isatty`` with ``tty``."""

    def __init__(self, tty: bool):
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


# --- choosing the mode ---------------------------------------------------------------------------


def test_modes_are_auto_bar_lines_and_off():
    assert MODES == ("auto", "bar", "lines", "off")


@pytest.mark.parametrize("mode", ["bar", "lines", "off"])
def test_a_mode_that_is_set_is_the_mode_in_force(set_mode, mode):
    set_mode(mode)
    assert progress_mode() == mode


def test_auto_on_a_terminal_means_bar(set_mode, monkeypatch):
    set_mode("auto")
    monkeypatch.setattr(sys, "stderr", _Stderr(tty=True))
    assert progress_mode() == "bar"


def test_auto_off_a_terminal_means_lines(set_mode, monkeypatch):
    set_mode("auto")
    monkeypatch.setattr(sys, "stderr", _Stderr(tty=False))
    assert progress_mode() == "lines"


def test_auto_with_a_stderr_that_cannot_say_means_lines(set_mode, monkeypatch):
    set_mode("auto")
    monkeypatch.setattr(sys, "stderr", object())
    assert progress_mode() == "lines"


def test_auto_with_stderr_captured_prints_plain_lines(set_mode, capsys):
    set_mode("auto")  # pytest's captured stderr is no terminal
    assert list(progress([1, 2], desc="auto stage")) == [1, 2]
    _expect(
        capsys.readouterr().err,
        "gradlab: auto stage (2 steps) ...",
        "gradlab: auto stage done (2 steps, <s> s)",
    )


def test_an_unknown_mode_is_refused_by_name_and_leaves_the_mode_as_it_was(set_mode):
    set_mode("off")
    with pytest.raises(GradlabError) as caught:
        set_mode("x")
    expected = "progress mode must be one of ['auto', 'bar', 'lines', 'off']; got 'x'"
    assert str(caught.value) == expected
    assert progress_mode() == "off"


# --- "lines": one line when a stage starts, one when it ends -------------------------------------


def test_a_sized_iterable_is_counted_from_its_length(lines, capsys):
    assert list(progress(["a", "b", "c"], desc="letters")) == ["a", "b", "c"]
    _expect(
        capsys.readouterr().err,
        "gradlab: letters (3 steps) ...",
        "gradlab: letters done (3 steps, <s> s)",
    )


def test_a_generator_has_no_total_and_says_how_many_steps_it_took(lines, capsys):
    assert list(progress((n * n for n in range(4)), desc="squares")) == [0, 1, 4, 9]
    _expect(
        capsys.readouterr().err,
        "gradlab: squares ...",
        "gradlab: squares done (4 steps, <s> s)",
    )


def test_one_step_is_singular(lines, capsys):
    assert list(progress([7], desc="single")) == [7]
    _expect(
        capsys.readouterr().err,
        "gradlab: single (1 step) ...",
        "gradlab: single done (1 step, <s> s)",
    )


def test_the_unit_names_what_is_counted(lines, capsys):
    assert list(progress(range(2), desc="training", unit="epoch")) == [0, 1]
    _expect(
        capsys.readouterr().err,
        "gradlab: training (2 epochs) ...",
        "gradlab: training done (2 epochs, <s> s)",
    )


def test_an_explicit_total_wins_over_the_length(lines, capsys):
    assert list(progress(range(4), total=3, desc="capped")) == [0, 1, 2, 3]
    _expect(
        capsys.readouterr().err,
        "gradlab: capped (3 steps) ...",
        "gradlab: capped done (4 steps, <s> s)",
    )


def test_a_generator_with_a_total_announces_it(lines, capsys):
    assert list(progress(iter("ab"), total=2, desc="given")) == ["a", "b"]
    _expect(
        capsys.readouterr().err,
        "gradlab: given (2 steps) ...",
        "gradlab: given done (2 steps, <s> s)",
    )


def test_manual_updates_add_up(lines, capsys):
    bar = progress(total=6, desc="manual")
    bar.update()
    bar.update(2)
    bar.update(3)
    bar.close()
    _expect(
        capsys.readouterr().err,
        "gradlab: manual (6 steps) ...",
        "gradlab: manual done (6 steps, <s> s)",
    )


def test_set_postfix_adds_nothing_to_the_log(lines, capsys):
    bar = progress(total=1, desc="quiet detail")
    bar.set_postfix(loss=0.5)
    bar.set_postfix({"acc": 1.0})
    bar.update()
    bar.close()
    _expect(
        capsys.readouterr().err,
        "gradlab: quiet detail (1 step) ...",
        "gradlab: quiet detail done (1 step, <s> s)",
    )


def test_closing_twice_says_done_once(lines, capsys):
    bar = progress(total=1, desc="twice")
    bar.update()
    bar.close()
    bar.close()
    _expect(
        capsys.readouterr().err,
        "gradlab: twice (1 step) ...",
        "gradlab: twice done (1 step, <s> s)",
    )


def test_closing_after_the_loop_says_done_once(lines, capsys):
    bar = progress([1, 2], desc="loop then close")
    assert list(bar) == [1, 2]
    bar.close()
    _expect(
        capsys.readouterr().err,
        "gradlab: loop then close (2 steps) ...",
        "gradlab: loop then close done (2 steps, <s> s)",
    )


def test_iterating_a_reporter_without_an_iterable_yields_nothing(lines, capsys):
    assert list(progress(desc="empty")) == []
    _expect(
        capsys.readouterr().err,
        "gradlab: empty ...",
        "gradlab: empty done (0 steps, <s> s)",
    )


def test_a_context_manager_left_normally_says_done(lines, capsys):
    with progress(total=2, desc="block") as bar:
        bar.update(2)
    _expect(
        capsys.readouterr().err,
        "gradlab: block (2 steps) ...",
        "gradlab: block done (2 steps, <s> s)",
    )


def test_a_context_manager_left_by_an_exception_says_stopped_k_of_n(lines, capsys):
    with pytest.raises(KeyboardInterrupt), progress(total=5, desc="interrupted") as bar:
        bar.update(2)
        raise KeyboardInterrupt
    _expect(
        capsys.readouterr().err,
        "gradlab: interrupted (5 steps) ...",
        "gradlab: interrupted stopped (2 of 5 steps, <s> s)",
    )


def test_an_exception_without_a_total_says_stopped_with_the_steps_done(lines, capsys):
    with pytest.raises(RuntimeError), progress(desc="open ended") as bar:
        bar.update(2)
        raise RuntimeError("boom")
    _expect(
        capsys.readouterr().err,
        "gradlab: open ended ...",
        "gradlab: open ended stopped (2 steps, <s> s)",
    )


def test_an_exception_after_the_last_step_still_says_stopped(lines, capsys):
    with pytest.raises(RuntimeError), progress(total=1, desc="late failure") as bar:
        bar.update()
        raise RuntimeError("boom")
    _expect(
        capsys.readouterr().err,
        "gradlab: late failure (1 step) ...",
        "gradlab: late failure stopped (1 of 1 step, <s> s)",
    )


def test_a_loop_broken_early_says_stopped_with_the_steps_finished(lines, capsys):
    seen = []
    for item in progress(range(5), desc="broken"):
        if item == 2:
            break
        seen.append(item)
    assert seen == [0, 1]
    _expect(
        capsys.readouterr().err,
        "gradlab: broken (5 steps) ...",
        "gradlab: broken stopped (2 of 5 steps, <s> s)",
    )


def test_closing_short_of_the_total_says_stopped(lines, capsys):
    bar = progress(total=4, desc="short")
    bar.update(3)
    bar.close()
    _expect(
        capsys.readouterr().err,
        "gradlab: short (4 steps) ...",
        "gradlab: short stopped (3 of 4 steps, <s> s)",
    )


def test_a_generator_abandoned_early_says_stopped(lines, capsys):
    def abandon(reporter):
        for item in reporter:
            if item == "c":
                return

    abandon(progress(iter("abcdef"), total=6, desc="abandoned"))
    _expect(
        capsys.readouterr().err,
        "gradlab: abandoned (6 steps) ...",
        "gradlab: abandoned stopped (2 of 6 steps, <s> s)",
    )


def test_a_loop_without_a_total_broken_early_says_stopped_not_done(lines, capsys):
    # No total to fall short of: leaving the loop early is what says the work is unfinished.
    for item in progress(iter("abcdef"), desc="untotalled"):
        if item == "c":
            break
    _expect(
        capsys.readouterr().err,
        "gradlab: untotalled ...",
        "gradlab: untotalled stopped (2 steps, <s> s)",
    )


def test_the_reported_seconds_are_the_time_the_stage_took(lines, capsys):
    started = time.perf_counter()
    bar = progress(total=1, desc="timed")
    time.sleep(0.15)
    bar.update()
    bar.close()
    took = time.perf_counter() - started
    done = capsys.readouterr().err.splitlines()[-1]
    seconds = float(re.fullmatch(r"gradlab: timed done \(1 step, (\d+\.\d) s\)", done).group(1))
    assert 0.1 <= seconds <= took + 0.05


def test_each_line_reaches_a_log_file_at_once(lines, monkeypatch, tmp_path):
    log = tmp_path / "run.log"
    with open(log, "w") as stream:  # buffered: only a flush puts the line in the file
        monkeypatch.setattr(sys, "stderr", stream)
        bar = progress(total=2, desc="logged")
        assert log.read_text() == "gradlab: logged (2 steps) ...\n"
        bar.update(2)
        bar.close()
        assert log.read_text().splitlines()[-1].startswith("gradlab: logged done (2 steps, ")


# --- "off": nothing said, the work still done -----------------------------------------------------


def test_off_prints_nothing_but_still_iterates(set_mode, capsys):
    set_mode("off")
    assert list(progress([1, 2, 3], desc="silent")) == [1, 2, 3]
    bar = progress(total=2, desc="silent manual")
    bar.update(1)
    bar.close()
    with pytest.raises(RuntimeError), progress(desc="silent failure"):
        raise RuntimeError("boom")
    assert capsys.readouterr().err == ""


# --- "bar": a tqdm bar ---------------------------------------------------------------------------


def test_bar_mode_gives_a_tqdm_bar_over_the_same_items(set_mode):
    set_mode("bar")
    bar = progress(["a", "b"], desc="letters")
    try:
        assert type(bar).__module__.startswith("tqdm")
        assert list(bar) == ["a", "b"]
        assert (bar.total, bar.desc, bar.leave, bar.unit) == (2, "letters", False, "step")
    finally:
        bar.close()


def test_bar_mode_passes_total_leave_and_unit_through(set_mode):
    set_mode("bar")
    bar = progress(iter(range(3)), total=3, desc="epochs", leave=True, unit="epoch")
    try:
        assert (bar.total, bar.desc, bar.leave, bar.unit) == (3, "epochs", True, "epoch")
        assert list(bar) == [0, 1, 2]
    finally:
        bar.close()


def test_bar_mode_without_tqdm_names_the_extra_to_install(set_mode, monkeypatch):
    set_mode("bar")
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)  # as if tqdm were not installed
    with pytest.raises(GradlabError) as caught:
        progress([1], desc="no tqdm")
    message = str(caught.value)
    assert message == (
        "progress bars (gradlab.progress) needs the tqdm package, which is not installed; "
        f"install it with: {install_hint('studies')}"
    )
