//! The images outside the catalogue's exact references: other tags of the test image
//! repositories, Docker Hub library images, Windows base images by tag alias and the cluster
//! add-ons, with the tag patterns and platform sets each is published with. A table of data
//! with the small functions its entries name.

use super::{Family, Found, ImageRef, Platform, Publish};

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
/// `latest` or a `v0.x.y` release of the windows-gmsa webhook.
fn gmsa_webhook_tag(t: &str) -> bool {
    t == "latest" || t.strip_prefix('v').is_some_and(|rest| numeric_tag("0.", rest, 30))
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
    // The windows-gmsa admission webhook (what its deploy script and Helm chart run): a
    // Linux-only image from scratch.
    Entry {
        registry: "docker.io",
        repo: "sigwindowstools/k8s-gmsa-webhook",
        tag_ok: gmsa_webhook_tag,
        family: Family::GmsaWebhook,
        platforms: linux_only,
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
pub(super) const EXTRA_REGISTRIES: &[&str] =
    &["registry.k8s.io", "docker.io", "mcr.microsoft.com", "gcr.io", "quay.io"];

/// The [`EXTRA`] table's answer for `r`.
pub(super) fn from_extra(r: &ImageRef) -> Option<Found> {
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

#[cfg(test)]
mod tests {
    use crate::node::registry::{Tool, resolve};
    use crossconf_model::os::Os;

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
}
