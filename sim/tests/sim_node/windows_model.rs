//! DESIGN.md's Windows behaviour model, row by row: images and sandboxes, volumes and users,
//! networking, restarts and deletion, security context, hugepages and file mounts, DNS, stats.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_and_sandbox_rows_of_the_windows_model() {
    let c = cluster().await;
    // A Linux-only image: fails on Windows naming the mismatch, runs on Linux.
    create(&c, pod("bb-win", "win-0", "busybox:1.36", None, vec!["sleep", "3600"])).await;
    create(&c, pod("bb-lin", "lin-0", "busybox:1.36", None, vec!["sleep", "3600"])).await;
    let p = wait_pod(&c, "bb-win", "an image pull failure", |p| {
        matches!(waiting_reason(p).as_deref(), Some("ErrImagePull" | "ImagePullBackOff"))
    })
    .await;
    let msg = waiting_message(&p);
    assert!(
        msg.contains("linux/amd64") && msg.contains("windows/amd64 10.0.20348"),
        "{msg}"
    );
    wait_pod(&c, "bb-lin", "Running", running_ready).await;
    // An unknown image fails naming it.
    create(
        &c,
        pod(
            "nope",
            "win-0",
            "registry.k8s.io/e2e-test-images/nonexistent:1.0",
            None,
            vec![],
        ),
    )
    .await;
    wait_event(&c, "nope", "Failed", "registry.k8s.io/e2e-test-images/nonexistent:1.0").await;
    // hostNetwork: sandbox creation fails on Windows; Linux runs it.
    let mut hn = pod("hn-win", "win-1", AGNHOST, None, vec!["pause"]);
    hn.spec.as_mut().unwrap().host_network = Some(true);
    create(&c, hn).await;
    let mut hl = pod("hn-lin", "lin-0", AGNHOST, None, vec!["pause"]);
    hl.spec.as_mut().unwrap().host_network = Some(true);
    create(&c, hl).await;
    wait_event(&c, "hn-win", "FailedCreatePodSandBox", "hostNetwork").await;
    wait_pod(&c, "hn-lin", "Running", running_ready).await;
    // Another Windows build (process isolation): the container cannot be created.
    create(
        &c,
        pod(
            "ltsc2019",
            "win-0",
            "mcr.microsoft.com/windows/nanoserver:ltsc2019",
            Some(vec!["cmd", "/c", "ping -t localhost"]),
            vec![],
        ),
    )
    .await;
    let msg = wait_waiting(&c, "ltsc2019", "CreateContainerError").await;
    assert!(msg.contains("does not match the host operating system"), "{msg}");
    // Never pull policy without the image cached.
    let mut never = pod("never", "win-1", "registry.k8s.io/pause:3.10", None, vec![]);
    never.spec.as_mut().unwrap().containers[0].image_pull_policy = Some("Never".into());
    create(&c, never).await;
    wait_waiting(&c, "never", "ErrImageNeverPull").await;
}

