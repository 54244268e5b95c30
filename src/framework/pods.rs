//! OS-aware pod builders.
//!
//! A case says what it wants ("an agnhost netexec pod on this node"); the builder adds what the
//! target OS needs: `kubernetes.io/os` node selector, `spec.os.name`, tolerations for the taints
//! of that OS's pool, and the image variant for the OS. That is how a case body stays free of
//! `if windows`.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvVar, Pod, PodOS, PodSpec, Toleration, Volume, VolumeMount,
};
use kube::api::{DeleteParams, ObjectMeta, PostParams};

use super::wait::conditions;
use super::{CaseError, Framework, RUN_ID_LABEL};
use crate::os::{self, Os};

/// Builds one container.
#[derive(Debug, Clone)]
pub struct ContainerBuilder {
    name: String,
    image: ImageRef,
    command: Option<Vec<String>>,
    args: Option<Vec<String>>,
    ports: Vec<ContainerPort>,
    env: Vec<EnvVar>,
    mounts: Vec<VolumeMount>,
    raw: Option<Box<dyn FnOnceClone>>,
}

/// How a container names its image.
#[derive(Debug, Clone)]
enum ImageRef {
    /// A logical catalogue name resolved for the pod's OS.
    Logical(String),
    /// A literal reference (image-pull cases name exact references).
    Literal(String),
}

/// A customisation applied to the built container (probes, security context, resources…).
pub trait FnOnceClone: Send + Sync + std::fmt::Debug {
    /// Applies the customisation.
    fn apply(&self, c: &mut Container);
    /// Clones into a box.
    fn clone_box(&self) -> Box<dyn FnOnceClone>;
}

impl Clone for Box<dyn FnOnceClone> {
    fn clone(&self) -> Self {
        self.clone_box()
    }
}

#[derive(Clone)]
struct Customise<F: Fn(&mut Container) + Clone + Send + Sync + 'static>(F);

impl<F: Fn(&mut Container) + Clone + Send + Sync + 'static> std::fmt::Debug for Customise<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Customise")
    }
}

impl<F: Fn(&mut Container) + Clone + Send + Sync + 'static> FnOnceClone for Customise<F> {
    fn apply(&self, c: &mut Container) {
        (self.0)(c)
    }
    fn clone_box(&self) -> Box<dyn FnOnceClone> {
        Box::new(self.clone())
    }
}

impl ContainerBuilder {
    /// A container running the logical image `image` (resolved for the pod's OS).
    pub fn new(name: &str, image: &str) -> ContainerBuilder {
        ContainerBuilder {
            name: name.into(),
            image: ImageRef::Logical(image.into()),
            command: None,
            args: None,
            ports: Vec::new(),
            env: Vec::new(),
            mounts: Vec::new(),
            raw: None,
        }
    }

    /// A container with a literal image reference (no catalogue lookup).
    pub fn literal(name: &str, reference: &str) -> ContainerBuilder {
        let mut c = ContainerBuilder::new(name, "");
        c.image = ImageRef::Literal(reference.into());
        c
    }

