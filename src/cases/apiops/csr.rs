//! `[sig-auth] Certificates API [Privileged:ClusterAdmin] should support CSR API operations`
//! (upstream test/e2e/auth/certificates.go): the API walk over CertificateSigningRequests plus
//! their `/approval` and `/status` subresources.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition, CertificateSigningRequestSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use rcgen::{CertificateParams, DnType, KeyPair};
use serde_json::json;

use super::walk::{Walk, annotated};
use crate::case;
use crate::catalog::{Case, Kind};
use crate::ensure;
use crate::framework::{CaseError, CaseResult, Framework};

/// Upstream certificates.go "should support CSR API operations".
pub(crate) const CSR_API: &str =
    "[sig-auth] Certificates API [Privileged:ClusterAdmin] should support CSR API operations [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![case!(CSR_API, Kind::Adapted, csr_api)]
}

/// Upstream's `csr.DurationToExpirationSeconds(time.Hour)`.
const EXPIRATION_SECONDS: i32 = 3600;
/// The host upstream's request and certificate name.
const HOST: &str = "e2e.example.com";

/// A PEM certificate request for [`HOST`] and a self-signed PEM certificate for it, as upstream
/// makes with `cert.MakeCSR` and `cert.GenerateSelfSignedCertKey`.
fn request_and_certificate() -> Result<(String, String), CaseError> {
    let fail = |what: &str, e: rcgen::Error| CaseError::failed(format!("generating the {what}: {e}"));
    let key = KeyPair::generate().map_err(|e| fail("private key", e))?;
    let mut params = CertificateParams::new(vec![HOST.to_string()]).map_err(|e| fail("request", e))?;
    params.distinguished_name.push(DnType::CommonName, HOST);
    let request = params
        .serialize_request(&key)
        .and_then(|r| r.pem())
        .map_err(|e| fail("request", e))?;
    let certificate = params.self_signed(&key).map_err(|e| fail("certificate", e))?.pem();
    Ok((request, certificate))
}

/// The condition types of a CSR's status, in order.
fn condition_types(csr: &CertificateSigningRequest) -> Vec<String> {
    csr.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .map(|c| c.type_.clone())
        .collect()
}

/// A condition of `type_`, True, set by this case.
fn condition(type_: &str) -> CertificateSigningRequestCondition {
    CertificateSigningRequestCondition {
        type_: type_.into(),
        status: "True".into(),
        reason: Some("E2E".into()),
        message: Some("Set from an e2e test".into()),
        ..Default::default()
    }
}

/// Walks CSRs through discovery (with `/approval` and `/status`), create, get, list, watch,
/// patch, update, the `/approval` and `/status` subresources (read, patched, updated), delete
/// and delete a collection.
async fn csr_api(f: &Framework) -> CaseResult {
    let walk = Walk::new(f.api_all::<CertificateSigningRequest>(), format!("e2e-csr={}", f.ns()));
    let resources = f.client().list_api_group_resources("certificates.k8s.io/v1").await?;
    let names: Vec<&str> = resources.resources.iter().map(|r| r.name.as_str()).collect();
    for sub in [
        "certificatesigningrequests/approval",
        "certificatesigningrequests/status",
    ] {
        ensure!(
            names.contains(&sub),
            "discovery: expected {sub} in /apis/certificates.k8s.io/v1, got {names:?}"
        );
    }

    let (request, certificate) = request_and_certificate()?;
    let signer = format!("example.com/e2e-{}", f.ns());
    let csrs = (1..=3)
        .map(|i| CertificateSigningRequest {
            metadata: ObjectMeta {
                name: Some(format!("{}-e2e-example-csr-{i}", f.ns())),
                labels: Some(BTreeMap::from([("e2e-csr".to_string(), f.ns().to_string())])),
                ..Default::default()
            },
            spec: CertificateSigningRequestSpec {
                request: ByteString(request.clone().into_bytes()),
                signer_name: signer.clone(),
                expiration_seconds: Some(EXPIRATION_SECONDS),
                usages: Some(vec![
                    "digital signature".into(),
                    "key encipherment".into(),
                    "server auth".into(),
                ]),
                ..Default::default()
            },
            status: None,
        })
        .collect();
    let csr = walk.open(f, csrs, 2).await?;
    let name = csr.name_any();
    ensure!(
        csr.spec.expiration_seconds == Some(EXPIRATION_SECONDS),
        "CertificateSigningRequest {name} as created: expected expirationSeconds {EXPIRATION_SECONDS}, got {:?}",
        csr.spec.expiration_seconds
    );
    approval(f, walk.api(), &csr).await?;
    status(f, walk.api(), &csr, &certificate).await?;
    walk.close(f, &name, 2).await
}

