"""The command line shared by the figure scripts of ``analyses/``: draw a figure table."""

from __future__ import annotations

from pathlib import Path

from gradlab.report.figure_tables import draw_figures


def analysis_main(table: dict, description: str, conclusion=None) -> None:
    """Command line of an ``analyses/`` script: draw a figure table into ``--out``."""
    import argparse

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="small settings, for tests")
    parser.add_argument("--out", type=Path, default=Path.cwd() / "figures")
    arguments = parser.parse_args()
    results = draw_figures(table, arguments.out, arguments.quick)
    print(f"wrote {len(results)} figures into {arguments.out}")
    if conclusion is not None:
        print(conclusion(results))
