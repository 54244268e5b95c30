//! Container file systems: volumes as real directories under the cluster's root directory, and
//! per-container views that map container paths (Windows `C:\mnt\x` or Linux `/mnt/x`) onto
//! them.
//!
//! The main types are [`PodVolumes`] (what the kubelet sets up for a pod: emptyDir, configMap,
//! secret, hostPath, downwardAPI, projected) and [`FsView`] (one container's view, which
//! refuses writes through read-only mounts with the OS's own message from [`crossconf_model::os`]).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine;
use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, Secret, Volume, VolumeMount};
use kube::Api;
use tracing::warn;

use crate::node::net::Faults;
use crossconf_model::os::Os;

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

/// One mount in a container view.
#[derive(Debug, Clone)]
pub struct Mount {
    /// Normalised container path.
    pub at: String,
    /// Backing host directory (or file).
    pub host: PathBuf,
    /// Whether writes are refused.
    pub read_only: bool,
    /// For a host named pipe mapped into the container: the pipe's name in the container's pipe
    /// namespace (`at` and `host` are then unused).
    pub pipe: Option<String>,
}

/// One container's view of its file system.
#[derive(Debug, Clone)]
pub struct FsView {
    os: Os,
    rootfs: PathBuf,
    root_read_only: bool,
    mounts: Vec<Mount>,
    /// Named pipes mapped in from the host (Windows), by their name in the container.
    pipes: Vec<String>,
    faults: Arc<Faults>,
}

/// A directory entry as `ls`/`dir` show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// File name (for a file listed by its own path, that path as given).
    pub name: String,
    /// Whether it is a directory.
    pub is_dir: bool,
    /// Size in bytes.
    pub size: u64,
    /// Permission bits (`0o644`), of the target when the entry is a symlink.
    pub mode: u32,
    /// Where the entry points when it is a symlink (the kubelet publishes ConfigMap and Secret
    /// keys as links into `..data`).
    pub link: Option<String>,
}

impl DirEntry {
    /// The entry as busybox `ls -l` prints it; with `follow` (`ls -lL`) a symlink shows its
    /// target's type and mode, without it the link itself (`lrwxrwxrwx … name -> target`).
    pub fn long_format(&self, follow: bool) -> String {
        let bits = |m: u32| {
            let mut out = String::new();
            for shift in [6, 3, 0] {
                let b = (m >> shift) & 7;
                out.push(if b & 4 != 0 { 'r' } else { '-' });
                out.push(if b & 2 != 0 { 'w' } else { '-' });
                out.push(if b & 1 != 0 { 'x' } else { '-' });
            }
            out
        };
        match (&self.link, follow) {
            (Some(target), false) => format!(
                "lrwxrwxrwx    1 root     root     {:>10} Jan  1 00:00 {} -> {target}",
                target.len(),
                self.name
            ),
            _ => format!(
                "{}{}    1 root     root     {:>10} Jan  1 00:00 {}",
                if self.is_dir { 'd' } else { '-' },
                bits(self.mode),
                self.size,
                self.name
            ),
        }
    }
}

/// Permission bits of a host path's metadata (0o644 where the platform has none).
fn mode_of(md: &std::fs::Metadata) -> u32 {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        md.permissions().mode() & 0o7777
    }
    #[cfg(not(unix))]
    {
        if md.permissions().readonly() { 0o444 } else { 0o644 }
    }
}

impl FsView {
    /// A view over `rootfs` with `mounts` (longest prefix wins).
    pub fn new(os: Os, rootfs: PathBuf, root_read_only: bool, mounts: Vec<Mount>, faults: Arc<Faults>) -> Self {
        let (pipes, mut mounts): (Vec<Mount>, Vec<Mount>) = mounts.into_iter().partition(|m| m.pipe.is_some());
        mounts.sort_by_key(|m| std::cmp::Reverse(m.at.len()));
        FsView {
            os,
            rootfs,
            root_read_only,
            mounts,
            pipes: pipes.into_iter().filter_map(|m| m.pipe).collect(),
            faults,
        }
    }

    /// The container's named pipes: its own system pipes and those mapped from the host.
    fn pipe_names(&self) -> Vec<String> {
        CONTAINER_PIPES
            .iter()
            .map(|p| p.to_string())
            .chain(self.pipes.iter().cloned())
            .collect()
    }

    /// The OS whose path rules apply.
    pub fn os(&self) -> Os {
        self.os
    }

    fn locate(&self, path: &str) -> (PathBuf, bool, String) {
        let p = normalise(self.os, path, "/");
        for m in &self.mounts {
            if p == m.at {
                return (m.host.clone(), m.read_only, p);
            }
            if let Some(rest) = p.strip_prefix(&m.at).and_then(|r| r.strip_prefix('/')) {
                return (m.host.join(rest), m.read_only, p);
            }
            if m.at == "/" {
                return (m.host.join(&p[1..]), m.read_only, p);
            }
        }
        let rel = p.trim_start_matches('/');
        (self.rootfs.join(rel), self.root_read_only, p)
    }

