//! Pod template validation (`ValidatePodTemplateSpec` / `ValidatePodSpec` in
//! `pkg/apis/core/validation/validation.go`), in the same order and wording.
//!
//! Covered: template labels and annotations (incl. the pod deletion cost and mirror pod annotations),
//! terminationGracePeriodSeconds, volumes (name, uniqueness, exactly one source, the basic fields of
//! hostPath/secret/configMap/persistentVolumeClaim/nfs, item paths and modes), containers and init
//! containers (name, image, terminationMessagePolicy, ports, env names, volume mounts, imagePullPolicy,
//! duplicate names, probes' handler and numbers, restartPolicy rules), restartPolicy, dnsPolicy,
//! nodeSelector, imagePullSecrets, schedulingGates, serviceAccountName, nodeName,
//! activeDeadlineSeconds, hostname, subdomain, tolerations, priorityClassName, runtimeClassName,
//! preemptionPolicy, os, and "no ephemeral containers in a template".
//! Not covered (accepted as they are): resource quantities and names, security contexts, affinity
//! terms, DNS config, topology spread constraints, resource claims, pod-level resources, the remaining
//! volume source types' fields.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::goprint;
use crate::errors::{BadValue, FieldError, FieldErrorKind, FieldErrors};
use crate::json::{get, get_arr, get_i64, get_obj, get_str};
use crate::validation::names::{
    inclusive_range_error, is_dns1123_label, is_dns1123_subdomain, is_qualified_name,
    is_relaxed_env_var_name, is_valid_label_value, is_valid_port_name, is_valid_port_num,
};
use crate::validation::path::Path;
use crate::validation::{validate_annotations, validate_labels};

fn s(v: &str) -> BadValue {
    BadValue::Str(v.to_string())
}

fn invalid_each(errs: &mut FieldErrors, field: Path<'_>, value: &str, msgs: Vec<String>) {
    for m in msgs {
        errs.push(FieldError::invalid(field, s(value), m));
    }
}

fn not_found(field: Path<'_>, value: &str) -> FieldError {
    FieldError::new(FieldErrorKind::NotFound, field, s(value), "")
}

fn nonnegative(errs: &mut FieldErrors, field: Path<'_>, v: Option<i64>) {
    if let Some(v) = v
        && v < 0
    {
        errs.push(FieldError::invalid(
            field,
            BadValue::Int(v),
            "must be greater than or equal to 0",
        ));
    }
}

/// A required string that must be one of `supported`: `Required` when empty, else `NotSupported`.
fn one_of(errs: &mut FieldErrors, field: Path<'_>, value: &str, supported: &[&str]) {
    if value.is_empty() {
        errs.push(FieldError::required(field, ""));
    } else if !supported.contains(&value) {
        errs.push(FieldError::not_supported(field, s(value), supported));
    }
}

/// `ValidatePodTemplateSpec` at `path` (normally `spec.template`).
pub fn validate_pod_template_spec(template: Option<&Value>, path: &str) -> FieldErrors {
    let path = Path::new(path);
    let null = Value::Null;
    let template = template.unwrap_or(&null);
    let mut errs = validate_labels(
        get_obj(template, &["metadata", "labels"]),
        path.child("labels"),
    );
    let annotations_path = path.child("annotations");
    errs.extend(validate_annotations(
        get_obj(template, &["metadata", "annotations"]),
        annotations_path,
    ));
    let spec = get(template, &["spec"]).unwrap_or(&null);
    errs.extend(validate_pod_specific_annotations(
        template,
        spec,
        annotations_path,
    ));
    let spec_path = path.child("spec");
    errs.extend(pod_spec(spec, spec_path));
    if get_arr(spec, &["ephemeralContainers"]).is_some_and(|a| !a.is_empty()) {
        errs.push(FieldError::forbidden(
            spec_path.child("ephemeralContainers"),
            "ephemeral containers not allowed in pod template",
        ));
    }
    errs
}

