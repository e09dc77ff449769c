//! CEL for admission policies, on the `cel` crate (cel-rust): compiling, turning JSON objects into
//! CEL values, and evaluating an expression to the kinds of result a policy needs.
//!
//! Differences from the API server's cel-go that matter here: expressions are parsed but not
//! type-checked against the object's schema (a typo in a field name is found when the expression
//! runs, not when the policy is created), and the Kubernetes CEL libraries (`quantity()`,
//! `isSorted()`, `url()`, authorizer) are absent. The standard macros and functions (`has`, `size`,
//! `in`, `startsWith`, `endsWith`, `contains`, `all`, `exists`, `exists_one`, `filter`, `map`,
//! ternaries, map and list literals) behave as in cel-go.

use std::collections::HashMap;

use serde_json::Value;

pub use cel::Context;
pub use cel::Program;

/// Parses `expr`; the parser's message when it does not.
pub fn compile(expr: &str) -> Result<Program, String> {
    Program::compile(expr).map_err(|e| e.to_string().replace('\n', " "))
}

/// A JSON value as CEL sees a Kubernetes object: integers are `int` (cel-go's view of int64
/// fields), other numbers `double`, objects maps with string keys.
pub fn to_cel(v: &Value) -> cel::Value {
    match v {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => cel::Value::Int(i),
            None => cel::Value::Float(n.as_f64().unwrap_or_default()),
        },
        Value::String(s) => cel::Value::from(s.as_str()),
        Value::Array(a) => cel::Value::from(a.iter().map(to_cel).collect::<Vec<_>>()),
        Value::Object(m) => cel::Value::from(
            m.iter()
                .map(|(k, v)| (k.clone(), to_cel(v)))
                .collect::<HashMap<String, cel::Value>>(),
        ),
    }
}

/// Runs `p` and expects a bool; the error text otherwise (cel-go words it
/// `expression '<e>' resulted in error: <why>` for validations, see `policy`).
pub fn eval_bool(p: &Program, ctx: &Context) -> Result<bool, String> {
    match p.execute(ctx) {
        Ok(cel::Value::Bool(b)) => Ok(b),
        Ok(other) => Err(format!("expected a bool result, got {:?}", other.type_of())),
        Err(e) => Err(e.to_string()),
    }
}

/// Runs `p` and expects a string (a `messageExpression`).
pub fn eval_string(p: &Program, ctx: &Context) -> Result<String, String> {
    match p.execute(ctx) {
        Ok(cel::Value::String(s)) => Ok(s.to_string()),
        Ok(other) => Err(format!(
            "expected a string result, got {:?}",
            other.type_of()
        )),
        Err(e) => Err(e.to_string()),
    }
}

/// Runs `p` for any value (a policy variable).
pub fn eval_value(p: &Program, ctx: &Context) -> Result<cel::Value, String> {
    p.execute(ctx).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn run(expr: &str, object: Value) -> Result<bool, String> {
        let mut ctx = Context::default();
        ctx.add_variable_from_value("object", to_cel(&object));
        eval_bool(&compile(expr)?, &ctx)
    }

    #[test]
    fn the_functions_the_worker_chart_uses_behave_like_cel_go() {
        let job = json!({"metadata": {"labels": {"courier.dev/origin": "m", "app": "x"}},
                         "spec": {"parallelism": 2, "template": {"spec": {
                             "containers": [{"name": "a", "securityContext": {"privileged": true}}, {"name": "b"}]}}}});
        let t = |e: &str| run(e, job.clone());
        assert_eq!(t("has(object.metadata.labels)"), Ok(true));
        assert_eq!(t("has(object.metadata.finalizers)"), Ok(false));
        assert_eq!(t("'app' in object.metadata.labels"), Ok(true));
        assert_eq!(
            t("size(object.metadata.labels.filter(k, k.startsWith('courier.dev/'))) == 1"),
            Ok(true)
        );
        assert_eq!(
            t("object.spec.parallelism > 1 && object.spec.parallelism == 2"),
            Ok(true)
        );
        assert_eq!(
            t(
                "object.spec.template.spec.containers.exists(c, has(c.securityContext) && has(c.securityContext.privileged) && c.securityContext.privileged)"
            ),
            Ok(true)
        );
        assert_eq!(
            t("object.spec.template.spec.containers.all(c, c.name != '')"),
            Ok(true)
        );
        assert_eq!(
            t("(has(object.spec.x) ? object.spec.x : {}) == {}"),
            Ok(true)
        );
        assert_eq!(
            t("'kube-system' in ['kube-system', 'kube-public']"),
            Ok(true)
        );
        assert!(
            t("object.spec.nope == 1").is_err(),
            "a missing field is an error"
        );
        assert!(t("object.spec.parallelism").is_err(), "not a bool");
        assert!(compile("object.spec.(").is_err());
    }
}
