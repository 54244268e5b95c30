//! Latency profiles: how long pulls, sandbox and container starts and back-offs take.
//!
//! Profiles are data (serde, so a YAML file may override any field), not code. `realistic` is
//! anchored on what Windows jobs report (DESIGN.md "Latency profiles"): a cold pull of a
//! servercore-based Windows image about 5 minutes, a nanoserver-based one about 30 s; Windows
//! sandbox + container start p50 ≈ 10 s with a tail to ≈ 60 s; Linux pull ≈ 5 s, start ≈ 1 s.
//! `fast` keeps the same shape in milliseconds for tests.

use std::time::Duration;

use rand::Rng;
use serde::{Deserialize, Serialize};

use crossconf_model::os::Os;

/// The size class of an image, which decides its pull time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ImageWeight {
    /// A servercore-based Windows image (agnhost, busybox for Windows): minutes to pull.
    WindowsServerCore,
    /// A nanoserver-based Windows image (pause): tens of seconds.
    WindowsNanoServer,
    /// Any Linux image: seconds.
    Linux,
}

/// Delays of one simulated cluster, in milliseconds, before [`LatencyProfile::time_scale`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LatencyProfile {
    /// Cold pull of a servercore-based Windows image.
    pub pull_windows_servercore_ms: f64,
    /// Cold pull of a nanoserver-based Windows image.
    pub pull_windows_nanoserver_ms: f64,
    /// Cold pull of a Linux image.
    pub pull_linux_ms: f64,
    /// Median Windows sandbox + container start.
    pub start_windows_p50_ms: f64,
    /// The slowest Windows starts (the tail of the distribution).
    pub start_windows_max_ms: f64,
    /// Linux sandbox + container start.
    pub start_linux_ms: f64,
    /// First CrashLoopBackOff / ImagePullBackOff delay (the kubelet's 10 s).
    pub backoff_initial_ms: f64,
    /// Back-off cap (the kubelet's 5 min).
    pub backoff_max_ms: f64,
    /// Node status heartbeat period (the kubelet's nodeStatusUpdateFrequency, 10 s).
    pub node_status_ms: f64,
    /// Node Lease renewal period (the kubelet renews every 10 s).
    pub lease_renew_ms: f64,
    /// kube-apiserver's storage compaction interval (`--etcd-compaction-interval`, 5 min): a
    /// resourceVersion, and a continue token carrying it, stays readable one to two of these.
    pub compaction_interval_ms: f64,
    /// How long a node keeps reporting a pressure condition after the eviction manager last
    /// saw its threshold met (the kubelet's `evictionPressureTransitionPeriod`, 5 min).
    pub pressure_transition_ms: f64,
    /// Multiplies every delay above (`--time-scale`).
    pub time_scale: f64,
}

impl Default for LatencyProfile {
    fn default() -> Self {
        LatencyProfile::fast()
    }
}

impl LatencyProfile {
    /// Milliseconds everywhere, for tests: the whole catalogue runs in minutes.
    pub fn fast() -> Self {
        LatencyProfile {
            pull_windows_servercore_ms: 30.0,
            pull_windows_nanoserver_ms: 10.0,
            pull_linux_ms: 5.0,
            start_windows_p50_ms: 20.0,
            start_windows_max_ms: 60.0,
            start_linux_ms: 5.0,
            backoff_initial_ms: 500.0,
            backoff_max_ms: 15_000.0,
            node_status_ms: 2_000.0,
            lease_renew_ms: 2_000.0,
            compaction_interval_ms: 10_000.0,
            pressure_transition_ms: 6_000.0,
            time_scale: 1.0,
        }
    }

    /// Windows-like delays, from what upstream Windows jobs report.
    pub fn realistic() -> Self {
        LatencyProfile {
            pull_windows_servercore_ms: 300_000.0,
            pull_windows_nanoserver_ms: 30_000.0,
            pull_linux_ms: 5_000.0,
            start_windows_p50_ms: 10_000.0,
            start_windows_max_ms: 60_000.0,
            start_linux_ms: 1_000.0,
            backoff_initial_ms: 10_000.0,
            backoff_max_ms: 300_000.0,
            node_status_ms: 10_000.0,
            lease_renew_ms: 10_000.0,
            compaction_interval_ms: 300_000.0,
            pressure_transition_ms: 300_000.0,
            time_scale: 1.0,
        }
    }

