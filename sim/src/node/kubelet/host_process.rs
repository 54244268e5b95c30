//! Windows HostProcess containers as containerd runs them (KEP-1981, hcsshim's
//! `jobcontainers`): the process runs in a job object on the host, not in a container, so it
//! sees the node's hostname, network and file system. With containerd 1.7 the image's files
//! are bound at the sandbox mount point `C:\hpc\` (`%CONTAINER_SANDBOX_MOUNT_POINT%`), and
//! each volume is visible both at its `mountPath` and under that mount point (the silo's bind
//! filter); with containerd 1.6 the image is mounted at `C:\C\<container id>\`, volumes only
//! under it, and hcsshim resolves the command line itself (see [`Flavour`] and
//! [`super::job_launch`]). It
//! runs as one of the NT AUTHORITY service accounts, or as a temporary user hcsshim creates
//! in the local group `runAsUserName` names (a group an init container may have created with
//! `net localgroup NAME /add`).
//!
//! The kubelet counts their starts in `kubelet_started_host_process_containers_total` and
//! their failed starts in `kubelet_started_host_process_containers_errors_total` (see
//! [`super::metrics`]).

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod};

use crate::node::fs::Mount;

/// Where the image's files appear in a HostProcess container (containerd 1.7+).
pub const SANDBOX_MOUNT_POINT: &str = "C:\\hpc\\";

/// How a node's runtime runs HostProcess containers, by its containerd version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    /// containerd 1.6 (hcsshim 0.9): the image at `C:\C\<id>\`, volumes under it, the
    /// command line and working directory rewritten and searched by hcsshim.
    JobObject,
    /// containerd 1.7 and later (hcsshim 0.10+, the bind filter): the image at `C:\hpc\` in a
    /// silo, volumes also at their `mountPath`.
    Silo,
}

impl Flavour {
    /// The flavour of containerd `version` (`1.6.36`, `1.7.27`).
    pub fn of(version: &str) -> Flavour {
        let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
        let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        if (major, minor) < (1, 7) {
            Flavour::JobObject
        } else {
            Flavour::Silo
        }
    }
}

/// Windows programs of System32 the simulated nodes and images have as files (those the
/// simulator emulates), so that hcsshim's path search finds them where Windows has them.
const SYSTEM32_PROGRAMS: &[&str] = &[
    "cmd", "ping", "ipconfig", "nslookup", "curl", "hostname", "whoami", "timeout", "findstr", "where", "tasklist",
    "net", "nltest", "shutdown", "tar",
];

/// The executables of a Windows system, relative to its root: System32's programs and Windows
/// PowerShell.
fn system_files() -> Vec<String> {
    SYSTEM32_PROGRAMS
        .iter()
        .map(|p| format!("windows/system32/{p}.exe"))
        .chain(std::iter::once(
            "windows/system32/windowspowershell/v1.0/powershell.exe".to_string(),
        ))
        .collect()
}

/// Lays out the executables a HostProcess container may run by path (hcsshim searches files,
/// not names): the node's System32 under `host`, and under `rootfs` the image's: its base
/// image's System32 and, for the upstream busybox image, `C:\bin\<applet>.exe` (its
/// Dockerfile links every applet there). Lower-case, as the simulated Windows file system
/// stores names. Only HostProcess containers get them: elsewhere programs are found by name.
pub fn lay_out_executables(host: &Path, rootfs: &Path, busybox: bool, powershell: bool) -> std::io::Result<()> {
    let exe = |root: &Path, rel: &str| -> std::io::Result<()> {
        let p = root.join(rel);
        if p.exists() {
            return Ok(());
        }
        if let Some(dir) = p.parent() {
            std::fs::create_dir_all(dir)?;
        }
        // The DOS header's magic, so a listing shows a non-empty file.
        std::fs::write(p, b"MZ")
    };
    for f in system_files() {
        exe(host, &f)?;
    }
    for f in system_files() {
        if powershell || !f.contains("powershell") {
            exe(rootfs, &f)?;
        }
    }
    if busybox {
        exe(rootfs, "bin/busybox.exe")?;
        for applet in crate::node::programs::BUSYBOX_APPLETS {
            if applet.chars().all(|c| c.is_ascii_alphanumeric()) {
                exe(rootfs, &format!("bin/{applet}.exe"))?;
            }
        }
    }
    Ok(())
}

