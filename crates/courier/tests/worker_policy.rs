//! The worker chart's ValidatingAdmissionPolicy, evaluated for real (#12 §9, #17 §3, §12): the chart
//! is rendered by Helm (`charts/render.py`), its policy and binding are created in a kubesim server,
//! and every request goes through kubesim's HTTP API with a real identity: Courier's ServiceAccount,
//! a worker user, a cluster admin, the Job controller's and the garbage collector's accounts.
//! kubesim evaluates the policy like the API server (matchConstraints, variables, CEL validations,
//! `request.userInfo`), so what passes here is what the chart's expressions decide.
//!
//! Checked by breaking it: with the `mirror-finalizers` validation's expression replaced by `true`
//! in admission.yaml, both finalizer forgeries are admitted and the first test fails.
//!
//! Python 3 with helm-python-sdk is required, as for charts.rs.

use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use kubesim::kinds::ssar::RuleSet;
use kubesim::{Role, Sim, SimOptions};
use serde_json::{Value, json};

mod support;
use support::{Rendered, render};

const NS: &str = "courier-system";
const TEAM: &str = "team-a";
const COURIER: &str = "system:serviceaccount:courier-system:courier-dispatcher";

/// A worker with the chart's policy installed, and a client per identity.
struct Worker {
    sim: Sim,
    admin: Client,
    courier: Client,
    alice: Client,
    job_controller: Client,
    gc: Client,
}

async fn client(kubeconfig: &str) -> Client {
    let kc = Kubeconfig::from_yaml(kubeconfig).unwrap_or_else(|e| panic!("{e}"));
    let mut cfg = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    cfg.default_retry = false;
    Client::try_from(cfg).unwrap_or_else(|e| panic!("{e}"))
}

fn ar(group: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1", kind), plural)
}

fn obj(v: Value) -> DynamicObject {
    serde_json::from_value(v).unwrap_or_else(|e| panic!("{e}"))
}

impl Worker {
    async fn start(chart: &Rendered) -> Worker {
        let sim = Sim::start(SimOptions {
            role: Role::ApiServer,
            ..Default::default()
        })
        .await
        .unwrap_or_else(|e| panic!("kubesim: {e}"));
        for (token, user) in [
            ("courier", COURIER),
            ("alice", "alice"),
            ("admin", "kubernetes-admin"),
            ("jc", "system:serviceaccount:kube-system:job-controller"),
            (
                "gc",
                "system:serviceaccount:kube-system:generic-garbage-collector",
            ),
        ] {
            sim.add_token(token, user, RuleSet::allow_all());
        }
        let admin = client(&sim.kubeconfig_for("admin")).await;
        for (kind, plural) in [
            ("ValidatingAdmissionPolicy", "validatingadmissionpolicies"),
            (
                "ValidatingAdmissionPolicyBinding",
                "validatingadmissionpolicybindings",
            ),
        ] {
            let api: Api<DynamicObject> = Api::all_with(
                admin.clone(),
                &ar("admissionregistration.k8s.io", kind, plural),
            );
            api.create(&PostParams::default(), &obj(chart.one(kind).clone()))
                .await
                .unwrap_or_else(|e| panic!("kubesim refused the chart's {kind}: {e}"));
        }
        let nss: Api<DynamicObject> =
            Api::all_with(admin.clone(), &ar("", "Namespace", "namespaces"));
        for ns in [TEAM, "gpu"] {
            nss.create(
                &PostParams::default(),
                &obj(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})),
            )
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        }
        Worker {
            courier: client(&sim.kubeconfig_for("courier")).await,
            alice: client(&sim.kubeconfig_for("alice")).await,
            job_controller: client(&sim.kubeconfig_for("jc")).await,
            gc: client(&sim.kubeconfig_for("gc")).await,
            admin,
            sim,
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.sim.shutdown();
    }
}

fn jobs(c: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(c.clone(), ns, &ar("batch", "Job", "jobs"))
}

const MIRROR_LABELS: &[(&str, &str)] = &[
    ("courier.dev/origin", "mgmt"),
    (
        "courier.dev/origin-uid",
        "0b0e4a1c-0000-4000-8000-000000000001",
    ),
    ("courier.dev/epoch", "1"),
    ("app", "demo"),
];

