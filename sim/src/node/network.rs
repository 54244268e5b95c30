//! Starting one cluster's network: cluster DNS on the DNS Service IP, the node-level resolver,
//! the outside host and kube-proxy. The main function is [`start_network`].
//!
//! The add-ons a real cluster shows for these (the `kube-dns` Service, the kube-proxy and
//! flannel DaemonSets in `kube-system`) are registered here too, so tools that inspect a
//! cluster (`crossconf doctor`, `kubectl get ds -n kube-system`) see what they see on a kubeadm
//! cluster with Windows nodes joined as the sig-windows-tools guide does.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::addr::AddressBlock;
use crate::node::dns::{self, ClusterZone, DnsError, UpstreamZone};
use crate::node::net::{Faults, SimNet};
use crate::node::outside::{self, OutsideError};
use crate::node::proxy::{self, ProxyStores};

/// Errors starting the network.
#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    /// A DNS server could not start.
    #[error("start dns server")]
    Dns(#[source] DnsError),
    /// The outside host could not start.
    #[error("start outside host")]
    Outside(#[source] OutsideError),
    /// The simulated domain controller could not start.
    #[error("start the simulated domain controller")]
    Domain(#[source] crate::node::ad::DomainError),
    /// The `kube-system/kube-dns` Service could not be registered.
    #[error("register the kube-dns service")]
    DnsService(#[source] kube::Error),
    /// A kube-proxy or CNI DaemonSet could not be registered.
    #[error("register the {name} DaemonSet")]
    AddonDaemonSet {
        /// The DaemonSet.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

/// Registers `kube-system/kube-dns` at the DNS Service IP, as the DNS add-on's manifest does, so
/// cases that read the cluster DNS address from it find the server this module runs.
async fn ensure_dns_service(client: &Client, block: AddressBlock) -> Result<(), NetworkError> {
    let api: Api<Service> = Api::namespaced(client.clone(), "kube-system");
    let svc: Service = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kube-dns", "namespace": "kube-system",
                     "labels": {"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS"}},
        "spec": {"clusterIP": block.dns_service().to_string(), "selector": {"k8s-app": "kube-dns"},
                 "ports": [{"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53},
                           {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53}]},
    }))
    .expect("the kube-dns service literal is valid");
    match api.create(&kube::api::PostParams::default(), &svc).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(NetworkError::DnsService(e)),
    }
}

/// The kube-proxy release the add-on images carry: the simulated kubelets' version, as
/// kubeadm deploys the kube-proxy of the cluster's version.
const KUBE_PROXY_TAG: &str = crate::node::kubelet::KUBELET_VERSION;
/// The flannel release of the CNI add-on images.
const FLANNEL_TAG: &str = "v0.26.7";

/// The kube-proxy and pod-network (flannel) DaemonSets of a kubeadm cluster with Windows nodes:
/// `kube-proxy` and `kube-flannel-ds` for Linux nodes, `kube-proxy-windows` and
/// `kube-flannel-ds-windows-amd64` (the names the sig-windows-tools guide creates) for Windows.
///
/// Why they exist: the simulator's kube-proxy and pod network run in-process, but a real
/// cluster shows them as pods on every node, and `crossconf doctor` looks for them there. Their
/// pods idle (the images' `kube-proxy`/`flanneld` are emulated as daemons that wait).
///
/// The Windows ones are modelled on the pre-HostProcess (wins-based) manifests, as ordinary
/// pods: today's guide runs them as HostProcess pods, which the simulated Windows runtime does
/// not offer. They carry no resource requests on Windows and flannel's small ones on Linux, as
/// the upstream manifests do, and tolerate every taint, as node agents must.
fn addon_daemonsets() -> Vec<serde_json::Value> {
    let node_name_env = serde_json::json!([
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
    ]);
    let ds = |name: &str, app: (&str, &str), os: &str, container: serde_json::Value| {
        let mut spec = serde_json::json!({
            "containers": [container],
            "tolerations": [{"operator": "Exists"}],
            "terminationGracePeriodSeconds": 30,
        });
        if os == "linux" {
            spec["hostNetwork"] = serde_json::json!(true);
        }
        // kube-proxy selects its OS with a nodeSelector; flannel with a required node affinity.
        if name.contains("flannel") {
            spec["affinity"] = serde_json::json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": crossconf_model::os::OS_LABEL, "operator": "In", "values": [os]}]}]}}});
        } else {
            spec["nodeSelector"] = serde_json::json!({crossconf_model::os::OS_LABEL: os});
        }
        serde_json::json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": "kube-system", "labels": {app.0: app.1}},
            "spec": {
                "selector": {"matchLabels": {app.0: app.1}},
                "updateStrategy": {"type": "RollingUpdate"},
                "template": {"metadata": {"labels": {app.0: app.1}}, "spec": spec},
            },
        })
    };
    vec![
        ds(
            "kube-proxy",
            ("k8s-app", "kube-proxy"),
            "linux",
            serde_json::json!({
                "name": "kube-proxy",
                "image": format!("registry.k8s.io/kube-proxy:{KUBE_PROXY_TAG}"),
                "command": ["/usr/local/bin/kube-proxy", "--config=/var/lib/kube-proxy/config.conf",
                            "--hostname-override=$(NODE_NAME)"],
                "env": node_name_env,
            }),
        ),
        ds(
            "kube-proxy-windows",
            ("k8s-app", "kube-proxy-windows"),
            "windows",
            serde_json::json!({
                "name": "kube-proxy",
                "image": format!("docker.io/sigwindowstools/kube-proxy:{KUBE_PROXY_TAG}-nanoserver"),
                "command": ["c:\\k\\kube-proxy\\kube-proxy.exe", "--hostname-override=$(NODE_NAME)",
                            "--proxy-mode=kernelspace"],
                "env": node_name_env,
            }),
        ),
        ds(
            "kube-flannel-ds",
            ("app", "flannel"),
            "linux",
            serde_json::json!({
                "name": "kube-flannel",
                "image": format!("docker.io/flannel/flannel:{FLANNEL_TAG}"),
                "command": ["/opt/bin/flanneld"],
                "args": ["--ip-masq", "--kube-subnet-mgr"],
                "resources": {"requests": {"cpu": "100m", "memory": "50Mi"}},
                "env": node_name_env,
            }),
        ),
        ds(
            "kube-flannel-ds-windows-amd64",
            ("app", "flannel-windows"),
            "windows",
            serde_json::json!({
                "name": "kube-flannel",
                "image": format!("docker.io/sigwindowstools/flannel:{FLANNEL_TAG}-nanoserver"),
                "command": ["c:\\k\\flannel\\flanneld.exe"],
                "args": ["--kube-subnet-mgr"],
                "env": node_name_env,
            }),
        ),
    ]
}

