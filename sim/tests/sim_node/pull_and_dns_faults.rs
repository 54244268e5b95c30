//! The transient switches of the node side that a run must survive: `pull-fail-once` (the first
//! pull of each image on each node meets a registry answering 503; the back-off retry pulls it)
//! and `dns-servfail` (the cluster DNS answers a share of queries SERVFAIL; resolvers retry,
//! and the tools report SERVFAIL when every try failed).

use std::sync::Mutex;

use futures::StreamExt;
use kube::runtime::watcher;

use super::*;

/// Collects every waiting reason the pod's first container shows until it is Running and
/// Ready; the watch starts before the pod is created, so no state goes unseen.
async fn reasons_until_running(c: &Cluster, p: Pod) -> (Vec<String>, Pod) {
    let name = p.metadata.name.clone().unwrap_or_default();
    let api = Api::<Pod>::namespaced(c.client.clone(), NS);
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let stream = watcher(
        api.clone(),
        watcher::Config::default().fields(&format!("metadata.name={name}")),
    );
    let record = seen.clone();
    let watch = async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(ev) = stream.next().await {
            let Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) = ev else {
                continue;
            };
            if let Some(r) = waiting_reason(&p) {
                let mut seen = record.lock().unwrap();
                if seen.last() != Some(&r) {
                    seen.push(r);
                }
            }
            if running_ready(&p) {
                return p;
            }
        }
        panic!("pod {name}: the watch ended");
    };
    let task = tokio::spawn(tokio::time::timeout(Duration::from_secs(20), watch));
    // Let the watch list before the pod exists.
    tokio::time::sleep(Duration::from_millis(300)).await;
    create(c, p).await;
    let running = task.await.expect("watch task").unwrap_or_else(|_| {
        panic!(
            "pod not Running and Ready in 20 s; waiting reasons seen: {:?}",
            seen.lock().unwrap()
        )
    });
    let seen = seen.lock().unwrap().clone();
    (seen, running)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pull_fail_once_fails_the_first_pull_of_each_image_then_runs() {
    let c = cluster().await;
    c.faults.set("pull-fail-once", "", true);
    let (reasons, first) = reasons_until_running(&c, netexec("first-pull", "lin-0")).await;
    let failed = reasons.iter().position(|r| r == "ErrImagePull");
    assert!(failed.is_some(), "the first pull fails: {reasons:?}");
    assert!(
        reasons[failed.unwrap_or(0)..].iter().any(|r| r == "ImagePullBackOff"),
        "then the kubelet backs off: {reasons:?}"
    );
    assert!(!restarted(&first), "a failed pull is no container restart");
    let msg = wait_event(&c, "first-pull", "Failed", "503 Service Unavailable").await;
    assert_eq!(
        msg,
        format!(
            "Failed to pull image \"{AGNHOST}\": failed to pull and unpack image \"{AGNHOST}\": failed to resolve \
             reference \"{AGNHOST}\": unexpected status from HEAD request to \
             https://registry.k8s.io/v2/e2e-test-images/agnhost/manifests/2.53: 503 Service Unavailable"
        )
    );
    wait_event(&c, "first-pull", "Failed", "Error: ErrImagePull").await;
    wait_event(&c, "first-pull", "BackOff", "Back-off pulling image").await;
    wait_event(&c, "first-pull", "Pulled", "Successfully pulled image").await;
    // The image is on the node now: the next pod there pulls nothing and fails nothing.
    let (reasons, _) = reasons_until_running(&c, netexec("cached", "lin-0")).await;
    assert!(!reasons.iter().any(|r| r == "ErrImagePull"), "{reasons:?}");
    wait_event(&c, "cached", "Pulled", "already present on machine").await;
    // Another node pulls for itself, and fails its own first pull.
    let (reasons, _) = reasons_until_running(&c, netexec("other-node", "win-0")).await;
    assert!(reasons.iter().any(|r| r == "ErrImagePull"), "{reasons:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dns_servfail_at_100_percent_fails_lookups_and_at_0_percent_does_not() {
    let c = cluster().await;
    create(&c, pod("lin-dns", "lin-0", AGNHOST, None, vec!["pause"])).await;
    create(&c, netexec("win-dns", "win-0")).await;
    wait_pod(&c, "lin-dns", "Running", running_ready).await;
    wait_pod(&c, "win-dns", "Running", running_ready).await;
    let kube_ip = c.net.block().kubernetes_service().to_string();

    c.faults.set("dns-servfail", "100%", true);
    let m = ask_cluster_dns(&c, "kubernetes.default.svc.cluster.local.").await;
    assert_eq!(m.metadata.response_code, ResponseCode::ServFail);
    assert!(m.answers.is_empty());
    assert_eq!(m.queries.len(), 1, "the question is echoed");
    // busybox nslookup and Windows nslookup report the RCODE after the resolver's retries.
    let (out, err, code) = exec(&c, "lin-dns", &["nslookup", "kubernetes.default"]).await;
    assert!(code.is_some(), "nslookup failed: {out}{err}");
    assert!(
        err.contains("** server can't find kubernetes.default: SERVFAIL"),
        "{out}{err}"
    );
    let (out, err, code) = exec(&c, "win-dns", &["cmd", "/c", "nslookup kubernetes"]).await;
    assert!(code.is_some(), "nslookup failed: {out}{err}");
    assert!(
        err.contains("*** UnKnown can't find kubernetes: Server failed"),
        "{out}{err}"
    );
    // A program resolving through the pod's resolver fails too, with the cause.
    let (out, err, code) = exec(&c, "lin-dns", &["wget", "-q", "-O", "-", "http://kubernetes.default/"]).await;
    assert!(code.is_some(), "wget succeeded without DNS: {out}{err}");

    c.faults.set("dns-servfail", "100%", false);
    c.faults.set("dns-servfail", "0%", true);
    let m = ask_cluster_dns(&c, "kubernetes.default.svc.cluster.local.").await;
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    let (out, err, code) = exec(&c, "lin-dns", &["nslookup", "kubernetes.default"]).await;
    assert!(code.is_none() && out.contains(&kube_ip), "{out}{err}");
    let (out, err, code) = exec(&c, "win-dns", &["cmd", "/c", "nslookup kubernetes"]).await;
    assert!(code.is_none() && out.contains(&kube_ip), "{out}{err}");
}
