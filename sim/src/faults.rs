//! Behaviour-breaking switches for the whole simulated cluster (`--faults`).
//!
//! They exist so that tests can prove a case *can* fail: with a switch on, the simulator
//! misbehaves the way a broken real cluster would (a dead pod network, no kube-proxy, a stopped
//! DNS, an incomplete stats summary, a runtime that ignores pull policy, a stalled controller, a
//! kubelet that never runs probes…), and the case guarding against that must fail with a
//! message naming it. `tests/can_fail.rs` runs every case under its fault.
//!
//! Every switch is a row of [`SWITCHES`]: its name, whether it takes a value (a node, a
//! controller, a field), and what it breaks. Adding one is a row there plus one check where the
//! behaviour lives (`faults.is_on("name")` or `faults.applies_to("name", value)`). One
//! [`Faults`] is shared by the API server, the control plane and every node of a cluster, and
//! can be changed at run time.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::RwLock;

/// Whether a switch takes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg {
    /// A plain flag: `dns-stopped`.
    None,
    /// One or more values, each given as its own entry: `blackhole=win-1,blackhole=win-2`.
    Value(&'static str),
}

/// One fault switch: name, argument and what it breaks (shown in `--help` and errors).
#[derive(Debug, Clone, Copy)]
pub struct Switch {
    /// The name used in `--faults`.
    pub name: &'static str,
    /// Its argument.
    pub arg: Arg,
    /// What turning it on breaks.
    pub breaks: &'static str,
}