    fn io(path: &str, source: std::io::Error) -> FsError {
        if source.kind() == std::io::ErrorKind::NotFound {
            FsError::NotFound(path.to_string())
        } else {
            FsError::Io {
                path: path.to_string(),
                source,
            }
        }
    }

    /// Reads a whole file.
    pub fn read(&self, path: &str) -> Result<Vec<u8>, FsError> {
        let (host, _, _) = self.locate(path);
        if host.is_dir() {
            return Err(FsError::IsDirectory(path.to_string()));
        }
        std::fs::read(&host).map_err(|e| Self::io(path, e))
    }

    /// Writes (or appends to) a file, refusing read-only mounts unless the
    /// `read-only-writable` fault is on.
    pub fn write(&self, path: &str, data: &[u8], append: bool) -> Result<(), FsError> {
        let (host, ro, _) = self.locate(path);
        if ro && !self.faults.read_only_writable() {
            return Err(FsError::ReadOnly {
                msg: self.os.read_only_write_error(),
                path: path.to_string(),
            });
        }
        if host.is_dir() {
            return Err(FsError::IsDirectory(path.to_string()));
        }
        if let Some(parent) = host.parent()
            && !parent.exists()
        {
            return Err(FsError::NotFound(path.to_string()));
        }
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(append)
            .truncate(!append)
            .open(&host)
            .map_err(|e| Self::io(path, e))?;
        f.write_all(data).map_err(|e| Self::io(path, e))
    }

    /// Creates a directory (and its parents).
    pub fn mkdir(&self, path: &str) -> Result<(), FsError> {
        let (host, ro, _) = self.locate(path);
        if ro && !self.faults.read_only_writable() {
            return Err(FsError::ReadOnly {
                msg: self.os.read_only_write_error(),
                path: path.to_string(),
            });
        }
        std::fs::create_dir_all(&host).map_err(|e| Self::io(path, e))
    }

    /// Removes a file.
    pub fn remove(&self, path: &str) -> Result<(), FsError> {
        let (host, ro, _) = self.locate(path);
        if ro && !self.faults.read_only_writable() {
            return Err(FsError::ReadOnly {
                msg: self.os.read_only_write_error(),
                path: path.to_string(),
            });
        }
        std::fs::remove_file(&host).map_err(|e| Self::io(path, e))
    }

    /// Whether `path` exists, and whether it is a directory.
    pub fn stat(&self, path: &str) -> Option<bool> {
        if let Some(name) = named_pipe(self.os, path) {
            return if name.is_empty() {
                Some(true)
            } else {
                self.pipe_names()
                    .iter()
                    .any(|p| p.eq_ignore_ascii_case(&name))
                    .then_some(false)
            };
        }
        let (host, _, p) = self.locate(path);
        if self
            .mounts
            .iter()
            .any(|m| m.at.starts_with(&format!("{}/", p.trim_end_matches('/'))) || m.at == p)
        {
            return Some(true);
        }
        std::fs::metadata(host).ok().map(|m| m.is_dir())
    }

    /// Lists a directory (mount points inside it included); a file lists as itself, named by
    /// `path` as given, as `ls FILE` does.
    pub fn list(&self, path: &str) -> Result<Vec<DirEntry>, FsError> {
        if let Some(name) = named_pipe(self.os, path) {
            let pipe = |name: String| DirEntry {
                name,
                is_dir: false,
                size: 0,
                mode: 0o644,
                link: None,
            };
            if name.is_empty() {
                return Ok(self.pipe_names().into_iter().map(pipe).collect());
            }
            return match self.stat(path) {
                Some(_) => Ok(vec![pipe(name)]),
                None => Err(FsError::NotFound(path.to_string())),
            };
        }
        let (host, _, p) = self.locate(path);
        if let Ok(md) = std::fs::metadata(&host)
            && !md.is_dir()
        {
            return Ok(vec![entry(path.to_string(), &host, &md)]);
        }
        let mut out: BTreeMap<String, DirEntry> = BTreeMap::new();
        match std::fs::read_dir(&host) {
            Ok(rd) => {
                for e in rd.flatten() {
                    let name = e.file_name().to_string_lossy().to_string();
                    // Through symlinks: the kubelet's `..data` links point at real files.
                    let Ok(md) = std::fs::metadata(e.path()).or_else(|_| e.metadata()) else {
                        continue;
                    };
                    out.insert(name.clone(), entry(name, &e.path(), &md));
                }
            }
            Err(e) if self.stat(path) != Some(true) => return Err(Self::io(path, e)),
            Err(_) => {}
        }
        let prefix = if p == "/" { "/".to_string() } else { format!("{p}/") };
        for m in &self.mounts {
            if let Some(rest) = m.at.strip_prefix(&prefix)
                && !rest.is_empty()
            {
                let first = rest.split('/').next().unwrap_or(rest).to_string();
                out.entry(first.clone()).or_insert(DirEntry {
                    name: first,
                    is_dir: true,
                    size: 0,
                    mode: 0o755,
                    link: None,
                });
            }
        }
        Ok(out.into_values().collect())
    }

