"""The command line: user errors end in one line on stderr and exit code 2, nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

import gradlab
from gradlab.cli import check_device, main
from gradlab.progress import progress, set_progress_mode


def _run(argv, capsys):
    """main(argv) -> (exit code, stdout, stderr); argparse's SystemExit counts as a return."""
    try:
        code = main(argv)
    except SystemExit as stop:
        code = stop.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _error_cases(tmp_path):
    existing_file = tmp_path / "a_file"
    existing_file.write_text("not a folder")
    cases = [
        (["report", "--device", "banana", "--only", "audit", "--out", "{out}"], "--device"),
        (["report", "--only", "nonsense", "--out", "{out}"], "--only"),
        # was run twice, and written twice into the page
        (["report", "--only", "audit", "--only", "tie_aware", "--only", "audit", "--out", "{out}"],
         "--only must name each section once; got audit more than once"),
        (["report", "--out", str(existing_file)], "--out"),
        (["report", "--out", str(existing_file / "below")], "--out"),
        (["report", "--frobnicate"], "--frobnicate"),
        ([], "COMMAND"),
        (["bogus"], "bogus"),
        (["audit", "--json", str(tmp_path / "missing" / "x.json")], "--json"),
        (["audit", "--markdown", str(existing_file / "x.md")], "--markdown"),
        (["audit", "--json", str(tmp_path)], "--json"),
        (["plot", str(tmp_path), "--out", str(existing_file)], "--out"),
        (["plot", str(tmp_path), "--out", " "], "--out"),
    ]
    if sys.platform.startswith("linux"):
        cases += [(["audit", "--json", "/proc/x.json"], "--json"),
                  (["report", "--out", "/proc/x", "--only", "audit"], "--out")]  # fmt: skip
    if not torch.cuda.is_available():
        cases.append((["report", "--device", "cuda", "--only", "audit", "--out", "{out}"], "CUDA"))
    if torch.cuda.device_count() < 8:
        cases.append((["report", "--device", "cuda:7", "--out", "{out}"], "cuda"))
    return cases


def test_every_user_error_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys):
    for argv, named in _error_cases(tmp_path):
        out = tmp_path / "report_out"
        argv = [arg.replace("{out}", str(out)) for arg in argv]
        code, _stdout, stderr = _run(argv, capsys)
        assert code == 2, argv
        lines = stderr.strip().splitlines()
        assert len(lines) == 1, (argv, stderr)
        assert named in lines[0], (argv, lines[0])
        assert "Traceback" not in stderr
        assert not out.exists(), argv
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]  # no folder made


@pytest.mark.slow
def test_no_traceback_through_the_console_entry_point(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "gradlab", "report", "--device", "banana", "--out",
         str(tmp_path / "r")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["plan", "--batch-size", "64", "--dim", "8", "--device", "cpu"],
                                  ["audit", "--no-progress"]])  # fmt: skip
def test_a_closed_standard_output_ends_the_command_quietly_with_141(argv, tmp_path):
    # `gradlab audit --no-progress | head -1` ended in a BrokenPipeError traceback and exit
    # code 1 (1 is also check-equivalence's "not equivalent"); 141 is 128 + SIGPIPE, as a
    # shell reports a program that a closed pipe ended
    # one torch thread: gradlab plan says nothing of a busy machine (the tests' own load)
    command = subprocess.Popen([sys.executable, "-m", "gradlab", *argv], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                               env={**os.environ, "OMP_NUM_THREADS": "1"})  # fmt: skip
    command.stdout.close()  # before the interpreter has started: nothing is ever read
    try:
        stderr = command.stderr.read()
        assert (command.wait(timeout=120), stderr) == (141, "")
    finally:
        command.kill()
        command.wait()


