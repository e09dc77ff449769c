//! What each page shows for given cache contents.

use std::collections::BTreeMap;

use super::*;
use crate::recent::EventSnapshot;
use crate::snapshot::MirrorSnapshot;

const NOW: &str = "2026-03-01T12:00:00Z";

fn now() -> Timestamp {
    NOW.parse().expect("now")
}

fn cluster(name: &str, ready: bool, reason: &str) -> ClusterSnapshot {
    ClusterSnapshot {
        name: name.into(),
        ready,
        reason: reason.into(),
        message: if ready {
            String::new()
        } else {
            "connect timed out".into()
        },
        since: Some("2026-03-01T11:55:00Z".into()),
        server_version: ready.then(|| "v1.36.0".into()),
        labels: BTreeMap::from([
            ("region".to_string(), "eu".to_string()),
            ("gpu".to_string(), "a100".to_string()),
        ]),
        weight: 1,
        paused: false,
        namespaces: None,
        last_probe: Some("2026-03-01T11:59:57Z".into()),
        current_mirrors: 3,
        cached_mirrors: 5,
        cache_synced: true,
    }
}

fn job(ns: &str, name: &str, phase: JobPhase, cluster: Option<&str>, created: &str) -> JobSnapshot {
    JobSnapshot {
        namespace: ns.into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        phase,
        cluster: cluster.map(str::to_string),
        epoch: cluster.map(|_| 1),
        redispatches: 0,
        active: 0,
        succeeded: 0,
        failed: 0,
        completions: Some(1),
        waiting: None,
        created: Some(created.into()),
        cluster_selector: None,
        conditions: Vec::new(),
    }
}

#[test]
fn ages_read_like_kubectl() {
    let n = now();
    assert_eq!(age(n, Some("2026-03-01T11:59:15Z")), "45s");
    assert_eq!(age(n, Some("2026-03-01T11:48:00Z")), "12m");
    assert_eq!(age(n, Some("2026-03-01T07:00:00Z")), "5h");
    assert_eq!(age(n, Some("2026-02-25T12:00:00Z")), "4d");
    assert_eq!(age(n, None), "-");
    assert_eq!(age(n, Some("garbage")), "-");
    // A clock a little behind the server's: never negative.
    assert_eq!(age(n, Some("2026-03-01T12:00:05Z")), "0s");
}

#[test]
fn clusters_page_shows_readiness_reason_version_mirrors_labels_probe_and_pause() {
    let mut paused = cluster("b-us", true, "Connected");
    paused.paused = true;
    paused.namespaces = Some(vec!["team-b".into(), "team-a".into()]);
    let mut fresh = cluster("c-new", false, "Pending");
    fresh.last_probe = None;
    fresh.message = String::new();
    let v = clusters_view(
        &[paused, cluster("a-eu", false, "Unreachable"), fresh],
        now(),
    );
    assert_eq!((v.ready, v.total), (1, 3));
    let names: Vec<&str> = v.rows.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["a-eu", "b-us", "c-new"], "sorted by name");
    let down = &v.rows[0];
    assert_eq!(down.state, "Not Ready");
    assert_eq!(down.reason, "Unreachable");
    assert_eq!(down.message, "connect timed out");
    assert_eq!(down.server_version, None);
    assert_eq!(down.since, "5m");
    let up = &v.rows[1];
    assert_eq!(up.state, "Ready");
    assert!(up.paused);
    assert_eq!(up.server_version.as_deref(), Some("v1.36.0"));
    assert_eq!(up.current_mirrors, 3);
    assert_eq!(up.labels, ["gpu=a100", "region=eu"]);
    assert_eq!(up.namespaces, ["team-a", "team-b"], "sorted");
    assert!(
        down.namespaces.is_empty(),
        "no spec.namespaces: every namespace"
    );
    assert_eq!(up.last_probe_ago, "3s ago");
    assert_eq!(v.rows[2].state, "Pending");
    assert_eq!(v.rows[2].last_probe_ago, "never");
}

