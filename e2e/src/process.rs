//! The processes of a test: the workspace binaries, their work directories, a child process with
//! its log, one `kubesim serve` and its admin endpoint; and polling with a timeout.

use std::future::Future;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

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
