use super::*;
use crate::errors::FieldError;
use crate::kinds::testutil::{fill, fixture, in_namespace, invalid_status, step};

const NS: &str = "events-<run>";

/// A request body as the create flow sees it: placeholders filled, namespace set, decoded.
fn request(f: &Value, name: &str, s: &EventStrategy) -> Value {
    let st = step(f, name);
    let mut body = fill(&st["request"]["body"], NS);
    // `${juid}` was saved from the Job's response: `<uid:1>` after normalisation.
    body = serde_json::from_str(
        &serde_json::to_string(&body)
            .unwrap()
            .replace("${juid}", "<uid:1>"),
    )
    .unwrap();
    let mut body = in_namespace(body, NS);
    s.decode(&mut body).expect("decodes");
    s.default(&mut body);
    body
}

/// The recordings' namespace placeholder is not a valid namespace name; validation runs on a
/// copy with a real one (no recorded message mentions it).
fn with_valid_ns(body: &Value) -> Value {
    serde_json::from_str(
        &serde_json::to_string(body)
            .unwrap()
            .replace(NS, "events-run"),
    )
    .unwrap()
}

/// Compares everything but server-set metadata.
fn assert_same_payload(got: &Value, want: &Value) {
    let strip = |v: &Value| {
        let mut v = v.clone();
        v.as_object_mut().unwrap().remove("metadata");
        v
    };
    assert_eq!(strip(got), strip(want));
}

#[test]
fn events_v1_create_then_read_via_core() {
    let f = fixture("events.json");
    let (ev1, core) = (EventStrategy::events_v1(), EventStrategy::core());
    let body = request(&f, "create events.k8s.io/v1 Event", &ev1);
    assert!(ev1.validate_create(&with_valid_ns(&body)).is_empty());
    let stored = ev1.to_storage(body);
    assert_same_payload(
        &ev1.from_storage(&stored),
        &step(&f, "create events.k8s.io/v1 Event")["response"]["body"],
    );
    assert_same_payload(
        &core.from_storage(&stored),
        &step(&f, "get it via core/v1")["response"]["body"],
    );
}

#[test]
fn core_create_then_read_via_events_v1() {
    let f = fixture("events.json");
    let (ev1, core) = (EventStrategy::events_v1(), EventStrategy::core());
    for (create, read) in [
        ("create core/v1 Event", Some("get it via events.k8s.io/v1")),
        (
            "create core/v1 Event minimal (no timestamps, no source)",
            None,
        ),
    ] {
        let body = request(&f, create, &core);
        assert!(
            core.validate_create(&with_valid_ns(&body)).is_empty(),
            "{create}"
        );
        let stored = core.to_storage(body);
        assert_same_payload(
            &core.from_storage(&stored),
            &step(&f, create)["response"]["body"],
        );
        if let Some(read) = read {
            assert_same_payload(
                &ev1.from_storage(&stored),
                &step(&f, read)["response"]["body"],
            );
        }
    }
}

#[test]
fn list_items_in_both_versions() {
    // The two recorded lists hold the same three stored events in the two shapes.
    let f = fixture("events.json");
    let core_list = &step(&f, "list core/v1 events fieldSelector involvedObject.name")["response"]
        ["body"]["items"];
    let v1_list = &step(&f, "list events.k8s.io/v1 fieldSelector regarding.name")["response"]["body"]
        ["items"];
    let (ev1, core) = (EventStrategy::events_v1(), EventStrategy::core());
    for (c, e) in core_list
        .as_array()
        .unwrap()
        .iter()
        .zip(v1_list.as_array().unwrap())
    {
        // Items of a list carry no kind/apiVersion.
        let drop_tm = |v: Value| {
            let mut v = v;
            let m = v.as_object_mut().unwrap();
            m.remove("kind");
            m.remove("apiVersion");
            v
        };
        assert_eq!(drop_tm(ev1.from_storage(c)), *e);
        assert_eq!(drop_tm(core.from_storage(c)), *c);
        assert_eq!(ev1.to_storage(ev1.from_storage(c)), core.from_storage(c));
    }
}

