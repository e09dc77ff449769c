//! kubesim's figures: `cargo bench -p kubesim --bench kubesim`. Prints, in one run:
//! - writes/s through the request flow in-process (no HTTP) and over HTTPS on loopback with the server
//!   on ONE thread (its own single-threaded runtime) and clients on another;
//! - watch fan-out: events/s delivered to K watchers while objects are written;
//! - bytes per stored Job (RSS growth / objects);
//! - the field manager's cost per Job write.
//!
//! Sizes: `KUBESIM_BENCH_N` (default 20000 writes).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kubesim::api::{Registry, WriteOpts};
use kubesim::store::{Retention, Store};
use kubesim::{Role, Sim, SimOptions};
use serde_json::{Value, json};

fn n() -> usize {
    std::env::var("KUBESIM_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000)
}

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .map(str::to_string)
        })
        .and_then(|l| {
            l.split_whitespace()
                .nth(1)
                .and_then(|k| k.parse::<u64>().ok())
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

fn job(i: usize) -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": format!("j{i}"), "labels": {"courier.dev/origin": "bench", "courier.dev/epoch": "1"}},
        "spec": {"template": {"metadata": {"annotations": {"sim/run-seconds": "1"}}, "spec": {"restartPolicy": "Never",
            "containers": [{"name": "main", "image": "registry.k8s.io/busybox:1.36", "command": ["sh", "-c", "true"]}]}}}
    })
}

fn in_process(n: usize) {
    let api = kubesim::api::Api::new(
        Arc::new(Store::new(Retention::default())),
        Registry::with_builtins(),
    );
    let ns = api.registry.get("", "v1", "namespaces").unwrap();
    let opts = WriteOpts {
        manager: "bench".into(),
        ..Default::default()
    };
    let mut w = Vec::new();
    let (obj, _) = ns
        .decode_object(
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "b"}}),
            &mut w,
        )
        .unwrap();
    api.create(&ns, "", obj, &opts).unwrap();
    let jobs = api.registry.get("batch", "v1", "jobs").unwrap();
    let cms = api.registry.get("", "v1", "configmaps").unwrap();

    let rss0 = rss_bytes();
    let t = Instant::now();
    for i in 0..n {
        let (obj, _) = jobs.decode_object(job(i), &mut w).unwrap();
        api.create(&jobs, "b", obj, &opts).unwrap();
    }
    let job_rate = n as f64 / t.elapsed().as_secs_f64();
    let per_job = rss_bytes().saturating_sub(rss0) as f64 / n as f64;

    let t = Instant::now();
    for i in 0..n {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("c{i}")}, "data": {"k": "v"}});
        let (obj, _) = cms.decode_object(cm, &mut w).unwrap();
        api.create(&cms, "b", obj, &opts).unwrap();
    }
    let cm_rate = n as f64 / t.elapsed().as_secs_f64();

    // Status writes: the hot path of a worker's Job controller and of Courier's status sync.
    let t = Instant::now();
    for i in 0..n {
        let status = json!({"status": {"startTime": "2026-01-01T00:00:00Z", "active": 1, "ready": 0, "terminating": 0}});
        api.patch(
            &jobs,
            "b",
            &format!("j{i}"),
            kubesim::api::PatchKind::Merge,
            status.to_string().as_bytes(),
            kubesim::api::Part::Status,
            &opts,
        )
        .unwrap();
    }
    let status_rate = n as f64 / t.elapsed().as_secs_f64();

    println!("in-process (one thread, no HTTP)");
    println!("  Job creates/s            {job_rate:>10.0}");
    println!("  ConfigMap creates/s      {cm_rate:>10.0}");
    println!("  Job status patches/s     {status_rate:>10.0}");
    println!("  RSS per stored Job       {per_job:>10.0} bytes");
}

/// Field-manager cost alone, per Job create and per status write.
fn field_manager(n: usize) {
    let t = kubesim::schema::builtin("batch/v1", "Job").unwrap();
    let api = kubesim::api::Api::new(
        Arc::new(Store::new(Retention::default())),
        Registry::with_builtins(),
    );
    let jobs = api.registry.get("batch", "v1", "jobs").unwrap();
    let mut w = Vec::new();
    let (obj, _) = jobs.decode_object(job(0), &mut w).unwrap();
    let now = "2026-01-01T00:00:00Z";
    let m = kubesim::structured::Manager {
        name: "bench",
        api_version: "batch/v1",
        subresource: None,
        now,
    };
    let start = Instant::now();
    for _ in 0..n {
        let mut o = obj.clone();
        kubesim::structured::update_managed_fields(&t, None, &mut o, &m);
    }
    let create = start.elapsed().as_secs_f64() / n as f64;
    let start = Instant::now();
    for _ in 0..n {
        let _ = obj.clone();
    }
    let clone = start.elapsed().as_secs_f64() / n as f64;
    println!("field manager");
    println!(
        "  managedFields per create {:>10.1} µs (one object clone: {:.1} µs)",
        create * 1e6,
        clone * 1e6
    );
}

fn https(n: usize, clients: usize) {
    // The server on its own single-threaded runtime: "writes/s on one core".
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let sim = Sim::start(SimOptions {
                role: Role::ApiServer,
                ..Default::default()
            })
            .await
            .unwrap();
            tx.send((sim.kubeconfig(), sim.url())).unwrap();
            std::future::pending::<()>().await;
        });
    });
    let (kubeconfig, _url) = rx.recv().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let cfg = kube::Config::from_custom_kubeconfig(Kubeconfig::from_yaml(&kubeconfig).unwrap(), &KubeConfigOptions::default())
            .await
            .unwrap();
        let client = kube::Client::try_from(cfg).unwrap();
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");

        // Watch fan-out: K watchers on configmaps.
        let watchers = 8;
        let delivered = Arc::new(AtomicU64::new(0));
        for _ in 0..watchers {
            let cms = cms.clone();
            let delivered = delivered.clone();
            tokio::spawn(async move {
                let Ok(mut s) = cms.watch(&WatchParams::default(), "0").await.map(|s| s.boxed()) else { return };
                while let Some(Ok(e)) = s.next().await {
                    if matches!(e, WatchEvent::Added(_)) {
                        delivered.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
        tokio::time::sleep(Duration::from_millis(300)).await;

        let next = Arc::new(AtomicU64::new(0));
        let t = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..clients {
            let cms = cms.clone();
            let next = next.clone();
            tasks.push(tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                    if i >= n {
                        break;
                    }
                    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": format!("h{i}")}, "data": {"k": "v"}})).unwrap();
                    cms.create(&PostParams::default(), &cm).await.unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let writes = n as f64 / t.elapsed().as_secs_f64();
        let want = (n * watchers) as u64;
        let deadline = Instant::now() + Duration::from_secs(60);
        while delivered.load(Ordering::Relaxed) < want && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let fanout = delivered.load(Ordering::Relaxed) as f64 / t.elapsed().as_secs_f64();
        println!("HTTPS on loopback (server on 1 thread, {clients} concurrent clients on 1 thread, {watchers} watchers)");
        println!("  ConfigMap creates/s      {writes:>10.0}");
        println!("  watch events delivered/s {fanout:>10.0} ({} of {want})", delivered.load(Ordering::Relaxed));
    });
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else to parse.
    let n = n();
    println!("kubesim benchmark, N = {n}");
    in_process(n);
    field_manager(n.min(5_000));
    https(n.min(10_000), 32);
}
