"""Harmonic-vs-log figures: the error surface and relaxed vs exact AP / DCG.

Usage: python analyses/tie_aware.py [--quick] [--out figures]
"""

from common import analysis_main

from gradlab.report.figure_tables import TIE_AWARE_FIGURES
from gradlab.report.prose import relaxation_summary

if __name__ == "__main__":
    analysis_main(
        TIE_AWARE_FIGURES,
        __doc__,
        lambda results: relaxation_summary(results["tie_aware_relaxation_gap"]),
    )
