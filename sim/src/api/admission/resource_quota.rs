//! The ResourceQuota admission plugin: a create is refused when it would take a namespace's
//! quota past its hard limit, when a pod leaves out a request or limit a compute quota
//! constrains, or when the quota's status is not computed yet.

use serde_json::Value;

use super::{admission_forbidden, plugin_off};
use crate::api::error::ApiResult;
use crate::api::meta;
use crate::api::registry::ResourceDef;
use crate::api::state::AppState;
use crate::control::predicates::parse_quantity_milli;

/// The quota resource a create of `def` counts against (`configmaps`,
/// `deployments.apps`), as `count/<resource>` and the object-count quotas name it.
fn counted_resource(def: &ResourceDef) -> String {
    if def.group.is_empty() {
        def.plural.to_string()
    } else {
        format!("{}.{}", def.plural, def.group)
    }
}

/// Resources whose quota requires every container to state them (upstream's pod evaluator
/// `Constraints`: quota on cpu or memory makes requests or limits mandatory).
const MUST_SPECIFY: &[(&str, &str, &str)] = &[
    ("cpu", "requests", "cpu"),
    ("requests.cpu", "requests", "cpu"),
    ("memory", "requests", "memory"),
    ("requests.memory", "requests", "memory"),
    ("limits.cpu", "limits", "cpu"),
    ("limits.memory", "limits", "memory"),
];

