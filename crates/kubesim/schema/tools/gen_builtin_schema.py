#!/usr/bin/env python3
"""Generates crates/kubesim/schema/builtin.json: the structural schema of the built-in kinds kubesim serves.

Input: the Kubernetes v1.36 OpenAPI definitions as shipped by the PyPI package `kubernetes-validate`
(which vendors the definitions of every release with all `x-kubernetes-*` extensions):

    pip download --no-deps kubernetes-validate==1.37.0 -d /tmp/kv && cd /tmp/kv && unzip -q kubernetes_validate-*.whl
    python3 gen_builtin_schema.py \
        /tmp/kv/kubernetes_validate/kubernetes-json-schema/v1.36.0-local/_definitions.json \
        ../builtin.json

What the OpenAPI document does not carry is Go-level information, which the real server uses in two places:
the Go zero value of a type (the "live object" a create is diffed against for managedFields) and the
`omitempty`/pointer behaviour of the JSON round trip (`active: 0` disappears, `resources: {}` appears).
That information comes from the Go struct tags of k8s.io/api and is recorded in the tables at the bottom of
this file (`GO_*`), reviewed by hand against the Go sources and the recordings in crates/kubesim/testdata/.

The conversion of OpenAPI to a structural schema follows k8s.io/kube-openapi/pkg/schemaconv (the code the
API server uses to build its structured-merge-diff schema):
  - `x-kubernetes-list-type` atomic/set/map (+ `x-kubernetes-list-map-keys`) decides list semantics; without
    it a list is associative when `x-kubernetes-patch-strategy` is merge (keyed by the patch merge key, or a
    set without one), atomic otherwise;
  - `x-kubernetes-map-type: atomic` makes a map or struct atomic (granular otherwise);
  - int-or-string, Quantity, date-time and other formatted strings are untyped scalars;
  - an object without properties is a map (of its additionalProperties, or of arbitrary values).

Output format (our own, loaded by crates/kubesim/src/schema/load.rs):
  {"types": [T...], "named": {definition name: index}, "kinds": {"group/version/Kind": definition name}}
  T = {"s": scalar kind?, "l": {"e": elem, "t": "atomic"|"set"|"map", "k": [key...], "kd": {key: default}}?,
       "m": {"f": [F...], "e": elem?, "a": atomic?}?}
  F = {"n": json name, "t": type index, "g": go mode, "z": zero literal (g == "z"),
       "ps": SMP patch strategy?, "pk": SMP patch merge key?}
  go mode: "p" pointer+omitempty (null dropped), "e" slice/map+omitempty (null and empty dropped),
           "v" value scalar+omitempty (null and zero dropped), "z" never omitted (absent/null -> "z"),
           "s" value struct (never omitted; absent/null -> the struct's zero value), "t" omitzero (null dropped).
"""

import json
import sys

ROOTS = {
    "batch/v1/Job": "io.k8s.api.batch.v1.Job",
    "v1/Secret": "io.k8s.api.core.v1.Secret",
    "v1/ConfigMap": "io.k8s.api.core.v1.ConfigMap",
    "v1/Namespace": "io.k8s.api.core.v1.Namespace",
    "v1/Event": "io.k8s.api.core.v1.Event",
    "events.k8s.io/v1/Event": "io.k8s.api.events.v1.Event",
    "coordination.k8s.io/v1/Lease": "io.k8s.api.coordination.v1.Lease",
    "apiextensions.k8s.io/v1/CustomResourceDefinition":
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
    "authorization.k8s.io/v1/SelfSubjectAccessReview": "io.k8s.api.authorization.v1.SelfSubjectAccessReview",
    "v1/Status": "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
    "v1/Pod": "io.k8s.api.core.v1.Pod",
    "v1/ResourceQuota": "io.k8s.api.core.v1.ResourceQuota",
    "v1/ServiceAccount": "io.k8s.api.core.v1.ServiceAccount",
    "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy":
        "io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicy",
    "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding":
        "io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyBinding",
}
# Named types the Rust side looks up directly (custom resources embed ObjectMeta).
EXTRA_NAMED = [
    "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
    "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta",
]

UNTYPED = "__untyped_atomic_"
DEDUCED = "__untyped_deduced_"
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
RAW_EXTENSION = "io.k8s.apimachinery.pkg.runtime.RawExtension"
TIME_TYPES = {"io.k8s.apimachinery.pkg.apis.meta.v1.Time", "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime"}


