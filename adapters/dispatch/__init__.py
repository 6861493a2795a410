"""Dispatch adapters: contract, Slurm, Kubernetes and the registry.

Driven by :mod:`carbonsched.dispatch.outbox`.

:mod:`.base` holds the contract, :mod:`.slurm` and :mod:`.kubernetes` the adapters, :mod:`.registry`
the explicit registry by backend kind.
"""