/// The parts of `ValidatePodSpecificAnnotations` a template can trip.
fn validate_pod_specific_annotations(
    template: &Value,
    spec: &Value,
    path: Path<'_>,
) -> FieldErrors {
    let mut errs = Vec::new();
    let Some(annotations) = get_obj(template, &["metadata", "annotations"]) else {
        return errs;
    };
    if let Some(v) = annotations.get("kubernetes.io/config.mirror")
        && get_str(spec, &["nodeName"]).unwrap_or("").is_empty()
    {
        errs.push(FieldError::invalid(
            path.key("kubernetes.io/config.mirror"),
            s(v.as_str().unwrap_or("")),
            "must set spec.nodeName if mirror pod annotation is set",
        ));
    }
    if let Some(v) = annotations.get("controller.kubernetes.io/pod-deletion-cost") {
        let v = v.as_str().unwrap_or("");
        // strconv.ParseInt(v, 10, 32) after rejecting a leading '+' and surrounding spaces.
        let ok = !v.starts_with('+') && v.trim() == v && v.parse::<i32>().is_ok();
        if !ok {
            errs.push(FieldError::invalid(
                path.key("controller.kubernetes.io/pod-deletion-cost"),
                s(v),
                "must be a 32bit integer",
            ));
        }
    }
    errs
}

/// Volume source members in the order `validateVolumeSource` checks them, with the path element Go
/// reports for "more than 1 volume type" (two of them keep Go's historical spelling).
const VOLUME_SOURCE_ORDER: &[(&str, &str)] = &[
    ("emptyDir", "emptyDir"),
    ("hostPath", "hostPath"),
    ("gitRepo", "gitRepo"),
    ("gcePersistentDisk", "gcePersistentDisk"),
    ("awsElasticBlockStore", "awsElasticBlockStore"),
    ("secret", "secret"),
    ("nfs", "nfs"),
    ("iscsi", "iscsi"),
    ("glusterfs", "glusterfs"),
    ("flocker", "flocker"),
    ("persistentVolumeClaim", "persistentVolumeClaim"),
    ("rbd", "rbd"),
    ("cinder", "cinder"),
    ("cephfs", "cephFS"),
    ("quobyte", "quobyte"),
    ("downwardAPI", "downwarAPI"),
    ("fc", "fc"),
    ("flexVolume", "flexVolume"),
    ("configMap", "configMap"),
    ("azureFile", "azureFile"),
    ("vsphereVolume", "vsphereVolume"),
    ("photonPersistentDisk", "photonPersistentDisk"),
    ("portworxVolume", "portworxVolume"),
    ("azureDisk", "azureDisk"),
    ("storageos", "storageos"),
    ("projected", "projected"),
    ("scaleIO", "scaleIO"),
    ("csi", "csi"),
    ("ephemeral", "ephemeral"),
    ("image", "image"),
];

const FILE_MODE_ERR: &str = "must be a number between 0 and 0777 (octal), both inclusive";

fn validate_mode(errs: &mut FieldErrors, field: Path<'_>, mode: Option<i64>) {
    if let Some(m) = mode
        && !(0..=0o777).contains(&m)
    {
        errs.push(FieldError::invalid(field, BadValue::Int(m), FILE_MODE_ERR));
    }
}

/// `validateLocalDescendingPath`: relative, no `..` element.
fn validate_local_descending_path(errs: &mut FieldErrors, field: Path<'_>, p: &str) {
    if p.starts_with('/') {
        errs.push(FieldError::invalid(field, s(p), "must be a relative path"));
    }
    if p.split(['/', '\\']).any(|e| e == "..") {
        errs.push(FieldError::invalid(field, s(p), "must not contain '..'"));
    }
}

fn validate_key_to_paths(errs: &mut FieldErrors, path: Path<'_>, items: Option<&Vec<Value>>) {
    let items_path = path.child("items");
    for (i, item) in items
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let ip = items_path.index(i);
        if get_str(item, &["key"]).unwrap_or("").is_empty() {
            errs.push(FieldError::required(ip.child("key"), ""));
        }
        let p = get_str(item, &["path"]).unwrap_or("");
        if p.is_empty() {
            errs.push(FieldError::required(ip.child("path"), ""));
        } else {
            validate_local_descending_path(errs, ip.child("path"), p);
        }
        validate_mode(errs, ip.child("mode"), get_i64(item, &["mode"]));
    }
}

