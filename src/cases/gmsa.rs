//! `[sig-windows] [Feature:Windows] GMSA Kubelet` (upstream test/e2e/windows/gmsa_kubelet.go):
//! the kubelet passes a pod's GMSA credential spec (`windowsOptions.gmsaCredentialSpec`, pod
//! level, overridden per container) down to the runtime, which joins each container to the
//! credential spec's Active Directory domain. Even with bogus credentials `nltest
//! /PARENTDOMAIN` in the container answers that domain, which is all the case needs: unlike
//! GMSA Full it needs no domain controller, so it is not feature-gated and runs on every
//! Windows node.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{SecurityContext, WindowsSecurityContextOptions};

use super::hostprocess::busybox;
use crate::catalog::{Case, Kind};
use crate::framework::{CaseError, CaseResult, ExecOutput, Framework};
use crate::{ensure, fail};

/// Upstream It("passes the credential specs down to the Pod's containers").
pub const KUBELET_PASSES_SPECS: &str = "[sig-windows] [Feature:Windows] GMSA Kubelet [Slow] kubelet GMSA support when creating a pod with correct GMSA credential specs passes the credential specs down to the Pod's containers";

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    vec![crate::case!(
        KUBELET_PASSES_SPECS,
        Kind::WindowsSpecific,
        kubelet_passes_specs
    )]
}

/// Upstream's `generateDummyCredSpecs`: a credential spec for `domain` with made-up account,
/// GUID and SID (the short name is the domain's first label, upper-cased).
pub(crate) fn dummy_cred_spec(domain: &str) -> String {
    let short = domain.split('.').next().unwrap_or(domain).to_ascii_uppercase();
    serde_json::json!({
        "ActiveDirectoryConfig": {
            "GroupManagedServiceAccounts": [
                {"Name": "WebApplication", "Scope": short},
                {"Name": "WebApplication", "Scope": domain},
            ]
        },
        "CmsPlugins": ["ActiveDirectory"],
        "DomainJoinConfig": {
            "DnsName": domain,
            "DnsTreeName": domain,
            "Guid": "244818ae-87ca-4fcd-92ec-e79e5252348a",
            "MachineAccountName": "WebApplication",
            "NetBiosName": short,
            "Sid": "S-1-5-21-2126729477-2524175714-3194792973",
        }
    })
    .to_string()
}

/// How long a container gets to answer `nltest` successfully (upstream allows a minute for
/// PowerShell containers that are slow to become responsive).
const NLTEST_WITHIN: Duration = Duration::from_secs(20);

/// Runs `nltest ARG` in `container` of `pod` once a second until it exits 0, at most
/// [`NLTEST_WITHIN`]; returns its output.
///
/// # Errors
/// A failure naming the container and nltest's last answer.
pub(crate) async fn nltest(f: &Framework, pod: &str, container: &str, arg: &str) -> Result<ExecOutput, CaseError> {
    let deadline = Instant::now() + NLTEST_WITHIN.min(f.remaining().saturating_sub(Duration::from_secs(3)));
    // One exec per second: a rate limit on retries, not a fixed sleep.
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        let out = f.exec(pod, Some(container), vec!["nltest".into(), arg.into()]).await?;
        if out.exit_code == 0 {
            return Ok(out);
        }
        if Instant::now() >= deadline {
            fail!(
                "`nltest {arg}` in container {container} of pod {pod} should succeed within {NLTEST_WITHIN:?} \
                 (the container is joined to its GMSA credential spec's domain); last: exit {} stdout {:?} \
                 stderr {:?}",
                out.exit_code,
                out.stdout.trim(),
                out.stderr.trim()
            );
        }
    }
}

/// Upstream: a pod with a pod-level credential spec for `acme.com` and a second container
/// overriding it with one for `contoso.org` becomes Running; `nltest /PARENTDOMAIN` in each
/// container starts with that container's domain and reports success.
async fn kubelet_passes_specs(f: &Framework) -> CaseResult {
    const POD: &str = "with-correct-gmsa-specs";
    let (pod_domain, container2_domain) = ("acme.com", "contoso.org");
    let sleeper = ["powershell.exe", "-Command", "sleep -Seconds 600"];
    let pod_spec = dummy_cred_spec(pod_domain);
    let container_spec = dummy_cred_spec(container2_domain);
    let pod = f
        .pod(POD)
        .container(busybox("container1", &sleeper))
        .container(busybox("container2", &sleeper).with(move |c| {
            c.security_context = Some(SecurityContext {
                windows_options: Some(WindowsSecurityContextOptions {
                    gmsa_credential_spec: Some(container_spec.clone()),
                    ..Default::default()
                }),
                ..Default::default()
            });
        }))
        .edit_spec(move |spec| {
            let sc = spec.security_context.get_or_insert_with(Default::default);
            sc.windows_options = Some(WindowsSecurityContextOptions {
                gmsa_credential_spec: Some(pod_spec.clone()),
                ..Default::default()
            });
        });
    f.step("creating a pod with correct GMSA specs");
    f.create_pod_ready(&pod).await?;
    f.step("checking the domain reported by nltest in the containers");
    for (container, domain) in [("container1", pod_domain), ("container2", container2_domain)] {
        let out = nltest(f, POD, container, "/PARENTDOMAIN").await?;
        let text = out.stdout.trim_start();
        ensure!(
            text.starts_with(domain),
            "`nltest /PARENTDOMAIN` in container {container} of pod {POD} should start with the domain {domain:?} \
             of its credential spec; it printed {text:?}"
        );
        ensure!(
            text.contains("The command completed successfully"),
            "`nltest /PARENTDOMAIN` in container {container} of pod {POD} should say \"The command completed \
             successfully\"; it printed {text:?}"
        );
    }
    Ok(())
}
