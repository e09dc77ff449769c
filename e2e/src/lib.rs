//! The end-to-end harness: the real `kubesim` and `courier` binaries as separate processes (a
//! management and worker clusters, the controller), driven by kube clients.
//!
//! - [`bin`]: where the binaries are (next to the test executable in the cargo target dir).
//! - [`Proc`]: a child process with its log file; `kill9`, `terminate`, killed on drop.
//! - [`Kubesim`]: one `kubesim serve` process, its URL, kubeconfig and admin endpoint (fault knobs).
//! - [`Env`]: management + workers (registered with `courier cluster add`) + `courier run`.
//! - [`wait_for`]: polling with a timeout that reports the last state seen.
//! - [`job`]: Job manifests with kubesim's `sim/*` pod behaviour annotations.
//! - [`runs`]: "run once" over a whole run, from every worker's pod-start and create logs.

use std::collections::BTreeMap;
use std::future::Future;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail, ensure};
use courier_api::{
    ANNOTATION_EPOCH, LABEL_CLUSTER, LABEL_EPOCH, LABEL_ORIGIN, LABEL_ORIGIN_UID, MANAGED_BY,
};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub mod runs;
pub use runs::{Ledger, check_each_ran_once};

/// The origin id the e2e controller runs with.
pub const ORIGIN: &str = "courier";

