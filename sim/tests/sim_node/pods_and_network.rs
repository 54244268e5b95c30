//! Nodes register, pods run and serve exec, logs and stats, and pods reach each other, NodePorts
//! and the cluster DNS over the simulated network.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_register_ready_with_os_labels() {
    let c = cluster().await;
    let api = Api::<Node>::all(c.client.clone());
    for n in &c.nodes {
        let cond = |node: Option<&Node>| {
            node.and_then(|n| {
                n.status
                    .as_ref()?
                    .conditions
                    .as_ref()?
                    .iter()
                    .find(|c| c.type_ == "Ready")
                    .map(|c| c.status == "True")
            })
            .unwrap_or(false)
        };
        tokio::time::timeout(Duration::from_secs(10), await_condition(api.clone(), n.name(), cond))
            .await
            .expect("ready")
            .expect("watch");
    }
    let win = api.get("win-0").await.unwrap();
    let labels = win.metadata.labels.clone().unwrap();
    assert_eq!(labels["kubernetes.io/os"], "windows");
    assert_eq!(labels["node.kubernetes.io/windows-build"], "10.0.20348");
    let info = win.status.as_ref().unwrap().node_info.clone().unwrap();
    assert_eq!(info.os_image, "Windows Server 2022 Datacenter");
    assert!(info.container_runtime_version.starts_with("containerd://"));
    assert!(!info.boot_id.is_empty());
    let ip = &win.status.as_ref().unwrap().addresses.as_ref().unwrap()[0];
    assert_eq!(
        (ip.type_.as_str(), ip.address.parse::<Ipv4Addr>().unwrap()),
        ("InternalIP", c.nodes[0].ip())
    );
    let lin = api.get("lin-0").await.unwrap();
    assert_eq!(lin.metadata.labels.unwrap()["kubernetes.io/os"], "linux");
    let lease: k8s_openapi::api::coordination::v1::Lease = Api::namespaced(c.client.clone(), "kube-node-lease")
        .get("win-1")
        .await
        .expect("lease");
    assert_eq!(lease.spec.unwrap().holder_identity.as_deref(), Some("win-1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn windows_netexec_pod_serves_exec_logs_and_stats() {
    let c = cluster().await;
    let started = std::time::Instant::now();
    create(&c, netexec("web", "win-0")).await;
    let p = wait_pod(&c, "web", "Running and Ready", running_ready).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "fast profile: Running within 5 s, took {:?}",
        started.elapsed()
    );
    let ip = pod_ip(&p);
    assert!(ip.is_loopback() && c.net.block().pod_node_index(ip) == Some(0), "{ip}");
    let cs = &p.status.as_ref().unwrap().container_statuses.as_ref().unwrap()[0];
    assert!(cs.container_id.as_deref().unwrap().starts_with("containerd://"));
    assert!(cs.image_id.contains("@sha256:"));
    assert_eq!(
        http_get(&c, SocketAddr::new(ip.into(), 8080), "/hostname").await,
        (200, "web".to_string())
    );
    assert_eq!(udp(&c, SocketAddr::new(ip.into(), 8081), "hostname").await, "web");
    let (out, _, code) = exec(&c, "web", &["cmd", "/c", "echo", "hi"]).await;
    assert_eq!((out.trim(), code), ("hi", None));
    let (_, _, code) = exec(&c, "web", &["cmd", "/c", "exit 3"]).await;
    assert_eq!(code.as_deref(), Some("3"));
    let logs = Api::<Pod>::namespaced(c.client.clone(), NS)
        .logs("web", &LogParams::default())
        .await
        .expect("logs");
    assert!(logs.contains("Started HTTP server on port 8080"), "{logs}");
    // The kube-dns Service points at the cluster DNS.
    let dns = Api::<Service>::namespaced(c.client.clone(), "kube-system")
        .get("kube-dns")
        .await
        .expect("kube-dns");
    assert_eq!(
        dns.spec.unwrap().cluster_ip.unwrap(),
        c.net.block().dns_service().to_string()
    );
    // Stats through the API server's node proxy, as the Kubelet-Stats case reads them.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let summary = stats_summary(&c, "win-0").await;
    let pods = summary["pods"].as_array().expect("pods");
    let web = pods
        .iter()
        .find(|p| p["podRef"]["name"] == "web")
        .expect("web in summary");
    assert!(web["cpu"]["usageCoreNanoSeconds"].as_u64().unwrap() > 0, "{web}");
    assert!(web["memory"]["workingSetBytes"].as_u64().unwrap() > 0, "{web}");
    assert!(
        web["containers"][0]["logs"]["availableBytes"].as_u64().unwrap() > 0,
        "{web}"
    );
    assert!(summary["node"]["cpu"]["usageNanoCores"].as_u64().unwrap() > 0);
    // Following the log streams what the container writes later.
    let follow = LogParams {
        follow: true,
        ..LogParams::default()
    };
    let mut lines = Api::<Pod>::namespaced(c.client.clone(), NS)
        .log_stream("web", &follow)
        .await
        .expect("log stream")
        .lines();
    use futures::{AsyncBufReadExt, TryStreamExt};
    let first = tokio::time::timeout(Duration::from_secs(5), lines.try_next())
        .await
        .expect("a line in time")
        .expect("read");
    assert!(first.is_some_and(|l| l.contains("Started")));
    http_get(&c, SocketAddr::new(ip.into(), 8080), "/exit?code=0").await;
    let rest: Vec<String> = tokio::time::timeout(Duration::from_secs(10), lines.try_collect())
        .await
        .expect("stream ends with the container")
        .expect("read");
    assert!(rest.iter().any(|l| l.contains("GET /exit?code=0")), "{rest:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn linux_exec_and_pod_to_pod_dial_over_http_and_udp() {
    let c = cluster().await;
    create(&c, netexec("client", "lin-0")).await;
    create(&c, netexec("server", "win-1")).await;
    let client = wait_pod(&c, "client", "Running", running_ready).await;
    let server = wait_pod(&c, "server", "Running", running_ready).await;
    let (out, _, code) = exec(&c, "client", &["sh", "-c", "echo hi"]).await;
    assert_eq!((out.as_str(), code), ("hi\n", None));
    let (cip, sip) = (pod_ip(&client), pod_ip(&server));
    for proto in ["http", "udp"] {
        let port = if proto == "http" { 8080 } else { 8081 };
        let path = format!("/dial?request=hostname&protocol={proto}&host={sip}&port={port}&tries=1");
        let (status, body) = http_get(&c, SocketAddr::new(cip.into(), 8080), &path).await;
        assert_eq!((status, body.as_str()), (200, r#"{"responses":["server"]}"#), "{proto}");
    }
    // /clientip shows the dialling pod's own address.
    let (_, body) = http_get(
        &c,
        SocketAddr::new(cip.into(), 8080),
        &format!("/dial?request=clientip&protocol=http&host={sip}&port=8080&tries=1"),
    )
    .await;
    assert!(body.contains(&cip.to_string()), "{body}");
    // A hostNetwork pod has its node's IP and serves on the node's address.
    let mut hostnet = netexec("hostnet", "lin-0");
    hostnet.spec.as_mut().unwrap().host_network = Some(true);
    create(&c, hostnet).await;
    let hostnet = wait_pod(&c, "hostnet", "Running", running_ready).await;
    let status = hostnet.status.clone().unwrap_or_default();
    assert_eq!(status.pod_ip, status.host_ip, "a hostNetwork pod's IP is its node's");
    let (code, body) = http_get(&c, SocketAddr::new(pod_ip(&hostnet).into(), 8080), "/hostname").await;
    assert_eq!((code, body.as_str()), (200, "hostnet"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodeport_on_every_node_and_cluster_dns() {
    let c = cluster().await;
    create(&c, netexec("backend", "win-0")).await;
    wait_pod(&c, "backend", "Running", running_ready).await;
    let svc: Service = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web-np", "namespace": NS},
        "spec": {"type": "NodePort", "selector": {"app": "backend"},
                 "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"},
                           {"name": "udp", "port": 90, "targetPort": 8081, "protocol": "UDP"}]},
    }))
    .unwrap();
    let svc = Api::<Service>::namespaced(c.client.clone(), NS)
        .create(&PostParams::default(), &svc)
        .await
        .expect("service");
    let spec = svc.spec.unwrap();
    let node_port = spec.ports.as_ref().unwrap()[0].node_port.expect("node port") as u16;
    let udp_port = spec.ports.as_ref().unwrap()[1].node_port.expect("node port") as u16;
    let cluster_ip: Ipv4Addr = spec.cluster_ip.unwrap().parse().unwrap();
    let mut ok = false;
    for _ in 0..300 {
        let r = try_hostname(&c, SocketAddr::new(cluster_ip.into(), 80)).await;
        if r.is_ok_and(|r| &r.body[..] == b"backend") {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if !ok {
        let slices = Api::<k8s_openapi::api::discovery::v1::EndpointSlice>::namespaced(c.client.clone(), NS)
            .list(&ListParams::default())
            .await
            .map(|l| serde_json::to_string(&l.items).unwrap_or_default());
        panic!("ClusterIP {cluster_ip}:80 never answered; endpoint slices: {slices:?}");
    }
    for n in &c.nodes {
        assert_eq!(
            http_get(&c, SocketAddr::new(n.ip().into(), node_port), "/hostname").await,
            (200, "backend".to_string()),
            "node {}",
            n.name()
        );
        assert_eq!(
            udp(&c, SocketAddr::new(n.ip().into(), udp_port), "hostname").await,
            "backend",
            "udp on node {}",
            n.name()
        );
    }
    // kube-proxy off on one node: its NodePort stops answering, the others still do.
    c.faults.set_kube_proxy_off("win-1", true);
    let broken = try_hostname(&c, SocketAddr::new(c.nodes[1].ip().into(), node_port)).await;
    assert!(broken.is_err(), "NodePort answered with kube-proxy off");
    c.faults.set_kube_proxy_off("win-1", false);
    // The cluster DNS answers the service name over UDP.
    let m = ask_cluster_dns(&c, "web-np.default.svc.cluster.local.").await;
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    let ips: Vec<Ipv4Addr> = m
        .answers
        .iter()
        .filter_map(|r| if let RData::A(a) = &r.data { Some(a.0) } else { None })
        .collect();
    assert_eq!(ips, [cluster_ip]);
    assert_eq!(c.net.cluster_dns().ip(), IpAddr::V4(c.net.block().dns_service()));
    let m = ask_cluster_dns(&c, "nope.default.svc.cluster.local.").await;
    assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);
    // From a pod: the short name resolves through the search list on Windows, the dotted
    // `svc.ns` form does not (Windows treats dotted names as fully qualified); Linux expands it.
    create(&c, pod("lin-dns", "lin-0", AGNHOST, None, vec!["pause"])).await;
    wait_pod(&c, "lin-dns", "Running", running_ready).await;
    let (out, _, code) = exec(&c, "backend", &["cmd", "/c", "nslookup web-np"]).await;
    assert!(code.is_none() && out.contains(&cluster_ip.to_string()), "{out}");
    let (_, err, code) = exec(&c, "backend", &["cmd", "/c", "nslookup web-np.default"]).await;
    assert!(code.is_some() && err.contains("Non-existent domain"), "{err}");
    let (out, _, code) = exec(&c, "lin-dns", &["nslookup", "web-np.default"]).await;
    assert!(code.is_none() && out.contains(&cluster_ip.to_string()), "{out}");
}
