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

use sha2_free::digest_of;
use std::fmt;
use std::sync::OnceLock;

use crate::node::profile::ImageWeight;
use crossconf_model::images::{ImageCatalog, RegistryKey};
use crossconf_model::os::Os;

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
}

/// The family an image belongs to (decides tools, entrypoint, weight and default user).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Agnhost,
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
}

/// The family of a catalogue image, from the last segment of its repository path.
///
/// A catalogue image whose repository is not listed here resolves through [`EXTRA`] only; the
/// unit test `every_catalogue_image_resolves_for_each_os_and_build` fails for it, so a new
/// catalogue entry cannot silently be unknown to the simulator.
fn family_of_repository(repository: &str) -> Option<Family> {
    let last = repository.rsplit('/').next().unwrap_or(repository);
    Some(match last {
        "agnhost" => Family::Agnhost,
        "busybox" | "ipc-utils" => Family::Busybox,
        "pause" => Family::Pause,
        "nginx" => Family::Nginx,
        "httpd" => Family::Httpd,
        "alpine" => Family::Alpine,
        "nonroot" => Family::NonRoot,
        "resource-consumer" => Family::Consumer,
        "jessie-dnsutils" => Family::DnsUtils,
        "nanoserver" | "windows-nanoserver" => Family::NanoServer,
        "servercore" => Family::ServerCore,
        _ => return None,
    })
}

/// How the variants are published: a manifest list is platform-filtered at pull time; a
/// single-platform image pulls anywhere and fails when the container is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Publish {
    List,
    Single,
}

struct Entry {
    registry: &'static str,
    repo: &'static str,
    tag_ok: fn(&str) -> bool,
    family: Family,
    platforms: fn(&str) -> Vec<Platform>,
    publish: Publish,
    private: bool,
}

const WIN_BUILDS: [&str; 3] = ["10.0.17763", "10.0.20348", "10.0.26100"];

fn all_platforms(_: &str) -> Vec<Platform> {
    let mut v = vec![Platform::Linux];
    v.extend(WIN_BUILDS.iter().map(|b| Platform::Windows((*b).into())));
    v
}
fn linux_only(_: &str) -> Vec<Platform> {
    vec![Platform::Linux]
}
/// The authenticated Windows nanoserver test image has ltsc2019 and ltsc2022 variants.
fn windows_all(_: &str) -> Vec<Platform> {
    WIN_BUILDS[..2].iter().map(|b| Platform::Windows((*b).into())).collect()
}
/// `ltsc2019`, `1809`, `10.0.17763.x` → that build.
fn windows_by_tag(tag: &str) -> Vec<Platform> {
    let build = match tag {
        "ltsc2019" | "1809" => "10.0.17763",
        "ltsc2022" => "10.0.20348",
        "ltsc2025" => "10.0.26100",
        t => {
            return crossconf_model::os::windows_build_prefix(t)
                .map(Platform::Windows)
                .into_iter()
                .collect();
        }
    };
    vec![Platform::Windows(build.into())]
}

fn numeric_tag(prefix: &str, tag: &str, max_minor: u32) -> bool {
    tag.strip_prefix(prefix)
        .and_then(|rest| rest.split(['.', '-']).next().map(str::to_string))
        .and_then(|m| m.parse::<u32>().ok())
        .is_some_and(|m| m <= max_minor)
        && tag.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
}
fn agnhost_tag(t: &str) -> bool {
    numeric_tag("2.", t, 60)
}
fn pause_tag(t: &str) -> bool {
    numeric_tag("3.", t, 10)
}
fn e2e_busybox_tag(t: &str) -> bool {
    numeric_tag("1.", t, 37) && t.contains('-')
}
fn e2e_web_tag(t: &str) -> bool {
    (numeric_tag("1.", t, 27) || numeric_tag("2.", t, 4)) && t.contains('-')
}
fn hub_tag(t: &str) -> bool {
    t == "latest" || t == "stable" || numeric_tag("1.", t, 37) || numeric_tag("2.", t, 4) || numeric_tag("3.", t, 21)
}
fn windows_tag(t: &str) -> bool {
    !windows_by_tag(t).is_empty()
}
fn one_dot(t: &str) -> bool {
    numeric_tag("1.", t, 30)
}
fn any_v1(t: &str) -> bool {
    t == "v1" || t == "3.7"
}
/// `v1.33.0`: the Kubernetes release tags of kube-proxy.
fn kube_version_tag(t: &str) -> bool {
    t.strip_prefix('v').is_some_and(|rest| numeric_tag("1.", rest, 40))
}
/// `v0.26.7`: flannel release tags.
fn flannel_tag(t: &str) -> bool {
    t.strip_prefix('v').is_some_and(|rest| numeric_tag("0.", rest, 30))
}
/// `v1.33.0-nanoserver`, `v0.26.7-nanoserver`: the sig-windows-tools add-on image tags.
fn windows_addon_tag(t: &str) -> bool {
    t.strip_suffix("-nanoserver")
        .and_then(|v| v.strip_prefix('v'))
        .is_some_and(|rest| numeric_tag("1.", rest, 40) || numeric_tag("0.", rest, 30))
}
/// Every Windows build the model knows (a multi-build Windows-only manifest list).
fn all_windows(_: &str) -> Vec<Platform> {
    WIN_BUILDS.iter().map(|b| Platform::Windows((*b).into())).collect()
}

