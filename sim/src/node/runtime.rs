//! The emulated container runtime's bookkeeping: container logs, container states as the
//! kubelet reports them, environment resolution (ConfigMap/Secret/fieldRef/resourceFieldRef,
//! envFrom, service links) and resource quantities.
//!
//! The pod lifecycle that drives these lives in [`crate::node::kubelet`].

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use k8s_openapi::api::core::v1::{
    ConfigMap, Container, ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting, Pod,
    Secret, Service,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Api;
use tokio::sync::broadcast;

use crate::node::programs::Stream;
use crossconf_model::os::Os;

/// Errors resolving a container's configuration (`CreateContainerConfigError`).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A referenced ConfigMap is missing.
    #[error("configmap \"{0}\" not found")]
    ConfigMapNotFound(String),
    /// A referenced Secret is missing.
    #[error("secret \"{0}\" not found")]
    SecretNotFound(String),
    /// A key is missing from a ConfigMap.
    #[error("couldn't find key {key} in ConfigMap {ns}/{name}")]
    ConfigMapKey {
        /// Namespace.
        ns: String,
        /// ConfigMap.
        name: String,
        /// Key.
        key: String,
    },
    /// A key is missing from a Secret.
    #[error("couldn't find key {key} in Secret {ns}/{name}")]
    SecretKey {
        /// Namespace.
        ns: String,
        /// Secret.
        name: String,
        /// Key.
        key: String,
    },
    /// A fieldRef the kubelet does not support.
    #[error("unsupported fieldRef {0}")]
    FieldPath(String),
    /// The API could not be read.
    #[error("reading {0} failed")]
    Api(String, #[source] kube::Error),
}

/// One stored log chunk.
#[derive(Debug, Clone)]
pub struct LogLine {
    /// When it was written.
    pub ts: jiff::Timestamp,
    /// stdout or stderr.
    pub stream: Stream,
    /// The bytes (a line including its newline, or a trailing partial line).
    pub data: Vec<u8>,
}

/// A container's log: every line with its timestamp, plus a notification for followers.
#[derive(Debug)]
pub struct LogBuffer {
    lines: Mutex<Vec<LogLine>>,
    bytes: AtomicU64,
    tx: broadcast::Sender<()>,
    closed: Mutex<bool>,
}

/// The log size the kubelet lets a container use before rotation (containerLogMaxSize 10Mi).
pub const LOG_CAPACITY: u64 = 10 * 1024 * 1024;

impl Default for LogBuffer {
    fn default() -> Self {
        LogBuffer {
            lines: Mutex::new(Vec::new()),
            bytes: AtomicU64::new(0),
            tx: broadcast::channel(64).0,
            closed: Mutex::new(false),
        }
    }
}

impl LogBuffer {
    /// Appends output, split into lines.
    pub fn write(&self, stream: Stream, data: &[u8]) {
        let ts = jiff::Timestamp::now();
        let mut lines = self.lines.lock().expect("log lock");
        for chunk in data.split_inclusive(|b| *b == b'\n') {
            lines.push(LogLine {
                ts,
                stream,
                data: chunk.to_vec(),
            });
        }
        self.bytes.fetch_add(data.len() as u64, Ordering::Relaxed);
        let _ = self.tx.send(());
    }

    /// Marks the log complete (the container exited); followers stop.
    pub fn close(&self) {
        *self.closed.lock().expect("log lock") = true;
        let _ = self.tx.send(());
    }

    /// Whether the container behind this log has exited.
    pub fn is_closed(&self) -> bool {
        *self.closed.lock().expect("log lock")
    }

    /// Lines from index `from` on.
    pub fn since(&self, from: usize) -> Vec<LogLine> {
        let l = self.lines.lock().expect("log lock");
        l.get(from..).map(<[LogLine]>::to_vec).unwrap_or_default()
    }

    /// How many lines are stored.
    pub fn len(&self) -> usize {
        self.lines.lock().expect("log lock").len()
    }

    /// Whether nothing was logged.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes logged.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// A receiver notified on every write and on close.
    pub fn subscribe(&self) -> broadcast::Receiver<()> {
        self.tx.subscribe()
    }
}

/// A container state as the kubelet reports it.
#[derive(Debug, Clone, PartialEq)]
pub enum CState {
    /// Not running (yet): ContainerCreating, PodInitializing, ErrImagePull, CrashLoopBackOff…
    Waiting {
        /// The reason.
        reason: String,
        /// The message, if any.
        message: Option<String>,
    },
    /// Running since `started_at`.
    Running {
        /// Start time.
        started_at: jiff::Timestamp,
    },
    /// Exited.
    Terminated {
        /// Exit code.
        exit_code: i32,
        /// Completed, Error, StartError, OOMKilled…
        reason: String,
        /// A message, if any.
        message: Option<String>,
        /// Start time (absent when it never started).
        started_at: Option<jiff::Timestamp>,
        /// Exit time.
        finished_at: jiff::Timestamp,
        /// The container ID of that run.
        container_id: String,
    },
}

impl CState {
    /// A waiting state.
    pub fn waiting(reason: &str, message: Option<String>) -> Self {
        CState::Waiting {
            reason: reason.into(),
            message,
        }
    }

    /// The Kubernetes API form.
    pub fn to_api(&self) -> ContainerState {
        let t = |ts: &jiff::Timestamp| Time(*ts);
        match self {
            CState::Waiting { reason, message } => ContainerState {
                waiting: Some(ContainerStateWaiting {
                    reason: Some(reason.clone()),
                    message: message.clone(),
                }),
                ..Default::default()
            },
            CState::Running { started_at } => ContainerState {
                running: Some(ContainerStateRunning {
                    started_at: Some(t(started_at)),
                }),
                ..Default::default()
            },
            CState::Terminated {
                exit_code,
                reason,
                message,
                started_at,
                finished_at,
                container_id,
            } => ContainerState {
                terminated: Some(ContainerStateTerminated {
                    exit_code: *exit_code,
                    reason: Some(reason.clone()),
                    message: message.clone(),
                    started_at: started_at.as_ref().map(t),
                    finished_at: Some(t(finished_at)),
                    container_id: Some(container_id.clone()),
                    signal: None,
                }),
                ..Default::default()
            },
        }
    }

    /// Whether the container is running.
    pub fn is_running(&self) -> bool {
        matches!(self, CState::Running { .. })
    }
}

/// Parses a resource quantity into a float in base units (cores, bytes).
pub fn parse_quantity(q: &str) -> Option<f64> {
    let q = q.trim();
    let suffixes: &[(&str, f64)] = &[
        ("Ki", 1024.0),
        ("Mi", 1024.0 * 1024.0),
        ("Gi", 1024.0 * 1024.0 * 1024.0),
        ("Ti", 1024f64.powi(4)),
        ("Pi", 1024f64.powi(5)),
        ("Ei", 1024f64.powi(6)),
        ("n", 1e-9),
        ("u", 1e-6),
        ("m", 1e-3),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
        ("E", 1e18),
    ];
    for (s, m) in suffixes {
        if let Some(n) = q.strip_suffix(s) {
            return n.parse::<f64>().ok().map(|v| v * m);
        }
    }
    q.parse::<f64>().ok()
}

/// What a fieldRef / resourceFieldRef resolves against.
#[derive(Debug, Clone)]
pub struct PodFields {
    /// The pod.
    pub pod: Pod,
    /// The pod IP.
    pub pod_ip: String,
    /// The node IP.
    pub host_ip: String,
    /// Node allocatable CPU (cores) — the default for a container without a CPU limit.
    pub node_cpu: f64,
    /// Node allocatable memory (bytes).
    pub node_memory: f64,
}

impl PodFields {
    /// Resolves `metadata.name`, `metadata.labels['x']`, `status.podIP`…
    pub fn field(&self, path: &str) -> Result<String, ConfigError> {
        let m = &self.pod.metadata;
        let spec = self.pod.spec.clone().unwrap_or_default();
        let map_key = |prefix: &str, map: &Option<BTreeMap<String, String>>| -> Option<String> {
            let key = path.strip_prefix(prefix)?.strip_prefix("['")?.strip_suffix("']")?;
            Some(map.as_ref().and_then(|m| m.get(key)).cloned().unwrap_or_default())
        };
        let fmt_map = |map: &Option<BTreeMap<String, String>>| {
            map.iter()
                .flatten()
                .map(|(k, v)| format!("{k}=\"{v}\""))
                .collect::<Vec<_>>()
                .join("\n")
        };
        Ok(match path {
            "metadata.name" => m.name.clone().unwrap_or_default(),
            "metadata.namespace" => m.namespace.clone().unwrap_or_default(),
            "metadata.uid" => m.uid.clone().unwrap_or_default(),
            "metadata.labels" => fmt_map(&m.labels),
            "metadata.annotations" => fmt_map(&m.annotations),
            "spec.nodeName" => spec.node_name.unwrap_or_default(),
            "spec.serviceAccountName" => spec.service_account_name.unwrap_or_default(),
            "status.hostIP" | "status.hostIPs" => self.host_ip.clone(),
            "status.podIP" | "status.podIPs" => self.pod_ip.clone(),
            p => {
                match map_key("metadata.labels", &m.labels).or_else(|| map_key("metadata.annotations", &m.annotations))
                {
                    Some(v) => v,
                    None => return Err(ConfigError::FieldPath(p.to_string())),
                }
            }
        })
    }

    /// Resolves `limits.cpu`, `requests.memory`… for `container` (default: the first).
    pub fn resource(&self, container: Option<&str>, resource: &str, divisor: Option<&str>) -> Option<String> {
        let spec = self.pod.spec.clone().unwrap_or_default();
        let c = match container.filter(|c| !c.is_empty()) {
            Some(name) => spec.containers.iter().find(|c| c.name == name)?.clone(),
            None => spec.containers.first()?.clone(),
        };
        let res = c.resources.unwrap_or_default();
        let (kind, which) = resource.split_once('.')?;
        let map = if kind == "limits" {
            res.limits.clone()
        } else {
            res.requests.clone()
        };
        let value = map
            .as_ref()
            .and_then(|m| m.get(which))
            .and_then(|q| parse_quantity(&q.0))
            .or_else(|| {
                // Without a limit the kubelet reports node allocatable; without a request, 0
                // (requests default to limits when only limits are set).
                if kind == "limits" {
                    Some(if which == "cpu" {
                        self.node_cpu
                    } else {
                        self.node_memory
                    })
                } else {
                    res.limits
                        .as_ref()
                        .and_then(|m| m.get(which))
                        .and_then(|q| parse_quantity(&q.0))
                        .or(Some(0.0))
                }
            })?;
        let div = divisor.and_then(parse_quantity).filter(|d| *d > 0.0).unwrap_or(1.0);
        Some(format!("{}", (value / div).ceil() as i64))
    }
}

impl crate::node::fs::FieldSource for PodFields {
    fn field(&self, path: &str) -> Option<String> {
        PodFields::field(self, path).ok()
    }
    fn resource(&self, container: Option<&str>, resource: &str, divisor: Option<&str>) -> Option<String> {
        PodFields::resource(self, container, resource, divisor)
    }
}

/// Expands `$(VAR)` references as the kubelet does (`$$` escapes; unknown references stay).
pub fn expand_refs(s: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(stripped) = after.strip_prefix('$') {
            out.push('$');
            rest = stripped;
        } else if let Some(inner) = after.strip_prefix('(')
            && let Some(end) = inner.find(')')
        {
            let name = &inner[..end];
            match env.get(name) {
                Some(v) => out.push_str(v),
                None => {
                    out.push_str("$(");
                    out.push_str(name);
                    out.push(')');
                }
            }
            rest = &inner[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// The service environment variables (`{SVC}_SERVICE_HOST`…) of `services` as docker links
/// name them.
pub fn service_env(services: &[std::sync::Arc<Service>]) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    for s in services {
        let Some(spec) = &s.spec else { continue };
        let Some(ip) = spec.cluster_ip.as_deref().filter(|ip| *ip != "None" && !ip.is_empty()) else {
            continue;
        };
        let name = s
            .metadata
            .name
            .clone()
            .unwrap_or_default()
            .to_ascii_uppercase()
            .replace('-', "_");
        let ports = spec.ports.clone().unwrap_or_default();
        let Some(first) = ports.first() else { continue };
        env.insert(format!("{name}_SERVICE_HOST"), ip.to_string());
        env.insert(format!("{name}_SERVICE_PORT"), first.port.to_string());
        for p in &ports {
            if let Some(pn) = &p.name {
                env.insert(
                    format!("{name}_SERVICE_PORT_{}", pn.to_ascii_uppercase().replace('-', "_")),
                    p.port.to_string(),
                );
            }
        }
        let proto = first.protocol.clone().unwrap_or_else(|| "TCP".into());
        env.insert(
            format!("{name}_PORT"),
            format!("{}://{ip}:{}", proto.to_ascii_lowercase(), first.port),
        );
        for p in &ports {
            let proto = p.protocol.clone().unwrap_or_else(|| "TCP".into());
            let pre = format!("{name}_PORT_{}_{}", p.port, proto);
            env.insert(pre.clone(), format!("{}://{ip}:{}", proto.to_ascii_lowercase(), p.port));
            env.insert(format!("{pre}_PROTO"), proto.to_ascii_lowercase());
            env.insert(format!("{pre}_PORT"), p.port.to_string());
            env.insert(format!("{pre}_ADDR"), ip.to_string());
        }
    }
    env
}

/// What the node contributes to a container's environment: the Services it knows (for the
/// docker-links variables), its OS (default variables), the pod's hostname, and the fault
/// switches that break env handling.
#[derive(Clone, Copy)]
pub struct EnvNode<'a> {
    /// Services visible to the kubelet.
    pub services: &'a [std::sync::Arc<Service>],
    /// The node's OS.
    pub os: Os,
    /// The pod's hostname.
    pub hostname: &'a str,
    /// The cluster's fault switches.
    pub faults: &'a crate::faults::Faults,
}

/// Builds a container's environment: service links (when enabled), then envFrom, then env, with
/// `$(VAR)` expansion, as the kubelet orders them.
pub async fn container_env(
    client: &kube::Client,
    pod: &Pod,
    c: &Container,
    fields: &PodFields,
    node: &EnvNode<'_>,
) -> Result<BTreeMap<String, String>, ConfigError> {
    // Faults: a kubelet that passes `$(VAR)` references through unexpanded, or one that
    // resolves no downward API values (fieldRef / resourceFieldRef come out empty).
    let EnvNode {
        services,
        os,
        hostname,
        faults,
    } = *node;
    let expand = !faults.is_on("env-expansion-off");
    let downward = !faults.is_on("downward-env-missing");
    let config_env = !faults.is_on("config-env-missing");
    let ns = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
    let spec = pod.spec.clone().unwrap_or_default();
    let mut env = BTreeMap::new();
    match os {
        Os::Linux => {
            env.insert(
                "PATH".into(),
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
            );
            env.insert("HOSTNAME".into(), hostname.into());
        }
        Os::Windows => {
            env.insert(
                "PATH".into(),
                "C:\\Windows\\system32;C:\\Windows;C:\\Windows\\System32\\WindowsPowerShell\\v1.0\\".into(),
            );
            env.insert("COMPUTERNAME".into(), hostname.to_ascii_uppercase());
        }
    }
    let links = spec.enable_service_links.unwrap_or(true);
    let visible: Vec<_> = services
        .iter()
        .filter(|s| {
            let sns = s.metadata.namespace.as_deref();
            (links && sns == Some(ns.as_str()))
                || (sns == Some("default") && s.metadata.name.as_deref() == Some("kubernetes"))
        })
        .cloned()
        .collect();
    env.extend(service_env(&visible));
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    for from in c.env_from.iter().flatten().filter(|_| config_env) {
        let prefix = from.prefix.clone().unwrap_or_default();
        if let Some(r) = &from.config_map_ref {
            match cms
                .get_opt(&r.name)
                .await
                .map_err(|e| ConfigError::Api(format!("configmap {}", r.name), e))?
            {
                Some(cm) => {
                    for (k, v) in cm.data.unwrap_or_default() {
                        env.insert(format!("{prefix}{k}"), v);
                    }
                }
                None if r.optional.unwrap_or(false) => {}
                None => return Err(ConfigError::ConfigMapNotFound(r.name.clone())),
            }
        }
        if let Some(r) = &from.secret_ref {
            match secrets
                .get_opt(&r.name)
                .await
                .map_err(|e| ConfigError::Api(format!("secret {}", r.name), e))?
            {
                Some(s) => {
                    for (k, v) in s.data.unwrap_or_default() {
                        env.insert(format!("{prefix}{k}"), String::from_utf8_lossy(&v.0).to_string());
                    }
                }
                None if r.optional.unwrap_or(false) => {}
                None => return Err(ConfigError::SecretNotFound(r.name.clone())),
            }
        }
    }
    for e in c.env.iter().flatten() {
        let value = if let Some(v) = &e.value {
            if expand { expand_refs(v, &env) } else { v.clone() }
        } else if let Some(src) = &e.value_from {
            if !downward && (src.field_ref.is_some() || src.resource_field_ref.is_some()) {
                String::new()
            } else if !config_env && (src.config_map_key_ref.is_some() || src.secret_key_ref.is_some()) {
                continue;
            } else if let Some(f) = &src.field_ref {
                fields.field(&f.field_path)?
            } else if let Some(r) = &src.resource_field_ref {
                let cname = r.container_name.clone().or_else(|| Some(c.name.clone()));
                fields
                    .resource(cname.as_deref(), &r.resource, r.divisor.as_ref().map(|q| q.0.as_str()))
                    .unwrap_or_default()
            } else if let Some(k) = &src.config_map_key_ref {
                let optional = k.optional.unwrap_or(false);
                match cms
                    .get_opt(&k.name)
                    .await
                    .map_err(|e| ConfigError::Api(format!("configmap {}", k.name), e))?
                {
                    Some(cm) => match cm.data.unwrap_or_default().get(&k.key) {
                        Some(v) => v.clone(),
                        None if optional => continue,
                        None => {
                            return Err(ConfigError::ConfigMapKey {
                                ns,
                                name: k.name.clone(),
                                key: k.key.clone(),
                            });
                        }
                    },
                    None if optional => continue,
                    None => return Err(ConfigError::ConfigMapNotFound(k.name.clone())),
                }
            } else if let Some(k) = &src.secret_key_ref {
                let optional = k.optional.unwrap_or(false);
                match secrets
                    .get_opt(&k.name)
                    .await
                    .map_err(|e| ConfigError::Api(format!("secret {}", k.name), e))?
                {
                    Some(s) => match s.data.unwrap_or_default().get(&k.key) {
                        Some(v) => String::from_utf8_lossy(&v.0).to_string(),
                        None if optional => continue,
                        None => {
                            return Err(ConfigError::SecretKey {
                                ns,
                                name: k.name.clone(),
                                key: k.key.clone(),
                            });
                        }
                    },
                    None if optional => continue,
                    None => return Err(ConfigError::SecretNotFound(k.name.clone())),
                }
            } else {
                String::new()
            }
        } else {
            String::new()
        };
        env.insert(e.name.clone(), value);
    }
    Ok(env)
}

/// Renders an error and its sources as one line (`a: b: c`), the way Go programs print
/// wrapped errors.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ServicePort, ServiceSpec};
    use kube::api::ObjectMeta;

    #[test]
    fn quantities() {
        assert_eq!(parse_quantity("500m"), Some(0.5));
        assert_eq!(parse_quantity("128Mi"), Some(134_217_728.0));
        assert_eq!(parse_quantity("2"), Some(2.0));
        assert_eq!(parse_quantity("1G"), Some(1e9));
    }

    #[test]
    fn expands_dependent_vars() {
        let env = BTreeMap::from([("A".to_string(), "x".to_string())]);
        assert_eq!(expand_refs("$(A)-$(B)-$$(A)", &env), "x-$(B)-$(A)");
    }

    #[test]
    fn service_links_like_docker() {
        let svc = Service {
            metadata: ObjectMeta {
                name: Some("my-svc".into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            spec: Some(ServiceSpec {
                cluster_ip: Some("127.1.96.5".into()),
                ports: Some(vec![ServicePort {
                    name: Some("http".into()),
                    port: 80,
                    protocol: Some("TCP".into()),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            status: None,
        };
        let env = service_env(&[std::sync::Arc::new(svc)]);
        assert_eq!(env["MY_SVC_SERVICE_HOST"], "127.1.96.5");
        assert_eq!(env["MY_SVC_SERVICE_PORT"], "80");
        assert_eq!(env["MY_SVC_SERVICE_PORT_HTTP"], "80");
        assert_eq!(env["MY_SVC_PORT"], "tcp://127.1.96.5:80");
        assert_eq!(env["MY_SVC_PORT_80_TCP_ADDR"], "127.1.96.5");
    }

    #[test]
    fn logs_split_lines_and_notify() {
        let l = LogBuffer::default();
        let mut rx = l.subscribe();
        l.write(Stream::Stdout, b"a\nb\npartial");
        assert_eq!(l.len(), 3);
        assert!(rx.try_recv().is_ok());
        assert_eq!(l.since(1)[0].data, b"b\n");
    }
}
