//! `metav1.LabelSelector`: validation (`ValidateLabelSelector`), conversion to a matcher
//! (`LabelSelectorAsSelector`) and printing (`FormatLabelSelector`).

use serde_json::{Map, Value};

use super::names::{is_qualified_name, is_valid_label_value};
use super::path::Path;
use super::sorted_keys;
use crate::errors::{BadValue, FieldError, FieldErrors};
use crate::json::{get_arr, get_obj, get_str};

/// `ValidateLabelSelector` with `AllowInvalidLabelValueInSelector` as given.
pub fn validate_label_selector(
    selector: Option<&Value>,
    allow_invalid_label_value: bool,
    field: &str,
) -> FieldErrors {
    let field = Path::new(field);
    let mut errs = Vec::new();
    let Some(selector) = selector.filter(|v| !v.is_null()) else {
        return errs;
    };
    errs.extend(super::validate_labels(
        get_obj(selector, &["matchLabels"]),
        field.child("matchLabels"),
    ));
    let exprs_path = field.child("matchExpressions");
    for (i, expr) in get_arr(selector, &["matchExpressions"])
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let path = exprs_path.index(i);
        let op = get_str(expr, &["operator"]).unwrap_or("");
        let values: Vec<&str> = get_arr(expr, &["values"])
            .map(|a| a.iter().map(|v| v.as_str().unwrap_or("")).collect())
            .unwrap_or_default();
        match op {
            "In" | "NotIn" => {
                if values.is_empty() {
                    errs.push(FieldError::required(
                        path.child("values"),
                        "must be specified when `operator` is 'In' or 'NotIn'",
                    ));
                }
            }
            "Exists" | "DoesNotExist" => {
                if !values.is_empty() {
                    errs.push(FieldError::forbidden(
                        path.child("values"),
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    ));
                }
            }
            _ => errs.push(FieldError::invalid(
                path.child("operator"),
                BadValue::Str(op.to_string()),
                "not a valid selector operator",
            )),
        }
        let key = get_str(expr, &["key"]).unwrap_or("");
        for msg in is_qualified_name(key) {
            errs.push(FieldError::invalid(
                path.child("key"),
                BadValue::Str(key.to_string()),
                msg,
            ));
        }
        if !allow_invalid_label_value {
            let values_path = path.child("values");
            for (j, v) in values.iter().enumerate() {
                for msg in is_valid_label_value(v) {
                    errs.push(FieldError::invalid(
                        values_path.index(j),
                        BadValue::Str(v.to_string()),
                        msg,
                    ));
                }
            }
        }
    }
    errs
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Equals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

#[derive(Debug, Clone, PartialEq)]
struct Requirement {
    key: String,
    op: Op,
    values: Vec<String>,
}

/// A parsed label selector (`labels.Selector`).
#[derive(Debug, Clone, PartialEq)]
pub enum Selector {
    /// A nil selector: matches nothing.
    Nothing,
    /// Requirements, all of which must hold (none = everything).
    Requirements(Vec<RequirementRef>),
}

/// Opaque requirement handle (kept public only through `Selector`).
#[derive(Debug, Clone, PartialEq)]
pub struct RequirementRef(Requirement);

/// `LabelSelectorAsSelector`: `Err(())` when Go's conversion would fail (bad operator, bad key or value,
/// wrong number of values), in which case callers skip their matching checks like Go does.
#[allow(clippy::result_unit_err)]
pub fn parse(selector: Option<&Value>) -> Result<Selector, ()> {
    let Some(selector) = selector.filter(|v| !v.is_null()) else {
        return Ok(Selector::Nothing);
    };
    let mut reqs = Vec::new();
    if let Some(ml) = get_obj(selector, &["matchLabels"]) {
        for k in sorted_keys(ml) {
            let v = ml[k].as_str().unwrap_or("");
            reqs.push(new_requirement(k, Op::Equals, vec![v.to_string()])?);
        }
    }
    if let Some(exprs) = get_arr(selector, &["matchExpressions"]) {
        for e in exprs {
            let op = match get_str(e, &["operator"]).unwrap_or("") {
                "In" => Op::In,
                "NotIn" => Op::NotIn,
                "Exists" => Op::Exists,
                "DoesNotExist" => Op::DoesNotExist,
                _ => return Err(()),
            };
            let values = get_arr(e, &["values"])
                .map(|a| {
                    a.iter()
                        .map(|v| v.as_str().unwrap_or("").to_string())
                        .collect()
                })
                .unwrap_or_default();
            reqs.push(new_requirement(
                get_str(e, &["key"]).unwrap_or(""),
                op,
                values,
            )?);
        }
    }
    // selector.Add keeps requirements sorted by key.
    reqs.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(Selector::Requirements(
        reqs.into_iter().map(RequirementRef).collect(),
    ))
}

