//! The OS profile: every difference between Windows and Linux nodes, in one place.
//!
//! Both halves of the project read this module: the harness's framework asks it what to create
//! on each OS (images, shell commands, paths, node selectors), and the simulator asks it how
//! each OS behaves (which pod features a Windows node refuses, how DNS search suffixes apply).
//! Keeping both sides here means a case body never says `if windows`, and the simulator's model
//! of Windows cannot drift from what the cases expect of it.
//!
//! Sources for the behaviour rows are named beside each rule ("Windows containers in
//! Kubernetes", the Windows node support documents, and today's kubelet behaviour where it
//! differs from older documents).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The node label every kubelet sets to its operating system (`kubernetes.io/os`).
pub const OS_LABEL: &str = "kubernetes.io/os";
/// The node label carrying the Windows build, e.g. `10.0.20348`.
pub const WINDOWS_BUILD_LABEL: &str = "node.kubernetes.io/windows-build";
/// The node label carrying the CPU architecture.
pub const ARCH_LABEL: &str = "kubernetes.io/arch";
/// The node label carrying the node's hostname.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// A node operating system, as `--node-os-distro` and `kubernetes.io/os` name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Os {
    /// Linux nodes.
    Linux,
    /// Windows Server nodes.
    Windows,
}

impl Os {
    /// Both operating systems, Linux first (a stable order for reports).
    pub const ALL: [Os; 2] = [Os::Linux, Os::Windows];

    /// The value of `kubernetes.io/os` and `spec.os.name`.
    pub fn as_str(self) -> &'static str {
        match self {
            Os::Linux => "linux",
            Os::Windows => "windows",
        }
    }

    /// The other operating system.
    pub fn other(self) -> Os {
        match self {
            Os::Linux => Os::Windows,
            Os::Windows => Os::Linux,
        }
    }

    /// A capitalised name for messages ("Windows", "Linux").
    pub fn title(self) -> &'static str {
        match self {
            Os::Linux => "Linux",
            Os::Windows => "Windows",
        }
    }

    /// The argv that runs `script` in this OS's shell inside a test container.
    ///
    /// Windows test images are servercore/nanoserver based and cases run `cmd /c`, as the
    /// upstream Windows e2e helpers do; Linux images run `sh -c`.
    pub fn shell(self, script: &str) -> Vec<String> {
        match self {
            Os::Linux => vec!["sh".into(), "-c".into(), script.into()],
            Os::Windows => vec!["cmd".into(), "/c".into(), script.into()],
        }
    }

    /// The directory under which cases mount volumes in test containers.
    pub fn volume_root(self) -> &'static str {
        match self {
            Os::Linux => "/mnt",
            Os::Windows => "C:\\mnt",
        }
    }

    /// Where a container finds its API token, CA bundle and namespace: the ServiceAccount
    /// admission plugin mounts the token volume at `/var/run/secrets/kubernetes.io/serviceaccount`
    /// for every pod, and Windows maps that path onto drive `C:`.
    pub fn api_token_dir(self) -> &'static str {
        match self {
            Os::Linux => "/var/run/secrets/kubernetes.io/serviceaccount",
            Os::Windows => "C:\\var\\run\\secrets\\kubernetes.io\\serviceaccount",
        }
    }

    /// Joins a path under a mount point with this OS's separator.
    pub fn join(self, dir: &str, file: &str) -> String {
        match self {
            Os::Linux => format!("{}/{}", dir.trim_end_matches('/'), file),
            Os::Windows => format!("{}\\{}", dir.trim_end_matches('\\'), file),
        }
    }

    /// A shell script that prints the content of `path`.
    pub fn cat(self, path: &str) -> String {
        match self {
            Os::Linux => format!("cat {path}"),
            Os::Windows => format!("type {path}"),
        }
    }

    /// A shell script that lists the names in directory `path`, one a line.
    pub fn list_dir(self, path: &str) -> String {
        match self {
            Os::Linux => format!("ls -1 {path}"),
            Os::Windows => format!("dir /b {path}"),
        }
    }

    /// A shell script that writes `content` (one word) into `path`.
    pub fn write_file(self, path: &str, content: &str) -> String {
        match self {
            Os::Linux => format!("echo {content} > {path}"),
            Os::Windows => format!("echo {content}> {path}"),
        }
    }

    /// A shell script that removes the file `path` (no error when it is absent on Linux).
    pub fn remove_file(self, path: &str) -> String {
        match self {
            Os::Linux => format!("rm -f {path}"),
            Os::Windows => format!("del {path}"),
        }
    }

    /// A shell script that keeps a container running until it is killed.
    ///
    /// Windows: upstream Windows e2e pods idle with `ping -t localhost` (`timeout /t` refuses
    /// to run without a console in a container); Linux: `sleep` for a day.
    pub fn idle_script(self) -> &'static str {
        match self {
            Os::Linux => "sleep 86400",
            Os::Windows => "ping -t localhost > NUL",
        }
    }

    /// The message a write to a read-only volume fails with in this OS's shell.
    ///
    /// Windows: "Access is denied." (upstream `windows/volumes.go` asserts this text).
    pub fn read_only_write_error(self) -> &'static str {
        match self {
            Os::Linux => "Read-only file system",
            Os::Windows => "Access is denied.",
        }
    }

    /// Whether a name containing a dot gets the pod's DNS search suffixes appended.
    ///
    /// Windows: the DNS client treats any name with a dot as fully qualified, so `svc.ns` is
    /// not expanded to `svc.ns.svc.cluster.local` ("Windows containers in Kubernetes", DNS
    /// limitations). Linux resolvers expand names with fewer dots than `ndots` (5 by default).
    pub fn expands_dotted_names(self) -> bool {
        match self {
            Os::Linux => true,
            Os::Windows => false,
        }
    }

    /// Whether ICMP to a destination outside the cluster network gets a reply.
    ///
    /// Windows: outbound ICMP leaves the node only inside the cluster network (Windows
    /// networking limitations: "ICMP packets ... outside the cluster are not supported").
    pub fn icmp_leaves_cluster(self) -> bool {
        match self {
            Os::Linux => true,
            Os::Windows => false,
        }
    }

    /// Whether a non-HostProcess pod may use `hostNetwork: true`.
    ///
    /// Windows: pod sandbox creation fails for hostNetwork pods that are not HostProcess pods
    /// (HostProcess pods may use it since Kubernetes 1.26; this rule follows today's behaviour).
    pub fn supports_host_network(self) -> bool {
        match self {
            Os::Linux => true,
            Os::Windows => false,
        }
    }

    /// Whether this OS supports hugepages (resource requests and emptyDir `medium: HugePages`).
    ///
    /// Windows: no hugepages ("Windows containers in Kubernetes", node limitations).
    ///
    /// Two rows of the Windows node documents are not in this profile on purpose, because
    /// today's kubelet with containerd does what the documents say it cannot (DESIGN.md: where
    /// today's Kubernetes differs from the documents, follow it and say so):
    /// - emptyDir `medium: Memory` works: the Windows mounter turns a tmpfs mount into a plain
    ///   directory (mount-utils `mount_windows.go`), so the volume is disk-backed but usable;
    /// - subPath and single-file mounts work: the kubelet's `subpath_windows.go` prepares them
    ///   and containerd maps files (the documents' restriction is Docker's), which is why
    ///   upstream's "Subpath Atomic writer volumes" cases carry no `[LinuxOnly]` and its
    ///   "Windows subpath cleanup" case uses both.
    pub fn supports_hugepages(self) -> bool {
        match self {
            Os::Linux => true,
            Os::Windows => false,
        }
    }

    /// Whether `dnsPolicy: ClusterFirstWithHostNet` is supported.
    pub fn supports_cluster_first_with_host_net(self) -> bool {
        match self {
            Os::Linux => true,
            Os::Windows => false,
        }
    }

    /// A shell script that lists the container's named pipes by name, one a line, where the
    /// OS has them (`dir /b \\.\pipe\` on Windows; Linux has no pipe namespace).
    pub fn list_named_pipes(self) -> Option<&'static str> {
        match self {
            Os::Linux => None,
            Os::Windows => Some(r"dir /b \\.\pipe\"),
        }
    }

    /// Whether the kubelet manages `/etc/hosts` in containers.
    pub fn manages_etc_hosts(self) -> bool {
        match self {
            Os::Linux => true,
            Os::Windows => false,
        }
    }
}

