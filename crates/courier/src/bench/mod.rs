//! `courier bench`: Courier's throughput, status lag and cost, measured in one process against
//! in-process kubesim clusters (faults off), next to the floor of the same API calls made by a raw
//! client. See docs/benchmarks.md for what each figure means and what limits it.
//!
//! Phases, each on fresh clusters:
//! 1. floor: the raw client (`floor`) dispatches N Jobs to K workers, timed by the same followers;
//! 2. courier: the controller, as a child process (`courier run`) so its CPU and memory are its
//!    own, dispatches N Jobs to K workers; every Job runs and completes on its worker while the
//!    bench follows the servers' Job tables in process (`commits`) and records when each mirror
//!    status change was committed and when the origin's showing it was;
//! 3. clusters: the controller with `--idle-workers` registered workers and no Jobs: time until all
//!    are Ready, then idle CPU.
//!
//! `--scale` runs phase 2 only, with 100,000 Jobs by default, for the memory per tracked Job.

mod commits;
mod floor;
mod measure;
mod report;

use std::collections::BTreeMap;
use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use clap::Args;
use courier_api::{DEFAULT_NAMESPACE, DEFAULT_ORIGIN_ID, MANAGED_BY, WorkerCluster};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use k8s_openapi::api::batch::v1::Job;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::local::{Local, LocalOptions, WorkerSpec, client_for};
use crate::util::parse_duration;
use measure::{Recorder, Side};
use report::{ClusterFigures, Config, Cost, CourierFigures, FloorFigures, Report};

/// Namespace of the benchmark's Jobs.
const NAMESPACE: &str = "default";
/// Origin creates in flight while submitting (the submitter must outrun the controller).
const SUBMIT_CONCURRENCY: usize = 64;

#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    /// Jobs to dispatch (default 10,000; 100,000 with --scale).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub jobs: Option<u64>,
    /// Worker clusters the Jobs are dispatched to.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub workers: u64,
    /// Idle workers of the cluster-scale phase (0 = skip it).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(0..=1000))]
    pub idle_workers: u64,
    /// Origins the controller reconciles at once (`courier run --concurrency`), and the floor's
    /// Jobs in flight.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..))]
    pub concurrency: u32,
    /// Memory at scale: only the Courier phase, 100,000 Jobs unless --jobs says otherwise.
    #[arg(long)]
    pub scale: bool,
    /// Skip the raw-client floor.
    #[arg(long)]
    pub no_floor: bool,
    /// Simulated-time speed of the kubesim clusters' Job controllers and pods.
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
    /// How long each simulated pod runs (simulated seconds; `sim/run-seconds`).
    #[arg(long, default_value_t = 1.0)]
    pub run_seconds: f64,
    /// How long the idle controller's CPU is sampled in the cluster-scale phase.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub idle_sample: Duration,
    /// Give up on a phase (and exit non-zero) after this long.
    #[arg(long, default_value = "15m", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Print the figures as JSON on stdout (no progress bars, no table).
    #[arg(long)]
    pub json: bool,
}

pub async fn run(a: BenchArgs) -> anyhow::Result<()> {
    if !(a.speed.is_finite() && a.speed > 0.0) {
        bail!("--speed must be a positive number, got {}", a.speed);
    }
    if !(a.run_seconds.is_finite() && a.run_seconds >= 0.0) {
        bail!(
            "--run-seconds must be zero or a positive number, got {}",
            a.run_seconds
        );
    }
    let jobs = a.jobs.unwrap_or(if a.scale { 100_000 } else { 10_000 }) as usize;
    let bars = Bars::new(!a.json && std::io::stderr().is_terminal());
    let work = std::env::temp_dir().join(format!("courier-bench-{}", std::process::id()));
    std::fs::create_dir_all(&work)
        .with_context(|| format!("creating {}", crate::util::display_path(&work)))?;
    let config = Config {
        jobs,
        workers: a.workers as usize,
        idle_workers: a.idle_workers as usize,
        concurrency: a.concurrency,
        speed: a.speed,
        run_seconds: a.run_seconds,
        scale: a.scale,
        cpus: measure::cpus(),
        load_average_at_start: measure::load_average(),
    };
    let result = phases(&a, &config, &bars, &work).await;
    let _ = std::fs::remove_dir_all(&work);
    let report = result?;
    bars.clear();
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).context("serialising the report")?
        );
    } else {
        print!("{}", report::render(&report));
    }
    Ok(())
}