fn job(name: &str, labels: &[(&str, &str)]) -> Value {
    let labels: serde_json::Map<String, Value> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": labels},
        "spec": {"parallelism": 1, "template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox:1.36"}]}}}
    })
}

fn mirror(name: &str) -> Value {
    job(name, MIRROR_LABELS)
}

/// `Ok` when admitted, else the API error's code and message.
type Outcome = Result<(), (u16, String)>;

fn outcome<T>(r: Result<T, kube::Error>) -> Outcome {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) => Err((s.code, s.message)),
        Err(e) => panic!("not an API answer: {e}"),
    }
}

async fn create(c: &Client, ns: &str, j: Value) -> Outcome {
    outcome(jobs(c, ns).create(&PostParams::default(), &obj(j)).await)
}

async fn patch(c: &Client, name: &str, p: Value) -> Outcome {
    outcome(
        jobs(c, TEAM)
            .patch(name, &PatchParams::default(), &Patch::Merge(p))
            .await,
    )
}

async fn patch_status(c: &Client, name: &str, p: Value) -> Outcome {
    outcome(
        jobs(c, TEAM)
            .patch_status(name, &PatchParams::default(), &Patch::Merge(p))
            .await,
    )
}

/// Collects wrong decisions instead of stopping at the first.
#[derive(Default)]
struct Verdicts(Vec<String>);

impl Verdicts {
    /// `want`: `None` = admitted, `Some(fragment)` = a 403 whose message contains it.
    fn check(&mut self, what: &str, got: Outcome, want: Option<&str>) {
        let ok = match (&got, want) {
            (Ok(()), None) => true,
            (Err((403, m)), Some(f)) => m.contains(f),
            _ => false,
        };
        if !ok {
            self.0
                .push(format!("{what}: expected {want:?}, got {got:?}"));
        }
    }

    fn assert_all_right(self) {
        assert!(
            self.0.is_empty(),
            "the worker policy decided wrongly:\n  {}",
            self.0.join("\n  ")
        );
    }
}