    /// Bytes used under the container's writable layer (for `rootfs.usedBytes`).
    pub fn rootfs_used(&self) -> u64 {
        dir_size(&self.rootfs)
    }
}

/// The listing entry of `host` (metadata `md`, already through any symlink) named `name`.
fn entry(name: String, host: &Path, md: &std::fs::Metadata) -> DirEntry {
    DirEntry {
        name,
        is_dir: md.is_dir(),
        size: if md.is_dir() { 4096 } else { md.len() },
        mode: mode_of(md),
        link: std::fs::read_link(host).ok().map(|t| t.to_string_lossy().into_owned()),
    }
}

/// Recursive size of a directory.
pub fn dir_size(p: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(p) else { return 0 };
    rd.flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_size(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// A set-up volume.
#[derive(Debug, Clone)]
pub struct VolumeDir {
    /// Backing path on the host.
    pub host: PathBuf,
    /// Whether the backing path is a single file (hostPath of type File).
    pub is_file: bool,
    /// Why a container on this OS cannot mount it (Windows emptyDir medium Memory).
    pub unsupported: Option<String>,
    /// Whether the volume source forces read-only (secrets and configMaps are written by the
    /// kubelet, not by containers).
    pub read_only: bool,
    /// Whether it is an emptyDir (shared by every container of the pod).
    pub empty_dir: bool,
    /// For a hostPath naming a host named pipe (`\\.\pipe\NAME` on Windows): the pipe.
    pub pipe: Option<String>,
}

/// A pod's volumes, as the kubelet set them up.
#[derive(Debug, Clone, Default)]
pub struct PodVolumes {
    /// By volume name.
    pub volumes: HashMap<String, VolumeDir>,
    /// The cluster's fault switches (`emptydir-not-shared`, `unsupported-mounts-accepted`
    /// break how volumes are mounted).
    pub faults: Arc<Faults>,
}

fn write_file(volume: &str, dir: &Path, rel: &str, data: &[u8]) -> Result<(), VolumeError> {
    let path = dir.join(rel);
    let io = |source| VolumeError::Io {
        volume: volume.to_string(),
        path: path.clone(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    std::fs::write(&path, data).map_err(io)
}

fn mkdir(volume: &str, dir: &Path) -> Result<(), VolumeError> {
    std::fs::create_dir_all(dir).map_err(|source| VolumeError::Io {
        volume: volume.to_string(),
        path: dir.to_path_buf(),
        source,
    })
}

/// What the kubelet needs to resolve downward API fields.
pub trait FieldSource: Send + Sync {
    /// The value of a `fieldRef.fieldPath`.
    fn field(&self, path: &str) -> Option<String>;
    /// The value of a `resourceFieldRef` of container `container`.
    fn resource(&self, container: Option<&str>, resource: &str, divisor: Option<&str>) -> Option<String>;
}

impl PodVolumes {
    /// Sets up every volume of `pod` under `pod_dir/volumes` (hostPath under `host_root`).
    pub async fn setup(
        client: &kube::Client,
        pod: &Pod,
        os: Os,
        pod_dir: &Path,
        host_root: &Path,
        fields: &dyn FieldSource,
        faults: &Arc<Faults>,
    ) -> Result<PodVolumes, VolumeError> {
        let ns = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
        let mut out = PodVolumes {
            volumes: HashMap::new(),
            faults: faults.clone(),
        };
        let spec = pod.spec.clone().unwrap_or_default();
        for v in spec.volumes.iter().flatten() {
            let dir = pod_dir.join("volumes").join(&v.name);
            let vd = Self::setup_one(client, &ns, v, os, &dir, host_root, fields, faults).await?;
            out.volumes.insert(v.name.clone(), vd);
        }
        Ok(out)
    }

    #[expect(
        clippy::too_many_arguments,
        reason = "the API client, the pod's namespace and directories, its fields and the faults are all needed"
    )]
    async fn setup_one(
        client: &kube::Client,
        ns: &str,
        v: &Volume,
        os: Os,
        dir: &Path,
        host_root: &Path,
        fields: &dyn FieldSource,
        faults: &Faults,
    ) -> Result<VolumeDir, VolumeError> {
        let plain = |host: PathBuf, read_only: bool| VolumeDir {
            host,
            is_file: false,
            unsupported: None,
            read_only,
            empty_dir: false,
            pipe: None,
        };
        if let Some(ed) = &v.empty_dir {
            mkdir(&v.name, dir)?;
            let medium = ed.medium.as_deref().unwrap_or("");
            let unsupported = if (medium == "Memory" || medium.starts_with("HugePages"))
                && !os.supports_memory_medium()
                && !faults.is_on("unsupported-mounts-accepted")
            {
                Some(format!(
                    "emptyDir medium {medium} of volume \"{}\" is not supported on Windows nodes",
                    v.name
                ))
            } else {
                None
            };
            return Ok(VolumeDir {
                host: dir.to_path_buf(),
                is_file: false,
                unsupported,
                read_only: false,
                empty_dir: true,
                pipe: None,
            });
        }
        if let Some(hp) = &v.host_path {
            // A named pipe is mapped into the container's pipe namespace, not bind-mounted as a
            // directory; `named-pipes-as-directories` plays a runtime without pipe support,
            // which creates a directory by that name instead.
            if let Some(name) = named_pipe(os, &hp.path).filter(|n| !n.is_empty())
                && !faults.is_on("named-pipes-as-directories")
            {
                let exists = WINDOWS_HOST_PIPES.iter().any(|p| p.eq_ignore_ascii_case(&name));
                return Ok(VolumeDir {
                    host: PathBuf::new(),
                    is_file: false,
                    unsupported: (!exists).then(|| {
                        format!(
                            "hostPath volume \"{}\": named pipe {} does not exist on the host",
                            v.name, hp.path
                        )
                    }),
                    read_only: false,
                    empty_dir: false,
                    pipe: Some(name),
                });
            }
            let rel = normalise(os, &hp.path, "/");
            let host = host_root.join(rel.trim_start_matches('/'));
            let kind = hp.type_.as_deref().unwrap_or("");
            let is_file = matches!(kind, "File" | "FileOrCreate");
            if is_file {
                if let Some(parent) = host.parent() {
                    mkdir(&v.name, parent)?;
                }
                if !host.exists() {
                    write_file(
                        &v.name,
                        host.parent().unwrap_or(host_root),
                        &host.file_name().unwrap_or_default().to_string_lossy(),
                        b"",
                    )?;
                }
            } else {
                mkdir(&v.name, &host)?;
            }
            return Ok(VolumeDir {
                host,
                is_file,
                unsupported: None,
                read_only: false,
                empty_dir: false,
                pipe: None,
            });
        }
        if let Some(payload) = Self::payload(client, ns, v, fields).await? {
            // `volume-content-missing`: the kubelet mounts the volume but publishes no files.
            let payload = if faults.is_on("volume-content-missing") {
                Payload::new()
            } else {
                payload
            };
            write_payload(&v.name, dir, &payload)?;
            return Ok(plain(dir.to_path_buf(), true));
        }
        mkdir(&v.name, dir)?;
        // Volume sources the simulator does not model (PVCs, CSI…) are empty directories would
        // pretend; they are refused at container creation instead.
        Ok(VolumeDir {
            host: dir.to_path_buf(),
            is_file: false,
            unsupported: Some(format!(
                "volume \"{}\" uses a volume source the simulated kubelet does not support",
                v.name
            )),
            read_only: false,
            empty_dir: false,
            pipe: None,
        })
    }

    /// Rewrites the contents of every ConfigMap, Secret, downward API and projected volume of
    /// `pod` from the current objects and pod metadata, as the kubelet's periodic pod sync does
    /// (the reason a ConfigMap update or a new label reaches a running pod). Each volume is
    /// swapped atomically through its `..data` link; an unchanged volume is left alone.
    ///
    /// # Errors
    /// The first volume that could not be rebuilt (its old contents stay, as the kubelet keeps
    /// them when a refresh fails).
    pub async fn resync(
        client: &kube::Client,
        pod: &Pod,
        pod_dir: &Path,
        fields: &dyn FieldSource,
        faults: &Faults,
    ) -> Result<(), VolumeError> {
        let ns = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
        let spec = pod.spec.clone().unwrap_or_default();
        for v in spec.volumes.iter().flatten() {
            let dir = pod_dir.join("volumes").join(&v.name);
            // A pod being torn down loses its directory: never recreate it.
            if !dir.is_dir() {
                continue;
            }
            if let Some(payload) = Self::payload(client, &ns, v, fields).await? {
                if faults.is_on("volume-content-missing") {
                    continue;
                }
                write_payload(&v.name, &dir, &payload)?;
            }
        }
        Ok(())
    }

    /// The files of a ConfigMap, Secret, downward API or projected volume (`None` for other
    /// sources), with their modes: each item's `mode`, else the volume's `defaultMode`, else
    /// 0644 (the API default 420).
    async fn payload(
        client: &kube::Client,
        ns: &str,
        v: &Volume,
        fields: &dyn FieldSource,
    ) -> Result<Option<Payload>, VolumeError> {
        let mut out = Payload::new();
        if let Some(cm) = &v.config_map {
            let mode = cm.default_mode.unwrap_or(DEFAULT_MODE);
            let items = cm.items.clone().unwrap_or_default();
            let data = Self::config_map_data(client, ns, &v.name, &cm.name, cm.optional.unwrap_or(false)).await?;
            add_items(&mut out, data.as_ref(), &items, mode);
            return Ok(Some(out));
        }
        if let Some(s) = &v.secret {
            let mode = s.default_mode.unwrap_or(DEFAULT_MODE);
            let name = s.secret_name.clone().unwrap_or_default();
            let items = s.items.clone().unwrap_or_default();
            let data = Self::secret_data(client, ns, &v.name, &name, s.optional.unwrap_or(false)).await?;
            add_items(&mut out, data.as_ref(), &items, mode);
            return Ok(Some(out));
        }
        if let Some(d) = &v.downward_api {
            let mode = d.default_mode.unwrap_or(DEFAULT_MODE);
            for item in d.items.iter().flatten() {
                out.insert(
                    item.path.clone(),
                    (downward_value(item, fields), item.mode.unwrap_or(mode)),
                );
            }
            return Ok(Some(out));
        }
        if let Some(p) = &v.projected {
            let mode = p.default_mode.unwrap_or(DEFAULT_MODE);
            let lenient = v.name.starts_with("kube-api-access-");
            for src in p.sources.iter().flatten() {
                if let Some(cm) = &src.config_map {
                    let items = cm.items.clone().unwrap_or_default();
                    match Self::config_map_data(client, ns, &v.name, &cm.name, cm.optional.unwrap_or(false)).await {
                        Ok(data) => add_items(&mut out, data.as_ref(), &items, mode),
                        Err(e) if lenient => {
                            warn!(volume = %v.name, error = %e, "service account volume source missing")
                        }
                        Err(e) => return Err(e),
                    }
                }
                if let Some(s) = &src.secret {
                    let items = s.items.clone().unwrap_or_default();
                    let data = Self::secret_data(client, ns, &v.name, &s.name, s.optional.unwrap_or(false)).await?;
                    add_items(&mut out, data.as_ref(), &items, mode);
                }
                if let Some(d) = &src.downward_api {
                    for item in d.items.iter().flatten() {
                        out.insert(
                            item.path.clone(),
                            (downward_value(item, fields), item.mode.unwrap_or(mode)),
                        );
                    }
                }
                if let Some(t) = &src.service_account_token {
                    // No token is invented: without a TokenRequest answer the file stays absent.
                    warn!(volume = %v.name, path = %t.path, "service account tokens are not issued by the simulated kubelet");
                }
            }
            return Ok(Some(out));
        }
        Ok(None)
    }

    /// A ConfigMap's `data` and `binaryData` (`None` when it is missing and optional).
    async fn config_map_data(
        client: &kube::Client,
        ns: &str,
        volume: &str,
        name: &str,
        optional: bool,
    ) -> Result<Option<BTreeMap<String, Vec<u8>>>, VolumeError> {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        let cm = api.get_opt(name).await.map_err(|source| VolumeError::Api {
            volume: volume.into(),
            what: format!("configmap {name}"),
            source,
        })?;
        let Some(cm) = cm else {
            return if optional {
                Ok(None)
            } else {
                Err(VolumeError::ConfigMapNotFound {
                    volume: volume.into(),
                    name: name.into(),
                })
            };
        };
        let mut data: BTreeMap<String, Vec<u8>> = cm
            .data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.into_bytes()))
            .collect();
        for (k, v) in cm.binary_data.unwrap_or_default() {
            data.insert(k, v.0);
        }
        Ok(Some(data))
    }

    /// A Secret's decoded `data` (and `stringData`), `None` when it is missing and optional.
    async fn secret_data(
        client: &kube::Client,
        ns: &str,
        volume: &str,
        name: &str,
        optional: bool,
    ) -> Result<Option<BTreeMap<String, Vec<u8>>>, VolumeError> {
        let api: Api<Secret> = Api::namespaced(client.clone(), ns);
        let s = api.get_opt(name).await.map_err(|source| VolumeError::Api {
            volume: volume.into(),
            what: format!("secret {name}"),
            source,
        })?;
        let Some(s) = s else {
            return if optional {
                Ok(None)
            } else {
                Err(VolumeError::SecretNotFound {
                    volume: volume.into(),
                    name: name.into(),
                })
            };
        };
        let mut data: BTreeMap<String, Vec<u8>> =
            s.data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)).collect();
        for (k, v) in s.string_data.unwrap_or_default() {
            data.insert(k, v.into_bytes());
        }
        Ok(Some(data))
    }

    /// The mounts of `container`, or why the container cannot be created on `os`.
    pub fn mounts_for(&self, container: &Container, os: Os) -> Result<Vec<Mount>, String> {
        let mut out = Vec::new();
        for vm in container.volume_mounts.iter().flatten() {
            out.push(self.mount(vm, os, &container.name)?);
        }
        Ok(out)
    }

    fn mount(&self, vm: &VolumeMount, os: Os, container: &str) -> Result<Mount, String> {
        let v = self
            .volumes
            .get(&vm.name)
            .ok_or_else(|| format!("volume \"{}\" of mount {} is not set up", vm.name, vm.mount_path))?;
        if let Some(why) = &v.unsupported {
            return Err(why.clone());
        }
        if let Some(pipe) = &v.pipe {
            return match named_pipe(os, &vm.mount_path).filter(|n| !n.is_empty()) {
                Some(name) => Ok(Mount {
                    at: String::new(),
                    host: PathBuf::new(),
                    read_only: vm.read_only.unwrap_or(false),
                    pipe: Some(name),
                }),
                None => Err(format!(
                    "volume \"{}\" is the host named pipe \\\\.\\pipe\\{pipe}: it can only be mounted at a named pipe path (\\\\.\\pipe\\NAME), not at {}",
                    vm.name, vm.mount_path
                )),
            };
        }
        let sub = vm
            .sub_path
            .as_deref()
            .filter(|s| !s.is_empty())
            .or(vm.sub_path_expr.as_deref().filter(|s| !s.is_empty()));
        if (sub.is_some() || v.is_file)
            && !os.supports_file_mounts()
            && !self.faults.is_on("unsupported-mounts-accepted")
        {
            return Err(format!(
                "mounting volume \"{}\" at {} {} is not supported on Windows nodes",
                vm.name,
                vm.mount_path,
                if sub.is_some() {
                    "through subPath"
                } else {
                    "onto a single file"
                }
            ));
        }
        let host = match sub {
            Some(s) => {
                let h = v.host.join(s);
                if !h.exists()
                    && let Err(e) = std::fs::create_dir_all(&h)
                {
                    return Err(format!(
                        "failed to create subPath directory for volumeMount \"{}\": {e}",
                        vm.name
                    ));
                }
                h
            }
            None => v.host.clone(),
        };
        // `emptydir-not-shared`: every container gets a private directory instead of the
        // pod's one emptyDir, so what one container writes the others never see.
        let host = if v.empty_dir && self.faults.is_on("emptydir-not-shared") {
            let own = host.join(format!(".container-{container}"));
            std::fs::create_dir_all(&own)
                .map_err(|e| format!("failed to create the emptyDir of volumeMount \"{}\": {e}", vm.name))?;
            own
        } else {
            host
        };
        Ok(Mount {
            at: normalise(os, &vm.mount_path, "/"),
            host,
            read_only: vm.read_only.unwrap_or(false) || v.read_only,
            pipe: None,
        })
    }
}

