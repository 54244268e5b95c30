//! The image catalogue: logical names → references per OS and Windows build.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

use super::error::{Error, Result, first_line};
use super::registry::{Registries, RegistryKey, RepoList};
use crate::os::{Os, WINDOWS_BUILDS, windows_build_prefix};

/// The catalogue shipped in the repository, embedded so the binary needs no checkout.
const DEFAULT_CATALOG: &str = include_str!("../../../images/images.yaml");

/// One logical image, as written in `images/images.yaml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageSpec {
    /// The logical name cases ask for.
    pub name: String,
    /// The registry key whose registry the image is pulled from.
    pub registry: RegistryKey,
    /// The repository path under the registry (`agnhost`, `windows/servercore`).
    pub path: String,
    /// The tag; required for a Linux variant, and the Windows tag unless overridden.
    #[serde(default)]
    pub tag: Option<String>,
    /// The operating systems the image has a variant for.
    pub os: Vec<Os>,
    /// The Windows host builds the Windows variant runs on (process isolation).
    #[serde(default)]
    pub windows_builds: Vec<String>,
    /// The repository path of the Windows variant, when it differs from `path`.
    #[serde(default)]
    pub windows_path: Option<String>,
    /// The tag of the Windows variant, when it differs from `tag`.
    #[serde(default)]
    pub windows_tag: Option<String>,
    /// A tag per Windows build, for base images whose tag must match the host build.
    #[serde(default)]
    pub windows_tags: BTreeMap<String, String>,
    /// Whether pulling needs an image pull secret.
    #[serde(default)]
    pub needs_pull_secret: bool,
    /// Whether `--prepull-images` may pull it ahead (false for images that cannot be pulled).
    #[serde(default = "default_prepull")]
    pub prepull: bool,
    /// Why the image exists or what is special about it.
    #[serde(default)]
    pub note: Option<String>,
    /// For agnhost: the subcommands cases run.
    #[serde(default)]
    pub subcommands: Vec<String>,
}

fn default_prepull() -> bool {
    true
}

impl ImageSpec {
    /// Whether the image has a variant for `os`.
    pub fn has_os(&self, os: Os) -> bool {
        self.os.contains(&os)
    }

    /// Whether the Windows variant runs on `build` (a `10.0.N` build or a full version string).
    pub fn runs_on_windows_build(&self, build: &str) -> bool {
        let build = normalize_build(build);
        self.has_os(Os::Windows) && self.windows_builds.contains(&build)
    }

    /// Checks the invariants resolution relies on, so a bad entry fails at load, not mid-run.
    fn validate(&self) -> Result<()> {
        let bad = |problem: String| Error::InvalidCatalogEntry {
            image: self.name.clone(),
            problem,
        };
        if self.name.trim().is_empty() || self.name.contains(char::is_whitespace) {
            return Err(bad("the name must be one non-empty word".into()));
        }
        if self.os.is_empty() {
            return Err(bad("os lists no operating system".into()));
        }
        if self.path.is_empty() || self.path.starts_with('/') || self.path.contains(':') {
            return Err(bad(format!("path {:?} is not a repository path", self.path)));
        }
        let tag_ok = |t: &Option<String>| t.as_deref().is_some_and(is_tag);
        if self.has_os(Os::Linux) && !tag_ok(&self.tag) {
            return Err(bad("the Linux variant needs a tag".into()));
        }
        if !self.has_os(Os::Windows) {
            if !self.windows_builds.is_empty()
                || !self.windows_tags.is_empty()
                || self.windows_tag.is_some()
                || self.windows_path.is_some()
            {
                return Err(bad("Windows fields are set but os does not list windows".into()));
            }
            return Ok(());
        }
        if self.windows_builds.is_empty() {
            return Err(bad("os lists windows but windows_builds is empty".into()));
        }
        for build in &self.windows_builds {
            if windows_build_prefix(build).as_deref() != Some(build.as_str()) {
                return Err(bad(format!("windows build {build:?} is not of the form 10.0.N")));
            }
        }
        for (build, tag) in &self.windows_tags {
            if !self.windows_builds.contains(build) {
                return Err(bad(format!("windows_tags names build {build} not in windows_builds")));
            }
            if !is_tag(tag) {
                return Err(bad(format!("windows_tags has an invalid tag {tag:?}")));
            }
        }
        let per_build_complete =
            !self.windows_tags.is_empty() && self.windows_builds.iter().all(|b| self.windows_tags.contains_key(b));
        if !self.windows_tags.is_empty() && !per_build_complete {
            return Err(bad("windows_tags must give a tag for every windows build".into()));
        }
        if !per_build_complete && !tag_ok(&self.windows_tag) && !tag_ok(&self.tag) {
            return Err(bad("the Windows variant needs a tag".into()));
        }
        Ok(())
    }
}

