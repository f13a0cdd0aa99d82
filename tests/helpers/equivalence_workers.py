"""Training steps of the equivalence tests that are not gradlab's (importable by spawn).

Each is a step as a user would write one, ``step(model, batch, probe)``, built from the public
pieces of :mod:`gradlab.equivalence`:

* :class:`LocalFirstGather`: an all-gather with gradient whose candidates are concatenated with
  this process's own rows first while the positives assume rank order, the mistake that
  sentence-transformers' pull request #3453 fixed (anchors trained towards other processes'
  candidates as if they were their positives);
* :class:`ScaledQueryRow`: the whole-batch loss with one query's gradient scaled (a planted
  bug at a known row);
* :class:`DefaultGather`: the whole loss in every process over queries and candidates
  gathered with ``gather_rows``' default (with gradient), as a user who trusts it writes;
* :class:`SleepingStep`, :class:`RaisingStep` and :class:`ExitingStep`: one process never
  reaches the collectives, raises, or dies without raising, for the time box;
  :class:`ReturnsVector`: a step that returns one loss per row (gradlab refuses it in every
  process); :class:`ReturnsVectorOnOneRank`: the same on one rank only, the others waiting
  for it in the averaging; :class:`CannotBeRestored`: a step that pickles here but raises
  when a process unpickles it (before any step runs);
  :class:`RaisingEverywhereStep` and :class:`RaisingLateStep`: every process raises, at once
  or one after the others, for the report of several failures.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import torch

from gradlab.equivalence import (
    cosine_scores,
    gather_rows,
    positive_mask,
    process_rank,
    score_objective,
)
from gradlab.errors import GradlabError


@dataclass
class LocalFirstGather:
    """Local loss (rows only) over candidates gathered with gradient, own rows first."""

    loss: object
    name: str = "LocalFirstGather()"

    def __call__(self, model, batch, probe):
        objective = score_objective(self.loss)
        queries = probe.queries(model(batch.query_inputs), batch.rows)
        candidates = probe.candidates(model(batch.candidate_inputs), batch.rows)
        parts = list(gather_rows(candidates, gradient=True).split(candidates.shape[0]))
        rank = process_rank()
        shuffled = torch.cat([parts[rank]] + [p for i, p in enumerate(parts) if i != rank])
        labels = gather_rows(batch.labels, gradient=False)  # rank order, as the code assumes
        scores = probe.scores(cosine_scores(queries, shuffled), batch.rows,
                              torch.arange(batch.size))  # fmt: skip
        loss = objective.row_loss(scores, positive_mask(batch.labels, labels))
        loss.backward()
        return loss.detach()


@dataclass
class ScaledQueryRow:
    """The whole-batch loss in one process, with query ``row``'s gradient times ``factor``."""

    loss: object
    row: int
    factor: float = 2.0

    def __call__(self, model, batch, probe):
        objective = score_objective(self.loss)
        queries = probe.queries(model(batch.query_inputs), batch.rows)
        mask = torch.ones(queries.shape[0], 1, dtype=queries.dtype)
        mask[self.row] = self.factor
        queries = queries * mask - (queries * (mask - 1)).detach()  # same value, row's grad x
        candidates = probe.candidates(model(batch.candidate_inputs), batch.rows)
        scores = probe.scores(cosine_scores(queries, candidates), batch.rows, batch.rows)
        loss = objective(scores, positive_mask(batch.labels, batch.labels))
        loss.backward()
        return loss.detach()


@dataclass
class DefaultGather:
    """The whole-batch loss in every process, over rows gathered by ``gather_rows(x)``."""

    loss: object
    name: str = "DefaultGather()"

    def __call__(self, model, batch, probe):
        objective = score_objective(self.loss)
        queries = probe.queries(model(batch.query_inputs), batch.rows)
        candidates = probe.candidates(model(batch.candidate_inputs), batch.rows)
        labels = gather_rows(batch.labels, gradient=False)
        everyone = torch.arange(batch.size)
        scores = probe.scores(cosine_scores(gather_rows(queries), gather_rows(candidates)),
                              everyone, everyone)  # fmt: skip
        loss = objective(scores, positive_mask(labels, labels))
        loss.backward()
        return loss.detach()


