//! The image model: which images exist in which registries, their OS/build variants, what
//! programs each contains, and which need credentials.
//!
//! The main function is [`resolve`]. Errors are worded like containerd's, so the kubelet's
//! `ErrImagePull` events read as on a real node, with a note where the simulator is the reason
//! (an image or registry it does not model).
//!
//! Every test image cases use is known from the image catalogue (`images/images.yaml`, through
//! [`ImageCatalog`]): its exact references, OS variants, Windows builds and whether it needs a
//! pull secret come from there, so the simulated registry and the catalogue cannot drift. A
//! small table ([`EXTRA`]) adds what the catalogue does not list: other tags of the same
//! repositories, Docker Hub library images, Windows base images by tag alias and the cluster
//! add-ons (kube-proxy, flannel) the simulator runs in `kube-system`.
//!
//! Split by concept: `reference` parses and normalises image references, `catalogue` answers
//! from the image catalogue, `extra` holds the table of what the catalogue does not list, and
//! `image` builds the resolved image (programs, entrypoint, user, weight, digest). This file
//! keeps the vocabulary they share (platforms, tools, image families, what a lookup found), the
//! pull errors and [`resolve`], which ties the steps together.
//!
//! [`ImageCatalog`]: crossconf_model::images::ImageCatalog
//! [`EXTRA`]: extra::EXTRA

use std::fmt;

use catalogue::{from_catalogue, known_registry};
use crossconf_model::os::Os;
use extra::from_extra;
use image::build_image;

mod catalogue;
mod extra;
mod image;
mod reference;

pub use image::Image;
pub use reference::ImageRef;

/// Why a pull failed (the text goes into the `Failed` event and the waiting message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PullError {
    /// The registry host is not one the simulator models (the real lookup would fail too).
    #[error(
        "failed to pull and unpack image \"{image}\": failed to resolve reference \"{full}\": failed to do request: Head \"https://{host}/v2/{repo}/manifests/{tag}\": dial tcp: lookup {host}: no such host (the simulated registry model has no registry {host})"
    )]
    UnknownRegistry {
        /// The image as the pod spec names it.
        image: String,
        /// The normalised reference.
        full: String,
        /// The registry host.
        host: String,
        /// The repository path.
        repo: String,
        /// The tag.
        tag: String,
    },
    /// The repository or tag does not exist in a known registry.
    #[error(
        "failed to pull and unpack image \"{image}\": failed to resolve reference \"{full}\": {full}: not found (the simulated registry has no such image)"
    )]
    NotFound {
        /// The image as the pod spec names it.
        image: String,
        /// The normalised reference.
        full: String,
    },
    /// The repository is private and the pod has no pull secret for it.
    #[error(
        "failed to pull and unpack image \"{image}\": failed to resolve reference \"{full}\": pull access denied, repository does not exist or may require authorization: server message: insufficient_scope: authorization failed"
    )]
    Unauthorized {
        /// The image as the pod spec names it.
        image: String,
        /// The normalised reference.
        full: String,
    },
    /// A manifest list without a variant for the node's platform.
    #[error(
        "failed to pull and unpack image \"{image}\": no match for platform in manifest: not found (image provides {available}; node is {wanted})"
    )]
    NoMatchingPlatform {
        /// The image as the pod spec names it.
        image: String,
        /// The node's platform, e.g. `windows/amd64 10.0.20348`.
        wanted: String,
        /// The platforms the image has.
        available: String,
    },
}

/// One platform variant of an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Platform {
    /// linux/amd64.
    Linux,
    /// windows/amd64 of one build (`10.0.20348`).
    Windows(String),
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Platform::Linux => f.write_str("linux/amd64"),
            Platform::Windows(b) => write!(f, "windows/amd64 {b}"),
        }
    }
}

impl Platform {
    /// The OS of this platform.
    pub fn os(&self) -> Os {
        match self {
            Platform::Linux => Os::Linux,
            Platform::Windows(_) => Os::Windows,
        }
    }
}

/// The emulated programs an image contains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tool {
    /// `/agnhost` with its subcommands.
    Agnhost,
    /// busybox `sh` and its applets (cat, ls, nc, wget, nslookup, ping…).
    Busybox,
    /// `cmd.exe` and the Windows system programs (ipconfig, nslookup, ping, curl.exe…).
    Cmd,
    /// `powershell` / `pwsh`.
    PowerShell,
    /// `/pause`.
    Pause,
    /// nginx serving its default page on 80.
    Nginx,
    /// Apache httpd serving "It works!" on 80.
    Httpd,
    /// The resource-consumer server (`/ConsumeCPU`, `/ConsumeMem`) on 8080.
    Consumer,
    /// A cluster add-on daemon (`kube-proxy`, `flanneld`): the simulator's kube-proxy and pod
    /// network live in-process, so the add-on pods only stay up and idle.
    Addon,
    /// `/kube-sample-apiserver`, upstream's sample aggregated API server (wardle.example.com).
    SampleApiServer,
    /// `/usr/local/bin/etcd`, the key-value store the sample-apiserver keeps its objects in.
    Etcd,
    /// `/admission-webhook/admission-webhook`, the windows-gmsa admission webhook.
    GmsaWebhook,
}

