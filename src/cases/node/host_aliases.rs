//! `spec.hostAliases` in the kubelet-managed hosts file (upstream
//! `test/e2e/common/node/kubelet.go`, context "when scheduling an agnhost Pod with
//! hostAliases"): each alias becomes one line, the IP then its hostnames tab-separated.

use k8s_openapi::api::core::v1::{HostAlias, PodSpec};

use crate::case;
use crate::catalog::{Case, Kind};
use crate::ensure;
use crate::framework::{CaseResult, ContainerBuilder, Framework, pod_node};

/// The cases of this group.
pub(super) fn cases() -> Vec<Case> {
    vec![case!(HOST_ALIASES, Kind::Adapted, host_aliases)]
}

/// Upstream kubelet.go "should write entries to /etc/hosts" (hostAliases).
pub(crate) const HOST_ALIASES: &str = "[sig-node] Kubelet when scheduling an agnhost Pod with hostAliases should \
     write entries to /etc/hosts [NodeConformance] [Conformance]";

/// Upstream's alias: one IP with two hostnames.
const ALIAS_IP: &str = "123.45.67.89";

/// A run-once `agnhost etc-hosts` pod with alias 123.45.67.89 → foo, bar prints its hosts file,
/// which must hold `123.45.67.89\tfoo\tbar`. Windows nodes do not manage the hosts file (the
/// OS profile's [`crate::os::Os::manages_etc_hosts`]), which the case gives as its skip reason.
async fn host_aliases(f: &Framework) -> CaseResult {
    let os = f.target_os();
    f.skip_unless(
        os.manages_etc_hosts(),
        format!("the kubelet does not manage /etc/hosts on {} nodes", os.title()),
    )?;
    let name = "agnhost-host-aliases";
    let builder = f
        .pod(name)
        .container(ContainerBuilder::new(name, "agnhost").args(["etc-hosts"]))
        .edit_spec(|s: &mut PodSpec| {
            s.host_aliases = Some(vec![HostAlias {
                ip: ALIAS_IP.into(),
                hostnames: Some(vec!["foo".into(), "bar".into()]),
            }]);
        });
    let done = f.run_pod_to_completion(&builder).await?;
    let hosts = f.logs(name, Some(name)).await?;
    let want = format!("{ALIAS_IP}\tfoo\tbar");
    ensure!(
        hosts.contains(&want),
        "pod {name} on node {} with hostAliases {ALIAS_IP} → foo, bar: expected its hosts file to contain {want:?}, got:\n{hosts}",
        pod_node(&done)
    );
    Ok(())
}
