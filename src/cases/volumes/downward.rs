//! Downward API values in volumes (upstream `common/storage/downwardapi_volume.go` and
//! `projected_downwardapi.go`) and the env default from node allocatable (upstream
//! `common/node/downwardapi.go`).
//!
//! The plain and projected volume cases assert the same values through two volume kinds, so each
//! check is written once and takes the [`Source`] to mount.

use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, Node, Pod, ResourceFieldSelector, ResourceRequirements, Volume,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Patch, PatchParams};

use crate::case;
use crate::cases::config::{VOLUME_UPDATE_WITHIN, expect_output, file_path, mount_path, pause, reader};
use crate::cases::node::resources::quantity_bytes;
use crate::catalog::{Case, Kind};
use crate::framework::workloads::{
    DownwardItem, Projection, downward_volume, expect_env, print_env_script, projected_volume,
};
use crate::framework::{CaseResult, ContainerBuilder, Framework, pod_node};
use crate::{ensure, fail};

/// The cases of this group.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(VOLUME_CPU_REQUEST, Kind::Adapted, volume_cpu_request),
        case!(VOLUME_MEMORY_LIMIT, Kind::Adapted, volume_memory_limit),
        case!(VOLUME_MEMORY_REQUEST, Kind::Adapted, volume_memory_request),
        case!(VOLUME_DEFAULT_CPU, Kind::Adapted, volume_default_cpu),
        case!(VOLUME_DEFAULT_MEMORY, Kind::Adapted, volume_default_memory),
        case!(VOLUME_ANNOTATIONS, Kind::Adapted, volume_annotations),
        case!(PROJECTED_CPU_LIMIT, Kind::Adapted, projected_cpu_limit),
        case!(PROJECTED_CPU_REQUEST, Kind::Adapted, projected_cpu_request),
        case!(PROJECTED_MEMORY_LIMIT, Kind::Adapted, projected_memory_limit),
        case!(PROJECTED_MEMORY_REQUEST, Kind::Adapted, projected_memory_request),
        case!(PROJECTED_DEFAULT_CPU, Kind::Adapted, projected_default_cpu),
        case!(PROJECTED_DEFAULT_MEMORY, Kind::Adapted, projected_default_memory),
        case!(PROJECTED_LABELS, Kind::Adapted, projected_labels),
        case!(PROJECTED_ANNOTATIONS, Kind::Adapted, projected_annotations),
        case!(ENV_DEFAULT_LIMITS, Kind::Adapted, env_default_limits),
    ]
}

/// The volume kind a downward API case mounts.
#[derive(Debug, Clone, Copy)]
enum Source {
    /// A `downwardAPI` volume.
    Plain,
    /// A `projected` volume with one `downwardAPI` source.
    Projected,
}

/// Upstream's container name in both files.
const CONTAINER: &str = "client-container";
/// Upstream's volume name (mounted at `/etc/podinfo` there; under the OS's volume root here).
const VOLUME: &str = "podinfo";

fn info_volume(source: Source, items: &[DownwardItem]) -> Volume {
    match source {
        Source::Plain => downward_volume(VOLUME, items),
        Source::Projected => projected_volume(VOLUME, &[Projection::Downward(items.to_vec())]),
    }
}

/// Upstream's container resources: requests 250m CPU / 32Mi memory, limits 1250m / 64Mi.
fn upstream_resources(c: &mut Container) {
    let list = |cpu: &str, memory: &str| {
        Some(
            [
                ("cpu".to_string(), Quantity(cpu.into())),
                ("memory".to_string(), Quantity(memory.into())),
            ]
            .into(),
        )
    };
    c.resources = Some(ResourceRequirements {
        requests: list("250m", "32Mi"),
        limits: list("1250m", "64Mi"),
        ..Default::default()
    });
}

/// Runs pod `pod` whose container has upstream's resources and reads file `file` showing
/// `resource` of that container; the output must be `expected` (the default divisor 1 rounds
/// CPU up to whole cores).
async fn expect_resource(
    f: &Framework,
    source: Source,
    pod: &str,
    file: &str,
    resource: &str,
    expected: &str,
) -> CaseResult {
    let mount = mount_path(f, VOLUME);
    let pod = f
        .pod(pod)
        .volume(info_volume(
            source,
            &[DownwardItem::resource(file, CONTAINER, resource)],
        ))
        .container(
            reader(f, CONTAINER, &[file_path(f, &mount, file)])
                .mount(VOLUME, &mount, false)
                .with(upstream_resources),
        );
    expect_output(f, &pod, CONTAINER, &[expected]).await
}