/// Images outside the catalogue's exact references. Upstream test images are manifest lists
/// with Linux and Windows (ltsc2019/2022/2025) variants (UPSTREAM.md "agnhost"), so other
/// tags of their repositories resolve like the catalogue's; Docker Hub library images are
/// Linux-only; mcr.microsoft.com base images are single-platform per Windows build (tag
/// aliases such as `1809` included). The add-on images are what the kube-proxy and flannel
/// DaemonSets of a kubeadm + sig-windows-tools cluster run.
const EXTRA: &[Entry] = &[
    Entry {
        registry: "registry.k8s.io",
        repo: "e2e-test-images/nonroot",
        tag_ok: one_dot,
        family: Family::NonRoot,
        platforms: all_platforms,
        publish: Publish::List,
        private: false,
    },
    Entry {
        registry: "registry.k8s.io",
        repo: "e2e-test-images/resource-consumer",
        tag_ok: one_dot,
        family: Family::Consumer,
        platforms: all_platforms,
        publish: Publish::List,
        private: false,
    },
    Entry {
        registry: "registry.k8s.io",
        repo: "e2e-test-images/jessie-dnsutils",
        tag_ok: one_dot,
        family: Family::Busybox,
        platforms: all_platforms,
        publish: Publish::List,
        private: false,
    },
    Entry {
        registry: "registry.k8s.io",
        repo: "e2e-test-images/ipc-utils",
        tag_ok: one_dot,
        family: Family::Busybox,
        platforms: linux_only,
        publish: Publish::List,
        private: false,
    },
    Entry {
        registry: "gcr.io",
        repo: "k8s-authenticated-test/agnhost",
        tag_ok: agnhost_tag,
        family: Family::Agnhost,
        platforms: linux_only,
        publish: Publish::List,
        private: true,
    },
    Entry {
        registry: "registry.k8s.io",
        repo: "e2e-test-images/agnhost",
        tag_ok: agnhost_tag,
        family: Family::Agnhost,
        platforms: all_platforms,
        publish: Publish::List,
        private: false,
    },
    Entry {
        registry: "registry.k8s.io",
        repo: "e2e-test-images/busybox",
        tag_ok: e2e_busybox_tag,
        family: Family::Busybox,
        platforms: all_platforms,
        publish: Publish::List,
        private: false,
    },
    Entry {
        registry: "registry.k8s.io",
        repo: "e2e-test-images/nginx",
        tag_ok: e2e_web_tag,
        family: Family::Nginx,
        platforms: all_platforms,
        publish: Publish::List,
        private: false,
    },
    Entry {
        registry: "registry.k8s.io",
        repo: "e2e-test-images/httpd",
        tag_ok: e2e_web_tag,
        family: Family::Httpd,
        platforms: all_platforms,
        publish: Publish::List,
        private: false,
    },
    Entry {
        registry: "registry.k8s.io",
        repo: "pause",
        tag_ok: pause_tag,
        family: Family::Pause,
        platforms: all_platforms,
        publish: Publish::List,
        private: false,
    },
    Entry {
        registry: "mcr.microsoft.com",
        repo: "oss/kubernetes/pause",
        tag_ok: pause_tag,
        family: Family::Pause,
        platforms: all_platforms,
        publish: Publish::List,
        private: false,
    },
    Entry {
        registry: "docker.io",
        repo: "library/busybox",
        tag_ok: hub_tag,
        family: Family::Busybox,
        platforms: linux_only,
        publish: Publish::List,
        private: false,
    },
    Entry {
        registry: "docker.io",
        repo: "library/nginx",
        tag_ok: hub_tag,
        family: Family::Nginx,
        platforms: linux_only,
        publish: Publish::List,
        private: false,
    },
    Entry {
        registry: "docker.io",
        repo: "library/httpd",
        tag_ok: hub_tag,
        family: Family::Httpd,
        platforms: linux_only,
        publish: Publish::List,
        private: false,
    },
    Entry {
        registry: "docker.io",
        repo: "library/alpine",
        tag_ok: hub_tag,
        family: Family::Alpine,
        platforms: linux_only,
        publish: Publish::List,
        private: false,
    },
    Entry {
        registry: "mcr.microsoft.com",
        repo: "windows/nanoserver",
        tag_ok: windows_tag,
        family: Family::NanoServer,
        platforms: windows_by_tag,
        publish: Publish::Single,
        private: false,
    },
    Entry {
        registry: "mcr.microsoft.com",
        repo: "windows/servercore",
        tag_ok: windows_tag,
        family: Family::ServerCore,
        platforms: windows_by_tag,
        publish: Publish::Single,
        private: false,
    },
    Entry {
        registry: "gcr.io",
        repo: "authenticated-image-pulling/alpine",
        tag_ok: any_v1,
        family: Family::Alpine,
        platforms: linux_only,
        publish: Publish::List,
        private: true,
    },
    Entry {
        registry: "gcr.io",
        repo: "authenticated-image-pulling/windows-nanoserver",
        tag_ok: any_v1,
        family: Family::NanoServer,
        platforms: windows_all,
        publish: Publish::List,
        private: true,
    },
    Entry {
        registry: "registry.k8s.io",
        repo: "kube-proxy",
        tag_ok: kube_version_tag,
        family: Family::Addon,
        platforms: linux_only,
        publish: Publish::List,
        private: false,
    },
    Entry {
        registry: "docker.io",
        repo: "sigwindowstools/kube-proxy",
        tag_ok: windows_addon_tag,
        family: Family::Addon,
        platforms: all_windows,
        publish: Publish::List,
        private: false,
    },
    Entry {
        registry: "docker.io",
        repo: "flannel/flannel",
        tag_ok: flannel_tag,
        family: Family::Addon,
        platforms: linux_only,
        publish: Publish::List,
        private: false,
    },
    Entry {
        registry: "docker.io",
        repo: "sigwindowstools/flannel",
        tag_ok: windows_addon_tag,
        family: Family::Addon,
        platforms: all_windows,
        publish: Publish::List,
        private: false,
    },
];

