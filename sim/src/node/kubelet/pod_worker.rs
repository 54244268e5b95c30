//! The pod sync loop: the watch on pods bound to this node and each pod's worker task
//! (sandbox with the Windows hostNetwork rule, pod IP, volume setup, init containers in order,
//! then the app containers), the active deadline, and cleanup when the pod goes. Separate
//! from the per-container supervisor, which it starts.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, Preconditions};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::node::dns::PodDns;
use crate::node::fs::PodVolumes;
use crossconf_model::os::Os;

use super::admission::{self, Admission};
use super::restart::supervise;
use super::status::status_writer;
use super::termination::terminate;
use super::volumes::{pod_fields, volume_resync};
use super::{Ctr, Kubelet, PodRt, PodState, Role, sleep_or};

pub(super) async fn pod_watch(kl: Arc<Kubelet>) {
    let api: Api<Pod> = Api::all(kl.client.clone());
    let cfg = watcher::Config::default().fields(&format!("spec.nodeName={}", kl.cfg.name));
    let mut stream = watcher(api, cfg).default_backoff().boxed();
    loop {
        let ev = tokio::select! {
            _ = kl.cancel.cancelled() => break,
            ev = stream.next() => match ev { Some(e) => e, None => break },
        };
        // While the runtime does not answer (`node-flap`) the kubelet skips pod
        // synchronisation: pods bound or deleted meanwhile wait for the episode to end.
        if kl.health.runtime_down() {
            tokio::select! {
                _ = kl.cancel.cancelled() => break,
                () = kl.health.wait_runtime_up() => {}
                _ = kl.health.lost().cancelled() => {}
            }
        }
        // A lost node starts no pod and acts on no deletion: its pods run on, unreachable.
        if kl.health.is_lost() {
            continue;
        }
        match ev {
            Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => on_pod(&kl, p),
            Ok(watcher::Event::Delete(p)) => {
                let uid = p.metadata.uid.clone().unwrap_or_default();
                debug!(node = %kl.cfg.name, pod = ?p.metadata.name, %uid, "pod gone from the API");
                if let Some(rt) = kl.pods.lock().expect("pods lock").remove(&uid) {
                    rt.deleting.cancel();
                    rt.gone.cancel();
                }
            }
            Ok(_) => {}
            Err(e) => warn!(node = %kl.cfg.name, error = %e, "pod watch error"),
        }
    }
    // The kubelet stops: stop every pod's programs.
    for rt in kl.pods.lock().expect("pods lock").values() {
        rt.gone.cancel();
    }
}

fn on_pod(kl: &Arc<Kubelet>, p: Pod) {
    if p.spec.as_ref().and_then(|s| s.node_name.as_deref()) != Some(kl.cfg.name.as_str()) {
        return;
    }
    let uid = p.metadata.uid.clone().unwrap_or_default();
    let deleting = p.metadata.deletion_timestamp.is_some();
    let mut pods = kl.pods.lock().expect("pods lock");
    // A kubelet with the `termination-stuck` fault never acts on a pod's deletion: its
    // containers keep running and the pod stays Terminating (a hung kubelet or runtime).
    let deleting = deleting && !kl.net.faults().is_on("termination-stuck");
    if let Some(rt) = pods.get(&uid).cloned() {
        drop(pods);
        rt.observe(p);
        if deleting && !rt.deleting.is_cancelled() {
            debug!(node = %kl.cfg.name, pod = %rt.name, %uid, "pod deletion seen: terminating");
            rt.deleting.cancel();
        }
        // An update may have added ephemeral containers.
        super::ephemeral::start_new(kl, &rt);
        return;
    }
    // A deleted pod that already ended here (its worker is done, a finalizer keeps the
    // object): nothing runs again and its terminal status stays; only the final delete is
    // repeated, which changes nothing once it went through.
    if deleting
        && matches!(
            p.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or_default(),
            "Succeeded" | "Failed"
        )
    {
        drop(pods);
        let kl = kl.clone();
        tokio::spawn(async move {
            let ns = p.metadata.namespace.clone().unwrap_or_else(|| "default".into());
            final_delete(&kl, &ns, &p.metadata.name.clone().unwrap_or_default(), &uid).await;
        });
        return;
    }
    // A pod the API already shows terminal that this kubelet is not running (one it rejected,
    // or one that ended before the kubelet restarted) is never started again: upstream's pod
    // workers take it as terminated.
    if matches!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or_default(),
        "Succeeded" | "Failed"
    ) {
        return;
    }
    // Admission: a pod the node refuses never gets a worker.
    match admission::decide(kl, &pods, &p, None) {
        Admission::Admit => start(kl, &mut pods, p, deleting),
        Admission::Reject(r) => {
            tokio::spawn(admission::reject(kl.clone(), p, r));
        }
        Admission::AskNode => {
            drop(pods);
            tokio::spawn(admission::decide_with_fresh_node(kl.clone(), p, start_admitted));
        }
    }
}

