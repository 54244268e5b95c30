//! kubectl on upstream's update-demo ReplicationController: `kubectl create -f -` of the
//! nautilus RC, `kubectl scale rc`, and `kubectl delete --grace-period=0 --force -f -`, each
//! followed by upstream's `validateController` (kubectl.go "Update Demo"): the selected pods
//! are as many as asked, run the nautilus image, and serve its `data.json` through the API
//! server's pod proxy.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ReplicationController;
use serde::Deserialize;

use super::manifest;
use crate::case;
use crate::catalog::{Case, Kind};
use crate::fail;
use crate::framework::workloads::{replication_controller, template_of};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework, POD_START_TIMEOUT};

/// Upstream kubectl.go "Update Demo should create and stop a replication controller".
pub(crate) const CREATE_AND_STOP: &str = "[sig-cli] Kubectl client Update Demo should create and stop a \
     replication controller [Conformance]";
/// Upstream kubectl.go "Update Demo should scale a replication controller".
pub(crate) const SCALE: &str = "[sig-cli] Kubectl client Update Demo should scale a replication controller \
     [Conformance]";

pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(CREATE_AND_STOP, Kind::Adapted, create_and_stop),
        case!(SCALE, Kind::Adapted, scale),
    ]
}

/// Upstream `updateDemoSelector`.
const SELECTOR: &str = "name=update-demo";
/// The container name of nautilus-rc.yaml.in (what `validateController` looks for).
const CONTAINER: &str = "update-demo";
/// The RC of nautilus-rc.yaml.in.
const RC_NAME: &str = "update-demo-nautilus";
/// What nautilus's `data.json` names (upstream `getUDData("nautilus.jpg", ns)`).
const NAUTILUS_JPG: &str = "nautilus.jpg";
/// Upstream `validateController` polls every 5 s.
const VALIDATE_POLL: Duration = Duration::from_secs(5);
/// Upstream `framework.SingleCallTimeout`, the bound of one `data.json` fetch.
const SINGLE_CALL_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// Upstream `assertCleanup`: every 500 ms for a minute.
const CLEANUP_POLL: Duration = Duration::from_millis(500);
const CLEANUP_TIMEOUT: Duration = Duration::from_secs(60);

/// Upstream test/fixtures/doc-yaml/user-guide/update-demo/nautilus-rc.yaml.in: two replicas of
/// the nautilus image in container `update-demo` on port 80, selected by
/// `name=update-demo,version=nautilus`; placed on the target OS.
fn nautilus_rc(f: &Framework) -> Result<ReplicationController, CaseError> {
    let pod = f
        .pod(RC_NAME)
        .label("name", "update-demo")
        .label("version", "nautilus")
        .container(ContainerBuilder::new(CONTAINER, "nautilus").port(80, "TCP"))
        .build(f)?;
    Ok(replication_controller(RC_NAME, 2, template_of(pod)))
}

/// `kubectl create -f -` of the nautilus RC gives two running nautilus pods serving
/// `data.json`; `kubectl delete` removes them.
async fn create_and_stop(f: &Framework) -> CaseResult {
    let nautilus = manifest(&nautilus_rc(f)?)?;
    let image = f.image("nautilus", f.target_os())?;
    let result = async {
        f.step("creating a replication controller");
        f.kubectl_input(&nautilus, &["create", "-f", "-"]).await?;
        validate_controller(f, &image, 2).await
    }
    .await;
    let cleanup = cleanup_kubectl_inputs(f, &nautilus).await;
    result.and(cleanup)
}