/// `validateVolumeSource` (type count and the common sources' fields).
fn validate_volume_source(vol: &Value, path: Path<'_>) -> FieldErrors {
    let mut errs = Vec::new();
    let mut count = 0;
    for (json, go_path) in VOLUME_SOURCE_ORDER {
        let Some(src) = get(vol, &[json]).filter(|v| !v.is_null()) else {
            continue;
        };
        if count > 0 {
            errs.push(FieldError::forbidden(
                path.child(go_path),
                "may not specify more than 1 volume type",
            ));
            continue;
        }
        count += 1;
        let sp = path.child(json);
        match *json {
            "hostPath" if get_str(src, &["path"]).unwrap_or("").is_empty() => {
                errs.push(FieldError::required(sp.child("path"), ""));
            }
            "secret" => {
                validate_key_to_paths(&mut errs, sp, get_arr(src, &["items"]));
                validate_mode(
                    &mut errs,
                    sp.child("defaultMode"),
                    get_i64(src, &["defaultMode"]),
                );
            }
            "configMap" => {
                if get_str(src, &["name"]).unwrap_or("").is_empty() {
                    errs.push(FieldError::required(sp.child("name"), ""));
                }
                validate_key_to_paths(&mut errs, sp, get_arr(src, &["items"]));
                validate_mode(
                    &mut errs,
                    sp.child("defaultMode"),
                    get_i64(src, &["defaultMode"]),
                );
            }
            "persistentVolumeClaim" if get_str(src, &["claimName"]).unwrap_or("").is_empty() => {
                errs.push(FieldError::required(sp.child("claimName"), ""));
            }
            "nfs" => {
                if get_str(src, &["server"]).unwrap_or("").is_empty() {
                    errs.push(FieldError::required(sp.child("server"), ""));
                }
                let p = get_str(src, &["path"]).unwrap_or("");
                if p.is_empty() {
                    errs.push(FieldError::required(sp.child("path"), ""));
                } else if !p.starts_with('/') {
                    errs.push(FieldError::invalid(
                        sp.child("path"),
                        s(p),
                        "must be an absolute path",
                    ));
                }
            }
            _ => {}
        }
    }
    if count == 0 {
        errs.push(FieldError::required(path, "must specify a volume type"));
    }
    errs
}

/// `ValidateVolumes`: returns the names of the valid volumes (for mount checks) and the errors.
fn validate_volumes(spec: &Value, path: Path<'_>) -> (HashSet<String>, FieldErrors) {
    let mut names = HashSet::new();
    let mut errs = Vec::new();
    for (i, vol) in get_arr(spec, &["volumes"])
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let ip = path.index(i);
        let name = get_str(vol, &["name"]).unwrap_or("");
        let mut el = validate_volume_source(vol, ip);
        if name.is_empty() {
            el.push(FieldError::required(ip.child("name"), ""));
        } else {
            invalid_each(&mut el, ip.child("name"), name, is_dns1123_label(name));
        }
        if names.contains(name) {
            el.push(FieldError::duplicate(ip.child("name"), s(name)));
        }
        if el.is_empty() {
            names.insert(name.to_string());
        } else {
            errs.extend(el);
        }
    }
    (names, errs)
}

/// `validateContainerCommon`: what regular and init containers share.
fn validate_container_common(c: &Value, path: Path<'_>, volumes: &HashSet<String>) -> FieldErrors {
    let mut errs = Vec::new();
    let name = get_str(c, &["name"]).unwrap_or("");
    if name.is_empty() {
        errs.push(FieldError::required(path.child("name"), ""));
    } else {
        invalid_each(&mut errs, path.child("name"), name, is_dns1123_label(name));
    }
    if get_str(c, &["image"]).unwrap_or("").is_empty() {
        errs.push(FieldError::required(path.child("image"), ""));
    }
    one_of(
        &mut errs,
        path.child("terminationMessagePolicy"),
        get_str(c, &["terminationMessagePolicy"]).unwrap_or(""),
        &["File", "FallbackToLogsOnError"],
    );
    errs.extend(validate_ports(c, path.child("ports")));
    errs.extend(validate_env(c, path.child("env")));
    errs.extend(validate_volume_mounts(
        c,
        path.child("volumeMounts"),
        volumes,
    ));
    one_of(
        &mut errs,
        path.child("imagePullPolicy"),
        get_str(c, &["imagePullPolicy"]).unwrap_or(""),
        &["Always", "IfNotPresent", "Never"],
    );
    errs
}

