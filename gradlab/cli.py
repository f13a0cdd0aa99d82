"""The ``gradlab`` command: ``report | audit | plot | check-equivalence | study | plan``
(``python -m gradlab``).

Every user error (a bad option value, a path that cannot be used, a device this machine does
not have) ends in one line on stderr and exit code 2, before anything is written. Output paths
follow :mod:`gradlab.paths`: a folder (``--out``) is created with its parents, a file
(``--json``, ``--markdown``) only in a folder that exists, and it replaces an existing file only
if that is empty or the same option's earlier output. A log line that cannot be read is
skipped with a one-line warning; a write that fails anyway (a full disk too) ends in one line
naming the path, or "an output" where the failed write (a figure's) names none.
Ctrl-C or SIGTERM during ``report`` removes the half-written report (exit codes 130, 143).
A standard output closed early (``gradlab audit | head -1``) ends the command without a word
(exit code 141, as a shell reports a program that a closed pipe ended).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import shutil
import sys
from pathlib import Path

from gradlab.errors import GradlabError
from gradlab.paths import check_output_folder, check_own_output_file, write_text


def _path(text: str) -> Path:
    """A path argument; an empty one is refused (``Path("")`` would silently be ``.``, the
    current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"must be a path; got {text!r}")
    if text == "-":  # Path("./-") is Path("-"): the one spelling is told apart here
        raise argparse.ArgumentTypeError("must be a path; got '-', which gradlab does not read "
                                         "as standard output: name one (./- for one named -)")
    return Path(text)


def _file_path(text: str) -> Path:
    """A path argument naming a file to write: one ending in a separator names a folder, and
    ``Path`` would drop that separator before :func:`check_output_file` could see it."""
    if text.endswith(("/", os.sep)):
        raise argparse.ArgumentTypeError(f"must be a file path; got {text!r}, which names a "
                                         "folder (it ends in a separator): add the file's name")
    return _path(text)


DEFAULT_FIGURES = "RUN_DIR/figures, the default of --out (pass --out FOLDER to write elsewhere),"
"""How ``gradlab plot`` names its default output folder when it cannot write there."""

DEVICE_HELP = "torch device of the training sections, e.g. cpu, cuda, cuda:1 (default: %(default)s)"


class _OneLineParser(argparse.ArgumentParser):
    """argparse, with a usage error reported as one line (and exit code 2), and options only
    by their whole names (argparse takes ``--jso`` for ``--json`` by default: a typo, or an
    option that a later release adds, would change its meaning silently)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class _CommandParser(_OneLineParser):
    """A command's parser: an option it does not know is its error, pointing to its own help
    (argparse hands a command's leftovers to the top-level parser, which would point to
    ``gradlab --help``)."""

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        arguments, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return arguments, extras


class _TopParser(_OneLineParser):
    """The ``gradlab`` parser: an option it does not know, given without a command, is named
    (argparse would say only that COMMAND is missing, as for ``gradlab --bogus``)."""

    commands: argparse.Action | None = None
    """The subparsers' action, whose ``choices`` are the commands (set once they are added)."""

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        words = sys.argv[1:] if args is None else list(args)
        known = {option for action in self._actions for option in action.option_strings}
        if self.commands is not None and not set(words) & set(self.commands.choices or ()):
            unknown = [word for word in words
                       if word.startswith("-") and word.partition("=")[0] not in known]
            if unknown:
                self.error(f"unrecognized arguments: {' '.join(unknown)}")
        return super().parse_known_args(args, namespace)


def _version() -> str:
    import gradlab

    return f"gradlab {gradlab.__version__}"


def _section_names() -> list[str]:
    from gradlab.report import SECTION_NAMES

    return list(SECTION_NAMES)


EXTRA_OF_COMMAND = {
    "report": ("studies", ("sympy", "mpmath", "scipy", "sklearn", "matplotlib", "seaborn", "tqdm")),
    "audit": ("audit", ("sympy", "mpmath", "scipy", "sklearn")),
    "plot": ("plot", ("matplotlib", "seaborn")),
    "study": ("studies", ("scipy", "sklearn", "matplotlib", "seaborn", "PIL", "tqdm")),
}
"""Command -> the extra it needs and the packages that extra installs (checked before work)."""


def _check_extras(argv: list[str]) -> None:
    """Refuse a command whose extra is not installed, in one line, before anything else runs."""
    from gradlab.extras import is_installed, missing_extra

    command = next((word for word in argv if not word.startswith("-")), None)
    if command not in EXTRA_OF_COMMAND or {"-h", "--help"} & set(argv):
        return
    extra, packages = EXTRA_OF_COMMAND[command]
    for package in packages:
        if not is_installed(package):
            raise missing_extra(package, extra, f"gradlab {command}")


