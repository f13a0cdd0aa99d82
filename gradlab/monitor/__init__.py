"""Instrumented training: the Monitor, its quantities, schedules and sinks.

Modules: :mod:`~gradlab.monitor.monitor` (the :class:`Monitor`), :mod:`~gradlab.monitor.config`
(its options, :class:`MonitorConfig`), :mod:`~gradlab.monitor.quantity` (the base of a logged
quantity and what it may need), :mod:`~gradlab.monitor.quantities` and
:mod:`~gradlab.monitor.anatomy` (gradlab's quantities), :mod:`~gradlab.monitor.adapters` (how a
watched loss is read), :mod:`~gradlab.monitor.batch` (the step's shared values),
:mod:`~gradlab.monitor.run_folder`, :mod:`~gradlab.monitor.lock`,
:mod:`~gradlab.monitor.distributed`, :mod:`~gradlab.monitor.schedules` and
:mod:`~gradlab.monitor.sinks`.

A quantity of your own subclasses :class:`Quantity`, declares ``needs`` (names of
:data:`NEEDS`), ``keys`` and, to be drawn by ``gradlab plot``, ``plots`` (and
``warns_if_not_finite = True`` to be told when it logs NaN on finite input, and
``said_of_logged`` to warn once of a fact its logged numbers hide); pass an instance
in ``Monitor(quantities=[...])``; :func:`row_summaries` summarises per-query values as
gradlab's own quantities do (mean and 10/50/90 % quantiles). Nothing else changes:

    >>> import tempfile, torch, gradlab
    >>> class ScoreSpread(Quantity):
    ...     name = "score_spread"
    ...     needs = frozenset({"scores"})
    ...     keys = ("score_spread",)
    ...     def compute(self, batch):
    ...         return {"score_spread": batch.scores.std()}
    >>> with Monitor(tempfile.mkdtemp(), quantities=[ScoreSpread()]) as monitor:
    ...     loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
    ...     _ = loss_fn(torch.randn(8, 4), torch.arange(8) % 2)
    ...     record = monitor.step()
    >>> sorted(record)
    ['score_spread', 'step']

Constants: ``NEEDS`` (what a quantity may need, with its meaning), ``PRESETS`` (the quantity
classes of each preset), ``QUANTITIES`` (one quantity class per family, in the order
``gradlab plot`` draws them) and ``SINKS`` (sink classes by name):

    >>> sorted(NEEDS)[:3]
    ['descending_order', 'embedding_grad', 'embeddings']
    >>> [q.__name__ for q in PRESETS["cheap"]]
    ['Loss', 'EmbeddingNorms', 'EmbeddingGradNorm', 'DegenerateBatches']
    >>> QUANTITIES[0].__name__, sorted(SINKS)
    ('Loss', ['csv', 'jsonl', 'mlflow', 'tensorboard', 'wandb'])
"""

from gradlab.monitor.adapters import LossAdapter, adapt
from gradlab.monitor.anatomy import Anatomy
from gradlab.monitor.config import PRESETS, QUANTITIES, MonitorConfig
from gradlab.monitor.geometry import ChanceLevel, Geometry, Margins, Temperature
from gradlab.monitor.monitor import Monitor
from gradlab.monitor.quantities import (
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
    row_summaries,
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
from gradlab.monitor.suspects import Suspects

__all__ = [
    "NEEDS",
    "PRESETS",
    "QUANTITIES",
    "SINKS",
    "Anatomy",
    "CSVSink",
    "ChanceLevel",
    "Decomposition",
    "DegenerateBatches",
    "EmbeddingGradNorm",
    "EmbeddingNorms",
    "Geometry",
    "GradientAgreement",
    "GradientCounts",
    "JSONLSink",
    "Loss",
    "LossAdapter",
    "MLflowSink",
    "Margins",
    "Monitor",
    "MonitorConfig",
    "OperatingRegion",
    "Plot",
    "Quantity",
    "RelaxationGap",
    "Sink",
    "Suspects",
    "Temperature",
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
    "row_summaries",
]
