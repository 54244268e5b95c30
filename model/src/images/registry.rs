//! Registry keys, their default registries, and the `KUBE_TEST_REPO_LIST` override file.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::error::{Error, Result, first_line};

/// A registry key of the upstream override file: each image belongs to one key, and an override
/// file replaces a key's registry for every image of that key.
///
/// The set is the union of the keys upstream `test/utils/image/manifest.go` has defined, older
/// (`e2eRegistry`, `gcrReleaseRegistry`, `sampleRegistry`, `microsoftRegistry`) and newer
/// (`dockerLibraryRegistry`, `cloudProviderGcpRegistry`), so an override file written for any
/// upstream job is accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RegistryKey {
    /// Images that need credentials (`gcr.io/authenticated-image-pulling`).
    GcAuthenticatedRegistry,
    /// The old name of the e2e test image registry.
    E2eRegistry,
    /// The promoted e2e test images (agnhost, busybox, nginx…).
    PromoterE2eRegistry,
    /// Build images.
    BuildImageRegistry,
    /// A registry that does not exist, for pull-failure cases.
    InvalidRegistry,
    /// etcd images.
    GcEtcdRegistry,
    /// `registry.k8s.io` itself (pause).
    GcRegistry,
    /// SIG Storage images.
    SigStorageRegistry,
    /// GKE release images.
    GcrReleaseRegistry,
    /// A private registry that needs an image pull secret.
    PrivateRegistry,
    /// Sample application images.
    SampleRegistry,
    /// Microsoft's registry (Windows base images).
    MicrosoftRegistry,
    /// Docker Hub library images.
    DockerLibraryRegistry,
    /// Cloud provider GCP images.
    CloudProviderGcpRegistry,
}

impl RegistryKey {
    /// Every key, in the order upstream declares them.
    pub const ALL: [RegistryKey; 14] = [
        RegistryKey::GcAuthenticatedRegistry,
        RegistryKey::E2eRegistry,
        RegistryKey::PromoterE2eRegistry,
        RegistryKey::BuildImageRegistry,
        RegistryKey::InvalidRegistry,
        RegistryKey::GcEtcdRegistry,
        RegistryKey::GcRegistry,
        RegistryKey::SigStorageRegistry,
        RegistryKey::GcrReleaseRegistry,
        RegistryKey::PrivateRegistry,
        RegistryKey::SampleRegistry,
        RegistryKey::MicrosoftRegistry,
        RegistryKey::DockerLibraryRegistry,
        RegistryKey::CloudProviderGcpRegistry,
    ];

    /// The key as the override file spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            RegistryKey::GcAuthenticatedRegistry => "gcAuthenticatedRegistry",
            RegistryKey::E2eRegistry => "e2eRegistry",
            RegistryKey::PromoterE2eRegistry => "promoterE2eRegistry",
            RegistryKey::BuildImageRegistry => "buildImageRegistry",
            RegistryKey::InvalidRegistry => "invalidRegistry",
            RegistryKey::GcEtcdRegistry => "gcEtcdRegistry",
            RegistryKey::GcRegistry => "gcRegistry",
            RegistryKey::SigStorageRegistry => "sigStorageRegistry",
            RegistryKey::GcrReleaseRegistry => "gcrReleaseRegistry",
            RegistryKey::PrivateRegistry => "privateRegistry",
            RegistryKey::SampleRegistry => "sampleRegistry",
            RegistryKey::MicrosoftRegistry => "microsoftRegistry",
            RegistryKey::DockerLibraryRegistry => "dockerLibraryRegistry",
            RegistryKey::CloudProviderGcpRegistry => "cloudProviderGcpRegistry",
        }
    }

    /// The registry upstream uses when no override file names this key.
    ///
    /// Values from upstream `manifest.go` (`initRegistry`, after the move to registry.k8s.io);
    /// the keys upstream has since dropped keep their last upstream values, with `k8s.gcr.io`
    /// replaced by `registry.k8s.io` as upstream did for the others.
    pub fn default_registry(self) -> &'static str {
        match self {
            RegistryKey::GcAuthenticatedRegistry => "gcr.io/authenticated-image-pulling",
            RegistryKey::E2eRegistry => "registry.k8s.io/e2e-test-images",
            RegistryKey::PromoterE2eRegistry => "registry.k8s.io/e2e-test-images",
            RegistryKey::BuildImageRegistry => "registry.k8s.io/build-image",
            RegistryKey::InvalidRegistry => "invalid.registry.k8s.io/invalid",
            RegistryKey::GcEtcdRegistry => "registry.k8s.io",
            RegistryKey::GcRegistry => "registry.k8s.io",
            RegistryKey::SigStorageRegistry => "registry.k8s.io/sig-storage",
            RegistryKey::GcrReleaseRegistry => "gcr.io/gke-release",
            RegistryKey::PrivateRegistry => "gcr.io/k8s-authenticated-test",
            RegistryKey::SampleRegistry => "gcr.io/google-samples",
            RegistryKey::MicrosoftRegistry => "mcr.microsoft.com",
            RegistryKey::DockerLibraryRegistry => "docker.io/library",
            RegistryKey::CloudProviderGcpRegistry => "registry.k8s.io/cloud-provider-gcp",
        }
    }

    /// The key for an override-file spelling, if it is one (case-sensitive, as upstream's YAML
    /// struct tags are).
    pub fn from_key(key: &str) -> Option<RegistryKey> {
        RegistryKey::ALL.into_iter().find(|k| k.as_str() == key)
    }
}