/// Node `node`'s allocatable `resource` (`cpu` or `memory`) as the downward API shows it with
/// divisor 1: whole cores rounded up, or bytes.
async fn node_allocatable(f: &Framework, node: &str, resource: &str) -> Result<i128, crate::framework::CaseError> {
    let n = f.api_all::<Node>().get(node).await?;
    let Some(q) = n
        .status
        .and_then(|s| s.allocatable)
        .and_then(|a| a.get(resource).cloned())
    else {
        fail!("node {node} reports no allocatable {resource}");
    };
    match quantity_bytes(&q.0) {
        Some(v) if v > 0 => Ok(v),
        _ => fail!(
            "node {node} reports allocatable {resource} {:?}, expected a positive quantity",
            q.0
        ),
    }
}

/// Upstream's default-limit cases: a container without resources reads `limits.<resource>`;
/// upstream checks for a non-zero number, this checks it equals the allocatable the pod's node
/// reports (what the kubelet substitutes for a missing limit).
async fn expect_default_limit(f: &Framework, source: Source, pod: &str, file: &str, resource: &str) -> CaseResult {
    let mount = mount_path(f, VOLUME);
    let builder = f
        .pod(pod)
        .volume(info_volume(
            source,
            &[DownwardItem::resource(file, CONTAINER, &format!("limits.{resource}"))],
        ))
        .container(reader(f, CONTAINER, &[file_path(f, &mount, file)]).mount(VOLUME, &mount, false));
    let out = f.container_output(&builder, CONTAINER).await?;
    let node = pod_node(&f.api::<Pod>().get(pod).await?);
    let want = node_allocatable(f, &node, resource).await?;
    let seen = out.trim();
    ensure!(
        seen == want.to_string(),
        "pod {pod} on node {node}: {file} (limits.{resource} without a limit) expected node allocatable {want}, read {seen:?}"
    );
    Ok(())
}

/// One of upstream's update cases: pod metadata `field` (labels or annotations) shown in file
/// `file`, the pod created with `initial`, then changed by `patch`; the file must list `before`,
/// then `after`.
struct MetadataUpdate {
    field: &'static str,
    file: &'static str,
    initial: &'static [(&'static str, &'static str)],
    patch: serde_json::Value,
    before: &'static [&'static str],
    after: &'static [&'static str],
}

/// Runs `update` in running pod `pod` with its downward API volume mounted as `source`.
async fn expect_metadata_update(f: &Framework, source: Source, pod: &str, update: MetadataUpdate) -> CaseResult {
    let MetadataUpdate {
        field,
        file,
        initial,
        patch,
        before,
        after,
    } = update;
    let mount = mount_path(f, VOLUME);
    let path = file_path(f, &mount, file);
    let mut builder = f
        .pod(pod)
        .volume(info_volume(source, &[DownwardItem::field(file, field)]))
        .container(pause(CONTAINER).mount(VOLUME, &mount, false));
    for (k, v) in initial {
        builder = if field == "metadata.labels" {
            builder.label(k, v)
        } else {
            builder.annotation(k, v)
        };
    }
    f.create_pod_ready(&builder).await?;
    let os = f.target_os();
    let lists =
        |want: &'static [&'static str]| move |text: &str| want.iter().all(|w| text.lines().any(|l| l.trim() == *w));
    f.eventually_file_matches(
        pod,
        None,
        os,
        &path,
        lists(before),
        &format!("list {}", before.join(", ")),
        VOLUME_UPDATE_WITHIN,
    )
    .await?;
    f.step(format!("patching the pod's {field}"));
    f.api::<Pod>()
        .patch(pod, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    f.eventually_file_matches(
        pod,
        None,
        os,
        &path,
        lists(after),
        &format!("list {}", after.join(", ")),
        VOLUME_UPDATE_WITHIN,
    )
    .await
    .map(|_| ())
}

async fn labels_update(f: &Framework, source: Source, pod: &str) -> CaseResult {
    let update = MetadataUpdate {
        field: "metadata.labels",
        file: "labels",
        initial: &[("key1", "value1"), ("key2", "value2")],
        patch: serde_json::json!({"metadata": {"labels": {"key3": "value3"}}}),
        before: &["key1=\"value1\"", "key2=\"value2\""],
        after: &["key3=\"value3\""],
    };
    expect_metadata_update(f, source, pod, update).await
}

