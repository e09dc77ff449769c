//! coordination.k8s.io/v1 Leases (leader election).
//!
//! Sources: `pkg/apis/coordination/validation` (`ValidateLeaseSpec`), `pkg/registry/coordination/lease/strategy.go`
//! (`AllowCreateOnUpdate` true, `AllowUnconditionalUpdate` false, the CoordinatedLeaderElection
//! fields dropped while that gate is off), `metav1.MicroTime` decoding (exactly six fractional
//! digits, else a 400 with Go's `time.Parse` error). Held to `leases.json`.

use serde_json::{Value, json};

use super::common::{self, TimeLayout};
use super::{ResourceInfo, Strategy, TableSpec, Warnings};
use crate::errors::{ApiError, BadValue, FieldError, FieldErrors};
use crate::json::{ensure_obj, meta_str, str_at};
use crate::validation::names;

/// The `CoordinatedLeaderElection` feature gate (beta, off by default): while off, `spec.strategy`
/// and `spec.preferredHolder` are dropped on create (and on update unless already set).
pub const COORDINATED_LEADER_ELECTION: bool = false;

pub struct LeaseStrategy {
    info: ResourceInfo,
}

impl Default for LeaseStrategy {
    fn default() -> Self {
        Self::new()
    }
}

impl LeaseStrategy {
    pub fn new() -> Self {
        Self {
            info: ResourceInfo {
                group: "coordination.k8s.io".into(),
                version: "v1".into(),
                kind: "Lease".into(),
                plural: "leases".into(),
                singular: "lease".into(),
                namespaced: true,
                short_names: Vec::new(),
                categories: Vec::new(),
                verbs: common::standard_verbs(),
                status_subresource: false,
                storage_version_hash: Some("gqkMMb/YqFM=".into()),
            },
        }
    }
}

/// Decoding: `spec.acquireTime` and `spec.renewTime` are MicroTimes (re-encoded in UTC with six
/// digits); the bare Go error on failure.
pub fn decode_lease(obj: &mut Value) -> Result<(), String> {
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        for k in ["acquireTime", "renewTime"] {
            common::normalize_time_field(spec, k, TimeLayout::Rfc3339Micro)?;
        }
    }
    Ok(())
}

/// `ValidateLeaseSpec`.
pub fn validate_lease_spec(obj: &Value) -> FieldErrors {
    let mut errs = Vec::new();
    let spec = obj.get("spec");
    let int = |k: &str| spec.and_then(|s| s.get(k)).and_then(Value::as_i64);
    if let Some(d) = int("leaseDurationSeconds")
        && d <= 0
    {
        errs.push(FieldError::invalid(
            "spec.leaseDurationSeconds",
            BadValue::Int(d),
            "must be greater than 0",
        ));
    }
    if let Some(t) = int("leaseTransitions")
        && t < 0
    {
        errs.push(FieldError::invalid(
            "spec.leaseTransitions",
            BadValue::Int(t),
            "must be greater than or equal to 0",
        ));
    }
    let strategy = spec.and_then(|s| s.get("strategy")).and_then(Value::as_str);
    if let Some(st) = strategy {
        // The real validator appends `strategy` to a path that already ends in it.
        let path = "spec.strategy.strategy";
        if !st.contains('/') {
            if st != "OldestEmulationVersion" {
                errs.push(FieldError::not_supported(
                    path,
                    BadValue::Str(st.into()),
                    &["OldestEmulationVersion"],
                ));
            }
        } else {
            for msg in names::legacy::is_qualified_name(st) {
                errs.push(FieldError::invalid(path, BadValue::Str(st.into()), msg));
            }
        }
    }
    let preferred = spec
        .and_then(|s| s.get("preferredHolder"))
        .and_then(Value::as_str)
        .unwrap_or("");
    if !preferred.is_empty() && strategy.is_none_or(str::is_empty) {
        errs.push(FieldError::forbidden(
            "spec.preferredHolder",
            "may only be specified if `strategy` is defined",
        ));
    }
    errs
}

impl Strategy for LeaseStrategy {
    fn info(&self) -> &ResourceInfo {
        &self.info
    }

    fn decode(&self, obj: &mut Value) -> Result<Warnings, ApiError> {
        decode_lease(obj).map_err(|e| common::decode_error("Lease", "v1", &e))?;
        Ok(Vec::new())
    }

    fn default(&self, obj: &mut Value) {
        // `spec` is a struct without omitempty: always written, `{}` when empty.
        ensure_obj(obj, "spec");
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        if !COORDINATED_LEADER_ELECTION && let Some(spec) = ensure_obj(obj, "spec") {
            spec.remove("strategy");
            spec.remove("preferredHolder");
        }
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        if COORDINATED_LEADER_ELECTION {
            return;
        }
        let old_has = |k: &str| {
            old.pointer(&format!("/spec/{k}"))
                .is_some_and(|v| !v.is_null())
        };
        let (keep_strategy, keep_preferred) = (old_has("strategy"), old_has("preferredHolder"));
        if let Some(spec) = ensure_obj(new, "spec") {
            if !keep_strategy {
                spec.remove("strategy");
            }
            if !keep_preferred {
                spec.remove("preferredHolder");
            }
        }
    }