def short(name):
    return name.rsplit(".", 1)[-1]


def first_type(s):
    t = s.get("type")
    if isinstance(t, list):
        t = [x for x in t if x != "null"]
        return t[0] if t else None
    return t


class Gen:
    def __init__(self, defs):
        self.defs = defs
        self.types = []
        self.named = {}
        self.pending = []
        self.shared = {}
        # The two shared untyped atoms of schemaconv.
        u = self.new_type()
        self.named[UNTYPED] = u
        d = self.new_type()
        self.named[DEDUCED] = d
        self.types[u] = {"s": "untyped", "l": {"e": u, "t": "atomic"}, "m": {"f": [], "e": u, "a": True}}
        self.types[d] = {"s": "untyped", "l": {"e": u, "t": "atomic"}, "m": {"f": [], "e": d}}

    def new_type(self):
        self.types.append(None)
        return len(self.types) - 1

    def ref(self, name):
        if name == RAW_EXTENSION:
            return self.named[UNTYPED]
        if name in self.named:
            return self.named[name]
        i = self.new_type()
        self.named[name] = i
        self.pending.append(name)
        return i

    def run(self, names):
        for n in names:
            self.ref(n)
        while self.pending:
            n = self.pending.pop()
            self.types[self.named[n]] = self.convert(self.defs[n], n)

    def prop_ref(self, s, owner):
        """schemaconv.makeRef: a $ref names a type; anything else is converted inline."""
        if "$ref" in s:
            return self.ref(s["$ref"].split("/")[-1])
        t = self.convert(s, owner)
        if not t:
            return self.named[UNTYPED]
        if list(t) == ["s"]:
            # Inline scalars carry no per-field information: share one type per scalar kind.
            key = "scalar:" + t["s"]
            if key not in self.shared:
                self.shared[key] = self.new_type()
                self.types[self.shared[key]] = t
            return self.shared[key]
        i = self.new_type()
        self.types[i] = t
        return i

    def convert(self, s, name):
        if name == QUANTITY or "oneOf" in s:
            # Quantity and IntOrString (oneOf string/number in this rendering of the spec).
            return {"s": "untyped"}
        t = first_type(s)
        if s.get("properties") is not None:
            return self.kind(s, name)
        if t == "object":
            ap = s.get("additionalProperties")
            elem = self.prop_ref(ap, name) if isinstance(ap, dict) else self.named[DEDUCED]
            m = {"f": [], "e": elem}
            if s.get("x-kubernetes-map-type") == "atomic":
                m["a"] = True
            return {"m": m}
        if t == "array":
            return {"l": self.array(s, name)}
        if t in ("integer", "number"):
            return {"s": "numeric"}
        if t == "boolean":
            return {"s": "boolean"}
        if t == "string":
            fmt = s.get("format", "")
            return {"s": "string" if fmt in ("", "byte") else "untyped"}
        # No type and no properties: arbitrary JSON (schemaconv.VisitArbitrary).
        return dict(self.types[self.named[DEDUCED]])

    def array(self, s, name):
        ext = s
        l = {"e": self.prop_ref(s.get("items", {}), name), "t": "atomic"}
        lt = ext.get("x-kubernetes-list-type")
        if lt is not None:
            if lt == "set":
                l["t"] = "set"
            elif lt == "map":
                l["t"] = "map"
                l["k"] = list(ext["x-kubernetes-list-map-keys"])
        else:
            ps = ext.get("x-kubernetes-patch-strategy")
            if ps in ("merge", "merge,retainKeys"):
                if "x-kubernetes-patch-merge-key" in ext:
                    l["t"] = "map"
                    l["k"] = [ext["x-kubernetes-patch-merge-key"]]
                else:
                    l["t"] = "set"
        return l

    def kind(self, s, name):
        required = set(s.get("required") or [])
        fields = []
        for fname, fs in sorted(s["properties"].items()):
            tid = self.prop_ref(fs, name)
            f = {"n": fname, "t": tid}
            f.update(go_mode(name, fname, fs, fname in required, self))
            ps = fs.get("x-kubernetes-patch-strategy")
            if ps:
                f["ps"] = ps
            pk = fs.get("x-kubernetes-patch-merge-key")
            if pk:
                f["pk"] = pk
            fields.append(f)
        m = {"f": fields}
        if s.get("x-kubernetes-preserve-unknown-fields") is True:
            m["e"] = self.named[DEDUCED]
        if s.get("x-kubernetes-map-type") == "atomic":
            m["a"] = True
        return {"m": m}


