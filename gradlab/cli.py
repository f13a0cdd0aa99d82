"""The ``gradlab`` command."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gradlab.errors import GradlabError


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gradlab", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    report = commands.add_parser("report", help="run the analyses and write the report")
    report.add_argument("--out", type=Path, default=Path("reports/latest"))
    report.add_argument("--quick", action="store_true", help="small settings, for tests")
    report.add_argument("--only", action="append", help="run only this section (repeatable)")
    report.add_argument("--device", default="cpu", help="device of the training sections")
    audit = commands.add_parser("audit", help="check the seeds' printed equations by computation")
    audit.add_argument("--json", type=Path, help="write the records as JSON")
    audit.add_argument("--markdown", type=Path, help="write a readable report with the formulas")
    plot = commands.add_parser("plot", help="figures from a Monitor log folder (headless)")
    plot.add_argument("run_dir", type=Path)
    plot.add_argument("--out", type=Path, help="figure folder (default RUN_DIR/figures)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``gradlab`` console script."""
    arguments = _build_parser().parse_args(argv)
    try:
        if arguments.command == "report":
            from gradlab.report import run_report

            run_report(
                arguments.out, quick=arguments.quick, only=arguments.only, device=arguments.device
            )
            print(f"report written to {arguments.out}")
        elif arguments.command == "audit":
            from gradlab.symbolic.audit import format_table, run_audit, write_outputs

            records = run_audit()
            print(format_table(records))
            write_outputs(records, arguments.json, arguments.markdown)
        elif arguments.command == "plot":
            from gradlab.plotting.monitor import plot_run

            for path in plot_run(arguments.run_dir, arguments.out):
                print(f"wrote {path}")
    except GradlabError as error:
        print(f"gradlab: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
