//! Scheme defaulting for batch/v1 Jobs and their pod template, as a v1.36 server applies it
//! (`pkg/apis/batch/v1/defaults.go`, `pkg/apis/core/v1/defaults.go`).
//!
//! Covered:
//! - JobSpec: completions/parallelism, backoffLimit (6, or MaxInt32 with backoffLimitPerIndex),
//!   completionMode, suspend, manualSelector, podReplacementPolicy, podFailurePolicy
//!   `onPodConditions[].status`.
//! - PodSpec: dnsPolicy, restartPolicy, securityContext `{}`, terminationGracePeriodSeconds,
//!   schedulerName.
//! - Containers and init containers: imagePullPolicy (from the image tag), terminationMessagePath and
//!   -Policy, `resources: {}` (a by-value struct in Go, so always serialised), ports' protocol,
//!   env `fieldRef.apiVersion` and `resourceFieldRef.divisor`, probe timing defaults, probe and lifecycle
//!   `httpGet` path and scheme.
//! - Volumes: a source-less volume becomes `emptyDir: {}`; defaultMode 0644 for secret, configMap,
//!   downwardAPI and projected; hostPath `type: ""`; projected service account token expiry; downward API
//!   `fieldRef.apiVersion`; the iscsi/rbd/azureDisk/scaleIO knobs; ephemeral claim templates'
//!   `volumeMode`.
//!
//! Quantities (their canonical form and `SetDefaults_ResourceList`'s rounding to a milli-unit) are
//! handled when the body is decoded, see `super::quantity` and `JobStrategy::decode`.
//!
//! The Job-labels-from-template default is not applied here: Go aliases the template's label map, so
//! the labels the Job ends up with depend on when the selector is generated. `prepare_for_create` and
//! `prepare_for_update` reproduce that (see `super::copy_template_labels`).

use serde_json::{Map, Value, json};

/// Inserts `v` at `key` when the key is absent or null (a nil Go pointer or zero value).
fn set_default(m: &mut Map<String, Value>, key: &str, v: Value) {
    match m.get(key) {
        None | Some(Value::Null) => {
            m.insert(key.to_string(), v);
        }
        Some(_) => {}
    }
}

/// For string fields defaulted when empty (`if obj.X == ""`).
fn set_default_str(m: &mut Map<String, Value>, key: &str, v: &str) {
    match m.get(key) {
        None | Some(Value::Null) => {
            m.insert(key.to_string(), Value::String(v.to_string()));
        }
        Some(Value::String(s)) if s.is_empty() => {
            m.insert(key.to_string(), Value::String(v.to_string()));
        }
        Some(_) => {}
    }
}

/// For int32 fields defaulted when zero (`if obj.X == 0`).
fn set_default_nonzero(m: &mut Map<String, Value>, key: &str, v: i64) {
    if m.get(key).and_then(Value::as_i64).unwrap_or(0) == 0 {
        m.insert(key.to_string(), json!(v));
    }
}

/// The object at `key`, created (or replacing null) when missing.
fn obj_entry<'a>(m: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    let e = m.entry(key.to_string()).or_insert(Value::Null);
    if e.is_null() {
        *e = Value::Object(Map::new());
    }
    e.as_object_mut()
}

fn each_obj_in<'a>(
    m: &'a mut Map<String, Value>,
    key: &str,
) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    m.get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flat_map(|a| a.iter_mut().filter_map(Value::as_object_mut))
}

/// `SetDefaults_Job` plus the pod template's defaults.
pub fn default_job(job: &mut Value) {
    let Some(job) = job.as_object_mut() else {
        return;
    };
    let Some(spec) = obj_entry(job, "spec") else {
        return;
    };
    let unset = |m: &Map<String, Value>, k: &str| matches!(m.get(k), None | Some(Value::Null));
    if unset(spec, "completions") && unset(spec, "parallelism") {
        spec.insert("completions".into(), json!(1));
        spec.insert("parallelism".into(), json!(1));
    }
    set_default(spec, "parallelism", json!(1));
    if unset(spec, "backoffLimit") {
        let limit = if unset(spec, "backoffLimitPerIndex") {
            6
        } else {
            i64::from(i32::MAX)
        };
        spec.insert("backoffLimit".into(), json!(limit));
    }
    set_default(spec, "completionMode", json!("NonIndexed"));
    set_default(spec, "suspend", json!(false));
    let has_pfp = !unset(spec, "podFailurePolicy");
    if let Some(pfp) = spec
        .get_mut("podFailurePolicy")
        .and_then(Value::as_object_mut)
    {
        for rule in each_obj_in(pfp, "rules") {
            for pattern in each_obj_in(rule, "onPodConditions") {
                set_default_str(pattern, "status", "True");
            }
        }
    }
    set_default(
        spec,
        "podReplacementPolicy",
        json!(if has_pfp {
            "Failed"
        } else {
            "TerminatingOrFailed"
        }),
    );
    set_default(spec, "manualSelector", json!(false));
    if let Some(template) = obj_entry(spec, "template")
        && let Some(pod) = obj_entry(template, "spec")
    {
        default_pod_spec(pod);
    }
}

