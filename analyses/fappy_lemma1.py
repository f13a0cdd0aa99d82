"""FAPPY Lemma 1 measured (issue 6): where dP_ij/ds_ik is non-zero, and its value.

Usage: python analyses/fappy_lemma1.py [--quick] [--out figures]
"""

from gradlab.report.fappy_lemma import lemma1_verdict
from gradlab.report.sections import LOSS_FIGURES, analysis_main

if __name__ == "__main__":
    analysis_main(
        LOSS_FIGURES, __doc__, lambda results: lemma1_verdict(results["fappy_lemma1_gradient"])
    )
