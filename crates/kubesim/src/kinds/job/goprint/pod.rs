//! Schema of the internal `core.PodSpec` and the pod-level types it holds (security context,
//! affinity, tolerations, DNS config, ...), for the field-error renderer in `goprint`.

use super::container::{
    CONTAINER, PROFILE, RESOURCE_REQUIREMENTS, SE_LINUX_OPTIONS, WINDOWS_OPTIONS,
};
use super::volume::VOLUME;
use super::{F, K, LABEL_SELECTOR, LOCAL_OBJECT_REFERENCE};

const SYSCTL: &[F] = &[F("Name", "name", K::Str), F("Value", "value", K::Str)];
/// Internal `PodSecurityContext`: the v1 PodSpec's host namespace fields live here (moved in by
/// [`super::internal_pod_spec`]).
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
pub(super) const TOLERATION: &[F] = &[
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
pub(super) const POD_SPEC: &[F] = &[
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
