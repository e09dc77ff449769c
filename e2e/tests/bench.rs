//! `courier bench` end to end, small: the figures come out with the right shape and sane values.
//! Nothing here is timed (the figures depend on the machine); see docs/benchmarks.md.

use std::path::Path;

use anyhow::{Context as _, anyhow, ensure};
use courier_e2e::courier;
use serde_json::Value;

fn number(v: &Value, path: &str) -> anyhow::Result<f64> {
    v.pointer(path)
        .and_then(Value::as_f64)
        .ok_or_else(|| anyhow!("{path} is not a number in {v:#}"))
}

fn check_percentiles(v: &Value, path: &str, count: f64) -> anyhow::Result<()> {
    let p50 = number(v, &format!("{path}/p50_ms"))?;
    let p99 = number(v, &format!("{path}/p99_ms"))?;
    let max = number(v, &format!("{path}/max_ms"))?;
    ensure!(
        0.0 <= p50 && p50 <= p99 && p99 <= max,
        "{path}: p50 {p50} p99 {p99} max {max}"
    );
    ensure!(
        number(v, &format!("{path}/count"))? >= count,
        "{path}: fewer than {count} samples"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_reports_every_figure() -> anyhow::Result<()> {
    let out = courier(
        Path::new("/nonexistent"),
        &[
            "bench",
            "--jobs",
            "20",
            "--workers",
            "2",
            "--idle-workers",
            "3",
            "--idle-sample",
            "1s",
            "--speed",
            "4",
            "--json",
        ],
    )
    .await?
    .ok()?;
    let r: Value = serde_json::from_str(&out.stdout)
        .with_context(|| format!("not JSON:\n{}\nstderr: {}", out.stdout, out.stderr))?;
    for (path, want) in [
        ("/courier/created", 20.0),
        ("/courier/dispatched", 20.0),
        ("/courier/finished", 20.0),
        ("/floor/dispatched", 20.0),
        ("/clusters/workers", 3.0),
        ("/config/workers", 2.0),
    ] {
        ensure!(number(&r, path)? == want, "{path} != {want} in {r:#}");
    }
    check_percentiles(&r, "/courier/dispatch_latency", 20.0)?;
    check_percentiles(&r, "/floor/dispatch_latency", 20.0)?;
    // Every Job starts and completes: at least two status changes each reach the origin, timed
    // by the servers' commits.
    check_percentiles(&r, "/courier/status_latency", 40.0)?;
    ensure!(
        number(&r, "/courier/status_unmatched")? == 0.0,
        "status_unmatched in {r:#}"
    );
    // At least the intent and one status write per origin.
    let writes = number(&r, "/courier/origin_writes_per_job")?;
    ensure!(writes >= 2.0, "origin_writes_per_job {writes} in {r:#}");
    for path in [
        "/courier/jobs_per_second",
        "/floor/jobs_per_second",
        "/courier_over_floor",
        "/courier/end_to_end_seconds",
        "/courier/cost/peak_rss_bytes",
        "/courier/cost/rss_at_rest_bytes",
        "/clusters/ready_seconds",
    ] {
        ensure!(number(&r, path)? > 0.0, "{path} is not positive in {r:#}");
    }
    ensure!(
        number(&r, "/courier/end_to_end_seconds")? >= number(&r, "/courier/dispatch_seconds")?,
        "{r:#}"
    );
    // These three are differences taken with saturating subtraction, so ">= 0" could never fail;
    // check what they must be instead. Dispatching and following 20 Jobs costs CPU time.
    let cpu = number(&r, "/courier/cost/cpu_seconds")?;
    ensure!(
        cpu > 0.0,
        "cpu_seconds {cpu}: no CPU time measured in {r:#}"
    );
    let per_1000 = number(&r, "/courier/cost/cpu_seconds_per_1000_jobs")?;
    ensure!(
        (per_1000 - cpu * 1000.0 / 20.0).abs() < 1e-6,
        "cpu_seconds_per_1000_jobs {per_1000} is not cpu_seconds {cpu} per 1000 of 20 Jobs"
    );
    // What the tracked Jobs added at rest cannot exceed the process's peak.
    let per_job = number(&r, "/courier/cost/rss_per_tracked_job_bytes")?;
    let peak = number(&r, "/courier/cost/peak_rss_bytes")?;
    ensure!(
        per_job * 20.0 <= peak,
        "rss_per_tracked_job_bytes {per_job} x 20 Jobs exceeds the peak RSS {peak}"
    );
    // A percentage of one core, measured on this machine: at most all of its cores.
    let cores = std::thread::available_parallelism().map_or(1, usize::from) as f64;
    // The machine's CPU during each phase's dispatch: the controller's counts in Courier's phase
    // only, and the figures agree with each other.
    for (phase, controller_runs) in [("courier", true), ("floor", false)] {
        let at = |field: &str| number(&r, &format!("/{phase}/dispatch_cpu/{field}"));
        let (wall, bench, controller) = (
            at("wall_seconds")?,
            at("bench_process_seconds")?,
            at("controller_seconds")?,
        );
        ensure!(wall > 0.0 && bench > 0.0, "{phase} dispatch_cpu in {r:#}");
        ensure!(
            (controller > 0.0) == controller_runs,
            "{phase}: controller_seconds {controller} in {r:#}"
        );
        let ms = at("ms_per_job")?;
        ensure!(
            (ms - (bench + controller) * 1000.0 / 20.0).abs() < 1e-6,
            "{phase}: ms_per_job {ms} is not the CPU per Job of 20 in {r:#}"
        );
        // At most what the cores can give, give or take the kernel's 10 ms accounting ticks per thread.
        let busy = at("cores_busy")?;
        ensure!(
            (busy - (bench + controller) / wall).abs() < 1e-6 && busy <= cores + 0.1 / wall,
            "{phase}: cores_busy {busy} on {cores} cores in {r:#}"
        );
    }
    let idle = number(&r, "/clusters/idle_cpu_percent")?;
    ensure!(
        idle.is_finite() && idle <= 100.0 * cores,
        "idle_cpu_percent {idle} on {cores} cores"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_rejects_bad_flags() -> anyhow::Result<()> {
    for args in [
        &["bench", "--jobs", "0"][..],
        &["bench", "--speed", "0"],
        &["bench", "--workers", "0"],
    ] {
        let out = courier(Path::new("/nonexistent"), args).await?;
        ensure!(!out.success, "courier {args:?} succeeded");
        ensure!(
            out.stderr.contains("jobs")
                || out.stderr.contains("speed")
                || out.stderr.contains("workers"),
            "courier {args:?}: {}",
            out.stderr
        );
    }
    Ok(())
}
