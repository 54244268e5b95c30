//! The cluster add-ons run on the nodes of their OS, and the catalogue's DNS tools image resolves
//! names on both OSes.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_addons_run_on_the_nodes_of_their_os() {
    let c = cluster().await;
    let ds = Api::<k8s_openapi::api::apps::v1::DaemonSet>::namespaced(c.client.clone(), "kube-system");
    // Each add-on DaemonSet has a ready pod on every node of its OS, and only there.
    for (name, os, nodes) in [
        ("kube-proxy", "linux", 1),
        ("kube-flannel-ds", "linux", 1),
        ("kube-proxy-windows", "windows", 2),
        ("kube-flannel-ds-windows-amd64", "windows", 2),
    ] {
        let ready = |d: Option<&k8s_openapi::api::apps::v1::DaemonSet>| {
            d.and_then(|d| d.status.as_ref())
                .is_some_and(|s| s.desired_number_scheduled == nodes && s.number_ready == nodes)
        };
        tokio::time::timeout(Duration::from_secs(30), await_condition(ds.clone(), name, ready))
            .await
            .unwrap_or_else(|_| panic!("{name}: not {nodes} ready pods in 30s"))
            .expect("watch");
        let pods = Api::<Pod>::namespaced(c.client.clone(), "kube-system")
            .list(&ListParams::default())
            .await
            .unwrap();
        let placed: Vec<String> = pods
            .items
            .iter()
            .filter(|p| p.metadata.owner_references.iter().flatten().any(|o| o.name == name))
            .map(|p| p.spec.as_ref().unwrap().node_name.clone().unwrap_or_default())
            .collect();
        let prefix = if os == "windows" { "win-" } else { "lin-" };
        assert!(
            placed.len() == nodes as usize && placed.iter().all(|n| n.starts_with(prefix)),
            "{name} placed on {placed:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catalogue_dns_tools_image_resolves_names_on_both_oses() {
    let c = cluster().await;
    let catalog = crossconf_model::images::ImageCatalog::load_default();
    for (name, node, os, build) in [
        ("dnsutils-win", "win-0", Os::Windows, Some("10.0.20348")),
        ("dnsutils-lin", "lin-0", Os::Linux, None),
    ] {
        let image = catalog.resolve("jessie-dnsutils", os, build).unwrap().reference;
        let command = match os {
            Os::Windows => vec!["cmd", "/c", "ping -t localhost"],
            Os::Linux => vec!["sleep", "3600"],
        };
        create(&c, pod(name, node, &image, Some(command), vec![])).await;
        wait_pod(&c, name, "Running", running_ready).await;
        let (out, err, code) = exec(&c, name, &["nslookup", "kubernetes.default.svc.cluster.local"]).await;
        assert!(code.is_none(), "{name}: {out}{err}");
        assert!(out.contains("kubernetes.default.svc.cluster.local"), "{name}: {out}");
    }
}