    /// The profile named on the command line (`fast` or `realistic`).
    pub fn named(name: &str) -> Option<Self> {
        match name {
            "fast" => Some(Self::fast()),
            "realistic" => Some(Self::realistic()),
            _ => None,
        }
    }

    /// This profile with every delay multiplied by `f` (`--time-scale`).
    #[must_use]
    pub fn scaled(mut self, f: f64) -> Self {
        self.time_scale *= f;
        self
    }

    fn ms(&self, ms: f64) -> Duration {
        Duration::from_secs_f64((ms * self.time_scale).max(0.0) / 1000.0)
    }

    /// How long a cold pull of an image of `weight` takes.
    pub fn pull(&self, weight: ImageWeight) -> Duration {
        self.ms(match weight {
            ImageWeight::WindowsServerCore => self.pull_windows_servercore_ms,
            ImageWeight::WindowsNanoServer => self.pull_windows_nanoserver_ms,
            ImageWeight::Linux => self.pull_linux_ms,
        })
    }

    /// One draw of a sandbox + container start on `os`.
    ///
    /// Windows starts follow a skewed distribution: most near the p50, one in ten in the tail
    /// towards the maximum (upstream density limits are p50/p90/p99 = 30/54/59 s).
    pub fn start(&self, os: Os) -> Duration {
        match os {
            Os::Linux => self.ms(self.start_linux_ms),
            Os::Windows => {
                let mut rng = rand::rng();
                let p50 = self.start_windows_p50_ms;
                let ms = if rng.random_bool(0.1) {
                    rng.random_range(p50..=self.start_windows_max_ms.max(p50))
                } else {
                    rng.random_range(p50 * 0.6..=p50 * 1.4)
                };
                self.ms(ms)
            }
        }
    }

    /// The back-off before restart number `n` (0-based): initial, doubling, capped.
    pub fn backoff(&self, n: u32) -> Duration {
        let ms = self.backoff_initial_ms * 2f64.powi(n.min(30) as i32);
        self.ms(ms.min(self.backoff_max_ms))
    }

    /// The node status heartbeat period.
    pub fn node_status(&self) -> Duration {
        self.ms(self.node_status_ms)
    }

    /// The Lease renewal period.
    pub fn lease_renew(&self) -> Duration {
        self.ms(self.lease_renew_ms)
    }

    /// The API server's storage compaction interval.
    pub fn compaction_interval(&self) -> Duration {
        self.ms(self.compaction_interval_ms)
    }

    /// How long a pressure condition outlives the last threshold pass that met it.
    pub fn pressure_transition(&self) -> Duration {
        self.ms(self.pressure_transition_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        let p = LatencyProfile::realistic();
        assert_eq!(p.backoff(0), Duration::from_secs(10));
        assert_eq!(p.backoff(1), Duration::from_secs(20));
        assert_eq!(p.backoff(10), Duration::from_secs(300));
        let fast = p.scaled(0.05);
        assert_eq!(fast.backoff(0), Duration::from_millis(500));
    }

    #[test]
    fn realistic_windows_pulls_are_minutes_and_scale() {
        let p = LatencyProfile::realistic();
        assert_eq!(p.pull(ImageWeight::WindowsServerCore), Duration::from_secs(300));
        assert_eq!(
            p.clone().scaled(0.1).pull(ImageWeight::WindowsNanoServer),
            Duration::from_secs(3)
        );
        let s = p.start(Os::Windows);
        assert!(s >= Duration::from_secs(6) && s <= Duration::from_secs(60), "{s:?}");
    }

    #[test]
    fn yaml_overrides_fields() {
        let p: LatencyProfile = serde_saphyr::from_str("pullLinuxMs: 42\ntimeScale: 2\n").unwrap();
        assert_eq!(p.pull(ImageWeight::Linux), Duration::from_millis(84));
        assert_eq!(p.backoff_initial_ms, LatencyProfile::fast().backoff_initial_ms);
    }
}