#[test]
fn validation_matches_recordings() {
    let f = fixture("events.json");
    let ev1 = EventStrategy::events_v1();
    for name in [
        "create events.k8s.io/v1 Event missing eventTime/reportingController",
        "create events.k8s.io/v1 Event with bad type",
    ] {
        let body = with_valid_ns(&request(&f, name, &ev1));
        let errs = ev1.validate_create(&body);
        assert_eq!(
            invalid_status("", "Event", &body, &errs),
            step(&f, name)["response"]["body"],
            "{name}"
        );
    }
    let core = EventStrategy::core();
    let name = "create core/v1 Event with involvedObject in another namespace";
    let body = with_valid_ns(&request(&f, name, &core));
    let errs = core.validate_create(&body);
    assert_eq!(
        invalid_status("", "Event", &body, &errs),
        step(&f, name)["response"]["body"]
    );
}

#[test]
fn field_selectors_map_between_versions() {
    let f = fixture("events.json");
    let (ev1, core) = (EventStrategy::events_v1(), EventStrategy::core());
    assert_eq!(
        ev1.convert_field_label("regarding.name"),
        Ok("involvedObject.name".into())
    );
    assert_eq!(
        ev1.convert_field_label("reportingController"),
        Ok("reportingComponent".into())
    );
    assert_eq!(
        ev1.convert_field_label("involvedObject.name"),
        Err("field label not supported: involvedObject.name".into())
    );
    assert_eq!(core.convert_field_label("source"), Ok("source".into()));
    assert_eq!(
        core.convert_field_label("note"),
        Err("field label not supported: note".into())
    );
    // Each item of the recorded selected lists matches `involvedObject.name=j`.
    for item in step(&f, "list core/v1 events fieldSelector involvedObject.name")["response"]
        ["body"]["items"]
        .as_array()
        .unwrap()
    {
        assert_eq!(core.field_value(item, "involvedObject.name").as_deref(), Some("j"));
    }
    let stored = json!({"reportingComponent": "ctrl", "source": {}});
    assert_eq!(core.field_value(&stored, "source").as_deref(), Some("ctrl"));
    assert_eq!(core.name_rule(), NameRule::PathSegment);
}

#[test]
fn strict_update_rejects_changes() {
    let ev1 = EventStrategy::events_v1();
    let old = json!({"metadata": {"name": "e", "namespace": "n"}, "eventTime": "2025-06-01T10:00:00.000000Z",
        "reportingComponent": "c", "reportingInstance": "i", "action": "a", "reason": "r",
        "involvedObject": {"kind": "Job", "namespace": "n", "name": "j"}, "type": "Normal"});
    let new = json!({"metadata": {"name": "e", "namespace": "n"}, "eventTime": "2025-06-01T10:00:00.000000Z",
        "reportingController": "c", "reportingInstance": "i", "action": "a", "reason": "r2",
        "regarding": {"kind": "Job", "namespace": "n", "name": "k"}, "type": "Normal"});
    let msgs: Vec<String> = ev1
        .validate_update(&new, &normalize_core(&old))
        .iter()
        .map(FieldError::message)
        .collect();
    assert_eq!(
        msgs,
        [
            "involvedObject: Invalid value: core.ObjectReference{Kind:\"Job\", Namespace:\"n\", Name:\"k\", UID:\"\", APIVersion:\"\", ResourceVersion:\"\", FieldPath:\"\"}: field is immutable",
            "reason: Invalid value: \"r2\": field is immutable",
            "reason: Invalid value: \"r2\": field is immutable",
        ]
    );
    // core/v1 updates only get the legacy checks.
    assert!(
        EventStrategy::core()
            .validate_update(&normalize_core(&to_core(&new)), &normalize_core(&old))
            .is_empty()
    );
}

#[test]
fn decode_errors_and_table() {
    let core = EventStrategy::core();
    let mut bad = json!({"firstTimestamp": "2025-06-01"});
    assert_eq!(
        core.decode(&mut bad).unwrap_err().message,
        "Event in version \"v1\" cannot be handled as a Event: parsing time \"2025-06-01\" as \"2006-01-02T15:04:05Z07:00\": cannot parse \"\" as \"T\""
    );
    let cells = (core.table().unwrap().cells)(&json!({"metadata": {"name": "e"},
        "involvedObject": {"kind": "Job", "name": "j"}, "reason": "R", "message": " m ",
        "source": {"component": "courier"}, "type": "Normal"}));
    assert_eq!(
        cells[1..7],
        [
            json!("Normal"),
            json!("R"),
            json!("job/j"),
            json!(""),
            json!("courier"),
            json!("m")
        ]
    );
    assert_eq!(cells[8], json!(1));
}
