"""Instrumented training: the Monitor, its quantities, schedules and sinks."""

from gradlab.monitor.monitor import Monitor
from gradlab.monitor.quantities import (
    PRESETS,
    Decomposition,
    DegenerateBatches,
    EmbeddingGradNorm,
    EmbeddingNorms,
    GradientAgreement,
    GradientCounts,
    Loss,
    OperatingRegion,
    Quantity,
    RelaxationGap,
    WeightedGradientCounts,
)
from gradlab.monitor.schedules import default_schedule, dense_warmup, every, log_spaced, never
from gradlab.monitor.sinks import (
    SINKS,
    CSVSink,
    JSONLSink,
    MLflowSink,
    Sink,
    TensorBoardSink,
    WandbSink,
    read_jsonl,
    read_segments,
)

__all__ = [
    "PRESETS",
    "SINKS",
    "CSVSink",
    "Decomposition",
    "DegenerateBatches",
    "EmbeddingGradNorm",
    "EmbeddingNorms",
    "GradientAgreement",
    "GradientCounts",
    "JSONLSink",
    "Loss",
    "MLflowSink",
    "Monitor",
    "OperatingRegion",
    "Quantity",
    "RelaxationGap",
    "Sink",
    "TensorBoardSink",
    "WandbSink",
    "WeightedGradientCounts",
    "default_schedule",
    "dense_warmup",
    "every",
    "log_spaced",
    "never",
    "read_jsonl",
    "read_segments",
]
