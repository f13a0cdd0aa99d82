"""Is my large-batch trick the same gradient? An equivalence checker for training steps.

Ranking and contrastive losses improve with larger batches, so training code reaches them with
tricks: gradient caching, gradient accumulation, all-gather across processes (with or without
gradient), a local loss per process, a cross-batch memory. Each is either exactly the gradient
of the loss on the whole batch or it is not, and the difference is silent. This package runs
a reference step (the whole batch in one process) and a candidate step (the trick, in one or
several gloo processes) on the same model and batch, in float64, and compares ``dL/dtheta``,
``dL/dembeddings`` and ``dL/dscores``: a verdict with its tolerance, and where they differ.

Example:
    >>> import gradlab
    >>> from gradlab.equivalence import FullBatch, GradCache, compare_gradients, synthetic_problem
    >>> model, batch = synthetic_problem(batch_size=8)
    >>> loss = gradlab.SmoothAPLoss(tau=0.1)
    >>> compare_gradients(FullBatch(loss), GradCache(loss, chunk_size=2), model, batch).equivalent
    True
"""

from gradlab.equivalence.builtin import CANDIDATES, LOSSES, check_builtin
from gradlab.equivalence.collectives import gather_rows, process_rank, world_size
from gradlab.equivalence.compare import (
    QUANTITIES,
    EquivalenceResult,
    QuantityComparison,
    compare,
    compare_gradients,
    default_tolerance,
)
from gradlab.equivalence.objectives import ScoreObjective, score_objective
from gradlab.equivalence.problem import GradientProbe, PairedBatch, cosine_scores, positive_mask
from gradlab.equivalence.runner import Gradients, run_distributed, run_step
from gradlab.equivalence.sentence_transformers import CachedMNRL
from gradlab.equivalence.steps import (
    ENQUEUE,
    Accumulation,
    AllGather,
    CrossBatchMemory,
    FullBatch,
    GradCache,
    Step,
    rank_of_rows,
)
from gradlab.equivalence.synthetic import synthetic_problem

__all__ = [
    "CANDIDATES",
    "ENQUEUE",
    "LOSSES",
    "QUANTITIES",
    "Accumulation",
    "AllGather",
    "CachedMNRL",
    "CrossBatchMemory",
    "EquivalenceResult",
    "FullBatch",
    "GradCache",
    "GradientProbe",
    "Gradients",
    "PairedBatch",
    "QuantityComparison",
    "ScoreObjective",
    "Step",
    "check_builtin",
    "compare",
    "compare_gradients",
    "cosine_scores",
    "default_tolerance",
    "gather_rows",
    "positive_mask",
    "process_rank",
    "rank_of_rows",
    "run_distributed",
    "run_step",
    "score_objective",
    "synthetic_problem",
    "world_size",
]
