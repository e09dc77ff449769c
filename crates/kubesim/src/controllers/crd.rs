//! The apiextensions controllers that live inside the real kube-apiserver: naming + establishing
//! (`crd::reconcile`, written through `/status` as `kube-apiserver`), serving each served version of
//! an Established CRD (registered *before* Established is stored, so a client that saw Established
//! can use the resource), and the finalizer controller (on delete: every custom object deleted, then
//! `crd::finish_cleanup`, after which the CRD goes and its resources are no longer served).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{APISERVER, Change, Follower, decoded, next_backoff, write_opts};
use crate::api::{Api, DeleteOpts, ListOpts, Part, Served};
use crate::json::{finalizers, is_deleting, meta_str};
use crate::kinds::Strategy;
use crate::kinds::crd::{self as crd_kind, CLEANUP_FINALIZER};
use crate::store::EventType;

/// Longest wait between two checks of a CRD whose instances are still being deleted.
const CLEANUP_POLL_CAP: Duration = Duration::from_secs(1);
const CONFLICT_RETRIES: usize = 8;

type ResourceKey = (String, String, String);

struct Registration {
    /// What the served resources were built from: spec and accepted names.
    fingerprint: Value,
    keys: Vec<ResourceKey>,
}

struct Pending {
    due: Instant,
    backoff: Option<Duration>,
}

struct CrdController {
    api: Arc<Api>,
    served: Arc<Served>,
    registered: HashMap<String, Registration>,
    cleanup: HashMap<String, Pending>,
}

enum Write {
    Done,
    Conflict,
    Failed,
}

pub(super) async fn run(api: Arc<Api>, shutdown: CancellationToken) {
    let Some(served) = api
        .registry
        .get(crd_kind::GROUP, "v1", "customresourcedefinitions")
    else {
        tracing::error!(
            controller = "crd",
            "CustomResourceDefinitions are not served; not starting"
        );
        return;
    };
    let mut follower = Follower::new(api.store.clone(), served.table.clone(), "crd");
    let mut c = CrdController {
        api,
        served,
        registered: HashMap::new(),
        cleanup: HashMap::new(),
    };
    loop {
        let next = c.cleanup.values().map(|p| p.due).min();
        let sleep = tokio::time::sleep_until(next.unwrap_or_else(Instant::now));
        tokio::select! {
            _ = shutdown.cancelled() => return,
            change = follower.next() => c.apply(change),
            _ = sleep, if next.is_some() => c.run_cleanups(),
        }
    }
}

impl CrdController {
    fn apply(&mut self, change: Change) {
        match change {
            Change::Resync(items) => {
                let names: HashSet<String> = items
                    .iter()
                    .map(|st| meta_str(&st.value(), "name").to_string())
                    .collect();
                let stale: Vec<String> = self
                    .registered
                    .keys()
                    .filter(|n| !names.contains(*n))
                    .cloned()
                    .collect();
                for n in stale {
                    self.unregister(&n);
                }
                for n in &names {
                    self.handle(n);
                }
            }
            Change::Event(ev) => {
                let name = meta_str(&ev.obj.value(), "name").to_string();
                let group = ev
                    .obj
                    .value()
                    .pointer("/spec/group")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                if ev.kind == EventType::Deleted {
                    self.unregister(&name);
                    self.cleanup.remove(&name);
                } else {
                    self.handle(&name);
                }
                // Names this CRD held or gave up may change what its group's other CRDs can have.
                self.retry_group(&group, &name);
            }
        }
    }

    /// Reconciles the CRDs of `group` that are not established yet (their names may be free now).
    fn retry_group(&mut self, group: &str, except: &str) {
        let peers: Vec<String> = self
            .api
            .store
            .list(&self.served.table, None, None)
            .items
            .iter()
            .filter(|st| {
                st.value().pointer("/spec/group").and_then(Value::as_str) == Some(group)
                    && meta_str(&st.value(), "name") != except
                    && !crd_kind::is_established(&st.value())
            })
            .map(|st| meta_str(&st.value(), "name").to_string())
            .collect();
        for p in peers {
            self.handle(&p);
        }
    }

