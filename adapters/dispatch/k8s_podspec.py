"""The pod template a job may give (``pod_template``): the types of its fields, checked.

A job gives either its container's fields (``image``, ``command``, ...) or a whole Kubernetes
PodTemplateSpec; :meth:`KubernetesAdapter.pod_spec
<carbonsched.adapters.dispatch.kubernetes.KubernetesAdapter.pod_spec>` builds every workload
kind's pod from it. :func:`pod_template_problem` is the one check of such a template, made by the
job schema (a bad template is refused where the job is given: workload file, API, template) and
again by the adapter before it builds a manifest (a template that reached the outbox some other
way is that unit's refusal, never an error that stops the dispatch pass).

What is checked:

- the template has ``spec`` and optionally ``metadata``; ``metadata`` holds only ``labels`` and
  ``annotations`` (maps of strings; label keys and values, and annotation keys, in Kubernetes'
  syntax), the two carbonsched merges into the pod's metadata (its own labels win on a clash);
  other ObjectMeta fields (``name``, ``namespace``, ...) are refused rather than dropped:
  carbonsched names and places each object;
- ``spec.containers`` is a non-empty list of objects with a ``name`` and an ``image``, and no
  container's ``image`` is a path (an OCI bundle, which only Slurm's ``--container`` runs);
- the JSON type of every field of the core/v1 ``PodSpec`` and ``Container`` (Kubernetes 1.30 to
  1.34, the fields of the PodSpec the JobSet CRD embeds; :data:`POD_SPEC`, :data:`CONTAINER`),
  and one level further for the fields carbonsched reads or merges and those most often written
  wrong: a container's ``env`` items, ``resources`` (``limits``/``requests`` maps of quantities),
  ``volumeMounts`` items; the pod's ``volumes`` (each with a ``name``), ``tolerations`` items,
  ``affinity``, ``nodeSelector``, ``resources`` and ``overhead``.

Not checked here: the *values* of fields (a toleration's ``operator``, a quantity's grammar, a
probe's contents) and fields this table does not know (a newer Kubernetes'): the adapter creates
every object with ``fieldValidation=Strict``, so the API server refuses those at submission, as
that unit's refusal (``rejected``). carbonsched ships no copy of the Kubernetes OpenAPI schema;
the tests check :data:`POD_SPEC` and :data:`CONTAINER` against the PodSpec of the real JobSet CRD
(``../shared/data/k8s-crds``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


@dataclass(frozen=True)
class Kind:
    """A JSON type a field may have: its words, an example of it and its test."""

    words: str
    example: str
    holds: Callable[[Any], bool] = field(compare=False, repr=False)


STRING = Kind("a string", '"value"', lambda v: isinstance(v, str))
INTEGER = Kind("an integer", "30", _is_int)
BOOLEAN = Kind("true or false", "true", lambda v: isinstance(v, bool))
OBJECT = Kind("an object", "{...}", lambda v: isinstance(v, Mapping))
OBJECTS = Kind("a list of objects", "[{...}]", lambda v: isinstance(v, list) and all(
    isinstance(x, Mapping) for x in v))
STRINGS = Kind("a list of strings", '["a", "b"]', lambda v: isinstance(v, list) and all(
    isinstance(x, str) for x in v))
STRING_MAP = Kind("a map of strings to strings", '{"disktype": "ssd"}',
                  lambda v: isinstance(v, Mapping) and all(
                      isinstance(k, str) and isinstance(x, str) for k, x in v.items()))
QUANTITIES = Kind("a map of resource names to quantities (strings or integers)",
                  '{"memory": "8Gi", "cpu": 4}',
                  lambda v: isinstance(v, Mapping) and all(
                      isinstance(k, str) and (isinstance(x, str) or _is_int(x))
                      for k, x in v.items()))


@dataclass(frozen=True)
class Field:
    """A field's type and, for an object or a list of objects, the fields of (each of) it."""

    kind: Kind
    fields: Mapping[str, Field] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    example: str = ""
    """An example for this field's fix (else its type's)."""


RESOURCES = Field(OBJECT, {"limits": Field(QUANTITIES), "requests": Field(QUANTITIES),
                           "claims": Field(OBJECTS)},
                  example='{"limits": {"memory": "8Gi"}, "requests": {"cpu": "4"}}')
"""``ResourceRequirements`` (a container's and, from Kubernetes 1.32, the pod's)."""

