"""Operating-region figures (issue 5): closed forms, P against batch size, training dynamics.

Usage: python analyses/operating_region.py [--quick] [--out figures]
"""

from gradlab.report.sections import OPERATING_REGION_FIGURES, analysis_main

if __name__ == "__main__":
    analysis_main(
        OPERATING_REGION_FIGURES,
        __doc__,
        lambda results: results["operating_region_p_vs_batch_size"]["conclusion"],
    )
