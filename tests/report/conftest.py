"""List the report tests' artefacts (screenshots, rendered reports) at the end of the run."""

from __future__ import annotations


def pytest_terminal_summary(terminalreporter):
    seen = []
    for kind in ("passed", "failed"):
        for rep in terminalreporter.getreports(kind):
            for key, value in getattr(rep, "user_properties", []):
                if key == "artefact" and (rep.nodeid, value) not in seen:
                    seen.append((rep.nodeid, value))
    if seen:
        terminalreporter.write_sep("-", "test artefacts")
        for nodeid, value in seen:
            terminalreporter.write_line(f"{nodeid}: {value}")
