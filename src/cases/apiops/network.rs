//! `[sig-network]` API-operations cases: IngressClass and Ingress (upstream
//! test/e2e/network/ingressclass.go, ingress.go), EndpointSlice (endpointslice.go), and the
//! lifecycle of a Service's `/status` (service.go "should complete a service status lifecycle").

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, Service, ServicePort, ServiceSpec};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointPort, EndpointSlice};
use k8s_openapi::api::networking::v1::{
    HTTPIngressPath, HTTPIngressRuleValue, Ingress, IngressBackend, IngressClass, IngressClassSpec,
    IngressLoadBalancerIngress, IngressLoadBalancerStatus, IngressRule, IngressServiceBackend, IngressSpec,
    ServiceBackendPort,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Patch, PatchParams};
use kube::runtime::wait::conditions::is_deleted;
use kube::{Api, ResourceExt};
use serde_json::json;

use super::update_status;
use super::walk::{Walk, annotated};
use crate::case;
use crate::cases::api::find_in_all_namespaces;
use crate::catalog::{Case, Kind};
use crate::ensure;
use crate::framework::{CaseResult, Framework};

/// Upstream ingressclass.go "should support creating IngressClass API operations".
pub(crate) const INGRESSCLASS_API: &str =
    "[sig-network] IngressClass API should support creating IngressClass API operations [Conformance]";
/// Upstream ingress.go "should support creating Ingress API operations".
pub(crate) const INGRESS_API: &str =
    "[sig-network] Ingress API should support creating Ingress API operations [Conformance]";
/// Upstream endpointslice.go "should support creating EndpointSlice API operations".
pub(crate) const ENDPOINTSLICE_API: &str =
    "[sig-network] EndpointSlice should support creating EndpointSlice API operations [Conformance]";
/// Upstream service.go "should complete a service status lifecycle".
pub(crate) const SERVICE_STATUS: &str =
    "[sig-network] Services should complete a service status lifecycle [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(INGRESSCLASS_API, Kind::Adapted, ingressclass_api),
        case!(INGRESS_API, Kind::Adapted, ingress_api),
        case!(ENDPOINTSLICE_API, Kind::Adapted, endpointslice_api),
        case!(SERVICE_STATUS, Kind::Adapted, service_status),
    ]
}

/// Metadata `name` with label `key` set to the case namespace (upstream's `f.UniqueName`), so
/// cluster-wide lists see this case's objects only.
fn labelled(f: &Framework, name: &str, key: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        labels: Some(BTreeMap::from([(key.to_string(), f.ns().to_string())])),
        ..Default::default()
    }
}

/// Walks IngressClasses through discovery, create, get, list, watch, patch, update, delete
/// and delete a collection.
async fn ingressclass_api(f: &Framework) -> CaseResult {
    let walk = Walk::new(f.api_all::<IngressClass>(), format!("ingressclass={}", f.ns()));
    let classes = (1..=3)
        .map(|i| IngressClass {
            metadata: labelled(f, &format!("{}-ingressclass{i}", f.ns()), "ingressclass"),
            spec: Some(IngressClassSpec {
                controller: Some("example.com/controller".into()),
                ..Default::default()
            }),
        })
        .collect();
    let first = walk.open(f, classes, 0).await?.name_any();
    walk.close(f, &first, 2).await
}

/// An Ingress `name` for host `host` with a default backend, as upstream's template.
fn ingress(f: &Framework, name: &str, host: &str) -> Ingress {
    let backend = |svc: &str| IngressBackend {
        service: Some(IngressServiceBackend {
            name: svc.into(),
            port: Some(ServiceBackendPort {
                number: Some(8080),
                ..Default::default()
            }),
        }),
        ..Default::default()
    };
    Ingress {
        metadata: labelled(f, name, "special-label"),
        spec: Some(IngressSpec {
            default_backend: Some(backend("default-backend")),
            rules: Some(vec![IngressRule {
                host: Some(host.into()),
                http: Some(HTTPIngressRuleValue {
                    paths: vec![HTTPIngressPath {
                        path: Some("/".into()),
                        path_type: "ImplementationSpecific".into(),
                        backend: backend("test-backend"),
                    }],
                }),
            }]),
            ..Default::default()
        }),
        status: None,
    }
}

