"""Instrumented training: the Monitor, its quantities, schedules and sinks."""

from gradlab.monitor.adapters import LossAdapter, adapt
from gradlab.monitor.anatomy import Anatomy
from gradlab.monitor.config import MonitorConfig
from gradlab.monitor.monitor import Monitor
from gradlab.monitor.quantities import (
    PRESETS,
    QUANTITIES,
    Decomposition,
    DegenerateBatches,
    EmbeddingGradNorm,
    EmbeddingNorms,
    GradientAgreement,
    GradientCounts,
    Loss,
    OperatingRegion,
    RelaxationGap,
    WeightedGradientCounts,
)
from gradlab.monitor.quantity import NEEDS, Plot, Quantity
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
    "NEEDS",
    "PRESETS",
    "QUANTITIES",
    "SINKS",
    "Anatomy",
    "CSVSink",
    "Decomposition",
    "DegenerateBatches",
    "EmbeddingGradNorm",
    "EmbeddingNorms",
    "GradientAgreement",
    "GradientCounts",
    "JSONLSink",
    "Loss",
    "LossAdapter",
    "MLflowSink",
    "Monitor",
    "MonitorConfig",
    "OperatingRegion",
    "Plot",
    "Quantity",
    "RelaxationGap",
    "Sink",
    "TensorBoardSink",
    "WandbSink",
    "WeightedGradientCounts",
    "adapt",
    "default_schedule",
    "dense_warmup",
    "every",
    "log_spaced",
    "never",
    "read_jsonl",
    "read_segments",
]
