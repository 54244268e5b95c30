//! A stopped simulated cluster lets go of its pods' addresses: no pod program outlives the
//! cluster (a container with `restartPolicy: Always` is not restarted by a stopping node, and a
//! long grace period does not keep it running), so a later cluster of the same process, or any
//! other program, can listen on those addresses at once.

#![expect(
    clippy::disallowed_methods,
    reason = "polls a loopback port after shutdown, with a bounded number of short pauses"
)]

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::time::{Duration, Instant};

use crossconf_sim::{SimCluster, SimConfig};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use kube::runtime::wait::{await_condition, conditions};

fn netexec(name: &str, os: &str) -> Pod {
    let image = "registry.k8s.io/e2e-test-images/agnhost:2.53";
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeSelector": {"kubernetes.io/os": os},
            "terminationGracePeriodSeconds": 600,
            "containers": [{"name": "c", "image": image, "args": ["netexec", "--http-port=8080", "--udp-port=8081"]}],
        },
    }))
    .expect("pod json")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_cluster_frees_its_pod_addresses() {
    crossconf_sim::install_crypto_provider();
    let sim = SimCluster::start(SimConfig::default())
        .await
        .expect("the simulator starts");
    let client = kube::Client::try_from(sim.kube_config()).expect("client");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let mut ips = Vec::new();
    for (name, os) in [("hold-win", "windows"), ("hold-lin", "linux")] {
        pods.create(&PostParams::default(), &netexec(name, os))
            .await
            .expect("create");
        let running = tokio::time::timeout(
            Duration::from_secs(60),
            await_condition(pods.clone(), name, conditions::is_pod_running()),
        )
        .await
        .expect("the pod runs within 60 s")
        .expect("watch")
        .expect("the pod exists");
        let ip: Ipv4Addr = running
            .status
            .and_then(|s| s.pod_ip)
            .expect("a pod IP")
            .parse()
            .expect("an IPv4 pod IP");
        ips.push(SocketAddr::new(ip.into(), 8080));
    }
    for addr in &ips {
        assert!(
            std::net::TcpStream::connect_timeout(addr, Duration::from_secs(2)).is_ok(),
            "netexec serves on {addr} while the cluster runs"
        );
    }
    let stopped = Instant::now();
    sim.shutdown().await;
    // The pods asked for a 600 s grace period; a stopping node must not honour it.
    for addr in &ips {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match TcpListener::bind(addr) {
                Ok(_) => break,
                Err(e) if Instant::now() > deadline => panic!(
                    "{addr} is still taken {:?} after the cluster stopped: {e}",
                    stopped.elapsed()
                ),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }
}
