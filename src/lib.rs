//! crossconf: does everything that should work on a cluster's Windows nodes work, and is
//! everything that cannot work skipped for a stated reason?
//!
//! The library is the whole tool; `main.rs` is a thin clap front end over [`cli::main_impl`].
//! Module map (one concept each):
//! - [`catalog`]: cases, their kinds and tags, the registry of all cases.
//! - [`select`]: focus/skip regexes, label expressions, suites and OS rules → a [`select::Plan`].
//! - [`cluster`]: connecting (kubeconfig, in-cluster, embedded simulator) and node pools.
//! - [`framework`]: what a case body uses (namespace, pod builders, waits, exec, netexec…).
//! - [`cases`]: the case bodies, by area.
//! - [`run`]: the executor (lanes, timeouts, flake attempts, signals) emitting [`run::Event`]s.
//! - [`report`]: JUnit, prow metadata, artifacts, progress, dashboard.
//! - [`images`]: the test image catalogue and registry overrides (from `crossconf-model`).
//! - [`os`]: the one place where Windows and Linux differ (`crossconf-model`, which the simulator
//!   reads too).
//!
//! The simulated cluster is its own crate, `crossconf-sim`; only [`cli`] reaches it (where
//! `--sim` and `crossconf sim` are wired, behind the default `sim` feature), so cases and the
//! framework meet it only through the Kubernetes API, as they meet a real cluster.

pub mod cases;
pub mod catalog;
pub mod cli;
pub mod cluster;
pub mod dashboard;
pub mod framework;
pub mod images;
pub mod report;
pub mod run;
pub mod select;

pub use crossconf_model::os;

/// The one rustls crypto provider of the whole binary.
///
/// kube defaults to ring and several other crates to aws-lc-rs; with two providers compiled in,
/// rustls refuses to pick one and building a client panics. Every entry point (CLI, tests,
/// simulator) calls this before building a TLS config; repeated calls are harmless.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