/// Registry hosts the model knows besides the catalogue's; anything else fails like an
/// unresolvable host.
const EXTRA_REGISTRIES: &[&str] = &["registry.k8s.io", "docker.io", "mcr.microsoft.com", "gcr.io", "quay.io"];

/// The image catalogue with upstream default registries: the simulated registries hold the
/// images at the references the catalogue gives without an override file.
fn catalogue() -> &'static ImageCatalog {
    static CATALOGUE: OnceLock<ImageCatalog> = OnceLock::new();
    CATALOGUE.get_or_init(ImageCatalog::load_default)
}

/// Whether `host` is a registry the simulated world has.
///
/// The catalogue's registries count, except `invalidRegistry`'s: that key exists so pulls from
/// it fail, as they do upstream.
fn known_registry(host: &str) -> bool {
    EXTRA_REGISTRIES.contains(&host)
        || RegistryKey::ALL.into_iter().any(|k| {
            k != RegistryKey::InvalidRegistry && catalogue().registries().get(k).split('/').next() == Some(host)
        })
}

/// What the registry holds for a reference: families, platforms, publishing and privacy.
struct Found {
    family: Family,
    platforms: Vec<Platform>,
    publish: Publish,
    private: bool,
}

/// The catalogue's answer for `r`, when the reference is one the catalogue resolves to.
fn from_catalogue(r: &ImageRef) -> Option<Found> {
    if r.digest.is_some() {
        return None;
    }
    let found = catalogue().identify(&r.full())?;
    let family = family_of_repository(&r.repository)?;
    let specs: Vec<_> = found.names.iter().filter_map(|n| catalogue().get(n)).collect();
    let mut platforms = Vec::new();
    if found.oses.contains(&Os::Linux) {
        platforms.push(Platform::Linux);
    }
    platforms.extend(found.windows_builds.iter().cloned().map(Platform::Windows));
    // Base images with one tag per build are single-platform images; the rest manifest lists.
    let single = specs.iter().any(|s| !s.windows_tags.is_empty());
    Some(Found {
        family,
        platforms,
        publish: if single { Publish::Single } else { Publish::List },
        private: specs.iter().any(|s| s.needs_pull_secret),
    })
}

