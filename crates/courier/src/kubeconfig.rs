//! Worker kubeconfigs as `courier cluster add` sees them: pick one context, make the result
//! self-contained (just that context, its cluster and its user), and judge its credentials against
//! the controller's policy (programs, local files, skipped TLS verification).

use std::path::Path;

use anyhow::{Context as _, bail};
use base64::Engine;
use courier_controller::CredentialPolicy;
use courier_controller::credentials::{self, Refusal};
use kube::config::{Kubeconfig, NamedCluster, NamedContext};

/// A kubeconfig reduced to one context.
#[derive(Debug, Clone)]
pub struct Minified {
    pub context: String,
    pub user_name: Option<String>,
    pub server: String,
    pub kubeconfig: Kubeconfig,
}

/// Reduces `kc` to `context` (or its current-context). Errors name the missing piece and the fix.
pub fn minify(kc: &Kubeconfig, context: Option<&str>, source: &str) -> anyhow::Result<Minified> {
    let available = || {
        let names: Vec<&str> = kc.contexts.iter().map(|c| c.name.as_str()).collect();
        if names.is_empty() {
            "it has no contexts".to_string()
        } else {
            format!("its contexts are: {}", names.join(", "))
        }
    };
    let ctx_name = match context.or(kc.current_context.as_deref().filter(|c| !c.is_empty())) {
        Some(c) => c.to_string(),
        None => bail!(
            "{source} has no current-context; pass --cluster-context NAME ({})",
            available()
        ),
    };
    let Some(named_ctx) = kc.contexts.iter().find(|c| c.name == ctx_name) else {
        bail!(
            "context {ctx_name:?} is not in {source}; pass --cluster-context with one of its contexts ({})",
            available()
        );
    };
    let Some(ctx) = &named_ctx.context else {
        bail!("context {ctx_name:?} in {source} is empty (no cluster or user); fix the kubeconfig");
    };
    let Some(named_cluster) = kc.clusters.iter().find(|c| c.name == ctx.cluster) else {
        bail!(
            "context {ctx_name:?} in {source} names cluster {:?}, which is not in the file's clusters list",
            ctx.cluster
        );
    };
    let server = named_cluster
        .cluster
        .as_ref()
        .and_then(|c| c.server.clone())
        .filter(|s| !s.is_empty());
    let Some(server) = server else {
        bail!(
            "cluster {:?} in {source} has no server address (clusters[{}].cluster.server); fix the kubeconfig",
            ctx.cluster,
            ctx.cluster
        );
    };
    let user = match ctx.user.as_deref().filter(|u| !u.is_empty()) {
        Some(u) => match kc.auth_infos.iter().find(|a| a.name == u) {
            Some(a) => Some(a.clone()),
            None => bail!(
                "context {ctx_name:?} in {source} names user {u:?}, which is not in the file's users list"
            ),
        },
        None => None,
    };
    let user_name = user.as_ref().map(|u| u.name.clone());
    let kubeconfig = Kubeconfig {
        api_version: Some("v1".into()),
        kind: Some("Config".into()),
        clusters: vec![NamedCluster {
            name: named_cluster.name.clone(),
            cluster: named_cluster.cluster.clone(),
            other: Default::default(),
        }],
        auth_infos: user.into_iter().collect(),
        contexts: vec![NamedContext {
            name: ctx_name.clone(),
            context: Some(kube::config::Context {
                cluster: ctx.cluster.clone(),
                user: ctx.user.clone(),
                namespace: None,
                extensions: None,
                other: Default::default(),
            }),
            other: Default::default(),
        }],
        current_context: Some(ctx_name.clone()),
        ..Default::default()
    };
    Ok(Minified {
        context: ctx_name,
        user_name,
        server,
        kubeconfig,
    })
}

/// Every field of a (minified) kubeconfig in a class the credential policy refuses (the
/// controller's own rule, so `cluster add` and `courier run` never disagree).
pub use courier_controller::credentials::refusals as credential_problems;

/// The problems `policy` does not allow, as one error message (None = all allowed).
pub fn policy_violation(problems: &[Refusal], policy: &CredentialPolicy) -> Option<String> {
    let refused = credentials::refused(problems, *policy);
    if refused.is_empty() {
        return None;
    }
    let lines: Vec<String> = refused
        .iter()
        .map(|p| {
            format!(
                "  - {} {} (or allow this class with {} here and on `courier run`)",
                p.field,
                p.what,
                p.flag()
            )
        })
        .collect();
    Some(format!(
        "the kubeconfig uses credentials Courier refuses by default:\n{}",
        lines.join("\n")
    ))
}

/// Replaces file references with the files' contents (`--flatten`); relative paths are resolved
/// against the kubeconfig's directory, like kubectl does. Returns the fields that were inlined.
pub fn flatten(kc: &mut Kubeconfig, base: &Path) -> anyhow::Result<Vec<String>> {
    let b64 = |bytes: Vec<u8>| base64::engine::general_purpose::STANDARD.encode(bytes);
    let read = |field: &str, p: &str| -> anyhow::Result<Vec<u8>> {
        let path = base.join(p);
        std::fs::read(&path).with_context(|| format!("{field}: cannot read {}", path.display()))
    };
    let mut done = Vec::new();
    for nc in &mut kc.clusters {
        let name = nc.name.clone();
        let Some(c) = &mut nc.cluster else { continue };
        if let Some(p) = c.certificate_authority.take() {
            let field = format!("clusters[{name}].cluster.certificate-authority");
            c.certificate_authority_data = Some(b64(read(&field, &p)?));
            done.push(field);
        }
    }
    for na in &mut kc.auth_infos {
        let name = na.name.clone();
        let Some(a) = &mut na.auth_info else { continue };
        if let Some(p) = a.token_file.take() {
            let field = format!("users[{name}].user.tokenFile");
            let token = String::from_utf8(read(&field, &p)?)
                .with_context(|| format!("{field}: {p} is not text"))?;
            a.token = Some(token.trim().to_string().into());
            done.push(field);
        }
        if let Some(p) = a.client_certificate.take() {
            let field = format!("users[{name}].user.client-certificate");
            a.client_certificate_data = Some(b64(read(&field, &p)?));
            done.push(field);
        }
        if let Some(p) = a.client_key.take() {
            let field = format!("users[{name}].user.client-key");
            a.client_key_data = Some(b64(read(&field, &p)?).into());
            done.push(field);
        }
    }
    Ok(done)
}

