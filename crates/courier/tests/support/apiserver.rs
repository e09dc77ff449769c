//! A kubesim server with a chart's ValidatingAdmissionPolicy and binding installed, reached over HTTP
//! with one client per identity: what worker_policy.rs and management_hardening.rs drive.

use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use kubesim::kinds::ssar::RuleSet;
use kubesim::{Role, Sim, SimOptions};
use serde_json::{Value, json};

use super::Rendered;

/// The namespace the users' Jobs live in.
pub const TEAM: &str = "team-a";

/// A kubesim server holding a chart's policy and binding, and the namespaces asked for.
pub struct Server {
    pub sim: Sim,
    /// `kubernetes-admin` (token `admin`).
    pub admin: Client,
}

impl Server {
    /// Starts kubesim in `role`, adds a token per `(token, username)` (RBAC allows all: only the
    /// policy decides), creates the chart's ValidatingAdmissionPolicy and binding as the admin,
    /// then `namespaces`.
    pub async fn start(
        chart: &Rendered,
        role: Role,
        users: &[(&str, &str)],
        namespaces: &[&str],
    ) -> Server {
        let sim = Sim::start(SimOptions {
            role,
            ..Default::default()
        })
        .await
        .unwrap_or_else(|e| panic!("kubesim: {e}"));
        sim.add_token("admin", "kubernetes-admin", RuleSet::allow_all());
        for (token, user) in users {
            sim.add_token(token, user, RuleSet::allow_all());
        }
        let admin = client(&sim, "admin").await;
        install_policy(&admin, chart).await;
        for ns in namespaces {
            namespaces_api(&admin)
                .create(
                    &PostParams::default(),
                    &obj(
                        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
                    ),
                )
                .await
                .unwrap_or_else(|e| panic!("{e}"));
        }
        Server { sim, admin }
    }

    pub async fn client(&self, token: &str) -> Client {
        client(&self.sim, token).await
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.sim.shutdown();
    }
}

/// Creates `chart`'s ValidatingAdmissionPolicy and its binding as `admin`.
pub async fn install_policy(admin: &Client, chart: &Rendered) {
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
}

/// A client authenticating with `token`, without retries (a refusal is the answer).
pub async fn client(sim: &Sim, token: &str) -> Client {
    let kc = Kubeconfig::from_yaml(&sim.kubeconfig_for(token)).unwrap_or_else(|e| panic!("{e}"));
    let mut cfg = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    cfg.default_retry = false;
    Client::try_from(cfg).unwrap_or_else(|e| panic!("{e}"))
}

pub fn ar(group: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1", kind), plural)
}

pub fn obj(v: Value) -> DynamicObject {
    serde_json::from_value(v).unwrap_or_else(|e| panic!("{e}"))
}

pub fn jobs(c: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(c.clone(), ns, &ar("batch", "Job", "jobs"))
}

pub fn namespaces_api(c: &Client) -> Api<DynamicObject> {
    Api::all_with(c.clone(), &ar("", "Namespace", "namespaces"))
}

/// `Ok` when admitted, else the API error's code and message.
pub type Outcome = Result<(), (u16, String)>;

pub fn outcome<T>(r: Result<T, kube::Error>) -> Outcome {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) => Err((s.code, s.message)),
        Err(e) => panic!("not an API answer: {e}"),
    }
}

pub async fn create(c: &Client, ns: &str, j: Value) -> Outcome {
    outcome(jobs(c, ns).create(&PostParams::default(), &obj(j)).await)
}

/// A JSON merge patch of Job `name` in [`TEAM`].
pub async fn patch(c: &Client, name: &str, p: Value) -> Outcome {
    outcome(
        jobs(c, TEAM)
            .patch(name, &PatchParams::default(), &Patch::Merge(p))
            .await,
    )
}

/// A JSON merge patch of Job `name`'s status subresource in [`TEAM`].
pub async fn patch_status(c: &Client, name: &str, p: Value) -> Outcome {
    outcome(
        jobs(c, TEAM)
            .patch_status(name, &PatchParams::default(), &Patch::Merge(p))
            .await,
    )
}

/// Collects wrong decisions instead of stopping at the first.
#[derive(Default)]
pub struct Verdicts(Vec<String>);

impl Verdicts {
    /// `want`: `None` = admitted, `Some(fragment)` = a 403 whose message contains it.
    pub fn check(&mut self, what: &str, got: Outcome, want: Option<&str>) {
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

    pub fn assert_all_right(self) {
        assert!(
            self.0.is_empty(),
            "the policy decided wrongly:\n  {}",
            self.0.join("\n  ")
        );
    }
}
