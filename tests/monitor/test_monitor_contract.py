"""Monitor behaviour a user relies on, checked in full: messages, header, lock, logged steps.

Each test states what a user relies on: whole messages, header fields, which steps are logged,
which lock file is left where. Expected values are written from the documented behaviour (the
Monitor's docstrings, :mod:`gradlab.monitor.lock`), or computed by hand (a loss of a constant
batch), never read back from the Monitor.
"""

from __future__ import annotations

import datetime
import gc
import json
import os
import socket
import subprocess
import sys
import warnings

import pytest
import torch

import gradlab
from gradlab import GradlabError, Monitor
from gradlab.monitor import Loss, Quantity, every, lock, read_jsonl
from gradlab.monitor.config import MonitorConfig
from gradlab.monitor.distributed import all_gather_rows
from gradlab.monitor.lock import LOCK_NAME
from tests.helpers.training import train
from tests.helpers.warning_frames import frame_named_by_stacklevel

CANNOT_CREATE = "log_dir must be a folder or a path where one can be created"
"""The start of every refusal of a log_dir that exists as something else or cannot be made."""

UNDER_MUTMUT = "MUTANT_UNDER_TEST" in os.environ
"""mutmut's trampolines add stack frames, so a warning's stacklevel cannot point at the caller."""


def _header(log_dir):
    return read_jsonl(log_dir / "metrics.jsonl")[0][0]


def _records(log_dir):
    return read_jsonl(log_dir / "metrics.jsonl")[1]


def contrastive(embeddings, labels):
    """A loss on embeddings that is not SmoothAP and exposes no score matrix."""
    return embeddings.sum()


class Failing(Quantity):
    name = "failing"

    def compute(self, batch):
        raise ValueError("no value")


# --- gathering under torch.distributed --------------------------------------------------------


def test_gathered_rows_stay_on_their_device_whatever_the_default_device(one_rank_group):
    """torch.set_default_device("cuda") with CPU tensors (or the reverse) must not move the
    sizes or the padded rows to another device than the tensor's (NCCL gathers CUDA only)."""
    tensor = torch.arange(6.0).reshape(3, 2)
    with torch.device("meta"):  # factory calls without a device land on meta here
        gathered = all_gather_rows(tensor)
    assert gathered.device == tensor.device and torch.equal(gathered, tensor)


# --- log_dir refusals in full -----------------------------------------------------------------


def test_log_dir_refusals_name_the_path_and_what_blocks_it(tmp_path):
    existing_file = tmp_path / "file.txt"
    existing_file.write_text("not a folder")
    with pytest.raises(GradlabError) as raised:
        Monitor(existing_file)
    assert str(raised.value) == (
        f"{CANNOT_CREATE}; got {str(existing_file)!r}, which is an existing file"
    )
    below_a_file = existing_file / "runs" / "a"
    with pytest.raises(GradlabError) as raised:
        Monitor(below_a_file)
    assert str(raised.value) == (
        f"{CANNOT_CREATE}; got {str(below_a_file)!r}, but {str(existing_file)!r} is a file"
    )


def test_a_folder_that_cannot_take_a_new_entry_is_refused_by_name_before_any_write():
    """/proc takes no new entry, even for root (permission bits would say otherwise)."""
    with pytest.raises(GradlabError, match=r"^log_dir must be a .*'/proc/gradlab-run'") as raised:
        Monitor("/proc/gradlab-run")
    assert "\n" not in str(raised.value)
    assert not os.path.exists("/proc/gradlab-run")


# --- option checks shared with GradlabCallback ------------------------------------------------


def test_the_shared_config_gives_the_omitted_options_monitors_defaults():
    """GradlabCallback gives only the options a user gave; the others are Monitor's defaults
    (no preset named: the default one, distributed "auto", resume and overwrite False, sinks
    ("jsonl",))."""
    options = MonitorConfig()
    assert (options.tau, options.every, options.sinks, options.preset) == (
        None, None, ("jsonl",), None
    )
    assert options.preset_name == "default"
    assert (options.strict, options.resume, options.overwrite) == (False, False, False)
    assert (options.distributed, options.config, options.quantities) == ("auto", None, None)
    assert MonitorConfig(resume=True).sinks == ("jsonl",)  # overwrite left False
    assert MonitorConfig(overwrite=True).sinks == ("jsonl",)  # resume left False


