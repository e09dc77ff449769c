//! What `courier bench` measures and how: a process's CPU time and memory from /proc, latency
//! percentiles, and the per-Job timeline (origin created, mirror created, each status change on the
//! mirror and when the origin first showed it), each timed when the server committed that version
//! (read in process, see [`super::commits`]).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::StreamExt as _;
use serde::{Deserialize, Serialize};

/// CPU time and memory of a process, read from /proc (Linux).
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcSample {
    /// utime + stime.
    pub cpu: Duration,
    /// VmRSS: resident now.
    pub rss_bytes: u64,
    /// VmHWM: peak resident so far.
    pub peak_rss_bytes: u64,
}

/// Reads `/proc/<pid>/stat` and `/proc/<pid>/status` (the reader behind the controller's
/// `process_*` metrics); `pid` `None` = this process.
pub fn sample(pid: Option<u32>) -> anyhow::Result<ProcSample> {
    let s = courier_controller::metrics::ProcStat::read(pid)
        .context("courier bench needs Linux /proc")?;
    Ok(ProcSample {
        cpu: Duration::from_secs_f64(s.cpu_seconds),
        rss_bytes: s.resident_bytes,
        peak_rss_bytes: s.peak_resident_bytes,
    })
}

/// The machine's CPU over one phase's dispatch: the bench process (the kubesim servers, their
/// simulated Job and Pod controllers, the bench's followers and, in the floor's phase, the raw
/// client) and the controller process, from just before the first origin create until the bench
/// saw the last mirror (it looks every 50 ms). Both phases are CPU-bound, so this is what the
/// throughput of each is divided from, and Courier's phase less the floor's is what Courier costs.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct DispatchCpu {
    pub wall_seconds: f64,
    pub bench_process_seconds: f64,
    /// 0 in the floor's phase (its raw client runs in the bench process).
    pub controller_seconds: f64,
    /// Both processes' CPU per Job, in milliseconds.
    pub ms_per_job: f64,
    /// Both processes' CPU over the wall time: the cores kept busy (at most `config.cpus`, give or
    /// take the kernel's 10 ms accounting ticks).
    pub cores_busy: f64,
}

/// Where a [`DispatchCpu`] window started: the bench process's CPU and the controller's.
pub struct CpuWindow {
    started: Instant,
    bench: Duration,
    controller: Option<(u32, Duration)>,
}

impl CpuWindow {
    /// Opens the window now; `controller` is the controller's pid (none in the floor's phase).
    pub fn start(controller: Option<u32>) -> anyhow::Result<Self> {
        let controller = match controller {
            Some(pid) => Some((pid, sample(Some(pid))?.cpu)),
            None => None,
        };
        Ok(Self {
            started: Instant::now(),
            bench: sample(None)?.cpu,
            controller,
        })
    }

    /// Closes the window now, for `jobs` Jobs.
    pub fn finish(&self, jobs: usize) -> anyhow::Result<DispatchCpu> {
        let wall_seconds = self.started.elapsed().as_secs_f64();
        let bench_process_seconds = sample(None)?.cpu.saturating_sub(self.bench).as_secs_f64();
        let controller_seconds = match self.controller {
            Some((pid, before)) => sample(Some(pid))?.cpu.saturating_sub(before).as_secs_f64(),
            None => 0.0,
        };
        Ok(DispatchCpu::of(
            wall_seconds,
            bench_process_seconds,
            controller_seconds,
            jobs,
        ))
    }
}

impl DispatchCpu {
    fn of(
        wall_seconds: f64,
        bench_process_seconds: f64,
        controller_seconds: f64,
        jobs: usize,
    ) -> Self {
        let total = bench_process_seconds + controller_seconds;
        Self {
            wall_seconds,
            bench_process_seconds,
            controller_seconds,
            ms_per_job: if jobs == 0 {
                0.0
            } else {
                total * 1000.0 / jobs as f64
            },
            cores_busy: if wall_seconds > 0.0 {
                total / wall_seconds
            } else {
                0.0
            },
        }
    }
}

