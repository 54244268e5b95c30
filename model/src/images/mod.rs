//! The test image catalogue, registry overrides and Windows build matching.
//!
//! The main structure in this module is [`ImageCatalog`]: every image a case uses, by logical
//! name (`agnhost`, `busybox`, `pause`…), loaded from `images/images.yaml` (embedded in the
//! binary so it works from any directory). Cases never spell a reference; they ask the catalogue
//! to [`resolve`](ImageCatalog::resolve) a logical name for an OS and Windows build, so one
//! [`RepoList`] (the upstream `KUBE_TEST_REPO_LIST` format) relocates every image at once, and a
//! Windows node whose build no image supports is caught by
//! [`check_builds`](ImageCatalog::check_builds) before any case waits on a pull that can never
//! succeed. The simulator's image registry is built from the same catalogue.

mod catalog;
mod error;
mod registry;

pub use catalog::{BuildMismatch, Identified, ImageCatalog, ImageSpec, MismatchReason, ResolvedImage};
pub use error::{Error, Result};
pub use registry::{Registries, RegistryKey, RepoList};