async fn phases(
    a: &BenchArgs,
    config: &Config,
    bars: &Bars,
    work: &Path,
) -> anyhow::Result<Report> {
    let floor = if a.scale || a.no_floor {
        None
    } else {
        Some(floor_phase(a, config, bars).await?)
    };
    let courier = courier_phase(a, config, bars, work).await?;
    let clusters = if a.scale || a.idle_workers == 0 {
        None
    } else {
        Some(cluster_phase(a, bars, work).await?)
    };
    let courier_over_floor = floor
        .as_ref()
        .filter(|f| f.dispatch_seconds > 0.0)
        .map(|f| courier.timelines.dispatch_seconds / f.dispatch_seconds);
    Ok(Report {
        config: config.clone(),
        courier,
        floor,
        courier_over_floor,
        clusters,
    })
}

fn workers(prefix: &str, n: usize) -> Vec<WorkerSpec> {
    (0..n)
        .map(|i| WorkerSpec {
            name: format!("{prefix}-{i:03}"),
            labels: BTreeMap::new(),
        })
        .collect()
}

async fn start_clusters(a: &BenchArgs, workers: Vec<WorkerSpec>) -> anyhow::Result<Local> {
    Local::start(LocalOptions {
        speed: a.speed,
        management_port: 0,
        workers,
        metrics_addr: None,
        ui_addr: None,
        worker_admin: false,
        gc_interval: Duration::from_secs(60),
        in_process_controller: false,
    })
    .await
}

/// Phase 1: the raw client's dispatch.
async fn floor_phase(a: &BenchArgs, config: &Config, bars: &Bars) -> anyhow::Result<FloorFigures> {
    let local = start_clusters(a, workers("floor", config.workers)).await?;
    let result = async {
        let mut worker_clients = Vec::new();
        for (w, sim) in &local.workers {
            worker_clients.push((w.name.clone(), client_for(&sim.kubeconfig()).await?));
        }
        let recorder = Arc::new(Recorder::default());
        let followers = follow_commits(&local, &recorder);
        let stop = CancellationToken::new();
        let floor = tokio::spawn(floor::serve(
            local.client.clone(),
            worker_clients,
            NAMESPACE.into(),
            a.concurrency as usize,
            stop.clone(),
        ));
        // The floor's origin watch lists first; let it be established before the first create,
        // as the controller is in Courier's phase.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let bar = bars.bar("floor: mirrors", config.jobs);
        let ticker = bars.follow(&bar, &recorder, Recorder::mirror_count);
        let deadline = Instant::now() + a.timeout;
        let window = measure::CpuWindow::start(None)?;
        let submitted = submit(&local.client, config, a.run_seconds, &recorder);
        let waited = measure::wait_until(
            "the floor's mirrors",
            deadline,
            || dispatched(&recorder, config.jobs) || floor.is_finished(),
            || format!("{} of {} mirrors", recorder.mirror_count(), config.jobs),
        );
        let (submit_seconds, waited) = tokio::join!(submitted, waited);
        let dispatch_cpu = window.finish(config.jobs)?;
        let submit_seconds = submit_seconds?;
        waited?;
        ticker.abort();
        bar.finish();
        stop.cancel();
        match floor.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(e) => bail!("the floor task failed: {e}"),
        }
        for f in followers {
            f.abort();
        }
        let t = recorder.summarize();
        if t.dispatched < config.jobs {
            bail!(
                "the floor dispatched {} of {} Jobs",
                t.dispatched,
                config.jobs
            );
        }
        Ok(FloorFigures {
            dispatched: t.dispatched,
            submit_seconds,
            dispatch_seconds: t.dispatch_seconds,
            jobs_per_second: per_second(t.dispatched, t.dispatch_seconds),
            dispatch_latency: t.dispatch_latency,
            dispatch_cpu,
        })
    }
    .await;
    local.stop().await?;
    result
}

