//! Adapted cases: what a container's environment and command line get from the pod —
//! Variable Expansion (`$(VAR)` in env, args and command; upstream `common/node/expansion.go`)
//! and the Downward API as env vars (upstream `common/node/downwardapi.go`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, EnvVar, EnvVarSource, Pod, ResourceFieldSelector};

use super::{env_from, env_printer, expect_printed, field_env, resources, shell};
use crate::case;
use crate::catalog::{Case, Kind};
use crate::ensure;
use crate::framework::workloads::expect_env;
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework, pod_ip, pod_node};

/// The cases of this group.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(EXPANSION_COMPOSE, Kind::Adapted, expansion_compose),
        case!(EXPANSION_ARGS, Kind::Adapted, expansion_args),
        case!(EXPANSION_COMMAND, Kind::Adapted, expansion_command),
        case!(DOWNWARD_NAME_NS_IP, Kind::Adapted, downward_name_ns_ip),
        case!(DOWNWARD_HOST_IP, Kind::Adapted, downward_host_ip),
        case!(DOWNWARD_UID, Kind::Adapted, downward_uid),
        case!(DOWNWARD_RESOURCES, Kind::Adapted, downward_resources),
    ]
}

// --- Variable Expansion ----------------------------------------------------------------------

/// Upstream common/node/expansion.go "should allow composing env vars into new env vars".
pub(crate) const EXPANSION_COMPOSE: &str =
    "[sig-node] Variable Expansion should allow composing env vars into new env vars [NodeConformance] [Conformance]";

/// Upstream expansion.go: `$(FOO);;$(BAR)` in an env value expands to the earlier variables.
async fn expansion_compose(f: &Framework) -> CaseResult {
    let pod = f.pod("var-expansion-compose").container(
        env_printer(f, "dapi-container")
            .env("FOO", "foo-value")
            .env("BAR", "bar-value")
            .env("FOOBAR", "$(FOO);;$(BAR)"),
    );
    let env = f.container_env(&pod, "dapi-container").await?;
    expect_env(
        &env,
        &[
            ("FOO", "foo-value"),
            ("BAR", "bar-value"),
            ("FOOBAR", "foo-value;;bar-value"),
        ],
        "pod var-expansion-compose",
    )
}

/// Upstream common/node/expansion.go "should allow substituting values in a container's args".
pub(crate) const EXPANSION_ARGS: &str = "[sig-node] Variable Expansion should allow substituting values in a container's args [NodeConformance] [Conformance]";

/// Upstream expansion.go: `$(TEST_VAR)` in args is replaced by the kubelet before the shell runs.
async fn expansion_args(f: &Framework) -> CaseResult {
    let mut argv = f.target_os().shell("echo test-value is $(TEST_VAR)");
    let script = argv.pop().unwrap_or_default();
    let pod = f.pod("var-expansion-args").container(
        ContainerBuilder::new("dapi-container", "agnhost")
            .command(argv)
            .args([script])
            .env("TEST_VAR", "test-value"),
    );
    expect_printed(f, &pod, "dapi-container", "test-value is test-value", "pod").await
}

/// Upstream common/node/expansion.go "should allow substituting values in a container's command".
pub(crate) const EXPANSION_COMMAND: &str = "[sig-node] Variable Expansion should allow substituting values in a container's command [NodeConformance] [Conformance]";

/// Upstream expansion.go: `$(TEST_VAR)` in the command is replaced by the kubelet.
async fn expansion_command(f: &Framework) -> CaseResult {
    let pod = f
        .pod("var-expansion-command")
        .container(shell(f, "dapi-container", "echo test-value is $(TEST_VAR)").env("TEST_VAR", "test-value"));
    expect_printed(f, &pod, "dapi-container", "test-value is test-value", "pod").await
}

// --- Downward API env ------------------------------------------------------------------------

fn with_env(vars: Vec<EnvVar>) -> impl Fn(&mut Container) + Clone + Send + Sync + 'static {
    move |c: &mut Container| c.env.get_or_insert_with(Vec::new).extend(vars.clone())
}

/// Runs pod `pod` whose container `dapi-container` prints its environment with `vars` added;
/// returns what it printed and the pod as the API reports it afterwards, for the downward API
/// cases to compare the two.
async fn downward_env(
    f: &Framework,
    pod: &str,
    vars: Vec<EnvVar>,
) -> Result<(BTreeMap<String, String>, Pod), CaseError> {
    let builder = f
        .pod(pod)
        .container(env_printer(f, "dapi-container").with(with_env(vars)));
    let env = f.container_env(&builder, "dapi-container").await?;
    let seen = f.api::<Pod>().get(pod).await?;
    Ok((env, seen))
}