CONTAINER: dict[str, Field] = {
    "name": Field(STRING), "image": Field(STRING), "imagePullPolicy": Field(STRING),
    "command": Field(STRINGS), "args": Field(STRINGS), "workingDir": Field(STRING),
    "env": Field(OBJECTS, {"name": Field(STRING), "value": Field(STRING),
                           "valueFrom": Field(OBJECT)}, ("name",),
                 example='[{"name": "OMP_NUM_THREADS", "value": "8"}]'),
    "envFrom": Field(OBJECTS), "ports": Field(OBJECTS), "resources": RESOURCES,
    "resizePolicy": Field(OBJECTS), "restartPolicy": Field(STRING),
    "restartPolicyRules": Field(OBJECTS),
    "volumeMounts": Field(OBJECTS, {
        "name": Field(STRING), "mountPath": Field(STRING), "readOnly": Field(BOOLEAN),
        "subPath": Field(STRING), "subPathExpr": Field(STRING),
        "mountPropagation": Field(STRING), "recursiveReadOnly": Field(STRING)},
        ("name", "mountPath"), example='[{"name": "data", "mountPath": "/data"}]'),
    "volumeDevices": Field(OBJECTS), "livenessProbe": Field(OBJECT),
    "readinessProbe": Field(OBJECT), "startupProbe": Field(OBJECT),
    "lifecycle": Field(OBJECT), "securityContext": Field(OBJECT),
    "terminationMessagePath": Field(STRING), "terminationMessagePolicy": Field(STRING),
    "stdin": Field(BOOLEAN), "stdinOnce": Field(BOOLEAN), "tty": Field(BOOLEAN),
}
"""Every field of a core/v1 ``Container`` and its JSON type."""

POD_SPEC: dict[str, Field] = {
    "containers": Field(OBJECTS, CONTAINER, ("name", "image")),
    "initContainers": Field(OBJECTS, CONTAINER, ("name",)),
    "ephemeralContainers": Field(OBJECTS, CONTAINER, ("name",)),
    "volumes": Field(OBJECTS, {"name": Field(STRING)}, ("name",),
                     example='[{"name": "data", "persistentVolumeClaim": '
                     '{"claimName": "datasets"}}]'),
    "nodeSelector": Field(STRING_MAP),
    "tolerations": Field(OBJECTS, {
        "key": Field(STRING), "operator": Field(STRING), "value": Field(STRING),
        "effect": Field(STRING), "tolerationSeconds": Field(INTEGER)},
        example='[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]'),
    "affinity": Field(OBJECT, {"nodeAffinity": Field(OBJECT), "podAffinity": Field(OBJECT),
                               "podAntiAffinity": Field(OBJECT)},
                      example='{"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution"'
                      ': {...}}}'),
    "resources": RESOURCES, "overhead": Field(QUANTITIES),
    "activeDeadlineSeconds": Field(INTEGER), "terminationGracePeriodSeconds": Field(INTEGER),
    "automountServiceAccountToken": Field(BOOLEAN), "dnsConfig": Field(OBJECT),
    "dnsPolicy": Field(STRING), "enableServiceLinks": Field(BOOLEAN),
    "hostAliases": Field(OBJECTS), "hostIPC": Field(BOOLEAN), "hostNetwork": Field(BOOLEAN),
    "hostPID": Field(BOOLEAN), "hostUsers": Field(BOOLEAN), "hostname": Field(STRING),
    "hostnameOverride": Field(STRING), "imagePullSecrets": Field(OBJECTS),
    "nodeName": Field(STRING), "os": Field(OBJECT), "preemptionPolicy": Field(STRING),
    "priority": Field(INTEGER), "priorityClassName": Field(STRING),
    "readinessGates": Field(OBJECTS), "resourceClaims": Field(OBJECTS),
    "restartPolicy": Field(STRING), "runtimeClassName": Field(STRING),
    "schedulerName": Field(STRING), "schedulingGates": Field(OBJECTS, {"name": Field(STRING)},
                                                            ("name",)),
    "schedulingGroup": Field(OBJECT), "securityContext": Field(OBJECT),
    "serviceAccount": Field(STRING), "serviceAccountName": Field(STRING),
    "setHostnameAsFQDN": Field(BOOLEAN), "shareProcessNamespace": Field(BOOLEAN),
    "subdomain": Field(STRING), "topologySpreadConstraints": Field(OBJECTS),
}
"""Every field of a core/v1 ``PodSpec`` and its JSON type."""

BUNDLE_FIX = "give a registry image such as 'ghcr.io/org/train:1.4'"
"""How to fix an image given as a path where a pod pulls one."""

METADATA_KEYS = ("labels", "annotations")
"""The pod template's metadata carbonsched merges into the pod's (the rest is refused)."""

LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$")
LABEL_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$")
"""Label and annotation keys (``[prefix/]name``: a DNS subdomain of at most 253 characters,
a name of at most 63) and label values (at most 63, alphanumeric ends); Kubernetes, "Labels and
Selectors", "Syntax and character set"."""


def _show(value: Any) -> str:
    """``value`` as the messages quote it: its repr, a long one cut (a text with its length)."""
    text = repr(value)
    if len(text) <= 60:
        return text
    if isinstance(value, str):
        return f"{value[:40]!r}... ({len(value)} characters)"
    return text[:57] + "..."