/// Phase 2: Courier dispatches, every Job runs to completion, and the controller's cost is read.
async fn courier_phase(
    a: &BenchArgs,
    config: &Config,
    bars: &Bars,
    work: &Path,
) -> anyhow::Result<CourierFigures> {
    let local = start_clusters(a, workers("worker", config.workers)).await?;
    let result = async {
        let mut controller = Controller::spawn(&local, work, "courier", a.concurrency)?;
        controller
            .guard(local.wait_ready(Duration::from_secs(60)))
            .await
            .context("waiting for the workers to be Ready")??;
        // Let the controller finish its start-up work (probes, first lists) before measuring.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let rest_before = controller.sample()?;
        let recorder = Arc::new(Recorder::default());
        let followers = follow_commits(&local, &recorder);
        let submitted_bar = bars.bar("courier: origins created", config.jobs);
        let mirrors_bar = bars.bar("courier: mirrors created", config.jobs);
        let finished_bar = bars.bar("courier: origins finished", config.jobs);
        let tickers = [
            bars.follow(&submitted_bar, &recorder, Recorder::submitted_count),
            bars.follow(&mirrors_bar, &recorder, Recorder::mirror_count),
            bars.follow(&finished_bar, &recorder, Recorder::finished_count),
        ];
        let deadline = Instant::now() + a.timeout;
        let progress = || {
            format!(
                "{} created, {} mirrors, {} finished of {}",
                recorder.created_count(),
                recorder.mirror_count(),
                recorder.finished_count(),
                config.jobs
            )
        };
        let window = measure::CpuWindow::start(Some(controller.pid))?;
        let submitted = submit(&local.client, config, a.run_seconds, &recorder);
        let dispatched = controller.guard(measure::wait_until(
            "the mirrors",
            deadline,
            || dispatched(&recorder, config.jobs),
            progress,
        ));
        let (submit_seconds, dispatched) = tokio::join!(submitted, dispatched);
        let dispatch_cpu = window.finish(config.jobs)?;
        let submit_seconds = submit_seconds?;
        dispatched??;
        controller
            .guard(measure::wait_until(
                "every origin to finish",
                deadline,
                || recorder.finished_count() >= config.jobs,
                progress,
            ))
            .await??;
        let busy = controller.sample()?;
        // At rest: nothing left to do but keep the finished origins and their mirrors tracked.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let rest_after = controller.sample()?;
        for t in tickers {
            t.abort();
        }
        submitted_bar.finish();
        mirrors_bar.finish();
        finished_bar.finish();
        for f in followers {
            f.abort();
        }
        controller.stop().await;
        let timelines = recorder.summarize();
        let cpu_seconds = busy.cpu.saturating_sub(rest_before.cpu).as_secs_f64();
        let cost = Cost {
            cpu_seconds,
            cpu_seconds_per_1000_jobs: cpu_seconds * 1000.0 / config.jobs as f64,
            peak_rss_bytes: rest_after.peak_rss_bytes,
            rss_before_bytes: rest_before.rss_bytes,
            rss_at_rest_bytes: rest_after.rss_bytes,
            rss_per_tracked_job_bytes: rest_after.rss_bytes.saturating_sub(rest_before.rss_bytes)
                as f64
                / config.jobs as f64,
        };
        Ok(CourierFigures {
            submit_seconds,
            jobs_per_second: per_second(timelines.dispatched, timelines.dispatch_seconds),
            timelines,
            cost,
            dispatch_cpu,
        })
    }
    .await;
    local.stop().await?;
    result
}

