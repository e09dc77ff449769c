//! The `job-traces` fixtures: Jobs as a v1.36 server created them, and the managed-Job status
//! writes it accepted or rejected.

use super::*;

/// The traces' `jobAsCreated` is what a v1.36 server made of `job`: defaulting and generated labels.
#[test]
fn traces_job_as_created() {
    let dir = fixtures_dir("job-traces");
    let mut n = 0;
    for entry in fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let fname = path.file_name().unwrap().to_string_lossy().to_string();
        if !fname.ends_with(".inputs.json") {
            continue;
        }
        let inputs = load("job-traces", &fname);
        let created = create(&inputs["job"], None, &uuid(7)).unwrap();
        let text = serde_json::to_string(&created)
            .unwrap()
            .replace(&uuid(7), "<job-uid>");
        let created: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            created["spec"], inputs["jobAsCreated"]["spec"],
            "{fname}: spec"
        );
        assert_eq!(
            created["metadata"]["labels"], inputs["jobAsCreated"]["metadata"]["labels"],
            "{fname}: labels"
        );
        n += 1;
    }
    assert!(n >= 14, "found {n} inputs");
}

/// `managed-replay.json`: what a v1.36 server accepted when the controller's status sequences were
/// written onto a `managedBy` Job with `PUT /status` (and the causes of what it rejected).
#[test]
fn traces_managed_replay() {
    let replay = load("job-traces", "managed-replay.json");
    let mut writes = 0;
    for (scenario, variants) in replay.as_object().unwrap() {
        let inputs = load("job-traces", &format!("{scenario}.inputs.json"));
        let events = load("job-traces", &format!("{scenario}.json"));
        let event = |seq: u64| {
            events
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["seq"] == seq)
                .unwrap_or_else(|| panic!("{scenario}: no event {seq}"))
        };
        for (variant, ops) in variants.as_object().unwrap() {
            let mut job = inputs["job"].clone();
            job["spec"]["managedBy"] = json!("courier.dev/dispatcher");
            if variant == "unsuspendedOrigin" {
                job["spec"]["suspend"] = json!(false);
            }
            let mut stored = create(&job, None, &uuid(5)).unwrap();
            for op in ops.as_array().unwrap() {
                let seq = op["seq"].as_u64().unwrap();
                let outcome = match op["op"].as_str().unwrap() {
                    "put-status" => {
                        let mut new = stored.clone();
                        new["status"] = event(seq)["status"].clone();
                        writes += 1;
                        update_status(new, &stored)
                    }
                    "patch-spec" => update(merge(&stored, &json!({"spec": op["spec"]})), &stored),
                    other => panic!("unknown op {other}"),
                };
                let ctx = format!("{scenario}/{variant} seq {seq}");
                match (&outcome, op["code"].as_u64().unwrap()) {
                    (Ok(_), 200) => {}
                    (Err(e), 422) => {
                        let causes: Vec<String> = e.details.as_ref().unwrap()["causes"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .map(|c| {
                                format!(
                                    "{}: {}",
                                    c["field"].as_str().unwrap(),
                                    c["message"].as_str().unwrap()
                                )
                            })
                            .collect();
                        assert_eq!(Value::from(causes), op["causes"], "{ctx}");
                    }
                    (Ok(_), code) => panic!("{ctx}: accepted, recorded {code}"),
                    (Err(e), code) => panic!("{ctx}: rejected ({}), recorded {code}", e.message),
                }
                if let Ok(o) = outcome {
                    stored = o;
                }
            }
        }
    }
    assert!(writes > 100, "{writes} status writes replayed");
}
