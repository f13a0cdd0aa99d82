"""Run every script of examples/ and keep what the docs show: its printed output and figure.

``python tools/docs_examples.py`` (part of ``make docs``) runs each example of :data:`EXAMPLES`
into a temporary folder and writes ``docs/examples/NAME.txt`` (its standard output) and, for an
example that draws one, ``docs/examples/NAME.png``. The examples page shows them beside the
source (the ``example-NAME`` blocks of tools/docs_pages.py); tests/test_examples.py runs each
example and checks that it still prints what the page shows.

A figure redrawn from a float32 training run differs by a few anti-aliased pixels from one CPU
to another (about 0.03 % of them on the SmoothAP example, AMD against Intel) while the run
prints the same numbers. Such a figure is not rewritten (:func:`same_picture`), so a docs build
on another machine leaves the committed figure unchanged; any visible change replaces it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "docs" / "examples"

EXAMPLES = {
    "smoothap_monitor": "figures/overview.png",
    "pml_recording": None,
    "lightning_callback": None,
    "audit_derivation": None,
}
"""Example name -> the figure (relative to its ``--out`` folder) the docs show, if any."""


def run_example(name: str, out: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``examples/NAME.py`` with ``--out out`` (when it takes one) from the repository root,
    on CPU, with matplotlib's headless backend; standard output and error captured."""
    command = [sys.executable, str(ROOT / "examples" / f"{name}.py")]
    if "--out" in (ROOT / "examples" / f"{name}.py").read_text():
        command += ["--out", str(out)]
    environment = {**os.environ, "MPLBACKEND": "Agg", "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env=environment)  # fmt: skip


PIXEL_SHARE = 1e-3
"""At most this share of a figure's pixels may differ for it to count as the same picture."""


def same_picture(old: Path, new: Path, share: float = PIXEL_SHARE) -> bool:
    """Whether two PNG files show the same picture: same size and at most ``share`` of their
    pixels differ (anti-aliasing of the same lines drawn from values that differ in their last
    float32 digits). A missing ``old`` is no picture.

    Example:
        >>> same_picture(Path("no-such.png"), Path("other.png"))
        False
    """
    if not old.is_file():
        return False
    from matplotlib.image import imread

    before, after = imread(old), imread(new)
    if before.shape != after.shape:
        return False
    differing = np.any(before != after, axis=-1) if before.ndim == 3 else before != after
    return float(differing.mean()) <= share


def main(argv: list[str] | None = None) -> int:
    import argparse

    argparse.ArgumentParser(description=__doc__.strip().splitlines()[0]).parse_args(argv)
    OUTPUT.mkdir(parents=True, exist_ok=True)
    for name, figure in EXAMPLES.items():
        with tempfile.TemporaryDirectory() as folder:
            completed = run_example(name, Path(folder))
            if completed.returncode != 0:
                print(f"examples/{name}.py failed:\n{completed.stderr[-3000:]}", file=sys.stderr)
                return 1
            (OUTPUT / f"{name}.txt").write_text(completed.stdout)
            if figure is not None:
                drawn, shown = Path(folder) / figure, OUTPUT / f"{name}.png"
                if not same_picture(shown, drawn):
                    shutil.copy(drawn, shown)
        print(f"examples/{name}.py: output written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
