//! The node half of the simulated cluster: kubelet-like agents for Windows and Linux nodes, an
//! emulated container runtime that runs the test images natively, kube-proxy and cluster DNS.
//!
//! Everything here talks to the API server only through kube-rs, as kwok does on a real
//! apiserver, and binds or dials only loopback addresses from the cluster's
//! [`crate::addr::AddressBlock`]. The entry points are [`start_network`] (kube-proxy,
//! cluster DNS, node resolver, outside host) and [`start_node`] (one kubelet).

pub mod ad;
pub mod dns;
pub mod fs;
pub mod grpc;
pub mod http;
pub mod kubelet;
pub mod net;
pub mod network;
pub mod outside;
pub mod portforward;
pub mod profile;
pub mod programs;
pub mod proxy;
pub mod registry;
pub mod remotecommand;
pub mod resource_metrics;
pub mod runtime;
pub mod server;
pub mod shell;
pub mod spdy;
pub mod stats;

pub use kubelet::{Capacity, ExecError, KubeletError, NodeConfig, NodeHandle, Reserved, start_node};
pub use net::SimNet;
pub use net::{Dialer, FaultSpecError, Faults, NetError, PingOutcome, Source, StatsField};
pub use network::{NetworkError, start_network, start_network_with};
pub use profile::{ImageWeight, LatencyProfile};
pub use runtime::error_chain;
