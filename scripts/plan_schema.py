"""Write docs/plan-document.schema.json, the JSON Schema of the plan document.

Run (repository root)::

    python3 scripts/plan_schema.py            # rewrite the schema file
    python3 scripts/plan_schema.py --check    # exit 1 if the file is not what this writes

The schema comes from :class:`carbonsched.pipeline.document.PlanDocument`;
``tests/pipeline/test_document.py`` runs the check.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from carbonsched.pipeline.document import plan_document_schema

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "docs" / "plan-document.schema.json"


def main(argv: list[str]) -> int:
    """Write the schema, or with ``--check`` compare it; return the exit status."""
    text = json.dumps(plan_document_schema(), indent=2, sort_keys=True) + "\n"
    if "--check" in argv:
        if not SCHEMA.is_file() or SCHEMA.read_text() != text:
            sys.stderr.write(f"{SCHEMA} is not up to date: run python3 scripts/plan_schema.py\n")
            return 1
        return 0
    SCHEMA.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
