//! Adapted cases: configuration reaching containers — ConfigMap and Secret as env vars and
//! volumes — and the helpers every volume case uses (downward API, emptyDir and projected
//! volumes are in [`super::volumes`]).
//!
//! Paths come from the OS profile (`volume_root`, `join`, `cat`), so one body reads
//! `/mnt/configmap-volume/data-1` on Linux and `C:\mnt\configmap-volume\data-1` on Windows.

use std::fmt::Debug;
use std::time::Duration;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapEnvSource, ConfigMapKeySelector, Container, EnvFromSource, EnvVar, EnvVarSource,
    SecretEnvSource, SecretKeySelector, SecurityContext, Volume,
};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::workloads::{config_map, config_map_volume, expect_env, print_env_script, secret, secret_volume};
use crate::framework::{CaseResult, ContainerBuilder, Framework, PodBuilder};
use crate::{ensure, fail};

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    vec![
        case!(CM_ENV_VAR, Kind::Adapted, cm_env_var),
        case!(CM_ENV_FROM, Kind::Adapted, cm_env_from),
        case!(CM_EMPTY_KEY, Kind::Adapted, cm_empty_key),
        case!(SECRET_ENV_VAR, Kind::Adapted, secret_env_var),
        case!(SECRET_ENV_FROM, Kind::Adapted, secret_env_from),
        case!(SECRET_EMPTY_KEY, Kind::Adapted, secret_empty_key),
        case!(CM_VOLUME, Kind::Adapted, cm_volume),
        case!(CM_VOLUME_MAPPINGS, Kind::Adapted, cm_volume_mappings),
        case!(CM_VOLUME_UPDATES, Kind::Adapted, cm_volume_updates),
        case!(CM_MULTIPLE_VOLUMES, Kind::Adapted, cm_multiple_volumes),
        case!(CM_DEFAULT_MODE, Kind::Adapted, cm_default_mode),
        case!(CM_IMMUTABLE, Kind::Adapted, cm_immutable),
        case!(SECRET_VOLUME, Kind::Adapted, secret_volume_case),
        case!(SECRET_VOLUME_MAPPINGS, Kind::Adapted, secret_volume_mappings),
        case!(SECRET_MULTIPLE_VOLUMES, Kind::Adapted, secret_multiple_volumes),
        case!(SECRET_DEFAULT_MODE, Kind::Adapted, secret_default_mode),
    ]
}

/// How long a ConfigMap/Secret/label change may take to reach a mounted volume: upstream polls
/// for `framework.PodStartTimeout` after the kubelet's sync period; two minutes covers the
/// default one-minute sync plus the cache TTL.
pub(crate) const VOLUME_UPDATE_WITHIN: Duration = Duration::from_secs(120);

/// The mount point `name` under the OS's volume root.
pub(crate) fn mount_path(f: &Framework, name: &str) -> String {
    let os = f.target_os();
    os.join(os.volume_root(), name)
}

/// A file path under a mount point; `rel` uses `/` and is rebuilt with the OS separator.
pub(crate) fn file_path(f: &Framework, mount: &str, rel: &str) -> String {
    rel.split('/')
        .fold(mount.to_string(), |dir, part| f.target_os().join(&dir, part))
}

/// A container that prints the given files one after the other and exits (upstream's
/// projected_combined.go does the same with `cat a && cat b && cat c`).
pub(crate) fn reader(f: &Framework, name: &str, files: &[String]) -> ContainerBuilder {
    let os = f.target_os();
    let script = files.iter().map(|p| os.cat(p)).collect::<Vec<_>>().join(" && ");
    ContainerBuilder::new(name, "agnhost").command(os.shell(&script))
}

/// Runs `pod` to completion and checks that its output is the `expected` file contents back to
/// back.
///
/// The kubelet writes ConfigMap, Secret and downward API values as they are, without a
/// trailing newline, so reading several files prints their contents run together (as
/// `value-1value-1`); comparing with the concatenation keeps the check exact on both OSes.
pub(crate) async fn expect_output(f: &Framework, pod: &PodBuilder, container: &str, expected: &[&str]) -> CaseResult {
    let out = f.container_output(pod, container).await?;
    let printed = out.trim();
    let want = expected.concat();
    ensure!(
        printed == want,
        "pod {} printed {printed:?}, expected {want:?} (the contents of {expected:?} back to back)",
        pod.name()
    );
    Ok(())
}

