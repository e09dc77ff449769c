//! `courier cluster kubeconfig` against kubesim: the kubeconfig it builds passes `cluster add`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use courier_api::{DEFAULT_KUBECONFIG_KEY, DEFAULT_NAMESPACE, WorkerCluster};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::PostParams;
use kube::config::Kubeconfig;
use kube::{Api, Client};
use kubesim::kinds::ssar::{Rule, RuleSet};
use kubesim::{Role, Sim, SimOptions};

use super::add::{AddArgs, add, check_worker};
use super::kubeconfig::{
    DEFAULT_WORKER_SERVICE_ACCOUNT, KubeconfigArgs, print_worker_kubeconfig, worker_kubeconfig,
};
use super::token::{SERVICE_ACCOUNT_NAME_ANNOTATION, SERVICE_ACCOUNT_TOKEN_TYPE};
use super::{ClusterArgs, ClusterCommand};
use crate::kubeconfig;
use crate::management::KubeconfigSource;
use crate::util;

/// The worker kubeconfig the flags of `a` name.
fn src(a: &KubeconfigArgs) -> KubeconfigSource {
    KubeconfigSource {
        file: a.cluster_kubeconfig.clone(),
        context: a.cluster_context.clone(),
    }
}

const SA_USER: &str = "system:serviceaccount:courier-system:courier-dispatcher";
const TOKEN: &str = "sa-token-6b1f0c";

/// What charts/courier-worker grants the ServiceAccount (plus access reviews, which every
/// authenticated user may create).
fn worker_chart_rules() -> RuleSet {
    RuleSet {
        allow: vec![
            Rule::new(
                &["create", "get", "list", "watch", "patch", "delete"],
                &["batch"],
                &["jobs"],
            ),
            Rule::new(&["create", "get"], &[""], &["namespaces"]),
            Rule::new(
                &["create"],
                &["authorization.k8s.io"],
                &["selfsubjectaccessreviews"],
            ),
        ],
        deny: Vec::new(),
    }
}

async fn sim(name: &str, role: Role) -> Sim {
    Sim::start(SimOptions {
        name: name.into(),
        role,
        ..Default::default()
    })
    .await
    .expect("kubesim starts")
}

fn tmp_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("courier-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn args(admin: &std::path::Path) -> KubeconfigArgs {
    KubeconfigArgs {
        cluster_kubeconfig: Some(admin.to_path_buf()),
        cluster_context: None,
        worker_namespace: DEFAULT_NAMESPACE.into(),
        service_account: DEFAULT_WORKER_SERVICE_ACCOUNT.into(),
        token_secret: true,
        secret: None,
        token_request: false,
        duration: None,
        server: None,
        name: None,
        output_file: None,
        timeout: Duration::from_secs(5),
    }
}

async fn create_namespace(client: &Client, name: &str) {
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("namespace created");
}

/// A Secret as the token controller leaves it: type, owner annotation, `token` and `ca.crt`.
fn token_secret(name: &str, owner: &str, type_: &str, data: &[(&str, &[u8])]) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            annotations: Some(BTreeMap::from([(
                SERVICE_ACCOUNT_NAME_ANNOTATION.to_string(),
                owner.to_string(),
            )])),
            ..Default::default()
        },
        type_: Some(type_.into()),
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), ByteString(v.to_vec())))
                .collect(),
        ),
        ..Default::default()
    }
}

/// A worker prepared like the courier-worker chart does: namespace, token Secret (filled as
/// the token controller would) and the ServiceAccount's token with the chart's rights.
async fn prepared_worker(dir: &std::path::Path) -> (Sim, PathBuf) {
    let worker = sim("w1", Role::Worker).await;
    let admin = crate::local::client_for(&worker.kubeconfig())
        .await
        .expect("admin client");
    create_namespace(&admin, DEFAULT_NAMESPACE).await;
    let secret = token_secret(
        "courier-dispatcher-token",
        DEFAULT_WORKER_SERVICE_ACCOUNT,
        SERVICE_ACCOUNT_TOKEN_TYPE,
        &[
            ("token", TOKEN.as_bytes()),
            ("ca.crt", worker.ca_pem.as_bytes()),
            ("namespace", b"courier-system"),
        ],
    );
    Api::<Secret>::namespaced(admin, DEFAULT_NAMESPACE)
        .create(&PostParams::default(), &secret)
        .await
        .expect("token Secret created");
    worker.add_token(TOKEN, SA_USER, worker_chart_rules());
    let path = dir.join("w1-admin.kubeconfig");
    worker.write_kubeconfig(&path).expect("admin kubeconfig");
    (worker, path)
}

