//! Who may see what, when the web view is bound to a non-loopback address: the caller's bearer
//! token is checked with a TokenReview against the management cluster, and what they see with
//! SubjectAccessReviews for that user (`list jobs` per namespace, `list workerclusters` for the
//! clusters page) — the answers the caller would get from the API server itself. Both kinds of
//! answer are cached briefly in bounded maps, so page views and live updates cost no API request
//! most of the time. Tokens are never logged.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures::{StreamExt as _, stream};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Client;
use kube::api::{Api, PostParams};

use crate::locks::MutexExt as _;

/// How long an answer is reused.
const TTL: Duration = Duration::from_secs(30);
/// How long a refused token is remembered (shorter: a fixed RBAC binding shows soon).
const NEGATIVE_TTL: Duration = Duration::from_secs(5);
/// At most this many tokens and access answers are cached.
const MAX_TOKENS: usize = 1024;
const MAX_REVIEWS: usize = 16_384;
/// Access reviews sent at once for one page view.
const PARALLEL_REVIEWS: usize = 8;

/// An authenticated caller, as the TokenReview named them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub username: String,
    pub uid: Option<String>,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

/// Which Jobs a caller may see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// Every namespace (loopback binding, or `list jobs` cluster-wide).
    All,
    Namespaces(BTreeSet<String>),
}

impl Access {
    pub fn allows(&self, namespace: &str) -> bool {
        match self {
            Access::All => true,
            Access::Namespaces(set) => set.contains(namespace),
        }
    }
}

/// The management cluster could not answer a review.
#[derive(Debug, thiserror::Error)]
#[error("cannot check access with the management cluster: {0}")]
pub struct ReviewError(String);

/// A small map whose entries expire, bounded by dropping expired entries first and then everything
/// (a burst of distinct keys can only cost more reviews, never more memory).
struct TtlCache<K, V> {
    map: HashMap<K, (Instant, V)>,
    cap: usize,
}

impl<K: Eq + Hash, V: Clone> TtlCache<K, V> {
    fn new(cap: usize) -> Self {
        Self {
            map: HashMap::new(),
            cap,
        }
    }

    fn get(&self, k: &K, now: Instant) -> Option<V> {
        self.map
            .get(k)
            .filter(|(until, _)| *until > now)
            .map(|(_, v)| v.clone())
    }

    fn put(&mut self, k: K, v: V, ttl: Duration, now: Instant) {
        if self.map.len() >= self.cap {
            self.map.retain(|_, (until, _)| *until > now);
            if self.map.len() >= self.cap {
                self.map.clear();
            }
        }
        self.map.insert(k, (now + ttl, v));
    }
}