const LABELS: &str = "rule courier-labels";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_user_cannot_forge_hijack_or_pin_a_mirror() {
    let w = Worker::start(&render("courier-worker", "courier-worker", NS, &json!({}))).await;
    let mut v = Verdicts::default();
    let (alice, admin, courier) = (&w.alice, &w.admin, &w.courier);

    v.check(
        "a user creates an ordinary Job",
        create(alice, TEAM, job("plain", &[("app", "demo")])).await,
        None,
    );
    v.check(
        "a user creates a Job without labels",
        create(alice, TEAM, job("bare", &[])).await,
        None,
    );
    v.check(
        "a user forges a mirror",
        create(alice, TEAM, mirror("forged")).await,
        Some(LABELS),
    );
    v.check(
        "a user creates a Job with courier.dev/epoch only",
        create(alice, TEAM, job("epoch", &[("courier.dev/epoch", "1")])).await,
        Some(LABELS),
    );
    v.check(
        "a cluster admin forges a mirror",
        create(admin, TEAM, mirror("forged")).await,
        Some(LABELS),
    );
    v.check(
        "Courier creates a mirror",
        create(courier, TEAM, mirror("m")).await,
        None,
    );

    v.check(
        "a user changes their own label on a mirror",
        patch(
            alice,
            "m",
            json!({"metadata": {"labels": {"app": "other"}}}),
        )
        .await,
        None,
    );
    v.check(
        "a user annotates a mirror",
        patch(
            alice,
            "m",
            json!({"metadata": {"annotations": {"note": "mine"}}}),
        )
        .await,
        None,
    );
    v.check(
        "a user changes a mirror's epoch",
        patch(
            alice,
            "m",
            json!({"metadata": {"labels": {"courier.dev/epoch": "7"}}}),
        )
        .await,
        Some(LABELS),
    );
    v.check(
        "a user removes a mirror's origin label",
        patch(
            alice,
            "m",
            json!({"metadata": {"labels": {"courier.dev/origin": null}}}),
        )
        .await,
        Some(LABELS),
    );
    v.check(
        "a user adds a courier.dev/ label to a mirror",
        patch(
            alice,
            "m",
            json!({"metadata": {"labels": {"courier.dev/extra": "x"}}}),
        )
        .await,
        Some(LABELS),
    );
    v.check("a user turns an ordinary Job into a mirror",
        patch(alice, "plain", json!({"metadata": {"labels": {"courier.dev/origin": "mgmt", "courier.dev/origin-uid": "u", "courier.dev/epoch": "1"}}})).await, Some(LABELS));
    v.check(
        "a cluster admin changes a mirror's origin",
        patch(
            admin,
            "m",
            json!({"metadata": {"labels": {"courier.dev/origin": "other"}}}),
        )
        .await,
        Some(LABELS),
    );
    v.check(
        "a user scales a mirror",
        patch(alice, "m", json!({"spec": {"parallelism": 2}})).await,
        Some("rule mirror-spec"),
    );
    v.check(
        "a user scales an ordinary Job",
        patch(alice, "plain", json!({"spec": {"parallelism": 2}})).await,
        None,
    );
    v.check(
        "a user adds a finalizer to a mirror",
        patch(
            alice,
            "m",
            json!({"metadata": {"finalizers": ["example.com/pin"]}}),
        )
        .await,
        Some("rule mirror-finalizers"),
    );
    let owner = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "anchor", "uid": "0b0e4a1c-0000-4000-8000-00000000000a"}]);
    v.check(
        "a user gives a mirror an owner",
        patch(alice, "m", json!({"metadata": {"ownerReferences": owner}})).await,
        Some("rule mirror-owners"),
    );
    v.check(
        "a user gives an ordinary Job a finalizer",
        patch(
            alice,
            "plain",
            json!({"metadata": {"finalizers": ["example.com/pin"]}}),
        )
        .await,
        None,
    );
    let status = json!({"status": {"startTime": "2026-01-01T00:00:00Z", "active": 1}});
    v.check(
        "the Job controller writes a mirror's status",
        patch_status(&w.job_controller, "m", status).await,
        None,
    );
    v.check(
        "a cluster admin rewrites a mirror's labels through the status subresource",
        patch_status(
            admin,
            "m",
            json!({"metadata": {"labels": {"courier.dev/origin": "other"}}}),
        )
        .await,
        Some(LABELS),
    );
    v.check(
        "a user pins a mirror through the status subresource",
        patch_status(
            alice,
            "m",
            json!({"metadata": {"finalizers": ["example.com/pin"]}}),
        )
        .await,
        Some("rule mirror-finalizers"),
    );
    v.check(
        "Courier patches a mirror's spec and epoch",
        patch(
            courier,
            "m",
            json!({"metadata": {"labels": {"courier.dev/epoch": "2"}}, "spec": {"parallelism": 3}}),
        )
        .await,
        None,
    );

    // A mirror with a finalizer (Courier's to add): deleting it stays allowed, and the garbage
    // collector's removal of the finalizer goes through.
    v.check(
        "Courier creates a mirror with a finalizer",
        {
            let mut j = mirror("pinned");
            j["metadata"]["finalizers"] = json!(["example.com/cleanup"]);
            create(courier, TEAM, j).await
        },
        None,
    );
    v.check(
        "a user deletes a mirror",
        outcome(
            jobs(alice, TEAM)
                .delete("pinned", &DeleteParams::background())
                .await,
        ),
        None,
    );
    v.check(
        "the garbage collector removes a mirror's finalizer",
        patch(&w.gc, "pinned", json!({"metadata": {"finalizers": null}})).await,
        None,
    );
    v.check(
        "a user deletes another mirror",
        outcome(
            jobs(alice, TEAM)
                .delete("m", &DeleteParams::background())
                .await,
        ),
        None,
    );
    v.assert_all_right();
    assert!(
        jobs(admin, TEAM)
            .get_opt("pinned")
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .is_none(),
        "the mirror is gone once its finalizer is"
    );
}