/// The host-side file where `net localgroup NAME /add` records local groups (one per line);
/// a path in the Windows file system as containers see it.
pub const LOCAL_GROUPS_FILE: &str = "C:\\Windows\\System32\\config\\localgroups.txt";

/// The accounts hcsshim runs a HostProcess container as without a local group (compared
/// case-insensitively).
const SERVICE_ACCOUNTS: &[&str] = &[
    "NT AUTHORITY\\SYSTEM",
    "NT AUTHORITY\\Local Service",
    "NT AUTHORITY\\LocalService",
    "NT AUTHORITY\\Network Service",
    "NT AUTHORITY\\NetworkService",
];

/// Whether container `c` of `pod` asks to be a HostProcess container: its own
/// `windowsOptions.hostProcess`, else the pod's.
pub fn requested(pod: &Pod, c: &Container) -> bool {
    c.security_context
        .as_ref()
        .and_then(|s| s.windows_options.as_ref())
        .and_then(|w| w.host_process)
        .or_else(|| {
            pod.spec
                .as_ref()
                .and_then(|s| s.security_context.as_ref())
                .and_then(|s| s.windows_options.as_ref())
                .and_then(|w| w.host_process)
        })
        .unwrap_or(false)
}

/// Whether any container of `pod` is a HostProcess container.
pub fn pod_requested(pod: &Pod) -> bool {
    let spec = pod.spec.clone().unwrap_or_default();
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .any(|c| requested(pod, c))
}

/// The node's own file system, which every HostProcess container on it shares.
pub fn host_root(kubelet_root: &Path) -> PathBuf {
    kubelet_root.join("host")
}

/// The account a HostProcess container runs as for `run_as` (`runAsUserName`), or why it
/// cannot start: a service account as given, or for a local group on the host a temporary
/// member account (`<group>-<random>`, as hcsshim names none of the built-in ones).
pub fn account(run_as: &str, host: &Path) -> Result<String, String> {
    if let Some(a) = SERVICE_ACCOUNTS.iter().find(|a| a.eq_ignore_ascii_case(run_as)) {
        return Ok((*a).to_string());
    }
    if local_groups(host).iter().any(|g| g.eq_ignore_ascii_case(run_as)) {
        return Ok(format!("hpc-{:08x}", rand::random::<u32>()));
    }
    Err(format!(
        "failed to create containerd task: failed to create shim task: failed to create job container: \
         {run_as:?} is neither a built-in service account (NT AUTHORITY\\SYSTEM, Local Service, Network Service) \
         nor a local group on the host: The user name or password is incorrect.: unknown"
    ))
}