def _build_parser(
    with_sections: bool = True, with_candidates: bool = True, with_plan_losses: bool = True
) -> argparse.ArgumentParser:
    parser = _TopParser(
        prog="gradlab",
        description="gradlab: gradient diagnostics for ranking and contrastive losses. Each "
        "command's options: gradlab COMMAND --help",
    )
    parser.add_argument("--version", action="version", version=_version())
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_CommandParser)
    commands.required = True
    parser.commands = commands
    report_help = "run the studies and the audit and write the report (HTML and Markdown)"
    report = commands.add_parser("report", help=report_help, description=(
        f"{report_help}; {REPORT_MINUTES} at full size (the default), measured on a 2-core "
        "CPU; --quick or --only SECTION runs less"))
    report.add_argument(
        "--out", type=_path, default=Path("reports/latest"),
        help="output folder, created if missing; an earlier report there is replaced whole, "
             "a folder of other files is refused (default: %(default)s)",
    )  # fmt: skip
    report.add_argument(
        "--quick", action="store_true", help="small settings, about 1-2 minutes (default: off)"
    )
    sections = _section_names() if with_sections else None
    report.add_argument(
        "--only", action="append", choices=sections, metavar="SECTION",
        help="run only this section; repeatable"
        + (f"; one of {', '.join(sections)}" if sections else "")
        + " (default: all sections)",
    )  # fmt: skip
    report.add_argument("--device", default="cpu", help=DEVICE_HELP)
    report.add_argument(
        "--studies", type=_path, nargs="+", metavar="DIR",
        help="folders written by gradlab study: each study saved there becomes a section after "
        "the bundled ones (its tables, verdicts and figures, rendered from its JSON; nothing is "
        "trained), headed with the data and backbone it ran on (default: none)",
    )  # fmt: skip
    report.add_argument(
        "--workers", type=_workers, default=None, metavar="N",
        help="processes that run a study's seeds side by side, one torch thread each; 1 runs "
        "everything in this process; the numbers are the same for any N (default: the usable "
        "CPU cores, at most 8)",
    )  # fmt: skip
    report.add_argument(
        "--no-progress", action="store_true",
        help="no progress output (default: bars on a terminal, one line per stage otherwise)",
    )  # fmt: skip
    audit_help = ("check the papers' printed equations by computation (SymPy, float64), one "
                  "verdict per claim: the built-in papers' claims, or those of your own "
                  "derivation with --claims FILE (from Python: gradlab.symbolic.audit_claim)")
    audit = commands.add_parser("audit", help=audit_help, description=audit_help)
    audit.add_argument(
        "--json", type=_file_path,
        help="write the records as JSON into this file (its folder must exist; none is created); "
        "an existing file is replaced only if it is empty or an earlier gradlab audit --json "
        "output",
    )  # fmt: skip
    audit.add_argument(
        "--markdown", type=_file_path,
        help="write a readable report with the formulas into this file (its folder must exist); "
        "an existing file is replaced only if it is empty or an earlier gradlab audit "
        "--markdown output",
    )  # fmt: skip
    audit.add_argument(
        "--mutants", action="store_true",
        help="also check mutants of each claim's accepted form (its hand-written slips and the "
        "sign/shift/factor/term/exponent/log/swap operators' mutants; killed = the check does not "
        "hold, where it holds for the claim's accepted form); records get mutant_results, "
        "mutants, mutant_operators, mutants_killed; the last "
        "line counts records short of 3 mutants from 2 operators without a stated reason",
    )  # fmt: skip
    audit.add_argument(
        "--claims", type=_path, metavar="FILE",
        help="audit your own claims instead of the built-in papers': a Python file that "
        "defines CLAIMS, a list of gradlab.symbolic.Claim (it runs as a script does, with its "
        "folder first on the import path, but not as __main__)",
    )  # fmt: skip
    audit.add_argument(
        "--measure", action="store_true",
        help="also measure P against batch size (quick settings, trains small networks for "
        "some seconds), shown as context of Brown et al.'s claim that P rises with the batch "
        "size, which stays not testable here (it needs the authors' data); without it the "
        "miniature is recorded as not measured and nothing is trained (default: off)",
    )  # fmt: skip
    audit.add_argument(
        "--no-progress", action="store_true",
        help="no progress output (default: bars on a terminal, one line per paper otherwise)",
    )  # fmt: skip
    plot_help = "figures from Monitor log folders, several runs overlaid (headless)"
    plot = commands.add_parser("plot", help=plot_help, description=plot_help)
    plot.add_argument("run_dir", type=_path, nargs="+", metavar="RUN_DIR",
                      help="one or more Monitor log folders (or their metrics.jsonl)")
    plot.add_argument(
        "--out", type=str,
        help="figure folder (default: RUN_DIR/figures for one run, "
        "<their common parent>/figures for several)",
    )  # fmt: skip
    plot.add_argument(
        "--label", action="append", metavar="NAME",
        help="legend name of each run, in order; repeat once per run (default: folder names)",
    )  # fmt: skip
    plot.add_argument(
        "--max-points", type=int, metavar="N",
        help="a key logged at more than N steps is drawn as the means of groups of consecutive "
        "steps (geometric on a log axis), over a band from each group's smallest to its "
        "largest value (a long run is otherwise a solid band in which the last key hides the "
        "others); 0: every logged step (default: 1000)",
    )  # fmt: skip
    _add_check_equivalence(commands, with_candidates)
    _add_study(commands)
    _add_plan(commands, with_plan_losses)
    return parser


