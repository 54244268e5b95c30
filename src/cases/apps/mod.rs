//! Adapted cases: workload controllers (`[sig-apps]` ReplicaSet, ReplicationController,
//! Deployment, StatefulSet, DaemonSet, Job, CronJob) and the adapted Service cases
//! (`[sig-network] Services`, `LoadBalancers`).
//!
//! Controllers are built from the OS-aware pod builder through
//! [`crate::framework::workloads`], so every pod they create lands on the target OS with the
//! right image; a DaemonSet covers exactly the nodes of that OS.

mod batch;
mod controller_revision;
mod controllers;
mod daemonset_api;
mod daemonset_update;
mod deployment_rollout;
mod job_policy;
mod service_types;
mod services;
mod statefulset_evicted;
mod statefulset_partition;
mod statefulset_update;

use k8s_openapi::api::core::v1::{ExecAction, Probe};

use crate::catalog::Case;
use crate::framework::{CaseResult, Framework};
use crate::os::Os;

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    let mut cases = controllers::cases();
    cases.extend(batch::cases());
    cases.extend(daemonset_api::cases());
    cases.extend(deployment_rollout::cases());
    cases.extend(job_policy::cases());
    cases.extend(controller_revision::cases());
    cases.extend(daemonset_update::cases());
    cases.extend(statefulset_update::cases());
    cases.extend(statefulset_partition::cases());
    cases.extend(statefulset_evicted::cases());
    cases.extend(services::cases());
    cases.extend(service_types::cases());
    cases
}

/// A readiness gate the case opens by hand: a file in emptyDir `ready` that the pods' readiness
/// probe reads, absent (so the pods stay unready) until the case writes it in a pod.
///
/// The StatefulSet ordering case and the unready-endpoints Service case both hold pods unready
/// this way (upstream uses a probe on a file too).
struct ReadyFile {
    os: Os,
    /// The emptyDir's mount point.
    dir: String,
    /// The file the probe reads.
    file: String,
}

impl ReadyFile {
    fn new(os: Os) -> ReadyFile {
        let dir = os.join(os.volume_root(), "ready");
        let file = os.join(&dir, "ready");
        ReadyFile { os, dir, file }
    }

    /// The readiness probe: `cat` the file, every second.
    fn probe(&self) -> Probe {
        Probe {
            exec: Some(ExecAction {
                command: Some(self.os.shell(&self.os.cat(&self.file))),
            }),
            period_seconds: Some(1),
            ..Default::default()
        }
    }

    /// Writes the file in pod `pod`, which makes it ready at its next probe.
    async fn write(&self, f: &Framework, pod: &str) -> CaseResult {
        let wrote = f
            .exec_shell(pod, None, self.os, &self.os.write_file(&self.file, "ok"))
            .await?;
        crate::ensure!(
            wrote.exit_code == 0,
            "writing the readiness file in {pod} failed: {:?}",
            wrote.stderr
        );
        Ok(())
    }

    /// Removes the file in pod `pod`, which makes it unready at its next probe (upstream
    /// `breakHTTPProbe` moves the page its HTTP probe reads away).
    async fn remove(&self, f: &Framework, pod: &str) -> CaseResult {
        let removed = f
            .exec_shell(pod, None, self.os, &self.os.remove_file(&self.file))
            .await?;
        crate::ensure!(
            removed.exit_code == 0,
            "removing the readiness file in {pod} failed: {:?}",
            removed.stderr
        );
        Ok(())
    }
}

/// Every adapted case of issue 7, in registration order (pods, config, probes, apps, policy).
pub fn adapted_cases() -> Vec<Case> {
    let mut all = super::pods::cases();
    all.extend(super::config::cases());
    all.extend(super::volumes::basic_cases());
    all.extend(super::probes::cases());
    all.extend(cases());
    all.extend(super::policy::cases());
    all
}

#[cfg(test)]
mod tests {
    use super::adapted_cases;
    use crate::catalog::Tag;

    const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/adapted_cases.txt");

    /// `tests/fixtures/adapted_cases.txt` lists exactly the registered adapted cases, one per
    /// line. Set `CROSSCONF_BLESS=1` to rewrite it after adding a case.
    #[test]
    fn fixture_lists_every_adapted_case() {
        let names: Vec<&str> = adapted_cases().iter().map(|c| c.name).collect();
        let text = names.join("\n") + "\n";
        if std::env::var_os("CROSSCONF_BLESS").is_some() {
            std::fs::write(FIXTURE, &text).expect("writing the fixture");
        }
        let fixture = std::fs::read_to_string(FIXTURE).expect("reading the fixture");
        assert_eq!(
            fixture, text,
            "tests/fixtures/adapted_cases.txt is stale; rerun with CROSSCONF_BLESS=1"
        );
    }

    #[test]
    fn at_least_sixty_adapted_cases_with_unique_names() {
        let cases = adapted_cases();
        let unique: std::collections::BTreeSet<&str> = cases.iter().map(|c| c.name).collect();
        assert_eq!(unique.len(), cases.len(), "duplicate adapted case names");
        assert!(cases.len() >= 60, "only {} adapted cases", cases.len());
        assert!(cases.iter().all(|c| c.kind == crate::catalog::Kind::Adapted));
        assert!(
            cases.iter().all(|c| c.tags.iter().any(|t| matches!(t, Tag::Sig(_)))),
            "every case names its SIG"
        );
    }

    #[test]
    fn linux_only_cases_are_scoped_to_linux() {
        let linux_only: Vec<_> = adapted_cases()
            .into_iter()
            .filter(|c| c.has_tag(&Tag::LinuxOnly))
            .collect();
        assert!(!linux_only.is_empty());
        for c in linux_only {
            assert_eq!(
                c.os_scope(),
                crate::catalog::OsScope::Only(crate::os::Os::Linux),
                "{}",
                c.name
            );
        }
    }
}
