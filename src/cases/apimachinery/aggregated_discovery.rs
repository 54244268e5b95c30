//! `[sig-api-machinery] AggregatedDiscovery` (upstream
//! test/e2e/apimachinery/aggregated_discovery.go): `/api` and `/apis` answer the aggregated
//! discovery form (`apidiscovery.k8s.io/v2` `APIGroupDiscoveryList`) when asked for it, listing
//! the built-in resources, and a new CRD's resource joins them.
//!
//! Only API reads, so one body serves both OSes. Upstream's "interface" cases go through
//! client-go's `AggregatedDiscoveryInterface`, which asks for the aggregated form (v2, then
//! v2beta1) with the plain form as a fallback and builds its group and resource maps from the
//! aggregated answer; here the same request is sent and the same maps are read from the answer.

use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionNames,
};
use kube::ResourceExt;
use serde_json::Value;

use super::crd::{GROUP, case_suffix, create_established, delete_gone, random_crd};
use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::{CaseError, CaseResult, Framework};
use crate::{ensure, fail};

/// Upstream aggregated_discovery.go "should support raw aggregated discovery endpoint Accept headers".
pub(crate) const RAW_ACCEPT: &str = "[sig-api-machinery] AggregatedDiscovery should support raw aggregated discovery endpoint Accept headers [Conformance]";
/// Upstream aggregated_discovery.go "should support raw aggregated discovery request for CRDs".
pub(crate) const RAW_CRD: &str =
    "[sig-api-machinery] AggregatedDiscovery should support raw aggregated discovery request for CRDs [Conformance]";
/// Upstream aggregated_discovery.go "should support aggregated discovery interface".
pub(crate) const INTERFACE: &str =
    "[sig-api-machinery] AggregatedDiscovery should support aggregated discovery interface [Conformance]";
/// Upstream aggregated_discovery.go "should support aggregated discovery interface for CRDs".
pub(crate) const INTERFACE_CRD: &str =
    "[sig-api-machinery] AggregatedDiscovery should support aggregated discovery interface for CRDs [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(RAW_ACCEPT, Kind::Adapted, raw_accept),
        case!(RAW_CRD, Kind::Adapted, raw_crd),
        case!(INTERFACE, Kind::Adapted, interface),
        case!(INTERFACE_CRD, Kind::Adapted, interface_crd),
    ]
}

/// Upstream's `aggregatedAccept`.
const AGGREGATED_ACCEPT: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
/// What client-go's aggregated discovery client asks for (its JSON ranges): v2, then v2beta1,
/// then the plain group list.
const CLIENT_ACCEPT: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,\
     application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList;q=0.9,application/json;q=0.8";
/// Upstream `wait.ForeverTestTimeout`, the bound of the CRD cases' polls (every second).
const FOREVER_TEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Upstream `expectedLegacyGVR`.
const LEGACY_GVR: &[(&str, &str, &str)] = &[("", "v1", "namespaces")];
/// Upstream `expectedGVR`.
const GVR: &[(&str, &str, &str)] = &[
    ("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations"),
    ("apiextensions.k8s.io", "v1", "customresourcedefinitions"),
    ("apiregistration.k8s.io", "v1", "apiservices"),
    ("apps", "v1", "deployments"),
    ("authentication.k8s.io", "v1", "tokenreviews"),
    ("authorization.k8s.io", "v1", "selfsubjectaccessreviews"),
    ("autoscaling", "v1", "horizontalpodautoscalers"),
    ("autoscaling", "v2", "horizontalpodautoscalers"),
    ("batch", "v1", "jobs"),
    ("certificates.k8s.io", "v1", "certificatesigningrequests"),
    ("coordination.k8s.io", "v1", "leases"),
    ("discovery.k8s.io", "v1", "endpointslices"),
    ("events.k8s.io", "v1", "events"),
    ("networking.k8s.io", "v1", "ingresses"),
    ("node.k8s.io", "v1", "runtimeclasses"),
    ("policy", "v1", "poddisruptionbudgets"),
    ("scheduling.k8s.io", "v1", "priorityclasses"),
    ("storage.k8s.io", "v1", "csinodes"),
];

/// An aggregated discovery document (`APIGroupDiscoveryList`) as read.
struct Aggregated(Value);

impl Aggregated {
    /// GETs `path` with `accept` and requires the aggregated form back (client-go only builds
    /// its resource maps from that form).
    async fn fetch(f: &Framework, path: &str, accept: &str) -> Result<Aggregated, CaseError> {
        f.step(format!("requesting {path} as {accept}"));
        let req = http::Request::get(path)
            .header(http::header::ACCEPT, accept)
            .body(Vec::new())
            .map_err(|e| CaseError::failed(format!("building a GET of {path}: {e}")))?;
        let text = f
            .client()
            .request_text(req)
            .await
            .map_err(|e| CaseError::from(e).context(format!("fetching {path} as aggregated discovery")))?;
        let doc: Value = serde_json::from_str(&text)
            .map_err(|e| CaseError::failed(format!("{path} answered what is not JSON: {e}: {text}")))?;
        ensure!(
            doc["kind"] == "APIGroupDiscoveryList",
            "{path} asked for as {accept} answered a {} (apiVersion {}), expected an APIGroupDiscoveryList",
            doc["kind"],
            doc["apiVersion"]
        );
        Ok(Aggregated(doc))
    }

    fn groups(&self) -> impl Iterator<Item = &Value> {
        self.0["items"].as_array().into_iter().flatten()
    }

