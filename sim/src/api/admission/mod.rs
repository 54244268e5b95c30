//! Admission: what the real server does to an object between decoding and storing it.
//! Defaulting, the built-in admission plugins the suites notice (namespace lifecycle fields,
//! RuntimeClass scheduling, priority, Service ClusterIP/NodePort allocation, Job selectors),
//! status reset on create, and validation. Also the review resources, answered per request.
//!
//! The main functions are [`on_create`] and [`on_update`]; callers hold `AppState::alloc`
//! across allocation and the store write.
//!
//! Split by plugin: `pod_scheduling` holds RuntimeClass and Priority admission,
//! `service_alloc` the Service ClusterIP and NodePort allocation, `service_account` the
//! ServiceAccount plugin (default account, token volume), `limit_ranger` and
//! `resource_quota` the namespace's LimitRanges and ResourceQuotas. This file keeps the entry
//! points that run them in upstream's order, the fault switches that waive validation or turn a
//! plugin off, the Job selector, and the review resources.

use serde_json::{Value, json};

use super::defaults;
use super::error::{ApiError, ApiResult, Cause};
use super::meta;
use super::registry::ResourceDef;
use super::state::AppState;
use super::validate;
use limit_ranger::limit_ranger;
use pod_scheduling::{priority, runtime_class};
use resource_quota::resource_quota;
use service_alloc::allocate;

mod limit_ranger;
mod pod_scheduling;
mod resource_quota;
mod service_account;
mod service_alloc;

pub use service_alloc::NODE_PORTS;

fn reject(def: &ResourceDef, obj: &Value, causes: Vec<Cause>) -> ApiResult<()> {
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(def.group, def.kind, meta::name(obj), causes))
    }
}

/// Prepares a new object for storage, or says why it is refused.
pub fn on_create(st: &AppState, def: &ResourceDef, obj: &mut Value) -> ApiResult<()> {
    defaults::apply(def, obj);
    drop_match_conditions(st, def, obj);
    match (def.group, def.plural) {
        ("", "namespaces") => {
            let name = meta::name(obj).to_string();
            let labels = meta::meta_mut(obj).entry("labels").or_insert_with(|| json!({}));
            labels["kubernetes.io/metadata.name"] = json!(name);
            if obj.pointer("/spec/finalizers").is_none() {
                obj["spec"] = json!({"finalizers": ["kubernetes"]});
            }
            obj["status"] = json!({"phase": "Active"});
        }
        ("", "pods") => {
            super::stop_signal::drop_disabled(st, obj, None);
            if !plugin_off(st, "RuntimeClass") {
                runtime_class(st, obj).map_err(|why| admission_forbidden(def, obj, &why))?;
            }
            priority(st, obj)?;
            limit_ranger(st, def, obj)?;
            if !plugin_off(st, "ServiceAccount") {
                service_account::service_account(st, obj);
            }
            let qos = obj.get("spec").map(defaults::qos_class).unwrap_or("BestEffort");
            obj["status"] = json!({"phase": "Pending", "qosClass": qos});
        }
        ("", "services") => {
            allocate(st, obj, None)?;
            obj["status"] = json!({"loadBalancer": {}});
        }
        // The PV and PVC strategies reset status on create; the phase reads back Pending
        // (the volume strategy sets it, the claim's is defaulted on decoding) until the PV
        // controller binds or releases them.
        ("", "persistentvolumes" | "persistentvolumeclaims") => obj["status"] = json!({"phase": "Pending"}),
        ("batch", "jobs") => job_selector(obj),
        ("", "nodes") => {}
        ("certificates.k8s.io", "certificatesigningrequests") => csr_requestor(obj),
        (super::crd::GROUP, "customresourcedefinitions") => obj["status"] = super::crd::initial_status(obj),
        // Upstream's custom resource strategy drops status on create when it is a subresource.
        _ if def.custom.is_some() => {
            if def.has_sub("status")
                && let Some(m) = obj.as_object_mut()
            {
                m.remove("status");
            }
        }
        _ if def.has_sub("status") => {
            obj["status"] = json!({});
        }
        _ => {}
    }
    reject(
        def,
        obj,
        waive(st, def, obj, gated(st, def, obj, validate::validate(def, obj, None))),
    )?;
    rbac_escalation(st, def, obj)?;
    resource_quota(st, def, obj)
}

/// RBAC's escalation check for the caller of this write (nothing for in-process writes with
/// no caller, such as the bootstrap policy).
fn rbac_escalation(st: &AppState, def: &ResourceDef, obj: &Value) -> ApiResult<()> {
    if def.group != "rbac.authorization.k8s.io" {
        return Ok(());
    }
    match crate::api::auth::user::current() {
        Some(u) => crate::api::auth::escalation::check(st, def, obj, &u),
        None => Ok(()),
    }
}

