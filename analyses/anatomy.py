"""Gradient anatomy: SmoothAP, VSE++ max-violation and NT-Xent on one batch.

Writes figures/anatomy_comparison.json and figures/anatomy_comparison.png. Fixed seeds and one
CPU thread: a rerun reproduces the JSON byte for byte.

Usage: python analyses/anatomy.py [--quick] [--out figures]
"""

import argparse
from pathlib import Path

from gradlab.experiments.gradient_anatomy import measure
from gradlab.jsonio import write_json
from gradlab.plotting.anatomy import anatomy_summary, plot_anatomy_comparison


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two short checkpoints")
    parser.add_argument("--out", default="figures", help="output folder (default: figures)")
    args = parser.parse_args(argv)
    from common import checked_path

    from gradlab.paths import check_output_folder

    out = checked_path(check_output_folder, Path(args.out), "--out")
    out.mkdir(parents=True, exist_ok=True)
    results = measure(quick=args.quick)
    write_json(out / "anatomy_comparison.json", results)
    plot_anatomy_comparison(out / "anatomy_comparison.json", out / "anatomy_comparison.png")
    for checkpoint in results["checkpoints"]:
        for name, record in checkpoint["losses"].items():
            print(f"after {checkpoint['steps']} steps, {name}:")
            print("  " + anatomy_summary(record).replace("\n", "\n  "))


if __name__ == "__main__":
    main()