/// Every switch the simulator knows.
pub const SWITCHES: &[Switch] = &[
    Switch {
        name: "api-errors",
        arg: Arg::Value("CODE:PERCENT"),
        breaks: "transient: answers PERCENT of the API requests that are not long-running with CODE, \
                 as kube-apiserver does: 429 with Retry-After (throttling), 500 InternalError (a storage \
                 timeout), 503 with Retry-After (a draining server), 504 Timeout; repeat for several codes",
    },
    Switch {
        name: "blackhole",
        arg: Arg::Value("NODE"),
        breaks: "drops all traffic to and from the pods of NODE (a dead CNI on that node)",
    },
    Switch {
        name: "kube-proxy-off",
        arg: Arg::Value("NODE"),
        breaks: "kube-proxy stopped on NODE: its NodePorts refuse and its pods cannot reach ClusterIPs",
    },
    Switch {
        name: "dns-stopped",
        arg: Arg::None,
        breaks: "the cluster DNS stops answering (queries time out)",
    },
    Switch {
        name: "stats-missing",
        arg: Arg::Value("cpuUsageCoreNanoSeconds|memoryWorkingSetBytes|logsAvailableBytes"),
        breaks: "removes that field from every /stats/summary answer",
    },
    Switch {
        name: "pull-policy-ignored",
        arg: Arg::None,
        breaks: "the runtime ignores imagePullPolicy (Never pulls, Always uses the cache)",
    },
    Switch {
        name: "read-only-writable",
        arg: Arg::None,
        breaks: "read-only volume mounts accept writes",
    },
    Switch {
        name: "limits-not-applied",
        arg: Arg::None,
        breaks: "the runtime does not enforce CPU limits",
    },
    Switch {
        name: "controller-stopped",
        arg: Arg::Value(
            "scheduler|namespace|serviceaccount|endpoints|replicaset|deployment|daemonset|statefulset|job|cronjob|garbagecollector|resourcequota",
        ),
        breaks: "that control-plane loop never runs (as if kube-controller-manager lost it)",
    },
    Switch {
        name: "endpoints-emptied",
        arg: Arg::None,
        breaks: "the endpoints controller publishes every Service's Endpoints and EndpointSlices with no addresses",
    },
    Switch {
        name: "session-affinity-ignored",
        arg: Arg::None,
        breaks: "kube-proxy ignores sessionAffinity ClientIP and balances every connection",
    },
    Switch {
        name: "external-unreachable",
        arg: Arg::None,
        breaks: "pod traffic to the outside world is dropped (no outbound NAT); ping included",
    },
    Switch {
        name: "admission-off",
        arg: Arg::Value("LimitRanger|ResourceQuota"),
        breaks: "the API server runs without that admission plugin (no LimitRange defaults and limits, no quota enforcement)",
    },
    Switch {
        name: "volume-updates-stopped",
        arg: Arg::None,
        breaks: "kubelets never resync ConfigMap, Secret, downward API and projected volume contents after the pod starts",
    },
    Switch {
        name: "hooks-ignored",
        arg: Arg::None,
        breaks: "the kubelet never runs postStart/preStop lifecycle hooks",
    },
    Switch {
        name: "probes-ignored",
        arg: Arg::None,
        breaks: "the kubelet never runs probes: containers are ready at once and never restarted by liveness",
    },
    Switch {
        name: "exit-codes-lost",
        arg: Arg::None,
        breaks: "the runtime loses exit codes: every terminated container reports exit code 0 (Completed)",
    },
    Switch {
        name: "termination-message-lost",
        arg: Arg::None,
        breaks: "the kubelet never fills state.terminated.message (neither from the file nor from logs)",
    },
    Switch {
        name: "deadline-ignored",
        arg: Arg::None,
        breaks: "the kubelet never enforces a pod's activeDeadlineSeconds",
    },
    Switch {
        name: "cronjob-concurrency-forced",
        arg: Arg::Value("Allow|Forbid|Replace"),
        breaks: "the CronJob controller ignores each CronJob's concurrencyPolicy and applies this one to all",
    },
    Switch {
        name: "cronjob-suspend-ignored",
        arg: Arg::None,
        breaks: "the CronJob controller ignores spec.suspend and keeps starting Jobs",
    },
    Switch {
        name: "job-backoff-ignored",
        arg: Arg::None,
        breaks: "the Job controller never applies backoffLimit: failed pods are replaced forever",
    },
    Switch {
        name: "job-completions-ignored",
        arg: Arg::None,
        breaks: "the Job controller treats every Job as a work queue: it completes once a pod succeeds and none runs",
    },
    Switch {
        name: "statefulset-unordered",
        arg: Arg::None,
        breaks: "the StatefulSet controller creates and deletes pods all at once, ignoring OrderedReady and readiness",
    },
    Switch {
        name: "revision-history-limit-ignored",
        arg: Arg::None,
        breaks: "the Deployment controller keeps every old ReplicaSet, whatever revisionHistoryLimit says",
    },
    Switch {
        name: "deployment-recreate-ignored",
        arg: Arg::None,
        breaks: "the Deployment controller rolls Recreate Deployments like RollingUpdate (new pods start before old ones go)",
    },
    Switch {
        name: "daemonset-ignores-node-selector",
        arg: Arg::None,
        breaks: "the DaemonSet controller creates a daemon pod for every node, ignoring the template's nodeSelector and affinity",
    },
    Switch {
        name: "daemonset-failed-pods-kept",
        arg: Arg::None,
        breaks: "the DaemonSet controller leaves Failed daemon pods in place instead of replacing them",
    },
    Switch {
        name: "run-as-username-ignored",
        arg: Arg::None,
        breaks: "the Windows runtime ignores runAsUserName: containers run as the image's default user",
    },
    Switch {
        name: "termination-stuck",
        arg: Arg::None,
        breaks: "the kubelet never acts on a pod's deletion: containers keep running and the pod stays Terminating",
    },
    Switch {
        name: "host-ip-unreported",
        arg: Arg::None,
        breaks: "the kubelet reports no status.hostIP/hostIPs for its pods (no usable node IP)",
    },
    Switch {
        name: "exec-broken",
        arg: Arg::None,
        breaks: "the container runtime's exec fails: kubectl exec, exec probes and exec hooks all error",
    },
    Switch {
        name: "logs-lost",
        arg: Arg::None,
        breaks: "the runtime never records container output: every container log is empty",
    },
    Switch {
        name: "service-env-missing",
        arg: Arg::None,
        breaks: "the kubelet injects no Service environment variables (FOO_SERVICE_HOST...) into containers",
    },
    Switch {
        name: "init-containers-skipped",
        arg: Arg::None,
        breaks: "the kubelet starts app containers without running the pod's init containers",
    },
    Switch {
        name: "fallback-to-logs-always",
        arg: Arg::None,
        breaks: "FallbackToLogsOnError uses the log tail as termination message even when the container succeeded",
    },
    Switch {
        name: "env-expansion-off",
        arg: Arg::None,
        breaks: "the kubelet passes $(VAR) references in command, args and env values through unexpanded",
    },
    Switch {
        name: "downward-env-missing",
        arg: Arg::None,
        breaks: "the kubelet resolves downward API env vars (fieldRef, resourceFieldRef) to empty strings",
    },
    Switch {
        name: "boot-id-missing",
        arg: Arg::None,
        breaks: "the kubelet reports an empty node.status.nodeInfo.bootID",
    },
    Switch {
        name: "run-as-non-root-ignored",
        arg: Arg::None,
        breaks: "the kubelet never verifies runAsNonRoot: root users start",
    },
    Switch {
        name: "pull-secrets-ignored",
        arg: Arg::None,
        breaks: "the kubelet passes no imagePullSecrets credentials to the runtime",
    },
    Switch {
        name: "registry-auth-off",
        arg: Arg::None,
        breaks: "private registries serve their images without credentials (misconfigured public)",
    },
    Switch {
        name: "host-network-allowed",
        arg: Arg::None,
        breaks: "Windows kubelets create hostNetwork sandboxes for pods that are not HostProcess pods",
    },
    Switch {
        name: "image-cache-off",
        arg: Arg::None,
        breaks: "the runtime keeps no image store: no image is ever present on a node",
    },
    Switch {
        name: "registry-unreachable",
        arg: Arg::None,
        breaks: "nodes cannot reach any registry: every pull fails with an i/o timeout",
    },
    Switch {
        name: "pull-errors-hidden",
        arg: Arg::None,
        breaks: "the kubelet reports failing pulls as ContainerCreating (no ErrImagePull/ImagePullBackOff)",
    },
    Switch {
        name: "slow-container-starts",
        arg: Arg::None,
        breaks: "every sandbox + container start takes 35 s longer (an overloaded node)",
    },
    Switch {
        name: "errors-unexplained",
        arg: Arg::None,
        breaks: "the runtime reports pull and container-create failures as \"unknown error\", without their cause",
    },
    Switch {
        name: "volume-content-missing",
        arg: Arg::None,
        breaks: "kubelets mount ConfigMap, Secret, downward API and projected volumes empty (no files published)",
    },
    Switch {
        name: "emptydir-not-shared",
        arg: Arg::None,
        breaks: "each container of a pod gets a private emptyDir instead of the pod's shared one",
    },
    Switch {
        name: "named-pipes-as-directories",
        arg: Arg::None,
        breaks: "Windows kubelets mount a hostPath named pipe (\\\\.\\pipe\\NAME) as an empty directory instead of mapping the host's pipe (a runtime without named-pipe support)",
    },
    Switch {
        name: "unsupported-mounts-accepted",
        arg: Arg::None,
        breaks: "Windows kubelets silently accept emptyDir medium Memory and subPath/single-file mounts instead of failing the container",
    },
    Switch {
        name: "allocatable-misreported",
        arg: Arg::None,
        breaks: "kubelets report allocatable memory equal to capacity (no reservations or eviction thresholds)",
    },
    Switch {
        name: "linux-fields-enforced",
        arg: Arg::None,
        breaks: "Windows runtimes fail containers that carry Linux-only securityContext fields instead of ignoring them",
    },
    Switch {
        name: "preemption-off",
        arg: Arg::None,
        breaks: "the scheduler never preempts lower-priority pods for a pod that does not fit",
    },
    Switch {
        name: "validation-off",
        arg: Arg::Value("config-keys|immutable"),
        breaks: "the API server stops validating ConfigMap/Secret data keys, or lets immutable ConfigMaps/Secrets change",
    },
    Switch {
        name: "config-env-missing",
        arg: Arg::None,
        breaks: "the kubelet drops environment variables from ConfigMaps and Secrets (configMapKeyRef, secretKeyRef, envFrom)",
    },
    Switch {
        name: "pod-os-validation-off",
        arg: Arg::None,
        breaks: "the API server accepts Linux-only and privileged fields on pods with spec.os.name windows",
    },
];