@pytest.mark.parametrize(
    "make_quantities",
    [lambda: {Loss()}, lambda: (q for q in [Loss()]), lambda: ""],
    ids=["set", "generator", "empty-string"],
)
def test_quantities_that_are_not_a_list_are_refused(tmp_path, make_quantities):
    quantities = make_quantities()
    with pytest.raises(GradlabError) as raised:
        Monitor(tmp_path, quantities=quantities)
    assert str(raised.value) == (
        f"quantities must be a list of Quantity instances; got {quantities!r}"
    )


def test_quantities_given_by_name_are_refused_naming_the_classes(tmp_path):
    # "a quantity you pass by name": the names are those of monitor.not_logged, the classes
    # what quantities= takes
    import gradlab.monitor as monitor_package

    names = sorted(cls.name for cls in monitor_package.QUANTITIES)
    with pytest.raises(GradlabError) as raised:
        Monitor(tmp_path, quantities=["anatomy", "margins", "margin"])
    assert str(raised.value) == (
        "quantities must be a list of Quantity instances; got ['anatomy', 'margins', 'margin'] "
        "(a quantity is an object: pass gradlab.monitor.Anatomy() for 'anatomy', "
        "gradlab.monitor.Margins() for 'margins'; 'margin' is no quantity of gradlab's, whose "
        f"names are {names})")
    assert monitor_package.Anatomy.name == "anatomy" and monitor_package.Margins.name == "margins"


@pytest.mark.parametrize(("quantities", "said"), [
    ("anatomy", " (a list of quantity objects: pass quantities=[gradlab.monitor.Anatomy()])"),
    ("cheap", " (a preset's name: pass preset='cheap')"),
    ("margin", " ('margin' is no quantity of gradlab's, whose names are {names})"),
    ("", ""),  # an empty name: nothing to say but the refusal
    (Loss(), " (a list of quantities: quantities=[Loss(...)])"),
    (["margin"], " ('margin' is no quantity of gradlab's, whose names are {names})"),
    (("x", "y"), " ('x', 'y' are no quantity of gradlab's, whose names are {names})"),
    (42, ""),  # no names: nothing to say but the refusal
    ([3, None], ""),
])
def test_a_refusal_says_what_to_pass_for_a_name_a_preset_or_one_quantity(tmp_path, quantities,
                                                                          said):
    import gradlab.monitor as monitor_package

    names = sorted(cls.name for cls in monitor_package.QUANTITIES)
    with pytest.raises(GradlabError) as raised:
        Monitor(tmp_path, quantities=quantities)
    assert str(raised.value) == ("quantities must be a list of Quantity instances; got "
                                 f"{quantities!r}{said.format(names=names)}")  # fmt: skip


def test_every_replaces_the_schedules_of_explicit_quantities(tmp_path):
    with Monitor(tmp_path, quantities=[Loss(every(5))], every=2) as monitor:
        train(monitor, steps=5)
    assert [r["step"] for r in _records(tmp_path)] == [0, 2, 4]


def test_the_header_config_names_the_preset(tmp_path):
    with Monitor(tmp_path / "a", preset="cheap", every=1) as monitor:
        train(monitor, steps=1)
    assert _header(tmp_path / "a")["config"]["preset"] == "cheap"
    # explicit quantities replace the preset: the header names none (not "default")
    with Monitor(tmp_path / "b", quantities=[Loss(every(1))]) as monitor:
        train(monitor, steps=1)
    assert _header(tmp_path / "b")["config"]["preset"] is None


# --- the lock -----------------------------------------------------------------------------------