@pytest.mark.parametrize(
    ("argv", "help_of"),
    [(["audit", "--bogus"], "gradlab audit"), (["report", "--quick", "--bogus"], "gradlab report"),
     (["report", "stray"], "gradlab report"), (["plot", "run", "--bogus"], "gradlab plot"),
     (["--bogus", "audit"], "gradlab"),  # before the command: the top level's option
     (["--bogus"], "gradlab"),  # without a command: named, not "COMMAND is required"
     (["--bogus=1"], "gradlab"),  # an option with its value, and no command
     (["audit", "--bogus", "stray"], "gradlab audit")],  # both named, as typed
)  # fmt: skip
def test_an_unknown_option_points_to_the_help_of_the_command_it_was_given_to(
    argv, help_of, capsys, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    code, stdout, stderr = _run(argv, capsys)
    assert (code, stdout) == (2, "")
    (line,) = stderr.strip().splitlines()
    unknown = " ".join(word for word in argv if word in ("--bogus", "--bogus=1", "stray"))
    assert line == f"{help_of}: error: unrecognized arguments: {unknown} (see {help_of} --help)"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("argv", "help_of", "unknown"), [
    (["audit", "--jso", "x.json"], "gradlab audit", "--jso x.json"),
    (["plot", "run", "--max-p", "5"], "gradlab plot", "--max-p 5")])  # fmt: skip
def test_an_option_is_taken_by_its_whole_name_only(argv, help_of, unknown, capsys, tmp_path,
                                                   monkeypatch):  # fmt: skip
    # argparse read --jso as --json: the audit ran and wrote x.json
    monkeypatch.chdir(tmp_path)
    code, stdout, stderr = _run(argv, capsys)
    assert (code, stdout) == (2, "")
    assert stderr.strip() == (f"{help_of}: error: unrecognized arguments: {unknown} (see "
                              f"{help_of} --help)")  # fmt: skip
    assert list(tmp_path.iterdir()) == []


def test_version_from_the_module_and_the_flag(capsys):
    code, stdout, _ = _run(["--version"], capsys)
    assert code == 0
    assert stdout.strip() == f"gradlab {gradlab.__version__}"


def test_report_help_gives_every_option_its_help_default_and_choices(capsys):
    from gradlab.report.runner import SECTIONS

    code, stdout, _ = _run(["report", "--help"], capsys)
    assert code == 0
    text = " ".join(stdout.split())
    for option in ("--out", "--quick", "--only", "--device", "--no-progress"):
        assert option in text
    assert "(default: reports/latest)" in text and "(default: cpu)" in text
    for name in SECTIONS:
        assert name in text


def test_report_help_says_how_long_the_published_report_took(capsys):
    # a new user could not tell from --help whether the report takes seconds or an hour
    from pathlib import Path

    timing = json.loads((Path(__file__).resolve().parents[1] / "figures" / "studies" /
                         "report_timing.json").read_text(encoding="utf-8"))  # fmt: skip
    assert timing["quick"] is False and timing["device"] == "cpu"
    assert timing["conditions"].startswith("2-core CPU")
    minutes = round(timing["wall_seconds_total"] / 60)
    _, stdout, _ = _run(["report", "--help"], capsys)
    assert (f"; about {minutes} minutes at full size (the default), measured on a 2-core CPU; "
            "--quick or --only SECTION runs less") in " ".join(stdout.split())


def test_check_device_accepts_what_torch_has():
    assert check_device("cpu") == "cpu"
    if torch.cuda.is_available():
        assert check_device("cuda") == "cuda"


def test_plain_progress_writes_one_line_per_stage_start_and_end(capsys):
    set_progress_mode("lines")
    try:
        assert list(progress(range(4), desc="stage one")) == [0, 1, 2, 3]
        bar = progress(total=3, desc="stage two")
        for _ in range(3):
            bar.update()
        bar.close()
    finally:
        set_progress_mode("auto")
    err = capsys.readouterr().err
    assert "\r" not in err and "\x1b" not in err
    lines = err.strip().splitlines()
    assert lines[0] == "gradlab: stage one (4 steps) ..."
    assert lines[1].startswith("gradlab: stage one done (4 steps,")
    assert lines[2] == "gradlab: stage two (3 steps) ..."
    assert lines[3].startswith("gradlab: stage two done (3 steps,")
    assert len(lines) == 4


