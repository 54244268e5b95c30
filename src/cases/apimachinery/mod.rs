//! Adapted `[sig-api-machinery]` cases: admission webhooks (test/e2e/apimachinery/webhook.go),
//! CustomResourceDefinition resources, defaulting and watches of custom objects
//! (custom_resource_definition.go, crd_watch.go), conversion webhooks (crd_conversion_webhook.go), their OpenAPI publication (crd_publish_openapi.go), watches (watch.go), discovery and the server
//! version (discovery.go, server_version.go, aggregated_discovery.go), the aggregated sample-apiserver (aggregator.go), LIST chunking and Table negotiation (chunking.go,
//! table_conversion.go), server-side field validation (field_validation.go), ResourceQuota
//! (resource_quota.go, with the older quota cases in `cases::policy`) and API priority and
//! fairness objects (flowcontrol.go), ValidatingAdmissionPolicy (validatingadmissionpolicy.go),
//! the garbage collector (garbage_collector.go) and namespaces (namespace.go, `[Serial]`).
//!
//! The webhook server runs on the target OS (agnhost is built for Windows too); what the cases
//! check is the API server's dispatch to it, the same on both OSes.

mod aggregated_discovery;
mod aggregator;
mod api_surface;
mod conditions;
pub(crate) mod crd;
mod crd_conversion;
mod crd_defaulting;
mod crd_publish_openapi;
mod crd_watch;
mod field_validation;
mod flowcontrol;
mod gc;
mod lists;
mod namespaces;
mod patching;
mod quota;
mod quota_api;
mod vap;
mod vap_api;
mod watch;
mod webhook;
mod webhook_custom;
mod webhook_resources;

use crate::catalog::Case;

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    let mut cases = webhook::cases();
    cases.extend(webhook_resources::cases());
    cases.extend(webhook_custom::cases());
    cases.extend(conditions::cases());
    cases.extend(patching::cases());
    cases.extend(crd::cases());
    cases.extend(crd_watch::cases());
    cases.extend(crd_defaulting::cases());
    cases.extend(crd_conversion::cases());
    cases.extend(crd_publish_openapi::cases());
    cases.extend(field_validation::cases());
    cases.extend(aggregated_discovery::cases());
    cases.extend(aggregator::cases());
    cases.extend(vap::cases());
    cases.extend(vap_api::cases());
    cases.extend(watch::cases());
    cases.extend(api_surface::cases());
    cases.extend(lists::cases());
    cases.extend(quota::cases());
    cases.extend(quota_api::cases());
    cases.extend(flowcontrol::cases());
    cases.extend(gc::cases());
    cases.extend(namespaces::cases());
    cases
}
