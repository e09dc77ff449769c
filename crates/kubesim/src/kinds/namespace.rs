//! core/v1 Namespaces (cluster-scoped, DNS-1123 *label* names) and the NamespaceLifecycle admission
//! answers other kinds need.
//!
//! Sources: `pkg/apis/core/v1/defaults.go` (`kubernetes.io/metadata.name` label, phase Active),
//! `pkg/registry/core/namespace/strategy.go` (PrepareForCreate adds the `kubernetes` finalizer,
//! updates keep spec.finalizers and status, the `/status` and `/finalize` strategies),
//! `pkg/registry/core/namespace/storage/storage.go` (DELETE switches to Terminating instead of
//! removing; the object goes away once `spec.finalizers` is empty),
//! `plugin/pkg/admission/namespace/lifecycle` (404 for a missing namespace, 403 while terminating,
//! immortal namespaces). Held to `namespaces.json`. Without a controller manager nothing empties
//! `spec.finalizers`, so a deleted namespace stays Terminating (no conditions are added) until a
//! client calls `/finalize`.

use serde_json::{Value, json};

use super::common::{self, index};
use super::{DeleteAction, NameRule, ResourceInfo, Strategy, TableSpec};
use crate::errors::{ApiError, BadValue, FieldError, FieldErrors};
use crate::json::{ensure_obj, meta_str, str_at, strings};
use crate::validation::names;

pub const LABEL_METADATA_NAME: &str = "kubernetes.io/metadata.name";
pub const FINALIZER_KUBERNETES: &str = "kubernetes";
pub const PHASE_ACTIVE: &str = "Active";
pub const PHASE_TERMINATING: &str = "Terminating";

/// Namespaces NamespaceLifecycle refuses to delete.
pub const IMMORTAL_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public"];

pub struct NamespaceStrategy {
    info: ResourceInfo,
}

impl Default for NamespaceStrategy {
    fn default() -> Self {
        Self::new()
    }
}

impl NamespaceStrategy {
    pub fn new() -> Self {
        Self {
            info: ResourceInfo {
                group: String::new(),
                version: "v1".into(),
                kind: "Namespace".into(),
                plural: "namespaces".into(),
                singular: "namespace".into(),
                namespaced: false,
                short_names: vec!["ns".into()],
                categories: Vec::new(),
                // No deletecollection for namespaces.
                verbs: [
                    "create", "delete", "get", "list", "patch", "update", "watch",
                ]
                .into_iter()
                .map(String::from)
                .collect(),
                status_subresource: true,
                storage_version_hash: Some("Q3oi5N2YM8M=".into()),
            },
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Admission (NamespaceLifecycle) for requests on namespaced resources.

/// 404 `namespaces "x" not found`: a create in a namespace that does not exist.
pub fn namespace_not_found(namespace: &str) -> ApiError {
    ApiError::not_found("", "namespaces", namespace)
}

/// 403 for a create in a terminating namespace:
/// `secrets "s2" is forbidden: unable to create new content in namespace x because it is being terminated`,
/// with a `NamespaceTerminating` cause. `name` is the object's name (its `generateName` if it has
/// no name yet, `Unknown` if neither), as admission's `extractResourceName` picks it.
pub fn namespace_terminating(group: &str, plural: &str, name: &str, namespace: &str) -> ApiError {
    let mut err = ApiError::forbidden(
        group,
        plural,
        name,
        &format!(
            "unable to create new content in namespace {namespace} because it is being terminated"
        ),
    );
    if let Some(Value::Object(d)) = &mut err.details {
        d.insert(
            "causes".into(),
            json!([{
                "reason": "NamespaceTerminating",
                "message": format!("namespace {namespace} is being terminated"),
                "field": "metadata.namespace",
            }]),
        );
    }
    err
}

/// The name admission reports for `obj`: its name, else its generateName, else `Unknown`.
pub fn admission_name(obj: &Value) -> &str {
    let name = meta_str(obj, "name");
    if !name.is_empty() {
        return name;
    }
    let generate = str_at(obj, &["metadata", "generateName"]);
    if !generate.is_empty() {
        return generate;
    }
    "Unknown"
}

/// NamespaceLifecycle for a CREATE of a namespaced object: `terminating` is whether the stored
/// Namespace is ([`is_terminating`]), `None` when there is none. Updates and deletes in a terminating
/// namespace are allowed.
pub fn admit_create(
    terminating: Option<bool>,
    namespace: &str,
    group: &str,
    plural: &str,
    obj: &Value,
) -> Result<(), ApiError> {
    let Some(terminating) = terminating else {
        return Err(namespace_not_found(namespace));
    };
    if terminating {
        return Err(namespace_terminating(
            group,
            plural,
            admission_name(obj),
            namespace,
        ));
    }
    Ok(())
}

/// NamespaceLifecycle for a DELETE of a Namespace: `default`, `kube-system` and `kube-public`
/// may not be deleted.
pub fn admit_delete(name: &str) -> Result<(), ApiError> {
    if IMMORTAL_NAMESPACES.contains(&name) {
        return Err(ApiError::forbidden(
            "",
            "namespaces",
            name,
            "this namespace may not be deleted",
        ));
    }
    Ok(())
}

pub fn is_terminating(ns: &Value) -> bool {
    str_at(ns, &["status", "phase"]) == PHASE_TERMINATING
}

/// [`is_terminating`] of a stored Namespace's bytes (`Stored::json`), parsing only its status: every
/// namespaced create asks, and a whole Namespace costs more to parse than the create's admission.
pub fn stored_is_terminating(json: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Top<'a> {
        #[serde(borrow)]
        status: Option<&'a serde_json::value::RawValue>,
    }
    // Stored objects are serialised JSON objects without repeated keys, so this finds the `status`
    // parsing the whole object would.
    let Ok(top) = serde_json::from_slice::<Top<'_>>(json) else {
        return false;
    };
    let status = top
        .status
        .and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok());
    status.is_some_and(|s| is_terminating(&json!({ "status": s })))
}