    fn validate_create(&self, obj: &Value) -> FieldErrors {
        validate_lease_spec(obj)
    }

    fn validate_update(&self, new: &Value, _old: &Value) -> FieldErrors {
        validate_lease_spec(new)
    }

    fn convert_field_label(&self, label: &str) -> Result<String, String> {
        match label {
            "metadata.namespace" | "metadata.name" => Ok(label.to_string()),
            _ => Err(common::field_label_not_known(label)),
        }
    }

    fn table(&self) -> Option<&'static TableSpec> {
        Some(&LEASE_TABLE)
    }

    fn allow_create_on_update(&self) -> bool {
        true
    }

    fn allow_unconditional_update(&self) -> bool {
        false
    }
}

static LEASE_TABLE: TableSpec = TableSpec {
    columns: &[
        ("Name", "string", "name", common::NAME_DESCRIPTION, 0),
        (
            "Holder",
            "string",
            "",
            "holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field.",
            0,
        ),
        ("Age", "string", "", common::AGE_DESCRIPTION, 0),
    ],
    cells: lease_cells,
};

fn lease_cells(obj: &Value) -> Vec<Value> {
    vec![
        json!(meta_str(obj, "name")),
        json!(str_at(obj, &["spec", "holderIdentity"])),
        json!(common::creation_age(obj)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::testutil::{fixture, invalid_status, step};
    use crate::kinds::unconditional_update_error;

    fn decoded(body: &Value) -> Result<Value, ApiError> {
        let s = LeaseStrategy::new();
        let mut obj = body.clone();
        s.decode(&mut obj)?;
        s.default(&mut obj);
        s.prepare_for_create(&mut obj);
        Ok(obj)
    }

    #[test]
    fn creates_match_recording() {
        let f = fixture("leases.json");
        for name in [
            "create lease",
            "create empty-spec lease",
            "PUT missing lease (create on update?)",
        ] {
            let st = step(&f, name);
            let got = decoded(&st["request"]["body"]).unwrap();
            assert!(LeaseStrategy::new().validate_create(&got).is_empty());
            assert_eq!(got["spec"], st["response"]["body"]["spec"], "{name}");
        }
        assert!(LeaseStrategy::new().allow_create_on_update());
    }

    #[test]
    fn microtime_without_micros_is_a_400() {
        let f = fixture("leases.json");
        let st = step(&f, "create lease with RFC3339 (no micros) renewTime");
        let err = decoded(&st["request"]["body"]).unwrap_err();
        assert_eq!(err.to_status(), st["response"]["body"]);
    }

    #[test]
    fn zero_duration_is_invalid() {
        let f = fixture("leases.json");
        let st = step(&f, "create invalid lease (leaseDurationSeconds=0)");
        let obj = decoded(&st["request"]["body"]).unwrap();
        let errs = LeaseStrategy::new().validate_create(&obj);
        assert_eq!(
            invalid_status("coordination.k8s.io", "Lease", &obj, &errs),
            st["response"]["body"]
        );
    }

    #[test]
    fn put_without_resource_version_is_a_422() {
        let f = fixture("leases.json");
        let st = step(&f, "PUT without resourceVersion");
        let s = LeaseStrategy::new();
        assert!(!s.allow_unconditional_update());
        assert_eq!(
            unconditional_update_error(s.info(), "courier-leader").to_status(),
            st["response"]["body"]
        );
    }

    #[test]
    fn renew_validates_and_gated_fields_drop() {
        let f = fixture("leases.json");
        let old = step(&f, "get lease")["response"]["body"].clone();
        let st = step(&f, "renew (PUT with current rv)");
        let s = LeaseStrategy::new();
        let mut new = st["request"]["body"].clone();
        s.decode(&mut new).unwrap();
        s.prepare_for_update(&mut new, &old);
        assert!(s.validate_update(&new, &old).is_empty());
        assert_eq!(new["spec"], st["response"]["body"]["spec"]);

        let mut gated =
            json!({"spec": {"strategy": "OldestEmulationVersion", "preferredHolder": "a"}});
        s.prepare_for_create(&mut gated);
        assert_eq!(gated["spec"], json!({}));
        let errs = validate_lease_spec(
            &json!({"spec": {"strategy": "Newest", "preferredHolder": "a", "leaseTransitions": -1}}),
        );
        let msgs: Vec<String> = errs.iter().map(FieldError::message).collect();
        assert_eq!(
            msgs,
            [
                "spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0",
                "spec.strategy.strategy: Unsupported value: \"Newest\": supported values: \"OldestEmulationVersion\""
            ]
        );
        let mut offset = json!({"spec": {"renewTime": "2025-06-01T12:00:00.000000+02:00"}});
        s.decode(&mut offset).unwrap();
        assert_eq!(offset["spec"]["renewTime"], "2025-06-01T10:00:00.000000Z");
    }
}
