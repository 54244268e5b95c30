//! Adapted sig-storage and sig-node volume cases beyond `config.rs`: downward API values in
//! plain and projected volumes (resources, node allocatable defaults, metadata updates), and
//! projected ConfigMap and Secret volumes, optional volume sources, immutable Secrets.
//!
//! One body per case serves both OSes: paths come from the OS profile through
//! [`super::config::mount_path`] and [`super::config::file_path`].

mod atomic_subpath;
mod basics;
mod binary;
mod csi_inline;
mod downward;
mod host_path;
mod immutable;
mod memory_size;
mod nonoptional;
mod nonroot;
mod optional;
mod projected;
mod same_name;
mod wrapper;
mod wrapper_race;

use crate::catalog::Case;

/// The first downward API, emptyDir and projected volume cases (issue 7's adapted set, which
/// began in `config.rs`).
pub fn basic_cases() -> Vec<Case> {
    basics::cases()
}

/// The cases of this area, in catalogue order.
pub fn cases() -> Vec<Case> {
    let mut cases = basics::cases();
    cases.extend(downward::cases());
    cases.extend(projected::cases());
    cases.extend(optional::cases());
    cases.extend(immutable::cases());
    cases.extend(nonroot::cases());
    cases.extend(same_name::cases());
    cases.extend(binary::cases());
    cases.extend(host_path::cases());
    cases.extend(wrapper::cases());
    cases.extend(atomic_subpath::cases());
    cases.extend(csi_inline::cases());
    cases.extend(nonoptional::cases());
    cases.extend(wrapper_race::cases());
    cases.extend(memory_size::cases());
    cases
}
