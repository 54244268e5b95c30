//! The LimitRanger admission plugin: LimitRange defaults filled into a new pod's containers
//! and min, max and limit/request ratios enforced per container and per pod, with the quantity
//! arithmetic it needs.

use serde_json::{Value, json};

use super::{admission_forbidden, plugin_off};
use crate::api::error::ApiResult;
use crate::api::meta;
use crate::api::registry::ResourceDef;
use crate::api::state::AppState;
use crate::control::predicates::parse_quantity_milli;

/// A quantity (`"500m"`, `"1Gi"`, or a bare number) in milli-units.
fn milli(q: &Value) -> Option<i128> {
    q.as_str()
        .and_then(parse_quantity_milli)
        .or_else(|| q.as_f64().map(|f| (f * 1000.0).round() as i128))
}

/// A quantity as the API prints it.
fn quantity_text(q: &Value) -> String {
    q.as_str().map_or_else(|| q.to_string(), str::to_string)
}

/// Milli-units of `resource` as a quantity: fractions in `m`, whole memory in the largest exact
/// binary unit, other whole numbers plainly.
fn render_milli(m: i128, resource: &str) -> String {
    if m % 1000 != 0 {
        return format!("{m}m");
    }
    let n = m / 1000;
    if (resource.contains("memory") || resource.contains("storage")) && n != 0 {
        for (suffix, size) in [("Ti", 1i128 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)] {
            if n % size == 0 {
                return format!("{}{suffix}", n / size);
            }
        }
    }
    n.to_string()
}

/// A container's (or pod's) `requests` or `limits` map.
type Amounts = serde_json::Map<String, Value>;

/// One LimitRange item's effective `default` and `defaultRequest`, with upstream's LimitRange
/// defaulting applied (`default` from `max`, `defaultRequest` from `default`), as the stored
/// object would carry them.
fn effective_defaults(item: &Value) -> (Amounts, Amounts) {
    let map = |k: &str| item.get(k).and_then(Value::as_object).cloned().unwrap_or_default();
    let mut default = map("default");
    for (k, v) in map("max") {
        default.entry(k).or_insert(v);
    }
    let mut request = map("defaultRequest");
    for (k, v) in &default {
        request.entry(k.clone()).or_insert_with(|| v.clone());
    }
    (default, request)
}

/// Fills the resources of `c` missing from `defaults` into `field`; returns what it added.
fn fill_defaults(c: &mut Value, field: &str, defaults: &Amounts) -> Vec<String> {
    if !c.get("resources").is_some_and(Value::is_object) {
        c["resources"] = json!({});
    }
    let res = &mut c["resources"];
    if !res.get(field).is_some_and(Value::is_object) {
        res[field] = json!({});
    }
    let mut added = Vec::new();
    for (k, v) in defaults {
        if res[field].get(k).is_none() {
            res[field][k] = v.clone();
            added.push(k.clone());
        }
    }
    if res[field].as_object().is_some_and(serde_json::Map::is_empty)
        && let Some(m) = res.as_object_mut()
    {
        m.remove(field);
    }
    added
}

/// Checks one LimitRange item's min, max and maxLimitRequestRatio against `requests` and
/// `limits` of a container or pod (`kind`), in upstream's words.
fn check_limit_item(item: &Value, kind: &str, requests: &Amounts, limits: &Amounts, errors: &mut Vec<String>) {
    let map = |k: &str| item.get(k).and_then(Value::as_object).cloned().unwrap_or_default();
    for (r, enforced) in map("min") {
        let min = milli(&enforced).unwrap_or(0);
        let e = quantity_text(&enforced);
        match requests.get(&r) {
            None => errors.push(format!("minimum {r} usage per {kind} is {e}.  No request is specified")),
            Some(q) if milli(q).unwrap_or(0) < min => errors.push(format!(
                "minimum {r} usage per {kind} is {e}, but request is {}",
                quantity_text(q)
            )),
            Some(_) => {}
        }
        if let Some(q) = limits.get(&r)
            && milli(q).unwrap_or(0) < min
        {
            errors.push(format!(
                "minimum {r} usage per {kind} is {e}, but limit is {}",
                quantity_text(q)
            ));
        }
    }
    for (r, enforced) in map("max") {
        let max = milli(&enforced).unwrap_or(0);
        let e = quantity_text(&enforced);
        match limits.get(&r) {
            None => errors.push(format!("maximum {r} usage per {kind} is {e}.  No limit is specified")),
            Some(q) if milli(q).unwrap_or(0) > max => errors.push(format!(
                "maximum {r} usage per {kind} is {e}, but limit is {}",
                quantity_text(q)
            )),
            Some(_) => {}
        }
        if let Some(q) = requests.get(&r)
            && milli(q).unwrap_or(0) > max
        {
            errors.push(format!(
                "maximum {r} usage per {kind} is {e}, but request is {}",
                quantity_text(q)
            ));
        }
    }
    for (r, enforced) in map("maxLimitRequestRatio") {
        let e = quantity_text(&enforced);
        let request = requests.get(&r).and_then(milli).unwrap_or(0);
        let Some(limit) = limits.get(&r).and_then(milli) else {
            errors.push(format!(
                "{r} max limit to request ratio per {kind} is {e}, but no limit is specified"
            ));
            continue;
        };
        if request == 0 {
            errors.push(format!(
                "{r} max limit to request ratio per {kind} is {e}, but no request is specified or request is 0"
            ));
            continue;
        }
        let ratio = limit as f64 / request as f64;
        if ratio * 1000.0 > milli(&enforced).unwrap_or(0) as f64 {
            errors.push(format!(
                "{r} max limit to request ratio per {kind} is {e}, but provided ratio is {ratio:.6}"
            ));
        }
    }
}

