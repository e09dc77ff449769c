//! Renders a Job's nested values the way the real server prints them inside field errors.
//!
//! Validation runs on the *internal* Go types, and apimachinery renders a struct-valued `BadValue` with
//! `json.Marshal`. Internal types carry no json tags, so the output uses Go field names in Go field
//! order, never omits anything (`null` for nil pointers, slices and maps, zero values otherwise), and
//! promotes the fields of embedded structs (`ProbeHandler`, `VolumeSource`, `LocalObjectReference`,
//! `metav1.ObjectMeta`). Versioned types embedded in internal ones (`metav1.ObjectMeta`,
//! `metav1.LabelSelector`) keep their json tags and `omitempty`.
//!
//! The schemas (here and in the submodules) follow `pkg/apis/core/types.go` and
//! `pkg/apis/batch/types.go` of v1.36; the recordings pin `PodTemplateSpec`, `PodSpec`,
//! `Container`, `ResourceRequirements`, `PodSecurityContext`, `SuccessPolicy` and
//! `UncountedTerminatedPods`. Limits: volume sources other than the common ones (hostPath,
//! emptyDir, secret, configMap, persistentVolumeClaim, nfs, downwardAPI, projected, csi, image) and
//! a few rarely used nested types are printed as their versioned JSON (sorted keys, json names);
//! `resource.Quantity` values are printed as written, not re-canonicalised.

mod container;
mod pod;
mod volume;

use serde_json::{Map, Value};

use crate::errors::{go_json, write_go_string};
use pod::{POD_SPEC, TOLERATION};

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
