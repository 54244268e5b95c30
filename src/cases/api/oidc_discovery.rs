//! `[sig-auth] ServiceAccounts ServiceAccountIssuerDiscovery` (upstream
//! test/e2e/auth/service_accounts.go): the API server publishes its ServiceAccount issuer's
//! OIDC discovery document and key set, and a pod verifies its own projected token against
//! them with a third-party OIDC implementation (agnhost `test-service-account-issuer-discovery`,
//! go-oidc), as any relying party outside the cluster would.

use k8s_openapi::api::core::v1::{ProjectedVolumeSource, ServiceAccountTokenProjection, Volume, VolumeProjection};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::{DeleteParams, PostParams};

use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework};

/// Upstream service_accounts.go "ServiceAccountIssuerDiscovery should support OIDC discovery of
/// service account issuer".
pub(crate) const OIDC_DISCOVERY: &str = "[sig-auth] ServiceAccounts ServiceAccountIssuerDiscovery should support OIDC discovery of service account issuer [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![case!(OIDC_DISCOVERY, Kind::Adapted, oidc_discovery)]
}

/// The bootstrap ClusterRole that grants the discovery URLs.
const CLUSTER_ROLE: &str = "system:service-account-issuer-discovery";
/// The pod and its container.
const POD: &str = "oidc-discovery-validator";
/// Where the projected token is mounted, and its file name (also the volume's name).
const TOKEN_DIR: &str = "/var/run/secrets/tokens";
const TOKEN_NAME: &str = "sa-token";
/// The audience the token is issued for and the validator checks.
const AUDIENCE: &str = "oidc-discovery-test";
/// The token's lifetime, upstream's ten minutes.
const EXPIRATION_SECONDS: i64 = 10 * 60;

/// Binds the discovery role to the namespace's `default` ServiceAccount (upstream tolerates a
/// refused binding: a cluster without RBAC), runs the validator pod to completion and deletes
/// the binding again, a failed deletion failing the case as upstream's deferred
/// `ExpectNoError` does.
async fn oidc_discovery(f: &Framework) -> CaseResult {
    let crb_name = format!("{}-{CLUSTER_ROLE}", f.ns());
    let crbs: Api<ClusterRoleBinding> = f.api_all();
    let binding = ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(crb_name.clone()),
            ..Default::default()
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            api_group: Some(String::new()),
            name: "default".into(),
            namespace: Some(f.ns().to_string()),
        }]),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: CLUSTER_ROLE.into(),
        },
    };
    f.step(format!(
        "binding ClusterRole {CLUSTER_ROLE} to ServiceAccount {}/default",
        f.ns()
    ));
    let bound = match crbs.create(&PostParams::default(), &binding).await {
        Ok(_) => true,
        Err(e) => {
            f.step(format!("error granting ClusterRoleBinding {crb_name}: {e}"));
            false
        }
    };
    let validated = validate_in_pod(f).await;
    if bound {
        crbs.delete(&crb_name, &DeleteParams::default())
            .await
            .map_err(|e| CaseError::from(e).context(format!("deleting ClusterRoleBinding {crb_name}")))?;
    }
    validated
}

/// Runs agnhost `test-service-account-issuer-discovery` over a projected token for
/// [`AUDIENCE`] and waits for it to succeed; its logs are reported either way.
async fn validate_in_pod(f: &Framework) -> CaseResult {
    let volume = Volume {
        name: TOKEN_NAME.into(),
        projected: Some(ProjectedVolumeSource {
            sources: Some(vec![VolumeProjection {
                service_account_token: Some(ServiceAccountTokenProjection {
                    path: TOKEN_NAME.into(),
                    expiration_seconds: Some(EXPIRATION_SECONDS),
                    audience: Some(AUDIENCE.into()),
                }),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let container = ContainerBuilder::new(POD, "agnhost")
        .args([
            "test-service-account-issuer-discovery",
            "--token-path",
            &format!("{TOKEN_DIR}/{TOKEN_NAME}"),
            "--audience",
            AUDIENCE,
        ])
        .mount(TOKEN_NAME, TOKEN_DIR, true);
    let pod = f
        .pod(POD)
        .volume(volume)
        .container(container)
        .edit_spec(|spec| spec.service_account_name = Some("default".into()));
    // Run to completion (restartPolicy Never), failing with the phase and the logs otherwise.
    let logs = f.container_output(&pod, POD).await?;
    f.step(format!("Pod logs: \n{logs}"));
    Ok(())
}