/// The ResourceQuota admission plugin: a create that would take any quota of the namespace past
/// its `hard` limit is refused with upstream's `exceeded quota: NAME, requested: …, used: …,
/// limited: …` (403 Forbidden); a pod missing a request or limit a compute quota constrains is
/// refused with `failed quota: NAME: must specify …`; a quota whose status the controller has
/// not computed yet refuses with `status unknown for quota`.
///
/// Usage is counted from the store under the create lock the caller holds, which is what the
/// real plugin's synchronous `status.used` update achieves: two creates cannot both take the
/// last unit.
pub(super) fn resource_quota(st: &AppState, def: &ResourceDef, obj: &Value) -> ApiResult<()> {
    use crate::control::{Usage, compute_usage};
    use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, ResourceQuota, Service};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use std::collections::BTreeMap;

    if plugin_off(st, "ResourceQuota") || !def.namespaced {
        return Ok(());
    }
    let ns = meta::namespace(obj).to_string();
    let (quotas, _) = st.store.list("/resourcequotas", Some(&ns));
    if quotas.is_empty() {
        return Ok(());
    }
    let decode_all = |key: &str| -> Vec<Value> { st.store.list(key, Some(&ns)).0 };
    let resource = counted_resource(def);
    let (new_pod, new_svc, new_claim) = match (def.group, def.plural) {
        ("", "pods") => (serde_json::from_value::<Pod>(obj.clone()).ok(), None, None),
        ("", "services") => (None, serde_json::from_value::<Service>(obj.clone()).ok(), None),
        ("", "persistentvolumeclaims") => (
            None,
            None,
            serde_json::from_value::<PersistentVolumeClaim>(obj.clone()).ok(),
        ),
        _ => (None, None, None),
    };
    let delta = Usage {
        pods: new_pod.iter().collect(),
        services: new_svc.iter().collect(),
        claims: new_claim.iter().collect(),
        counts: [(resource.clone(), 1)].into(),
    };
    // What the namespace holds now, decoded only for the kind being created.
    let pods: Vec<Pod> = if new_pod.is_some() {
        decode_all("/pods")
            .into_iter()
            .filter_map(|v| serde_json::from_value(v).ok())
            .collect()
    } else {
        Vec::new()
    };
    let services: Vec<Service> = if new_svc.is_some() {
        decode_all("/services")
            .into_iter()
            .filter_map(|v| serde_json::from_value(v).ok())
            .collect()
    } else {
        Vec::new()
    };
    let claims: Vec<PersistentVolumeClaim> = if new_claim.is_some() {
        decode_all("/persistentvolumeclaims")
            .into_iter()
            .filter_map(|v| serde_json::from_value(v).ok())
            .collect()
    } else {
        Vec::new()
    };
    let before = Usage {
        pods: pods.iter().collect(),
        services: services.iter().collect(),
        claims: claims.iter().collect(),
        counts: [(resource.clone(), st.store.count(&def.storage_key(), Some(&ns)))].into(),
    };
    let mut quotas: Vec<ResourceQuota> = quotas
        .into_iter()
        .filter_map(|q| serde_json::from_value(q).ok())
        .collect();
    quotas.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    for q in &quotas {
        let name = q.metadata.name.clone().unwrap_or_default();
        let hard = q.spec.as_ref().and_then(|s| s.hard.clone()).unwrap_or_default();
        let scopes = q.spec.as_ref().and_then(|s| s.scopes.clone()).unwrap_or_default();
        let requested: BTreeMap<String, Quantity> = compute_usage(&hard, &scopes, &delta)
            .into_iter()
            .filter(|(_, v)| parse_quantity_milli(&v.0).unwrap_or(0) != 0)
            .collect();
        if requested.is_empty() {
            continue;
        }
        if let Some(pod) = &new_pod {
            let mut missing: BTreeMap<&str, Vec<String>> = BTreeMap::new();
            for (quota_res, field, base) in MUST_SPECIFY {
                if !hard.contains_key(*quota_res) {
                    continue;
                }
                let spec = pod.spec.clone().unwrap_or_default();
                for c in spec.containers.iter().chain(spec.init_containers.iter().flatten()) {
                    let has = c.resources.as_ref().is_some_and(|r| {
                        let m = if *field == "limits" { &r.limits } else { &r.requests };
                        m.as_ref().is_some_and(|m| m.contains_key(*base))
                    });
                    if !has {
                        missing.entry(quota_res).or_default().push(c.name.clone());
                    }
                }
            }
            if !missing.is_empty() {
                let what: Vec<String> = missing
                    .iter()
                    .map(|(r, cs)| {
                        let mut cs = cs.clone();
                        cs.sort();
                        cs.dedup();
                        format!("{r} for: {}", cs.join(","))
                    })
                    .collect();
                return Err(admission_forbidden(
                    def,
                    obj,
                    &format!("failed quota: {name}: must specify {}", what.join("; ")),
                ));
            }
        }
        let status_hard = q.status.as_ref().and_then(|s| s.hard.clone()).unwrap_or_default();
        let unknown: Vec<&String> = requested.keys().filter(|r| !status_hard.contains_key(*r)).collect();
        if !unknown.is_empty() {
            let list: Vec<&str> = unknown.iter().map(|s| s.as_str()).collect();
            return Err(admission_forbidden(
                def,
                obj,
                &format!("status unknown for quota: {name}, resources: {}", list.join(",")),
            ));
        }
        let used = compute_usage(&hard, &scopes, &before);
        let mut failed = Vec::new();
        for (r, want) in &requested {
            let limit = hard.get(r).and_then(|q| parse_quantity_milli(&q.0)).unwrap_or(0);
            let have = used.get(r).and_then(|q| parse_quantity_milli(&q.0)).unwrap_or(0);
            if have + parse_quantity_milli(&want.0).unwrap_or(0) > limit {
                failed.push((
                    r.clone(),
                    want.0.clone(),
                    used.get(r).map_or("0".into(), |q| q.0.clone()),
                    hard[r].0.clone(),
                ));
            }
        }
        if !failed.is_empty() {
            let pretty = |pick: fn(&(String, String, String, String)) -> &String| {
                failed
                    .iter()
                    .map(|f| format!("{}={}", f.0, pick(f)))
                    .collect::<Vec<_>>()
                    .join(",")
            };
            return Err(admission_forbidden(
                def,
                obj,
                &format!(
                    "exceeded quota: {name}, requested: {}, used: {}, limited: {}",
                    pretty(|f| &f.1),
                    pretty(|f| &f.2),
                    pretty(|f| &f.3)
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::api::admission::on_create;
    use crate::api::admission::testutil::state;
    use crate::api::registry::find;
    use serde_json::json;

    #[test]
    fn resource_quota_refuses_past_hard_with_upstream_message() {
        let st = state();
        st.store
            .create(
                "/resourcequotas",
                "ns",
                "q",
                json!({"metadata": {"name": "q", "namespace": "ns"},
                "spec": {"hard": {"pods": "2", "requests.cpu": "1"}},
                "status": {"hard": {"pods": "2", "requests.cpu": "1"}, "used": {"pods": "0", "requests.cpu": "0"}}}),
            )
            .unwrap();
        let def = find("", "v1", "pods").unwrap();
        let pod = |name: &str, cpu: &str| {
            json!({"metadata": {"name": name, "namespace": "ns"}, "spec": {"containers": [
            {"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}]}})
        };
        let mut a = pod("a", "500m");
        on_create(&st, def, &mut a).unwrap();
        st.store.create("/pods", "ns", "a", a).unwrap();
        let e = on_create(&st, def, &mut pod("b", "600m")).unwrap_err();
        assert_eq!(e.code, 403);
        assert_eq!(
            e.message,
            "pods \"b\" is forbidden: exceeded quota: q, requested: requests.cpu=600m, used: requests.cpu=500m, limited: requests.cpu=1"
        );
        let mut none = json!({"metadata": {"name": "n", "namespace": "ns"}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
        let e = on_create(&st, def, &mut none).unwrap_err();
        assert!(
            e.message.contains("failed quota: q: must specify requests.cpu for: c"),
            "{}",
            e.message
        );
        st.cfg.faults.set("admission-off", "ResourceQuota", true);
        on_create(&st, def, &mut pod("b", "600m")).unwrap();
    }
}