/// `labels.NewRequirement`'s checks.
fn new_requirement(key: &str, op: Op, values: Vec<String>) -> Result<Requirement, ()> {
    if !is_qualified_name(key).is_empty() {
        return Err(());
    }
    let ok_count = match op {
        Op::In | Op::NotIn => !values.is_empty(),
        Op::Equals => values.len() == 1,
        Op::Exists | Op::DoesNotExist => values.is_empty(),
    };
    if !ok_count || values.iter().any(|v| !is_valid_label_value(v).is_empty()) {
        return Err(());
    }
    Ok(Requirement {
        key: key.to_string(),
        op,
        values,
    })
}

impl Selector {
    /// `Selector.Matches(labels.Set(labels))`; `labels` may be absent.
    pub fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        match self {
            Self::Nothing => false,
            Self::Requirements(reqs) => reqs.iter().all(|RequirementRef(r)| {
                let v = labels
                    .and_then(|l| l.get(&r.key))
                    .map(|v| v.as_str().unwrap_or(""));
                match r.op {
                    Op::Equals | Op::In => v.is_some_and(|v| r.values.iter().any(|x| x == v)),
                    Op::NotIn => !v.is_some_and(|v| r.values.iter().any(|x| x == v)),
                    Op::Exists => v.is_some(),
                    Op::DoesNotExist => v.is_none(),
                }
            }),
        }
    }

    /// `Selector.String()`: empty for nothing/everything.
    pub fn to_selector_string(&self) -> String {
        let Self::Requirements(reqs) = self else {
            return String::new();
        };
        reqs.iter()
            .map(|RequirementRef(r)| {
                let mut values = r.values.clone();
                values.sort();
                let joined = values.join(",");
                match r.op {
                    Op::Equals => format!("{}={joined}", r.key),
                    Op::In => format!("{} in ({joined})", r.key),
                    Op::NotIn => format!("{} notin ({joined})", r.key),
                    Op::Exists => r.key.clone(),
                    Op::DoesNotExist => format!("!{}", r.key),
                }
            })
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// `metav1.FormatLabelSelector`: `<error>` for unconvertible selectors, `<none>` for empty ones.
pub fn format_label_selector(selector: Option<&Value>) -> String {
    match parse(selector) {
        Err(()) => "<error>".to_string(),
        Ok(s) => {
            let out = s.to_selector_string();
            if out.is_empty() {
                "<none>".to_string()
            } else {
                out
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn matching() {
        let labels = json!({"a": "1", "b": "2"});
        let l = labels.as_object();
        let s = parse(Some(&json!({"matchLabels": {"a": "1"}}))).unwrap();
        assert!(s.matches(l));
        assert!(!s.matches(None));
        let s = parse(Some(&json!({"matchExpressions": [
            {"key": "b", "operator": "In", "values": ["2", "3"]},
            {"key": "c", "operator": "DoesNotExist"},
            {"key": "a", "operator": "NotIn", "values": ["9"]},
            {"key": "a", "operator": "Exists"}
        ]})))
        .unwrap();
        assert!(s.matches(l));
        assert!(!parse(None).unwrap().matches(l));
        assert!(parse(Some(&json!({}))).unwrap().matches(None));
        assert!(
            parse(Some(
                &json!({"matchExpressions": [{"key": "a", "operator": "Bad"}]})
            ))
            .is_err()
        );
        assert!(parse(Some(&json!({"matchLabels": {"a": "bad value"}}))).is_err());
    }

    #[test]
    fn formatting() {
        assert_eq!(
            format_label_selector(Some(
                &json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "u"}})
            )),
            "batch.kubernetes.io/controller-uid=u"
        );
        assert_eq!(
            format_label_selector(Some(
                &json!({"matchLabels": {"z": "1"}, "matchExpressions": [
                {"key": "a", "operator": "In", "values": ["y", "x"]},
                {"key": "b", "operator": "DoesNotExist"}]})
            )),
            "a in (x,y),!b,z=1"
        );
        assert_eq!(format_label_selector(None), "<none>");
        assert_eq!(format_label_selector(Some(&json!({}))), "<none>");
        assert_eq!(
            format_label_selector(Some(
                &json!({"matchExpressions": [{"key": "a", "operator": "X"}]})
            )),
            "<error>"
        );
    }

    #[test]
    fn validation_messages() {
        let e = validate_label_selector(
            Some(&json!({"matchLabels": {"a": "b c"}, "matchExpressions": [
                {"key": "k", "operator": "In"},
                {"key": "k", "operator": "Exists", "values": ["x"]},
                {"key": "k", "operator": "Near"}]})),
            false,
            "spec.selector",
        );
        let msgs: Vec<String> = e.iter().map(FieldError::message).collect();
        assert_eq!(msgs.len(), 4);
        assert!(msgs[0].starts_with("spec.selector.matchLabels: Invalid value: \"b c\""));
        assert_eq!(
            msgs[1],
            "spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"
        );
        assert_eq!(
            msgs[2],
            "spec.selector.matchExpressions[1].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
        );
        assert_eq!(
            msgs[3],
            "spec.selector.matchExpressions[2].operator: Invalid value: \"Near\": not a valid selector operator"
        );
    }
}
