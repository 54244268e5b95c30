//! Certificates generated at start: a CA and a serving certificate for the block's address, and
//! the rustls configurations built from them.
//!
//! The main structure is [`Certs`]. The CA lives only in memory: every start makes a new one,
//! and the kubeconfig carries it, as kind/kwok clusters do.

use std::net::Ipv4Addr;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose, SanType};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::error::Error;

/// The CA and the server's TLS configuration.
pub struct Certs {
    /// The CA certificate, PEM (goes into kubeconfigs as `certificate-authority-data`).
    pub ca_pem: String,
    /// The CA certificate, DER (for `kube::Config::root_cert`).
    pub ca_der: Vec<u8>,
    /// The serving configuration (HTTP/2 and HTTP/1.1 offered through ALPN).
    pub server_config: Arc<rustls::ServerConfig>,
}

impl std::fmt::Debug for Certs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Certs").finish_non_exhaustive()
    }
}

/// Generates a CA and a serving certificate valid for `ip`, `127.0.0.1`, `localhost`, the
/// `kubernetes` Service names and, like upstream's (which adds the first Service IP), the
/// `kubernetes` Service ClusterIP `service_ip`, so in-cluster clients verify it.
pub fn generate(ip: Ipv4Addr, service_ip: Option<Ipv4Addr>) -> Result<Certs, Error> {
    crate::install_crypto_provider();
    let ca_key = KeyPair::generate().map_err(Error::Certificate)?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(Error::Certificate)?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "crossconf-sim-ca");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key).map_err(Error::Certificate)?;
    let issuer = rcgen::Issuer::new(ca_params, ca_key);

    let key = KeyPair::generate().map_err(Error::Certificate)?;
    let mut params = CertificateParams::new(vec![
        "localhost".to_string(),
        "kubernetes".to_string(),
        "kubernetes.default".to_string(),
        "kubernetes.default.svc".to_string(),
        "kubernetes.default.svc.cluster.local".to_string(),
    ])
    .map_err(Error::Certificate)?;
    params.distinguished_name.push(DnType::CommonName, "kube-apiserver");
    params.subject_alt_names.push(SanType::IpAddress(ip.into()));
    if let Some(svc) = service_ip.filter(|s| *s != ip) {
        params.subject_alt_names.push(SanType::IpAddress(svc.into()));
    }
    if ip != Ipv4Addr::LOCALHOST {
        params
            .subject_alt_names
            .push(SanType::IpAddress(Ipv4Addr::LOCALHOST.into()));
    }
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params.signed_by(&key, &issuer).map_err(Error::Certificate)?;

    let chain: Vec<CertificateDer<'static>> = vec![cert.der().clone(), ca_cert.der().clone()];
    let private = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let mut server_config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, private)
        .map_err(Error::Tls)?;
    server_config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Certs {
        ca_pem: ca_cert.pem(),
        ca_der: ca_cert.der().to_vec(),
        server_config: Arc::new(server_config),
    })
}

/// A CA certificate (PEM) that signed nothing this server serves: the `kubeconfig-stale-ca`
/// fault switch hands it to outside clients, as a kubeconfig kept from before a rotation.
pub fn unrelated_ca_pem() -> Result<String, Error> {
    let key = KeyPair::generate().map_err(Error::Certificate)?;
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(Error::Certificate)?;
    params.distinguished_name.push(DnType::CommonName, "crossconf-sim-ca");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    Ok(params.self_signed(&key).map_err(Error::Certificate)?.pem())
}

/// A client configuration that accepts any server certificate, for dialling kubelets: the real
/// apiserver does the same without `--kubelet-certificate-authority`, and the simulated kubelets
/// serve self-signed certificates.
pub fn insecure_client_config() -> Arc<rustls::ClientConfig> {
    crate::install_crypto_provider();
    let provider = rustls::crypto::ring::default_provider();
    let mut cfg = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(NoVerify))
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(cfg)
}

/// Accepts every certificate; signatures are still checked so the handshake is well-formed.
#[derive(Debug)]
struct NoVerify;

impl rustls::client::danger::ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &rustls::crypto::ring::default_provider().signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &rustls::crypto::ring::default_provider().signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        rustls::crypto::ring::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_ca_and_server_config() {
        let c = generate(Ipv4Addr::new(127, 42, 0, 1), Some(Ipv4Addr::new(127, 42, 96, 1))).unwrap();
        assert!(c.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(!c.ca_der.is_empty());
        assert!(c.server_config.alpn_protocols.contains(&b"h2".to_vec()));
    }

    #[test]
    fn the_unrelated_ca_is_another_ca() {
        let c = generate(Ipv4Addr::new(127, 42, 0, 1), None).unwrap();
        let stale = unrelated_ca_pem().unwrap();
        assert!(stale.starts_with("-----BEGIN CERTIFICATE-----"));
        assert_ne!(stale, c.ca_pem);
    }
}
