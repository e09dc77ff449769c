//! Label selectors over WorkerCluster labels, as written in an origin's `courier.dev/cluster-selector`
//! annotation: `region=eu,gpu in (a100,h100)`, `!spot`, `ssd`, `tier!=dev`, `zone notin (a,b)`.
//!
//! kube-core 5 has the selector model and its matching (`kube_core::{Selector, Expression}`) but no
//! parser for the string form, so this module adds one following apimachinery's `labels.Parse`
//! grammar. Keys and values are checked like the API server checks label keys and values, and every
//! error names the requirement it is about. The set-based comparison operators `>`/`<` (`gt`/`lt`) are
//! rejected: kube-core cannot represent them and nobody schedules by "region greater than 3".

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube_core::{Expression, Selector, SelectorExt};

/// A parsed cluster selector. The empty string selects every cluster.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusterSelector {
    selector: Selector,
    source: String,
}

/// Why a selector string does not parse. Every variant names the offending requirement.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("empty requirement at byte {position} (stray comma?)")]
    EmptyRequirement { position: usize },
    #[error("{requirement:?}: missing closing ')'")]
    UnclosedSet { requirement: String },
    #[error("{requirement:?}: unexpected {found:?}")]
    Unexpected { requirement: String, found: String },
    #[error("{requirement:?}: invalid label key {key:?}: {reason}")]
    InvalidKey {
        requirement: String,
        key: String,
        reason: String,
    },
    #[error("{requirement:?}: invalid label value {value:?}: {reason}")]
    InvalidValue {
        requirement: String,
        value: String,
        reason: String,
    },
    #[error(
        "{requirement:?}: operator {operator:?} is not supported (use =, ==, !=, in, notin, a bare key or !key)"
    )]
    UnsupportedOperator {
        requirement: String,
        operator: String,
    },
    #[error(
        "{requirement:?}: {operator:?} needs a value list in parentheses, e.g. \"key {operator} (a,b)\""
    )]
    ExpectedValueList {
        requirement: String,
        operator: String,
    },
    #[error("{requirement:?}: empty value list")]
    EmptyValueList { requirement: String },
}

impl ClusterSelector {
    /// Parses a selector string; the empty (or all-blank) string selects everything.
    pub fn parse(input: &str) -> Result<Self, SelectorError> {
        let mut expressions = Vec::new();
        for (position, requirement) in split_requirements(input)? {
            let trimmed = requirement.trim();
            if trimmed.is_empty() {
                // A blank whole selector is "everything"; a blank part between commas is a typo.
                if input.trim().is_empty() {
                    break;
                }
                return Err(SelectorError::EmptyRequirement { position });
            }
            expressions.push(parse_requirement(trimmed)?);
        }
        Ok(Self {
            selector: expressions.into_iter().collect(),
            source: input.trim().to_string(),
        })
    }

    /// A `metav1.LabelSelector` (e.g. a WorkerCluster's `spec.namespaceSelector`), checked like the
    /// string form it is written back to (`matchLabels` as `k=v`, then `matchExpressions`); an empty
    /// one selects everything.
    pub fn from_label_selector(ls: &LabelSelector) -> Result<Self, SelectorError> {
        let mut parts: Vec<String> = Vec::new();
        for (k, v) in ls.match_labels.iter().flatten() {
            parts.push(format!("{k}={v}"));
        }
        for e in ls.match_expressions.iter().flatten() {
            let values = e.values.clone().unwrap_or_default().join(",");
            parts.push(match e.operator.as_str() {
                "In" => format!("{} in ({values})", e.key),
                "NotIn" => format!("{} notin ({values})", e.key),
                "Exists" => e.key.clone(),
                "DoesNotExist" => format!("!{}", e.key),
                other => {
                    return Err(SelectorError::UnsupportedOperator {
                        requirement: format!("{} {other} ({values})", e.key),
                        operator: other.to_string(),
                    });
                }
            });
        }
        Self::parse(&parts.join(","))
    }

    /// The selector that matches every cluster.
    pub fn everything() -> Self {
        Self::default()
    }

    /// Whether a cluster with these labels is selected.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.selector.matches(labels)
    }
}

