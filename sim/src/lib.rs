//! The simulated heterogeneous cluster: an HTTPS Kubernetes API server subset, a scheduler and
//! controllers, and kubelet-like Windows and Linux nodes whose pods serve real TCP/UDP on
//! loopback addresses.
//!
//! It is the harness's CI target and the embedded default (`--sim`), and an executable model of
//! how Windows nodes behave ([`crossconf_model::os`] holds the rules). It is not a mock: what a real
//! cluster refuses, it refuses.
//!
//! Two halves meet only through the Kubernetes API, like kwok on a real apiserver:
//! - [`api`]: the API server (object store, watch, discovery, validation, subresources).
//! - [`control`]: scheduler and controllers, as API clients (kube-rs).
//! - [`node`]: kubelets, the emulated container runtime and test images, kube-proxy, DNS;
//!   also API clients only.
//!
//! [`addr`] is the address plan every part shares; nothing is ever dialled outside 127.0.0.0/8.
//!
//! The boundary this crate keeps: it depends on the shared model (`crossconf-model`: the OS
//! profile and the image catalogue) and on nothing of the harness. The harness reaches it only
//! where `--sim` and `crossconf sim` are wired (its CLI, behind the default `sim` feature), so its
//! cases and framework can only meet the simulator through the Kubernetes API.

// The simulator models time itself (heartbeats, backoffs, scaled delays): it sleeps on purpose.
#![expect(clippy::disallowed_methods, reason = "the simulator paces emulated time with sleeps")]

pub mod addr;
pub mod api;
pub mod cluster;
pub mod control;
pub mod faults;
pub mod gates;
pub mod node;

pub use cluster::{Error, SimCluster, SimConfig};

/// The one rustls crypto provider of the process (ring, as kube's client uses).
///
/// With two providers compiled in, rustls refuses to pick one and building a TLS config panics;
/// the simulator installs ring before building its server and clients. Repeated calls, and a
/// provider already installed by the harness, are harmless.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
