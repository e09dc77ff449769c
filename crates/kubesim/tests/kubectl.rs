//! kubectl against kubesim: get, create -f, delete for Jobs and Namespaces, validation of bad input, and
//! the imperative `create namespace` / `create secret generic` (kubectl v1.31+ sends those in protobuf,
//! older ones in JSON: both must work). Uses `$KUBECTL` or `kubectl` on PATH (CI installs Debian's
//! `kubernetes-client`); fails, naming the fix, when there is none.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use base64::Engine as _;
use kubesim::{Role, Sim, SimOptions};

fn kubectl() -> String {
    let k = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into());
    match Command::new(&k).args(["version", "--client"]).output() {
        Ok(o) if o.status.success() => k,
        _ => panic!(
            "kubectl not found: install Debian's kubernetes-client (apt-get install kubernetes-client) or set KUBECTL"
        ),
    }
}

fn run(k: &str, kubeconfig: &Path, args: &[&str]) -> (bool, String) {
    let o = Command::new(k)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.success(), text)
}

fn ok(k: &str, kubeconfig: &Path, args: &[&str]) -> String {
    let (success, text) = run(k, kubeconfig, args);
    assert!(success, "kubectl {args:?} failed:\n{text}");
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_gets_creates_and_deletes_jobs_and_namespaces() {
    let k = kubectl();
    let sim = Sim::start(SimOptions {
        role: Role::Worker,
        speed: 20.0,
        ..Default::default()
    })
    .await
    .unwrap();
    let dir = std::env::temp_dir().join(format!("kubesim-kubectl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kc = dir.join("kubeconfig");
    sim.write_kubeconfig(&kc).unwrap();
    let ns = dir.join("ns.yaml");
    std::fs::write(
        &ns,
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: demo\n",
    )
    .unwrap();
    let job = dir.join("job.yaml");
    std::fs::write(
        &job,
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: hello\n  namespace: demo\nspec:\n  template:\n    metadata:\n      annotations:\n        sim/run-seconds: \"1\"\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: c\n        image: busybox:1.36\n",
    )
    .unwrap();
    let greeting = dir.join("greeting.txt");
    std::fs::write(&greeting, "hello from a file").unwrap();
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        std::fs::read_to_string(&job)
            .unwrap()
            .replace("name: hello", "name: bad")
            .replace(
                "restartPolicy: Never",
                "restartPolicy: Never\n      bogusField: 1",
            ),
    )
    .unwrap();

    // Blocking kubectl calls run off the runtime's threads so the in-process server keeps serving.
    let (k2, kc2) = (k.clone(), kc.clone());
    let (ns2, job2, bad2, greeting2) = (ns.clone(), job.clone(), bad.clone(), greeting.clone());
    tokio::task::spawn_blocking(move || {
        let (k, kc) = (k2.as_str(), kc2.as_path());
        assert!(ok(k, kc, &["get", "namespaces"]).contains("kube-system"));
        assert!(
            ok(k, kc, &["create", "-f", ns2.to_str().unwrap()]).contains("namespace/demo created")
        );
        assert!(
            ok(k, kc, &["create", "-f", job2.to_str().unwrap()])
                .contains("job.batch/hello created")
        );
        let (created, text) = run(k, kc, &["create", "-f", bad2.to_str().unwrap()]);
        assert!(
            !created && text.contains("bogusField"),
            "an unknown field is refused (client- or server-side):\n{text}"
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = ok(k, kc, &["get", "jobs", "-n", "demo"]);
            if out.contains("Complete") {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the worker's simulated Job controller completes the Job:\n{out}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        let json = ok(k, kc, &["get", "job", "hello", "-n", "demo", "-o", "json"]);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["status"]["succeeded"], 1);
        assert!(ok(k, kc, &["delete", "-f", job2.to_str().unwrap()]).contains("deleted"));
        let (found, _) = run(k, kc, &["get", "job", "hello", "-n", "demo"]);
        assert!(!found);
        assert!(ok(k, kc, &["delete", "namespace", "demo"]).contains("deleted"));

        // Imperative creates (protobuf bodies from a recent kubectl).
        assert!(ok(k, kc, &["create", "namespace", "team-a"]).contains("namespace/team-a created"));
        let ns: serde_json::Value =
            serde_json::from_str(&ok(k, kc, &["get", "namespace", "team-a", "-o", "json"]))
                .unwrap();
        assert_eq!(
            ns["metadata"]["labels"]["kubernetes.io/metadata.name"],
            "team-a"
        );
        let from_file = format!("--from-file={}", greeting2.display());
        let out = ok(
            k,
            kc,
            &[
                "create",
                "secret",
                "generic",
                "s",
                "-n",
                "team-a",
                &from_file,
                "--from-literal=user=admin",
            ],
        );
        assert!(out.contains("secret/s created"), "{out}");
        let secret: serde_json::Value = serde_json::from_str(&ok(
            k,
            kc,
            &["get", "secret", "s", "-n", "team-a", "-o", "json"],
        ))
        .unwrap();
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        assert_eq!(secret["type"], "Opaque");
        assert_eq!(secret["data"]["greeting.txt"], b64("hello from a file"));
        assert_eq!(secret["data"]["user"], b64("admin"));
        let (again, text) = run(k, kc, &["create", "namespace", "team-a"]);
        assert!(!again && text.contains("AlreadyExists"), "{text}");
    })
    .await
    .unwrap();
    sim.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}