/// Prepares an update of `old` to `new` (main resource writes only).
pub fn on_update(st: &AppState, def: &ResourceDef, old: &Value, new: &mut Value) -> ApiResult<()> {
    defaults::apply(def, new);
    drop_match_conditions(st, def, new);
    if def.group.is_empty() && def.plural == "pods" {
        super::stop_signal::drop_disabled(st, new, Some(old));
    }
    match (def.group, def.plural) {
        (super::crd::GROUP, "customresourcedefinitions") => super::crd::carry_status(old, new),
        ("", "namespaces") => {
            new["spec"] = old.get("spec").cloned().unwrap_or(json!({}));
            let name = meta::name(old).to_string();
            let labels = meta::meta_mut(new).entry("labels").or_insert_with(|| json!({}));
            if labels.is_object() {
                labels["kubernetes.io/metadata.name"] = json!(name);
            }
        }
        ("", "services") => {
            let ty = new
                .pointer("/spec/type")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            if ty == "ExternalName" {
                if let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) {
                    for f in [
                        "clusterIP",
                        "clusterIPs",
                        "ipFamilies",
                        "ipFamilyPolicy",
                        "internalTrafficPolicy",
                    ] {
                        spec.remove(f);
                    }
                }
                // Upstream's strategy (dropTypeDependentFields) releases the node ports of a
                // Service that no longer needs them, as the branch below does for ClusterIP.
                drop_node_ports(new);
            } else {
                // Upstream keeps allocated values a client left out of its update.
                let cip = new
                    .pointer("/spec/clusterIP")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if cip.is_empty()
                    && let Some(old_ip) = old.pointer("/spec/clusterIP").cloned()
                {
                    new["spec"]["clusterIP"] = old_ip;
                    new["spec"]["clusterIPs"] = old.pointer("/spec/clusterIPs").cloned().unwrap_or(json!(null));
                }
                if matches!(ty.as_str(), "NodePort" | "LoadBalancer") {
                    let olds = old
                        .pointer("/spec/ports")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default();
                    if let Some(ports) = new.pointer_mut("/spec/ports").and_then(Value::as_array_mut) {
                        for p in ports {
                            if p.get("nodePort").is_none()
                                && let Some(np) = olds
                                    .iter()
                                    .find(|o| o["port"] == p["port"])
                                    .and_then(|o| o.get("nodePort"))
                            {
                                p["nodePort"] = np.clone();
                            }
                        }
                    }
                } else {
                    drop_node_ports(new);
                }
                allocate(st, new, Some(old))?;
            }
        }
        ("batch", "jobs") if new.pointer("/spec/selector").is_none() => {
            new["spec"]["selector"] = old.pointer("/spec/selector").cloned().unwrap_or(json!(null));
        }
        _ => {}
    }
    reject(
        def,
        new,
        waive(
            st,
            def,
            new,
            gated(st, def, new, validate::validate(def, new, Some(old))),
        ),
    )?;
    rbac_escalation(st, def, new)
}

/// `match-conditions-dropped`: an API server with the AdmissionWebhookMatchConditions gate off
/// clears a webhook configuration's `matchConditions` on write, as upstream's
/// `dropDisabledFields` does.
fn drop_match_conditions(st: &AppState, def: &ResourceDef, obj: &mut Value) {
    if !super::webhook::config::is_config(def.group, def.plural) || !st.cfg.faults.is_on("match-conditions-dropped") {
        return;
    }
    for hook in obj
        .get_mut("webhooks")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if let Some(h) = hook.as_object_mut() {
            h.remove("matchConditions");
        }
    }
}

/// Adds the pod validation causes that depend on the control plane's feature gates (a pod
/// container's restart policy and rules: `ContainerRestartRules`).
fn gated(st: &AppState, def: &ResourceDef, obj: &Value, mut causes: Vec<Cause>) -> Vec<Cause> {
    if def.group.is_empty()
        && def.plural == "pods"
        && let Some(spec) = obj.get("spec")
    {
        super::restart_rules::rules(&st.cfg.gates, spec, "spec", &mut causes);
    }
    causes
}

/// Drops the validation causes a fault switch turned off (an API server that lets bad objects
/// through): `validation-off=config-keys` (ConfigMap/Secret data keys), `validation-off=immutable`
/// (changes to an immutable ConfigMap/Secret, or to a PriorityClass's value or preemptionPolicy), `validation-off=match-conditions` (webhook
/// matchConditions that do not compile), `pod-os-validation-off` (Linux-only fields on Windows
/// pods).
fn waive(st: &AppState, def: &ResourceDef, obj: &Value, mut causes: Vec<Cause>) -> Vec<Cause> {
    let faults = &st.cfg.faults;
    let pod = def.group.is_empty() && def.plural == "pods";
    if pod
        && faults.is_on("windows-stop-signals-refused")
        && let Some(spec) = obj.get("spec")
    {
        super::stop_signal::refuse_all_windows(spec, "spec", &mut causes);
    }
    if super::webhook::config::is_config(def.group, def.plural)
        && faults.applies_to("validation-off", "match-conditions")
    {
        return causes
            .into_iter()
            .filter(|c| !c.message.contains("compilation failed"))
            .collect();
    }
    if pod && faults.is_on("pod-os-validation-off") {
        return causes
            .into_iter()
            .filter(|c| !c.message.contains("for a windows pod") && !super::stop_signal::is_stop_signal_cause(c))
            .collect();
    }
    if (def.group, def.plural) == ("scheduling.k8s.io", "priorityclasses")
        && faults.applies_to("validation-off", "immutable")
    {
        return causes
            .into_iter()
            .filter(|c| c.field != "value" && c.field != "preemptionPolicy")
            .collect();
    }
    let config = def.group.is_empty() && matches!(def.plural, "configmaps" | "secrets");
    if !config {
        return causes;
    }
    causes
        .into_iter()
        .filter(|c| {
            let key = c.field.starts_with("data[") || c.field.starts_with("binaryData[");
            let immutable = c.message.contains("immutable");
            !(key && faults.applies_to("validation-off", "config-keys")
                || immutable && faults.applies_to("validation-off", "immutable"))
        })
        .collect()
}

