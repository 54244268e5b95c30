//! Service address allocation: ClusterIPs from the service range and NodePorts from the
//! NodePort range, checking requested values against those other Services hold.

use std::net::Ipv4Addr;

use serde_json::{Value, json};

use crate::api::error::{ApiError, ApiResult, Cause};
use crate::api::meta;
use crate::api::state::AppState;

/// The NodePort range (upstream `--service-node-port-range` default).
pub const NODE_PORTS: std::ops::RangeInclusive<i64> = 30000..=32767;

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

/// The size of the low band of the service range that dynamic allocation only uses once the
/// rest is full: upstream's `min(max(16, size/16), 256)`, 256 for our /20. Keeping requested
/// (static) addresses such as the DNS Service's out of the way of dynamic ones is upstream's
/// reason; ours is also that a random pick, unlike "lowest free", seldom hands a just-freed
/// address to the next Service while kube-proxies may still hold the old one.
const STATIC_BAND: u16 = 256;

/// The number of addresses in the service range (a /20), network and broadcast included.
const RANGE: u16 = 16 * 256;

/// A free ClusterIP picked as upstream's allocator does: from a random offset in the upper band,
/// then in the lower band (1 is the kubernetes Service and 10 the DNS Service; both are only ever
/// requested).
fn free_cluster_ip(block: crate::addr::AddressBlock, in_use: &[Ipv4Addr]) -> Option<Ipv4Addr> {
    use rand::Rng;
    let mut rng = rand::rng();
    [(STATIC_BAND, RANGE - 1), (2, STATIC_BAND)]
        .into_iter()
        .find_map(|(lo, hi)| {
            let span = hi - lo;
            let start = rng.random_range(0..span);
            (0..span)
                .map(|k| lo + (start + k) % span)
                .filter(|n| *n != 10)
                .filter_map(|n| block.service(n))
                .find(|ip| !in_use.contains(ip))
        })
}

/// Allocates (or checks a requested) ClusterIP and NodePorts. Callers hold
/// [`AppState::alloc`] until the object is stored, so two writes never take the same address.
pub(super) fn allocate(st: &AppState, svc: &mut Value, old: Option<&Value>) -> ApiResult<()> {
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
        let free = free_cluster_ip(block, &ips)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::admission::on_create;
    use crate::api::admission::testutil::state;
    use crate::api::registry::find;

    #[test]
    fn services_get_cluster_ips_and_node_ports() {
        let st = state();
        let def = find("", "v1", "services").unwrap();
        let mut s = json!({"metadata": {"name": "a", "uid": "u1"}, "spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}]}});
        on_create(&st, def, &mut s).unwrap();
        let ip: Ipv4Addr = s["spec"]["clusterIP"].as_str().unwrap().parse().unwrap();
        assert!(ip >= "127.200.97.0".parse::<Ipv4Addr>().unwrap(), "dynamic band: {ip}");
        assert!(st.cfg.block.is_service_ip(ip), "{ip}");
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
}
