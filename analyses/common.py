"""The command line shared by the figure scripts of ``analyses/``: draw a figure table."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from gradlab.errors import GradlabError
from gradlab.paths import check_output_folder
from gradlab.report.figure_tables import draw_figures


def checked_path(check: Callable, path: Path, argument: str) -> Path:
    """``check(path, argument=argument)`` (a :mod:`gradlab.paths` check), or the script's
    one-line refusal on stderr and exit code 2: before any work, not a traceback after it."""
    try:
        return check(path, argument=argument)
    except GradlabError as error:
        print(f"{Path(sys.argv[0]).name}: {error}", file=sys.stderr)
        raise SystemExit(2) from None


def checked_figure(path: Path, argument: str) -> Path:
    """``path`` if a PNG figure can be written there (its folder created when missing), else the
    script's one-line refusal (:func:`checked_path`): a folder, or a name without ``.png``
    (which matplotlib would save beside it as ``NAME.png``), is refused."""

    def figure_file(path: Path, argument: str) -> Path:
        if path.is_dir():
            raise GradlabError(f"{argument} must be a .png file path; got {str(path)!r}, which "
                               "is a folder")  # fmt: skip
        if path.suffix.lower() != ".png":
            raise GradlabError(f"{argument} must be a .png file path; got {str(path)!r}")
        check_output_folder(path.parent, argument=f"the folder of {argument} {str(path)!r}")
        return path

    return checked_path(figure_file, path, argument)


def analysis_main(table: dict, description: str, conclusion=None) -> None:
    """Command line of an ``analyses/`` script: draw a figure table into ``--out``."""
    import argparse

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="small settings, for tests")
    parser.add_argument("--out", type=Path, default=Path.cwd() / "figures")
    arguments = parser.parse_args()
    checked_path(check_output_folder, arguments.out, "--out")
    results = draw_figures(table, arguments.out, arguments.quick)
    print(f"wrote {len(results)} figures into {arguments.out}")
    if conclusion is not None:
        print(conclusion(results))
