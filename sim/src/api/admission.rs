//! Admission: what the real server does to an object between decoding and storing it.
//! Defaulting, the built-in admission plugins the suites notice (namespace lifecycle fields,
//! RuntimeClass scheduling, priority, Service ClusterIP/NodePort allocation, Job selectors),
//! status reset on create, and validation. Also the review resources, answered per request.
//!
//! The main functions are [`on_create`] and [`on_update`]; callers hold `AppState::alloc`
//! across allocation and the store write.

use std::net::Ipv4Addr;

use serde_json::{Value, json};

use super::defaults;
use super::error::{ApiError, ApiResult, Cause};
use super::meta;
use super::registry::ResourceDef;
use super::state::AppState;
use super::validate;
use crate::control::predicates::parse_quantity_milli;

/// The NodePort range (upstream `--service-node-port-range` default).
pub const NODE_PORTS: std::ops::RangeInclusive<i64> = 30000..=32767;

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
            runtime_class(st, obj)?;
            priority(st, obj)?;
            limit_ranger(st, def, obj)?;
            let qos = obj.get("spec").map(defaults::qos_class).unwrap_or("BestEffort");
            obj["status"] = json!({"phase": "Pending", "qosClass": qos});
        }
        ("", "services") => {
            allocate(st, obj, None)?;
            obj["status"] = json!({"loadBalancer": {}});
        }
        ("batch", "jobs") => job_selector(obj),
        ("", "nodes") => {}
        _ if def.has_sub("status") => {
            obj["status"] = json!({});
        }
        _ => {}
    }
    reject(def, obj, waive(st, def, validate::validate(def, obj, None)))?;
    resource_quota(st, def, obj)
}

/// Prepares an update of `old` to `new` (main resource writes only).
pub fn on_update(st: &AppState, def: &ResourceDef, old: &Value, new: &mut Value) -> ApiResult<()> {
    defaults::apply(def, new);
    match (def.group, def.plural) {
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
                } else if let Some(ports) = new.pointer_mut("/spec/ports").and_then(Value::as_array_mut) {
                    for p in ports {
                        if let Some(m) = p.as_object_mut() {
                            m.remove("nodePort");
                        }
                    }
                }
                allocate(st, new, Some(old))?;
            }
        }
        ("batch", "jobs") if new.pointer("/spec/selector").is_none() => {
            new["spec"]["selector"] = old.pointer("/spec/selector").cloned().unwrap_or(json!(null));
        }
        _ => {}
    }
    reject(def, new, waive(st, def, validate::validate(def, new, Some(old))))
}

