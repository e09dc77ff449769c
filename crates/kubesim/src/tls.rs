//! A generated CA and a serving certificate for 127.0.0.1/localhost, so clients verify TLS against
//! kubesim exactly as they would against a real cluster (the CA goes into the kubeconfig).

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
    SanType,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("generating certificates: {0}")]
    Rcgen(#[from] rcgen::Error),
    #[error("building the TLS server configuration: {0}")]
    Rustls(#[from] rustls::Error),
}

/// The CA (PEM, for kubeconfigs) and a ready server configuration.
pub struct Certs {
    pub ca_pem: String,
    pub server: Arc<rustls::ServerConfig>,
}

/// Generates a fresh CA and a serving certificate for `localhost`, `127.0.0.1` and `extra_hosts`.
pub fn generate(extra_hosts: &[String]) -> Result<Certs, TlsError> {
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "kubesim-ca");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = CertifiedIssuer::self_signed(ca_params, ca_key)?;

    let mut names = vec![
        "localhost".to_string(),
        "kubernetes".to_string(),
        "kubernetes.default.svc".to_string(),
    ];
    names.extend(extra_hosts.iter().cloned());
    let mut params = CertificateParams::new(names)?;
    params
        .subject_alt_names
        .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    params
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &ca)?;

    let chain = vec![CertificateDer::from(cert.der().to_vec())];
    let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)?;
    server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Certs {
        ca_pem: ca.pem(),
        server: Arc::new(server),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn generates_a_ca_and_server_config() {
        let c = super::generate(&[]).unwrap();
        assert!(c.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert_eq!(c.server.alpn_protocols.len(), 2);
    }
}
