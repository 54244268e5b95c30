//! One simulated cluster: API server, control plane, network and nodes, started together.
//!
//! The main type is [`SimCluster`]; [`SimConfig`] is its documented configuration, built from
//! the CLI flags by [`SimConfig::from_options`].

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::addr::{self, AddressBlock};
use super::api::{ApiConfig, ApiServer};
use super::control::{self, ControlConfig, ControlPlane};
use super::node::{self, Faults, LatencyProfile, NodeConfig, NodeHandle, SimNet};

/// Errors starting a simulated cluster.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A flag value is out of range.
    #[error("invalid simulator option: {0}")]
    InvalidOption(String),
    /// The latency profile could not be loaded.
    #[error("invalid simulator profile {0:?}")]
    Profile(String),
    /// Every address block in 127.16.0.0 – 127.239.0.0 is taken by other simulated clusters.
    #[error("no free address block for a simulated cluster (127.{first}.0.0/16 to 127.{last}.0.0/16 all in use)")]
    NoFreeBlock {
        /// The first block tried.
        first: u8,
        /// The last block tried.
        last: u8,
    },
    /// The API server did not start.
    #[error("starting the simulated API server")]
    Api(#[source] super::api::Error),
    /// A client for the simulated API server could not be built.
    #[error("building a client for the simulated API server")]
    Client(#[source] kube::Error),
    /// The control plane did not start.
    #[error("starting the simulated scheduler and controllers")]
    Control(#[source] super::control::Error),
    /// The fault specification does not parse.
    #[error("invalid --faults")]
    Faults(#[source] super::node::FaultSpecError),
    /// Kube-proxy, the cluster DNS or the outside host did not start.
    #[error("starting the simulated network")]
    Network(#[source] super::node::NetworkError),
    /// A node did not start.
    #[error("starting simulated node {name}")]
    Node {
        /// The node.
        name: String,
        /// Why.
        #[source]
        source: super::node::KubeletError,
    },
    /// The nodes did not become Ready in time.
    #[error("simulated nodes not Ready after {0:?}")]
    NodesNotReady(Duration),
    /// An object the cluster is set up with could not be created.
    #[error("creating {what} in the simulated cluster")]
    Bootstrap {
        /// The object.
        what: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The per-cluster working directory could not be created.
    #[error("creating the simulator's working directory")]
    WorkDir(#[source] std::io::Error),
}

/// How to build the simulated cluster.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Windows nodes (default 2).
    pub windows_nodes: usize,
    /// Linux nodes (default 1).
    pub linux_nodes: usize,
    /// Windows build of the Windows nodes (default 10.0.20348).
    pub windows_build: String,
    /// `key=value:Effect` taint for Windows nodes.
    pub windows_taint: Option<(String, String, String)>,
    /// `fast`, `realistic` or a YAML file.
    pub profile: String,
    /// Multiplies every simulated delay.
    pub time_scale: f64,
    /// Fault switches as written on the command line.
    pub faults: Option<String>,
    /// How long starting may take before it counts as failed.
    pub start_timeout: Duration,
    /// How long the node lifecycle controller lets a node go without renewing its Lease or
    /// posting status before it marks the node Unknown: upstream's default
    /// ([`control::DEFAULT_NODE_MONITOR_GRACE_PERIOD`], 50 s in 1.33). Only tests shorten it,
    /// to see a `node-lost` node go Unknown within a short test.
    pub node_monitor_grace_period: Duration,
    /// The control plane's feature gates (`--feature-gates`; alpha gates off by default).
    pub gates: crate::gates::FeatureGates,
    /// The containerd version of each Windows node in order (`--windows-containerd`); the
    /// last one given also runs on the nodes after it. Default: every node 1.7.27.
    pub windows_containerd: Vec<String>,
    /// Whether the cluster runs a simulated Active Directory domain with a gMSA account, an
    /// SMB share and a Windows node set up for them (`--gmsa-domain`; see [`crate::node::ad`]).
    pub gmsa_domain: bool,
    /// Whether the Windows nodes' containerd has the `runhcs-wcow-hypervisor` handler and the
    /// cluster the RuntimeClass of that name (`--hyperv`; see [`crate::node::kubelet::hyperv`]).
    pub hyperv: bool,
}

impl SimConfig {
    /// Validates the CLI's simulator flags.
    ///
    /// # Errors
    /// [`Error::InvalidOption`] naming the flag.
    pub fn from_options(
        windows_nodes: usize,
        linux_nodes: usize,
        windows_build: &str,
        windows_taint: Option<&str>,
        profile: &str,
        time_scale: f64,
        faults: Option<&str>,
    ) -> Result<SimConfig, Error> {
        if windows_nodes + linux_nodes == 0 {
            return Err(Error::InvalidOption("the cluster needs at least one node".into()));
        }
        if windows_nodes + linux_nodes > addr::MAX_NODES {
            return Err(Error::InvalidOption(format!("at most {} nodes", addr::MAX_NODES)));
        }
        if crossconf_model::os::windows_build_prefix(windows_build).as_deref() != Some(windows_build) {
            return Err(Error::InvalidOption(format!(
                "--windows-build {windows_build:?} is not a build like 10.0.20348"
            )));
        }
        if !(time_scale.is_finite() && time_scale > 0.0) {
            return Err(Error::InvalidOption(format!(
                "--time-scale {time_scale} must be a positive number"
            )));
        }
        let taint = windows_taint.map(parse_taint).transpose()?;
        load_profile(profile, time_scale)?;
        if let Some(spec) = faults {
            let parsed = Faults::parse(spec).map_err(|e| Error::InvalidOption(format!("--faults {spec:?}: {e}")))?;
            check_fault_nodes(&parsed, &node_specs(windows_nodes, linux_nodes))?;
        }
        Ok(SimConfig {
            windows_nodes,
            linux_nodes,
            windows_build: windows_build.into(),
            windows_taint: taint,
            profile: profile.into(),
            time_scale,
            faults: faults.map(str::to_string),
            start_timeout: Duration::from_secs(30),
            node_monitor_grace_period: control::DEFAULT_NODE_MONITOR_GRACE_PERIOD,
            gates: crate::gates::FeatureGates::default(),
            windows_containerd: vec![crate::node::kubelet::DEFAULT_CONTAINERD.to_string()],
            gmsa_domain: false,
            hyperv: false,
        })
    }

    /// Sets the Windows nodes' containerd versions from `--windows-containerd`
    /// (`1.7.27,1.6.28`: win-1 runs 1.7.27, win-2 and any later node 1.6.28). Versions before
    /// 1.6 are refused: they have no HostProcess containers, which the fault
    /// `hostprocess-unsupported` models instead.
    ///
    /// # Errors
    /// [`Error::InvalidOption`] naming the malformed or unsupported version.
    pub fn with_windows_containerd(mut self, spec: &str) -> Result<SimConfig, Error> {
        let versions: Vec<String> = spec.split(',').map(|v| v.trim().to_string()).collect();
        for v in &versions {
            let parts: Vec<Option<u32>> = v.split('.').map(|p| p.parse().ok()).collect();
            let ok = match parts.as_slice() {
                [Some(major), Some(minor), Some(_)] => (*major, *minor) >= (1, 6),
                _ => false,
            };
            if !ok {
                return Err(Error::InvalidOption(format!(
                    "--windows-containerd {spec:?}: {v:?} is not a containerd version 1.6.0 or later like 1.7.27"
                )));
            }
        }
        self.windows_containerd = versions;
        Ok(self)
    }

    /// Runs the simulated Active Directory domain of upstream's `GMSA Full` cases
    /// (`--gmsa-domain`): its controller, gMSA account and share, and the first Windows node
    /// labelled `agentpool=windowsgmsa` with the account's credential spec manifest.
    ///
    /// # Errors
    /// [`Error::InvalidOption`] when the cluster has no Windows node to set up.
    pub fn with_gmsa_domain(mut self, on: bool) -> Result<SimConfig, Error> {
        if on && self.windows_nodes == 0 {
            return Err(Error::InvalidOption(
                "--gmsa-domain needs a Windows node to join to the domain (--windows-nodes 0)".into(),
            ));
        }
        self.gmsa_domain = on;
        Ok(self)
    }

    /// Gives the Windows nodes' containerd the Hyper-V handler `runhcs-wcow-hypervisor` and
    /// creates RuntimeClass `runhcs-wcow-hypervisor` for it (`--hyperv`), as a cluster set up
    /// for upstream's `[Feature:WindowsHyperVContainers]` job is; without it that case skips.
    ///
    /// # Errors
    /// [`Error::InvalidOption`] when the cluster has no Windows node.
    pub fn with_hyperv(mut self, on: bool) -> Result<SimConfig, Error> {
        if on && self.windows_nodes == 0 {
            return Err(Error::InvalidOption(
                "--hyperv needs a Windows node to run Hyper-V isolated pods (--windows-nodes 0)".into(),
            ));
        }
        self.hyperv = on;
        Ok(self)
    }

    /// The containerd version of the Windows node at `index` among the Windows nodes.
    fn windows_containerd_of(&self, index: usize) -> String {
        self.windows_containerd
            .get(index)
            .or(self.windows_containerd.last())
            .cloned()
            .unwrap_or_else(|| crate::node::kubelet::DEFAULT_CONTAINERD.to_string())
    }

    /// Sets the feature gates from `--feature-gates` (`Name=true,...`).
    ///
    /// # Errors
    /// [`Error::InvalidOption`] naming the malformed or unknown gate.
    pub fn with_feature_gates(mut self, spec: &str) -> Result<SimConfig, Error> {
        self.gates = crate::gates::FeatureGates::parse(spec)
            .map_err(|e| Error::InvalidOption(format!("--feature-gates {spec:?}: {e}")))?;
        Ok(self)
    }
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig::from_options(2, 1, "10.0.20348", None, "fast", 1.0, None).expect("defaults are valid")
    }
}

/// The cluster's nodes, in address-plan order: `win-1`… then `linux-1`….
fn node_specs(windows: usize, linux: usize) -> Vec<(String, crossconf_model::os::Os)> {
    (0..windows)
        .map(|i| (format!("win-{}", i + 1), crossconf_model::os::Os::Windows))
        .chain((0..linux).map(|i| (format!("linux-{}", i + 1), crossconf_model::os::Os::Linux)))
        .collect()
}

/// Refuses a `node-flap`, `node-lost` or `node-tainted` switch naming a node the cluster does not have (the
/// switch would silently do nothing).
fn check_fault_nodes(faults: &Faults, nodes: &[(String, crossconf_model::os::Os)]) -> Result<(), Error> {
    for switch in ["node-flap", "node-lost"] {
        for value in faults.values(switch) {
            let Some((node, _)) = crate::faults::values::split_node(&value) else {
                continue;
            };
            if !nodes.iter().any(|(n, _)| n == node) {
                let known: Vec<&str> = nodes.iter().map(|(n, _)| n.as_str()).collect();
                return Err(Error::InvalidOption(format!(
                    "--faults {switch}={value}: the cluster has no node {node:?} (its nodes: {})",
                    known.join(", ")
                )));
            }
        }
    }
    for node in faults.values("node-tainted") {
        if !nodes.iter().any(|(n, _)| *n == node) {
            let known: Vec<&str> = nodes.iter().map(|(n, _)| n.as_str()).collect();
            return Err(Error::InvalidOption(format!(
                "--faults node-tainted={node}: the cluster has no node {node:?} (its nodes: {})",
                known.join(", ")
            )));
        }
    }
    Ok(())
}

/// `fast`, `realistic`, or a YAML file holding a profile; then scaled by `--time-scale`.
fn load_profile(name: &str, time_scale: f64) -> Result<LatencyProfile, Error> {
    let base = match LatencyProfile::named(name) {
        Some(p) => p,
        None => {
            let text = std::fs::read_to_string(name).map_err(|e| {
                Error::InvalidOption(format!(
                    "--profile {name:?} is neither fast, realistic nor a readable file: {e}"
                ))
            })?;
            serde_saphyr::from_str::<LatencyProfile>(&text).map_err(|e| {
                Error::InvalidOption(format!(
                    "--profile {name:?}: {}",
                    e.to_string().lines().next().unwrap_or("")
                ))
            })?
        }
    };
    Ok(base.scaled(time_scale))
}

/// Parses `key=value:Effect` or `key:Effect`.
fn parse_taint(text: &str) -> Result<(String, String, String), Error> {
    let (kv, effect) = text.rsplit_once(':').ok_or_else(|| {
        Error::InvalidOption(format!(
            "--windows-taint {text:?} needs an effect: key=value:NoSchedule"
        ))
    })?;
    if !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&effect) {
        return Err(Error::InvalidOption(format!(
            "--windows-taint effect {effect:?} must be NoSchedule, PreferNoSchedule or NoExecute"
        )));
    }
    let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
    if key.is_empty() {
        return Err(Error::InvalidOption(format!(
            "--windows-taint {text:?} has an empty key"
        )));
    }
    Ok((key.into(), value.into(), effect.into()))
}

/// API-server switches held back until the cluster is ready (see [`SimCluster::start`]).
const DEFERRED: &[&str] = &["api-errors", "conn-reset", "api-latency", "api-down", "watch-cut"];

/// A running simulated cluster.
pub struct SimCluster {
    block: AddressBlock,
    api: ApiServer,
    control: ControlPlane,
    nodes: Vec<NodeHandle>,
    net: SimNet,
    faults: std::sync::Arc<Faults>,
    workdir: std::path::PathBuf,
    cancel: CancellationToken,
    config: kube::Config,
    kubeconfig: String,
    url: String,
}

/// Address blocks already taken by a cluster of this process (see [`SimCluster::start`]).
/// `None` while a cluster holds the block, the time it was shut down afterwards.
static USED_BLOCKS: std::sync::Mutex<std::collections::BTreeMap<u8, Option<std::time::Instant>>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// How long a shut-down cluster's block rests before this process starts another cluster on
/// it: its API server, proxies and DNS close their sockets asynchronously, and a successor must
/// never race them. A process that starts more clusters than there are blocks (the can-fail
/// harness starts one per fault set) reuses the blocks of those it has shut down.
const BLOCK_REST: Duration = Duration::from_secs(30);

/// Takes `block` for a new cluster of this process, when it is free: never used, or shut
/// down at least [`BLOCK_REST`] ago.
fn take_block(block: u8) -> bool {
    let mut used = USED_BLOCKS.lock().expect("used blocks lock");
    match used.get(&block) {
        Some(None) => false,
        Some(Some(released)) if released.elapsed() < BLOCK_REST => false,
        _ => {
            used.insert(block, None);
            true
        }
    }
}

/// Marks `block` free again (from now on, after [`BLOCK_REST`]).
fn release_block(block: u8) {
    USED_BLOCKS
        .lock()
        .expect("used blocks lock")
        .insert(block, Some(std::time::Instant::now()));
}

/// Picks the first block to try: spread by process id so parallel test binaries rarely collide
/// (a collision only costs a retry on the next block).
fn first_block() -> u8 {
    let span = u32::from(addr::LAST_BLOCK - addr::FIRST_BLOCK) + 1;
    addr::FIRST_BLOCK + (std::process::id() % span) as u8
}

impl SimCluster {
    /// Starts the API server on a free address block, then the control plane, network and nodes.
    ///
    /// # Errors
    /// When a part fails to start.
    pub async fn start(cfg: SimConfig) -> Result<SimCluster, Error> {
        crate::install_crypto_provider();
        let faults = std::sync::Arc::new(match &cfg.faults {
            Some(spec) => Faults::parse(spec).map_err(Error::Faults)?,
            None => Faults::default(),
        });
        let specs = node_specs(cfg.windows_nodes, cfg.linux_nodes);
        check_fault_nodes(&faults, &specs)?;
        // The API server's transient trouble starts once the cluster is up: it models a running
        // cluster in trouble, not a bootstrap that may never finish (the nodes and add-ons
        // register once, as kubeadm's bring-up would have before a test run).
        let deferred: Vec<(&str, String)> = DEFERRED
            .iter()
            .flat_map(|name| faults.values(name).into_iter().map(move |v| (*name, v)))
            .collect();
        for (name, value) in &deferred {
            faults.set(name, value, false);
        }
        // In u16: offset plus step can pass 255 before the modulo.
        let span = u16::from(addr::LAST_BLOCK - addr::FIRST_BLOCK) + 1;
        let start = u16::from(first_block() - addr::FIRST_BLOCK);
        let mut found = None;
        let compaction_interval = load_profile(&cfg.profile, cfg.time_scale)?.compaction_interval();
        for i in 0..span {
            let offset = u8::try_from((start + i) % span).expect("the offset is below the span");
            let block = AddressBlock(addr::FIRST_BLOCK + offset);
            // A block serves one cluster at a time in this process, and rests after its cluster
            // shut down (see [`BLOCK_REST`]): a stopped cluster frees its pods' addresses
            // (tests/sim_shutdown.rs), but its API server, proxies and DNS close their sockets
            // asynchronously.
            if !take_block(block.0) {
                continue;
            }
            let api_cfg = ApiConfig::new(block)
                .faults(faults.clone())
                .gates(cfg.gates.clone())
                .compaction_interval(compaction_interval);
            match ApiServer::start(api_cfg).await {
                Ok(api) => {
                    found = Some((block, api));
                    break;
                }
                Err(super::api::Error::AddressInUse { .. }) => continue,
                Err(e) => return Err(Error::Api(e)),
            }
        }
        let (block, api) = found.ok_or(Error::NoFreeBlock {
            first: addr::FIRST_BLOCK,
            last: addr::LAST_BLOCK,
        })?;
        let config = api.kube_config();
        let client = kube::Client::try_from(config.clone()).map_err(Error::Client)?;
        let cancel = CancellationToken::new();
        // `--time-scale 0.05` makes every delay 20x shorter; the controllers' clock (CronJob
        // schedules, Job deadlines) runs 20x faster to match.
        let mut control_cfg = ControlConfig {
            faults: faults.clone(),
            root_ca_pem: Some(api.ca_pem().to_string()),
            service_account_key: api.service_account_key(),
            clock: std::sync::Arc::new(control::ScaledClock::new(1.0 / cfg.time_scale)),
            node_monitor_grace_period: cfg.node_monitor_grace_period,
            ..ControlConfig::default()
        };
        // `controller-stopped=NAME` leaves that loop out from the start (as if
        // kube-controller-manager had lost it); turning it on later has no effect.
        control_cfg
            .components
            .retain(|c| !faults.applies_to("controller-stopped", c.fault_name()));
        let control = control::start(
            client_as(&config, "kube-controller-manager")?,
            control_cfg,
            cancel.clone(),
        )
        .await
        .map_err(Error::Control)?;
        let workdir = std::env::temp_dir().join(format!("crossconf-sim-{}-{}", std::process::id(), block.0));
        std::fs::create_dir_all(&workdir).map_err(Error::WorkDir)?;
        let domain = cfg
            .gmsa_domain
            .then(|| std::sync::Arc::new(node::ad::Domain::new(block, &workdir)));
        let net = node::start_network_with(client.clone(), block, faults.clone(), domain.clone(), cancel.clone())
            .await
            .map_err(Error::Network)?;
        let profile = load_profile(&cfg.profile, cfg.time_scale)?;
        let mut nodes = Vec::new();
        for (index, (name, os)) in specs.into_iter().enumerate() {
            let mut ncfg = NodeConfig::new(&name, os, index, block, workdir.join(&name));
            ncfg.profile = profile.clone();
            if os == crossconf_model::os::Os::Windows {
                ncfg.windows_build = Some(cfg.windows_build.clone());
                ncfg.runtime_version = cfg.windows_containerd_of(index);
                ncfg.runtime_handlers = node::kubelet::hyperv::handlers(os, cfg.hyperv);
                ncfg.shutdown.gate = cfg.gates.enabled(crate::gates::WINDOWS_GRACEFUL_NODE_SHUTDOWN);
                if let Some((key, value, effect)) = &cfg.windows_taint {
                    ncfg.taints.push(k8s_openapi::api::core::v1::Taint {
                        key: key.clone(),
                        value: (!value.is_empty()).then(|| value.clone()),
                        effect: effect.clone(),
                        time_added: None,
                    });
                }
            }
            // The first Windows node is the one set up for the domain (upstream expects
            // exactly one labelled node).
            let domain_node = (os == crossconf_model::os::Os::Windows && index == 0)
                .then_some(domain.as_ref())
                .flatten();
            if let Some(d) = domain_node {
                let (k, v) = node::ad::NODE_LABEL;
                ncfg.labels.push((k.to_string(), v.to_string()));
                d.place_manifest(&node::kubelet::host_process::host_root(&ncfg.root_dir))
                    .map_err(Error::WorkDir)?;
            }
            if faults.applies_to("node-tainted", &name) {
                ncfg.taints.push(k8s_openapi::api::core::v1::Taint {
                    key: "dedicated".into(),
                    value: Some("e2e-fault".into()),
                    effect: "NoSchedule".into(),
                    time_added: None,
                });
            }
            // Each kubelet authenticates as its node, `system:node:NAME` in `system:nodes`,
            // as a kubeadm kubelet's client certificate says.
            let token = api
                .state()
                .issue_token(&format!("system:node:{name}"), &["system:nodes"]);
            let node_client = client_as(&api.kube_config_for(&token), "kubelet")?;
            let handle = node::start_node(node_client, ncfg, net.clone(), cancel.clone())
                .await
                .map_err(|source| Error::Node {
                    name: name.clone(),
                    source,
                })?;
            nodes.push(handle);
        }
        wait_nodes_ready(&client, nodes.len(), cfg.start_timeout).await?;
        if cfg.hyperv {
            create_hyperv_runtime_class(&client).await?;
        }
        for (name, value) in &deferred {
            faults.set(name, value, true);
        }
        let kubeconfig = api.kubeconfig_yaml("crossconf-sim");
        let url = api.url();
        tracing::info!(%url, block = block.0, nodes = cfg.windows_nodes + cfg.linux_nodes, "simulated cluster started");
        Ok(SimCluster {
            block,
            api,
            control,
            nodes,
            net,
            faults,
            workdir,
            cancel,
            config,
            kubeconfig,
            url,
        })
    }

    /// The cluster's address block.
    pub fn block(&self) -> AddressBlock {
        self.block
    }

    /// The network (kube-proxy, DNS, dialer).
    pub fn net(&self) -> &SimNet {
        &self.net
    }

    /// The fault switches, settable while the cluster runs.
    pub fn faults(&self) -> &std::sync::Arc<Faults> {
        &self.faults
    }

    /// The node agents.
    pub fn nodes(&self) -> &[NodeHandle] {
        &self.nodes
    }

    /// The in-process API server (tests use its state for fault injection).
    pub fn api(&self) -> &ApiServer {
        &self.api
    }

    /// A client configuration for the API server.
    pub fn kube_config(&self) -> kube::Config {
        self.config.clone()
    }

    /// A kubeconfig file for real clients (kubectl).
    pub fn kubeconfig_yaml(&self) -> String {
        self.kubeconfig.clone()
    }

    /// The API server URL.
    pub fn server_url(&self) -> &str {
        &self.url
    }

    /// The emulated outside endpoint (`HOST:PORT`) for egress cases.
    pub fn external_endpoint(&self) -> String {
        format!("{}:80", self.block.outside())
    }

    /// The name the node resolver maps to the outside host.
    pub fn external_name(&self) -> String {
        addr::EXTERNAL_NAME.to_string()
    }

    /// Stops everything: nodes and controllers first (they talk to the API), then the server.
    pub async fn shutdown(self) {
        self.cancel.cancel();
        for n in &self.nodes {
            n.stop();
        }
        let _ = tokio::time::timeout(Duration::from_secs(5), self.control.stopped()).await;
        self.api.shutdown().await;
        let _ = std::fs::remove_dir_all(&self.workdir);
        release_block(self.block.0);
    }
}

/// Waits (on a watch) until `n` nodes report Ready.
/// A client that names itself as the upstream component it stands in for, so the API server
/// derives that component's field manager (`kube-controller-manager`, `kubelet`) from its user
/// agent, as kube-apiserver does for the real ones.
fn client_as(config: &kube::Config, component: &str) -> Result<kube::Client, Error> {
    let mut cfg = config.clone();
    let ua = format!(
        "{component}/{} (linux/amd64) kubernetes/0000000",
        super::api::discovery::GIT_VERSION
    );
    if let Ok(v) = http::HeaderValue::from_str(&ua) {
        cfg.headers.push((http::header::USER_AGENT, v));
    }
    kube::Client::try_from(cfg).map_err(Error::Client)
}

/// Creates RuntimeClass `runhcs-wcow-hypervisor` as kubernetes-sigs/windows-testing's
/// `helpers/hyper-v-mutating-webhook/hyperv-runtimeclass.yaml` does: handler of the same name,
/// scheduled onto amd64 Windows nodes, tolerating the `os=windows:NoSchedule` taint.
async fn create_hyperv_runtime_class(client: &kube::Client) -> Result<(), Error> {
    use k8s_openapi::api::core::v1::Toleration;
    use k8s_openapi::api::node::v1::{RuntimeClass, Scheduling};
    use node::kubelet::hyperv::HYPERVISOR_HANDLER;
    let rc = RuntimeClass {
        metadata: kube::api::ObjectMeta {
            name: Some(HYPERVISOR_HANDLER.into()),
            ..Default::default()
        },
        handler: HYPERVISOR_HANDLER.into(),
        scheduling: Some(Scheduling {
            node_selector: Some(
                [
                    ("kubernetes.io/os".to_string(), "windows".to_string()),
                    ("kubernetes.io/arch".to_string(), "amd64".to_string()),
                ]
                .into(),
            ),
            tolerations: Some(vec![Toleration {
                effect: Some("NoSchedule".into()),
                key: Some("os".into()),
                operator: Some("Equal".into()),
                value: Some("windows".into()),
                ..Default::default()
            }]),
        }),
        overhead: None,
    };
    kube::Api::<RuntimeClass>::all(client.clone())
        .create(&kube::api::PostParams::default(), &rc)
        .await
        .map_err(|source| Error::Bootstrap {
            what: format!("RuntimeClass {HYPERVISOR_HANDLER}"),
            source,
        })?;
    Ok(())
}

async fn wait_nodes_ready(client: &kube::Client, n: usize, within: Duration) -> Result<(), Error> {
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::Node;
    use kube::runtime::{WatchStreamExt, watcher};
    let api: kube::Api<Node> = kube::Api::all(client.clone());
    let (reader, writer) = kube::runtime::reflector::store();
    let stream = kube::runtime::reflector(writer, watcher(api, watcher::Config::default()))
        .applied_objects()
        .boxed();
    let ready = |reader: &kube::runtime::reflector::Store<Node>| {
        reader
            .state()
            .iter()
            .filter(|node| crate::control::predicates::node_ready(node) == Some(true))
            .count()
            >= n
    };
    tokio::time::timeout(within, async {
        let mut stream = stream;
        while stream.next().await.is_some() {
            if ready(&reader) {
                return;
            }
        }
    })
    .await
    .map_err(|_| Error::NodesNotReady(within))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_validated() {
        assert!(SimConfig::from_options(0, 0, "10.0.20348", None, "fast", 1.0, None).is_err());
        assert!(SimConfig::from_options(2, 1, "20348", None, "fast", 1.0, None).is_err());
        assert!(SimConfig::from_options(2, 1, "10.0.20348", None, "fast", 0.0, None).is_err());
        let c = SimConfig::from_options(2, 1, "10.0.17763", Some("os=windows:NoSchedule"), "fast", 0.05, None).unwrap();
        assert_eq!(
            c.windows_taint,
            Some(("os".into(), "windows".into(), "NoSchedule".into()))
        );
        assert!(parse_taint("os=windows").is_err());
        assert!(parse_taint("os=windows:Sometimes").is_err());
    }

    #[test]
    fn hyperv_needs_a_windows_node_and_gives_windows_nodes_the_handler() {
        let c = SimConfig::from_options(0, 1, "10.0.20348", None, "fast", 1.0, None).unwrap();
        assert!(c.with_hyperv(true).unwrap_err().to_string().contains("--hyperv"));
        assert!(SimConfig::default().with_hyperv(true).unwrap().hyperv);
        assert!(
            node::kubelet::hyperv::handlers(crossconf_model::os::Os::Windows, true)
                .contains(&node::kubelet::hyperv::HYPERVISOR_HANDLER.to_string())
        );
    }

    #[test]
    fn windows_containerd_versions_go_to_the_nodes_in_order() {
        let c = SimConfig::default();
        assert_eq!(c.windows_containerd_of(0), "1.7.27");
        assert_eq!(c.windows_containerd_of(1), "1.7.27");
        let c = SimConfig::default().with_windows_containerd("1.7.27,1.6.28").unwrap();
        assert_eq!(c.windows_containerd_of(0), "1.7.27");
        assert_eq!(c.windows_containerd_of(1), "1.6.28");
        assert_eq!(c.windows_containerd_of(2), "1.6.28");
        for bad in ["1.5.13", "1.7", "v1.7.27", "1.7.27,", "two"] {
            let err = SimConfig::default()
                .with_windows_containerd(bad)
                .unwrap_err()
                .to_string();
            assert!(err.contains("--windows-containerd"), "{bad}: {err}");
        }
    }

    #[test]
    fn node_switches_must_name_a_node_of_the_cluster() {
        let opts = |faults| SimConfig::from_options(2, 1, "10.0.20348", None, "fast", 1.0, Some(faults));
        assert!(opts("node-flap=win-1:8s/60s,node-lost=linux-1:30s").is_ok());
        assert!(opts("node-tainted=win-1,node-tainted=win-2").is_ok());
        for bad in [
            "node-flap=win-3:8s/60s",
            "node-lost=linux-2:30s",
            "node-lost=win-0:5s",
            "node-tainted=linux-2",
        ] {
            let err = opts(bad).unwrap_err().to_string();
            assert!(
                err.contains("has no node") && err.contains("win-1, win-2, linux-1"),
                "{bad}: {err}"
            );
        }
        let c = SimConfig::default();
        assert_eq!(c.node_monitor_grace_period, Duration::from_secs(50));
    }

    #[tokio::test]
    async fn start_refuses_a_node_switch_for_a_missing_node() {
        let cfg = SimConfig {
            faults: Some("node-lost=win-9:10s".into()),
            ..SimConfig::default()
        };
        let err = match SimCluster::start(cfg).await {
            Ok(_) => panic!("a cluster started with node-lost=win-9"),
            Err(e) => e,
        };
        assert!(matches!(&err, Error::InvalidOption(m) if m.contains("win-9")), "{err}");
    }
}
