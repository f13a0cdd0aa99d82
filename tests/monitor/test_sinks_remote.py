"""W&B (offline) and MLflow (local stores) sinks: the real libraries, read back by their files."""

import math

import pytest

from gradlab import Monitor
from gradlab.monitor import MLflowSink, WandbSink, every, read_jsonl
from tests.integrations.offline_readers import (
    mlflow_history,
    offline_trackers,  # noqa: F401  (fixture)
    wandb_offline_history,
)
from tests.monitor.helpers import train
from tests.monitor.sink_data import TABLE, FixedTable, same

pytestmark = pytest.mark.usefixtures("offline_trackers")


def _run(log_dir, sink):
    with Monitor(log_dir, quantities=[FixedTable(every(1))], sinks=["jsonl", sink]) as monitor:
        train(monitor, steps=len(TABLE))
    _, records = read_jsonl(log_dir / "metrics.jsonl")
    assert [r["step"] for r in records] == [0, 1, 2]
    return records


def test_wandb_sink_starts_an_offline_run_with_the_jsonl_keys_and_steps(tmp_path):
    wandb = pytest.importorskip("wandb")
    records = _run(tmp_path, WandbSink(project="gradlab-tests"))
    assert wandb.run is None  # the run the sink started is finished
    rows = [row for row in wandb_offline_history(tmp_path) if "gradlab/step" in row]
    assert [row["gradlab/step"] for row in rows] == [r["step"] for r in records]
    for row, record, expected in zip(rows, records, TABLE, strict=True):
        logged = {key.removeprefix("gradlab/") for key in row if key.startswith("gradlab/")}
        assert logged == set(record)  # the same keys as metrics.jsonl
        for key, value in expected.items():
            assert same(row[f"gradlab/{key}"], value) and same(record[key], value)


def test_wandb_sink_logs_into_the_active_run_and_leaves_it_open(tmp_path):
    wandb = pytest.importorskip("wandb")
    run = wandb.init(dir=str(tmp_path), project="gradlab-tests")
    try:
        run.log({"user_metric": 1.0})
        _run(tmp_path / "gradlab", "wandb")
        assert wandb.run is run  # not finished by the sink
        run.log({"user_metric": 2.0})
    finally:
        run.finish()
    rows = wandb_offline_history(tmp_path)
    assert [row["user_metric"] for row in rows if "user_metric" in row] == [1.0, 2.0]
    assert [row["gradlab/step"] for row in rows if "gradlab/step" in row] == [0, 1, 2]
    assert math.isinf(next(row for row in rows if row.get("gradlab/step") == 2)["gradlab/value_a"])


def test_mlflow_sink_starts_a_run_against_the_configured_sqlite_store(tmp_path, monkeypatch):
    mlflow = pytest.importorskip("mlflow")
    pytest.importorskip("sqlalchemy")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    sink = MLflowSink(experiment="gradlab-tests")
    records = _run(tmp_path / "run", sink)
    assert mlflow.active_run() is None  # the run the sink started is ended
    run = mlflow.search_runs(experiment_names=["gradlab-tests"], output_format="list")[0]
    assert run.info.status == "FINISHED" and "gradlab.header" in run.data.tags
    assert set(run.data.metrics) == {f"gradlab/{key}" for key in TABLE[0]}
    for key in TABLE[0]:
        history = mlflow_history(run.info.run_id, f"gradlab/{key}")
        assert [step for step, _ in history] == [r["step"] for r in records]
        for (_, value), row in zip(history, TABLE, strict=True):
            # SQL stores keep NaN but store +-infinity as +-max float (MLflow's behaviour).
            expected = math.copysign(1.7976931348623157e308, row[key]) if math.isinf(row[key]) \
                else row[key]  # fmt: skip
            assert same(value, expected)


def test_mlflow_sink_round_trips_infinities_in_the_file_store(tmp_path, monkeypatch):
    mlflow = pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    mlflow.set_tracking_uri((tmp_path / "mlruns").as_uri())
    try:
        mlflow.set_experiment("gradlab-tests")
        with mlflow.start_run() as active:  # the sink logs into the active run
            _run(tmp_path / "run", "mlflow")
            assert mlflow.active_run().info.run_id == active.info.run_id
        for key in TABLE[0]:
            history = mlflow_history(active.info.run_id, f"gradlab/{key}")
            assert [step for step, _ in history] == [0, 1, 2]
            assert all(same(v, row[key]) for (_, v), row in zip(history, TABLE, strict=True))
    finally:
        mlflow.set_tracking_uri(None)
