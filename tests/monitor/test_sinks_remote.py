"""W&B (offline) and MLflow (local stores) sinks: the real libraries, read back by their files."""

import contextlib
import json
import math
import time

import pytest

from gradlab import GradlabError, Monitor
from gradlab.monitor import MLflowSink, WandbSink, every, read_jsonl
from tests.helpers.offline_readers import (
    mlflow_history,
    wandb_offline_history,
    wandb_records,
)
from tests.helpers.sink_data import TABLE, FixedTable, same
from tests.helpers.training import train

pytestmark = pytest.mark.usefixtures("offline_trackers")


def _run(log_dir, sink):
    # strict: a sink that cannot start fails here with its cause, not later as a missing run
    with Monitor(log_dir, quantities=[FixedTable(every(1))], sinks=["jsonl", sink],
                 strict=True) as monitor:  # fmt: skip
        train(monitor, steps=len(TABLE))
    _, records = read_jsonl(log_dir / "metrics.jsonl")
    assert [r["step"] for r in records] == [0, 1, 2]
    return records


@pytest.mark.slow
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


@pytest.mark.slow  # starts a W&B offline run (a service process): seconds
def test_wandb_sink_logs_into_the_active_run_and_leaves_it_open(tmp_path):
    wandb = pytest.importorskip("wandb")
    run = wandb.init(dir=str(tmp_path), project="gradlab-tests")
    sink = WandbSink()
    try:
        run.log({"user_metric": 1.0})
        assert sink.location(tmp_path / "gradlab") == str(tmp_path.resolve() / "gradlab" / "wandb")
        with Monitor(tmp_path / "gradlab", quantities=[FixedTable(every(1))],
                     sinks=["jsonl", sink], strict=True) as monitor:  # fmt: skip
            train(monitor, steps=len(TABLE))
            assert sink.location(tmp_path / "gradlab") == str(run.dir)  # the run's own folder
        assert wandb.run is run  # not finished by the sink
        run.log({"user_metric": 2.0})
    finally:
        run.finish()
    rows = wandb_offline_history(tmp_path)
    assert [row["user_metric"] for row in rows if "user_metric" in row] == [1.0, 2.0]
    assert [row["gradlab/step"] for row in rows if "gradlab/step" in row] == [0, 1, 2]
    assert math.isinf(next(row for row in rows if row.get("gradlab/step") == 2)["gradlab/value_a"])


@pytest.mark.slow
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


@pytest.mark.slow
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


# --- what else each remote sink records (mutation survivors) -----------------------------------


def _wandb_offline_records(root, kind):
    """The ``kind`` records (``"config"``, ``"metric"``) of the single offline run under root."""
    import wandb
    from wandb.proto import wandb_internal_pb2

    from tests.helpers.offline_readers import wandb_records

    wandb.teardown()
    (path,) = sorted(root.rglob("offline-run-*/run-*.wandb"))
    records = []
    for raw in wandb_records(path):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(raw)
        if record.WhichOneof("record_type") == kind:
            records.append(getattr(record, kind))
    return records


def _wandb_config(root):
    """The run's config: the one it started with (its run record), then each update."""
    updates = [record.config for record in _wandb_offline_records(root, "run")]
    updates += _wandb_offline_records(root, "config")
    config = {}
    for update in updates:
        config.update({item.key: json.loads(item.value_json) for item in update.update})
    return config


@pytest.mark.slow
@pytest.mark.parametrize("sink", ["WandbSink", "MLflowSink"])
def test_a_prefix_that_is_not_a_string_is_refused_in_full(sink):
    pytest.importorskip({"WandbSink": "wandb", "MLflowSink": "mlflow"}[sink])
    cls = {"WandbSink": WandbSink, "MLflowSink": MLflowSink}[sink]
    with pytest.raises(GradlabError) as raised:
        cls(prefix=3)
    assert str(raised.value) == "prefix must be a string; got 3"


