//! A pod's volumes as the kubelet sets them up (emptyDir, hostPath, configMap, secret,
//! downwardAPI, projected) and how they are mounted into each container. Separate from the
//! container view because it talks to the API server and follows the volume sources' rules,
//! while the view only maps paths.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, Secret, Volume, VolumeMount};
use kube::Api;
use tracing::warn;

use super::atomic_writer::{Payload, mkdir, write_file, write_payload};
use super::view::Mount;
use super::{VolumeError, WINDOWS_HOST_PIPES, named_pipe, normalise};
use crate::node::net::Faults;
use crossconf_model::os::Os;

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
    /// For an emptyDir of medium Memory on Linux, the size of its tmpfs in bytes.
    pub tmpfs_bytes: Option<u64>,
}

/// A pod's volumes, as the kubelet set them up.
#[derive(Debug, Clone, Default)]
pub struct PodVolumes {
    /// By volume name.
    pub volumes: HashMap<String, VolumeDir>,
    /// The cluster's fault switches (`emptydir-not-shared`, `subpath-ignored`, `unsupported-mounts-accepted`
    /// break how volumes are mounted).
    pub faults: Arc<Faults>,
}

/// The size of a memory-backed emptyDir's tmpfs, as the kubelet computes it
/// (pkg/volume/emptydir `calculateEmptyDirMemorySize`, SizeMemoryBackedVolumes GA): node
/// allocatable memory, lowered to the pod's memory limit when every container has one, lowered
/// to the volume's `sizeLimit` when that is smaller; zero or larger values are ignored.
pub fn memory_empty_dir_size(
    allocatable: u64,
    spec: &k8s_openapi::api::core::v1::PodSpec,
    size_limit: Option<&str>,
) -> u64 {
    let limit = |c: &Container| {
        c.resources
            .as_ref()
            .and_then(|r| r.limits.as_ref())
            .and_then(|l| l.get("memory"))
            .and_then(|q| crate::node::runtime::parse_quantity(&q.0))
            .map(|b| b as u64)
    };
    // The pod cgroup's memory limit (ResourceConfigForPod): set only when every app container
    // has one; the larger of their sum and any init container's limit.
    let apps: Option<Vec<u64>> = spec.containers.iter().map(limit).collect();
    let pod_limit = apps.map(|a| {
        let inits = spec
            .init_containers
            .iter()
            .flatten()
            .filter_map(limit)
            .max()
            .unwrap_or(0);
        a.iter().sum::<u64>().max(inits)
    });
    let mut size = allocatable;
    for cap in [
        pod_limit,
        size_limit
            .and_then(crate::node::runtime::parse_quantity)
            .map(|b| b as u64),
    ]
    .into_iter()
    .flatten()
    {
        if cap > 0 && cap <= size {
            size = cap;
        }
    }
    size
}

/// What the kubelet needs to resolve downward API fields.
pub trait FieldSource: Send + Sync {
    /// The value of a `fieldRef.fieldPath`.
    fn field(&self, path: &str) -> Option<String>;
    /// The value of a `resourceFieldRef` of container `container`.
    fn resource(&self, container: Option<&str>, resource: &str, divisor: Option<&str>) -> Option<String>;
}