fn spec_finalizers(obj: &Value) -> Vec<Value> {
    obj.pointer("/spec/finalizers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn set_label(obj: &mut Value) {
    let name = meta_str(obj, "name").to_string();
    if name.is_empty() {
        // Nameless (generateName) namespaces get the label once the name exists (Canonicalize).
        return;
    }
    if let Some(meta) = ensure_obj(obj, "metadata") {
        let labels = meta
            .entry("labels")
            .or_insert_with(|| Value::Object(Default::default()));
        if !labels.is_object() {
            *labels = Value::Object(Default::default());
        }
        if let Some(l) = labels.as_object_mut() {
            l.insert(LABEL_METADATA_NAME.into(), Value::String(name));
        }
    }
}

/// `validateFinalizerName` for each of `spec.finalizers`: a qualified name, and a bare (unprefixed)
/// name must be a standard one. On create/update the path is `spec.finalizers` without an index;
/// `/finalize` reports `spec.finalizers[i]`, as the real validators do.
fn validate_spec_finalizers(obj: &Value, indexed: bool) -> FieldErrors {
    let mut errs = Vec::new();
    for (i, f) in spec_finalizers(obj).iter().enumerate() {
        let name = f.as_str().unwrap_or("");
        let path = if indexed {
            index("spec.finalizers", i)
        } else {
            "spec.finalizers".to_string()
        };
        for msg in names::legacy::is_qualified_name(name) {
            errs.push(FieldError::invalid(
                path.clone(),
                BadValue::Str(name.into()),
                msg,
            ));
        }
        if !name.contains('/') && !["kubernetes", "orphan", "foregroundDeletion"].contains(&name) {
            errs.push(FieldError::invalid(
                path,
                BadValue::Str(name.into()),
                "name is neither a standard finalizer name nor is it fully qualified",
            ));
        }
    }
    errs
}

/// `/finalize` PUT: only `spec.finalizers` changes (status comes from the stored object). When the
/// result has no finalizers left and a deletionTimestamp, the generic flow deletes it
/// (`ShouldDeleteDuringUpdate`, see `Strategy::pending_finalization`).
pub fn prepare_for_finalize(new: &mut Value, old: &Value) {
    common::keep_stored(new, old, "status");
}

/// `ValidateNamespaceFinalizeUpdate` without the ObjectMeta update part.
pub fn validate_finalize(new: &Value, _old: &Value) -> FieldErrors {
    validate_spec_finalizers(new, true)
}

/// The namespace after its first DELETE (`storage.REST.Delete`): deletionTimestamp set, phase
/// Terminating, and the `orphan` / `foregroundDeletion` finalizers adjusted to the request's
/// propagation policy.
pub fn terminating(stored: &Value, options: &Value, now: &str) -> Value {
    let mut ns = stored.clone();
    if let Some(meta) = ensure_obj(&mut ns, "metadata") {
        meta.entry("deletionTimestamp")
            .or_insert_with(|| json!(now));
        let mut finalizers = strings(meta.get("finalizers"));
        let has = |f: &[String], name: &str| f.iter().any(|x| x == name);
        let orphan_flag = options.get("orphanDependents").and_then(Value::as_bool);
        let policy = options.get("propagationPolicy").and_then(Value::as_str);
        let want_orphan = match (orphan_flag, policy) {
            (Some(o), _) => o,
            (None, Some(p)) => p == "Orphan",
            (None, None) => has(&finalizers, "orphan"),
        };
        let want_foreground = match (orphan_flag, policy) {
            (Some(o), _) => !o,
            (None, Some(p)) => p == "Foreground",
            (None, None) => has(&finalizers, "foregroundDeletion"),
        };
        let mut changed = false;
        for (name, want) in [
            ("orphan", want_orphan),
            ("foregroundDeletion", want_foreground),
        ] {
            if has(&finalizers, name) != want {
                changed = true;
                if want {
                    finalizers.push(name.to_string());
                } else {
                    finalizers.retain(|f| f != name);
                }
            }
        }
        if changed {
            // The real server rebuilds the list from a map (random order); sorted is stable.
            finalizers.sort();
            finalizers.dedup();
            if finalizers.is_empty() {
                meta.remove("finalizers");
            } else {
                meta.insert("finalizers".into(), json!(finalizers));
            }
        }
    }
    if let Some(status) = ensure_obj(&mut ns, "status") {
        status.insert("phase".into(), json!(PHASE_TERMINATING));
    }
    ns
}

impl Strategy for NamespaceStrategy {
    fn info(&self) -> &ResourceInfo {
        &self.info
    }

    fn default(&self, obj: &mut Value) {
        // SetDefaults_Namespace and SetDefaults_NamespaceStatus.
        set_label(obj);
        if let Some(status) = ensure_obj(obj, "status") {
            let empty = status
                .get("phase")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty);
            if empty {
                status.insert("phase".into(), json!(PHASE_ACTIVE));
            }
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        if let Some(m) = obj.as_object_mut() {
            m.insert("status".into(), json!({"phase": PHASE_ACTIVE}));
        }
        let mut finalizers = spec_finalizers(obj);
        if !finalizers.iter().any(|f| f == FINALIZER_KUBERNETES) {
            finalizers.push(json!(FINALIZER_KUBERNETES));
        }
        if let Some(spec) = ensure_obj(obj, "spec") {
            spec.insert("finalizers".into(), Value::Array(finalizers));
        }
        // Canonicalize: the label once the (possibly generated) name is known.
        set_label(obj);
    }

    fn validate_create(&self, obj: &Value) -> FieldErrors {
        validate_spec_finalizers(obj, false)
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        let old_finalizers = old.pointer("/spec/finalizers").cloned();
        if let Some(spec) = ensure_obj(new, "spec") {
            match old_finalizers {
                Some(f) => spec.insert("finalizers".into(), f),
                None => spec.remove("finalizers"),
            };
        }
        common::keep_stored(new, old, "status");
        set_label(new);
    }

    fn validate_update(&self, new: &Value, _old: &Value) -> FieldErrors {
        validate_spec_finalizers(new, false)
    }

    fn prepare_for_status_update(&self, new: &mut Value, old: &Value) {
        common::keep_stored(new, old, "spec");
    }

    fn validate_status_update(&self, new: &Value, _old: &Value) -> FieldErrors {
        // ValidateNamespaceStatusUpdate (note the capital P in the real field path).
        let phase = str_at(new, &["status", "phase"]);
        let deleting = new
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|t| !t.is_null());
        if !deleting && phase != PHASE_ACTIVE {
            vec![FieldError::invalid(
                "status.Phase",
                BadValue::Str(phase.into()),
                "may only be 'Active' if `deletionTimestamp` is empty",
            )]
        } else if deleting && phase != PHASE_TERMINATING {
            vec![FieldError::invalid(
                "status.Phase",
                BadValue::Str(phase.into()),
                "may only be 'Terminating' if `deletionTimestamp` is not empty",
            )]
        } else {
            Vec::new()
        }
    }

    fn field_value(&self, obj: &Value, field: &str) -> Option<String> {
        match field {
            "status.phase" => Some(str_at(obj, &["status", "phase"]).to_string()),
            _ => None,
        }
    }

    fn convert_field_label(&self, label: &str) -> Result<String, String> {
        match label {
            "status.phase" | "metadata.name" => Ok(label.to_string()),
            _ => Err(common::field_label_not_supported(label)),
        }
    }

    fn table(&self) -> Option<&'static TableSpec> {
        Some(&NAMESPACE_TABLE)
    }

    fn name_rule(&self) -> NameRule {
        NameRule::DnsLabel
    }

    fn extra_subresources(&self) -> &'static [(&'static str, &'static [&'static str])] {
        &[("finalize", &["update"])]
    }

    fn on_delete(&self, stored: &Value, options: &Value, now: &str) -> DeleteAction {
        let deleting = stored
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|t| !t.is_null());
        if !deleting {
            DeleteAction::Update(terminating(stored, options, now))
        } else if self.pending_finalization(stored) {
            DeleteAction::Keep
        } else {
            DeleteAction::Default
        }
    }

    fn pending_finalization(&self, obj: &Value) -> bool {
        !spec_finalizers(obj).is_empty()
    }
}

