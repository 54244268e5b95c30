//! The simulated control plane's feature gates (`--feature-gates Name=true,...`), for the
//! alpha features a real cluster runs only when its operator turns them on.
//!
//! The main type in this module is [`FeatureGates`]. Only gates the simulator models are
//! known; any other name is refused as kube-apiserver refuses an unknown gate, so a typo does
//! not silently leave a feature off. Defaults follow kube-apiserver 1.33
//! (pkg/features/versioned_kube_features.go).

use std::collections::BTreeMap;

/// Why a `--feature-gates` value does not parse.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GateError {
    /// A name the simulator does not model (kube-apiserver: "unrecognized feature gate").
    #[error("unrecognized feature gate: {name} (known: {known})")]
    Unknown {
        /// The name given.
        name: String,
        /// The gates the simulator models.
        known: String,
    },
    /// An entry that is not `Name=true` or `Name=false`.
    #[error("invalid value of {entry}: expected Name=true or Name=false")]
    Malformed {
        /// The entry given.
        entry: String,
    },
}

/// One gate the simulator models: its name, stage and 1.33 default.
#[derive(Debug, Clone, Copy)]
pub struct Gate {
    /// The upstream name.
    pub name: &'static str,
    /// `ALPHA`, `BETA` or `GA`.
    pub stage: &'static str,
    /// On unless turned off (false for alpha gates).
    pub default: bool,
    /// What turning it on changes in the simulator.
    pub effect: &'static str,
}

/// `ContainerStopSignals` (KEP-4960, alpha in 1.33).
pub const CONTAINER_STOP_SIGNALS: &str = "ContainerStopSignals";

/// `WindowsGracefulNodeShutdown` (KEP-4802, a kubelet gate, alpha in 1.32 and 1.33).
pub const WINDOWS_GRACEFUL_NODE_SHUTDOWN: &str = "WindowsGracefulNodeShutdown";

/// `ContainerRestartRules` (KEP-5307). 1.33 has no such gate: it is alpha from 1.34 (beta and on
/// by default from 1.35), so the simulator models a 1.33 cluster whose API server and kubelets
/// carry the 1.34 feature, off unless turned on.
pub const CONTAINER_RESTART_RULES: &str = "ContainerRestartRules";

/// Every gate the simulator models.
pub const GATES: &[Gate] = &[
    Gate {
        name: CONTAINER_RESTART_RULES,
        stage: "ALPHA",
        default: false,
        effect: "the API server keeps a pod container's restartPolicyRules and accepts a container-level \
                 restartPolicy on regular containers, validated as upstream's validateContainerRestartPolicy \
                 does; the kubelets restart a container whose exit code matches a Restart rule, else per its \
                 own restartPolicy, else per the pod's; off, the API server prunes restartPolicyRules as an \
                 unknown field and refuses restartPolicy on regular containers, as 1.33 does",
    },
    Gate {
        name: CONTAINER_STOP_SIGNALS,
        stage: "ALPHA",
        default: false,
        effect: "the API server keeps a container's lifecycle.stopSignal and validates it against the \
                 pod's spec.os.name (Windows: SIGTERM and SIGKILL only); off, it drops the field on write \
                 as upstream's dropDisabledFields does",
    },
    Gate {
        name: WINDOWS_GRACEFUL_NODE_SHUTDOWN,
        stage: "ALPHA",
        default: false,
        effect: "the Windows kubelets run their node shutdown manager (shutdownGracePeriod 10s, \
                 shutdownGracePeriodCriticalPods 5s): a host shutdown first kills the pods by priority \
                 group, marking them Failed (reason Terminated) with a DisruptionTarget condition; off, \
                 the machine goes down with its pods running",
    },
];

/// The gates of one cluster: every modelled gate at its default unless set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FeatureGates {
    set: BTreeMap<&'static str, bool>,
}

impl FeatureGates {
    /// Parses `Name=true,Other=false` (kube-apiserver's `--feature-gates` syntax).
    ///
    /// # Errors
    /// [`GateError`] naming the first entry that is malformed or unknown.
    pub fn parse(spec: &str) -> Result<FeatureGates, GateError> {
        let mut set = BTreeMap::new();
        for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (name, value) = entry.split_once('=').ok_or_else(|| GateError::Malformed {
                entry: entry.to_string(),
            })?;
            let on = match value.trim() {
                "true" => true,
                "false" => false,
                _ => {
                    return Err(GateError::Malformed {
                        entry: entry.to_string(),
                    });
                }
            };
            let gate = GATES
                .iter()
                .find(|g| g.name == name.trim())
                .ok_or_else(|| GateError::Unknown {
                    name: name.trim().to_string(),
                    known: GATES.iter().map(|g| g.name).collect::<Vec<_>>().join(", "),
                })?;
            set.insert(gate.name, on);
        }
        Ok(FeatureGates { set })
    }

    /// Whether gate `name` is on (its default when not set; off for a gate not modelled).
    pub fn enabled(&self, name: &str) -> bool {
        self.set
            .get(name)
            .copied()
            .or_else(|| GATES.iter().find(|g| g.name == name).map(|g| g.default))
            .unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alpha_gates_are_off_until_turned_on() {
        assert!(!FeatureGates::default().enabled(CONTAINER_STOP_SIGNALS));
        assert!(!FeatureGates::default().enabled(WINDOWS_GRACEFUL_NODE_SHUTDOWN));
        assert!(!FeatureGates::default().enabled(CONTAINER_RESTART_RULES));
        assert!(
            FeatureGates::parse("ContainerRestartRules=true")
                .unwrap()
                .enabled(CONTAINER_RESTART_RULES)
        );
        let both = FeatureGates::parse("ContainerStopSignals=true,WindowsGracefulNodeShutdown=true").unwrap();
        assert!(both.enabled(WINDOWS_GRACEFUL_NODE_SHUTDOWN));
        let on = FeatureGates::parse("ContainerStopSignals=true").unwrap();
        assert!(on.enabled(CONTAINER_STOP_SIGNALS));
        let off = FeatureGates::parse("ContainerStopSignals=false").unwrap();
        assert!(!off.enabled(CONTAINER_STOP_SIGNALS));
    }

    #[test]
    fn unknown_and_malformed_gates_are_refused() {
        let err = FeatureGates::parse("NoSuchGate=true").unwrap_err().to_string();
        assert!(err.contains("unrecognized feature gate: NoSuchGate"), "{err}");
        assert!(matches!(
            FeatureGates::parse("ContainerStopSignals"),
            Err(GateError::Malformed { .. })
        ));
        assert!(matches!(
            FeatureGates::parse("ContainerStopSignals=yes"),
            Err(GateError::Malformed { .. })
        ));
    }
}
