use super::*;
use crate::kinds::job::test_job;
use serde_json::json;

fn create_msgs(spec: Value) -> Vec<String> {
    let job = test_job("j", spec);
    validate_job(&job, Opts::for_job(None))
        .iter()
        .map(FieldError::message)
        .collect()
}

#[test]
fn a_defaulted_job_is_valid() {
    assert!(create_msgs(json!({})).is_empty());
}

#[test]
fn counters_must_not_be_negative() {
    assert_eq!(
        create_msgs(
            json!({"completions": -1, "activeDeadlineSeconds": -2, "backoffLimit": -3, "ttlSecondsAfterFinished": -4})
        ),
        [
            "spec.completions: Invalid value: -1: must be greater than or equal to 0",
            "spec.activeDeadlineSeconds: Invalid value: -2: must be greater than or equal to 0",
            "spec.backoffLimit: Invalid value: -3: must be greater than or equal to 0",
            "spec.ttlSecondsAfterFinished: Invalid value: -4: must be greater than or equal to 0",
        ]
    );
}

#[test]
fn per_index_backoff_rules() {
    assert_eq!(
        create_msgs(json!({"maxFailedIndexes": 1})),
        [
            "spec.backoffLimitPerIndex: Required value: when maxFailedIndexes is specified",
            "spec.maxFailedIndexes: Invalid value: 1: requires indexed completion mode",
        ]
    );
    assert_eq!(
        create_msgs(json!({"backoffLimitPerIndex": 1})),
        ["spec.backoffLimitPerIndex: Invalid value: 1: requires indexed completion mode"]
    );
    assert_eq!(
        create_msgs(
            json!({"completionMode": "Indexed", "completions": 2, "backoffLimitPerIndex": 1, "maxFailedIndexes": 3})
        ),
        ["spec.maxFailedIndexes: Invalid value: 3: must be less than or equal to completions"]
    );
    assert_eq!(
        create_msgs(
            json!({"completionMode": "Indexed", "completions": 200000, "parallelism": 20000, "backoffLimitPerIndex": 1})
        ),
        [
            "spec.maxFailedIndexes: Required value: must be specified when completions is above 100000",
            "spec.parallelism: Invalid value: 20000: must be less than or equal to 10000 when completions are above 100000 and used with backoff limit per index",
        ]
    );
}

#[test]
fn completion_mode_rules() {
    assert_eq!(
        create_msgs(json!({"completionMode": "Sometimes"})),
        [
            "spec.completionMode: Unsupported value: \"Sometimes\": supported values: \"NonIndexed\", \"Indexed\""
        ]
    );
    assert_eq!(
        create_msgs(json!({"completionMode": "Indexed", "parallelism": 2})),
        ["spec.completions: Required value: when completion mode is Indexed"]
    );
    // The Indexed pod hostname `<name>-<completions-1>` must be a DNS label.
    let name = "n".repeat(62);
    let job = test_job(
        &name,
        json!({"completionMode": "Indexed", "completions": 10, "parallelism": 1}),
    );
    let m: Vec<String> = validate_job(&job, Opts::for_job(None))
        .iter()
        .map(FieldError::message)
        .collect();
    assert_eq!(
        m,
        [format!(
            "metadata.name: Invalid value: \"{name}\": will not able to create pod with invalid DNS label: {name}-9"
        )]
    );
}

#[test]
fn managed_by_rules() {
    assert_eq!(
        create_msgs(json!({"managedBy": "kubernetes.io/job-controller"})).len(),
        0
    );
    assert_eq!(
        create_msgs(json!({"managedBy": "example.io/"})),
        [
            "spec.managedBy: Invalid value: \"example.io/\": must be a domain-prefixed path (such as \"acme.io/foo\")"
        ]
    );
    assert_eq!(
        create_msgs(json!({"managedBy": format!("courier.dev/{}", "d".repeat(52))})),
        ["spec.managedBy: Too long: may not be more than 63 bytes"]
    );
    assert_eq!(
        create_msgs(json!({"managedBy": ""})),
        ["spec.managedBy: Required value"]
    );
}

#[test]
fn success_policy_rules() {
    let idx = |sp: Value| json!({"completionMode": "Indexed", "completions": 3, "parallelism": 3, "successPolicy": sp});
    assert_eq!(
        create_msgs(idx(json!({"rules": []}))),
        [
            "spec.successPolicy.rules: Required value: at least one rules must be specified when the successPolicy is specified"
        ]
    );
    assert_eq!(
        create_msgs(idx(
            json!({"rules": [{"succeededIndexes": "0,1", "succeededCount": 3}]})
        )),
        [
            "spec.successPolicy.rules[0].succeededCount: Invalid value: 3: must be less than or equal to 2 (the number of indexes in the specified succeededIndexes field)"
        ]
    );
    assert_eq!(
        create_msgs(idx(json!({"rules": [{"succeededCount": -1}]}))),
        [
            "spec.successPolicy.rules[0].succeededCount: Invalid value: -1: must be greater than or equal to 0"
        ]
    );
    let rules: Vec<Value> = (0..21).map(|_| json!({"succeededCount": 1})).collect();
    assert_eq!(
        create_msgs(idx(json!({"rules": rules}))),
        ["spec.successPolicy.rules: Too many: 21: must have at most 20 items"]
    );
}

