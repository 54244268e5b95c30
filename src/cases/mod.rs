//! The case bodies, by area. [`all`] is the registry every front end uses.
//!
//! Each area module exposes `cases() -> Vec<Case>`; a case body reads like the upstream `It`
//! block it mirrors and keeps every OS difference in [`crate::os`] and the framework's builders.

pub mod api;
pub mod apimachinery;
pub mod apiops;
pub mod apps;
pub mod architecture;
pub mod cli;
pub mod config;
pub mod device_plugin;
pub mod dns;
pub mod dns_conformance;
pub mod endpointslice;
pub mod eviction;
pub mod gmsa;
pub mod gmsa_deploy;
pub mod gmsa_full;
pub mod hostprocess;
pub mod hostprocess_paths;
pub mod hybrid;
pub mod hyperv;
pub mod kubelet_metrics;
pub mod network;
pub mod node;
pub mod node_shutdown;
pub mod pods;
pub mod policy;
pub mod preemption;
pub mod probe_grace;
pub mod probes;
pub mod proxy;
mod proxy_verbs;
pub mod reboot_host;
pub mod scheduling;
pub mod security;
pub mod service;
pub mod service_api;
pub mod service_latency;
pub mod service_protocols;
pub mod stop_signals;
pub mod storage;
pub mod subpath_cleanup;
pub mod taints;
pub mod volumes;
pub mod windows;

use crate::catalog::Case;

/// Every logical image a case may ask for: what preflight checks against each Windows node's
/// build and what `--prepull-images` pulls. A test keeps it in step with the case sources.
pub const IMAGES_USED: &[&str] = &["agnhost", "busybox", "pause"];

/// Every registered case, in a stable order (area by area).
pub fn all() -> Vec<Case> {
    let mut cases = Vec::new();
    cases.extend(network::cases());
    cases.extend(dns::cases());
    cases.extend(dns_conformance::cases());
    cases.extend(service::cases());
    cases.extend(service_api::cases());
    cases.extend(service_latency::cases());
    cases.extend(service_protocols::cases());
    cases.extend(endpointslice::cases());
    cases.extend(proxy::cases());
    cases.extend(architecture::cases());
    cases.extend(hybrid::cases());
    cases.extend(pods::cases());
    cases.extend(config::cases());
    cases.extend(probes::cases());
    cases.extend(probe_grace::cases());
    cases.extend(storage::cases());
    cases.extend(volumes::cases());
    cases.extend(apps::cases());
    cases.extend(api::cases());
    cases.extend(policy::cases());
    cases.extend(scheduling::cases());
    cases.extend(preemption::cases());
    cases.extend(taints::cases());
    cases.extend(node::cases());
    cases.extend(security::cases());
    cases.extend(windows::cases());
    cases.extend(hostprocess::cases());
    cases.extend(hostprocess_paths::cases());
    cases.extend(stop_signals::cases());
    cases.extend(device_plugin::cases());
    cases.extend(hyperv::cases());
    cases.extend(kubelet_metrics::cases());
    cases.extend(subpath_cleanup::cases());
    cases.extend(gmsa::cases());
    cases.extend(gmsa_full::cases());
    cases.extend(eviction::cases());
    cases.extend(apimachinery::cases());
    cases.extend(apiops::cases());
    cases.extend(cli::cases());
    cases.extend(node_shutdown::cases());
    cases.extend(reboot_host::cases());
    cases
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_catalogue_builds_with_unique_names() {
        let cases = super::all();
        let catalog = crate::catalog::Catalog::new(cases);
        assert!(catalog.is_ok(), "{:?}", catalog.err());
    }
}