/// `kubectl scale rc --replicas=1`, then `--replicas=2`: the RC's pods follow, each time
/// running nautilus and serving its `data.json`.
async fn scale(f: &Framework) -> CaseResult {
    let nautilus = manifest(&nautilus_rc(f)?)?;
    let image = f.image("nautilus", f.target_os())?;
    let result = async {
        f.step("creating a replication controller");
        f.kubectl_input(&nautilus, &["create", "-f", "-"]).await?;
        validate_controller(f, &image, 2).await?;
        f.step("scaling down the replication controller");
        f.kubectl(&["scale", "rc", RC_NAME, "--replicas=1", "--timeout=5m"])
            .await?;
        validate_controller(f, &image, 1).await?;
        f.step("scaling up the replication controller");
        f.kubectl(&["scale", "rc", RC_NAME, "--replicas=2", "--timeout=5m"])
            .await?;
        validate_controller(f, &image, 2).await
    }
    .await;
    let cleanup = cleanup_kubectl_inputs(f, &nautilus).await;
    result.and(cleanup)
}

/// Upstream `trimDockerRegistry`: `docker.io/` and `library/` are dropped (once each) before
/// images are compared, as runtimes differ in whether they print them.
fn trim_docker_registry(image: &str) -> String {
    image.replacen("docker.io/", "", 1).replacen("library/", "", 1)
}

/// Upstream `validateController(..., replicas, "update-demo", updateDemoSelector,
/// getUDData("nautilus.jpg"))`: polls every 5 s, up to `PodStartTimeout`, until `kubectl get
/// pods -l name=update-demo` lists exactly `replicas` pods, each with its `update-demo`
/// container running `image` and serving a `data.json` whose image names nautilus.jpg.
async fn validate_controller(f: &Framework, image: &str, replicas: usize) -> CaseResult {
    let image = trim_docker_registry(image);
    f.step(format!("waiting for all containers in {SELECTOR} pods to come up."));
    let budget = POD_START_TIMEOUT.min(f.remaining());
    let start = Instant::now();
    let mut tick = tokio::time::interval(VALIDATE_POLL);
    loop {
        tick.tick().await;
        let why = match check_controller(f, &image, replicas).await? {
            None => return Ok(()),
            Some(why) => why,
        };
        f.step(why.clone());
        if start.elapsed() + VALIDATE_POLL > budget {
            fail!(
                "timed out after {:?} waiting for {SELECTOR} pods to reach a valid state ({replicas} running \
                 {image} and serving {NAUTILUS_JPG}); last: {why}",
                start.elapsed()
            );
        }
    }
}

/// One round of upstream's `waitLoop`: `None` when every check passed, else what did not.
async fn check_controller(f: &Framework, image: &str, replicas: usize) -> Result<Option<String>, CaseError> {
    let pods_template = "--template={{range.items}}{{.metadata.name}} {{end}}";
    let state_template = format!(
        r#"--template={{{{if (exists . "status" "containerStatuses")}}}}{{{{range .status.containerStatuses}}}}{{{{if (and (eq .name "{CONTAINER}") (exists . "state" "running"))}}}}true{{{{end}}}}{{{{end}}}}{{{{end}}}}"#
    );
    let image_template = format!(
        r#"--template={{{{if (exists . "spec" "containers")}}}}{{{{range .spec.containers}}}}{{{{if eq .name "{CONTAINER}"}}}}{{{{.image}}}}{{{{end}}}}{{{{end}}}}{{{{end}}}}"#
    );
    let out = f
        .kubectl(&["get", "pods", "-o", "template", pods_template, "-l", SELECTOR])
        .await?;
    let pods: Vec<&str> = out.split_whitespace().collect();
    if pods.len() != replicas {
        return Ok(Some(format!(
            "Replicas for {SELECTOR}: expected={replicas} actual={} ({pods:?})",
            pods.len()
        )));
    }
    for pod in pods {
        let running = f
            .kubectl(&["get", "pods", pod, "-o", "template", &state_template])
            .await?;
        if running != "true" {
            return Ok(Some(format!("{pod} is created but not running")));
        }
        let current = f
            .kubectl(&["get", "pods", pod, "-o", "template", &image_template])
            .await?;
        let current = trim_docker_registry(&current);
        if current != image {
            return Ok(Some(format!(
                "{pod} is created but running wrong image; expected: {image}, actual: {current}"
            )));
        }
        if let Err(e) = update_demo_data(f, pod).await {
            return Ok(Some(format!(
                "{pod} is running right image but validator function failed: {e}"
            )));
        }
    }
    Ok(None)
}

