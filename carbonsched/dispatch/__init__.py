"""Dispatch: the transactional outbox and its reconcile loop (:mod:`carbonsched.dispatch.outbox`).

The backends (Slurm, Kubernetes) live in :mod:`carbonsched.adapters.dispatch`.
"""
