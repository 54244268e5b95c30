//! kubectl on single pods: `kubectl label`, `kubectl run --restart=Never`, `kubectl replace`
//! and `kubectl replace --dry-run=server` (upstream kubectl.go "Kubectl label", "Kubectl run
//! pod", "Kubectl replace", "Kubectl server-side dry-run").

use k8s_openapi::api::core::v1::Pod;

use super::{manifest, run_labels, run_overrides};
use crate::case;
use crate::catalog::{Case, Kind};
use crate::ensure;
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework};

/// Upstream kubectl.go "Kubectl label".
pub(crate) const LABEL: &str = "[sig-cli] Kubectl client Kubectl label should update the label on a resource \
     [Conformance]";
/// Upstream kubectl.go "Kubectl run pod".
pub(crate) const RUN_POD: &str = "[sig-cli] Kubectl client Kubectl run pod should create a pod from an image when \
     restart is Never [Conformance]";
/// Upstream kubectl.go "Kubectl replace".
pub(crate) const REPLACE: &str = "[sig-cli] Kubectl client Kubectl replace should update a single-container pod's \
     image [Conformance]";
/// Upstream kubectl.go "Kubectl server-side dry-run".
pub(crate) const DRY_RUN: &str = "[sig-cli] Kubectl client Kubectl server-side dry-run should check if kubectl can \
     dry-run update Pods [Conformance]";

pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(LABEL, Kind::Adapted, label),
        case!(RUN_POD, Kind::Adapted, run_pod),
        case!(REPLACE, Kind::Adapted, replace),
        case!(DRY_RUN, Kind::Adapted, dry_run),
    ]
}

/// Upstream's pod name for the run, replace and dry-run cases.
const HTTPD_POD: &str = "e2e-test-httpd-pod";

/// `kubectl label` adds a label that `kubectl get -L` shows, and `label-` removes it.
async fn label(f: &Framework) -> CaseResult {
    let (name, key, value) = ("pause", "testing-label", "testing-label-value");
    f.step("creating the pod");
    let pod = f
        .pod(name)
        .label("name", name)
        .container(ContainerBuilder::new(name, "pause"))
        .build(f)?;
    f.kubectl_input(&manifest(&pod)?, &["create", "-f", "-"]).await?;
    f.wait_pod_ready(name).await?;

    f.step(format!("adding the label {key} with value {value} to a pod"));
    f.kubectl(&["label", "pods", name, &format!("{key}={value}")]).await?;
    let out = f.kubectl(&["get", "pod", name, "-L", key]).await?;
    ensure!(
        out.contains(value),
        "after `kubectl label pods {name} {key}={value}`: expected {value:?} in the {key} column of \
         `kubectl get pod {name} -L {key}`, got:\n{out}"
    );

    f.step(format!("removing the label {key} of a pod"));
    f.kubectl(&["label", "pods", name, &format!("{key}-")]).await?;
    let out = f.kubectl(&["get", "pod", name, "-L", key]).await?;
    ensure!(
        !out.contains(value),
        "after `kubectl label pods {name} {key}-`: expected no {value:?} in `kubectl get pod {name} -L {key}`, \
         got:\n{out}"
    );
    f.kubectl(&["delete", "--grace-period=0", "--force", "pod", name])
        .await?;
    Ok(())
}

/// The single container's image of `pod`, or a failure saying what the pod had.
fn only_image(pod: &Pod) -> Result<&str, CaseError> {
    let containers = pod.spec.as_ref().map(|s| s.containers.as_slice()).unwrap_or_default();
    match containers {
        [one] => Ok(one.image.as_deref().unwrap_or_default()),
        more => Err(CaseError::failed(format!(
            "expected pod {} to have exactly one container, it has {}",
            pod.metadata.name.as_deref().unwrap_or_default(),
            more.len()
        ))),
    }
}

