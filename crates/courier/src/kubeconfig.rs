//! Worker kubeconfigs as `courier cluster add` sees them: pick one context, make the result
//! self-contained (just that context, its cluster and its user), and judge its credentials against
//! the controller's policy (programs, local files, skipped TLS verification).

use std::fmt;
use std::path::Path;

use anyhow::{Context as _, bail};
use base64::Engine;
use courier_controller::CredentialPolicy;
use kube::config::{Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext};

/// A class of credentials the controller refuses unless started with the matching flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CredentialClass {
    /// Runs a program (exec plugin, auth-provider).
    Exec,
    /// Reads a local file (tokenFile, certificate or key paths).
    File,
    /// Skips TLS verification.
    Insecure,
}

impl CredentialClass {
    /// The flag that allows this class (on `courier run` and `courier cluster add`).
    pub fn flag(self) -> &'static str {
        match self {
            CredentialClass::Exec => "--allow-exec-kubeconfigs",
            CredentialClass::File => "--allow-file-kubeconfigs",
            CredentialClass::Insecure => "--allow-insecure-kubeconfigs",
        }
    }

    pub fn allowed_by(self, policy: &CredentialPolicy) -> bool {
        match self {
            CredentialClass::Exec => policy.allow_exec,
            CredentialClass::File => policy.allow_file_references,
            CredentialClass::Insecure => policy.allow_insecure_tls,
        }
    }
}

/// One field of a kubeconfig that falls in a refused class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialProblem {
    pub class: CredentialClass,
    /// The field, as a path into the kubeconfig, e.g. `users[w1].user.exec`.
    pub field: String,
    /// What the field does and how to do without it.
    pub why: String,
}

impl fmt::Display for CredentialProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.field, self.why)
    }
}

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

/// Every field of a (minified) kubeconfig that the credential policy cares about.
pub fn credential_problems(kc: &Kubeconfig) -> Vec<CredentialProblem> {
    let mut out = Vec::new();
    for NamedCluster { name, cluster, .. } in &kc.clusters {
        let Some(c) = cluster else { continue };
        if c.insecure_skip_tls_verify == Some(true) {
            out.push(CredentialProblem {
                class: CredentialClass::Insecure,
                field: format!("clusters[{name}].cluster.insecure-skip-tls-verify"),
                why: "turns off TLS verification of the worker's API server; put the cluster's CA in \
                      certificate-authority-data instead"
                    .into(),
            });
        }
        if c.certificate_authority.is_some() {
            out.push(file_problem(
                format!("clusters[{name}].cluster.certificate-authority"),
                "certificate-authority-data",
            ));
        }
    }
    for NamedAuthInfo {
        name, auth_info, ..
    } in &kc.auth_infos
    {
        let Some(a) = auth_info else { continue };
        if a.exec.is_some() {
            out.push(CredentialProblem {
                class: CredentialClass::Exec,
                field: format!("users[{name}].user.exec"),
                why: "runs a program (an exec credential plugin) inside the controller; use a \
                      ServiceAccount token (token) or a client certificate (client-certificate-data) \
                      instead"
                    .into(),
            });
        }
        if a.auth_provider.is_some() {
            out.push(CredentialProblem {
                class: CredentialClass::Exec,
                field: format!("users[{name}].user.auth-provider"),
                why: "runs a provider-specific login inside the controller; use a ServiceAccount \
                      token (token) instead"
                    .into(),
            });
        }
        if a.token_file.is_some() {
            out.push(file_problem(
                format!("users[{name}].user.tokenFile"),
                "token",
            ));
        }
        if a.client_certificate.is_some() {
            out.push(file_problem(
                format!("users[{name}].user.client-certificate"),
                "client-certificate-data",
            ));
        }
        if a.client_key.is_some() {
            out.push(file_problem(
                format!("users[{name}].user.client-key"),
                "client-key-data",
            ));
        }
    }
    out
}

fn file_problem(field: String, inline: &str) -> CredentialProblem {
    CredentialProblem {
        class: CredentialClass::File,
        field,
        why: format!(
            "reads a file on the controller's machine, which the controller does not have; embed the \
             contents in {inline} (pass --flatten, or `kubectl config view --minify --flatten`)"
        ),
    }
}

/// The problems `policy` does not allow, as one error message (None = all allowed).
pub fn policy_violation(
    problems: &[CredentialProblem],
    policy: &CredentialPolicy,
) -> Option<String> {
    let refused: Vec<&CredentialProblem> = problems
        .iter()
        .filter(|p| !p.class.allowed_by(policy))
        .collect();
    if refused.is_empty() {
        return None;
    }
    let lines: Vec<String> = refused
        .iter()
        .map(|p| {
            format!(
                "  - {p} (or allow this class with {} here and on `courier run`)",
                p.class.flag()
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

/// `--server URL`: only https:// (Courier talks to workers over TLS it verifies).
pub fn check_server_url(url: &str) -> anyhow::Result<()> {
    if !url.starts_with("https://") || url.len() <= "https://".len() {
        bail!(
            "--server {url:?} is not an https:// URL; Courier only talks to workers over TLS it verifies"
        );
    }
    Ok(())
}

/// The kubeconfig as YAML text (what goes into the Secret).
pub fn to_yaml(kc: &Kubeconfig) -> anyhow::Result<String> {
    serde_saphyr::to_string(kc).context("serialising the kubeconfig")
}

#[cfg(test)]
mod tests {
    use super::*;

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