def test_a_monitor_refused_at_its_first_write_leaves_the_holders_lock_alone(tmp_path):
    """A Monitor that never claimed the folder removes no lock, whatever the lock's token (an
    empty one too: gradlab writes uuid4 tokens, a hand-made lock may hold anything)."""
    monitor = Monitor(tmp_path / "run", preset="cheap")  # nothing there yet
    (tmp_path / "run").mkdir()
    held = json.dumps({"host": f"{socket.gethostname()}-elsewhere", "pid": 1, "token": ""})
    (tmp_path / "run" / LOCK_NAME).write_text(held)  # another host's Monitor: honoured
    with pytest.raises(GradlabError, match="is in use by another Monitor"):
        monitor.close()  # its first write (the header) is refused
    assert (tmp_path / "run" / LOCK_NAME).read_text() == held
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_a_run_written_since_construction_is_refused_in_full_and_close_is_quiet(tmp_path):
    late = Monitor(tmp_path, preset="cheap", every=1, sinks=["jsonl", "csv"])
    with Monitor(tmp_path, preset="cheap", every=1, sinks=["jsonl", "csv"]) as first:
        train(first, steps=1)
    with pytest.raises(GradlabError) as raised:
        train(late, steps=1)
    assert str(raised.value) == (
        f"log_dir {str(tmp_path)!r} already holds a run (metrics.csv, metrics.jsonl), written by "
        "another Monitor since this one was created; runs never merge: pass resume=True to "
        "continue it, overwrite=True to replace it, or choose a new log_dir"
    )
    late.close()  # a refused Monitor writes nothing at close and does not raise again
    assert not (tmp_path / LOCK_NAME).exists()
    assert [r["step"] for r in _records(tmp_path)] == [0]


def test_a_resumption_written_to_since_construction_is_refused_in_full(tmp_path):
    # two resumptions made before either wrote: the later writer read a run that has grown
    # since, so it would number its steps from a stale last record and interleave the logs
    sinks = ["jsonl", "csv"]
    with Monitor(tmp_path, preset="cheap", every=1, sinks=sinks) as monitor:
        train(monitor, steps=3)
    late = Monitor(tmp_path, preset="cheap", every=1, sinks=sinks, resume=True)
    with Monitor(tmp_path, preset="cheap", every=1, sinks=sinks, resume=True) as first:
        train(first, steps=2)  # steps 3, 4
    before = (tmp_path / "metrics.jsonl").read_bytes()
    with pytest.raises(GradlabError) as raised:
        train(late, steps=1)
    assert str(raised.value) == (
        f"log_dir {str(tmp_path)!r} changed since this Monitor read it to resume (another "
        "Monitor wrote metrics.csv, metrics.jsonl meanwhile); runs never merge: make the "
        "Monitor again with resume=True to go on from the run's new last record"
    )
    late.close()  # refused: writes nothing at close and does not raise again
    assert (tmp_path / "metrics.jsonl").read_bytes() == before
    assert not (tmp_path / LOCK_NAME).exists()
    with Monitor(tmp_path, preset="cheap", every=1, resume=True) as again:
        assert again.step_count == 5


def test_a_refused_claim_releases_only_its_own_lock_once(tmp_path, monkeypatch):
    """A Monitor that finds a run written since it was made gives its lock back, once: a rival
    that claims the folder right after (played by a wrapper around the release, as in
    test_lock_claims.py) keeps its lock, whatever its token."""
    late = Monitor(tmp_path, preset="cheap")
    with Monitor(tmp_path, preset="cheap", every=1) as first:
        train(first, steps=1)
    rival = json.dumps({"host": f"{socket.gethostname()}-elsewhere", "pid": 1, "token": ""})
    real_release = lock.release
    rival_claims = [rival]  # once

    def release_then_a_rival_claims(log_dir, token):
        real_release(log_dir, token)
        if rival_claims:
            (tmp_path / LOCK_NAME).write_text(rival_claims.pop())

    monkeypatch.setattr(lock, "release", release_then_a_rival_claims)
    with pytest.raises(GradlabError, match="already holds a run"):
        late.close()  # its first write: the claim finds the run and is given back
    assert (tmp_path / LOCK_NAME).read_text() == rival


@pytest.mark.slow
def test_an_unclosed_monitor_releases_its_folder_when_collected(tmp_path):
    monitor = Monitor(tmp_path, preset="cheap", every=1)
    train(monitor, steps=1)
    lock_file = json.loads((tmp_path / LOCK_NAME).read_text())
    assert lock_file["pid"] == os.getpid() and lock_file["host"] == socket.gethostname()
    del monitor
    gc.collect()
    assert not (tmp_path / LOCK_NAME).exists()
    with Monitor(tmp_path, preset="cheap", every=1, resume=True) as again:
        train(again, steps=1)
    assert [r["step"] for r in _records(tmp_path)] == [0, 1]