def test_progress_off_is_silent_and_bad_mode_is_named(capsys):
    set_progress_mode("off")
    try:
        assert sum(progress(range(5), desc="quiet")) == 10
    finally:
        set_progress_mode("auto")
    assert capsys.readouterr().err == ""
    with pytest.raises(gradlab.GradlabError, match="progress mode"):
        set_progress_mode("loud")


def test_a_folder_of_other_files_is_refused_and_left_alone(tmp_path, capsys):
    out = tmp_path / "documents"
    out.mkdir()
    (out / "thesis.tex").write_text("keep me")
    code, _, stderr = _run(["report", "--out", str(out), "--only", "audit"], capsys)
    assert code == 2 and "not a gradlab report" in stderr and len(stderr.splitlines()) == 1
    assert (out / "thesis.tex").read_text() == "keep me"


REPORT_RESULTS = '{"gradlab": "0.1.0", "sections": {}, "skipped": {}}'
"""A results.json as ``gradlab report`` writes it: what marks a folder as a report."""


def _fake_report(out, **_options):
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text("{}")
    (out / "index.html").write_text("<html></html>")


@pytest.mark.parametrize("dated", [False, True])  # a new folder, or a previous report
def test_a_report_written_through_a_link_fills_the_folder_it_names(
    tmp_path, capsys, monkeypatch, dated
):
    # reports/latest -> reports/2026-12-03: the whole report ran, then rmtree refused the link
    # (a traceback, the report left in .latest.partial)
    import gradlab.report

    monkeypatch.setattr(gradlab.report, "run_report", _fake_report)
    target = tmp_path / "2026-12-03"
    target.mkdir()
    if dated:
        (target / "results.json").write_text(REPORT_RESULTS)
    (tmp_path / "latest").symlink_to(target)
    code, _, stderr = _run(["report", "--out", str(tmp_path / "latest")], capsys)
    assert (code, stderr) == (0, "")
    assert (tmp_path / "latest").is_symlink() and (target / "results.json").read_text() == "{}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["2026-12-03", "latest"]


def test_a_report_out_that_links_to_nothing_is_refused_before_any_work(tmp_path, capsys,
                                                                       monkeypatch):  # fmt: skip
    import gradlab.report

    ran = []
    monkeypatch.setattr(gradlab.report, "run_report", lambda out, **o: ran.append(out))
    (tmp_path / "latest").symlink_to(tmp_path / "gone")
    code, _, stderr = _run(["report", "--out", str(tmp_path / "latest")], capsys)
    assert (code, ran) == (2, [])
    assert stderr == (
        f"gradlab: --out must be a folder or a path where one can be created; got "
        f"{str(tmp_path / 'latest')!r}, but {str(tmp_path / 'latest')!r} is a link to "
        f"{str(tmp_path / 'gone')!r}, which does not exist (remove the link or create its "
        "target first)\n")


def test_a_previous_report_is_replaced_whole(tmp_path, capsys, monkeypatch):
    import gradlab.report

    monkeypatch.setattr(gradlab.report, "run_report", _fake_report)
    out = tmp_path / "latest"
    (out / "figures" / "old").mkdir(parents=True)
    (out / "results.json").write_text(REPORT_RESULTS)
    code, stdout, _ = _run(["report", "--out", str(out)], capsys)
    assert code == 0 and "report written" in stdout
    assert (out / "results.json").read_text() == "{}"
    assert not (out / "figures").exists()  # nothing stale from the previous report
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest"]  # no staging left


def test_an_interrupted_report_writes_nothing(tmp_path, capsys, monkeypatch):
    import gradlab.report

    def interrupted(out, **options):
        _fake_report(out)
        raise KeyboardInterrupt

    monkeypatch.setattr(gradlab.report, "run_report", interrupted)
    code, _, stderr = _run(["report", "--out", str(tmp_path / "r")], capsys)
    assert code == 130 and stderr.strip() == "gradlab: interrupted; nothing was written"
    assert list(tmp_path.iterdir()) == []