/// Phase 3: many idle workers.
async fn cluster_phase(a: &BenchArgs, bars: &Bars, work: &Path) -> anyhow::Result<ClusterFigures> {
    let n = a.idle_workers as usize;
    let bar = bars.bar("clusters: registered", n);
    let bench_before = measure::sample(None)?;
    let local = start_clusters(a, workers("idle", n)).await?;
    bar.finish();
    let result = async {
        let ready_bar = bars.bar("clusters: Ready", n);
        let started = Instant::now();
        let mut controller = Controller::spawn(&local, work, "idle", a.concurrency)?;
        let wcs: Api<WorkerCluster> = Api::all(local.client.clone());
        let deadline = started + a.timeout;
        loop {
            let ready = controller
                .guard(wcs.list(&ListParams::default()))
                .await?
                .context("listing WorkerClusters")?
                .items
                .iter()
                .filter(|wc| wc.is_ready())
                .count();
            ready_bar.set_position(ready as u64);
            if ready >= n {
                break;
            }
            if Instant::now() >= deadline {
                bail!("{ready} of {n} WorkerClusters Ready after {:?}", a.timeout);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let ready_seconds = started.elapsed().as_secs_f64();
        let bench_ready = measure::sample(None)?;
        ready_bar.finish();
        // Idle: after the first probes and lists, only periodic probes and watch keep-alives.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let before = controller.sample()?;
        let sampled = Instant::now();
        let idle_bar = bars.spinner("clusters: sampling idle CPU");
        controller.guard(tokio::time::sleep(a.idle_sample)).await?;
        idle_bar.finish();
        let after = controller.sample()?;
        let wall = sampled.elapsed().as_secs_f64();
        controller.stop().await;
        Ok(ClusterFigures {
            workers: n,
            ready_seconds,
            idle_cpu_percent: after.cpu.saturating_sub(before.cpu).as_secs_f64() / wall * 100.0,
            idle_rss_bytes: after.rss_bytes,
            rss_per_kubesim_server_bytes: bench_ready
                .rss_bytes
                .saturating_sub(bench_before.rss_bytes)
                as f64
                / n.max(1) as f64,
        })
    }
    .await;
    local.stop().await?;
    result
}

fn per_second(n: usize, seconds: f64) -> f64 {
    if seconds > 0.0 {
        n as f64 / seconds
    } else {
        0.0
    }
}

/// Follows the Job tables of the management server (origins) and of every worker (mirrors) in
/// process: every figure of a run is timed by the servers' commits (see [`commits`]). The bench
/// watches nothing over HTTP, so the instrument costs the servers no watch stream of its own.
fn follow_commits(local: &Local, recorder: &Arc<Recorder>) -> Vec<tokio::task::JoinHandle<()>> {
    std::iter::once((&local.management, Side::Origin))
        .chain(local.workers.iter().map(|(_, sim)| (sim, Side::Mirror)))
        .map(|(sim, side)| {
            commits::follow(sim.api().store.clone(), NAMESPACE, side, recorder.clone())
        })
        .collect()
}

/// Every origin's create and its mirror's are recorded (the followers of different servers
/// need not be equally far along).
fn dispatched(recorder: &Recorder, jobs: usize) -> bool {
    recorder.mirror_count() >= jobs && recorder.created_count() >= jobs
}

/// Creates `config.jobs` origins; returns how long that took.
async fn submit(
    client: &Client,
    config: &Config,
    run_seconds: f64,
    recorder: &Arc<Recorder>,
) -> anyhow::Result<f64> {
    let api: Api<Job> = Api::namespaced(client.clone(), NAMESPACE);
    let template: Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"namespace": NAMESPACE, "labels": {"app": "courier-bench"}},
        "spec": {
            "managedBy": MANAGED_BY,
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": {"sim/run-seconds": run_seconds.to_string()}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox:1.36", "command": ["true"]}]
                }
            }
        }
    }))
    .context("building the benchmark's Job")?;
    let started = Instant::now();
    let pp = PostParams::default();
    let results = measure::run_all(
        (0..config.jobs).map(|i| {
            let mut job = template.clone();
            let name = format!("bench-{i:06}");
            job.metadata.name = Some(name.clone());
            let (api, pp, recorder) = (&api, &pp, recorder);
            async move {
                api.create(pp, &job)
                    .await
                    .with_context(|| format!("creating origin {name}"))?;
                recorder.submitted();
                anyhow::Ok(())
            }
        }),
        SUBMIT_CONCURRENCY,
    )
    .await;
    results.into_iter().collect::<anyhow::Result<Vec<()>>>()?;
    Ok(started.elapsed().as_secs_f64())
}

