//! Renders a Job's nested values the way the real server prints them inside field errors.
//!
//! Validation runs on the *internal* Go types, and apimachinery renders a struct-valued `BadValue` with
//! `json.Marshal`. Internal types carry no json tags, so the output uses Go field names in Go field
//! order, never omits anything (`null` for nil pointers, slices and maps, zero values otherwise), and
//! promotes the fields of embedded structs (`ProbeHandler`, `VolumeSource`, `LocalObjectReference`,
//! `metav1.ObjectMeta`). Versioned types embedded in internal ones (`metav1.ObjectMeta`,
//! `metav1.LabelSelector`) keep their json tags and `omitempty`.
//!
//! The schemas below follow `pkg/apis/core/types.go` and `pkg/apis/batch/types.go` of v1.36; the
//! recordings pin `PodTemplateSpec`, `PodSpec`, `Container`, `ResourceRequirements`,
//! `PodSecurityContext`, `SuccessPolicy` and `UncountedTerminatedPods`. Limits: volume sources other
//! than the common ones (hostPath, emptyDir, secret, configMap, persistentVolumeClaim, nfs, downwardAPI,
//! projected, csi, image) and a few rarely used nested types are printed as their versioned JSON
//! (sorted keys, json names); `resource.Quantity` values are printed as written, not re-canonicalised.

use serde_json::{Map, Value};

use crate::errors::{go_json, write_go_string};