/// Logical CPUs this process may run on.
pub fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The 1-minute load average (how busy the machine was), if readable.
pub fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// p50, p99 and max of a set of durations, in milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct Percentiles {
    pub count: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Percentiles {
    /// Nearest-rank percentiles; all zero for an empty set.
    pub fn of(mut samples: Vec<Duration>) -> Self {
        if samples.is_empty() {
            return Self::default();
        }
        samples.sort_unstable();
        let rank = |p: f64| {
            let i = ((p * samples.len() as f64).ceil() as usize).clamp(1, samples.len()) - 1;
            samples[i].as_secs_f64() * 1000.0
        };
        Self {
            count: samples.len(),
            p50_ms: rank(0.50),
            p99_ms: rank(0.99),
            max_ms: rank(1.0),
        }
    }
}

/// What a Job's status looks like, for matching a mirror's status with the origin's: counters and
/// the true condition types, without Courier's own `courier.dev/*` conditions (only origins have them).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Signature {
    active: i32,
    ready: i32,
    succeeded: i32,
    failed: i32,
    terminating: i32,
    conditions: Vec<String>,
}

/// The parts of a stored Job that a [`Signature`] reads; everything else (metadata, spec, times,
/// messages) is skipped unread, which is most of the follower's cost per version.
#[derive(Deserialize)]
struct SignatureSource {
    #[serde(default)]
    status: Option<SignatureStatus>,
}

#[derive(Deserialize, Default)]
struct SignatureStatus {
    active: Option<i32>,
    ready: Option<i32>,
    succeeded: Option<i32>,
    failed: Option<i32>,
    terminating: Option<i32>,
    #[serde(default)]
    conditions: Vec<SignatureCondition>,
}

#[derive(Deserialize)]
struct SignatureCondition {
    #[serde(rename = "type")]
    type_: String,
    status: String,
}

impl Signature {
    /// The signature of a Job in its stored JSON form (a Job without a status, or one that does not
    /// decode, has the empty signature).
    pub fn of_job_json(json: &[u8]) -> Self {
        let status = serde_json::from_slice::<SignatureSource>(json)
            .ok()
            .and_then(|s| s.status)
            .unwrap_or_default();
        let mut conditions: Vec<String> = status
            .conditions
            .into_iter()
            .filter(|c| c.status == "True" && !c.type_.starts_with("courier.dev/"))
            .map(|c| c.type_)
            .collect();
        conditions.sort();
        Self {
            active: status.active.unwrap_or(0),
            ready: status.ready.unwrap_or(0),
            succeeded: status.succeeded.unwrap_or(0),
            failed: status.failed.unwrap_or(0),
            terminating: status.terminating.unwrap_or(0),
            conditions,
        }
    }

    /// A Job nobody has started yet.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    pub fn finished(&self) -> bool {
        self.conditions
            .iter()
            .any(|c| c == "Complete" || c == "Failed")
    }
}

/// One Job's timeline, every instant the one at which a server committed the version.
#[derive(Debug, Default)]
struct Timeline {
    /// The management server stored the origin's create.
    created: Option<Instant>,
    /// Its worker stored the mirror's create.
    mirror_created: Option<Instant>,
    /// Distinct non-empty mirror statuses, in order.
    mirror_commits: Vec<(Signature, Instant)>,
    /// Distinct origin statuses, in order.
    origin_commits: Vec<(Signature, Instant)>,
    /// The first origin version that is Complete or Failed.
    finished: Option<Instant>,
}

/// Appends `sig` unless it is the last one there (a version that changed nothing the signature
/// reads); an empty mirror status is not a change to copy.
fn push_distinct(list: &mut Vec<(Signature, Instant)>, sig: Signature, at: Instant, side: Side) {
    if matches!(side, Side::Mirror) && sig.is_empty() {
        return;
    }
    if list.last().is_none_or(|(s, _)| *s != sig) {
        list.push((sig, at));
    }
}

