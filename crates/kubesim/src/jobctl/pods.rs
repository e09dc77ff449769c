//! Simulated pods: what each pod does, decided from the Job's pod-template annotations (see the module
//! documentation of `jobctl` for the interface), and a kubelet-like lifecycle on the virtual clock.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde_json::Value;

use super::clock::{scaled, shift};

/// Annotation keys of the pod-behaviour interface.
pub const ANN_PENDING: &str = "sim/pending-seconds";
pub const ANN_RUN: &str = "sim/run-seconds";
pub const ANN_TERM: &str = "sim/term-seconds";
pub const ANN_OUTCOME: &str = "sim/outcome";
pub const ANN_PLAN: &str = "sim/plan";

/// Defaults when an annotation is absent or malformed.
pub const DEFAULT_PENDING_SECONDS: f64 = 0.5;
pub const DEFAULT_RUN_SECONDS: f64 = 2.0;
pub const DEFAULT_TERM_SECONDS: f64 = 1.5;

// Kubelet-side latencies seen in the recordings (bind + status update, exit report, force delete).
const START_LATENCY: f64 = 0.05;
const END_LATENCY: f64 = 0.01;
const KILL_LATENCY: f64 = 0.02;
const GONE_LATENCY: f64 = 0.03;
// Kubelet CrashLoopBackOff for restartPolicy OnFailure.
const CRASH_BACKOFF_BASE: f64 = 10.0;
const CRASH_BACKOFF_MAX: f64 = 300.0;

/// Exit code of a container stopped by SIGTERM within its grace period / by SIGKILL after it.
pub const EXIT_SIGTERM: i32 = 143;
pub const EXIT_SIGKILL: i32 = 137;

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Outcome {
    Succeed,
    Fail(i32),
    Hang,
    /// Evicted through the Eviction API: `DisruptionTarget=True`, then deleted (terminates like any
    /// deleted pod).
    Evict,
}

/// One resolved plan entry: the outcome and when it happens, in seconds after the pod started
/// running (`None` = use `sim/run-seconds`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PlanEntry {
    pub outcome: Outcome,
    pub at: Option<f64>,
}

/// Parses `succeed`, `fail`, `fail:<code>`, `hang`, `evict`, each optionally followed by `@<seconds>`.
pub(crate) fn parse_entry(s: &str) -> Option<PlanEntry> {
    let s = s.trim();
    let (what, at) = match s.split_once('@') {
        Some((w, a)) => (w.trim(), Some(parse_seconds(a)?)),
        None => (s, None),
    };
    let outcome = match what {
        "succeed" => Outcome::Succeed,
        "hang" => Outcome::Hang,
        "evict" => Outcome::Evict,
        "fail" => Outcome::Fail(1),
        w => {
            let code = w.strip_prefix("fail:")?.trim().parse::<i32>().ok()?;
            // A failed container never reports 0; treat it as the generic failure.
            Outcome::Fail(if code == 0 { 1 } else { code })
        }
    };
    Some(PlanEntry { outcome, at })
}

fn parse_seconds(s: &str) -> Option<f64> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= 0.0)
}

/// Pod behaviour read from the template annotations.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Behaviour {
    pub pending: f64,
    pub run: f64,
    /// Time a deleted pod takes to stop, already capped by `terminationGracePeriodSeconds`.
    pub term: f64,
    /// Whether `term` hit the grace period (the container is SIGKILLed: exit 137).
    pub killed_at_grace: bool,
    /// `sim/outcome` (an `@<seconds>` there replaces `sim/run-seconds`).
    pub outcome: PlanEntry,
    /// `iN` / `nN` keys.
    pub plan: BTreeMap<String, PlanEntry>,
}

impl Default for Behaviour {
    fn default() -> Self {
        Self::from_annotations(None, None)
    }
}

impl Behaviour {
    pub fn from_annotations(ann: Option<&Value>, grace: Option<i64>) -> Self {
        let get = |k: &str| ann.and_then(|a| a.get(k)).and_then(Value::as_str);
        let term_wanted = get(ANN_TERM)
            .and_then(parse_seconds)
            .unwrap_or(DEFAULT_TERM_SECONDS);
        let grace = grace.map_or(30.0, |g| g.max(0) as f64);
        let plan = get(ANN_PLAN)
            .and_then(|p| serde_json::from_str::<BTreeMap<String, Value>>(p).ok())
            .map(|m| {
                m.into_iter()
                    .filter_map(|(k, v)| Some((k, parse_entry(v.as_str()?)?)))
                    .collect()
            })
            .unwrap_or_default();
        Self {
            pending: get(ANN_PENDING)
                .and_then(parse_seconds)
                .unwrap_or(DEFAULT_PENDING_SECONDS),
            run: get(ANN_RUN)
                .and_then(parse_seconds)
                .unwrap_or(DEFAULT_RUN_SECONDS),
            term: term_wanted.min(grace),
            killed_at_grace: term_wanted > grace,
            outcome: get(ANN_OUTCOME).and_then(parse_entry).unwrap_or(PlanEntry {
                outcome: Outcome::Succeed,
                at: None,
            }),
            plan,
        }
    }

