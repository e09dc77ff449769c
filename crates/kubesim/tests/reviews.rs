//! TokenReview and SubjectAccessReview over HTTPS through a real kube-rs client: what a component
//! that authenticates its own callers (Courier's web view) sends and reads back. (Checked by breaking
//! it: with `sar::is_review` not routing `tokenreviews`, the first create fails.)

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
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

fn token_review(token: &str) -> TokenReview {
    TokenReview {
        spec: TokenReviewSpec {
            token: Some(token.into()),
            audiences: None,
        },
        ..Default::default()
    }
}

fn list_jobs(user: &str, namespace: &str) -> SubjectAccessReview {
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.into()),
            resource_attributes: Some(ResourceAttributes {
                verb: Some("list".into()),
                group: Some("batch".into()),
                resource: Some("jobs".into()),
                namespace: Some(namespace.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[tokio::test]
async fn token_and_access_reviews_answer_like_the_api_server() {
    let sim = Sim::start(SimOptions {
        role: Role::ApiServer,
        ..Default::default()
    })
    .await
    .unwrap();
    sim.add_token(
        "alice-token",
        "alice",
        RuleSet {
            allow: vec![Rule::new(&["list"], &["batch"], &["jobs"]).in_namespaces(&["team-a"])],
            deny: Vec::new(),
        },
    );
    // The reviewer: allowed to create both reviews and nothing else (system:auth-delegator).
    sim.add_token(
        "reviewer",
        "system:serviceaccount:courier-system:courier",
        RuleSet {
            allow: vec![
                Rule::new(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
                Rule::new(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["subjectaccessreviews"],
                ),
            ],
            deny: Vec::new(),
        },
    );
    let reviewer = client(&sim.kubeconfig_for("reviewer")).await;
    let trs: Api<TokenReview> = Api::all(reviewer.clone());
    let pp = PostParams::default();

    let known = trs.create(&pp, &token_review("alice-token")).await.unwrap();
    let st = known.status.unwrap();
    assert_eq!(st.authenticated, Some(true));
    let user = st.user.unwrap();
    assert_eq!(user.username.as_deref(), Some("alice"));
    assert!(user.uid.is_some_and(|u| !u.is_empty()));
    assert_eq!(user.groups, Some(vec!["system:authenticated".to_string()]));

    let unknown = trs.create(&pp, &token_review("made-up")).await.unwrap();
    let st = unknown.status.unwrap();
    assert_ne!(st.authenticated, Some(true));
    assert!(st.error.is_none(), "an unknown token is not an error");

    match trs.create(&pp, &token_review("")).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 400);
            assert_eq!(
                s.message,
                "token is required for TokenReview in authentication"
            );
        }
        other => panic!("expected 400, got {other:?}"),
    }

    let sars: Api<SubjectAccessReview> = Api::all(reviewer);
    let allowed = sars
        .create(&pp, &list_jobs("alice", "team-a"))
        .await
        .unwrap();
    assert!(allowed.status.unwrap().allowed);
    let refused = sars
        .create(&pp, &list_jobs("alice", "team-b"))
        .await
        .unwrap();
    assert!(!refused.status.unwrap().allowed);

    // Creating reviews is a right like any other: alice has not got it.
    let alice = client(&sim.kubeconfig_for("alice-token")).await;
    match Api::<TokenReview>::all(alice)
        .create(&pp, &token_review("reviewer"))
        .await
    {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 403);
            assert_eq!(
                s.message,
                "tokenreviews.authentication.k8s.io is forbidden: User \"alice\" cannot create \
                 resource \"tokenreviews\" in API group \"authentication.k8s.io\" at the cluster scope"
            );
        }
        other => panic!("expected 403, got {other:?}"),
    }
    sim.shutdown();
}
