//! The account tools of the Windows shells: `whoami` and `net localgroup`. A local group is
//! recorded in a file of the file system the process sees (see
//! [`crate::node::kubelet::host_process::LOCAL_GROUPS_FILE`]): inside an ordinary container
//! that is the container's own, in a HostProcess container the node's, which is how a group
//! an init container creates is there for the next container to run as.

use super::{Interp, Io, fs_msg};
use crate::node::kubelet::host_process::LOCAL_GROUPS_FILE;
use crossconf_model::os::Os;

impl Interp {
    /// `whoami`: Windows prints `domain\user` in lower case (a container's own accounts are
    /// in the `User Manager` domain, host accounts carry theirs, e.g. `nt authority\system`,
    /// and a HostProcess local-group account is the computer's); Linux the user name.
    pub(super) fn whoami(&self, io: &Io) -> i32 {
        let user = &self.ctx.user;
        let text = match self.ctx.pod.os {
            Os::Linux => user.clone(),
            Os::Windows if user.contains('\\') => user.to_ascii_lowercase(),
            Os::Windows if user.starts_with("hpc-") => {
                format!("{}\\{user}", self.ctx.pod.hostname).to_ascii_lowercase()
            }
            Os::Windows => format!("user manager\\{}", user.to_ascii_lowercase()),
        };
        self.line(io, &text);
        0
    }

    /// `net localgroup [NAME [/add | /delete]]`: lists, creates or deletes a local group,
    /// with net.exe's messages and exit code 2 on errors.
    pub(super) fn net(&self, args: &[String], io: &Io) -> i32 {
        let lower: Vec<String> = args.iter().map(|a| a.to_ascii_lowercase()).collect();
        if lower.first().map(String::as_str) != Some("localgroup") {
            self.err(io, "The syntax of this command is:\r\n\r\nNET\r\n    [ ACCOUNTS | COMPUTER | CONFIG | CONTINUE | FILE | GROUP | HELP |\r\n      HELPMSG | LOCALGROUP | PAUSE | SESSION | SHARE | START |\r\n      STATISTICS | STOP | TIME | USE | USER | VIEW ]");
            return 1;
        }
        let mut groups = self.local_groups();
        match (args.get(1), lower.get(2).map(String::as_str)) {
            (None, _) => {
                self.line(
                    io,
                    &format!("\r\nAliases for \\\\{}\r\n", self.ctx.pod.hostname.to_ascii_uppercase()),
                );
                self.line(
                    io,
                    "-------------------------------------------------------------------------------",
                );
                for g in &groups {
                    self.line(io, &format!("*{g}"));
                }
                self.line(io, "The command completed successfully.");
                0
            }
            (Some(name), Some("/add")) => {
                if groups.iter().any(|g| g.eq_ignore_ascii_case(name)) {
                    self.err(
                        io,
                        "System error 1379 has occurred.\r\n\r\nThe specified local group already exists.",
                    );
                    return 2;
                }
                groups.push(name.clone());
                self.store_groups(&groups, io)
            }
            (Some(name), Some("/delete")) => {
                let before = groups.len();
                groups.retain(|g| !g.eq_ignore_ascii_case(name));
                if groups.len() == before {
                    self.err(io, "The specified local group does not exist.\r\n\r\nMore help is available by typing NET HELPMSG 3780.");
                    return 2;
                }
                self.store_groups(&groups, io)
            }
            (Some(name), _) if groups.iter().any(|g| g.eq_ignore_ascii_case(name)) => {
                self.line(io, &format!("Alias name     {name}\r\nComment\r\n\r\nMembers\r\n\r\n-------------------------------------------------------------------------------"));
                self.line(io, "The command completed successfully.");
                0
            }
            (Some(_), _) => {
                self.err(io, "The specified local group does not exist.\r\n\r\nMore help is available by typing NET HELPMSG 3780.");
                2
            }
        }
    }

    fn local_groups(&self) -> Vec<String> {
        self.ctx
            .fs
            .read(LOCAL_GROUPS_FILE)
            .map(|b| {
                String::from_utf8_lossy(&b)
                    .lines()
                    .map(|l| l.trim().to_string())
                    .filter(|l| !l.is_empty())
                    .collect()
            })
            .unwrap_or_default()
    }

    fn store_groups(&self, groups: &[String], io: &Io) -> i32 {
        let dir = LOCAL_GROUPS_FILE
            .rsplit_once('\\')
            .map_or(LOCAL_GROUPS_FILE, |(d, _)| d);
        let text: String = groups.iter().map(|g| format!("{g}\n")).collect();
        if let Err(e) = self
            .ctx
            .fs
            .mkdir(dir)
            .and_then(|()| self.ctx.fs.write(LOCAL_GROUPS_FILE, text.as_bytes(), false))
        {
            self.err(io, fs_msg(Os::Windows, &e));
            return 2;
        }
        self.line(io, "The command completed successfully.");
        0
    }
}