    /// Sets the container's arguments (agnhost subcommands: `["netexec", "--http-port=8080"]`).
    #[must_use]
    pub fn args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, args: I) -> Self {
        self.args = Some(args.into_iter().map(Into::into).collect());
        self
    }

    /// Sets the container's command (entrypoint override).
    #[must_use]
    pub fn command<I: IntoIterator<Item = S>, S: Into<String>>(mut self, cmd: I) -> Self {
        self.command = Some(cmd.into_iter().map(Into::into).collect());
        self
    }

    /// Declares a container port.
    #[must_use]
    pub fn port(mut self, port: i32, protocol: &str) -> Self {
        self.ports.push(ContainerPort {
            container_port: port,
            protocol: Some(protocol.into()),
            ..Default::default()
        });
        self
    }

    /// Adds an environment variable.
    #[must_use]
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push(EnvVar {
            name: name.into(),
            value: Some(value.into()),
            ..Default::default()
        });
        self
    }

    /// Mounts volume `volume` at `path`.
    #[must_use]
    pub fn mount(mut self, volume: &str, path: &str, read_only: bool) -> Self {
        self.mounts.push(VolumeMount {
            name: volume.into(),
            mount_path: path.into(),
            read_only: Some(read_only),
            ..Default::default()
        });
        self
    }

    /// Applies an arbitrary change to the built container (probes, resources, security
    /// context). Several calls compose in order.
    #[must_use]
    pub fn with(mut self, f: impl Fn(&mut Container) + Clone + Send + Sync + 'static) -> Self {
        let previous = self.raw.take();
        self.raw = Some(Box::new(Customise(move |c: &mut Container| {
            if let Some(p) = &previous {
                p.apply(c);
            }
            f(c);
        })));
        self
    }

    fn build(&self, f: &Framework, os: Os) -> Result<Container, CaseError> {
        let image = match &self.image {
            ImageRef::Logical(name) => f.image(name, os)?,
            ImageRef::Literal(r) => r.clone(),
        };
        let mut c = Container {
            name: self.name.clone(),
            image: Some(image),
            command: self.command.clone(),
            args: self.args.clone(),
            ports: (!self.ports.is_empty()).then(|| self.ports.clone()),
            env: (!self.env.is_empty()).then(|| self.env.clone()),
            volume_mounts: (!self.mounts.is_empty()).then(|| self.mounts.clone()),
            ..Default::default()
        };
        if let Some(raw) = &self.raw {
            raw.apply(&mut c);
        }
        Ok(c)
    }
}

/// A change applied to a built pod spec.
pub type SpecEdit = std::sync::Arc<dyn Fn(&mut PodSpec) + Send + Sync>;

/// Builds a pod for one OS.
#[derive(Clone)]
pub struct PodBuilder {
    name: String,
    os: Os,
    containers: Vec<ContainerBuilder>,
    init_containers: Vec<ContainerBuilder>,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    node_name: Option<String>,
    restart_policy: Option<String>,
    volumes: Vec<Volume>,
    set_os_field: bool,
    hostname: Option<String>,
    subdomain: Option<String>,
    host_network: bool,
    grace: Option<i64>,
    spec_edits: Vec<SpecEdit>,
}

impl std::fmt::Debug for PodBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PodBuilder")
            .field("name", &self.name)
            .field("os", &self.os)
            .field("containers", &self.containers)
            .field("node_name", &self.node_name)
            .finish_non_exhaustive()
    }
}

impl PodBuilder {
    /// The pod's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The pod's OS.
    pub fn os(&self) -> Os {
        self.os
    }

    /// A pod named `name` for `os`.
    pub fn new(name: &str, os: Os) -> PodBuilder {
        PodBuilder {
            name: name.into(),
            os,
            containers: Vec::new(),
            init_containers: Vec::new(),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            node_name: None,
            restart_policy: None,
            volumes: Vec::new(),
            set_os_field: true,
            hostname: None,
            subdomain: None,
            host_network: false,
            grace: None,
            spec_edits: Vec::new(),
        }
    }

    /// Adds a container.
    #[must_use]
    pub fn container(mut self, c: ContainerBuilder) -> Self {
        self.containers.push(c);
        self
    }

    /// Adds an init container.
    #[must_use]
    pub fn init_container(mut self, c: ContainerBuilder) -> Self {
        self.init_containers.push(c);
        self
    }