/// The files of a volume by relative path: content and permission bits.
pub type Payload = BTreeMap<String, (Vec<u8>, i32)>;

/// The file mode a ConfigMap, Secret or downward API file gets without `defaultMode` (the
/// API's default 420 = 0644).
const DEFAULT_MODE: i32 = 0o644;

/// Adds a ConfigMap's or Secret's keys to `out`: every key, or only `items` (mapped to their
/// paths, with their own modes) when given.
fn add_items(
    out: &mut Payload,
    data: Option<&BTreeMap<String, Vec<u8>>>,
    items: &[k8s_openapi::api::core::v1::KeyToPath],
    mode: i32,
) {
    let Some(data) = data else { return };
    if items.is_empty() {
        for (k, v) in data {
            out.insert(k.clone(), (v.clone(), mode));
        }
    } else {
        for it in items {
            if let Some(v) = data.get(&it.key) {
                out.insert(it.path.clone(), (v.clone(), it.mode.unwrap_or(mode)));
            }
        }
    }
}

/// The value of one downward API file (empty when the field cannot be resolved).
fn downward_value(item: &k8s_openapi::api::core::v1::DownwardAPIVolumeFile, fields: &dyn FieldSource) -> Vec<u8> {
    let value = if let Some(f) = &item.field_ref {
        fields.field(&f.field_path)
    } else if let Some(r) = &item.resource_field_ref {
        fields.resource(
            r.container_name.as_deref(),
            &r.resource,
            r.divisor.as_ref().map(|q| q.0.as_str()),
        )
    } else {
        None
    };
    value.unwrap_or_default().into_bytes()
}

