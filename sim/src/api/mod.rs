//! The simulated cluster's API server: an HTTPS Kubernetes API subset that real clients
//! (kube-rs, kubectl) cannot tell from a real one for what the suites and a person do.
//!
//! Start one with [`ApiServer::start`]; [`router`] is the same app without a socket, for tests.
//! Modules, one concept each:
//! - [`server`]: TLS listener, kubeconfig and kube client configuration.
//! - [`handler`]: the filter chain (authentication, impersonation, authorization) and dispatch.
//! - [`auth`]: tokens, users, RBAC and the review resources.
//! - [`store`]: objects, the global resourceVersion, watch history.
//! - [`objects`]: verbs and object subresources; [`watch`]: watch streams.
//! - [`admission`], [`defaults`], [`validate`], [`fieldcheck`]: what happens before a write.
//! - [`discovery`], [`openapi`], [`table`]: what kubectl reads to find and print things.
//! - [`crd`]: CustomResourceDefinitions and the custom kinds they serve.
//! - [`proxy`]: logs, exec and proxies forwarded to kubelets and pods.
//! - [`aggregator`]: APIServices served by another API server behind a Service.
//! - [`transient`]: the transient fault switches (error answers, latency spikes, cut responses,
//!   outages, cut watches).

pub mod admission;
pub mod aggregator;
pub mod auth;
pub mod bootstrap;
pub mod compactor;
pub mod convert;
pub mod crd;
pub mod defaults;
pub mod discovery;
pub mod error;
pub mod fieldcheck;
pub mod flowcontrol;
pub mod handler;
pub mod meta;
pub mod objects;
pub mod openapi;
pub mod openid;
pub mod patch;
pub mod portforward;
pub mod protobuf;
pub mod proxy;
pub mod registry;
pub mod restart_rules;
pub mod route;
pub mod selector;
pub mod server;
pub mod ssa;
pub mod state;
pub mod stop_signal;
pub mod store;
pub mod table;
pub mod tls;
pub mod transient;
pub mod validate;
pub mod validate_ephemeral;
pub mod validate_kinds;
pub mod validate_probes;
pub mod validate_windows;
pub mod vap;
pub mod watch;
pub mod webhook;
pub mod zero;

pub use error::{ApiError, Cause, Error};
pub use handler::router;
pub use server::{ApiConfig, ApiServer};
pub use state::{AppState, StateConfig};
