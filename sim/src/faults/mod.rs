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

mod switches;
pub mod values;

pub use switches::{Arg, SWITCHES, Switch, TRANSIENT};

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
                    if v.is_empty() || not_allowed || !values::valid(switch.name, v) {
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
