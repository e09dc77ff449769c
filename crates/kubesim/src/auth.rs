//! Bearer-token authentication and rule-based authorization. Tokens map to users; each user has an
//! RBAC-like rule set, so tests can simulate a token that lost its rights (SelfSubjectAccessReview
//! answers and real requests agree, both coming from `RuleSet::decide`).
//!
//! Besides the static tokens (a token file), the server issues bound tokens through the TokenRequest
//! API (`serviceaccounts/<name>/token`): each authenticates as its ServiceAccount until it expires.
//! Their rights are the rules granted to that user name ([`Users::grant`], what RBAC bindings to the
//! ServiceAccount would give), else those of the user's static tokens. Expiry is judged on the
//! server clock, which a test may move forward ([`Users::advance_clock`]) instead of waiting out
//! the ten-minute minimum lifetime.

use std::collections::HashMap;
use std::sync::RwLock;
use std::sync::atomic::{AtomicI64, Ordering};

use jiff::Timestamp;

use crate::kinds::ssar::{AccessAttributes, Decision, RuleSet};

/// An authenticated user.
#[derive(Debug, Clone, PartialEq)]
pub struct User {
    pub name: String,
    pub rules: RuleSet,
}

/// A token issued by the TokenRequest API: whose, and until when.
#[derive(Debug, Clone)]
struct Bound {
    user: String,
    expires: Timestamp,
}

/// The token table.
#[derive(Default)]
pub struct Users {
    tokens: RwLock<HashMap<String, User>>,
    bound: RwLock<HashMap<String, Bound>>,
    grants: RwLock<HashMap<String, RuleSet>>,
    /// Seconds added to the wall clock for token expiry (see `advance_clock`).
    skew: AtomicI64,
}

impl Users {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) a token.
    pub fn add(&self, token: &str, user: User) {
        self.tokens
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(token.to_string(), user);
    }

    /// Revokes a token: requests with it get 401 from then on.
    pub fn revoke(&self, token: &str) -> bool {
        self.tokens
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(token)
            .is_some()
    }

    /// Replaces a token's rights; false if the token is unknown.
    pub fn set_rules(&self, token: &str, rules: RuleSet) -> bool {
        match self
            .tokens
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(token)
        {
            Some(u) => {
                u.rules = rules;
                true
            }
            None => false,
        }
    }

    /// Grants `rules` to the user `name` (what RBAC bindings would): the rights of its bound tokens
    /// and of SubjectAccessReviews naming it.
    pub fn grant(&self, name: &str, rules: RuleSet) {
        self.grants
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.to_string(), rules);
    }

    /// The server's clock for token expiry.
    pub fn now(&self) -> Timestamp {
        let skew = jiff::SignedDuration::from_secs(self.skew.load(Ordering::Relaxed));
        Timestamp::now().checked_add(skew).unwrap_or(Timestamp::MAX)
    }

    /// Moves the token clock forward by `seconds` (bound tokens expire as if that much time passed).
    pub fn advance_clock(&self, seconds: i64) {
        self.skew.fetch_add(seconds, Ordering::Relaxed);
    }

    /// Issues a bound token for `user`, valid for `seconds` from now; returns it and its expiry.
    pub fn issue(&self, user: &str, seconds: i64) -> (String, Timestamp) {
        let token = format!(
            "kubesim-bound.{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        let expires = self
            .now()
            .checked_add(jiff::SignedDuration::from_secs(seconds))
            .unwrap_or(Timestamp::MAX);
        self.bound
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                token.clone(),
                Bound {
                    user: user.to_string(),
                    expires,
                },
            );
        (token, expires)
    }

    /// The rights of the user named `name` (a SubjectAccessReview names a user, not a token): what
    /// was granted to that name, else the union of the rule sets of every static token of that
    /// user; `None` when neither exists.
    pub fn rules_of(&self, name: &str) -> Option<RuleSet> {
        if let Some(r) = self
            .grants
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
        {
            return Some(r.clone());
        }
        let tokens = self.tokens.read().unwrap_or_else(|p| p.into_inner());
        let mut users = tokens.values().filter(|u| u.name == name).peekable();
        users.peek()?;
        Some(users.fold(RuleSet::none(), |mut all, u| {
            all.allow.extend(u.rules.allow.iter().cloned());
            all.deny.extend(u.rules.deny.iter().cloned());
            all
        }))
    }

    pub fn authenticate(&self, token: &str) -> Option<User> {
        if let Some(u) = self
            .tokens
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(token)
        {
            return Some(u.clone());
        }
        let bound = self
            .bound
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(token)
            .cloned()?;
        // An expired token is rejected like an unknown one (401), as the real server's JWT
        // authenticator does.
        if self.now() >= bound.expires {
            return None;
        }
        let rules = self.rules_of(&bound.user).unwrap_or_else(RuleSet::none);
        Some(User {
            name: bound.user,
            rules,
        })
    }
}

impl User {
    pub fn admin(name: &str) -> Self {
        Self {
            name: name.to_string(),
            rules: RuleSet::allow_all(),
        }
    }

    pub fn decide(&self, a: &AccessAttributes) -> Decision {
        self.rules.decide(a)
    }
}