/// `kubectl run --restart=Never` creates a pod with that image and restart policy Never.
async fn run_pod(f: &Framework) -> CaseResult {
    let httpd = f.image("httpd", f.target_os())?;
    f.step(format!("running the image {httpd}"));
    f.kubectl(&[
        "run",
        HTTPD_POD,
        "--restart=Never",
        "--pod-running-timeout=2m0s",
        &format!("--image={httpd}"),
        &run_labels(f, &format!("run={HTTPD_POD}")),
        &format!("--overrides={}", run_overrides(f)?),
    ])
    .await?;
    f.step(format!("verifying the pod {HTTPD_POD} was created"));
    let pod = f.api::<Pod>().get(HTTPD_POD).await?;
    let image = only_image(&pod)?;
    ensure!(
        image == httpd,
        "expected pod {HTTPD_POD} created by `kubectl run` to run image {httpd}, it has {image}"
    );
    let policy = pod
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or_default();
    ensure!(
        policy == "Never",
        "expected pod {HTTPD_POD} created by `kubectl run --restart=Never` to have restartPolicy Never, it has {policy:?}"
    );
    f.kubectl(&["delete", "pods", HTTPD_POD]).await?;
    Ok(())
}

/// How often a replace is tried when the pod changed between the read and the write (the
/// kubelet writing its status): upstream's `runKubectlRetryOrDie` tries five times.
const CONFLICT_TRIES: usize = 5;

/// Runs the httpd pod with `kubectl run`, waits until it runs, then replaces it (`kubectl
/// replace -f -` plus `extra`) with its `kubectl get -o json` in which the httpd image is
/// replaced by busybox's (upstream's `strings.Replace(podJSON, httpd, busybox, 1)`); returns
/// the two images.
async fn run_httpd_and_replace_image(f: &Framework, extra: &[&str]) -> Result<(String, String), CaseError> {
    let httpd = f.image("httpd", f.target_os())?;
    let busybox = f.image("busybox", f.target_os())?;
    f.step(format!("running the image {httpd}"));
    f.kubectl(&[
        "run",
        HTTPD_POD,
        &format!("--image={httpd}"),
        "--pod-running-timeout=2m0s",
        &run_labels(f, &format!("run={HTTPD_POD}")),
        &format!("--overrides={}", run_overrides(f)?),
    ])
    .await?;
    f.step(format!("verifying the pod {HTTPD_POD} is running"));
    f.wait_pod_ready(HTTPD_POD).await?;
    let mut args = vec!["replace", "-f", "-"];
    args.extend_from_slice(extra);
    for attempt in 1..=CONFLICT_TRIES {
        let json = f.kubectl(&["get", "pod", HTTPD_POD, "-o", "json"]).await?;
        ensure!(
            json.contains(HTTPD_POD),
            "expected `kubectl get pod {HTTPD_POD} -o json` to name the pod, got:\n{json}"
        );
        let swapped = json.replacen(&httpd, &busybox, 1);
        ensure!(
            swapped.contains(&busybox),
            "could not replace image {httpd} with {busybox} in:\n{json}"
        );
        f.step(format!("replace the image in the pod ({})", args.join(" ")));
        let out = f.kubectl_output(Some(&swapped), &args).await?;
        if out.success() {
            return Ok((httpd, busybox));
        }
        let conflict = out.stderr.contains("the object has been modified");
        if !conflict || attempt == CONFLICT_TRIES {
            return Err(out.failure());
        }
    }
    unreachable!("the loop returns on its last attempt")
}

/// `kubectl replace -f -` with another image changes the pod's image.
async fn replace(f: &Framework) -> CaseResult {
    let (httpd, busybox) = run_httpd_and_replace_image(f, &[]).await?;
    f.step(format!("verifying the pod {HTTPD_POD} has the right image {busybox}"));
    let pod = f.api::<Pod>().get(HTTPD_POD).await?;
    let image = only_image(&pod)?;
    ensure!(
        image == busybox,
        "after `kubectl replace` with image {busybox}: expected pod {HTTPD_POD} to have it, it has {image} \
         (was {httpd})"
    );
    f.kubectl(&["delete", "pods", HTTPD_POD]).await?;
    Ok(())
}

/// `kubectl replace --dry-run=server` with another image leaves the pod's image as it was.
async fn dry_run(f: &Framework) -> CaseResult {
    let (httpd, busybox) = run_httpd_and_replace_image(f, &["--dry-run=server"]).await?;
    f.step(format!("verifying the pod {HTTPD_POD} has the right image {httpd}"));
    let pod = f.api::<Pod>().get(HTTPD_POD).await?;
    let image = only_image(&pod)?;
    ensure!(
        image == httpd,
        "after `kubectl replace --dry-run=server` with image {busybox}: expected pod {HTTPD_POD} to keep \
         image {httpd}, it has {image}"
    );
    f.kubectl(&["delete", "pods", HTTPD_POD]).await?;
    Ok(())
}