def _forgotten_monitor(folder, *, step: bool, close: bool, calls: int, attached: bool) -> None:
    """A Monitor left to the garbage collector after ``calls`` watched calls (or forwards of
    an attached module), maybe a step or a close: a loop that never calls monitor.step()."""
    monitor = Monitor(folder, preset="cheap", every=1)
    if attached:
        model = torch.nn.Linear(4, 4)
        monitor.attach(model, torch.arange(8) % 2)
        forward = model
    else:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))

        def forward(inputs):
            return loss_fn(inputs, torch.arange(8) % 2)
    for _ in range(calls):
        forward(torch.randn(8, 4, requires_grad=True)).sum().backward()
    if step:
        monitor.step()
    if close:
        monitor.close()


@pytest.mark.parametrize(("step", "close", "said"), [
    (False, False, True), (True, False, False), (True, True, False),
    (False, True, False),  # close() warns itself, in its own words
])  # fmt: skip
@pytest.mark.parametrize("calls", [1, 2])
@pytest.mark.parametrize("attached", [False, True], ids=["watched", "attached"])
@pytest.mark.slow
def test_a_monitor_collected_without_step_or_close_says_nothing_was_logged(
    tmp_path, step, close, said, calls, attached
):
    """Watched calls, then neither monitor.step() nor close(): no record and, before, no word
    either (close() is what warns of a run without steps). The warning has no caller's line to
    point at (a finalizer's): it names the Monitor instead."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _forgotten_monitor(tmp_path, step=step, close=close, calls=calls, attached=attached)
        gc.collect()
    ended = [w for w in caught if "ended (collected" in str(w.message)]
    assert [str(w.message) for w in ended] == ([
        f"gradlab.Monitor: the Monitor of {str(tmp_path)!r} ended (collected, or the program "
        "exited) after watched calls but without monitor.step() or close(), so nothing was "
        "logged; call monitor.step() after each optimizer step and close() at the end (or use "
        "`with gradlab.Monitor(...) as monitor:`)"] if said else [])  # fmt: skip
    assert all((w.category, w.filename, w.lineno) == (RuntimeWarning, "gradlab.Monitor", 0)
               for w in ended)  # fmt: skip


@pytest.mark.slow
def test_a_program_that_ends_without_step_or_close_says_nothing_was_logged(tmp_path):
    script = (
        "import sys, torch, gradlab\n"
        "monitor = gradlab.Monitor(sys.argv[1], preset='cheap')\n"
        "loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))\n"
        "loss_fn(torch.randn(8, 4, requires_grad=True), torch.arange(8) % 2).backward()\n"
    )
    ended = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True,
                           text=True, timeout=120)  # fmt: skip
    assert ended.returncode == 0, ended.stderr
    assert ended.stderr.count("without monitor.step() or close(), so nothing was logged") == 1


def test_ranks_other_than_0_neither_claim_nor_check_the_lock(tmp_path, monkeypatch):
    """Only rank 0 writes: another rank may make its Monitor on the folder rank 0's holds."""
    with Monitor(tmp_path, preset="cheap", every=1) as rank_zero:
        train(rank_zero, steps=1)  # rank 0 holds the folder now
        with monkeypatch.context() as patch:
            patch.setattr(torch.distributed, "is_initialized", lambda: True)
            patch.setattr(torch.distributed, "get_rank", lambda group=None: 1)
            rank_one = Monitor(tmp_path, preset="cheap", every=1, resume=True)
            assert rank_one.step_count == 1
            rank_one.close()  # writes nothing
    assert [r["step"] for r in _records(tmp_path)] == [0]


# --- warnings point at the user's line ----------------------------------------------------------