/// Registers the kube-proxy and flannel DaemonSets ([`addon_daemonsets`]); existing ones are
/// kept (a second simulator run against the same API server, or an edited one).
async fn ensure_addons(client: &Client) -> Result<(), NetworkError> {
    let api: Api<DaemonSet> = Api::namespaced(client.clone(), "kube-system");
    for value in addon_daemonsets() {
        let ds: DaemonSet = serde_json::from_value(value).expect("the add-on DaemonSet literals are valid");
        let name = ds.metadata.name.clone().unwrap_or_default();
        match api.create(&kube::api::PostParams::default(), &ds).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(source) => return Err(NetworkError::AddonDaemonSet { name, source }),
        }
    }
    Ok(())
}

/// A reflector store of every `K`, kept until `cancel`; `changed` is notified on each event.
pub(crate) fn reflect<K>(client: &Client, cancel: &CancellationToken, changed: Option<Arc<Notify>>) -> Store<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    let (store, writer) = reflector::store();
    let stream = reflector::reflector(
        writer,
        watcher(Api::<K>::all(client.clone()), watcher::Config::default()).default_backoff(),
    )
    .applied_objects();
    let cancel = cancel.clone();
    tokio::spawn(async move {
        let mut s = stream.boxed();
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                n = s.next() => match n {
                    None => return,
                    Some(_) => if let Some(c) = &changed { c.notify_one(); },
                },
            }
        }
    });
    store
}

/// Starts kube-proxy, the cluster DNS (on `block.dns_service():53`), the node-level resolver
/// (on `block.node_resolver():53`) and the outside host, all until `cancel`, and registers
/// their add-on objects (the `kube-dns` Service, the kube-proxy and flannel DaemonSets).
pub async fn start_network(
    client: Client,
    block: AddressBlock,
    faults: Arc<Faults>,
    cancel: CancellationToken,
) -> Result<SimNet, NetworkError> {
    start_network_with(client, block, faults, None, cancel).await
}

/// [`start_network`] for a cluster that runs the simulated Active Directory `domain`: its
/// controller starts with the network and the upstream DNS answers the domain's names.
pub async fn start_network_with(
    client: Client,
    block: AddressBlock,
    faults: Arc<Faults>,
    domain: Option<Arc<crate::node::ad::Domain>>,
    cancel: CancellationToken,
) -> Result<SimNet, NetworkError> {
    let upstream = if domain.is_some() {
        UpstreamZone::with_domain(block)
    } else {
        UpstreamZone::new(block)
    };
    if let Some(d) = &domain {
        d.start(cancel.clone()).await.map_err(NetworkError::Domain)?;
    }
    let changed = Arc::new(Notify::new());
    let services: Store<Service> = reflect(&client, &cancel, Some(changed.clone()));
    let slices: Store<EndpointSlice> = reflect(&client, &cancel, Some(changed.clone()));
    let pods: Store<Pod> = reflect(&client, &cancel, None);
    let nodes: Store<Node> = reflect(&client, &cancel, Some(changed.clone()));
    let zone = ClusterZone {
        services: services.clone(),
        slices: slices.clone(),
        pods,
        upstream,
    };
    let cluster = dns::serve(
        block.dns_service(),
        Arc::new(zone),
        faults.clone(),
        true,
        cancel.clone(),
    )
    .await
    .map_err(NetworkError::Dns)?;
    let resolver = dns::serve(
        block.node_resolver(),
        Arc::new(upstream),
        faults.clone(),
        false,
        cancel.clone(),
    )
    .await
    .map_err(NetworkError::Dns)?;
    outside::start(block, cancel.clone())
        .await
        .map_err(NetworkError::Outside)?;
    ensure_dns_service(&client, block).await?;
    ensure_addons(&client).await?;
    let net = SimNet::with_domain(block, faults, cluster.addr, resolver.addr, domain);
    proxy::announce(&net);
    tokio::spawn(proxy::run(
        net.clone(),
        ProxyStores {
            services,
            slices,
            nodes,
        },
        changed,
        cancel,
    ));
    Ok(net)
}