/// Path of a workspace binary (`courier`, `kubesim`): `$COURIER_E2E_BIN_DIR`, else the cargo target
/// dir of this test executable (`target/debug/deps/<test>` -> `target/debug/<name>`).
pub fn bin(name: &str) -> anyhow::Result<PathBuf> {
    let dir = match std::env::var_os("COURIER_E2E_BIN_DIR") {
        Some(d) => PathBuf::from(d),
        None => {
            let exe = std::env::current_exe().context("locating the test executable")?;
            let deps = exe
                .parent()
                .ok_or_else(|| anyhow!("test executable has no parent directory"))?;
            if deps.file_name().is_some_and(|n| n == "deps") {
                deps.parent().unwrap_or(deps).to_path_buf()
            } else {
                deps.to_path_buf()
            }
        }
    };
    let path = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    if !path.is_file() {
        bail!(
            "{} not found: the e2e tests run the real binaries. Build them first with `cargo build \
             -p courier -p kubesim` (`cargo test --workspace` does it), or set COURIER_E2E_BIN_DIR",
            path.display()
        );
    }
    Ok(path)
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A fresh directory for one test's kubeconfigs and logs (kept when the test fails).
pub fn work_dir(test: &str) -> anyhow::Result<PathBuf> {
    let base = std::env::var_os("COURIER_E2E_WORK_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("courier-e2e"));
    let dir = base.join(format!(
        "{test}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// A child process whose stderr (and stdout, unless taken) goes to a log file. Killed on drop.
pub struct Proc {
    pub name: String,
    pub log: PathBuf,
    child: Option<Child>,
}

impl Proc {
    /// Spawns `cmd` with stderr appended to `log`. When `pipe_stdout` is false stdout goes there too.
    pub fn spawn(
        name: &str,
        mut cmd: Command,
        log: &Path,
        pipe_stdout: bool,
    ) -> anyhow::Result<Proc> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("opening {}", log.display()))?;
        let err = file.try_clone().context("cloning a log file handle")?;
        cmd.stdin(Stdio::null()).stderr(Stdio::from(err));
        if pipe_stdout {
            cmd.stdout(Stdio::piped());
        } else {
            cmd.stdout(Stdio::from(file));
        }
        cmd.env_remove("KUBECONFIG");
        let child = cmd.spawn().with_context(|| format!("starting {name}"))?;
        Ok(Proc {
            name: name.to_string(),
            log: log.to_path_buf(),
            child: Some(child),
        })
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn take_stdout(&mut self) -> Option<std::process::ChildStdout> {
        self.child.as_mut().and_then(|c| c.stdout.take())
    }

    /// `kill -9`, then reaps the process.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM, then waits up to `grace` for the process to exit (SIGKILL after that). Returns the
    /// exit status when it exited by itself.
    pub fn terminate(&mut self, grace: Duration) -> Option<std::process::ExitStatus> {
        let mut c = self.child.take()?;
        let pid = libc::pid_t::try_from(c.id()).ok()?;
        // SAFETY: sending a signal to our own child; no memory is involved.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
        let deadline = Instant::now() + grace;
        loop {
            if let Ok(Some(status)) = c.try_wait() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                let _ = c.kill();
                let _ = c.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// The last `n` lines of the log.
    pub fn log_tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// One `kubesim serve` process.
pub struct Kubesim {
    pub name: String,
    pub url: String,
    pub admin_url: String,
    pub kubeconfig: PathBuf,
    pub proc: Proc,
}

impl Kubesim {
    /// Starts `kubesim serve` on ephemeral ports and waits for its "kubesim serving" line.
    pub fn start(dir: &Path, name: &str, role: &str, speed: f64) -> anyhow::Result<Kubesim> {
        let kubeconfig = dir.join(format!("{name}.kubeconfig"));
        let mut cmd = Command::new(bin("kubesim")?);
        cmd.args(["serve", "--port", "0", "--admin-port", "0", "--role", role])
            .arg("--name")
            .arg(name)
            .arg("--speed")
            .arg(speed.to_string())
            .arg("--kubeconfig-out")
            .arg(&kubeconfig);
        let mut proc = Proc::spawn(
            &format!("kubesim {name}"),
            cmd,
            &dir.join(format!("{name}.log")),
            true,
        )?;
        let stdout = proc
            .take_stdout()
            .ok_or_else(|| anyhow!("kubesim {name}: no stdout"))?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            if let Some(Ok(first)) = lines.next() {
                let _ = tx.send(first);
            }
            // Keep draining so the pipe never fills.
            for _ in lines {}
        });
        let line = rx.recv_timeout(Duration::from_secs(20)).map_err(|_| {
            anyhow!(
                "kubesim {name} printed no \"kubesim serving\" line within 20s; its log:\n{}",
                proc.log_tail(20)
            )
        })?;
        let (url, admin_url) = parse_serving_line(&line)
            .ok_or_else(|| anyhow!("kubesim {name}: unexpected first line {line:?}"))?;
        Ok(Kubesim {
            name: name.to_string(),
            url,
            admin_url,
            kubeconfig,
            proc,
        })
    }

    /// A client with the admin token.
    pub async fn client(&self) -> anyhow::Result<Client> {
        client_from_file(&self.kubeconfig).await
    }

    /// A request to the admin endpoint (`PUT /faults`, `POST /restart`, ...); returns the JSON answer.
    pub async fn admin(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<Value> {
        admin_request(&self.admin_url, method, path, body).await
    }

    /// Sets faults (`{"blackhole": true}`, `{"errorRate": 0.3}`, ...).
    pub async fn set_faults(&self, faults: Value) -> anyhow::Result<()> {
        self.admin("PUT", "/faults", Some(faults)).await.map(|_| ())
    }

    pub async fn clear_faults(&self) -> anyhow::Result<()> {
        self.admin("POST", "/faults/clear", None).await.map(|_| ())
    }

    /// Adds a token with RBAC-like rules (`{"allow": [...], "deny": [...]}`).
    pub async fn add_token(
        &self,
        token: &str,
        user: &str,
        rules: Option<Value>,
    ) -> anyhow::Result<()> {
        let mut body = json!({"token": token, "user": user});
        if let Some(r) = rules {
            body["rules"] = r;
        }
        self.admin("POST", "/tokens", Some(body)).await.map(|_| ())
    }

    /// This instance's kubeconfig with another token.
    pub fn kubeconfig_with_token(&self, token: &str) -> anyhow::Result<String> {
        let text = std::fs::read_to_string(&self.kubeconfig)
            .with_context(|| format!("reading {}", self.kubeconfig.display()))?;
        let mut v: Value = serde_saphyr::from_str(&text).map_err(|e| anyhow!("{e}"))?;
        v["users"][0]["user"]["token"] = json!(token);
        Ok(serde_json::to_string(&v)?)
    }
}

fn parse_serving_line(line: &str) -> Option<(String, String)> {
    let rest = line.strip_prefix("kubesim serving ")?;
    let (url, admin) = rest.split_once(" (admin ")?;
    Some((url.to_string(), admin.trim_end_matches(')').to_string()))
}

/// A minimal HTTP/1.1 request to kubesim's plain-HTTP admin endpoint.
pub async fn admin_request(
    base: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> anyhow::Result<Value> {
    let host = base
        .strip_prefix("http://")
        .ok_or_else(|| anyhow!("admin URL {base} is not http://"))?;
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let mut stream = tokio::net::TcpStream::connect(host)
        .await
        .with_context(|| format!("connecting to the admin endpoint {base}"))?;
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(req.as_bytes()).await?;
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut buf))
        .await
        .map_err(|_| anyhow!("admin endpoint {base} did not answer {method} {path}"))??;
    let text = String::from_utf8_lossy(&buf);
    let (head, payload) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow!("malformed admin answer: {text}"))?;
    let status = head.split_whitespace().nth(1).unwrap_or("");
    if !status.starts_with('2') {
        bail!("admin {method} {path} answered {status}: {payload}");
    }
    if payload.trim().is_empty() {
        return Ok(Value::Null);
    }
    Ok(serde_json::from_str(payload).unwrap_or(Value::String(payload.to_string())))
}

pub async fn client_from_file(path: &Path) -> anyhow::Result<Client> {
    let kc = Kubeconfig::read_from(path).with_context(|| format!("reading {}", path.display()))?;
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
    Ok(Client::try_from(config)?)
}

/// Polls `f` every 100 ms until it returns `Ok`, or fails after `timeout` with `what` and the last
/// state `f` reported (`Err(state)`).
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let start = Instant::now();
    let mut last;
    loop {
        match f().await {
            Ok(v) => return Ok(v),
            Err(state) => last = state,
        }
        if start.elapsed() >= timeout {
            bail!(
                "timed out after {:.0?} waiting for {what}; last seen: {last}",
                timeout
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The output of a `courier` CLI run.
#[derive(Debug)]
pub struct CliOutput {
    pub success: bool,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl CliOutput {
    /// Fails unless the command succeeded.
    pub fn ok(self) -> anyhow::Result<CliOutput> {
        if !self.success {
            bail!(
                "courier failed ({:?}):\nstdout: {}\nstderr: {}",
                self.code,
                self.stdout,
                self.stderr
            );
        }
        Ok(self)
    }

    /// Fails unless the command failed with an error mentioning every one of `needles`.
    pub fn fails_with(self, needles: &[&str]) -> anyhow::Result<CliOutput> {
        if self.success {
            bail!(
                "courier succeeded but should have failed mentioning {needles:?}:\nstdout: {}\nstderr: {}",
                self.stdout,
                self.stderr
            );
        }
        for n in needles {
            if !self.stderr.contains(n) {
                bail!(
                    "courier's error does not mention {n:?}:\nstderr: {}",
                    self.stderr
                );
            }
        }
        Ok(self)
    }
}

/// Runs `courier ARGS` with the management kubeconfig in `COURIER_MANAGEMENT_KUBECONFIG`.
pub async fn courier(mgmt_kubeconfig: &Path, args: &[&str]) -> anyhow::Result<CliOutput> {
    courier_env(mgmt_kubeconfig, args, &[]).await
}

pub async fn courier_env(
    mgmt_kubeconfig: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> anyhow::Result<CliOutput> {
    let mut cmd = tokio::process::Command::new(bin("courier")?);
    cmd.args(args)
        .env_remove("KUBECONFIG")
        .env("COURIER_MANAGEMENT_KUBECONFIG", mgmt_kubeconfig)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .map_err(|_| anyhow!("courier {args:?} did not finish within 120s"))?
        .with_context(|| format!("running courier {args:?}"))?;
    Ok(CliOutput {
        success: out.status.success(),
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// How to set up an [`Env`].
#[derive(Debug, Clone)]
pub struct EnvOptions {
    pub workers: usize,
    /// kubesim `--speed` of every cluster.
    pub speed: f64,
    /// Labels of worker `i` (default: w1 region=eu, w2 region=us, others none).
    pub labels: Vec<BTreeMap<String, String>>,
    /// Extra `courier run` flags.
    pub controller_args: Vec<String>,
    pub start_controller: bool,
    pub register_workers: bool,
    /// Run alone: no other Env of this test binary exists meanwhile (timing measurements, heavy
    /// load). Other tests of the binary wait for it, and it waits for them.
    pub exclusive: bool,
    /// The controller's log filter (`COURIER_LOG`) for this Env; default `$COURIER_E2E_LOG` or
    /// `info`. Tests that check what the log must never contain set `trace`.
    pub log_filter: Option<String>,
}

impl Default for EnvOptions {
    fn default() -> Self {
        let l = |r: &str| BTreeMap::from([("region".to_string(), r.to_string())]);
        Self {
            workers: 2,
            speed: 10.0,
            labels: vec![l("eu"), l("us")],
            controller_args: Vec::new(),
            start_controller: true,
            register_workers: true,
            exclusive: false,
            log_filter: None,
        }
    }
}

/// A management cluster, workers and the controller, each its own process.
pub struct Env {
    pub dir: PathBuf,
    pub mgmt: Kubesim,
    pub workers: Vec<Kubesim>,
    pub controller: Option<Proc>,
    pub mgmt_client: Client,
    pub worker_clients: Vec<Client>,
    pub metrics_port: u16,
    controller_args: Vec<String>,
    log_filter: String,
    controller_starts: u32,
    keep: bool,
    _turn: Turn,
}

/// An Env's share of the test binary: shared, or exclusive (see [`EnvOptions::exclusive`]).
enum Turn {
    Shared(#[allow(dead_code)] tokio::sync::OwnedRwLockReadGuard<()>),
    Exclusive(#[allow(dead_code)] tokio::sync::OwnedRwLockWriteGuard<()>),
}

static TURNS: std::sync::LazyLock<std::sync::Arc<tokio::sync::RwLock<()>>> =
    std::sync::LazyLock::new(|| std::sync::Arc::new(tokio::sync::RwLock::new(())));

async fn take_turn(exclusive: bool) -> Turn {
    let lock = TURNS.clone();
    if exclusive {
        Turn::Exclusive(lock.write_owned().await)
    } else {
        Turn::Shared(lock.read_owned().await)
    }
}

/// `$COURIER_E2E_LOG`, else `info`.
fn default_log_filter() -> String {
    std::env::var("COURIER_E2E_LOG").unwrap_or_else(|_| "info".into())
}

/// `courier run` flags for the leader-election tests: a lease short enough that a failover fits in a
/// test.
pub const FAST_LEASE: &[&str] = &[
    "--leader-elect-lease-duration",
    "3s",
    "--leader-elect-renew-deadline",
    "2s",
    "--leader-elect-retry-period",
    "300ms",
];

/// A recorded request (kubesim's request recorder) that writes, other than the leader election's own
/// Lease traffic.
pub fn is_write(r: &Value) -> bool {
    matches!(
        r["verb"].as_str(),
        Some("create" | "update" | "patch" | "delete" | "deletecollection")
    ) && r["resource"] != "leases"
}

/// A free TCP port on 127.0.0.1 (bound and released).
pub fn free_port() -> anyhow::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

impl Env {
    pub async fn start(test: &str, opts: EnvOptions) -> anyhow::Result<Env> {
        let turn = take_turn(opts.exclusive).await;
        let dir = work_dir(test)?;
        let mgmt = Kubesim::start(&dir, "management", "management", opts.speed)?;
        let mut workers = Vec::new();
        for i in 0..opts.workers {
            workers.push(Kubesim::start(
                &dir,
                &format!("w{}", i + 1),
                "worker",
                opts.speed,
            )?);
        }
        let mgmt_client = mgmt.client().await?;
        let mut worker_clients = Vec::new();
        for w in &workers {
            worker_clients.push(w.client().await?);
        }
        let mut env = Env {
            dir,
            mgmt,
            workers,
            controller: None,
            mgmt_client,
            worker_clients,
            metrics_port: free_port()?,
            controller_args: opts.controller_args.clone(),
            log_filter: opts.log_filter.clone().unwrap_or_else(default_log_filter),
            controller_starts: 0,
            keep: true,
            _turn: turn,
        };
        env.install_crd().await?;
        env.create_namespace("courier-system").await?;
        if opts.register_workers {
            for i in 0..env.workers.len() {
                let labels = opts.labels.get(i).cloned().unwrap_or_default();
                env.register_worker(i, &labels).await?;
            }
        }
        if opts.start_controller {
            env.start_controller()?;
            if opts.register_workers {
                for i in 0..env.workers.len() {
                    let name = env.workers[i].name.clone();
                    env.wait_cluster_ready(&name, Duration::from_secs(30))
                        .await?;
                }
            }
        }
        Ok(env)
    }

    /// Installs the CRD `courier crds` prints and waits until it is Established.
    pub async fn install_crd(&self) -> anyhow::Result<()> {
        let out = self.courier(&["crds"]).await?.ok()?;
        let crd: CustomResourceDefinition =
            serde_saphyr::from_str(&out.stdout).map_err(|e| anyhow!("courier crds output: {e}"))?;
        let api: Api<CustomResourceDefinition> = Api::all(self.mgmt_client.clone());
        api.create(&PostParams::default(), &crd).await?;
        let name = crd.metadata.name.clone().unwrap_or_default();
        wait_for("the CRD to be Established", Duration::from_secs(20), || {
            let api = api.clone();
            let name = name.clone();
            async move {
                let c = api.get(&name).await.map_err(|e| e.to_string())?;
                let ok = c.status.and_then(|s| s.conditions).is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c.type_ == "Established" && c.status == "True")
                });
                if ok {
                    Ok(())
                } else {
                    Err("not Established".into())
                }
            }
        })
        .await
    }

    /// Creates namespace `name` in the management cluster and on every worker (Courier does not
    /// create namespaces on workers: their administrators do, as the worker chart's release does
    /// for `courier-system`). An existing one is fine.
    /// The holder of the controllers' leader Lease in courier-system (an error when none holds it).
    pub async fn lease_holder(&self) -> Result<String, String> {
        let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
            Api::namespaced(self.mgmt_client.clone(), "courier-system");
        let l = leases
            .get_opt("courier-leader")
            .await
            .map_err(|e| e.to_string())?;
        l.and_then(|l| l.spec?.holder_identity)
            .filter(|h| !h.is_empty())
            .ok_or_else(|| "no holder".to_string())
    }

    pub async fn create_namespace(&self, name: &str) -> anyhow::Result<()> {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
        for client in std::iter::once(&self.mgmt_client).chain(&self.worker_clients) {
            let api: Api<Namespace> = Api::all(client.clone());
            match api.create(&PostParams::default(), &ns).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// `courier cluster add wN --cluster-kubeconfig ... --label k=v`.
    pub async fn register_worker(
        &self,
        i: usize,
        labels: &BTreeMap<String, String>,
    ) -> anyhow::Result<CliOutput> {
        let w = &self.workers[i];
        let kc = w.kubeconfig.display().to_string();
        let mut args: Vec<String> = vec![
            "cluster".into(),
            "add".into(),
            w.name.clone(),
            "--cluster-kubeconfig".into(),
            kc,
        ];
        for (k, v) in labels {
            args.push("--label".into());
            args.push(format!("{k}={v}"));
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        self.courier(&refs).await?.ok()
    }

    /// Runs the courier CLI against this management cluster.
    pub async fn courier(&self, args: &[&str]) -> anyhow::Result<CliOutput> {
        courier(&self.mgmt.kubeconfig, args).await
    }

    /// Starts `courier run` (a new process; the old one must be gone).
    pub fn start_controller(&mut self) -> anyhow::Result<()> {
        self.controller_starts += 1;
        let mut cmd = Command::new(bin("courier")?);
        cmd.arg("run")
            .arg("--kubeconfig")
            .arg(&self.mgmt.kubeconfig)
            .arg("--metrics-addr")
            .arg(format!("127.0.0.1:{}", self.metrics_port))
            .args(["--origin", ORIGIN])
            .args(&self.controller_args)
            .env("COURIER_LOG", &self.log_filter);
        // A short sweep interval unless the test chose one (`1h` = the garbage collector off).
        if !self.controller_args.iter().any(|a| a == "--gc-interval") {
            cmd.args(["--gc-interval", "2s"]);
        }
        let log = self.dir.join("controller.log");
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
        {
            use std::io::Write as _;
            let _ = writeln!(
                f,
                "===== controller start #{} =====",
                self.controller_starts
            );
        }
        self.controller = Some(Proc::spawn("courier run", cmd, &log, false)?);
        Ok(())
    }

    /// Replaces the extra `courier run` flags used by the next `start_controller`.
    pub fn set_controller_args(&mut self, args: &[&str]) {
        self.controller_args = args.iter().map(|s| s.to_string()).collect();
    }

    /// Starts another `courier run` process (a replica), logging to `controller-<identity>.log`,
    /// with `--identity` and no metrics endpoint; the caller owns it.
    pub fn start_replica(&self, identity: &str, extra: &[&str]) -> anyhow::Result<Proc> {
        self.start_replica_with(identity, &self.mgmt.kubeconfig, extra)
    }

    /// [`Self::start_replica`] with its own management kubeconfig (e.g. its own user).
    pub fn start_replica_with(
        &self,
        identity: &str,
        kubeconfig: &Path,
        extra: &[&str],
    ) -> anyhow::Result<Proc> {
        let mut cmd = Command::new(bin("courier")?);
        cmd.arg("run")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args([
                "--metrics-addr",
                "off",
                "--gc-interval",
                "2s",
                "--origin",
                ORIGIN,
            ])
            .args(["--identity", identity])
            .args(extra)
            .env("COURIER_LOG", &self.log_filter);
        Proc::spawn(
            &format!("courier run ({identity})"),
            cmd,
            &self.dir.join(format!("controller-{identity}.log")),
            false,
        )
    }

    /// Writes a kubeconfig Secret directly (no `cluster add` checks), replacing an existing one.
    pub async fn put_kubeconfig_secret(&self, name: &str, kubeconfig: &str) -> anyhow::Result<()> {
        let api: Api<k8s_openapi::api::core::v1::Secret> =
            Api::namespaced(self.mgmt_client.clone(), "courier-system");
        // The controller reads only Secrets labelled for it.
        let label = courier_api::LABEL_KUBECONFIG_SECRET;
        let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {label: "true"}},
            "stringData": {"kubeconfig": kubeconfig}
        }))?;
        match api.get_opt(name).await? {
            Some(_) => {
                api.patch(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"stringData": {"kubeconfig": kubeconfig}})),
                )
                .await?;
            }
            None => {
                api.create(&PostParams::default(), &secret).await?;
            }
        }
        Ok(())
    }

    /// Creates a WorkerCluster directly, naming Secret `secret`.
    pub async fn create_worker_cluster(
        &self,
        name: &str,
        secret: &str,
        labels: &BTreeMap<String, String>,
    ) -> anyhow::Result<()> {
        let api: Api<courier_api::WorkerCluster> = Api::all(self.mgmt_client.clone());
        let wc: courier_api::WorkerCluster = serde_json::from_value(json!({
            "apiVersion": courier_api::API_VERSION,
            "kind": "WorkerCluster",
            "metadata": {"name": name, "labels": labels},
            "spec": {"kubeconfigSecretRef": {"name": secret}}
        }))?;
        api.create(&PostParams::default(), &wc).await?;
        Ok(())
    }

    /// Waits until the WorkerCluster's Ready condition has `status` and `reason`; returns its
    /// message.
    pub async fn wait_cluster_condition(
        &self,
        name: &str,
        status: &str,
        reason: &str,
        timeout: Duration,
    ) -> anyhow::Result<String> {
        let api: Api<courier_api::WorkerCluster> = Api::all(self.mgmt_client.clone());
        wait_for(
            &format!("WorkerCluster {name} Ready={status} ({reason})"),
            timeout,
            || {
                let api = api.clone();
                async move {
                    let wc = api.get(name).await.map_err(|e| e.to_string())?;
                    let c = wc
                        .status
                        .as_ref()
                        .and_then(|s| s.ready_condition())
                        .cloned();
                    match c {
                        Some(c) if c.status == status && c.reason == reason => Ok(c.message),
                        Some(c) => Err(format!("Ready={} ({}): {}", c.status, c.reason, c.message)),
                        None => Err("no Ready condition".into()),
                    }
                }
            },
        )
        .await
        .with_context(|| format!("controller log:\n{}", self.controller_log_tail(30)))
    }

    /// `kill -9` of the controller.
    pub fn kill_controller(&mut self) {
        if let Some(mut p) = self.controller.take() {
            p.kill9();
        }
    }

    pub fn controller_log_tail(&self, n: usize) -> String {
        self.controller
            .as_ref()
            .map(|p| p.log_tail(n))
            .unwrap_or_else(|| {
                let text =
                    std::fs::read_to_string(self.dir.join("controller.log")).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                lines[lines.len().saturating_sub(n)..].join("\n")
            })
    }

    pub async fn wait_cluster_ready(&self, name: &str, timeout: Duration) -> anyhow::Result<()> {
        let api: Api<courier_api::WorkerCluster> = Api::all(self.mgmt_client.clone());
        wait_for(&format!("WorkerCluster {name} Ready"), timeout, || {
            let api = api.clone();
            async move {
                let wc = api.get(name).await.map_err(|e| e.to_string())?;
                if wc.is_ready() {
                    Ok(())
                } else {
                    Err(format!("{:?}", wc.status))
                }
            }
        })
        .await
        .with_context(|| format!("controller log:\n{}", self.controller_log_tail(30)))
    }

    pub fn jobs(&self, ns: &str) -> Api<Job> {
        Api::namespaced(self.mgmt_client.clone(), ns)
    }

    pub fn worker_jobs(&self, i: usize, ns: &str) -> Api<Job> {
        Api::namespaced(self.worker_clients[i].clone(), ns)
    }

    /// Index of the worker named `name`.
    pub fn worker_index(&self, name: &str) -> anyhow::Result<usize> {
        self.workers
            .iter()
            .position(|w| w.name == name)
            .ok_or_else(|| anyhow!("no worker named {name}"))
    }

    /// Creates an origin Job from JSON in `ns`.
    pub async fn create_job(&self, ns: &str, job: Value) -> anyhow::Result<Job> {
        let job: Job = serde_json::from_value(job)?;
        Ok(self.jobs(ns).create(&PostParams::default(), &job).await?)
    }

    pub async fn get_job(&self, ns: &str, name: &str) -> anyhow::Result<Job> {
        Ok(self.jobs(ns).get(name).await?)
    }

    /// Waits until `pred` holds for the origin Job; returns it.
    pub async fn wait_job<P>(
        &self,
        ns: &str,
        name: &str,
        what: &str,
        timeout: Duration,
        pred: P,
    ) -> anyhow::Result<Job>
    where
        P: Fn(&Job) -> bool,
    {
        let api = self.jobs(ns);
        let pred = &pred;
        wait_for(&format!("{ns}/{name}: {what}"), timeout, || {
            let api = api.clone();
            async move {
                let j = api.get(name).await.map_err(|e| e.to_string())?;
                if pred(&j) { Ok(j) } else { Err(summary(&j)) }
            }
        })
        .await
        .with_context(|| format!("controller log:\n{}", self.controller_log_tail(30)))
    }

    /// Waits until the origin Job is Complete or Failed.
    pub async fn wait_finished(
        &self,
        ns: &str,
        name: &str,
        timeout: Duration,
    ) -> anyhow::Result<Job> {
        self.wait_job(ns, name, "finished", timeout, |j| finished(j).is_some())
            .await
    }

    /// Every mirror (label `courier.dev/origin`) on every worker: (worker index, Job).
    pub async fn mirrors(&self) -> anyhow::Result<Vec<(usize, Job)>> {
        let mut out = Vec::new();
        for (i, c) in self.worker_clients.iter().enumerate() {
            let api: Api<Job> = Api::all(c.clone());
            let list = api
                .list(&ListParams::default().labels(&format!("{LABEL_ORIGIN}={ORIGIN}")))
                .await?;
            out.extend(list.items.into_iter().map(|j| (i, j)));
        }
        Ok(out)
    }

    /// The mirrors of one origin UID.
    pub async fn mirrors_of(&self, uid: &str) -> anyhow::Result<Vec<(usize, Job)>> {
        Ok(self
            .mirrors()
            .await?
            .into_iter()
            .filter(|(_, j)| label(j, LABEL_ORIGIN_UID) == Some(uid))
            .collect())
    }

    /// Events on the origin Job (core/v1).
    pub async fn events(&self, ns: &str, name: &str) -> anyhow::Result<Vec<Event>> {
        let api: Api<Event> = Api::namespaced(self.mgmt_client.clone(), ns);
        let list = api.list(&ListParams::default()).await?;
        Ok(list
            .items
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some(name))
            .collect())
    }

    /// Waits for an event with `reason` on the origin Job; returns its message.
    pub async fn wait_event(
        &self,
        ns: &str,
        name: &str,
        reason: &str,
        timeout: Duration,
    ) -> anyhow::Result<String> {
        wait_for(
            &format!("event {reason} on {ns}/{name}"),
            timeout,
            || async move {
                let evs = self.events(ns, name).await.map_err(|e| e.to_string())?;
                evs.iter()
                    .find(|e| e.reason.as_deref() == Some(reason))
                    .map(|e| e.message.clone().unwrap_or_default())
                    .ok_or_else(|| {
                        format!(
                            "events: {:?}",
                            evs.iter().map(|e| e.reason.clone()).collect::<Vec<_>>()
                        )
                    })
            },
        )
        .await
    }

    pub async fn patch_job(&self, ns: &str, name: &str, patch: Value) -> anyhow::Result<Job> {
        Ok(self
            .jobs(ns)
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await?)
    }

    pub async fn delete_job(&self, ns: &str, name: &str) -> anyhow::Result<()> {
        self.jobs(ns)
            .delete(name, &DeleteParams::background())
            .await?;
        Ok(())
    }

    /// GET on the controller's HTTP endpoint (`/metrics`, `/healthz`, `/readyz`).
    pub async fn http_get(&self, path: &str) -> anyhow::Result<(u16, String)> {
        let host = format!("127.0.0.1:{}", self.metrics_port);
        let mut stream = tokio::net::TcpStream::connect(&host).await?;
        let req = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        stream.write_all(req.as_bytes()).await?;
        let mut buf = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut buf)).await??;
        let text = String::from_utf8_lossy(&buf).into_owned();
        let code = text
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let body = text
            .split_once("\r\n\r\n")
            .map(|x| x.1.to_string())
            .unwrap_or_default();
        Ok((code, body))
    }
}

impl Env {
    /// Ends a test: on error prints where the logs are (and keeps them) and the controller's log
    /// tail; on success the work directory is removed when the Env is dropped.
    pub fn finish<T>(&mut self, r: anyhow::Result<T>) -> anyhow::Result<T> {
        match &r {
            Ok(_) => self.keep = false,
            Err(e) => eprintln!(
                "e2e: {e:#}
logs and kubeconfigs kept in {}
controller log tail:
{}",
                self.dir.display(),
                self.controller_log_tail(60)
            ),
        }
        r
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        self.kill_controller();
        for w in &mut self.workers {
            w.proc.kill9();
        }
        self.mgmt.proc.kill9();
        if self.keep {
            eprintln!("e2e: logs and kubeconfigs kept in {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

pub fn label<'a>(j: &'a Job, key: &str) -> Option<&'a str> {
    j.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

pub fn annotation<'a>(j: &'a Job, key: &str) -> Option<&'a str> {
    j.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// The origin's placement: (cluster, epoch).
pub fn placement(j: &Job) -> Option<(String, u64)> {
    let c = label(j, LABEL_CLUSTER)?.to_string();
    let e = annotation(j, ANNOTATION_EPOCH)?.parse().ok()?;
    Some((c, e))
}

/// A mirror's epoch label.
pub fn mirror_epoch(j: &Job) -> Option<u64> {
    label(j, LABEL_EPOCH)?.parse().ok()
}

pub fn condition_true(j: &Job, type_: &str) -> bool {
    j.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == type_ && c.status == "True"))
}

pub fn condition_reason(j: &Job, type_: &str) -> Option<String> {
    j.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")
        .and_then(|c| c.reason.clone())
}

/// `Complete` or `Failed`, if the Job finished.
pub fn finished(j: &Job) -> Option<&'static str> {
    if condition_true(j, "Complete") {
        Some("Complete")
    } else if condition_true(j, "Failed") {
        Some("Failed")
    } else {
        None
    }
}

/// A one-line state of a Job for failure messages.
pub fn summary(j: &Job) -> String {
    let s = j.status.clone().unwrap_or_default();
    let conds: Vec<String> = s
        .conditions
        .unwrap_or_default()
        .iter()
        .map(|c| {
            format!(
                "{}={}({})",
                c.type_,
                c.status,
                c.reason.clone().unwrap_or_default()
            )
        })
        .collect();
    format!(
        "placement {:?} suspend {:?} active {:?} ready {:?} succeeded {:?} failed {:?} conditions [{}]",
        placement(j),
        j.spec.as_ref().and_then(|s| s.suspend),
        s.active,
        s.ready,
        s.succeeded,
        s.failed,
        conds.join(", ")
    )
}

/// An origin Job (`managedBy` Courier) whose simulated pods follow `sim` annotations.
pub fn job(name: &str, sim: &[(&str, &str)]) -> Value {
    let annotations: serde_json::Map<String, Value> = sim
        .iter()
        .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
        .collect();
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "managedBy": MANAGED_BY,
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": annotations},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox:1.36", "command": ["true"]}]
                }
            }
        }
    })
}