impl fmt::Display for RegistryKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The effective registry of every key: upstream defaults with any overrides applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registries {
    by_key: BTreeMap<RegistryKey, String>,
}

impl Default for Registries {
    /// Every key at its upstream default ([`RegistryKey::default_registry`]).
    fn default() -> Self {
        let by_key = RegistryKey::ALL
            .into_iter()
            .map(|k| (k, k.default_registry().to_string()))
            .collect();
        Registries { by_key }
    }
}

impl Registries {
    /// The registry images of `key` are pulled from.
    pub fn get(&self, key: RegistryKey) -> &str {
        self.by_key
            .get(&key)
            .map(String::as_str)
            .unwrap_or_else(|| key.default_registry())
    }

    /// Replaces the registry of exactly the keys `list` names.
    pub fn apply(&mut self, list: &RepoList) {
        for (key, registry) in &list.entries {
            self.by_key.insert(*key, registry.clone());
        }
    }

    /// Every key with its effective registry, in [`RegistryKey::ALL`] order.
    pub fn iter(&self) -> impl Iterator<Item = (RegistryKey, &str)> {
        RegistryKey::ALL.into_iter().map(|k| (k, self.get(k)))
    }
}

/// A parsed registry override file, in the upstream `KUBE_TEST_REPO_LIST` format: a YAML map
/// from registry keys to registries, e.g. `promoterE2eRegistry: mirror.example.com/e2e`.
///
/// Upstream silently ignores unknown keys, so a typo (`promoterE2ERegistry`) leaves the job
/// pulling from the public registry and failing much later on an air-gapped cluster; here an
/// unknown key, a non-string value or a file that is not a map is an error naming the file
/// and key. An empty file is an empty list (no overrides).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoList {
    origin: String,
    entries: BTreeMap<RegistryKey, String>,
}

impl RepoList {
    /// Reads and parses an override file.
    ///
    /// # Errors
    /// [`Error::ReadRepoList`] when the file cannot be read; otherwise as [`RepoList::from_yaml`],
    /// with the path as the origin.
    pub fn from_file(path: &Path) -> Result<RepoList> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::ReadRepoList {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_yaml_named(&text, &path.display().to_string())
    }

    /// Parses override-file text; errors name the origin `<inline>`.
    ///
    /// # Errors
    /// [`Error::RepoListSyntax`] (not YAML, or not a map), [`Error::UnknownRegistryKey`],
    /// [`Error::BadRegistryValue`].
    pub fn from_yaml(yaml: &str) -> Result<RepoList> {
        Self::from_yaml_named(yaml, "<inline>")
    }

    /// Parses override-file text; errors name `origin` (a path, usually).
    ///
    /// # Errors
    /// As [`RepoList::from_yaml`].
    pub fn from_yaml_named(yaml: &str, origin: &str) -> Result<RepoList> {
        let raw: Option<BTreeMap<String, serde_json::Value>> =
            serde_saphyr::from_str(yaml).map_err(|e| Error::RepoListSyntax {
                origin: origin.to_string(),
                detail: first_line(&e),
            })?;
        let mut entries = BTreeMap::new();
        for (key, value) in raw.unwrap_or_default() {
            let Some(known) = RegistryKey::from_key(&key) else {
                return Err(Error::UnknownRegistryKey {
                    origin: origin.to_string(),
                    key,
                    known: RegistryKey::ALL.map(RegistryKey::as_str).join(", "),
                });
            };
            let registry = match &value {
                serde_json::Value::String(s) if is_registry(s) => s.clone(),
                other => {
                    return Err(Error::BadRegistryValue {
                        origin: origin.to_string(),
                        key,
                        value: other.to_string(),
                    });
                }
            };
            entries.insert(known, registry);
        }
        Ok(RepoList {
            origin: origin.to_string(),
            entries,
        })
    }