/// Starts a pod admitted after the Node was read again, unless a later watch event already
/// started it.
fn start_admitted(kl: &Arc<Kubelet>, p: Pod) {
    let uid = p.metadata.uid.clone().unwrap_or_default();
    let deleting = p.metadata.deletion_timestamp.is_some() && !kl.net.faults().is_on("termination-stuck");
    let mut pods = kl.pods.lock().expect("pods lock");
    if !pods.contains_key(&uid) {
        start(kl, &mut pods, p, deleting);
    }
}

/// Creates the pod's runtime record and starts its worker.
fn start(kl: &Arc<Kubelet>, pods: &mut HashMap<String, Arc<PodRt>>, p: Pod, deleting: bool) {
    let uid = p.metadata.uid.clone().unwrap_or_default();
    let spec = p.spec.clone().unwrap_or_default();
    let deleting_token = CancellationToken::new();
    let rt = Arc::new(PodRt {
        uid: uid.clone(),
        name: p.metadata.name.clone().unwrap_or_default(),
        namespace: p.metadata.namespace.clone().unwrap_or_else(|| "default".into()),
        state: Mutex::new(PodState {
            init: spec
                .init_containers
                .iter()
                .flatten()
                .map(|c| Ctr::new(c, true))
                .collect(),
            main: spec
                .containers
                .iter()
                .map(|c| Ctr::new(c, spec.init_containers.as_ref().is_some_and(|i| !i.is_empty())))
                .collect(),
            ..Default::default()
        }),
        pod: Mutex::new(p),
        rules: std::sync::OnceLock::new(),
        dirty: Notify::new(),
        halted: deleting_token.child_token(),
        deleting: deleting_token,
        gone: CancellationToken::new(),
    });
    debug!(node = %kl.cfg.name, pod = %rt.name, %uid, deleting, "pod seen: starting its worker");
    if deleting {
        rt.deleting.cancel();
    }
    pods.insert(uid, rt.clone());
    tokio::spawn(pod_worker(kl.clone(), rt));
}

async fn pod_worker(kl: Arc<Kubelet>, rt: Arc<PodRt>) {
    let writer = tokio::spawn(status_writer(kl.clone(), rt.clone()));
    rt.touch();
    let runner = {
        let (kl, rt) = (kl.clone(), rt.clone());
        tokio::spawn(async move { run_pod(&kl, &rt).await })
    };
    let runner_abort = runner.abort_handle();
    // The pod runs until it is terminal or deleted; then everything stops and the pod goes.
    // A pod past its activeDeadlineSeconds is failed and its containers are stopped, but the
    // pod object stays (Failed, DeadlineExceeded) until it is deleted.
    tokio::select! {
        _ = rt.deleting.cancelled() => {}
        _ = kl.cancel.cancelled() => {}
        _ = active_deadline(&kl, &rt) => {
            terminate(&kl, &rt).await;
            rt.touch();
            tokio::select! {
                _ = rt.deleting.cancelled() => {}
                _ = kl.cancel.cancelled() => {}
            }
        }
        _ = runner => tokio::select! {
            _ = rt.deleting.cancelled() => {}
            _ = kl.cancel.cancelled() => {}
        },
    }
    // The node is going away (the simulated cluster stops): no container may start again, and
    // `terminate` kills at once, so no pod program outlives its cluster holding its sockets.
    if kl.cancel.is_cancelled() {
        rt.halted.cancel();
    }
    terminate(&kl, &rt).await;
    debug!(node = %kl.cfg.name, pod = %rt.name, uid = %rt.uid, "pod containers stopped");
    runner_abort.abort();
    rt.touch();
    tokio::time::sleep(Duration::from_millis(30)).await;
    let ip_index = rt.state.lock().expect("state lock").ip_index.take();
    if let Some(n) = ip_index {
        kl.release_ip(n);
    }
    if !rt.gone.is_cancelled() && !kl.cancel.is_cancelled() {
        super::status::post_final_status(&kl, &rt).await;
        final_delete(&kl, &rt.namespace, &rt.name, &rt.uid).await;
    }
    rt.gone.cancel();
    writer.abort();
    kl.pods.lock().expect("pods lock").remove(&rt.uid);
    kl.events
        .lock()
        .expect("events lock")
        .retain(|k, _| !k.contains(&rt.uid));
    let dir = kl.cfg.root_dir.join("pods").join(&rt.uid);
    if let Err(e) = std::fs::remove_dir_all(&dir) {
        debug!(dir = %dir.display(), error = %e, "pod directory not removed");
    }
}