@pytest.mark.slow  # starts its own W&B offline run: seconds; the next test starts one fast
def test_wandb_sink_stores_the_header_and_the_step_axis_of_its_own_run(tmp_path):
    pytest.importorskip("wandb")
    sink = WandbSink(project="gradlab-tests")
    _run(tmp_path, sink)
    sink.close()  # a second close (the Monitor closed it) does nothing
    headers, _ = read_jsonl(tmp_path / "metrics.jsonl")
    assert _wandb_config(tmp_path)["gradlab"] == headers[0]
    # the run names its gradlab folder: the parts of a resumed log are found by it
    assert _wandb_config(tmp_path)["gradlab_log_dir"] == str(tmp_path.resolve())
    metrics = {(m.name, m.glob_name): m.step_metric
               for m in _wandb_offline_records(tmp_path, "metric")}  # fmt: skip
    assert metrics[("", "gradlab/*")] == "gradlab/step"


@pytest.mark.slow  # seconds: left out of make test-fast
def test_wandb_sink_updates_the_header_of_an_active_run_each_time(tmp_path):
    wandb = pytest.importorskip("wandb")
    run = wandb.init(dir=str(tmp_path), project="gradlab-tests", config={"gradlab": "user's"})
    try:
        _run(tmp_path / "first", "wandb")
        _run(tmp_path / "second", "wandb")  # a changed header: allowed to replace the first
    finally:
        run.finish()
    headers, _ = read_jsonl(tmp_path / "second" / "metrics.jsonl")
    assert _wandb_config(tmp_path)["gradlab"] == headers[0]
    assert _wandb_config(tmp_path)["gradlab_log_dir"] == str((tmp_path / "second").resolve())


@pytest.mark.slow
def test_mlflow_sink_uses_its_tracking_uri_run_name_and_stores_the_header(tmp_path, monkeypatch):
    mlflow = pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    store = (tmp_path / "mlruns").as_uri()
    sink = MLflowSink(tracking_uri=store, experiment="gradlab-tests", run_name="gradlab-run")
    before = time.time()
    _run(tmp_path / "run", sink)
    after = time.time()
    sink.close()  # a second close does nothing
    assert mlflow.get_tracking_uri() == store
    (run,) = mlflow.search_runs(experiment_names=["gradlab-tests"], output_format="list")
    assert run.info.run_name == "gradlab-run" and run.info.status == "FINISHED"
    headers, _ = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert json.loads(run.data.tags["gradlab.header"]) == headers[0]
    # the run names its gradlab folder: the parts of a resumed log are found by it
    assert run.data.tags["gradlab.log_dir"] == str((tmp_path / "run").resolve())
    from mlflow.tracking import MlflowClient

    history = MlflowClient().get_metric_history(run.info.run_id, "gradlab/value_a")
    assert [m.step for m in history] == [0, 1, 2]
    assert all(before * 1000 - 1 <= m.timestamp <= after * 1000 + 1 for m in history)


@pytest.mark.parametrize("how", ["ended, then another started", "nested under it"])
def test_mlflow_sink_finishes_its_run_when_another_run_became_active(tmp_path, monkeypatch, how):
    # the user ends the sink's run and starts their own, or opens a nested run inside the
    # sink's: at close the active run is theirs, left open, and the sink's run is finished
    # (through the client when it was never ended)
    mlflow = pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    mlflow.set_tracking_uri((tmp_path / "mlruns").as_uri())
    mlflow.set_experiment("gradlab-tests")
    with Monitor(tmp_path / "run", quantities=[FixedTable(every(1))],
                 sinks=["jsonl", "mlflow"]) as monitor:  # fmt: skip
        train(monitor, steps=1)
        (owned,) = mlflow.search_runs(experiment_names=["gradlab-tests"], output_format="list")
        if how == "nested under it":
            user_run = mlflow.start_run(nested=True)
        else:
            mlflow.end_run()
            user_run = mlflow.start_run()
    assert mlflow.active_run().info.run_id == user_run.info.run_id  # left open
    mlflow.end_run()
    runs = mlflow.search_runs(experiment_names=["gradlab-tests"], output_format="list")
    assert {run.info.run_id: run.info.status for run in runs} == {
        owned.info.run_id: "FINISHED",
        user_run.info.run_id: "FINISHED",
    }
    while mlflow.active_run() is not None:  # the sink's run, were it still active
        mlflow.end_run()