/// `--server URL`: the controller's server rule (https:// only, no credentials in the URL).
pub fn check_server_url(url: &str) -> anyhow::Result<()> {
    match credentials::server_problem(url) {
        Some(p) => bail!("--server {p}"),
        None => Ok(()),
    }
}

/// The kubeconfig as YAML text (what goes into the Secret).
pub fn to_yaml(kc: &Kubeconfig) -> anyhow::Result<String> {
    serde_saphyr::to_string(kc).context("serialising the kubeconfig")
}

#[cfg(test)]
mod tests {
    use super::*;
    use courier_controller::credentials::CredentialClass;

    const KC: &str = r#"
apiVersion: v1
kind: Config
clusters:
- name: a
  cluster: {server: "https://a:6443", certificate-authority-data: Q0E=}
- name: b
  cluster: {server: "https://b:6443", insecure-skip-tls-verify: true}
users:
- name: ua
  user: {token: secret-a}
- name: ub
  user:
    exec: {apiVersion: client.authentication.k8s.io/v1, command: aws}
- name: uc
  user: {tokenFile: tok.txt, client-certificate: c.pem, client-key: k.pem}
contexts:
- name: ctx-a
  context: {cluster: a, user: ua, namespace: team}
- name: ctx-b
  context: {cluster: b, user: ub}
- name: ctx-c
  context: {cluster: a, user: uc}
- name: ctx-missing
  context: {cluster: nope, user: ua}
current-context: ctx-a
"#;

    fn kc() -> Kubeconfig {
        Kubeconfig::from_yaml(KC).expect("test kubeconfig parses")
    }

    #[test]
    fn minify_keeps_one_context() {
        let m = minify(&kc(), None, "f").expect("minify");
        assert_eq!(m.context, "ctx-a");
        assert_eq!(m.server, "https://a:6443");
        assert_eq!(m.kubeconfig.clusters.len(), 1);
        assert_eq!(m.kubeconfig.auth_infos.len(), 1);
        assert_eq!(m.kubeconfig.contexts.len(), 1);
        assert!(credential_problems(&m.kubeconfig).is_empty());
        let yaml = to_yaml(&m.kubeconfig).expect("yaml");
        assert!(yaml.contains("secret-a"), "{yaml}");
        let back = Kubeconfig::from_yaml(&yaml).expect("round trip");
        assert_eq!(back.current_context.as_deref(), Some("ctx-a"));
    }

    #[test]
    fn minify_errors_name_the_fix() {
        let e = minify(&kc(), Some("zzz"), "f").unwrap_err().to_string();
        assert!(e.contains("\"zzz\"") && e.contains("ctx-a, ctx-b"), "{e}");
        let e = minify(&kc(), Some("ctx-missing"), "f")
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"nope\""), "{e}");
        let mut no_current = kc();
        no_current.current_context = None;
        let e = minify(&no_current, None, "f").unwrap_err().to_string();
        assert!(e.contains("--cluster-context"), "{e}");
    }

    #[test]
    fn credential_classes() {
        let b = minify(&kc(), Some("ctx-b"), "f").expect("minify");
        let p = credential_problems(&b.kubeconfig);
        let fields: Vec<&str> = p.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "clusters[b].cluster.insecure-skip-tls-verify",
                "users[ub].user.exec"
            ]
        );
        let msg = policy_violation(&p, &CredentialPolicy::default()).expect("refused");
        assert!(msg.contains("--allow-exec-kubeconfigs") && msg.contains("--allow-insecure"));
        let all = CredentialPolicy {
            allow_exec: true,
            allow_file_references: false,
            allow_insecure_tls: true,
        };
        assert!(policy_violation(&p, &all).is_none());
        let c = minify(&kc(), Some("ctx-c"), "f").expect("minify");
        let p = credential_problems(&c.kubeconfig);
        assert_eq!(p.len(), 3);
        assert!(p.iter().all(|p| p.class == CredentialClass::File));
        assert!(check_server_url("http://w1:6443").is_err());
        assert!(check_server_url("https://w1:6443").is_ok());
    }

    #[test]
    fn flatten_inlines_files() {
        let dir = std::env::temp_dir().join(format!("courier-flatten-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tmp");
        std::fs::write(dir.join("tok.txt"), "tok\n").expect("write");
        std::fs::write(dir.join("c.pem"), "CERT").expect("write");
        std::fs::write(dir.join("k.pem"), "KEY").expect("write");
        let mut c = minify(&kc(), Some("ctx-c"), "f")
            .expect("minify")
            .kubeconfig;
        let done = flatten(&mut c, &dir).expect("flatten");
        assert_eq!(done.len(), 3);
        assert!(credential_problems(&c).is_empty());
        let yaml = to_yaml(&c).expect("yaml");
        assert!(yaml.contains("token: tok"), "{yaml}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