    fn all_crds(&self) -> Vec<Value> {
        self.api
            .store
            .list(&self.served.table, None, None)
            .items
            .iter()
            .map(|st| self.api.served_value(&self.served, st))
            .collect()
    }

    /// Names, Established and serving for one CRD; schedules the cleanup of a deleted one.
    fn handle(&mut self, name: &str) {
        for _ in 0..CONFLICT_RETRIES {
            let Some(cur) = self.api.store.get(&self.served.table, "", name) else {
                self.unregister(name);
                self.cleanup.remove(name);
                return;
            };
            let crd = self.api.served_value(&self.served, &cur);
            if is_deleting(&crd) {
                if finalizers(&crd).iter().any(|f| f == CLEANUP_FINALIZER) {
                    self.cleanup.entry(name.to_string()).or_insert(Pending {
                        due: Instant::now(),
                        backoff: None,
                    });
                }
                return;
            }
            let now = crate::time::now_string();
            let Some(new) = crd_kind::reconcile(&crd, &self.all_crds(), &now) else {
                if crd_kind::is_established(&crd) {
                    self.register(name, &crd);
                }
                return;
            };
            if crd_kind::is_established(&new) {
                // Served before anyone can see Established.
                self.register(name, &new);
            }
            match self.write_status(name, new) {
                Write::Done | Write::Failed => return,
                Write::Conflict => continue,
            }
        }
        tracing::warn!(controller = "crd", crd = %name, "status update kept conflicting");
    }

    fn write_status(&self, name: &str, crd: Value) -> Write {
        let obj = match decoded(&self.served, crd) {
            Ok(v) => v,
            Err(e) => {
                tracing::error!(controller = "crd", crd = %name, error = %e.message, "status does not decode");
                return Write::Failed;
            }
        };
        match self.api.update(
            &self.served,
            "",
            name,
            obj,
            Part::Status,
            &write_opts(APISERVER),
        ) {
            Ok(_) => Write::Done,
            Err(e) if e.code == 409 => Write::Conflict,
            Err(e) => {
                tracing::warn!(controller = "crd", crd = %name, code = e.code, error = %e.message, "status update failed");
                Write::Failed
            }
        }
    }

    /// Serves every served version of an Established CRD (again when its spec or names changed).
    fn register(&mut self, name: &str, crd: &Value) {
        let fingerprint = json!([crd.get("spec"), crd.pointer("/status/acceptedNames")]);
        if self
            .registered
            .get(name)
            .is_some_and(|r| r.fingerprint == fingerprint)
        {
            return;
        }
        let preserve = crd
            .pointer("/spec/preserveUnknownFields")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let mut keys = Vec::new();
        for strategy in crd_kind::served_versions(crd) {
            let info = strategy.info().clone();
            let schema = match strategy.schema() {
                Some(s) => match crate::schema::from_crd(
                    s,
                    &info.api_version(),
                    &info.kind,
                    info.status_subresource,
                    preserve,
                ) {
                    Ok(t) => Some(t),
                    Err(e) => {
                        tracing::error!(controller = "crd", crd = %name, version = %info.version, error = %e, "schema unusable; serving without one");
                        None
                    }
                },
                None => None,
            };
            self.api
                .registry
                .add(Served::new(Arc::new(strategy), schema));
            keys.push((info.group, info.version, info.plural));
        }
        if let Some(old) = self.registered.remove(name) {
            for k in old.keys.iter().filter(|k| !keys.contains(k)) {
                self.api.registry.remove(&k.0, &k.1, &k.2);
            }
        }
        self.registered
            .insert(name.to_string(), Registration { fingerprint, keys });
    }

    fn unregister(&mut self, name: &str) {
        if let Some(r) = self.registered.remove(name) {
            for (g, v, p) in r.keys {
                self.api.registry.remove(&g, &v, &p);
            }
        }
    }