/// The [`EXTRA`] table's answer for `r`.
fn from_extra(r: &ImageRef) -> Option<Found> {
    let e = EXTRA
        .iter()
        .find(|e| e.registry == r.registry && e.repo == r.repository && (r.digest.is_some() || (e.tag_ok)(&r.tag)))?;
    Some(Found {
        family: e.family,
        platforms: (e.platforms)(&r.tag),
        publish: e.publish,
        private: e.private,
    })
}

/// An image reference split into parts, Docker-normalised (`busybox` →
/// `docker.io/library/busybox:latest`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef {
    /// Registry host.
    pub registry: String,
    /// Repository path.
    pub repository: String,
    /// Tag (`latest` when neither tag nor digest is given).
    pub tag: String,
    /// `sha256:…` when the reference pins a digest.
    pub digest: Option<String>,
}

impl ImageRef {
    /// Parses and normalises `image`.
    pub fn parse(image: &str) -> ImageRef {
        let (rest, digest) = match image.split_once('@') {
            Some((r, d)) => (r, Some(d.to_string())),
            None => (image, None),
        };
        let (registry, path) = match rest.split_once('/') {
            Some((first, p)) if first.contains('.') || first.contains(':') || first == "localhost" => {
                (first.to_string(), p.to_string())
            }
            _ => ("docker.io".to_string(), rest.to_string()),
        };
        let registry = if registry == "index.docker.io" || registry == "registry-1.docker.io" {
            "docker.io".into()
        } else if registry == "k8s.gcr.io" {
            "registry.k8s.io".into()
        } else {
            registry
        };
        let (repo, tag) = match path.rsplit_once(':') {
            Some((r, t)) if !t.contains('/') => (r.to_string(), t.to_string()),
            _ => (path.clone(), "latest".to_string()),
        };
        let repository = if registry == "docker.io" && !repo.contains('/') {
            format!("library/{repo}")
        } else {
            repo
        };
        ImageRef {
            registry,
            repository,
            tag,
            digest,
        }
    }

    /// The full normalised reference.
    pub fn full(&self) -> String {
        match &self.digest {
            Some(d) => format!("{}/{}@{d}", self.registry, self.repository),
            None => format!("{}/{}:{}", self.registry, self.repository, self.tag),
        }
    }
}

/// A resolved image: what the node would have in its cache after a successful pull.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// The image as the pod spec names it.
    pub name: String,
    /// The normalised reference.
    pub reference: ImageRef,
    /// The platform variant the node got.
    pub platform: Platform,
    /// The programs inside.
    pub tools: Vec<Tool>,
    /// The image ENTRYPOINT.
    pub entrypoint: Vec<String>,
    /// The image CMD.
    pub cmd: Vec<String>,
    /// The image's default user (`ContainerUser`/`ContainerAdministrator` on Windows).
    pub default_user: String,
    /// Pull-time class.
    pub weight: ImageWeight,
    /// Size in bytes (what `Pulled` events report).
    pub size_bytes: u64,
    /// `sha256:…` digest of the variant.
    pub digest: String,
}

impl Image {
    /// `imageID` as container statuses show it (`registry/repo@sha256:…`).
    pub fn image_id(&self) -> String {
        format!(
            "{}/{}@{}",
            self.reference.registry, self.reference.repository, self.digest
        )
    }

