//! `courier sandbox`: a management and two worker kubesim clusters plus the controller in this
//! process, with kubeconfigs on disk for kubectl and courier, until Ctrl-C. The controller's web
//! view is on (loopback). Once everything is up, `sandbox.json` in the directory names every URL —
//! the web view, each cluster's API server and kubeconfig, each worker's kubesim admin endpoint
//! (faults) — for scripts and tests.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;
use tokio_util::sync::CancellationToken;

use crate::local::{Local, LocalOptions};

#[derive(Args, Debug)]
pub struct SandboxArgs {
    /// Directory for the kubeconfigs (created if missing).
    #[arg(long, default_value = "courier-sandbox")]
    pub dir: PathBuf,
    /// Simulated-time speed of the kubesim clusters (1 = real time).
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
    /// Port of the management cluster's API server (0 = any free port).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Serve the controller's /metrics, /healthz and /readyz here (default: not served).
    #[arg(long)]
    pub metrics_addr: Option<SocketAddr>,
    /// Serve the web view here (default: a free port on 127.0.0.1).
    #[arg(long)]
    pub ui_addr: Option<SocketAddr>,
}

/// A free port on 127.0.0.1 for the web view (taken again by the controller a moment later).
fn free_loopback_addr() -> anyhow::Result<SocketAddr> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    l.local_addr().context("finding a free port")
}

/// Writes `path` whole or not at all (a reader polling for it never sees half a file).
fn write_atomically(path: &std::path::Path, text: &str) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))
}

pub async fn run(a: SandboxArgs) -> anyhow::Result<()> {
    if !(a.speed.is_finite() && a.speed > 0.0) {
        anyhow::bail!("--speed must be a positive number, got {}", a.speed);
    }
    std::fs::create_dir_all(&a.dir)
        .with_context(|| format!("creating the sandbox directory {}", a.dir.display()))?;
    let dir = std::path::absolute(&a.dir).unwrap_or_else(|_| a.dir.clone());
    let info_path = dir.join("sandbox.json");
    // A previous run's file must not be mistaken for this one's.
    let _ = std::fs::remove_file(&info_path);
    let ui_addr = match a.ui_addr {
        Some(addr) => addr,
        None => free_loopback_addr()?,
    };
    let mut opts = LocalOptions::two_workers(a.speed);
    opts.management_port = a.port;
    opts.metrics_addr = a.metrics_addr;
    opts.ui_addr = Some(ui_addr);
    opts.worker_admin = true;
    let local = Local::start(opts).await?;
    let ui_url = format!("http://{ui_addr}/");
    let mgmt_path = dir.join("management.kubeconfig");
    local
        .management
        .write_kubeconfig(&mgmt_path)
        .with_context(|| format!("writing {}", mgmt_path.display()))?;
    let mut lines = Vec::new();
    let mut workers_info = Vec::new();
    for (w, sim) in &local.workers {
        let path = dir.join(format!("{}.kubeconfig", w.name));
        sim.write_kubeconfig(&path)
            .with_context(|| format!("writing {}", path.display()))?;
        let labels: Vec<String> = w.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        lines.push(format!(
            "  {:<11} {}   {}   labels {}",
            w.name,
            sim.url(),
            path.display(),
            labels.join(",")
        ));
        let admin = sim.admin_addr.map(|a| format!("http://{a}"));
        workers_info.push(serde_json::json!({
            "name": w.name, "url": sim.url(), "kubeconfig": path, "admin": admin,
        }));
    }
    let m = mgmt_path.display();
    println!(
        "Courier sandbox is running (kubesim clusters at {}x speed). Ctrl-C stops it.\n",
        a.speed
    );
    println!("  {:<11} {}   {m}", "management", local.management.url());
    for l in &lines {
        println!("{l}");
    }
    if let Some(addr) = a.metrics_addr {
        println!("  metrics     http://{addr}/metrics");
    }
    println!("  web view    {ui_url}");
    let w1 = dir.join("worker-1.kubeconfig");
    println!(
        "\nIn another shell:\n\
         \x20 export KUBECONFIG={m}\n\
         \x20 courier submit -f examples/hello.yaml   # any Job; spec.managedBy is set for you\n\
         \x20 courier jobs                            # where each Job runs and how it is doing\n\
         \x20 courier describe job hello              # placement, conditions, events of both sides\n\
         \x20 courier logs hello                      # its pods' logs, from the worker\n\
         \x20 courier cluster list                    # the two workers, Ready\n\
         \x20 courier cluster pause worker-1          # new Jobs go to worker-2 only\n\
         \x20 kubectl get jobs -A                     # the origin Jobs (kubesim speaks JSON to kubectl)\n\
         \x20 kubectl --kubeconfig {} get jobs -A   # the mirrors on worker-1\n\
         \nThe kubeconfigs change on every start (new ports and certificates); {} names every URL,\n\
         including each worker's kubesim admin endpoint (PUT /faults '{{\"refuse\":true}}' takes it offline).",
        w1.display(),
        info_path.display()
    );
    let info = serde_json::json!({
        "ui": ui_url,
        "management": {"url": local.management.url(), "kubeconfig": mgmt_path},
        "workers": workers_info,
    });
    write_atomically(&info_path, &format!("{info:#}\n"))?;
    let stop = CancellationToken::new();
    tokio::spawn(crate::run::shutdown_on_signal(stop.clone()));
    let controller_ended = async {
        while !local.controller_finished() {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    };
    tokio::select! {
        _ = stop.cancelled() => println!("\nStopping the sandbox..."),
        _ = controller_ended => eprintln!("the controller stopped unexpectedly"),
    }
    local.stop().await
}
