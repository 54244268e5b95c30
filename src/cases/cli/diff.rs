//! `kubectl diff` of a Deployment (upstream kubectl.go "Kubectl diff").

use k8s_openapi::api::apps::v1::Deployment;

use super::manifest;
use crate::case;
use crate::catalog::{Case, Kind};
use crate::ensure;
use crate::framework::workloads::{deployment, template_of};
use crate::framework::{CaseResult, ContainerBuilder, Framework, RUN_ID_LABEL};

/// Upstream kubectl.go "Kubectl diff".
pub(crate) const DIFF: &str = "[sig-cli] Kubectl client Kubectl diff should check if kubectl diff finds a \
     difference for Deployments [Conformance]";

pub(super) fn cases() -> Vec<Case> {
    vec![case!(DIFF, Kind::Adapted, diff)]
}

/// Upstream's httpd-deployment3.yaml.in name.
const NAME: &str = "httpd-deployment";

/// Creates an httpd Deployment, then diffs the same Deployment with the busybox image: kubectl
/// diff exits 1 (a difference) and shows both images, and the live Deployment is left as it
/// was (kubectl diff asks the server for a dry run only).
async fn diff(f: &Framework) -> CaseResult {
    let httpd = f.image("httpd", f.target_os())?;
    let busybox = f.image("busybox", f.target_os())?;
    f.step("create deployment with httpd image");
    let pod = f
        .pod(NAME)
        .label("app", "httpd")
        .container(ContainerBuilder::new("httpd", "httpd"))
        .build(f)?;
    let mut d = deployment(NAME, 2, template_of(pod));
    d.metadata.labels = Some([(RUN_ID_LABEL.to_string(), f.run().run_id.clone())].into());
    let declared = manifest(&d)?;
    f.kubectl_input(&declared, &["create", "-f", "-"]).await?;

    f.step("verify diff finds difference between live and declared image");
    let changed = declared.replacen(&httpd, &busybox, 1);
    ensure!(
        changed.contains(&busybox),
        "could not replace image {httpd} with {busybox} in:\n{declared}"
    );
    let out = f.kubectl_output(Some(&changed), &["diff", "-f", "-"]).await?;
    ensure!(
        out.code == Some(1),
        "expected `kubectl diff` to exit 1 (differences found), it exited {:?}; stderr: {}",
        out.code,
        out.stderr.trim()
    );
    for item in [&httpd, &busybox] {
        ensure!(
            out.stdout.contains(item.as_str()),
            "expected {item} in the `kubectl diff` output, got:\n{}",
            out.stdout
        );
    }
    let live = f.api::<Deployment>().get(NAME).await?;
    let image = live
        .spec
        .and_then(|s| s.template.spec)
        .and_then(|s| s.containers.first().and_then(|c| c.image.clone()))
        .unwrap_or_default();
    ensure!(
        image == httpd,
        "after `kubectl diff`: expected deployment {NAME} to keep image {httpd} (a diff only dry-runs the \
         change), it has {image}"
    );
    f.kubectl_input(&changed, &["delete", "-f", "-"]).await?;
    Ok(())
}
