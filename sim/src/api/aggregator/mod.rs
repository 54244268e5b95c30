//! kube-aggregator: APIServices backed by a Service (`spec.service`) are served by another
//! API server that kube-apiserver proxies to (staging/src/k8s.io/kube-aggregator).
//!
//! Modules, one concept each:
//! - [`availability`]: the `AvailableConditionController`, which keeps each such APIService's
//!   `Available` condition (`ServiceNotFound`, `ServicePortError`, `EndpointsNotFound`,
//!   `MissingEndpoints`, `FailedDiscoveryCheck`, `Passed`) and caches the remote discovery.
//! - [`proxy`]: `handler_proxy.go`: requests under `/apis/<group>/<version>` sent over TLS
//!   to the Service's ClusterIP, verified against `caBundle`, with the caller's identity in
//!   the front-proxy headers (`X-Remote-User`, `X-Remote-Group`, `X-Remote-Extra-*`).
//! - this file: which APIService serves a path, and what discovery lists for them.

pub mod availability;
pub mod proxy;

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde_json::{Value, json};

use super::state::AppState;

/// The fault switch of a kube-apiserver started without `--proxy-client-cert-file`: the
/// aggregated servers cannot trust the identity headers, so every proxied request (the
/// availability check's too) reaches them as anonymous.
pub const FRONT_PROXY_OFF: &str = "aggregator-front-proxy-off";

/// The remote discovery documents (`APIResourceList`) of the available aggregated group
/// versions, by APIService name, as the availability check last fetched them.
#[derive(Debug, Default)]
pub struct Cache(Mutex<BTreeMap<String, Value>>);

impl Cache {
    /// Records (or, with `None`, forgets) the resource list of APIService `name`.
    pub fn set(&self, name: &str, list: Option<Value>) {
        let mut g = self.0.lock().expect("aggregator cache lock");
        match list {
            Some(l) => {
                g.insert(name.to_string(), l);
            }
            None => {
                g.remove(name);
            }
        }
    }

    /// Keeps only the entries whose APIService name passes `keep`.
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        self.0.lock().expect("aggregator cache lock").retain(|k, _| keep(k));
    }

    /// The cached resource list of APIService `name`.
    pub fn get(&self, name: &str) -> Option<Value> {
        self.0.lock().expect("aggregator cache lock").get(name).cloned()
    }
}