/// The load-balancer IPs of an Ingress's status.
fn ingress_lb_ips(ing: &Ingress) -> Vec<String> {
    ing.status
        .iter()
        .filter_map(|s| s.load_balancer.as_ref())
        .flat_map(|lb| lb.ingress.iter().flatten())
        .filter_map(|i| i.ip.clone())
        .collect()
}

/// Walks Ingresses as [`ingressclass_api`] does, plus a cluster-wide list and the `/status`
/// subresource: patched, updated and read back.
async fn ingress_api(f: &Framework) -> CaseResult {
    let selector = format!("special-label={}", f.ns());
    let walk = Walk::new(f.api::<Ingress>(), selector.clone());
    let ingresses = (1..=3)
        .map(|i| ingress(f, &format!("e2e-example-ing{i}"), &format!("host{i}.bar.com")))
        .collect();
    let created = walk.open(f, ingresses, 2).await?;
    let last = created.name_any();
    find_in_all_namespaces::<Ingress>(f, &selector, f.ns(), &last).await?;

    f.step(format!("patching /status of Ingress {last}"));
    let api = walk.api();
    let patch = json!({
        "metadata": {"annotations": {"patchedstatus": "true"}},
        "status": {"loadBalancer": {"ingress": [{"ip": "169.1.1.1"}]}}
    });
    let patched = api
        .patch_status(&last, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let ips = ingress_lb_ips(&patched);
    ensure!(
        ips == ["169.1.1.1"] && annotated(&patched, "patchedstatus"),
        "Ingress {last} after the patch of /status: expected load-balancer IP 169.1.1.1 and annotation \
         patchedstatus=true, got IPs {ips:?} and annotations {:?}",
        patched.annotations()
    );
    let want = IngressLoadBalancerStatus {
        ingress: Some(vec![IngressLoadBalancerIngress {
            ip: Some("169.1.1.2".into()),
            ..Default::default()
        }]),
    };
    let has_new_ip = |ing: &Ingress| ingress_lb_ips(ing) == ["169.1.1.2"];
    let updated = update_status(f, api, &last, has_new_ip, |ing: &mut Ingress| {
        ing.status.get_or_insert_with(Default::default).load_balancer = Some(want.clone());
        Ok(())
    })
    .await?;
    ensure!(
        has_new_ip(&updated),
        "Ingress {last} after the update of /status: expected load-balancer IP 169.1.1.2, got {:?}",
        ingress_lb_ips(&updated)
    );
    let status = api.get_status(&last).await?;
    ensure!(
        status.uid() == created.uid(),
        "Ingress {last} read through /status: expected uid {:?}, got {:?}",
        created.uid(),
        status.uid()
    );
    walk.close(f, &last, 2).await
}

/// An IPv4 EndpointSlice `name` with one endpoint and an http port, as upstream's.
fn endpoint_slice(f: &Framework, name: &str) -> EndpointSlice {
    EndpointSlice {
        metadata: labelled(f, name, "special-label"),
        address_type: "IPv4".into(),
        endpoints: vec![Endpoint {
            addresses: vec!["1.2.3.4".into(), "5.6.7.8".into()],
            ..Default::default()
        }],
        ports: Some(vec![EndpointPort {
            name: Some("http".into()),
            protocol: Some("TCP".into()),
            port: Some(80),
            ..Default::default()
        }]),
    }
}

/// Walks EndpointSlices through discovery, create, get, list (in the namespace and across all),
/// watch, patch, update, delete and delete a collection.
async fn endpointslice_api(f: &Framework) -> CaseResult {
    let selector = format!("special-label={}", f.ns());
    let walk = Walk::new(f.api::<EndpointSlice>(), selector.clone());
    let slices = (1..=3)
        .map(|i| endpoint_slice(f, &format!("e2e-example-ing{i}")))
        .collect();
    let first = walk.open(f, slices, 0).await?.name_any();
    find_in_all_namespaces::<EndpointSlice>(f, &selector, f.ns(), &first).await?;
    walk.close(f, &first, 2).await
}

/// The load-balancer IPs of a Service's status.
fn service_lb_ips(svc: &Service) -> Vec<String> {
    svc.status
        .iter()
        .filter_map(|s| s.load_balancer.as_ref())
        .flat_map(|lb| lb.ingress.iter().flatten())
        .filter_map(|i| i.ip.clone())
        .collect()
}

/// Whether a Service's status carries upstream's `StatusUpdate` condition.
fn has_status_update(svc: &Service) -> bool {
    svc.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .any(|c| c.type_ == "StatusUpdate" && c.reason == "E2E" && c.message == "Set from e2e test")
}

/// Creates a LoadBalancer Service, patches its `/status` (a load-balancer IP and an
/// annotation), updates its `/status` with a condition, patches a label, and deletes it; each
/// change is awaited on a watch.
async fn service_status(f: &Framework) -> CaseResult {
    let name = "test-service-status";
    let api: Api<Service> = f.api();
    let svc = Service {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([("test-service-static".into(), "true".into())])),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                protocol: Some("TCP".into()),
                port: 80,
                target_port: Some(IntOrString::Int(80)),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    };
    let created = f.create(&svc).await?;
    api.get_status(name).await?;

    f.step("patching the Service status");
    let patch = json!({
        "metadata": {"annotations": {"patchedstatus": "true"}},
        "status": {"loadBalancer": LoadBalancerStatus {
            ingress: Some(vec![LoadBalancerIngress { ip: Some("203.0.113.1".into()), ..Default::default() }]),
        }}
    });
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let watch_for = |cond: fn(&Service) -> bool, why: &'static str| {
        let api = api.clone();
        async move {
            f.wait_for_within(
                &api,
                name,
                move |s: Option<&Service>| s.is_some_and(cond),
                why,
                WATCH_BOUND,
            )
            .await
        }
    };
    watch_for(
        |s| annotated(s, "patchedstatus") && service_lb_ips(s) == ["203.0.113.1"],
        "to show the patched status (load-balancer IP 203.0.113.1, annotation patchedstatus=true)",
    )
    .await?;

    let updated = update_status(f, &api, name, has_status_update, |s: &mut Service| {
        s.status
            .get_or_insert_with(Default::default)
            .conditions
            .get_or_insert_with(Vec::new)
            .push(Condition {
                type_: "StatusUpdate".into(),
                status: "True".into(),
                reason: "E2E".into(),
                message: "Set from e2e test".into(),
                last_transition_time: Time(jiff::Timestamp::now()),
                observed_generation: None,
            });
        Ok(())
    })
    .await?;
    ensure!(
        has_status_update(&updated),
        "Service {name} after the update of /status: expected condition StatusUpdate (reason E2E), got {:?}",
        updated.status.as_ref().and_then(|s| s.conditions.as_ref())
    );
    watch_for(
        |s| annotated(s, "patchedstatus") && has_status_update(s),
        "to show the updated status (condition StatusUpdate)",
    )
    .await?;

    f.step("patching the Service");
    let patch = json!({"metadata": {"labels": {"test-service": "patched"}}});
    api.patch(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await?;
    watch_for(
        |s| s.labels().get("test-service").map(String::as_str) == Some("patched"),
        "to show the patched label test-service=patched",
    )
    .await?;

    f.step("deleting the Service");
    api.delete(name, &Default::default()).await?;
    f.wait_for_within(
        &api,
        name,
        is_deleted(&created.uid().unwrap_or_default()),
        "to be deleted",
        WATCH_BOUND,
    )
    .await?;
    Ok(())
}

/// Upstream's bound on each of the service status case's watches (one minute).
const WATCH_BOUND: std::time::Duration = std::time::Duration::from_secs(60);
