//! `nltest`, the Active Directory tool of the Windows shells, answering from the domain the
//! container's GMSA credential spec joined it to ([`crate::node::kubelet::gmsa`]): a
//! container with a credential spec reports that domain as its parent domain whatever the
//! credentials are worth, one without is not domain-joined. Messages and status codes as
//! nltest prints them (Win32 error names after the status).

use super::{Interp, Io};

impl Interp {
    /// `nltest /PARENTDOMAIN` and `nltest /QUERY`; anything else prints the usage line.
    pub(super) fn nltest(&self, args: &[String], io: &Io) -> i32 {
        let op = args.first().map(|a| a.to_ascii_uppercase());
        let domain = self.ctx.domain.clone();
        match (op.as_deref(), domain) {
            (Some("/PARENTDOMAIN"), Some(d)) => {
                self.line(io, &format!("{}. (1)", d.dns_name));
                self.line(io, "The command completed successfully");
                0
            }
            (Some("/PARENTDOMAIN"), None) => {
                self.err(
                    io,
                    "Getting parent domain failed: Status = 1355 0x54b ERROR_NO_SUCH_DOMAIN",
                );
                1
            }
            // Joined, but the simulator runs no domain controller for the domain: the secure
            // channel has no logon server.
            (Some("/QUERY"), Some(_)) => {
                self.line(io, "Flags: 0");
                self.line(io, "Connection Status = 1311 0x51f ERROR_NO_LOGON_SERVERS");
                self.line(io, "The command completed successfully");
                0
            }
            // Not joined: the Netlogon service does not run.
            (Some("/QUERY"), None) => {
                self.err(io, "I_NetLogonControl failed: Status = 1717 0x6b5 RPC_S_UNKNOWN_IF");
                1
            }
            _ => {
                self.err(
                    io,
                    "Usage: nltest [/OPTIONS] (the simulator emulates /PARENTDOMAIN and /QUERY)",
                );
                1
            }
        }
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