/// (user, verb, group, resource, namespace).
type ReviewKey = (String, &'static str, &'static str, &'static str, String);

pub struct Reviewer {
    client: Client,
    timeout: Duration,
    tokens: Mutex<TtlCache<String, Option<Caller>>>,
    reviews: Mutex<TtlCache<ReviewKey, bool>>,
}

impl Reviewer {
    pub fn new(client: Client, timeout: Duration) -> Self {
        Self {
            client,
            timeout,
            tokens: Mutex::new(TtlCache::new(MAX_TOKENS)),
            reviews: Mutex::new(TtlCache::new(MAX_REVIEWS)),
        }
    }

    /// Creates a (never stored) review object and returns the server's answer.
    async fn create<K>(&self, review: &K, what: &str) -> Result<K, ReviewError>
    where
        K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope, DynamicType = ()>
            + Clone
            + serde::Serialize
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        let api: Api<K> = Api::all(self.client.clone());
        tokio::time::timeout(self.timeout, api.create(&PostParams::default(), review))
            .await
            .map_err(|_| ReviewError(format!("{what} timed out")))?
            .map_err(|e| {
                ReviewError(format!(
                    "{what}: {}",
                    crate::errors::CallError::from_kube(e)
                ))
            })
    }

    /// The caller this token belongs to; `None` when the API server does not know it.
    pub async fn authenticate(&self, token: &str) -> Result<Option<Caller>, ReviewError> {
        if let Some(hit) = self
            .tokens
            .lock_or_recover()
            .get(&token.to_string(), Instant::now())
        {
            return Ok(hit);
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                audiences: None,
            },
            ..Default::default()
        };
        let answer = self.create(&review, "TokenReview").await?;
        let caller = answer.status.and_then(|s| {
            if s.authenticated != Some(true) {
                return None;
            }
            let user = s.user?;
            Some(Caller {
                username: user.username.filter(|u| !u.is_empty())?,
                uid: user.uid,
                groups: user.groups.unwrap_or_default(),
                extra: user.extra.unwrap_or_default(),
            })
        });
        let ttl = if caller.is_some() { TTL } else { NEGATIVE_TTL };
        self.tokens
            .lock_or_recover()
            .put(token.to_string(), caller.clone(), ttl, Instant::now());
        Ok(caller)
    }

    /// Whether `caller` may `verb` `group`/`resource` in `namespace` (empty: cluster-wide).
    pub async fn allowed(
        &self,
        caller: &Caller,
        verb: &'static str,
        group: &'static str,
        resource: &'static str,
        namespace: &str,
    ) -> Result<bool, ReviewError> {
        let key: ReviewKey = (
            caller.username.clone(),
            verb,
            group,
            resource,
            namespace.to_string(),
        );
        if let Some(hit) = self.reviews.lock_or_recover().get(&key, Instant::now()) {
            return Ok(hit);
        }
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(caller.username.clone()),
                uid: caller.uid.clone(),
                groups: Some(caller.groups.clone()),
                extra: (!caller.extra.is_empty()).then(|| caller.extra.clone()),
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(verb.into()),
                    group: Some(group.into()),
                    resource: Some(resource.into()),
                    namespace: (!namespace.is_empty()).then(|| namespace.to_string()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let answer = self.create(&review, "SubjectAccessReview").await?;
        let allowed = answer.status.is_some_and(|s| s.allowed);
        self.reviews
            .lock_or_recover()
            .put(key, allowed, TTL, Instant::now());
        Ok(allowed)
    }

    /// The namespaces among `namespaces` in which `caller` may list Jobs (all of them when it may
    /// list Jobs cluster-wide).
    pub async fn job_access(
        &self,
        caller: &Caller,
        namespaces: BTreeSet<String>,
    ) -> Result<Access, ReviewError> {
        if self.allowed(caller, "list", "batch", "jobs", "").await? {
            return Ok(Access::All);
        }
        let answers: Vec<Result<(String, bool), ReviewError>> = stream::iter(namespaces)
            .map(|ns| async move {
                let ok = self.allowed(caller, "list", "batch", "jobs", &ns).await?;
                Ok((ns, ok))
            })
            .buffer_unordered(PARALLEL_REVIEWS)
            .collect()
            .await;
        let mut allowed = BTreeSet::new();
        for a in answers {
            let (ns, ok) = a?;
            if ok {
                allowed.insert(ns);
            }
        }
        Ok(Access::Namespaces(allowed))
    }

    /// Whether `caller` may list WorkerClusters (the clusters page).
    pub async fn may_list_clusters(&self, caller: &Caller) -> Result<bool, ReviewError> {
        self.allowed(caller, "list", courier_api::GROUP, "workerclusters", "")
            .await
    }
}

/// The bearer token of a request: `Authorization: Bearer <token>`, else the sign-in cookie.
pub fn token_of(headers: &http::HeaderMap) -> Option<String> {
    if let Some(v) = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    {
        let (scheme, rest) = v.trim().split_once(' ')?;
        return scheme
            .eq_ignore_ascii_case("bearer")
            .then(|| rest.trim().to_string())
            .filter(|t| !t.is_empty());
    }
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|kv| {
            let (k, v) = kv.trim().split_once('=')?;
            (k == COOKIE).then(|| v.to_string())
        })
        .filter(|t| !t.is_empty())
}

/// The sign-in cookie's name.
pub const COOKIE: &str = "courier_token";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_come_from_the_header_or_the_cookie() {
        let mut h = http::HeaderMap::new();
        assert_eq!(token_of(&h), None);
        h.insert(
            http::header::COOKIE,
            "a=b; courier_token=abc.def; c=d".parse().unwrap(),
        );
        assert_eq!(token_of(&h).as_deref(), Some("abc.def"));
        h.insert(http::header::AUTHORIZATION, "Bearer  xyz ".parse().unwrap());
        assert_eq!(token_of(&h).as_deref(), Some("xyz"), "the header wins");
        h.insert(
            http::header::AUTHORIZATION,
            "Basic dXNlcg==".parse().unwrap(),
        );
        assert_eq!(token_of(&h), None, "only bearer tokens");
        let mut empty = http::HeaderMap::new();
        empty.insert(http::header::COOKIE, "courier_token=".parse().unwrap());
        assert_eq!(token_of(&empty), None);
    }

    #[test]
    fn caches_expire_and_stay_bounded() {
        let mut c: TtlCache<u32, bool> = TtlCache::new(4);
        let t0 = Instant::now();
        c.put(1, true, Duration::from_secs(1), t0);
        assert_eq!(c.get(&1, t0), Some(true));
        assert_eq!(c.get(&1, t0 + Duration::from_secs(2)), None, "expired");
        for i in 0..100 {
            c.put(i, false, Duration::from_secs(60), t0);
            assert!(c.map.len() <= 4);
        }
        assert_eq!(c.get(&99, t0), Some(false), "the newest is kept");
    }

    #[test]
    fn access_allows_its_namespaces() {
        assert!(Access::All.allows("x"));
        let some = Access::Namespaces(BTreeSet::from(["a".to_string()]));
        assert!(some.allows("a") && !some.allows("b"));
    }
}