/// The timelines of every Job of one run, filled by the in-process followers of the servers'
/// Job tables ([`super::commits`]); the submitter only counts its creates.
#[derive(Default)]
pub struct Recorder {
    jobs: Mutex<HashMap<String, Timeline>>,
    /// Creates the submitter saw answered (progress only).
    submitted: AtomicUsize,
    /// Origin creates the management server committed.
    created: AtomicUsize,
    mirrors: AtomicUsize,
    /// Origin versions the management server committed other than their creation.
    origin_writes: AtomicUsize,
    finished: AtomicUsize,
}

/// The figures computed from a run's timelines.
#[derive(Debug, Clone, Serialize)]
pub struct Timelines {
    /// Origins created by the bench.
    pub created: usize,
    /// Of those, with a mirror created on a worker.
    pub dispatched: usize,
    /// Of those, Complete or Failed on the origin.
    pub finished: usize,
    /// First origin create to last mirror create (commit times).
    pub dispatch_seconds: f64,
    /// First origin create to the last origin finished (commit times).
    pub end_to_end_seconds: f64,
    /// Origin create to mirror create, per Job (commit times).
    pub dispatch_latency: Percentiles,
    /// Mirror status change committed on its worker to the origin's first committed version
    /// showing it (or a later mirror status): the servers' commit times, read in process.
    pub status_latency: Percentiles,
    /// Mirror status changes the origin never showed (nor any later one), by commits.
    pub status_unmatched: usize,
    /// Writes the management server committed to the origins (every version after the create:
    /// intent, status copies, finalizer), per origin created.
    pub origin_writes_per_job: f64,
}

impl Recorder {
    fn with<R>(&self, name: &str, f: impl FnOnce(&mut Timeline) -> R) -> R {
        let mut jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
        // Most calls find the Job: no key is allocated for them.
        match jobs.get_mut(name) {
            Some(t) => f(t),
            None => f(jobs.entry(name.to_string()).or_default()),
        }
    }

    /// The submitter's create of an origin was answered.
    pub fn submitted(&self) {
        self.submitted.fetch_add(1, Ordering::Relaxed);
    }