def _int_list(text: str, example: str = "16,32,64") -> list[int]:
    """``"16,32,64"`` -> ``[16, 32, 64]`` (argparse type; a bad list is one line, exit code 2,
    its ``example`` the option's own). One trailing comma is allowed (``"8,16,"``); an empty
    entry elsewhere (``"8,,16"``) is a dropped value, refused."""
    parts = text.split(",")
    if len(parts) > 1 and not parts[-1].strip():  # "8,16," as "8,16"
        parts.pop()
    if len(parts) == 1 and not parts[0].strip():  # no entry: the option's check names it
        return []
    wrong = f"must be integers separated by commas, e.g. {example}; got {text!r}"
    if any(not part.strip() for part in parts):
        raise argparse.ArgumentTypeError(f"{wrong} (an empty entry)")
    try:
        return [int(part) for part in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(wrong) from None


STUDIES = {
    "p-vs-batch-size": "P against the batch size with Smooth-AP's protocol (Brown et al., 2020, "
    "Fig. S7a): p_vs_batch_size.json",
    "losses": "the ranking losses trained alike, retrieval on the test split and cost per step: "
    "loss_comparison_mM.json per batch size",
    "anatomy": "which pairs receive gradient under SmoothAP, VSE++ and NT-Xent over training "
    "(Bleeker & de Rijke, 2022): gradient_anatomy.json",
}
"""``gradlab study NAME``: what each study measures and the JSON it writes."""

DEFAULT_STUDY_BATCH_SIZES = {"p-vs-batch-size": [16, 32, 64, 128, 256], "losses": [64],
                             "anatomy": [64]}  # fmt: skip


def _add_study(commands) -> None:
    """The ``study`` subcommand: a study of the report on the user's own images and backbone."""
    study_help = ("run a study of the report on your own image folder and backbone; writes its "
                  "JSON, figures, summary.md and index.html")  # fmt: skip
    _add_study_arguments(commands.add_parser("study", help=study_help, description=study_help))


def _add_study_arguments(study: argparse.ArgumentParser) -> None:
    """The arguments of ``gradlab study``; also read for their defaults (:func:`_given`)."""
    study.add_argument("name", choices=list(STUDIES), metavar="NAME",
                       help="; ".join(f"{name}: {text}" for name, text in STUDIES.items()))
    study.add_argument("--data", type=_path,
                       help="image folder: root/<class>/<image> (first half of the classes "
                       "trains, second half tests), Stanford Online Products (Ebay_train.txt, "
                       "Ebay_test.txt), or see --list-file (required unless --render)")
    study.add_argument("--split", default="train", help="split to train on (default: train)")
    study.add_argument("--list-file", type=_path,
                       help="'path label' lines (paths relative to --data; lines starting "
                            "with '#' are comments) instead of a layout")
    study.add_argument("--test-list-file", type=_path,
                       help="with --list-file: the evaluation images of losses and anatomy")
    study.add_argument("--backbone", default="gradlab.backbones:tiny_resnet",
                       help="timm:NAME, torchvision:NAME or module:function (default: %(default)s)")
    study.add_argument("--weights", type=_path,
                       help="local checkpoint of the backbone (default: random initial weights)")
    study.add_argument("--embedding-dim", type=int, default=512,
                       help="size of the embeddings: the linear head on the backbone's "
                       "features (default: %(default)s)")
    study.add_argument("--image-size", type=int, default=224,
                       help="side in pixels of the square crops the backbone sees, in training "
                       "and in evaluation (default: %(default)s)")
    study.add_argument("--batch-sizes", type=_int_list,
                       help="m values, multiples of 4, distinct, comma-separated (default: "
                       "16,32,64,128,256 for p-vs-batch-size, 64 for losses and anatomy)")
    study.add_argument("--epochs", type=int, default=1,
                       help="epochs per m (p-vs-batch-size: P averages the last) "
                       "(default: %(default)s)")
    study.add_argument("--seeds", type=lambda text: _int_list(text, "0,1,2"), default=[0],
                       help="comma-separated distinct seeds from 0 to 4294967295 (default: 0)")
    study.add_argument("--lr", type=float, default=1e-5, help="Adam (default: %(default)s)")
    study.add_argument("--amp", action="store_true",
                       help="mixed precision: the backbone under torch.autocast, float16 with "
                       "loss scaling on CUDA, bfloat16 on a CPU; the losses and measurements in "
                       "float32 "
                       "(default: off)")
    study.add_argument("--loader-workers", type=int, default=0, metavar="N",
                       help="processes that load and augment the images; the numbers do not "
                       "depend on it (default: 0, this process)")  # fmt: skip
    study.add_argument("--device", default="cpu", help=DEVICE_HELP)
    study.add_argument("--out", type=_path, default=Path("study"),
                       help="folder for the JSON, figures, summary.md and index.html "
                       "(default: %(default)s)")
    study.add_argument("--overwrite", action="store_true",
                       help="replace the results of an earlier study run in --out (its JSON, "
                       "figures, summary.md and index.html are removed once this run has "
                       "trained, just before it writes its own, so a failed or interrupted run "
                       "leaves them); without it such an --out is refused")
    study.add_argument("--render", action="store_true",
                       help="train nothing: draw the figures and write summary.md and "
                       "index.html from the JSON an earlier run left in --out")
    study.add_argument("--no-progress", action="store_true",
                       help="no progress output (default: bars on a terminal, one line per "
                       "stage otherwise)")  # fmt: skip


AMP_ON_CPU = ("--amp on cpu: the backbone runs under torch.autocast in bfloat16 (--amp on CUDA is "
              "float16 with loss scaling); the losses and measurements take its embeddings in "
              "float32. Its numbers differ a little from a float32 run's; bfloat16 is faster "
              "than float32 on a CPU with bfloat16 instructions (AVX-512 BF16, AMX) and may be "
              "slower on others")
"""What ``gradlab study --amp`` on a CPU says on stderr before it trains."""


def _device_type(device: str) -> str:
    """``"cpu"``, ``"cuda"``, ... of a device string already checked (:func:`check_device`)."""
    import torch

    return torch.device(device).type


RENDER_READS = ("--out", "--render", "--no-progress")
"""The options of ``gradlab study`` that ``--render`` reads; it refuses any other given."""


def _given(arguments: argparse.Namespace) -> list[tuple[str, str]]:
    """``(--option, its value as typed, after a space)`` of every ``gradlab study`` option whose
    value is not its default (the parser's, or the study's own batch sizes; a flag's value is
    empty), in the parser's order."""
    probe = argparse.ArgumentParser(add_help=False)
    _add_study_arguments(probe)
    given = []
    for dest, default in vars(probe.parse_args([arguments.name])).items():
        value = getattr(arguments, dest)
        if dest == "name" or value == default or (
            dest == "batch_sizes" and value == DEFAULT_STUDY_BATCH_SIZES[arguments.name]
        ):
            continue
        if isinstance(value, bool):
            text = ""
        elif isinstance(value, list):
            text = " " + ",".join(str(item) for item in value)
        elif isinstance(value, (str, Path)):
            text = f" {str(value)!r}"
        else:
            text = f" {value}"
        given.append(("--" + dest.replace("_", "-"), text))
    return given


def _run_study(arguments: argparse.Namespace) -> None:
    """``gradlab study NAME``: check everything, train, write JSON, figures and the pages."""
    import json

    from gradlab.report.user_studies import (
        STUDY_STAGING,
        held_study_results,
        render_study_folder,
        write_study_report,
    )

    name = arguments.name
    if arguments.no_progress:
        from gradlab.progress import set_progress_mode

        set_progress_mode("off")
    if arguments.render:
        for option, text in _given(arguments):  # the run's own settings are in its JSON already
            if option not in RENDER_READS:
                raise GradlabError(f"{option} does not apply with --render (it redraws the "
                                   f"study saved in --out); got {option}{text}")  # fmt: skip
        for path in render_study_folder(name, arguments.out):
            print(f"wrote {path}")
        if name == "p-vs-batch-size":  # the run's last line, as the training run printed it
            from gradlab.report.user_studies import load_study

            _print_p_trend(load_study(name, arguments.out).results)
        return
    if arguments.data is None:
        raise GradlabError(f"gradlab study {name} needs --data FOLDER (or --render)")
    _check_study_options(arguments)
    device = check_device(arguments.device)
    from gradlab.experiments import image_studies

    given = arguments.batch_sizes is not None  # an empty list is given: refused, not the default
    sizes = arguments.batch_sizes if given else DEFAULT_STUDY_BATCH_SIZES[name]
    _check_study_data(arguments, sizes, given)
    out = check_output_folder(arguments.out, argument="--out")
    held = held_study_results(out)[0] if out.is_dir() else []
    if held and not arguments.overwrite:  # runs never merge: one run's results per folder
        raise GradlabError(f"--out {str(arguments.out)!r} already holds the results of a "
                           f"gradlab study run ({', '.join(path.name for path in held)}); pass "
                           f"--overwrite to replace them or choose a new --out")  # fmt: skip
    options = dict(
        split=arguments.split, layout="list" if arguments.list_file else "auto",
        list_file=arguments.list_file, backbone=arguments.backbone, weights=arguments.weights,
        embedding_dim=arguments.embedding_dim, image_size=arguments.image_size,
        batch_sizes=sizes, epochs=arguments.epochs, seeds=arguments.seeds,
        device=device, lr=arguments.lr, amp=arguments.amp, workers=arguments.loader_workers,
    )  # fmt: skip
    if arguments.amp and _device_type(device) == "cpu":  # said before any work, once
        print(f"gradlab: {AMP_ON_CPU}", file=sys.stderr, flush=True)
    from gradlab.memory import refused_when_out_of_memory

    short = ("the study ran out of memory; try a smaller --embedding-dim, --image-size or "
             "--batch-sizes")  # fmt: skip
    with refused_when_out_of_memory(short):
        if name == "p-vs-batch-size":
            results = image_studies.p_vs_batch_size_on_images(arguments.data, **options)
        else:
            study = (image_studies.loss_comparison_on_images if name == "losses"
                     else image_studies.anatomy_on_images)  # fmt: skip
            results = study(arguments.data, test_list_file=arguments.test_list_file, **options)
    if name == "p-vs-batch-size":
        files = {"p_vs_batch_size.json": results}
    else:
        files = ({f"loss_comparison_m{m}.json": value for m, value in results.items()}
                 if name == "losses" else {"gradient_anatomy.json": results})  # fmt: skip
    import tempfile

    from gradlab.monitor.sinks import encode_value

    # Everything is written into a staging folder of this run's own inside --out first: an
    # interrupted or failed run leaves --out as it was (an earlier run's results included), and
    # only the last step, a few renames with Ctrl-C held back, replaces them.
    created = _missing_folders(out)
    staging = None
    try:
        out.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=STUDY_STAGING, dir=out))
        for file_name, value in files.items():  # standard JSON: NaN as the string "NaN"
            write_text(staging / file_name, json.dumps(encode_value(value), indent=2,
                                                       allow_nan=False) + "\n")  # fmt: skip
        staged = [staging / file_name for file_name in files]
        staged += write_study_report(name, results, staging)
        held_now, replaced_now = held_study_results(out)
        if held_now and not arguments.overwrite:  # another run finished into --out meanwhile
            raise GradlabError(f"--out {str(arguments.out)!r} received the results of another "
                               f"gradlab study run while this one ran "
                               f"({', '.join(path.name for path in held_now)}); nothing of "
                               "this run was written: run it again into another --out")
    except BaseException:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        _remove_empty(created)
        raise
    with _signals_held(f"the study's results were written into {str(out)!r} first"):
        for path in replaced_now:  # --overwrite: the earlier files go before this run's come
            path.unlink(missing_ok=True)
            print(f"removed {path}")
        for path in staged:
            os.replace(path, out / path.name)
            print(f"wrote {out / path.name}")
        staging.rmdir()
    if name == "p-vs-batch-size":
        _print_p_trend(results)