impl PodVolumes {
    /// Sets up every volume of `pod` under `pod_dir/volumes` (hostPath under `host_root`);
    /// `allocatable_memory` (bytes) caps the tmpfs of a memory-backed emptyDir.
    #[expect(
        clippy::too_many_arguments,
        reason = "the API client, the pod and its OS, directories, fields, memory ceiling and faults are all needed"
    )]
    pub async fn setup(
        client: &kube::Client,
        pod: &Pod,
        os: Os,
        pod_dir: &Path,
        host_root: &Path,
        fields: &dyn FieldSource,
        allocatable_memory: u64,
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
            let mut vd = Self::setup_one(client, &ns, v, os, &dir, host_root, fields, faults).await?;
            if os == Os::Linux
                && let Some(ed) = v.empty_dir.as_ref().filter(|e| e.medium.as_deref() == Some("Memory"))
            {
                // `memory-volume-size-ignored`: a kubelet without SizeMemoryBackedVolumes.
                vd.tmpfs_bytes = Some(if faults.is_on("memory-volume-size-ignored") {
                    allocatable_memory
                } else {
                    memory_empty_dir_size(allocatable_memory, &spec, ed.size_limit.as_ref().map(|q| q.0.as_str()))
                });
            }
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
            tmpfs_bytes: None,
        };
        if let Some(ed) = &v.empty_dir {
            mkdir(&v.name, dir)?;
            let medium = ed.medium.as_deref().unwrap_or("");
            // medium Memory on Windows is a plain directory (mount_windows.go turns a tmpfs
            // mount into MkdirAll), so only HugePages is refused there.
            let unsupported = if medium.starts_with("HugePages")
                && !os.supports_hugepages()
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
                tmpfs_bytes: None,
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
                    tmpfs_bytes: None,
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
                // `hostpath-read-only`: a node that denies containers writes to host paths
                // (an SELinux or AppArmor policy, a read-only host filesystem).
                read_only: faults.is_on("hostpath-read-only"),
                empty_dir: false,
                pipe: None,
                tmpfs_bytes: None,
            });
        }
        if let Some(payload) = Self::payload(client, ns, v, fields, faults).await? {
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
            tmpfs_bytes: None,
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
            if let Some(payload) = Self::payload(client, &ns, v, fields, faults).await? {
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
        faults: &Faults,
    ) -> Result<Option<Payload>, VolumeError> {
        let mut out = Payload::new();
        if let Some(cm) = &v.config_map {
            let mode = cm.default_mode.unwrap_or(DEFAULT_MODE);
            let items = cm.items.clone().unwrap_or_default();
            let data =
                Self::config_map_data(client, ns, &v.name, &cm.name, cm.optional.unwrap_or(false), faults).await?;
            add_items(&mut out, data.as_ref(), &items, mode);
            return Ok(Some(out));
        }
        if let Some(s) = &v.secret {
            let mode = s.default_mode.unwrap_or(DEFAULT_MODE);
            let name = s.secret_name.clone().unwrap_or_default();
            let items = s.items.clone().unwrap_or_default();
            let optional = s.optional.unwrap_or(false);
            let data = Self::secret_data(client, ns, &v.name, &name, optional, faults).await?;
            secret_keys_present(&v.name, data.as_ref(), &items, optional, faults)?;
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
                    match Self::config_map_data(client, ns, &v.name, &cm.name, cm.optional.unwrap_or(false), faults)
                        .await
                    {
                        Ok(data) => add_items(&mut out, data.as_ref(), &items, mode),
                        Err(e) if lenient => {
                            warn!(volume = %v.name, error = %e, "service account volume source missing")
                        }
                        Err(e) => return Err(e),
                    }
                }
                if let Some(s) = &src.secret {
                    let items = s.items.clone().unwrap_or_default();
                    let optional = s.optional.unwrap_or(false);
                    let data = Self::secret_data(client, ns, &v.name, &s.name, optional, faults).await?;
                    secret_keys_present(&v.name, data.as_ref(), &items, optional, faults)?;
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
                    match super::sa_token::token(client, ns, &v.name, t, fields).await {
                        Ok(token) => {
                            out.insert(t.path.clone(), (token, mode));
                        }
                        // The kubelet retries on its next sync; the rest of the volume is usable.
                        Err(e) if lenient => {
                            warn!(volume = %v.name, error = %e, "service account token not issued yet")
                        }
                        Err(e) => return Err(e),
                    }
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
        faults: &Faults,
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
        // `binary-data-dropped`: a kubelet that publishes only a ConfigMap's text `data`.
        if !faults.is_on("binary-data-dropped") {
            for (k, v) in cm.binary_data.unwrap_or_default() {
                data.insert(k, v.0);
            }
        }
        Ok(Some(data))
    }

    /// A Secret's decoded `data` (and `stringData`), `None` when it is missing and optional
    /// (or, with the `kubelet-ignores-missing-secret` fault, missing at all).
    async fn secret_data(
        client: &kube::Client,
        ns: &str,
        volume: &str,
        name: &str,
        optional: bool,
        faults: &Faults,
    ) -> Result<Option<BTreeMap<String, Vec<u8>>>, VolumeError> {
        let optional = optional || faults.is_on("kubelet-ignores-missing-secret");
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
                    tmpfs_bytes: None,
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
        // `subpath-ignored`: the whole volume is mounted, as by a kubelet that drops subPath.
        let sub = sub.filter(|_| !self.faults.is_on("subpath-ignored"));
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
            tmpfs_bytes: v.tmpfs_bytes,
        })
    }
}

