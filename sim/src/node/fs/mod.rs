//! Container file systems: volumes as real directories under the cluster's root directory, and
//! per-container views that map container paths (Windows `C:\mnt\x` or Linux `/mnt/x`) onto
//! them.
//!
//! The main types are [`PodVolumes`] (what the kubelet sets up for a pod: emptyDir, configMap,
//! secret, hostPath, downwardAPI, projected) and [`FsView`] (one container's view, which
//! refuses writes through read-only mounts with the OS's own message from [`crossconf_model::os`]).
//!
//! Split by concept: `view` holds one container's file view ([`FsView`], [`Mount`],
//! [`DirEntry`]), `volumes` sets up and mounts a pod's volumes ([`PodVolumes`]), and
//! `atomic_writer` publishes ConfigMap/Secret/downward API payloads the way the kubelet's
//! atomic writer does. This file keeps the shared errors and path rules.

use std::path::PathBuf;

use base64::Engine;

use crossconf_model::os::Os;

mod atomic_writer;
mod sa_token;
mod view;
mod volumes;

pub use atomic_writer::Payload;
pub use view::{DirEntry, FsView, Mount, dir_size};
pub use volumes::{FieldSource, PodVolumes, VolumeDir};

/// Errors of container file operations, rendered by the shells in each OS's words.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// The path does not exist.
    #[error("no such file or directory: {0}")]
    NotFound(String),
    /// A write through a read-only mount (or a read-only root file system).
    #[error("{msg}")]
    ReadOnly {
        /// The OS's message ("Access is denied." / "Read-only file system").
        msg: &'static str,
        /// The path.
        path: String,
    },
    /// A directory where a file was expected.
    #[error("is a directory: {0}")]
    IsDirectory(String),
    /// Another I/O failure on the backing directory.
    #[error("i/o error on {path}")]
    Io {
        /// The container path.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Errors while setting up a pod's volumes (reported as `FailedMount`).
#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    /// A referenced ConfigMap is missing.
    #[error("MountVolume.SetUp failed for volume \"{volume}\" : configmap \"{name}\" not found")]
    ConfigMapNotFound {
        /// The volume.
        volume: String,
        /// The ConfigMap.
        name: String,
    },
    /// A referenced Secret is missing.
    #[error("MountVolume.SetUp failed for volume \"{volume}\" : secret \"{name}\" not found")]
    SecretNotFound {
        /// The volume.
        volume: String,
        /// The Secret.
        name: String,
    },
    /// A Secret volume's `items` name a key the Secret does not hold.
    #[error("MountVolume.SetUp failed for volume \"{volume}\" : references non-existent secret key: {key}")]
    SecretKeyNotFound {
        /// The volume.
        volume: String,
        /// The missing key.
        key: String,
    },
    /// The API could not be read.
    #[error("MountVolume.SetUp failed for volume \"{volume}\" : reading {what} failed")]
    Api {
        /// The volume.
        volume: String,
        /// What was read.
        what: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The backing directory could not be written.
    #[error("MountVolume.SetUp failed for volume \"{volume}\" : writing {path}")]
    Io {
        /// The volume.
        volume: String,
        /// The host path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Normalises a container path: Windows paths lose the drive, use `/` and compare
/// case-insensitively; `.` and `..` are collapsed; relative paths resolve against `cwd`.
pub fn normalise(os: Os, path: &str, cwd: &str) -> String {
    let mut p = path.replace('\\', "/");
    if os == Os::Windows {
        if p.len() >= 2 && p.as_bytes()[1] == b':' {
            p = p[2..].to_string();
        }
        p = p.to_ascii_lowercase();
    }
    let full = if p.starts_with('/') {
        p
    } else {
        format!("{}/{}", normalise(os, cwd, "/"), p)
    };
    let mut parts: Vec<&str> = Vec::new();
    for seg in full.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    format!("/{}", parts.join("/"))
}

/// The named pipes every Windows container has of its own (its system services), listed by
/// `dir \\.\pipe\` beside any pipe mapped in from the host.
pub const CONTAINER_PIPES: &[&str] = &[
    "InitShutdown",
    "lsass",
    "ntsvcs",
    "scerpc",
    "epmapper",
    "LSM_API_service",
    "eventlog",
];

/// The named pipes of a simulated Windows node's host: containerd's CRI endpoint (the kubelet's
/// `--container-runtime-endpoint=npipe:////./pipe/containerd-containerd`), the pipe real Windows
/// nodes have and DaemonSets mount to talk to the runtime.
pub const WINDOWS_HOST_PIPES: &[&str] = &["containerd-containerd"];

/// The pipe name of a Windows named-pipe path (`\\.\pipe\NAME`, also written with `/`),
/// compared case-insensitively; `Some("")` for the pipe namespace itself (`\\.\pipe\`).
/// Named pipes are not files: a container sees them only through its own pipe namespace, never
/// under `C:\`, so they are kept apart from the file mounts.
pub fn named_pipe(os: Os, path: &str) -> Option<String> {
    if os != Os::Windows {
        return None;
    }
    let p = path.replace('/', "\\");
    if p.eq_ignore_ascii_case("\\\\.\\pipe") {
        return Some(String::new());
    }
    let head = p.get(..9)?;
    head.eq_ignore_ascii_case("\\\\.\\pipe\\")
        .then(|| p[9..].trim_end_matches('\\').to_string())
}

/// Decodes a base64 value (for tests and secrets given as strings).
pub fn b64(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD.decode(s).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_named_pipe_paths_on_windows_only() {
        assert_eq!(
            named_pipe(Os::Windows, r"\\.\pipe\containerd-containerd").as_deref(),
            Some("containerd-containerd")
        );
        assert_eq!(named_pipe(Os::Windows, "//./PIPE/x").as_deref(), Some("x"));
        assert_eq!(named_pipe(Os::Windows, r"\\.\pipe\").as_deref(), Some(""));
        assert_eq!(named_pipe(Os::Windows, r"\\.\pipe").as_deref(), Some(""));
        assert_eq!(named_pipe(Os::Windows, r"C:\pipe\x"), None);
        assert_eq!(named_pipe(Os::Linux, r"\\.\pipe\x"), None);
    }

    #[test]
    fn normalises_windows_paths() {
        assert_eq!(normalise(Os::Windows, "C:\\Mnt\\x\\..\\y.txt", "/"), "/mnt/y.txt");
        assert_eq!(normalise(Os::Windows, "/mnt/y.txt", "/"), "/mnt/y.txt");
        assert_eq!(normalise(Os::Linux, "a/b", "/tmp"), "/tmp/a/b");
        assert_eq!(normalise(Os::Linux, "/Mnt", "/"), "/Mnt");
    }
}
