//! `/stats/summary`: node, pod and container CPU, memory, file system, logs and network
//! figures in the kubelet's stats/v1alpha1 JSON shape, with values that move with the
//! workload.
//!
//! A per-node [`sampler`] integrates each running container's CPU demand (what its emulated
//! programs report, capped by its CPU limit unless the `limits-not-applied` fault is on) into
//! `usageCoreNanoSeconds`, as cAdvisor/the Windows stats provider do from real counters.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rand::Rng;
use serde_json::{Value, json};

use crate::node::fs::dir_size;
use crate::node::kubelet::Kubelet;
use crate::node::net::StatsField;
use crate::node::runtime::{CState, LOG_CAPACITY};

/// How often CPU usage is integrated.
const SAMPLE: Duration = Duration::from_millis(500);

/// Integrates CPU usage of every running container until the kubelet stops.
pub(crate) async fn sampler(kl: Arc<Kubelet>) {
    let mut last = std::time::Instant::now();
    loop {
        tokio::select! {
            _ = kl.cancel.cancelled() => return,
            _ = tokio::time::sleep(SAMPLE) => {}
        }
        let dt = last.elapsed().as_secs_f64();
        last = std::time::Instant::now();
        let ignore_limits = kl.net.faults().limits_not_applied();
        let pods: Vec<_> = kl.pods.lock().expect("pods lock").values().cloned().collect();
        let mut rng = rand::rng();
        for p in pods {
            let st = p.state.lock().expect("state lock");
            for c in st.init.iter().chain(st.main.iter()) {
                if !c.state.is_running() {
                    c.cpu_rate.store(0, Ordering::Relaxed);
                    continue;
                }
                let demand = c.usage.demand_millicores.load(Ordering::Relaxed) as f64;
                let idle = rng.random_range(0.5..2.5);
                let mut m = demand.max(idle) * rng.random_range(0.9..1.0);
                if let (Some(limit), false) = (c.cpu_limit_millis, ignore_limits) {
                    m = m.min(limit as f64 * 0.98);
                }
                let nano_cores = (m * 1e6) as u64;
                c.cpu_rate.store(nano_cores, Ordering::Relaxed);
                c.cpu_ns.fetch_add((nano_cores as f64 * dt) as u64, Ordering::Relaxed);
            }
        }
    }
}

fn ts() -> String {
    jiff::Timestamp::now().to_string()
}

fn cpu(rate: u64, total: u64, drop: Option<StatsField>) -> Value {
    let mut v = json!({"time": ts(), "usageNanoCores": rate, "usageCoreNanoSeconds": total});
    if drop == Some(StatsField::CpuUsageCoreNanoSeconds) {
        v.as_object_mut().map(|o| o.remove("usageCoreNanoSeconds"));
    }
    v
}

fn memory(ws: u64, limit: Option<u64>, drop: Option<StatsField>) -> Value {
    let mut v = json!({"time": ts(), "usageBytes": ws + ws / 8, "workingSetBytes": ws, "rssBytes": ws * 3 / 4, "pageFaults": ws / 4096, "majorPageFaults": 0});
    if let Some(l) = limit {
        v["availableBytes"] = json!(l.saturating_sub(ws));
    }
    if drop == Some(StatsField::MemoryWorkingSetBytes) {
        v.as_object_mut().map(|o| o.remove("workingSetBytes"));
    }
    v
}

fn fs_stats(capacity: u64, used: u64) -> Value {
    json!({"time": ts(), "availableBytes": capacity.saturating_sub(used), "capacityBytes": capacity, "usedBytes": used, "inodesFree": 6_000_000u64, "inodes": 6_553_600u64, "inodesUsed": 553_600u64})
}

/// The memory the node's own processes (OS, kubelet, runtime) hold besides the pods.
pub(crate) fn system_memory(os: crossconf_model::os::Os) -> u64 {
    match os {
        crossconf_model::os::Os::Windows => 1_400 << 20,
        crossconf_model::os::Os::Linux => 600 << 20,
    }
}

