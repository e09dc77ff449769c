//! Bearer-token authentication and rule-based authorization. Tokens map to users; each user has an
//! RBAC-like rule set, so tests can simulate a token that lost its rights (SelfSubjectAccessReview
//! answers and real requests agree, both coming from `RuleSet::decide`).

use std::collections::HashMap;
use std::sync::RwLock;

use crate::kinds::ssar::{AccessAttributes, Decision, RuleSet};

/// An authenticated user.
#[derive(Debug, Clone, PartialEq)]
pub struct User {
    pub name: String,
    pub rules: RuleSet,
}

/// The token table.
#[derive(Default)]
pub struct Users {
    tokens: RwLock<HashMap<String, User>>,
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

    /// The rights of the user named `name` (a SubjectAccessReview names a user, not a token): the
    /// union of the rule sets of every token of that user; `None` when no token has that user.
    pub fn rules_of(&self, name: &str) -> Option<RuleSet> {
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
        self.tokens
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(token)
            .cloned()
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
