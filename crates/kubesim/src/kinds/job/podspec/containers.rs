//! Containers and init containers (`validateContainers` / `validateInitContainers`): names,
//! image, policies, ports, env, volume mounts and probes.

use std::collections::HashSet;

use serde_json::Value;

use super::volumes::validate_local_descending_path;
use super::{invalid_each, nonnegative, not_found, one_of, s};
use crate::errors::{BadValue, FieldError, FieldErrors};
use crate::json::{get, get_arr, get_i64, get_str};
use crate::validation::names::{
    is_dns1123_label, is_relaxed_env_var_name, is_valid_port_name, is_valid_port_num,
};
use crate::validation::path::Path;

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
pub(super) fn validate_containers(
    spec: &Value,
    path: Path<'_>,
    volumes: &HashSet<String>,
) -> FieldErrors {
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
pub(super) fn validate_init_containers(
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