def test_monitor_warnings_point_at_the_users_call(tmp_path):
    with Monitor(tmp_path, quantities=[Failing(every(1)), Loss(every(1))]) as monitor:
        watched = monitor.watch(lambda *args: args[0].sum())
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            watched(torch.zeros(4, 3))  # unreadable (one argument): skipped with a warning
            watched(torch.zeros(4, 3), torch.arange(4))
            monitor.step()  # Failing raises: disabled with a warning
    # only the Monitor's own (a garbage collection in the block may add a ResourceWarning)
    caught = [w for w in caught if str(w.message).startswith("gradlab.Monitor: ")]
    messages = [str(w.message) for w in caught]
    assert len(caught) == 2 and "cannot read" in messages[0] and "'failing'" in messages[1]
    if not UNDER_MUTMUT:
        assert [w.filename for w in caught] == [__file__, __file__]


def test_monitor_warnings_name_the_users_line_under_mutation_testing_too(tmp_path, monkeypatch):
    """An unreadable call and a quantity that raised: both name this file's lines, under mutmut
    too (``caller_stacklevel`` skips its trampolines)."""
    named = []

    def record(message, category=UserWarning, stacklevel=1, **kwargs):
        if category is RuntimeWarning and str(message).startswith("gradlab.Monitor: "):
            named.append(frame_named_by_stacklevel(stacklevel).f_code.co_filename)

    with Monitor(tmp_path, quantities=[Failing(every(1)), Loss(every(1))]) as monitor:
        watched = monitor.watch(lambda *args: args[0].sum())
        with monkeypatch.context() as patch:
            patch.setattr(warnings, "warn", record)
            watched(torch.zeros(4, 3))  # unreadable (one argument)
            watched(torch.zeros(4, 3), torch.arange(4))
            monitor.step()  # Failing raises
    assert named == [__file__, __file__]


# --- why a quantity is not logged ---------------------------------------------------------------


def test_score_inputs_explain_every_quantity_that_needs_embeddings(tmp_path):
    on_scores = "the loss is watched on a score matrix, not on embeddings"
    needs_embeddings = f"needs the embeddings; {on_scores}"
    needs_terms = f"needs SmoothAP's sigmoid block, computed from the embeddings; {on_scores}"
    with Monitor(tmp_path, preset="full", every=1) as monitor:
        monitor.watch(lambda scores, positives: scores.sum(), inputs="scores")
    assert _header(tmp_path)["not_logged"] == {
        "embedding_norm": needs_embeddings,
        "embedding_grad_norm": needs_embeddings,
        "decomposition": needs_embeddings,
        "gradient_agreement": needs_embeddings,
        "relaxation_gap": needs_terms,  # the full preset's gradient counts: plain ones only
        "geometry": f"needs the embeddings the score matrix compares; {on_scores}",
    }


def test_an_embedding_loss_without_scores_explains_the_anatomy_in_full(tmp_path):
    with Monitor(tmp_path, preset="full", every=1) as monitor:
        monitor.watch(contrastive)
    assert _header(tmp_path)["not_logged"] == {
        "gradient_agreement": (
            "needs a watched SmoothAP loss (its analytic gradient is compared); the watched loss "
            "contrastive is not SmoothAP"
        ),
        "anatomy": (
            "needs dL/dS of the loss's score matrix; the watched loss contrastive takes "
            "embeddings and exposes no score matrix. Watch a loss written on a score matrix with "
            "inputs='scores', use gradlab's losses, or give a pytorch-metric-learning loss "
            "distance=gradlab.interop.pml.RecordingCosineSimilarity()"
        ),
    }


@pytest.mark.parametrize("make", [gradlab.FastAPLoss, gradlab.BlackboxAPLoss, gradlab.FAPPYLoss])
def test_gradlab_s_own_embedding_losses_are_not_told_to_use_gradlab_s_losses(tmp_path, make):
    with Monitor(tmp_path, preset="full", every=1) as monitor:
        monitor.watch(make())
    assert _header(tmp_path)["not_logged"]["anatomy"] == (
        f"needs dL/dS of the loss's score matrix; the watched loss {make.__name__} takes "
        "embeddings and exposes no score matrix. Of gradlab's losses, SmoothAPLoss and those on "
        "a score matrix (NTXentLoss, MaxViolationTripletLoss, SigLIPLoss) expose theirs; this "
        "one scores inside"
    )


