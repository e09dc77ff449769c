//! The origin's merge-patch request, built in one pass: the request `kube::core::Request::patch`
//! and `patch_subresource` build with `PatchParams` naming only Courier's field manager, without
//! their steps per write (the resource's url path formatted twice, the target formatted again, the
//! field manager url-encoded, the header values parsed, a `PatchParams` with its own `String`).
//! The origin writes are the controller's most frequent requests (about five per Job).

use http::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use kube::core::request::Error;
use kube::core::{NamespaceResourceScope, Resource};
use serde_json::Value;

use crate::config::FIELD_MANAGER;
use crate::queue::ObjectKey;

/// A request as kube's builder returns it.
pub type Built = Result<http::Request<Vec<u8>>, Error>;

/// `PATCH` of `key` (its `/status` when `status`) with `patch` as a JSON merge patch, answered as
/// JSON, under Courier's field manager.
pub fn merge_patch<K>(key: &ObjectKey, status: bool, patch: &Value) -> Built
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>,
{
    if key.name.is_empty() {
        return Err(Error::Validation("A non-empty name is required".into()));
    }
    let (group, version, plural) = (K::group(&()), K::version(&()), K::plural(&()));
    let root = if group.is_empty() { "/api/" } else { "/apis/" };
    let mut url = String::with_capacity(
        root.len()
            + group.len()
            + version.len()
            + key.namespace.len()
            + plural.len()
            + key.name.len()
            + FIELD_MANAGER.len()
            + 48,
    );
    url.push_str(root);
    if !group.is_empty() {
        url.push_str(&group);
        url.push('/');
    }
    url.push_str(&version);
    url.push_str("/namespaces/");
    url.push_str(&key.namespace);
    url.push('/');
    url.push_str(&plural);
    url.push('/');
    url.push_str(&key.name);
    if status {
        url.push_str("/status");
    }
    // Courier's field manager needs no url-encoding (the tests compare with kube's, which encodes).
    // The same `?&` kube's url-encoder writes (it sees the path as a pair before the first).
    url.push_str("?&fieldManager=");
    url.push_str(FIELD_MANAGER);
    let body = serde_json::to_vec(patch).map_err(Error::SerializeBody)?;
    http::Request::patch(url)
        .header(ACCEPT, HeaderValue::from_static("application/json"))
        .header(
            CONTENT_TYPE,
            HeaderValue::from_static("application/merge-patch+json"),
        )
        .body(body)
        .map_err(Error::BuildRequest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::origin::answer::WriteAnswer;
    use crate::watch::SlimJob;
    use kube::api::{Patch, PatchParams};
    use proptest::prelude::*;
    use serde_json::json;

    /// What kube's own builder sends for the same write.
    fn kube_built<K>(key: &ObjectKey, status: bool, patch: &Value) -> Built
    where
        K: Resource<DynamicType = (), Scope = NamespaceResourceScope>,
    {
        let pp = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        };
        let patch = Patch::Merge(patch);
        let request = kube::core::Request::new(K::url_path(&(), Some(&key.namespace)));
        if status {
            request.patch_subresource("status", &key.name, &pp, &patch)
        } else {
            request.patch(&key.name, &pp, &patch)
        }
    }

    fn same(a: &http::Request<Vec<u8>>, b: &http::Request<Vec<u8>>) {
        assert_eq!(a.method(), b.method());
        assert_eq!(a.uri(), b.uri());
        assert_eq!(a.uri().to_string(), b.uri().to_string());
        assert_eq!(a.version(), b.version());
        assert_eq!(a.headers(), b.headers());
        assert_eq!(a.body(), b.body());
    }

    fn check<K>(key: &ObjectKey, status: bool, patch: &Value)
    where
        K: Resource<DynamicType = (), Scope = NamespaceResourceScope>,
    {
        match (
            merge_patch::<K>(key, status, patch),
            kube_built::<K>(key, status, patch),
        ) {
            (Ok(ours), Ok(theirs)) => same(&ours, &theirs),
            (Err(ours), Err(theirs)) => assert_eq!(ours.to_string(), theirs.to_string()),
            (ours, theirs) => panic!("ours {ours:?}, kube's {theirs:?}"),
        }
    }

    #[test]
    fn an_empty_name_is_refused_as_kube_refuses_it() {
        let key = ObjectKey {
            namespace: "ns".into(),
            name: String::new(),
        };
        check::<WriteAnswer>(&key, true, &json!({}));
        check::<SlimJob>(&key, false, &json!({}));
    }

    fn patch_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            ".{0,12}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop::collection::btree_map("[a-zA-Z./-]{1,10}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect()))
        })
    }

    proptest! {
        /// The same method, url, headers and body as kube's builder, for any key (names that
        /// are no valid url path too) and patch.
        #[test]
        fn the_request_is_the_one_kube_builds(
            namespace in "[a-z0-9.-]{0,20}|.{0,8}",
            name in "[a-z0-9.-]{0,40}|.{0,8}",
            status in any::<bool>(),
            rv in "[0-9]{1,8}",
            body in patch_value(),
        ) {
            let key = ObjectKey { namespace, name };
            let patch = json!({"metadata": {"resourceVersion": rv}, "status": body});
            check::<WriteAnswer>(&key, status, &patch);
            check::<SlimJob>(&key, status, &patch);
        }
    }
}
