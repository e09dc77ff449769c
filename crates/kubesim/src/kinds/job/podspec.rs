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

mod containers;
mod volumes;

use std::collections::HashMap;

use serde_json::Value;

use super::goprint;
use crate::errors::{BadValue, FieldError, FieldErrorKind, FieldErrors};
use crate::json::{get, get_arr, get_i64, get_obj, get_str};
use crate::validation::names::{
    inclusive_range_error, is_dns1123_label, is_dns1123_subdomain, is_qualified_name,
    is_valid_label_value,
};
use crate::validation::path::Path;
use crate::validation::{validate_annotations, validate_labels};
use containers::{validate_containers, validate_init_containers};
use volumes::validate_volumes;

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