def test_attach_alone_explains_the_loss_the_anatomy_and_the_agreement_in_full(tmp_path):
    attach_only = "attach() sees the embeddings only (use monitor.watch(loss_fn))"
    with Monitor(tmp_path, preset="full", every=1) as monitor:
        monitor.attach(torch.nn.Linear(4, 2), torch.arange(3))
    assert _header(tmp_path)["not_logged"] == {
        "loss": f"needs the loss value; {attach_only}",
        "gradient_agreement": (
            f"needs a watched SmoothAP loss (its analytic gradient is compared); {attach_only}"
        ),
        "anatomy": f"needs dL/dS of the loss's score matrix; {attach_only}",
    }


def test_watching_smooth_ap_after_another_loss_logs_what_the_first_could_not(tmp_path):
    with Monitor(tmp_path, preset="full", every=1) as monitor:
        monitor.watch(contrastive)
        assert set(monitor.disabled) == {"gradient_agreement", "anatomy"}
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        assert monitor.disabled == {} and monitor.not_logged == {}
        embeddings = torch.randn(8, 4, requires_grad=True)
        loss_fn(embeddings, torch.arange(8) % 2).backward()
        record = monitor.step()
    assert any(key.startswith("gradient_agreement") for key in record)
    assert any(key.startswith("anatomy_") for key in record)
    assert "not_logged" not in _header(tmp_path)


# --- calls the Monitor cannot read, in full -----------------------------------------------------


@pytest.mark.parametrize(
    ("make_args", "message"),
    [
        (
            lambda: (torch.zeros(4, 3), torch.zeros(4)),
            "labels must have an integer dtype; got torch.float32"
            " (whole-number ids: pass labels.long())",
        ),
        (
            lambda: (torch.zeros(4, 3), torch.arange(5)),
            "labels must have shape (4,) (one label per embedding); got (5,)",
        ),
        (
            lambda: (torch.zeros(2, 3), torch.zeros(5, 3), torch.zeros(2, 4, dtype=torch.bool)),
            "positives must have shape (2, 5) ([Q, C]); got (2, 4)",
        ),
    ],
    ids=["float-labels", "labels-length", "positives-shape"],
)
def test_unreadable_targets_are_named_in_full(tmp_path, make_args, message):
    with Monitor(tmp_path, quantities=[Loss(every(1))], strict=True) as monitor:
        watched = monitor.watch(lambda *args: args[0].sum())
        with pytest.raises(GradlabError) as raised:
            watched(*make_args())
    seen = ", ".join(f"args[{i}]=Tensor{list(t.shape)}" for i, t in enumerate(make_args()))
    assert str(raised.value) == (
        f"Monitor cannot read this loss call: {message}; the call's arguments: {seen}"
    )


@pytest.mark.parametrize(
    ("returns", "got"),
    [
        (lambda e: (e.sum(), {"parts": e.detach()}), "a tuple"),
        (lambda e: {"loss": e.sum()}, "a dict"),
        (lambda e: e.sum(dim=1), "a tensor of shape (4,)"),
        (lambda e: int(e.sum()), "an int"),
    ],
    ids=["tuple", "dict", "per-sample", "int"],
)
def test_a_loss_that_returns_no_single_value_is_named_at_the_call(tmp_path, returns, got):
    # not "'tuple' object has no attribute 'detach'", nor the loss quantity's torch traceback
    args = (torch.zeros(4, 3, requires_grad=True), torch.arange(4))
    with Monitor(tmp_path, quantities=[Loss(every(1))], strict=True) as monitor:
        watched = monitor.watch(lambda embeddings, labels: returns(embeddings))
        with pytest.raises(GradlabError) as raised:
            watched(*args)
    assert str(raised.value) == (
        f"Monitor cannot read this loss call: the watched loss returned {got}; the Monitor "
        "reads a loss that returns its value as one tensor of one element (reduce it, or watch "
        "a function that returns the loss alone); the call's arguments: "
        "args[0]=Tensor[4, 3], args[1]=Tensor[4]"
    )