static NAMESPACE_TABLE: TableSpec = TableSpec {
    columns: &[
        ("Name", "string", "name", common::NAME_DESCRIPTION, 0),
        ("Status", "string", "", "The status of the namespace", 0),
        ("Age", "string", "", common::AGE_DESCRIPTION, 0),
    ],
    cells: namespace_cells,
};

fn namespace_cells(obj: &Value) -> Vec<Value> {
    vec![
        json!(meta_str(obj, "name")),
        json!(str_at(obj, &["status", "phase"])),
        json!(common::creation_age(obj)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::testutil::{fixture, step};

    /// What the create flow does to a request body before storing it (decode/default, then
    /// prepare_for_create once the name is set).
    fn created(body: &Value) -> Value {
        let s = NamespaceStrategy::new();
        let mut obj = body.clone();
        s.default(&mut obj);
        s.prepare_for_create(&mut obj);
        assert!(s.validate_create(&obj).is_empty());
        obj
    }

    #[test]
    fn create_defaults_match_recording() {
        let f = fixture("namespaces.json");
        let st = step(&f, "create namespace");
        let body = serde_json::to_string(&st["request"]["body"])
            .unwrap()
            .replace("${ns}", "namespaces-<run>")
            .replace("${run}", "<run>");
        let got = created(&serde_json::from_str(&body).unwrap());
        let want = &st["response"]["body"];
        assert_eq!(got["spec"], want["spec"]);
        assert_eq!(got["status"], want["status"]);
        assert_eq!(got["metadata"]["labels"], want["metadata"]["labels"]);
    }

    /// The name rule the generic ObjectMeta validation must apply (`NameRule::DnsLabel`), with the
    /// wording of `names::is_dns1123_label`, reproduces "create namespace with invalid name".
    #[test]
    fn invalid_name_uses_the_label_rule() {
        let f = fixture("namespaces.json");
        let st = step(&f, "create namespace with invalid name");
        assert_eq!(NamespaceStrategy::new().name_rule(), NameRule::DnsLabel);
        let errs: Vec<FieldError> = names::is_dns1123_label("Bad_Name")
            .into_iter()
            .map(|m| FieldError::invalid("metadata.name", BadValue::Str("Bad_Name".into()), m))
            .collect();
        assert_eq!(
            ApiError::invalid("", "Namespace", "Bad_Name", &errs).to_status(),
            st["response"]["body"]
        );
    }

    #[test]
    fn delete_goes_terminating_then_keeps() {
        let f = fixture("namespaces.json");
        let stored = step(&f, "get namespace")["response"]["body"].clone();
        let s = NamespaceStrategy::new();
        let DeleteAction::Update(after) = s.on_delete(&stored, &json!({}), "<time>") else {
            panic!("first delete must update");
        };
        let want = &step(&f, "delete namespace")["response"]["body"];
        let strip_rv = |v: &Value| {
            let mut v = v.clone();
            v["metadata"]
                .as_object_mut()
                .unwrap()
                .remove("resourceVersion");
            v["metadata"]
                .as_object_mut()
                .unwrap()
                .remove("managedFields");
            v
        };
        assert_eq!(strip_rv(&after), strip_rv(want));
        // "get namespace right after delete": no conditions, nothing else added.
        assert_eq!(
            strip_rv(&after),
            strip_rv(&step(&f, "get namespace right after delete")["response"]["body"])
        );
        // "delete namespace again": unchanged (same resourceVersion in the recording).
        assert_eq!(s.on_delete(want, &json!({}), "later"), DeleteAction::Keep);
        // Once /finalize emptied spec.finalizers, the generic delete applies.
        let mut finalized = want.clone();
        finalized["spec"]["finalizers"] = json!([]);
        assert!(!s.pending_finalization(&finalized));
        assert_eq!(
            s.on_delete(&finalized, &json!({}), "x"),
            DeleteAction::Default
        );
        // A foreground delete adds the finalizer.
        let DeleteAction::Update(fg) =
            s.on_delete(&stored, &json!({"propagationPolicy": "Foreground"}), "t")
        else {
            panic!()
        };
        assert_eq!(fg["metadata"]["finalizers"], json!(["foregroundDeletion"]));
    }

    #[test]
    fn admission_answers_match_recording() {
        let f = fixture("namespaces.json");
        let st = step(&f, "create job in missing namespace");
        assert_eq!(
            admit_create(
                None,
                "namespaces-<run>-missing",
                "batch",
                "jobs",
                &st["request"]["body"]
            )
            .unwrap_err()
            .to_status(),
            st["response"]["body"]
        );
        let ns = step(&f, "get namespace right after delete")["response"]["body"].clone();
        let st = step(&f, "create object in terminating namespace");
        assert_eq!(
            admit_create(
                Some(is_terminating(&ns)),
                "namespaces-<run>",
                "",
                "secrets",
                &st["request"]["body"]
            )
            .unwrap_err()
            .to_status(),
            st["response"]["body"]
        );
        let active = step(&f, "get namespace")["response"]["body"].clone();
        assert!(
            admit_create(
                Some(is_terminating(&active)),
                "x",
                "",
                "secrets",
                &json!({})
            )
            .is_ok()
        );
        assert_eq!(
            admit_delete("kube-system").unwrap_err().message,
            "namespaces \"kube-system\" is forbidden: this namespace may not be deleted"
        );
    }

    #[test]
    fn stored_is_terminating_reads_what_parsing_reads() {
        let statuses = [
            None,
            Some(json!(null)),
            Some(json!("Terminating")),
            Some(json!(["Terminating"])),
            Some(json!({})),
            Some(json!({"phase": "Terminating"})),
            Some(json!({"phase": "Active"})),
            Some(json!({"phase": ""})),
            Some(json!({"phase": 1})),
            Some(json!({"phase": null})),
            Some(json!({"phase": "Terminating", "conditions": [{"type": "x"}]})),
        ];
        let mut terminating = 0;
        for status in statuses {
            let mut ns = json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "a", "labels": {"x": "y"}}, "spec": {"finalizers": ["kubernetes"]}});
            if let Some(s) = status {
                ns["status"] = s;
            }
            let stored = crate::store::Stored::new(7, ns);
            let full = is_terminating(&stored.value());
            assert_eq!(
                stored_is_terminating(&stored.json),
                full,
                "{:?}",
                stored.json
            );
            terminating += usize::from(full);
        }
        assert_eq!(terminating, 2);
        assert!(!stored_is_terminating(b"not json"));
    }

    #[test]
    fn updates_keep_finalizers_and_status() {
        let s = NamespaceStrategy::new();
        let old = json!({"metadata": {"name": "a"}, "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
        let mut new = json!({"metadata": {"name": "a"}, "spec": {"finalizers": []}, "status": {"phase": "Terminating"}});
        s.prepare_for_update(&mut new, &old);
        assert_eq!(new["spec"], old["spec"]);
        assert_eq!(new["status"], old["status"]);
        assert_eq!(new["metadata"]["labels"][LABEL_METADATA_NAME], "a");

        let mut fin = json!({"metadata": {"name": "a"}, "spec": {"finalizers": ["bad name"]}, "status": {"phase": "x"}});
        prepare_for_finalize(&mut fin, &old);
        assert_eq!(fin["status"], old["status"]);
        let errs = validate_finalize(&fin, &old);
        assert_eq!(errs[0].field, "spec.finalizers[0]");
        assert_eq!(
            errs.last().unwrap().message(),
            "spec.finalizers[0]: Invalid value: \"bad name\": name is neither a standard finalizer name nor is it fully qualified"
        );
        let errs = s.validate_status_update(&json!({"status": {"phase": "Terminating"}}), &old);
        assert_eq!(
            errs[0].message(),
            "status.Phase: Invalid value: \"Terminating\": may only be 'Active' if `deletionTimestamp` is empty"
        );
    }

    #[test]
    fn field_selectors_and_table() {
        let s = NamespaceStrategy::new();
        assert!(s.convert_field_label("status.phase").is_ok());
        assert_eq!(
            s.convert_field_label("metadata.namespace"),
            Err("field label not supported: metadata.namespace".into())
        );
        let cells = (s.table().unwrap().cells)(
            &json!({"metadata": {"name": "n"}, "status": {"phase": "Active"}}),
        );
        assert_eq!(cells[..2], [json!("n"), json!("Active")]);
        assert_eq!(s.extra_subresources()[0].0, "finalize");
    }
}