/// Runs pod `pod` whose container `container` prints its environment, with `edit` giving the
/// container the env or envFrom under test, and checks it sees every `(name, value)` of
/// `expected`.
///
/// The ConfigMap and Secret env cases differ only in the source they name; this is the pod and
/// the check they share.
async fn expect_env_seen(
    f: &Framework,
    pod: &str,
    container: &str,
    edit: impl Fn(&mut Container) + Clone + Send + Sync + 'static,
    expected: &[(&str, &str)],
) -> CaseResult {
    let printer =
        ContainerBuilder::new(container, "agnhost").command(f.target_os().shell(print_env_script(f.target_os())));
    let builder = f.pod(pod).container(printer.with(edit));
    let env = f.container_env(&builder, container).await?;
    expect_env(&env, expected, &format!("pod {pod}"))
}

/// The data of the object an envFrom case consumes.
const ENV_FROM_DATA: &[(&str, &str)] = &[("data-1", "value-1"), ("data-2", "value-2"), ("data-3", "value-3")];

/// Runs pod `pod` with `envFrom` the source `source` builds, once plain and once with prefix
/// `p-`, and checks that the keys of [`ENV_FROM_DATA`] arrive as variables, plain and (for the
/// two upstream checks) prefixed.
///
/// The ConfigMap and Secret envFrom cases differ only in the source; this is what they share.
async fn expect_env_from(f: &Framework, pod: &str, source: impl Fn(Option<&str>) -> EnvFromSource) -> CaseResult {
    let sources = vec![source(None), source(Some("p-"))];
    expect_env_seen(
        f,
        pod,
        "env-test",
        move |c: &mut Container| c.env_from = Some(sources.clone()),
        &[
            ("data-1", "value-1"),
            ("data-2", "value-2"),
            ("data-3", "value-3"),
            ("p-data-1", "value-1"),
            ("p-data-3", "value-3"),
        ],
    )
    .await
}

/// Sends `obj` (a ConfigMap or Secret whose data has an empty key) to the API as it is and
/// expects 422 Invalid.
///
/// The ConfigMap and Secret empty-key cases differ only in the kind; this is the request and the
/// verdict they share (not `f.create`, whose error no longer tells 422 from other refusals).
async fn expect_empty_key_refused<K>(f: &Framework, mut obj: K) -> CaseResult
where
    K: Resource<Scope = NamespaceResourceScope> + Clone + Debug + Serialize + DeserializeOwned,
    <K as Resource>::DynamicType: Default,
{
    let kind = K::kind(&K::DynamicType::default()).to_string();
    let name = obj.name_any();
    obj.meta_mut().namespace = Some(f.ns().to_string());
    match f.api::<K>().create(&PostParams::default(), &obj).await {
        Err(kube::Error::Api(s)) if s.code == 422 => Ok(()),
        Err(e) => fail!("creating a {kind} with an empty key: expected 422 Invalid, got {e}"),
        Ok(_) => fail!("the API accepted {kind} {name} with an empty key; expected 422 Invalid"),
    }
}

/// Runs pod `pod` with `volumes`, each mounted (`read_only` or not) at the mount point named
/// after it, in a container `container` that prints the file `rel` of each volume in turn, and
/// checks the output is `expected` back to back.
///
/// The ConfigMap, Secret, projected and downward API volume cases differ only in the volumes
/// they mount and the file they read; this is the pod and the check they share.
pub(crate) async fn expect_volume_reads(
    f: &Framework,
    pod: &str,
    container: &str,
    read_only: bool,
    volumes: Vec<Volume>,
    rel: &str,
    expected: &[&str],
) -> CaseResult {
    expect_volume_reads_as(f, pod, container, read_only, volumes, rel, expected, None).await
}

