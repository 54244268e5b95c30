//! `[sig-windows] [Feature:Windows] GMSA Full [Serial] [Slow] GMSA support` (upstream
//! test/e2e/windows/gmsa_full.go): the whole GMSA flow against a real Active Directory domain.
//! Upstream's preconditions are heavy: exactly one Windows node labelled
//! `agentpool=windowsgmsa`, joined to the `k8sgmsa.lan` domain, with a GMSA account installed
//! and the credential-spec manifest at `C:\gmsa\gmsa-cred-spec-gmsa-e2e.yml`; the case then
//! deploys the gmsa-webhook (kubernetes-sigs/windows-gmsa's `deploy-gmsa-webhook.sh`, fetched
//! from GitHub), the `GMSACredentialSpec` resource, RBAC `use` on it, and a pod that must
//! reach the domain controller (`nltest /QUERY`) or an SMB share of the domain.
//!
//! As upstream, each case skips unless exactly one node carries the label. Where one does,
//! crossconf does not run the flow yet: it neither fetches the webhook's deploy script (its
//! cases dial no outside address) nor ships the webhook's manifests, so the case fails naming
//! that, rather than passing without checking anything.

use k8s_openapi::api::core::v1::Node;
use kube::api::ListParams;

use crate::catalog::{Case, Kind};
use crate::fail;
use crate::framework::{CaseError, CaseResult, Framework};
use crate::os::Os;

/// Upstream It("works end to end").
pub const END_TO_END: &str = "[sig-windows] [Feature:Windows] GMSA Full [Serial] [Slow] GMSA support works end to end";
/// Upstream It("can read and write file to remote SMB folder").
pub const SMB: &str = "[sig-windows] [Feature:Windows] GMSA Full [Serial] [Slow] GMSA support can read and write file to remote SMB folder";

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    vec![
        crate::case!(END_TO_END, Kind::WindowsSpecific, end_to_end),
        crate::case!(SMB, Kind::WindowsSpecific, smb),
    ]
}

/// Upstream's `gmsaFullNodeLabel`.
const GMSA_FULL_NODE_LABEL: &str = "agentpool=windowsgmsa";

/// Upstream's `findPreconfiguredGmsaNodes` and its skip: the one node labelled
/// [`GMSA_FULL_NODE_LABEL`].
async fn preconfigured_node(f: &Framework) -> Result<Node, CaseError> {
    f.skip_unless(f.target_os() == Os::Windows, "GMSA runs on Windows nodes only")?;
    let nodes = f
        .api_all::<Node>()
        .list(&ListParams::default().labels(GMSA_FULL_NODE_LABEL))
        .await
        .map_err(|e| CaseError::failed(format!("Unable to list nodes: {e}")))?
        .items;
    if nodes.len() != 1 {
        return Err(f.skip(format!(
            "Expected to find exactly one node with the {GMSA_FULL_NODE_LABEL:?} label, found {} (GMSA Full needs a \
             Windows node joined to an Active Directory domain with a GMSA account installed and the credential-spec \
             manifest at C:\\gmsa\\gmsa-cred-spec-gmsa-e2e.yml)",
            nodes.len()
        )));
    }
    Ok(nodes.into_iter().next().expect("one node"))
}

/// The failure where the cluster has the domain node but crossconf lacks the rest of the flow.
fn not_run(node: &Node, what: &str) -> CaseResult {
    fail!(
        "node {} carries {GMSA_FULL_NODE_LABEL}, but crossconf does not run GMSA Full's {what}: upstream deploys the \
         gmsa-webhook with kubernetes-sigs/windows-gmsa's deploy-gmsa-webhook.sh fetched from GitHub, which \
         crossconf neither fetches nor ships",
        node.metadata.name.as_deref().unwrap_or("?")
    )
}

/// Upstream: the webhook, the credential spec resource, RBAC and a pod using it; `nltest
/// /QUERY` in the pod reaches the domain controller.
async fn end_to_end(f: &Framework) -> CaseResult {
    let node = preconfigured_node(f).await?;
    not_run(
        &node,
        "end-to-end flow (webhook, GMSACredentialSpec, RBAC use, nltest /QUERY)",
    )
}

/// Upstream: the same set-up, then a pod writes and reads a file on the domain's SMB share.
async fn smb(f: &Framework) -> CaseResult {
    let node = preconfigured_node(f).await?;
    not_run(
        &node,
        "SMB flow (webhook, GMSACredentialSpec, RBAC use, a file on the domain's share)",
    )
}
