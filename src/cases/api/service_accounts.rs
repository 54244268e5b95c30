//! `[sig-auth] ServiceAccounts` cases that check the API side of service accounts (upstream
//! test/e2e/auth/service_accounts.go): the root CA ConfigMap every namespace gets, and the
//! automount opt-out the ServiceAccount admission plugin honours, and the token, CA bundle and
//! namespace a pod finds in its token volume.

use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::api::PostParams;

use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::{CaseResult, ContainerBuilder, Framework};
use crate::{ensure, fail};

/// Upstream service_accounts.go "should guarantee kube-root-ca.crt exist in any namespace".
pub(crate) const ROOT_CA: &str =
    "[sig-auth] ServiceAccounts should guarantee kube-root-ca.crt exist in any namespace [Conformance]";
/// Upstream service_accounts.go "should allow opting out of API token automount".
pub(crate) const AUTOMOUNT_OPT_OUT: &str =
    "[sig-auth] ServiceAccounts should allow opting out of API token automount [Conformance]";

/// Upstream service_accounts.go "should mount an API token into pods".
pub(crate) const MOUNT_TOKEN: &str = "[sig-auth] ServiceAccounts should mount an API token into pods [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(ROOT_CA, Kind::Adapted, root_ca),
        case!(AUTOMOUNT_OPT_OUT, Kind::Adapted, automount_opt_out),
        case!(MOUNT_TOKEN, Kind::Adapted, mount_token),
    ]
}

/// The ConfigMap upstream's root-ca-cert-publisher keeps in every namespace.
const ROOT_CA_CONFIGMAP: &str = "kube-root-ca.crt";
/// Upstream `wait.ForeverTestTimeout`, the bound of each of the case's polls.
const FOREVER_TEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Upstream `serviceaccount.DefaultAPITokenMountPath`: where the admission plugin mounts the
/// token volume, on Linux and Windows pods alike (the kubelet maps it under `C:` on Windows).
const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The CA bundle of a root CA ConfigMap, empty when it has none.
fn ca_of(cm: &ConfigMap) -> &str {
    cm.data
        .as_ref()
        .and_then(|d| d.get("ca.crt"))
        .map_or("", String::as_str)
}

/// Waits for `kube-root-ca.crt` in the case namespace, deletes it and waits for it to come back,
/// then edits its CA and waits for the edit to be undone.
async fn root_ca(f: &Framework) -> CaseResult {
    let api = f.api::<ConfigMap>();
    let published = f
        .wait_for_within(
            &api,
            ROOT_CA_CONFIGMAP,
            |cm: Option<&ConfigMap>| cm.is_some_and(|cm| !ca_of(cm).is_empty()),
            "to be published with a ca.crt in the new namespace",
            FOREVER_TEST_TIMEOUT,
        )
        .await?;
    let Some(published) = published else {
        fail!("{ROOT_CA_CONFIGMAP} was reported published but not returned");
    };
    let ca = ca_of(&published).to_string();
    let uid = published.uid();

    f.step(format!("deleting {ROOT_CA_CONFIGMAP}"));
    api.delete(ROOT_CA_CONFIGMAP, &Default::default()).await?;
    f.wait_for_within(
        &api,
        ROOT_CA_CONFIGMAP,
        |cm: Option<&ConfigMap>| cm.is_some_and(|cm| cm.uid() != uid && ca_of(cm) == ca),
        "to be published again (a new object with the same ca.crt) after its deletion",
        FOREVER_TEST_TIMEOUT,
    )
    .await?;

    f.step(format!("changing the ca.crt of {ROOT_CA_CONFIGMAP}"));
    let mut edited = api.get(ROOT_CA_CONFIGMAP).await?;
    edited
        .data
        .get_or_insert_with(Default::default)
        .insert("ca.crt".into(), "changed".into());
    api.replace(ROOT_CA_CONFIGMAP, &PostParams::default(), &edited).await?;
    f.wait_for_within(
        &api,
        ROOT_CA_CONFIGMAP,
        |cm: Option<&ConfigMap>| cm.is_some_and(|cm| ca_of(cm) == ca),
        "to have its ca.crt restored after it was changed",
        FOREVER_TEST_TIMEOUT,
    )
    .await?;
    Ok(())
}

/// A ServiceAccount `name` with `automountServiceAccountToken: automount`.
fn account(name: &str, automount: bool) -> ServiceAccount {
    ServiceAccount {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        automount_service_account_token: Some(automount),
        ..Default::default()
    }
}

/// Whether any container of `pod` mounts the API token.
fn mounts_token(pod: &Pod) -> bool {
    pod.spec.iter().flat_map(|s| &s.containers).any(|c| {
        c.volume_mounts
            .iter()
            .flatten()
            .any(|m| m.mount_path == TOKEN_MOUNT_PATH)
    })
}