    /// A version of `name` committed at `at` on the management server (origin) or a worker
    /// (mirror), in commit order; `created` when it is the object's create.
    pub fn committed(&self, side: Side, name: &str, created: bool, sig: Signature, at: Instant) {
        let (first, finished_now) = self.with(name, |t| match side {
            Side::Origin => {
                let first = created && t.created.is_none();
                if first {
                    t.created = Some(at);
                }
                let finished_now = t.finished.is_none() && sig.finished();
                if finished_now {
                    t.finished = Some(at);
                }
                push_distinct(&mut t.origin_commits, sig, at, side);
                (first, finished_now)
            }
            Side::Mirror => {
                let first = created && t.mirror_created.is_none();
                if first {
                    t.mirror_created = Some(at);
                }
                push_distinct(&mut t.mirror_commits, sig, at, side);
                (first, false)
            }
        });
        match side {
            Side::Origin if first => self.created.fetch_add(1, Ordering::Relaxed),
            Side::Mirror if first => self.mirrors.fetch_add(1, Ordering::Relaxed),
            _ => 0,
        };
        if finished_now {
            self.finished.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The management server committed a write to an origin (not its create).
    pub fn origin_written(&self) {
        self.origin_writes.fetch_add(1, Ordering::Relaxed);
    }

    pub fn submitted_count(&self) -> usize {
        self.submitted.load(Ordering::Relaxed)
    }
    pub fn created_count(&self) -> usize {
        self.created.load(Ordering::Relaxed)
    }
    pub fn mirror_count(&self) -> usize {
        self.mirrors.load(Ordering::Relaxed)
    }
    pub fn finished_count(&self) -> usize {
        self.finished.load(Ordering::Relaxed)
    }

    /// The figures of the Jobs the bench created.
    pub fn summarize(&self) -> Timelines {
        let jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
        let (mut dispatch, mut status, mut unmatched) = (Vec::new(), Vec::new(), 0);
        let (mut first_created, mut last_mirror, mut last_finished) = (None, None, None);
        let (mut created, mut dispatched, mut finished) = (0, 0, 0);
        for t in jobs.values() {
            let Some(c) = t.created else { continue };
            created += 1;
            first_created = Some(first_created.map_or(c, |f: Instant| f.min(c)));
            if let Some(m) = t.mirror_created {
                dispatched += 1;
                dispatch.push(m.saturating_duration_since(c));
                last_mirror = Some(last_mirror.map_or(m, |l: Instant| l.max(m)));
            }
            if let Some(f) = t.finished {
                finished += 1;
                last_finished = Some(last_finished.map_or(f, |l: Instant| l.max(f)));
            }
            let (lat, missed) = propagation(&t.mirror_commits, &t.origin_commits);
            status.extend(lat);
            unmatched += missed;
        }
        let since_first = |end: Option<Instant>| match (first_created, end) {
            (Some(s), Some(e)) => e.saturating_duration_since(s).as_secs_f64(),
            _ => 0.0,
        };
        Timelines {
            created,
            dispatched,
            finished,
            dispatch_seconds: since_first(last_mirror),
            end_to_end_seconds: since_first(last_finished),
            dispatch_latency: Percentiles::of(dispatch),
            status_latency: Percentiles::of(status),
            status_unmatched: unmatched,
            origin_writes_per_job: self.origin_writes.load(Ordering::Relaxed) as f64
                / created.max(1) as f64,
        }
    }
}

/// For each mirror status change, how long until the origin showed it. The controller may skip
/// intermediate statuses when the mirror changes faster than it writes (it copies the latest), so a
/// change counts as propagated when the origin shows it or any later mirror status.
fn propagation(
    mirror: &[(Signature, Instant)],
    origin: &[(Signature, Instant)],
) -> (Vec<Duration>, usize) {
    // For each origin status: the latest mirror change it equals (or None).
    let reached: Vec<(Option<usize>, Instant)> = origin
        .iter()
        .map(|(sig, at)| (mirror.iter().rposition(|(m, _)| m == sig), *at))
        .collect();
    let mut out = Vec::with_capacity(mirror.len());
    let mut missed = 0;
    for (i, (_, seen)) in mirror.iter().enumerate() {
        match reached
            .iter()
            .find(|(r, _)| r.is_some_and(|r| r >= i))
            .map(|(_, at)| *at)
        {
            Some(at) => out.push(at.saturating_duration_since(*seen)),
            None => missed += 1,
        }
    }
    (out, missed)
}

/// Which side a watch records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Origin,
    Mirror,
}

/// Waits until `done()` or the deadline; `what` names the wait in the error.
pub async fn wait_until(
    what: &str,
    deadline: Instant,
    mut done: impl FnMut() -> bool,
    mut progress: impl FnMut() -> String,
) -> anyhow::Result<()> {
    while !done() {
        if Instant::now() >= deadline {
            anyhow::bail!("timed out waiting for {what}: {}", progress());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// Runs `futures` with at most `concurrency` in flight; outputs in completion order.
pub async fn run_all<F>(futures: impl Iterator<Item = F>, concurrency: usize) -> Vec<F::Output>
where
    F: std::future::Future,
{
    futures::stream::iter(futures)
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sig(active: i32, succeeded: i32, conds: &[&str]) -> Signature {
        Signature {
            active,
            succeeded,
            conditions: conds.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn dispatch_cpu_adds_both_processes() {
        let d = DispatchCpu::of(2.0, 3.0, 1.0, 1000);
        assert_eq!(d.ms_per_job, 4.0);
        assert_eq!(d.cores_busy, 2.0);
        let none = DispatchCpu::of(0.0, 0.0, 0.0, 0);
        assert_eq!((none.ms_per_job, none.cores_busy), (0.0, 0.0));
    }

    #[test]
    fn a_cpu_window_counts_this_process() -> anyhow::Result<()> {
        let window = CpuWindow::start(None)?;
        let spin = Instant::now();
        let mut x = 0u64;
        while spin.elapsed() < Duration::from_millis(60) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let d = window.finish(1)?;
        assert!(d.bench_process_seconds > 0.0, "{d:?}");
        assert_eq!(d.controller_seconds, 0.0);
        assert!(d.wall_seconds >= 0.06, "{d:?}");
        Ok(())
    }

    #[test]
    fn percentiles_nearest_rank() {
        let p = Percentiles::of((1..=100).map(Duration::from_millis).collect());
        assert_eq!(p.count, 100);
        assert_eq!(p.p50_ms, 50.0);
        assert_eq!(p.p99_ms, 99.0);
        assert_eq!(p.max_ms, 100.0);
        assert_eq!(Percentiles::of(vec![]), Percentiles::default());
    }

    #[test]
    fn propagation_counts_skipped_statuses_as_reached() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let mirror = vec![
            (sig(1, 0, &[]), at(0)),
            (sig(0, 1, &[]), at(10)),
            (sig(0, 1, &["Complete"]), at(20)),
        ];
        // The origin skipped the middle status and never showed a foreign one.
        let origin = vec![
            (sig(0, 0, &[]), t0),
            (sig(1, 0, &[]), at(5)),
            (sig(0, 1, &["Complete"]), at(30)),
        ];
        let (lat, missed) = propagation(&mirror, &origin);
        assert_eq!(missed, 0);
        assert_eq!(
            lat,
            vec![
                Duration::from_millis(5),
                Duration::from_millis(20),
                Duration::from_millis(10)
            ]
        );
        let (lat, missed) = propagation(&mirror, &origin[..2]);
        assert_eq!((lat.len(), missed), (1, 2));
    }

    /// A stored Job's signature reads the counters and the true condition types (not Courier's
    /// own), whatever else the object holds; no status, or one that does not decode, is empty.
    #[test]
    fn signature_of_a_stored_job() {
        let job = serde_json::json!({
            "metadata": {"name": "j", "namespace": "default", "labels": {"a": "b"}},
            "spec": {"parallelism": 2, "template": {"spec": {"containers": [{"name": "c"}]}}},
            "status": {
                "active": 1, "ready": 1, "succeeded": 2, "failed": 3, "terminating": 4,
                "startTime": "2026-11-27T10:00:00Z",
                "uncountedTerminatedPods": {"succeeded": ["u1"]},
                "conditions": [
                    {"type": "SuccessCriteriaMet", "status": "True", "reason": "R",
                     "lastTransitionTime": "2026-11-27T10:00:01Z"},
                    {"type": "Failed", "status": "False"},
                    {"type": "courier.dev/Dispatched", "status": "True"},
                    {"type": "Complete", "status": "True", "message": "done"}
                ]
            }
        });
        let got = Signature::of_job_json(&serde_json::to_vec(&job).expect("json"));
        let want = Signature {
            active: 1,
            ready: 1,
            succeeded: 2,
            failed: 3,
            terminating: 4,
            conditions: vec!["Complete".into(), "SuccessCriteriaMet".into()],
        };
        assert_eq!(got, want);
        assert!(got.finished());
        let bare = serde_json::json!({"metadata": {"name": "j"}, "spec": {}});
        let bare = Signature::of_job_json(&serde_json::to_vec(&bare).expect("json"));
        assert!(bare.is_empty());
        assert!(Signature::of_job_json(br#"{"status": {"active": "x"}}"#).is_empty());
    }

    #[test]
    fn reads_this_process() {
        let s = sample(None).expect("/proc/self");
        assert!(s.rss_bytes > 0 && s.peak_rss_bytes >= s.rss_bytes);
    }
}
