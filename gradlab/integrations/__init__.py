"""Adapters to the frameworks researchers already train with.

* :mod:`gradlab.integrations.lightning`: :class:`~gradlab.integrations.lightning.GradlabCallback`,
  the Monitor as a PyTorch Lightning callback (``pip install 'gradlab-ranking[lightning]'``).

The W&B and MLflow sinks live with the other sinks in :mod:`gradlab.monitor.sinks`
(``Monitor(sinks=["jsonl", "wandb"])``). Each adapter imports its framework only when used.
"""