def _print_p_trend(results: dict) -> None:
    """The P study's last line: the trend of P, worded as the study page words it."""
    from gradlab.experiments.p_vs_batch_size import summarize, trend_sentence

    summary = summarize(results)["settings"].get("trained_at_m", {})
    if summary:
        tested = (summary.get("trend_detail", "") if len(results["batch_sizes"]) > 1
                  else "")  # what the t-test rests on; one m has no trend to test
        print(trend_sentence(results, summary["trend"], tested))


def _missing_folders(folder: Path) -> list[Path]:
    """``folder`` and its parents that do not exist yet, deepest first: what a command that
    writes there creates, and removes again if it stops (:func:`_remove_empty`)."""
    return [path for path in (folder, *folder.parents) if not path.exists()]


def _remove_empty(folders: list[Path]) -> None:
    """Remove each of ``folders`` (deepest first) that is empty; leave the others."""
    for folder in folders:
        with contextlib.suppress(OSError):
            folder.rmdir()


@contextlib.contextmanager
def _signals_held(left: str):
    """Hold Ctrl-C and SIGTERM back while the block runs
    (:class:`~gradlab.child_processes.HeldSignals`): the few renames that replace a study's
    files either all happen or none. One that arrived meanwhile is raised as the block ends,
    saying ``left`` (what is on disk: main() prints it); an ignored one (nohup) stays ignored."""
    import signal

    from gradlab.child_processes import HeldSignals

    with HeldSignals() as held:
        yield
    if held.arrived:  # the block ran to its end: say so
        error = KeyboardInterrupt() if held.arrived[0] == signal.SIGINT else _Terminated()
        error.left = left
        raise error


def _check_study_options(arguments: argparse.Namespace) -> None:
    """The study's own options, named as the command line names them, before any work (the
    study checks its arguments again under their Python names)."""
    from gradlab.data.image_folder import SPLITS
    from gradlab.experiments.runtime import check_lr, check_seeds
    from gradlab.validation import (
        check_int_in_range,
        check_positive_int,
    )

    if not arguments.data.is_dir():
        raise GradlabError(f"--data must be an existing folder of images; "
                           f"{str(arguments.data)!r} is not")  # fmt: skip
    for option, value in (("--embedding-dim", arguments.embedding_dim),
                          ("--image-size", arguments.image_size),
                          ("--epochs", arguments.epochs)):  # fmt: skip
        check_positive_int(option, value)
    check_lr(arguments.lr, "--lr")
    # a worker is a process with its own copy of the dataset: more than a few per core only
    # queue for the cores and fill the memory (four per core of this machine at most)
    check_int_in_range("--loader-workers", arguments.loader_workers, 0, 4 * (os.cpu_count() or 1))
    check_seeds(arguments.seeds, "--seeds")
    for option, path in (("--weights", arguments.weights), ("--list-file", arguments.list_file),
                         ("--test-list-file", arguments.test_list_file)):  # fmt: skip
        if path is not None and not path.is_file():
            raise GradlabError(f"{option} must be an existing file; {str(path)!r} is not")
    listed, tested = arguments.list_file, arguments.test_list_file
    if tested is not None and listed is None:
        raise GradlabError(f"--test-list-file applies only with --list-file (the training images' "
                           f"'path label' file); got --test-list-file '{tested}' without "
                           f"--list-file")  # fmt: skip
    if listed is None and arguments.split not in SPLITS:  # a list file's split is its own name
        raise GradlabError(f"--split must be {' or '.join(SPLITS)} (any name with --list-file); "
                           f"got {arguments.split!r}")  # fmt: skip
    if arguments.name == "p-vs-batch-size":  # P is measured on the training images alone
        if tested is not None:
            raise GradlabError("--test-list-file names evaluation images, which gradlab study "
                               "p-vs-batch-size does not use (it measures P on the training "
                               "images of --list-file); leave it out")  # fmt: skip
        return
    if listed is not None and tested is None:
        raise GradlabError(f"gradlab study {arguments.name} with --list-file needs "
                           "--test-list-file, the evaluation images' 'path label' file")
    if listed is not None and listed.resolve() == tested.resolve():
        raise GradlabError(f"--test-list-file must name other images than --list-file; both are "
                           f"{str(tested)!r}")  # fmt: skip
    if listed is None and arguments.split == "test":
        raise GradlabError(f"--split test is the split gradlab study {arguments.name} measures "
                           f"retrieval on: it would train and measure on the same images; train "
                           f"on --split train (the default)")  # fmt: skip


def _check_study_data(arguments: argparse.Namespace, sizes: list[int], given: bool) -> None:
    """The training split of ``--data`` against ``--batch-sizes`` (``given``: typed, else the
    study's default), named as the command line names them, before any model is built: the
    study reads the folder and checks the sizes again under their Python names."""
    from gradlab.data.image_folder import image_folder
    from gradlab.experiments import image_studies

    halves = arguments.list_file is None and not (arguments.data / "Ebay_train.txt").is_file()
    out, data = arguments.out.resolve(), arguments.data.resolve()
    if halves and data == out:  # its figures folder would be a new class
        raise GradlabError(f"--out {str(arguments.out)!r} is --data itself (every folder in it "
                           f"is a class): the figures folder a study writes there would be "
                           f"read as a class; choose an --out outside --data")  # fmt: skip
    if halves and data == out.parent:  # itself a new class
        where = "is" if out.is_dir() else "would be"
        raise GradlabError(f"--out {str(arguments.out)!r} {where} a class folder of --data "
                           f"{str(arguments.data)!r} (every folder in it is a class): the "
                           f"figures a study writes there would be read as a class; choose an "
                           f"--out outside --data")  # fmt: skip
    inside = out.relative_to(data).parts if halves and out.is_relative_to(data) else ()
    if len(inside) > 1 and not inside[0].startswith("."):  # below a class folder: its figures
        raise GradlabError(f"--out {str(arguments.out)!r} is inside the class folder "
                           f"{inside[0]!r} of --data {str(arguments.data)!r}: the figures "
                           f"(.png) a study writes there would be images outside the class "
                           f"folders' own level, which the next study on --data refuses; choose "
                           f"an --out outside --data")  # fmt: skip
    dataset = image_folder(arguments.data, arguments.split, image_size=arguments.image_size,
                           layout="list" if arguments.list_file else "auto",
                           list_file=arguments.list_file)  # fmt: skip
    where = f"the {arguments.split} split of --data {str(arguments.data)!r}"
    dataset, left_out = image_studies.trainable_classes(dataset)  # a batch takes 4 of a class
    classes = dataset.class_names
    if len(classes) < 2 and left_out["left_out_classes"]:  # said with the classes left out
        least, count = left_out["min_images_per_class"], left_out["left_out_classes"]
        raise GradlabError(f"{where} holds {len(classes)} class(es) with {least} or more images "
                           f"({', '.join(classes) or 'none'}); a batch needs two (a query needs a "
                           f"negative) and takes {least} distinct images of each; {count} "
                           f"class(es) with fewer left out: "
                           f"{image_studies.left_out_examples(left_out)}")  # fmt: skip
    if len(classes) < 2:  # no batch size helps: said without the sizes
        hint = "; that split is half of the class folders: --data needs four or more"
        raise GradlabError(f"{where} holds {len(classes)} class ({', '.join(classes)}); a batch "
                           f"needs two (a query needs a negative){hint if halves else ''}")
    try:
        image_studies.check_batch_sizes(sizes, len(dataset.class_names), argument="--batch-sizes",
                                        split=where, left_out=left_out)  # fmt: skip
    except GradlabError as error:
        if given:
            raise
        default = ",".join(str(size) for size in sizes)
        raise GradlabError(f"{error} (the default --batch-sizes {default} of gradlab study "
                           f"{arguments.name}: pass --batch-sizes)") from None
    _check_study_fits(arguments, max(sizes))
    image_studies.check_training_length(dataset.labels, sizes, arguments.epochs,
                                        argument="--epochs")  # fmt: skip


