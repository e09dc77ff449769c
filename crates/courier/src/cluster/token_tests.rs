//! Bound worker tokens against kubesim (issue #17 §4): `cluster add --token-ttl` registers a token
//! it requested itself, an expired token turns the WorkerCluster Ready=False naming the rotate
//! command, and `cluster rotate-token` makes it Ready again — with the real controller running.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser as _;
use courier_api::{DEFAULT_KUBECONFIG_KEY, DEFAULT_NAMESPACE, WorkerCluster};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::PostParams;
use kube::{Api, Client};
use kubesim::kinds::ssar::RuleSet;
use kubesim::{Role, Sim, SimOptions};
use tokio_util::sync::CancellationToken;

use super::add::{AddArgs, add};
use super::kubeconfig::{DEFAULT_WORKER_SERVICE_ACCOUNT, KubeconfigArgs, worker_kubeconfig};
use super::rotate::{ANNOTATION_TOKEN_ACCOUNT, ANNOTATION_TOKEN_EXPIRES, RotateArgs, rotate};
use super::{ClusterArgs, ClusterCommand};
use crate::management::KubeconfigSource;

const SA_USER: &str = "system:serviceaccount:courier-system:courier-dispatcher";

async fn sim(name: &str, role: Role) -> Sim {
    Sim::start(SimOptions {
        name: name.into(),
        role,
        ..Default::default()
    })
    .await
    .expect("kubesim starts")
}

async fn create<K>(api: &Api<K>, obj: &K)
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.create(&PostParams::default(), obj)
        .await
        .expect("created");
}

fn named(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        ..Default::default()
    }
}

/// A worker with the chart's namespace and ServiceAccount (granted every right: what the token may
/// do is not the subject here), and its admin kubeconfig written to `dir`.
async fn worker_with_account(dir: &Path) -> (Sim, PathBuf) {
    let worker = sim("w1", Role::Worker).await;
    let admin = crate::local::client_for(&worker.kubeconfig())
        .await
        .expect("admin client");
    create(
        &Api::<Namespace>::all(admin.clone()),
        &Namespace {
            metadata: named(DEFAULT_NAMESPACE),
            ..Default::default()
        },
    )
    .await;
    create(
        &Api::<ServiceAccount>::namespaced(admin, DEFAULT_NAMESPACE),
        &ServiceAccount {
            metadata: named(DEFAULT_WORKER_SERVICE_ACCOUNT),
            ..Default::default()
        },
    )
    .await;
    worker.grant(SA_USER, RuleSet::allow_all());
    let path = dir.join("w1-admin.kubeconfig");
    worker.write_kubeconfig(&path).expect("admin kubeconfig");
    (worker, path)
}

fn tmp_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("courier-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn source(path: &Path) -> KubeconfigSource {
    KubeconfigSource {
        file: Some(path.to_path_buf()),
        context: None,
    }
}

fn cluster_command(args: &[&str]) -> Result<ClusterCommand, clap::Error> {
    crate::Cli::try_parse_from(["courier", "cluster"].iter().chain(args)).map(|c| match c.command {
        crate::Command::Cluster(ClusterArgs { command, .. }) => command,
        other => panic!("{args:?} parsed as {other:?}"),
    })
}

fn add_args(args: &[&str]) -> AddArgs {
    match cluster_command(&[&["add"], args].concat()) {
        Ok(ClusterCommand::Add(a)) => *a,
        other => panic!("{args:?} parsed as {other:?}"),
    }
}

fn rotate_args(args: &[&str]) -> RotateArgs {
    match cluster_command(&[&["rotate-token"], args].concat()) {
        Ok(ClusterCommand::RotateToken(a)) => a,
        other => panic!("{args:?} parsed as {other:?}"),
    }
}

