//! Files an image carries besides its programs, written into each container's root file
//! system: the agnhost image's `/localhost.crt` and `/localhost.key` (upstream's Dockerfiles
//! `ADD porter/localhost.crt localhost.crt`), the self-signed "localhost" pair netexec's and
//! porter's TLS servers are pointed at (`--tls-cert-file /localhost.crt`).

use std::sync::OnceLock;

use rcgen::{CertificateParams, DnType, KeyPair};
use tracing::warn;

use crate::node::registry::{Image, Tool};

/// The files of `image`, as (path relative to the root, content).
pub fn of(image: &Image) -> &'static [(&'static str, String)] {
    if image.has(Tool::Agnhost) { agnhost() } else { &[] }
}

/// agnhost's pair, generated once per process (upstream's is a fixed self-signed certificate
/// for "localhost"; clients of it skip verification, as the kubelet does for HTTPS hooks and
/// probes).
fn agnhost() -> &'static [(&'static str, String)] {
    static FILES: OnceLock<Vec<(&'static str, String)>> = OnceLock::new();
    FILES.get_or_init(|| match localhost_pair() {
        Ok((cert, key)) => vec![("localhost.crt", cert), ("localhost.key", key)],
        Err(e) => {
            warn!(error = %e, "generating agnhost's localhost certificate failed");
            Vec::new()
        }
    })
}

/// A self-signed certificate for `localhost` and its key, both PEM.
fn localhost_pair() -> Result<(String, String), rcgen::Error> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(vec!["localhost".to_string()])?;
    params.distinguished_name.push(DnType::CommonName, "localhost");
    let cert = params.self_signed(&key)?;
    Ok((cert.pem(), key.serialize_pem()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_localhost_pair_serves_tls() {
        let (cert, key) = localhost_pair().expect("pair");
        assert!(cert.starts_with("-----BEGIN CERTIFICATE-----"));
        super::super::servers::tls_from_pem(cert.as_bytes(), key.as_bytes()).expect("a usable serving pair");
        let files = agnhost();
        let names: Vec<&str> = files.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["localhost.crt", "localhost.key"]);
    }
}
