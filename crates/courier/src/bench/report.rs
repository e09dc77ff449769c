//! The figures of one `courier bench` run: the JSON shape (`--json`) and the table.

use serde::Serialize;

use super::measure::{DispatchCpu, Percentiles, Timelines};
use crate::util::render_table;

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub config: Config,
    pub courier: CourierFigures,
    /// The raw client's dispatch (absent with --no-floor or --scale).
    pub floor: Option<FloorFigures>,
    /// Courier's dispatch time over the floor's (1.0 = as fast as the raw calls).
    pub courier_over_floor: Option<f64>,
    /// The idle-workers phase (absent with --idle-workers 0 or --scale).
    pub clusters: Option<ClusterFigures>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Config {
    pub jobs: usize,
    pub workers: usize,
    pub idle_workers: usize,
    pub concurrency: u32,
    pub speed: f64,
    pub run_seconds: f64,
    pub scale: bool,
    pub cpus: usize,
    pub load_average_at_start: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CourierFigures {
    /// Time the bench took to create every origin.
    pub submit_seconds: f64,
    /// Mirrors created per second, first origin create to last mirror.
    pub jobs_per_second: f64,
    #[serde(flatten)]
    pub timelines: Timelines,
    pub cost: Cost,
    /// The machine's CPU while Courier dispatched (the controller and the bench process).
    pub dispatch_cpu: DispatchCpu,
}

/// The controller process's CPU and memory.
#[derive(Debug, Clone, Serialize)]
pub struct Cost {
    /// From just before the first origin to the last one finished.
    pub cpu_seconds: f64,
    pub cpu_seconds_per_1000_jobs: f64,
    pub peak_rss_bytes: u64,
    /// Resident with every worker connected and no Jobs.
    pub rss_before_bytes: u64,
    /// Resident 3 s after the last Job finished (every origin still tracked).
    pub rss_at_rest_bytes: u64,
    pub rss_per_tracked_job_bytes: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct FloorFigures {
    pub dispatched: usize,
    pub submit_seconds: f64,
    pub dispatch_seconds: f64,
    pub jobs_per_second: f64,
    pub dispatch_latency: Percentiles,
    /// The machine's CPU while the raw client dispatched (the bench process).
    pub dispatch_cpu: DispatchCpu,
}

#[derive(Debug, Clone, Serialize)]
pub struct ClusterFigures {
    pub workers: usize,
    /// Controller start to every WorkerCluster Ready.
    pub ready_seconds: f64,
    /// Controller CPU while idle, in % of one core.
    pub idle_cpu_percent: f64,
    pub idle_rss_bytes: u64,
    /// What the bench process (which hosts the in-process kubesim servers) grew by per idle
    /// worker server, measured with every worker Ready and the controller connected.
    pub rss_per_kubesim_server_bytes: f64,
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

fn lat(p: &Percentiles) -> String {
    format!(
        "p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms (n={})",
        p.p50_ms, p.p99_ms, p.max_ms, p.count
    )
}

fn cpu_split(d: &DispatchCpu) -> String {
    let controller = if d.controller_seconds > 0.0 {
        format!("controller {:.1} s, ", d.controller_seconds)
    } else {
        String::new()
    };
    format!(
        "{:.2} ms per Job: {controller}bench process {:.1} s; {:.2} cores busy",
        d.ms_per_job, d.bench_process_seconds, d.cores_busy
    )
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "MISSED" }
}

/// The table printed at the end of a run (targets from docs/benchmarks.md).
pub fn render(r: &Report) -> String {
    let c = &r.courier;
    let t = &c.timelines;
    let cfg = &r.config;
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut row = |figure: &str, value: String, target: &str, met: Option<bool>| {
        rows.push(vec![
            figure.to_string(),
            value,
            target.to_string(),
            met.map(verdict).unwrap_or("").to_string(),
        ]);
    };
    row(
        "dispatch throughput",
        format!(
            "{:.0} Jobs/s ({} Jobs in {:.2} s)",
            c.jobs_per_second, t.dispatched, t.dispatch_seconds
        ),
        ">= 1000 Jobs/s",
        Some(c.jobs_per_second >= 1000.0),
    );
    row("dispatch latency", lat(&t.dispatch_latency), "", None);
    row(
        "origin submission",
        format!("{:.2} s for {} creates", c.submit_seconds, t.created),
        "",
        None,
    );
    if let Some(f) = &r.floor {
        row(
            "floor (raw client)",
            format!(
                "{:.0} Jobs/s ({:.2} s; latency {})",
                f.jobs_per_second,
                f.dispatch_seconds,
                lat(&f.dispatch_latency)
            ),
            "",
            None,
        );
    }
    if let Some(ratio) = r.courier_over_floor {
        row(
            "Courier / floor (dispatch)",
            format!("{ratio:.2}"),
            "<= 1.25",
            Some(ratio <= 1.25),
        );
    }
    row(
        "machine CPU during dispatch",
        match &r.floor {
            Some(f) => format!(
                "{} (floor {})",
                cpu_split(&c.dispatch_cpu),
                cpu_split(&f.dispatch_cpu)
            ),
            None => cpu_split(&c.dispatch_cpu),
        },
        "",
        None,
    );
    row(
        "status propagation",
        format!(
            "{} ({} never shown)",
            lat(&t.status_latency),
            t.status_unmatched
        ),
        "p99 < 100 ms",
        Some(t.status_latency.p99_ms < 100.0 && t.status_unmatched == 0),
    );
    row(
        "origin writes per Job",
        format!(
            "{:.2} (intent, status copies, finalizer)",
            t.origin_writes_per_job
        ),
        "",
        None,
    );
    row(
        "end to end",
        format!(
            "{:.2} s until {} of {} finished",
            t.end_to_end_seconds, t.finished, t.created
        ),
        "",
        None,
    );
    row(
        "controller CPU",
        format!(
            "{:.2} s per 1000 Jobs ({:.1} s total)",
            c.cost.cpu_seconds_per_1000_jobs, c.cost.cpu_seconds
        ),
        "",
        None,
    );
    row(
        "controller RSS",
        format!(
            "peak {}, before {}, at rest {}",
            mib(c.cost.peak_rss_bytes),
            mib(c.cost.rss_before_bytes),
            mib(c.cost.rss_at_rest_bytes)
        ),
        "",
        None,
    );
    row(
        "RSS per tracked Job",
        format!(
            "{:.0} bytes ({} Jobs)",
            c.cost.rss_per_tracked_job_bytes, cfg.jobs
        ),
        "<= 4096 bytes at 100k",
        (cfg.jobs >= 100_000).then_some(c.cost.rss_per_tracked_job_bytes <= 4096.0),
    );
    if let Some(k) = &r.clusters {
        row(
            "workers Ready",
            format!("{:.2} s for {} workers", k.ready_seconds, k.workers),
            "< 10 s for 100",
            (k.workers >= 100).then_some(k.ready_seconds < 10.0),
        );
        row(
            "idle controller",
            format!(
                "{:.2}% of a core, RSS {}",
                k.idle_cpu_percent,
                mib(k.idle_rss_bytes)
            ),
            "< 1% of a core",
            Some(k.idle_cpu_percent < 1.0),
        );
        row(
            "RSS per kubesim server",
            mib(k.rss_per_kubesim_server_bytes as u64),
            "",
            None,
        );
    }
    let load = cfg
        .load_average_at_start
        .map_or_else(|| "unknown".to_string(), |l| format!("{l:.2}"));
    format!(
        "\ncourier bench: {} Jobs, {} workers, concurrency {}, {} CPUs (load average at start {load}), \
         pods run {} s at speed {}\n\n{}",
        cfg.jobs,
        cfg.workers,
        cfg.concurrency,
        cfg.cpus,
        cfg.run_seconds,
        cfg.speed,
        render_table(&["figure", "value", "target", ""], &rows)
    )
}
