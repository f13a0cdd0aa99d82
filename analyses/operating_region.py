"""Operating-region figures: closed forms, training dynamics, and P against batch size
on the 10-class digits (uniform vs 8-class batches; Brown et al.'s (2020) sampler is in
analyses/studies.py).

Usage: python analyses/operating_region.py [--quick] [--out figures]
"""

from common import analysis_main

from gradlab.report.figure_tables import OPERATING_REGION_FIGURES, P_VS_BATCH_SIZE_10_CLASSES

if __name__ == "__main__":
    analysis_main(
        {**OPERATING_REGION_FIGURES, **P_VS_BATCH_SIZE_10_CLASSES},
        __doc__,
        lambda results: results["operating_region_p_vs_batch_size_10_classes"]["conclusion"],
    )