def test_each_watched_loss_keeps_its_own_inputs(tmp_path):
    with Monitor(tmp_path, quantities=[Loss(every(1))], strict=True) as monitor:
        on_scores = monitor.watch(lambda scores, positives: scores.sum(), inputs="scores")
        on_embeddings = monitor.watch(lambda embeddings, labels: embeddings.sum())
        on_scores(torch.ones(3, 5), torch.ones(3, 5, dtype=torch.bool))
        first = monitor.step()
        on_embeddings(torch.ones(4, 2), torch.arange(4))
        second = monitor.step()
    assert first == {"step": 0, "loss": 15.0} and second == {"step": 1, "loss": 8.0}


def test_several_calls_before_one_step_log_the_last_call(tmp_path):
    # gradient accumulation: three micro-batches per optimizer step, then monitor.step()
    def mean_square(embeddings, labels):
        return (embeddings**2).mean()

    with Monitor(tmp_path, quantities=[Loss(every(1))], strict=True) as monitor:
        watched = monitor.watch(mean_square)
        for value in (1.0, 2.0, 3.0):
            watched(torch.full((4, 2), value), torch.arange(4))
        record = monitor.step()
        assert monitor.calls == 3
    assert record == {"step": 0, "loss": 9.0}


def test_the_last_step_logged_at_close_keeps_its_loss(tmp_path):
    def mean_square(embeddings, labels):
        return (embeddings**2).mean()

    with Monitor(tmp_path, quantities=[Loss(every(3))]) as monitor:
        watched = monitor.watch(mean_square)
        for step in range(5):  # a constant batch of value `step`: loss step**2
            watched(torch.full((4, 2), float(step)), torch.arange(4))
            monitor.step()
    assert [(r["step"], r["loss"]) for r in _records(tmp_path)] == [(0, 0.0), (3, 9.0), (4, 16.0)]


# --- the header -----------------------------------------------------------------------------------


def test_a_cuda_run_header_names_the_gpu_of_the_embeddings(tmp_path, monkeypatch):
    asked = []

    def device_name(device=None):
        asked.append(device)
        return "Test GPU"

    monkeypatch.setattr(torch.cuda, "get_device_name", device_name)
    monitor = Monitor(tmp_path, preset="cheap")
    monitor._open(torch.device("cuda", 1))  # what a logged step does with CUDA embeddings
    monitor.close()
    header = _header(tmp_path)
    assert header["device"] == "cuda:1" and header["device_name"] == "Test GPU"
    assert asked == [torch.device("cuda", 1)]


def test_a_cpu_run_header_names_no_gpu(tmp_path):
    with Monitor(tmp_path, preset="cheap", every=1) as monitor:
        train(monitor, steps=1)
    header = _header(tmp_path)
    assert header["device"] == "cpu" and "device_name" not in header


def test_the_header_records_the_local_start_time_to_the_second_with_its_offset(tmp_path):
    # local time without an offset: runs logged in two time zones could not be compared
    before = datetime.datetime.now().astimezone().replace(microsecond=0)
    with Monitor(tmp_path, preset="cheap", every=1) as monitor:
        train(monitor, steps=1)
    after = datetime.datetime.now().astimezone()
    text = _header(tmp_path)["started"]
    started = datetime.datetime.fromisoformat(text)
    assert started.utcoffset() == before.utcoffset()  # the machine's own zone, said
    assert before <= started <= after and len(text) == len("2026-12-04T05:10:00+00:00")


def test_overwrite_tolerates_a_replaced_file_removed_before_the_first_write(tmp_path):
    with Monitor(tmp_path, preset="cheap", every=1, sinks=["jsonl", "csv"]) as monitor:
        train(monitor, steps=2)
    monitor = Monitor(tmp_path, preset="cheap", every=1, sinks=["jsonl", "csv"], overwrite=True)
    (tmp_path / "metrics.csv").unlink()  # removed by hand before the new run writes
    with monitor:
        train(monitor, steps=1)
    headers, records = read_jsonl(tmp_path / "metrics.jsonl")
    assert headers[0]["overwrote"] == ["metrics.csv", "metrics.jsonl"]
    assert [r["step"] for r in records] == [0] and (tmp_path / "metrics.csv").exists()