    /// Whether the image contains `tool`.
    pub fn has(&self, tool: Tool) -> bool {
        self.tools.contains(&tool)
    }

    /// The argv a container runs: `command` replaces ENTRYPOINT (and drops CMD), `args` replaces
    /// CMD, as the Kubernetes container spec defines.
    pub fn argv(&self, command: &[String], args: &[String]) -> Vec<String> {
        let mut v = if command.is_empty() {
            self.entrypoint.clone()
        } else {
            command.to_vec()
        };
        if !args.is_empty() {
            v.extend(args.iter().cloned());
        } else if command.is_empty() {
            v.extend(self.cmd.iter().cloned());
        }
        v
    }

    /// Why this image cannot run on a node of `os`/`build`, if it cannot.
    ///
    /// Process isolation needs the container's Windows build to equal the host's ("Windows
    /// container version compatibility"); the message is HCS's.
    pub fn create_mismatch(&self, os: Os, build: Option<&str>) -> Option<String> {
        match (&self.platform, os) {
            (Platform::Linux, Os::Linux) => None,
            (Platform::Windows(b), Os::Windows) if Some(b.as_str()) == build => None,
            (Platform::Windows(b), Os::Windows) => Some(format!(
                "hcs::CreateComputeSystem: The container operating system does not match the host operating system.: image is windows {b}, node is windows {}",
                build.unwrap_or("unknown")
            )),
            (p, os) => Some(format!(
                "image operating system \"{}\" cannot be used on this platform ({p} image on a {os} node)",
                p.os()
            )),
        }
    }
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

fn build_image(name: &str, reference: ImageRef, family: Family, platform: Platform) -> Image {
    let win = platform.os() == Os::Windows;
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let mut tools = match family {
        Family::Agnhost => vec![Tool::Agnhost, Tool::Busybox],
        Family::Busybox | Family::Alpine | Family::NonRoot | Family::DnsUtils => vec![Tool::Busybox],
        Family::Consumer => vec![Tool::Consumer, Tool::Busybox],
        Family::Addon => vec![Tool::Addon],
        Family::Pause => vec![Tool::Pause],
        Family::Nginx => vec![Tool::Nginx, Tool::Busybox],
        Family::Httpd => vec![Tool::Httpd, Tool::Busybox],
        Family::NanoServer => vec![],
        Family::ServerCore => vec![Tool::PowerShell],
    };
    if win {
        // Every Windows image carries cmd.exe; the upstream test images are built on a
        // servercore cache layer that brings PowerShell too.
        tools.push(Tool::Cmd);
        if matches!(
            family,
            Family::Agnhost
                | Family::Busybox
                | Family::Nginx
                | Family::Httpd
                | Family::NonRoot
                | Family::Consumer
                | Family::DnsUtils
        ) {
            tools.push(Tool::PowerShell);
        }
    }
    let (entrypoint, cmd) = match family {
        Family::Agnhost => (s(&["/agnhost"]), s(&["pause"])),
        Family::Busybox | Family::Alpine | Family::NonRoot | Family::DnsUtils => (vec![], s(&["sh"])),
        // The add-on DaemonSets give the daemon's command line, as their real manifests do.
        Family::Addon => (vec![], vec![]),
        Family::Consumer => (s(&["/consumer"]), s(&["--port=8080"])),
        Family::Pause => (s(&[if win { "/pause.exe" } else { "/pause" }]), vec![]),
        Family::Nginx => (vec![], s(&["nginx", "-g", "daemon off;"])),
        Family::Httpd => (vec![], s(&["httpd-foreground"])),
        Family::NanoServer | Family::ServerCore => (vec![], s(&["c:\\windows\\system32\\cmd.exe"])),
    };
    let weight = match (win, family) {
        (false, _) => ImageWeight::Linux,
        (true, Family::Pause | Family::NanoServer | Family::Addon) => ImageWeight::WindowsNanoServer,
        (true, _) => ImageWeight::WindowsServerCore,
    };
    let size_bytes = match weight {
        ImageWeight::Linux => 20_000_000,
        ImageWeight::WindowsNanoServer => 120_000_000,
        ImageWeight::WindowsServerCore => 2_400_000_000,
    };
    let default_user = match (win, family) {
        (false, Family::NonRoot) => "1234".to_string(),
        (false, _) => "root".to_string(),
        (true, Family::NonRoot) => "ContainerUser".to_string(),
        (true, Family::NanoServer | Family::Pause) => "ContainerUser".to_string(),
        (true, _) => "ContainerAdministrator".to_string(),
    };
    let digest = digest_of(&format!("{}|{platform}", reference.full()));
    Image {
        name: name.to_string(),
        reference,
        platform,
        tools,
        entrypoint,
        cmd,
        default_user,
        weight,
        size_bytes,
        digest,
    }
}

/// A small deterministic digest, so the same image always has the same imageID.
mod sha2_free {
    /// A `sha256:`-shaped digest derived from `s` (FNV-1a, widened; not cryptographic: the
    /// simulator only needs stable, distinct identifiers).
    pub fn digest_of(s: &str) -> String {
        let mut out = String::from("sha256:");
        for round in 0u64..4 {
            let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ round.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            for b in s.bytes() {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
            out.push_str(&format!("{h:016x}"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AGNHOST: &str = "registry.k8s.io/e2e-test-images/agnhost:2.53";

    #[test]
    fn normalises_docker_hub_names() {
        assert_eq!(ImageRef::parse("busybox").full(), "docker.io/library/busybox:latest");
        assert_eq!(
            ImageRef::parse("k8s.gcr.io/pause:3.9").full(),
            "registry.k8s.io/pause:3.9"
        );
        assert_eq!(ImageRef::parse("localhost:5000/x").registry, "localhost:5000");
    }

    #[test]
    fn agnhost_runs_on_both_oses() {
        let l = resolve(AGNHOST, Os::Linux, None, &[]).unwrap();
        assert_eq!(l.platform, Platform::Linux);
        assert!(l.has(Tool::Agnhost) && !l.has(Tool::Cmd));
        let w = resolve(AGNHOST, Os::Windows, Some("10.0.20348"), &[]).unwrap();
        assert_eq!(w.platform, Platform::Windows("10.0.20348".into()));
        assert!(w.has(Tool::Cmd));
        assert_ne!(l.digest, w.digest);
        assert_eq!(w.argv(&[], &["netexec".into()]), ["/agnhost", "netexec"]);
        assert_eq!(w.argv(&["cmd".into()], &[]), ["cmd"]);
        assert_eq!(w.argv(&[], &[]), ["/agnhost", "pause"]);
    }

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
    fn other_windows_build_fails_at_create() {
        let img = resolve(
            "mcr.microsoft.com/windows/nanoserver:ltsc2019",
            Os::Windows,
            Some("10.0.20348"),
            &[],
        )
        .unwrap();
        let why = img.create_mismatch(Os::Windows, Some("10.0.20348")).unwrap();
        assert!(
            why.contains("does not match the host operating system") && why.contains("10.0.17763"),
            "{why}"
        );
        assert!(img.create_mismatch(Os::Windows, Some("10.0.17763")).is_none());
    }

    /// The registry host of a resolved catalogue reference (what a pull secret names).
    fn host(reference: &str) -> String {
        ImageRef::parse(reference).registry
    }

    #[test]
    fn every_catalogue_image_resolves_for_each_os_and_build() {
        let catalog = ImageCatalog::load_default();
        let mut checked = 0;
        for spec in catalog.images() {
            let mut targets: Vec<(Os, Option<&str>)> = Vec::new();
            if spec.has_os(Os::Linux) {
                targets.push((Os::Linux, None));
            }
            targets.extend(spec.windows_builds.iter().map(|b| (Os::Windows, Some(b.as_str()))));
            for (os, build) in targets {
                let resolved = catalog.resolve(&spec.name, os, build).unwrap();
                let reference = &resolved.reference;
                let creds = [host(reference)];
                if spec.registry == RegistryKey::InvalidRegistry {
                    let e = resolve(reference, os, build, &creds).unwrap_err();
                    assert!(matches!(e, PullError::UnknownRegistry { .. }), "{}: {e}", spec.name);
                    continue;
                }
                if spec.needs_pull_secret {
                    let e = resolve(reference, os, build, &[]).unwrap_err();
                    assert!(matches!(e, PullError::Unauthorized { .. }), "{}: {e}", spec.name);
                }
                let image = resolve(reference, os, build, &creds)
                    .unwrap_or_else(|e| panic!("{} ({reference}) on {os} {build:?}: {e}", spec.name));
                let expected = match build {
                    Some(b) => Platform::Windows(b.to_string()),
                    None => Platform::Linux,
                };
                assert_eq!(image.platform, expected, "{} ({reference})", spec.name);
                assert_eq!(image.create_mismatch(os, build), None, "{} ({reference})", spec.name);
                assert!(
                    !image.tools.is_empty() || os == Os::Windows,
                    "{} has no program",
                    spec.name
                );
                checked += 1;
            }
        }
        assert!(checked >= 40, "only {checked} image variants checked");
    }

    #[test]
    fn catalogue_images_refuse_what_the_catalogue_does_not_claim() {
        let catalog = ImageCatalog::load_default();
        // ipc-utils (`linux-only`) and the private agnhost have no Windows variant.
        for name in ["linux-only", "agnhost-private"] {
            let r = catalog.resolve(name, Os::Linux, None).unwrap().reference;
            let e = resolve(&r, Os::Windows, Some("10.0.20348"), &[host(&r)]).unwrap_err();
            assert!(matches!(e, PullError::NoMatchingPlatform { .. }), "{name}: {e}");
        }
        // The authenticated Windows image has ltsc2019 and ltsc2022 variants only.
        let r = catalog
            .resolve("authenticated", Os::Windows, Some("10.0.20348"))
            .unwrap()
            .reference;
        let e = resolve(&r, Os::Windows, Some("10.0.26100"), &[host(&r)]).unwrap_err();
        assert!(matches!(e, PullError::NoMatchingPlatform { .. }), "{e}");
        // A manifest list has no variant for a build no catalogue image supports.
        let r = catalog.resolve("agnhost", Os::Linux, None).unwrap().reference;
        let e = resolve(&r, Os::Windows, Some("10.0.14393"), &[]).unwrap_err();
        assert!(e.to_string().contains("windows/amd64 10.0.14393"), "{e}");
        // A per-build base image pulls anywhere and fails at container creation elsewhere.
        let r = catalog
            .resolve("servercore", Os::Windows, Some("10.0.17763"))
            .unwrap()
            .reference;
        let img = resolve(&r, Os::Windows, Some("10.0.20348"), &[]).unwrap();
        assert!(img.create_mismatch(Os::Windows, Some("10.0.20348")).is_some());
    }

    #[test]
    fn catalogue_images_have_their_programs() {
        let catalog = ImageCatalog::load_default();
        let get = |name: &str, os: Os| {
            let build = (os == Os::Windows).then_some("10.0.20348");
            let r = catalog.resolve(name, os, build).unwrap().reference;
            resolve(&r, os, build, &[host(&r)]).unwrap()
        };
        for os in Os::ALL {
            assert!(get("jessie-dnsutils", os).has(Tool::Busybox), "nslookup on {os}");
            assert!(get("resource-consumer", os).has(Tool::Consumer));
            assert!(get("nonroot", os).has(Tool::Busybox));
        }
        assert_eq!(get("nonroot", Os::Linux).default_user, "1234");
        assert_eq!(get("nonroot", Os::Windows).default_user, "ContainerUser");
        assert!(get("agnhost-private", Os::Linux).has(Tool::Agnhost));
    }

    #[test]
    fn cluster_addon_images_exist_for_their_os() {
        for (image, os) in [
            ("registry.k8s.io/kube-proxy:v1.33.0", Os::Linux),
            ("docker.io/flannel/flannel:v0.26.7", Os::Linux),
            ("docker.io/sigwindowstools/kube-proxy:v1.33.0-nanoserver", Os::Windows),
            ("docker.io/sigwindowstools/flannel:v0.26.7-nanoserver", Os::Windows),
        ] {
            let build = (os == Os::Windows).then_some("10.0.17763");
            let img = resolve(image, os, build, &[]).unwrap_or_else(|e| panic!("{image}: {e}"));
            assert!(img.has(Tool::Addon), "{image}");
            let other = os.other();
            let build = (other == Os::Windows).then_some("10.0.17763");
            assert!(resolve(image, other, build, &[]).is_err(), "{image} on {other}");
        }
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