    /// Adds a label.
    #[must_use]
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// Adds an annotation (downward API cases read annotations back from a volume).
    #[must_use]
    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.annotations.insert(key.into(), value.into());
        self
    }

    /// Pins the pod to a node (`spec.nodeName`, bypassing the scheduler as upstream's
    /// per-node endpoint pods do).
    #[must_use]
    pub fn on_node(mut self, node: &str) -> Self {
        self.node_name = Some(node.into());
        self
    }

    /// Sets `restartPolicy`.
    #[must_use]
    pub fn restart_policy(mut self, policy: &str) -> Self {
        self.restart_policy = Some(policy.into());
        self
    }

    /// Adds a volume.
    #[must_use]
    pub fn volume(mut self, v: Volume) -> Self {
        self.volumes.push(v);
        self
    }

    /// Leaves `spec.os.name` unset (cases about what the API does without it).
    #[must_use]
    pub fn without_os_field(mut self) -> Self {
        self.set_os_field = false;
        self
    }

    /// Sets `hostname` and `subdomain` (DNS identity through a headless Service).
    #[must_use]
    pub fn hostname(mut self, hostname: &str, subdomain: &str) -> Self {
        self.hostname = Some(hostname.into());
        self.subdomain = Some(subdomain.into());
        self
    }

    /// Sets `hostNetwork: true`.
    #[must_use]
    pub fn host_network(mut self) -> Self {
        self.host_network = true;
        self
    }

    /// Sets `terminationGracePeriodSeconds`.
    #[must_use]
    pub fn grace_period(mut self, seconds: i64) -> Self {
        self.grace = Some(seconds);
        self
    }

    /// Applies an arbitrary change to the pod spec after everything else.
    #[must_use]
    pub fn edit_spec(mut self, edit: impl Fn(&mut PodSpec) + Send + Sync + 'static) -> Self {
        self.spec_edits.push(std::sync::Arc::new(edit));
        self
    }

    /// Builds the Pod object for the case namespace.
    ///
    /// # Errors
    /// When an image cannot be resolved for the pod's OS.
    pub fn build(&self, f: &Framework) -> Result<Pod, CaseError> {
        let mut labels = self.labels.clone();
        labels.insert(RUN_ID_LABEL.into(), f.run().run_id.clone());
        let containers = self
            .containers
            .iter()
            .map(|c| c.build(f, self.os))
            .collect::<Result<Vec<_>, _>>()?;
        let init = self
            .init_containers
            .iter()
            .map(|c| c.build(f, self.os))
            .collect::<Result<Vec<_>, _>>()?;
        let mut spec = PodSpec {
            containers,
            init_containers: (!init.is_empty()).then_some(init),
            node_selector: Some(BTreeMap::from([(
                os::OS_LABEL.to_string(),
                self.os.as_str().to_string(),
            )])),
            tolerations: Some(pool_tolerations(f, self.os)),
            node_name: self.node_name.clone(),
            restart_policy: self.restart_policy.clone(),
            volumes: (!self.volumes.is_empty()).then(|| self.volumes.clone()),
            hostname: self.hostname.clone(),
            subdomain: self.subdomain.clone(),
            host_network: self.host_network.then_some(true),
            termination_grace_period_seconds: self.grace,
            ..Default::default()
        };
        if self.set_os_field {
            spec.os = Some(PodOS {
                name: self.os.as_str().into(),
            });
        }
        for edit in &self.spec_edits {
            edit(&mut spec);
        }
        Ok(Pod {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(f.ns().to_string()),
                labels: Some(labels),
                annotations: (!self.annotations.is_empty()).then(|| self.annotations.clone()),
                ..Default::default()
            },
            spec: Some(spec),
            status: None,
        })
    }
}

/// Tolerations for the blocking taints of `os`'s pool, so test pods land on tainted Windows
/// nodes (a common setup: `os=windows:NoSchedule`) without each case knowing the taint.
pub fn pool_tolerations(f: &Framework, os: Os) -> Vec<Toleration> {
    let mut out: Vec<Toleration> = Vec::new();
    for node in f.pools().of(os) {
        for t in node.blocking_taints() {
            let tol = Toleration {
                key: Some(t.key.clone()),
                operator: Some(if t.value.is_empty() { "Exists" } else { "Equal" }.into()),
                value: (!t.value.is_empty()).then(|| t.value.clone()),
                effect: Some(t.effect.clone()),
                ..Default::default()
            };
            if !out.contains(&tol) {
                out.push(tol);
            }
        }
    }
    out
}

