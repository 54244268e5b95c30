//! The errors of the image catalogue and of registry override files.

use std::path::PathBuf;

use crate::os::Os;

/// A `Result` whose error is this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong loading images or resolving a reference.
///
/// Override-file errors are user input (exit 2 in the CLI) and always name the file, and the
/// key when there is one, so a CI log shows in one line what to fix.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The override file could not be read.
    #[error("cannot read registry override file {}", path.display())]
    ReadRepoList {
        /// The file named by `--kube-test-repo-list` or `KUBE_TEST_REPO_LIST`.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The override file is not YAML, or not a map.
    #[error("registry override file {origin} is not a YAML map of registry keys ({detail})")]
    RepoListSyntax {
        /// The file (or `<inline>`).
        origin: String,
        /// The first line of the parser's message, with its position.
        detail: String,
    },
    /// The override file names a key upstream does not define.
    #[error("registry override file {origin}: unknown key {key:?} (known keys: {known})")]
    UnknownRegistryKey {
        /// The file (or `<inline>`).
        origin: String,
        /// The key as written.
        key: String,
        /// The known keys, comma separated.
        known: String,
    },
    /// A key's value is not a usable registry.
    #[error(
        "registry override file {origin}: key {key} must be a registry such as \
         registry.example.com/e2e-test-images, got {value}"
    )]
    BadRegistryValue {
        /// The file (or `<inline>`).
        origin: String,
        /// The key.
        key: String,
        /// The value, rendered as JSON so its type shows (`5`, `null`, `""`).
        value: String,
    },
    /// The catalogue YAML does not parse.
    #[error("image catalogue is not valid ({detail})")]
    CatalogSyntax {
        /// The first line of the parser's message, with its position.
        detail: String,
    },
    /// An image entry of the catalogue is inconsistent.
    #[error("image catalogue entry {image:?}: {problem}")]
    InvalidCatalogEntry {
        /// The logical name of the entry.
        image: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A case asked for a logical name the catalogue does not have.
    #[error("unknown image {0:?}: not in images/images.yaml")]
    UnknownImage(String),
    /// The image has no variant for the OS at all.
    #[error("image {image} has no {os} variant")]
    NoOsVariant {
        /// The logical name.
        image: String,
        /// The OS asked for.
        os: Os,
    },
    /// The image has a Windows variant, but not for this build.
    #[error("image {image} has no variant for Windows build {build} (it has {supported})")]
    NoBuildVariant {
        /// The logical name.
        image: String,
        /// The build asked for.
        build: String,
        /// The builds it has, comma separated.
        supported: String,
    },
    /// The image's Windows tag differs per build and no build was given.
    #[error("image {image} has a different tag per Windows build; name the build to resolve it")]
    BuildRequired {
        /// The logical name.
        image: String,
    },
}

/// The first line of a YAML parser error, which carries the message and its position.
///
/// serde-saphyr renders errors with a multi-line source snippet; a CLI error must be one line,
/// so only the headline is kept (it names line and column).
pub(crate) fn first_line(error: &impl std::fmt::Display) -> String {
    let text = error.to_string();
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("unknown error");
    line.strip_prefix("error: ").unwrap_or(line).to_string()
}