#[test]
fn kubeconfig_flags() {
    use clap::Parser as _;
    let parse = |args: &[&str]| {
        crate::Cli::try_parse_from(["courier", "cluster", "kubeconfig"].iter().chain(args))
    };
    let kc = |args: &[&str]| match parse(args).map(|c| c.command) {
        Ok(crate::Command::Cluster(ClusterArgs {
            command: ClusterCommand::Kubeconfig(a),
            ..
        })) => *a,
        other => panic!("{args:?} parsed as {other:?}"),
    };
    let a = kc(&[]);
    assert_eq!(a.service_account, "courier-dispatcher");
    assert_eq!(a.worker_namespace, "courier-system");
    // A bound token by default.
    assert!(!a.token_secret && a.duration.is_none() && a.secret.is_none());
    let a = kc(&["--duration", "2h", "--output-file", "w.kubeconfig"]);
    assert_eq!(a.duration, Some(Duration::from_secs(7200)));
    assert_eq!(a.output_file, Some(PathBuf::from("w.kubeconfig")));
    // The old spelling is still accepted (and ignored).
    assert!(kc(&["--token-request", "--duration", "1h"]).token_request);
    let a = kc(&["--token-secret", "--secret", "s"]);
    assert!(a.token_secret && a.secret.as_deref() == Some("s"));
    // A duration only means something for a requested token; a Secret is not requested.
    assert!(parse(&["--token-secret", "--duration", "1h"]).is_err());
    assert!(
        parse(&["--secret", "s"]).is_err(),
        "--secret needs --token-secret"
    );
    assert!(parse(&["--token-secret", "--token-request"]).is_err());
}