/// A logical image resolved for one OS (and Windows build).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResolvedImage {
    /// The logical name.
    pub name: String,
    /// The full reference a pod spec uses: `<registry>/<path>:<tag>`.
    pub reference: String,
    /// The registry key the image belongs to.
    pub registry_key: RegistryKey,
    /// The effective registry of that key (after overrides).
    pub registry: String,
    /// The repository path.
    pub path: String,
    /// The tag.
    pub tag: String,
    /// The OS resolved for.
    pub os: Os,
    /// The Windows build resolved for, normalised to `10.0.N`.
    pub windows_build: Option<String>,
    /// Whether pods need an image pull secret for it.
    pub needs_pull_secret: bool,
    /// Whether `--prepull-images` may pull it.
    pub prepull: bool,
}

impl fmt::Display for ResolvedImage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reference)
    }
}

/// Why an image cannot run on a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MismatchReason {
    /// The plan asks for a logical name the catalogue does not have.
    UnknownImage,
    /// The image has no Windows variant at all.
    NoWindowsVariant,
    /// The image has Windows variants, but not for the node's build.
    BuildNotSupported {
        /// The builds it does have.
        supported: Vec<String>,
    },
}

/// An image the plan needs that a Windows node cannot run, found before any case starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildMismatch {
    /// The logical image name.
    pub image: String,
    /// The node's name.
    pub node: String,
    /// The node's Windows build as reported (`node.kubernetes.io/windows-build`).
    pub build: String,
    /// Why it cannot run there.
    pub reason: MismatchReason,
}

impl fmt::Display for BuildMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            image,
            node,
            build,
            reason,
        } = self;
        match reason {
            MismatchReason::UnknownImage => write!(
                f,
                "image {image} is not in the image catalogue (needed on node {node}, Windows build {build})"
            ),
            MismatchReason::NoWindowsVariant => write!(
                f,
                "image {image} has no Windows variant, so it cannot run on node {node} (Windows build {build})"
            ),
            MismatchReason::BuildNotSupported { supported } => write!(
                f,
                "image {image} has no variant for Windows build {build} of node {node} (it has {})",
                supported.join(", ")
            ),
        }
    }
}

/// What the catalogue knows about a reference found in a pod spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identified {
    /// The logical names that resolve to this reference, in catalogue order.
    pub names: Vec<String>,
    /// The operating systems for which some logical name resolves to this reference.
    pub oses: BTreeSet<Os>,
    /// The Windows builds for which it does.
    pub windows_builds: BTreeSet<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogFile {
    images: Vec<ImageSpec>,
}

/// Every test image by logical name, with the effective registries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageCatalog {
    images: Vec<ImageSpec>,
    registries: Registries,
}

impl ImageCatalog {
    /// The catalogue embedded from `images/images.yaml`, with upstream default registries.
    ///
    /// # Panics
    /// If the embedded file is invalid, which is a build defect a unit test catches.
    pub fn load_default() -> ImageCatalog {
        match Self::from_yaml(DEFAULT_CATALOG) {
            Ok(catalog) => catalog,
            Err(e) => panic!("the embedded images/images.yaml is invalid: {e}"),
        }
    }

    /// Parses a catalogue in the `images/images.yaml` format and checks every entry.
    ///
    /// # Errors
    /// [`Error::CatalogSyntax`] if it does not parse, [`Error::InvalidCatalogEntry`] for an
    /// inconsistent or duplicate entry.
    pub fn from_yaml(yaml: &str) -> Result<ImageCatalog> {
        let file: CatalogFile =
            serde_saphyr::from_str(yaml).map_err(|e| Error::CatalogSyntax { detail: first_line(&e) })?;
        let mut seen = BTreeSet::new();
        for image in &file.images {
            image.validate()?;
            if !seen.insert(image.name.as_str()) {
                return Err(Error::InvalidCatalogEntry {
                    image: image.name.clone(),
                    problem: "the name appears twice".into(),
                });
            }
        }
        Ok(ImageCatalog {
            images: file.images,
            registries: Registries::default(),
        })
    }

