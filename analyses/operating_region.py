"""Operating-region figures (issue 5): closed forms, P against batch size, training dynamics.

Usage: python analyses/operating_region.py [--quick] [--out figures]
Writes operating_region_*.json and .png into the output folder.
"""

import argparse
from pathlib import Path

from gradlab.report.sections import OPERATING_REGION_FIGURES, draw_figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "figures")
    arguments = parser.parse_args()
    results = draw_figures(OPERATING_REGION_FIGURES, arguments.out, arguments.quick)
    print(f"wrote {len(results)} figures into {arguments.out}")
    print(results["operating_region_p_vs_batch_size"]["conclusion"])


if __name__ == "__main__":
    main()
