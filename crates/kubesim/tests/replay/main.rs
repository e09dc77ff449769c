//! Replays every recording of a real v1.36 API server (`testdata/apiserver/`) against a fresh in-process
//! kubesim per scenario and fails on any difference: the requests of each scenario are sent again over
//! HTTPS (with what `testdata/replay/steps.yaml` adds: setup requests, saved values, built bodies,
//! polling), the answers are normalised by the recordings' own rules and compared step by step, status
//! codes first, then body paths. Scenarios in `testdata/replay/skip.txt` are left out, each with its
//! reason.
//!
//! Broken on purpose to see it fail: with `backoffLimit` defaulted to 7 instead of 6
//! (`kinds/job/defaults.rs`), 16 of the 22 scenarios fail, each with lines such as
//! `create job:response.body.spec.backoffLimit: got 7, recorded 6`.

mod diff;
mod normalize;
mod plan;
mod run;

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kubesim::testdata::fixtures_dir;
use kubesim::{Role, Sim, SimOptions};
use rand::Rng;
use regex::Regex;
use serde_json::{Value, json};

use crate::diff::{Differences, compare};
use crate::normalize::{Meta, normalize};
use crate::plan::Step;

/// Body differences shown per failing scenario.
const MAX_LINES: usize = 25;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recordings_replay_against_kubesim() {
    let data = fixtures_dir("replay");
    let plan = plan::load(&data);
    let skips = plan::skips(&data);
    let recordings = recordings();
    for name in skips
        .keys()
        .map(String::as_str)
        .chain(plan.scenario_names())
    {
        assert!(
            recordings.contains_key(name),
            "{name} is named in testdata/replay but not recorded"
        );
    }
    let mut tasks = tokio::task::JoinSet::new();
    for (name, recording) in &recordings {
        // Skipped scenarios too: the plan stays ready for them.
        let steps = plan
            .steps(recording)
            .unwrap_or_else(|e| panic!("{name}: testdata/replay/steps.yaml: {e}"));
        if skips.contains_key(name) {
            continue;
        }
        let (name, recording) = (name.clone(), recording.clone());
        tasks.spawn(async move {
            let result = replay(&name, &recording, &steps).await;
            (name, result)
        });
    }
    let mut results: BTreeMap<String, Result<Differences, String>> = BTreeMap::new();
    while let Some(joined) = tasks.join_next().await {
        let (name, result) = joined.expect("a replay task panicked");
        results.insert(name, result);
    }
    let (report, passed, failed) = report(&results);
    let skipped: Vec<&str> = skips.keys().map(String::as_str).collect();
    let summary = format!(
        "{report}{passed} passed, {failed} failed (skipped: {})",
        skipped.join(", ")
    );
    assert!(
        failed == 0 && passed + skips.len() == recordings.len(),
        "{summary}"
    );
    println!("{summary}");
}

/// `testdata/apiserver/*.json` by scenario name.
fn recordings() -> BTreeMap<String, Value> {
    let dir = fixtures_dir("apiserver");
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            let text = std::fs::read_to_string(&path).unwrap();
            let doc: Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let name = doc["scenario"].as_str().unwrap().to_owned();
            out.insert(name, doc);
        }
    }
    assert!(
        out.len() >= 23,
        "expected the 23 recorded scenarios in {}",
        dir.display()
    );
    out
}

/// One scenario against its own fresh kubesim (a bare API server, as recorded).
async fn replay(name: &str, recording: &Value, steps: &[Step]) -> Result<Differences, String> {
    let sim = Sim::start(SimOptions {
        role: Role::ApiServer,
        ..Default::default()
    })
    .await
    .map_err(|e| format!("starting kubesim: {e}"))?;
    let run_id: String = std::iter::once('z')
        .chain((0..7).map(|_| char::from(rand::rng().random_range(b'a'..=b'z'))))
        .collect();
    let result = match client(&sim).await {
        Ok(client) => run::Run::new(client, name, &run_id).all(steps).await,
        Err(e) => Err(e),
    };
    sim.shutdown();
    let doc = json!({"scenario": name, "steps": result?});
    let meta = Meta {
        run: run_id,
        netloc: sim.addr.to_string(),
        now: jiff::Timestamp::now(),
        literal_uids: literal_uids(steps),
    };
    Ok(compare(recording, &normalize(&doc, &meta)))
}

async fn client(sim: &Sim) -> Result<kube::Client, String> {
    let kubeconfig = Kubeconfig::from_yaml(&sim.kubeconfig()).map_err(|e| e.to_string())?;
    let mut config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|e| e.to_string())?;
    // Answers as the server sent them: no retries of 429/5xx behind the replay's back.
    config.default_retry = false;
    config.read_timeout = Some(Duration::from_secs(60));
    kube::Client::try_from(config).map_err(|e| e.to_string())
}

/// UUIDs the requests carry themselves (`metadata.uid` preconditions and the like): they stay as they
/// are in the recordings, while every UUID the server made becomes `<uid:N>`.
fn literal_uids(steps: &[Step]) -> HashSet<String> {
    let uuid = Regex::new(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}").unwrap();
    let mut out = HashSet::new();
    for step in steps {
        let mut texts = vec![step.request.to_string()];
        if let Some(b) = &step.built {
            texts.extend(b.set.values().map(Value::to_string));
        }
        for t in texts {
            out.extend(uuid.find_iter(&t).map(|m| m.as_str().to_owned()));
        }
        out.extend(literal_uids(step.during.as_deref().unwrap_or_default()));
    }
    out
}

/// Per scenario PASS, or FAIL with its code mismatches and (up to `MAX_LINES`) body differences.
fn report(results: &BTreeMap<String, Result<Differences, String>>) -> (String, usize, usize) {
    let (mut out, mut passed, mut failed) = (String::new(), 0, 0);
    for (name, result) in results {
        match result {
            Ok(d) if d.is_empty() => {
                passed += 1;
                let _ = writeln!(out, "{name}: PASS");
            }
            Ok(d) => {
                failed += 1;
                let _ = writeln!(
                    out,
                    "{name}: FAIL ({} code mismatches, {} body differences)",
                    d.codes.len(),
                    d.bodies.len()
                );
                for line in &d.codes {
                    let _ = writeln!(out, "  code  {line}");
                }
                for line in d.bodies.iter().take(MAX_LINES) {
                    let _ = writeln!(out, "  body  {line}");
                }
                if d.bodies.len() > MAX_LINES {
                    let _ = writeln!(
                        out,
                        "  ... {} more body differences",
                        d.bodies.len() - MAX_LINES
                    );
                }
            }
            Err(e) => {
                failed += 1;
                let _ = writeln!(out, "{name}: FAIL (error while running: {e})");
            }
        }
    }
    (out, passed, failed)
}