def _key_problem(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    return bool((prefix and (len(prefix) > 253 or not LABEL_PREFIX.match(prefix)))
                or not LABEL_NAME.match(name))


def _fields_problem(obj: Mapping[str, Any], fields: Mapping[str, Field],
                    required: tuple[str, ...], path: str) -> tuple[str, str] | None:
    """The first problem of ``obj`` (at ``path``): a required field absent, a field's type."""
    for name in required:
        if not isinstance(obj.get(name), str) or not obj.get(name):
            return (f"the pod template's {path} has no {name}",
                    f"give it a {name} (a non-empty string)")
    for name, f in fields.items():
        if name in obj:
            why = _field_problem(obj[name], f, f"{path}.{name}")
            if why is not None:
                return why
    return None


def _field_problem(value: Any, f: Field, path: str) -> tuple[str, str] | None:
    """The first problem of ``value``, the field at ``path``, or of the fields it holds."""
    if not f.kind.holds(value):
        return (f"the pod template's {path} is {_show(value)}, not {f.kind.words}",
                f"give it as JSON like {f.example or f.kind.example}")
    if f.kind is OBJECTS:
        for i, item in enumerate(value):
            why = _fields_problem(item, f.fields, f.required, f"{path}[{i}]")
            if why is not None:
                return why
    elif f.kind is OBJECT:
        return _fields_problem(value, f.fields, f.required, path)
    return None


def _metadata_problem(meta: Any) -> tuple[str, str] | None:
    if not isinstance(meta, Mapping):
        return (f"the pod template's metadata is {_show(meta)}, not an object",
                'give {"labels": {...}, "annotations": {...}}')
    extra = sorted(set(meta) - set(METADATA_KEYS))
    if extra:
        return (f"the pod template's metadata has {', '.join(extra)}, which carbonsched does "
                "not use (it names and places each object itself)",
                "give only labels and annotations (merged into the pod's metadata)")
    for name in METADATA_KEYS:
        if name not in meta:
            continue
        example = ('{"team": "vision"}' if name == "labels"
                   else '{"example.com/owner": "vision-team"}')
        why = _field_problem(meta[name], Field(STRING_MAP, example=example), f"metadata.{name}")
        if why is not None:
            return why
        for key, val in meta[name].items():
            if _key_problem(key):
                return (f"the pod template's metadata.{name} key {key!r} is not a Kubernetes "
                        f"{name[:-1]} key",
                        "give [prefix/]name: a name of at most 63 characters of [A-Za-z0-9-_.] "
                        "with alphanumeric ends, an optional DNS subdomain prefix")
            if name == "labels" and not LABEL_VALUE.match(val):
                return (f"the pod template's label {key!r} has the value {_show(val)}, not a "
                        "Kubernetes label value",
                        "give at most 63 characters of [A-Za-z0-9-_.] with alphanumeric ends "
                        "(or an empty value)")
    return None


def pod_template_problem(template: Any) -> tuple[str, str] | None:
    """What is wrong with a job's ``pod_template``, or None when carbonsched can run it.

    The checks are the module docstring's.

    Parameters
    ----------
    template
        The job's ``pod_template`` as given (any JSON value).

    Returns
    -------
    tuple of (str, str) or None
        ``(problem, fix)``: what is wrong, naming the field's path in the template (e.g.
        ``"the pod template's spec.nodeSelector is ['zone-a'], not a map of strings to
        strings"``) and how to fix it; None when nothing is.
    """
    if not isinstance(template, Mapping):
        return (f"expected a PodTemplateSpec object, got {_show(template)}",
                'give {"spec": {"containers": [{"name": "job", "image": ...}]}}')
    extra = sorted(set(template) - {"metadata", "spec"})
    if extra:
        return (f"unknown key(s) {', '.join(extra)} in the pod template",
                "a PodTemplateSpec has metadata and spec")
    spec = template.get("spec")
    containers = spec.get("containers") if isinstance(spec, Mapping) else None
    if not isinstance(containers, list) or not containers or not all(
            isinstance(c, Mapping) and isinstance(c.get("name"), str)
            and isinstance(c.get("image"), str) for c in containers):
        return ("the pod template has no spec.containers list of {name, image}",
                "give spec.containers with at least one container with a name and an image "
                "(the one named 'job', else the first, gets the GPUs)")
    if "metadata" in template:
        why = _metadata_problem(template["metadata"])
        if why is not None:
            return why
    assert isinstance(spec, Mapping)
    why = _fields_problem(spec, POD_SPEC, (), "spec")
    if why is not None:
        return why
    for name in ("containers", "initContainers", "ephemeralContainers"):
        for i, c in enumerate(spec.get(name) or []):
            if str(c.get("image") or "").startswith("/"):
                return (f"the pod template's spec.{name}[{i}].image is {_show(c['image'])}, a "
                        "path (an OCI bundle, which only Slurm's --container runs), not an "
                        "image a pod can pull", BUNDLE_FIX)
    return None