async fn annotations_update(f: &Framework, source: Source, pod: &str) -> CaseResult {
    let update = MetadataUpdate {
        field: "metadata.annotations",
        file: "annotations",
        initial: &[("builder", "bar")],
        patch: serde_json::json!({"metadata": {"annotations": {"builder": "foo"}}}),
        before: &["builder=\"bar\""],
        after: &["builder=\"foo\""],
    };
    expect_metadata_update(f, source, pod, update).await
}

// --- downwardAPI volume ------------------------------------------------------------------------

/// Upstream downwardapi_volume.go "should provide container's cpu request".
pub(crate) const VOLUME_CPU_REQUEST: &str =
    "[sig-storage] Downward API volume should provide container's cpu request [NodeConformance] [Conformance]";

/// A 250m request reads `1`.
async fn volume_cpu_request(f: &Framework) -> CaseResult {
    expect_resource(
        f,
        Source::Plain,
        "downwardapi-volume-cpu-request",
        "cpu_request",
        "requests.cpu",
        "1",
    )
    .await
}

/// Upstream downwardapi_volume.go "should provide container's memory limit".
pub(crate) const VOLUME_MEMORY_LIMIT: &str =
    "[sig-storage] Downward API volume should provide container's memory limit [NodeConformance] [Conformance]";

/// A 64Mi limit reads `67108864`.
async fn volume_memory_limit(f: &Framework) -> CaseResult {
    expect_resource(
        f,
        Source::Plain,
        "downwardapi-volume-memory-limit",
        "memory_limit",
        "limits.memory",
        "67108864",
    )
    .await
}

/// Upstream downwardapi_volume.go "should provide container's memory request".
pub(crate) const VOLUME_MEMORY_REQUEST: &str =
    "[sig-storage] Downward API volume should provide container's memory request [NodeConformance] [Conformance]";

/// A 32Mi request reads `33554432`.
async fn volume_memory_request(f: &Framework) -> CaseResult {
    expect_resource(
        f,
        Source::Plain,
        "downwardapi-volume-memory-request",
        "memory_request",
        "requests.memory",
        "33554432",
    )
    .await
}

/// Upstream downwardapi_volume.go, default CPU limit.
pub(crate) const VOLUME_DEFAULT_CPU: &str = "[sig-storage] Downward API volume should provide node allocatable (cpu) \
     as default cpu limit if the limit is not set [NodeConformance] [Conformance]";

async fn volume_default_cpu(f: &Framework) -> CaseResult {
    expect_default_limit(f, Source::Plain, "downwardapi-volume-default-cpu", "cpu_limit", "cpu").await
}

/// Upstream downwardapi_volume.go, default memory limit.
pub(crate) const VOLUME_DEFAULT_MEMORY: &str = "[sig-storage] Downward API volume should provide node allocatable \
     (memory) as default memory limit if the limit is not set [NodeConformance] [Conformance]";

async fn volume_default_memory(f: &Framework) -> CaseResult {
    expect_default_limit(
        f,
        Source::Plain,
        "downwardapi-volume-default-memory",
        "memory_limit",
        "memory",
    )
    .await
}

/// Upstream downwardapi_volume.go "should update annotations on modification".
pub(crate) const VOLUME_ANNOTATIONS: &str =
    "[sig-storage] Downward API volume should update annotations on modification [NodeConformance] [Conformance]";

/// Annotation `builder` changes from `bar` to `foo` in the running pod's file.
async fn volume_annotations(f: &Framework) -> CaseResult {
    annotations_update(f, Source::Plain, "annotationupdate").await
}

// --- projected downwardAPI ---------------------------------------------------------------------

/// Upstream projected_downwardapi.go "should provide container's cpu limit".
pub(crate) const PROJECTED_CPU_LIMIT: &str =
    "[sig-storage] Projected downwardAPI should provide container's cpu limit [NodeConformance] [Conformance]";

/// A 1250m limit reads `2`.
async fn projected_cpu_limit(f: &Framework) -> CaseResult {
    expect_resource(
        f,
        Source::Projected,
        "projected-volume-cpu-limit",
        "cpu_limit",
        "limits.cpu",
        "2",
    )
    .await
}

/// Upstream projected_downwardapi.go "should provide container's cpu request".
pub(crate) const PROJECTED_CPU_REQUEST: &str =
    "[sig-storage] Projected downwardAPI should provide container's cpu request [NodeConformance] [Conformance]";

async fn projected_cpu_request(f: &Framework) -> CaseResult {
    expect_resource(
        f,
        Source::Projected,
        "projected-volume-cpu-request",
        "cpu_request",
        "requests.cpu",
        "1",
    )
    .await
}

