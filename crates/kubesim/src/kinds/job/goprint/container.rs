//! Schemas of the internal `core.Container` and the types it holds (ports, env, resources,
//! probes, lifecycle, security context), for the field-error renderer in `goprint`.

use super::{F, K, LOCAL_OBJECT_REFERENCE};

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
pub(super) const OBJECT_FIELD_SELECTOR: &[F] = &[
    F("APIVersion", "apiVersion", K::Str),
    F("FieldPath", "fieldPath", K::Str),
];
pub(super) const RESOURCE_FIELD_SELECTOR: &[F] = &[
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
pub(super) const RESOURCE_REQUIREMENTS: &[F] = &[
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
pub(super) const SE_LINUX_OPTIONS: &[F] = &[
    F("User", "user", K::Str),
    F("Role", "role", K::Str),
    F("Type", "type", K::Str),
    F("Level", "level", K::Str),
];
pub(super) const WINDOWS_OPTIONS: &[F] = &[
    F("GMSACredentialSpecName", "gmsaCredentialSpecName", K::Plain),
    F("GMSACredentialSpec", "gmsaCredentialSpec", K::Plain),
    F("RunAsUserName", "runAsUserName", K::Plain),
    F("HostProcess", "hostProcess", K::Plain),
];
pub(super) const PROFILE: &[F] = &[
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
pub(super) const CONTAINER: &[F] = &[
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