/// The summary for this node.
pub(crate) fn summary(kl: &Kubelet) -> Value {
    let drop = kl.net.faults().stats_missing();
    let mut rng = rand::rng();
    let disk = kl.cfg.capacity.ephemeral_storage_bytes;
    let mut pods_json = Vec::new();
    let (mut node_rate, mut node_total, mut node_mem) = (0u64, 0u64, 0u64);
    let (mut node_rx, mut node_tx) = (0u64, 0u64);
    let pods: Vec<_> = kl.pods.lock().expect("pods lock").values().cloned().collect();
    for p in pods {
        let st = p.state.lock().expect("state lock");
        let Some(start) = st.start_time else { continue };
        let mut containers = Vec::new();
        let (mut prate, mut ptotal, mut pmem, mut prx, mut ptx) = (0u64, 0u64, 0u64, 0u64, 0u64);
        for c in st.init.iter().chain(st.main.iter()) {
            let (rate, total) = (c.cpu_rate.load(Ordering::Relaxed), c.cpu_ns.load(Ordering::Relaxed));
            let started = match &c.state {
                CState::Running { started_at } => *started_at,
                CState::Terminated {
                    started_at: Some(s), ..
                } => *s,
                _ => continue,
            };
            let running = c.state.is_running();
            let extra = c.usage.extra_memory_bytes.load(Ordering::Relaxed);
            let ws = if running {
                c.base_memory + extra + rng.random_range(0..(256u64 << 10))
            } else {
                0
            };
            prx += c.usage.rx_bytes.load(Ordering::Relaxed);
            ptx += c.usage.tx_bytes.load(Ordering::Relaxed);
            prate += rate;
            ptotal += total;
            pmem += ws;
            let log_used = c.logs.bytes();
            let mut logs = fs_stats(LOG_CAPACITY, log_used);
            if drop == Some(StatsField::LogsAvailableBytes) {
                logs.as_object_mut().map(|o| o.remove("availableBytes"));
            }
            // Upstream's stats providers drop terminated containers from the list
            // (cri_stats_provider.go `removeTerminatedContainers`); the pod's totals keep them.
            if !running {
                continue;
            }
            let rootfs_used = c.exec.as_ref().map_or(0, |x| x.fs.rootfs_used());
            containers.push(json!({
                "name": c.name,
                "startTime": started.to_string(),
                "cpu": cpu(rate, total, drop),
                "memory": memory(ws, c.memory_limit, drop),
                "rootfs": fs_stats(disk, rootfs_used + 4096),
                "logs": logs,
            }));
        }
        node_rate += prate;
        node_total += ptotal;
        node_mem += pmem;
        node_rx += prx;
        node_tx += ptx;
        let volumes: Vec<Value> = st
            .volumes
            .as_ref()
            .map(|v| {
                v.volumes
                    .iter()
                    .map(|(name, d)| {
                        let mut f = fs_stats(disk, dir_size(&d.host));
                        f["name"] = json!(name);
                        f
                    })
                    .collect()
            })
            .unwrap_or_default();
        let iface = json!({"name": "eth0", "rxBytes": prx, "rxErrors": 0, "txBytes": ptx, "txErrors": 0});
        pods_json.push(json!({
            "podRef": {"name": p.name, "namespace": p.namespace, "uid": p.uid},
            "startTime": start.to_string(),
            "containers": containers,
            "cpu": cpu(prate, ptotal, drop),
            "memory": memory(pmem, None, drop),
            "network": {"time": ts(), "name": "eth0", "rxBytes": prx, "rxErrors": 0, "txBytes": ptx, "txErrors": 0, "interfaces": [iface]},
            "volume": volumes,
            "ephemeral-storage": fs_stats(disk, 8192),
            "process_stats": {"process_count": st.main.iter().filter(|c| c.state.is_running()).count()},
        }));
    }
    // The node itself: system processes plus the pods.
    let uptime = kl.started.elapsed().as_secs_f64();
    let sys_rate = (rng.random_range(80.0..160.0) * 1e6) as u64;
    let sys_total = (uptime * 120.0 * 1e6) as u64;
    let cap_mem = kl.cfg.capacity.memory_bytes;
    let sys_mem = system_memory(kl.cfg.os);
    let ws = sys_mem + node_mem;
    let started = jiff::Timestamp::now() - jiff::SignedDuration::from_secs_f64(uptime);
    let mut node_memory = memory(ws, Some(cap_mem), drop);
    node_memory["availableBytes"] = json!(cap_mem.saturating_sub(ws));
    json!({
        "node": {
            "nodeName": kl.cfg.name,
            "systemContainers": [
                {"name": "kubelet", "startTime": started.to_string(), "cpu": cpu(sys_rate / 4, sys_total / 4, drop), "memory": memory(80 << 20, None, drop)},
                {"name": "pods", "startTime": started.to_string(), "cpu": cpu(node_rate, node_total, drop), "memory": memory(node_mem, None, drop)},
            ],
            "startTime": started.to_string(),
            "cpu": cpu(sys_rate + node_rate, sys_total + node_total, drop),
            "memory": node_memory,
            "network": {"time": ts(), "name": "eth0", "rxBytes": node_rx + 1_000_000, "rxErrors": 0, "txBytes": node_tx + 500_000, "txErrors": 0,
                        "interfaces": [{"name": "eth0", "rxBytes": node_rx + 1_000_000, "rxErrors": 0, "txBytes": node_tx + 500_000, "txErrors": 0}]},
            "fs": fs_stats(disk, disk / 5),
            "runtime": {"imageFs": fs_stats(disk, disk / 10), "containerFs": fs_stats(disk, disk / 10)},
            "rlimit": {"time": ts(), "maxpid": 4_194_304u64, "curproc": 120},
        },
        "pods": pods_json,
    })
}
