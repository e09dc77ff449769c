//! Validating admission: what the API server runs on a write after the kind's own validation and
//! before storage. kubesim runs, in the real server's plugin order, ValidatingAdmissionPolicies
//! (`policy`) and then ResourceQuota (`quota`), on CREATE and UPDATE of every kind it serves,
//! the `status` subresource included, from HTTP clients and in-process controllers alike (dry runs
//! too, as the real server does). DELETE is not sent through admission.

pub mod cel;
pub mod policy;
pub mod quota;

use serde_json::Value;

use crate::api::Api;
use crate::errors::ApiError;
use crate::kinds::ResourceInfo;

/// One write as admission sees it (`admission.Attributes`).
pub struct Request<'a> {
    /// `CREATE` or `UPDATE`.
    pub operation: &'static str,
    pub info: &'a ResourceInfo,
    /// `""` or `status`.
    pub subresource: &'a str,
    /// Empty for cluster-scoped resources.
    pub namespace: &'a str,
    pub name: &'a str,
    /// The object as it would be stored (after the kind's preparation), with `apiVersion`/`kind`.
    pub object: &'a Value,
    /// The stored object an UPDATE replaces.
    pub old: Option<&'a Value>,
    /// The authenticated user name (`system:serviceaccount:<ns>:<name>` for service accounts).
    pub user: &'a str,
    pub dry_run: bool,
}

/// Runs validating admission: `Ok(warnings)` when the write may proceed.
pub fn admit(api: &Api, req: &Request) -> Result<Vec<String>, ApiError> {
    let warnings = policy::evaluate(api, req)?;
    quota::check(api, req)?;
    Ok(warnings)
}

/// `obj` with the request's `apiVersion` and `kind` (what admission hands to policies).
pub fn typed(info: &ResourceInfo, obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Value::Object(m) = &mut v {
        m.insert("apiVersion".into(), Value::String(info.api_version()));
        m.insert("kind".into(), Value::String(info.kind.clone()));
    }
    v
}
