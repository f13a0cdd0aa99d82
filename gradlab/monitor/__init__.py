"""Instrumented training: the Monitor, its quantities, schedules and sinks."""

from gradlab.monitor.monitor import Monitor
from gradlab.monitor.quantities import (
    PRESETS,
    Decomposition,
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
from gradlab.monitor.schedules import dense_warmup, every, log_spaced, never
from gradlab.monitor.sinks import SINKS, CSVSink, JSONLSink, Sink, TensorBoardSink, read_jsonl

__all__ = [
    "PRESETS",
    "SINKS",
    "CSVSink",
    "Decomposition",
    "EmbeddingGradNorm",
    "EmbeddingNorms",
    "GradientAgreement",
    "GradientCounts",
    "JSONLSink",
    "Loss",
    "Monitor",
    "OperatingRegion",
    "Quantity",
    "RelaxationGap",
    "Sink",
    "TensorBoardSink",
    "WeightedGradientCounts",
    "dense_warmup",
    "every",
    "log_spaced",
    "never",
    "read_jsonl",
]
