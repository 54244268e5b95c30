//! Discovery: `/version`, `/api`, `/apis`, per-group-version resource lists, and aggregated
//! discovery (`apidiscovery.k8s.io/v2`) when the Accept header asks for it, as kubectl does.
//!
//! Everything is generated from [`super::registry::RESOURCES`] and the server's custom
//! kinds ([`super::crd::Table::all`]).

use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::objects::json_response;
use super::registry::{self, ResourceDef};
use super::state::AppState;

/// The Kubernetes version the server reports (the oldest k8s-openapi feature it models).
pub const GIT_VERSION: &str = "v1.33.0-crossconf";

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": "1", "minor": "33", "emulationMajor": "1", "emulationMinor": "33",
        "minCompatibilityMajor": "1", "minCompatibilityMinor": "32",
        "gitVersion": GIT_VERSION, "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean", "buildDate": "2025-04-23T00:00:00Z", "goVersion": "go1.24.2",
        "compiler": "gc", "platform": format!("{}/{}", std::env::consts::OS, go_arch())
    })
}

fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// Verbs, response kind (group, version, kind) of a subresource.
fn sub_info(def: &ResourceDef, sub: &str) -> (Vec<&'static str>, (&'static str, &'static str, &'static str)) {
    let own = (def.group, def.version, def.kind);
    match sub {
        "status" | "approval" | "ephemeralcontainers" => (vec!["get", "patch", "update"], own),
        "scale" => (vec!["get", "patch", "update"], ("autoscaling", "v1", "Scale")),
        "binding" => (vec!["create"], ("", "v1", "Binding")),
        "eviction" => (vec!["create"], ("policy", "v1", "Eviction")),
        "log" => (vec!["get"], ("", "v1", "Pod")),
        "exec" => (vec!["create", "get"], ("", "v1", "PodExecOptions")),
        "attach" => (vec!["create", "get"], ("", "v1", "PodAttachOptions")),
        "portforward" => (vec!["create", "get"], ("", "v1", "PodPortForwardOptions")),
        "proxy" => (
            vec!["create", "delete", "get", "patch", "update"],
            ("", "v1", "PodProxyOptions"),
        ),
        "finalize" => (vec!["update"], own),
        "token" => (vec!["create"], ("authentication.k8s.io", "v1", "TokenRequest")),
        _ => (vec![], own),
    }
}

/// `/api`.
pub fn api_versions(st: &AppState) -> Value {
    json!({
        "kind": "APIVersions", "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0",
            "serverAddress": format!("{}:{}", st.cfg.block.api_server(), st.cfg.api_port)}]
    })
}

