#!/usr/bin/env python3
"""Generates crates/kubesim/schema/protobuf.json: the protobuf field numbers of the built-in kinds kubesim
serves, so it can read `application/vnd.kubernetes.protobuf` request bodies (what kubectl's typed commands,
`create namespace`, `create secret`, `auth can-i`..., send).

Input: the `generated.proto` files of the Kubernetes v1.36 API packages (k8s.io/api, k8s.io/apimachinery,
k8s.io/apiextensions-apiserver at the v0.36.x tags), laid out as their import paths under one directory:

    DIR/k8s.io/api/core/v1/generated.proto, DIR/k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto, ...
    python3 gen_protobuf.py DIR ../builtin.json ../protobuf.json

and ../builtin.json (made by gen_builtin_schema.py), which holds the JSON names of the same types: a proto
field's name is not always its JSON name (`Webhooks`/`webhooks`, `ref`/`$ref`,
`xKubernetesListType`/`x-kubernetes-list-type`), so each field is matched to the JSON field of the same
type whose name is equal when case and punctuation are ignored; the script fails when one does not match.

Output format (our own, loaded by crates/kubesim/src/protobuf/table.rs):
  {"kinds": {"group/version/Kind" (core: "v1/Kind"): message},
   "messages": {message: {field number: [json name, type, "r" if repeated]}}}
  json name "" = an embedded struct whose fields are written into the parent object.
  type = a scalar ("string", "bytes", "bool", "int32", "int64", "double"...), a message name, or
         "map:<key type>:<value type>". Messages are named like OpenAPI definitions
         (`io.k8s.api.core.v1.Namespace`). Messages with their own JSON form (Time, MicroTime, Quantity,
         IntOrString, RawExtension, FieldsV1, apiextensions JSON and the JSONSchemaProps* unions) are
         referred to but not listed: the decoder knows them.
"""

import json
import os
import re
import sys

ROOTS = {
    "v1/Namespace": "k8s.io.api.core.v1.Namespace",
    "v1/Secret": "k8s.io.api.core.v1.Secret",
    "v1/ConfigMap": "k8s.io.api.core.v1.ConfigMap",
    "v1/Event": "k8s.io.api.core.v1.Event",
    "events.k8s.io/v1/Event": "k8s.io.api.events.v1.Event",
    "coordination.k8s.io/v1/Lease": "k8s.io.api.coordination.v1.Lease",
    "batch/v1/Job": "k8s.io.api.batch.v1.Job",
    "apiextensions.k8s.io/v1/CustomResourceDefinition":
        "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
    "authorization.k8s.io/v1/SelfSubjectAccessReview": "k8s.io.api.authorization.v1.SelfSubjectAccessReview",
}

# Decoded by hand in protobuf/mod.rs (their JSON is not a plain object of their fields).
SPECIAL = {
    "k8s.io.apimachinery.pkg.apis.meta.v1.Time",
    "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime",
    "k8s.io.apimachinery.pkg.apis.meta.v1.Duration",
    "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1",
    "k8s.io.apimachinery.pkg.api.resource.Quantity",
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString",
    "k8s.io.apimachinery.pkg.runtime.RawExtension",
    "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSON",
    "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrBool",
    "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrArray",
    "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrStringArray",
}

SCALARS = {"string", "bytes", "bool", "int32", "int64", "uint32", "uint64", "double", "float"}

FIELD = re.compile(r"^(optional|repeated|required)\s+(\S+)\s+(\w+)\s*=\s*(\d+)\s*;")
MAP = re.compile(r"^map<\s*(\S+)\s*,\s*(\S+)\s*>\s+(\w+)\s*=\s*(\d+)\s*;")


def openapi_name(proto):
    """k8s.io.api.core.v1.X -> io.k8s.api.core.v1.X (the apiextensions package has a dash there)."""
    name = "io.k8s." + proto[len("k8s.io."):]
    return name.replace("apiextensions_apiserver", "apiextensions-apiserver")


def parse(path):
    """{message: [(number, proto name, type, repeated)]} of one file, types fully qualified."""
    package, messages, current = None, {}, None
    with open(path) as f:
        lines = [ln.split("//", 1)[0].strip() for ln in f]
    for ln in lines:
        if ln.startswith("package "):
            package = ln[len("package "):].rstrip(";").strip()
        elif ln.startswith("message "):
            current = package + "." + ln.split()[1]
            messages[current] = []
        elif ln == "}":
            current = None
        elif current and (m := FIELD.match(ln)):
            label, typ, name, num = m.groups()
            messages[current].append((int(num), name, qualify(typ, package), label == "repeated"))
        elif current and (m := MAP.match(ln)):
            k, v, name, num = m.groups()
            messages[current].append((int(num), name, "map:%s:%s" % (k, qualify(v, package)), False))
        elif current and ln:
            raise SystemExit("%s: cannot read %r" % (path, ln))
    return messages


def qualify(typ, package):
    if typ in SCALARS:
        return typ
    if typ.startswith("."):
        return typ[1:]
    return package + "." + typ


def squash(name):
    return re.sub(r"[^a-z0-9]", "", name.lower())


def main():
    src, builtin_path, out_path = sys.argv[1:4]
    messages = {}
    for root, _, files in os.walk(src):
        for f in files:
            if f.endswith(".proto"):
                messages.update(parse(os.path.join(root, f)))
    with open(builtin_path) as f:
        builtin = json.load(f)

    inline_parent = {}

    def json_names(proto):
        idx = builtin["named"].get(openapi_name(proto))
        if idx is None and proto in inline_parent:
            return json_names(inline_parent[proto])
        if idx is None:
            raise SystemExit("%s is not in builtin.json" % proto)
        fields = (builtin["types"][idx].get("m") or {}).get("f") or []
        return {squash(fl["n"]): fl["n"] for fl in fields}

    out, todo = {}, list(ROOTS.values())
    while todo:
        msg = todo.pop()
        if openapi_name(msg) in out or msg in SPECIAL:
            continue
        if msg not in messages:
            raise SystemExit("message %s not found in %s" % (msg, src))
        names = json_names(msg)
        fields = {}
        for num, name, typ, repeated in messages[msg]:
            json_name = names.get(squash(name))
            if json_name is None and typ in messages and all(
                    squash(n) in names for _, n, _, _ in messages[typ]):
                json_name = ""  # an embedded struct (`json:",inline"`): its fields are the parent's
                inline_parent[typ] = msg
            if json_name is None:
                raise SystemExit("%s.%s has no JSON field in builtin.json" % (msg, name))
            t = typ
            if typ.startswith("map:"):
                _, k, v = typ.split(":")
                t = "map:%s:%s" % (k, v if v in SCALARS else openapi_name(v))
                if v not in SCALARS:
                    todo.append(v)
            elif typ not in SCALARS:
                t = openapi_name(typ)
                todo.append(typ)
            fields[str(num)] = [json_name, t] + (["r"] if repeated else [])
        out[openapi_name(msg)] = fields
    doc = {"kinds": {k: openapi_name(v) for k, v in ROOTS.items()},
           "messages": dict(sorted(out.items()))}
    with open(out_path, "w") as f:
        json.dump(doc, f, separators=(",", ":"), sort_keys=True)
        f.write("\n")
    print("%d messages" % len(out))


if __name__ == "__main__":
    main()
