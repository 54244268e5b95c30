//! Framework helpers for workload and configuration objects.
//!
//! Cases describe *what* they run with a [`PodBuilder`]; this module turns that pod into the
//! template of a Deployment, ReplicaSet, ReplicationController, StatefulSet, DaemonSet, Job or
//! CronJob, builds ConfigMaps, Secrets and the volumes that consume them, and waits on sets of
//! objects (every pod of a controller, every job of a CronJob) through one watch.
//!
//! The object builders are pure functions (unit-tested below); [`Framework::create`] stamps the
//! run-id label and the case namespace on whatever it creates, and [`Framework::wait_list`] is
//! the list counterpart of [`Framework::wait_for`]: it watches everything matching a label
//! selector and returns once a predicate over the whole set holds.
//!
//! One file per concept: `controllers` and `config` build objects, `output` reads what
//! containers print, `sets` creates and waits, `conditions` are predicates for single waits.

mod config;
mod controllers;
mod output;
mod sets;

/// Conditions over controller objects for [`Framework::wait_for`](crate::framework::Framework::wait_for).
pub mod conditions;

pub use config::*;
pub use controllers::*;
pub use output::*;
pub use sets::*;