    /// Where the list came from (a path, or `<inline>`).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The override for `key`, if the file names it.
    pub fn get(&self, key: RegistryKey) -> Option<&str> {
        self.entries.get(&key).map(String::as_str)
    }

    /// The keys the file names, with their registries.
    pub fn iter(&self) -> impl Iterator<Item = (RegistryKey, &str)> {
        self.entries.iter().map(|(k, v)| (*k, v.as_str()))
    }

    /// Whether the file names no key.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Whether `s` can prefix `/<path>:<tag>`: a host (optionally with a port) and optional
/// repository path, without a scheme, whitespace, a tag or digest, or stray slashes.
fn is_registry(s: &str) -> bool {
    !s.is_empty()
        && !s.contains("://")
        && !s.contains('@')
        && !s.chars().any(char::is_whitespace)
        && !s.starts_with('/')
        && !s.ends_with('/')
        && !s.contains("//")
        // A colon is only allowed as the port of the host part.
        && s.split('/').skip(1).all(|segment| !segment.contains(':'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_through_their_spelling() {
        for key in RegistryKey::ALL {
            assert_eq!(RegistryKey::from_key(key.as_str()), Some(key));
        }
        assert_eq!(RegistryKey::from_key("promoterE2ERegistry"), None);
    }

    #[test]
    fn defaults_follow_upstream() {
        let r = Registries::default();
        assert_eq!(
            r.get(RegistryKey::PromoterE2eRegistry),
            "registry.k8s.io/e2e-test-images"
        );
        assert_eq!(r.get(RegistryKey::GcRegistry), "registry.k8s.io");
        assert_eq!(r.get(RegistryKey::InvalidRegistry), "invalid.registry.k8s.io/invalid");
        assert_eq!(
            r.get(RegistryKey::GcAuthenticatedRegistry),
            "gcr.io/authenticated-image-pulling"
        );
    }

    #[test]
    fn override_replaces_only_named_keys() {
        let list = RepoList::from_yaml("gcRegistry: mirror.example.com:5000/k8s\n").unwrap();
        let mut r = Registries::default();
        r.apply(&list);
        for (key, registry) in r.iter() {
            if key == RegistryKey::GcRegistry {
                assert_eq!(registry, "mirror.example.com:5000/k8s");
            } else {
                assert_eq!(registry, key.default_registry(), "{key} changed");
            }
        }
    }

    #[test]
    fn empty_file_is_no_overrides() {
        assert!(RepoList::from_yaml("").unwrap().is_empty());
        assert!(RepoList::from_yaml("# nothing\n").unwrap().is_empty());
    }

    #[test]
    fn unknown_key_names_file_and_key() {
        let err = RepoList::from_yaml_named("promoterE2ERegistry: x.example.com\n", "list.yaml").unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, Error::UnknownRegistryKey { .. }), "{msg}");
        assert!(
            msg.contains("list.yaml") && msg.contains("\"promoterE2ERegistry\""),
            "{msg}"
        );
        assert!(!msg.contains('\n'));
    }

    #[test]
    fn non_string_values_are_rejected_with_their_key() {
        for (yaml, shown) in [
            ("gcRegistry: 5\n", "5"),
            ("gcRegistry:\n", "null"),
            ("gcRegistry: ''\n", "\"\""),
            ("gcRegistry: [a]\n", "[\"a\"]"),
            ("gcRegistry: https://mirror.example.com\n", "https://"),
            ("gcRegistry: mirror.example.com/e2e/\n", "e2e/"),
            ("gcRegistry: mirror.example.com/e2e:1.0\n", "e2e:1.0"),
        ] {
            let err = RepoList::from_yaml_named(yaml, "f.yaml").unwrap_err();
            let msg = err.to_string();
            assert!(matches!(err, Error::BadRegistryValue { .. }), "{yaml}: {msg}");
            assert!(msg.contains("key gcRegistry") && msg.contains(shown), "{yaml}: {msg}");
        }
    }

    #[test]
    fn malformed_yaml_is_one_line_naming_the_file() {
        for yaml in ["gcRegistry: [unclosed\n", "- a\n- b\n", "just a string\n"] {
            let err = RepoList::from_yaml_named(yaml, "broken.yaml").unwrap_err();
            let msg = err.to_string();
            assert!(matches!(err, Error::RepoListSyntax { .. }), "{yaml}: {msg}");
            assert!(msg.contains("broken.yaml"), "{msg}");
            assert!(!msg.contains('\n'), "{msg}");
        }
    }

    #[test]
    fn missing_file_is_a_read_error() {
        let err = RepoList::from_file(Path::new("/nonexistent/repo-list.yaml")).unwrap_err();
        assert!(matches!(err, Error::ReadRepoList { .. }));
        assert!(err.to_string().contains("/nonexistent/repo-list.yaml"));
    }
}