class _TrainingError(Exception):
    pass


@pytest.mark.parametrize("raised", [False, True])
def test_an_mlflow_run_the_sink_started_ends_failed_when_training_raised(
    tmp_path, monkeypatch, raised
):
    # the run was marked FINISHED after an exception inside `with Monitor(...)`, where
    # MLflow's own `with start_run()` marks it FAILED
    mlflow = pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    sink = MLflowSink(tracking_uri=(tmp_path / "mlruns").as_uri(), experiment="gradlab-tests")
    with pytest.raises(_TrainingError) if raised else contextlib.nullcontext():
        with Monitor(tmp_path / "run", quantities=[FixedTable(every(1))],
                     sinks=["jsonl", sink]) as monitor:  # fmt: skip
            train(monitor, steps=1)
            if raised:
                raise _TrainingError
    (run,) = mlflow.search_runs(experiment_names=["gradlab-tests"], output_format="list")
    assert run.info.status == ("FAILED" if raised else "FINISHED")
    assert mlflow.active_run() is None


@pytest.mark.slow  # starts a W&B offline run (a service process): seconds
@pytest.mark.parametrize("raised", [False, True])
def test_a_wandb_run_the_sink_started_exits_with_1_when_training_raised(tmp_path, raised):
    wandb = pytest.importorskip("wandb")
    from wandb.proto import wandb_internal_pb2

    with pytest.raises(_TrainingError) if raised else contextlib.nullcontext():
        with Monitor(tmp_path, quantities=[FixedTable(every(1))],
                     sinks=["jsonl", WandbSink(project="gradlab-tests")]) as monitor:  # fmt: skip
            train(monitor, steps=1)
            if raised:
                raise _TrainingError
    wandb.teardown()  # the service writes the end of the log out
    (log,) = sorted(tmp_path.rglob("offline-run-*/run-*.wandb"))
    exits = []
    for raw in wandb_records(log):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(raw)
        if record.WhichOneof("record_type") == "exit":
            exits.append(record.exit.exit_code)
    assert exits == [1 if raised else 0]


