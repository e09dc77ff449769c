//! A ValidatingAdmissionPolicy for Jobs as the API server would run it: its exact expressions,
//! compiled and evaluated by a CEL interpreter (the `cel` crate). Used by the chart tests of both
//! charts' policies.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::Rendered;

/// The ValidatingAdmissionPolicy as the API server would run it: its exact expressions, compiled by
/// a CEL interpreter.
pub struct Policy {
    resources: Vec<String>,
    operations: Vec<String>,
    match_conditions: Vec<(String, cel::Program)>,
    variables: Vec<(String, cel::Program)>,
    validations: Vec<(String, cel::Program, String)>,
}

pub fn compile(expr: &str) -> cel::Program {
    cel::Program::compile(expr).unwrap_or_else(|e| panic!("CEL does not compile: {expr}\n{e:?}"))
}

pub fn policy(r: &Rendered) -> Policy {
    let vap = r.one("ValidatingAdmissionPolicy");
    let binding = r.one("ValidatingAdmissionPolicyBinding");
    assert_eq!(binding["spec"]["policyName"], vap["metadata"]["name"]);
    assert_eq!(binding["spec"]["validationActions"], json!(["Deny"]));
    assert_eq!(vap["spec"]["failurePolicy"], "Fail");
    let rules = vap["spec"]["matchConstraints"]["resourceRules"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(rules.len(), 1, "{rules:?}");
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect()
    };
    assert_eq!(strings(&rules[0]["apiGroups"]), ["batch"]);
    let named = |key: &str| -> Vec<(String, cel::Program)> {
        vap["spec"][key]
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| {
                let expr = m["expression"].as_str().unwrap_or_default();
                (
                    m["name"].as_str().unwrap_or_default().to_string(),
                    compile(expr),
                )
            })
            .collect()
    };
    let validations = vap["spec"]["validations"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| {
            let expr = v["expression"].as_str().unwrap_or_default().to_string();
            let program = compile(&expr);
            (
                expr,
                program,
                v["message"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    Policy {
        resources: strings(&rules[0]["resources"]),
        operations: strings(&rules[0]["operations"]),
        match_conditions: named("matchConditions"),
        variables: named("variables"),
        validations,
    }
}

/// One admission request for a batch/v1 Job.
pub struct Req<'a> {
    pub user: &'a str,
    pub operation: &'a str,
    /// "" or "status".
    pub subresource: &'a str,
    pub old: Option<Value>,
    pub new: Value,
}

impl<'a> Req<'a> {
    pub fn create(user: &'a str, new: Value) -> Self {
        Req {
            user,
            operation: "CREATE",
            subresource: "",
            old: None,
            new,
        }
    }

    pub fn update(user: &'a str, old: &Value, new: Value) -> Self {
        Req {
            old: Some(old.clone()),
            operation: "UPDATE",
            ..Req::create(user, new)
        }
    }
}

pub fn as_bool(v: cel::ResolveResult, expr: &str) -> bool {
    match v {
        Ok(cel::Value::Bool(b)) => b,
        other => panic!("`{expr}` did not evaluate to a bool: {other:?}"),
    }
}

pub fn to_cel(v: &Value) -> cel::Value {
    cel::to_value(v).unwrap_or_else(|e| panic!("{v} as CEL: {e}"))
}

/// `Ok(())` if admitted, `Err(message)` if denied.
pub fn admit(p: &Policy, req: &Req) -> Result<(), String> {
    let resource = if req.subresource.is_empty() {
        "jobs".to_string()
    } else {
        format!("jobs/{}", req.subresource)
    };
    if !p.resources.contains(&resource) || !p.operations.iter().any(|o| o == req.operation) {
        return Ok(()); // the policy does not match this request
    }
    let mut ctx = cel::Context::default();
    ctx.add_variable_from_value(
        "request",
        to_cel(&json!({
            "operation": req.operation,
            "subResource": req.subresource,
            "userInfo": {"username": req.user},
        })),
    );
    ctx.add_variable_from_value("object", to_cel(&req.new));
    ctx.add_variable_from_value(
        "oldObject",
        req.old.as_ref().map(to_cel).unwrap_or(cel::Value::Null),
    );
    for (name, program) in &p.match_conditions {
        if !as_bool(program.execute(&ctx), name) {
            return Ok(());
        }
    }
    let mut vars: HashMap<String, cel::Value> = HashMap::new();
    for (name, program) in &p.variables {
        let v = program
            .execute(&ctx)
            .unwrap_or_else(|e| panic!("variable {name} failed: {e:?}"));
        vars.insert(name.clone(), v);
        ctx.add_variable_from_value("variables", vars.clone());
    }
    for (expr, program, message) in &p.validations {
        if !as_bool(program.execute(&ctx), expr) {
            return Err(message.clone());
        }
    }
    Ok(())
}