/// The family an image belongs to (decides tools, entrypoint, weight and default user).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Agnhost,
    /// The e2e `nautilus` and `kitten` images: agnhost with CMD `test-webserver`, serving a
    /// `data.json` naming their picture (see `programs::image_files`).
    UpdateDemo,
    Busybox,
    Pause,
    Nginx,
    Httpd,
    Alpine,
    NanoServer,
    ServerCore,
    /// The e2e `nonroot` image: busybox running as uid 1234 (ContainerUser on Windows).
    NonRoot,
    /// The e2e `resource-consumer` image.
    Consumer,
    /// The e2e `jessie-dnsutils` image: a shell with DNS tools (nslookup).
    DnsUtils,
    /// A cluster add-on image (kube-proxy, flannel).
    Addon,
    /// The e2e `sample-apiserver` image.
    SampleApiServer,
    /// The `etcd` image.
    Etcd,
    /// The windows-gmsa admission webhook image (`sigwindowstools/k8s-gmsa-webhook`).
    GmsaWebhook,
}

/// How the variants are published: a manifest list is platform-filtered at pull time; a
/// single-platform image pulls anywhere and fails when the container is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Publish {
    List,
    Single,
}

/// What the registry holds for a reference: families, platforms, publishing and privacy.
struct Found {
    family: Family,
    platforms: Vec<Platform>,
    publish: Publish,
    private: bool,
}

/// Resolves `image` for a node of `os` (and Windows `build`), given the registry hosts the pod
/// has pull credentials for.
pub fn resolve(image: &str, os: Os, build: Option<&str>, credentials: &[String]) -> Result<Image, PullError> {
    let r = ImageRef::parse(image);
    let full = r.full();
    if !known_registry(&r.registry) {
        return Err(PullError::UnknownRegistry {
            image: image.into(),
            full,
            host: r.registry.clone(),
            repo: r.repository.clone(),
            tag: r.tag.clone(),
        });
    }
    let entry = from_catalogue(&r)
        .or_else(|| from_extra(&r))
        .ok_or_else(|| PullError::NotFound {
            image: image.into(),
            full: full.clone(),
        })?;
    if entry.private && !credentials.iter().any(|c| c == &r.registry) {
        return Err(PullError::Unauthorized {
            image: image.into(),
            full,
        });
    }
    let platforms = entry.platforms;
    let wanted = match os {
        Os::Linux => Platform::Linux,
        Os::Windows => Platform::Windows(build.unwrap_or("").to_string()),
    };
    let platform = if platforms.contains(&wanted) {
        wanted
    } else if entry.publish == Publish::Single && !platforms.is_empty() {
        platforms[0].clone()
    } else {
        return Err(PullError::NoMatchingPlatform {
            image: image.into(),
            wanted: wanted.to_string(),
            available: platforms.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
        });
    };
    Ok(build_image(image, r, entry.family, platform))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linux_image_on_windows_names_the_mismatch() {
        let err = resolve("busybox:1.36", Os::Windows, Some("10.0.20348"), &[]).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("no match for platform")
                && msg.contains("linux/amd64")
                && msg.contains("windows/amd64 10.0.20348"),
            "{msg}"
        );
        assert!(resolve("busybox:1.36", Os::Linux, None, &[]).is_ok());
    }

    #[test]
    fn unknown_registry_and_tag_and_private() {
        let e = resolve("invalid.registry.k8s.io/invalid/alpine:3.1", Os::Linux, None, &[]).unwrap_err();
        assert!(matches!(e, PullError::UnknownRegistry { .. }), "{e}");
        let e = resolve("registry.k8s.io/invalid-image:invalid-tag", Os::Linux, None, &[]).unwrap_err();
        assert!(matches!(e, PullError::NotFound { .. }), "{e}");
        let e = resolve("registry.k8s.io/e2e-test-images/agnhost:9.99", Os::Linux, None, &[]).unwrap_err();
        assert!(matches!(e, PullError::NotFound { .. }), "{e}");
        let private = "gcr.io/authenticated-image-pulling/windows-nanoserver:v1";
        let e = resolve(private, Os::Windows, Some("10.0.20348"), &[]).unwrap_err();
        assert!(matches!(e, PullError::Unauthorized { .. }), "{e}");
        assert!(resolve(private, Os::Windows, Some("10.0.20348"), &["gcr.io".into()]).is_ok());
    }
}
