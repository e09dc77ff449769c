//! ResourceQuota: the admission check on creates and the usage kubesim keeps in `status`, after
//! `plugin/pkg/admission/resourcequota` (`controller.go`: `exceeded quota: <name>, requested:
//! <r>=<n>, used: <r>=<n>, limited: <r>=<n>` wrapped by `admission.NewForbidden`, so a 403 Forbidden
//! `<resource> "<name>" is forbidden: exceeded quota: ...`) and the quota controller
//! (`pkg/controller/resourcequota`: `status.hard` mirrors `spec.hard`, `status.used` counts).
//!
//! Only object counts are evaluated: `count/<resource>.<group>` (`count/<resource>` for the core
//! group), for any kind kubesim serves. Quotas with `scopes` or a `scopeSelector` (which only
//! select pods) and compute resources (`pods`, `cpu`, `memory`, ...) are stored and not enforced.
//! The real quota controller recomputes usage asynchronously; kubesim updates `status` at once
//! after every create and delete in the namespace, so `used` is never stale.

use serde_json::{Map, Value, json};

use super::Request;
use crate::api::Api;
use crate::errors::ApiError;
use crate::kinds::resourcequota::whole_quantity;
use crate::store::{Precondition, TableKey};

fn quotas() -> TableKey {
    TableKey::new("", "resourcequotas")
}

/// The object-count resource name of a kind: `count/jobs.batch`, `count/configmaps`.
pub fn count_name(group: &str, plural: &str) -> String {
    if group.is_empty() {
        format!("count/{plural}")
    } else {
        format!("count/{plural}.{group}")
    }
}

/// The storage table an object-count name counts, if it is one.
fn counted_table(resource: &str) -> Option<TableKey> {
    let rest = resource.strip_prefix("count/")?;
    let (plural, group) = rest.split_once('.').unwrap_or((rest, ""));
    Some(TableKey::new(group, plural))
}

fn unscoped(q: &Value) -> bool {
    q.pointer("/spec/scopes")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
        && q.pointer("/spec/scopeSelector").is_none_or(Value::is_null)
}

fn count(api: &Api, table: &TableKey, ns: &str) -> i64 {
    api.store.list(table, Some(ns), None).items.len() as i64
}

/// Refuses a create that would take a namespace over an object-count quota.
pub fn check(api: &Api, req: &Request) -> Result<(), ApiError> {
    if req.operation != "CREATE" || !req.subresource.is_empty() || !req.info.namespaced {
        return Ok(());
    }
    let items = api.store.list(&quotas(), Some(req.namespace), None).items;
    if items.is_empty() {
        return Ok(());
    }
    let resource = count_name(&req.info.group, &req.info.plural);
    let table = TableKey::new(&req.info.group, &req.info.plural);
    for st in items {
        let q = st.value();
        let Some(hard) = q
            .pointer("/spec/hard")
            .and_then(|h| h.get(&resource))
            .filter(|_| unscoped(&q))
        else {
            continue;
        };
        let Some(limit) = whole_quantity(hard) else {
            continue;
        };
        let used = count(api, &table, req.namespace);
        if used + 1 > limit {
            let why = format!(
                "exceeded quota: {}, requested: {resource}=1, used: {resource}={used}, limited: {resource}={limit}",
                crate::json::meta_str(&q, "name")
            );
            return Err(ApiError::forbidden(
                &req.info.group,
                &req.info.plural,
                req.name,
                &why,
            ));
        }
    }
    Ok(())
}

/// Brings `status.hard` and `status.used` of every quota in `ns` up to date (after a create or a
/// delete there). Writes only what changed.
pub fn sync_status(api: &Api, ns: &str) {
    if ns.is_empty() {
        return;
    }
    for st in api.store.list(&quotas(), Some(ns), None).items {
        let q = st.value();
        let hard = q
            .pointer("/spec/hard")
            .cloned()
            .unwrap_or_else(|| json!({}));
        let mut used = Map::new();
        if let Some(h) = hard.as_object() {
            for k in h.keys() {
                if let Some(t) = counted_table(k) {
                    used.insert(k.clone(), json!(count(api, &t, ns).to_string()));
                }
            }
        }
        let status = json!({"hard": hard, "used": used});
        if q.get("status") == Some(&status) {
            continue;
        }
        let mut new = q.clone();
        new["status"] = status;
        // Lost a race with another write: the next create or delete here syncs again.
        let _ = api.store.put(
            &quotas(),
            ns,
            st.name(),
            new,
            Precondition::Exists(Some(st.rv)),
        );
    }
}

/// Whether writes to `table` can change a quota's usage (a quota counts it, or it is a quota).
pub fn counts(api: &Api, table: &TableKey, ns: &str) -> bool {
    if ns.is_empty() {
        return false;
    }
    if *table == quotas() {
        return true;
    }
    let name = count_name(&table.group, &table.plural);
    api.store
        .list(&quotas(), Some(ns), None)
        .items
        .iter()
        .any(|q| {
            q.value()
                .pointer("/spec/hard")
                .and_then(|h| h.get(&name))
                .is_some()
        })
}
