"""What a user of each ``gradlab`` command sees, in process and without training anything.

The work behind a command (the studies, the planner, the report) is replaced by stand-ins that
record what they were given, so each test checks the command's own part: the help it prints,
the options it hands on, the files it writes where, the lines it prints, and its one-line errors
with exit code 2.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest
import torch

import gradlab
from gradlab.cli import check_device, check_report_folder, main
from gradlab.errors import GradlabError
from gradlab.validation import MAX_SEED
from tests.helpers.home import home_and_work


def _beside(tmp_path, name: str = "o"):
    """A path next to ``tmp_path``, not in it: ``tmp_path`` is the tests' ``--data``, whose
    folders are classes (an --out there is refused)."""
    return tmp_path.with_name(f"{tmp_path.name}_{name}")


def _run(argv, capsys):
    """main(argv) -> (exit code, stdout, stderr); argparse's SystemExit counts as a return."""
    try:
        code = main(argv)
    except SystemExit as stop:
        code = stop.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _options_of(help_text):
    """argparse's help -> {first word of each argument's invocation: its help, one line}."""
    options, current = {}, None
    for line in help_text.splitlines():
        entry = re.match(r"^  (\S+(?: \S+)*?)(?: {2,}(\S.*))?$", line)
        if entry and not line.startswith("   "):
            current = entry.group(1).split()[0].rstrip(",")
            options[current] = entry.group(2) or ""
        elif current is not None and line.startswith("   "):
            options[current] = f"{options[current]} {line.strip()}".strip()
        else:
            current = None
    return options


# command -> (its description, {argument: (how its help starts, how it ends)})
HELP = {
    "report": ("run the studies and the audit and write the report (HTML and Markdown)", {
        "--out": ("output folder, created if missing", "(default: reports/latest)"),
        "--quick": ("small settings", "(default: off)"),
        "--only": ("run only this section; repeatable; one of audit,", "(default: all sections)"),
        "--device": ("torch device of the training sections", "(default: cpu)"),
        "--studies": ("folders written by gradlab study", "(default: none)"),
        "--workers": ("processes that run a study's seeds side by side",
                      "(default: the usable CPU cores, at most 8)"),
        "--no-progress": ("no progress output", "one line per stage otherwise)"),
    }),
    "audit": ("check the papers' printed equations by computation (SymPy, float64), one "
              "verdict per claim: the built-in papers' claims, or those of your own derivation "
              "with --claims FILE (from Python: gradlab.symbolic.audit_claim)", {
        "--json": ("write the records as JSON into this file", "none is created); an existing "
                   "file is replaced only if it is empty or an earlier gradlab audit --json "
                   "output"),
        "--markdown": ("write a readable report with the formulas", "(its folder must exist); an "
                       "existing file is replaced only if it is empty or an earlier gradlab "
                       "audit --markdown output"),
        "--mutants": ("also check mutants of each claim's accepted form",
                      "from 2 operators without a stated reason"),
        "--claims": ("audit your own claims instead of the built-in papers'",
                     "but not as __main__)"),
        "--measure": ("also measure P against batch size", "(default: off)"),
        "--no-progress": ("no progress output", "one line per paper otherwise)"),
    }),
    "plot": ("figures from Monitor log folders, several runs overlaid (headless)", {
        "RUN_DIR": ("one or more Monitor log folders", "(or their metrics.jsonl)"),
        "--out": ("figure folder", "<their common parent>/figures for several)"),
        "--label": ("legend name of each run, in order", "(default: folder names)"),
        "--max-points": ("a key logged at more than N steps is drawn as the means of groups",
                         "0: every logged step (default: 1000)"),
    }),
    "study": ("run a study of the report on your own image folder and backbone; writes its "
              "JSON, figures, summary.md and index.html", {
        "NAME": ("p-vs-batch-size: P against the batch size", "gradient_anatomy.json"),
        "--data": ("image folder: root/<class>/<image>", "(required unless --render)"),
        "--split": ("split to train on", "(default: train)"),
        "--list-file": ("'path label' lines", "instead of a layout"),
        "--test-list-file": ("with --list-file: the evaluation images", "losses and anatomy"),
        "--backbone": ("timm:NAME, torchvision:NAME or module:function",
                       "(default: gradlab.backbones:tiny_resnet)"),
        "--weights": ("local checkpoint of the backbone", "(default: random initial weights)"),
        "--embedding-dim": ("size of the embeddings", "(default: 512)"),
        "--image-size": ("side in pixels of the square crops", "(default: 224)"),
        "--batch-sizes": ("m values, multiples of 4", "64 for losses and anatomy)"),
        "--epochs": ("epochs per m", "(default: 1)"),
        "--seeds": (f"comma-separated distinct seeds from 0 to {MAX_SEED}", "(default: 0)"),
        "--lr": ("Adam", "(default: 1e-05)"),
        "--amp": ("mixed precision", "(default: off)"),
        "--loader-workers": ("processes that load and augment the images",
                             "(default: 0, this process)"),
        "--device": ("torch device of the training sections", "(default: cpu)"),
        "--out": ("folder for the JSON, figures, summary.md and index.html", "(default: study)"),
        "--overwrite": ("replace the results of an earlier study run in --out",
                        "without it such an --out is refused"),
        "--render": ("train nothing", "an earlier run left in --out"),
        "--no-progress": ("no progress output", "one line per stage otherwise)"),
    }),
    "plan": ("peak extra memory and time per step of a loss at a batch size: measured on the "
             "device if it is here (cpu, cuda), else estimated from a stated model", {
        "--loss": ("the loss; hyphens or underscores alike", "(default: smooth_ap)"),
        "--batch-size": ("m, a multiple of --per-class", "m, a multiple of --per-class"),
        "--dim": ("embedding dimension d", "embedding dimension d"),
        "--per-class": ("images per class in a batch", "(default: 4)"),
        "--device": ("cpu, cuda, cuda:N or mps", "a cuda device that is not here is estimated "
                     "for, and so is mps, which is not measured"),
        "--estimate": ("estimate even where the device is here", "(SmoothAP only)"),
    }),
    "check-equivalence": ("does a large-batch trick give the whole-batch gradient? Runs it on a "
                          "small synthetic problem; exit 0 when it does, 1 when it does not", {
        "CANDIDATE": ("the trick: one of gradient-cache,", "cached-mnrl"),
        "--loss": ("the loss", "(default: nt-xent)"),
        "--processes": ("gloo processes of the trick", "(default: 2 for the gathers, else 1)"),
        "--batch-size": ("B, even", "(default: 16)"),
        "--chunk-size": ("gradient-cache's chunk, cached-mnrl's mini-batch", "(default: 4)"),
        "--micro-batches": ("accumulation's micro-batches", "(default: 4)"),
        "--dtype": ("dtype of the comparison", "(default: float64)"),
        "--seed": ("seeds the problem", "(default: 0)"),
        "--class-sizes": ("the items of each class, comma-separated, adding up to --batch-size",
                          "(default: classes of two)"),
        "--json": ("also write the result as JSON into this file", "(its folder must exist); "
                   "an existing file is replaced only if it is empty or an earlier "
                   "gradlab check-equivalence --json output"),
    }),
}  # fmt: skip


# (command, argument) -> what its help must say in the middle: the layouts --data reads, what
# the audit's options record and train, the folders and numbers a user relies on.
HELP_SAYS = {
    ("study", "NAME"): ["p-vs-batch-size: P against the batch size", "; losses: the ranking "
                        "losses trained alike", "; anatomy: which pairs receive gradient"],
    ("study", "--data"): ["(first half of the classes trains, second half tests), Stanford "
                          "Online Products (Ebay_train.txt, Ebay_test.txt), or see --list-file"],
    ("study", "--epochs"): ["(p-vs-batch-size: P averages the last)"],
    ("study", "--render"): ["from the JSON an earlier run left in --out"],
    ("study", "--amp"): ["float16 with loss scaling on CUDA, bfloat16 on a CPU", "the losses "
                         "and measurements in float32"],
    ("report", "--workers"): ["the numbers are the same for any N"],
    ("report", "--studies"): ["becomes a section after the bundled ones (its tables, verdicts "
                              "and figures, rendered from its JSON; nothing is trained)"],
    ("audit", "--mutants"): ["(its hand-written slips and the sign/shift/factor/term/exponent/"
                             "log/swap operators' mutants; killed = the check does not hold, "
                             "where it holds for the claim's accepted form); records get "
                             "mutant_results, mutants, mutant_operators, "
                             "mutants_killed;"],
    ("audit", "--measure"): ["(quick settings, trains small networks for some seconds), shown "
                             "as context of Brown et al.'s claim that P rises with the batch "
                             "size, which stays not testable here (it needs the authors' data); "
                             "without it the miniature is recorded as not measured"],
    ("plot", "--out"): ["figure folder (default: RUN_DIR/figures for one run, "],
    ("plot", "--max-points"): ["steps (geometric on a log axis), over a band from each group's "
                               "smallest to its largest value (a long run is otherwise a solid "
                               "band in which the last key hides the others)"],
}  # fmt: skip


