//! `courier demo`: the README's first command. Starts a management and two worker kubesim clusters
//! and the controller in this process, submits the Jobs in `examples/`, shows their progress live,
//! and prints where each ran and how it ended. Exits non-zero unless every Job ended as expected.

use std::collections::BTreeMap;
use std::io::IsTerminal as _;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow};
use clap::Args;
use courier_api::{LABEL_EPOCH, LABEL_ORIGIN_UID};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use k8s_openapi::api::batch::v1::Job;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, Client};

use crate::jobs::{self, cluster_of, epoch_of, finished_as, phase};
use crate::local::{Local, LocalOptions};
use crate::util::{self, parse_duration};

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Simulated-time speed of the kubesim clusters (10 = ten times faster than real time).
    #[arg(long, default_value_t = 10.0)]
    pub speed: f64,
    /// Give up (and exit non-zero) after this long.
    #[arg(long, default_value = "90s", value_parser = parse_duration)]
    pub timeout: Duration,
}

/// How an example Job should end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Complete, optionally with a true interim condition (e.g. SuccessCriteriaMet).
    Complete(Option<&'static str>),
    /// Failed with this reason.
    Failed(&'static str),
}

impl Expect {
    fn describe(self) -> String {
        match self {
            Expect::Complete(None) => "Complete".into(),
            Expect::Complete(Some(c)) => format!("Complete ({c})"),
            Expect::Failed(r) => format!("Failed ({r})"),
        }
    }
}

struct Example {
    file: &'static str,
    text: &'static str,
    expect: Expect,
    /// Created suspended; the demo resumes it this long after submitting.
    resume_after: Option<Duration>,
}

const EXAMPLES: &[Example] = &[
    Example {
        file: "examples/hello.yaml",
        text: include_str!("../../../examples/hello.yaml"),
        expect: Expect::Complete(None),
        resume_after: None,
    },
    Example {
        file: "examples/indexed-success-policy.yaml",
        text: include_str!("../../../examples/indexed-success-policy.yaml"),
        expect: Expect::Complete(Some("SuccessCriteriaMet")),
        resume_after: None,
    },
    Example {
        file: "examples/failing.yaml",
        text: include_str!("../../../examples/failing.yaml"),
        expect: Expect::Failed("BackoffLimitExceeded"),
        resume_after: None,
    },
    Example {
        file: "examples/suspended.yaml",
        text: include_str!("../../../examples/suspended.yaml"),
        expect: Expect::Complete(None),
        resume_after: Some(Duration::from_secs(2)),
    },
];

const NAMESPACE: &str = "default";

/// What the demo saw of one Job.
struct Tracked {
    example: &'static Example,
    name: String,
    bar: ProgressBar,
    last_line: String,
    resumed: bool,
    /// Placed on a cluster while still suspended (must not happen).
    dispatched_while_suspended: bool,
    saw_suspended: bool,
    job: Option<Job>,
    finished_at: Option<Duration>,
}

pub async fn run(a: DemoArgs) -> anyhow::Result<ExitCode> {
    if !(a.speed.is_finite() && a.speed > 0.0) {
        anyhow::bail!("--speed must be a positive number, got {}", a.speed);
    }
    let started = Instant::now();
    println!(
        "Starting a management cluster and two worker clusters (kubesim, in this process, {}x speed) \
         and the Courier controller...",
        a.speed
    );
    let local = Local::start(LocalOptions::two_workers(a.speed)).await?;
    println!(
        "Ready in {:.1}s: management {}, worker-1 {} (region=eu), worker-2 {} (region=us).\n",
        started.elapsed().as_secs_f64(),
        local.management.url(),
        local.workers[0].1.url(),
        local.workers[1].1.url(),
    );
    let outcome = drive(&local, &a).await;
    let stopped = local.stop().await;
    let ok = outcome?;
    if let Err(e) = stopped {
        eprintln!("warning: stopping the controller: {e:#}");
    }
    println!("Total time {:.1}s.", started.elapsed().as_secs_f64());
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

async fn submit(client: &Client, ex: &Example) -> anyhow::Result<String> {
    let mut doc: serde_json::Value = serde_saphyr::from_str(ex.text)
        .map_err(|e| anyhow!("{} is not valid YAML: {e}", ex.file))?;
    jobs::prepare_job(&mut doc, ex.file)?;
    let obj: DynamicObject = serde_json::from_value(doc).context("reading the example")?;
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), NAMESPACE, &ApiResource::erase::<Job>(&()));
    let created = api
        .create(&PostParams::default(), &obj)
        .await
        .map_err(|e| anyhow!(util::api_message(&e)))
        .with_context(|| format!("submitting {}", ex.file))?;
    Ok(created.metadata.name.unwrap_or_default())
}

