"""Run every script of examples/ and keep what the docs show: its printed output and figure.

``python tools/docs_examples.py`` (part of ``make docs``) runs each example of :data:`EXAMPLES`
into a temporary folder and writes ``docs/examples/NAME.txt`` (its standard output) and, for an
example that draws one, ``docs/examples/NAME.png``. The examples page shows them beside the
source (the ``example-NAME`` blocks of tools/docs_pages.py); tests/test_examples.py runs each
example and checks that it still prints what the page shows.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

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


def main() -> int:
    OUTPUT.mkdir(parents=True, exist_ok=True)
    for name, figure in EXAMPLES.items():
        with tempfile.TemporaryDirectory() as folder:
            completed = run_example(name, Path(folder))
            if completed.returncode != 0:
                print(f"examples/{name}.py failed:\n{completed.stderr[-3000:]}", file=sys.stderr)
                return 1
            (OUTPUT / f"{name}.txt").write_text(completed.stdout)
            if figure is not None:
                shutil.copy(Path(folder) / figure, OUTPUT / f"{name}.png")
        print(f"examples/{name}.py: output written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