/// `SetDefaults_PodSpec` and everything nested in it.
pub fn default_pod_spec(pod: &mut Map<String, Value>) {
    set_default_str(pod, "dnsPolicy", "ClusterFirst");
    set_default_str(pod, "restartPolicy", "Always");
    set_default(pod, "securityContext", json!({}));
    set_default(pod, "terminationGracePeriodSeconds", json!(30));
    set_default_str(pod, "schedulerName", "default-scheduler");
    for c in each_obj_in(pod, "initContainers") {
        default_container(c);
    }
    for c in each_obj_in(pod, "containers") {
        default_container(c);
    }
    for v in each_obj_in(pod, "volumes") {
        default_volume(v);
    }
}

/// `SetDefaults_Container` and nested defaults.
fn default_container(c: &mut Map<String, Value>) {
    if c.get("imagePullPolicy")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        let image = c.get("image").and_then(Value::as_str).unwrap_or("");
        let policy = if image_tag_is_latest(image) {
            "Always"
        } else {
            "IfNotPresent"
        };
        c.insert("imagePullPolicy".into(), json!(policy));
    }
    set_default_str(c, "terminationMessagePath", "/dev/termination-log");
    set_default_str(c, "terminationMessagePolicy", "File");
    set_default(c, "resources", json!({}));
    for p in each_obj_in(c, "ports") {
        set_default_str(p, "protocol", "TCP");
    }
    for e in each_obj_in(c, "env") {
        if let Some(from) = e.get_mut("valueFrom").and_then(Value::as_object_mut) {
            default_field_refs(from);
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = c.get_mut(probe).and_then(Value::as_object_mut) {
            set_default_nonzero(p, "timeoutSeconds", 1);
            set_default_nonzero(p, "periodSeconds", 10);
            set_default_nonzero(p, "successThreshold", 1);
            set_default_nonzero(p, "failureThreshold", 3);
            default_http_get(p);
        }
    }
    if let Some(lc) = c.get_mut("lifecycle").and_then(Value::as_object_mut) {
        for hook in ["postStart", "preStop"] {
            if let Some(h) = lc.get_mut(hook).and_then(Value::as_object_mut) {
                default_http_get(h);
            }
        }
    }
}

/// `SetDefaults_ObjectFieldSelector` (apiVersion v1) and the by-value `divisor` of a resource field
/// selector, which Go serialises as `"0"` when unset.
fn default_field_refs(m: &mut Map<String, Value>) {
    if let Some(f) = m.get_mut("fieldRef").and_then(Value::as_object_mut) {
        set_default_str(f, "apiVersion", "v1");
    }
    if let Some(r) = m.get_mut("resourceFieldRef").and_then(Value::as_object_mut) {
        set_default(r, "divisor", json!("0"));
    }
}

/// `SetDefaults_HTTPGetAction`.
fn default_http_get(handler: &mut Map<String, Value>) {
    if let Some(h) = handler.get_mut("httpGet").and_then(Value::as_object_mut) {
        set_default_str(h, "path", "/");
        set_default_str(h, "scheme", "HTTP");
    }
}

/// The v1 `VolumeSource` members, to tell a source-less volume.
const VOLUME_SOURCES: &[&str] = &[
    "hostPath",
    "emptyDir",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "persistentVolumeClaim",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "downwardAPI",
    "fc",
    "azureFile",
    "configMap",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "projected",
    "portworxVolume",
    "scaleIO",
    "storageos",
    "csi",
    "ephemeral",
    "image",
];