@dataclass
class SleepingStep:
    """Rank ``sleeper`` sleeps for ``seconds`` before its step: the others wait for it in the
    first collective."""

    loss: object
    sleeper: int = 1
    seconds: float = 600.0

    def __call__(self, model, batch, probe):
        if process_rank() == self.sleeper:
            time.sleep(self.seconds)
        queries = model(batch.query_inputs)
        everyone = gather_rows(queries, gradient=True)
        loss = everyone.square().sum()
        loss.backward()
        return loss.detach()


@dataclass
class RaisingStep:
    """Rank ``raiser`` raises a RuntimeError with ``message``."""

    raiser: int = 1
    message: str = "planted failure in the step"

    def __call__(self, model, batch, probe):
        if process_rank() == self.raiser:
            raise RuntimeError(self.message)
        loss = model(batch.query_inputs).sum()
        loss.backward()
        return loss.detach()


@dataclass
class RaisingEverywhereStep:
    """Every rank raises a RuntimeError naming its rank, after a barrier (all raise at once)."""

    def __call__(self, model, batch, probe):
        torch.distributed.barrier()
        raise RuntimeError(f"planted failure on rank {process_rank()}")


@dataclass
class RaisingLateStep:
    """After a barrier, rank 0 raises at once and every other rank ``delay`` seconds later:
    within the runner's grace period, well after its first look at the processes."""

    delay: float = 1.0

    def __call__(self, model, batch, probe):
        torch.distributed.barrier()
        if process_rank() != 0:
            time.sleep(self.delay)
        raise RuntimeError(f"planted failure on rank {process_rank()}")


@dataclass
class ExitingStep:
    """Rank ``leaver`` ends its process at once with exit ``code``, raising nothing."""

    leaver: int = 1
    code: int = 3

    def __call__(self, model, batch, probe):
        if process_rank() == self.leaver:
            os._exit(self.code)
        loss = model(batch.query_inputs).sum()
        loss.backward()
        return loss.detach()


@dataclass
class ReturnsVector:
    """Backward on the sum of the query embeddings, then a loss of ``rows`` values returned
    (one per row, not the step's one loss)."""

    rows: int = 3

    def __call__(self, model, batch, probe):
        model(batch.query_inputs).sum().backward()
        return torch.ones(self.rows)


@dataclass
class ReturnsVectorOnOneRank:
    """Backward on the sum of the query embeddings; rank ``refused`` returns ``rows`` values
    (one per row, refused by gradlab), every other rank its one loss and then waits for the
    refused rank in the gradients' average."""

    refused: int = 1
    rows: int = 3

    def __call__(self, model, batch, probe):
        loss = model(batch.query_inputs).sum()
        loss.backward()
        return torch.ones(self.rows) if process_rank() == self.refused else loss.detach()


@dataclass
class CannotBeRestored:
    """A step that pickles, but whose unpickling (in a spawned process) raises ``message``."""

    message: str = "this step cannot be restored in another process"

    def __call__(self, model, batch, probe):
        return None

    def __setstate__(self, state):
        raise RuntimeError(state["message"])


class UnrebuildableError(GradlabError):
    """A refusal whose __init__ takes two arguments: unpickling it calls __init__ with one."""

    def __init__(self, name, value):
        super().__init__(f"{name} is {value!r}")


class RaisesUnrebuildable:
    """A step that raises :class:`UnrebuildableError` (a subclass of a user's library)."""

    def __call__(self, model, batch, probe):
        raise UnrebuildableError("width", 3)


class WidthError(GradlabError):
    """A refusal whose __init__ formats its message: unpickled, it formats it twice."""

    def __init__(self, width):
        super().__init__(f"width must be even; got {width}")


class RaisesWidthError:
    """A step that raises :class:`WidthError`."""

    def __call__(self, model, batch, probe):
        raise WidthError(3)