def _check_study_fits(arguments: argparse.Namespace, largest: int) -> None:
    """Refuse a study whose batch of images cannot fit in the memory the host has free, before
    any image is decoded: past it the system's out-of-memory killer ends the command without a
    word. One float32 batch of ``largest`` RGB images is the least a step holds."""
    from gradlab.memory import refuse_beyond_free

    size = arguments.image_size
    refuse_beyond_free(largest * 3 * size * size * 4, "cpu", lambda need, free: (
        f"--image-size {size}: one batch of {largest} images of {size} x {size} pixels needs "
        f"{need} GiB in float32 before the backbone runs, more than the {free} GiB available; "
        "try a smaller --image-size or --batch-sizes"))


REPORT_MINUTES = "about 7 minutes"
"""How long ``gradlab report`` takes at full size, as its ``--help`` says: the measured time of
the published report (``figures/studies/report_timing.json``, in minutes; a test holds the
two together)."""


def _add_plan(commands, with_losses: bool) -> None:
    """The ``plan`` subcommand (its loss names are read only when it is named)."""
    losses = None
    if with_losses:
        from gradlab.experiments.planner import PLAN_LOSSES

        losses = list(PLAN_LOSSES)
    plan_help = ("peak extra memory and time per step of a loss at a batch size: measured on "
                 "the device if it is here (cpu, cuda), else estimated from a stated "
                 "model")  # fmt: skip
    plan = commands.add_parser("plan", help=plan_help, description=plan_help)
    plan.add_argument("--loss", default="smooth_ap", choices=losses,
                      type=lambda name: name.replace("-", "_"),  # smooth-ap as check-equivalence
                      help="the loss; hyphens or underscores alike, smooth-ap or smooth_ap "
                      "(default: %(default)s)")  # fmt: skip
    plan.add_argument("--batch-size", type=int, required=True,
                      help="m, a multiple of --per-class")  # fmt: skip
    plan.add_argument("--dim", type=int, required=True, help="embedding dimension d")
    plan.add_argument("--per-class", type=int, default=4,
                      help="images per class in a batch (default: %(default)s)")  # fmt: skip
    plan.add_argument("--device", default=None,
                      help="cpu, cuda, cuda:N or mps (default: cuda if one is here, else cpu); "
                      "a cuda device that is not here is estimated for, and so is mps, "
                      "which is not measured")  # fmt: skip
    plan.add_argument("--estimate", action="store_true",
                      help="estimate even where the device is here (SmoothAP only)")


PLAN_OPTIONS = {"loss": "--loss", "batch_size": "--batch-size", "dim": "--dim",
                "per_class": "--per-class"}  # fmt: skip
"""``gradlab plan``'s options by the planner's parameter names: its messages name the options."""


def _run_plan(arguments: argparse.Namespace) -> None:
    """``gradlab plan``: check the arguments, measure or estimate, print four lines."""
    import torch

    from gradlab.experiments.planner import check_loss_plan, format_plan, plan

    check_loss_plan(arguments.loss, arguments.batch_size, arguments.dim, arguments.per_class,
                    names=PLAN_OPTIONS)  # fmt: skip
    device = arguments.device
    if device is None:  # not given (an empty string is a given device: refused below)
        device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        kind = torch.device(device).type
    except (RuntimeError, ValueError, TypeError):
        kind = None  # not a device: check_device says so in one line
    absent = ((kind == "cuda" and not torch.cuda.is_available())
              or (kind == "mps" and not torch.backends.mps.is_available()))  # fmt: skip
    if not absent:  # a CUDA or MPS device that is not here is estimated for
        check_device(device)
    # a device that is not here is estimated for by plan itself (and named so when it cannot)
    result = plan(arguments.loss, arguments.batch_size, arguments.dim, arguments.per_class,
                  device, estimate=arguments.estimate)  # fmt: skip
    print(format_plan(result))


def _add_check_equivalence(commands, with_candidates: bool) -> None:
    """The ``check-equivalence`` subcommand (its names are read only when it is named)."""
    names = losses = None
    if with_candidates:
        from gradlab.equivalence.builtin import CANDIDATES, LOSSES

        names, losses = list(CANDIDATES), list(LOSSES)
    check_help = ("does a large-batch trick give the whole-batch gradient? Runs it on a small "
                  "synthetic problem; exit 0 when it does, 1 when it does not")  # fmt: skip
    check = commands.add_parser("check-equivalence", help=check_help, description=check_help)
    check.add_argument("candidate", choices=names, metavar="CANDIDATE",
                       help="the trick" + (f": one of {', '.join(names)}" if names else ""))
    check.add_argument("--loss", default=None, choices=losses,
                       type=lambda name: name.replace("_", "-"),  # smooth_ap as gradlab plan
                       help="the loss; cached-mnrl has its own; hyphens or underscores alike, "
                       "nt-xent or nt_xent (default: nt-xent)")
    check.add_argument("--processes", type=int, default=None,
                       help="gloo processes of the trick (default: 2 for the gathers, else 1)")
    check.add_argument("--batch-size", type=int, default=16,
                       help="B, even but for cached-mnrl (default: 16)")
    check.add_argument("--chunk-size", type=int, default=None,
                       help="gradient-cache's chunk, cached-mnrl's mini-batch (default: 4)")
    check.add_argument("--micro-batches", type=int, default=None,
                       help="accumulation's micro-batches (default: 4)")
    check.add_argument("--dtype", default="float64", choices=["float64", "float32"],
                       help="dtype of the comparison (default: %(default)s)")
    check.add_argument("--seed", type=int, default=0, help="seeds the problem (default: 0)")
    check.add_argument("--class-sizes", type=lambda text: _int_list(text, "2,3,4,7"),
                       help="the items of each class, comma-separated, adding up to --batch-size "
                       "(which may then be odd); classes of several sizes tell apart losses that "
                       "weigh a query by its number of positives otherwise (default: classes "
                       "of two)")  # fmt: skip
    check.add_argument("--json", type=_file_path,
                       help="also write the result as JSON into this file (its folder must "
                       "exist); an existing file is replaced only if it is empty or an earlier "
                       "gradlab check-equivalence --json output")  # fmt: skip


def _check_equivalence(arguments: argparse.Namespace) -> int:
    """Run ``check-equivalence``: print the table; 0 when equivalent, 1 when not."""
    import json

    if arguments.json is not None:  # as checked: a leading ~ expanded
        arguments.json = check_own_output(arguments.json, "check-equivalence", "--json")
    import torch

    from gradlab.equivalence.builtin import check_builtin
    from gradlab.memory import refused_when_out_of_memory

    with refused_when_out_of_memory(  # past the estimate: still one line, exit 2
        f"the check of {arguments.candidate} at --batch-size {arguments.batch_size} ran out of "
        "memory; try a smaller --batch-size"
    ):  # fmt: skip
        result = check_builtin(
            arguments.candidate, arguments.loss, processes=arguments.processes,
            batch_size=arguments.batch_size, chunk_size=arguments.chunk_size,
            micro_batches=arguments.micro_batches, dtype=getattr(torch, arguments.dtype),
            seed=arguments.seed, class_sizes=arguments.class_sizes,
        )  # fmt: skip
    print(result)
    if arguments.json is not None:
        check_own_output(arguments.json, "check-equivalence", "--json")  # written meanwhile?
        write_text(arguments.json, json.dumps(result.to_dict(), indent=2) + "\n")
    return 0 if result.equivalent else 1


