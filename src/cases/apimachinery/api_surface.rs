//! `[sig-api-machinery] server version` (upstream test/e2e/apimachinery/server_version.go) and
//! `[sig-api-machinery] Discovery` (discovery.go): what the API server says about itself at
//! `/version`, `/apis`, `/apis/{group}` and `/apis/{group}/{version}`.
//!
//! Only API reads, so one body serves both OSes.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{APIGroup, APIGroupList, APIResourceList};
use k8s_openapi::apimachinery::pkg::version::Info;

use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::{CaseResult, Framework};
use crate::{ensure, fail};

/// Upstream server_version.go "should find the server version".
pub(crate) const SERVER_VERSION: &str =
    "[sig-api-machinery] server version should find the server version [Conformance]";
/// Upstream discovery.go "should validate PreferredVersion for each APIGroup".
pub(crate) const PREFERRED_VERSION: &str =
    "[sig-api-machinery] Discovery should validate PreferredVersion for each APIGroup [Conformance]";
/// Upstream discovery.go "should locate the groupVersion and a resource within each APIGroup".
pub(crate) const GROUP_RESOURCES: &str =
    "[sig-api-machinery] Discovery should locate the groupVersion and a resource within each APIGroup [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(SERVER_VERSION, Kind::Adapted, server_version),
        case!(PREFERRED_VERSION, Kind::Adapted, preferred_version),
        case!(GROUP_RESOURCES, Kind::Adapted, group_resources),
    ]
}

/// Upstream: `/version` answers, its major version is one digit 1–9 and nothing else, and its
/// minor version holds one run of digits (a `+` may follow, as providers' builds add).
async fn server_version(f: &Framework) -> CaseResult {
    let info: Info = f.get_path("/version").await?;
    let major_ok = info.major.len() == 1 && info.major.chars().all(|c| ('1'..='9').contains(&c));
    ensure!(
        major_ok,
        "/version reports major version {:?}, expected a single digit 1-9 (gitVersion {:?})",
        info.major,
        info.git_version
    );
    let digits: String = info.minor.chars().filter(char::is_ascii_digit).collect();
    let first_run: String = info
        .minor
        .chars()
        .skip_while(|c| !c.is_ascii_digit())
        .take_while(char::is_ascii_digit)
        .collect();
    ensure!(
        !first_run.is_empty() && first_run == digits,
        "/version reports minor version {:?}, expected one run of digits (a `+` may follow) (gitVersion {:?})",
        info.minor,
        info.git_version
    );
    f.step(format!(
        "server version {}.{} ({})",
        info.major, info.minor, info.git_version
    ));
    Ok(())
}

/// Upstream: every group of `/apis` (but the `*.example.com` ones other cases add and remove)
/// answers at `/apis/{group}/` with its versions, and its preferred version is one of them.
async fn preferred_version(f: &Framework) -> CaseResult {
    let list: APIGroupList = f.get_path("/apis/").await?;
    ensure!(!list.groups.is_empty(), "/apis lists no API group");
    let mut checked = 0usize;
    for listed in &list.groups {
        if listed.name.ends_with(".example.com") {
            continue;
        }
        let group: APIGroup = f.get_path(&format!("/apis/{}/", listed.name)).await?;
        ensure!(
            !group.versions.is_empty(),
            "/apis/{}/ lists no version for group {}",
            listed.name,
            group.name
        );
        let preferred = group
            .preferred_version
            .as_ref()
            .map(|p| p.group_version.clone())
            .unwrap_or_default();
        let versions: Vec<&str> = group.versions.iter().map(|v| v.group_version.as_str()).collect();
        ensure!(
            versions.contains(&preferred.as_str()),
            "/apis/{}/ prefers version {preferred:?}, which is not among its versions {versions:?}",
            listed.name
        );
        checked += 1;
    }
    f.step(format!("{checked} API groups have a valid preferred version"));
    Ok(())
}

/// Upstream's table: a base path, group, version and one resource each must list.
const GROUP_VERSION_RESOURCES: &[(&str, &str, &str, &str)] = &[
    ("/api", "", "v1", "namespaces"),
    (
        "/apis",
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
    ),
    ("/apis", "apiextensions.k8s.io", "v1", "customresourcedefinitions"),
    ("/apis", "apiregistration.k8s.io", "v1", "apiservices"),
    ("/apis", "apps", "v1", "deployments"),
    ("/apis", "authentication.k8s.io", "v1", "tokenreviews"),
    ("/apis", "authorization.k8s.io", "v1", "selfsubjectaccessreviews"),
    ("/apis", "autoscaling", "v1", "horizontalpodautoscalers"),
    ("/apis", "autoscaling", "v2", "horizontalpodautoscalers"),
    ("/apis", "batch", "v1", "jobs"),
    ("/apis", "certificates.k8s.io", "v1", "certificatesigningrequests"),
    ("/apis", "coordination.k8s.io", "v1", "leases"),
    ("/apis", "discovery.k8s.io", "v1", "endpointslices"),
    ("/apis", "events.k8s.io", "v1", "events"),
    ("/apis", "networking.k8s.io", "v1", "ingresses"),
    ("/apis", "node.k8s.io", "v1", "runtimeclasses"),
    ("/apis", "policy", "v1", "poddisruptionbudgets"),
    ("/apis", "scheduling.k8s.io", "v1", "priorityclasses"),
    ("/apis", "storage.k8s.io", "v1", "csinodes"),
];

/// Upstream: each group version of the table answers with a resource list that names that
/// group version and holds the resource.
async fn group_resources(f: &Framework) -> CaseResult {
    for (base, group, version, resource) in GROUP_VERSION_RESOURCES {
        let (path, group_version) = if group.is_empty() {
            (format!("{base}/{version}"), (*version).to_string())
        } else {
            (format!("{base}/{group}/{version}"), format!("{group}/{version}"))
        };
        let list: APIResourceList = f.get_path(&path).await?;
        ensure!(
            list.group_version == group_version,
            "{path} answers groupVersion {:?}, expected {group_version:?}",
            list.group_version
        );
        if !list.resources.iter().any(|r| r.name == *resource) {
            let names: Vec<&str> = list.resources.iter().map(|r| r.name.as_str()).collect();
            fail!("resource {resource:?} was not found in the resource list of {path}: {names:?}");
        }
    }
    Ok(())
}