/// [`expect_volume_reads`] with the reading container under `security` (the non-root cases'
/// user) when given.
#[expect(
    clippy::too_many_arguments,
    reason = "the shared reader's seven inputs plus the user the non-root cases run it as"
)]
pub(crate) async fn expect_volume_reads_as(
    f: &Framework,
    pod: &str,
    container: &str,
    read_only: bool,
    volumes: Vec<Volume>,
    rel: &str,
    expected: &[&str],
    security: Option<SecurityContext>,
) -> CaseResult {
    let mounts: Vec<(String, String)> = volumes
        .iter()
        .map(|v| (v.name.clone(), mount_path(f, &v.name)))
        .collect();
    let files: Vec<String> = mounts.iter().map(|(_, mount)| file_path(f, mount, rel)).collect();
    let mut reader = mounts.iter().fold(reader(f, container, &files), |c, (name, mount)| {
        c.mount(name, mount, read_only)
    });
    if let Some(sc) = security {
        reader = reader.with(move |c: &mut Container| c.security_context = Some(sc.clone()));
    }
    let builder = volumes
        .into_iter()
        .fold(f.pod(pod), PodBuilder::volume)
        .container(reader);
    expect_output(f, &builder, container, expected).await
}

pub(crate) fn pause(name: &str) -> ContainerBuilder {
    ContainerBuilder::new(name, "agnhost").args(["pause"])
}

// --- env -------------------------------------------------------------------------------------

/// Upstream common/node/configmap.go "should be consumable via environment variable".
pub(crate) const CM_ENV_VAR: &str =
    "[sig-node] ConfigMap should be consumable via environment variable [NodeConformance] [Conformance]";