/// The APIServices that name a Service, sorted as upstream's `/apis` sorts group versions:
/// by `groupPriorityMinimum` (highest first), then group name, then `versionPriority`.
pub fn remote_services(st: &AppState) -> Vec<Value> {
    let (mut all, _) = st.store.list("apiregistration.k8s.io/apiservices", None);
    all.retain(|s| s.pointer("/spec/service").is_some_and(Value::is_object));
    let num = |s: &Value, f: &str| s.pointer(&format!("/spec/{f}")).and_then(Value::as_i64).unwrap_or(0);
    let text = |s: &Value, f: &str| {
        s.pointer(&format!("/spec/{f}"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    all.sort_by(|a, b| {
        num(b, "groupPriorityMinimum")
            .cmp(&num(a, "groupPriorityMinimum"))
            .then_with(|| text(a, "group").cmp(&text(b, "group")))
            .then_with(|| num(b, "versionPriority").cmp(&num(a, "versionPriority")))
    });
    all
}

/// The remote APIService serving `group`/`version`, if one does. Runs for every `/apis`
/// request, so it looks at the shared copies and clones only the match.
pub fn serving(st: &AppState, group: &str, version: &str) -> Option<Value> {
    let (all, _) = st.store.list_shared("apiregistration.k8s.io/apiservices", None);
    all.iter()
        .find(|s| {
            s.pointer("/spec/service").is_some_and(Value::is_object)
                && s.pointer("/spec/group").and_then(Value::as_str) == Some(group)
                && s.pointer("/spec/version").and_then(Value::as_str) == Some(version)
        })
        .map(|s| Value::clone(s))
}

/// Whether an APIService's `Available` condition is True.
pub fn is_available(svc: &Value) -> bool {
    svc.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Available" && c["status"] == "True")
}

/// The `APIGroup` entries of the remote groups (`/apis` and `/apis/<group>`): every
/// registered version in priority order, the first preferred, whether available or not,
/// as upstream's `apisHandler` lists them.
pub fn groups(st: &AppState) -> Vec<Value> {
    let mut order: Vec<String> = Vec::new();
    let mut versions: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for s in remote_services(st) {
        let g = s
            .pointer("/spec/group")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let v = s
            .pointer("/spec/version")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if !order.contains(&g) {
            order.push(g.clone());
        }
        versions
            .entry(g.clone())
            .or_default()
            .push(json!({"groupVersion": format!("{g}/{v}"), "version": v}));
    }
    order
        .into_iter()
        .map(|g| {
            let vs = versions.remove(&g).unwrap_or_default();
            json!({"name": g, "versions": vs.clone(), "preferredVersion": vs[0]})
        })
        .collect()
}

/// The aggregated discovery (`apidiscovery.k8s.io`) entries of the remote groups, from the
/// cached remote resource lists: an available version is `Current`, one whose discovery
/// could not be fetched is listed `Stale` without resources, as upstream's discovery
/// aggregation controller marks it.
pub fn aggregated_items(st: &AppState) -> Vec<Value> {
    let mut order: Vec<String> = Vec::new();
    let mut versions: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for s in remote_services(st) {
        let name = s.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        let g = s
            .pointer("/spec/group")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let v = s.pointer("/spec/version").and_then(Value::as_str).unwrap_or_default();
        if !order.contains(&g) {
            order.push(g.clone());
        }
        let entry = match st.aggregated.get(name).filter(|_| is_available(&s)) {
            Some(list) => json!({"version": v, "resources": to_v2(&list), "freshness": "Current"}),
            None => json!({"version": v, "resources": [], "freshness": "Stale"}),
        };
        versions.entry(g).or_default().push(entry);
    }
    order
        .into_iter()
        .map(|g| {
            let vs = versions.remove(&g).unwrap_or_default();
            json!({"metadata": {"name": g, "creationTimestamp": null}, "versions": vs})
        })
        .collect()
}

/// An `APIResourceList` in aggregated discovery's shape (upstream's
/// `endpoints/discovery/aggregated` conversion): subresources folded under their resource.
pub fn to_v2(list: &Value) -> Vec<Value> {
    let gv = list["groupVersion"].as_str().unwrap_or_default();
    let (group, version) = gv.split_once('/').unwrap_or(("", gv));
    let all: Vec<&Value> = list["resources"].as_array().into_iter().flatten().collect();
    let mut out: Vec<Value> = Vec::new();
    for r in all
        .iter()
        .filter(|r| !r["name"].as_str().unwrap_or_default().contains('/'))
    {
        let name = r["name"].as_str().unwrap_or_default();
        let mut v = json!({
            "resource": name,
            "responseKind": {"group": group, "version": version, "kind": r["kind"]},
            "scope": if r["namespaced"].as_bool().unwrap_or(false) { "Namespaced" } else { "Cluster" },
            "singularResource": r["singularName"],
            "verbs": r["verbs"],
        });
        for key in ["shortNames", "categories"] {
            if r.get(key).and_then(Value::as_array).is_some_and(|a| !a.is_empty()) {
                v[key] = r[key].clone();
            }
        }
        let subs: Vec<Value> = all
            .iter()
            .filter_map(|s| {
                let (parent, sub) = s["name"].as_str()?.split_once('/')?;
                (parent == name).then(|| {
                    json!({"subresource": sub,
                        "responseKind": {"group": s.get("group").and_then(Value::as_str).unwrap_or(group),
                            "version": s.get("version").and_then(Value::as_str).unwrap_or(version), "kind": s["kind"]},
                        "verbs": s["verbs"]})
                })
            })
            .collect();
        if !subs.is_empty() {
            v["subresources"] = json!(subs);
        }
        out.push(v);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_lists_fold_into_aggregated_discovery() {
        let list = json!({"kind": "APIResourceList", "groupVersion": "wardle.example.com/v1alpha1", "resources": [
            {"name": "flunders", "singularName": "flunder", "namespaced": true, "kind": "Flunder", "verbs": ["get", "list"]},
            {"name": "flunders/status", "singularName": "", "namespaced": true, "kind": "Flunder", "verbs": ["get"]},
            {"name": "fischers", "singularName": "fischer", "namespaced": false, "kind": "Fischer", "verbs": ["get"]}]});
        let v2 = to_v2(&list);
        assert_eq!(v2.len(), 2);
        assert_eq!(v2[0]["scope"], "Namespaced");
        assert_eq!(v2[0]["responseKind"]["group"], "wardle.example.com");
        assert_eq!(v2[0]["subresources"][0]["subresource"], "status");
        assert_eq!(v2[1]["scope"], "Cluster");
        assert!(v2[1].get("subresources").is_none());
    }
}