/// Upstream common/node/downwardapi.go "should provide pod name, namespace and IP address as env vars".
pub(crate) const DOWNWARD_NAME_NS_IP: &str = "[sig-node] Downward API should provide pod name, namespace and IP \
     address as env vars [NodeConformance] [Conformance]";

/// Upstream downwardapi.go: `metadata.name`, `metadata.namespace` and `status.podIP` reach the
/// container as env vars, equal to what the API reports for the pod.
async fn downward_name_ns_ip(f: &Framework) -> CaseResult {
    let vars = vec![
        field_env("POD_NAME", "metadata.name"),
        field_env("POD_NAMESPACE", "metadata.namespace"),
        field_env("POD_IP", "status.podIP"),
    ];
    let pod = "downward-api-name";
    let (env, seen) = downward_env(f, pod, vars).await?;
    let ip = pod_ip(&seen)?;
    expect_env(
        &env,
        &[("POD_NAME", pod), ("POD_NAMESPACE", f.ns()), ("POD_IP", ip.as_str())],
        &format!("pod {pod} on node {}", pod_node(&seen)),
    )
}

/// Upstream common/node/downwardapi.go "should provide host IP as an env var".
pub(crate) const DOWNWARD_HOST_IP: &str =
    "[sig-node] Downward API should provide host IP as an env var [NodeConformance] [Conformance]";

/// Upstream downwardapi.go: `status.hostIP` reaches the container and equals the pod's host IP.
async fn downward_host_ip(f: &Framework) -> CaseResult {
    let pod = "downward-api-hostip";
    let (env, seen) = downward_env(f, pod, vec![field_env("HOST_IP", "status.hostIP")]).await?;
    let host_ip = seen.status.as_ref().and_then(|s| s.host_ip.clone()).unwrap_or_default();
    ensure!(!host_ip.is_empty(), "pod {pod} reports no host IP");
    expect_env(
        &env,
        &[("HOST_IP", host_ip.as_str())],
        &format!("pod {pod} on node {}", pod_node(&seen)),
    )
}

/// Upstream common/node/downwardapi.go "should provide pod UID as env vars".
pub(crate) const DOWNWARD_UID: &str =
    "[sig-node] Downward API should provide pod UID as env vars [NodeConformance] [Conformance]";

/// Upstream downwardapi.go: `metadata.uid` reaches the container and equals the pod's uid.
async fn downward_uid(f: &Framework) -> CaseResult {
    let pod = "downward-api-uid";
    let (env, seen) = downward_env(f, pod, vec![field_env("POD_UID", "metadata.uid")]).await?;
    let uid = seen.metadata.uid.clone().unwrap_or_default();
    expect_env(&env, &[("POD_UID", uid.as_str())], &format!("pod {pod}"))
}

/// Upstream common/node/downwardapi.go "should provide container's limits.cpu/memory and
/// requests.cpu/memory as env vars".
pub(crate) const DOWNWARD_RESOURCES: &str = "[sig-node] Downward API should provide container's limits.cpu/memory \
     and requests.cpu/memory as env vars [NodeConformance] [Conformance]";

/// Upstream downwardapi.go: requests 250m/32Mi and limits 1250m/64Mi read back with the default
/// divisor 1 (CPU rounded up to whole cores): 1, 33554432, 2, 67108864.
async fn downward_resources(f: &Framework) -> CaseResult {
    let resource_env = |name: &str, resource: &str| {
        env_from(
            name,
            EnvVarSource {
                resource_field_ref: Some(ResourceFieldSelector {
                    resource: resource.into(),
                    ..Default::default()
                }),
                ..Default::default()
            },
        )
    };
    let vars = vec![
        resource_env("CPU_LIMIT", "limits.cpu"),
        resource_env("MEMORY_LIMIT", "limits.memory"),
        resource_env("CPU_REQUEST", "requests.cpu"),
        resource_env("MEMORY_REQUEST", "requests.memory"),
    ];
    let pod = f
        .pod("downward-api-resources")
        .container(
            env_printer(f, "dapi-container")
                .with(with_env(vars))
                .with(|c: &mut Container| {
                    c.resources = Some(resources(
                        &[("cpu", "250m"), ("memory", "32Mi")],
                        &[("cpu", "1250m"), ("memory", "64Mi")],
                    ))
                }),
        );
    let env = f.container_env(&pod, "dapi-container").await?;
    expect_env(
        &env,
        &[
            ("CPU_LIMIT", "2"),
            ("MEMORY_LIMIT", "67108864"),
            ("CPU_REQUEST", "1"),
            ("MEMORY_REQUEST", "33554432"),
        ],
        &format!("pod {}", pod.name()),
    )
}