#[test]
fn pod_failure_policy_rules() {
    let pfp = |rules: Value| json!({"podFailurePolicy": {"rules": rules}});
    assert_eq!(
        create_msgs(pfp(
            json!([{"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [1]}}])
        )),
        [
            "spec.podFailurePolicy.rules[0].action: Invalid value: \"FailIndex\": requires the backoffLimitPerIndex to be set"
        ]
    );
    assert_eq!(
        create_msgs(pfp(
            json!([{"action": "", "onExitCodes": {"operator": "In", "values": [0, 2, 2, 1], "containerName": "other"}}])
        )),
        [
            "spec.podFailurePolicy.rules[0].action: Required value: valid values: [\"Count\" \"FailIndex\" \"FailJob\" \"Ignore\"]",
            "spec.podFailurePolicy.rules[0].onExitCodes.containerName: Invalid value: \"other\": must be one of the container or initContainer names in the pod template",
            "spec.podFailurePolicy.rules[0].onExitCodes.values[0]: Invalid value: 0: must not be 0 for the In operator",
            "spec.podFailurePolicy.rules[0].onExitCodes.values[2]: Duplicate value: 2",
            "spec.podFailurePolicy.rules[0].onExitCodes.values: Invalid value: [0,2,2,1]: must be ordered",
        ]
    );
    assert_eq!(
        create_msgs(pfp(
            json!([{"action": "Ignore"}, {"action": "Bogus", "onPodConditions": [{"type": "DisruptionTarget", "status": "Maybe"}],
                                  "onExitCodes": {"operator": "Sometimes", "values": []}}])
        )),
        [
            "spec.podFailurePolicy.rules[0]: Invalid value: specifying one of OnExitCodes and OnPodConditions is required",
            "spec.podFailurePolicy.rules[1].action: Unsupported value: \"Bogus\": supported values: \"Count\", \"FailIndex\", \"FailJob\", \"Ignore\"",
            "spec.podFailurePolicy.rules[1].onExitCodes.operator: Unsupported value: \"Sometimes\": supported values: \"In\", \"NotIn\"",
            "spec.podFailurePolicy.rules[1].onExitCodes.values: Invalid value: []: at least one value is required",
            "spec.podFailurePolicy.rules[1].onPodConditions[0].status: Unsupported value: \"Maybe\": supported values: \"False\", \"True\", \"Unknown\"",
            "spec.podFailurePolicy.rules[1]: Invalid value: specifying both OnExitCodes and OnPodConditions is not supported",
        ]
    );
    let mut spec =
        pfp(json!([{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]));
    spec["template"] = json!({"spec": {"restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "i"}]}});
    spec["podReplacementPolicy"] = json!("TerminatingOrFailed");
    assert_eq!(
        create_msgs(spec),
        [
            "spec.podReplacementPolicy: Unsupported value: \"TerminatingOrFailed\": supported values: \"Failed\"",
            "spec.template.spec.restartPolicy: Invalid value: \"OnFailure\": only \"Never\" is supported when podFailurePolicy is specified",
        ]
    );
}

#[test]
fn restart_policy_and_replacement_policy() {
    let mut spec = json!({"template": {"spec": {"restartPolicy": "Sometimes", "containers": [{"name": "c", "image": "i"}]}}});
    spec["podReplacementPolicy"] = json!("Whenever");
    assert_eq!(
        create_msgs(spec),
        [
            "spec.podReplacementPolicy: Unsupported value: \"Whenever\": supported values: \"Failed\", \"TerminatingOrFailed\"",
            "spec.template.spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
            "spec.template.spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"OnFailure\", \"Never\"",
        ]
    );
}

#[test]
fn generated_selector_needs_the_generated_labels() {
    let mut job = test_job("j", json!({}));
    let labels = job["spec"]["template"]["metadata"]["labels"]
        .as_object_mut()
        .unwrap();
    labels.remove("job-name");
    labels.remove(CONTROLLER_UID_LABEL);
    let m: Vec<String> = validate_job(&job, Opts::for_job(None))
        .iter()
        .map(FieldError::message)
        .collect();
    assert_eq!(
        m,
        [
            "spec.template.metadata.labels[job-name]: Required value: must be 'j'",
            "spec.template.metadata.labels[batch.kubernetes.io/controller-uid]: Required value: must be '00000000-0000-4000-8000-000000000001'",
            "spec.template.metadata.labels: Invalid value: {\"batch.kubernetes.io/job-name\":\"j\",\"controller-uid\":\"00000000-0000-4000-8000-000000000001\"}: `selector` does not match template `labels`",
        ]
    );
    // Without the prefixed labels on the old object (a Job from before 1.27) only the legacy ones
    // are required.
    let mut old = test_job("j", json!({}));
    old["spec"]["template"]["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove(JOB_NAME_LABEL);
    assert!(!Opts::for_job(Some(&old)).require_prefixed_labels);
    job["spec"]["manualSelector"] = json!(true);
    job["spec"]["selector"] = Value::Null;
    let m: Vec<String> = validate_job(&job, Opts::for_job(None))
        .iter()
        .map(FieldError::message)
        .collect();
    assert_eq!(
        m,
        [
            "spec.selector: Required value",
            "spec.template.metadata.labels: Invalid value: {\"batch.kubernetes.io/job-name\":\"j\",\"controller-uid\":\"00000000-0000-4000-8000-000000000001\"}: `selector` does not match template `labels`",
        ]
    );
}

fn update_msgs(old: &Value, edit: impl Fn(&mut Value)) -> Vec<String> {
    let mut new = old.clone();
    edit(&mut new);
    let opts = Opts::for_job(Some(old));
    validate_job_update(&new, old, opts)
        .iter()
        .map(FieldError::message)
        .collect()
}

#[test]
fn immutable_fields() {
    let old = test_job(
        "j",
        json!({"completionMode": "Indexed", "completions": 2, "parallelism": 2, "backoffLimitPerIndex": 1,
                                   "successPolicy": {"rules": [{"succeededCount": 1}]}}),
    );
    assert_eq!(
        update_msgs(&old, |n| {
            n["spec"]["backoffLimitPerIndex"] = json!(2);
            n["spec"]["successPolicy"] = json!({"rules": [{"succeededCount": 2}]});
            n["spec"]["podFailurePolicy"] = json!({"rules": [{"action": "Ignore", "onExitCodes": {"operator": "In", "values": [1]}}]});
            n["spec"]["podReplacementPolicy"] = json!("Failed");
        }),
        [
            "spec.podFailurePolicy: Invalid value: {\"Rules\":[{\"Action\":\"Ignore\",\"OnExitCodes\":{\"ContainerName\":null,\"Operator\":\"In\",\"Values\":[1]},\"OnPodConditions\":null}]}: field is immutable",
            "spec.backoffLimitPerIndex: Invalid value: 2: field is immutable",
            "spec.successPolicy: Invalid value: {\"Rules\":[{\"SucceededIndexes\":null,\"SucceededCount\":2}]}: field is immutable",
        ]
    );
    // Mutable: parallelism, suspend, activeDeadlineSeconds, backoffLimit, maxFailedIndexes, podReplacementPolicy.
    assert!(
        update_msgs(&old, |n| {
            n["spec"]["parallelism"] = json!(1);
            n["spec"]["suspend"] = json!(true);
            n["spec"]["activeDeadlineSeconds"] = json!(100);
            n["spec"]["backoffLimit"] = json!(1);
            n["spec"]["maxFailedIndexes"] = json!(1);
            n["spec"]["podReplacementPolicy"] = json!("Failed");
        })
        .is_empty()
    );
    assert!(
        update_msgs(&old, |n| {
            n["spec"]["completions"] = json!(4);
            n["spec"]["parallelism"] = json!(4);
        })
        .is_empty()
    );
}

#[test]
fn scheduling_directives_are_mutable_only_while_suspended_and_idle() {
    let directives = |n: &mut Value| {
        let pod = &mut n["spec"]["template"]["spec"];
        pod["nodeSelector"] = json!({"zone": "a"});
        pod["tolerations"] = json!([{"key": "k", "operator": "Exists"}]);
        pod["schedulingGates"] = json!([{"name": "example.com/gate"}]);
        pod["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Exists"}]}]}}});
        pod["containers"][0]["resources"] = json!({"requests": {"cpu": "1"}});
        n["spec"]["template"]["metadata"]["annotations"] = json!({"a": "b"});
        n["spec"]["template"]["metadata"]["labels"]["extra"] = json!("x");
    };
    let suspended = test_job("j", json!({"suspend": true}));
    assert!(update_msgs(&suspended, directives).is_empty());
    let m = update_msgs(&suspended, |n| {
        n["spec"]["template"]["spec"]["containers"][0]["image"] = json!("other")
    });
    assert_eq!(m.len(), 1);
    assert!(
        m[0].starts_with("spec.template.spec: Invalid value: {\"Volumes\":null,"),
        "{}",
        m[0]
    );
    // Started while suspended: only with Suspended=True and no active pods (1.36).
    let mut started = suspended.clone();
    started["status"] = json!({"startTime": "2025-06-01T10:00:00Z", "active": 1});
    assert_eq!(update_msgs(&started, directives).len(), 1);
    started["status"] = json!({"startTime": "2025-06-01T10:00:00Z",
                               "conditions": [{"type": "Suspended", "status": "True"}]});
    assert!(update_msgs(&started, directives).is_empty());
    let running = test_job("j", json!({}));
    let m = update_msgs(&running, directives);
    assert_eq!(m.len(), 1);
    assert!(
        m[0].starts_with("spec.template: Invalid value: {\"labels\":{"),
        "{}",
        m[0]
    );
}