/// `SetDefaults_Volume` and the volume source defaults.
fn default_volume(v: &mut Map<String, Value>) {
    if VOLUME_SOURCES
        .iter()
        .all(|s| matches!(v.get(*s), None | Some(Value::Null)))
    {
        v.insert("emptyDir".into(), json!({}));
    }
    const MODE_0644: i64 = 0o644;
    for src in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(s) = v.get_mut(src).and_then(Value::as_object_mut) {
            set_default(s, "defaultMode", json!(MODE_0644));
        }
    }
    if let Some(h) = v.get_mut("hostPath").and_then(Value::as_object_mut) {
        set_default(h, "type", json!(""));
    }
    if let Some(d) = v.get_mut("downwardAPI").and_then(Value::as_object_mut) {
        for item in each_obj_in(d, "items") {
            default_field_refs(item);
        }
    }
    if let Some(p) = v.get_mut("projected").and_then(Value::as_object_mut) {
        for source in each_obj_in(p, "sources") {
            if let Some(t) = source
                .get_mut("serviceAccountToken")
                .and_then(Value::as_object_mut)
            {
                set_default(t, "expirationSeconds", json!(3600));
            }
            if let Some(d) = source.get_mut("downwardAPI").and_then(Value::as_object_mut) {
                for item in each_obj_in(d, "items") {
                    default_field_refs(item);
                }
            }
        }
    }
    if let Some(i) = v.get_mut("iscsi").and_then(Value::as_object_mut) {
        set_default_str(i, "iscsiInterface", "default");
    }
    if let Some(r) = v.get_mut("rbd").and_then(Value::as_object_mut) {
        set_default_str(r, "pool", "rbd");
        set_default_str(r, "user", "admin");
        set_default_str(r, "keyring", "/etc/ceph/keyring");
    }
    if let Some(a) = v.get_mut("azureDisk").and_then(Value::as_object_mut) {
        set_default(a, "cachingMode", json!("ReadWrite"));
        set_default(a, "fsType", json!("ext4"));
        set_default(a, "readOnly", json!(false));
        set_default(a, "kind", json!("Shared"));
    }
    if let Some(s) = v.get_mut("scaleIO").and_then(Value::as_object_mut) {
        set_default_str(s, "storageMode", "ThinProvisioned");
        set_default_str(s, "fsType", "xfs");
    }
    if let Some(spec) = v
        .get_mut("ephemeral")
        .and_then(|e| e.get_mut("volumeClaimTemplate"))
        .and_then(|t| t.get_mut("spec"))
        .and_then(Value::as_object_mut)
    {
        set_default(spec, "volumeMode", json!("Filesystem"));
    }
}

/// Whether the kubelet would pull this image as `:latest` (`parsers.ParseImageName`): an explicit
/// `latest` tag, or neither tag nor digest. An unparsable reference counts as not latest.
pub fn image_tag_is_latest(image: &str) -> bool {
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    // The tag is after the last ':' that follows the last '/' (a ':' before it is a registry port).
    let last = name.rsplit('/').next().unwrap_or(name);
    let (repo_path, tag) = match last.rsplit_once(':') {
        Some((_, t)) => (&name[..name.len() - t.len() - 1], Some(t)),
        None => (name, None),
    };
    if !reference_is_valid(repo_path, tag) {
        return false;
    }
    match tag {
        Some(t) => t == "latest",
        None => digest.is_none(),
    }
}