def check_device(device: str) -> str:
    """Return ``device`` if torch can compute on it here; else raise :class:`GradlabError`
    naming ``--device`` (:func:`gradlab.experiments.runtime.check_device`).

    Example:
        >>> check_device("cpu")
        'cpu'
        >>> try:
        ...     check_device("banana")
        ... except GradlabError as error:
        ...     print(error)
        --device must be cpu, cuda[:N] or mps; got 'banana'
    """
    from gradlab.experiments.runtime import check_device as check

    return check(device, "--device")


OWN_OUTPUT_BYTES = 1 << 28
"""The largest existing file read to tell whether it is a command's earlier JSON output (an
audit's with mutants is a few MiB): a larger one, a long ``metrics.jsonl`` say, is not read."""

AUDIT_RECORD_KEYS = frozenset({"seed", "label", "claim", "verdict"})
"""Keys of every record ``gradlab audit --json`` writes (a JSON list of them)."""

AUDIT_MARKDOWN_TITLE = "# Derivation audit"
"""The first line of what ``gradlab audit --markdown`` writes."""

EQUIVALENCE_KEYS = frozenset({"reference", "candidate", "equivalent", "quantities"})
"""Top-level keys of the JSON object ``gradlab check-equivalence --json`` writes."""


def _json_file(path: Path) -> object:
    """The JSON in ``path``, or None for a file too large to be a command's output."""
    import json

    if path.stat().st_size > OWN_OUTPUT_BYTES:
        return None
    return json.loads(path.read_text(encoding="utf-8"))


AUDIT_DETAIL_HINT = ("Each verdict's method and detail (what it rests on: the witness, the "
                     "cases, the mutants): gradlab audit --markdown FILE or --json FILE")
"""The line below ``gradlab audit``'s table when it writes no file: the table shows verdicts."""


def check_claims_file(path: Path) -> None:
    """Refuse ``--claims`` naming no file, before anything loads (SymPy takes seconds)."""
    if not path.is_file():
        what = "a folder" if path.is_dir() else "not there"
        raise GradlabError(f"--claims must name a Python file that defines CLAIMS; got "
                           f"{str(path)!r}, which is {what}")  # fmt: skip


def claims_of_file(path: Path) -> list:
    """The claims of ``gradlab audit --claims FILE``: the list named ``CLAIMS`` that the Python
    file ``path`` defines, run as ``python FILE`` would run it (its folder first on
    ``sys.path``) but under the name ``__gradlab_claims__``, so that a ``__main__`` block stays
    out.

    Raises:
        GradlabError: ``path`` is not a file; running it raised (the error and the file's
            line are named); it defines no ``CLAIMS``; ``CLAIMS`` is not a non-empty list or
            tuple of :class:`gradlab.symbolic.claims.Claim`.

    Example:
        >>> import tempfile
        >>> from pathlib import Path
        >>> file = Path(tempfile.mkdtemp()) / "my_claims.py"
        >>> _ = file.write_text("from gradlab.symbolic import Claim, Form, decide\\n"
        ...     "CLAIMS = [Claim('notes', 'eq1', '1 + 1 is 2', Form(2),"
        ...     " lambda form: decide(form.value == 2, 'is 2', 'not 2'))]\\n")
        >>> [claim.id for claim in claims_of_file(file)]
        ['notes:eq1']
    """
    import runpy
    import traceback

    from gradlab.symbolic.claims import Claim

    check_claims_file(path)
    folder = str(path.resolve().parent)
    sys.path.insert(0, folder)
    try:
        names = runpy.run_path(str(path), run_name="__gradlab_claims__")
    except Exception as error:  # the user's code: its error and line, in one line
        lines = [frame.lineno for frame in traceback.extract_tb(error.__traceback__)
                 if Path(frame.filename).resolve() == path.resolve()]  # fmt: skip
        if isinstance(error, SyntaxError) and error.lineno is not None:
            lines.append(error.lineno)
        where = f" at line {lines[-1]}" if lines else ""
        raise GradlabError(f"--claims {str(path)!r}: running it raised "
                           f"{type(error).__name__}{where}: {error}") from error  # fmt: skip
    finally:
        if folder in sys.path:
            sys.path.remove(folder)
    if "CLAIMS" not in names:
        raise GradlabError(f"--claims {str(path)!r} defines no CLAIMS: name the list of your "
                           "gradlab.symbolic.Claim objects CLAIMS")  # fmt: skip
    claims = names["CLAIMS"]
    if not isinstance(claims, (list, tuple)):
        raise GradlabError(f"--claims {str(path)!r}: CLAIMS must be a list of "
                           f"gradlab.symbolic.Claim; got {_shown(claims)}")  # fmt: skip
    for index, claim in enumerate(claims):
        if not isinstance(claim, Claim):
            raise GradlabError(f"--claims {str(path)!r}: CLAIMS must be a list of "
                               f"gradlab.symbolic.Claim; CLAIMS[{index}] is "
                               f"{_shown(claim)}")  # fmt: skip
    if not claims:
        raise GradlabError(f"--claims {str(path)!r}: CLAIMS is empty; there is nothing to audit")
    return list(claims)


def _shown(value: object, width: int = 80) -> str:
    """``value``'s type and repr, the repr cut to ``width`` characters."""
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= width else text[:width - 3] + '...'}"


def _audit_json(path: Path) -> bool:
    records = _json_file(path)
    return isinstance(records, list) and all(
        isinstance(record, dict) and AUDIT_RECORD_KEYS <= record.keys() for record in records)


def _audit_markdown(path: Path) -> bool:
    with path.open(encoding="utf-8") as file:  # the first line only
        return file.readline(len(AUDIT_MARKDOWN_TITLE) + 2).rstrip("\r\n") == AUDIT_MARKDOWN_TITLE


def _equivalence_json(path: Path) -> bool:
    result = _json_file(path)
    return isinstance(result, dict) and EQUIVALENCE_KEYS <= result.keys()


OWN_OUTPUTS = {("audit", "--json"): _audit_json, ("audit", "--markdown"): _audit_markdown,
               ("check-equivalence", "--json"): _equivalence_json}  # fmt: skip
"""(command, option) -> whether an existing file is that option's earlier output, by content."""


def check_own_output(path: Path, command: str, option: str) -> Path:
    """``path`` if ``gradlab COMMAND OPTION`` may write it: a new file, an empty one, or that
    option's earlier output (:data:`OWN_OUTPUTS`), which a rerun replaces; any other existing
    file is refused (``audit --json runs/a/metrics.jsonl`` replaced a Monitor's log)."""
    return check_own_output_file(path, argument=option,
                                 written_by=f"an earlier gradlab {command} {option} output",
                                 recognise=OWN_OUTPUTS[command, option])  # fmt: skip


REPORT_ENTRIES = frozenset({"results.json", "summary.md", "index.html", "audit.json", "figures"})
"""What ``gradlab report`` writes into its folder: a folder holding only these, with a
report's ``results.json``, is a previous report, which a new one may replace."""


