#!/usr/bin/python3
"""Checks Kubernetes manifests against the Kubernetes API's object schemas, client-side.

The schemas are those of Debian's python3-kubernetes, whose models are generated from the API's
OpenAPI definition: every field must be one the object's schema has, of the type it has there,
and every field the schema requires must be present. On top, what the API server would refuse in
a DaemonSet: a selector that does not match its pod template, a mount of no volume, and a
capability set other than the systemd unit's (scripts/flamebpf.service), which the two share but
for BPF and PERFMON, which SYS_ADMIN implies; and a container without the seccomp profile
(deploy/seccomp/flamebpf.json) as its Localhost profile, named as the node has it.

Usage: check_manifest.py MANIFEST.yaml [flamebpf.service [flamebpf.json]]
"""
import json
import os
import re
import sys

import yaml
from kubernetes import client

SCALARS = {
    "str": (str,),
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
    "object": (object,),
    "datetime": (str,),
    "date": (str,),
}


def model_class(name):
    klass = getattr(client.models, name, None)
    if klass is None:
        raise SystemExit(f"no schema named {name} in python3-kubernetes")
    return klass


def check(value, type_name, path, errors):
    """Appends to errors every way value differs from the schema of type_name."""
    if value is None:
        return
    list_of = re.fullmatch(r"list\[(.+)\]", type_name)
    dict_of = re.fullmatch(r"dict\(str, (.+)\)", type_name)
    if list_of:
        if not isinstance(value, list):
            errors.append(f"{path}: a list is expected, not {type(value).__name__}")
            return
        for index, item in enumerate(value):
            check(item, list_of.group(1), f"{path}[{index}]", errors)
    elif dict_of:
        if not isinstance(value, dict):
            errors.append(f"{path}: a map is expected, not {type(value).__name__}")
            return
        for key, item in value.items():
            check(item, dict_of.group(1), f"{path}.{key}", errors)
    elif type_name in SCALARS:
        accepted = SCALARS[type_name]
        if type_name in ("int", "float") and isinstance(value, bool):
            accepted = ()
        if not isinstance(value, accepted):
            errors.append(f"{path}: {type_name} is expected, not {type(value).__name__} {value!r}")
    else:
        klass = model_class(type_name)
        if not isinstance(value, dict):
            errors.append(f"{path}: an object ({type_name}) is expected, not {value!r}")
            return
        fields = {json_name: attribute for attribute, json_name in klass.attribute_map.items()}
        for key, item in value.items():
            if key not in fields:
                errors.append(f"{path}: {type_name} has no field {key!r}")
                continue
            check(item, klass.openapi_types[fields[key]], f"{path}.{key}", errors)
        # The models refuse a missing required field when built (client-side validation).
        for attribute, json_name in klass.attribute_map.items():
            if json_name in value:
                continue
            try:
                arguments = {a: _placeholder(klass.openapi_types[a]) for a in klass.attribute_map}
                arguments[attribute] = None
                klass(**arguments)
            except ValueError:
                errors.append(f"{path}: {type_name} requires {json_name!r}")


def _placeholder(type_name):
    if type_name.startswith("list["):
        return []
    if type_name.startswith("dict("):
        return {}
    return {"str": "x", "int": 0, "float": 0.0, "bool": False}.get(type_name, "x")


def kind_class(document):
    group_version = document.get("apiVersion", "")
    version = group_version.split("/")[-1]
    return f"{version.capitalize()}{document.get('kind', '')}"


def check_daemon_set(document, unit_capabilities, seccomp_profile, errors):
    spec = document["spec"]
    labels = spec["template"]["metadata"].get("labels", {})
    for key, value in spec["selector"].get("matchLabels", {}).items():
        if labels.get(key) != value:
            errors.append(f"DaemonSet: the selector's {key}={value} is not on the pod template")
    pod = spec["template"]["spec"]
    volumes = {volume["name"] for volume in pod.get("volumes", [])}
    for container in pod["containers"]:
        for mount in container.get("volumeMounts", []):
            if mount["name"] not in volumes:
                errors.append(f"container {container['name']}: mounts no volume {mount['name']!r}")
        if unit_capabilities is not None:
            added = set(container["securityContext"]["capabilities"]["add"])
            if added != unit_capabilities:
                errors.append(
                    f"container {container['name']}: capabilities {sorted(added)} are not the "
                    f"systemd unit's {sorted(unit_capabilities)}")
        if seccomp_profile is not None:
            wanted = {"type": "Localhost", "localhostProfile": os.path.basename(seccomp_profile)}
            given = container["securityContext"].get("seccompProfile")
            if given != wanted:
                errors.append(f"container {container['name']}: seccompProfile is {given}, not "
                              f"{wanted} (the node's copy of {seccomp_profile})")


def main():
    if len(sys.argv) not in (2, 3, 4):
        raise SystemExit(__doc__)
    unit_capabilities = None
    seccomp_profile = None
    if len(sys.argv) == 4:
        seccomp_profile = sys.argv[3]
        with open(seccomp_profile) as profile:
            rules = json.load(profile)["syscalls"]
        if not any(rule.get("action") == "SCMP_ACT_ALLOW" and rule.get("names") for rule in rules):
            raise SystemExit(f"{seccomp_profile} allows no system call")
    if len(sys.argv) >= 3:
        with open(sys.argv[2]) as unit:
            line = next(l for l in unit if l.startswith("CapabilityBoundingSet="))
        unit_capabilities = {c.removeprefix("CAP_") for c in line.split("=", 1)[1].split()}
        if "SYS_ADMIN" in unit_capabilities:
            unit_capabilities -= {"BPF", "PERFMON"}
    with open(sys.argv[1]) as manifest:
        documents = [d for d in yaml.safe_load_all(manifest) if d is not None]
    errors = []
    kinds = []
    for document in documents:
        name = kind_class(document)
        kinds.append(name)
        check(document, name, document.get("kind", "?"), errors)
        if name == "V1DaemonSet":
            check_daemon_set(document, unit_capabilities, seccomp_profile, errors)
    if "V1DaemonSet" not in kinds:
        errors.append("no DaemonSet in the manifest")
    for error in errors:
        print(f"{sys.argv[1]}: {error}", file=sys.stderr)
    if errors:
        sys.exit(1)
    print(f"{sys.argv[1]}: {', '.join(kinds)} match the Kubernetes API's schemas")


if __name__ == "__main__":
    main()