/// `validateContainerPorts`.
fn validate_ports(c: &Value, path: Path<'_>) -> FieldErrors {
    let mut errs = Vec::new();
    let mut seen = HashSet::new();
    for (i, p) in get_arr(c, &["ports"])
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let ip = path.index(i);
        let name = get_str(p, &["name"]).unwrap_or("");
        if !name.is_empty() {
            let msgs = is_valid_port_name(name);
            if !msgs.is_empty() {
                invalid_each(&mut errs, ip.child("name"), name, msgs);
            } else if !seen.insert(name) {
                errs.push(FieldError::duplicate(ip.child("name"), s(name)));
            }
        }
        let cp = get_i64(p, &["containerPort"]).unwrap_or(0);
        if cp == 0 {
            errs.push(FieldError::required(ip.child("containerPort"), ""));
        } else {
            for m in is_valid_port_num(cp) {
                errs.push(FieldError::invalid(
                    ip.child("containerPort"),
                    BadValue::Int(cp),
                    m,
                ));
            }
        }
        let hp = get_i64(p, &["hostPort"]).unwrap_or(0);
        if hp != 0 {
            for m in is_valid_port_num(hp) {
                errs.push(FieldError::invalid(
                    ip.child("hostPort"),
                    BadValue::Int(hp),
                    m,
                ));
            }
        }
        let proto = get_str(p, &["protocol"]).unwrap_or("");
        if proto.is_empty() {
            errs.push(FieldError::required(ip.child("protocol"), ""));
        } else if !["SCTP", "TCP", "UDP"].contains(&proto) {
            errs.push(FieldError::not_supported(
                ip.child("protocol"),
                s(proto),
                &["SCTP", "TCP", "UDP"],
            ));
        }
    }
    errs
}

/// `ValidateEnv` (relaxed names; the valueFrom sources are not checked further).
fn validate_env(c: &Value, path: Path<'_>) -> FieldErrors {
    let mut errs = Vec::new();
    for (i, e) in get_arr(c, &["env"])
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let name = get_str(e, &["name"]).unwrap_or("");
        let ip = path.index(i);
        let np = ip.child("name");
        if name.is_empty() {
            errs.push(FieldError::required(np, ""));
        } else {
            invalid_each(&mut errs, np, name, is_relaxed_env_var_name(name));
        }
    }
    errs
}

/// `ValidateVolumeMounts` (names, mount paths, uniqueness, subPath).
fn validate_volume_mounts(c: &Value, path: Path<'_>, volumes: &HashSet<String>) -> FieldErrors {
    let mut errs = Vec::new();
    let mut mount_paths = HashSet::new();
    for (i, m) in get_arr(c, &["volumeMounts"])
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let ip = path.index(i);
        let name = get_str(m, &["name"]).unwrap_or("");
        if name.is_empty() {
            errs.push(FieldError::required(ip.child("name"), ""));
        }
        if !volumes.contains(name) {
            errs.push(not_found(ip.child("name"), name));
        }
        let mp = get_str(m, &["mountPath"]).unwrap_or("");
        if mp.is_empty() {
            errs.push(FieldError::required(ip.child("mountPath"), ""));
        }
        if !mount_paths.insert(mp) {
            errs.push(FieldError::invalid(
                ip.child("mountPath"),
                s(mp),
                "must be unique",
            ));
        }
        let sub = get_str(m, &["subPath"]).unwrap_or("");
        if !sub.is_empty() {
            validate_local_descending_path(&mut errs, ip.child("subPath"), sub);
        }
        if !get_str(m, &["subPathExpr"]).unwrap_or("").is_empty() && !sub.is_empty() {
            errs.push(FieldError::invalid(
                ip.child("subPathExpr"),
                s(get_str(m, &["subPathExpr"]).unwrap_or("")),
                "subPathExpr and subPath are mutually exclusive",
            ));
        }
    }
    errs
}