impl fmt::Display for ClusterSelector {
    /// The string as the user wrote it (trimmed), which is what messages should quote.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

/// Splits at commas outside parentheses, yielding (byte offset, text) per requirement.
fn split_requirements(input: &str) -> Result<Vec<(usize, &str)>, SelectorError> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut open: Option<usize> = None;
    for (i, c) in input.char_indices() {
        match c {
            '(' if open.is_some() => {
                return Err(SelectorError::Unexpected {
                    requirement: input[start..].trim().to_string(),
                    found: "(".into(),
                });
            }
            '(' => open = Some(i),
            ')' if open.is_none() => {
                return Err(SelectorError::Unexpected {
                    requirement: input[start..=i].trim().to_string(),
                    found: ")".into(),
                });
            }
            ')' => open = None,
            ',' if open.is_none() => {
                parts.push((start, &input[start..i]));
                start = i + 1;
            }
            _ => {}
        }
    }
    if open.is_some() {
        return Err(SelectorError::UnclosedSet {
            requirement: input[start..].trim().to_string(),
        });
    }
    parts.push((start, &input[start..]));
    Ok(parts)
}

fn is_operator_char(c: char) -> bool {
    matches!(c, '=' | '!' | '(' | ')' | ',' | '<' | '>') || c.is_whitespace()
}

fn parse_requirement(req: &str) -> Result<Expression, SelectorError> {
    if let Some(rest) = req.strip_prefix('!') {
        let key = rest.trim();
        if key.is_empty() || key.contains(is_operator_char) {
            return Err(SelectorError::Unexpected {
                requirement: req.to_string(),
                found: key.to_string(),
            });
        }
        check_key(req, key)?;
        return Ok(Expression::DoesNotExist(key.to_string()));
    }
    let key_end = req.find(is_operator_char).unwrap_or(req.len());
    let key = &req[..key_end];
    if key.is_empty() {
        return Err(SelectorError::Unexpected {
            requirement: req.to_string(),
            found: req.chars().next().map(String::from).unwrap_or_default(),
        });
    }
    check_key(req, key)?;
    let rest = req[key_end..].trim_start();
    if rest.is_empty() {
        return Ok(Expression::Exists(key.to_string()));
    }
    let single = |value: &str| -> Result<String, SelectorError> {
        let value = value.trim();
        check_value(req, value)?;
        Ok(value.to_string())
    };
    if let Some(v) = rest.strip_prefix("==") {
        return Ok(Expression::Equal(key.to_string(), single(v)?));
    }
    if let Some(v) = rest.strip_prefix("!=") {
        return Ok(Expression::NotEqual(key.to_string(), single(v)?));
    }
    if let Some(v) = rest.strip_prefix('=') {
        return Ok(Expression::Equal(key.to_string(), single(v)?));
    }
    if rest.starts_with('<') || rest.starts_with('>') {
        return Err(SelectorError::UnsupportedOperator {
            requirement: req.to_string(),
            operator: rest[..1].to_string(),
        });
    }
    let word_end = rest.find(is_operator_char).unwrap_or(rest.len());
    let (word, after) = rest.split_at(word_end);
    match word {
        "in" | "notin" => {
            let values = parse_value_list(req, word, after.trim())?;
            Ok(if word == "in" {
                Expression::In(key.to_string(), values)
            } else {
                Expression::NotIn(key.to_string(), values)
            })
        }
        "gt" | "lt" => Err(SelectorError::UnsupportedOperator {
            requirement: req.to_string(),
            operator: word.to_string(),
        }),
        _ => Err(SelectorError::Unexpected {
            requirement: req.to_string(),
            found: rest.to_string(),
        }),
    }
}

fn parse_value_list(
    req: &str,
    operator: &str,
    list: &str,
) -> Result<BTreeSet<String>, SelectorError> {
    let inner = list
        .strip_prefix('(')
        .and_then(|l| l.strip_suffix(')'))
        .ok_or_else(|| SelectorError::ExpectedValueList {
            requirement: req.to_string(),
            operator: operator.to_string(),
        })?;
    if inner.trim().is_empty() {
        return Err(SelectorError::EmptyValueList {
            requirement: req.to_string(),
        });
    }
    inner
        .split(',')
        .map(|v| {
            let v = v.trim();
            check_value(req, v)?;
            Ok(v.to_string())
        })
        .collect()
}

fn check_key(req: &str, key: &str) -> Result<(), SelectorError> {
    label_key_problem(key).map_or(Ok(()), |reason| {
        Err(SelectorError::InvalidKey {
            requirement: req.to_string(),
            key: key.to_string(),
            reason,
        })
    })
}

