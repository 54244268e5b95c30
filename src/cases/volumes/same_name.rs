//! A Secret volume names its Secret within the pod's namespace only (upstream
//! `common/storage/secrets_volume.go` and `projected_secret.go`, "regardless of a different
//! secret existing with same name in different namespace"): with a Secret of the same name but
//! other data in a second namespace, the pod's volume shows its own namespace's data.

use k8s_openapi::api::core::v1::{Secret, Volume};
use kube::Api;
use kube::api::PostParams;

use super::projected::secret_source;
use crate::case;
use crate::cases::config::expect_volume_reads;
use crate::catalog::{Case, Kind};
use crate::framework::workloads::{projected_volume, secret, secret_volume};
use crate::framework::{CaseError, CaseResult, Framework};

/// The cases of this group.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(SECRET_OTHER_NAMESPACE, Kind::Adapted, secret_other_namespace),
        case!(
            PROJECTED_SECRET_OTHER_NAMESPACE,
            Kind::Adapted,
            projected_secret_other_namespace
        ),
    ]
}

/// What the other namespace's Secret holds under the same key (upstream's text).
const OTHER_DATA: &str = "this_should_not_match_content_of_other_secret";

/// Creates Secret `name` with data-1=value-1 in the case namespace and one of the same name
/// holding [`OTHER_DATA`] in a second namespace, then checks the pod reading data-1 through
/// `volume` sees value-1; the second namespace is deleted afterwards.
async fn expect_own_namespace_secret(f: &Framework, name: &str, pod: &str, volume: Volume) -> CaseResult {
    f.create(&secret(name, &[("data-1", "value-1")])).await?;
    let other = f.create_scoped_namespace("secret-namespace", &[]).await?;
    let mut decoy = secret(name, &[("data-1", OTHER_DATA)]);
    decoy.metadata.namespace = Some(other.clone());
    f.step(format!("creating Secret {name} in namespace {other}"));
    let created = Api::<Secret>::namespaced(f.client(), &other)
        .create(&PostParams::default(), &decoy)
        .await
        .map_err(|e| CaseError::from(e).context(format!("creating Secret {name} in namespace {other}")));
    let verdict = match created {
        Ok(_) => expect_volume_reads(f, pod, "secret-volume-test", true, vec![volume], "data-1", &["value-1"]).await,
        Err(e) => Err(e),
    };
    let cleaned = f.delete_extra_namespace(&other).await;
    verdict.and(cleaned)
}

/// Upstream secrets_volume.go "should be able to mount in a volume regardless of a different secret existing with same name in different namespace".
pub(crate) const SECRET_OTHER_NAMESPACE: &str = "[sig-storage] Secrets should be able to mount in a volume regardless \
     of a different secret existing with same name in different namespace [NodeConformance] [Conformance]";

/// A plain Secret volume.
async fn secret_other_namespace(f: &Framework) -> CaseResult {
    let name = "secret-test-same-name";
    let volume = secret_volume("secret-volume", name, &[]);
    expect_own_namespace_secret(f, name, "pod-secrets-same-name", volume).await
}

/// Upstream projected_secret.go "should be able to mount in a volume regardless of a different secret existing with same name in different namespace".
pub(crate) const PROJECTED_SECRET_OTHER_NAMESPACE: &str = "[sig-storage] Projected secret should be able to mount in \
     a volume regardless of a different secret existing with same name in different namespace [NodeConformance]";

/// The Secret through a projected volume.
async fn projected_secret_other_namespace(f: &Framework) -> CaseResult {
    let name = "projected-secret-test-same-name";
    let volume = projected_volume("projected-secret-volume", &[secret_source(name, &[])]);
    expect_own_namespace_secret(f, name, "pod-projected-secrets-same-name", volume).await
}