    /// What the pod with this completion index / creation ordinal does, and after how many seconds of
    /// running (`None` for a pod that never finishes by itself).
    pub fn resolve(&self, index: Option<i32>, ordinal: u32) -> (Outcome, f64) {
        let entry = index
            .and_then(|i| self.plan.get(&format!("i{i}")))
            .or_else(|| self.plan.get(&format!("n{ordinal}")));
        let e = entry.unwrap_or(&self.outcome);
        (e.outcome, e.at.unwrap_or(self.run))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Pending,
    Running,
    Succeeded,
    Failed,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Running => "Running",
            Phase::Succeeded => "Succeeded",
            Phase::Failed => "Failed",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Containers start: Running and Ready.
    Start,
    /// The workload's own outcome.
    Finish,
    /// Eviction API call.
    Evict,
    /// A deleted pod's containers stopped.
    Kill,
    /// The object disappears (deleted, terminal, no finalizer left).
    Gone,
}

/// A simulated pod, as the Job controller's informer would see it.
#[derive(Debug, Clone)]
pub(crate) struct Pod {
    pub uid: String,
    pub name: String,
    pub ordinal: u32,
    pub index: Option<i32>,
    /// `batch.kubernetes.io/job-index-failure-count` / `job-index-ignored-failure-count`.
    pub failure_count: i32,
    pub ignored_failure_count: i32,
    pub created: Timestamp,
    pub phase: Phase,
    pub ready: bool,
    pub ready_since: Option<Timestamp>,
    pub finalizer: bool,
    pub deletion: Option<Timestamp>,
    /// Exit code every container terminated with (they stop together in this model).
    pub exit_code: Option<i32>,
    pub finished_at: Option<Timestamp>,
    /// `(type, status)` pod conditions that matter to pod failure policies (DisruptionTarget).
    pub conditions: Vec<(String, String)>,
    pub restarts: i32,
    /// When the current container started running (`None` while waiting to start or restart).
    pub started_at: Option<Timestamp>,
    /// The previous container of a restarted pod: started, finished, exit code.
    pub last_run: Option<(Timestamp, Timestamp, i32)>,
    pub next: Option<(Timestamp, Step)>,
    pub outcome: Outcome,
    pub run_for: f64,
    pub term: f64,
    pub killed_at_grace: bool,
    /// restartPolicy OnFailure: a failing container is restarted in place instead of failing the pod.
    pub restart_on_failure: bool,
}

impl Pod {
    pub fn is_terminal(&self) -> bool {
        matches!(self.phase, Phase::Succeeded | Phase::Failed)
    }

    /// `controller.FilterActivePods`: not terminal and not being deleted.
    pub fn is_active(&self) -> bool {
        !self.is_terminal() && self.deletion.is_none()
    }

    /// `controller.CountTerminatingPods`: being deleted and not yet terminal.
    pub fn is_terminating(&self) -> bool {
        self.deletion.is_some() && !self.is_terminal()
    }

    /// Applies one lifecycle step at `now` (`speed` scales the follow-up delays).
    pub fn step(&mut self, step: Step, now: Timestamp, speed: f64) {
        self.next = None;
        match step {
            Step::Start => {
                self.phase = Phase::Running;
                self.ready = true;
                self.ready_since = Some(now);
                self.started_at = Some(now);
                match self.outcome {
                    Outcome::Hang => {}
                    Outcome::Evict => self.schedule(now, self.run_for, Step::Evict, speed),
                    _ => self.schedule(now, self.run_for + END_LATENCY, Step::Finish, speed),
                }
            }
            Step::Finish => match self.outcome {
                Outcome::Fail(code) if self.deletion.is_none() && self.restart_on_failure => {
                    // restartPolicy OnFailure: the kubelet restarts the container after a crash-loop delay.
                    self.restarts += 1;
                    self.ready = false;
                    if let Some(started) = self.started_at.take() {
                        self.last_run = Some((started, now, code));
                    }
                    let delay =
                        (CRASH_BACKOFF_BASE * 2f64.powi(self.restarts - 1)).min(CRASH_BACKOFF_MAX);
                    self.exit_code = Some(code);
                    self.schedule(now, delay, Step::Start, speed);
                }
                Outcome::Fail(code) => self.terminate(Phase::Failed, Some(code), now, speed),
                _ => self.terminate(Phase::Succeeded, Some(0), now, speed),
            },
            Step::Evict => {
                self.conditions
                    .push(("DisruptionTarget".to_owned(), "True".to_owned()));
                self.delete(now, speed);
            }
            Step::Kill => {
                let code = match self.phase {
                    Phase::Running if self.killed_at_grace => Some(EXIT_SIGKILL),
                    Phase::Running => Some(EXIT_SIGTERM),
                    _ => None,
                };
                self.terminate(Phase::Failed, code, now, speed);
            }
            Step::Gone => {}
        }
    }