/// Sets `spec.<key>` of a Job manifest.
pub fn with_spec(mut j: Value, key: &str, v: Value) -> Value {
    j["spec"][key] = v;
    j
}

/// Adds an annotation to a Job manifest's metadata.
pub fn with_annotation(mut j: Value, key: &str, v: &str) -> Value {
    j["metadata"]["annotations"][key] = json!(v);
    j
}

/// Creates many Jobs with up to `parallel` requests in flight.
pub async fn create_many(
    env: &Env,
    ns: &str,
    jobs: Vec<Value>,
    parallel: usize,
) -> anyhow::Result<Vec<Job>> {
    use futures::StreamExt as _;
    let results: Vec<anyhow::Result<Job>> = futures::stream::iter(jobs)
        .map(|j| env.create_job(ns, j))
        .buffer_unordered(parallel)
        .collect()
        .await;
    results.into_iter().collect()
}

/// Invariant 2 on a snapshot: every mirror belongs to a live origin, is never ahead of the origin's
/// intent (epoch <= origin epoch), and a mirror of the origin's current epoch is on the origin's
/// cluster (so at most one is current). Returns the number of mirrors and of current ones.
pub async fn check_mirrors(env: &Env, ns: &str) -> anyhow::Result<(usize, usize)> {
    let origins: BTreeMap<String, Job> = origins(env, ns)
        .await?
        .into_iter()
        .filter_map(|j| j.metadata.uid.clone().map(|u| (u, j)))
        .collect();
    let mirrors = env.mirrors().await?;
    let mut current: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (wi, m) in &mirrors {
        let wname = &env.workers[*wi].name;
        let mname = m.metadata.name.clone().unwrap_or_default();
        let uid = label(m, LABEL_ORIGIN_UID).unwrap_or_default();
        let Some(origin) = origins.get(uid) else {
            bail!("mirror {wname}/{mname} belongs to no origin (uid {uid})");
        };
        let m_epoch = mirror_epoch(m).context("mirror without epoch")?;
        let Some((cluster, epoch)) = placement(origin) else {
            bail!("mirror {wname}/{mname} (epoch {m_epoch}) exists but its origin has no intent");
        };
        ensure!(
            m_epoch <= epoch,
            "mirror {wname}/{mname} has epoch {m_epoch}, ahead of the origin's {epoch}"
        );
        if m_epoch == epoch {
            ensure!(
                *wname == cluster,
                "mirror {wname}/{mname} has the current epoch {epoch} but the origin is placed on {cluster}"
            );
            current
                .entry(uid.to_string())
                .or_default()
                .push(wname.clone());
        }
    }
    if let Some((uid, where_)) = current.iter().find(|(_, v)| v.len() > 1) {
        bail!("origin {uid} has two current mirrors: {where_:?}");
    }
    Ok((mirrors.len(), current.len()))
}