#[tokio::test]
async fn kubeconfig_from_the_token_secret_passes_cluster_add() {
    let dir = tmp_dir("kubeconfig-add");
    let (worker, admin_path) = prepared_worker(&dir).await;
    let out_path = dir.join("w1.kubeconfig");
    let mut a = args(&admin_path);
    a.name = Some("w1".into());
    a.output_file = Some(out_path.clone());
    let s = src(&a);
    print_worker_kubeconfig(a, &s)
        .await
        .expect("kubeconfig printed");

    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&out_path)
            .expect("written")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "the kubeconfig holds a token");
    }
    let kc = util::read_kubeconfig(&out_path).expect("parses");
    assert_eq!(kc.current_context.as_deref(), Some("w1"));
    let min = kubeconfig::minify(&kc, None, "generated").expect("one context");
    assert_eq!(min.server, worker.url());
    let raw: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(&out_path).expect("read")).expect("yaml");
    assert_eq!(
        raw["users"][0]["user"]["token"], TOKEN,
        "the ServiceAccount's token, not the admin's"
    );
    assert!(kubeconfig::credential_problems(&kc).is_empty());

    // Registered for real, with every check `cluster add` makes.
    let management = sim("management", Role::Management).await;
    let mc = crate::local::client_for(&management.kubeconfig())
        .await
        .expect("management client");
    crate::local::install_crd(&mc).await.expect("CRD");
    create_namespace(&mc, DEFAULT_NAMESPACE).await;
    add(
        &mc,
        DEFAULT_NAMESPACE,
        &KubeconfigSource {
            file: Some(out_path.clone()),
            context: None,
        },
        AddArgs {
            name: "w1".into(),
            cluster_kubeconfig: Some(out_path.clone()),
            cluster_context: None,
            server: None,
            skip_check: false,
            labels: Vec::new(),
            weight: 1,
            paused: false,
            namespaces: Vec::new(),
            secret_name: None,
            flatten: false,
            allow_exec_kubeconfigs: false,
            allow_file_kubeconfigs: false,
            allow_insecure_kubeconfigs: false,
            timeout: Duration::from_secs(5),
            token_ttl: None,
            worker_namespace: DEFAULT_NAMESPACE.into(),
            service_account: DEFAULT_WORKER_SERVICE_ACCOUNT.into(),
            wait: None,
        },
    )
    .await
    .expect("cluster add accepts the generated kubeconfig");
    let stored = Api::<Secret>::namespaced(mc.clone(), DEFAULT_NAMESPACE)
        .get("w1-kubeconfig")
        .await
        .expect("registration Secret");
    let text = stored
        .data
        .and_then(|d| d.get(DEFAULT_KUBECONFIG_KEY).cloned())
        .map(|b| String::from_utf8_lossy(&b.0).to_string())
        .unwrap_or_default();
    assert!(
        text.contains(TOKEN),
        "stored kubeconfig carries the SA token"
    );
    assert!(
        Api::<WorkerCluster>::all(mc)
            .get_opt("w1")
            .await
            .expect("get")
            .is_some()
    );

    // Without the chart's rights the same kubeconfig is refused by `add`'s checks: they really
    // ran as the ServiceAccount.
    worker.set_rules(TOKEN, RuleSet::none());
    let min = kubeconfig::minify(&kc, None, "generated").expect("one context");
    let e = check_worker(&min, None, Duration::from_secs(5))
        .await
        .expect_err("no rights")
        .to_string();
    assert!(e.contains(SA_USER) || e.contains("403"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn ca_comes_from_the_token_secret_when_the_admin_kubeconfig_has_none() {
    let dir = tmp_dir("kubeconfig-ca");
    let (worker, _) = prepared_worker(&dir).await;
    // An admin kubeconfig that skips TLS verification and carries no CA.
    let mut admin = Kubeconfig::from_yaml(&worker.kubeconfig()).expect("parses");
    for c in &mut admin.clusters {
        if let Some(c) = &mut c.cluster {
            c.certificate_authority_data = None;
            c.insecure_skip_tls_verify = Some(true);
        }
    }
    let admin_path = dir.join("insecure-admin.kubeconfig");
    std::fs::write(&admin_path, kubeconfig::to_yaml(&admin).expect("yaml")).expect("write");
    let a = args(&admin_path);
    let out = worker_kubeconfig(&a, &src(&a)).await.expect("generated");
    assert!(out.ca_source.contains("ca.crt"), "{}", out.ca_source);
    let kc = Kubeconfig::from_yaml(&out.yaml).expect("parses");
    assert!(
        kubeconfig::credential_problems(&kc).is_empty(),
        "no insecure-skip-tls-verify carried over"
    );
    // The worker's certificate verifies against the CA taken from the Secret.
    let min = kubeconfig::minify(&kc, None, "generated").expect("one context");
    check_worker(&min, None, Duration::from_secs(5))
        .await
        .expect("TLS verified with the Secret's CA");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn errors_name_the_object_and_the_fix_and_never_the_token() {
    let dir = tmp_dir("kubeconfig-errors");
    let (worker, admin_path) = prepared_worker(&dir).await;
    let admin = crate::local::client_for(&worker.kubeconfig())
        .await
        .expect("admin client");
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), DEFAULT_NAMESPACE);
    let fail = |a: KubeconfigArgs| async move {
        let e = format!(
            "{:#}",
            worker_kubeconfig(&a, &src(&a))
                .await
                .expect_err("must be refused")
        );
        assert!(!e.contains(TOKEN), "the token leaked into an error: {e}");
        e
    };

    // Chart not installed (here: another namespace).
    let mut a = args(&admin_path);
    a.worker_namespace = "elsewhere".into();
    let e = fail(a).await;
    assert!(
        e.contains("Secret elsewhere/courier-dispatcher-token")
            && e.contains("tokenSecret=true")
            && e.contains("-n elsewhere")
            && e.contains("drop --token-secret"),
        "{e}"
    );

    // Not a token Secret.
    let opaque = token_secret(
        "plain",
        "courier-dispatcher",
        "Opaque",
        &[("token", TOKEN.as_bytes())],
    );
    secrets
        .create(&PostParams::default(), &opaque)
        .await
        .expect("create");
    let mut a = args(&admin_path);
    a.secret = Some("plain".into());
    let e = fail(a).await;
    assert!(e.contains("type Opaque") && e.contains("--secret"), "{e}");

    // Another account's token.
    let foreign = token_secret(
        "someone-token",
        "someone",
        SERVICE_ACCOUNT_TOKEN_TYPE,
        &[("token", TOKEN.as_bytes())],
    );
    secrets
        .create(&PostParams::default(), &foreign)
        .await
        .expect("create");
    let mut a = args(&admin_path);
    a.secret = Some("someone-token".into());
    let e = fail(a).await;
    assert!(e.contains("ServiceAccount \"someone\""), "{e}");

    // Not filled by a token controller.
    let empty = token_secret(
        "empty-token",
        "courier-dispatcher",
        SERVICE_ACCOUNT_TOKEN_TYPE,
        &[],
    );
    secrets
        .create(&PostParams::default(), &empty)
        .await
        .expect("create");
    let mut a = args(&admin_path);
    a.secret = Some("empty-token".into());
    a.timeout = Duration::from_secs(1);
    let e = fail(a).await;
    assert!(e.contains("has no token after 1s"), "{e}");

    // No ServiceAccount (the chart is not installed): the TokenRequest answers 404.
    let mut a = args(&admin_path);
    a.token_secret = false;
    let e = fail(a).await;
    assert!(
        e.contains("ServiceAccount courier-system/courier-dispatcher")
            && e.contains("helm install courier-worker"),
        "{e}"
    );

    // An admin kubeconfig that may not read Secrets.
    worker.add_token("viewer", "viewer", RuleSet::none());
    let viewer_path = dir.join("viewer.kubeconfig");
    std::fs::write(&viewer_path, worker.kubeconfig_for("viewer")).expect("write");
    let e = fail(args(&viewer_path)).await;
    assert!(
        e.contains("reading Secret courier-system/courier-dispatcher-token")
            && e.contains("403")
            && e.contains("admin kubeconfig"),
        "{e}"
    );

    let mut a = args(&admin_path);
    a.server = Some("http://w1:6443".into());
    let e = fail(a).await;
    assert!(e.contains("https://"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--namespaces a,b`: namespace names only, each once; none given = every namespace.
#[test]
fn namespaces_flag_takes_namespace_names() {
    use super::add::worker_namespaces;
    let given = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(worker_namespaces(&[]).ok(), Some(None));
    assert_eq!(
        worker_namespaces(&given(&["team-a", "team-b", "team-a"])).ok(),
        Some(Some(given(&["team-a", "team-b"])))
    );
    for bad in ["Team-A", "a.b", "", "-a", &"x".repeat(64)] {
        let e = worker_namespaces(&given(&[bad]))
            .expect_err("not a namespace name")
            .to_string();
        assert!(e.contains("--namespaces") && e.contains(bad), "{e}");
    }
}

/// `--namespaces`: `cluster add`'s checks review the Job rights in each listed namespace only, so a
/// token bound like the worker chart's `namespaces` value passes with that list (and fails, naming
/// the namespace and the chart fix, with a namespace it lacks); the WorkerCluster records the list.
#[tokio::test]
async fn namespaces_are_checked_there_and_registered() {
    let worker = sim("worker-ns", Role::Worker).await;
    let mut rules = worker_chart_rules();
    rules.allow[0] = rules.allow[0].clone().in_namespaces(&["team-a"]);
    worker.add_token("ns-token", "courier", rules);
    let kc = Kubeconfig::from_yaml(&worker.kubeconfig_for("ns-token")).expect("parses");
    let min = kubeconfig::minify(&kc, None, "w1").expect("one context");
    let t = Duration::from_secs(5);
    let e = check_worker(&min, None, t)
        .await
        .expect_err("no cluster-wide Job rights")
        .to_string();
    assert!(e.contains("cluster-wide: create jobs.batch"), "{e}");
    let team_a = ["team-a".to_string()];
    check_worker(&min, Some(&team_a), t)
        .await
        .expect("the Job rights hold in team-a");
    let both = ["team-a".to_string(), "team-b".to_string()];
    let e = check_worker(&min, Some(&both), t)
        .await
        .expect_err("none in team-b")
        .to_string();
    assert!(
        e.contains("in namespace team-b: create jobs.batch")
            && e.contains("--set namespaces={team-a,team-b}")
            && !e.contains("in namespace team-a"),
        "{e}"
    );

    let management = sim("management-ns", Role::Management).await;
    let mc = crate::local::client_for(&management.kubeconfig())
        .await
        .expect("management client");
    crate::local::install_crd(&mc).await.expect("CRD");
    create_namespace(&mc, DEFAULT_NAMESPACE).await;
    let reg = super::Registration {
        name: "w1".into(),
        namespace: DEFAULT_NAMESPACE.into(),
        secret_name: "w1-kubeconfig".into(),
        kubeconfig_yaml: worker.kubeconfig_for("ns-token"),
        labels: BTreeMap::new(),
        weight: 1,
        paused: false,
        namespaces: Some(team_a.to_vec()),
        secret_annotations: BTreeMap::new(),
    };
    super::create_registration(&mc, &reg)
        .await
        .expect("registered");
    let wc = Api::<WorkerCluster>::all(mc)
        .get("w1")
        .await
        .expect("the WorkerCluster");
    assert_eq!(wc.spec.namespaces, Some(team_a.to_vec()));
}
