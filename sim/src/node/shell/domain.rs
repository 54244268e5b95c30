//! `nltest`, the Active Directory tool of the Windows shells, and UNC paths (`\\host\share\file`)
//! to the simulated domain's SMB share, answering from the domain the container's GMSA
//! credential spec joined it to ([`crate::node::kubelet::gmsa`]) and the cluster's simulated
//! domain ([`crate::node::ad`]): a container with a credential spec reports that domain as its
//! parent domain whatever the credentials are worth; its secure channel (`nltest /QUERY`)
//! works only when the cluster runs that domain, its controller answers and the domain holds
//! one of the spec's gMSA accounts. One without a credential spec is not domain-joined.
//! Messages and status codes as nltest prints them (Win32 error names after the status).

use std::path::PathBuf;

use super::{Interp, Io};
use crate::node::ad::{self, SmbError};

/// The state of a joined container's secure channel.
enum Channel {
    /// The controller answered and holds the container's gMSA.
    Up,
    /// No controller of the domain answers.
    NoLogonServers,
    /// The controller answers but holds none of the spec's gMSA accounts.
    NoAccount,
}

impl Interp {
    async fn channel(&self, dns_name: &str, accounts: &[String]) -> Channel {
        let Some(d) = self.ctx.net.domain() else {
            return Channel::NoLogonServers;
        };
        if !dns_name.eq_ignore_ascii_case(d.dns_name())
            || !d.reach(&self.ctx.net, &self.ctx.source(), ad::LDAP_PORT).await
        {
            return Channel::NoLogonServers;
        }
        if accounts.iter().any(|a| d.has_account(a)) {
            Channel::Up
        } else {
            Channel::NoAccount
        }
    }

    /// `nltest /PARENTDOMAIN`, `/QUERY` and `/SC_RESET:DOMAIN`; anything else prints the usage
    /// line.
    pub(super) async fn nltest(&self, args: &[String], io: &Io) -> i32 {
        let arg = args.first().cloned().unwrap_or_default();
        let upper = arg.to_ascii_uppercase();
        let (op, value) = upper.split_once(':').unwrap_or((upper.as_str(), ""));
        let domain = self.ctx.domain.clone();
        match (op, domain) {
            ("/PARENTDOMAIN", Some(d)) => {
                self.line(io, &format!("{}. (1)", d.dns_name));
                self.line(io, "The command completed successfully");
                0
            }
            ("/PARENTDOMAIN", None) => {
                self.err(
                    io,
                    "Getting parent domain failed: Status = 1355 0x54b ERROR_NO_SUCH_DOMAIN",
                );
                1
            }
            ("/QUERY", Some(d)) => match self.channel(&d.dns_name, &d.accounts).await {
                Channel::Up => {
                    self.line(io, "Flags: 0");
                    self.line(io, "Connection Status = 0 0x0 NERR_Success");
                    self.line(io, "The command completed successfully");
                    0
                }
                // Joined, but no controller of the domain answers: the secure channel has
                // no logon server (nltest still completes).
                Channel::NoLogonServers => {
                    self.line(io, "Flags: 0");
                    self.line(io, "Connection Status = 1311 0x51f ERROR_NO_LOGON_SERVERS");
                    self.line(io, "The command completed successfully");
                    0
                }
                Channel::NoAccount => {
                    self.err(
                        io,
                        "I_NetLogonControl failed: Status = 1787 0x6fb ERROR_NO_TRUST_SAM_ACCOUNT",
                    );
                    1
                }
            },
            ("/SC_RESET", Some(d)) => {
                let target = if value.is_empty() {
                    d.dns_name.to_ascii_uppercase()
                } else {
                    value.to_string()
                };
                match self.channel(&target, &d.accounts).await {
                    Channel::Up => {
                        self.line(io, "Flags: 30 HAS_IP  HAS_TIMESERV");
                        self.line(
                            io,
                            &format!("Trusted DC Name \\\\{}.{}", ad::CONTROLLER_NAME, d.dns_name),
                        );
                        self.line(io, "Trusted DC Connection Status Status = 0 0x0 NERR_Success");
                        self.line(io, "The command completed successfully");
                        0
                    }
                    Channel::NoLogonServers => {
                        self.err(
                            io,
                            "I_NetLogonControl failed: Status = 1311 0x51f ERROR_NO_LOGON_SERVERS",
                        );
                        1
                    }
                    Channel::NoAccount => {
                        self.err(
                            io,
                            "I_NetLogonControl failed: Status = 1787 0x6fb ERROR_NO_TRUST_SAM_ACCOUNT",
                        );
                        1
                    }
                }
            }
            // Not joined: the Netlogon service does not run.
            ("/QUERY" | "/SC_RESET", None) => {
                self.err(io, "I_NetLogonControl failed: Status = 1717 0x6b5 RPC_S_UNKNOWN_IF");
                1
            }
            _ => {
                self.err(
                    io,
                    "Usage: nltest [/OPTIONS] (the simulator emulates /PARENTDOMAIN, /QUERY and /SC_RESET)",
                );
                1
            }
        }
    }

    /// The local file behind UNC path `path` on the simulated domain's share, for this
    /// container's identity; `None` when `path` is not a UNC path (a pipe, a drive path).
    ///
    /// # Errors
    /// Windows' reason the share refuses (see [`SmbError`]).
    pub(super) async fn unc_file(&self, path: &str) -> Option<Result<PathBuf, SmbError>> {
        let (host, share, rest) = ad::split_unc(path)?;
        let Some(d) = self.ctx.net.domain() else {
            return Some(Err(SmbError::PathNotFound));
        };
        let ip = match self.resolve(host).await {
            Ok(std::net::IpAddr::V4(ip)) => ip,
            _ => return Some(Err(SmbError::PathNotFound)),
        };
        let joined = self
            .ctx
            .domain
            .as_ref()
            .map(|j| (j.dns_name.as_str(), j.accounts.as_slice()));
        Some(
            d.share_file(&self.ctx.net, &self.ctx.source(), ip, share, rest, joined)
                .await,
        )
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::node::kubelet::gmsa::DomainJoin;
    use crate::node::programs::testutil::{AGNHOST, ctx, text};
    use crate::node::programs::{self};
    use crossconf_model::os::Os;

    fn argv(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[tokio::test]
    async fn a_joined_container_names_its_domain_and_an_unjoined_one_has_none() {
        let (mut c, out, _d) = ctx(Os::Windows, AGNHOST, 140);
        c.domain = Some(Arc::new(DomainJoin {
            dns_name: "acme.com".into(),
            netbios_name: "ACME".into(),
            accounts: vec!["WebApplication".into()],
        }));
        assert_eq!(programs::run(c, argv(&["nltest", "/PARENTDOMAIN"]), None).await, 0);
        assert_eq!(text(&out), "acme.com. (1)\r\nThe command completed successfully\r\n");
        let (c, out, _d) = ctx(Os::Windows, AGNHOST, 141);
        let script = "nltest /parentdomain";
        assert_eq!(
            programs::run(c, argv(&["powershell.exe", "-Command", script]), None).await,
            1
        );
        assert!(text(&out).contains("ERROR_NO_SUCH_DOMAIN"), "{}", text(&out));
    }
}