/// Drops the validation causes a fault switch turned off (an API server that lets bad objects
/// through): `validation-off=config-keys` (ConfigMap/Secret data keys), `validation-off=immutable`
/// (changes to an immutable ConfigMap/Secret), `pod-os-validation-off` (Linux-only fields on
/// Windows pods).
fn waive(st: &AppState, def: &ResourceDef, causes: Vec<Cause>) -> Vec<Cause> {
    let faults = &st.cfg.faults;
    if def.group.is_empty() && def.plural == "pods" && faults.is_on("pod-os-validation-off") {
        return causes
            .into_iter()
            .filter(|c| !c.message.contains("for a windows pod"))
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

/// RuntimeClass admission: overhead, and the class's nodeSelector and tolerations merged into
/// the pod; a conflicting nodeSelector refuses the pod.
fn runtime_class(st: &AppState, pod: &mut Value) -> ApiResult<()> {
    let Some(rc_name) = pod
        .pointer("/spec/runtimeClassName")
        .and_then(Value::as_str)
        .map(String::from)
    else {
        return Ok(());
    };
    let rc = st
        .store
        .get("node.k8s.io/runtimeclasses", "", &rc_name)
        .ok_or_else(|| ApiError::forbidden(format!("pod rejected: RuntimeClass {rc_name:?} not found")))?;
    if let Some(o) = rc.pointer("/overhead/podFixed") {
        pod["spec"]["overhead"] = o.clone();
    }
    if let Some(sel) = rc.pointer("/scheduling/nodeSelector").and_then(Value::as_object) {
        let spec = &mut pod["spec"];
        if !spec.get("nodeSelector").is_some_and(Value::is_object) {
            spec["nodeSelector"] = json!({});
        }
        for (k, v) in sel {
            match spec["nodeSelector"].get(k) {
                Some(existing) if existing != v => {
                    return Err(ApiError::forbidden(format!(
                        "pod rejected: conflict: runtimeClass.scheduling.nodeSelector[{k}] = {}; pod.spec.nodeSelector[{k}] = {}",
                        v.as_str().unwrap_or_default(),
                        existing.as_str().unwrap_or_default()
                    )));
                }
                _ => spec["nodeSelector"][k] = v.clone(),
            }
        }
    }
    if let Some(tols) = rc.pointer("/scheduling/tolerations").and_then(Value::as_array) {
        let spec = &mut pod["spec"];
        if !spec.get("tolerations").is_some_and(Value::is_array) {
            spec["tolerations"] = json!([]);
        }
        let list = spec["tolerations"].as_array_mut().expect("array");
        for t in tols {
            if !list.contains(t) {
                list.push(t.clone());
            }
        }
    }
    Ok(())
}

/// Priority admission: the value of the pod's PriorityClass.
fn priority(st: &AppState, pod: &mut Value) -> ApiResult<()> {
    let Some(pc) = pod
        .pointer("/spec/priorityClassName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(String::from)
    else {
        return Ok(());
    };
    let class = st
        .store
        .get("scheduling.k8s.io/priorityclasses", "", &pc)
        .ok_or_else(|| {
            ApiError::forbidden(format!(
                "pods {:?} is forbidden: no PriorityClass with name {pc} was found",
                meta::name(pod)
            ))
        })?;
    pod["spec"]["priority"] = class.get("value").cloned().unwrap_or(json!(0));
    if let Some(p) = class.get("preemptionPolicy") {
        pod["spec"]["preemptionPolicy"] = p.clone();
    }
    Ok(())
}

/// ClusterIPs and NodePorts in use by Services other than `except`.
fn in_use(st: &AppState, except: Option<&Value>) -> (Vec<Ipv4Addr>, Vec<i64>) {
    let skip_uid = except.and_then(|o| o.pointer("/metadata/uid")).cloned();
    let (svcs, _) = st.store.list("/services", None);
    let mut ips = Vec::new();
    let mut ports = Vec::new();
    for s in svcs
        .iter()
        .filter(|s| skip_uid.is_none() || s.pointer("/metadata/uid") != skip_uid.as_ref())
    {
        if let Some(ip) = s
            .pointer("/spec/clusterIP")
            .and_then(Value::as_str)
            .and_then(|x| x.parse().ok())
        {
            ips.push(ip);
        }
        for p in s.pointer("/spec/ports").and_then(Value::as_array).into_iter().flatten() {
            if let Some(n) = p.get("nodePort").and_then(Value::as_i64) {
                ports.push(n);
            }
        }
    }
    (ips, ports)
}

/// Allocates (or checks a requested) ClusterIP and NodePorts.
fn allocate(st: &AppState, svc: &mut Value, old: Option<&Value>) -> ApiResult<()> {
    let block = st.cfg.block;
    let ty = svc
        .pointer("/spec/type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
        .to_string();
    if ty == "ExternalName" {
        return Ok(());
    }
    let (ips, ports) = in_use(st, old);
    let name = meta::name(svc).to_string();
    let mut causes = Vec::new();
    let requested = svc
        .pointer("/spec/clusterIP")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let keep_old = old.and_then(|o| o.pointer("/spec/clusterIP")).and_then(Value::as_str) == Some(requested.as_str());
    if requested == "None" {
        svc["spec"]["clusterIPs"] = json!(["None"]);
    } else if requested.is_empty() {
        // 1 is the kubernetes Service and 10 the DNS Service; both are only ever requested.
        let free = (2..4094u16)
            .filter(|n| *n != 10)
            .filter_map(|n| block.service(n))
            .find(|ip| !ips.contains(ip))
            .ok_or_else(|| ApiError::internal("failed to allocate a serviceIP: range is full"))?;
        svc["spec"]["clusterIP"] = json!(free.to_string());
        svc["spec"]["clusterIPs"] = json!([free.to_string()]);
    } else if !keep_old {
        match requested.parse::<Ipv4Addr>() {
            Ok(ip) if !block.is_service_ip(ip) => causes.push(Cause::invalid(
                "spec.clusterIPs",
                &json!([requested]),
                &format!(
                    "failed to allocate IP {requested}: the provided IP ({requested}) is not in the valid range. The range of valid IPs is {}",
                    block.service_cidr()
                ),
            )),
            Ok(ip) if ips.contains(&ip) => causes.push(Cause::invalid(
                "spec.clusterIPs",
                &json!([requested]),
                &format!("failed to allocate IP {requested}: provided IP is already allocated"),
            )),
            Ok(_) => svc["spec"]["clusterIPs"] = json!([requested]),
            Err(_) => causes.push(Cause::invalid(
                "spec.clusterIPs[0]",
                &json!(requested),
                "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            )),
        }
    }
    if matches!(ty.as_str(), "NodePort" | "LoadBalancer") {
        let mut taken = ports.clone();
        let old_ports: Vec<i64> = old
            .and_then(|o| o.pointer("/spec/ports"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|p| p.get("nodePort").and_then(Value::as_i64))
            .collect();
        let n = svc.pointer("/spec/ports").and_then(Value::as_array).map_or(0, Vec::len);
        for i in 0..n {
            let p = &svc["spec"]["ports"][i];
            match p.get("nodePort").and_then(Value::as_i64) {
                Some(np) if old_ports.contains(&np) && !taken.contains(&np) => taken.push(np),
                Some(np) if !NODE_PORTS.contains(&np) => causes.push(Cause::invalid(
                    format!("spec.ports[{i}].nodePort"),
                    &json!(np),
                    "provided port is not in the valid range. The range of valid ports is 30000-32767",
                )),
                Some(np) if taken.contains(&np) => causes.push(Cause::invalid(
                    format!("spec.ports[{i}].nodePort"),
                    &json!(np),
                    "provided port is already allocated",
                )),
                Some(np) => taken.push(np),
                None => {
                    use rand::Rng;
                    let mut rng = rand::rng();
                    let start = rng.random_range(NODE_PORTS);
                    let span = NODE_PORTS.end() - NODE_PORTS.start() + 1;
                    let free = (0..span)
                        .map(|k| NODE_PORTS.start() + (start - NODE_PORTS.start() + k) % span)
                        .find(|c| !taken.contains(c))
                        .ok_or_else(|| ApiError::internal("failed to allocate a nodePort: range is full"))?;
                    taken.push(free);
                    svc["spec"]["ports"][i]["nodePort"] = json!(free);
                }
            }
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid("", "Service", &name, causes))
    }
}

// --- LimitRanger and ResourceQuota admission -------------------------------------------------

/// Whether the `admission-off` fault switch turned off admission plugin `plugin` (a cluster
/// whose API server runs without it, as `--disable-admission-plugins` would).
fn plugin_off(st: &AppState, plugin: &str) -> bool {
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
fn limit_ranger(st: &AppState, def: &ResourceDef, pod: &mut Value) -> ApiResult<()> {
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
fn resource_quota(st: &AppState, def: &ResourceDef, obj: &Value) -> ApiResult<()> {
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

/// Answers a review resource (never stored): access reviews allow everything for the
/// authenticated admin, as on a cluster where the kubeconfig user is cluster-admin.
pub fn review(st: &AppState, def: &ResourceDef, mut obj: Value) -> ApiResult<Value> {
    let _ = st;
    meta::meta_mut(&mut obj).insert("creationTimestamp".into(), Value::Null);
    match def.plural {
        "selfsubjectaccessreviews" => {
            let attrs = obj.pointer("/spec/resourceAttributes").is_some()
                || obj.pointer("/spec/nonResourceAttributes").is_some();
            if !attrs {
                return Err(ApiError::invalid(
                    def.group,
                    def.kind,
                    "",
                    vec![Cause::invalid(
                        "spec.resourceAttributes",
                        &Value::Null,
                        "exactly one of nonResourceAttributes or resourceAttributes must be specified",
                    )],
                ));
            }
            obj["status"] =
                json!({"allowed": true, "reason": "the simulated cluster authorizes its admin for everything"});
        }
        "selfsubjectrulesreviews" => {
            obj["status"] = json!({
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                "incomplete": false
            });
        }
        "selfsubjectreviews" => {
            obj["status"] = json!({"userInfo": {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]}});
        }
        other => return Err(ApiError::method_not_allowed(format!("{other} cannot be created"))),
    }
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::AddressBlock;
    use crate::api::registry::find;
    use crate::api::state::StateConfig;

    fn state() -> AppState {
        AppState::new(StateConfig::new(AddressBlock(200)))
    }

    #[test]
    fn services_get_cluster_ips_and_node_ports() {
        let st = state();
        let def = find("", "v1", "services").unwrap();
        let mut s = json!({"metadata": {"name": "a", "uid": "u1"}, "spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}]}});
        on_create(&st, def, &mut s).unwrap();
        assert_eq!(s["spec"]["clusterIP"], "127.200.96.2");
        assert_eq!(s["spec"]["ports"][0]["nodePort"], 30080);
        st.store.create("/services", "default", "a", s).unwrap();
        let mut dup = json!({"metadata": {"name": "b", "uid": "u2"}, "spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}]}});
        let e = on_create(&st, def, &mut dup).unwrap_err();
        assert_eq!(e.code, 422);
        assert!(
            e.message
                .contains("spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated"),
            "{}",
            e.message
        );
        let mut out =
            json!({"metadata": {"name": "c"}, "spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": 80}]}});
        let e = on_create(&st, def, &mut out).unwrap_err();
        assert!(e.message.contains("The range of valid ports is 30000-32767"));
        let mut headless = json!({"metadata": {"name": "h"}, "spec": {"clusterIP": "None", "ports": [{"port": 80}]}});
        on_create(&st, def, &mut headless).unwrap();
        assert_eq!(headless["spec"]["clusterIPs"], json!(["None"]));
        let mut ext = json!({"metadata": {"name": "e"}, "spec": {"type": "ExternalName"}});
        let e = on_create(&st, def, &mut ext).unwrap_err();
        assert!(e.message.contains("spec.externalName: Required value"));
    }

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

    #[test]
    fn runtime_class_scheduling_is_merged_and_conflicts_refused() {
        let st = state();
        st.store
            .create("node.k8s.io/runtimeclasses", "", "win", json!({"metadata": {"name": "win"}, "handler": "runhcs",
                "scheduling": {"nodeSelector": {"kubernetes.io/os": "windows"}, "tolerations": [{"key": "os", "value": "windows", "effect": "NoSchedule"}]}}))
            .unwrap();
        let def = find("", "v1", "pods").unwrap();
        let mut p = json!({"metadata": {"name": "p"}, "spec": {"runtimeClassName": "win", "containers": [{"name": "c", "image": "i"}]}});
        on_create(&st, def, &mut p).unwrap();
        assert_eq!(p["spec"]["nodeSelector"]["kubernetes.io/os"], "windows");
        assert!(
            p["spec"]["tolerations"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["key"] == "os")
        );
        assert_eq!(p["status"]["phase"], "Pending");
        let mut bad = json!({"metadata": {"name": "q"}, "spec": {"runtimeClassName": "win", "nodeSelector": {"kubernetes.io/os": "linux"},
            "containers": [{"name": "c", "image": "i"}]}});
        assert_eq!(on_create(&st, def, &mut bad).unwrap_err().code, 403);
    }
}
