"""A client built at test time from the Carbon Aware SDK's published OpenAPI document.

The SDK's own clients are generated from this document (openapi-generator); a Python generator
(openapi-python-client 0.29) pins httpx < 0.29 and typer < 0.28, older than the project's lock,
so this small generic client reads the document instead and does what a generated client does:
one call per ``operationId``; only the document's parameter names (an unknown or missing
required one is a ``TypeError`` before anything is sent); query parameters serialized as the
document says (arrays exploded as repeated ``name=value``, ``date-time`` as ISO 8601 with its
offset); request bodies checked against the operation's request schema; and every response
checked: its status must be one the document lists for the operation, and its body must match
the schema of that status (OpenAPI 3.0 ``nullable`` and ``additionalProperties: false``
honoured, formats ``date-time``, ``int32``, ``double`` and .NET ``time-span`` checked).

The document is read by path (``CARBONSCHED_SDK_OPENAPI``, default
``../shared/specs/carbon-aware-sdk/openapi-v1.5.json`` beside the project) and never copied.
"""

from __future__ import annotations

import copy
import json
import os
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import jsonschema

ROOT = Path(__file__).resolve().parents[2]
SPEC_ENV = "CARBONSCHED_SDK_OPENAPI"


def spec_path() -> Path:
    """The SDK's OpenAPI document (``$CARBONSCHED_SDK_OPENAPI`` or ``../shared/specs/...``)."""
    return Path(os.environ.get(SPEC_ENV, ROOT.parent / "shared" / "specs" / "carbon-aware-sdk"
                               / "openapi-v1.5.json"))


_TIME_SPAN = re.compile(r"-?(\d+\.)?\d{1,2}:\d{2}:\d{2}(\.\d{1,7})?")


def _date_time(v: object) -> bool:
    if not isinstance(v, str):
        return True
    try:
        t = datetime.fromisoformat(v.replace("Z", "+00:00"))
    except ValueError:
        return False
    return t.tzinfo is not None  # the SDK writes DateTimeOffset: always with an offset


FORMATS = jsonschema.FormatChecker(formats=())
FORMATS.checks("date-time")(_date_time)
FORMATS.checks("time-span")(lambda v: not isinstance(v, str) or bool(_TIME_SPAN.fullmatch(v)))
FORMATS.checks("int32")(lambda v: not isinstance(v, int) or -2**31 <= v < 2**31)
FORMATS.checks("double")(lambda v: not isinstance(v, float) or v == v)  # not NaN


def json_schema(node: Any) -> Any:
    """An OpenAPI 3.0 schema as JSON Schema: ``nullable: true`` becomes a ``null`` type."""
    if isinstance(node, list):
        return [json_schema(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: json_schema(v) for k, v in node.items() if k not in ("nullable", "example")}
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    return out


@dataclass
class SdkResponse:
    """What a call returned: status, the JSON body (``None`` when empty), headers."""

    status: int
    body: Any
    headers: httpx.Headers
    operation: str


class SdkClient:
    """Calls the operations of the SDK's document against ``base_url``.

    Parameters
    ----------
    base_url
        The server's root URL.
    headers
        Headers sent with every call (what a reverse proxy in front would add).
    spec
        The document's path (default :func:`spec_path`).
    """

    def __init__(self, base_url: str, headers: dict[str, str] | None = None,
                 spec: Path | None = None) -> None:
        self.doc = json.loads((spec or spec_path()).read_text())
        self.ops: dict[str, tuple[str, str, dict[str, Any]]] = {
            op["operationId"]: (method.upper(), path, op)
            for path, item in self.doc["paths"].items() for method, op in item.items()}
        self.http = httpx.Client(base_url=base_url, headers=headers or {}, timeout=120)
        components = json_schema(self.doc.get("components", {}))
        self._root = {"components": components}

    def close(self) -> None:
        """Close the connection pool."""
        self.http.close()

    def schema(self, node: dict[str, Any]) -> dict[str, Any]:
        """A response or request schema, resolvable against the document's components."""
        return {**copy.deepcopy(self._root), **json_schema(node)}

    def validate(self, instance: Any, node: dict[str, Any], what: str) -> None:
        """Check ``instance`` against an OpenAPI schema node (AssertionError naming ``what``)."""
        errors = sorted(jsonschema.Draft4Validator(self.schema(node), format_checker=FORMATS)
                        .iter_errors(instance), key=lambda e: list(e.absolute_path))
        assert not errors, (f"{what} breaks the SDK's schema: " + "; ".join(
            f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:5]))

    @staticmethod
    def _serialize(name: str, schema: dict[str, Any], value: Any) -> list[tuple[str, str]]:
        if schema.get("type") == "array":
            return [p for v in value for p in SdkClient._serialize(name, schema["items"], v)]
        if isinstance(value, datetime):
            return [(name, value.isoformat())]
        if schema.get("type") == "integer":
            return [(name, str(int(value)))]
        return [(name, str(value))]

    def call(self, operation_id: str, body: Any = None, **params: Any) -> SdkResponse:
        """Call one operation with the document's parameter names and check the answer.

        Raises
        ------
        TypeError
            A parameter the operation does not have, a missing required one, or a body for an
            operation without one.
        AssertionError
            A status the document does not list for the operation, or a body off its schema.
        """
        method, path, op = self.ops[operation_id]
        declared = {p["name"]: p for p in op.get("parameters", [])}
        unknown = sorted(set(params) - set(declared))
        if unknown:
            raise TypeError(f"{operation_id} has no parameter(s) {unknown}; it has "
                            f"{sorted(declared)}")
        missing = [n for n, p in declared.items() if p.get("required") and n not in params]
        if missing:
            raise TypeError(f"{operation_id} needs {missing}")
        query: list[tuple[str, str]] = []
        for name, value in params.items():
            if value is not None:
                query += self._serialize(name, declared[name]["schema"], value)
        kw: dict[str, Any] = {"params": query}
        if body is not None:
            if "requestBody" not in op:
                raise TypeError(f"{operation_id} takes no body")
            self.validate(body, op["requestBody"]["content"]["application/json"]["schema"],
                          f"the request body of {operation_id}")
            kw["json"] = body
        r = self.http.request(method, path, **kw)
        documented = op["responses"].get(str(r.status_code))
        assert documented is not None, (
            f"{operation_id} answered {r.status_code}, which the SDK's document does not list "
            f"({sorted(op['responses'])}): {r.text[:500]}")
        content = documented.get("content")
        if not content:
            assert r.content == b"", f"{operation_id} {r.status_code} has a body: {r.text[:300]}"
            return SdkResponse(r.status_code, None, r.headers, operation_id)
        ctype = r.headers.get("content-type", "").split(";")[0].strip()
        assert ctype in {c.split(";")[0] for c in content}, (
            f"{operation_id} {r.status_code} answered content-type {ctype!r}")
        data = r.json()
        self.validate(data, content["application/json"]["schema"],
                      f"{operation_id}'s {r.status_code} body")
        return SdkResponse(r.status_code, data, r.headers, operation_id)
