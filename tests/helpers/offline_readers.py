"""Read back what W&B (offline) and MLflow (local store) recorded, without gradlab's code.

W&B's offline run is a ``run-<id>.wandb`` transaction log: LevelDB's log format (32 KiB blocks,
records framed by ``crc32, length, type``) after a 7-byte ``:W&B`` header, each record a
``wandb_internal_pb2.Record`` protobuf. The reader below follows that format; it is
independent of the sinks under test.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

BLOCK = 32 * 1024
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def wandb_records(path: Path):
    data = path.read_bytes()
    ident, _magic, _version = struct.unpack("<4sHB", data[:7])
    assert ident == b":W&B", f"{path} is not a W&B transaction log"
    position, pending = 7, b""
    while position + 7 <= len(data):
        left = BLOCK - position % BLOCK
        if left < 7:  # a block's tail too short for a record header is padding
            position += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[position : position + 7])
        if length == 0 and kind == 0:
            position += left
            continue
        chunk = data[position + 7 : position + 7 + length]
        position += 7 + length
        if kind == FULL:
            yield chunk
        elif kind == FIRST:
            pending = chunk
        elif kind == MIDDLE:
            pending += chunk
        elif kind == LAST:
            yield pending + chunk
            pending = b""


def wandb_offline_history(root: Path) -> list[dict]:
    """History rows of the single offline run under ``root`` (keys to decoded JSON values).

    Call it after the run finished. W&B's service may still hold the end of the log in its
    buffer after ``finish()`` returns; shutting the service down (``wandb.teardown()``, what
    the end of a script does) writes it out.
    """
    import wandb
    from wandb.proto import wandb_internal_pb2

    wandb.teardown()

    runs = sorted(Path(root).rglob("offline-run-*/run-*.wandb"))
    assert len(runs) == 1, f"expected one offline W&B run under {root}, found {runs}"
    rows = []
    for raw in wandb_records(runs[0]):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(raw)
        if record.WhichOneof("record_type") == "history":
            rows.append(
                {
                    item.key or "/".join(item.nested_key): json.loads(item.value_json)
                    for item in record.history.item
                }
            )
    return rows


def mlflow_history(run_id: str, key: str) -> list[tuple[int, float]]:
    """``[(step, value), ...]`` of one metric, from MLflow's own client."""
    from mlflow.tracking import MlflowClient

    history = MlflowClient().get_metric_history(run_id, key)
    return sorted((metric.step, metric.value) for metric in history)