    /// The same catalogue with the registries of exactly the keys `list` names replaced.
    #[must_use]
    pub fn with_overrides(mut self, list: &RepoList) -> ImageCatalog {
        self.registries.apply(list);
        self
    }

    /// Every image, in file order.
    pub fn images(&self) -> &[ImageSpec] {
        &self.images
    }

    /// The logical names, in file order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.images.iter().map(|i| i.name.as_str())
    }

    /// The image with this logical name.
    pub fn get(&self, name: &str) -> Option<&ImageSpec> {
        self.images.iter().find(|i| i.name == name)
    }

    /// The effective registries (defaults plus overrides).
    pub fn registries(&self) -> &Registries {
        &self.registries
    }

    /// The reference of `name` for pods on `os`; on Windows, for hosts of `windows_build`.
    ///
    /// A Windows build may be a full version (`10.0.20348.2849`); only `10.0.N` is compared.
    /// Without a build, a Windows image resolves to its multi-build manifest list, which only
    /// base images (one tag per build) cannot offer. The build is ignored for Linux.
    ///
    /// # Errors
    /// [`Error::UnknownImage`], [`Error::NoOsVariant`], [`Error::NoBuildVariant`] (naming the
    /// image, OS and build) and [`Error::BuildRequired`].
    pub fn resolve(&self, name: &str, os: Os, windows_build: Option<&str>) -> Result<ResolvedImage> {
        let image = self.get(name).ok_or_else(|| Error::UnknownImage(name.to_string()))?;
        if !image.has_os(os) {
            return Err(Error::NoOsVariant {
                image: name.to_string(),
                os,
            });
        }
        let build = match (os, windows_build) {
            (Os::Windows, Some(b)) => {
                let build = normalize_build(b);
                if !image.windows_builds.contains(&build) {
                    return Err(Error::NoBuildVariant {
                        image: name.to_string(),
                        build: b.to_string(),
                        supported: image.windows_builds.join(", "),
                    });
                }
                Some(build)
            }
            _ => None,
        };
        let (path, tag) = match os {
            Os::Linux => (image.path.as_str(), image.tag.as_deref()),
            Os::Windows => {
                let path = image.windows_path.as_deref().unwrap_or(&image.path);
                let tag = match &build {
                    Some(b) if !image.windows_tags.is_empty() => image.windows_tags.get(b).map(String::as_str),
                    None if !image.windows_tags.is_empty() => {
                        return Err(Error::BuildRequired {
                            image: name.to_string(),
                        });
                    }
                    _ => image.windows_tag.as_deref().or(image.tag.as_deref()),
                };
                (path, tag)
            }
        };
        // `validate` guarantees a tag for every variant `has_os` and `windows_builds` admit.
        let tag = tag.unwrap_or_default().to_string();
        let registry = self.registries.get(image.registry).to_string();
        Ok(ResolvedImage {
            name: image.name.clone(),
            reference: format!("{registry}/{path}:{tag}"),
            registry_key: image.registry,
            registry,
            path: path.to_string(),
            tag,
            os,
            windows_build: build,
            needs_pull_secret: image.needs_pull_secret,
            prepull: image.prepull,
        })
    }

    /// Whether [`resolve`](Self::resolve) would succeed for these arguments.
    pub fn supports(&self, name: &str, os: Os, windows_build: Option<&str>) -> bool {
        self.resolve(name, os, windows_build).is_ok()
    }

    /// Every (image, Windows node) pair where the node cannot run the image.
    ///
    /// `needed` are the logical names the plan runs on Windows nodes (leave out images a case
    /// deliberately runs on the wrong OS, such as `linux-only`); `nodes` are `(name, build)`
    /// pairs, the build as the node's `node.kubernetes.io/windows-build` label gives it. The
    /// preflight step fails with one line per mismatch instead of cases timing out on pulls.
    pub fn check_builds(&self, needed: &[&str], nodes: &[(&str, &str)]) -> Vec<BuildMismatch> {
        let mut out = Vec::new();
        for &image in needed {
            for &(node, build) in nodes {
                let reason = match self.get(image) {
                    None => MismatchReason::UnknownImage,
                    Some(spec) if !spec.has_os(Os::Windows) => MismatchReason::NoWindowsVariant,
                    Some(spec) if !spec.runs_on_windows_build(build) => MismatchReason::BuildNotSupported {
                        supported: spec.windows_builds.clone(),
                    },
                    Some(_) => continue,
                };
                out.push(BuildMismatch {
                    image: image.to_string(),
                    node: node.to_string(),
                    build: build.to_string(),
                    reason,
                });
            }
        }
        out
    }

    /// The logical names, OSes and builds that resolve to `reference`, if any does.
    ///
    /// The simulator uses this to decide whether a pod's image runs on a node, so it judges
    /// references exactly as the framework produced them (after overrides).
    pub fn identify(&self, reference: &str) -> Option<Identified> {
        let mut found = Identified {
            names: Vec::new(),
            oses: BTreeSet::new(),
            windows_builds: BTreeSet::new(),
        };
        for image in &self.images {
            let mut matched = false;
            if image.has_os(Os::Linux)
                && self
                    .resolve(&image.name, Os::Linux, None)
                    .is_ok_and(|r| r.reference == reference)
            {
                found.oses.insert(Os::Linux);
                matched = true;
            }
            for build in &image.windows_builds {
                let resolved = self.resolve(&image.name, Os::Windows, Some(build));
                if resolved.is_ok_and(|r| r.reference == reference) {
                    found.oses.insert(Os::Windows);
                    found.windows_builds.insert(build.clone());
                    matched = true;
                }
            }
            if matched {
                found.names.push(image.name.clone());
            }
        }
        (!found.names.is_empty()).then_some(found)
    }

    /// The Windows builds the project knows ([`WINDOWS_BUILDS`]), for reports.
    pub fn known_windows_builds() -> Vec<&'static str> {
        WINDOWS_BUILDS.iter().map(|(b, _)| *b).collect()
    }
}

