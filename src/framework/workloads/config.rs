//! ConfigMaps, Secrets and the volumes that consume them (pure): configMap, secret, emptyDir,
//! downwardAPI and projected volumes, with their key-to-path items.

use std::fmt::Debug;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapProjection, ConfigMapVolumeSource, DownwardAPIProjection, DownwardAPIVolumeFile,
    DownwardAPIVolumeSource, EmptyDirVolumeSource, KeyToPath, ObjectFieldSelector, ProjectedVolumeSource,
    ResourceFieldSelector, Secret, SecretProjection, SecretVolumeSource, Volume, VolumeProjection,
};

use super::controllers::meta;

/// A ConfigMap with string `data`.
pub fn config_map(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: meta(name),
        data: Some(data.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
        ..Default::default()
    }
}

/// A Secret (type Opaque) whose `data` holds the bytes of the given strings.
pub fn secret(name: &str, data: &[(&str, &str)]) -> Secret {
    Secret {
        metadata: meta(name),
        type_: Some("Opaque".into()),
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Default::default()
    }
}

fn key_paths(items: &[(&str, &str)]) -> Option<Vec<KeyToPath>> {
    (!items.is_empty()).then(|| {
        items
            .iter()
            .map(|(key, path)| KeyToPath {
                key: key.to_string(),
                path: path.to_string(),
                mode: None,
            })
            .collect()
    })
}

/// A volume `volume` showing ConfigMap `config_map`; `items` maps keys to file paths (empty:
/// every key as a file of its own name).
pub fn config_map_volume(volume: &str, config_map: &str, items: &[(&str, &str)]) -> Volume {
    Volume {
        name: volume.into(),
        config_map: Some(ConfigMapVolumeSource {
            name: config_map.into(),
            items: key_paths(items),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A volume `volume` showing Secret `secret`; `items` as for [`config_map_volume`].
pub fn secret_volume(volume: &str, secret: &str, items: &[(&str, &str)]) -> Volume {
    Volume {
        name: volume.into(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret.into()),
            items: key_paths(items),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// An emptyDir volume on the default medium.
pub fn empty_dir_volume(volume: &str) -> Volume {
    Volume {
        name: volume.into(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Default::default()
    }
}

/// One downward API file: a pod field (`metadata.name`, `metadata.labels`…) or a container
/// resource (`limits.cpu`, `requests.memory`… of container `container`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DownwardItem {
    /// `path` shows pod field `field_path`.
    Field {
        /// File path inside the volume.
        path: String,
        /// The pod field, e.g. `metadata.name`.
        field_path: String,
    },
    /// `path` shows `resource` of `container`.
    Resource {
        /// File path inside the volume.
        path: String,
        /// The container whose resources are shown.
        container: String,
        /// `limits.cpu`, `requests.memory`…
        resource: String,
    },
}

impl DownwardItem {
    /// A pod field item.
    pub fn field(path: &str, field_path: &str) -> DownwardItem {
        DownwardItem::Field {
            path: path.into(),
            field_path: field_path.into(),
        }
    }

    /// A container resource item.
    pub fn resource(path: &str, container: &str, resource: &str) -> DownwardItem {
        DownwardItem::Resource {
            path: path.into(),
            container: container.into(),
            resource: resource.into(),
        }
    }

    fn to_file(&self) -> DownwardAPIVolumeFile {
        match self {
            DownwardItem::Field { path, field_path } => DownwardAPIVolumeFile {
                path: path.clone(),
                field_ref: Some(ObjectFieldSelector {
                    field_path: field_path.clone(),
                    api_version: Some("v1".into()),
                }),
                ..Default::default()
            },
            DownwardItem::Resource {
                path,
                container,
                resource,
            } => DownwardAPIVolumeFile {
                path: path.clone(),
                resource_field_ref: Some(ResourceFieldSelector {
                    container_name: Some(container.clone()),
                    resource: resource.clone(),
                    divisor: None,
                }),
                ..Default::default()
            },
        }
    }
}

/// A downward API volume with `items`.
pub fn downward_volume(volume: &str, items: &[DownwardItem]) -> Volume {
    Volume {
        name: volume.into(),
        downward_api: Some(DownwardAPIVolumeSource {
            items: Some(items.iter().map(DownwardItem::to_file).collect()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// One source of a projected volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Projection {
    /// A ConfigMap with key→path items (empty: every key).
    ConfigMap(String, Vec<(String, String)>),
    /// A Secret with key→path items (empty: every key).
    Secret(String, Vec<(String, String)>),
    /// Downward API items.
    Downward(Vec<DownwardItem>),
}

/// A projected volume combining `sources`.
pub fn projected_volume(volume: &str, sources: &[Projection]) -> Volume {
    let items = |pairs: &Vec<(String, String)>| {
        let borrowed: Vec<(&str, &str)> = pairs.iter().map(|(k, p)| (k.as_str(), p.as_str())).collect();
        key_paths(&borrowed)
    };
    let sources = sources
        .iter()
        .map(|s| match s {
            Projection::ConfigMap(name, pairs) => VolumeProjection {
                config_map: Some(ConfigMapProjection {
                    name: name.clone(),
                    items: items(pairs),
                    optional: None,
                }),
                ..Default::default()
            },
            Projection::Secret(name, pairs) => VolumeProjection {
                secret: Some(SecretProjection {
                    name: name.clone(),
                    items: items(pairs),
                    optional: None,
                }),
                ..Default::default()
            },
            Projection::Downward(list) => VolumeProjection {
                downward_api: Some(DownwardAPIProjection {
                    items: Some(list.iter().map(DownwardItem::to_file).collect()),
                }),
                ..Default::default()
            },
        })
        .collect();
    Volume {
        name: volume.into(),
        projected: Some(ProjectedVolumeSource {
            sources: Some(sources),
            default_mode: None,
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_hold_bytes_and_config_maps_strings() {
        let s = secret("s", &[("data-1", "value-1")]);
        assert_eq!(s.data.unwrap()["data-1"].0, b"value-1");
        let c = config_map("c", &[("k", "v")]);
        assert_eq!(c.data.unwrap()["k"], "v");
    }

    #[test]
    fn volumes_map_items() {
        let v = config_map_volume("vol", "cm", &[("data-2", "path/to/data-2")]);
        let items = v.config_map.unwrap().items.unwrap();
        assert_eq!(
            (items[0].key.as_str(), items[0].path.as_str()),
            ("data-2", "path/to/data-2")
        );
        assert!(secret_volume("v", "s", &[]).secret.unwrap().items.is_none());
        let p = projected_volume(
            "p",
            &[
                Projection::ConfigMap("cm".into(), vec![]),
                Projection::Downward(vec![DownwardItem::resource("cpu", "c", "limits.cpu")]),
            ],
        );
        let sources = p.projected.unwrap().sources.unwrap();
        assert_eq!(sources.len(), 2);
        let file = &sources[1].downward_api.as_ref().unwrap().items.as_ref().unwrap()[0];
        assert_eq!(file.resource_field_ref.as_ref().unwrap().resource, "limits.cpu");
    }
}