/// Upstream configmap.go: `valueFrom.configMapKeyRef` data-1 becomes CONFIG_DATA_1=value-1.
async fn cm_env_var(f: &Framework) -> CaseResult {
    f.create(&config_map(
        "configmap-test",
        &[("data-1", "value-1"), ("data-2", "value-2")],
    ))
    .await?;
    let var = EnvVar {
        name: "CONFIG_DATA_1".into(),
        value_from: Some(EnvVarSource {
            config_map_key_ref: Some(ConfigMapKeySelector {
                name: "configmap-test".into(),
                key: "data-1".into(),
                optional: None,
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    expect_env_seen(
        f,
        "pod-configmaps-env",
        "env-test",
        move |c: &mut Container| c.env = Some(vec![var.clone()]),
        &[("CONFIG_DATA_1", "value-1")],
    )
    .await
}

/// Upstream common/node/configmap.go "should be consumable via the environment".
pub(crate) const CM_ENV_FROM: &str =
    "[sig-node] ConfigMap should be consumable via the environment [NodeConformance] [Conformance]";

/// Upstream configmap.go: `envFrom` a ConfigMap, once plain and once with prefix `p-`.
async fn cm_env_from(f: &Framework) -> CaseResult {
    f.create(&config_map("configmap-envfrom", ENV_FROM_DATA)).await?;
    expect_env_from(f, "pod-configmaps-envfrom", |prefix| EnvFromSource {
        prefix: prefix.map(str::to_string),
        config_map_ref: Some(ConfigMapEnvSource {
            name: "configmap-envfrom".into(),
            optional: None,
        }),
        secret_ref: None,
    })
    .await
}

/// Upstream common/node/configmap.go "should fail to create ConfigMap with empty key".
pub(crate) const CM_EMPTY_KEY: &str =
    "[sig-node] ConfigMap should fail to create ConfigMap with empty key [Conformance]";

/// Upstream configmap.go: the API refuses a ConfigMap whose data has an empty key.
async fn cm_empty_key(f: &Framework) -> CaseResult {
    expect_empty_key_refused(f, config_map("configmap-emptykey", &[("", "value-1")])).await
}

fn secret_key_env(name: &str, secret: &str, key: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.into(),
                key: key.into(),
                optional: None,
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Upstream common/node/secrets.go "should be consumable from pods in env vars".
pub(crate) const SECRET_ENV_VAR: &str =
    "[sig-node] Secrets should be consumable from pods in env vars [NodeConformance] [Conformance]";

/// Upstream secrets.go: `valueFrom.secretKeyRef` data-1 becomes SECRET_DATA=value-1 (decoded).
async fn secret_env_var(f: &Framework) -> CaseResult {
    f.create(&secret("secret-test", &[("data-1", "value-1"), ("data-2", "value-2")]))
        .await?;
    let var = secret_key_env("SECRET_DATA", "secret-test", "data-1");
    expect_env_seen(
        f,
        "pod-secrets-env",
        "secret-env-test",
        move |c: &mut Container| c.env = Some(vec![var.clone()]),
        &[("SECRET_DATA", "value-1")],
    )
    .await
}

/// Upstream common/node/secrets.go "should be consumable via the environment".
pub(crate) const SECRET_ENV_FROM: &str =
    "[sig-node] Secrets should be consumable via the environment [NodeConformance] [Conformance]";

/// Upstream secrets.go: `envFrom` a Secret, plain and with prefix `p-`.
async fn secret_env_from(f: &Framework) -> CaseResult {
    f.create(&secret("secret-envfrom", ENV_FROM_DATA)).await?;
    expect_env_from(f, "pod-secrets-envfrom", |prefix| EnvFromSource {
        prefix: prefix.map(str::to_string),
        config_map_ref: None,
        secret_ref: Some(SecretEnvSource {
            name: "secret-envfrom".into(),
            optional: None,
        }),
    })
    .await
}

/// Upstream common/node/secrets.go "should fail to create secret due to empty secret key".
pub(crate) const SECRET_EMPTY_KEY: &str =
    "[sig-node] Secrets should fail to create secret due to empty secret key [Conformance]";

/// Upstream secrets.go: the API refuses a Secret whose data has an empty key.
async fn secret_empty_key(f: &Framework) -> CaseResult {
    expect_empty_key_refused(f, secret("secret-emptykey", &[("", "value-1")])).await
}

// --- ConfigMap volumes -----------------------------------------------------------------------

/// Upstream common/storage/configmap_volume.go "should be consumable from pods in volume".
pub(crate) const CM_VOLUME: &str =
    "[sig-storage] ConfigMap should be consumable from pods in volume [NodeConformance] [Conformance]";

/// Upstream configmap_volume.go: each key of the ConfigMap is a file of the volume.
async fn cm_volume(f: &Framework) -> CaseResult {
    f.create(&config_map("configmap-test-volume", &[("data-1", "value-1")]))
        .await?;
    expect_volume_reads(
        f,
        "pod-configmaps-volume",
        "agnhost-container",
        false,
        vec![config_map_volume("configmap-volume", "configmap-test-volume", &[])],
        "data-1",
        &["value-1"],
    )
    .await
}

/// Upstream configmap_volume.go "should be consumable from pods in volume with mappings".
pub(crate) const CM_VOLUME_MAPPINGS: &str =
    "[sig-storage] ConfigMap should be consumable from pods in volume with mappings [NodeConformance] [Conformance]";

/// Upstream configmap_volume.go: key data-2 is mapped to `path/to/data-2`.
async fn cm_volume_mappings(f: &Framework) -> CaseResult {
    f.create(&config_map(
        "configmap-test-volume-map",
        &[("data-1", "value-1"), ("data-2", "value-2")],
    ))
    .await?;
    expect_volume_reads(
        f,
        "pod-configmaps-mappings",
        "agnhost-container",
        false,
        vec![config_map_volume(
            "configmap-volume",
            "configmap-test-volume-map",
            &[("data-2", "path/to/data-2")],
        )],
        "path/to/data-2",
        &["value-2"],
    )
    .await
}

/// Upstream configmap_volume.go "updates should be reflected in volume".
pub(crate) const CM_VOLUME_UPDATES: &str =
    "[sig-storage] ConfigMap updates should be reflected in volume [NodeConformance] [Conformance]";

/// Upstream configmap_volume.go: a running pod sees data-1 change from value-1 to value-2.
async fn cm_volume_updates(f: &Framework) -> CaseResult {
    f.create(&config_map("configmap-test-upd", &[("data-1", "value-1")]))
        .await?;
    let mount = mount_path(f, "configmap-volume");
    let path = file_path(f, &mount, "data-1");
    let pod = f
        .pod("pod-configmaps-upd")
        .volume(config_map_volume("configmap-volume", "configmap-test-upd", &[]))
        .container(pause("agnhost-container").mount("configmap-volume", &mount, false));
    f.create_pod_ready(&pod).await?;
    let os = f.target_os();
    f.eventually_file_reads(pod.name(), None, os, &path, "value-1", VOLUME_UPDATE_WITHIN)
        .await?;
    f.step("updating the ConfigMap");
    let patch = serde_json::json!({"data": {"data-1": "value-2"}});
    f.api::<ConfigMap>()
        .patch("configmap-test-upd", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    f.eventually_file_reads(pod.name(), None, os, &path, "value-2", VOLUME_UPDATE_WITHIN)
        .await
}

/// Upstream configmap_volume.go "should be consumable in multiple volumes in the same pod".
pub(crate) const CM_MULTIPLE_VOLUMES: &str =
    "[sig-storage] ConfigMap should be consumable in multiple volumes in the same pod [NodeConformance] [Conformance]";

/// Upstream configmap_volume.go: the same ConfigMap mounted twice shows the same content twice.
async fn cm_multiple_volumes(f: &Framework) -> CaseResult {
    f.create(&config_map("configmap-test-multi", &[("data-1", "value-1")]))
        .await?;
    expect_volume_reads(
        f,
        "pod-configmaps-multi",
        "agnhost-container",
        false,
        vec![
            config_map_volume("configmap-volume", "configmap-test-multi", &[]),
            config_map_volume("configmap-volume-2", "configmap-test-multi", &[]),
        ],
        "data-1",
        &["value-1", "value-1"],
    )
    .await
}

/// Runs `ls -lL` on file `rel` of `volume` (mounted read-only at the mount point named after
/// it) in run-to-completion pod `pod` and checks the mode column.
///
/// `-L` because the kubelet publishes each key as a symlink into its `..data` directory (the
/// atomic writer), and `ls -l` would show the link's own `lrwxrwxrwx`; upstream's
/// `mounttest --file_mode` stats through the link the same way.
async fn expect_mode(f: &Framework, pod: &str, volume: Volume, rel: &str, mode: &str) -> CaseResult {
    let os = f.target_os();
    let mount = mount_path(f, &volume.name);
    let path = file_path(f, &mount, rel);
    let container = ContainerBuilder::new("agnhost-container", "agnhost")
        .command(os.shell(&format!("ls -lL {path}")))
        .mount(&volume.name, &mount, true);
    let pod = f.pod(pod).volume(volume).container(container);
    let out = f.container_output(&pod, "agnhost-container").await?;
    ensure!(
        out.trim_start().starts_with(mode),
        "pod {}: expected {path} to have mode {mode}, `ls -lL` printed {out:?}",
        pod.name()
    );
    Ok(())
}

/// Upstream configmap_volume.go "should be consumable from pods in volume with defaultMode set".
pub(crate) const CM_DEFAULT_MODE: &str = "[sig-storage] ConfigMap should be consumable from pods in volume with \
     defaultMode set [LinuxOnly] [NodeConformance] [Conformance]";

/// Upstream configmap_volume.go: `defaultMode: 0400` gives the files mode `-r--------`.
/// `[LinuxOnly]` upstream: Windows does not support setting specific file permissions.
async fn cm_default_mode(f: &Framework) -> CaseResult {
    f.create(&config_map("configmap-test-mode", &[("data-1", "value-1")]))
        .await?;
    let mut volume = config_map_volume("configmap-volume", "configmap-test-mode", &[]);
    if let Some(cm) = volume.config_map.as_mut() {
        cm.default_mode = Some(0o400);
    }
    expect_mode(f, "pod-configmaps-mode", volume, "data-1", "-r--------").await
}

/// Upstream configmap_volume.go "should be immutable if `immutable` field is set".
pub(crate) const CM_IMMUTABLE: &str =
    "[sig-storage] ConfigMap should be immutable if `immutable` field is set [Conformance]";

/// Upstream configmap_volume.go: once `immutable: true`, data changes and un-marking are
/// refused while label changes are still accepted.
async fn cm_immutable(f: &Framework) -> CaseResult {
    f.create(&config_map("immutable", &[("data-1", "value-1")])).await?;
    let api = f.api::<ConfigMap>();
    let pp = PatchParams::default();
    api.patch(
        "immutable",
        &pp,
        &Patch::Merge(&serde_json::json!({"data": {"data-3": "value-3"}})),
    )
    .await?;
    api.patch("immutable", &pp, &Patch::Merge(&serde_json::json!({"immutable": true})))
        .await?;
    for (what, patch) in [
        ("changing data", serde_json::json!({"data": {"data-1": "value-2"}})),
        ("clearing immutable", serde_json::json!({"immutable": false})),
    ] {
        match api.patch("immutable", &pp, &Patch::Merge(&patch)).await {
            Err(kube::Error::Api(s)) if s.code == 422 => {}
            Err(e) => fail!("{what} of an immutable ConfigMap: expected 422 Invalid, got {e}"),
            Ok(_) => fail!("{what} of immutable ConfigMap `immutable` was accepted; expected 422 Invalid"),
        }
    }
    let labelled = api
        .patch(
            "immutable",
            &pp,
            &Patch::Merge(&serde_json::json!({"metadata": {"labels": {"label1": "value1"}}})),
        )
        .await?;
    let data = labelled.data.unwrap_or_default();
    ensure!(
        data.get("data-1").map(String::as_str) == Some("value-1")
            && data.get("data-3").map(String::as_str) == Some("value-3"),
        "immutable ConfigMap data changed: {data:?}"
    );
    Ok(())
}

// --- Secret volumes --------------------------------------------------------------------------

/// Upstream common/storage/secrets_volume.go "should be consumable from pods in volume".
pub(crate) const SECRET_VOLUME: &str =
    "[sig-storage] Secrets should be consumable from pods in volume [NodeConformance] [Conformance]";

/// Upstream secrets_volume.go: each key of the Secret is a file holding the decoded value.
async fn secret_volume_case(f: &Framework) -> CaseResult {
    f.create(&secret("secret-test-vol", &[("data-1", "value-1")])).await?;
    expect_volume_reads(
        f,
        "pod-secrets-volume",
        "secret-volume-test",
        true,
        vec![secret_volume("secret-volume", "secret-test-vol", &[])],
        "data-1",
        &["value-1"],
    )
    .await
}

/// Upstream secrets_volume.go "should be consumable from pods in volume with mappings".
pub(crate) const SECRET_VOLUME_MAPPINGS: &str =
    "[sig-storage] Secrets should be consumable from pods in volume with mappings [NodeConformance] [Conformance]";

/// Upstream secrets_volume.go: key data-1 is mapped to `new-path-data-1`.
async fn secret_volume_mappings(f: &Framework) -> CaseResult {
    f.create(&secret("secret-test-map", &[("data-1", "value-1")])).await?;
    expect_volume_reads(
        f,
        "pod-secrets-mappings",
        "secret-volume-test",
        true,
        vec![secret_volume(
            "secret-volume",
            "secret-test-map",
            &[("data-1", "new-path-data-1")],
        )],
        "new-path-data-1",
        &["value-1"],
    )
    .await
}

/// Upstream secrets_volume.go "should be consumable in multiple volumes in a pod".
pub(crate) const SECRET_MULTIPLE_VOLUMES: &str =
    "[sig-storage] Secrets should be consumable in multiple volumes in a pod [NodeConformance] [Conformance]";

/// Upstream secrets_volume.go: one Secret in two volumes, both readable.
async fn secret_multiple_volumes(f: &Framework) -> CaseResult {
    f.create(&secret("secret-test-multi", &[("data-1", "value-1")])).await?;
    expect_volume_reads(
        f,
        "pod-secrets-multi",
        "secret-volume-test",
        true,
        vec![
            secret_volume("secret-volume", "secret-test-multi", &[]),
            secret_volume("secret-volume-2", "secret-test-multi", &[]),
        ],
        "data-1",
        &["value-1", "value-1"],
    )
    .await
}

/// Upstream secrets_volume.go "should be consumable from pods in volume with defaultMode set".
pub(crate) const SECRET_DEFAULT_MODE: &str = "[sig-storage] Secrets should be consumable from pods in volume with \
     defaultMode set [LinuxOnly] [NodeConformance] [Conformance]";

/// Upstream secrets_volume.go: `defaultMode: 0400` gives the files mode `-r--------`.
/// `[LinuxOnly]` upstream: Windows does not support setting specific file permissions.
async fn secret_default_mode(f: &Framework) -> CaseResult {
    f.create(&secret("secret-test-mode", &[("data-1", "value-1")])).await?;
    let mut volume = secret_volume("secret-volume", "secret-test-mode", &[]);
    if let Some(s) = volume.secret.as_mut() {
        s.default_mode = Some(0o400);
    }
    expect_mode(f, "pod-secrets-mode", volume, "data-1", "-r--------").await
}