def test_a_header_longer_than_an_mlflow_tag_is_split_over_tags_that_join_to_it(
    tmp_path, monkeypatch
):
    # MLflow cut the gradlab.header tag at its limit (8,000 characters): a header of 8,852
    # characters was stored as invalid JSON
    mlflow = pytest.importorskip("mlflow")
    from gradlab.monitor.sinks import MLFLOW_TAG_LENGTH

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    sink = MLflowSink(tracking_uri=(tmp_path / "mlruns").as_uri(), experiment="gradlab-tests")
    notes = {f"note_{i}": "x" * 100 for i in range(120)}  # about 13,000 characters
    with Monitor(tmp_path / "run", quantities=[FixedTable(every(1))], sinks=["jsonl", sink],
                 config=notes) as monitor:  # fmt: skip
        train(monitor, steps=1)
    (run,) = mlflow.search_runs(experiment_names=["gradlab-tests"], output_format="list")
    tags = run.data.tags
    parts = [tags["gradlab.header"]]
    while f"gradlab.header.{len(parts)}" in tags:
        parts.append(tags[f"gradlab.header.{len(parts)}"])
    headers, _ = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert len(parts) == -(-len(json.dumps(headers[0])) // MLFLOW_TAG_LENGTH) >= 3
    assert json.loads("".join(parts)) == headers[0]


def test_a_second_monitor_in_the_same_active_run_leaves_no_part_of_the_first_header(
    tmp_path, monkeypatch
):
    # a long first header left gradlab.header.1 and .2 behind a short second one: joined in
    # order, they were no JSON
    mlflow = pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    mlflow.set_tracking_uri((tmp_path / "mlruns").as_uri())
    mlflow.set_experiment("gradlab-tests")  # of this store, not one an earlier test made active
    with mlflow.start_run() as run:
        for name, config in (("long", {"long": "x" * 12000}), ("short", {"phase": "tune"})):
            with Monitor(tmp_path / name, quantities=[FixedTable(every(1))],
                         sinks=["jsonl", "mlflow"], config=config) as monitor:  # fmt: skip
                train(monitor, steps=1)
        tags = mlflow.get_run(run.info.run_id).data.tags
    assert sorted(name for name in tags if name.startswith("gradlab.header")) == [
        "gradlab.header"]
    headers, _ = read_jsonl(tmp_path / "short" / "metrics.jsonl")
    assert json.loads(tags["gradlab.header"]) == headers[0]


@pytest.mark.parametrize("first", ["raised", "finished"])
def test_a_sink_object_reused_after_a_failed_run_ends_the_next_by_its_own_outcome(
    tmp_path, monkeypatch, first
):
    # the failed flag of the first run stuck: a second, successful run was marked FAILED too
    mlflow = pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    sink = MLflowSink(tracking_uri=(tmp_path / "mlruns").as_uri(), experiment="gradlab-tests")
    with pytest.raises(_TrainingError) if first == "raised" else contextlib.nullcontext():
        with Monitor(tmp_path / "a", quantities=[FixedTable(every(1))],
                     sinks=["jsonl", sink]) as monitor:  # fmt: skip
            train(monitor, steps=1)
            if first == "raised":
                raise _TrainingError
    with Monitor(tmp_path / "b", quantities=[FixedTable(every(1))], sinks=["jsonl", sink]) as m:
        train(m, steps=1)
    runs = mlflow.search_runs(experiment_names=["gradlab-tests"], output_format="list",
                              order_by=["attributes.start_time ASC"])  # fmt: skip
    assert [run.info.status for run in runs] == [
        "FAILED" if first == "raised" else "FINISHED", "FINISHED"]


# --- options checked when the sink is made; a fault names the tracker's store -----------------

FAULT_TAIL = (
    "Training goes on: a record that cannot be written is dropped (monitor.dropped_records "
    "counts them per sink), the sink is tried again at every logged step and the first record "
    "it takes notes the steps it missed (dropped_steps); later faults of the same sink are not "
    "reported again (strict=True raises instead)"
)
"""The end of the warning of a sink's first fault."""


def test_a_wandb_option_that_wandb_init_lacks_is_refused_when_the_sink_is_made(tmp_path):
    # a misspelled option was passed to wandb.init at every logged step: one warning, then
    # "WandbSink dropped all ... records" at close
    import inspect

    wandb = pytest.importorskip("wandb")
    keywords = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    allowed = [name for name, parameter in inspect.signature(wandb.init).parameters.items()
               if parameter.kind in keywords]  # fmt: skip
    assert "project" in allowed
    with pytest.raises(GradlabError) as raised:
        WandbSink(projet="retrieval", mode="offline")
    assert str(raised.value) == (
        f"WandbSink options must be among wandb.init's keywords {allowed}; got ['projet']")
    assert WandbSink(project="retrieval", mode="offline").init_kwargs == {
        "project": "retrieval", "mode": "offline"}


def test_an_mlflow_tracking_uri_of_no_store_of_mlflows_is_refused_when_the_sink_is_made(
        tmp_path):
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    with pytest.raises(Exception) as mlflows:  # MLflow's own refusal, and the schemes it takes
        MlflowClient(tracking_uri="bogus://nowhere")
    schemes = ", ".join(scheme for scheme in mlflows.value.supported_uri_schemes if scheme)
    with pytest.raises(GradlabError) as raised:
        MLflowSink(tracking_uri="bogus://nowhere")
    assert str(raised.value) == (
        f"tracking_uri must be a local path or a URI of a scheme MLflow supports ({schemes}); "
        "got 'bogus://nowhere'")
    with pytest.raises(GradlabError) as raised:
        MLflowSink(tracking_uri=3)
    assert str(raised.value) == "tracking_uri must be a local path or a URI string; got 3"
    # a path and a store's URI are taken, and nothing is made before the run starts
    MLflowSink(tracking_uri=tmp_path / "mlruns")
    MLflowSink(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    MLflowSink(tracking_uri="http://127.0.0.1:5000")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("given", [False, True])
def test_a_wandb_run_that_cannot_start_is_reported_at_its_wandb_folder(tmp_path, monkeypatch,
                                                                       given):
    wandb = pytest.importorskip("wandb")

    def init(**options):
        raise ConnectionError("no route to the W&B server")

    monkeypatch.setattr(wandb, "init", init)
    options = {"dir": str(tmp_path / "elsewhere")} if given else {}
    folder = (tmp_path / "elsewhere") if given else (tmp_path / "run")
    with pytest.warns(RuntimeWarning) as caught, Monitor(
            tmp_path / "run", quantities=[FixedTable(every(1))],
            sinks=["jsonl", WandbSink(**options)]) as monitor:  # fmt: skip
        train(monitor, steps=1)
    faults = [w for w in caught if w.category is RuntimeWarning]
    assert str(faults[0].message) == (
        "gradlab.Monitor: could not write the record of step 0 (WandbSink "
        f"({str(folder.resolve() / 'wandb')!r}): no route to the W&B server). {FAULT_TAIL}")


@pytest.mark.slow
@pytest.mark.parametrize("given", [False, True])
def test_an_mlflow_fault_is_reported_at_the_tracking_uri_not_the_log_dir(tmp_path, monkeypatch,
                                                                         given):
    # the warning named the log_dir, which holds nothing of MLflow's
    pytest.importorskip("mlflow")
    pytest.importorskip("sqlalchemy")
    from mlflow.tracking import MlflowClient

    def log_batch(self, *args, **kwargs):
        raise ConnectionError("the store is down")

    monkeypatch.setattr(MlflowClient, "log_batch", log_batch)
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    if not given:  # MLflow's configured URI
        monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    sink = MLflowSink(tracking_uri=store if given else None, experiment="gradlab-tests")
    with pytest.warns(RuntimeWarning) as caught, Monitor(
            tmp_path / "run", quantities=[FixedTable(every(1))],
            sinks=["jsonl", sink]) as monitor:  # fmt: skip
        train(monitor, steps=1)
    faults = [w for w in caught if w.category is RuntimeWarning]  # not SQLAlchemy's own
    assert str(faults[0].message) == (
        f"gradlab.Monitor: could not write the record of step 0 (MLflowSink ({store!r}): the "
        f"store is down). {FAULT_TAIL}")


@pytest.mark.parametrize("given", [False, True])
def test_a_remote_sink_before_its_run_is_located_where_its_run_would_be(tmp_path, given):
    # W&B: <dir>/wandb (dir: log_dir unless given); MLflow: its tracking_uri, else MLflow's
    pytest.importorskip("wandb")
    mlflow = pytest.importorskip("mlflow")
    folder = tmp_path / "elsewhere"
    sink = WandbSink(dir=str(folder)) if given else WandbSink()
    assert sink.location(tmp_path / "run") == str(
        (folder if given else tmp_path / "run").resolve() / "wandb")
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    sink = MLflowSink(tracking_uri=store if given else None)
    assert sink.location(tmp_path / "run") == (store if given else mlflow.get_tracking_uri())


class Recorder:
    """Stands in for a W&B run or an MLflow client: records what a sink hands it."""

    def __init__(self):
        self.calls = []

    def log(self, values):
        self.calls.append(values)

    def log_batch(self, run_id, metrics):
        self.calls.append(metrics)


NOTE_ALONE = {"step": 3, "disabled": {"own": "step 3: raised in compute(): ValueError: x"}}
"""The Monitor's note of a disabled quantity, on a step where nothing else was logged."""


@pytest.mark.parametrize("name", ["WandbSink", "MLflowSink"])
def test_a_remote_sink_logs_nothing_of_a_record_without_a_number(name):
    # W&B got an entry holding gradlab/step alone, MLflow an empty batch
    sink = {"WandbSink": WandbSink, "MLflowSink": MLflowSink}[name]()
    recorder = Recorder()
    sink.run, sink.client, sink.run_id = recorder, recorder, "run"
    sink.write(NOTE_ALONE)
    assert recorder.calls == []
    sink.write({**NOTE_ALONE, "loss": 0.5})  # with a number: logged, the note left out
    assert len(recorder.calls) == 1