def test_an_interrupted_report_removes_the_parents_it_created(tmp_path, capsys, monkeypatch):
    # --out's missing parents were left behind, empty, after "nothing was written"
    import gradlab.report

    def interrupted(out, **options):
        (out / "figures").mkdir(parents=True)  # as the report makes its folder
        raise KeyboardInterrupt

    monkeypatch.setattr(gradlab.report, "run_report", interrupted)
    (tmp_path / "kept").mkdir()
    code, _, stderr = _run(["report", "--out", str(tmp_path / "kept" / "new" / "deeper" / "r")],
                           capsys)  # fmt: skip
    assert code == 130 and stderr.strip() == "gradlab: interrupted; nothing was written"
    assert list(tmp_path.iterdir()) == [tmp_path / "kept"]
    assert list((tmp_path / "kept").iterdir()) == []


def _main_in_a_process(arguments: list[str], prefixes: tuple[str, ...], timeout: int = 120):
    """``gradlab ARGUMENTS`` in a fresh interpreter; its stdout's last line is the exit code and
    the loaded modules named by ``prefixes`` (a prefix ending in "." names the package too)."""
    program = ("import sys; from gradlab.cli import main; "
               f"code = main({arguments!r}); prefixes = {prefixes!r}; "
               "print(code, sorted(m for m in sys.modules "
               "if (m + '.').startswith(prefixes)))")  # fmt: skip
    return subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
def test_an_unwritable_audit_output_is_refused_before_any_claim_is_loaded():
    result = _main_in_a_process(["audit", "--json", "/proc/x.json"],
                                ("sympy", "gradlab.symbolic"))  # fmt: skip
    assert result.stdout.strip() == "2 []"
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("gradlab: --json ")


@pytest.mark.parametrize(
    ("arguments", "first_words"),
    [
        (["plot", "/no/such/run"], "gradlab: RUN_DIR must hold a metrics.jsonl"),
        (["plot", "/no/such/run", "--label", "a", "--label", "b"], "gradlab: --label must give"),
        (["plot", "/no/such/run", "--max-points", "1"], "gradlab: --max-points must be 0"),
        (["plot", "/no/such/run", "--out", "/proc/x"], "gradlab: --out must be a folder"),
    ],
)
def test_a_refused_plot_loads_neither_matplotlib_nor_torch(arguments, first_words):
    # each refusal took 4 s: the plotting module (matplotlib, seaborn, torch) loaded first
    result = _main_in_a_process(arguments, ("matplotlib.", "seaborn.", "torch."))
    assert result.stdout.strip() == "2 []"
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(first_words)


@pytest.mark.parametrize("measure", [False, True])
def test_audit_measures_only_when_asked_and_passes_the_measurement_on(capsys, monkeypatch, measure):
    import gradlab.experiments.p_vs_batch_size as study
    import gradlab.symbolic.audit as audit

    measurement = {"batch_sizes": [16, 64], "settings": {}}
    measured, audited = [], []

    def fake_measure(**options):
        measured.append(options)
        return measurement

    monkeypatch.setattr(study, "measure", fake_measure)
    monkeypatch.setattr(audit, "run_audit", lambda **options: audited.append(options) or [])
    code, _, _ = _run(["audit", *(["--measure"] if measure else [])], capsys)
    assert code == 0
    assert measured == ([{"quick": True}] if measure else [])
    assert audited == [{"claims": None, "mutants": False,
                        "p_vs_batch_size": measurement if measure else None, "progress": True}]