    fn terminate(&mut self, phase: Phase, code: Option<i32>, now: Timestamp, speed: f64) {
        self.phase = phase;
        self.ready = false;
        self.exit_code = code;
        self.finished_at = Some(now);
        self.maybe_gone(now, speed);
    }

    fn schedule(&mut self, now: Timestamp, secs: f64, step: Step, speed: f64) {
        self.next = Some((shift(now, scaled(secs, speed)), step));
    }

    fn maybe_gone(&mut self, now: Timestamp, speed: f64) {
        if self.deletion.is_some() && self.is_terminal() && !self.finalizer {
            self.schedule(now, GONE_LATENCY, Step::Gone, speed);
        }
    }

    /// A DELETE call at `now` (graceful: the containers get `term` seconds to stop).
    pub fn delete(&mut self, now: Timestamp, speed: f64) {
        if self.deletion.is_some() {
            return;
        }
        self.deletion = Some(now);
        if self.is_terminal() {
            self.maybe_gone(now, speed);
            return;
        }
        let stop = if self.phase == Phase::Running {
            self.term
        } else {
            0.0
        };
        let kill_at = shift(now, scaled(stop + KILL_LATENCY, speed));
        // A workload that finishes on its own before the signal lands keeps its own outcome.
        let natural = self
            .next
            .filter(|(t, s)| *s == Step::Finish && *t <= kill_at);
        self.next = natural.or(Some((kill_at, Step::Kill)));
    }

    pub fn remove_finalizer(&mut self, now: Timestamp, speed: f64) {
        self.finalizer = false;
        self.maybe_gone(now, speed);
    }
}

/// Everything needed to create a pod.
pub(crate) struct NewPod<'a> {
    pub job_uid: &'a str,
    pub job_name: &'a str,
    pub ordinal: u32,
    pub index: Option<i32>,
    pub failure_count: i32,
    pub ignored_failure_count: i32,
    pub behaviour: &'a Behaviour,
    pub restart_on_failure: bool,
}

pub(crate) fn create(p: NewPod<'_>, now: Timestamp, speed: f64) -> Pod {
    let (outcome, run_for) = p.behaviour.resolve(p.index, p.ordinal);
    let h = seed(p.job_uid, p.ordinal);
    let name = name_from(p.job_name, p.index, h);
    let mut pod = Pod {
        uid: uuid_from(h),
        name,
        ordinal: p.ordinal,
        index: p.index,
        failure_count: p.failure_count,
        ignored_failure_count: p.ignored_failure_count,
        created: now,
        phase: Phase::Pending,
        ready: false,
        ready_since: None,
        finalizer: true,
        deletion: None,
        exit_code: None,
        finished_at: None,
        conditions: Vec::new(),
        restarts: 0,
        started_at: None,
        last_run: None,
        next: None,
        outcome,
        run_for,
        term: p.behaviour.term,
        killed_at_grace: p.behaviour.killed_at_grace,
        restart_on_failure: p.restart_on_failure,
    };
    pod.schedule(now, p.behaviour.pending + START_LATENCY, Step::Start, speed);
    pod
}

fn seed(job_uid: &str, ordinal: u32) -> u64 {
    mix(fnv(job_uid.as_bytes()) ^ u64::from(ordinal).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

fn name_from(job_name: &str, index: Option<i32>, seed: u64) -> String {
    let suffix = name_suffix(seed);
    match index {
        Some(i) => format!("{job_name}-{i}-{suffix}"),
        None => format!("{job_name}-{suffix}"),
    }
}

/// The name of the `ordinal`-th pod (from 0) a Job creates, as `create` names it.
#[cfg(test)]
pub(crate) fn pod_name(job_name: &str, job_uid: &str, ordinal: u32, index: Option<i32>) -> String {
    name_from(job_name, index, seed(job_uid, ordinal))
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

// splitmix64 finaliser: spreads a seed over all bits.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A version-4-shaped UUID derived from `seed` (deterministic).
fn uuid_from(seed: u64) -> String {
    let hi = mix(seed);
    let lo = mix(hi);
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&hi.to_be_bytes());
    bytes[8..].copy_from_slice(&lo.to_be_bytes());
    uuid::Builder::from_random_bytes(bytes)
        .into_uuid()
        .hyphenated()
        .to_string()
}

/// Five characters from the API server's `generateName` alphabet.
fn name_suffix(seed: u64) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut x = mix(seed ^ 0x5bd1_e995);
    (0..5)
        .map(|_| {
            let c = ALPHABET[(x % ALPHABET.len() as u64) as usize] as char;
            x /= ALPHABET.len() as u64;
            c
        })
        .collect()
}
