//! The control plane of the simulated cluster: kube-scheduler and kube-controller-manager's
//! loops, written as kube-rs API clients so they could drive a real API server too.
//!
//! The main entry is [`start`], configured by [`ControlConfig`]; it returns a [`ControlPlane`].
//! [`predicates`] holds the scheduler's pure filters, [`clock`] the injectable time source.

pub mod clock;
mod clusterroleaggregation;
mod cronjob;
mod daemonset;
mod deployment;
mod deployment_scale;
mod discovery;
mod disruption;
mod endpoints;
mod error;
pub mod events;
mod gc;
mod history;
mod informer;
mod job;
mod job_failure_policy;
mod job_tracking;
mod mirroring;
mod namespace;
mod namespace_conditions;
mod nodelifecycle;
mod plane;
pub mod predicates;
mod quota;
mod replicaset;
mod scheduler;
mod serviceaccount;
mod statefulset;
mod tainteviction;
mod tokens;
pub mod util;
mod writes;

pub use clock::{Clock, ManualClock, ScaledClock, SystemClock};
pub use error::{Error, Result};
pub use plane::{Component, ControlConfig, ControlPlane, DEFAULT_NODE_MONITOR_GRACE_PERIOD, start};

pub use quota::{Usage, compute_usage};
pub use scheduler::priority;
