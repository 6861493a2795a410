"""The service: the run path, the daily cron, the rolling step and the placement book.

What ``carbonsched serve`` runs and the API calls, with the service's metrics.
"""