/// A light version of the docker reference grammar: non-empty, lowercase path components (the registry
/// host may have upper case and a port), a tag of `[\w][\w.-]{0,127}`.
fn reference_is_valid(repo: &str, tag: Option<&str>) -> bool {
    if repo.is_empty() {
        return false;
    }
    let mut parts = repo.split('/').peekable();
    let mut first = true;
    while let Some(p) = parts.next() {
        let is_host = first
            && parts.peek().is_some()
            && (p.contains('.') || p.contains(':') || p == "localhost");
        first = false;
        let ok = if is_host {
            !p.is_empty()
                && p.bytes()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b':'))
        } else {
            !p.is_empty()
                && p.bytes().all(|c| {
                    c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'.' | b'_' | b'-')
                })
                && p.bytes().next().is_some_and(|c| c.is_ascii_alphanumeric())
        };
        if !ok {
            return false;
        }
    }
    match tag {
        None => true,
        Some(t) => {
            !t.is_empty()
                && t.len() <= 128
                && t.bytes()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
                && t.bytes()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_pull_policy_follows_the_tag() {
        assert!(image_tag_is_latest("busybox"));
        assert!(image_tag_is_latest("busybox:latest"));
        assert!(image_tag_is_latest("localhost:5000/team/app"));
        assert!(!image_tag_is_latest("localhost:5000/team/app:1.0"));
        assert!(!image_tag_is_latest("registry.k8s.io/busybox:1.36"));
        assert!(!image_tag_is_latest("busybox@sha256:abc"));
        assert!(image_tag_is_latest("busybox:latest@sha256:abc"));
        assert!(!image_tag_is_latest("Busybox"));
        assert!(!image_tag_is_latest(""));
    }

    #[test]
    fn job_spec_defaults() {
        let mut j = json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}});
        default_job(&mut j);
        let s = &j["spec"];
        assert_eq!(s["completions"], 1);
        assert_eq!(s["parallelism"], 1);
        assert_eq!(s["backoffLimit"], 6);
        assert_eq!(s["completionMode"], "NonIndexed");
        assert_eq!(s["suspend"], false);
        assert_eq!(s["manualSelector"], false);
        assert_eq!(s["podReplacementPolicy"], "TerminatingOrFailed");
        let pod = &s["template"]["spec"];
        assert_eq!(pod["restartPolicy"], "Always");
        assert_eq!(pod["dnsPolicy"], "ClusterFirst");
        assert_eq!(pod["securityContext"], json!({}));
        assert_eq!(pod["terminationGracePeriodSeconds"], 30);
        assert_eq!(pod["schedulerName"], "default-scheduler");
        let c = &pod["containers"][0];
        assert_eq!(c["imagePullPolicy"], "Always");
        assert_eq!(c["resources"], json!({}));
        assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
        assert_eq!(c["terminationMessagePolicy"], "File");

        let mut j = json!({"spec": {"parallelism": 0, "backoffLimitPerIndex": 1,
            "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}}});
        default_job(&mut j);
        let s = &j["spec"];
        assert!(s.get("completions").is_none());
        assert_eq!(s["parallelism"], 0);
        assert_eq!(s["backoffLimit"], 2147483647);
        assert_eq!(s["podReplacementPolicy"], "Failed");
        assert_eq!(
            s["podFailurePolicy"]["rules"][0]["onPodConditions"][0]["status"],
            "True"
        );

        let mut j = json!({"spec": {"completions": 3, "parallelism": null}});
        default_job(&mut j);
        assert_eq!(j["spec"]["parallelism"], 1);
        assert_eq!(j["spec"]["completions"], 3);
    }

    #[test]
    fn nested_pod_defaults() {
        let mut pod = json!({
            "containers": [{"name": "c", "image": "x:1",
                "ports": [{"containerPort": 80}],
                "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                        {"name": "M", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}}],
                "readinessProbe": {"httpGet": {"port": 80}},
                "lifecycle": {"preStop": {"httpGet": {"port": 80, "path": "/stop"}}}}],
            "volumes": [{"name": "a"}, {"name": "s", "secret": {"secretName": "x"}},
                        {"name": "p", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}},
                        {"name": "h", "hostPath": {"path": "/x"}}]
        });
        default_pod_spec(pod.as_object_mut().unwrap());
        let c = &pod["containers"][0];
        assert_eq!(c["imagePullPolicy"], "IfNotPresent");
        assert_eq!(c["ports"][0]["protocol"], "TCP");
        assert_eq!(c["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
        assert_eq!(c["env"][1]["valueFrom"]["resourceFieldRef"]["divisor"], "0");
        assert_eq!(
            c["readinessProbe"],
            json!({"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1,
                   "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3})
        );
        assert_eq!(c["lifecycle"]["preStop"]["httpGet"]["path"], "/stop");
        assert_eq!(pod["volumes"][0]["emptyDir"], json!({}));
        assert_eq!(pod["volumes"][1]["secret"]["defaultMode"], 420);
        assert_eq!(pod["volumes"][2]["projected"]["defaultMode"], 420);
        assert_eq!(
            pod["volumes"][2]["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"],
            3600
        );
        assert_eq!(pod["volumes"][3]["hostPath"]["type"], "");
    }
}
