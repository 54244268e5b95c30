//! The image catalogue's side of the registry model: the catalogue loaded once, the registry
//! hosts the simulated world has, and the family, platforms, publishing and privacy of a
//! reference the catalogue knows.

use std::sync::OnceLock;

use super::extra::EXTRA_REGISTRIES;
use super::{Family, Found, ImageRef, Platform, Publish};
use crossconf_model::images::{ImageCatalog, RegistryKey};
use crossconf_model::os::Os;

/// The family of a catalogue image, from the last segment of its repository path.
///
/// A catalogue image whose repository is not listed here resolves through [`EXTRA`] only; the
/// unit test `every_catalogue_image_resolves_for_each_os_and_build` fails for it, so a new
/// catalogue entry cannot silently be unknown to the simulator.
///
/// [`EXTRA`]: super::extra::EXTRA
fn family_of_repository(repository: &str) -> Option<Family> {
    let last = repository.rsplit('/').next().unwrap_or(repository);
    Some(match last {
        "agnhost" => Family::Agnhost,
        "nautilus" | "kitten" => Family::UpdateDemo,
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
        "sample-apiserver" => Family::SampleApiServer,
        "etcd" => Family::Etcd,
        _ => return None,
    })
}

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
pub(super) fn known_registry(host: &str) -> bool {
    EXTRA_REGISTRIES.contains(&host)
        || RegistryKey::ALL.into_iter().any(|k| {
            k != RegistryKey::InvalidRegistry && catalogue().registries().get(k).split('/').next() == Some(host)
        })
}

/// The catalogue's answer for `r`, when the reference is one the catalogue resolves to.
pub(super) fn from_catalogue(r: &ImageRef) -> Option<Found> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::registry::{PullError, Tool, resolve};

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
}
