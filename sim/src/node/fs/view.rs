//! One container's view of its file system: the rootfs plus its mounts (longest prefix wins),
//! the Windows named-pipe namespace, and the `ls`/`dir` listing entries. Separate from volume
//! setup because the shells and the runtime only ever see a container through this view.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{CONTAINER_PIPES, FsError, named_pipe, normalise};
use crate::node::net::Faults;
use crossconf_model::os::Os;

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
    /// For a tmpfs (an emptyDir of medium Memory on Linux): its size in bytes, which `df`
    /// reports; other mounts show the node's disk.
    pub tmpfs_bytes: Option<u64>,
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
pub(super) fn mode_of(md: &std::fs::Metadata) -> u32 {
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

    /// Sets a file's permission bits (`tar x` restores the modes an archive records); a no-op
    /// where the host has no Unix modes.
    pub fn chmod(&self, path: &str, mode: u32) -> Result<(), FsError> {
        let (host, ro, _) = self.locate(path);
        if ro && !self.faults.read_only_writable() {
            return Err(FsError::ReadOnly {
                msg: self.os.read_only_write_error(),
                path: path.to_string(),
            });
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&host, std::fs::Permissions::from_mode(mode & 0o7777))
                .map_err(|e| Self::io(path, e))
        }
        #[cfg(not(unix))]
        {
            let _ = (host, mode);
            Ok(())
        }
    }

    /// When a file or directory was last modified (what `tar c` records).
    pub fn modified(&self, path: &str) -> Option<std::time::SystemTime> {
        let (host, _, _) = self.locate(path);
        std::fs::metadata(host).and_then(|m| m.modified()).ok()
    }

    /// Sets a file's modification time (`tar x` without `m` restores the archived one).
    pub fn set_modified(&self, path: &str, t: std::time::SystemTime) -> Result<(), FsError> {
        let (host, ro, _) = self.locate(path);
        if ro && !self.faults.read_only_writable() {
            return Err(FsError::ReadOnly {
                msg: self.os.read_only_write_error(),
                path: path.to_string(),
            });
        }
        std::fs::File::options()
            .write(true)
            .open(&host)
            .and_then(|f| f.set_modified(t))
            .map_err(|e| Self::io(path, e))
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

    /// The file mounts, in mount order (shortest path first, as `/proc/mounts` lists them).
    pub fn mount_table(&self) -> Vec<&Mount> {
        let mut out: Vec<&Mount> = self.mounts.iter().collect();
        out.sort_by_key(|m| m.at.len());
        out
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
                tmpfs_bytes: None,
            }],
            Arc::new(Faults::default()),
        )
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
