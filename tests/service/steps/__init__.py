"""Dispatch steps that the service tests configure as ``CARBONSCHED_DISPATCHER`` (imported by the
``carbonsched`` processes they start)."""