/// `10.0.20348.2849` → `10.0.20348`; anything else unchanged (and then matches no build).
fn normalize_build(build: &str) -> String {
    windows_build_prefix(build).unwrap_or_else(|| build.to_string())
}

/// Whether `t` is a valid OCI tag: 1–128 of `[A-Za-z0-9_.-]`, not starting with `.` or `-`.
fn is_tag(t: &str) -> bool {
    !t.is_empty()
        && t.len() <= 128
        && !t.starts_with(['.', '-'])
        && t.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog() -> ImageCatalog {
        ImageCatalog::load_default()
    }

    #[test]
    fn embedded_catalogue_loads() {
        let c = catalog();
        assert!(c.images().len() >= 10);
    }

    #[test]
    fn every_image_has_an_os() {
        for image in catalog().images() {
            assert!(!image.os.is_empty(), "{}", image.name);
        }
    }

    #[test]
    fn core_images_have_ltsc2019_and_ltsc2022_variants() {
        let c = catalog();
        for name in ["agnhost", "busybox", "pause"] {
            for build in ["10.0.17763", "10.0.20348"] {
                assert!(c.supports(name, Os::Windows, Some(build)), "{name} on {build}");
            }
            assert!(c.supports(name, Os::Linux, None), "{name} on linux");
        }
    }

    #[test]
    fn resolves_references_from_registry_path_and_tag() {
        let c = catalog();
        let agnhost = c.resolve("agnhost", Os::Windows, Some("10.0.20348.2849")).unwrap();
        assert_eq!(agnhost.reference, "registry.k8s.io/e2e-test-images/agnhost:2.52");
        assert_eq!(agnhost.windows_build.as_deref(), Some("10.0.20348"));
        let pause = c.resolve("pause", Os::Linux, None).unwrap();
        assert_eq!(pause.reference, "registry.k8s.io/pause:3.10");
    }

    #[test]
    fn windows_paths_and_per_build_tags_apply() {
        let c = catalog();
        let auth = c.resolve("authenticated", Os::Windows, Some("10.0.17763")).unwrap();
        assert_eq!(
            auth.reference,
            "gcr.io/authenticated-image-pulling/windows-nanoserver:v1"
        );
        assert!(auth.needs_pull_secret && !auth.prepull);
        let core = c.resolve("servercore", Os::Windows, Some("10.0.26100")).unwrap();
        assert_eq!(core.reference, "mcr.microsoft.com/windows/servercore:ltsc2025");
        let err = c.resolve("servercore", Os::Windows, None).unwrap_err();
        assert!(matches!(err, Error::BuildRequired { .. }), "{err}");
    }

    #[test]
    fn resolve_errors_name_image_os_and_build() {
        let c = catalog();
        let err = c.resolve("nope", Os::Linux, None).unwrap_err();
        assert!(matches!(err, Error::UnknownImage(_)));
        let err = c.resolve("linux-only", Os::Windows, Some("10.0.20348")).unwrap_err();
        assert_eq!(err.to_string(), "image linux-only has no windows variant");
        let err = c.resolve("agnhost", Os::Windows, Some("10.0.99999")).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("agnhost") && msg.contains("10.0.99999"), "{msg}");
        assert!(!c.supports("servercore", Os::Linux, None));
    }

    #[test]
    fn overrides_change_exactly_the_named_keys() {
        let list = RepoList::from_yaml("promoterE2eRegistry: mirror.example.com/e2e\n").unwrap();
        let base = catalog();
        let moved = base.clone().with_overrides(&list);
        for image in base.images() {
            for os in Os::ALL {
                let build = (os == Os::Windows).then(|| image.windows_builds.first()).flatten();
                let (Ok(before), Ok(after)) = (
                    base.resolve(&image.name, os, build.map(String::as_str)),
                    moved.resolve(&image.name, os, build.map(String::as_str)),
                ) else {
                    continue;
                };
                if image.registry == RegistryKey::PromoterE2eRegistry {
                    assert!(after.reference.starts_with("mirror.example.com/e2e/"), "{after}");
                    assert_ne!(before.reference, after.reference);
                } else {
                    assert_eq!(before.reference, after.reference);
                }
            }
        }
    }

    #[test]
    fn check_builds_reports_each_node_and_image() {
        let c = catalog();
        let nodes = [("win-a", "10.0.20348"), ("win-b", "10.0.19041")];
        let found = c.check_builds(&["agnhost", "pause", "linux-only", "ghost"], &nodes);
        let lines: Vec<String> = found.iter().map(ToString::to_string).collect();
        assert_eq!(found.len(), 6, "{lines:#?}");
        assert!(
            lines.contains(
                &"image agnhost has no variant for Windows build 10.0.19041 of node win-b \
              (it has 10.0.17763, 10.0.20348, 10.0.26100)"
                    .to_string()
            )
        );
        assert!(lines.iter().any(|l| l.contains("linux-only") && l.contains("win-a")));
        assert!(
            lines
                .iter()
                .any(|l| l.contains("ghost") && l.contains("not in the image"))
        );
        assert!(c.check_builds(&["agnhost"], &[("w", "10.0.17763.1")]).is_empty());
    }

    #[test]
    fn identify_maps_references_back() {
        let c = catalog();
        let found = c.identify("registry.k8s.io/e2e-test-images/busybox:1.36.1-1").unwrap();
        assert_eq!(found.names, ["busybox", "cpu-burner"]);
        assert!(found.oses.contains(&Os::Linux) && found.oses.contains(&Os::Windows));
        let core = c.identify("mcr.microsoft.com/windows/servercore:ltsc2019").unwrap();
        assert_eq!(core.windows_builds.into_iter().collect::<Vec<_>>(), ["10.0.17763"]);
        assert!(c.identify("docker.io/library/ubuntu:latest").is_none());
    }

    #[test]
    fn invalid_entries_are_rejected() {
        let cases = [
            (
                "images: [{name: a, registry: gcRegistry, path: a, tag: '1', os: []}]",
                "no operating",
            ),
            (
                "images: [{name: a, registry: gcRegistry, path: a, tag: '1', os: [windows]}]",
                "windows_builds is empty",
            ),
            (
                "images: [{name: a, registry: gcRegistry, path: a, os: [linux]}]",
                "needs a tag",
            ),
            (
                "images: [{name: a, registry: gcRegistry, path: a, tag: '1', os: [windows], \
                 windows_builds: ['10.0']}]",
                "10.0.N",
            ),
            (
                "images: [{name: a, registry: gcRegistry, path: a, os: [windows], \
                 windows_builds: [10.0.17763, 10.0.20348], windows_tags: {10.0.17763: x}}]",
                "every windows build",
            ),
            (
                "images: [{name: a, registry: gcRegistry, path: a, tag: '1', os: [linux]}, \
                 {name: a, registry: gcRegistry, path: b, tag: '1', os: [linux]}]",
                "twice",
            ),
        ];
        for (yaml, expected) in cases {
            let err = ImageCatalog::from_yaml(yaml).unwrap_err();
            assert!(err.to_string().contains(expected), "{yaml}: {err}");
        }
        let err =
            ImageCatalog::from_yaml("images: [{name: a, registry: nope, path: a, tag: '1', os: [linux]}]").unwrap_err();
        assert!(matches!(err, Error::CatalogSyntax { .. }), "{err}");
        assert!(!err.to_string().contains('\n'), "{err}");
    }
}
