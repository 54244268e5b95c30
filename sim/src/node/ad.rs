//! A simulated Active Directory domain (`--gmsa-domain`): what upstream's `GMSA Full` cases
//! (test/e2e/windows/gmsa_full.go) expect the cluster operator to have set up, as the AKS
//! extension of upstream's daily job does.
//!
//! - A domain controller for `k8sgmsa.lan` on its own address
//!   ([`crate::addr::AddressBlock::domain_controller`]), with LDAP (389) and SMB (445)
//!   listeners, reachable by name: the nodes' upstream DNS answers the domain's name with it.
//! - One gMSA account, `gmsa-e2e`, and a share `write_test` granted to it (a directory of the
//!   simulator's working directory).
//! - One Windows node labelled `agentpool=windowsgmsa` with the credential spec manifest of
//!   that account (what windows-gmsa's `GenerateCredentialSpecResource.ps1` writes) at
//!   `C:\gmsa\gmsa-cred-spec-gmsa-e2e.yml` on its host file system.
//!
//! A container whose credential spec joins it to this domain ([`super::kubelet::gmsa`]) gets
//! a working secure channel (`nltest /QUERY`) when the controller answers and its gMSA
//! account exists, and may read and write the share; the shells' `nltest` and UNC paths ask
//! this module. The fault `domain-controller-down` stops the controller answering.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::net::{SimNet, Source};
use crate::addr::AddressBlock;

/// The domain's DNS name (upstream's `gmsaDomain`).
pub const DOMAIN: &str = "k8sgmsa.lan";
/// Its NetBIOS name.
pub const NETBIOS: &str = "K8SGMSA";
/// The gMSA account the domain holds (and the credential spec resource's name, upstream's
/// `gmsaCustomResourceName`).
pub const GMSA_ACCOUNT: &str = "gmsa-e2e";
/// The share granted to that account (upstream's `gmsaSharedFolder`).
pub const SHARE: &str = "write_test";
/// The label of the node set up for the domain (upstream's `gmsaFullNodeLabel`).
pub const NODE_LABEL: (&str, &str) = ("agentpool", "windowsgmsa");
/// Where that node holds the credential spec manifest (upstream's `gmsaCrdManifestPath`),
/// relative to the host's `C:\`.
pub const CRED_SPEC_MANIFEST: &str = "gmsa/gmsa-cred-spec-gmsa-e2e.yml";
/// The controller's host name.
pub const CONTROLLER_NAME: &str = "DC1";
/// LDAP: what the Netlogon secure channel talks to.
pub const LDAP_PORT: u16 = 389;
/// SMB.
pub const SMB_PORT: u16 = 445;

/// The domain's fixed identity, as a credential spec carries it.
const DOMAIN_GUID: &str = "a1c2f0d4-5b6e-4f7a-9c8d-0e1f2a3b4c5d";
const DOMAIN_SID: &str = "S-1-5-21-3623811015-3361044348-30300820";