/// An error in a `--faults` specification.
#[derive(Debug, thiserror::Error)]
pub enum FaultSpecError {
    /// An entry the parser does not know.
    #[error("unknown fault {0:?} (known: {known})", known = known_list())]
    Unknown(String),
    /// A fault that needs a value was given none, or a bad one.
    #[error("fault {0:?} needs a value: {0}={1}")]
    BadValue(String, &'static str),
    /// A flag was given a value.
    #[error("fault {0:?} takes no value")]
    UnexpectedValue(String),
}

fn known_list() -> String {
    SWITCHES
        .iter()
        .map(|s| match s.arg {
            Arg::None => s.name.to_string(),
            Arg::Value(v) => format!("{}={v}", s.name),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Which `/stats/summary` field the `stats-missing` switch removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StatsField {
    /// Container and pod `cpu.usageCoreNanoSeconds`.
    CpuUsageCoreNanoSeconds,
    /// Container and pod `memory.workingSetBytes`.
    MemoryWorkingSetBytes,
    /// Container `logs.availableBytes`.
    LogsAvailableBytes,
}

/// The switches that are on, shared by every part of one simulated cluster and settable at run
/// time. A flag is stored with the empty value.
#[derive(Debug, Default)]
pub struct Faults {
    on: RwLock<BTreeMap<&'static str, BTreeSet<String>>>,
}

impl Faults {
    /// Parses a comma-separated `--faults` spec such as `dns-stopped,blackhole=win-1`.
    pub fn parse(spec: &str) -> Result<Self, FaultSpecError> {
        let f = Faults::default();
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (key, value) = match item.split_once('=') {
                Some((k, v)) => (k.trim(), Some(v.trim())),
                None => (item, None),
            };
            let switch = SWITCHES
                .iter()
                .find(|s| s.name == key)
                .ok_or_else(|| FaultSpecError::Unknown(item.to_string()))?;
            match (switch.arg, value) {
                (Arg::None, None) => f.set(switch.name, "", true),
                (Arg::None, Some(_)) => return Err(FaultSpecError::UnexpectedValue(key.to_string())),
                (Arg::Value(what), None) => return Err(FaultSpecError::BadValue(key.to_string(), what)),
                (Arg::Value(what), Some(v)) => {
                    let not_allowed = what.contains('|') && !what.split('|').any(|a| a == v);
                    let bad_rate =
                        switch.name == crate::api::transient::SWITCH && crate::api::transient::parse_rate(v).is_none();
                    if v.is_empty() || not_allowed || bad_rate {
                        return Err(FaultSpecError::BadValue(key.to_string(), what));
                    }
                    f.set(switch.name, v, true);
                }
            }
        }
        Ok(f)
    }

    /// Turns `name` (with `value`, empty for a flag) on or off. Unknown names are ignored with a
    /// debug assertion: callers use the names of [`SWITCHES`].
    pub fn set(&self, name: &str, value: &str, on: bool) {
        let Some(switch) = SWITCHES.iter().find(|s| s.name == name) else {
            debug_assert!(false, "unknown fault switch {name}");
            return;
        };
        let mut map = self.on.write().expect("faults lock");
        let values = map.entry(switch.name).or_default();
        if on {
            values.insert(value.to_string());
        } else {
            values.remove(value);
        }
    }

    /// Whether the flag `name` is on (or, for a switch with values, whether any value is).
    pub fn is_on(&self, name: &str) -> bool {
        self.on
            .read()
            .expect("faults lock")
            .get(name)
            .is_some_and(|v| !v.is_empty())
    }

    /// Whether `name` is on for `value` (a node, a controller).
    pub fn applies_to(&self, name: &str, value: &str) -> bool {
        self.on
            .read()
            .expect("faults lock")
            .get(name)
            .is_some_and(|v| v.contains(value))
    }

    /// The values `name` is on for.
    pub fn values(&self, name: &str) -> Vec<String> {
        self.on
            .read()
            .expect("faults lock")
            .get(name)
            .map(|v| v.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Drops all pod traffic to and from pods of `node` (a dead CNI on that node).
    pub fn set_blackholed(&self, node: &str, on: bool) {
        self.set("blackhole", node, on);
    }
    /// Whether `node`'s pod network is blackholed.
    pub fn is_blackholed(&self, node: &str) -> bool {
        self.applies_to("blackhole", node)
    }
    /// Turns kube-proxy off for `node`: its NodePorts refuse and its pods cannot reach
    /// ClusterIPs.
    pub fn set_kube_proxy_off(&self, node: &str, on: bool) {
        self.set("kube-proxy-off", node, on);
    }
    /// Whether kube-proxy is off on `node`.
    pub fn is_kube_proxy_off(&self, node: &str) -> bool {
        self.applies_to("kube-proxy-off", node)
    }
    /// Stops the cluster DNS from answering (queries time out).
    pub fn set_dns_stopped(&self, on: bool) {
        self.set("dns-stopped", "", on);
    }
    /// Whether the cluster DNS is stopped.
    pub fn dns_stopped(&self) -> bool {
        self.is_on("dns-stopped")
    }
    /// Removes one field from every `/stats/summary` answer (`None` restores them all).
    pub fn set_stats_missing(&self, field: Option<StatsField>) {
        self.on.write().expect("faults lock").remove("stats-missing");
        if let Some(field) = field
            && let Ok(serde_json::Value::String(name)) = serde_json::to_value(field)
        {
            self.set("stats-missing", &name, true);
        }
    }
    /// The stats field currently removed, if any.
    pub fn stats_missing(&self) -> Option<StatsField> {
        self.values("stats-missing")
            .into_iter()
            .find_map(|v| serde_json::from_value(serde_json::Value::String(v)).ok())
    }
    /// Makes the runtime ignore imagePullPolicy (Never pulls, Always uses the cache).
    pub fn set_pull_policy_ignored(&self, on: bool) {
        self.set("pull-policy-ignored", "", on);
    }
    /// Whether imagePullPolicy is ignored.
    pub fn pull_policy_ignored(&self) -> bool {
        self.is_on("pull-policy-ignored")
    }
    /// Makes read-only volume mounts accept writes.
    pub fn set_read_only_writable(&self, on: bool) {
        self.set("read-only-writable", "", on);
    }
    /// Whether read-only mounts accept writes.
    pub fn read_only_writable(&self) -> bool {
        self.is_on("read-only-writable")
    }
    /// Stops the runtime from enforcing CPU limits.
    pub fn set_limits_not_applied(&self, on: bool) {
        self.set("limits-not-applied", "", on);
    }
    /// Whether CPU limits are ignored.
    pub fn limits_not_applied(&self) -> bool {
        self.is_on("limits-not-applied")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_flags_and_values() {
        let f = Faults::parse("dns-stopped, blackhole=win-1,blackhole=win-2,stats-missing=logsAvailableBytes").unwrap();
        assert!(f.dns_stopped());
        assert!(f.is_blackholed("win-1") && f.is_blackholed("win-2") && !f.is_blackholed("linux-1"));
        assert_eq!(f.stats_missing(), Some(StatsField::LogsAvailableBytes));
        assert!(!f.pull_policy_ignored());
        f.set_blackholed("win-1", false);
        assert!(!f.is_blackholed("win-1"));
    }

    #[test]
    fn rejects_what_it_does_not_know() {
        let unknown = Faults::parse("dns-stoped").unwrap_err().to_string();
        assert!(
            unknown.contains("dns-stoped") && unknown.contains("controller-stopped="),
            "{unknown}"
        );
        assert!(matches!(Faults::parse("blackhole"), Err(FaultSpecError::BadValue(..))));
        assert!(matches!(Faults::parse("blackhole="), Err(FaultSpecError::BadValue(..))));
        assert!(matches!(
            Faults::parse("dns-stopped=yes"),
            Err(FaultSpecError::UnexpectedValue(_))
        ));
        assert!(matches!(
            Faults::parse("stats-missing=cpu"),
            Err(FaultSpecError::BadValue(..))
        ));
        assert!(matches!(
            Faults::parse("controller-stopped=kubelet"),
            Err(FaultSpecError::BadValue(..))
        ));
        assert!(
            Faults::parse("controller-stopped=deployment")
                .unwrap()
                .applies_to("controller-stopped", "deployment")
        );
    }

    #[test]
    fn every_switch_has_a_unique_name() {
        let names: BTreeSet<_> = SWITCHES.iter().map(|s| s.name).collect();
        assert_eq!(names.len(), SWITCHES.len());
    }

    #[test]
    fn controller_stopped_names_every_control_loop() {
        let switch = SWITCHES.iter().find(|s| s.name == "controller-stopped").unwrap();
        let Arg::Value(values) = switch.arg else {
            panic!("controller-stopped takes a value")
        };
        let named: BTreeSet<_> = values.split('|').collect();
        let loops: BTreeSet<_> = crate::control::Component::ALL.iter().map(|c| c.fault_name()).collect();
        assert_eq!(named, loops);
    }
}
