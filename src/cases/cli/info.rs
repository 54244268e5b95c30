//! What kubectl reports about the cluster: `kubectl api-versions`, `kubectl cluster-info` and
//! `kubectl version` (upstream kubectl.go "Kubectl api-versions", "Kubectl cluster-info",
//! "Kubectl version").

use crate::case;
use crate::catalog::{Case, Kind};
use crate::ensure;
use crate::framework::{CaseResult, Framework};

/// Upstream kubectl.go "Kubectl api-versions".
pub(crate) const API_VERSIONS: &str = "[sig-cli] Kubectl client Kubectl api-versions should check if v1 is in \
     available api versions [Conformance]";
/// Upstream kubectl.go "Kubectl cluster-info".
pub(crate) const CLUSTER_INFO: &str = "[sig-cli] Kubectl client Kubectl cluster-info should check if Kubernetes \
     control plane services is included in cluster-info [Conformance]";
/// Upstream kubectl.go "Kubectl version".
pub(crate) const VERSION: &str = "[sig-cli] Kubectl client Kubectl version should check is all data is printed \
     [Conformance]";

pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(API_VERSIONS, Kind::Adapted, api_versions),
        case!(CLUSTER_INFO, Kind::Adapted, cluster_info),
        case!(VERSION, Kind::Adapted, version),
    ]
}

/// `kubectl api-versions` lists the core group's `v1`.
async fn api_versions(f: &Framework) -> CaseResult {
    f.step("validating api versions");
    let out = f.kubectl(&["api-versions"]).await?;
    // Upstream checks for the substring; the core group is the line that is exactly `v1`.
    ensure!(
        out.lines().any(|l| l.trim() == "v1"),
        "expected `kubectl api-versions` to list v1 (the core group), got:\n{out}"
    );
    Ok(())
}

/// `kubectl cluster-info` names the control plane and where it runs.
async fn cluster_info(f: &Framework) -> CaseResult {
    f.step("validating cluster-info");
    let out = f.kubectl(&["cluster-info"]).await?;
    for item in ["Kubernetes control plane", "is running at"] {
        ensure!(
            out.contains(item),
            "expected {item:?} in `kubectl cluster-info`, got:\n{out}"
        );
    }
    Ok(())
}

/// `kubectl version` prints the client's and the server's versions (`vMAJOR.MINOR.PATCH...`).
async fn version(f: &Framework) -> CaseResult {
    let out = f.kubectl(&["version"]).await?;
    for item in ["Client Version: ", "Server Version: "] {
        let value = out
            .lines()
            .find_map(|l| l.strip_prefix(item))
            .map(str::trim)
            .unwrap_or_default();
        ensure!(
            is_version(value),
            "expected {item:?} followed by a version vMAJOR.MINOR.PATCH in `kubectl version`, got:\n{out}"
        );
    }
    Ok(())
}

/// Whether `s` starts as upstream's `v\d\.\d+\.[\d\w\-\.\+]+` does.
fn is_version(s: &str) -> bool {
    let Some(rest) = s.strip_prefix('v') else {
        return false;
    };
    let mut parts = rest.splitn(3, '.');
    let major = parts.next().unwrap_or_default();
    let minor = parts.next().unwrap_or_default();
    let patch = parts.next().unwrap_or_default();
    major.len() == 1
        && major.chars().all(|c| c.is_ascii_digit())
        && !minor.is_empty()
        && minor.chars().all(|c| c.is_ascii_digit())
        && patch
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || "_-.+".contains(c))
}

#[cfg(test)]
mod tests {
    use super::is_version;

    #[test]
    fn versions_as_upstream_matches_them() {
        assert!(is_version("v1.33.2"));
        assert!(is_version("v1.37.1-dispatcher"));
        assert!(!is_version("1.33.2"));
        assert!(!is_version("v1.x.2"));
        assert!(!is_version(""));
    }
}