@pytest.mark.parametrize(("command", "argument"), list(HELP_SAYS))
def test_each_help_says_what_its_readers_rely_on(command, argument, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    code, out, _ = _run([command, "--help"], capsys)
    assert code == 0
    for phrase in HELP_SAYS[command, argument]:
        assert phrase in _options_of(out)[argument], (argument, phrase)


@pytest.mark.parametrize("command", list(HELP))
def test_each_command_prints_its_help_with_every_option_and_its_default(
    command, capsys, monkeypatch
):
    monkeypatch.setenv("COLUMNS", "400")  # one line per option: no wrapping to undo
    code, out, err = _run([command, "--help"], capsys)
    assert (code, err) == (0, "")
    description, expected = HELP[command]
    assert out.startswith(f"usage: gradlab {command} ")
    # the listing's help, and in the command's own help what follows it (report: its time)
    assert re.search(rf"\n\n{re.escape(description)}(; [^\n]+)?\n\n", out)
    options = _options_of(out)
    assert set(options) == {"-h", *expected}
    for option, (start, end) in expected.items():
        assert options[option].startswith(start), (option, options[option])
        assert options[option].endswith(end), (option, options[option])


def test_the_top_level_help_lists_each_command_with_its_help(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    code, out, _ = _run(["--help"], capsys)
    assert code == 0
    assert out.startswith("usage: gradlab [-h] [--version] COMMAND ...")
    description = ("gradlab: gradient diagnostics for ranking and contrastive losses. Each "
                   "command's options: gradlab COMMAND --help")  # fmt: skip
    assert f"\n\n{description}\n\n" in out
    # a long name has its help on the next line
    listed = dict(re.findall(r"^    (\S+)\s+(\S.*)$", out, flags=re.MULTILINE))
    assert listed == {command: description for command, (description, _) in HELP.items()}


def test_the_plan_and_equivalence_choices_are_the_registered_ones(capsys, monkeypatch):
    from gradlab.equivalence.builtin import CANDIDATES, LOSSES
    from gradlab.experiments.planner import PLAN_LOSSES

    monkeypatch.setenv("COLUMNS", "400")
    _, out, _ = _run(["plan", "--help"], capsys)
    assert f"--loss {{{','.join(PLAN_LOSSES)}}}" in out
    _, out, _ = _run(["check-equivalence", "--help"], capsys)
    assert f"--loss {{{','.join(LOSSES)}}}" in out
    assert _options_of(out)["CANDIDATE"] == f"the trick: one of {', '.join(CANDIDATES)}"


def test_a_missing_extra_is_one_line_naming_it_and_help_still_works(capsys, monkeypatch):
    import gradlab.extras

    absent = {"seaborn", "sympy"}
    monkeypatch.setattr(gradlab.extras, "is_installed", lambda module: module not in absent)
    code, out, err = _run(["plot", "some_run"], capsys)
    assert (code, out) == (2, "")
    (line,) = err.splitlines()
    assert line.startswith("gradlab: gradlab plot needs the seaborn package")
    assert "gradlab-ranking[plot]" in line
    code, _, err = _run(["--no-progress", "audit"], capsys)  # the command is the first word
    assert code == 2 and "gradlab audit needs the sympy package" in err
    assert "gradlab-ranking[audit]" in err
    for help_flag in ("-h", "--help"):
        code, out, _ = _run(["plot", help_flag], capsys)
        assert code == 0 and out.startswith("usage: gradlab plot")
    # a command that needs no extra is not held back
    code, _, err = _run(["plan", "--dim", "8"], capsys)
    assert code == 2 and "required: --batch-size" in err


def test_the_figures_backend_is_agg_unless_the_user_chose_one(capsys, monkeypatch):
    monkeypatch.delenv("MPLBACKEND", raising=False)
    _run(["--version"], capsys)
    assert os.environ["MPLBACKEND"] == "Agg"
    monkeypatch.setenv("MPLBACKEND", "pdf")
    _run(["--version"], capsys)
    assert os.environ["MPLBACKEND"] == "pdf"


def test_without_arguments_main_reads_the_command_line(capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["gradlab", "--version"])
    code, out, _ = _run(None, capsys)
    assert code == 0 and out == f"gradlab {gradlab.__version__}\n"


# --- report -------------------------------------------------------------------------------


@pytest.fixture
def reports(monkeypatch):
    """A stand-in run_report: records where and how it was asked to write, writes a report."""
    import gradlab.report

    calls = []

    def run_report(out, **options):
        calls.append((out, options))
        out.mkdir(parents=True)  # as run_report does
        (out / "summary.md").write_text("# report\n")

    monkeypatch.setattr(gradlab.report, "run_report", run_report)
    return calls


def test_report_hands_its_options_on_and_writes_beside_the_folder(tmp_path, capsys, reports):
    out = tmp_path / "deep" / "er" / "mine"
    argv = ["report", "--out", str(out), "--quick", "--only", "audit", "--only", "losses",
            "--workers", "3", "--no-progress"]  # fmt: skip
    code, stdout, _ = _run(argv, capsys)
    assert code == 0 and stdout == f"report written to {out}\n"
    ((staging, options),) = reports
    assert staging == out.parent / ".mine.partial"
    assert options == {"quick": True, "only": ["audit", "losses"], "device": "cpu",
                       "workers": 3, "studies": None}  # fmt: skip
    assert (out / "summary.md").is_file() and not staging.exists()
    assert sorted(p.name for p in out.parent.iterdir()) == ["mine"]


def test_report_defaults_and_progress_mode(tmp_path, capsys, reports, monkeypatch):
    import gradlab.experiments.runtime
    import gradlab.progress

    modes = []
    monkeypatch.setattr(gradlab.progress, "set_progress_mode", modes.append)
    monkeypatch.setattr(gradlab.experiments.runtime, "default_workers", lambda: 5)
    monkeypatch.chdir(tmp_path)
    code, stdout, _ = _run(["report"], capsys)
    assert code == 0 and stdout == "report written to reports/latest\n"
    ((staging, options),) = reports
    assert staging == Path("reports") / ".latest.partial"
    assert options == {"quick": False, "only": None, "device": "cpu", "workers": 5,
                       "studies": None}  # fmt: skip
    assert modes == []  # progress as the terminal decides
    code, _, _ = _run(["report", "--out", "other", "--no-progress"], capsys)
    assert code == 0 and modes == ["off"]


@pytest.mark.parametrize("text, workers", [("1", 1), ("8", 8), (" 4 ", 4)])
def test_workers_from_one_to_eight_are_taken(tmp_path, capsys, reports, text, workers):
    code, _, err = _run(["report", "--out", str(tmp_path / "r"), "--workers", text], capsys)
    assert code == 0, err
    assert reports[0][1]["workers"] == workers


@pytest.mark.parametrize("text", ["0", "9", "-1", "two", "2.5", ""])
def test_other_workers_are_one_line_naming_the_option(tmp_path, capsys, reports, text):
    code, out, err = _run(["report", "--out", str(tmp_path / "r"), "--workers", text], capsys)
    assert (code, out, reports) == (2, "", [])
    assert err == (f"gradlab report: error: argument --workers: must be a whole number from 1 "
                   f"to 8; got {text!r} (see gradlab report --help)\n")  # fmt: skip


def test_report_checks_the_study_folders_before_writing(tmp_path, capsys, reports):
    code, out, err = _run(["report", "--out", str(tmp_path / "r"), "--studies",
                           str(tmp_path / "nothing")], capsys)  # fmt: skip
    assert (code, out, reports) == (2, "", [])
    assert err.count("\n") == 1 and "--studies" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


REPORT_RESULTS = '{"gradlab": "0.2.0", "sections": {"audit": {}}, "skipped": {}}'
"""A results.json as ``gradlab report`` writes it (its ``gradlab`` and ``sections`` keys)."""


def test_a_previous_report_may_be_replaced_and_nothing_else(tmp_path):
    out = tmp_path / "r"
    (out / "figures").mkdir(parents=True)
    for name in ("index.html", "summary.md", "audit.json", "figures/p.png"):
        (out / name).write_text("x")
    with pytest.raises(GradlabError) as raised:  # a report's files without its results.json
        check_report_folder(out)
    assert str(raised.value) == (
        f"--out: {str(out)!r} is not empty and not a gradlab report (no results.json written "
        "by gradlab report); choose a new or empty folder")  # fmt: skip
    (out / "results.json").write_text(REPORT_RESULTS)
    assert check_report_folder(out) == out
    for extra in ("notes.txt", "a.json", "b.png", "runs"):
        (out / extra).write_text("x")
    with pytest.raises(GradlabError) as raised:  # the user's files beside a report
        check_report_folder(out)
    assert str(raised.value) == (
        f"--out: {str(out)!r} holds files that are not a gradlab report's (a.json, b.png, "
        "notes.txt and 1 more), which replacing it would delete; choose a new or empty folder")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert check_report_folder(empty) == empty
    assert check_report_folder(tmp_path / "new") == tmp_path / "new"


@pytest.mark.parametrize("listed", [False, True], ids=["older report", "figure_files"])
def test_files_of_ones_own_inside_a_reports_figures_are_not_deleted(tmp_path, listed):
    # only the folder's top level was checked: a file put into figures/ went with the report
    out = tmp_path / "r"
    (out / "figures" / "sub").mkdir(parents=True)
    written = ["p.png", "p.json", "sub/q.png"]
    for name in written:
        (out / "figures" / name).write_text("x")
    results = json.loads(REPORT_RESULTS)
    if listed:
        results["figure_files"] = written
    (out / "results.json").write_text(json.dumps(results))
    assert check_report_folder(out) == out
    own = ["notes.txt", "sub/mine.md"] + (["mine.png"] if listed else [])
    for name in own:
        (out / "figures" / name).write_text("x")
    with pytest.raises(GradlabError) as raised:
        check_report_folder(out)
    assert str(raised.value) == (
        f"--out: {str(out)!r} holds files that are not a gradlab report's "
        f"({', '.join(sorted('figures/' + name for name in own))}), which replacing it would "
        "delete; choose a new or empty folder")


def test_a_report_lists_the_figure_files_it_wrote(tmp_path, capsys):
    out = tmp_path / "r"  # the verification section draws a figure (about 3 s)
    code, _, _ = _run(["report", "--out", str(out), "--only", "verification", "--quick"],
                      capsys)  # fmt: skip
    assert code == 0
    results = json.loads((out / "results.json").read_text())
    on_disk = sorted(path.relative_to(out / "figures").as_posix()
                     for path in (out / "figures").rglob("*") if path.is_file())  # fmt: skip
    assert on_disk and results["figure_files"] == on_disk
    assert check_report_folder(out) == out  # a report may replace it


@pytest.mark.parametrize("given", [".", "..", "sub/.."])
def test_report_out_of_the_working_folder_or_above_is_refused_before_work(tmp_path, capsys,
                                                                          monkeypatch, given):
    # --out . staged the report in ./..partial, inside the folder it replaced: after the work,
    # the earlier report and the new one were both deleted ("could not use '.'")
    work = tmp_path / "earlier"
    (work / "sub").mkdir(parents=True)
    (work / "results.json").write_text(REPORT_RESULTS)
    monkeypatch.chdir(work / "sub" if given == ".." else work)
    code, out, err = _run(["report", "--out", given, "--only", "audit", "--quick"], capsys)
    where = "the folder you are in" + (" or one above it" if given == ".." else "")
    assert (code, out, err) == (2, "", f"gradlab: --out: {given!r} is {where}, which the "
                                       "report replaces whole; run from another folder or "
                                       "name a new one\n")
    assert sorted(p.name for p in work.iterdir()) == ["results.json", "sub"]


@pytest.mark.parametrize("results", ["{}", '{"old": true}', "[1, 2]", "not json",
                                     '{"gradlab": "0.2.0"}', '{"sections": {}}'])
def test_a_results_json_that_is_not_a_reports_does_not_mark_one(tmp_path, results):
    # a study's folder (index.html, summary.md, its JSON) was wiped by report --out
    out = tmp_path / "study"
    out.mkdir()
    (out / "results.json").write_text(results)
    (out / "index.html").write_text("<html></html>")
    with pytest.raises(GradlabError, match="not a gradlab report"):
        check_report_folder(out)
    assert sorted(p.name for p in out.iterdir()) == ["index.html", "results.json"]


def test_a_study_folder_given_as_report_out_is_refused_and_kept(tmp_path, capsys):
    out = tmp_path / "study"
    out.mkdir()
    files = {"index.html": "<html></html>", "summary.md": "# study",
             "loss_comparison_m8.json": "{}", "loss_comparison_m8.png": "png"}
    for name, text in files.items():
        (out / name).write_text(text)
    code, _, stderr = _run(["report", "--out", str(out), "--only", "audit", "--quick"], capsys)
    assert (code, stderr) == (2, (
        f"gradlab: --out: {str(out)!r} is not empty and not a gradlab report (no results.json "
        "written by gradlab report); choose a new or empty folder\n"))
    assert {p.name: p.read_text() for p in out.iterdir()} == files


def test_a_report_folder_named_like_a_marker_does_not_count(tmp_path):
    out = tmp_path / "r"
    (out / "results.json").mkdir(parents=True)  # a folder, not the file a report writes
    with pytest.raises(GradlabError, match="not a gradlab report"):
        check_report_folder(out)


def test_sigterm_while_writing_is_exit_143_and_leaves_nothing(tmp_path, capsys, monkeypatch):
    import signal

    import gradlab.report

    def terminated(out, **options):
        out.mkdir()
        (out / "results.json").write_text("{}")
        signal.getsignal(signal.SIGTERM)(signal.SIGTERM, None)

    monkeypatch.setattr(gradlab.report, "run_report", terminated)
    code, out, err = _run(["report", "--out", str(tmp_path / "r")], capsys)
    assert (code, out) == (143, "")
    assert err == "gradlab: terminated (SIGTERM); nothing was written\n"
    assert list(tmp_path.iterdir()) == []


def test_an_os_error_without_a_path_is_a_bug_shown_in_full(tmp_path, capsys, monkeypatch):
    import gradlab.report

    def broken(out, **options):
        raise OSError("no path here")

    monkeypatch.setattr(gradlab.report, "run_report", broken)
    with pytest.raises(OSError, match="no path here"):
        main(["report", "--out", str(tmp_path / "r")])


# --- audit --------------------------------------------------------------------------------


def test_audit_hands_on_mutants_and_writes_where_asked(tmp_path, capsys, monkeypatch):
    import gradlab.symbolic.audit as audit

    calls = []
    records = [{"id": "a", "verdict": "holds"}]  # no claim wrong as printed: no problem line
    monkeypatch.setattr(audit, "run_audit", lambda **options: calls.append(options) or records)
    monkeypatch.setattr(audit, "format_table", lambda records: "the table")
    monkeypatch.setattr(audit, "format_not_testable", lambda records: "apart")
    monkeypatch.setattr(audit, "write_outputs", lambda *args: calls.append(args))
    target, markdown = tmp_path / "a.json", tmp_path / "a.md"
    argv = ["audit", "--mutants", "--json", str(target), "--markdown", str(markdown)]
    code, out, err = _run(argv, capsys)
    assert (code, out, err) == (0, "the table\napart\n", "")
    options = {"claims": None, "mutants": True, "p_vs_batch_size": None, "progress": True}
    assert calls == [options, (records, target, markdown)]


@pytest.mark.parametrize(("causes", "said"), [
    (["sign", "sign", None], "the 3 claims wrong as printed show 2 distinct problems"),
    ([None], "the 1 claim wrong as printed shows 1 distinct problem"),
])  # fmt: skip
def test_audit_counts_the_distinct_problems_below_its_table(capsys, monkeypatch, causes, said):
    # the README and the report say "19 distinct problems"; the command's table did not
    import gradlab.symbolic.audit as audit

    records = [{"id": f"c{i}", "verdict": "fails" if i % 2 else "holds-with-correction",
                **({"cause": cause} if cause else {})} for i, cause in enumerate(causes)]
    records.append({"id": "h", "verdict": "holds", "cause": "other"})  # no problem
    monkeypatch.setattr(audit, "run_audit", lambda **options: records)
    monkeypatch.setattr(audit, "format_table", lambda records: "the table")
    monkeypatch.setattr(audit, "format_not_testable", lambda records: "apart")
    code, out, _ = _run(["audit"], capsys)
    assert code == 0
    assert out.splitlines()[:3] == ["the table", f"{said} (claims that share one root cause "
                                    "count once)", "apart"]


MONITOR_LOG = '{"header": {"run": 1}}\n{"step": 0, "loss": 0.5}\n'
"""A Monitor's ``metrics.jsonl``: what ``gradlab audit --json runs/exp1/metrics.jsonl`` lost."""


def _claims_run(monkeypatch, labels, during=None):
    """The audit on claims of its own (``1 + 1 is 2``, one per label), the outputs its own;
    ``during()`` runs as the claims are built (after the command checked its paths)."""
    import sympy

    import gradlab.symbolic.audit as audit
    from gradlab.symbolic.claims import Claim, Form, decide

    def all_claims(**options):
        if during is not None:
            during()
        return [Claim("002_9d7d2555864f9baa", label, "1 + 1 is 2", Form(sympy.Integer(2)),
                      lambda form: decide(form.value == 2, "1 + 1 = 2", "not 2"))
                for label in labels]  # fmt: skip

    monkeypatch.setattr(audit, "all_claims", all_claims)


@pytest.mark.parametrize("option", ["--json", "--markdown"])
def test_audit_refuses_to_replace_a_file_it_did_not_write(tmp_path, capsys, monkeypatch, option):
    # `gradlab audit --json runs/exp1/metrics.jsonl` replaced a Monitor's log with the records
    log = tmp_path / "metrics.jsonl"
    log.write_text(MONITOR_LOG)
    _claims_run(monkeypatch, ["eq1"], during=lambda: pytest.fail("the audit ran"))
    code, out, err = _run(["audit", "--no-progress", option, str(log)], capsys)
    assert (code, out) == (2, "")
    assert err == (f"gradlab: {option} would replace {str(log)!r}, an existing file that is not "
                   f"an earlier gradlab audit {option} output; name another file, or move that "
                   "one away first\n")
    assert log.read_text() == MONITOR_LOG


def test_audit_run_again_replaces_its_own_json_and_markdown(tmp_path, capsys, monkeypatch):
    target, markdown = tmp_path / "a.json", tmp_path / "a.md"
    markdown.touch()  # an empty file holds nothing to lose
    for labels in (["eq1", "eq2"], ["eq3"]):
        _claims_run(monkeypatch, labels)
        code, _, err = _run(["audit", "--no-progress", "--json", str(target), "--markdown",
                             str(markdown)], capsys)  # fmt: skip
        assert (code, err) == (0, "")
        assert [record["label"] for record in json.loads(target.read_text())] == labels
        assert markdown.read_text().splitlines()[0] == "# Derivation audit"
        assert [label for label in ("eq1", "eq2", "eq3")
                if f"`{label}`" in markdown.read_text()] == labels  # fmt: skip


def test_audit_keeps_a_file_written_at_its_output_while_it_ran(tmp_path, capsys, monkeypatch):
    target = tmp_path / "metrics.jsonl"
    _claims_run(monkeypatch, ["eq1"], during=lambda: target.write_text(MONITOR_LOG))
    code, out, err = _run(["audit", "--no-progress", "--json", str(target)], capsys)
    assert code == 2 and "holds: 1" in out  # the table was printed; the records not written
    assert err == (f"gradlab: --json would replace {str(target)!r}, an existing file that is not "
                   "an earlier gradlab audit --json output; name another file, or move that one "
                   "away first\n")
    assert target.read_text() == MONITOR_LOG


@pytest.mark.parametrize("quiet", [False, True])
def test_audit_says_which_paper_it_checks_unless_told_not_to(capsys, monkeypatch, quiet):
    import sympy

    import gradlab.symbolic.audit as audit
    from gradlab.progress import set_progress_mode
    from gradlab.symbolic.claims import Claim, Form, decide

    claims = [Claim("002_9d7d2555864f9baa", f"eq{n}", "1 + 1 is 2", Form(sympy.Integer(2)),
                    lambda form: decide(form.value == 2, "1 + 1 = 2", "not 2"))
              for n in (1, 2)]  # fmt: skip
    monkeypatch.setattr(audit, "all_claims", lambda **options: claims)
    set_progress_mode("lines")
    try:
        code, out, err = _run(["audit", *(["--no-progress"] if quiet else [])], capsys)
    finally:
        set_progress_mode("auto")
    assert code == 0 and "holds: 2" in out
    stage = "gradlab: audit: paper 1 of 1, Brown et al. 2020, supplementary material"
    lines = [re.sub(r", [\d.]+ s\)$", ")", line) for line in err.splitlines()]
    assert lines == ([] if quiet else [f"{stage} (2 claims) ...", f"{stage} done (2 claims)"])


# --- plot ---------------------------------------------------------------------------------


def test_plot_hands_on_labels_prints_warnings_and_what_it_wrote(tmp_path, capsys, monkeypatch):
    import warnings

    import gradlab.plotting.monitor as plots

    calls = []

    def plot_runs(runs, out, labels):
        calls.append((runs, out, labels))
        warnings.warn("run b has no loss", UserWarning, stacklevel=1)
        warnings.warn("run b has no loss", UserWarning, stacklevel=1)  # each one, not once
        return [out / "loss.png", out / "tau.png"]

    monkeypatch.setattr(plots, "plot_runs", plot_runs)
    runs = [tmp_path / "a", tmp_path / "b"]
    for run in runs:  # the command checks that each is a run before plotting
        run.mkdir()
        (run / "metrics.jsonl").write_text('{"header": {}}\n{"step": 0, "loss": 0.5}\n')
    figures = tmp_path / "new" / "figures"
    argv = ["plot", *map(str, runs), "--out", str(figures), "--label", "A", "--label", "B"]
    code, out, err = _run(argv, capsys)
    assert code == 0
    assert calls == [(runs, figures, ["A", "B"])]
    assert out == f"wrote {figures / 'loss.png'}\nwrote {figures / 'tau.png'}\n"
    assert err == "gradlab: warning: run b has no loss\n" * 2


def test_plot_without_out_writes_to_the_runs_figures_folder(tmp_path, capsys, monkeypatch):
    import gradlab.plotting.monitor as plots

    calls = []
    monkeypatch.setattr(plots, "plot_runs", lambda runs, out, labels: calls.append(out) or [])
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text("")
    code, out, err = _run(["plot", str(run)], capsys)
    assert (code, out, err) == (0, "", "")
    assert calls == [run / "figures"]


def test_plot_of_a_glob_leaves_out_the_figure_folder_it_wrote_before(tmp_path, capsys):
    # `gradlab plot multi/*` writes multi/figures; run again, the glob matches that folder too,
    # which failed as a RUN_DIR without a metrics.jsonl
    from tests.helpers.training import train

    for name in ("a", "b"):
        with gradlab.Monitor(tmp_path / name, preset="cheap", every=1) as monitor:
            train(monitor, steps=2)
    code, _, err = _run(["plot", str(tmp_path / "a"), str(tmp_path / "b")], capsys)
    assert (code, err) == (0, "")
    figures = tmp_path / "figures"
    runs = [str(path) for path in sorted(tmp_path.iterdir())]  # a, b, figures: the glob
    code, out, err = _run(["plot", *runs], capsys)
    assert (code, err) == (0, f"gradlab: left out {str(figures)!r}: the figure folder an "
                              "earlier gradlab plot wrote, not a run\n")
    assert f"wrote {figures / 'overview.png'}" in out.splitlines()
    code, _, err = _run(["plot", str(figures)], capsys)  # named alone: still refused
    assert code == 2 and err.startswith("gradlab: RUN_DIR must hold a metrics.jsonl")


def test_plot_of_a_glob_with_labels_or_one_run_left_leaves_out_its_figure_folder(tmp_path,
                                                                                 capsys):
    # with --label the figure folder was kept (a RUN_DIR without metrics.jsonl, and one label
    # too few); with one run left beside it, the figures went to that run's own folder
    from tests.helpers.training import train

    for name in ("a", "b"):
        with gradlab.Monitor(tmp_path / name, preset="cheap", every=1) as monitor:
            train(monitor, steps=2)
    figures = tmp_path / "figures"
    left_out = (f"gradlab: left out {str(figures)!r}: the figure folder an earlier gradlab "
                "plot wrote, not a run\n")
    labels = ["--label", "A", "--label", "B"]
    code, _, err = _run(["plot", str(tmp_path / "a"), str(tmp_path / "b"), *labels], capsys)
    assert (code, err) == (0, "")
    runs = [str(path) for path in sorted(tmp_path.iterdir())]  # a, b, figures: the glob
    code, out, err = _run(["plot", *runs, *labels], capsys)
    assert (code, err) == (0, left_out)
    assert f"wrote {figures / 'overview.png'}" in out.splitlines()
    code, out, err = _run(["plot", str(tmp_path / "a"), str(figures)], capsys)
    assert (code, err) == (0, left_out)
    assert f"wrote {figures / 'overview.png'}" in out.splitlines()  # where the glob's went
    assert not (tmp_path / "a" / "figures").exists()


@pytest.mark.slow
def test_plot_writes_an_out_under_tilde_in_the_home_folder(tmp_path, capsys, monkeypatch):
    home, work = home_and_work(tmp_path, monkeypatch)
    run = tmp_path / "run"
    with gradlab.Monitor(run, preset="cheap", every=1) as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        for _ in range(2):
            loss_fn(torch.randn(8, 4, requires_grad=True), torch.arange(8) % 2).backward()
            monitor.step()
    code, out, err = _run(["plot", str(run), "--out=~/figures"], capsys)
    assert (code, err) == (0, "")
    assert (home / "figures" / "overview.png").is_file()
    assert f"wrote {home / 'figures' / 'overview.png'}\n" in out
    assert list(work.iterdir()) == []


# --- study --------------------------------------------------------------------------------


def _class_folders(root: Path, classes: int = 128, per_class: int = 4) -> Path:
    """``root/class_NNN/K.png``: the command reads the folder's training half (names and
    counts, not the pictures) before a study; 64 training classes of 4 take the largest default
    batch, 256."""
    for index in range(classes):
        folder = root / f"class_{index:03d}"
        folder.mkdir(parents=True)
        for image in range(per_class):
            (folder / f"{image}.png").touch()
    return root


@pytest.fixture
def studies(monkeypatch, tmp_path):
    """Stand-ins for the image studies and the pages: record what they get, return results.
    ``tmp_path`` holds class folders, the ``--data`` of the tests."""
    from gradlab.experiments import image_studies

    _class_folders(tmp_path)
    from gradlab.report import user_studies

    calls = []

    def study(kind):
        def run(data, **options):
            calls.append((kind, data, options))
            sizes = options["batch_sizes"]
            if kind == "losses":
                return {m: {"m": m, "kind": kind} for m in sizes}
            return {"kind": kind, "batch_sizes": sizes, "seeds": options["seeds"]}

        return run

    monkeypatch.setattr(image_studies, "p_vs_batch_size_on_images", study("p"))
    monkeypatch.setattr(image_studies, "loss_comparison_on_images", study("losses"))
    monkeypatch.setattr(image_studies, "anatomy_on_images", study("anatomy"))

    def pages(name, results, out):
        calls.append(("pages", name, results, out))
        for page in ("summary.md", "index.html"):
            (out / page).write_text(f"the {name} study")
        return [out / "summary.md", out / "index.html"]

    monkeypatch.setattr(user_studies, "write_study_report", pages)
    return calls


def _trend(monkeypatch, trained_at_m):
    """summarize() stand-in: the trend given, for the results it must be given (a list)."""
    import gradlab.experiments.p_vs_batch_size as p_study

    summarized = []
    monkeypatch.setattr(p_study, "summarize",
                        lambda results: summarized.append(results)
                        or {"settings": {"trained_at_m": trained_at_m}})  # fmt: skip
    return summarized


def test_the_p_study_hands_on_every_option_writes_its_json_and_says_the_trend(
    tmp_path, capsys, studies, monkeypatch
):
    summarized = _trend(monkeypatch, {"trend": "rises"})
    data, out = _class_folders(tmp_path / "images"), tmp_path / "a" / "b"
    # the command checks --data and that --weights exists (the study is a stand-in)
    (tmp_path / "w.pt").write_bytes(b"")
    argv = [
        "study",
        "p-vs-batch-size",
        "--data",
        str(data),
        "--out",
        str(out),
        "--split",
        "test",
        "--backbone",
        "timm:tiny",
        "--weights",
        str(tmp_path / "w.pt"),
        "--embedding-dim",
        "32",
        "--image-size",
        "48",
        "--batch-sizes",
        "8,16,24",
        "--epochs",
        "2",
        "--seeds",
        "3,4",
        "--lr",
        "0.5",
        "--amp",
        "--loader-workers",
        "2",
    ]
    code, stdout, err = _run(argv, capsys)
    assert (code, err) == (0, AMP_ON_CPU)
    (kind, given_data, options), pages = studies
    assert (kind, given_data) == ("p", data)
    assert options == dict(
        split="test", layout="auto", list_file=None, backbone="timm:tiny",
        weights=tmp_path / "w.pt", embedding_dim=32, image_size=48, batch_sizes=[8, 16, 24],
        epochs=2, seeds=[3, 4], device="cpu", lr=0.5, amp=True, workers=2,
    )  # fmt: skip
    results = {"kind": "p", "batch_sizes": [8, 16, 24], "seeds": [3, 4]}
    assert json.loads((out / "p_vs_batch_size.json").read_text()) == results
    assert (out / "p_vs_batch_size.json").read_text().endswith("}\n")
    assert pages[:3] == ("pages", "p-vs-batch-size", results)
    assert pages[3].parent == out  # drawn in a folder inside --out, then moved into it
    assert sorted(path.name for path in out.iterdir()) == [
        "index.html", "p_vs_batch_size.json", "summary.md"]
    assert summarized == [results]
    assert stdout.splitlines() == [
        f"wrote {out / 'p_vs_batch_size.json'}", f"wrote {out / 'summary.md'}",
        f"wrote {out / 'index.html'}",
        "P from m = 8 to m = 24: rises (paired t-test over the seeds; 2 seeds)",
    ]  # fmt: skip


@pytest.mark.parametrize(("sizes", "seeds", "why"), [
    ("8,16", "0", "one seed cannot show a trend"),
])  # fmt: skip
def test_the_p_study_says_what_the_run_lacked_for_a_trend_as_its_page_does(
    tmp_path, capsys, studies, monkeypatch, sizes, seeds, why
):
    _trend(monkeypatch, {"trend": "unclear"})
    argv = ["study", "p-vs-batch-size", "--data", str(tmp_path), "--out", str(_beside(tmp_path)),
            "--batch-sizes", sizes, "--seeds", seeds]  # fmt: skip
    code, stdout, _ = _run(argv, capsys)
    last = sizes.split(",")[-1]
    assert code == 0
    assert stdout.splitlines()[-1] == (f"P from m = 8 to m = {last}: unclear (paired t-test over "
                                       f"the seeds; {why})")  # fmt: skip


def test_the_p_study_of_one_batch_size_says_it_shows_no_trend(tmp_path, capsys, studies,
                                                               monkeypatch):  # fmt: skip
    _trend(monkeypatch, {"trend": "unclear"})
    argv = ["study", "p-vs-batch-size", "--data", str(tmp_path), "--out", str(_beside(tmp_path)),
            "--batch-sizes", "8", "--seeds", "0,1"]  # fmt: skip
    code, stdout, _ = _run(argv, capsys)
    assert code == 0
    assert stdout.splitlines()[-1] == ("P at m = 8 alone: no trend (a trend needs P at two or "
                                       "more batch sizes)")  # fmt: skip


AMP_ON_CPU = ("gradlab: --amp on cpu: the backbone runs under torch.autocast in bfloat16 "
              "(--amp on CUDA is float16 with loss scaling); the losses and measurements take "
              "its embeddings in float32. Its numbers differ a little from a float32 run's; "
              "bfloat16 is faster than float32 on a CPU with bfloat16 instructions (AVX-512 "
              "BF16, AMX) and may be slower on others\n")


@pytest.mark.parametrize("name", ["p-vs-batch-size", "losses", "anatomy"])
def test_amp_on_a_cpu_says_it_computes_in_bfloat16_before_training(tmp_path, capsys, studies,
                                                                    monkeypatch, name):
    _trend(monkeypatch, {})
    said = []  # what stderr held when the study began
    from gradlab.experiments import image_studies

    for study in ("p_vs_batch_size_on_images", "loss_comparison_on_images", "anatomy_on_images"):
        run = getattr(image_studies, study)
        monkeypatch.setattr(image_studies, study,
                            lambda data, run=run, **options: said.append(capsys.readouterr().err)
                            or run(data, **options))  # fmt: skip
    argv = ["study", name, "--data", str(tmp_path), "--out", str(_beside(tmp_path)),
            "--batch-sizes", "8", "--amp"]  # fmt: skip
    code, _, err = _run(argv, capsys)
    assert (code, said, err) == (0, [AMP_ON_CPU], "")
    code, _, err = _run([*argv[:-1], "--overwrite"], capsys)  # without --amp: nothing said
    assert (code, err) == (0, "")


def test_the_p_study_says_no_trend_when_none_was_summarized(tmp_path, capsys, studies, monkeypatch):
    _trend(monkeypatch, {})
    argv = ["study", "p-vs-batch-size", "--data", str(tmp_path), "--out", str(_beside(tmp_path))]
    code, stdout, _ = _run(argv, capsys)
    assert code == 0 and "P from" not in stdout
    options = studies[0][2]
    assert options["batch_sizes"] == [16, 32, 64, 128, 256]  # the study's default sizes
    assert options["seeds"] == [0] and options["epochs"] == 1 and options["lr"] == 1e-5
    assert (options["embedding_dim"], options["image_size"]) == (512, 224)
    assert options["backbone"] == "gradlab.backbones:tiny_resnet" and options["amp"] is False
    assert (options["split"], options["workers"], options["weights"]) == ("train", 0, None)


def test_the_losses_study_writes_one_json_per_batch_size_from_a_list_file(
    tmp_path, capsys, studies
):
    out = _beside(tmp_path)
    lists = (tmp_path / "train.txt", tmp_path / "test.txt")
    for listing, first in zip(lists, (0, 3), strict=True):  # 3 classes each, the command reads
        listing.write_text("".join(f"class_{index:03d}/{image}.png {index}\n"
                                   for index in range(first, first + 3)
                                   for image in range(4)))  # fmt: skip
    argv = [
        "study",
        "losses",
        "--data",
        str(tmp_path),
        "--out",
        str(out),
        "--batch-sizes",
        "8,12,",
        "--list-file",
        str(lists[0]),
        "--test-list-file",
        str(lists[1]),
    ]
    code, stdout, _ = _run(argv, capsys)
    assert code == 0
    (kind, data, options), _pages = studies
    assert (kind, data) == ("losses", tmp_path)
    assert options["layout"] == "list" and options["list_file"] == lists[0]
    assert options["test_list_file"] == lists[1] and options["batch_sizes"] == [8, 12]
    assert json.loads((out / "loss_comparison_m8.json").read_text()) == {"m": 8, "kind": "losses"}
    assert json.loads((out / "loss_comparison_m12.json").read_text())["m"] == 12
    assert stdout.splitlines()[:2] == [f"wrote {out / 'loss_comparison_m8.json'}",
                                       f"wrote {out / 'loss_comparison_m12.json'}"]  # fmt: skip


def test_a_study_writes_standard_json_with_nan_as_a_string(tmp_path, capsys, monkeypatch, studies):
    # VSE++'s hardest-10 % share is NaN where no negative gets gradient: the file held the bare
    # token NaN, which strict JSON readers refuse
    from gradlab.experiments import image_studies

    def anatomy(data, **options):
        studies.append(("anatomy", data, options))
        return {"kind": "anatomy", "share": [float("nan"), 0.5], "top": float("inf")}

    monkeypatch.setattr(image_studies, "anatomy_on_images", anatomy)
    out = _beside(tmp_path)
    code, _, _ = _run(["study", "anatomy", "--data", str(tmp_path), "--out", str(out)], capsys)
    assert code == 0

    def refuse(token):
        raise ValueError(f"not standard JSON: {token}")

    text = (out / "gradient_anatomy.json").read_text()
    assert json.loads(text, parse_constant=refuse) == {
        "kind": "anatomy", "share": ["NaN", 0.5], "top": "Infinity"}


def test_the_anatomy_study_writes_its_json(tmp_path, capsys, studies):
    out = _beside(tmp_path)
    code, stdout, _ = _run(["study", "anatomy", "--data", str(tmp_path), "--out", str(out)],
                           capsys)  # fmt: skip
    assert code == 0
    (kind, data, options), _pages = studies
    assert (kind, data) == ("anatomy", tmp_path)
    assert options["batch_sizes"] == [64]
    assert options["test_list_file"] is None
    assert json.loads((out / "gradient_anatomy.json").read_text())["kind"] == "anatomy"
    assert stdout.splitlines()[0] == f"wrote {out / 'gradient_anatomy.json'}"
    assert sorted(p.name for p in out.iterdir()) == ["gradient_anatomy.json", "index.html",
                                                     "summary.md"]  # fmt: skip


def test_render_trains_nothing_and_prints_what_it_wrote(tmp_path, capsys, studies, monkeypatch):
    from gradlab.report import user_studies

    rendered = []

    def render(name, out):
        rendered.append((name, out))
        return [out / "a.png", out / "index.html"]

    monkeypatch.setattr(user_studies, "render_study_folder", render)
    code, stdout, _ = _run(["study", "losses", "--render", "--out", str(tmp_path)], capsys)
    assert code == 0 and studies == [] and rendered == [("losses", tmp_path)]
    assert stdout == f"wrote {tmp_path / 'a.png'}\nwrote {tmp_path / 'index.html'}\n"


def test_render_of_the_p_study_prints_its_trend_as_the_run_did(tmp_path, capsys, studies,
                                                                monkeypatch):  # fmt: skip
    # the training run's last line, the trend of P, was not printed again by --render
    import types

    from gradlab.report import user_studies

    results = {"batch_sizes": [8, 16], "per_class": 4, "seeds": [0, 1, 2], "settings": {
        "trained_at_m": {"P": [[0.30, 0.40], [0.31, 0.42], [0.29, 0.41]]}}}  # fmt: skip
    monkeypatch.setattr(user_studies, "render_study_folder", lambda name, out: [out / "a.png"])
    monkeypatch.setattr(user_studies, "load_study",
                        lambda name, out: types.SimpleNamespace(results=results))
    code, stdout, _ = _run(["study", "p-vs-batch-size", "--render", "--out", str(tmp_path)],
                           capsys)  # fmt: skip
    assert code == 0 and studies == []
    wrote, trend = stdout.splitlines()
    assert wrote == f"wrote {tmp_path / 'a.png'}"
    # by hand: the means 0.300 and 0.410, every seed up by 0.10 to 0.12
    assert trend.startswith("P from m = 8 to m = 16: rises (paired t-test over the seeds; 3 "
                            "seeds; mean P 0.300 -> 0.410, change +0.110 ")


@pytest.mark.parametrize(
    ("typed", "got"),
    [(["--split", "val"], "--split 'val'"),
     (["--list-file", "train.txt"], "--list-file 'train.txt'"),
     (["--test-list-file", "test.txt"], "--test-list-file 'test.txt'"),
     (["--backbone", "mybb:net"], "--backbone 'mybb:net'"),
     (["--weights", "w.pt"], "--weights 'w.pt'"),
     (["--embedding-dim", "8"], "--embedding-dim 8"),
     (["--image-size", "16"], "--image-size 16"),
     (["--batch-sizes", "8,16"], "--batch-sizes 8,16"),
     (["--epochs", "5"], "--epochs 5"),
     (["--seeds", "0,1"], "--seeds 0,1"),
     (["--lr", "0.001"], "--lr 0.001"),
     (["--amp"], "--amp"),
     (["--loader-workers", "2"], "--loader-workers 2"),
     (["--device", "cuda"], "--device 'cuda'"),
     (["--overwrite"], "--overwrite")],
)  # fmt: skip
def test_render_refuses_every_option_it_does_not_read(
    tmp_path, capsys, studies, monkeypatch, typed, got
):
    # was: exit 0 and a re-render that ignored the option (only --data was refused)
    from gradlab.report import user_studies

    rendered = []
    monkeypatch.setattr(user_studies, "render_study_folder",
                        lambda name, out: rendered.append(name) or [])  # fmt: skip
    argv = ["study", "p-vs-batch-size", "--render", "--out", str(tmp_path), *typed]
    code, stdout, err = _run(argv, capsys)
    assert (code, stdout, studies, rendered) == (2, "", [], [])
    option = got.split(" ")[0]
    assert err == (f"gradlab: {option} does not apply with --render (it redraws the study saved "
                   f"in --out); got {got}\n")


@pytest.mark.parametrize("name", ["p-vs-batch-size", "losses", "anatomy"])
def test_render_takes_options_at_their_defaults_the_study_s_batch_sizes_included(
    tmp_path, capsys, studies, monkeypatch, name
):
    # --epochs 1 (the parser's default) was taken, the study's own default batch sizes refused
    import types

    from gradlab.cli import DEFAULT_STUDY_BATCH_SIZES
    from gradlab.report import user_studies

    rendered = []
    monkeypatch.setattr(user_studies, "render_study_folder",
                        lambda name, out: rendered.append(name) or [])  # fmt: skip
    one_size = {"batch_sizes": [8], "seeds": [0], "settings": {"trained_at_m": {"P": [[0.5]]}}}
    monkeypatch.setattr(user_studies, "load_study",
                        lambda name, out: types.SimpleNamespace(results=one_size))
    sizes = ",".join(map(str, DEFAULT_STUDY_BATCH_SIZES[name]))
    argv = ["study", name, "--render", "--out", str(tmp_path), "--batch-sizes", sizes,
            "--epochs", "1"]  # fmt: skip
    said = ("P at m = 8 alone: no trend (a trend needs P at two or more batch sizes)\n"
            if name == "p-vs-batch-size" else "")  # the P study's trend line, as a run's
    assert _run(argv, capsys)[:2] == (0, said)
    assert rendered == [name]


@pytest.mark.parametrize(
    "extra, named",
    [(["--batch-sizes", "16,x"], "argument --batch-sizes: must be integers separated by commas, "
                                 "e.g. 16,32,64; got '16,x'"),
     # the batch sizes' example (16,32,64) was shown for the seeds too
     (["--seeds", "1;2"], "argument --seeds: must be integers separated by commas, e.g. 0,1,2; "
                          "got '1;2'"),
     # a doubled comma, a dropped value: it was read as 8,16
     (["--batch-sizes", "8,,16"], "argument --batch-sizes: must be integers separated by "
                                  "commas, e.g. 16,32,64; got '8,,16' (an empty entry)"),
     (["--seeds", ",1"], "argument --seeds: must be integers separated by commas, e.g. 0,1,2; "
                         "got ',1' (an empty entry)"),
     # Adam's first step, lr / 0.1, overflowed float32: a torch traceback and exit code 1
     (["--lr", "1e38"], "gradlab: --lr must be at most 3.4028234663852877e+37 (Adam's first "
                        "step is lr / (1 - 0.9), a float32 number); got 1e+38"),
     (["--batch-sizes", "6"], "batch"),
     (["--device", "banana"], "--device must be cpu, cuda[:N] or mps; got 'banana'")],
)  # fmt: skip
def test_a_study_refuses_bad_options_in_one_line_before_training(
    tmp_path, capsys, studies, extra, named
):
    out = _beside(tmp_path)
    code, stdout, err = _run(["study", "losses", "--data", str(tmp_path), "--out", str(out),
                              *extra], capsys)  # fmt: skip
    assert (code, stdout, studies) == (2, "", [])
    assert err.count("\n") == 1 and named in err
    assert not out.exists()


PYTHON_NAME = re.compile(r"\b[a-z]+_[a-z_]+\b")
"""A parameter's name (``per_class``, ``test_list_file``): no message of the command shows one."""


def _unquoted(message: str) -> str:
    """The message without its quoted values (paths, class folders, which hold underscores)."""
    return re.sub(r"'[^']*'", "''", message)


@pytest.mark.parametrize(
    ("data", "extra", "named"),
    [("all", ["--seeds", "1,1"], "--seeds must be distinct"),
     # was accepted: the losses study merged the second run of m = 8 into the first, two
     # values per metric for one seed
     ("all", ["--batch-sizes", "8,8"], "--batch-sizes must be distinct; got 8 more than once"),
     ("all", ["--seeds", ","], "--seeds must name at least one seed"),
     # was torch's "Overflow when unpacking long long", a traceback after the data was read
     ("all", ["--seeds", "0,18446744073709551616"],
      "--seeds must be whole numbers from 0 to 2**32 - 1; got [0, 18446744073709551616]"),
     ("all", ["--batch-sizes", "6"], "--batch-sizes must be a multiple of 4"),
     ("all", ["--batch-sizes", ","], "--batch-sizes must name at least one size"),
     ("all", ["--split", "val"], "--split must be train or test"),
     ("all", ["--split", "test"], "--split test is the split gradlab study losses measures"),
     ("all", ["--list-file", "LIST"], "with --list-file needs --test-list-file"),
     ("all", ["--list-file", "LIST", "--test-list-file", "LIST"],
      "--test-list-file must name other images than --list-file"),
     # the default batch size (64) was "batch size must be at most ... for this split"
     ("four", [], "--batch-sizes must be at most 4 x 2 classes = 8 for the train split of "
                  "--data"),
     ("two", ["--batch-sizes", "8"], "holds 1 class (class_000); a batch needs two"),
     # was "labels must hold at least per_class=4 items of every class; class 1 has 3"; then
     # the whole split was refused for its class of 3: now that class is left out, one remains
     ("short", ["--batch-sizes", "8"], "holds 1 class(es) with 4 or more images (class_000); "
                                       "a batch needs two")],
)  # fmt: skip
def test_a_study_names_the_options_and_folders_the_user_typed(
    tmp_path, tmp_path_factory, capsys, studies, data, extra, named
):
    elsewhere = tmp_path_factory.mktemp("small")  # not in tmp_path: not class folders of "all"
    folders = {"all": tmp_path, "four": _class_folders(elsewhere / "four", classes=4),
               "two": _class_folders(elsewhere / "two", classes=2)}  # fmt: skip
    folders["short"] = _class_folders(elsewhere / "short", classes=4)
    (folders["short"] / "class_001" / "0.png").unlink()
    listing = tmp_path / "list.txt"
    listing.write_text("class_000/0.png 0\n")
    extra = [str(listing) if part == "LIST" else part for part in extra]
    out = _beside(tmp_path)
    code, stdout, err = _run(["study", "losses", "--data", str(folders[data]), "--out", str(out),
                              *extra], capsys)  # fmt: skip
    assert (code, stdout, studies) == (2, "", [])
    assert err.startswith("gradlab: ") and err.count("\n") == 1, err
    assert named in err, err
    assert PYTHON_NAME.findall(_unquoted(err)) == [], err
    assert not out.exists()


def test_the_p_study_refuses_evaluation_images_it_would_not_use(tmp_path, capsys, studies):
    # --test-list-file was accepted and ignored: P is measured on the training images alone
    train, test = tmp_path / "train.txt", tmp_path / "test.txt"
    train.write_text("class_000/0.png 0\n")
    test.write_text("class_001/0.png 1\n")
    code, stdout, err = _run(["study", "p-vs-batch-size", "--data", str(tmp_path), "--list-file",
                              str(train), "--test-list-file", str(test), "--out",
                              str(_beside(tmp_path))], capsys)  # fmt: skip
    assert (code, stdout, studies) == (2, "", [])
    assert err == ("gradlab: --test-list-file names evaluation images, which gradlab study "
                   "p-vs-batch-size does not use (it measures P on the training images of "
                   "--list-file); leave it out\n")


def test_a_study_says_when_the_batch_size_it_refuses_is_its_default(tmp_path, capsys, studies):
    data, out = _class_folders(tmp_path / "four", classes=4), str(_beside(tmp_path))
    code, _, err = _run(["study", "anatomy", "--data", str(data), "--out", out], capsys)
    assert code == 2 and "got 64 (the default --batch-sizes 64 of gradlab study anatomy" in err
    code, _, err = _run(["study", "anatomy", "--data", str(data), "--out", out,
                         "--batch-sizes", "16"], capsys)  # fmt: skip
    assert code == 2 and err.endswith("got 16\n") and "default" not in err
    assert studies == [] and not (_beside(tmp_path)).exists()


@pytest.mark.parametrize(
    ("extra", "option"),
    [(["--batch-size", "-4", "--dim", "8"], "--batch-size"),
     (["--batch-size", "63", "--dim", "8"], "--batch-size"),
     (["--batch-size", "4", "--dim", "8"], "--batch-size"),
     (["--batch-size", "64", "--dim", "0"], "--dim"),
     (["--batch-size", "64", "--dim", "8", "--per-class", "-3"], "--per-class"),
     (["--batch-size", "64", "--dim", "8", "--per-class", "1"], "--per-class")],
)  # fmt: skip
def test_plan_names_the_option_the_user_typed(capsys, plans, extra, option):
    # was "per_class must be a positive integer", "batch size must be a multiple of 4"
    code, out, err = _run(["plan", *extra], capsys)
    assert (code, out, plans) == (2, "", [])
    assert err.startswith(f"gradlab: {option} must ") and err.count("\n") == 1, err
    assert PYTHON_NAME.findall(_unquoted(err)) == [], err


def test_a_study_without_data_names_the_option(tmp_path, capsys, studies):
    code, _, err = _run(["study", "anatomy", "--out", str(_beside(tmp_path))], capsys)
    assert code == 2 and studies == []
    assert err == "gradlab: gradlab study anatomy needs --data FOLDER (or --render)\n"


# --- plan ---------------------------------------------------------------------------------


@pytest.fixture
def plans(monkeypatch):
    import gradlab.experiments.planner as planner

    calls = []

    def plan(loss, batch_size, dim, per_class, device, estimate):
        calls.append((loss, batch_size, dim, per_class, device, estimate))
        return "the plan"

    monkeypatch.setattr(planner, "plan", plan)
    monkeypatch.setattr(planner, "format_plan", lambda result: f"printed {result}")
    return calls


def test_plan_hands_on_its_options_and_prints_the_plan(capsys, plans):
    argv = ["plan", "--loss", "contrastive", "--batch-size", "24", "--dim", "8",
            "--per-class", "3", "--device", "cpu", "--estimate"]  # fmt: skip
    code, out, err = _run(argv, capsys)
    assert (code, out, err) == (0, "printed the plan\n", "")
    assert plans == [("contrastive", 24, 8, 3, "cpu", True)]


def test_plan_takes_a_loss_spelled_with_dashes_as_check_equivalence_does(capsys, plans):
    for spelled in ("smooth-ap", "smooth_ap"):
        code, _, err = _run(["plan", "--loss", spelled, "--batch-size", "24", "--dim", "8",
                             "--estimate"], capsys)  # fmt: skip
        assert (code, err) == (0, "")
    assert [call[0] for call in plans] == ["smooth_ap", "smooth_ap"]


def test_plan_measures_on_the_device_that_is_here(capsys, plans, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    code, _, _ = _run(["plan", "--batch-size", "16", "--dim", "8"], capsys)
    assert code == 0
    assert plans == [("smooth_ap", 16, 8, 4, "cpu", False)]


def test_plan_hands_a_cuda_device_that_is_not_here_to_the_planner_as_given(
    capsys, plans, monkeypatch
):
    # the planner estimates for it (and names the absent device when it cannot); the command
    # passed estimate=True, and the planner's refusal then named --estimate, never passed
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    code, _, err = _run(["plan", "--batch-size", "16", "--dim", "8", "--device", "cuda:3"],
                        capsys)  # fmt: skip
    assert (code, err) == (0, "")
    assert plans == [("smooth_ap", 16, 8, 4, "cuda:3", False)]


def test_plan_defaults_to_cuda_where_one_is_here(capsys, plans, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    code, _, err = _run(["plan", "--batch-size", "16", "--dim", "8"], capsys)
    assert (code, err) == (0, "")
    assert plans == [("smooth_ap", 16, 8, 4, "cuda", False)]
    code, _, err = _run(["plan", "--batch-size", "16", "--dim", "8", "--device", "cuda:1"],
                        capsys)  # fmt: skip
    assert code == 2 and "--device cuda:1: only 1 CUDA device(s) visible" in err


@pytest.mark.parametrize("device", ["banana", "meta", "cuda:x", ""])
def test_plan_refuses_a_device_torch_cannot_use_in_one_line(capsys, plans, device):
    code, out, err = _run(["plan", "--batch-size", "16", "--dim", "8", "--device", device],
                          capsys)  # fmt: skip
    assert (code, out, plans) == (2, "", [])
    assert err == f"gradlab: --device must be cpu, cuda[:N] or mps; got {device!r}\n"


# --- check_device -------------------------------------------------------------------------


def test_check_device_on_a_machine_with_two_cuda_devices(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert check_device("cuda") == "cuda"
    assert check_device("cuda:1") == "cuda:1"
    with pytest.raises(GradlabError) as raised:
        check_device("cuda:2")
    assert str(raised.value) == "--device cuda:2: only 2 CUDA device(s) visible"


def test_check_device_without_cuda_names_the_torch_build(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(GradlabError) as raised:
        check_device("cuda:0")
    assert str(raised.value) == (f"--device cuda:0: this torch build ({torch.__version__}) sees "
                                 "no CUDA device; use --device cpu")  # fmt: skip


def test_check_device_of_mps_asks_whether_it_is_here(monkeypatch):
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert check_device("mps") == "mps"
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(GradlabError) as raised:
        check_device("mps")
    assert str(raised.value) == "--device mps: MPS is not available here; use --device cpu"


@pytest.mark.parametrize("device", ["meta", "xla"])
def test_check_device_refuses_other_device_types(device):
    with pytest.raises(GradlabError) as raised:
        check_device(device)
    assert str(raised.value) == f"--device must be cpu, cuda[:N] or mps; got {device!r}"


def test_check_device_keeps_the_users_spelling():
    assert check_device("cpu:0") == "cpu:0"


def test_plan_refuses_a_cpu_index_past_the_one_cpu_device(capsys, plans):
    # it was accepted and printed "on cpu:1", as if there were a second CPU device
    code, out, err = _run(["plan", "--batch-size", "16", "--dim", "8", "--device", "cpu:1"],
                          capsys)  # fmt: skip
    assert (code, out, plans) == (2, "", [])
    assert err == ("gradlab: --device cpu:1: torch has one CPU device, cpu (or cpu:0); use "
                   "--device cpu\n")


def test_a_staging_folder_left_by_a_crash_is_cleared_first(tmp_path, capsys, monkeypatch):
    import gradlab.report

    def run_report(out, **options):  # as the real one: into the folder, whatever is there
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text("{}")

    monkeypatch.setattr(gradlab.report, "run_report", run_report)
    stale = tmp_path / ".r.partial"
    stale.mkdir()
    (stale / "from_last_time.png").write_text("stale")
    code, _, _ = _run(["report", "--out", str(tmp_path / "r")], capsys)
    assert code == 0
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == ["results.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]


def _json_layout(text):
    """The layout every JSON file of gradlab has: indented by two spaces, one final newline."""
    lines = text.split("\n")
    assert lines[-1] == "" and lines[-2] == "}"
    assert lines[1].startswith('  "') and not lines[1].startswith("   ")


def test_the_json_files_are_indented_by_two_spaces_and_end_with_a_newline(
    tmp_path, capsys, studies
):
    out = _beside(tmp_path)
    assert _run(["study", "anatomy", "--data", str(tmp_path), "--out", str(out)], capsys)[0] == 0
    _json_layout((out / "gradient_anatomy.json").read_text())
    target = tmp_path / "result.json"
    argv = ["check-equivalence", "accumulation", "--micro-batches", "2", "--json", str(target)]
    assert _run(argv, capsys)[0] == 1
    _json_layout(target.read_text())


def test_a_study_refuses_an_unusable_out_naming_it(tmp_path, capsys, studies):
    taken = _beside(tmp_path, "a_file")
    taken.write_text("x")
    code, out, err = _run(["study", "losses", "--data", str(tmp_path), "--out", str(taken)],
                          capsys)  # fmt: skip
    assert (code, out, studies) == (2, "", [])
    assert err.startswith("gradlab: --out must be a folder")
    assert f"{str(taken)!r}, which is an existing file" in err and err.count("\n") == 1


def test_report_hands_the_study_folders_on(tmp_path, capsys, reports, monkeypatch):
    from gradlab.report import user_studies

    checked = []
    monkeypatch.setattr(user_studies, "check_study_folders",
                        lambda folders, rendered=False: checked.append((folders, rendered)))
    folders = [tmp_path / "s1", tmp_path / "s2"]
    argv = ["report", "--out", str(tmp_path / "r"), "--studies", *map(str, folders)]
    code, _, err = _run(argv, capsys)
    assert (code, err) == (0, "")
    assert checked == [(folders, True)]  # rendered once before the report runs
    assert reports[0][1]["studies"] == folders


@pytest.mark.parametrize(("out", "where"), [
    (None, "is"),  # a second run with the default --out, "study", from inside the data folder
    (None, "would be"),  # the first: its figures would be a class of the next run's test half
    ("new", "would be"),
])  # fmt: skip
def test_a_study_refuses_an_out_folder_among_the_class_folders_of_its_data(
    tmp_path, capsys, studies, monkeypatch, out, where
):
    if where == "is":
        (tmp_path / "study").mkdir()
        (tmp_path / "study" / "gradient_anatomy.png").touch()
    monkeypatch.chdir(tmp_path)
    given = ["--out", out] if out else []
    code, stdout, err = _run(["study", "anatomy", "--data", ".", *given], capsys)
    assert (code, stdout, studies) == (2, "", [])
    assert err == (f"gradlab: --out {out or 'study'!r} {where} a class folder of --data '.' "
                   "(every folder in it is a class): the figures a study writes there would be "
                   "read as a class; choose an --out outside --data\n")  # fmt: skip
    written = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("class_"))
    assert written == (["study"] if where == "is" else [])  # nothing written


def test_a_study_refuses_its_data_folder_as_out_by_that_name(tmp_path, capsys, studies,
                                                            monkeypatch):  # fmt: skip
    # --out equal to --data was called "a class folder of --data"
    monkeypatch.chdir(tmp_path)
    for out in (".", str(tmp_path)):
        code, stdout, err = _run(["study", "anatomy", "--data", ".", "--out", out], capsys)
        assert (code, stdout, studies) == (2, "", [])
        assert err == (f"gradlab: --out {out!r} is --data itself (every folder in it is a "
                       "class): the figures folder a study writes there would be read as a "
                       "class; choose an --out outside --data\n")  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("class_")) == []


def test_a_study_refuses_an_out_folder_inside_a_class_folder_of_its_data(
    tmp_path, capsys, studies, monkeypatch
):
    """A class's images are the files of its folder itself: the figures written into a folder
    deeper down would be images out of place, which the next study on --data refuses. (A list
    file's images are the listed ones: --out beside them is the losses study's test above.)"""
    monkeypatch.chdir(tmp_path)
    code, stdout, err = _run(["study", "anatomy", "--data", ".", "--out", "class_000/study"],
                             capsys)  # fmt: skip
    assert (code, stdout, studies) == (2, "", [])
    assert err == ("gradlab: --out 'class_000/study' is inside the class folder "
                   "'class_000' of --data '.': the figures (.png) a study writes there would be "
                   "images outside the class folders' own level, which the next study on "
                   "--data refuses; choose an --out outside --data\n")  # fmt: skip
    assert not (tmp_path / "class_000" / "study").exists()


def test_a_study_may_write_into_a_hidden_folder_below_its_data(tmp_path, capsys, studies,
                                                               monkeypatch):  # fmt: skip
    monkeypatch.chdir(tmp_path)  # hidden folders are neither classes nor looked into
    assert _run(["study", "anatomy", "--data", ".", "--out", ".runs/a"], capsys)[0] == 0


@pytest.mark.parametrize("stray", ["loose.png", "class_070/sub/x.png"])
def test_a_study_refuses_images_outside_the_class_folders_level_before_training(
    tmp_path, capsys, studies, stray
):
    (tmp_path / stray).parent.mkdir(exist_ok=True)
    (tmp_path / stray).touch()  # in the data folder itself, or below a test class's folder
    argv = ["study", "p-vs-batch-size", "--data", str(tmp_path), "--out", str(_beside(tmp_path))]
    code, stdout, err = _run(argv, capsys)
    assert (code, stdout, studies) == (2, "", [])  # nothing trained
    assert err == (f"gradlab: 1 image under {str(tmp_path)!r} is not directly in a class "
                   "folder, and the class-halves layout (root/<class>/<image>) would not read "
                   f"it: {os.path.relpath(tmp_path / stray, tmp_path)!r}; put each image "
                   "directly into its class folder, or move it out of the data folder\n")
    assert not _beside(tmp_path).exists()


def test_a_study_writes_into_an_existing_folder(tmp_path, tmp_path_factory, capsys, studies):
    out = tmp_path_factory.mktemp("elsewhere") / "o"  # not in --data: its folders are classes
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    argv = ["study", "anatomy", "--data", str(tmp_path), "--out", str(out)]
    assert _run(argv, capsys)[0] == 0
    assert sorted(p.name for p in out.iterdir()) == ["gradient_anatomy.json", "index.html",
                                                     "notes.txt", "summary.md"]  # fmt: skip


def test_a_study_refuses_an_out_holding_another_run_unless_overwrite_replaces_it(
    tmp_path, tmp_path_factory, capsys, studies
):
    # was: the second run's loss_comparison_m16.json beside the first's m8, and the report
    # headed both with the first run's data and backbone
    out = tmp_path_factory.mktemp("elsewhere") / "mix"
    common = ["--data", str(tmp_path), "--out", str(out)]
    assert _run(["study", "losses", *common, "--batch-sizes", "8"], capsys)[0] == 0
    for name in ("loss_comparison_m8.png", "summary.md", "index.html", "notes.txt"):
        (out / name).write_text("first run" if name != "notes.txt" else "mine")
    first = {path.name: path.read_text() for path in out.iterdir()}
    for kind in ("losses", "anatomy"):  # the same study again, or another into its folder
        code, stdout, err = _run(["study", kind, *common, "--batch-sizes", "16"], capsys)
        assert (code, stdout) == (2, "")
        assert err == (f"gradlab: --out {str(out)!r} already holds the results of a gradlab "
                       "study run (loss_comparison_m8.json); pass --overwrite to replace them "
                       "or choose a new --out\n")
    assert [call[0] for call in studies] == ["losses", "pages"]  # nothing more trained
    assert {path.name: path.read_text() for path in out.iterdir()} == first
    code, stdout, _ = _run(["study", "losses", *common, "--batch-sizes", "16", "--overwrite"],
                           capsys)  # fmt: skip
    assert code == 0
    removed = [line for line in stdout.splitlines() if line.startswith("removed ")]
    assert removed == [f"removed {out / name}" for name in ("index.html", "loss_comparison_m8.json",
                       "loss_comparison_m8.png", "summary.md")]  # fmt: skip
    assert sorted(p.name for p in out.iterdir()) == ["index.html", "loss_comparison_m16.json",
                                                     "notes.txt", "summary.md"]  # fmt: skip


def test_an_interrupted_study_leaves_out_as_it_was_earlier_results_included(
    tmp_path, tmp_path_factory, capsys, studies, monkeypatch
):
    # was: --overwrite removed the earlier run's files first, then an interruption while the
    # figures were drawn left neither run, and the message said "nothing was written"
    from gradlab.report import user_studies

    out = tmp_path_factory.mktemp("elsewhere") / "run"
    common = ["--data", str(tmp_path), "--out", str(out)]
    assert _run(["study", "anatomy", *common], capsys)[0] == 0
    first = {path.name: path.read_text() for path in out.iterdir()}

    def interrupted(name, results, folder):
        (folder / "gradient_anatomy.png").write_text("half a figure")
        raise KeyboardInterrupt

    monkeypatch.setattr(user_studies, "write_study_report", interrupted)
    code, stdout, err = _run(["study", "anatomy", *common, "--overwrite"], capsys)
    assert (code, stdout, err) == (130, "", "gradlab: interrupted; nothing was written\n")
    assert {path.name: path.read_text() for path in out.iterdir()} == first
    fresh = out.parent / "new" / "deeper"  # folders the run would have made: none is left
    code, _, err = _run(["study", "anatomy", "--data", str(tmp_path), "--out", str(fresh)],
                        capsys)  # fmt: skip
    assert (code, err) == (130, "gradlab: interrupted; nothing was written\n")
    assert not (out.parent / "new").exists()


def test_ctrl_c_while_a_study_moves_its_results_waits_for_the_moves_and_says_so(
    tmp_path, tmp_path_factory, capsys, studies, monkeypatch, ctrl_c_raises
):
    # was: the earlier run's files removed, the rest of the new run's deleted with the staging
    # folder, and a message that --out "may hold part of each run": it held neither
    import signal

    out = tmp_path_factory.mktemp("elsewhere") / "run"
    common = ["--data", str(tmp_path), "--out", str(out)]
    assert _run(["study", "anatomy", *common], capsys)[0] == 0
    replace = os.replace

    def ctrl_c_at_the_first(source, target):
        os.kill(os.getpid(), signal.SIGINT)  # held back until the last move
        return replace(source, target)

    monkeypatch.setattr(os, "replace", ctrl_c_at_the_first)
    code, stdout, err = _run(["study", "anatomy", *common, "--overwrite"], capsys)
    assert code == 130
    assert stdout.splitlines()[-3:] == [f"wrote {out / name}" for name in (
        "gradient_anatomy.json", "summary.md", "index.html")]  # fmt: skip
    assert err == (f"gradlab: interrupted; the study's results were written into {str(out)!r} "
                   "first\n")
    assert sorted(path.name for path in out.iterdir()) == [
        "gradient_anatomy.json", "index.html", "summary.md"]


def test_an_ignored_ctrl_c_while_a_study_moves_its_results_stays_ignored(
    tmp_path, tmp_path_factory, capsys, studies, monkeypatch
):
    # under nohup Ctrl-C is ignored: holding it back during the moves turned it into an
    # interruption (exit 130) of a run that had finished
    import signal

    out = tmp_path_factory.mktemp("elsewhere") / "run"
    replace = os.replace

    def ctrl_c_at_each(source, target):
        os.kill(os.getpid(), signal.SIGINT)
        return replace(source, target)

    monkeypatch.setattr(os, "replace", ctrl_c_at_each)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        code, _, err = _run(["study", "anatomy", "--data", str(tmp_path), "--out", str(out)],
                            capsys)  # fmt: skip
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
    assert (code, err) == (0, "")
    assert sorted(path.name for path in out.iterdir()) == [
        "gradient_anatomy.json", "index.html", "summary.md"]


def test_a_study_that_another_run_finished_into_out_meanwhile_writes_nothing(
    tmp_path, tmp_path_factory, capsys, studies, monkeypatch
):
    # two runs into one --out at once: each passed the check before training and the folder
    # ended with one run's JSON beside the other's pages
    from gradlab.experiments import image_studies

    out = tmp_path_factory.mktemp("elsewhere") / "run"
    train = image_studies.anatomy_on_images

    def another_run_meanwhile(data, **options):
        out.mkdir(parents=True, exist_ok=True)
        (out / "gradient_anatomy.json").write_text('{"the other run": 1}')
        return train(data, **options)

    monkeypatch.setattr(image_studies, "anatomy_on_images", another_run_meanwhile)
    code, stdout, err = _run(["study", "anatomy", "--data", str(tmp_path), "--out", str(out)],
                             capsys)  # fmt: skip
    assert (code, stdout) == (2, "")
    assert err == (f"gradlab: --out {str(out)!r} received the results of another gradlab study "
                   "run while this one ran (gradient_anatomy.json); nothing of this run was "
                   "written: run it again into another --out\n")
    assert [path.name for path in out.iterdir()] == ["gradient_anatomy.json"]


def test_check_equivalence_hands_every_option_on(tmp_path, capsys, monkeypatch):
    import gradlab.equivalence.builtin as builtin

    calls = []

    class Result:
        equivalent = True

        def __str__(self):
            return "the table"

    def check_builtin(candidate, loss, **options):
        calls.append((candidate, loss, options))
        return Result()

    monkeypatch.setattr(builtin, "check_builtin", check_builtin)
    argv = ["check-equivalence", "gather", "--loss", "siglip", "--processes", "4",
            "--batch-size", "8", "--chunk-size", "2", "--micro-batches", "2",
            "--dtype", "float32", "--seed", "7", "--class-sizes", "1,7,"]  # fmt: skip
    code, out, _ = _run(argv, capsys)
    assert (code, out) == (0, "the table\n")
    assert calls == [
        (
            "gather",
            "siglip",
            dict(
                processes=4,
                batch_size=8,
                chunk_size=2,
                micro_batches=2,
                dtype=torch.float32,
                seed=7,
                class_sizes=[1, 7],
            ),
        )
    ]
    calls.clear()
    _run(["check-equivalence", "memory"], capsys)
    assert calls == [  # options not given stay None: check_builtin knows which apply
        (
            "memory",
            None,
            dict(
                processes=None,
                batch_size=16,
                chunk_size=None,
                micro_batches=None,
                dtype=torch.float64,
                seed=0,
                class_sizes=None,
            ),
        )
    ]


def test_check_equivalence_names_an_unusable_json_before_any_work(tmp_path, capsys):
    target = tmp_path / "missing" / "x.json"
    code, out, err = _run(["check-equivalence", "memory", "--json", str(target)], capsys)
    assert (code, out) == (2, "")
    assert err.startswith("gradlab: --json must be a") and err.count("\n") == 1


def _usage(command):
    from gradlab.equivalence.builtin import LOSSES
    from gradlab.experiments.planner import PLAN_LOSSES

    return {
        "report": "[-h] [--out OUT] [--quick] [--only SECTION] [--device DEVICE] "
                  "[--studies DIR [DIR ...]] [--workers N] [--no-progress]",
        "audit": "[-h] [--json JSON] [--markdown MARKDOWN] [--mutants] [--claims FILE] "
                 "[--measure] [--no-progress]",
        "plot": "[-h] [--out OUT] [--label NAME] [--max-points N] RUN_DIR [RUN_DIR ...]",
        "study": "[-h] [--data DATA] [--split SPLIT] [--list-file LIST_FILE] "
                 "[--test-list-file TEST_LIST_FILE] [--backbone BACKBONE] [--weights WEIGHTS] "
                 "[--embedding-dim EMBEDDING_DIM] [--image-size IMAGE_SIZE] "
                 "[--batch-sizes BATCH_SIZES] [--epochs EPOCHS] [--seeds SEEDS] [--lr LR] "
                 "[--amp] [--loader-workers N] [--device DEVICE] [--out OUT] [--overwrite] "
                 "[--render] [--no-progress] NAME",
        "plan": f"[-h] [--loss {{{','.join(PLAN_LOSSES)}}}] --batch-size BATCH_SIZE --dim DIM "
                "[--per-class PER_CLASS] [--device DEVICE] [--estimate]",
        "check-equivalence": f"[-h] [--loss {{{','.join(LOSSES)}}}] [--processes PROCESSES] "
                             "[--batch-size BATCH_SIZE] [--chunk-size CHUNK_SIZE] "
                             "[--micro-batches MICRO_BATCHES] [--dtype {float64,float32}] "
                             "[--seed SEED] [--class-sizes CLASS_SIZES] [--json JSON] "
                             "CANDIDATE",
    }[command]  # fmt: skip


@pytest.mark.parametrize("command", list(HELP))
def test_each_usage_line_names_every_option_with_its_placeholder(command, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    _, out, _ = _run([command, "--help"], capsys)
    assert out.splitlines()[0] == f"usage: gradlab {command} {_usage(command)}"


@pytest.mark.parametrize(
    "argv",
    [["--version"], ["audit", "--help"], ["study", "--help"]],
)
def test_a_command_loads_only_the_names_it_offers(argv, capsys, monkeypatch):
    """The sections, tricks and plan losses are read only for the command that lists them."""
    lazy = ("gradlab.report.runner", "gradlab.equivalence.builtin", "gradlab.experiments.planner")
    for module in lazy:
        monkeypatch.delitem(sys.modules, module, raising=False)
    code, _, _ = _run(argv, capsys)
    assert code == 0
    assert [module for module in lazy if module in sys.modules] == []


def _listing(path: Path, rows: list[str], header: str | None = None) -> Path:
    path.write_text("".join(f"{row}\n" for row in ([header] if header else []) + rows))
    return path


NEEDS_TWO = "a batch needs two (a query needs a negative)"


@pytest.mark.parametrize("layout", ["class-halves", "list-files", "online-products"])
def test_a_training_split_of_one_class_is_refused_with_the_layout_s_hint(
    tmp_path, capsys, studies, layout
):
    # Two class folders: the class-halves layout trains on one of them; the list files and
    # Stanford Online Products' listings name their own split, so the hint does not apply.
    data = _class_folders(tmp_path / "two", classes=2)
    extra, named = [], "class_000"
    if layout == "list-files":
        train = _listing(tmp_path / "train.txt", [f"class_000/{k}.png 0" for k in range(4)])
        test = _listing(tmp_path / "test.txt", [f"class_001/{k}.png 1" for k in range(4)])
        extra, named = ["--list-file", str(train), "--test-list-file", str(test)], "0"
    elif layout == "online-products":
        header = "image_id class_id super_class_id path"
        for split, label in (("train", 0), ("test", 1)):
            _listing(data / f"Ebay_{split}.txt",
                     [f"{4 * label + k + 1} {label + 1} 1 class_00{label}/{k}.png"
                      for k in range(4)], header)  # fmt: skip
        named = "1"  # the listing's class id
    code, stdout, err = _run(["study", "losses", "--data", str(data), "--out",
                              str(_beside(tmp_path)), "--batch-sizes", "8", *extra],
                             capsys)  # fmt: skip
    hint = ("; that split is half of the class folders: --data needs four or more"
            if layout == "class-halves" else "")  # fmt: skip
    assert (code, stdout, studies) == (2, "", [])
    assert err == (f"gradlab: the train split of --data {str(data)!r} holds 1 class ({named}); "
                   f"{NEEDS_TWO}{hint}\n")  # fmt: skip


def test_a_split_left_without_classes_names_none_and_the_classes_left_out(
    tmp_path, capsys, studies
):
    data = _class_folders(tmp_path / "short", classes=4, per_class=3)  # trains on 2 classes
    code, _, err = _run(["study", "p-vs-batch-size", "--data", str(data), "--out",
                         str(_beside(tmp_path)), "--batch-sizes", "8"], capsys)  # fmt: skip
    assert (code, studies) == (2, [])
    assert err == (f"gradlab: the train split of --data {str(data)!r} holds 0 class(es) with 4 "
                   f"or more images (none); {NEEDS_TWO} and takes 4 distinct images of each; 2 "
                   "class(es) with fewer left out: 'class_000' has 3, 'class_001' has 3\n")


def test_two_classes_left_after_leaving_one_out_are_studied_and_bound_the_batch(
    tmp_path, capsys, studies
):
    data = _class_folders(tmp_path / "six", classes=6)  # trains on class_000 .. class_002
    (data / "class_001" / "0.png").unlink()  # 3 images: left out, two classes remain
    out = _beside(tmp_path)
    code, _, err = _run(["study", "losses", "--data", str(data), "--out", str(out),
                         "--batch-sizes", "16"], capsys)  # fmt: skip
    assert (code, studies) == (2, [])
    assert err == (f"gradlab: --batch-sizes must be at most 4 x 2 classes = 8 for the train split "
                   f"of --data {str(data)!r} (the classes with 4 or more images; 1 class with "
                   "fewer was left out: 'class_001' has 3); got 16\n")
    code, _, _ = _run(["study", "losses", "--data", str(data), "--out", str(out),
                       "--batch-sizes", "8"], capsys)  # fmt: skip
    assert code == 0 and [call[0] for call in studies] == ["losses", "pages"]


def test_a_refused_default_lists_every_default_batch_size(
    tmp_path, capsys, studies, monkeypatch
):
    _trend(monkeypatch, {})
    code, _, _ = _run(["study", "p-vs-batch-size", "--data", str(tmp_path), "--out",
                       str(_beside(tmp_path, "ran"))], capsys)  # fmt: skip
    defaults = studies[0][2]["batch_sizes"]  # what the study runs when none is typed
    assert code == 0 and len(defaults) > 1
    data = _class_folders(tmp_path / "four", classes=4)
    code, _, err = _run(["study", "p-vs-batch-size", "--data", str(data), "--out",
                         str(_beside(tmp_path))], capsys)  # fmt: skip
    assert code == 2
    assert err.endswith(f"(the default --batch-sizes {','.join(map(str, defaults))} of gradlab "
                        "study p-vs-batch-size: pass --batch-sizes)\n"), err


def test_the_p_study_reads_the_split_it_is_given(tmp_path, capsys, studies, monkeypatch):
    _trend(monkeypatch, {})
    data = _class_folders(tmp_path / "two", classes=2)  # class_000 trains, class_001 tests
    code, _, err = _run(["study", "p-vs-batch-size", "--data", str(data), "--split", "test",
                         "--out", str(_beside(tmp_path)), "--batch-sizes", "8"],
                         capsys)  # fmt: skip
    assert (code, studies) == (2, [])
    assert err.startswith(f"gradlab: the test split of --data {str(data)!r} holds 1 class "
                          "(class_001); "), err


@pytest.mark.parametrize("case", ["data", "list", "test_list", "test_list_alone", "same_list",
                                  "render_with_data"])  # fmt: skip
def test_a_study_s_paths_are_refused_naming_the_option_and_the_path(
    tmp_path, capsys, studies, case
):
    data, missing = tmp_path, tmp_path / "nowhere.txt"
    train = _listing(tmp_path / "train.txt", [f"class_000/{k}.png 0" for k in range(4)])
    options = {
        "data": ["--data", str(missing)],
        "list": ["--data", str(data), "--list-file", str(missing)],
        "test_list": ["--data", str(data), "--list-file", str(train), "--test-list-file",
                      str(missing)],
        "test_list_alone": ["--data", str(data), "--test-list-file", str(train)],
        "same_list": ["--data", str(data), "--list-file", str(train), "--test-list-file",
                      str(train)],
        "render_with_data": ["--render", "--data", str(data)],
    }[case]  # fmt: skip
    expected = {
        "data": f"--data must be an existing folder of images; {str(missing)!r} is not",
        "list": f"--list-file must be an existing file; {str(missing)!r} is not",
        "test_list": f"--test-list-file must be an existing file; {str(missing)!r} is not",
        "test_list_alone": "--test-list-file applies only with --list-file (the training "
                           f"images' 'path label' file); got --test-list-file '{train}' without "
                           "--list-file",
        "same_list": "--test-list-file must name other images than --list-file; both are "
                     f"{str(train)!r}",
        "render_with_data": "--data does not apply with --render (it redraws the study saved in "
                            f"--out); got --data {str(data)!r}",
    }[case]  # fmt: skip
    code, stdout, err = _run(["study", "losses", "--out", str(_beside(tmp_path)), *options], capsys)
    assert (code, stdout, studies) == (2, "", [])
    assert err == f"gradlab: {expected}\n"


def test_an_unknown_study_is_refused_by_name_listing_the_studies(tmp_path, capsys, studies):
    code, stdout, err = _run(["study", "bananas", "--data", str(tmp_path), "--out",
                              str(_beside(tmp_path))], capsys)  # fmt: skip
    assert (code, stdout, studies) == (2, "", [])
    assert "invalid choice: 'bananas' (choose from " in err
    for name in ("p-vs-batch-size", "losses", "anatomy"):
        assert repr(name) in err.split("choose from", 1)[1], err


def test_a_batch_of_images_is_compared_with_the_free_memory(tmp_path, capsys, studies,
                                                            monkeypatch):  # fmt: skip
    import gradlab.memory

    # a batch of 16 images of 4096 x 4096 pixels in float32 is 3 GiB exactly
    monkeypatch.setattr(gradlab.memory, "available_bytes", lambda device: 3 * 2**30)
    _trend(monkeypatch, {})
    argv = ["study", "p-vs-batch-size", "--data", str(tmp_path), "--out", str(_beside(tmp_path)),
            "--batch-sizes", "8,16"]  # fmt: skip
    code, _, err = _run([*argv, "--image-size", "4096"], capsys)
    assert (code, err) == (0, "")  # as much as is free: it fits
    code, _, err = _run([*argv, "--image-size", "4097"], capsys)
    assert code == 2
    assert err == ("gradlab: --image-size 4097: one batch of 16 images of 4097 x 4097 pixels "
                   "needs 3.0 GiB in float32 before the backbone runs, more than the 3.0 GiB "
                   "available; try a smaller --image-size or --batch-sizes\n")


@pytest.mark.parametrize(("cores", "allowed", "refused"), [(2, 8, 9), (None, 4, 5)])
def test_loader_workers_are_at_most_four_per_core(tmp_path, capsys, studies, monkeypatch,
                                                  cores, allowed, refused):  # fmt: skip
    monkeypatch.setattr("os.cpu_count", lambda: cores)  # None: the count is unknown, one core
    _trend(monkeypatch, {})
    argv = ["study", "p-vs-batch-size", "--data", str(tmp_path), "--out", str(_beside(tmp_path)),
            "--loader-workers"]  # fmt: skip
    assert _run([*argv, str(allowed)], capsys)[0] == 0
    code, _, err = _run([*argv, str(refused)], capsys)
    assert (code, err) == (2, f"gradlab: --loader-workers must be an int from 0 to {allowed}; "
                              f"got {refused}\n")


def test_a_study_that_runs_out_of_memory_names_the_options_to_lower(tmp_path, capsys, studies,
                                                                   monkeypatch):  # fmt: skip
    from gradlab.experiments import image_studies

    def allocate(*args, **kwargs):
        raise MemoryError()

    monkeypatch.setattr(image_studies, "anatomy_on_images", allocate)
    code, _, err = _run(["study", "anatomy", "--data", str(tmp_path),
                         "--out", str(_beside(tmp_path))], capsys)  # fmt: skip
    assert (code, err) == (2, "gradlab: the study ran out of memory; try a smaller "
                              "--embedding-dim, --image-size or --batch-sizes\n")
