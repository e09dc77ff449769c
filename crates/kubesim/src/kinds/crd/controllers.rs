//! The apiextensions apiserver's controllers a client observes: names accepted, established,
//! deletion and instance cleanup (`controller/status/naming_controller.go`, `controller/establish`).

use serde_json::{Value, json};

use super::super::common;
use super::{CLEANUP_FINALIZER, is_established};
use crate::json::{ensure_obj, str_at};

/// The naming controller's answer for `crd` (`calculateNamesAndConditions`): accepted names (each
/// requested name unless another CRD of the group already accepted it) and the NamesAccepted /
/// Established conditions. `all` holds every CRD (this one included). Returns the new status.
pub fn accept_names(crd: &Value, all: &[Value], now: &str) -> Value {
    let group = str_at(crd, &["spec", "group"]);
    let mut resources = std::collections::HashSet::new();
    let mut kinds = std::collections::HashSet::new();
    for other in all
        .iter()
        .filter(|o| str_at(o, &["spec", "group"]) == group)
    {
        let a = other
            .pointer("/status/acceptedNames")
            .cloned()
            .unwrap_or(json!({}));
        resources.insert(str_at(&a, &["plural"]).to_string());
        resources.insert(str_at(&a, &["singular"]).to_string());
        for s in a
            .get("shortNames")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            resources.insert(s.as_str().unwrap_or("").to_string());
        }
        kinds.insert(str_at(&a, &["kind"]).to_string());
        kinds.insert(str_at(&a, &["listKind"]).to_string());
    }
    let requested = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
    let accepted = crd
        .pointer("/status/acceptedNames")
        .cloned()
        .unwrap_or(json!({}));
    let mut new_names = accepted.as_object().cloned().unwrap_or_default();
    let mut cond: Option<(&str, String)> = None;
    let fresh = |req: &str, acc: &str, used: &std::collections::HashSet<String>| {
        if req == acc || !used.contains(req) {
            Ok(())
        } else {
            Err(format!(
                "{} is already in use",
                crate::errors::go_quote(req)
            ))
        }
    };
    for (k, used, reason) in [
        ("plural", &resources, "PluralConflict"),
        ("singular", &resources, "SingularConflict"),
    ] {
        let (req, acc) = (str_at(&requested, &[k]), str_at(&accepted, &[k]));
        match fresh(req, acc, used) {
            Ok(()) => {
                new_names.insert(k.into(), json!(req));
            }
            Err(e) => cond = Some((reason, e)),
        }
    }
    let req_short = requested.get("shortNames").cloned().unwrap_or(Value::Null);
    let acc_short = accepted.get("shortNames").cloned().unwrap_or(Value::Null);
    if req_short != acc_short {
        let existing: Vec<&str> = acc_short
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut problems = Vec::new();
        for s in req_short
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if existing.contains(&s) {
                continue;
            }
            if let Err(e) = fresh(s, "", &resources) {
                problems.push(e);
            }
        }
        if problems.is_empty() {
            match req_short {
                Value::Null => new_names.remove("shortNames"),
                v => new_names.insert("shortNames".into(), v),
            };
        } else {
            let msg = if problems.len() == 1 {
                problems.remove(0)
            } else {
                format!("[{}]", problems.join(", "))
            };
            cond = Some(("ShortNamesConflict", msg));
        }
    }
    for (k, reason) in [("kind", "KindConflict"), ("listKind", "ListKindConflict")] {
        let (req, acc) = (str_at(&requested, &[k]), str_at(&accepted, &[k]));
        match fresh(req, acc, &kinds) {
            Ok(()) => {
                new_names.insert(k.into(), json!(req));
            }
            Err(e) => cond = Some((reason, e)),
        }
    }
    match requested.get("categories").and_then(Value::as_array) {
        Some(c) if !c.is_empty() => {
            new_names.insert("categories".into(), Value::Array(c.clone()));
        }
        _ => {
            new_names.remove("categories");
        }
    }

    let mut status = crd.get("status").cloned().unwrap_or(json!({}));
    let mut conditions: Vec<Value> = status
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let names_ok = cond.is_none();
    match cond {
        None => common::set_condition(
            &mut conditions,
            "NamesAccepted",
            "True",
            "NoConflicts",
            "no conflicts found",
            now,
        ),
        Some((reason, msg)) => {
            common::set_condition(&mut conditions, "NamesAccepted", "False", reason, &msg, now)
        }
    }
    let established_true = conditions.iter().any(|c| {
        c.get("type").and_then(Value::as_str) == Some("Established")
            && c.get("status").and_then(Value::as_str) == Some("True")
    });
    if !established_true {
        let has_established = conditions
            .iter()
            .any(|c| c.get("type").and_then(Value::as_str) == Some("Established"));
        if names_ok {
            common::set_condition(
                &mut conditions,
                "Established",
                "False",
                "Installing",
                "the initial names have been accepted",
                now,
            );
        } else if !has_established {
            common::set_condition(
                &mut conditions,
                "Established",
                "False",
                "NotAccepted",
                "not all names are accepted",
                now,
            );
        }
    }
    if let Some(m) = status.as_object_mut() {
        m.insert("acceptedNames".into(), Value::Object(new_names));
        m.insert("conditions".into(), Value::Array(conditions));
    }
    status
}

