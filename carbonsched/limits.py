"""Limits on what carbonsched accepts as input, each with the reason for its value.

One place for the bounds that more than one stage checks: the job schema
(:mod:`carbonsched.workload.schema`, which every job entry point uses), the domain objects
(:class:`carbonsched.domain.Job`), the catalog loader, and the store's column widths.
"""

from __future__ import annotations

MAX_JOB_GPUS = 100_000
"""Largest gang accepted (far above any real job; keeps GPU sums exact in int64). [GPUs]"""
MAX_DURATION_HOURS = 24 * 366
"""Longest job accepted (a year; the plan's horizon is at most a week). [h]"""
MAX_DURATION_MINUTES = 60 * MAX_DURATION_HOURS
"""The same limit in minutes. [min]"""
MIN_DURATION_HOURS = 1 / 60
"""Shortest job, and the step of ``duration_hours``: plans count whole minutes
(``Job.duration_minutes`` >= 1), so an hour value is a whole number of minutes. [h]"""
MAX_POWER_PER_GPU_KW = 10.0
"""Largest IT power per GPU accepted (board plus server share; an H100 SXM is about 1.2). [kW]"""
MAX_PIECES = 24
"""Most pieces a preemptible job may be split into (``Job.max_pieces``). [-]"""
MAX_CHECKPOINT_OVERHEAD_MINUTES = 24 * 60
"""Longest checkpoint/resume overhead accepted (a day). [min]"""

MAX_ID_CHARS = 200
"""Longest job id: the store's ``job_id`` columns (``String(200)``). [characters]"""
MAX_NAME_CHARS = 100
"""Longest site or area id (and tenant): the store's ``site`` and ``area`` columns
(``String(100)``). [characters]"""
MAX_GPU_TYPE_CHARS = 40
"""Longest GPU type name: the store's ``gpu_type`` columns (``String(40)``). [characters]"""
MAX_ALLOWED_SITES = 200
"""Most site ids in a job's ``allowed_sites`` (the largest shipped catalog has far fewer). [-]"""

EARLIEST_YEAR = 1970
"""First calendar year of a timestamp carbonsched accepts (the Unix epoch). [year]"""
LATEST_YEAR = 2200
"""Last calendar year accepted: inside pandas' nanosecond range (1677-2262), with room for a
job's duration and a plan's horizon after it. [year]"""
TIME_PATTERN = (r"^(19[7-9][0-9]|2[01][0-9][0-9]|2200)-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
                r"T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?"
                r"(Z|[+-](0[0-9]|1[0-3]):[0-5][0-9])$")
"""An RFC 3339 date-time with an offset in the years EARLIEST_YEAR..LATEST_YEAR, as the OpenAPI
document states it (``pattern`` beside ``format: date-time``) for every time the API reads."""
TEXT_PATTERN = (r"^[^\x00-\x1f]*"
                r"[^\x00-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
                r"[^\x00-\x1f]*$")
"""A text field of a job as the OpenAPI document states it: no control character, and not blank
(at least one character that is not white space as :meth:`str.strip` sees it; a blank value is
an absent one, :func:`carbonsched.workload.schema.absent`)."""