fn with_volume(mut p: Pod, volume: serde_json::Value, mount: serde_json::Value) -> Pod {
    let spec = p.spec.as_mut().unwrap();
    spec.volumes = Some(vec![serde_json::from_value(volume).unwrap()]);
    spec.containers[0].volume_mounts = Some(vec![serde_json::from_value(mount).unwrap()]);
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volume_and_user_rows_of_the_windows_model() {
    let c = cluster().await;
    // Read-only emptyDir: reads work, writes fail with the OS's message.
    let vol = serde_json::json!({"name": "v", "emptyDir": {}});
    let two = |name: &str, node: &str, ro_path: &str, rw_path: &str| {
        let mut p = pod(name, node, AGNHOST, None, vec!["pause"]);
        let spec = p.spec.as_mut().unwrap();
        spec.volumes = Some(vec![serde_json::from_value(vol.clone()).unwrap()]);
        let mut rw = spec.containers[0].clone();
        rw.name = "rw".into();
        rw.volume_mounts = Some(vec![
            serde_json::from_value(serde_json::json!({"name": "v", "mountPath": rw_path})).unwrap(),
        ]);
        spec.containers[0].volume_mounts = Some(vec![
            serde_json::from_value(serde_json::json!({"name": "v", "mountPath": ro_path, "readOnly": true})).unwrap(),
        ]);
        spec.containers.push(rw);
        p
    };
    create(&c, two("ro-win", "win-0", "C:\\mnt\\volume", "C:\\mnt\\rw")).await;
    create(&c, two("ro-lin", "lin-0", "/mnt/volume", "/mnt/rw")).await;
    wait_pod(&c, "ro-win", "Running", running_ready).await;
    wait_pod(&c, "ro-lin", "Running", running_ready).await;
    let (out, err, code) = exec(
        &c,
        "ro-win",
        &["cmd", "/c", "echo windows-volume-test> C:\\mnt\\volume\\file.txt"],
    )
    .await;
    assert!(
        code.is_some() && format!("{out}{err}").contains("Access is denied."),
        "{out}{err}"
    );
    let (_, err, code) = exec_in(
        &c,
        "ro-win",
        "rw",
        &["cmd", "/c", "echo from-rw> C:\\mnt\\rw\\file.txt"],
    )
    .await;
    assert_eq!(code, None, "{err}");
    let (out, _, code) = exec(&c, "ro-win", &["cmd", "/c", "type C:\\mnt\\volume\\file.txt"]).await;
    assert_eq!((out.trim(), code), ("from-rw", None));
    let (out, err, code) = exec(&c, "ro-lin", &["sh", "-c", "echo x > /mnt/volume/file.txt"]).await;
    assert!(
        code.is_some() && format!("{out}{err}").contains("Read-only file system"),
        "{out}{err}"
    );
    // emptyDir medium Memory and subPath: served on both (a plain directory on Windows, as
    // mount_windows.go does; subpath_windows.go); emptyDir medium HugePages refused on Windows.
    for (name, node, medium) in [
        ("mem-win", "win-1", "Memory"),
        ("mem-lin", "lin-0", "Memory"),
        ("huge-medium-win", "win-1", "HugePages"),
    ] {
        let p = with_volume(
            pod(name, node, AGNHOST, None, vec!["pause"]),
            serde_json::json!({"name": "m", "emptyDir": {"medium": medium}}),
            serde_json::json!({"name": "m", "mountPath": "/mnt/m"}),
        );
        create(&c, p).await;
    }
    wait_pod(&c, "mem-win", "Running", running_ready).await;
    wait_pod(&c, "mem-lin", "Running", running_ready).await;
    let msg = wait_waiting(&c, "huge-medium-win", "CreateContainerError").await;
    assert!(msg.contains("medium HugePages"), "{msg}");
    for (name, node) in [("sub-win", "win-1"), ("sub-lin", "lin-0")] {
        let mut p = with_volume(
            pod(name, node, AGNHOST, None, vec!["pause"]),
            serde_json::json!({"name": "s", "emptyDir": {}}),
            serde_json::json!({"name": "s", "mountPath": "/mnt/s", "subPath": "x"}),
        );
        let spec = p.spec.as_mut().unwrap();
        let mut whole = spec.containers[0].clone();
        whole.name = "whole".into();
        whole.volume_mounts = Some(vec![
            serde_json::from_value(serde_json::json!({"name": "s", "mountPath": "/mnt/all"})).unwrap(),
        ]);
        spec.containers.push(whole);
        create(&c, p).await;
    }
    wait_pod(&c, "sub-win", "Running", running_ready).await;
    wait_pod(&c, "sub-lin", "Running", running_ready).await;
    let (_, err, code) = exec(&c, "sub-win", &["cmd", "/c", "echo through-sub> C:\\mnt\\s\\f.txt"]).await;
    assert_eq!(code, None, "{err}");
    let (out, _, code) = exec_in(&c, "sub-win", "whole", &["cmd", "/c", "type C:\\mnt\\all\\x\\f.txt"]).await;
    assert_eq!((out.trim(), code), ("through-sub", None));
    // A host named pipe mapped through hostPath shows in the container's pipe namespace; a pipe
    // the host does not have fails the container.
    for (name, pipe) in [("pipe-ok", "containerd-containerd"), ("pipe-missing", "no-such-pipe")] {
        let path = format!(r"\\.\pipe\{pipe}");
        let p = with_volume(
            pod(name, "win-0", AGNHOST, None, vec!["pause"]),
            serde_json::json!({"name": "p", "hostPath": {"path": path}}),
            serde_json::json!({"name": "p", "mountPath": path}),
        );
        create(&c, p).await;
    }
    wait_pod(&c, "pipe-ok", "Running", running_ready).await;
    let (out, _, code) = exec(&c, "pipe-ok", &["cmd", "/c", r"dir /b \\.\pipe\"]).await;
    assert_eq!(code, None);
    assert!(out.lines().any(|l| l.trim() == "containerd-containerd"), "{out}");
    let msg = wait_waiting(&c, "pipe-missing", "CreateContainerError").await;
    assert!(
        msg.contains(r"named pipe \\.\pipe\no-such-pipe does not exist"),
        "{msg}"
    );
    // runAsUserName: applied; an unknown user fails; ContainerAdministrator + runAsNonRoot refused.
    let user = |name: &str, u: &str, non_root: bool| {
        let mut p = pod(name, "win-0", AGNHOST, None, vec!["pause"]);
        p.spec.as_mut().unwrap().security_context = Some(
            serde_json::from_value(
                serde_json::json!({"runAsNonRoot": non_root, "windowsOptions": {"runAsUserName": u}}),
            )
            .unwrap(),
        );
        p
    };
    create(&c, user("user-ok", "ContainerUser", false)).await;
    create(&c, user("user-bad", "NoSuchUser", false)).await;
    create(&c, user("user-admin", "ContainerAdministrator", true)).await;
    wait_pod(&c, "user-ok", "Running", running_ready).await;
    let (out, _, _) = exec(&c, "user-ok", &["cmd", "/c", "whoami"]).await;
    assert_eq!(out.trim(), "user manager\\containeruser");
    wait_event(&c, "user-bad", "Failed", "The user name or password is incorrect").await;
    let msg = wait_waiting(&c, "user-admin", "CreateContainerConfigError").await;
    assert!(msg.contains("non-root"), "{msg}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_rows_restarts_and_deletion() {
    let c = cluster().await;
    create(&c, pod("w", "win-0", AGNHOST, None, vec!["pause"])).await;
    create(&c, pod("l", "lin-0", AGNHOST, None, vec!["pause"])).await;
    wait_pod(&c, "w", "Running", running_ready).await;
    wait_pod(&c, "l", "Running", running_ready).await;
    // ICMP outside the cluster: no reply from Windows, a reply from Linux; TCP egress works.
    let ext = crossconf_sim::addr::MODELLED_EXTERNAL_IPS[0].to_string();
    let (out, _, code) = exec(&c, "w", &["cmd", "/c", &format!("ping -n 1 -w 100 {ext}")]).await;
    assert!(code.is_some() && out.contains("Request timed out."), "{out}");
    let (out, _, code) = exec(&c, "l", &["sh", "-c", &format!("ping -c 1 {ext}")]).await;
    assert!(code.is_none(), "{out}");
    let node_ip = c.nodes[2].ip().to_string();
    let (out, _, code) = exec(&c, "w", &["cmd", "/c", &format!("ping -n 1 {node_ip}")]).await;
    assert!(code.is_none(), "ping inside the cluster works: {out}");
    let (out, _, code) = exec(&c, "w", &["curl.exe", "-s", &format!("http://{ext}/hostname")]).await;
    assert_eq!((out.as_str(), code), ("outside", None));
    // Egress by name through the node resolver (dnsPolicy ClusterFirst forwards it).
    let (out, _, code) = exec(
        &c,
        "w",
        &[
            "curl.exe",
            "-s",
            &format!("http://{}:8080/hostname", crossconf_sim::addr::EXTERNAL_NAME),
        ],
    )
    .await;
    assert_eq!((out.as_str(), code), ("outside", None));
    // A real outside address is modelled unreachable: nothing is sent.
    let before = c.net.dialer().refusals().len();
    let (_, err, code) = exec(&c, "l", &["sh", "-c", "wget -T 1 -q -O - http://1.1.1.1/"]).await;
    assert!(code.is_some(), "{err}");
    assert!(
        c.net.dialer().refusals()[before..]
            .iter()
            .any(|r| r.dst == "1.1.1.1".parse::<IpAddr>().unwrap())
    );
    // /etc/hosts: managed on Linux (the pod IP is there), not on Windows.
    let lp = Api::<Pod>::namespaced(c.client.clone(), NS).get("l").await.unwrap();
    let (out, _, _) = exec(&c, "l", &["/agnhost", "etc-hosts"]).await;
    assert!(out.contains(&pod_ip(&lp).to_string()), "{out}");
    let wp = Api::<Pod>::namespaced(c.client.clone(), NS).get("w").await.unwrap();
    let (out, _, _) = exec(&c, "w", &["/agnhost", "etc-hosts"]).await;
    assert!(!out.contains(&pod_ip(&wp).to_string()), "{out}");
    // CrashLoopBackOff with restarts and the last exit code.
    create(
        &c,
        pod("crash", "win-1", AGNHOST, Some(vec!["cmd", "/c", "exit 3"]), vec![]),
    )
    .await;
    let p = wait_pod(&c, "crash", "restarts", restarted).await;
    let cs = &p.status.unwrap().container_statuses.unwrap()[0];
    assert_eq!(
        cs.last_state.as_ref().unwrap().terminated.as_ref().unwrap().exit_code,
        3
    );
    wait_event(&c, "crash", "BackOff", "Back-off restarting failed container c").await;
    // Graceful deletion: the kubelet stops the containers and removes the pod.
    let api = Api::<Pod>::namespaced(c.client.clone(), NS);
    let uid = api.get("w").await.unwrap().metadata.uid.unwrap();
    api.delete("w", &DeleteParams::default()).await.expect("delete");
    tokio::time::timeout(
        Duration::from_secs(10),
        await_condition(api.clone(), "w", kube::runtime::conditions::is_deleted(&uid)),
    )
    .await
    .expect("deleted in time")
    .expect("watch");
    wait_event(&c, "w", "Killing", "Stopping container c").await;
    let _ = BTreeMap::<String, String>::new();
}

// --- Windows behaviour model rows not covered above -------------------------------------------
//
// DESIGN.md "Windows behaviour model", row by row, and the test that shows each:
// - Linux image / Windows image of another build: `image_and_sandbox_rows_of_the_windows_model`
// - hostNetwork without HostProcess: `image_and_sandbox_rows_of_the_windows_model`
// - Linux-only security fields (rejected with spec.os windows, ignored without):
//   `security_context_row_of_the_windows_model`
// - runAsUserName applied, unknown user fails: `volume_and_user_rows_of_the_windows_model`
// - emptyDir medium Memory (served: a plain directory, see README "The simulated Windows nodes
//   serve subPath mounts") and medium HugePages (refused): `volume_and_user_rows_of_the_windows_model`;
//   hugepages requests: `hugepages_and_file_mount_rows_of_the_windows_model`
// - subPath (served): `volume_and_user_rows_of_the_windows_model`; a single-file mount (served):
//   `hugepages_and_file_mount_rows_of_the_windows_model`
// - read-only volume mount: `volume_and_user_rows_of_the_windows_model`
// - DNS: dotted names fully qualified: `nodeport_on_every_node_and_cluster_dns`; configured
//   through CNI (no resolv.conf) and ClusterFirstWithHostNet: `dns_row_of_the_windows_model`
// - ICMP outside the cluster, /etc/hosts: `network_rows_restarts_and_deletion`
// - stats: `windows_netexec_pod_serves_exec_logs_and_stats` (pod cpu/memory/logs) and
//   `stats_row_of_the_windows_model` (node, pod, container: cpu, memory, fs, logs, network)

/// Creates `p` and returns the API server's error, which must be a 422 Invalid.
async fn create_rejected(c: &Cluster, p: Pod) -> Box<kube::core::Status> {
    match Api::<Pod>::namespaced(c.client.clone(), NS)
        .create(&PostParams::default(), &p)
        .await
    {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 422, "{e:?}");
            e
        }
        other => panic!("pod {:?} was not rejected: {other:?}", p.metadata.name),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn security_context_row_of_the_windows_model() {
    let c = cluster().await;
    let linux_only_fields = |name: &str, os_field: bool| {
        let mut p = pod(name, "win-0", AGNHOST, None, vec!["pause"]);
        let spec = p.spec.as_mut().unwrap();
        if os_field {
            spec.os = Some(serde_json::from_value(serde_json::json!({"name": "windows"})).unwrap());
        }
        spec.security_context = Some(
            serde_json::from_value(serde_json::json!({
                "runAsUser": 1000, "runAsGroup": 3000,
                "seLinuxOptions": {"level": "s0:c123,c456"},
            }))
            .unwrap(),
        );
        spec.containers[0].security_context = Some(
            serde_json::from_value(serde_json::json!({
                "privileged": true, "capabilities": {"add": ["NET_ADMIN"]},
                "readOnlyRootFilesystem": true, "procMount": "Default", "runAsUser": 1000,
            }))
            .unwrap(),
        );
        p
    };
    // With spec.os.name windows the API server refuses each Linux-only field by path.
    let e = create_rejected(&c, linux_only_fields("sc-os", true)).await;
    for field in [
        "securityContext.runAsUser",
        "securityContext.runAsGroup",
        "securityContext.seLinuxOptions",
        "privileged",
        "capabilities",
        "readOnlyRootFilesystem",
        "procMount",
    ] {
        assert!(e.message.contains(field), "{field} not named: {}", e.message);
    }
    assert!(e.message.contains("cannot be set for a windows pod"), "{}", e.message);
    // Without it the pod is admitted and the Windows node ignores the fields: it runs as the
    // image's user, and the root filesystem stays writable.
    create(&c, linux_only_fields("sc-ignored", false)).await;
    wait_pod(&c, "sc-ignored", "Running", running_ready).await;
    let (out, _, code) = exec(&c, "sc-ignored", &["cmd", "/c", "whoami"]).await;
    assert_eq!((out.trim(), code), ("user manager\\containeradministrator", None));
    let (out, err, code) = exec(
        &c,
        "sc-ignored",
        &["cmd", "/c", "echo x> C:\\written.txt && type C:\\written.txt"],
    )
    .await;
    assert_eq!((out.trim(), code), ("x", None), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hugepages_and_file_mount_rows_of_the_windows_model() {
    let c = cluster().await;
    // hugepages: a Windows node advertises none, so its kubelet refuses the pod at admission
    // (hugepages are a native resource, checked against allocatable like cpu and memory).
    let mut huge = pod("huge-win", "win-0", AGNHOST, None, vec!["pause"]);
    huge.spec.as_mut().unwrap().containers[0].resources = Some(
        serde_json::from_value(serde_json::json!({
            "requests": {"memory": "100Mi", "hugepages-2Mi": "100Mi"},
            "limits": {"memory": "100Mi", "hugepages-2Mi": "100Mi"},
        }))
        .unwrap(),
    );
    create(&c, huge).await;
    let p = wait_pod(&c, "huge-win", "rejected", |p| {
        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed")
    })
    .await;
    let status = p.status.unwrap_or_default();
    assert_eq!(
        status.reason.as_deref(),
        Some("OutOfhugepages-2Mi"),
        "{:?}",
        status.message
    );
    assert_eq!(
        status.message.as_deref(),
        Some(
            "Pod was rejected: Node didn't have enough resource: hugepages-2Mi, requested: 104857600, used: 0, capacity: 0"
        )
    );
    // A volume mounted onto a single file (hostPath of type FileOrCreate): containerd maps
    // single files on Windows as on Linux.
    for (name, node, host, at) in [
        ("file-win", "win-1", "C:\\var\\crossconf\\one.txt", "C:\\mnt\\one.txt"),
        ("file-lin", "lin-0", "/var/crossconf/one.txt", "/mnt/one.txt"),
    ] {
        let p = with_volume(
            pod(name, node, AGNHOST, None, vec!["pause"]),
            serde_json::json!({"name": "f", "hostPath": {"path": host, "type": "FileOrCreate"}}),
            serde_json::json!({"name": "f", "mountPath": at}),
        );
        create(&c, p).await;
    }
    wait_pod(&c, "file-win", "Running", running_ready).await;
    wait_pod(&c, "file-lin", "Running", running_ready).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dns_row_of_the_windows_model() {
    let c = cluster().await;
    let dns_ip = c.net.block().dns_service().to_string();
    create(&c, pod("dns-win", "win-0", AGNHOST, None, vec!["pause"])).await;
    create(&c, pod("dns-lin", "lin-0", AGNHOST, None, vec!["pause"])).await;
    wait_pod(&c, "dns-win", "Running", running_ready).await;
    wait_pod(&c, "dns-lin", "Running", running_ready).await;
    // Windows: the DNS servers and suffixes come from the network configuration (what
    // agnhost dns-server-list / dns-suffix read), and there is no /etc/resolv.conf.
    let (out, _, code) = exec(&c, "dns-win", &["/agnhost", "dns-server-list"]).await;
    assert_eq!((out.trim(), code), (dns_ip.as_str(), None));
    let (out, _, _) = exec(&c, "dns-win", &["/agnhost", "dns-suffix"]).await;
    assert!(out.trim().starts_with("default.svc.cluster.local"), "{out}");
    let (out, err, code) = exec(&c, "dns-win", &["cmd", "/c", "type C:\\etc\\resolv.conf"]).await;
    assert!(code.is_some(), "a Windows container has no resolv.conf: {out}{err}");
    // Linux: the kubelet writes /etc/resolv.conf with the same server.
    let (out, _, code) = exec(&c, "dns-lin", &["cat", "/etc/resolv.conf"]).await;
    assert!(code.is_none() && out.contains(&format!("nameserver {dns_ip}")), "{out}");
    // ClusterFirstWithHostNet: the Windows sandbox cannot be set up; Linux accepts it.
    for (name, node) in [("cfhn-win", "win-1"), ("cfhn-lin", "lin-0")] {
        let mut p = pod(name, node, AGNHOST, None, vec!["pause"]);
        p.spec.as_mut().unwrap().dns_policy = Some("ClusterFirstWithHostNet".into());
        create(&c, p).await;
    }
    wait_event(&c, "cfhn-win", "FailedCreatePodSandBox", "ClusterFirstWithHostNet").await;
    wait_pod(&c, "cfhn-lin", "Running", running_ready).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_row_of_the_windows_model() {
    let c = cluster().await;
    create(&c, netexec("stats-win", "win-1")).await;
    let p = wait_pod(&c, "stats-win", "Running", running_ready).await;
    // Some traffic, so the pod's network counters move.
    let (code, body) = http_get(&c, SocketAddr::new(pod_ip(&p).into(), 8080), "/hostname").await;
    assert_eq!((code, body.as_str()), (200, "stats-win"));
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let summary = stats_summary(&c, "win-1").await;
    let positive = |v: &serde_json::Value, path: &str| {
        let n = v.pointer(path).and_then(serde_json::Value::as_u64);
        assert!(n.is_some_and(|n| n > 0), "{path} is {n:?} in {v}");
    };
    let node = &summary["node"];
    assert_eq!(node["nodeName"], "win-1");
    for path in [
        "/cpu/usageNanoCores",
        "/cpu/usageCoreNanoSeconds",
        "/memory/workingSetBytes",
        "/fs/capacityBytes",
        "/fs/availableBytes",
        "/network/rxBytes",
        "/runtime/imageFs/usedBytes",
    ] {
        positive(node, path);
    }
    let pod_stats = summary["pods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["podRef"]["name"] == "stats-win" && p["podRef"]["namespace"] == NS)
        .expect("the pod in the summary");
    for path in [
        "/cpu/usageCoreNanoSeconds",
        "/memory/workingSetBytes",
        "/network/rxBytes",
        "/network/txBytes",
    ] {
        positive(pod_stats, path);
    }
    let container = &pod_stats["containers"][0];
    assert_eq!(container["name"], "c");
    for path in [
        "/cpu/usageCoreNanoSeconds",
        "/memory/workingSetBytes",
        "/rootfs/usedBytes",
        "/rootfs/capacityBytes",
        "/logs/availableBytes",
        "/logs/usedBytes",
    ] {
        positive(container, path);
    }
}
