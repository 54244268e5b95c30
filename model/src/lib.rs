//! What crossconf's harness and its simulated cluster both read, and nothing else.
//!
//! - [`os`]: the OS profile, every difference between Windows and Linux nodes in one place. The
//!   harness asks it what to create on each OS; the simulator asks it how each OS behaves.
//! - [`images`]: the test image catalogue (`images/images.yaml`, embedded), registry overrides
//!   in the upstream `KUBE_TEST_REPO_LIST` format, and Windows build matching.
//!
//! The boundary this crate keeps: it knows no Kubernetes client, no HTTP and no async runtime,
//! so both sides can depend on it without depending on each other.

pub mod images;
pub mod os;