#[test]
fn filters_round_trip_through_the_url() {
    let f = JobFilter::from_query("namespace=team+a&cluster=w%2D1&phase=running&sort=oldest&x=y");
    assert_eq!(f.namespace.as_deref(), Some("team a"));
    assert_eq!(f.cluster.as_deref(), Some("w-1"));
    assert_eq!(f.phase, Some(JobPhase::Running));
    assert!(f.oldest_first);
    assert_eq!(JobFilter::from_query(&f.to_query()), f);
    assert_eq!(
        f.to_query(),
        "namespace=team%20a&cluster=w-1&phase=Running&sort=oldest"
    );
    // Empty values and unknown phases mean "any"; broken escapes are ignored.
    let any = JobFilter::from_query("namespace=&phase=Succeeded&cluster=%zz");
    assert_eq!(any, JobFilter::default());
    assert_eq!(any.to_query(), "");
    assert_eq!(form_decode("%E2%9C%93"), Some("✓".into()));
    assert_eq!(form_decode("%"), None);
    assert_eq!(form_decode("%4"), None);
    assert_eq!(url_encode("a/b c"), "a%2Fb%20c");
    assert_eq!(job_href("team-a", "x.y"), "/jobs/team-a/x.y");
}

fn fleet() -> Vec<JobSnapshot> {
    vec![
        job(
            "team-a",
            "old",
            JobPhase::Complete,
            Some("w1"),
            "2026-03-01T10:00:00Z",
        ),
        job(
            "team-a",
            "new",
            JobPhase::Running,
            Some("w2"),
            "2026-03-01T11:59:00Z",
        ),
        job(
            "team-b",
            "mid",
            JobPhase::Running,
            Some("w1"),
            "2026-03-01T11:00:00Z",
        ),
        {
            let mut j = job(
                "team-b",
                "stuck",
                JobPhase::Pending,
                None,
                "2026-03-01T11:30:00Z",
            );
            j.waiting = Some("no eligible cluster".into());
            j
        },
    ]
}

#[test]
fn jobs_page_sorts_by_age_and_filters_by_namespace_cluster_and_phase() {
    let jobs = fleet();
    let all = jobs_view(
        &jobs,
        &["w1".into(), "w3".into()],
        &JobFilter::default(),
        now(),
    );
    let names: Vec<&str> = all.rows.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["new", "stuck", "mid", "old"], "newest first");
    assert_eq!((all.matching, all.total), (4, 4));
    assert_eq!(all.namespaces, ["team-a", "team-b"]);
    assert_eq!(all.clusters, ["w1", "w2", "w3"]);
    assert_eq!(
        all.phases,
        [
            (JobPhase::Pending, 1),
            (JobPhase::Running, 2),
            (JobPhase::Complete, 1)
        ]
    );
    let new = &all.rows[0];
    assert_eq!(new.href, "/jobs/team-a/new");
    assert_eq!(new.age, "60s");
    assert_eq!(new.cluster.as_deref(), Some("w2"));
    assert_eq!(
        all.rows[1].waiting.as_deref(),
        Some("no eligible cluster"),
        "why a Job is pending"
    );

    let oldest = JobFilter {
        oldest_first: true,
        ..Default::default()
    };
    let names: Vec<String> = jobs_view(&jobs, &[], &oldest, now())
        .rows
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(names, ["old", "mid", "stuck", "new"]);

    let running_on_w1 = JobFilter {
        cluster: Some("w1".into()),
        phase: Some(JobPhase::Running),
        ..Default::default()
    };
    let v = jobs_view(&jobs, &[], &running_on_w1, now());
    assert_eq!(v.rows.len(), 1);
    assert_eq!(v.rows[0].name, "mid");
    assert_eq!((v.matching, v.total), (1, 4));

    let ns = JobFilter {
        namespace: Some("team-c".into()),
        ..Default::default()
    };
    let v = jobs_view(&jobs, &[], &ns, now());
    assert!(v.rows.is_empty());
    assert!(
        v.namespaces.contains(&"team-c".to_string()),
        "the chosen filter stays selectable"
    );
}

#[test]
fn jobs_page_lists_a_bounded_number_of_rows() {
    let jobs: Vec<JobSnapshot> = (0..MAX_ROWS + 50)
        .map(|i| {
            job(
                "ns",
                &format!("j{i:04}"),
                JobPhase::Running,
                Some("w1"),
                "2026-03-01T11:00:00Z",
            )
        })
        .collect();
    let v = jobs_view(&jobs, &[], &JobFilter::default(), now());
    assert_eq!(v.rows.len(), MAX_ROWS);
    assert_eq!(v.matching, MAX_ROWS + 50);
    assert_eq!(v.rows[0].name, "j0000", "equal ages: by name");
}

