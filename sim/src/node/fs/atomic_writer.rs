//! The kubelet's atomic writer: a volume payload (ConfigMap, Secret, downward API and
//! projected files) is published into a fresh timestamped directory and swapped in through the
//! `..data` link, so readers see the old set or the new one, never a mix. Separate because it
//! is pure host file-system mechanics, independent of where the payload came from.

use std::collections::BTreeMap;
use std::path::Path;

use tracing::warn;

use super::VolumeError;
use super::view::mode_of;

/// The files of a volume by relative path: content and permission bits.
pub type Payload = BTreeMap<String, (Vec<u8>, i32)>;

pub(super) fn write_file(volume: &str, dir: &Path, rel: &str, data: &[u8]) -> Result<(), VolumeError> {
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

pub(super) fn mkdir(volume: &str, dir: &Path) -> Result<(), VolumeError> {
    std::fs::create_dir_all(dir).map_err(|source| VolumeError::Io {
        volume: volume.to_string(),
        path: dir.to_path_buf(),
        source,
    })
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
pub(super) fn write_payload(volume: &str, dir: &Path, payload: &Payload) -> Result<(), VolumeError> {
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::node::fs::{FsView, Mount};
    use crate::node::net::Faults;
    use crossconf_model::os::Os;

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
                tmpfs_bytes: None,
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
}