/// The link the kubelet's atomic writer points at the current payload directory.
const DATA_LINK: &str = "..data";

/// Whether the payload published in `dir` already equals `payload` (same files, bytes, modes).
fn payload_is_current(dir: &Path, payload: &Payload) -> bool {
    let data = dir.join(DATA_LINK);
    if std::fs::read_link(&data).is_err() {
        return false;
    }
    let same_files = payload.iter().all(|(rel, (bytes, mode))| {
        let path = data.join(rel);
        std::fs::read(&path).is_ok_and(|b| &b == bytes)
            && std::fs::metadata(&path).is_ok_and(|m| mode_of(&m) == (*mode as u32 & 0o7777))
    });
    same_files && count_files(&data) == payload.len()
}

fn count_files(p: &Path) -> usize {
    let Ok(rd) = std::fs::read_dir(p) else { return 0 };
    rd.flatten()
        .map(|e| match std::fs::metadata(e.path()) {
            Ok(m) if m.is_dir() => count_files(&e.path()),
            Ok(_) => 1,
            Err(_) => 0,
        })
        .sum()
}

/// Publishes `payload` in `dir` the way the kubelet's atomic writer does: the files go into a
/// fresh timestamped directory `..<time>`, the `..data` link is swapped to it with one rename
/// (readers see the old set or the new one, never a mix), each top-level name is a link
/// `name -> ..data/name`, and names and the directory of the previous payload are removed.
fn write_payload(volume: &str, dir: &Path, payload: &Payload) -> Result<(), VolumeError> {
    mkdir(volume, dir)?;
    if payload_is_current(dir, payload) {
        return Ok(());
    }
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| VolumeError::Io {
            volume: volume.to_string(),
            path,
            source,
        }
    };
    let old = std::fs::read_link(dir.join(DATA_LINK)).ok();
    let stamp = jiff::Timestamp::now().strftime("%Y_%m_%d_%H_%M_%S.%f").to_string();
    let mut name = format!("..{stamp}");
    while dir.join(&name).exists() {
        name.push('_');
    }
    let fresh = dir.join(&name);
    mkdir(volume, &fresh)?;
    for (rel, (bytes, mode)) in payload {
        write_file(volume, &fresh, rel, bytes)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let path = fresh.join(rel);
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(*mode as u32 & 0o7777))
                .map_err(io(&path))?;
        }
        #[cfg(not(unix))]
        let _ = mode;
    }
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    symlink(Path::new(&name), &tmp).map_err(io(&tmp))?;
    std::fs::rename(&tmp, dir.join(DATA_LINK)).map_err(io(&dir.join(DATA_LINK)))?;
    let top: std::collections::BTreeSet<String> = payload
        .keys()
        .filter_map(|rel| rel.split('/').find(|s| !s.is_empty()).map(str::to_string))
        .collect();
    for t in &top {
        let link = dir.join(t);
        if std::fs::symlink_metadata(&link).is_err() {
            symlink(&Path::new(DATA_LINK).join(t), &link).map_err(io(&link))?;
        }
    }
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().to_string();
            let is_link = e.file_type().is_ok_and(|t| t.is_symlink());
            if !n.starts_with("..") && is_link && !top.contains(&n) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    if let Some(old) = old
        && old.as_path() != Path::new(&name)
        && let Err(e) = std::fs::remove_dir_all(dir.join(&old))
    {
        warn!(volume, dir = %old.display(), error = %e, "old volume payload not removed");
    }
    Ok(())
}