@pytest.mark.parametrize("measure", [False, True])
def test_audit_shows_the_not_testable_claims_details_below_the_table(
    capsys, monkeypatch, measure, tmp_path
):
    # `gradlab audit --measure` printed the same table as without it: the measurement went to
    # --json and --markdown only; without --measure the three claims not testable here were
    # listed with no word of what they need
    import gradlab.experiments.p_vs_batch_size as study
    import gradlab.symbolic.audit as audit

    detail = "needs their data; a miniature, as context only: P unclear (t = -3.41)"
    records = [
        {"seed": "notes", "label": "trend", "verdict": "not-testable-here",
         "claim": {"statement": "P grows with m"}, "detail": detail},
        {"seed": "notes", "label": "eq1", "verdict": "holds",
         "claim": {"statement": "1 + 1 is 2"}, "detail": "arithmetic"},
    ]  # fmt: skip
    monkeypatch.setattr(study, "measure", lambda **options: {"batch_sizes": [16]})
    monkeypatch.setattr(audit, "run_audit", lambda **options: records)
    monkeypatch.setattr(audit, "write_outputs", lambda *written: None)
    code, out, _ = _run(["audit", *(["--measure"] if measure else [])], capsys)
    assert code == 0
    below = ("Not testable here (the context measured is in each detail):\n"
             f"  trend: {detail}\n")  # fmt: skip
    hint = ("Each verdict's method and detail (what it rests on: the witness, the cases, the "
            "mutants): gradlab audit --markdown FILE or --json FILE\n")
    assert out.endswith(audit.format_table(records) + "\n" + below + hint)
    # with a file that holds them, the table and what cannot be tested here alone
    code, out, _ = _run(["audit", "--json", str(tmp_path / "a.json")], capsys)
    assert out.endswith(audit.format_table(records) + "\n" + below)


@pytest.mark.slow
def test_audit_without_measure_loads_no_study_and_records_the_claim_as_not_measured(tmp_path):
    studies = ("gradlab.experiments", "gradlab.training", "gradlab.models", "gradlab.data",
               "gradlab.report")  # fmt: skip
    result = _main_in_a_process(["audit", "--json", str(tmp_path / "a.json")], studies, 600)
    assert result.stdout.strip().splitlines()[-1] == "0 []", result.stderr[-2000:]
    records = json.loads((tmp_path / "a.json").read_text())
    (claim,) = [r for r in records if r["label"] == "claim-p-grows-with-batch-size"]
    assert claim["verdict"] == "not-testable-here" and "not measured in this run" in claim["detail"]


def test_a_stage_left_early_says_stopped_not_done(capsys):
    set_progress_mode("lines")
    try:
        with pytest.raises(KeyboardInterrupt):
            for index in progress(range(5), desc="stage three"):
                if index == 2:
                    raise KeyboardInterrupt
        with pytest.raises(ValueError), progress(desc="stage four", unit="seed") as stage:
            stage.update(1)
            raise ValueError("fails")
        with progress(total=2, desc="stage five") as stage:
            stage.update(2)
    finally:
        set_progress_mode("auto")
    lines = capsys.readouterr().err.splitlines()
    assert lines[1].startswith("gradlab: stage three stopped (2 of 5 steps, ")
    assert lines[3].startswith("gradlab: stage four stopped (1 seed, ")
    assert lines[5].startswith("gradlab: stage five done (2 steps, ")
    assert not any("three done" in line or "four done" in line for line in lines)


def test_a_hand_edited_study_is_one_line_before_the_report_or_render_runs(
    tmp_path, capsys, monkeypatch
):
    # was: the report ran its own sections, then a KeyError traceback (exit 1); --render the
    # same, leaving a new figure without its pages
    import gradlab.report

    ran = []
    monkeypatch.setattr(gradlab.report, "run_report", lambda out, **options: ran.append(out))
    study = tmp_path / "study"
    study.mkdir()
    result = {"settings": {"data": "cars, train split (30 images, 6 classes)",
                           "model": "resnet18 with a linear head to 32 dimensions", "epochs": 3,
                           "test_data": "test split (12 images)"},
              "seeds": [0], "runs": {}}  # fmt: skip
    (study / "gradient_anatomy.json").write_text(json.dumps(result))
    refusal = (f"{str(study / 'gradient_anatomy.json')!r} cannot be rendered as gradlab study "
               "anatomy (StopIteration): its values are not of the kinds the study writes (was "
               "it edited by hand?); restore the file or run the study again\n")
    code, out, err = _run(["report", "--studies", str(study), "--out", str(tmp_path / "r")],
                          capsys)  # fmt: skip
    assert (code, out, err, ran) == (2, "", f"gradlab: --studies: {refusal}", [])
    code, out, err = _run(["study", "anatomy", "--render", "--out", str(study)], capsys)
    assert (code, out, err) == (2, "", f"gradlab: --out: {refusal}")
    assert [path.name for path in study.iterdir()] == ["gradient_anatomy.json"]