impl fmt::Display for Os {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error for an OS name that is neither `windows` nor `linux`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("unknown node OS {0:?} (expected windows or linux)")]
pub struct UnknownOs(pub String);

impl FromStr for Os {
    type Err = UnknownOs;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "linux" => Ok(Os::Linux),
            "windows" => Ok(Os::Windows),
            _ => Err(UnknownOs(s.to_string())),
        }
    }
}

/// Windows builds the project knows, with the LTSC names upstream images are tagged with.
pub const WINDOWS_BUILDS: &[(&str, &str)] = &[
    ("10.0.17763", "ltsc2019"),
    ("10.0.20348", "ltsc2022"),
    ("10.0.26100", "ltsc2025"),
];

/// The `major.minor.build` prefix of a Windows version string such as `10.0.20348.2849`.
pub fn windows_build_prefix(version: &str) -> Option<String> {
    let parts: Vec<&str> = version.split('.').collect();
    if parts.len() < 3 || parts[..3].iter().any(|p| p.parse::<u32>().is_err()) {
        return None;
    }
    Some(parts[..3].join("."))
}

/// The Windows Server product name for a build, as nodes report it in `osImage`.
pub fn windows_os_image(build: &str) -> String {
    match build {
        "10.0.17763" => "Windows Server 2019 Datacenter".into(),
        "10.0.20348" => "Windows Server 2022 Datacenter".into(),
        "10.0.26100" => "Windows Server 2025 Datacenter".into(),
        other => format!("Windows Server Datacenter ({other})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_os_names_case_insensitively() {
        assert_eq!("Windows".parse::<Os>().unwrap(), Os::Windows);
        assert_eq!("linux".parse::<Os>().unwrap(), Os::Linux);
        assert!("darwin".parse::<Os>().is_err());
    }

    #[test]
    fn shells_differ_by_os() {
        assert_eq!(Os::Linux.shell("echo hi"), ["sh", "-c", "echo hi"]);
        assert_eq!(Os::Windows.shell("echo hi")[0], "cmd");
    }

    #[test]
    fn build_prefix_takes_three_numeric_parts() {
        assert_eq!(windows_build_prefix("10.0.20348.2849").as_deref(), Some("10.0.20348"));
        assert_eq!(windows_build_prefix("10.0"), None);
        assert_eq!(windows_build_prefix("10.x.1"), None);
    }

    #[test]
    fn windows_rules_are_stricter_than_linux() {
        assert!(!Os::Windows.expands_dotted_names());
        assert!(Os::Linux.expands_dotted_names());
        assert!(!Os::Windows.supports_host_network());
        assert_eq!(Os::Windows.read_only_write_error(), "Access is denied.");
    }
}
