//! The pod sync's volume part: the downward API field source and the periodic rebuild of
//! ConfigMap, Secret, downward API and projected volumes. Separate because it runs on its own
//! timer for the pod's whole life, apart from container supervision.

use std::net::Ipv4Addr;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use crate::node::fs::PodVolumes;
use crate::node::runtime::PodFields;

use super::{Kubelet, PodRt};

/// How many node status periods make one kubelet pod sync period: the real kubelet reports
/// status every 10 s and resyncs each pod every minute (`syncFrequency`), so a profile's
/// status period sets the sync period too (12 s in `fast`, a minute in `realistic`).
const SYNC_PERIODS_PER_STATUS: u32 = 6;

/// The periodic pod sync's volume part: every sync period, ConfigMap, Secret, downward API and
/// projected volumes are rebuilt from the current objects and pod metadata and swapped in
/// atomically, until the pod is deleted. This is how a ConfigMap update or a new label reaches
/// a running container (eventually, not at once: real clusters take up to the sync period plus
/// the object cache's TTL). The `volume-updates-stopped` fault stops it (a kubelet that never
/// refreshes mounted contents). A failed refresh keeps the old contents and reports
/// `FailedMount`, as the kubelet does.
pub(super) async fn volume_resync(kl: Arc<Kubelet>, rt: Arc<PodRt>, pod_dir: std::path::PathBuf, ip: Ipv4Addr) {
    let period = kl.cfg.profile.node_status() * SYNC_PERIODS_PER_STATUS;
    loop {
        tokio::select! {
            _ = rt.deleting.cancelled() => return,
            _ = kl.cancel.cancelled() => return,
            _ = tokio::time::sleep(period) => {}
        }
        if kl.net.faults().is_on("volume-updates-stopped") {
            continue;
        }
        let pod = rt.pod();
        let fields = pod_fields(&kl, &pod, ip);
        if let Err(e) = PodVolumes::resync(&kl.client, &pod, &pod_dir, &fields, kl.net.faults()).await {
            kl.pod_event(&rt, None, "Warning", "FailedMount", &e.to_string());
        }
    }
}

pub(super) fn pod_fields(kl: &Kubelet, pod: &Pod, ip: Ipv4Addr) -> PodFields {
    PodFields {
        pod: pod.clone(),
        pod_ip: ip.to_string(),
        host_ip: kl.node_ip().to_string(),
        node_cpu: kl.cfg.allocatable_cpu_millis() as f64 / 1000.0,
        node_memory: kl.cfg.allocatable_memory_bytes() as f64,
    }
}