fn describe(job: &Job) -> (String, u64, u64) {
    let status = job.status.clone().unwrap_or_default();
    let completions = job
        .spec
        .as_ref()
        .and_then(|s| s.completions)
        .unwrap_or(1)
        .max(1) as u64;
    let succeeded = status.succeeded.unwrap_or(0).max(0) as u64;
    let place = match (cluster_of(job), epoch_of(job)) {
        (Some(c), Some(e)) => format!("on {c} (epoch {e})"),
        (Some(c), None) => format!("on {c}"),
        _ => "not placed".into(),
    };
    let line = format!(
        "{:<10} {place:<26} active {} ready {} succeeded {} failed {}",
        phase(job),
        status.active.unwrap_or(0),
        status.ready.unwrap_or(0),
        succeeded,
        status.failed.unwrap_or(0),
    );
    (line, succeeded.min(completions), completions)
}

async fn drive(local: &Local, a: &DemoArgs) -> anyhow::Result<bool> {
    let client = &local.client;
    let interactive = std::io::stderr().is_terminal();
    let multi = MultiProgress::with_draw_target(if interactive {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    });
    let style = ProgressStyle::with_template(
        "{spinner:.green} {prefix:<24} [{bar:12.cyan/blue}] {pos}/{len}  {wide_msg}",
    )
    .map_err(|e| anyhow!("progress template: {e}"))?
    .progress_chars("=> ");
    let t0 = Instant::now();
    let mut tracked = Vec::new();
    for ex in EXAMPLES {
        let name = submit(client, ex).await?;
        let bar = multi.add(ProgressBar::new(1));
        bar.set_style(style.clone());
        bar.set_prefix(format!("{NAMESPACE}/{name}"));
        bar.set_message("submitted");
        bar.enable_steady_tick(Duration::from_millis(120));
        if !interactive {
            println!(
                "[{:>5.1}s] submitted {} as {NAMESPACE}/{name}",
                t0.elapsed().as_secs_f64(),
                ex.file
            );
        }
        tracked.push(Tracked {
            example: ex,
            name,
            bar,
            last_line: String::new(),
            resumed: false,
            dispatched_while_suspended: false,
            saw_suspended: false,
            job: None,
            finished_at: None,
        });
    }
    let jobs_api: Api<Job> = Api::namespaced(client.clone(), NAMESPACE);
    let deadline = t0 + a.timeout;
    let mut timed_out = false;
    loop {
        for t in tracked.iter_mut() {
            if t.finished_at.is_some() {
                continue;
            }
            let job = match jobs_api.get_opt(&t.name).await {
                Ok(Some(j)) => j,
                Ok(None) => {
                    t.bar.abandon_with_message("deleted");
                    t.finished_at = Some(t0.elapsed());
                    continue;
                }
                Err(_) => continue,
            };
            let suspended = job.spec.as_ref().and_then(|s| s.suspend) == Some(true);
            if suspended {
                t.saw_suspended = true;
                if cluster_of(&job).is_some() {
                    t.dispatched_while_suspended = true;
                }
            }
            if let Some(after) = t.example.resume_after
                && !t.resumed
                && t0.elapsed() >= after
            {
                jobs_api
                    .patch(
                        &t.name,
                        &PatchParams::default(),
                        &Patch::Merge(serde_json::json!({"spec": {"suspend": false}})),
                    )
                    .await
                    .map_err(|e| anyhow!(util::api_message(&e)))
                    .with_context(|| format!("resuming {NAMESPACE}/{}", t.name))?;
                t.resumed = true;
                let msg = format!(
                    "[{:>5.1}s] resumed {NAMESPACE}/{} (spec.suspend=false)",
                    t0.elapsed().as_secs_f64(),
                    t.name
                );
                if interactive {
                    multi.println(&msg).ok();
                } else {
                    println!("{msg}");
                }
            }
            let (line, pos, len) = describe(&job);
            t.bar.set_length(len);
            t.bar.set_position(pos);
            if line != t.last_line {
                t.bar.set_message(line.clone());
                if !interactive {
                    println!(
                        "[{:>5.1}s] {NAMESPACE}/{:<16} {line}",
                        t0.elapsed().as_secs_f64(),
                        t.name
                    );
                }
                t.last_line = line;
            }
            if finished_as(&job).is_some() {
                t.finished_at = Some(t0.elapsed());
                t.bar.finish();
            }
            t.job = Some(job);
        }
        if tracked.iter().all(|t| t.finished_at.is_some()) {
            break;
        }
        if Instant::now() >= deadline {
            timed_out = true;
            for t in &tracked {
                if t.finished_at.is_none() {
                    t.bar.abandon();
                }
            }
            break;
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    drop(multi);
    report(local, &tracked, timed_out, a.timeout).await
}

/// Prints the final table; true when every Job ended as expected.
async fn report(
    local: &Local,
    tracked: &[Tracked],
    timed_out: bool,
    timeout: Duration,
) -> anyhow::Result<bool> {
    let mut worker_clients = BTreeMap::new();
    for (w, _) in &local.workers {
        worker_clients.insert(w.name.clone(), local.worker_client(&w.name).await?);
    }
    let mut rows = Vec::new();
    let mut problems = Vec::new();
    for t in tracked {
        let Some(job) = &t.job else {
            problems.push(format!("{NAMESPACE}/{}: never observed", t.name));
            continue;
        };
        let cluster = cluster_of(job);
        let epoch = epoch_of(job);
        let (result, ok_end) = match finished_as(job) {
            Some((kind, reason)) => {
                let status = job.status.clone().unwrap_or_default();
                let detail = format!(
                    "{kind}{} ({} succeeded, {} failed)",
                    if reason.is_empty() {
                        String::new()
                    } else {
                        format!(": {reason}")
                    },
                    status.succeeded.unwrap_or(0),
                    status.failed.unwrap_or(0)
                );
                let interim_ok = |c: &str| {
                    status
                        .conditions
                        .as_ref()
                        .is_some_and(|cs| cs.iter().any(|x| x.type_ == c && x.status == "True"))
                };
                let ok = match t.example.expect {
                    Expect::Complete(interim) => {
                        kind == "Complete" && interim.is_none_or(interim_ok)
                    }
                    Expect::Failed(r) => kind == "Failed" && reason == r,
                };
                (detail, ok)
            }
            None => (format!("not finished ({})", phase(job)), false),
        };
        // Where it ran: the mirror on the worker the origin names, with the origin's UID and epoch.
        let mirror = match (
            &cluster,
            worker_clients.get(cluster.as_deref().unwrap_or("")),
        ) {
            (Some(_), Some(wc)) => {
                let api: Api<Job> = Api::namespaced(wc.clone(), NAMESPACE);
                match api.get_opt(&t.name).await {
                    Ok(Some(m)) => {
                        let labels = m.metadata.labels.clone().unwrap_or_default();
                        labels.get(LABEL_ORIGIN_UID) == job.metadata.uid.as_ref()
                            && labels.get(LABEL_EPOCH) == epoch.as_ref()
                    }
                    _ => false,
                }
            }
            _ => false,
        };
        let mut ok = ok_end;
        if !mirror {
            problems.push(format!(
                "{NAMESPACE}/{}: no mirror with its UID and epoch on {}",
                t.name,
                cluster.as_deref().unwrap_or("any worker")
            ));
            ok = false;
        }
        if t.dispatched_while_suspended {
            problems.push(format!(
                "{NAMESPACE}/{}: was placed on a worker while suspended",
                t.name
            ));
            ok = false;
        }
        if !ok_end {
            problems.push(format!(
                "{NAMESPACE}/{}: expected {}, got {result}",
                t.name,
                t.example.expect.describe()
            ));
        }
        let note = if t.example.resume_after.is_some() && t.saw_suspended {
            " after suspend/resume"
        } else {
            ""
        };
        rows.push(vec![
            format!("{NAMESPACE}/{}", t.name),
            cluster.unwrap_or_else(|| "-".into()),
            epoch.unwrap_or_else(|| "-".into()),
            format!("{result}{note}"),
            t.finished_at
                .map(|d| format!("{:.1}s", d.as_secs_f64()))
                .unwrap_or_else(|| "-".into()),
            t.example.expect.describe(),
            if ok { "ok" } else { "UNEXPECTED" }.into(),
        ]);
    }
    println!();
    crate::output::print_table(
        &["JOB", "RAN ON", "EPOCH", "RESULT", "AFTER", "EXPECTED", ""],
        &rows,
    );
    println!();
    if timed_out {
        problems.push(format!(
            "not every Job finished within {} (--timeout)",
            util::short_duration(timeout)
        ));
    }
    if problems.is_empty() {
        println!(
            "All {} Jobs ended as expected. Each ran as a mirror on the worker shown, and its status \
             came back to the origin Job in the management cluster.",
            tracked.len()
        );
        println!(
            "Next: `courier sandbox` keeps such clusters running for you to try `courier submit`, \
             `courier jobs`, `courier describe job` and `courier logs` (and kubectl)."
        );
        Ok(true)
    } else {
        println!("Not as expected:");
        for p in &problems {
            println!("  - {p}");
        }
        for t in tracked {
            if let Ok(text) = jobs::explain_ref(&local.client, NAMESPACE, &t.name).await {
                println!("\n{text}");
            }
        }
        Ok(false)
    }
}
