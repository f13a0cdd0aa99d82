"""Harmonic-vs-log figures (issue 4): the error surface and relaxed vs exact AP / DCG.

Usage: python analyses/tie_aware.py [--quick] [--out figures]
"""

import argparse
from pathlib import Path

from gradlab.report.sections import TIE_AWARE_FIGURES, draw_figures
from gradlab.report.tie_aware import relaxation_summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "figures")
    arguments = parser.parse_args()
    results = draw_figures(TIE_AWARE_FIGURES, arguments.out, arguments.quick)
    print(f"wrote {len(results)} figures into {arguments.out}")
    print(relaxation_summary(results["tie_aware_relaxation_gap"]))


if __name__ == "__main__":
    main()
