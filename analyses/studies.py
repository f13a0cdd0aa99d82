"""Three studies of the papers' claims: P vs batch size, losses on digit strings, digit scenes.

Each study is one call into :mod:`gradlab.experiments`; its JSON and figures go into ``--out``.

Usage: python analyses/studies.py [--quick] [--out figures/studies] [--only NAME] [--device cpu]
"""

import argparse
from pathlib import Path

from gradlab.experiments import digit_scenes, loss_comparison, p_vs_batch_size
from gradlab.jsonio import write_json
from gradlab.plotting.studies import (
    plot_loss_comparison,
    plot_p_vs_batch_size,
    plot_scene_anatomy,
    plot_scene_recall,
)

STUDIES = {
    "p_vs_batch_size": (p_vs_batch_size.measure, [plot_p_vs_batch_size]),
    "loss_comparison": (loss_comparison.measure, [plot_loss_comparison]),
    "digit_scenes": (digit_scenes.measure, [plot_scene_recall, plot_scene_anatomy]),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small settings, for tests")
    parser.add_argument("--out", type=Path, default=Path.cwd() / "figures" / "studies")
    parser.add_argument("--only", action="append", choices=list(STUDIES))
    parser.add_argument("--device", default="cpu")
    arguments = parser.parse_args()
    from common import checked_path

    from gradlab.paths import check_output_folder

    checked_path(check_output_folder, arguments.out, "--out")
    arguments.out.mkdir(parents=True, exist_ok=True)
    for name in arguments.only or list(STUDIES):
        measure, plots = STUDIES[name]
        result = measure(quick=arguments.quick, device=arguments.device)
        write_json(arguments.out / f"{name}.json", result)
        for plot in plots:
            suffix = plot.__name__.removeprefix("plot_")
            plot(result, arguments.out / f"{suffix}.png")
        print(f"wrote {name} into {arguments.out}")


if __name__ == "__main__":
    main()
