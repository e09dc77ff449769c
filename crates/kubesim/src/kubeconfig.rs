//! Kubeconfig files for a kubesim instance (CA embedded, bearer token), as a cluster admin would get.

use base64::Engine;

/// A kubeconfig with one cluster, one user and one context, all named `name`.
pub fn render(name: &str, server: &str, ca_pem: &str, token: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let q = |s: &str| serde_json::to_string(s).unwrap_or_default();
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {n}\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: {n}\n  user:\n    token: {token}\ncontexts:\n- name: {n}\n  context:\n    cluster: {n}\n    user: {n}\ncurrent-context: {n}\n",
        n = q(name),
        server = q(server),
        token = q(token),
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn renders_a_parseable_kubeconfig() {
        let k = super::render("w1", "https://127.0.0.1:1234", "PEM", "tok");
        let v: serde_json::Value = serde_saphyr::from_str(&k).unwrap();
        assert_eq!(
            v["clusters"][0]["cluster"]["server"],
            "https://127.0.0.1:1234"
        );
        assert_eq!(v["users"][0]["user"]["token"], "tok");
        assert_eq!(v["current-context"], "w1");
    }
}