    /// Upstream `isGVRPresentAPIDiscovery`.
    fn has_gvr(&self, (group, version, resource): (&str, &str, &str)) -> bool {
        self.groups()
            .filter(|g| g["metadata"]["name"].as_str().unwrap_or_default() == group)
            .flat_map(|g| g["versions"].as_array().into_iter().flatten())
            .filter(|v| v["version"] == version)
            .flat_map(|v| v["resources"].as_array().into_iter().flatten())
            .any(|r| r["resource"] == resource)
    }

    /// Upstream `isGVPresent` over the groups client-go derives from the document.
    fn has_gv(&self, group: &str, version: &str) -> bool {
        self.groups()
            .filter(|g| g["metadata"]["name"].as_str().unwrap_or_default() == group)
            .flat_map(|g| g["versions"].as_array().into_iter().flatten())
            .any(|v| v["version"] == version)
    }

    /// `group/version/resource` triples of the document, for failure messages.
    fn listing(&self) -> Vec<String> {
        self.groups()
            .flat_map(|g| {
                let name = g["metadata"]["name"].as_str().unwrap_or_default().to_string();
                g["versions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(move |v| format!("{name}/{}", v["version"].as_str().unwrap_or_default()))
            })
            .collect()
    }
}

fn gvr_name((group, version, resource): (&str, &str, &str)) -> String {
    format!("{group}/{version} {resource}")
}

/// Upstream: `/apis` asked for as aggregated discovery lists every expected built-in resource,
/// and `/api` lists the core namespaces.
async fn raw_accept(f: &Framework) -> CaseResult {
    let apis = Aggregated::fetch(f, "/apis", AGGREGATED_ACCEPT).await?;
    for gvr in GVR {
        ensure!(
            apis.has_gvr(*gvr),
            "Expected gvr {} to exist in /apis aggregated discovery; it lists {:?}",
            gvr_name(*gvr),
            apis.listing()
        );
    }
    let api = Aggregated::fetch(f, "/api", AGGREGATED_ACCEPT).await?;
    for gvr in LEGACY_GVR {
        ensure!(
            api.has_gvr(*gvr),
            "Expected legacy gvr {} to exist in /api aggregated discovery; it lists {:?}",
            gvr_name(*gvr),
            api.listing()
        );
    }
    Ok(())
}

/// Upstream: through the aggregated discovery client, every expected resource (built-in groups
/// and core) is in the resources by group-version, and every group-version in the groups.
async fn interface(f: &Framework) -> CaseResult {
    let api = Aggregated::fetch(f, "/api", CLIENT_ACCEPT).await?;
    let apis = Aggregated::fetch(f, "/apis", CLIENT_ACCEPT).await?;
    let either = |g: &str| if g.is_empty() { &api } else { &apis };
    for gvr in GVR.iter().chain(LEGACY_GVR) {
        ensure!(
            either(gvr.0).has_gvr(*gvr),
            "Expected {} to be present in the aggregated discovery client's resources",
            gvr_name(*gvr)
        );
    }
    for (group, version, _) in GVR.iter().chain(LEGACY_GVR) {
        ensure!(
            either(group).has_gv(group, version),
            "Expected {group}/{version} to be present in the aggregated discovery client's groups; they are {:?}",
            either(group).listing()
        );
    }
    Ok(())
}

/// Upstream's CRD for these cases: namespaced, resource `testcrds` of kind `testcrd` in a group
/// of its own (`group<random>.example.com`), one version v1 that keeps every field.
fn testcrd(f: &Framework) -> CustomResourceDefinition {
    let group = format!("group{}.{}", case_suffix(f), GROUP.trim_start_matches("mygroup."));
    let mut crd = random_crd(f, 0, &[]);
    crd.metadata.name = Some(format!("testcrds.{group}"));
    crd.spec.group = group;
    crd.spec.scope = "Namespaced".into();
    crd.spec.names = CustomResourceDefinitionNames {
        plural: "testcrds".into(),
        singular: Some("testcrd".into()),
        kind: "testcrd".into(),
        list_kind: Some("testcrdList".into()),
        ..Default::default()
    };
    if let Some(v) = crd.spec.versions.first_mut() {
        v.name = "v1".into();
    }
    crd
}

/// Creates upstream's CRD, reads `/apis` (with `accept`) every second until its resource is
/// listed, for at most 30 s, and deletes the CRD.
async fn crd_appears(f: &Framework, accept: &str) -> CaseResult {
    let crd = create_established(f, &testcrd(f)).await?;
    let gvr = (crd.spec.group.as_str(), "v1", "testcrds");
    let result = async {
        let until = Instant::now() + FOREVER_TEST_TIMEOUT.min(f.remaining());
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            let apis = Aggregated::fetch(f, "/apis", accept).await?;
            if apis.has_gvr(gvr) {
                return Ok(());
            }
            if Instant::now() >= until {
                fail!(
                    "timed out waiting for CustomResourceDefinition GVR {} to appear in aggregated discovery \
                     within {FOREVER_TEST_TIMEOUT:?}; /apis lists {:?}",
                    gvr_name(gvr),
                    apis.listing()
                );
            }
        }
    }
    .await;
    let cleanup = delete_gone(f, &crd.name_any()).await;
    result.and(cleanup)
}

/// Upstream: a new CRD's resource appears in `/apis` asked for as aggregated discovery.
async fn raw_crd(f: &Framework) -> CaseResult {
    crd_appears(f, AGGREGATED_ACCEPT).await
}

/// Upstream: a new CRD's resource appears in the aggregated discovery client's resources.
async fn interface_crd(f: &Framework) -> CaseResult {
    crd_appears(f, CLIENT_ACCEPT).await
}