/// A pod's total `requests` or `limits`: containers summed, init containers by max.
fn pod_totals(containers: &[Value], inits: &[Value], field: &str) -> Amounts {
    let mut sums: std::collections::BTreeMap<String, i128> = std::collections::BTreeMap::new();
    let amounts = |c: &Value| -> Vec<(String, i128)> {
        c.pointer(&format!("/resources/{field}"))
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.clone(), milli(v).unwrap_or(0)))
            .collect()
    };
    for (k, m) in containers.iter().flat_map(amounts) {
        *sums.entry(k).or_default() += m;
    }
    for (k, m) in inits.iter().flat_map(amounts) {
        let e = sums.entry(k).or_default();
        *e = (*e).max(m);
    }
    sums.into_iter()
        .map(|(k, m)| {
            let text = render_milli(m, &k);
            (k, json!(text))
        })
        .collect()
}

/// The LimitRanger admission plugin for a new pod: containers without a request or limit get
/// the `defaultRequest`/`default` of every `Container` item of the namespace's LimitRanges
/// (noted in the `kubernetes.io/limit-ranger` annotation, as upstream does), then min, max and
/// maxLimitRequestRatio of `Container` and `Pod` items are enforced with upstream's messages
/// (403 Forbidden).
pub(super) fn limit_ranger(st: &AppState, def: &ResourceDef, pod: &mut Value) -> ApiResult<()> {
    if plugin_off(st, "LimitRanger") {
        return Ok(());
    }
    let ns = meta::namespace(pod).to_string();
    let (ranges, _) = st.store.list("/limitranges", Some(&ns));
    let items: Vec<Value> = ranges
        .iter()
        .flat_map(|r| {
            r.pointer("/spec/limits")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        })
        .collect();
    if items.is_empty() {
        return Ok(());
    }
    let mut notes = Vec::new();
    for item in items
        .iter()
        .filter(|i| i.get("type").and_then(Value::as_str) == Some("Container"))
    {
        let (default, request) = effective_defaults(item);
        for (list, what) in [("containers", "container"), ("initContainers", "init container")] {
            let Some(cs) = pod.pointer_mut(&format!("/spec/{list}")).and_then(Value::as_array_mut) else {
                continue;
            };
            for c in cs {
                let name = c.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
                let limits = fill_defaults(c, "limits", &default);
                let requests = fill_defaults(c, "requests", &request);
                if !requests.is_empty() {
                    notes.push(format!("{} request for {what} {name}", requests.join(", ")));
                }
                if !limits.is_empty() {
                    notes.push(format!("{} limit for {what} {name}", limits.join(", ")));
                }
            }
        }
    }
    if !notes.is_empty() {
        let annotations = meta::meta_mut(pod).entry("annotations").or_insert_with(|| json!({}));
        if annotations.is_object() {
            annotations["kubernetes.io/limit-ranger"] = json!(format!("LimitRanger plugin set: {}", notes.join("; ")));
        }
    }
    let list = |p: &str| pod.pointer(p).and_then(Value::as_array).cloned().unwrap_or_default();
    let (containers, inits) = (list("/spec/containers"), list("/spec/initContainers"));
    let mut errors = Vec::new();
    for item in &items {
        match item.get("type").and_then(Value::as_str) {
            Some("Container") => {
                for c in containers.iter().chain(&inits) {
                    let res = |f: &str| {
                        c.pointer(&format!("/resources/{f}"))
                            .and_then(Value::as_object)
                            .cloned()
                            .unwrap_or_default()
                    };
                    check_limit_item(item, "Container", &res("requests"), &res("limits"), &mut errors);
                }
            }
            Some("Pod") => check_limit_item(
                item,
                "Pod",
                &pod_totals(&containers, &inits, "requests"),
                &pod_totals(&containers, &inits, "limits"),
                &mut errors,
            ),
            _ => {}
        }
    }
    match errors.len() {
        0 => Ok(()),
        1 => Err(admission_forbidden(def, pod, &errors[0])),
        _ => Err(admission_forbidden(def, pod, &format!("[{}]", errors.join(", ")))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::admission::on_create;
    use crate::api::admission::testutil::state;
    use crate::api::registry::find;

    #[test]
    fn limit_ranger_defaults_and_enforces_limits() {
        let st = state();
        st.store
            .create("/limitranges", "ns", "lr", json!({"metadata": {"name": "lr", "namespace": "ns"}, "spec": {"limits": [{
                "type": "Container", "max": {"cpu": "500m"}, "min": {"cpu": "100m"},
                "default": {"cpu": "300m", "memory": "300Mi"}, "defaultRequest": {"cpu": "200m", "memory": "200Mi"}}]}}))
            .unwrap();
        let def = find("", "v1", "pods").unwrap();
        let mut p = json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
        on_create(&st, def, &mut p).unwrap();
        let r = &p["spec"]["containers"][0]["resources"];
        assert_eq!(r["requests"], json!({"cpu": "200m", "memory": "200Mi"}));
        assert_eq!(r["limits"], json!({"cpu": "300m", "memory": "300Mi"}));
        assert_eq!(p["status"]["qosClass"], "Burstable");
        let mut big = json!({"metadata": {"name": "big", "namespace": "ns"}, "spec": {"containers": [{"name": "c", "image": "i",
            "resources": {"limits": {"cpu": "600m"}, "requests": {"cpu": "600m"}}}]}});
        let e = on_create(&st, def, &mut big).unwrap_err();
        assert_eq!(e.code, 403);
        assert!(
            e.message
                .contains("pods \"big\" is forbidden: [maximum cpu usage per Container is 500m, but limit is 600m"),
            "{}",
            e.message
        );
    }
}
