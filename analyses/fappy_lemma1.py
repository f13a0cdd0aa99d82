"""FAPPY Lemma 1 measured: where dP_ij/ds_ik is non-zero, and its value.

Usage: python analyses/fappy_lemma1.py [--quick] [--out figures]
"""

from common import analysis_main

from gradlab.report.figure_tables import LOSS_FIGURES
from gradlab.report.prose import lemma1_verdict

if __name__ == "__main__":
    analysis_main(
        LOSS_FIGURES, __doc__, lambda results: lemma1_verdict(results["fappy_lemma1_gradient"])
    )