fn group_entry(defs: &[&'static ResourceDef], group: &str) -> Value {
    let versions: Vec<Value> = sorted_versions(defs)
        .into_iter()
        .filter(|(g, _)| *g == group)
        .map(|(g, v)| json!({"groupVersion": format!("{g}/{v}"), "version": v}))
        .collect();
    json!({"name": group, "versions": versions.clone(), "preferredVersion": versions[0]})
}

/// The group versions of `defs`, each group's versions in upstream's priority order
/// (`v2` before `v1` before `v1beta1` before `v1alpha1`), so the first is the preferred one.
/// Built-in groups serve one version each; custom groups may serve several.
fn sorted_versions(defs: &[&'static ResourceDef]) -> Vec<(&'static str, &'static str)> {
    let mut out = registry::group_versions_of(defs);
    let order: Vec<&str> = {
        let mut g: Vec<&str> = Vec::new();
        for (x, _) in &out {
            if !g.contains(x) {
                g.push(x);
            }
        }
        g
    };
    out.sort_by(|a, b| {
        let ga = order.iter().position(|g| *g == a.0);
        let gb = order.iter().position(|g| *g == b.0);
        ga.cmp(&gb)
            .then_with(|| version_priority(b.1).cmp(&version_priority(a.1)))
    });
    out
}

/// Upstream's version priority (`version.CompareKubeAwareVersionStrings`): GA above beta
/// above alpha, higher numbers first within each; other names last.
fn version_priority(v: &str) -> (u8, u64, u64) {
    let Some(rest) = v.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let Ok(major) = digits.parse::<u64>() else {
        return (0, 0, 0);
    };
    let tail = &rest[digits.len()..];
    let level = |s: &str, rank: u8| s.parse::<u64>().ok().map(|n| (rank, major, n));
    match tail {
        "" => (3, major, 0),
        t if t.starts_with("beta") => level(&t[4..], 2).unwrap_or((0, 0, 0)),
        t if t.starts_with("alpha") => level(&t[5..], 1).unwrap_or((0, 0, 0)),
        _ => (0, 0, 0),
    }
}

/// `/apis`.
pub fn api_groups() -> Value {
    api_groups_in(&registry::builtin())
}

/// `/apis` for `defs`.
pub fn api_groups_in(defs: &[&'static ResourceDef]) -> Value {
    let mut groups: Vec<&str> = Vec::new();
    for (g, _) in registry::group_versions_of(defs) {
        if !g.is_empty() && !groups.contains(&g) {
            groups.push(g);
        }
    }
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups.into_iter().map(|g| group_entry(defs, g)).collect::<Vec<_>>()})
}

/// `/apis/{group}`.
pub fn api_group(group: &str) -> Value {
    api_group_in(&registry::builtin(), group)
}

/// `/apis/{group}` for `defs`.
pub fn api_group_in(defs: &[&'static ResourceDef], group: &str) -> Value {
    let mut v = group_entry(defs, group);
    v["kind"] = json!("APIGroup");
    v["apiVersion"] = json!("v1");
    v
}

/// `/api/v1` or `/apis/{group}/{version}`.
pub fn resource_list(group: &str, version: &str) -> Value {
    resource_list_in(&registry::builtin(), group, version)
}

/// `/api/v1` or `/apis/{group}/{version}` for `defs`.
pub fn resource_list_in(defs: &[&'static ResourceDef], group: &str, version: &str) -> Value {
    let mut resources = Vec::new();
    for d in defs.iter().filter(|d| d.group == group && d.version == version) {
        let mut r = json!({
            "name": d.plural, "singularName": d.singular, "namespaced": d.namespaced,
            "kind": d.kind, "verbs": d.verbs,
        });
        if !d.short_names.is_empty() {
            r["shortNames"] = json!(d.short_names);
        }
        if !d.categories.is_empty() {
            r["categories"] = json!(d.categories);
        }
        resources.push(r);
        for sub in d.subresources {
            let (verbs, (g, v, k)) = sub_info(d, sub);
            let mut r = json!({"name": format!("{}/{sub}", d.plural), "singularName": "", "namespaced": d.namespaced,
                "kind": k, "verbs": verbs});
            if (g, v) != (d.group, d.version) {
                r["group"] = json!(g);
                r["version"] = json!(v);
            }
            resources.push(r);
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources})
}

/// The aggregated discovery version the Accept header asks for, if any.
pub fn aggregated_version(headers: &HeaderMap) -> Option<&'static str> {
    let accept = headers.get("accept").and_then(|v| v.to_str().ok())?;
    for range in accept.split(',') {
        let params: Vec<&str> = range.split(';').map(str::trim).collect();
        if params.contains(&"g=apidiscovery.k8s.io") && params.contains(&"as=APIGroupDiscoveryList") {
            if params.contains(&"v=v2") {
                return Some("v2");
            }
            if params.contains(&"v=v2beta1") {
                return Some("v2beta1");
            }
        }
    }
    None
}

/// The aggregated discovery document for the core group (`legacy`) or all named groups.
pub fn aggregated(legacy: bool, version: &str) -> Value {
    aggregated_in(&registry::builtin(), legacy, version)
}

/// The aggregated discovery document over `defs`.
pub fn aggregated_in(defs: &[&'static ResourceDef], legacy: bool, version: &str) -> Value {
    let mut groups: Vec<&str> = Vec::new();
    for (g, _) in registry::group_versions_of(defs) {
        if g.is_empty() == legacy && !groups.contains(&g) {
            groups.push(g);
        }
    }
    let items: Vec<Value> = groups
        .into_iter()
        .map(|g| {
            let versions: Vec<Value> = sorted_versions(defs)
                .into_iter()
                .filter(|(gg, _)| *gg == g)
                .map(|(_, v)| {
                    let resources: Vec<Value> = defs
                        .iter()
                        .filter(|d| d.group == g && d.version == v)
                        .map(|d| {
                            let subs: Vec<Value> = d
                                .subresources
                                .iter()
                                .map(|s| {
                                    let (verbs, (sg, sv, sk)) = sub_info(d, s);
                                    json!({"subresource": s, "responseKind": {"group": sg, "version": sv, "kind": sk}, "verbs": verbs})
                                })
                                .collect();
                            let mut r = json!({
                                "resource": d.plural,
                                "responseKind": {"group": d.group, "version": d.version, "kind": d.kind},
                                "scope": if d.namespaced { "Namespaced" } else { "Cluster" },
                                "singularResource": d.singular,
                                "verbs": d.verbs,
                            });
                            if !d.short_names.is_empty() {
                                r["shortNames"] = json!(d.short_names);
                            }
                            if !d.categories.is_empty() {
                                r["categories"] = json!(d.categories);
                            }
                            if !subs.is_empty() {
                                r["subresources"] = json!(subs);
                            }
                            r
                        })
                        .collect();
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            json!({"metadata": {"name": g, "creationTimestamp": null}, "versions": versions})
        })
        .collect();
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": format!("apidiscovery.k8s.io/{version}"), "metadata": {}, "items": items})
}

/// Serves `/api` or `/apis`, aggregated when asked.
pub fn root(st: &AppState, defs: &[&'static ResourceDef], legacy: bool, headers: &HeaderMap) -> Response {
    if let Some(v) = aggregated_version(headers) {
        // `aggregated-discovery-stale`: the aggregated documents never learn of custom resources.
        let built_in: Vec<&'static ResourceDef>;
        let defs = if st.cfg.faults.is_on("aggregated-discovery-stale") {
            built_in = defs.iter().copied().filter(|d| d.custom.is_none()).collect();
            &built_in[..]
        } else {
            defs
        };
        let mut doc = aggregated_in(defs, legacy, v);
        if !legacy && let Some(items) = doc["items"].as_array_mut() {
            items.extend(super::aggregator::aggregated_items(st));
        }
        let body = doc.to_string();
        let ct = format!("application/json;g=apidiscovery.k8s.io;v={v};as=APIGroupDiscoveryList");
        return (
            [
                (axum::http::header::CONTENT_TYPE, ct),
                (axum::http::header::VARY, "Accept".to_string()),
            ],
            body,
        )
            .into_response();
    }
    let body = if legacy {
        api_versions(st)
    } else {
        let mut groups = api_groups_in(defs);
        if let Some(list) = groups["groups"].as_array_mut() {
            list.extend(super::aggregator::groups(st));
        }
        groups
    };
    json_response(200, &body, &[])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_list_has_subresources_with_kinds() {
        let l = resource_list("apps", "v1");
        let scale = l["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "deployments/scale")
            .unwrap();
        assert_eq!(scale["kind"], "Scale");
        assert_eq!(scale["group"], "autoscaling");
        let core = resource_list("", "v1");
        let pods = core["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "pods")
            .unwrap();
        assert_eq!(pods["shortNames"], json!(["po"]));
        assert_eq!(pods["categories"], json!(["all"]));
    }

    #[test]
    fn aggregated_discovery_when_asked() {
        let mut h = HeaderMap::new();
        h.insert(
            "accept",
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
                .parse()
                .unwrap(),
        );
        assert_eq!(aggregated_version(&h), Some("v2"));
        let d = aggregated(false, "v2");
        let names: Vec<&str> = d["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"apps") && !names.contains(&""));
        let core = aggregated(true, "v2");
        assert_eq!(core["items"][0]["metadata"]["name"], "");
        assert_eq!(core["items"][0]["versions"][0]["resources"][0]["scope"], "Cluster");
        let groups = api_groups();
        assert!(
            groups["groups"]
                .as_array()
                .unwrap()
                .iter()
                .any(|g| g["name"] == "batch")
        );
    }
}