#[cfg(unix)]
fn symlink(target: &Path, link: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}

#[cfg(not(unix))]
fn symlink(target: &Path, link: &Path) -> std::io::Result<()> {
    let _ = (target, link);
    Err(std::io::Error::other(
        "the simulated kubelet's atomic writer needs symlinks",
    ))
}

/// Decodes a base64 value (for tests and secrets given as strings).
pub fn b64(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD.decode(s).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(os: Os, ro: bool, dir: &Path) -> FsView {
        std::fs::create_dir_all(dir.join("vol")).unwrap();
        std::fs::create_dir_all(dir.join("root")).unwrap();
        FsView::new(
            os,
            dir.join("root"),
            false,
            vec![Mount {
                at: normalise(os, if os == Os::Windows { "C:\\mnt\\Vol" } else { "/mnt/vol" }, "/"),
                host: dir.join("vol"),
                read_only: ro,
                pipe: None,
            }],
            Arc::new(Faults::default()),
        )
    }

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
    fn a_mapped_host_pipe_shows_in_the_containers_pipe_namespace_only() {
        let mut vols = PodVolumes::default();
        vols.volumes.insert(
            "pipe".into(),
            VolumeDir {
                host: PathBuf::new(),
                is_file: false,
                unsupported: None,
                read_only: false,
                empty_dir: false,
                pipe: Some("containerd-containerd".into()),
            },
        );
        let mount_at = |path: &str| VolumeMount {
            name: "pipe".into(),
            mount_path: path.into(),
            ..Default::default()
        };
        let wrong = vols.mount(&mount_at(r"C:\pipe"), Os::Windows, "c").unwrap_err();
        assert!(wrong.contains(r"can only be mounted at a named pipe path"), "{wrong}");
        let m = vols
            .mount(&mount_at(r"\\.\pipe\containerd-containerd"), Os::Windows, "c")
            .unwrap();
        let d = tempfile::tempdir().unwrap();
        let fs = FsView::new(
            Os::Windows,
            d.path().to_path_buf(),
            false,
            vec![m],
            Arc::new(Faults::default()),
        );
        let names: Vec<String> = fs.list(r"\\.\pipe\").unwrap().into_iter().map(|e| e.name).collect();
        assert!(names.contains(&"containerd-containerd".to_string()), "{names:?}");
        assert!(names.contains(&"lsass".to_string()), "{names:?}");
        assert_eq!(fs.stat(r"\\.\pipe\CONTAINERD-containerd"), Some(false));
        assert_eq!(fs.stat(r"\\.\pipe\docker_engine"), None);
        assert_eq!(fs.stat(r"C:\pipe\containerd-containerd"), None);
        let bare = FsView::new(
            Os::Windows,
            d.path().to_path_buf(),
            false,
            vec![],
            Arc::new(Faults::default()),
        );
        assert_eq!(bare.stat(r"\\.\pipe\containerd-containerd"), None);
    }

    #[test]
    fn normalises_windows_paths() {
        assert_eq!(normalise(Os::Windows, "C:\\Mnt\\x\\..\\y.txt", "/"), "/mnt/y.txt");
        assert_eq!(normalise(Os::Windows, "/mnt/y.txt", "/"), "/mnt/y.txt");
        assert_eq!(normalise(Os::Linux, "a/b", "/tmp"), "/tmp/a/b");
        assert_eq!(normalise(Os::Linux, "/Mnt", "/"), "/Mnt");
    }

    #[test]
    fn read_only_mount_refuses_writes_with_os_message() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("vol")).unwrap();
        std::fs::write(t.path().join("vol/f.txt"), b"data").unwrap();
        let w = view(Os::Windows, true, t.path());
        assert_eq!(w.read("c:\\mnt\\vol\\F.txt").unwrap(), b"data");
        let err = w.write("C:\\mnt\\vol\\g.txt", b"x", false).unwrap_err();
        assert_eq!(err.to_string(), "Access is denied.");
        let l = view(Os::Linux, true, t.path());
        assert_eq!(
            l.write("/mnt/vol/g.txt", b"x", false).unwrap_err().to_string(),
            "Read-only file system"
        );
        let faults = Arc::new(Faults::default());
        faults.set_read_only_writable(true);
        let broken = FsView { faults, ..l };
        broken.write("/mnt/vol/g.txt", b"x", false).unwrap();
    }

    #[test]
    fn payloads_are_swapped_atomically_through_data_link() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("vol");
        let one: Payload = [
            ("data-1".to_string(), (b"value-1".to_vec(), 0o400)),
            ("path/to/x".to_string(), (b"x".to_vec(), 0o644)),
        ]
        .into();
        write_payload("v", &dir, &one).unwrap();
        assert_eq!(std::fs::read(dir.join("data-1")).unwrap(), b"value-1");
        assert_eq!(std::fs::read(dir.join("path/to/x")).unwrap(), b"x");
        let first = std::fs::read_link(dir.join(DATA_LINK)).unwrap();
        // Unchanged: nothing is rewritten.
        write_payload("v", &dir, &one).unwrap();
        assert_eq!(std::fs::read_link(dir.join(DATA_LINK)).unwrap(), first);
        let two: Payload = [("data-1".to_string(), (b"value-2".to_vec(), 0o400))].into();
        write_payload("v", &dir, &two).unwrap();
        assert_eq!(std::fs::read(dir.join("data-1")).unwrap(), b"value-2");
        assert!(
            std::fs::symlink_metadata(dir.join("path")).is_err(),
            "stale name removed"
        );
        assert!(!dir.join(&first).exists(), "old payload removed");
        let view = FsView::new(
            Os::Linux,
            t.path().join("root"),
            false,
            vec![Mount {
                at: "/mnt/v".into(),
                host: dir.clone(),
                read_only: true,
                pipe: None,
            }],
            Arc::new(Faults::default()),
        );
        let listed = view.list("/mnt/v/data-1").unwrap();
        assert_eq!(listed.len(), 1);
        assert!(
            listed[0].long_format(true).starts_with("-r-------- "),
            "{:?}",
            listed[0]
        );
        assert!(
            listed[0].long_format(false).starts_with("lrwxrwxrwx "),
            "{:?}",
            listed[0]
        );
    }

    #[test]
    fn writes_and_lists_through_mounts() {
        let t = tempfile::tempdir().unwrap();
        let l = view(Os::Linux, false, t.path());
        l.write("/mnt/vol/a", b"1\n", false).unwrap();
        l.write("/mnt/vol/a", b"2\n", true).unwrap();
        assert_eq!(l.read("/mnt/vol/a").unwrap(), b"1\n2\n");
        assert!(matches!(l.read("/mnt/vol/none"), Err(FsError::NotFound(_))));
        let names: Vec<_> = l.list("/mnt").unwrap().into_iter().map(|e| e.name).collect();
        assert_eq!(names, ["vol"]);
        l.write("/etc-file", b"x", false).unwrap();
        assert!(t.path().join("root/etc-file").exists());
    }
}