/// Reads `/approval`, patches it (an `ApprovalPatch` condition and an annotation), and updates
/// it with an `Approved` condition.
async fn approval(f: &Framework, api: &Api<CertificateSigningRequest>, csr: &CertificateSigningRequest) -> CaseResult {
    let name = csr.name_any();
    f.step(format!("getting /approval of {name}"));
    let got: CertificateSigningRequest = api.get_subresource("approval", &name).await?;
    ensure!(
        got.uid() == csr.uid(),
        "CertificateSigningRequest {name} read through /approval: expected uid {:?}, got {:?}",
        csr.uid(),
        got.uid()
    );
    f.step(format!("patching /approval of {name}"));
    let patch = json!({
        "metadata": {"annotations": {"patchedapproval": "true"}},
        "status": {"conditions": [{"type": "ApprovalPatch", "status": "True", "reason": "e2e"}]}
    });
    let patched = api
        .patch_subresource("approval", &name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    ensure!(
        condition_types(&patched) == ["ApprovalPatch"] && annotated(&patched, "patchedapproval"),
        "CertificateSigningRequest {name} after the patch of /approval: expected condition ApprovalPatch and \
         annotation patchedapproval=true, got conditions {:?} and annotations {:?}",
        condition_types(&patched),
        patched.annotations()
    );
    f.step(format!("updating /approval of {name}"));
    let mut to_update = patched;
    to_update
        .status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new)
        .push(condition("Approved"));
    let updated = api
        .replace_subresource("approval", &name, &PostParams::default(), &to_update)
        .await?;
    ensure!(
        condition_types(&updated) == ["ApprovalPatch", "Approved"],
        "CertificateSigningRequest {name} after the update of /approval: expected conditions [ApprovalPatch, \
         Approved], got {:?}",
        condition_types(&updated)
    );
    Ok(())
}

/// Reads `/status`, patches it (the certificate and an annotation), and updates it with a
/// `StatusUpdate` condition.
async fn status(
    f: &Framework,
    api: &Api<CertificateSigningRequest>,
    csr: &CertificateSigningRequest,
    certificate: &str,
) -> CaseResult {
    let name = csr.name_any();
    let got = api.get_status(&name).await?;
    ensure!(
        got.uid() == csr.uid(),
        "CertificateSigningRequest {name} read through /status: expected uid {:?}, got {:?}",
        csr.uid(),
        got.uid()
    );
    f.step(format!("patching /status of {name}"));
    let patch = json!({
        "metadata": {"annotations": {"patchedstatus": "true"}},
        "status": {"certificate": ByteString(certificate.as_bytes().to_vec())}
    });
    let patched = api
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let stored = patched
        .status
        .as_ref()
        .and_then(|s| s.certificate.as_ref())
        .map(|c| c.0.clone());
    ensure!(
        stored.as_deref() == Some(certificate.as_bytes()) && annotated(&patched, "patchedstatus"),
        "CertificateSigningRequest {name} after the patch of /status: expected the certificate ({} bytes) and \
         annotation patchedstatus=true, got a certificate of {:?} bytes and annotations {:?}",
        certificate.len(),
        stored.map(|c| c.len()),
        patched.annotations()
    );
    f.step(format!("updating /status of {name}"));
    let mut to_update = patched;
    let conditions = to_update
        .status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new);
    conditions.push(condition("StatusUpdate"));
    let want = conditions.len();
    let updated = api.replace_status(&name, &PostParams::default(), &to_update).await?;
    let types = condition_types(&updated);
    ensure!(
        types.len() == want && types.last().map(String::as_str) == Some("StatusUpdate"),
        "CertificateSigningRequest {name} after the update of /status: expected {want} conditions ending with \
         StatusUpdate, got {types:?}"
    );
    Ok(())
}