REPORT_FIGURE_SUFFIXES = frozenset({".png", ".json"})
"""What a report written before it listed its figures (``figure_files``) put in ``figures/``."""


def _report_results(path: Path) -> dict | None:
    """``path`` read as a ``results.json`` as ``gradlab report`` writes it (a JSON object with
    its ``gradlab`` (version) and ``sections`` keys), or None. A study's folder holds an
    ``index.html`` and a ``summary.md`` too, but never this file."""
    import json

    try:
        results = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if isinstance(results, dict) and "gradlab" in results and "sections" in results:
        return results
    return None


def _foreign_figures(figures: Path, results: dict) -> list[str]:
    """The files in a report's ``figures/`` that the report did not write (its
    ``figure_files``; from an older report, files that are no figure or figure data)."""
    if not figures.is_dir():
        return []
    listed = results.get("figure_files")
    found = [path for path in figures.rglob("*") if not path.is_dir()]
    if isinstance(listed, list):
        written = set(listed)
        return sorted(f"figures/{path.relative_to(figures).as_posix()}" for path in found
                      if path.relative_to(figures).as_posix() not in written)  # fmt: skip
    return sorted(f"figures/{path.relative_to(figures).as_posix()}" for path in found
                  if path.suffix not in REPORT_FIGURE_SUFFIXES)  # fmt: skip


def check_report_folder(out: Path) -> Path:
    """``out`` if a report may be written there: new, empty, or a previous gradlab report
    (its own ``results.json`` and nothing but what a report writes: :data:`REPORT_ENTRIES`).

    The report is written next to it first and moved into place at the end, replacing the
    whole folder; so a folder of other files (a study's, one's own beside a report) is
    refused rather than deleted.
    """
    given = out
    out = check_output_folder(out, argument="--out")
    if out.is_symlink():  # a link to a folder (reports/latest): the report replaces its target
        out = out.resolve()
    here = Path.cwd().resolve()
    if out.resolve() == here or out.resolve() in here.parents:
        # replaced whole at the end: the working folder (and what it holds) would go with it
        where = "the folder you are in" + ("" if out.resolve() == here else " or one above it")
        raise GradlabError(
            f"--out: {str(given)!r} is {where}, which the report replaces whole; run from "
            "another folder or name a new one"
        )
    if not out.is_dir() or not any(out.iterdir()):
        return out
    results = _report_results(out / "results.json")
    if results is None:
        raise GradlabError(
            f"--out: {str(out)!r} is not empty and not a gradlab report (no results.json "
            "written by gradlab report); choose a new or empty folder"
        )
    foreign = sorted(entry.name for entry in out.iterdir() if entry.name not in REPORT_ENTRIES)
    foreign += _foreign_figures(out / "figures", results)
    if foreign:
        listed = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3
                                           else "")  # fmt: skip
        raise GradlabError(
            f"--out: {str(out)!r} holds files that are not a gradlab report's ({listed}), "
            "which replacing it would delete; choose a new or empty folder"
        )
    return out


def _figure_folder(path: Path) -> bool:
    """Whether ``path`` is a folder ``gradlab plot`` wrote (it lists its figures in
    :data:`~gradlab.run_dirs.FIGURE_LIST`) and not a run (no ``metrics.jsonl``)."""
    from gradlab.run_dirs import FIGURE_LIST

    path = Path(path)
    return (path / FIGURE_LIST).is_file() and not (path / "metrics.jsonl").exists()


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command is so that its cleanup runs as for Ctrl-C."""


def _workers(text: str) -> int:
    """``--workers``: a whole number from 1 to 8 (argparse turns the error into a usage line)."""
    if not text.strip().isdigit() or not 1 <= int(text) <= 8:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to 8; got {text!r}")
    return int(text)


def _left(interruption: KeyboardInterrupt) -> str:
    """What an interrupted command left on disk: the ``left`` a command set on the interruption
    as it passed (a plot's figures, a study's moved files), else nothing."""
    return getattr(interruption, "left", "nothing was written")


def _raise_terminated(signum: int, frame: object) -> None:
    raise _Terminated(f"signal {signum}")


def _write_report(
    out: Path, quick: bool, only: list[str] | None, device: str, workers: int = 1,
    studies: list[Path] | None = None,
) -> None:  # fmt: skip
    """Write the report into ``.OUT.partial`` beside ``out``, then move it into place.

    SIGTERM is handled like Ctrl-C while the report is written (the staging folder is removed,
    and so are the missing parents of ``out`` the run created: nothing is left behind); the
    previous handler is back before the finished report is moved.
    """
    import signal
    import threading

    from gradlab.report import run_report

    staging = out.parent / f".{out.name}.partial"
    created = _missing_folders(staging.parent)
    handles = threading.current_thread() is threading.main_thread()  # signals reach it only
    previous = signal.signal(signal.SIGTERM, _raise_terminated) if handles else None
    try:
        try:
            shutil.rmtree(staging, ignore_errors=True)
            run_report(staging, quick=quick, only=only, device=device, workers=workers,
                       studies=studies)  # fmt: skip
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)  # never a half-written report
            _remove_empty(created)  # the missing parents --out named
            raise
    finally:
        if handles:
            signal.signal(signal.SIGTERM, previous)
    if out.exists():
        shutil.rmtree(out)
    staging.rename(out)


WRITE_FAILURES = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
"""Errors of a write into an opened file (a full disk, a quota, a file too large): they name
no file, and are the machine's state, not a bug: one line, exit code 2."""


