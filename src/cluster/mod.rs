//! Connecting to a cluster and reading its node pools.
//!
//! The main type is [`Cluster`]: a cheap-to-clone kube [`kube::Client`] plus the node pools
//! seen at connect time. How to reach the cluster is a [`ClusterSpec`], decided by the CLI from
//! its flags and environment and passed down as a value.

#![expect(
    clippy::disallowed_methods,
    reason = "retry backoff and reconnect delays are real waits, not polling"
)]

mod connect;
mod pools;
pub mod retry;

pub use connect::{Cluster, ClusterSpec, Error, connect_timeout};
pub use pools::{NodeInfo, Pools, Taint};