/// The kubelet's final delete of a pod whose containers are all stopped (grace period 0, UID
/// precondition). The status manager keeps trying on every sync until the API server takes
/// it (a 500 or a refused connection must not strand the pod, and with it its namespace, in
/// Terminating); a 404 or a failed UID precondition (another pod of the same name now) means
/// it is done. Any other 409 is retried like a 500: taking it for "gone" once stranded a pod
/// whose delete raced a status write. Gives up only when the kubelet stops.
pub(super) async fn final_delete(kl: &Kubelet, namespace: &str, name: &str, uid: &str) {
    let api: Api<Pod> = Api::namespaced(kl.client.clone(), namespace);
    let dp = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        ..Default::default()
    };
    let mut delay = Duration::from_millis(200);
    loop {
        match api.delete(name, &dp).await {
            Ok(_) => {
                debug!(pod = %name, %uid, "final pod delete done");
                return;
            }
            Err(kube::Error::Api(s))
                if s.code == 404 || (s.code == 409 && s.message.contains("Precondition failed: UID")) =>
            {
                debug!(pod = %name, %uid, code = s.code, message = %s.message, "final pod delete: already gone");
                return;
            }
            Err(e) => debug!(pod = %name, error = %e, "final pod delete failed; retrying"),
        }
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = kl.cancel.cancelled() => return,
        }
        delay = (delay * 2).min(Duration::from_secs(5));
    }
}

/// Returns once the pod has been active on the node longer than its `activeDeadlineSeconds`
/// (read afresh from every pod update, since the field may be set or lowered on a running
/// pod), after marking it Failed with reason DeadlineExceeded and halting its containers, as
/// the kubelet's active-deadline handler does. Never returns under the `deadline-ignored` fault.
async fn active_deadline(kl: &Kubelet, rt: &PodRt) {
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if kl.net.faults().is_on("deadline-ignored") {
            continue;
        }
        let Some(limit) = rt
            .pod()
            .spec
            .as_ref()
            .and_then(|s| s.active_deadline_seconds)
            .and_then(|s| u64::try_from(s).ok())
        else {
            continue;
        };
        let Some(start) = rt.state.lock().expect("state lock").start_time else {
            continue;
        };
        let active = jiff::Timestamp::now().duration_since(start);
        if active.as_secs_f64() < limit as f64 {
            continue;
        }
        let msg = "Pod was active on the node longer than the specified deadline";
        {
            let mut st = rt.state.lock().expect("state lock");
            if st.failed.is_none() {
                st.failed = Some(("DeadlineExceeded".into(), msg.into()));
            }
        }
        kl.pod_event(rt, None, "Normal", "DeadlineExceeded", msg);
        rt.halted.cancel();
        rt.touch();
        return;
    }
}