STDOUT_CLOSED = 141
"""The exit code of a command whose standard output was closed before it ended (``gradlab
audit | head -1``): 128 + SIGPIPE, what a shell reports for a program a closed pipe ended; not
1, which ``check-equivalence`` returns for a trick that is not equivalent."""


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``gradlab`` console script.

    A closed standard output (a pipe into ``head``) ends the command quietly with
    :data:`STDOUT_CLOSED`: what was left to print goes nowhere.
    """
    try:
        try:
            return _main(argv)
        finally:  # what is still buffered goes now, where a closed pipe is caught, not at exit
            if sys.stdout is not None:
                sys.stdout.flush()
    except BrokenPipeError:
        _discard_stdout()
        return STDOUT_CLOSED


def _discard_stdout() -> None:
    """Point standard output at the null device: the interpreter flushes it once more as it
    exits, which would raise the broken pipe again (and print it). A stand-in without a file
    descriptor (a test's capture) is left as it is."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)


def _option_naming(argv: list[str], filename: object) -> str | None:
    """The option (``--json``) the user typed before the failed ``filename`` (``--json PATH``
    or ``--json=PATH``, the path as typed or with its ``~`` expanded); None for a file gradlab
    chose or a path given as a positional argument."""
    if filename is None:
        return None

    def named(path: str) -> bool:
        return bool(path) and str(filename) in (path, os.path.expanduser(path))

    for index, token in enumerate(argv):
        option, equals, value = token.partition("=")
        if equals and option.startswith("--") and named(value):
            return option
        if index and argv[index - 1].startswith("--") and named(token):
            return argv[index - 1]
    return None


def _main(argv: list[str] | None) -> int:
    """The command itself: :func:`main` without its handling of a closed standard output."""
    argv = sys.argv[1:] if argv is None else list(argv)
    os.environ.setdefault("MPLBACKEND", "Agg")  # the command's figures are files; a user's wins
    try:
        _check_extras(argv)
        arguments = _build_parser(
            with_sections="report" in argv, with_candidates="check-equivalence" in argv,
            with_plan_losses="plan" in argv,
        ).parse_args(argv)
    except GradlabError as error:
        print(f"gradlab: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as error:  # while the options' imports (torch) load
        print(f"gradlab: interrupted; {_left(error)}", file=sys.stderr)
        return 130
    try:
        if arguments.command == "report":
            from gradlab.progress import set_progress_mode

            device = check_device(arguments.device)
            only = arguments.only or []
            repeated = sorted({name for name in only if only.count(name) > 1})
            if repeated:  # it would run twice, and the page would hold it twice
                raise GradlabError(f"--only must name each section once; got "
                                   f"{', '.join(repeated)} more than once")  # fmt: skip
            if arguments.studies:
                from gradlab.report.user_studies import check_study_folders

                # read again by the report; rendered here once, in a temporary folder, so
                # that a study its report could not draw is refused before any section runs
                check_study_folders(arguments.studies, rendered=True)
            out = check_report_folder(arguments.out)
            if arguments.no_progress:
                set_progress_mode("off")
            workers = arguments.workers
            if workers is None:
                from gradlab.experiments.runtime import default_workers

                workers = default_workers()
            _write_report(out, arguments.quick, arguments.only, device, workers,
                          arguments.studies)  # fmt: skip
            print(f"report written to {arguments.out}")
        elif arguments.command == "audit":
            for option in ("json", "markdown"):  # as checked: a leading ~ expanded
                if getattr(arguments, option) is not None:
                    setattr(arguments, option, check_own_output(getattr(arguments, option),
                                                                "audit", f"--{option}"))
            if arguments.json is not None and arguments.json.resolve() == (
                    arguments.markdown.resolve() if arguments.markdown is not None else None):
                raise GradlabError(f"--json and --markdown name the same file {arguments.json}; "
                                   "give each its own (one would overwrite the other)")
            if arguments.claims is not None and arguments.measure:
                raise GradlabError("--measure measures P against batch size for Brown et al.'s "
                                   "built-in claim; with --claims FILE your claims are audited "
                                   "alone: drop --measure (a measurement of your own goes into "
                                   "your claim's check)")  # fmt: skip
            if arguments.claims is not None:
                check_claims_file(arguments.claims)
            from gradlab.progress import set_progress_mode
            from gradlab.symbolic.audit import (
                PROBLEM_VERDICTS,
                distinct_problems,
                format_not_testable,
                format_table,
                run_audit,
                write_outputs,
            )

            if arguments.no_progress:
                set_progress_mode("off")
            measurement = None
            if arguments.measure:  # the study layer measures; the audit only decides
                from gradlab.experiments import p_vs_batch_size

                measurement = p_vs_batch_size.measure(quick=True)
            claims = None if arguments.claims is None else claims_of_file(arguments.claims)
            records = run_audit(claims=claims, mutants=arguments.mutants,
                                p_vs_batch_size=measurement, progress=True)  # fmt: skip
            print(format_table(records))
            wrong = sum(record["verdict"] in PROBLEM_VERDICTS for record in records)
            if wrong:  # as the README and the report count them
                problems = distinct_problems(records)
                print(f"the {wrong} claim{'s' if wrong > 1 else ''} wrong as printed "
                      f"show{'' if wrong > 1 else 's'} {problems} distinct "
                      f"problem{'s' if problems > 1 else ''} (claims that share one root cause "
                      "count once)")
            # what each claim not testable here needs (and, with --measure, the context measured);
            # your own claims (--claims) may have none
            if claims is None or any(r["verdict"] == "not-testable-here" for r in records):
                print(format_not_testable(records))
            if arguments.json is None and arguments.markdown is None:
                print(AUDIT_DETAIL_HINT)
            for option in ("json", "markdown"):  # a file written there meanwhile is kept too
                if getattr(arguments, option) is not None:
                    check_own_output(getattr(arguments, option), "audit", f"--{option}")
            write_outputs(records, arguments.json, arguments.markdown)
        elif arguments.command == "check-equivalence":
            return _check_equivalence(arguments)
        elif arguments.command == "study":
            _run_study(arguments)
        elif arguments.command == "plan":
            _run_plan(arguments)
        elif arguments.command == "plot":
            import warnings

            # every argument is checked before matplotlib and torch load (seconds): a mistyped
            # folder is one line at once
            from gradlab.run_dirs import check_run_dirs, check_runs_and_labels, default_out

            given = list(arguments.run_dir)
            if len(given) > 1:
                # `gradlab plot runs/*` run again: the glob matches the figures it wrote (left
                # out unless the labels name it too); the default output stays the glob's
                kept = [run for run in given if not _figure_folder(run)]
                labels = arguments.label
                if kept and len(kept) < len(given) and (not labels or len(labels) == len(kept)):
                    for run in given:
                        if run not in kept:
                            print(f"gradlab: left out {str(run)!r}: the figure folder an "
                                  "earlier gradlab plot wrote, not a run", file=sys.stderr)
                    arguments.run_dir = kept
            # named as the command names them; plot_runs checks them again for library callers
            check_runs_and_labels(arguments.run_dir, arguments.label, runs_argument="RUN_DIR",
                                  labels_argument="--label")  # fmt: skip
            points = {}  # by default plot_runs's own
            if arguments.max_points is not None:
                if arguments.max_points < 0 or arguments.max_points == 1:
                    raise GradlabError(
                        "--max-points must be 0 (every logged step) or a whole number of at "
                        f"least 2; got {arguments.max_points}"
                    )
                points = {"max_points": arguments.max_points or None}  # 0: every logged step
            if arguments.out is None:  # the default RUN_DIR/figures: a missing run comes first
                check_run_dirs(arguments.run_dir, argument="RUN_DIR")
            if arguments.out is not None:
                out = check_output_folder(arguments.out, argument="--out")
            else:  # the default too, before reading, named as the default
                out = check_output_folder(default_out(given), argument=DEFAULT_FIGURES)
            if arguments.out is not None:  # then the runs, named as on the command line
                check_run_dirs(arguments.run_dir, argument="RUN_DIR")
            from gradlab.plotting.monitor import plot_runs

            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", UserWarning)
                try:
                    written = plot_runs(arguments.run_dir, out, arguments.label, **points)
                except KeyboardInterrupt as error:  # main() says what it left
                    error.left = (f"figures drawn before it stay in {str(out)!r}, listed as "
                                  "gradlab's: the next plot there replaces them")  # fmt: skip
                    raise
            for warning in caught:
                print(f"gradlab: warning: {warning.message}", file=sys.stderr)
            for path in written:
                print(f"wrote {path}")
    except GradlabError as error:
        print(f"gradlab: {error}", file=sys.stderr)
        return 2
    except _Terminated as error:
        print(f"gradlab: terminated (SIGTERM); {_left(error)}", file=sys.stderr)
        return 143
    except KeyboardInterrupt as error:
        print(f"gradlab: interrupted; {_left(error)}", file=sys.stderr)
        return 130
    except OSError as error:
        if error.filename is None and error.errno not in WRITE_FAILURES:
            raise  # not a file or path the user named: a bug, shown in full
        where = "an output" if error.filename is None else repr(str(error.filename))
        option = _option_naming(argv, error.filename)
        print(f"gradlab: could not use {option + ' ' if option else ''}{where}: "
              f"{error.strerror}", file=sys.stderr)  # fmt: skip
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
