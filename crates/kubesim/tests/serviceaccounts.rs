//! ServiceAccounts and TokenRequest over HTTPS through a real kube-rs client (what `courier cluster
//! add --token-ttl` and `kubectl create token` send): a bound token is the ServiceAccount, with the
//! rights granted to it, until it expires; a missing account is the ordinary 404. (Checked by
//! breaking it: with the expiry check in `Users::authenticate` removed, the last request succeeds.)

use std::time::Duration;

use k8s_openapi::api::authentication::v1::{SelfSubjectReview, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use kubesim::kinds::ssar::{Rule, RuleSet};
use kubesim::{Role, Sim, SimOptions};

async fn client(kubeconfig: &str) -> Client {
    let kc = Kubeconfig::from_yaml(kubeconfig).unwrap();
    let cfg = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(cfg).unwrap()
}

fn request(seconds: Option<i64>) -> TokenRequest {
    TokenRequest {
        metadata: ObjectMeta::default(),
        spec: TokenRequestSpec {
            audiences: Vec::new(),
            bound_object_ref: None,
            expiration_seconds: seconds,
        },
        status: None,
    }
}

fn api_error(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other}"),
    }
}

#[tokio::test]
async fn a_requested_token_is_the_service_account_until_it_expires() {
    let sim = Sim::start(SimOptions {
        role: Role::ApiServer,
        ..Default::default()
    })
    .await
    .unwrap();
    let admin = client(&sim.kubeconfig()).await;
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), "default");
    let created = accounts
        .create(
            &PostParams::default(),
            &ServiceAccount {
                metadata: ObjectMeta {
                    name: Some("robot".into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert!(created.metadata.uid.is_some());
    assert_eq!(
        accounts
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );

    let missing = accounts
        .create_token_request("nobody", &PostParams::default(), &request(None))
        .await
        .map_err(api_error)
        .unwrap_err();
    assert_eq!(missing.code, 404);
    assert_eq!(missing.message, "serviceaccounts \"nobody\" not found");
    let short = accounts
        .create_token_request("robot", &PostParams::default(), &request(Some(599)))
        .await
        .map_err(api_error)
        .unwrap_err();
    assert_eq!((short.code, short.reason.as_str()), (422, "Invalid"));

    let user = "system:serviceaccount:default:robot";
    sim.grant(
        user,
        RuleSet {
            allow: vec![
                Rule::new(&["list"], &["batch"], &["jobs"]),
                // What every authenticated user gets from system:basic-user (kubesim grants
                // nothing implicitly).
                Rule::new(
                    &["create"],
                    &["authentication.k8s.io"],
                    &["selfsubjectreviews"],
                ),
            ],
            deny: Vec::new(),
        },
    );
    let answer = accounts
        .create_token_request("robot", &PostParams::default(), &request(None))
        .await
        .unwrap();
    assert_eq!(answer.spec.expiration_seconds, Some(3600));
    let token = answer.status.map(|s| s.token).unwrap_or_default();
    let robot = client(&sim.kubeconfig_for(&token)).await;
    let who = Api::<SelfSubjectReview>::all(robot.clone())
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .unwrap();
    let info = who.status.and_then(|s| s.user_info).unwrap_or_default();
    assert_eq!(info.username.as_deref(), Some(user));
    assert_eq!(
        info.groups.unwrap_or_default(),
        [
            "system:serviceaccounts",
            "system:serviceaccounts:default",
            "system:authenticated"
        ]
    );
    let jobs: Api<Job> = Api::namespaced(robot, "default");
    jobs.list(&ListParams::default()).await.unwrap();
    assert_eq!(
        api_error(jobs.delete("x", &Default::default()).await.unwrap_err()).code,
        403,
        "only what was granted"
    );

    sim.advance_token_clock(Duration::from_secs(3600));
    let expired = api_error(jobs.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(expired.code, 401);
}