/// The Job selector and template labels upstream generates from the Job's uid.
fn job_selector(obj: &mut Value) {
    if obj.pointer("/spec/manualSelector").and_then(Value::as_bool) == Some(true) {
        return;
    }
    let uid = obj
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let name = meta::name(obj).to_string();
    obj["spec"]["selector"] = json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}});
    let tm = &mut obj["spec"]["template"];
    if !tm.is_object() {
        return;
    }
    let labels = meta::meta_mut(tm).entry("labels").or_insert_with(|| json!({}));
    if labels.is_object() {
        labels["batch.kubernetes.io/controller-uid"] = json!(uid);
        labels["batch.kubernetes.io/job-name"] = json!(name);
        labels["controller-uid"] = json!(uid);
        labels["job-name"] = json!(name);
    }
}

/// Whether the `admission-off` fault switch turned off admission plugin `plugin` (a cluster
/// whose API server runs without it, as `--disable-admission-plugins` would).
pub(crate) fn plugin_off(st: &AppState, plugin: &str) -> bool {
    st.cfg.faults.applies_to("admission-off", plugin)
}

/// `pods "NAME" is forbidden: WHY`, the message of upstream's `admission.NewForbidden`.
fn admission_forbidden(def: &ResourceDef, obj: &Value, why: &str) -> ApiError {
    let resource = if def.group.is_empty() {
        def.plural.to_string()
    } else {
        format!("{}.{}", def.plural, def.group)
    };
    ApiError::forbidden(format!("{resource} {:?} is forbidden: {why}", meta::name(obj)))
}

/// Answers a review resource (never stored) from the live authentication and RBAC state.
pub fn review(st: &AppState, def: &ResourceDef, obj: Value) -> ApiResult<Value> {
    crate::api::auth::reviews::answer(st, def, obj)
}

/// Upstream's CSR `PrepareForCreate`: whatever the client wrote, the requestor fields are the
/// authenticated caller's (what `kubectl get csr` shows as REQUESTOR and what approvers trust),
/// and no request is created already approved.
fn csr_requestor(obj: &mut Value) {
    let user = super::auth::user::current().unwrap_or_default();
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        for f in ["username", "uid", "groups", "extra"] {
            spec.remove(f);
        }
        if !user.name.is_empty() {
            spec.insert("username".into(), json!(user.name));
        }
        if !user.uid.is_empty() {
            spec.insert("uid".into(), json!(user.uid));
        }
        if !user.groups.is_empty() {
            spec.insert("groups".into(), json!(user.groups));
        }
        if !user.extra.is_empty() {
            spec.insert("extra".into(), json!(user.extra));
        }
    }
    obj["status"] = json!({});
}

/// Removes `nodePort` from every port of Service `svc`.
fn drop_node_ports(svc: &mut Value) {
    if let Some(ports) = svc.pointer_mut("/spec/ports").and_then(Value::as_array_mut) {
        for p in ports {
            if let Some(m) = p.as_object_mut() {
                m.remove("nodePort");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::auth::UserInfo;

    #[test]
    fn csr_requestor_is_the_caller_and_status_starts_empty() {
        let mut csr = json!({"spec": {"username": "forged", "groups": ["system:masters"], "request": "x"},
            "status": {"conditions": [{"type": "Approved", "status": "True"}]}});
        let caller = UserInfo::service_account("ns", "sa", "u1");
        crate::api::auth::user::CURRENT.sync_scope(caller, || csr_requestor(&mut csr));
        assert_eq!(
            csr,
            json!({"spec": {"username": "system:serviceaccount:ns:sa", "uid": "u1",
                "groups": ["system:serviceaccounts", "system:serviceaccounts:ns", "system:authenticated"],
                "request": "x"}, "status": {}})
        );
    }
}

/// Helpers for the unit tests of the admission plugins.
#[cfg(test)]
pub(crate) mod testutil {
    use crate::addr::AddressBlock;
    use crate::api::state::{AppState, StateConfig};

    /// An empty API state on address block 200.
    pub(crate) fn state() -> AppState {
        AppState::new(StateConfig::new(AddressBlock(200)))
    }
}