/// Waits until every origin in `ns` has finished as expected; returns them.
pub async fn wait_all_finished(
    env: &Env,
    ns: &str,
    n: usize,
    timeout: Duration,
    expected_end: fn(&str) -> &'static str,
) -> anyhow::Result<Vec<Job>> {
    let jobs = wait_for(&format!("{n} origins finished"), timeout, || async move {
        let all = origins(env, ns).await.map_err(|e| e.to_string())?;
        let done = all.iter().filter(|j| finished(j).is_some()).count();
        if all.len() == n && done == n {
            Ok(all)
        } else {
            Err(format!("{done} of {} finished", all.len()))
        }
    })
    .await?;
    for j in &jobs {
        let name = j.metadata.name.clone().unwrap_or_default();
        let want = expected_end(&name);
        ensure!(
            finished(j) == Some(want),
            "{name} ended {:?}, expected {want}",
            finished(j)
        );
    }
    Ok(jobs)
}

/// Every origin has exactly one mirror, the current one (stale ones were collected).
pub async fn wait_one_mirror_each(env: &Env, ns: &str, n: usize) -> anyhow::Result<()> {
    wait_for(
        "exactly one (current) mirror per origin",
        Duration::from_secs(60),
        || async move {
            let (total, current) = check_mirrors(env, ns).await.map_err(|e| format!("{e:#}"))?;
            if total == n && current == n {
                Ok(())
            } else {
                Err(format!("{total} mirrors, {current} current, {n} origins"))
            }
        },
    )
    .await
}

/// Every origin Job in `ns`.
pub async fn origins(env: &Env, ns: &str) -> anyhow::Result<Vec<Job>> {
    Ok(env.jobs(ns).list(&ListParams::default()).await?.items)
}