#[test]
fn token_flags() {
    let a = add_args(&["w1", "--token-ttl", "720h"]);
    assert_eq!(a.token_ttl, Some(Duration::from_secs(720 * 3600)));
    assert_eq!(a.service_account, "courier-dispatcher");
    assert_eq!(a.worker_namespace, "courier-system");
    assert_eq!(add_args(&["w1"]).token_ttl, None, "off unless asked");
    let e = cluster_command(&["add", "w1", "--token-ttl", "5m"])
        .expect_err("shorter than the API's minimum")
        .to_string();
    assert!(e.contains("shorter than 10m"), "{e}");
    assert!(cluster_command(&["add", "w1", "--service-account", "x"]).is_err());
    let r = rotate_args(&["w1", "--cluster-kubeconfig", "a.kc", "--token-ttl", "1h"]);
    assert_eq!(r.token_ttl, Some(Duration::from_secs(3600)));
    assert_eq!(r.service_account, None, "from the Secret unless given");
}

async fn stored_secret(mc: &Client) -> Secret {
    Api::<Secret>::namespaced(mc.clone(), DEFAULT_NAMESPACE)
        .get("w1-kubeconfig")
        .await
        .expect("registration Secret")
}

fn stored_token(s: &Secret) -> String {
    let text = s
        .data
        .as_ref()
        .and_then(|d| d.get(DEFAULT_KUBECONFIG_KEY))
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        .unwrap_or_default();
    let raw: serde_json::Value = serde_saphyr::from_str(&text).expect("a kubeconfig");
    raw["users"][0]["user"]["token"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

async fn ready_condition(mc: &Client) -> Option<(String, String, String)> {
    let wc = Api::<WorkerCluster>::all(mc.clone())
        .get_opt("w1")
        .await
        .ok()??;
    let c = wc.status?.ready_condition()?.clone();
    Some((c.status, c.reason, c.message))
}

async fn wait_condition(mc: &Client, what: &str, ok: impl Fn(&(String, String, String)) -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let c = ready_condition(mc).await;
        if c.as_ref().is_some_and(&ok) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}; Ready is {c:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_token_is_registered_expires_and_is_rotated() {
    let dir = tmp_dir("bound-token");
    let (worker, admin_path) = worker_with_account(&dir).await;
    let management = sim("management", Role::Management).await;
    let mc = crate::local::client_for(&management.kubeconfig())
        .await
        .expect("management client");
    crate::local::install_crd(&mc).await.expect("CRD");
    create(
        &Api::<Namespace>::all(mc.clone()),
        &Namespace {
            metadata: named(DEFAULT_NAMESPACE),
            ..Default::default()
        },
    )
    .await;
    let shutdown = CancellationToken::new();
    let controller = tokio::spawn({
        let (client, shutdown) = (mc.clone(), shutdown.clone());
        let cfg = courier_controller::ControllerConfig {
            identity: crate::run::default_identity(),
            ..Default::default()
        };
        async move { crate::controller::run(client, cfg, shutdown).await }
    });

    let admin = source(&admin_path);
    let mut a = add_args(&["w1", "--token-ttl", "1h", "--wait", "30s"]);
    a.cluster_kubeconfig = Some(admin_path.clone());
    add(&mc, DEFAULT_NAMESPACE, &admin, a)
        .await
        .expect("registered with a requested token");
    let secret = stored_secret(&mc).await;
    let first = stored_token(&secret);
    assert!(
        !first.is_empty() && first != worker.token,
        "the ServiceAccount's token is stored, never the admin's"
    );
    let notes = secret.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        notes.get(ANNOTATION_TOKEN_ACCOUNT).map(String::as_str),
        Some("courier-system/courier-dispatcher")
    );
    let expires = notes
        .get(ANNOTATION_TOKEN_EXPIRES)
        .cloned()
        .unwrap_or_default();
    let left = expires
        .parse::<jiff::Timestamp>()
        .map(|t| t.duration_since(jiff::Timestamp::now()).as_secs())
        .unwrap_or(0);
    assert!((3500..=3600).contains(&left), "{expires}: {left}s");
    // The worker says who the stored token is.
    let wclient = crate::local::client_for(&worker.kubeconfig())
        .await
        .expect("admin client");
    let review = Api::<TokenReview>::all(wclient)
        .create(
            &PostParams::default(),
            &TokenReview {
                metadata: ObjectMeta::default(),
                spec: TokenReviewSpec {
                    token: Some(first.clone()),
                    audiences: None,
                },
                status: None,
            },
        )
        .await
        .expect("token review");
    let user = review.status.and_then(|s| s.user).unwrap_or_default();
    assert_eq!(user.username.as_deref(), Some(SA_USER));
    assert_eq!(
        user.groups.unwrap_or_default(),
        [
            "system:serviceaccounts",
            "system:serviceaccounts:courier-system",
            "system:authenticated"
        ]
    );

    // An hour later the token no longer authenticates: Ready=False, naming the fix.
    worker.advance_token_clock(Duration::from_secs(3601));
    wait_condition(
        &mc,
        "Ready=False after expiry",
        |(status, reason, message)| {
            status == "False"
                && reason == "Unauthorized"
                && message.contains("courier cluster rotate-token w1")
        },
    )
    .await;

    let mut r = rotate_args(&["w1", "--wait", "60s"]);
    r.cluster_kubeconfig = Some(admin_path.clone());
    rotate(&mc, DEFAULT_NAMESPACE, &admin, r)
        .await
        .expect("rotated");
    wait_condition(&mc, "Ready again", |(status, ..)| status == "True").await;
    let secret = stored_secret(&mc).await;
    let second = stored_token(&secret);
    assert!(!second.is_empty() && second != first, "a new token");
    let new_expiry = secret
        .metadata
        .annotations
        .and_then(|a| a.get(ANNOTATION_TOKEN_EXPIRES).cloned())
        .unwrap_or_default();
    assert!(new_expiry > expires, "{new_expiry} after {expires}");

    shutdown.cancel();
    let _ = controller.await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn token_requests_name_the_fix() {
    let dir = tmp_dir("token-errors");
    let (worker, admin_path) = worker_with_account(&dir).await;
    let args = |sa: &str, duration: Duration| KubeconfigArgs {
        cluster_kubeconfig: Some(admin_path.clone()),
        cluster_context: None,
        worker_namespace: DEFAULT_NAMESPACE.into(),
        service_account: sa.into(),
        token_secret: false,
        secret: None,
        token_request: false,
        duration: Some(duration),
        server: None,
        name: Some("w1".into()),
        output_file: None,
        timeout: Duration::from_secs(5),
    };
    let admin = source(&admin_path);
    let out = worker_kubeconfig(
        &args("courier-dispatcher", Duration::from_secs(600)),
        &admin,
    )
    .await
    .expect("the shortest lifetime is accepted");
    assert_eq!(out.token_source, "TokenRequest");
    assert!(!format!("{out:?}").contains("kubesim-bound"), "{out:?}");
    // The API server's own minimum, not the CLI's.
    let e = format!(
        "{:#}",
        worker_kubeconfig(
            &args("courier-dispatcher", Duration::from_secs(599)),
            &admin
        )
        .await
        .expect_err("too short")
    );
    assert!(e.contains("less than 10 minutes"), "{e}");
    let e = format!(
        "{:#}",
        worker_kubeconfig(&args("nobody", Duration::from_secs(3600)), &admin)
            .await
            .expect_err("no such account")
    );
    assert!(
        e.contains("ServiceAccount courier-system/nobody") && e.contains("helm install"),
        "{e}"
    );
    // Rotating what is not registered names the command that registers it.
    let management = sim("management", Role::Management).await;
    let mc = crate::local::client_for(&management.kubeconfig())
        .await
        .expect("management client");
    crate::local::install_crd(&mc).await.expect("CRD");
    let e = rotate(&mc, DEFAULT_NAMESPACE, &admin, rotate_args(&["w1"]))
        .await
        .expect_err("not registered")
        .to_string();
    assert!(
        e.contains("courier cluster add w1") && e.contains("--token-ttl"),
        "{e}"
    );
    drop(worker);
    let _ = std::fs::remove_dir_all(&dir);
}
