//! Job simulator tests of the plan grammar, speed scaling, a recorded trace and large Jobs.

use super::*;

#[test]
fn plan_and_outcome_grammar() {
    assert_eq!(
        parse_entry("succeed@2"),
        Some(PlanEntry {
            outcome: Outcome::Succeed,
            at: Some(2.0)
        })
    );
    assert_eq!(
        parse_entry("fail:42@1.5"),
        Some(PlanEntry {
            outcome: Outcome::Fail(42),
            at: Some(1.5)
        })
    );
    assert_eq!(
        parse_entry("fail:1"),
        Some(PlanEntry {
            outcome: Outcome::Fail(1),
            at: None
        })
    );
    assert_eq!(
        parse_entry("fail"),
        Some(PlanEntry {
            outcome: Outcome::Fail(1),
            at: None
        })
    );
    assert_eq!(
        parse_entry("hang"),
        Some(PlanEntry {
            outcome: Outcome::Hang,
            at: None
        })
    );
    assert_eq!(
        parse_entry("evict@3"),
        Some(PlanEntry {
            outcome: Outcome::Evict,
            at: Some(3.0)
        })
    );
    for bad in ["", "explode", "fail:x", "succeed@-1", "succeed@soon"] {
        assert_eq!(parse_entry(bad), None, "{bad}");
    }
    // Malformed annotations fall back to the defaults.
    let b = super::pods::Behaviour::from_annotations(
        Some(&json!({"sim/run-seconds": "abc", "sim/plan": "{not json"})),
        None,
    );
    assert_eq!(
        (b.run, b.outcome.outcome, b.plan.len()),
        (DEFAULT_RUN_SECONDS, Outcome::Succeed, 0)
    );
    let b = super::pods::Behaviour::from_annotations(
        Some(&json!({"sim/plan": r#"{"i1": "hang", "n1": "fail:2"}"#})),
        None,
    );
    assert_eq!(b.resolve(Some(1), 1).0, Outcome::Hang, "index key wins");
    assert_eq!(b.resolve(Some(0), 1).0, Outcome::Fail(2));
    assert_eq!(b.resolve(None, 0), (Outcome::Succeed, DEFAULT_RUN_SECONDS));
}

#[test]
fn speed_scales_every_duration() {
    for name in [
        "02-nonindexed-backoff-limit",
        "06-suspend-resume",
        "07-active-deadline",
    ] {
        let sc = scenarios().into_iter().find(|s| s.name == name).unwrap();
        // Phase 0.5 keeps second boundaries away from every event at both speeds.
        let slow = replay(&sc, 0.5, &SimConfig::default());
        let fast_sc = super::traces::Scenario {
            name: sc.name.clone(),
            inputs: {
                let mut i = sc.inputs.clone();
                for a in i["actions"].as_array_mut().unwrap() {
                    a["t"] = json!(a["t"].as_f64().unwrap() / 10.0);
                }
                i
            },
            events: {
                let mut e = sc.events.clone();
                for ev in &mut e {
                    ev["t"] = json!(ev["t"].as_f64().unwrap() / 10.0);
                }
                e
            },
        };
        let fast = replay(&fast_sc, 0.05, &SimConfig::with_speed(10.0));
        assert_eq!(slow.states.len(), fast.states.len(), "{name}");
        for (a, b) in slow.states.iter().zip(&fast.states) {
            assert_eq!(a.state, b.state, "{name}");
            assert!(
                (a.t / 10.0 - b.t).abs() < 0.002,
                "{name}: {} vs {}",
                a.t,
                b.t
            );
        }
    }
    // Degenerate speeds fall back to real time.
    assert_eq!(SimConfig::with_speed(0.0).normalized().speed, 1.0);
    assert_eq!(SimConfig::with_speed(f64::NAN).normalized().speed, 1.0);
}

#[test]
fn fixed_139428_shows_the_intermediate_states_the_recording_lacks() {
    let sc = scenarios()
        .into_iter()
        .find(|s| s.name.starts_with("14-"))
        .unwrap();
    let cfg = SimConfig {
        issue_139428: false,
        ..SimConfig::default()
    };
    let r = replay(&sc, 0.5, &cfg);
    assert_eq!(r.rejected, 0);
    // testdata/README.md, job traces point 7: with the fix, act=1 rdy=1 unc.f=[p1], then fail=1 at ~2.6 s.
    let i = r
        .states
        .iter()
        .position(|s| {
            s.state["active"] == 1
                && s.state["ready"] == 1
                && s.state["uncountedTerminatedPods"] == json!({"failed": 1})
        })
        .expect("act=1 rdy=1 unc.f=[p1]");
    assert!(r.states[i].t < 3.1, "{}", r.states[i].t);
    assert_eq!(r.states[i + 1].state["failed"], 1);
    assert!(has(&r.states.last().unwrap().raw, "Complete"));

    let sc = scenarios()
        .into_iter()
        .find(|s| s.name.starts_with("05b-"))
        .unwrap();
    let r = replay(&sc, 0.44, &cfg);
    assert_eq!(r.rejected, 0);
    let actives: Vec<(i64, i64)> = r
        .states
        .iter()
        .map(|s| (n(&s.state, "active"), n(&s.state, "ready")))
        .collect();
    assert!(
        actives.contains(&(3, 3)) && actives.contains(&(2, 2)),
        "{actives:?}"
    );
}

#[test]
fn large_jobs_respect_the_per_sync_caps_and_stay_fast() {
    let spec = json!({"completions": 1200, "parallelism": 1200});
    let mut h = Host::new(
        job(spec, json!({"sim/run-seconds": "1"})),
        &SimConfig::default(),
    );
    h.run_until(120.0);
    assert!(has(&h.status, "Complete"));
    assert_eq!(n(&h.status, "succeeded"), 1200);
    assert_eq!(h.sim.next_ordinal, 1200);
    assert_eq!(
        n(&h.writes[0].1, "active"),
        500,
        "MaxPodCreateDeletePerSync"
    );
    assert!(
        h.writes
            .iter()
            .all(|(_, s)| uncounted(s, "succeeded") <= 500),
        "MaxUncountedPods"
    );
}