fn check_value(req: &str, value: &str) -> Result<(), SelectorError> {
    label_value_problem(value).map_or(Ok(()), |reason| {
        Err(SelectorError::InvalidValue {
            requirement: req.to_string(),
            value: value.to_string(),
            reason,
        })
    })
}

const NAME_RULE: &str = "must be 63 characters or less, consist of alphanumerics, '-', '_' or '.', \
                         and start and end with an alphanumeric";

/// Why `key` is not a valid label key (apimachinery `IsQualifiedName`), or `None` when it is.
pub fn label_key_problem(key: &str) -> Option<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            return Some("prefix before '/' must be non-empty".into());
        }
        if !is_dns_subdomain(prefix) {
            return Some(format!(
                "prefix {prefix:?} must be a lowercase DNS subdomain (at most 253 characters)"
            ));
        }
    }
    if name.is_empty() {
        return Some("name part must be non-empty".into());
    }
    if !is_label_name(name) {
        return Some(format!("name part {NAME_RULE}"));
    }
    None
}

/// Why `value` is not a valid label value, or `None` when it is (the empty value is valid).
pub fn label_value_problem(value: &str) -> Option<String> {
    if value.is_empty() || is_label_name(value) {
        None
    } else {
        Some(format!("a label value {NAME_RULE}"))
    }
}

