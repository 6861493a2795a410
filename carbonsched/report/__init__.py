"""Sustainability report: GHG Protocol Scope 2 (location- and market-based), SCI, savings.

``build_report(store, catalog, data_dir, date_from, date_to) -> Report`` builds the frames and
``render(report, fmt) -> bytes`` writes CSV, JSON, XLSX or HTML (``MEDIA_TYPES`` gives the HTTP
media type, for ``GET /v1/reports``). ``actual_runs(store, start, end)`` is the reader the
dispatch component fulfils (actual start and end per job).
"""

from carbonsched.report.build import Report, build_report
from carbonsched.report.inputs import actual_runs
from carbonsched.report.render import FORMATS, MEDIA_TYPES, read_csv_sections, render, to_dict

__all__ = ["FORMATS", "MEDIA_TYPES", "Report", "actual_runs", "build_report",
           "read_csv_sections", "render", "to_dict"]