fn explanation() -> Explanation {
    let mut j = job(
        "team-a",
        "train",
        JobPhase::Complete,
        Some("w1"),
        "2026-03-01T11:58:00Z",
    );
    j.succeeded = 1;
    j.epoch = Some(2);
    j.redispatches = 1;
    j.cluster_selector = Some("region=eu".into());
    j.conditions = vec![ConditionSnapshot {
        type_: "Complete".into(),
        status: "True".into(),
        reason: Some("CompletionsReached".into()),
        message: Some("Reached expected number of succeeded pods".into()),
        last_transition_time: Some("2026-03-01T11:59:30Z".into()),
    }];
    let ev = |reason: &str, note: &str, last: &str| EventSnapshot {
        type_: "Normal".into(),
        reason: reason.into(),
        note: note.into(),
        count: 1,
        first: last.into(),
        last: last.into(),
    };
    Explanation {
        job: j,
        mirrors: vec![
            MirrorSnapshot {
                cluster: "w0".into(),
                observation: "no Job with this name".into(),
                current: false,
                conditions: Vec::new(),
            },
            MirrorSnapshot {
                cluster: "w1".into(),
                observation: "current mirror (epoch label 2): Complete".into(),
                current: true,
                conditions: vec![ConditionSnapshot {
                    type_: "SuccessCriteriaMet".into(),
                    status: "True".into(),
                    reason: None,
                    message: None,
                    last_transition_time: None,
                }],
            },
        ],
        plan: Vec::new(),
        waiting: None,
        events: vec![
            ev("Dispatched", "to w0", "2026-03-01T11:58:01Z"),
            ev("Redispatched", "w0 lost; to w1", "2026-03-01T11:59:00Z"),
        ],
    }
}

#[test]
fn job_page_names_the_worker_and_why_with_conditions_and_events() {
    let v = job_view(&explanation(), &[cluster("w1", true, "Connected")], now());
    assert_eq!(v.cluster.as_deref(), Some("w1"));
    assert_eq!(v.cluster_state.as_deref(), Some("Ready (Connected)"));
    assert_eq!((v.epoch, v.redispatches), (Some(2), 1));
    assert_eq!(v.selector, "region=eu");
    assert_eq!(v.phase, JobPhase::Complete);
    assert_eq!(v.age, "2m");
    assert_eq!(v.conditions.len(), 1);
    assert_eq!(v.conditions[0].reason, "CompletionsReached");
    assert_eq!(v.conditions[0].age, "30s");
    let order: Vec<(&str, bool)> = v
        .mirrors
        .iter()
        .map(|m| (m.cluster.as_str(), m.current))
        .collect();
    assert_eq!(order, [("w1", true), ("w0", false)], "current mirror first");
    assert_eq!(v.mirrors[0].conditions[0].type_, "SuccessCriteriaMet");
    assert_eq!(v.mirrors[0].conditions[0].age, "-");
    let reasons: Vec<&str> = v.events.iter().map(|e| e.reason.as_str()).collect();
    assert_eq!(reasons, ["Redispatched", "Dispatched"], "newest first");
    assert_eq!(v.events[0].age, "60s");
}

#[test]
fn job_page_says_when_its_cluster_is_down_or_gone_and_what_it_waits_for() {
    let mut e = explanation();
    let down = job_view(&e, &[cluster("w1", false, "Unreachable")], now());
    assert_eq!(
        down.cluster_state.as_deref(),
        Some("Not Ready (Unreachable): connect timed out")
    );
    let gone = job_view(&e, &[], now());
    assert!(
        gone.cluster_state
            .as_deref()
            .is_some_and(|s| s.starts_with("not registered"))
    );
    e.job.cluster = None;
    e.job.cluster_selector = None;
    e.waiting = Some("no eligible cluster: w1 paused".into());
    e.plan = vec!["look again in 30s".into()];
    let pending = job_view(&e, &[], now());
    assert_eq!(pending.cluster_state, None);
    assert_eq!(pending.selector, "any worker cluster");
    assert_eq!(
        pending.waiting.as_deref(),
        Some("no eligible cluster: w1 paused")
    );
    assert_eq!(pending.plan, ["look again in 30s"]);
}