/// How one field is rendered.
#[derive(Clone, Copy)]
enum K {
    /// Go `string` (named string types too): `""` when unset.
    Str,
    /// Go int32/int64: `0` when unset.
    Int,
    /// Go bool: `false` when unset.
    Bool,
    /// A pointer or slice/map of plain JSON values (`*string`, `*int32`, `[]string`, `[]int32`,
    /// `map[string]string`, `ResourceList`, `*HostPathType`, ...): `null` when unset, else its JSON.
    Plain,
    /// `resource.Quantity` held by value: `"0"` when unset.
    Quantity,
    /// `intstr.IntOrString` held by value: `0` when unset.
    IntOrString,
    /// A struct held by value.
    Struct(&'static [F]),
    /// A pointer to a struct: `null` when unset.
    Ptr(&'static [F]),
    /// A slice of structs: `null` when unset.
    Slice(&'static [F]),
    /// An embedded struct: its fields are promoted into the parent and read from the same JSON object.
    Embed(&'static [F]),
    /// A versioned (json-tagged) struct, pointer semantics: `null` when unset.
    Tagged(&'static [T]),
    /// Not modelled: the versioned JSON as it is (`null` when unset).
    Raw,
}

/// A field of an internal (untagged) type: Go name, v1 json name, kind.
struct F(&'static str, &'static str, K);

/// A field of a versioned (tagged) type: json name, kind, omitempty.
struct T(&'static str, TK, bool);

#[derive(Clone, Copy)]
enum TK {
    Str,
    Int,
    Plain,
    Slice(&'static [T]),
}

const LOCAL_OBJECT_REFERENCE: &[F] = &[F("Name", "name", K::Str)];

const LABEL_SELECTOR_REQUIREMENT: &[T] = &[
    T("key", TK::Str, false),
    T("operator", TK::Str, false),
    T("values", TK::Plain, true),
];
const LABEL_SELECTOR: &[T] = &[
    T("matchLabels", TK::Plain, true),
    T(
        "matchExpressions",
        TK::Slice(LABEL_SELECTOR_REQUIREMENT),
        true,
    ),
];

/// `metav1.ObjectMeta` embedded in `PodTemplateSpec` (json-tagged, all omitempty).
const OBJECT_META: &[T] = &[
    T("name", TK::Str, true),
    T("generateName", TK::Str, true),
    T("namespace", TK::Str, true),
    T("selfLink", TK::Str, true),
    T("uid", TK::Str, true),
    T("resourceVersion", TK::Str, true),
    T("generation", TK::Int, true),
    T("creationTimestamp", TK::Plain, true),
    T("deletionTimestamp", TK::Plain, true),
    T("deletionGracePeriodSeconds", TK::Plain, true),
    T("labels", TK::Plain, true),
    T("annotations", TK::Plain, true),
    T("ownerReferences", TK::Plain, true),
    T("finalizers", TK::Plain, true),
    T("managedFields", TK::Plain, true),
];

const CONTAINER_PORT: &[F] = &[
    F("Name", "name", K::Str),
    F("HostPort", "hostPort", K::Int),
    F("ContainerPort", "containerPort", K::Int),
    F("Protocol", "protocol", K::Str),
    F("HostIP", "hostIP", K::Str),
];
const OPTIONAL_REF: &[F] = &[
    F("LocalObjectReference", "", K::Embed(LOCAL_OBJECT_REFERENCE)),
    F("Optional", "optional", K::Plain),
];
const ENV_FROM_SOURCE: &[F] = &[
    F("Prefix", "prefix", K::Str),
    F("ConfigMapRef", "configMapRef", K::Ptr(OPTIONAL_REF)),
    F("SecretRef", "secretRef", K::Ptr(OPTIONAL_REF)),
];
const OBJECT_FIELD_SELECTOR: &[F] = &[
    F("APIVersion", "apiVersion", K::Str),
    F("FieldPath", "fieldPath", K::Str),
];
const RESOURCE_FIELD_SELECTOR: &[F] = &[
    F("ContainerName", "containerName", K::Str),
    F("Resource", "resource", K::Str),
    F("Divisor", "divisor", K::Quantity),
];
const KEY_SELECTOR: &[F] = &[
    F("LocalObjectReference", "", K::Embed(LOCAL_OBJECT_REFERENCE)),
    F("Key", "key", K::Str),
    F("Optional", "optional", K::Plain),
];
const FILE_KEY_SELECTOR: &[F] = &[
    F("VolumeName", "volumeName", K::Str),
    F("Path", "path", K::Str),
    F("Key", "key", K::Str),
    F("Optional", "optional", K::Plain),
];
const ENV_VAR_SOURCE: &[F] = &[
    F("FieldRef", "fieldRef", K::Ptr(OBJECT_FIELD_SELECTOR)),
    F(
        "ResourceFieldRef",
        "resourceFieldRef",
        K::Ptr(RESOURCE_FIELD_SELECTOR),
    ),
    F("ConfigMapKeyRef", "configMapKeyRef", K::Ptr(KEY_SELECTOR)),
    F("SecretKeyRef", "secretKeyRef", K::Ptr(KEY_SELECTOR)),
    F("FileKeyRef", "fileKeyRef", K::Ptr(FILE_KEY_SELECTOR)),
];
const ENV_VAR: &[F] = &[
    F("Name", "name", K::Str),
    F("Value", "value", K::Str),
    F("ValueFrom", "valueFrom", K::Ptr(ENV_VAR_SOURCE)),
];
const RESOURCE_CLAIM: &[F] = &[F("Name", "name", K::Str), F("Request", "request", K::Str)];
const RESOURCE_REQUIREMENTS: &[F] = &[
    F("Limits", "limits", K::Plain),
    F("Requests", "requests", K::Plain),
    F("Claims", "claims", K::Slice(RESOURCE_CLAIM)),
];
const CONTAINER_RESIZE_POLICY: &[F] = &[
    F("ResourceName", "resourceName", K::Str),
    F("RestartPolicy", "restartPolicy", K::Str),
];
const RESTART_RULE_ON_EXIT_CODES: &[F] = &[
    F("Operator", "operator", K::Str),
    F("Values", "values", K::Plain),
];
const CONTAINER_RESTART_RULE: &[F] = &[
    F("Action", "action", K::Str),
    F("ExitCodes", "exitCodes", K::Ptr(RESTART_RULE_ON_EXIT_CODES)),
];
const VOLUME_MOUNT: &[F] = &[
    F("Name", "name", K::Str),
    F("ReadOnly", "readOnly", K::Bool),
    F("RecursiveReadOnly", "recursiveReadOnly", K::Plain),
    F("MountPath", "mountPath", K::Str),
    F("SubPath", "subPath", K::Str),
    F("MountPropagation", "mountPropagation", K::Plain),
    F("SubPathExpr", "subPathExpr", K::Str),
];
const VOLUME_DEVICE: &[F] = &[
    F("Name", "name", K::Str),
    F("DevicePath", "devicePath", K::Str),
];
const EXEC_ACTION: &[F] = &[F("Command", "command", K::Plain)];
const HTTP_HEADER: &[F] = &[F("Name", "name", K::Str), F("Value", "value", K::Str)];
const HTTP_GET_ACTION: &[F] = &[
    F("Path", "path", K::Str),
    F("Port", "port", K::IntOrString),
    F("Host", "host", K::Str),
    F("Scheme", "scheme", K::Str),
    F("HTTPHeaders", "httpHeaders", K::Slice(HTTP_HEADER)),
];
const TCP_SOCKET_ACTION: &[F] = &[F("Port", "port", K::IntOrString), F("Host", "host", K::Str)];
const GRPC_ACTION: &[F] = &[F("Port", "port", K::Int), F("Service", "service", K::Plain)];
const PROBE_HANDLER: &[F] = &[
    F("Exec", "exec", K::Ptr(EXEC_ACTION)),
    F("HTTPGet", "httpGet", K::Ptr(HTTP_GET_ACTION)),
    F("TCPSocket", "tcpSocket", K::Ptr(TCP_SOCKET_ACTION)),
    F("GRPC", "grpc", K::Ptr(GRPC_ACTION)),
];
const PROBE: &[F] = &[
    F("ProbeHandler", "", K::Embed(PROBE_HANDLER)),
    F("InitialDelaySeconds", "initialDelaySeconds", K::Int),
    F("TimeoutSeconds", "timeoutSeconds", K::Int),
    F("PeriodSeconds", "periodSeconds", K::Int),
    F("SuccessThreshold", "successThreshold", K::Int),
    F("FailureThreshold", "failureThreshold", K::Int),
    F(
        "TerminationGracePeriodSeconds",
        "terminationGracePeriodSeconds",
        K::Plain,
    ),
];
const SLEEP_ACTION: &[F] = &[F("Seconds", "seconds", K::Int)];
const LIFECYCLE_HANDLER: &[F] = &[
    F("Exec", "exec", K::Ptr(EXEC_ACTION)),
    F("HTTPGet", "httpGet", K::Ptr(HTTP_GET_ACTION)),
    F("TCPSocket", "tcpSocket", K::Ptr(TCP_SOCKET_ACTION)),
    F("Sleep", "sleep", K::Ptr(SLEEP_ACTION)),
];
const LIFECYCLE: &[F] = &[
    F("PostStart", "postStart", K::Ptr(LIFECYCLE_HANDLER)),
    F("PreStop", "preStop", K::Ptr(LIFECYCLE_HANDLER)),
    F("StopSignal", "stopSignal", K::Plain),
];
const CAPABILITIES: &[F] = &[F("Add", "add", K::Plain), F("Drop", "drop", K::Plain)];
const SE_LINUX_OPTIONS: &[F] = &[
    F("User", "user", K::Str),
    F("Role", "role", K::Str),
    F("Type", "type", K::Str),
    F("Level", "level", K::Str),
];
const WINDOWS_OPTIONS: &[F] = &[
    F("GMSACredentialSpecName", "gmsaCredentialSpecName", K::Plain),
    F("GMSACredentialSpec", "gmsaCredentialSpec", K::Plain),
    F("RunAsUserName", "runAsUserName", K::Plain),
    F("HostProcess", "hostProcess", K::Plain),
];
const PROFILE: &[F] = &[
    F("Type", "type", K::Str),
    F("LocalhostProfile", "localhostProfile", K::Plain),
];
const SECURITY_CONTEXT: &[F] = &[
    F("Capabilities", "capabilities", K::Ptr(CAPABILITIES)),
    F("Privileged", "privileged", K::Plain),
    F("SELinuxOptions", "seLinuxOptions", K::Ptr(SE_LINUX_OPTIONS)),
    F("WindowsOptions", "windowsOptions", K::Ptr(WINDOWS_OPTIONS)),
    F("RunAsUser", "runAsUser", K::Plain),
    F("RunAsGroup", "runAsGroup", K::Plain),
    F("RunAsNonRoot", "runAsNonRoot", K::Plain),
    F("ReadOnlyRootFilesystem", "readOnlyRootFilesystem", K::Plain),
    F(
        "AllowPrivilegeEscalation",
        "allowPrivilegeEscalation",
        K::Plain,
    ),
    F("ProcMount", "procMount", K::Plain),
    F("SeccompProfile", "seccompProfile", K::Ptr(PROFILE)),
    F("AppArmorProfile", "appArmorProfile", K::Ptr(PROFILE)),
];
const CONTAINER: &[F] = &[
    F("Name", "name", K::Str),
    F("Image", "image", K::Str),
    F("Command", "command", K::Plain),
    F("Args", "args", K::Plain),
    F("WorkingDir", "workingDir", K::Str),
    F("Ports", "ports", K::Slice(CONTAINER_PORT)),
    F("EnvFrom", "envFrom", K::Slice(ENV_FROM_SOURCE)),
    F("Env", "env", K::Slice(ENV_VAR)),
    F("Resources", "resources", K::Struct(RESOURCE_REQUIREMENTS)),
    F(
        "ResizePolicy",
        "resizePolicy",
        K::Slice(CONTAINER_RESIZE_POLICY),
    ),
    F("RestartPolicy", "restartPolicy", K::Plain),
    F(
        "RestartPolicyRules",
        "restartPolicyRules",
        K::Slice(CONTAINER_RESTART_RULE),
    ),
    F("VolumeMounts", "volumeMounts", K::Slice(VOLUME_MOUNT)),
    F("VolumeDevices", "volumeDevices", K::Slice(VOLUME_DEVICE)),
    F("LivenessProbe", "livenessProbe", K::Ptr(PROBE)),
    F("ReadinessProbe", "readinessProbe", K::Ptr(PROBE)),
    F("StartupProbe", "startupProbe", K::Ptr(PROBE)),
    F("Lifecycle", "lifecycle", K::Ptr(LIFECYCLE)),
    F("TerminationMessagePath", "terminationMessagePath", K::Str),
    F(
        "TerminationMessagePolicy",
        "terminationMessagePolicy",
        K::Str,
    ),
    F("ImagePullPolicy", "imagePullPolicy", K::Str),
    F(
        "SecurityContext",
        "securityContext",
        K::Ptr(SECURITY_CONTEXT),
    ),
    F("Stdin", "stdin", K::Bool),
    F("StdinOnce", "stdinOnce", K::Bool),
    F("TTY", "tty", K::Bool),
];

const KEY_TO_PATH: &[F] = &[
    F("Key", "key", K::Str),
    F("Path", "path", K::Str),
    F("Mode", "mode", K::Plain),
];
const HOST_PATH: &[F] = &[F("Path", "path", K::Str), F("Type", "type", K::Plain)];
const EMPTY_DIR: &[F] = &[
    F("Medium", "medium", K::Str),
    F("SizeLimit", "sizeLimit", K::Plain),
];
const SECRET_VOLUME: &[F] = &[
    F("SecretName", "secretName", K::Str),
    F("Items", "items", K::Slice(KEY_TO_PATH)),
    F("DefaultMode", "defaultMode", K::Plain),
    F("Optional", "optional", K::Plain),
];
const CONFIG_MAP_VOLUME: &[F] = &[
    F("LocalObjectReference", "", K::Embed(LOCAL_OBJECT_REFERENCE)),
    F("Items", "items", K::Slice(KEY_TO_PATH)),
    F("DefaultMode", "defaultMode", K::Plain),
    F("Optional", "optional", K::Plain),
];
const PVC_VOLUME: &[F] = &[
    F("ClaimName", "claimName", K::Str),
    F("ReadOnly", "readOnly", K::Bool),
];
const NFS_VOLUME: &[F] = &[
    F("Server", "server", K::Str),
    F("Path", "path", K::Str),
    F("ReadOnly", "readOnly", K::Bool),
];
const DOWNWARD_API_FILE: &[F] = &[
    F("Path", "path", K::Str),
    F("FieldRef", "fieldRef", K::Ptr(OBJECT_FIELD_SELECTOR)),
    F(
        "ResourceFieldRef",
        "resourceFieldRef",
        K::Ptr(RESOURCE_FIELD_SELECTOR),
    ),
    F("Mode", "mode", K::Plain),
];
const DOWNWARD_API_VOLUME: &[F] = &[
    F("Items", "items", K::Slice(DOWNWARD_API_FILE)),
    F("DefaultMode", "defaultMode", K::Plain),
];
const OBJECT_PROJECTION: &[F] = &[
    F("LocalObjectReference", "", K::Embed(LOCAL_OBJECT_REFERENCE)),
    F("Items", "items", K::Slice(KEY_TO_PATH)),
    F("Optional", "optional", K::Plain),
];
const DOWNWARD_API_PROJECTION: &[F] = &[F("Items", "items", K::Slice(DOWNWARD_API_FILE))];
const SA_TOKEN_PROJECTION: &[F] = &[
    F("Audience", "audience", K::Str),
    F("ExpirationSeconds", "expirationSeconds", K::Int),
    F("Path", "path", K::Str),
];
const VOLUME_PROJECTION: &[F] = &[
    F("Secret", "secret", K::Ptr(OBJECT_PROJECTION)),
    F(
        "DownwardAPI",
        "downwardAPI",
        K::Ptr(DOWNWARD_API_PROJECTION),
    ),
    F("ConfigMap", "configMap", K::Ptr(OBJECT_PROJECTION)),
    F(
        "ServiceAccountToken",
        "serviceAccountToken",
        K::Ptr(SA_TOKEN_PROJECTION),
    ),
    F("ClusterTrustBundle", "clusterTrustBundle", K::Raw),
    F("PodCertificate", "podCertificate", K::Raw),
];
const PROJECTED_VOLUME: &[F] = &[
    F("Sources", "sources", K::Slice(VOLUME_PROJECTION)),
    F("DefaultMode", "defaultMode", K::Plain),
];
const CSI_VOLUME: &[F] = &[
    F("Driver", "driver", K::Str),
    F("ReadOnly", "readOnly", K::Plain),
    F("FSType", "fsType", K::Plain),
    F("VolumeAttributes", "volumeAttributes", K::Plain),
    F(
        "NodePublishSecretRef",
        "nodePublishSecretRef",
        K::Ptr(LOCAL_OBJECT_REFERENCE),
    ),
];
const IMAGE_VOLUME: &[F] = &[
    F("Reference", "reference", K::Str),
    F("PullPolicy", "pullPolicy", K::Str),
];
const VOLUME_SOURCE: &[F] = &[
    F("HostPath", "hostPath", K::Ptr(HOST_PATH)),
    F("EmptyDir", "emptyDir", K::Ptr(EMPTY_DIR)),
    F("GCEPersistentDisk", "gcePersistentDisk", K::Raw),
    F("AWSElasticBlockStore", "awsElasticBlockStore", K::Raw),
    F("GitRepo", "gitRepo", K::Raw),
    F("Secret", "secret", K::Ptr(SECRET_VOLUME)),
    F("NFS", "nfs", K::Ptr(NFS_VOLUME)),
    F("ISCSI", "iscsi", K::Raw),
    F("Glusterfs", "glusterfs", K::Raw),
    F(
        "PersistentVolumeClaim",
        "persistentVolumeClaim",
        K::Ptr(PVC_VOLUME),
    ),
    F("RBD", "rbd", K::Raw),
    F("Quobyte", "quobyte", K::Raw),
    F("FlexVolume", "flexVolume", K::Raw),
    F("Cinder", "cinder", K::Raw),
    F("CephFS", "cephfs", K::Raw),
    F("Flocker", "flocker", K::Raw),
    F("DownwardAPI", "downwardAPI", K::Ptr(DOWNWARD_API_VOLUME)),
    F("FC", "fc", K::Raw),
    F("AzureFile", "azureFile", K::Raw),
    F("ConfigMap", "configMap", K::Ptr(CONFIG_MAP_VOLUME)),
    F("VsphereVolume", "vsphereVolume", K::Raw),
    F("AzureDisk", "azureDisk", K::Raw),
    F("PhotonPersistentDisk", "photonPersistentDisk", K::Raw),
    F("Projected", "projected", K::Ptr(PROJECTED_VOLUME)),
    F("PortworxVolume", "portworxVolume", K::Raw),
    F("ScaleIO", "scaleIO", K::Raw),
    F("StorageOS", "storageos", K::Raw),
    F("CSI", "csi", K::Ptr(CSI_VOLUME)),
    F("Ephemeral", "ephemeral", K::Raw),
    F("Image", "image", K::Ptr(IMAGE_VOLUME)),
];
const VOLUME: &[F] = &[
    F("Name", "name", K::Str),
    F("VolumeSource", "", K::Embed(VOLUME_SOURCE)),
];

const SYSCTL: &[F] = &[F("Name", "name", K::Str), F("Value", "value", K::Str)];
/// Internal `PodSecurityContext`: the v1 PodSpec's host namespace fields live here (moved in by
/// [`internal_pod_spec`]).
const POD_SECURITY_CONTEXT: &[F] = &[
    F("HostNetwork", "hostNetwork", K::Bool),
    F("HostPID", "hostPID", K::Bool),
    F("HostIPC", "hostIPC", K::Bool),
    F("ShareProcessNamespace", "shareProcessNamespace", K::Plain),
    F("HostUsers", "hostUsers", K::Plain),
    F("SELinuxOptions", "seLinuxOptions", K::Ptr(SE_LINUX_OPTIONS)),
    F("WindowsOptions", "windowsOptions", K::Ptr(WINDOWS_OPTIONS)),
    F("RunAsUser", "runAsUser", K::Plain),
    F("RunAsGroup", "runAsGroup", K::Plain),
    F("RunAsNonRoot", "runAsNonRoot", K::Plain),
    F("SupplementalGroups", "supplementalGroups", K::Plain),
    F(
        "SupplementalGroupsPolicy",
        "supplementalGroupsPolicy",
        K::Plain,
    ),
    F("FSGroup", "fsGroup", K::Plain),
    F("FSGroupChangePolicy", "fsGroupChangePolicy", K::Plain),
    F("Sysctls", "sysctls", K::Slice(SYSCTL)),
    F("SeccompProfile", "seccompProfile", K::Ptr(PROFILE)),
    F("AppArmorProfile", "appArmorProfile", K::Ptr(PROFILE)),
    F("SELinuxChangePolicy", "seLinuxChangePolicy", K::Plain),
];
const NODE_SELECTOR_REQUIREMENT: &[F] = &[
    F("Key", "key", K::Str),
    F("Operator", "operator", K::Str),
    F("Values", "values", K::Plain),
];
const NODE_SELECTOR_TERM: &[F] = &[
    F(
        "MatchExpressions",
        "matchExpressions",
        K::Slice(NODE_SELECTOR_REQUIREMENT),
    ),
    F(
        "MatchFields",
        "matchFields",
        K::Slice(NODE_SELECTOR_REQUIREMENT),
    ),
];
const NODE_SELECTOR: &[F] = &[F(
    "NodeSelectorTerms",
    "nodeSelectorTerms",
    K::Slice(NODE_SELECTOR_TERM),
)];
const PREFERRED_SCHEDULING_TERM: &[F] = &[
    F("Weight", "weight", K::Int),
    F("Preference", "preference", K::Struct(NODE_SELECTOR_TERM)),
];
const NODE_AFFINITY: &[F] = &[
    F(
        "RequiredDuringSchedulingIgnoredDuringExecution",
        "requiredDuringSchedulingIgnoredDuringExecution",
        K::Ptr(NODE_SELECTOR),
    ),
    F(
        "PreferredDuringSchedulingIgnoredDuringExecution",
        "preferredDuringSchedulingIgnoredDuringExecution",
        K::Slice(PREFERRED_SCHEDULING_TERM),
    ),
];
const POD_AFFINITY_TERM: &[F] = &[
    F("LabelSelector", "labelSelector", K::Tagged(LABEL_SELECTOR)),
    F("Namespaces", "namespaces", K::Plain),
    F("TopologyKey", "topologyKey", K::Str),
    F(
        "NamespaceSelector",
        "namespaceSelector",
        K::Tagged(LABEL_SELECTOR),
    ),
    F("MatchLabelKeys", "matchLabelKeys", K::Plain),
    F("MismatchLabelKeys", "mismatchLabelKeys", K::Plain),
];
const WEIGHTED_POD_AFFINITY_TERM: &[F] = &[
    F("Weight", "weight", K::Int),
    F(
        "PodAffinityTerm",
        "podAffinityTerm",
        K::Struct(POD_AFFINITY_TERM),
    ),
];
const POD_AFFINITY: &[F] = &[
    F(
        "RequiredDuringSchedulingIgnoredDuringExecution",
        "requiredDuringSchedulingIgnoredDuringExecution",
        K::Slice(POD_AFFINITY_TERM),
    ),
    F(
        "PreferredDuringSchedulingIgnoredDuringExecution",
        "preferredDuringSchedulingIgnoredDuringExecution",
        K::Slice(WEIGHTED_POD_AFFINITY_TERM),
    ),
];
const AFFINITY: &[F] = &[
    F("NodeAffinity", "nodeAffinity", K::Ptr(NODE_AFFINITY)),
    F("PodAffinity", "podAffinity", K::Ptr(POD_AFFINITY)),
    F("PodAntiAffinity", "podAntiAffinity", K::Ptr(POD_AFFINITY)),
];
const TOLERATION: &[F] = &[
    F("Key", "key", K::Str),
    F("Operator", "operator", K::Str),
    F("Value", "value", K::Str),
    F("Effect", "effect", K::Str),
    F("TolerationSeconds", "tolerationSeconds", K::Plain),
];
const HOST_ALIAS: &[F] = &[F("IP", "ip", K::Str), F("Hostnames", "hostnames", K::Plain)];
const DNS_CONFIG_OPTION: &[F] = &[F("Name", "name", K::Str), F("Value", "value", K::Plain)];
const DNS_CONFIG: &[F] = &[
    F("Nameservers", "nameservers", K::Plain),
    F("Searches", "searches", K::Plain),
    F("Options", "options", K::Slice(DNS_CONFIG_OPTION)),
];
const READINESS_GATE: &[F] = &[F("ConditionType", "conditionType", K::Str)];
const TOPOLOGY_SPREAD_CONSTRAINT: &[F] = &[
    F("MaxSkew", "maxSkew", K::Int),
    F("TopologyKey", "topologyKey", K::Str),
    F("WhenUnsatisfiable", "whenUnsatisfiable", K::Str),
    F("LabelSelector", "labelSelector", K::Tagged(LABEL_SELECTOR)),
    F("MinDomains", "minDomains", K::Plain),
    F("NodeAffinityPolicy", "nodeAffinityPolicy", K::Plain),
    F("NodeTaintsPolicy", "nodeTaintsPolicy", K::Plain),
    F("MatchLabelKeys", "matchLabelKeys", K::Plain),
];
const POD_OS: &[F] = &[F("Name", "name", K::Str)];
const SCHEDULING_GATE: &[F] = &[F("Name", "name", K::Str)];
const POD_RESOURCE_CLAIM: &[F] = &[
    F("Name", "name", K::Str),
    F("ResourceClaimName", "resourceClaimName", K::Plain),
    F(
        "ResourceClaimTemplateName",
        "resourceClaimTemplateName",
        K::Plain,
    ),
];
/// Internal `PodSpec`, v1.36 field order (as recorded).
const POD_SPEC: &[F] = &[
    F("Volumes", "volumes", K::Slice(VOLUME)),
    F("InitContainers", "initContainers", K::Slice(CONTAINER)),
    F("Containers", "containers", K::Slice(CONTAINER)),
    F("EphemeralContainers", "ephemeralContainers", K::Raw),
    F("RestartPolicy", "restartPolicy", K::Str),
    F(
        "TerminationGracePeriodSeconds",
        "terminationGracePeriodSeconds",
        K::Plain,
    ),
    F("ActiveDeadlineSeconds", "activeDeadlineSeconds", K::Plain),
    F("DNSPolicy", "dnsPolicy", K::Str),
    F("NodeSelector", "nodeSelector", K::Plain),
    F("ServiceAccountName", "serviceAccountName", K::Str),
    F(
        "AutomountServiceAccountToken",
        "automountServiceAccountToken",
        K::Plain,
    ),
    F("NodeName", "nodeName", K::Str),
    F(
        "SecurityContext",
        "securityContext",
        K::Ptr(POD_SECURITY_CONTEXT),
    ),
    F(
        "ImagePullSecrets",
        "imagePullSecrets",
        K::Slice(LOCAL_OBJECT_REFERENCE),
    ),
    F("Hostname", "hostname", K::Str),
    F("Subdomain", "subdomain", K::Str),
    F("SetHostnameAsFQDN", "setHostnameAsFQDN", K::Plain),
    F("Affinity", "affinity", K::Ptr(AFFINITY)),
    F("SchedulerName", "schedulerName", K::Str),
    F("Tolerations", "tolerations", K::Slice(TOLERATION)),
    F("HostAliases", "hostAliases", K::Slice(HOST_ALIAS)),
    F("PriorityClassName", "priorityClassName", K::Str),
    F("Priority", "priority", K::Plain),
    F("PreemptionPolicy", "preemptionPolicy", K::Plain),
    F("DNSConfig", "dnsConfig", K::Ptr(DNS_CONFIG)),
    F("ReadinessGates", "readinessGates", K::Slice(READINESS_GATE)),
    F("RuntimeClassName", "runtimeClassName", K::Plain),
    F("Overhead", "overhead", K::Plain),
    F("EnableServiceLinks", "enableServiceLinks", K::Plain),
    F(
        "TopologySpreadConstraints",
        "topologySpreadConstraints",
        K::Slice(TOPOLOGY_SPREAD_CONSTRAINT),
    ),
    F("OS", "os", K::Ptr(POD_OS)),
    F(
        "SchedulingGates",
        "schedulingGates",
        K::Slice(SCHEDULING_GATE),
    ),
    F(
        "ResourceClaims",
        "resourceClaims",
        K::Slice(POD_RESOURCE_CLAIM),
    ),
    F("Resources", "resources", K::Ptr(RESOURCE_REQUIREMENTS)),
    F("HostnameOverride", "hostnameOverride", K::Plain),
    F("SchedulingGroup", "schedulingGroup", K::Raw),
];

const SUCCESS_POLICY_RULE: &[F] = &[
    F("SucceededIndexes", "succeededIndexes", K::Plain),
    F("SucceededCount", "succeededCount", K::Plain),
];
const SUCCESS_POLICY: &[F] = &[F("Rules", "rules", K::Slice(SUCCESS_POLICY_RULE))];
const ON_EXIT_CODES: &[F] = &[
    F("ContainerName", "containerName", K::Plain),
    F("Operator", "operator", K::Str),
    F("Values", "values", K::Plain),
];
const ON_POD_CONDITION: &[F] = &[F("Type", "type", K::Str), F("Status", "status", K::Str)];
const POD_FAILURE_POLICY_RULE: &[F] = &[
    F("Action", "action", K::Str),
    F("OnExitCodes", "onExitCodes", K::Ptr(ON_EXIT_CODES)),
    F(
        "OnPodConditions",
        "onPodConditions",
        K::Slice(ON_POD_CONDITION),
    ),
];
const POD_FAILURE_POLICY: &[F] = &[F("Rules", "rules", K::Slice(POD_FAILURE_POLICY_RULE))];
const UNCOUNTED_TERMINATED_PODS: &[F] = &[
    F("Succeeded", "succeeded", K::Plain),
    F("Failed", "failed", K::Plain),
];

fn write_fields(
    fields: &[F],
    obj: Option<&Map<String, Value>>,
    out: &mut String,
    first: &mut bool,
) {
    for F(go, json, kind) in fields {
        if let K::Embed(inner) = kind {
            write_fields(inner, obj, out, first);
            continue;
        }
        if !*first {
            out.push(',');
        }
        *first = false;
        write_go_string(go, out);
        out.push(':');
        write_value(*kind, obj.and_then(|o| o.get(*json)), out);
    }
}

fn write_struct(fields: &[F], obj: Option<&Map<String, Value>>, out: &mut String) {
    out.push('{');
    let mut first = true;
    write_fields(fields, obj, out, &mut first);
    out.push('}');
}

fn write_value(kind: K, v: Option<&Value>, out: &mut String) {
    let v = v.filter(|v| !v.is_null());
    match kind {
        K::Str => write_go_string(v.and_then(Value::as_str).unwrap_or(""), out),
        K::Int => out.push_str(&v.and_then(Value::as_i64).unwrap_or(0).to_string()),
        K::Bool => out.push_str(if v.and_then(Value::as_bool).unwrap_or(false) {
            "true"
        } else {
            "false"
        }),
        K::Quantity => match v {
            Some(v) => out.push_str(&go_json(v)),
            None => out.push_str("\"0\""),
        },
        K::IntOrString => match v {
            Some(v) => out.push_str(&go_json(v)),
            None => out.push('0'),
        },
        K::Plain | K::Raw => match v {
            Some(v) => out.push_str(&go_json(v)),
            None => out.push_str("null"),
        },
        K::Struct(fields) => write_struct(fields, v.and_then(Value::as_object), out),
        K::Ptr(fields) => match v.and_then(Value::as_object) {
            Some(o) => write_struct(fields, Some(o), out),
            None => out.push_str("null"),
        },
        K::Slice(fields) => match v.and_then(Value::as_array) {
            Some(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_struct(fields, item.as_object(), out);
                }
                out.push(']');
            }
            None => out.push_str("null"),
        },
        K::Embed(fields) => write_struct(fields, v.and_then(Value::as_object), out),
        K::Tagged(fields) => match v.and_then(Value::as_object) {
            Some(o) => write_tagged(fields, o, out),
            None => out.push_str("null"),
        },
    }
}

fn is_empty_json(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Bool(b) => !b,
    }
}

fn write_tagged(fields: &[T], obj: &Map<String, Value>, out: &mut String) {
    out.push('{');
    let mut first = true;
    for T(name, kind, omitempty) in fields {
        let v = obj.get(*name).filter(|v| !v.is_null());
        if *omitempty && v.is_none_or(is_empty_json) {
            continue;
        }
        if !first {
            out.push(',');
        }
        first = false;
        write_go_string(name, out);
        out.push(':');
        match kind {
            TK::Str => write_go_string(v.and_then(Value::as_str).unwrap_or(""), out),
            TK::Int => out.push_str(&v.and_then(Value::as_i64).unwrap_or(0).to_string()),
            TK::Plain => out.push_str(&v.map_or_else(|| "null".to_string(), go_json)),
            TK::Slice(inner) => match v.and_then(Value::as_array) {
                Some(items) => {
                    out.push('[');
                    for (i, item) in items.iter().enumerate() {
                        if i > 0 {
                            out.push(',');
                        }
                        match item.as_object() {
                            Some(o) => write_tagged(inner, o, out),
                            None => out.push_str("null"),
                        }
                    }
                    out.push(']');
                }
                None => out.push_str("null"),
            },
        }
    }
    out.push('}');
}

/// The v1 PodSpec rearranged like the v1 -> internal conversion does: the host namespace fields move
/// into `securityContext` (always allocated), and a deprecated `serviceAccount` fills an empty
/// `serviceAccountName`.
fn internal_pod_spec(spec: Option<&Value>) -> Map<String, Value> {
    let mut m = spec.and_then(Value::as_object).cloned().unwrap_or_default();
    let mut sc = m
        .remove("securityContext")
        .and_then(|v| match v {
            Value::Object(o) => Some(o),
            _ => None,
        })
        .unwrap_or_default();
    for key in [
        "hostNetwork",
        "hostPID",
        "hostIPC",
        "shareProcessNamespace",
        "hostUsers",
    ] {
        if let Some(v) = m.remove(key) {
            sc.insert(key.to_string(), v);
        }
    }
    m.insert("securityContext".to_string(), Value::Object(sc));
    if m.get("serviceAccountName")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
        && let Some(sa) = m.get("serviceAccount").cloned()
    {
        m.insert("serviceAccountName".to_string(), sa);
    }
    m
}

/// An internal `core.PodSpec`, from the v1 JSON.
pub fn pod_spec(spec: Option<&Value>) -> String {
    let m = internal_pod_spec(spec);
    let mut out = String::with_capacity(2048);
    write_struct(POD_SPEC, Some(&m), &mut out);
    out
}

/// An internal `core.PodTemplateSpec`: the embedded `metav1.ObjectMeta` (json tags, omitempty) then
/// `Spec`.
pub fn pod_template_spec(template: Option<&Value>) -> String {
    let empty = Map::new();
    let meta = template
        .and_then(|t| t.get("metadata"))
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let mut out = String::with_capacity(2048);
    write_tagged(OBJECT_META, meta, &mut out);
    // Splice `"Spec":{...}` into the object just written.
    out.pop();
    if out.len() > 1 {
        out.push(',');
    }
    out.push_str("\"Spec\":");
    out.push_str(&pod_spec(template.and_then(|t| t.get("spec"))));
    out.push('}');
    out
}

/// A `metav1.LabelSelector` (json tags: `matchLabels`, then `matchExpressions`).
pub fn label_selector(selector: Option<&Value>) -> String {
    match selector.and_then(Value::as_object) {
        Some(o) => {
            let mut out = String::new();
            write_tagged(LABEL_SELECTOR, o, &mut out);
            out
        }
        None => "null".to_string(),
    }
}

fn render(fields: &'static [F], v: Option<&Value>) -> String {
    let mut out = String::new();
    write_value(K::Ptr(fields), v, &mut out);
    out
}

/// An internal `batch.SuccessPolicy` (`{"Rules":[{"SucceededIndexes":...,"SucceededCount":...}]}`).
pub fn success_policy(v: Option<&Value>) -> String {
    render(SUCCESS_POLICY, v)
}

/// An internal `batch.PodFailurePolicy`.
pub fn pod_failure_policy(v: Option<&Value>) -> String {
    render(POD_FAILURE_POLICY, v)
}

/// An internal `batch.UncountedTerminatedPods` (`{"Succeeded":[...],"Failed":null}`).
pub fn uncounted_terminated_pods(v: Option<&Value>) -> String {
    render(UNCOUNTED_TERMINATED_PODS, v)
}

/// An internal `core.Toleration`.
pub fn toleration(v: Option<&Value>) -> String {
    render(TOLERATION, v)
}

/// An internal `core.LocalObjectReference` (`{"Name":"x"}`), as in image pull secrets.
pub fn local_object_reference(v: Option<&Value>) -> String {
    render(LOCAL_OBJECT_REFERENCE, v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn success_policy_matches_the_recording() {
        assert_eq!(
            success_policy(Some(&json!({"rules": [{"succeededCount": 1}]}))),
            r#"{"Rules":[{"SucceededIndexes":null,"SucceededCount":1}]}"#
        );
        assert_eq!(success_policy(None), "null");
    }

    #[test]
    fn uncounted_matches_the_recording() {
        assert_eq!(
            uncounted_terminated_pods(Some(
                &json!({"succeeded": ["11111111-2222-3333-4444-555555555555"]})
            )),
            r#"{"Succeeded":["11111111-2222-3333-4444-555555555555"],"Failed":null}"#
        );
    }

    #[test]
    fn selectors_keep_struct_order() {
        assert_eq!(
            label_selector(Some(
                &json!({"matchExpressions": [{"operator": "Exists", "key": "k"}], "matchLabels": {"b": "1", "a": "2"}})
            )),
            r#"{"matchLabels":{"a":"2","b":"1"},"matchExpressions":[{"key":"k","operator":"Exists"}]}"#
        );
        assert_eq!(label_selector(None), "null");
    }

    #[test]
    fn probes_promote_the_handler_and_volumes_the_source() {
        let spec = json!({
            "containers": [{"name": "c", "image": "i",
                "livenessProbe": {"httpGet": {"port": 8080, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1}}],
            "volumes": [{"name": "v", "emptyDir": {}}],
            "hostNetwork": true
        });
        let s = pod_spec(Some(&spec));
        assert!(s.contains(r#""LivenessProbe":{"Exec":null,"HTTPGet":{"Path":"/","Port":8080,"Host":"","Scheme":"HTTP","HTTPHeaders":null},"TCPSocket":null,"GRPC":null,"InitialDelaySeconds":0,"TimeoutSeconds":1"#), "{s}");
        assert!(s.starts_with(r#"{"Volumes":[{"Name":"v","HostPath":null,"EmptyDir":{"Medium":"","SizeLimit":null},"#), "{s}");
        assert!(
            s.contains(r#""SecurityContext":{"HostNetwork":true,"HostPID":false"#),
            "{s}"
        );
    }
}
