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
sys.path.insert(0, str(ROOT / "scripts"))
from generated import write_or_check  # noqa: E402  (a sibling script)

SCHEMA = ROOT / "docs" / "plan-document.schema.json"


def main(argv: list[str]) -> int:
    """Write the schema, or with ``--check`` compare it; return the exit status."""
    text = json.dumps(plan_document_schema(), indent=2, sort_keys=True) + "\n"
    return write_or_check(SCHEMA, text, argv, "python3 scripts/plan_schema.py")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