/// Creates a pod for every combination of account (`default`, one that opts in, one that opts
/// out) and pod-level setting (unset, true, false), and checks the token is mounted exactly when
/// the pod says so, or, when the pod is silent, when its account does.
async fn automount_opt_out(f: &Framework) -> CaseResult {
    f.create(&account("mount", true)).await?;
    f.create(&account("nomount", false)).await?;
    let accounts = [
        ("default", "defaultsa", true),
        ("mount", "mountsa", true),
        ("nomount", "nomountsa", false),
    ];
    let pod_settings = [(None, ""), (Some(true), "-mountspec"), (Some(false), "-nomountspec")];
    let mut wrong = Vec::new();
    for (setting, suffix) in pod_settings {
        for (sa, short, sa_mounts) in accounts {
            let name = format!("pod-service-account-{short}{suffix}");
            let expected = setting.unwrap_or(sa_mounts);
            let sa = sa.to_string();
            let pod = f
                .pod(&name)
                .container(ContainerBuilder::new("token-test", "agnhost").args(["pause"]))
                .edit_spec(move |spec| {
                    spec.service_account_name = Some(sa.clone());
                    spec.automount_service_account_token = setting;
                });
            let created = f.create_pod(&pod).await?;
            let mounted = mounts_token(&created);
            if mounted != expected {
                wrong.push(format!(
                    "{name} (account {}, pod automountServiceAccountToken {setting:?}): expected token mount {expected}, got {mounted}",
                    short.trim_end_matches("sa")
                ));
            }
        }
    }
    ensure!(
        wrong.is_empty(),
        "{} of 9 pods have the wrong API token mount at {TOKEN_MOUNT_PATH}: {}",
        wrong.len(),
        wrong.join("; ")
    );
    Ok(())
}

/// Reads file `file` of the token volume in the running pod `pod`.
async fn read_token_file(f: &Framework, pod: &str, file: &str) -> Result<String, crate::framework::CaseError> {
    let os = f.target_os();
    let path = os.join(os.api_token_dir(), file);
    let out = f.exec_shell(pod, None, os, &os.cat(&path)).await?;
    ensure!(
        out.exit_code == 0,
        "reading {path} in pod {pod} exited {}: {:?}",
        out.exit_code,
        out.stderr.trim()
    );
    Ok(out.stdout)
}

/// Runs a pod under a new ServiceAccount and checks its token volume: the CA bundle is the
/// cluster's (as published in `kube-root-ca.crt`), the namespace file names the pod's namespace,
/// and the API server authenticates the token as that account, bound to that pod.
async fn mount_token(f: &Framework) -> CaseResult {
    let sa = "mount-test";
    f.create(&ServiceAccount {
        metadata: ObjectMeta {
            name: Some(sa.into()),
            ..Default::default()
        },
        ..Default::default()
    })
    .await?;
    let name = "pod-service-account-mount-test";
    let pod = f
        .pod(name)
        .container(ContainerBuilder::new("test", "agnhost").args(["pause"]))
        .edit_spec(move |spec| spec.service_account_name = Some(sa.into()));
    f.create_pod_ready(&pod).await?;

    let token = read_token_file(f, name, "token").await?;
    let ca = read_token_file(f, name, "ca.crt").await?;
    let namespace = read_token_file(f, name, "namespace").await?;

    let root_ca = f.api::<ConfigMap>().get(ROOT_CA_CONFIGMAP).await?;
    ensure!(
        ca == ca_of(&root_ca) && !ca.is_empty(),
        "ca.crt in pod {name} ({} bytes) differs from the ca.crt of {ROOT_CA_CONFIGMAP} ({} bytes)",
        ca.len(),
        ca_of(&root_ca).len()
    );
    ensure!(
        namespace == f.ns(),
        "the namespace file in pod {name}: expected {:?}, got {namespace:?}",
        f.ns()
    );

    f.step("reviewing the mounted token");
    let review = TokenReview {
        spec: TokenReviewSpec {
            token: Some(token.trim().to_string()),
            ..Default::default()
        },
        ..Default::default()
    };
    let reviewed = f
        .api_all::<TokenReview>()
        .create(&PostParams::default(), &review)
        .await?;
    let status = reviewed.status.unwrap_or_default();
    let user = status.user.unwrap_or_default();
    let want_user = format!("system:serviceaccount:{}:{sa}", f.ns());
    ensure!(
        status.authenticated == Some(true) && user.username.as_deref() == Some(want_user.as_str()),
        "the token mounted in pod {name}: expected it authenticated as {want_user}, got authenticated {:?} as {:?} (error {:?})",
        status.authenticated,
        user.username,
        status.error
    );
    let bound_pod = user
        .extra
        .as_ref()
        .and_then(|e| e.get("authentication.kubernetes.io/pod-name"))
        .and_then(|v| v.first().cloned());
    ensure!(
        bound_pod.as_deref() == Some(name),
        "the token mounted in pod {name}: expected it bound to that pod (extra authentication.kubernetes.io/pod-name), got {bound_pod:?}"
    );
    Ok(())
}