/// The file mode a ConfigMap, Secret or downward API file gets without `defaultMode` (the
/// API's default 420 = 0644).
const DEFAULT_MODE: i32 = 0o644;

/// The kubelet's check on a Secret volume's `items` (`secret.MakePayload` in
/// `pkg/volume/secret/secret.go`, also used by projected volumes): a key the Secret does not
/// hold fails the mount with "references non-existent secret key: KEY" unless the source is
/// optional. The `kubelet-ignores-missing-secret` fault skips the check (the key is left out).
fn secret_keys_present(
    volume: &str,
    data: Option<&BTreeMap<String, Vec<u8>>>,
    items: &[k8s_openapi::api::core::v1::KeyToPath],
    optional: bool,
    faults: &Faults,
) -> Result<(), VolumeError> {
    let Some(data) = data else { return Ok(()) };
    if optional || faults.is_on("kubelet-ignores-missing-secret") {
        return Ok(());
    }
    match items.iter().find(|it| !data.contains_key(&it.key)) {
        Some(it) => Err(VolumeError::SecretKeyNotFound {
            volume: volume.into(),
            key: it.key.clone(),
        }),
        None => Ok(()),
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_empty_dir_is_sized_by_allocatable_pod_limit_and_size_limit() {
        use k8s_openapi::api::core::v1::{PodSpec, ResourceRequirements};
        use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
        let limited = |mem: Option<&str>| Container {
            resources: mem.map(|m| ResourceRequirements {
                limits: Some([("memory".to_string(), Quantity(m.into()))].into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let gi = 1u64 << 30;
        let spec = |mems: &[Option<&str>]| PodSpec {
            containers: mems.iter().map(|m| limited(*m)).collect(),
            ..Default::default()
        };
        assert_eq!(memory_empty_dir_size(8 * gi, &spec(&[None]), None), 8 * gi);
        assert_eq!(memory_empty_dir_size(8 * gi, &spec(&[None]), Some("10Mi")), 10 << 20);
        // Every container limited: the pod's sum caps it; one without a limit: no pod cap.
        assert_eq!(
            memory_empty_dir_size(8 * gi, &spec(&[Some("1Gi"), Some("1Gi")]), None),
            2 * gi
        );
        assert_eq!(memory_empty_dir_size(8 * gi, &spec(&[Some("1Gi"), None]), None), 8 * gi);
        // A sizeLimit above what the pod may use, or zero, is ignored.
        assert_eq!(memory_empty_dir_size(8 * gi, &spec(&[Some("1Gi")]), Some("4Gi")), gi);
        assert_eq!(memory_empty_dir_size(8 * gi, &spec(&[None]), Some("0")), 8 * gi);
    }
    use crate::node::fs::FsView;

    fn key(k: &str) -> k8s_openapi::api::core::v1::KeyToPath {
        k8s_openapi::api::core::v1::KeyToPath {
            key: k.into(),
            path: format!("{k}-file"),
            mode: None,
        }
    }

    #[test]
    fn a_missing_secret_key_fails_the_mount_unless_optional() {
        let data: BTreeMap<String, Vec<u8>> = [("data-1".to_string(), b"value-1".to_vec())].into();
        let faults = Faults::default();
        assert!(secret_keys_present("v", Some(&data), &[key("data-1")], false, &faults).is_ok());
        assert!(secret_keys_present("v", Some(&data), &[], false, &faults).is_ok());
        let err = secret_keys_present("v", Some(&data), &[key("data-1"), key("data_4")], false, &faults)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "MountVolume.SetUp failed for volume \"v\" : references non-existent secret key: data_4"
        );
        assert!(secret_keys_present("v", Some(&data), &[key("data_4")], true, &faults).is_ok());
        let ignoring = Faults::parse("kubelet-ignores-missing-secret").unwrap();
        assert!(secret_keys_present("v", Some(&data), &[key("data_4")], false, &ignoring).is_ok());
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
                tmpfs_bytes: None,
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
}