impl Framework {
    /// A pod builder for the target OS.
    pub fn pod(&self, name: &str) -> PodBuilder {
        PodBuilder::new(name, self.target_os())
    }

    /// Creates a pod in the case namespace.
    ///
    /// # Errors
    /// When building or creating fails (the API's message is kept).
    pub async fn create_pod(&self, pod: &PodBuilder) -> Result<Pod, CaseError> {
        let obj = pod.build(self)?;
        self.step(format!("creating pod {} ({})", pod.name, pod.os));
        self.api::<Pod>()
            .create(&PostParams::default(), &obj)
            .await
            .map_err(|e| CaseError::from(e).context(format!("creating pod {}", pod.name)))
    }

    /// Creates a pod and waits until it is Running and Ready.
    ///
    /// # Errors
    /// When creation fails or the pod is not ready within [`super::POD_START_TIMEOUT`].
    pub async fn create_pod_ready(&self, pod: &PodBuilder) -> Result<Pod, CaseError> {
        self.create_pod(pod).await?;
        self.wait_pod_ready(&pod.name).await
    }

    /// Waits until pod `name` is Running and Ready; returns it.
    ///
    /// # Errors
    /// On timeout, with the pod's last state.
    pub async fn wait_pod_ready(&self, name: &str) -> Result<Pod, CaseError> {
        let api = self.api::<Pod>();
        let pod = self
            .wait_for_within(
                &api,
                name,
                conditions::is_pod_ready(),
                "to be running and ready",
                super::POD_START_TIMEOUT,
            )
            .await?;
        pod.ok_or_else(|| CaseError::failed(format!("pod {name} vanished while waiting for it to be ready")))
    }

    /// Creates a run-to-completion pod (`restartPolicy: Never`) and waits for it to finish.
    ///
    /// # Errors
    /// When creation fails or the pod does not finish in time.
    pub async fn run_pod_to_completion(&self, pod: &PodBuilder) -> Result<Pod, CaseError> {
        let pod = pod.clone().restart_policy("Never");
        self.create_pod(&pod).await?;
        let api = self.api::<Pod>();
        let done = self
            .wait_for_within(
                &api,
                &pod.name,
                conditions::is_pod_finished(),
                "to finish",
                super::POD_START_TIMEOUT,
            )
            .await?;
        done.ok_or_else(|| CaseError::failed(format!("pod {} vanished before finishing", pod.name)))
    }

    /// Deletes `pod` with `params` and waits, at most `within`, until that pod (its uid: not a
    /// successor of the same name) is gone.
    ///
    /// The cases that check a pod's deletion (graceful periods, hooks run on deletion, failed
    /// pods) all delete and then watch the uid disappear; this is that pair, with the wait
    /// message "to be deleted" they share.
    ///
    /// # Errors
    /// When the API refuses the deletion, or the pod is still there after `within`.
    pub async fn delete_pod_and_wait(
        &self,
        pod: &Pod,
        params: &DeleteParams,
        within: Duration,
    ) -> Result<(), CaseError> {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let api = self.api::<Pod>();
        api.delete(&name, params).await?;
        self.wait_for_within(
            &api,
            &name,
            kube::runtime::wait::conditions::is_deleted(&uid),
            "to be deleted",
            within,
        )
        .await?;
        Ok(())
    }
}

/// The pod's IP, or a failure naming the pod.
///
/// # Errors
/// When the pod has no IP yet.
pub fn pod_ip(pod: &Pod) -> Result<String, CaseError> {
    pod.status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .ok_or_else(|| CaseError::failed(format!("pod {} has no IP", pod.metadata.name.as_deref().unwrap_or("?"))))
}

/// The node a pod runs on, or `?`.
pub fn pod_node(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_else(|| "?".into())
}