/// The controller as a child process (`courier run` of this executable), so /proc shows its CPU
/// and memory apart from the clusters' in this process.
struct Controller {
    child: tokio::process::Child,
    pid: u32,
    log: PathBuf,
}

impl Controller {
    fn spawn(local: &Local, work: &Path, name: &str, concurrency: u32) -> anyhow::Result<Self> {
        let kubeconfig = work.join(format!("{name}-management.kubeconfig"));
        local
            .management
            .write_kubeconfig(&kubeconfig)
            .context("writing the management kubeconfig")?;
        let log = work.join(format!("{name}-controller.log"));
        let log_file = std::fs::File::create(&log)
            .with_context(|| format!("creating {}", crate::util::display_path(&log)))?;
        let exe = std::env::current_exe().context("locating the courier executable")?;
        let mut cmd = tokio::process::Command::new(exe);
        // The user's COURIER_* settings (origin id, leader election, ...) would change what is
        // measured; the flags below are the whole configuration.
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("COURIER_") {
                cmd.env_remove(key);
            }
        }
        let child = cmd
            .arg("run")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["--metrics-addr", "off", "--log", "warn"])
            .args([
                "--origin",
                DEFAULT_ORIGIN_ID,
                "--namespace",
                DEFAULT_NAMESPACE,
            ])
            .args(["--concurrency", &concurrency.to_string()])
            .args(["--gc-interval", "1m"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file)
            .kill_on_drop(true)
            .spawn()
            .context("starting `courier run`")?;
        let pid = child
            .id()
            .ok_or_else(|| anyhow!("`courier run` exited at once"))?;
        Ok(Self { child, pid, log })
    }

    fn sample(&self) -> anyhow::Result<measure::ProcSample> {
        measure::sample(Some(self.pid))
    }

    /// Runs `f`, failing early if the controller exits meanwhile.
    async fn guard<T>(&mut self, f: impl std::future::Future<Output = T>) -> anyhow::Result<T> {
        tokio::select! {
            r = f => Ok(r),
            status = self.child.wait() => {
                let tail = std::fs::read_to_string(&self.log).unwrap_or_default();
                let tail: Vec<&str> = tail.lines().rev().take(20).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                bail!(
                    "the controller exited ({}); its last log lines:\n{}",
                    status.map_or_else(|e| e.to_string(), |s| s.to_string()),
                    tail.join("\n")
                )
            }
        }
    }

    async fn stop(mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }
}

/// Progress bars on stderr (hidden for --json or when stderr is not a terminal).
struct Bars {
    multi: MultiProgress,
}

impl Bars {
    fn new(visible: bool) -> Self {
        let target = if visible {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        Self {
            multi: MultiProgress::with_draw_target(target),
        }
    }

    fn bar(&self, label: &str, len: usize) -> ProgressBar {
        let bar = self.multi.add(ProgressBar::new(len as u64));
        if let Ok(style) = ProgressStyle::with_template(
            "{prefix:>28} [{bar:40}] {pos:>7}/{len:7} {per_sec:>12} {elapsed:>4}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(label.to_string());
        bar
    }

    fn spinner(&self, label: &str) -> ProgressBar {
        let bar = self.multi.add(ProgressBar::new_spinner());
        bar.set_message(label.to_string());
        bar.enable_steady_tick(Duration::from_millis(200));
        bar
    }

    /// Keeps `bar` at `count(recorder)`, ten times a second.
    fn follow(
        &self,
        bar: &ProgressBar,
        recorder: &Arc<Recorder>,
        count: fn(&Recorder) -> usize,
    ) -> tokio::task::JoinHandle<()> {
        let (bar, recorder) = (bar.clone(), recorder.clone());
        tokio::spawn(async move {
            loop {
                bar.set_position(count(&recorder) as u64);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    }

    fn clear(&self) {
        let _ = self.multi.clear();
    }
}