/// The establishing controller: once names are accepted, Established becomes True.
pub fn establish(status: &mut Value, now: &str) {
    let mut conditions: Vec<Value> = status
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let names_ok = conditions.iter().any(|c| {
        c.get("type").and_then(Value::as_str) == Some("NamesAccepted")
            && c.get("status").and_then(Value::as_str) == Some("True")
    });
    if names_ok {
        common::set_condition(
            &mut conditions,
            "Established",
            "True",
            "InitialNamesAccepted",
            "the initial names have been accepted",
            now,
        );
    }
    if let Some(m) = status.as_object_mut() {
        m.insert("conditions".into(), Value::Array(conditions));
    }
}

/// What the apiextensions controllers write after a CRD is created or changed: the CRD with its
/// new status, or `None` when nothing changes (the lead stores it as a status update, which bumps
/// the resourceVersion, as "wait until Established" in crd.json shows).
pub fn reconcile(crd: &Value, all: &[Value], now: &str) -> Option<Value> {
    if crd
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
    {
        return None;
    }
    let mut status = accept_names(crd, all, now);
    establish(&mut status, now);
    if crd.get("status") == Some(&status) {
        return None;
    }
    let mut out = crd.clone();
    out["status"] = status;
    Some(out)
}

/// The CRD after its first DELETE: deletionTimestamp, the cleanup finalizer and the Terminating
/// condition (crd.json "delete CRD").
pub fn mark_deleting(stored: &Value, now: &str) -> Value {
    let mut crd = stored.clone();
    if let Some(meta) = ensure_obj(&mut crd, "metadata") {
        meta.entry("deletionTimestamp").or_insert(json!(now));
        let fins = meta.entry("finalizers").or_insert_with(|| json!([]));
        if !fins.is_array() {
            *fins = json!([]);
        }
        if let Some(a) = fins.as_array_mut()
            && !a.iter().any(|f| f == CLEANUP_FINALIZER)
        {
            a.push(json!(CLEANUP_FINALIZER));
        }
    }
    set_status_condition(
        &mut crd,
        "Terminating",
        "True",
        "InstanceDeletionPending",
        "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
        now,
    );
    crd
}

fn set_status_condition(
    crd: &mut Value,
    ctype: &str,
    status: &str,
    reason: &str,
    msg: &str,
    now: &str,
) {
    let mut conditions: Vec<Value> = crd
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    common::set_condition(&mut conditions, ctype, status, reason, msg, now);
    if let Some(s) = ensure_obj(crd, "status") {
        s.insert("conditions".into(), Value::Array(conditions));
    }
}

/// The finalizer controller once every custom object is gone: Terminating=False
/// (`InstanceDeletionCompleted`, or `NeverEstablished`) and the cleanup finalizer removed. Stored
/// through the status strategy; with no finalizers left the object is deleted during that update.
pub fn finish_cleanup(crd: &Value, now: &str) -> Value {
    let mut out = crd.clone();
    if is_established(crd) {
        set_status_condition(
            &mut out,
            "Terminating",
            "False",
            "InstanceDeletionCompleted",
            "removed all instances",
            now,
        );
    } else {
        set_status_condition(
            &mut out,
            "Terminating",
            "False",
            "NeverEstablished",
            "resource was never established",
            now,
        );
    }
    if let Some(Value::Array(f)) = out.pointer_mut("/metadata/finalizers") {
        f.retain(|x| x != CLEANUP_FINALIZER);
    }
    if out
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(Vec::is_empty)
        && let Some(m) = out.get_mut("metadata").and_then(Value::as_object_mut)
    {
        m.remove("finalizers");
    }
    out
}