/// Errors starting the domain controller.
#[derive(Debug, thiserror::Error)]
pub enum DomainError {
    /// A listener could not bind.
    #[error("bind the domain controller's port {port}")]
    Bind {
        /// The port.
        port: u16,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The share directory could not be created.
    #[error("create the share directory {path}")]
    Share {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Why a container cannot reach a UNC path, in the words Windows uses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SmbError {
    /// No SMB server answers at the host.
    #[error("The network path was not found.")]
    PathNotFound,
    /// The server has no such share.
    #[error("The network name cannot be found.")]
    NoSuchShare,
    /// The caller's identity may not use the share.
    #[error("Access is denied.")]
    AccessDenied,
}

/// The simulated domain.
#[derive(Debug)]
pub struct Domain {
    controller: Ipv4Addr,
    accounts: Vec<String>,
    share_dir: PathBuf,
}

impl Domain {
    /// The domain of the cluster at `block`, keeping its share under `workdir`.
    pub fn new(block: AddressBlock, workdir: &Path) -> Domain {
        Domain {
            controller: block.domain_controller(),
            accounts: vec![GMSA_ACCOUNT.to_string()],
            share_dir: workdir.join("ad").join(SHARE),
        }
    }

    /// Starts the controller's listeners until `cancel` and creates the share.
    ///
    /// # Errors
    /// A port that does not bind, a share directory that cannot be made.
    pub async fn start(&self, cancel: CancellationToken) -> Result<(), DomainError> {
        std::fs::create_dir_all(&self.share_dir).map_err(|source| DomainError::Share {
            path: self.share_dir.clone(),
            source,
        })?;
        for port in [LDAP_PORT, SMB_PORT] {
            let listener = TcpListener::bind(SocketAddr::new(self.controller.into(), port))
                .await
                .map_err(|source| DomainError::Bind { port, source })?;
            let cancel = cancel.clone();
            tokio::spawn(async move {
                loop {
                    tokio::select! {
                        () = cancel.cancelled() => return,
                        // The protocols themselves are answered in-process (see
                        // [`Domain::reach`]); the listener proves the controller is there.
                        r = listener.accept() => if let Err(e) = r {
                            tracing::debug!(error = %e, "domain controller accept");
                        },
                    }
                }
            });
        }
        Ok(())
    }

    /// The controller's address.
    pub fn controller(&self) -> Ipv4Addr {
        self.controller
    }

    /// The domain's DNS name.
    pub fn dns_name(&self) -> &str {
        DOMAIN
    }

    /// Whether the domain holds gMSA account `name`.
    pub fn has_account(&self, name: &str) -> bool {
        self.accounts.iter().any(|a| a.eq_ignore_ascii_case(name))
    }

    /// Whether the controller answers on `port` for a container at `src`: a TCP connection
    /// through the simulated network (so blackholed nodes cannot reach it), refused while
    /// `domain-controller-down` is on.
    pub async fn reach(&self, net: &SimNet, src: &Source, port: u16) -> bool {
        if net.faults().is_on("domain-controller-down") {
            return false;
        }
        let addr = SocketAddr::new(self.controller.into(), port);
        matches!(
            tokio::time::timeout(Duration::from_secs(5), net.dialer().tcp(src, addr)).await,
            Ok(Ok(_))
        )
    }

    /// The file behind `\\host\share\rest` for a container at `src` whose credential spec
    /// names the gMSA `accounts` of domain `joined` (`None`: not domain-joined).
    ///
    /// # Errors
    /// Windows' reason: no SMB server at `host`, no such share, or an identity the share
    /// does not grant (a container without a gMSA of this domain is an anonymous machine).
    pub async fn share_file(
        &self,
        net: &SimNet,
        src: &Source,
        host: Ipv4Addr,
        share: &str,
        rest: &str,
        joined: Option<(&str, &[String])>,
    ) -> Result<PathBuf, SmbError> {
        if host != self.controller || !self.reach(net, src, SMB_PORT).await {
            return Err(SmbError::PathNotFound);
        }
        if !share.eq_ignore_ascii_case(SHARE) {
            return Err(SmbError::NoSuchShare);
        }
        let authorised = joined.is_some_and(|(domain, accounts)| {
            domain.eq_ignore_ascii_case(DOMAIN) && accounts.iter().any(|a| self.has_account(a))
        });
        if !authorised {
            return Err(SmbError::AccessDenied);
        }
        // Windows paths are case-insensitive: the share keeps names lower-cased.
        let rel: Vec<String> = rest
            .split(['\\', '/'])
            .filter(|s| !s.is_empty() && *s != "." && *s != "..")
            .map(str::to_ascii_lowercase)
            .collect();
        Ok(rel.iter().fold(self.share_dir.clone(), |p, s| p.join(s)))
    }

    /// The GMSACredentialSpec manifest of the domain's gMSA account, as windows-gmsa's
    /// `GenerateCredentialSpecResource.ps1` writes it (the credential spec of
    /// `New-CredentialSpec` under `credspec`).
    pub fn cred_spec_manifest(&self) -> String {
        format!(
            "apiVersion: windows.k8s.io/v1\n\
             kind: GMSACredentialSpec\n\
             metadata:\n  name: {GMSA_ACCOUNT}\n\
             credspec:\n\
             \x20 ActiveDirectoryConfig:\n\
             \x20   GroupManagedServiceAccounts:\n\
             \x20   - Name: {GMSA_ACCOUNT}\n\
             \x20     Scope: {NETBIOS}\n\
             \x20   - Name: {GMSA_ACCOUNT}\n\
             \x20     Scope: {DOMAIN}\n\
             \x20 CmsPlugins:\n\
             \x20 - ActiveDirectory\n\
             \x20 DomainJoinConfig:\n\
             \x20   DnsName: {DOMAIN}\n\
             \x20   DnsTreeName: {DOMAIN}\n\
             \x20   Guid: {DOMAIN_GUID}\n\
             \x20   MachineAccountName: {GMSA_ACCOUNT}\n\
             \x20   NetBiosName: {NETBIOS}\n\
             \x20   Sid: {DOMAIN_SID}\n"
        )
    }

    /// Writes the manifest where the labelled node keeps it, under its host root.
    ///
    /// # Errors
    /// The file system's.
    pub fn place_manifest(&self, host_root: &Path) -> std::io::Result<()> {
        let path = host_root.join(CRED_SPEC_MANIFEST);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        // Written on Windows: CRLF line ends.
        std::fs::write(path, self.cred_spec_manifest().replace('\n', "\r\n"))
    }
}

/// `\\host\share\rest` split, for a UNC path (`\\.\pipe\` and `\\?\` are not).
pub fn split_unc(path: &str) -> Option<(&str, &str, &str)> {
    let p = path.strip_prefix("\\\\").or_else(|| path.strip_prefix("//"))?;
    let (host, after) = p.split_once(['\\', '/'])?;
    if host.is_empty() || host == "." || host == "?" {
        return None;
    }
    let (share, rest) = after.split_once(['\\', '/']).unwrap_or((after, ""));
    (!share.is_empty()).then_some((host, share, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unc_paths_split_and_pipes_are_not_unc() {
        assert_eq!(
            split_unc(r"\\127.0.0.1\write_test\a.txt"),
            Some(("127.0.0.1", "write_test", "a.txt"))
        );
        assert_eq!(split_unc(r"\\dc1\share"), Some(("dc1", "share", "")));
        assert_eq!(split_unc(r"\\.\pipe\docker_engine"), None);
        assert_eq!(split_unc(r"C:\gmsa"), None);
    }

    #[test]
    fn the_manifest_is_a_gmsa_credential_spec_of_the_domain() {
        let d = Domain::new(AddressBlock(201), Path::new("/tmp/x"));
        let v: serde_json::Value = serde_saphyr::from_str(&d.cred_spec_manifest()).expect("YAML");
        assert_eq!(v["kind"], "GMSACredentialSpec");
        assert_eq!(v["metadata"]["name"], GMSA_ACCOUNT);
        assert_eq!(v["credspec"]["DomainJoinConfig"]["DnsName"], DOMAIN);
        assert_eq!(
            v["credspec"]["ActiveDirectoryConfig"]["GroupManagedServiceAccounts"][0]["Name"],
            GMSA_ACCOUNT
        );
    }

    #[tokio::test]
    async fn the_share_admits_only_the_domains_gmsa() {
        let dir = tempfile::tempdir().expect("tempdir");
        let block = AddressBlock(202);
        let d = Domain::new(block, dir.path());
        let faults = std::sync::Arc::new(super::super::Faults::default());
        let any = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 53);
        let net = SimNet::new(block, faults.clone(), any, any);
        let src = Source {
            ip: None,
            node: None,
            os: crossconf_model::os::Os::Windows,
            is_pod: false,
        };
        let cancel = CancellationToken::new();
        d.start(cancel.clone()).await.expect("start");
        let ok = [GMSA_ACCOUNT.to_string()];
        let other = ["webapp".to_string()];
        let dc = d.controller();
        assert!(
            d.share_file(&net, &src, dc, "WRITE_TEST", r"a\B.txt", Some((DOMAIN, &ok)))
                .await
                .expect("granted")
                .ends_with("write_test/a/b.txt")
        );
        assert_eq!(
            d.share_file(&net, &src, dc, SHARE, "x", Some((DOMAIN, &other))).await,
            Err(SmbError::AccessDenied)
        );
        assert_eq!(
            d.share_file(&net, &src, dc, SHARE, "x", None).await,
            Err(SmbError::AccessDenied)
        );
        assert_eq!(
            d.share_file(&net, &src, dc, "c$", "x", Some((DOMAIN, &ok))).await,
            Err(SmbError::NoSuchShare)
        );
        faults.set("domain-controller-down", "", true);
        assert_eq!(
            d.share_file(&net, &src, dc, SHARE, "x", Some((DOMAIN, &ok))).await,
            Err(SmbError::PathNotFound)
        );
        cancel.cancel();
    }
}