/// Upstream projected_downwardapi.go "should provide container's memory limit".
pub(crate) const PROJECTED_MEMORY_LIMIT: &str =
    "[sig-storage] Projected downwardAPI should provide container's memory limit [NodeConformance] [Conformance]";

async fn projected_memory_limit(f: &Framework) -> CaseResult {
    expect_resource(
        f,
        Source::Projected,
        "projected-volume-memory-limit",
        "memory_limit",
        "limits.memory",
        "67108864",
    )
    .await
}

/// Upstream projected_downwardapi.go "should provide container's memory request".
pub(crate) const PROJECTED_MEMORY_REQUEST: &str =
    "[sig-storage] Projected downwardAPI should provide container's memory request [NodeConformance] [Conformance]";

async fn projected_memory_request(f: &Framework) -> CaseResult {
    expect_resource(
        f,
        Source::Projected,
        "projected-volume-memory-request",
        "memory_request",
        "requests.memory",
        "33554432",
    )
    .await
}

/// Upstream projected_downwardapi.go, default CPU limit.
pub(crate) const PROJECTED_DEFAULT_CPU: &str = "[sig-storage] Projected downwardAPI should provide node allocatable \
     (cpu) as default cpu limit if the limit is not set [NodeConformance] [Conformance]";

async fn projected_default_cpu(f: &Framework) -> CaseResult {
    expect_default_limit(f, Source::Projected, "projected-volume-default-cpu", "cpu_limit", "cpu").await
}

/// Upstream projected_downwardapi.go, default memory limit.
pub(crate) const PROJECTED_DEFAULT_MEMORY: &str = "[sig-storage] Projected downwardAPI should provide node \
     allocatable (memory) as default memory limit if the limit is not set [NodeConformance] [Conformance]";

async fn projected_default_memory(f: &Framework) -> CaseResult {
    expect_default_limit(
        f,
        Source::Projected,
        "projected-volume-default-memory",
        "memory_limit",
        "memory",
    )
    .await
}

/// Upstream projected_downwardapi.go "should update labels on modification".
pub(crate) const PROJECTED_LABELS: &str =
    "[sig-storage] Projected downwardAPI should update labels on modification [NodeConformance] [Conformance]";

async fn projected_labels(f: &Framework) -> CaseResult {
    labels_update(f, Source::Projected, "labelsupdate").await
}

/// Upstream projected_downwardapi.go "should update annotations on modification".
pub(crate) const PROJECTED_ANNOTATIONS: &str =
    "[sig-storage] Projected downwardAPI should update annotations on modification [NodeConformance] [Conformance]";

async fn projected_annotations(f: &Framework) -> CaseResult {
    annotations_update(f, Source::Projected, "annotationupdate").await
}

// --- env ---------------------------------------------------------------------------------------

/// Upstream common/node/downwardapi.go, default limits as env vars.
pub(crate) const ENV_DEFAULT_LIMITS: &str = "[sig-node] Downward API should provide default limits.cpu/memory from \
     node allocatable [NodeConformance] [Conformance]";

/// A container without resources gets CPU_LIMIT and MEMORY_LIMIT from `limits.cpu` and
/// `limits.memory`; upstream checks they are non-zero, this checks they equal the allocatable
/// of the pod's node.
async fn env_default_limits(f: &Framework) -> CaseResult {
    let var = |name: &str, resource: &str| EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            resource_field_ref: Some(ResourceFieldSelector {
                resource: resource.into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let vars = vec![var("CPU_LIMIT", "limits.cpu"), var("MEMORY_LIMIT", "limits.memory")];
    let os = f.target_os();
    let pod = "downward-api-default-limits";
    let builder = f.pod(pod).container(
        ContainerBuilder::new("dapi-container", "agnhost")
            .command(os.shell(print_env_script(os)))
            .with(move |c: &mut Container| c.env = Some(vars.clone())),
    );
    let env = f.container_env(&builder, "dapi-container").await?;
    let node = pod_node(&f.api::<Pod>().get(pod).await?);
    let cpu = node_allocatable(f, &node, "cpu").await?.to_string();
    let memory = node_allocatable(f, &node, "memory").await?.to_string();
    expect_env(
        &env,
        &[("CPU_LIMIT", cpu.as_str()), ("MEMORY_LIMIT", memory.as_str())],
        &format!("pod {pod} on node {node} (node allocatable)"),
    )
}