def test_a_monitor_keeps_its_options_as_one_config(tmp_path):
    """``monitor.options``: the MonitorConfig its keywords made (what the Lightning and Hugging
    Face callbacks build their Monitors from)."""
    with Monitor(tmp_path, preset="cheap", every=3, tau=0.02) as monitor:
        options = monitor.options
    assert isinstance(options, MonitorConfig)
    assert (options.preset, options.tau, [s for s in range(7) if options.every(s)]) == (
        "cheap", 0.02, [0, 3, 6])


@pytest.mark.parametrize("every_n", [1, 5])
def test_a_monitor_closed_before_any_call_writes_its_header_alone(tmp_path, every_n):
    """No watched call, no step: close() has no last call to log, whatever the schedule says
    of the step before the first (every 5: step -1 is not a logged step)."""
    Monitor(tmp_path, preset="cheap", every=every_n).close()
    headers, records = read_jsonl(tmp_path / "metrics.jsonl")
    assert records == [] and len(headers) == 1
    assert headers[0]["config"]["preset"] == "cheap"


@pytest.mark.slow
@pytest.mark.parametrize("strict", [False, True])
def test_a_monitor_stopped_by_its_losss_error_is_not_said_to_have_ended_unstepped(tmp_path,
                                                                                  strict):
    # a bug in the loss (or a call strict=True refuses) ended the loop with its own error; the
    # Monitor's end then also blamed a missing monitor.step()
    def broken_loss(embeddings, labels):
        return embeddings.sum(dim=5)  # IndexError

    def train():
        monitor = Monitor(tmp_path, preset="cheap", strict=strict)
        loss_fn = monitor.watch(broken_loss if not strict else lambda e, y: e.sum())
        with pytest.raises(IndexError if not strict else GradlabError):
            loss_fn(torch.randn(8, 4, requires_grad=True), torch.arange(7))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        train()
        gc.collect()
    assert [str(w.message) for w in caught if "ended (collected" in str(w.message)] == []


@pytest.mark.slow
def test_a_monitor_stopped_by_its_schedule_s_error_is_not_said_to_have_ended_unstepped(tmp_path):
    # a schedule that raised at the first watched call ended the loop with its own error; the
    # Monitor's end then also blamed a missing monitor.step()
    def broken(step):
        return "yes"

    def train():
        monitor = Monitor(tmp_path, every=broken, preset="cheap")
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        with pytest.raises(GradlabError, match="returned 'yes' for step 0"):
            loss_fn(torch.randn(8, 4, requires_grad=True), torch.arange(8) % 2)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        train()
        gc.collect()
    assert [str(w.message) for w in caught if "ended (collected" in str(w.message)] == []


def test_a_schedule_that_raises_after_the_first_step_disables_its_quantity_and_training_goes_on(
    tmp_path,
):
    def flaky(step):
        if step >= 2:
            raise ValueError("no schedule past step 1")
        return True

    with pytest.warns(RuntimeWarning) as caught, Monitor(tmp_path,
                                                         quantities=[Loss(flaky)]) as monitor:
        train(monitor, steps=4)
    said = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(said) == 1 and said[0].startswith(
        "gradlab.Monitor: step 2: quantity 'loss' raised in its schedule and is disabled "
        "(strict=True raises instead)")
    assert list(monitor.disabled) == ["loss"]
    assert monitor.disabled["loss"].rstrip().endswith("ValueError: no schedule past step 1")
    records = read_jsonl(tmp_path / "metrics.jsonl")[1]
    assert [r["step"] for r in records] == [0, 1, 2]  # step 2: a record of the note alone
    assert records[2] == {"step": 2, "disabled": {
        "loss": "step 2: raised in its schedule: ValueError: no schedule past step 1"}}
    with pytest.raises(GradlabError, match=r"^the schedule of the 'loss' quantity, .* raised "
                       r"for step 2: ValueError: no schedule past step 1 \(a schedule is called "
                       r"as schedule\(step\)") as raised, Monitor(
            tmp_path / "strict", quantities=[Loss(flaky)], strict=True) as monitor:  # fmt: skip
        train(monitor, steps=4)
    assert isinstance(raised.value.__cause__, ValueError)  # the schedule's own, chained
