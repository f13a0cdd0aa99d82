"""The README's Lightning example, run as written (W&B offline, MLflow on a local SQLite file).

metrics.jsonl, the W&B offline run and the MLflow store hold the same
quantities at the same steps. Each store is read back with its own library's files or client.
"""

import math
import re
from pathlib import Path

import pytest

from tests.helpers.offline_readers import (
    mlflow_history,
    wandb_offline_history,
)

pytest.importorskip("lightning")
pytest.importorskip("wandb")
pytest.importorskip("mlflow")
pytest.importorskip("sqlalchemy")

README = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"


def _example() -> str:
    text = README.read_text(encoding="utf-8")
    match = re.search(r"<!-- lightning-example -->\n```python\n(.*?)```", text, re.DOTALL)
    assert match, "README.md lost its Lightning example"
    code = match.group(1)
    assert len(code.strip().splitlines()) <= 10
    return code


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-6)


@pytest.mark.slow
@pytest.mark.usefixtures("offline_trackers")
def test_the_readme_example_logs_the_same_quantities_at_the_same_steps(tmp_path, monkeypatch):
    import mlflow
    import wandb

    from gradlab.monitor import read_jsonl
    from tests.helpers.lightning_module import LitRetrieval, loader

    monkeypatch.chdir(tmp_path)
    # As in a fresh script: W&B's service resolves relative folders against its own working
    # directory, so one started by an earlier test (elsewhere) must not be reused.
    wandb.teardown()
    namespace = {"LitRetrieval": LitRetrieval, "train_loader": loader(30)}
    try:
        exec(compile(_example(), str(README), "exec"), namespace)
    finally:
        wandb.finish()  # what the end of the script does: W&B then writes its offline file
        mlflow.set_tracking_uri(None)
    logs = sorted(tmp_path.glob("gradlab_logs/*/metrics.jsonl"))
    assert not (tmp_path / "gradlab").exists()  # a folder there would shadow the package
    assert len(logs) == 1, sorted(tmp_path.rglob("*.jsonl"))
    _, records = read_jsonl(logs[0])
    steps = [r["step"] for r in records]
    assert steps == [*range(10), 10, 20, 29]  # default schedule, and the last step at the end
    keys = sorted({key for r in records for key in r} - {"step"})
    assert {"loss", "p_seed", "gradient_count_mean", "degenerate_batches"} <= set(keys)

    rows = [row for row in wandb_offline_history(tmp_path) if "gradlab/loss" in row]
    assert [row["trainer/global_step"] for row in rows] == steps
    for row, record in zip(rows, records, strict=True):
        assert {k.removeprefix("gradlab/") for k in row if k.startswith("gradlab/")} == (
            set(record) - {"step"}
        )
        assert all(_same(row[f"gradlab/{key}"], record[key]) for key in record if key != "step")

    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    try:
        (run,) = mlflow.search_runs(search_all_experiments=True, output_format="list")
        assert {k for k in run.data.metrics if k.startswith("gradlab/")} == {
            f"gradlab/{key}" for key in keys
        }
        for key in keys:
            history = mlflow_history(run.info.run_id, f"gradlab/{key}")
            expected = [(r["step"], r[key]) for r in records if key in r]
            assert [step for step, _ in history] == [step for step, _ in expected]
            assert all(_same(a, b) for (_, a), (_, b) in zip(history, expected, strict=True))
    finally:
        mlflow.set_tracking_uri(None)