/// The local groups recorded on the host (see [`LOCAL_GROUPS_FILE`]).
fn local_groups(host: &Path) -> Vec<String> {
    let rel = crate::node::fs::normalise(crossconf_model::os::Os::Windows, LOCAL_GROUPS_FILE, "/");
    std::fs::read_to_string(host.join(rel.trim_start_matches('/')))
        .map(|s| {
            s.lines()
                .map(|l| l.trim().to_string())
                .filter(|l| !l.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// The mounts of a HostProcess container: the image's files at the sandbox mount point and
/// each volume both where it asked and under the mount point.
pub fn mounts(image_rootfs: PathBuf, volumes: Vec<Mount>) -> Vec<Mount> {
    let base = crate::node::fs::normalise(crossconf_model::os::Os::Windows, SANDBOX_MOUNT_POINT, "/");
    let mut out = vec![Mount {
        at: base.clone(),
        host: image_rootfs,
        read_only: false,
        pipe: None,
        tmpfs_bytes: None,
    }];
    for m in volumes {
        if m.pipe.is_none() && !m.at.starts_with(&format!("{base}/")) {
            out.push(Mount {
                at: format!("{base}{}", m.at),
                ..m.clone()
            });
        }
        out.push(m);
    }
    out
}

/// The mounts of a HostProcess container on containerd 1.6: the image at `mount_point`
/// (`C:\C\<id>\`) and each volume under it only (hcsshim 0.9 links them there; there is no
/// per-container view of `mountPath` without the bind filter).
pub fn mounts_job_object(mount_point: &str, image_rootfs: PathBuf, volumes: Vec<Mount>) -> Vec<Mount> {
    let base = crate::node::fs::normalise(crossconf_model::os::Os::Windows, mount_point, "/");
    let mut out = vec![Mount {
        at: base.clone(),
        host: image_rootfs,
        read_only: false,
        pipe: None,
        tmpfs_bytes: None,
    }];
    for m in volumes {
        if m.pipe.is_some() {
            out.push(m);
        } else {
            out.push(Mount {
                at: format!("{base}{}", m.at),
                ..m
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSecurityContext, PodSpec, SecurityContext, WindowsSecurityContextOptions};

    fn windows(host_process: Option<bool>) -> Option<WindowsSecurityContextOptions> {
        Some(WindowsSecurityContextOptions {
            host_process,
            ..Default::default()
        })
    }

    #[test]
    fn the_container_setting_wins_over_the_pod_one() {
        let c = Container::default();
        let pod = Pod {
            spec: Some(PodSpec {
                security_context: Some(PodSecurityContext {
                    windows_options: windows(Some(true)),
                    ..Default::default()
                }),
                containers: vec![c.clone()],
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(requested(&pod, &c));
        assert!(pod_requested(&pod));
        let own = Container {
            security_context: Some(SecurityContext {
                windows_options: windows(Some(false)),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(!requested(&pod, &own));
        assert!(!requested(&Pod::default(), &c));
    }

    #[test]
    fn accounts_are_service_accounts_or_local_groups() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            account("nt authority\\system", dir.path()).unwrap(),
            "NT AUTHORITY\\SYSTEM"
        );
        assert!(
            account("bad-user-name", dir.path())
                .unwrap_err()
                .contains("user name or password")
        );
        let file = dir.path().join("windows/system32/config/localgroups.txt");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "e2e-group\n").unwrap();
        assert!(account("E2E-GROUP", dir.path()).unwrap().starts_with("hpc-"));
    }

    #[test]
    fn containerd_1_6_runs_job_objects_and_1_7_silos() {
        assert_eq!(Flavour::of("1.6.36"), Flavour::JobObject);
        assert_eq!(Flavour::of("1.7.27"), Flavour::Silo);
        assert_eq!(Flavour::of("2.0.1"), Flavour::Silo);
        let v = Mount {
            at: "/etc/configmap".into(),
            host: PathBuf::from("/x"),
            read_only: true,
            pipe: None,
            tmpfs_bytes: None,
        };
        let m = mounts_job_object("C:\\C\\abc\\", PathBuf::from("/img"), vec![v]);
        let at: Vec<&str> = m.iter().map(|m| m.at.as_str()).collect();
        assert_eq!(at, ["/c/abc", "/c/abc/etc/configmap"]);
    }

    #[test]
    fn executables_are_laid_out_where_windows_has_them() {
        let dir = tempfile::tempdir().unwrap();
        let (host, rootfs) = (dir.path().join("host"), dir.path().join("rootfs"));
        lay_out_executables(&host, &rootfs, true, false).unwrap();
        assert!(
            host.join("windows/system32/windowspowershell/v1.0/powershell.exe")
                .is_file()
        );
        assert!(rootfs.join("windows/system32/cmd.exe").is_file());
        assert!(!rootfs.join("windows/system32/windowspowershell").exists());
        assert!(rootfs.join("bin/uname.exe").is_file());
        assert!(!rootfs.join("bin/[.exe").exists());
    }

    #[test]
    fn volumes_show_at_their_path_and_under_the_mount_point() {
        let v = Mount {
            at: "/etc/configmap".into(),
            host: PathBuf::from("/x"),
            read_only: true,
            pipe: None,
            tmpfs_bytes: None,
        };
        let m = mounts(PathBuf::from("/img"), vec![v]);
        let at: Vec<&str> = m.iter().map(|m| m.at.as_str()).collect();
        assert_eq!(at, ["/hpc", "/hpc/etc/configmap", "/etc/configmap"]);
    }
}