fn is_label_name(s: &str) -> bool {
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn sel(s: &str) -> ClusterSelector {
        ClusterSelector::parse(s).unwrap_or_else(|e| panic!("{s:?} should parse: {e}"))
    }

    #[test]
    fn empty_selects_everything() {
        for s in ["", "   "] {
            let selector = sel(s);
            assert!(selector.matches(&labels(&[])));
            assert!(selector.matches(&labels(&[("a", "b")])));
        }
    }

    #[test]
    fn design_example() {
        let s = sel("region=eu,gpu in (a100,h100)");
        assert!(s.matches(&labels(&[("region", "eu"), ("gpu", "a100")])));
        assert!(s.matches(&labels(&[("region", "eu"), ("gpu", "h100"), ("x", "y")])));
        assert!(!s.matches(&labels(&[("region", "eu"), ("gpu", "t4")])));
        assert!(!s.matches(&labels(&[("region", "us"), ("gpu", "a100")])));
        assert!(!s.matches(&labels(&[("region", "eu")])));
        assert_eq!(s.to_string(), "region=eu,gpu in (a100,h100)");
    }

    #[test]
    fn every_operator() {
        type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], bool);
        let cases: &[Case<'_>] = &[
            ("x", &[("x", "")], true),
            ("x", &[], false),
            ("!x", &[], true),
            ("!x", &[("x", "1")], false),
            ("! x", &[("y", "1")], true),
            ("x=1", &[("x", "1")], true),
            ("x==1", &[("x", "1")], true),
            ("x = 1", &[("x", "2")], false),
            ("x!=1", &[("x", "2")], true),
            ("x!=1", &[], true),
            ("x!=1", &[("x", "1")], false),
            ("x notin (a,b)", &[], true),
            ("x notin (a, b)", &[("x", "b")], false),
            ("x notin(a)", &[("x", "c")], true),
            ("x in(a)", &[("x", "a")], true),
            ("x in ( a , b )", &[("x", "b")], true),
            ("x=", &[("x", "")], true),
            (
                "courier.dev/tier=gold",
                &[("courier.dev/tier", "gold")],
                true,
            ),
            ("in", &[("in", "1")], true),
            (" a=1 , !b ", &[("a", "1")], true),
        ];
        for (s, l, want) in cases {
            assert_eq!(sel(s).matches(&labels(l)), *want, "{s:?} on {l:?}");
        }
    }

    #[test]
    fn errors_name_the_bad_part() {
        let cases: &[(&str, &str)] = &[
            ("region=eu,,gpu", "empty requirement at byte 10"),
            ("region=eu,", "empty requirement"),
            (
                "region=eu,gpu in (a100",
                "\"gpu in (a100\": missing closing ')'",
            ),
            ("gpu in a100", "\"gpu in a100\": \"in\" needs a value list"),
            ("gpu in ()", "\"gpu in ()\": empty value list"),
            ("gpu in ((a))", "unexpected \"(\""),
            ("a=1)", "\"a=1)\": unexpected \")\""),
            ("Region_=eu", "invalid label key \"Region_\""),
            ("-x", "invalid label key \"-x\""),
            ("Bad.Prefix/x=1", "prefix \"Bad.Prefix\""),
            ("/x", "prefix before '/' must be non-empty"),
            ("x/", "name part must be non-empty"),
            ("x=a b", "invalid label value \"a b\""),
            ("x in (ok,-bad)", "invalid label value \"-bad\""),
            ("x>1", "operator \">\" is not supported"),
            ("x gt 1", "operator \"gt\" is not supported"),
            ("x foo", "\"x foo\": unexpected \"foo\""),
            ("=x", "unexpected \"=\""),
            ("!", "\"!\": unexpected \"\""),
            ("!x=1", "\"!x=1\": unexpected \"x=1\""),
        ];
        for (s, want) in cases {
            let err = ClusterSelector::parse(s).expect_err(s).to_string();
            assert!(
                err.contains(want),
                "{s:?}: got {err:?}, want it to contain {want:?}"
            );
        }
    }

    #[test]
    fn key_and_value_rules() {
        assert!(label_key_problem("a").is_none());
        assert!(label_key_problem("kubernetes.io/hostname").is_none());
        assert!(label_key_problem(&"a".repeat(63)).is_none());
        assert!(label_key_problem(&"a".repeat(64)).is_some());
        assert!(label_key_problem("a/b/c").is_some());
        assert!(label_value_problem("").is_none());
        assert!(label_value_problem("A-1_b.c").is_none());
        assert!(label_value_problem("x.").is_some());
    }

    /// A key's prefix is a DNS-1123 subdomain: dot-separated labels of lowercase letters, digits
    /// and '-', each starting and ending with a letter or digit, at most 253 characters in all.
    #[test]
    fn a_key_prefix_follows_the_dns_subdomain_rule() {
        for ok in ["k8s.io", "example-1.com", "1.2.3", "a", "x0-9y.io"] {
            assert!(
                label_key_problem(&format!("{ok}/name")).is_none(),
                "{ok:?} is a DNS subdomain"
            );
        }
        let long = vec!["a".repeat(63); 4].join(".");
        assert!(long.len() > 253);
        for bad in [
            "Example.com",
            "a_b.io",
            "-a.io",
            "a-.io",
            "a..b",
            ".a",
            "a.",
            long.as_str(),
        ] {
            assert!(
                label_key_problem(&format!("{bad}/name")).is_some(),
                "{bad:?} is not a DNS subdomain"
            );
        }
        let longest = format!("{}.{}", "a".repeat(63), "b".repeat(189));
        assert_eq!(longest.len(), 253);
        assert!(label_key_problem(&format!("{longest}/name")).is_none());
    }

    fn label_token() -> impl Strategy<Value = String> {
        "[a-z][a-z0-9]{0,4}"
    }

    proptest! {
        /// The parser agrees with a direct evaluation of the same requirements.
        #[test]
        fn parsed_equality_sets_match_like_maps(
            wanted in proptest::collection::btree_map(label_token(), label_token(), 0..4),
            have in proptest::collection::btree_map(label_token(), label_token(), 0..6),
        ) {
            let text: Vec<String> = wanted.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let s = ClusterSelector::parse(&text.join(",")).expect("valid");
            let expected = wanted.iter().all(|(k, v)| have.get(k) == Some(v));
            prop_assert_eq!(s.matches(&have), expected);
        }

        /// Arbitrary input never panics; it parses or names a problem.
        #[test]
        fn never_panics(input in "[a-z=!(), ]{0,20}") {
            let _ = ClusterSelector::parse(&input);
        }

        /// Set requirements: in / notin are complements when the key is present.
        #[test]
        fn in_notin_complement(key in label_token(), values in proptest::collection::btree_set(label_token(), 1..4), v in label_token()) {
            let list = values.iter().cloned().collect::<Vec<_>>().join(",");
            let yes = ClusterSelector::parse(&format!("{key} in ({list})")).expect("in");
            let no = ClusterSelector::parse(&format!("{key} notin ({list})")).expect("notin");
            let l = BTreeMap::from([(key.clone(), v.clone())]);
            prop_assert_eq!(yes.matches(&l), values.contains(&v));
            prop_assert_eq!(no.matches(&l), !values.contains(&v));
        }
    }
}