def field_kind(fs, gen):
    """What Go kind a property has: struct, time, quantity, intstr, list, map, string, numeric, boolean, any."""
    if "$ref" in fs:
        n = fs["$ref"].split("/")[-1]
        if n in TIME_TYPES:
            return "time"
        if n == QUANTITY:
            return "quantity"
        d = gen.defs[n]
        if "oneOf" in d:
            return "intstr"
        if d.get("properties") is not None:
            return "struct"
        t = first_type(d)
        if t == "object":
            return "map"
        if t == "array":
            return "list"
        return t or "any"
    t = first_type(fs)
    if t == "object":
        return "map" if fs.get("properties") is None else "struct"
    if t == "array":
        return "list"
    if t in ("integer", "number"):
        return "numeric"
    if t in ("boolean", "string"):
        return t
    return "any"


ZERO = {"string": "", "numeric": 0, "boolean": False, "quantity": "0", "intstr": 0}


def go_mode(owner, fname, fs, required, gen):
    key = short(owner) + "." + fname
    fkey = owner + "." + fname
    kind = field_kind(fs, gen)
    for table in (fkey, key):
        if table in GO_MODE:
            m = GO_MODE[table]
            if m[0] == "z":
                return {"g": "z", "z": m[1]}
            return {"g": m}
    if fname == "metadata" and kind == "struct":
        return {"g": "s"}
    if kind in ("list", "map"):
        return {"g": "z", "z": None} if required else {"g": "e"}
    if kind == "struct":
        return {"g": "s"} if required else {"g": "p"}
    if kind == "time":
        return {"g": "z", "z": None} if required else {"g": "p"}
    if kind in ("string",):
        return {"g": "z", "z": ""} if required else {"g": "v"}
    if kind in ("numeric", "boolean"):
        return {"g": "z", "z": ZERO[kind]} if required else {"g": "p"}
    if kind in ("quantity", "intstr"):
        return {"g": "z", "z": ZERO[kind]} if required else {"g": "p"}
    return {"g": "z", "z": None} if required else {"g": "p"}


# ---------------------------------------------------------------------------------------------------------
# Go-level facts (k8s.io/api struct tags) that the OpenAPI document does not carry.
# Keys are "<Type>.<field>" (short definition name) or the full definition name when ambiguous.
# Defaults applied when a field is not listed: optional strings are value types ("v"), optional integers
# and booleans are pointers ("p"), optional structs are pointers ("p"), optional lists and maps are "e",
# required fields are never omitted ("z" with the type's zero, or "s" for structs); `metadata` is a value.
GO_MODE = {}


def _set(mode, *names):
    for n in names:
        GO_MODE[n] = mode


# Value structs with `omitempty` (encoding/json never omits a struct: they always appear, as `{}` at least).
_set("s",
     "Job.spec", "Job.status", "PodTemplateSpec.spec", "Container.resources", "EphemeralContainer.resources",
     "io.k8s.api.core.v1.Event.source", "io.k8s.api.events.v1.Event.deprecatedSource",
     "io.k8s.api.events.v1.Event.regarding", "Namespace.spec", "Namespace.status", "Lease.spec",
     "CustomResourceDefinition.status", "CustomResourceDefinitionStatus.acceptedNames",
     "SelfSubjectAccessReview.status", "PersistentVolumeClaimSpec.resources",
     "Status.metadata",
     "Pod.spec", "Pod.status", "ContainerStatus.state", "ContainerStatus.lastState",
     "ResourceQuota.spec", "ResourceQuota.status",
     "ValidatingAdmissionPolicy.spec", "ValidatingAdmissionPolicy.status",
     "ValidatingAdmissionPolicyBinding.spec")

# metav1.Time / MicroTime value fields: a zero Time marshals as null and is never omitted...
_set(("z", None),
     "JobCondition.lastProbeTime", "JobCondition.lastTransitionTime", "NamespaceCondition.lastTransitionTime",
     "CustomResourceDefinitionCondition.lastTransitionTime",
     "io.k8s.api.core.v1.Event.firstTimestamp", "io.k8s.api.core.v1.Event.lastTimestamp",
     "io.k8s.api.core.v1.Event.eventTime", "io.k8s.api.core.v1.EventSeries.lastObservedTime",
     "io.k8s.api.events.v1.Event.deprecatedFirstTimestamp", "io.k8s.api.events.v1.Event.deprecatedLastTimestamp",
     "PodCondition.lastProbeTime", "PodCondition.lastTransitionTime", "ContainerStateRunning.startedAt",
     "ContainerStateTerminated.startedAt", "ContainerStateTerminated.finishedAt")
