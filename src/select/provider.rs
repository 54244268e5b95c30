//! `--provider`: what kind of infrastructure the cluster runs on, as e2e.test's flag says it.
//!
//! Some cases need what only a cloud gives (a load balancer a `type: LoadBalancer` Service
//! gets an address from, a cloud disk). Upstream's cases call `SkipUnlessProviderIs("gce",
//! "gke", "aws")` at their start; crossconf declares the same list on the case
//! ([`crate::catalog::Case::only_on_providers`]) so the plan skips it at once, with upstream's
//! words, instead of letting the case wait minutes for an address that never comes.
//!
//! The names are e2e.test's, so a job's `--provider` flag carries over unchanged; like
//! e2e.test, an empty or absent provider means `skeleton` (a cluster with no cloud
//! integration). `sim` is crossconf's simulated cluster, which has no cloud either.

use std::fmt;
use std::str::FromStr;

/// Every provider name crossconf accepts, with what it means for the cases.
pub const PROVIDERS: &[(&str, &str)] = &[
    ("skeleton", "no cloud integration (e2e.test's default)"),
    ("local", "a local cluster (kind, kubeadm on VMs); no cloud integration"),
    ("aws", "Amazon Web Services: load balancers and EBS volumes"),
    ("azure", "Microsoft Azure: load balancers and managed disks"),
    ("gce", "Google Compute Engine: load balancers and persistent disks"),
    ("gke", "Google Kubernetes Engine: load balancers and persistent disks"),
    ("kubemark", "hollow nodes for scale tests"),
    ("openstack", "OpenStack"),
    ("vsphere", "VMware vSphere"),
    (
        "sim",
        "crossconf's simulated cluster: no cloud load balancer, no cloud volumes",
    ),
];

/// A known provider name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provider(&'static str);

impl Provider {
    /// e2e.test's default: no cloud.
    pub const SKELETON: Provider = Provider("skeleton");
    /// The simulated cluster.
    pub const SIM: Provider = Provider("sim");

    /// The name.
    pub fn name(&self) -> &'static str {
        self.0
    }

    /// Whether this provider is one of `names`.
    pub fn is_one_of(&self, names: &[&str]) -> bool {
        names.contains(&self.0)
    }
}

impl Default for Provider {
    fn default() -> Self {
        Provider::SKELETON
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// A provider name crossconf does not know (exit 2, as e2e.test refuses one).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown provider {name:?}; known providers: {}", known())]
pub struct UnknownProvider {
    /// The name as given.
    pub name: String,
}

fn known() -> String {
    PROVIDERS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
}

impl FromStr for Provider {
    type Err = UnknownProvider;

    /// Case-sensitive, as e2e.test; the empty string is `skeleton`.
    fn from_str(s: &str) -> Result<Provider, UnknownProvider> {
        if s.is_empty() {
            return Ok(Provider::SKELETON);
        }
        PROVIDERS
            .iter()
            .find(|(n, _)| *n == s)
            .map(|(n, _)| Provider(n))
            .ok_or_else(|| UnknownProvider { name: s.to_string() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_empty_is_skeleton() {
        assert_eq!("".parse::<Provider>().unwrap(), Provider::SKELETON);
        assert_eq!("gce".parse::<Provider>().unwrap().name(), "gce");
        assert!("aws".parse::<Provider>().unwrap().is_one_of(&["gce", "gke", "aws"]));
        assert!(!Provider::SIM.is_one_of(&["gce", "gke", "aws"]));
    }

    #[test]
    fn unknown_names_list_the_known_ones() {
        let e = "GCE".parse::<Provider>().unwrap_err().to_string();
        assert!(
            e.starts_with("unknown provider \"GCE\"; known providers: skeleton, local, aws"),
            "{e}"
        );
    }
}
