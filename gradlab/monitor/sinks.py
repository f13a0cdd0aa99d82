"""Sinks: where logged records go. One small class per backend; optional imports deferred."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

from gradlab.errors import GradlabError


def encode_value(value: object) -> object:
    """JSON has no NaN or infinity: write them as the strings ``"NaN"``, ``"Infinity"``."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def decode_value(value: object) -> object:
    """Inverse of :func:`encode_value`."""
    if value in ("NaN", "Infinity", "-Infinity"):
        return float(value.replace("Infinity", "inf"))
    return value


class Sink:
    """A destination for records: :meth:`write` one record (a flat dict), :meth:`close`."""

    def open(self, log_dir: Path, header: dict) -> None:
        """Called once by the monitor with the log folder and the header record."""

    def write(self, record: dict) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def close(self) -> None:
        """Release files or writers."""


class JSONLSink(Sink):
    """``metrics.jsonl``: a header record, then one object per logged step, flushed each time.

    Reopening a folder appends (a new header marks the restart), so a crash loses at most the
    record being written.
    """

    def __init__(self, filename: str = "metrics.jsonl") -> None:
        self.filename = filename
        self.handle = None

    def open(self, log_dir: Path, header: dict) -> None:
        self.handle = open(log_dir / self.filename, "a", encoding="utf-8")
        self.write({"header": header})

    def write(self, record: dict) -> None:
        encoded = {key: encode_value(value) for key, value in record.items()}
        self.handle.write(json.dumps(encoded) + "\n")
        self.handle.flush()

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None


class CSVSink(Sink):
    """``metrics.csv``: one row per logged step; columns are fixed by the first record."""

    def __init__(self, filename: str = "metrics.csv") -> None:
        self.filename = filename
        self.handle = None
        self.writer = None

    def open(self, log_dir: Path, header: dict) -> None:
        path = log_dir / self.filename
        self.existing = path.exists() and path.stat().st_size > 0
        self.handle = open(path, "a", newline="", encoding="utf-8")

    def write(self, record: dict) -> None:
        if self.writer is None:
            self.writer = csv.DictWriter(
                self.handle, fieldnames=list(record), extrasaction="ignore"
            )
            if not self.existing:
                self.writer.writeheader()
        self.writer.writerow(record)
        self.handle.flush()

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None


class TensorBoardSink(Sink):
    """TensorBoard event files in the log folder (needs ``pip install gradlab[tensorboard]``)."""

    def open(self, log_dir: Path, header: dict) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as error:
            raise GradlabError(
                "sinks=['tensorboard'] needs the tensorboard package; install gradlab[tensorboard]"
            ) from error
        self.writer = SummaryWriter(log_dir=str(log_dir))
        self.writer.add_text("gradlab/header", json.dumps(header))

    def write(self, record: dict) -> None:
        step = record["step"]
        for key, value in record.items():
            if key != "step" and isinstance(value, (int, float)):
                self.writer.add_scalar(key, value, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


SINKS = {"jsonl": JSONLSink, "csv": CSVSink, "tensorboard": TensorBoardSink}
"""Sink classes by name (``Monitor(sinks=["jsonl", "csv"])``)."""


def read_jsonl(path: str | Path) -> tuple[list[dict], list[dict]]:
    """``(headers, records)`` of a ``metrics.jsonl`` file; NaN/infinity strings decoded."""
    headers, records = [], []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        if "header" in record:
            headers.append(record["header"])
        else:
            records.append({key: decode_value(value) for key, value in record.items()})
    return headers, records
