//! Adapted `[sig-api-machinery]` cases: admission webhooks (test/e2e/apimachinery/webhook.go),
//! CustomResourceDefinition resources (custom_resource_definition.go), watches (watch.go),
//! discovery and the server version (discovery.go, server_version.go), LIST chunking and Table
//! negotiation (chunking.go, table_conversion.go), ResourceQuota (resource_quota.go, with the
//! older quota cases in `cases::policy`) and API priority and fairness objects (flowcontrol.go).
//!
//! The webhook server runs on the target OS (agnhost is built for Windows too); what the cases
//! check is the API server's dispatch to it, the same on both OSes.

mod api_surface;
mod conditions;
pub(crate) mod crd;
mod flowcontrol;
mod lists;
mod patching;
mod quota;
mod quota_api;
mod watch;
mod webhook;

use crate::catalog::Case;

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    let mut cases = webhook::cases();
    cases.extend(conditions::cases());
    cases.extend(patching::cases());
    cases.extend(crd::cases());
    cases.extend(watch::cases());
    cases.extend(api_surface::cases());
    cases.extend(lists::cases());
    cases.extend(quota::cases());
    cases.extend(quota_api::cases());
    cases.extend(flowcontrol::cases());
    cases
}
