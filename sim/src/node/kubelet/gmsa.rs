//! GMSA credential specs on Windows nodes, as the kubelet and containerd 1.7 + hcsshim pass
//! them down: the kubelet hands the runtime the container's
//! `securityContext.windowsOptions.gmsaCredentialSpec` (else the pod's), and hcsshim gives the
//! container the Active Directory identity the spec's `DomainJoinConfig` names. Even with
//! bogus credentials (no reachable domain controller) the container reports that domain as
//! its parent domain (`nltest /PARENTDOMAIN`), which is what upstream's GMSA Kubelet case
//! relies on (test/e2e/windows/gmsa_kubelet.go). A container without a credential spec is not
//! domain-joined.

use k8s_openapi::api::core::v1::{Container, Pod, WindowsSecurityContextOptions};
use serde::Deserialize;

/// The domain identity a credential spec gives a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainJoin {
    /// `DomainJoinConfig.DnsName`, e.g. `contoso.org`.
    pub dns_name: String,
    /// `DomainJoinConfig.NetBiosName`, e.g. `CONTOSO`.
    pub netbios_name: String,
    /// `ActiveDirectoryConfig.GroupManagedServiceAccounts[].Name`: the gMSA accounts the
    /// container may log on as (a domain controller must hold one for the secure channel).
    pub accounts: Vec<String>,
}

/// The parts of a credential spec hcsshim reads for the domain join.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct CredSpec {
    domain_join_config: Option<DomainJoinConfig>,
    active_directory_config: Option<ActiveDirectoryConfig>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ActiveDirectoryConfig {
    #[serde(default)]
    group_managed_service_accounts: Vec<Gmsa>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Gmsa {
    name: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct DomainJoinConfig {
    dns_name: Option<String>,
    net_bios_name: Option<String>,
}

fn spec_of(w: Option<&WindowsSecurityContextOptions>) -> Option<&str> {
    w.and_then(|w| w.gmsa_credential_spec.as_deref())
}

/// The credential spec container `c` of `pod` runs with: its own, else the pod's (the
/// kubelet's `determineEffectiveSecurityContext` merge of `windowsOptions`).
pub fn credential_spec<'a>(pod: &'a Pod, c: &'a Container) -> Option<&'a str> {
    spec_of(c.security_context.as_ref().and_then(|s| s.windows_options.as_ref())).or_else(|| {
        spec_of(
            pod.spec
                .as_ref()
                .and_then(|s| s.security_context.as_ref())
                .and_then(|s| s.windows_options.as_ref()),
        )
    })
}

/// The domain a credential spec joins the container to, if it names one (a spec that is not
/// JSON or has no `DomainJoinConfig.DnsName` joins none).
pub fn domain_join(spec: &str) -> Option<DomainJoin> {
    let parsed: CredSpec = serde_json::from_str(spec).ok()?;
    let cfg = parsed.domain_join_config?;
    let dns_name = cfg.dns_name.filter(|d| !d.is_empty())?;
    let netbios_name = cfg
        .net_bios_name
        .unwrap_or_else(|| dns_name.split('.').next().unwrap_or(&dns_name).to_ascii_uppercase());
    let mut accounts: Vec<String> = parsed
        .active_directory_config
        .map(|c| {
            c.group_managed_service_accounts
                .into_iter()
                .filter_map(|g| g.name)
                .collect()
        })
        .unwrap_or_default();
    accounts.dedup();
    Some(DomainJoin {
        dns_name,
        netbios_name,
        accounts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSecurityContext, PodSpec, SecurityContext};

    fn spec(domain: &str) -> String {
        format!(
            r#"{{"CmsPlugins":["ActiveDirectory"],"DomainJoinConfig":{{"DnsName":"{domain}","NetBiosName":"ACME"}}}}"#
        )
    }

    fn opts(s: Option<String>) -> Option<WindowsSecurityContextOptions> {
        s.map(|s| WindowsSecurityContextOptions {
            gmsa_credential_spec: Some(s),
            ..Default::default()
        })
    }

    #[test]
    fn the_container_spec_wins_over_the_pod_spec() {
        let c1 = Container {
            name: "c1".into(),
            ..Default::default()
        };
        let c2 = Container {
            name: "c2".into(),
            security_context: Some(SecurityContext {
                windows_options: opts(Some(spec("contoso.org"))),
                ..Default::default()
            }),
            ..Default::default()
        };
        let pod = Pod {
            spec: Some(PodSpec {
                containers: vec![c1.clone(), c2.clone()],
                security_context: Some(PodSecurityContext {
                    windows_options: opts(Some(spec("acme.com"))),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let d1 = domain_join(credential_spec(&pod, &c1).expect("pod spec")).expect("domain");
        let d2 = domain_join(credential_spec(&pod, &c2).expect("container spec")).expect("domain");
        assert_eq!(d1.dns_name, "acme.com");
        assert_eq!(d2.dns_name, "contoso.org");
        assert_eq!(credential_spec(&Pod::default(), &c1), None);
    }

    #[test]
    fn a_spec_without_a_domain_joins_none() {
        assert_eq!(domain_join("not json"), None);
        assert_eq!(domain_join(r#"{"CmsPlugins":["ActiveDirectory"]}"#), None);
        assert_eq!(
            domain_join(r#"{"DomainJoinConfig":{"DnsName":"contoso.org"}}"#).map(|d| d.netbios_name),
            Some("CONTOSO".into())
        );
        let spec = r#"{"ActiveDirectoryConfig":{"GroupManagedServiceAccounts":[{"Name":"gmsa-e2e","Scope":"K8SGMSA"},
            {"Name":"gmsa-e2e","Scope":"k8sgmsa.lan"}]},"DomainJoinConfig":{"DnsName":"k8sgmsa.lan"}}"#;
        assert_eq!(
            domain_join(spec).map(|d| d.accounts),
            Some(vec!["gmsa-e2e".to_string()])
        );
    }
}