fn privileged(name: &str) -> Value {
    let mut j = mirror(name);
    j["spec"]["template"]["spec"]["containers"][0]["securityContext"] = json!({"privileged": true});
    j
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn courier_cannot_run_privileged_or_system_mirrors_unless_the_operator_allows() {
    let w = Worker::start(&render(
        "courier-worker",
        "courier-worker",
        NS,
        &json!({"policy": {"privilegedNamespaces": ["gpu"]}}),
    ))
    .await;
    let mut v = Verdicts::default();
    let c = &w.courier;
    let denied_ns = "Courier may not run Jobs in namespace kube-system: rule denied-namespaces of the courier-worker chart, lifted by removing it from policy.deniedNamespaces";
    v.check(
        "Courier creates a mirror in kube-system",
        create(c, "kube-system", mirror("sys")).await,
        Some(denied_ns),
    );
    v.check(
        "Courier creates a mirror in kube-node-lease",
        create(c, "kube-node-lease", mirror("sys")).await,
        Some("rule denied-namespaces"),
    );
    v.check("Courier creates a privileged mirror", create(c, TEAM, privileged("p")).await,
        Some("privileged containers are refused in Courier mirrors in namespace team-a: rule no-privileged of the courier-worker chart, lifted by listing the namespace in policy.privilegedNamespaces"));
    v.check(
        "Courier creates a privileged mirror where the operator allows it",
        create(c, "gpu", privileged("p")).await,
        None,
    );
    let mut init = mirror("init");
    init["spec"]["template"]["spec"]["initContainers"] =
        json!([{"name": "i", "image": "busybox:1.36", "securityContext": {"privileged": true}}]);
    v.check(
        "Courier creates a mirror with a privileged init container",
        create(c, TEAM, init).await,
        Some("rule no-privileged"),
    );
    for field in ["hostNetwork", "hostPID", "hostIPC"] {
        let mut j = mirror("host");
        j["spec"]["template"]["spec"][field] = json!(true);
        v.check(
            &format!("Courier creates a mirror with {field}"),
            create(c, TEAM, j).await,
            Some("rule no-host-namespaces"),
        );
    }
    let mut hp = mirror("hostpath");
    hp["spec"]["template"]["spec"]["volumes"] =
        json!([{"name": "root", "hostPath": {"path": "/"}}]);
    v.check(
        "Courier creates a mirror with a hostPath volume",
        create(c, TEAM, hp.clone()).await,
        Some("rule no-host-path"),
    );
    v.check(
        "Courier creates a mirror with a hostPath volume where allowed",
        create(c, "gpu", hp).await,
        None,
    );
    let mut quiet = mirror("unprivileged");
    quiet["spec"]["template"]["spec"]["containers"][0]["securityContext"] =
        json!({"privileged": false, "runAsNonRoot": true});
    v.check(
        "Courier creates an explicitly unprivileged mirror",
        create(c, TEAM, quiet).await,
        None,
    );
    // The rules are on Courier's account: others are not Courier's business.
    v.check(
        "a cluster admin runs a privileged Job",
        create(&w.admin, TEAM, {
            let mut j = job("admin-priv", &[]);
            j["spec"]["template"]["spec"]["containers"][0]["securityContext"] =
                json!({"privileged": true});
            j
        })
        .await,
        None,
    );
    v.assert_all_right();

    // Turned off, Courier's account may create what its RBAC allows.
    let off = Worker::start(&render(
        "courier-worker",
        "courier-worker",
        NS,
        &json!({"policy": {"enabled": false}}),
    ))
    .await;
    assert_eq!(create(&off.courier, TEAM, privileged("p")).await, Ok(()));
    assert_eq!(
        create(&off.courier, "kube-system", mirror("sys")).await,
        Ok(())
    );
    assert!(
        create(&off.alice, TEAM, mirror("forged")).await.is_err(),
        "the label rules stay"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_exemption_follows_the_charts_account_and_extra_users() {
    let extra = "system:serviceaccount:courier-system:courier";
    let w = Worker::start(&render(
        "courier-worker",
        "w",
        "batch-ops",
        &json!({"serviceAccount": "dispatcher-eu", "extraAllowedUsernames": [extra]}),
    ))
    .await;
    for (token, user) in [
        ("eu", "system:serviceaccount:batch-ops:dispatcher-eu"),
        ("extra", extra),
    ] {
        w.sim.add_token(token, user, RuleSet::allow_all());
        let c = client(&w.sim.kubeconfig_for(token)).await;
        assert_eq!(
            create(&c, TEAM, mirror(token)).await,
            Ok(()),
            "{user} may create mirrors"
        );
        assert!(
            create(&c, TEAM, privileged(&format!("{token}-p")))
                .await
                .is_err(),
            "{user} is held to the mirror content rules"
        );
    }
    let denied = create(&w.courier, TEAM, mirror("default-account")).await;
    assert!(
        matches!(&denied, Err((403, m)) if m.contains(LABELS)),
        "the default account name is not exempt once the chart names another: {denied:?}"
    );
}