/// `validateProbe` (+ the liveness/startup `successThreshold` rule, + readiness' grace period rule).
fn validate_probe(c: &Value, key: &str, path: Path<'_>) -> FieldErrors {
    let mut errs = Vec::new();
    let Some(p) = get(c, &[key]).filter(|v| !v.is_null()) else {
        return errs;
    };
    let fp = path.child(key);
    let handlers: Vec<&str> = ["exec", "httpGet", "tcpSocket", "grpc"]
        .into_iter()
        .filter(|h| get(p, &[h]).is_some_and(|v| !v.is_null()))
        .collect();
    if handlers.is_empty() {
        errs.push(FieldError::required(fp, "must specify a handler type"));
    }
    for extra in handlers.iter().skip(1) {
        errs.push(FieldError::forbidden(
            fp.child(extra),
            "may not specify more than 1 handler type",
        ));
    }
    for n in [
        "initialDelaySeconds",
        "timeoutSeconds",
        "periodSeconds",
        "successThreshold",
        "failureThreshold",
    ] {
        nonnegative(&mut errs, fp.child(n), get_i64(p, &[n]));
    }
    if let Some(g) = get_i64(p, &["terminationGracePeriodSeconds"]) {
        if key == "readinessProbe" {
            errs.push(FieldError::invalid(
                fp.child("terminationGracePeriodSeconds"),
                BadValue::Int(g),
                "must not be set for readinessProbes",
            ));
        } else if g <= 0 {
            errs.push(FieldError::invalid(
                fp.child("terminationGracePeriodSeconds"),
                BadValue::Int(g),
                "must be greater than 0",
            ));
        }
    }
    if key != "readinessProbe" {
        let st = get_i64(p, &["successThreshold"]).unwrap_or(0);
        if st != 1 {
            errs.push(FieldError::invalid(
                fp.child("successThreshold"),
                BadValue::Int(st),
                "must be 1",
            ));
        }
    }
    errs
}

/// `validateContainers`.
fn validate_containers(spec: &Value, path: Path<'_>, volumes: &HashSet<String>) -> FieldErrors {
    let mut errs = Vec::new();
    let containers = get_arr(spec, &["containers"])
        .map(Vec::as_slice)
        .unwrap_or_default();
    if containers.is_empty() {
        errs.push(FieldError::required(path, ""));
        return errs;
    }
    let mut names = HashSet::new();
    for (i, c) in containers.iter().enumerate() {
        let ip = path.index(i);
        errs.extend(validate_container_common(c, ip, volumes));
        let name = get_str(c, &["name"]).unwrap_or("");
        if !names.insert(name) {
            errs.push(FieldError::duplicate(ip.child("name"), s(name)));
        }
        for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
            errs.extend(validate_probe(c, probe, ip));
        }
        if get(c, &["restartPolicy"]).is_some_and(|v| !v.is_null()) {
            errs.push(FieldError::forbidden(
                ip.child("restartPolicy"),
                "may not be set for non-init containers",
            ));
        }
    }
    errs
}

/// `validateInitContainers` (names unique across init and regular containers; only sidecars, i.e.
/// `restartPolicy: Always`, may have probes).
fn validate_init_containers(
    spec: &Value,
    path: Path<'_>,
    volumes: &HashSet<String>,
) -> FieldErrors {
    let mut errs = Vec::new();
    let mut names: HashSet<&str> = get_arr(spec, &["containers"])
        .map(|a| a.iter().filter_map(|c| get_str(c, &["name"])).collect())
        .unwrap_or_default();
    let mut init_names = HashSet::new();
    for (i, c) in get_arr(spec, &["initContainers"])
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let ip = path.index(i);
        errs.extend(validate_container_common(c, ip, volumes));
        let name = get_str(c, &["name"]).unwrap_or("");
        if !init_names.insert(name) || names.contains(name) {
            errs.push(FieldError::duplicate(ip.child("name"), s(name)));
        }
        names.insert(name);
        match get_str(c, &["restartPolicy"]) {
            Some("Always") => {
                for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
                    errs.extend(validate_probe(c, probe, ip));
                }
            }
            other => {
                if let Some(p) = other {
                    errs.push(FieldError::not_supported(
                        ip.child("restartPolicy"),
                        s(p),
                        &["Always"],
                    ));
                }
                for key in [
                    "lifecycle",
                    "livenessProbe",
                    "readinessProbe",
                    "startupProbe",
                ] {
                    if get(c, &[key]).is_some_and(|v| !v.is_null()) {
                        errs.push(FieldError::forbidden(
                            ip.child(key),
                            "may not be set for init containers without restartPolicy=Always",
                        ));
                    }
                }
            }
        }
    }
    errs
}

