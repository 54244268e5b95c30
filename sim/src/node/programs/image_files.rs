//! Files an image carries besides its programs, written into each container's root file
//! system:
//! - the agnhost image's `/localhost.crt` and `/localhost.key` (upstream's Dockerfiles
//!   `ADD porter/localhost.crt localhost.crt`), the self-signed "localhost" pair netexec's and
//!   porter's TLS servers are pointed at (`--tls-cert-file /localhost.crt`);
//! - the update-demo images' (`nautilus`, `kitten`: built `FROM agnhost`, so with the pair too)
//!   `/data.json` naming their picture and the picture itself, which their `test-webserver`
//!   serves on 80 (test/images/nautilus: `COPY html/nautilus.jpg nautilus.jpg`, `COPY
//!   html/data.json data.json`). The kubectl Update Demo cases read `data.json` through the pod
//!   proxy and expect the picture's name in it.

use std::sync::OnceLock;

use rcgen::{CertificateParams, DnType, KeyPair};
use tracing::warn;

use super::grey_jpeg::grey_jpeg;
use crate::node::registry::{Image, Tool};

/// One file: path relative to the root, content.
pub type ImageFile = (&'static str, Vec<u8>);

/// The files of `image`.
pub fn of(image: &Image) -> Vec<&'static ImageFile> {
    let mut files: Vec<&'static ImageFile> = Vec::new();
    if image.has(Tool::Agnhost) {
        files.extend(agnhost());
    }
    let repository = image.reference.repository.rsplit('/').next().unwrap_or_default();
    match repository {
        "nautilus" => files.extend(update_demo(Picture::Nautilus)),
        "kitten" => files.extend(update_demo(Picture::Kitten)),
        _ => {}
    }
    files
}

/// agnhost's pair, generated once per process (upstream's is a fixed self-signed certificate
/// for "localhost"; clients of it skip verification, as the kubelet does for HTTPS hooks and
/// probes).
fn agnhost() -> &'static [ImageFile] {
    static FILES: OnceLock<Vec<ImageFile>> = OnceLock::new();
    FILES.get_or_init(|| match localhost_pair() {
        Ok((cert, key)) => vec![
            ("localhost.crt", cert.into_bytes()),
            ("localhost.key", key.into_bytes()),
        ],
        Err(e) => {
            warn!(error = %e, "generating agnhost's localhost certificate failed");
            Vec::new()
        }
    })
}

/// The two update-demo images.
#[derive(Debug, Clone, Copy)]
enum Picture {
    Nautilus,
    Kitten,
}

/// An update-demo image's `data.json` (upstream's html/data.json, byte for byte) and its
/// picture. Upstream's pictures are photographs; the simulated images carry a small grey JPEG
/// of their own shade under the same name, so a client fetching the picture gets a real JPEG
/// and can tell the two images apart by it too.
fn update_demo(picture: Picture) -> &'static [ImageFile] {
    static NAUTILUS: OnceLock<Vec<ImageFile>> = OnceLock::new();
    static KITTEN: OnceLock<Vec<ImageFile>> = OnceLock::new();
    let (cell, name, shade) = match picture {
        Picture::Nautilus => (&NAUTILUS, "nautilus.jpg", 0x40),
        Picture::Kitten => (&KITTEN, "kitten.jpg", 0xc0),
    };
    cell.get_or_init(|| {
        vec![
            ("data.json", format!("{{\n  \"image\": \"{name}\"\n}}\n").into_bytes()),
            (name, grey_jpeg(shade)),
        ]
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
    use crate::node::registry::resolve;
    use crossconf_model::os::Os;

    #[test]
    fn the_localhost_pair_serves_tls() {
        let (cert, key) = localhost_pair().expect("pair");
        assert!(cert.starts_with("-----BEGIN CERTIFICATE-----"));
        super::super::servers::tls_from_pem(cert.as_bytes(), key.as_bytes()).expect("a usable serving pair");
        let files = agnhost();
        let names: Vec<&str> = files.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["localhost.crt", "localhost.key"]);
    }

    #[test]
    fn update_demo_images_name_their_picture_in_data_json() {
        for (image, picture) in [
            ("registry.k8s.io/e2e-test-images/nautilus:1.7", "nautilus.jpg"),
            ("registry.k8s.io/e2e-test-images/kitten:1.7", "kitten.jpg"),
        ] {
            for (os, build) in [(Os::Linux, None), (Os::Windows, Some("10.0.20348"))] {
                let img = resolve(image, os, build, &[]).unwrap();
                let files = of(&img);
                let names: Vec<&str> = files.iter().map(|(n, _)| *n).collect();
                assert_eq!(
                    names,
                    ["localhost.crt", "localhost.key", "data.json", picture],
                    "{image} {os}"
                );
                let data: serde_json::Value = serde_json::from_slice(&files[2].1).unwrap();
                assert_eq!(data["image"], picture);
                assert!(files[3].1.starts_with(&[0xff, 0xd8]), "{picture} is a JPEG");
            }
        }
        let agnhost = resolve("registry.k8s.io/e2e-test-images/agnhost:2.52", Os::Linux, None, &[]).unwrap();
        assert_eq!(of(&agnhost).len(), 2);
    }
}