    fn run_cleanups(&mut self) {
        let now = Instant::now();
        let due: Vec<String> = self
            .cleanup
            .iter()
            .filter(|(_, p)| p.due <= now)
            .map(|(n, _)| n.clone())
            .collect();
        for name in due {
            if self.clean_up(&name) {
                self.cleanup.remove(&name);
            } else if let Some(p) = self.cleanup.get_mut(&name) {
                let d = next_backoff(p.backoff, CLEANUP_POLL_CAP);
                p.backoff = Some(d);
                p.due = Instant::now() + d;
            }
        }
    }

    /// The finalizer controller. `true` when done (or nothing to do).
    fn clean_up(&mut self, name: &str) -> bool {
        let get = |c: &Self| {
            c.api
                .store
                .get(&c.served.table, "", name)
                .map(|st| c.api.served_value(&c.served, &st))
                .filter(|v| is_deleting(v) && finalizers(v).iter().any(|f| f == CLEANUP_FINALIZER))
        };
        let Some(crd) = get(self) else {
            return true;
        };
        // "This cleanup could take a while."
        let mut progress = crd.clone();
        set_condition(
            &mut progress,
            "Terminating",
            "True",
            "InstanceDeletionInProgress",
            "CustomResource deletion is in progress",
        );
        if progress != crd {
            match self.write_status(name, progress) {
                Write::Done => {}
                Write::Conflict | Write::Failed => return false,
            }
        }
        if crd_kind::is_established(&crd) {
            let Some(s) = self.instances_resource(name, &crd) else {
                tracing::error!(controller = "crd", crd = %name, "no served version to delete instances through");
                return false;
            };
            let all = ListOpts::default();
            if let Err(e) = self
                .api
                .delete_collection(&s, None, &all, &DeleteOpts::default())
            {
                tracing::warn!(controller = "crd", crd = %name, code = e.code, error = %e.message, "deleting instances failed");
                return false;
            }
            match self.api.list(&s, None, &all) {
                Ok(page) if page.items.is_empty() => {}
                Ok(_) => return false,
                Err(e) => {
                    tracing::warn!(controller = "crd", crd = %name, code = e.code, error = %e.message, "listing instances failed");
                    return false;
                }
            }
        }
        for _ in 0..CONFLICT_RETRIES {
            let Some(crd) = get(self) else {
                return true;
            };
            let done = crd_kind::finish_cleanup(&crd, &crate::time::now_string());
            // The CRD goes with this write: stop serving first, so nobody sees it gone but served.
            let goes = finalizers(&done).is_empty();
            if goes {
                self.unregister(name);
            }
            match self.write_status(name, done) {
                Write::Done => return true,
                Write::Conflict => {}
                Write::Failed => {
                    if goes && crd_kind::is_established(&crd) {
                        self.register(name, &crd);
                    }
                    return false;
                }
            }
            if goes && crd_kind::is_established(&crd) {
                self.register(name, &crd);
            }
        }
        false
    }

    /// A served version of the CRD's custom objects (all versions share one storage).
    fn instances_resource(&mut self, name: &str, crd: &Value) -> Option<Arc<Served>> {
        if !self.registered.contains_key(name) {
            self.register(name, crd);
        }
        let r = self.registered.get(name)?;
        r.keys
            .iter()
            .find_map(|(g, v, p)| self.api.registry.get(g, v, p))
    }
}

fn set_condition(crd: &mut Value, ctype: &str, status: &str, reason: &str, message: &str) {
    let mut conditions: Vec<Value> = crd
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    crate::kinds::common::set_condition(
        &mut conditions,
        ctype,
        status,
        reason,
        message,
        &crate::time::now_string(),
    );
    if let Some(s) = crd.get_mut("status").and_then(Value::as_object_mut) {
        s.insert("conditions".into(), Value::Array(conditions));
    }
}