/// `ValidateTolerations`.
fn validate_tolerations(spec: &Value, path: Path<'_>) -> FieldErrors {
    let mut errs = Vec::new();
    for (i, t) in get_arr(spec, &["tolerations"])
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let ip = path.index(i);
        let key = get_str(t, &["key"]).unwrap_or("");
        let op = get_str(t, &["operator"]).unwrap_or("");
        let value = get_str(t, &["value"]).unwrap_or("");
        let effect = get_str(t, &["effect"]).unwrap_or("");
        if !key.is_empty() {
            invalid_each(&mut errs, ip.child("key"), key, is_qualified_name(key));
        }
        if key.is_empty() && op != "Exists" {
            errs.push(FieldError::invalid(
                ip.child("operator"),
                s(op),
                "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ));
        }
        if get_i64(t, &["tolerationSeconds"]).is_some() && effect != "NoExecute" {
            errs.push(FieldError::invalid(
                ip.child("effect"),
                s(effect),
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
        match op {
            "Equal" | "" => {
                let msgs = is_valid_label_value(value);
                if !msgs.is_empty() {
                    errs.push(FieldError::invalid(
                        ip.child("operator"),
                        s(value),
                        msgs.join(";"),
                    ));
                }
            }
            "Exists" => {
                if !value.is_empty() {
                    errs.push(FieldError::invalid(
                        ip.child("operator"),
                        BadValue::Raw(goprint::toleration(Some(t))),
                        "value must be empty when `operator` is 'Exists'",
                    ));
                }
            }
            _ => errs.push(FieldError::not_supported(
                ip.child("operator"),
                s(op),
                &["Equal", "Exists"],
            )),
        }
        if !effect.is_empty() && !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&effect)
        {
            errs.push(FieldError::not_supported(
                ip.child("effect"),
                s(effect),
                &["NoSchedule", "PreferNoSchedule", "NoExecute"],
            ));
        }
    }
    errs
}

/// `ValidatePodSpec` at `path` (normally `spec.template.spec`).
pub fn validate_pod_spec(spec: &Value, path: &str) -> FieldErrors {
    pod_spec(spec, Path::new(path))
}

fn pod_spec(spec: &Value, path: Path<'_>) -> FieldErrors {
    let mut errs = Vec::new();
    if get(spec, &["terminationGracePeriodSeconds"]).is_none_or(Value::is_null) {
        errs.push(FieldError::required(
            path.child("terminationGracePeriodSeconds"),
            "",
        ));
    }
    let (volumes, verrs) = validate_volumes(spec, path.child("volumes"));
    errs.extend(verrs);
    errs.extend(validate_containers(
        spec,
        path.child("containers"),
        &volumes,
    ));
    errs.extend(validate_init_containers(
        spec,
        path.child("initContainers"),
        &volumes,
    ));
    one_of(
        &mut errs,
        path.child("restartPolicy"),
        get_str(spec, &["restartPolicy"]).unwrap_or(""),
        &["Always", "OnFailure", "Never"],
    );
    one_of(
        &mut errs,
        path.child("dnsPolicy"),
        get_str(spec, &["dnsPolicy"]).unwrap_or(""),
        &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
    );
    errs.extend(validate_labels(
        get_obj(spec, &["nodeSelector"]),
        path.child("nodeSelector"),
    ));
    let pull_secrets = path.child("imagePullSecrets");
    for (i, ps) in get_arr(spec, &["imagePullSecrets"])
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        if ps
            .as_object()
            .is_some_and(|o| o.keys().any(|k| k != "name"))
        {
            errs.push(FieldError::invalid(
                pull_secrets.index(i),
                BadValue::Raw(goprint::local_object_reference(Some(ps))),
                "only name may be set",
            ));
        }
    }
    let mut gates: HashMap<&str, ()> = HashMap::new();
    let gates_path = path.child("schedulingGates");
    for (i, g) in get_arr(spec, &["schedulingGates"])
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let name = get_str(g, &["name"]).unwrap_or("");
        let gp = gates_path.index(i);
        invalid_each(&mut errs, gp, name, is_qualified_name(name));
        if gates.insert(name, ()).is_some() {
            errs.push(FieldError::duplicate(gp, s(name)));
        }
    }
    for (key, check) in [
        (
            "serviceAccountName",
            is_dns1123_subdomain as fn(&str) -> Vec<String>,
        ),
        ("nodeName", is_dns1123_subdomain),
    ] {
        let v = get_str(spec, &[key]).unwrap_or("");
        if !v.is_empty() {
            invalid_each(&mut errs, path.child(key), v, check(v));
        }
    }
    if let Some(ads) = get_i64(spec, &["activeDeadlineSeconds"])
        && !(1..=i64::from(i32::MAX)).contains(&ads)
    {
        errs.push(FieldError::invalid(
            path.child("activeDeadlineSeconds"),
            BadValue::Int(ads),
            inclusive_range_error(1, i64::from(i32::MAX)),
        ));
    }
    for key in ["hostname", "subdomain"] {
        let v = get_str(spec, &[key]).unwrap_or("");
        if !v.is_empty() {
            invalid_each(&mut errs, path.child(key), v, is_dns1123_label(v));
        }
    }
    errs.extend(validate_tolerations(spec, path.child("tolerations")));
    for key in ["priorityClassName", "runtimeClassName"] {
        if let Some(v) = get_str(spec, &[key])
            && (key == "runtimeClassName" || !v.is_empty())
        {
            invalid_each(&mut errs, path.child(key), v, is_dns1123_subdomain(v));
        }
    }
    if let Some(p) = get_str(spec, &["preemptionPolicy"]) {
        one_of(
            &mut errs,
            path.child("preemptionPolicy"),
            p,
            &["PreemptLowerPriority", "Never"],
        );
    }
    if get(spec, &["os"]).is_some_and(|v| !v.is_null()) {
        let name = get_str(spec, &["os", "name"]).unwrap_or("");
        one_of(
            &mut errs,
            path.child("os").child("name"),
            name,
            &["linux", "windows"],
        );
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn msgs(e: &FieldErrors) -> Vec<String> {
        e.iter().map(FieldError::message).collect()
    }

    fn pod(containers: Value) -> Value {
        json!({"containers": containers, "restartPolicy": "Never", "dnsPolicy": "ClusterFirst",
               "terminationGracePeriodSeconds": 30})
    }

    fn ctr(name: &str) -> Value {
        json!({"name": name, "image": "i", "terminationMessagePolicy": "File", "imagePullPolicy": "Always"})
    }

    #[test]
    fn containers_are_required_and_named() {
        let e = validate_pod_spec(&pod(json!([])), "spec.template.spec");
        assert_eq!(msgs(&e), ["spec.template.spec.containers: Required value"]);
        let e = validate_pod_spec(
            &pod(
                json!([{"name": "", "terminationMessagePolicy": "File", "imagePullPolicy": "Always"}, ctr("Bad_Name"), ctr("main"), ctr("main")]),
            ),
            "p",
        );
        let m = msgs(&e);
        assert_eq!(m[0], "p.containers[0].name: Required value");
        assert_eq!(m[1], "p.containers[0].image: Required value");
        assert!(m[2].starts_with(
            "p.containers[1].name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 label"
        ));
        assert_eq!(m[3], "p.containers[3].name: Duplicate value: \"main\"");
        assert_eq!(m.len(), 4);
    }

    #[test]
    fn policies_ports_env_mounts() {
        let mut c = ctr("c");
        c["imagePullPolicy"] = json!("Sometimes");
        c["ports"] = json!([{"containerPort": 0, "protocol": "ICMP", "name": "http"}, {"containerPort": 70000, "protocol": "TCP", "name": "http"}]);
        c["env"] = json!([{"name": "A=B"}]);
        c["volumeMounts"] = json!([{"name": "missing", "mountPath": "/x"}]);
        let mut p = pod(json!([c]));
        p["restartPolicy"] = json!("Sometimes");
        p["dnsPolicy"] = json!("");
        let m = msgs(&validate_pod_spec(&p, "s"));
        assert_eq!(
            m,
            [
                "s.containers[0].ports[0].containerPort: Required value",
                "s.containers[0].ports[0].protocol: Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
                "s.containers[0].ports[1].name: Duplicate value: \"http\"",
                "s.containers[0].ports[1].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
                "s.containers[0].env[0].name: Invalid value: \"A=B\": a valid environment variable name must consist only of printable ASCII characters other than '='",
                "s.containers[0].volumeMounts[0].name: Not found: \"missing\"",
                "s.containers[0].imagePullPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"IfNotPresent\", \"Never\"",
                "s.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
                "s.dnsPolicy: Required value",
            ]
        );
    }

    #[test]
    fn volumes_and_tolerations() {
        let mut p = pod(json!([ctr("c")]));
        p["volumes"] = json!([{"name": "a", "emptyDir": {}}, {"name": "b", "emptyDir": {}, "secret": {}}, {"name": "c"},
                              {"name": "a", "emptyDir": {}}, {"name": "d", "configMap": {"defaultMode": 1000}}]);
        p["tolerations"] = json!([{"operator": "Equal", "value": "x"}, {"key": "k", "operator": "Exists", "value": "v"},
                                  {"key": "k", "operator": "Equal", "tolerationSeconds": 5, "effect": "Bogus"}]);
        p["activeDeadlineSeconds"] = json!(0);
        let m = msgs(&validate_pod_spec(&p, "s"));
        assert_eq!(
            m[0],
            "s.volumes[1].secret: Forbidden: may not specify more than 1 volume type"
        );
        assert_eq!(
            m[1],
            "s.volumes[2]: Required value: must specify a volume type"
        );
        assert_eq!(m[2], "s.volumes[3].name: Duplicate value: \"a\"");
        assert_eq!(m[3], "s.volumes[4].configMap.name: Required value");
        assert_eq!(
            m[4],
            "s.volumes[4].configMap.defaultMode: Invalid value: 1000: must be a number between 0 and 0777 (octal), both inclusive"
        );
        assert_eq!(
            m[5],
            "s.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive"
        );
        assert_eq!(
            m[6],
            "s.tolerations[0].operator: Invalid value: \"Equal\": operator must be Exists when `key` is empty, which means \"match all values and all keys\""
        );
        assert_eq!(
            m[7],
            "s.tolerations[1].operator: Invalid value: {\"Key\":\"k\",\"Operator\":\"Exists\",\"Value\":\"v\",\"Effect\":\"\",\"TolerationSeconds\":null}: value must be empty when `operator` is 'Exists'"
        );
        assert_eq!(
            m[8],
            "s.tolerations[2].effect: Invalid value: \"Bogus\": effect must be 'NoExecute' when `tolerationSeconds` is set"
        );
        assert!(m[9].starts_with("s.tolerations[2].effect: Unsupported value: \"Bogus\""));
        assert_eq!(m.len(), 10);
    }

    #[test]
    fn template_labels_and_probes() {
        let mut c = ctr("c");
        c["livenessProbe"] = json!({"successThreshold": 2, "periodSeconds": -1});
        let t = json!({"metadata": {"labels": {"job-name": "n".repeat(64)}, "annotations": {"controller.kubernetes.io/pod-deletion-cost": "x"}},
                       "spec": pod(json!([c]))});
        let m = msgs(&validate_pod_template_spec(Some(&t), "spec.template"));
        assert_eq!(
            m[0],
            format!(
                "spec.template.labels: Invalid value: \"{}\": must be no more than 63 bytes",
                "n".repeat(64)
            )
        );
        assert_eq!(
            m[1],
            "spec.template.annotations[controller.kubernetes.io/pod-deletion-cost]: Invalid value: \"x\": must be a 32bit integer"
        );
        assert_eq!(
            m[2],
            "spec.template.spec.containers[0].livenessProbe: Required value: must specify a handler type"
        );
        assert_eq!(
            m[3],
            "spec.template.spec.containers[0].livenessProbe.periodSeconds: Invalid value: -1: must be greater than or equal to 0"
        );
        assert_eq!(
            m[4],
            "spec.template.spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1"
        );
    }
}