/// Why a sandbox cannot be created on this node, if it cannot.
///
/// HostProcess pods run on Windows nodes (containerd 1.7 models them, see
/// [`super::host_process`]) unless the `hostprocess-unsupported` fault models a runtime
/// without job containers (containerd before 1.6).
fn sandbox_error(os: Os, pod: &Pod, host_network_allowed: bool, host_process_supported: bool) -> Option<String> {
    let spec = pod.spec.clone().unwrap_or_default();
    let host_process = super::host_process::pod_requested(pod);
    // Windows: hostNetwork needs a HostProcess pod (source: "Windows containers in Kubernetes",
    // networking limitations; HostProcess pods may use it since 1.26, today's behaviour).
    if spec.host_network.unwrap_or(false) && !os.supports_host_network() && !host_process && !host_network_allowed {
        return Some("hostNetwork is not supported for non-HostProcess pods on Windows nodes".into());
    }
    if host_process && os != Os::Windows {
        return Some("HostProcess containers are only supported on Windows nodes".into());
    }
    if host_process && !host_process_supported {
        return Some(
            "failed to create containerd sandbox: HostProcess containers are not supported by this runtime (containerd 1.6 or later is needed)".into(),
        );
    }
    None
}

async fn run_pod(kl: &Arc<Kubelet>, rt: &Arc<PodRt>) {
    let pod = rt.pod();
    // Sandbox.
    let sandbox_id = format!("{:064x}", rand::random::<u128>());
    let mut n = 0;
    loop {
        if rt.halted.is_cancelled() {
            return;
        }
        let pod = rt.pod();
        let err = sandbox_error(
            kl.cfg.os,
            &pod,
            kl.net.faults().is_on("host-network-allowed"),
            !kl.net.faults().is_on("hostprocess-unsupported"),
        )
        .or_else(|| match PodDns::for_pod(&pod, kl.cfg.os, kl.cfg.block) {
            Err(e @ crate::node::dns::DnsConfigError::Unsupported { .. }) => Some(e.to_string()),
            _ => None,
        });
        // The RuntimeClass's handler, resolved before the runtime is asked for the sandbox
        // (kubelet `createPodSandbox`); a handler containerd lacks fails RunPodSandbox.
        let msg = match err {
            Some(msg) => {
                format!("rpc error: code = Unknown desc = failed to setup network for sandbox \"{sandbox_id}\": {msg}")
            }
            None => match super::hyperv::resolve_for(kl, &pod).await {
                Ok(handler) => {
                    let isolation = super::hyperv::isolation(
                        kl.cfg.os,
                        &handler,
                        kl.net.faults().is_on(super::hyperv::FAULT_ISOLATION_IGNORED),
                    );
                    rt.state.lock().expect("state lock").sandbox = Some(super::hyperv::Sandbox {
                        id: sandbox_id.clone(),
                        handler,
                        isolation,
                    });
                    break;
                }
                Err(msg) => msg,
            },
        };
        kl.pod_event(
            rt,
            None,
            "Warning",
            "FailedCreatePodSandBox",
            &format!("Failed to create pod sandbox: {msg}"),
        );
        rt.touch();
        if !sleep_or(kl.cfg.profile.backoff(n).max(Duration::from_millis(200)), &rt.halted).await {
            return;
        }
        n += 1;
    }
    // A hostNetwork pod shares its node's network namespace: its IP is the node's, and its
    // programs listen on the node's address (a port already taken there fails to bind, as on a
    // real node). Other pods take an address from the node's pod range.
    let host_network = pod.spec.as_ref().and_then(|s| s.host_network) == Some(true);
    let (ip_index, ip) = if host_network {
        (None, kl.node_ip())
    } else {
        let Some((n, ip)) = kl.alloc_ip() else {
            kl.pod_event(
                rt,
                None,
                "Warning",
                "FailedCreatePodSandBox",
                "Failed to create pod sandbox: the node's pod address range is exhausted",
            );
            return;
        };
        (Some(n), ip)
    };
    {
        let mut st = rt.state.lock().expect("state lock");
        st.ip = Some(ip);
        st.ip_index = ip_index;
        st.start_time = Some(jiff::Timestamp::now());
        st.sandbox_ready = true;
        let dns_pod = if kl.net.faults().is_on("dns-config-searches-ignored") {
            without_dns_searches(&pod)
        } else {
            pod.clone()
        };
        st.dns = Some(PodDns::for_pod(&dns_pod, kl.cfg.os, kl.cfg.block).map_err(|e| e.to_string()));
    }
    rt.touch();
    // Volumes.
    let pod_dir = kl.cfg.root_dir.join("pods").join(&rt.uid);
    let host_root = kl.cfg.root_dir.join("host");
    if kl.cfg.os == Os::Linux {
        // The node's hosts file exists before any hostPath volume can name it.
        super::container::node_hosts_file(kl);
    }
    let mut n = 0;
    loop {
        let fields = pod_fields(kl, &rt.pod(), ip);
        let pod = rt.pod();
        let setup = PodVolumes::setup(
            &kl.client,
            &pod,
            kl.cfg.os,
            &pod_dir,
            &host_root,
            &fields,
            kl.cfg.allocatable_memory_bytes(),
            kl.net.faults(),
        );
        match setup.await {
            Ok(v) => {
                rt.state.lock().expect("state lock").volumes = Some(v);
                tokio::spawn(volume_resync(kl.clone(), rt.clone(), pod_dir.clone(), ip));
                // Ephemeral containers added before the volumes were ready start now.
                super::ephemeral::start_new(kl, rt);
                break;
            }
            Err(e) => {
                kl.pod_event(rt, None, "Warning", "FailedMount", &e.to_string());
                if !sleep_or(kl.cfg.profile.backoff(n).max(Duration::from_millis(200)), &rt.halted).await {
                    return;
                }
                n += 1;
            }
        }
    }
    // The containers' restart rules, before the first one can exit.
    if !super::restart_rules::load(kl, rt).await {
        return;
    }
    // Init containers, in order.
    let inits = pod.spec.clone().unwrap_or_default().init_containers.unwrap_or_default();
    let policy = pod
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.clone())
        .unwrap_or_else(|| "Always".into());
    // A kubelet with the `init-containers-skipped` fault starts the app containers at once.
    let skip_inits = kl.net.faults().is_on("init-containers-skipped");
    for (i, c) in inits.iter().enumerate() {
        if skip_inits {
            break;
        }
        let sidecar = c.restart_policy.as_deref() == Some("Always");
        if sidecar {
            tokio::spawn(supervise(
                kl.clone(),
                rt.clone(),
                c.clone(),
                Role::Init,
                i,
                "Always".into(),
            ));
            // As the kubelet (KEP-753), the next container starts only once the sidecar has
            // started: running, its postStart hook returned and its startup probe passed.
            if !wait_started(rt, i).await {
                return;
            }
            continue;
        }
        let ok = supervise(
            kl.clone(),
            rt.clone(),
            c.clone(),
            Role::Init,
            i,
            if policy == "Never" {
                "Never".into()
            } else {
                "OnFailure".into()
            },
        )
        .await;
        if !ok {
            return;
        }
    }
    rt.state.lock().expect("state lock").init_done = true;
    rt.touch();
    let mains = pod.spec.clone().unwrap_or_default().containers;
    let handles: Vec<_> = mains
        .iter()
        .enumerate()
        .map(|(i, c)| {
            tokio::spawn(supervise(
                kl.clone(),
                rt.clone(),
                c.clone(),
                Role::App,
                i,
                policy.clone(),
            ))
        })
        .collect();
    for h in handles {
        let _ = h.await;
    }
    rt.touch();
}