# ...except ObjectMeta.creationTimestamp, which is `omitzero` since v1.35 (absent from template metadata).
_set("t", "ObjectMeta.creationTimestamp")

# Optional but not omitempty (`+optional` without `omitempty`): present in the Go zero value.
_set(("z", ""), "io.k8s.api.core.v1.Event.reportingComponent", "io.k8s.api.core.v1.Event.reportingInstance",
     "PodFailurePolicyOnPodConditionsPattern.status")
# (PodFailurePolicyRule.onExitCodes/onPodConditions and OnExitCodesRequirement.containerName are
# `omitempty` in v1.36: the recorded podFailurePolicy Job has none of them as null.)
_set(("z", None), "GRPCAction.service",
     "TypedLocalObjectReference.apiGroup", "TypedObjectReference.apiGroup", "ProjectedVolumeSource.sources",
     "CustomResourceDefinitionStatus.conditions", "CustomResourceDefinitionStatus.storedVersions",
     "ScaleIOVolumeSource.secretRef")
_set(("z", "0"), "ResourceFieldSelector.divisor")

# Value-typed integers and booleans with `omitempty`: a zero is dropped by the JSON round trip.
_set("v",
     "JobStatus.active", "JobStatus.succeeded", "JobStatus.failed",
     "Container.stdin", "Container.stdinOnce", "Container.tty",
     "EphemeralContainer.stdin", "EphemeralContainer.stdinOnce", "EphemeralContainer.tty",
     "ContainerPort.hostPort", "VolumeMount.readOnly",
     "Probe.initialDelaySeconds", "Probe.timeoutSeconds", "Probe.periodSeconds", "Probe.successThreshold",
     "Probe.failureThreshold",
     "PodSpec.hostNetwork", "PodSpec.hostPID", "PodSpec.hostIPC",
     "ObjectMeta.generation",
     "io.k8s.api.core.v1.Event.count", "io.k8s.api.core.v1.EventSeries.count",
     "io.k8s.api.events.v1.Event.deprecatedCount",
     "GCEPersistentDiskVolumeSource.partition", "GCEPersistentDiskVolumeSource.readOnly",
     "AWSElasticBlockStoreVolumeSource.partition", "AWSElasticBlockStoreVolumeSource.readOnly",
     "NFSVolumeSource.readOnly", "ISCSIVolumeSource.readOnly", "ISCSIVolumeSource.chapAuthDiscovery",
     "ISCSIVolumeSource.chapAuthSession", "GlusterfsVolumeSource.readOnly",
     "PersistentVolumeClaimVolumeSource.readOnly", "RBDVolumeSource.readOnly", "FlexVolumeSource.readOnly",
     "CinderVolumeSource.readOnly", "CephFSVolumeSource.readOnly", "FCVolumeSource.readOnly",
     "AzureFileVolumeSource.readOnly", "QuobyteVolumeSource.readOnly", "PortworxVolumeSource.readOnly",
     "ScaleIOVolumeSource.readOnly", "ScaleIOVolumeSource.sslEnabled", "StorageOSVolumeSource.readOnly",
     "CustomResourceDefinitionSpec.preserveUnknownFields", "CustomResourceDefinitionVersion.deprecated",
     "CustomResourceColumnDefinition.priority", "CustomResourceDefinitionStatus.observedGeneration",
     "CustomResourceDefinitionCondition.observedGeneration",
     "JSONSchemaProps.exclusiveMaximum", "JSONSchemaProps.exclusiveMinimum", "JSONSchemaProps.uniqueItems",
     "JSONSchemaProps.nullable", "JSONSchemaProps.x-kubernetes-embedded-resource",
     "JSONSchemaProps.x-kubernetes-int-or-string",
     "SubjectAccessReviewStatus.denied", "StatusDetails.retryAfterSeconds", "Status.code",
     "PodStatus.observedGeneration", "PodCondition.observedGeneration", "ContainerStateTerminated.signal",
     "Condition.observedGeneration", "ValidatingAdmissionPolicyStatus.observedGeneration")

# Pointers to empty structs with `omitempty` (rendered as maps in the spec): `{}` survives the round
# trip (`subresources: {status: {}}` is how a CRD enables /status).
_set("p", "CustomResourceSubresources.status")