/// Upstream `updateDemoData`; Go's decoder matches the `image` key to `Image` regardless of
/// case, so both spellings are accepted.
#[derive(Debug, Deserialize)]
struct UpdateDemoData {
    #[serde(alias = "Image", default)]
    image: String,
}

/// Upstream `getUDData("nautilus.jpg")`: `GET pods/<pod>/proxy/data.json` through the API
/// server (no port: the pod's first declared container port) answers JSON whose image
/// contains nautilus.jpg.
async fn update_demo_data(f: &Framework, pod: &str) -> Result<(), String> {
    let path = format!("/api/v1/namespaces/{}/pods/{pod}/proxy/data.json", f.ns());
    let timeout = SINGLE_CALL_TIMEOUT.min(f.remaining());
    let answer = f
        .proxy_request(http::Method::GET, &path, timeout)
        .await
        .map_err(|e| e.to_string())?;
    if !(200..300).contains(&answer.status) {
        return Err(format!("GET {path}: HTTP {}: {}", answer.status, answer.message()));
    }
    let data: UpdateDemoData = serde_json::from_str(&answer.body)
        .map_err(|e| format!("GET {path}: not the update-demo data ({e}): {}", answer.body.trim()))?;
    if data.image.contains(NAUTILUS_JPG) {
        Ok(())
    } else {
        Err(format!(
            "data served up in container is inaccurate, {:?} didn't contain {NAUTILUS_JPG} (GET {path})",
            data.image
        ))
    }
}

/// Upstream `cleanupKubectlInputs(nautilus, ns, updateDemoSelector)`: `kubectl delete
/// --grace-period=0 --force -f -` of the manifest, then `assertCleanup`: within a minute,
/// `kubectl get rc,svc -l name=update-demo` lists nothing and no selected pod is left without
/// a deletion timestamp.
async fn cleanup_kubectl_inputs(f: &Framework, manifest: &str) -> CaseResult {
    f.step("using delete to clean up resources");
    f.kubectl_input(manifest, &["delete", "--grace-period=0", "--force", "-f", "-"])
        .await?;
    let pods_template = r#"go-template={{ range .items }}{{ if not .metadata.deletionTimestamp }}{{ .metadata.name }}{{ "\n" }}{{ end }}{{ end }}"#;
    let budget = CLEANUP_TIMEOUT.min(f.remaining());
    let start = Instant::now();
    let mut tick = tokio::time::interval(CLEANUP_POLL);
    loop {
        tick.tick().await;
        let resources = f.kubectl(&["get", "rc,svc", "-l", SELECTOR, "--no-headers"]).await?;
        let left = if !resources.is_empty() {
            format!("Resources left running after stop:\n{resources}")
        } else {
            let pods = f.kubectl(&["get", "pods", "-l", SELECTOR, "-o", pods_template]).await?;
            if pods.is_empty() {
                return Ok(());
            }
            format!("Pods left unterminated after stop:\n{pods}")
        };
        if start.elapsed() + CLEANUP_POLL > budget {
            fail!(
                "after `kubectl delete --grace-period=0 --force -f -` of the nautilus RC, for {:?}: {left}",
                start.elapsed()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_hub_prefixes_are_trimmed_once() {
        assert_eq!(
            trim_docker_registry("docker.io/library/nginx:1.14"),
            "nginx:1.14".to_string()
        );
        assert_eq!(
            trim_docker_registry("registry.k8s.io/e2e-test-images/nautilus:1.7"),
            "registry.k8s.io/e2e-test-images/nautilus:1.7"
        );
    }

    #[test]
    fn update_demo_data_reads_either_spelling() {
        let d: UpdateDemoData = serde_json::from_str("{\n  \"image\": \"nautilus.jpg\"\n}\n").unwrap();
        assert_eq!(d.image, "nautilus.jpg");
        let d: UpdateDemoData = serde_json::from_str(r#"{"Image":"kitten.jpg"}"#).unwrap();
        assert_eq!(d.image, "kitten.jpg");
    }
}