/// Waits until init container `idx` (a sidecar) has started; false when the pod is halted first.
async fn wait_started(rt: &PodRt, idx: usize) -> bool {
    loop {
        let started = {
            let st = rt.state.lock().expect("state lock");
            st.init[idx].started && st.init[idx].state.is_running()
        };
        if started {
            return true;
        }
        if !sleep_or(Duration::from_millis(50), &rt.halted).await {
            return false;
        }
    }
}

/// `pod` with the search suffixes and options of its dnsConfig dropped (fault
/// `dns-config-searches-ignored`): what a CNI that applies only the nameservers configures.
fn without_dns_searches(pod: &k8s_openapi::api::core::v1::Pod) -> k8s_openapi::api::core::v1::Pod {
    let mut pod = pod.clone();
    if let Some(cfg) = pod.spec.as_mut().and_then(|s| s.dns_config.as_mut()) {
        cfg.searches = None;
        cfg.options = None;
    }
    pod
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;

    #[test]
    fn windows_refuses_host_network_sandboxes() {
        let pod = Pod {
            spec: Some(PodSpec {
                host_network: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(
            sandbox_error(Os::Windows, &pod, false, true)
                .unwrap()
                .contains("hostNetwork")
        );
        assert!(sandbox_error(Os::Windows, &pod, true, true).is_none());
        assert!(sandbox_error(Os::Linux, &pod, false, true).is_none());
    }
}