# Pointer strings with `omitempty`: an empty string survives the round trip.
_set("p",
     "JobSpec.managedBy", "JobSpec.completionMode", "JobSpec.podReplacementPolicy", "JobStatus.failedIndexes",
     "SuccessPolicyRule.succeededIndexes",
     "PodSpec.runtimeClassName", "PodSpec.hostnameOverride", "PodSpec.preemptionPolicy",
     "Container.restartPolicy", "EphemeralContainer.restartPolicy", "VolumeMount.mountPropagation",
     "VolumeMount.recursiveReadOnly", "SecurityContext.procMount", "PodSecurityContext.fsGroupChangePolicy",
     "PodSecurityContext.supplementalGroupsPolicy", "PodSecurityContext.seLinuxChangePolicy",
     "SeccompProfile.localhostProfile", "AppArmorProfile.localhostProfile",
     "WindowsSecurityContextOptions.gmsaCredentialSpecName", "WindowsSecurityContextOptions.gmsaCredentialSpec",
     "WindowsSecurityContextOptions.runAsUserName", "HostPathVolumeSource.type", "ISCSIVolumeSource.initiatorName",
     "AzureDiskVolumeSource.cachingMode", "AzureDiskVolumeSource.fsType", "AzureDiskVolumeSource.kind",
     "AzureDiskVolumeSource.readOnly", "CSIVolumeSource.fsType", "CSIVolumeSource.readOnly",
     "PersistentVolumeClaimSpec.storageClassName", "PersistentVolumeClaimSpec.volumeMode",
     "PersistentVolumeClaimSpec.volumeAttributesClassName", "TypedObjectReference.namespace",
     "ClusterTrustBundleProjection.name", "ClusterTrustBundleProjection.signerName",
     "PodResourceClaim.resourceClaimName", "PodResourceClaim.resourceClaimTemplateName",
     "PodDNSConfigOption.value", "Lifecycle.stopSignal", "TopologySpreadConstraint.nodeAffinityPolicy",
     "TopologySpreadConstraint.nodeTaintsPolicy", "LeaseSpec.holderIdentity", "LeaseSpec.strategy",
     "LeaseSpec.preferredHolder", "CustomResourceDefinitionVersion.deprecationWarning",
     "WebhookClientConfig.url", "ServiceReference.path", "CustomResourceSubresourceScale.labelSelectorPath",
     "ValidationRule.reason", "JSONSchemaProps.$ref", "JSONSchemaProps.x-kubernetes-list-type",
     "JSONSchemaProps.x-kubernetes-map-type", "ContainerRestartRule.exitCodes",
     "PodFailurePolicyOnExitCodesRequirement.containerName",
     "ValidatingAdmissionPolicySpec.failurePolicy", "MatchResources.matchPolicy", "Validation.reason",
     "NamedRuleWithOperations.scope", "ParamRef.parameterNotFoundAction", "ContainerStatus.stopSignal")

# Defaults of associative-list key fields (`+default=` in Go; lost in this rendering of the spec).
KEY_DEFAULTS = {("io.k8s.api.core.v1.ContainerPort", "protocol"): "TCP"}


def main():
    src, dst = sys.argv[1], sys.argv[2]
    defs = json.load(open(src))["$defs"]
    gen = Gen(defs)
    gen.run(list(ROOTS.values()) + EXTRA_NAMED)
    # Key defaults live on the list (schemaconv reads them from the element's field defaults).
    by_index = {v: k for k, v in gen.named.items()}
    for t in gen.types:
        l = t.get("l") if t else None
        if l and l.get("k"):
            elem = by_index.get(l["e"])
            kd = {k: KEY_DEFAULTS[(elem, k)] for k in l["k"] if (elem, k) in KEY_DEFAULTS}
            if kd:
                l["kd"] = kd
    unused = sorted(k for k in GO_MODE if not any(
        (short(n) + "." + f["n"] == k or n + "." + f["n"] == k)
        for n, i in gen.named.items() for f in (gen.types[i] or {}).get("m", {}).get("f", [])))
    if unused:
        sys.exit("GO_MODE entries that match no field: %s" % unused)
    out = {"types": gen.types, "named": {k: v for k, v in sorted(gen.named.items())}, "kinds": ROOTS}
    with open(dst, "w") as f:
        json.dump(out, f, separators=(",", ":"), sort_keys=True)
        f.write("\n")
    print("%d types, %d named" % (len(gen.types), len(gen.named)))


if __name__ == "__main__":
    main()
