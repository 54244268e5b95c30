//! `[sig-windows] [Feature:Windows] GMSA Full [Serial] [Slow]` (upstream
//! test/e2e/windows/gmsa_full.go): the whole GMSA path against a real Active Directory domain.
//!
//! Upstream assumes what an AKS extension sets up for its daily job: exactly one Windows node
//! labelled `agentpool=windowsgmsa`, joined to the domain `k8sgmsa.lan` whose gMSA account is
//! installed on it, with the account's GMSACredentialSpec manifest (named `gmsa-e2e`) at
//! `C:\gmsa\gmsa-cred-spec-gmsa-e2e.yml`, and, for the SMB case, a share `write_test` on the
//! domain granted to the account. Without that node the cases skip, as upstream's do. The
//! simulator provides it all with `--gmsa-domain`.
//!
//! Both cases read the manifest off the node through a hostPath pod, deploy the windows-gmsa
//! admission webhook ([`super::gmsa_deploy`]), create the credential spec resource, grant a
//! new service account `use` of it, and run a pod that names it by
//! `gmsaCredentialSpecName` only: the mutating webhook inlines the spec, the kubelet hands it
//! to the runtime, and the container logs on to the domain as the gMSA.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{HostPathVolumeSource, Node, ServiceAccount, Volume, WindowsSecurityContextOptions};
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, RoleBinding, RoleRef, Subject};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, ListParams, PostParams};
use kube::core::GroupVersionKind;

use super::gmsa_deploy::{self, Deployed};
use super::hostprocess::busybox;
use crate::catalog::{Case, Kind};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, ExecOutput, Framework};
use crate::{ensure, fail};

/// Upstream It("works end to end").
pub const END_TO_END: &str = "[sig-windows] [Feature:Windows] GMSA Full [Serial] [Slow] GMSA support works end to end";
/// Upstream It("can read and write file to remote SMB folder").
pub const SMB_READ_WRITE: &str = "[sig-windows] [Feature:Windows] GMSA Full [Serial] [Slow] GMSA support can read and write file to remote SMB folder";

/// Upstream's `gmsaFullNodeLabel`.
const NODE_LABEL: &str = "agentpool=windowsgmsa";
/// Upstream's `gmsaCrdManifestPath`.
const MANIFEST_PATH: &str = r"C:\gmsa\gmsa-cred-spec-gmsa-e2e.yml";
/// Upstream's `gmsaCustomResourceName`.
const CRED_SPEC_NAME: &str = "gmsa-e2e";
/// Upstream's `gmsaDomain`.
const DOMAIN: &str = "k8sgmsa.lan";
/// Upstream's `gmsaSharedFolder`.
const SHARED_FOLDER: &str = "write_test";
/// Upstream's `expectedQueryOutput`.
const EXPECTED_QUERY_OUTPUT: &str = "The command completed successfully";
/// Upstream's `Eventually` budget for the domain checks (polled every second).
const WITHIN: Duration = Duration::from_secs(60);

/// The cases of this area.
pub fn cases() -> Vec<Case> {
    vec![
        crate::case!(END_TO_END, Kind::WindowsSpecific, end_to_end),
        crate::case!(SMB_READ_WRITE, Kind::WindowsSpecific, smb_read_write),
    ]
}

/// Upstream: with the webhook, credential spec, RBAC and a pod using the spec by name,
/// `nltest /QUERY` in the pod reports a working secure channel to the domain within a
/// minute (resetting the channel after each bad answer).
async fn end_to_end(f: &Framework) -> CaseResult {
    with_gmsa_pod(f, Check::Query).await
}

/// Upstream: with the same set-up, the pod writes a file to the domain's `write_test` share
/// (addressed by the domain's IP from `nslookup`) and reads it back, within a minute.
async fn smb_read_write(f: &Framework) -> CaseResult {
    with_gmsa_pod(f, Check::Share).await
}

/// What a case checks on its GMSA pod.
#[derive(Debug, Clone, Copy)]
enum Check {
    /// The secure channel (`nltest /QUERY`).
    Query,
    /// Reading and writing the domain's share.
    Share,
}

/// The set-up both cases share, then `check` on the GMSA pod; the cluster-scoped objects
/// made are deleted whatever the outcome.
async fn with_gmsa_pod(f: &Framework, check: Check) -> CaseResult {
    f.step("finding the worker node that fulfills this test's assumptions");
    let nodes = f
        .api_all::<Node>()
        .list(&ListParams::default().labels(NODE_LABEL))
        .await
        .map_err(|e| CaseError::from(e).context("Unable to list nodes"))?
        .items;
    if nodes.len() != 1 {
        return Err(f.skip(format!(
            "Expected to find exactly one node with the {NODE_LABEL:?} label, found {} (GMSA Full needs a Windows \
             node joined to the {DOMAIN} Active Directory domain, with the gMSA credential spec manifest at \
             {MANIFEST_PATH}; the simulator provides one with --gmsa-domain)",
            nodes.len()
        )));
    }
    let node = &nodes[0];
    f.step("retrieving the contents of the GMSACredentialSpec custom resource manifest from the node");
    let manifest = retrieve_manifest(f, node).await?;
    // A deferred clean-up, so a timed-out case does not leave behind a webhook with
    // failurePolicy Fail whose backend its namespace's deletion removes (every pod creation in
    // the cluster would then be refused).
    let made = std::sync::Arc::new(tokio::sync::Mutex::new(Deployed::default()));
    let client = f.client();
    let cleanup = made.clone();
    f.defer_cleanup("the GMSA webhook, CRD and RBAC objects", async move {
        let made = std::mem::take(&mut *cleanup.lock().await);
        made.clean_up(client).await
    });
    let mut guard = made.lock().await;
    set_up_and_check(f, &manifest, &mut guard, check).await
}

async fn set_up_and_check(f: &Framework, manifest: &str, made: &mut Deployed, check: Check) -> CaseResult {
    f.step("deploying the GMSA webhook");
    gmsa_deploy::deploy(f, made).await?;
    f.step("creating the GMSA custom resource");
    create_cred_spec(f, manifest).await?;
    f.step("creating an RBAC role to grant use access to that GMSA resource");
    let role = format!("{}-rbac-role", f.ns());
    made.add_cluster_role(&role);
    f.api_all::<ClusterRole>()
        .create(
            &PostParams::default(),
            &ClusterRole {
                metadata: kube::api::ObjectMeta {
                    name: Some(role.clone()),
                    ..Default::default()
                },
                rules: Some(vec![PolicyRule {
                    api_groups: Some(vec!["windows.k8s.io".into()]),
                    resources: Some(vec!["gmsacredentialspecs".into()]),
                    verbs: vec!["use".into()],
                    resource_names: Some(vec![CRED_SPEC_NAME.into()]),
                    ..Default::default()
                }]),
                ..Default::default()
            },
        )
        .await
        .map_err(|e| CaseError::from(e).context(format!("unable to create RBAC cluster role {role:?}")))?;
    f.step("creating a service account");
    let account = format!("{}-sa-{}", f.ns(), uuid::Uuid::new_v4());
    f.api::<ServiceAccount>()
        .create(
            &PostParams::default(),
            &ServiceAccount {
                metadata: kube::api::ObjectMeta {
                    name: Some(account.clone()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .map_err(|e| CaseError::from(e).context(format!("unable to create service account {account:?}")))?;
    f.step("binding the RBAC role to the service account");
    f.api::<RoleBinding>()
        .create(
            &PostParams::default(),
            &RoleBinding {
                metadata: kube::api::ObjectMeta {
                    name: Some(format!("{}-rbac-binding", f.ns())),
                    ..Default::default()
                },
                subjects: Some(vec![Subject {
                    kind: "ServiceAccount".into(),
                    name: account.clone(),
                    namespace: Some(f.ns().to_string()),
                    api_group: None,
                }]),
                role_ref: RoleRef {
                    api_group: "rbac.authorization.k8s.io".into(),
                    kind: "ClusterRole".into(),
                    name: role,
                },
            },
        )
        .await?;
    f.step("creating a pod using the GMSA cred spec");
    const POD: &str = "pod-with-gmsa";
    let pod = f
        .pod(POD)
        .container(busybox(POD, &["powershell.exe", "-Command", "sleep -Seconds 600"]))
        .edit_spec(move |spec| {
            spec.service_account_name = Some(account.clone());
            let sc = spec.security_context.get_or_insert_with(Default::default);
            sc.windows_options = Some(WindowsSecurityContextOptions {
                gmsa_credential_spec_name: Some(CRED_SPEC_NAME.into()),
                ..Default::default()
            });
        });
    f.create_pod_ready(&pod).await?;
    match check {
        Check::Query => query_succeeds(f, POD).await,
        Check::Share => share_read_write(f, POD).await,
    }
}

/// Upstream's `retrieveCRDManifestFileContents`: a pause pod on the node (selected by all its
/// labels) with the manifest's directory mounted from the host, and `type` of the file.
async fn retrieve_manifest(f: &Framework, node: &Node) -> Result<String, CaseError> {
    const POD: &str = "retrieve-gmsa-crd-contents";
    const VOLUME: &str = "retrieve-gmsa-crd-contents-volume";
    let node_name = node.metadata.name.clone().unwrap_or_default();
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let dir = MANIFEST_PATH.rsplit_once('\\').map_or(MANIFEST_PATH, |(d, _)| d);
    let pod = f
        .pod(POD)
        .volume(Volume {
            name: VOLUME.into(),
            host_path: Some(HostPathVolumeSource {
                path: dir.into(),
                type_: None,
            }),
            ..Default::default()
        })
        .container(ContainerBuilder::new(POD, "pause").mount(VOLUME, dir, false))
        .edit_spec(move |spec| spec.node_selector = Some(labels.clone()));
    f.create_pod_ready(&pod).await?;
    let out = f
        .exec(
            POD,
            None,
            vec!["cmd".into(), "/S".into(), "/C".into(), format!("type {MANIFEST_PATH}")],
        )
        .await?;
    if out.exit_code != 0 {
        fail!(
            "failed to retrieve the contents of {MANIFEST_PATH:?} on node {node_name:?}: exit {} stdout {:?} stderr {:?}",
            out.exit_code,
            out.stdout.trim(),
            out.stderr.trim()
        );
    }
    Ok(out.stdout.replace("\r\n", "\n"))
}

/// Upstream's `createGmsaCustomResource` (a `kubectl apply` of the manifest): the manifest's
/// object created through the API.
async fn create_cred_spec(f: &Framework, manifest: &str) -> CaseResult {
    let obj: DynamicObject = serde_saphyr::from_str::<serde_json::Value>(manifest)
        .map_err(|e| e.to_string())
        .and_then(|v| serde_json::from_value(v).map_err(|e| e.to_string()))
        .map_err(|e| {
            CaseError::failed(format!(
                "unable to create custom resource: the manifest does not parse: {e}\n{manifest}"
            ))
        })?;
    let types = obj.types.clone().unwrap_or_default();
    let (group, version) = types
        .api_version
        .split_once('/')
        .unwrap_or(("", types.api_version.as_str()));
    ensure!(
        group == "windows.k8s.io" && types.kind == "GMSACredentialSpec",
        "the manifest at {MANIFEST_PATH} should hold a windows.k8s.io GMSACredentialSpec; it holds {} {}",
        types.api_version,
        types.kind
    );
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, &types.kind),
        "gmsacredentialspecs",
    );
    let api: Api<DynamicObject> = Api::all_with(f.client(), &resource);
    api.create(&PostParams::default(), &obj)
        .await
        .map_err(|e| CaseError::from(e).context("unable to create custom resource"))?;
    Ok(())
}

/// Upstream's `isValidOutput`.
fn is_valid_output(output: &str) -> bool {
    output.contains(EXPECTED_QUERY_OUTPUT)
        && !output.contains("ERROR_NO_LOGON_SERVERS")
        && !output.contains("RPC_S_SERVER_UNAVAILABLE")
}

fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(ToString::to_string).collect()
}

fn shown(out: &ExecOutput) -> String {
    format!(
        "exit {} stdout {:?} stderr {:?}",
        out.exit_code,
        out.stdout.trim(),
        out.stderr.trim()
    )
}

/// `nltest /QUERY` until it succeeds with a valid answer, `nltest /sc_reset:DOMAIN` after
/// each invalid one, once a second for a minute.
async fn query_succeeds(f: &Framework, pod: &str) -> CaseResult {
    f.step("checking that nltest /QUERY returns successfully");
    let deadline = Instant::now() + WITHIN.min(f.remaining().saturating_sub(Duration::from_secs(3)));
    // Once a second, as upstream's Eventually polls: a rate limit, not a fixed sleep.
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut last;
    loop {
        tick.tick().await;
        let out = f.exec(pod, None, argv(&["nltest", "/QUERY"])).await?;
        if out.exit_code != 0 {
            last = format!("unable to run command in container via exec: {}", shown(&out));
        } else if is_valid_output(&out.stdout) {
            return Ok(());
        } else {
            let reset = f
                .exec(pod, None, argv(&["nltest", &format!("/sc_reset:{DOMAIN}")]))
                .await?;
            last = format!(
                "failed to connect to domain ({}); tried resetting the domain: {}",
                out.stdout.trim(),
                shown(&reset)
            );
        }
        if Instant::now() >= deadline {
            fail!(
                "`nltest /QUERY` in pod {pod} should report a working secure channel to {DOMAIN} (output containing \
                 {EXPECTED_QUERY_OUTPUT:?}, without ERROR_NO_LOGON_SERVERS or RPC_S_SERVER_UNAVAILABLE) within \
                 {WITHIN:?}; last: {last}"
            );
        }
    }
}

/// Upstream's `getGmsaDomainIP`: the first IPv4 address after the domain's name in
/// `nslookup`'s answer.
fn domain_ip(output: &str) -> Option<String> {
    let idx = output.find(DOMAIN)?;
    output[idx..]
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .find(|w| w.parse::<std::net::Ipv4Addr>().is_ok())
        .map(str::to_string)
}

/// Writes a file to `\\DOMAIN-IP\write_test\` and reads it back, once a second for a minute.
async fn share_read_write(f: &Framework, pod: &str) -> CaseResult {
    f.step("getting the ip of GMSA domain");
    let lookup = f
        .exec(pod, None, argv(&["powershell.exe", "--", "nslookup", DOMAIN]))
        .await?;
    let Some(ip) = domain_ip(&lookup.stdout) else {
        fail!(
            "fail to get the ip of the gmsa domain: `nslookup {DOMAIN}` in pod {pod} named no address after the domain: {}",
            shown(&lookup)
        );
    };
    f.step("checking that file can be read and write from the remote folder successfully");
    let suffix: String = uuid::Uuid::new_v4().to_string().chars().take(4).collect();
    let path = format!(r"\\{ip}\{SHARED_FOLDER}\write-test-{suffix}.txt");
    let deadline = Instant::now() + WITHIN.min(f.remaining().saturating_sub(Duration::from_secs(3)));
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        // Upstream ignores the write's outcome and judges by the read.
        let write = f
            .exec(
                pod,
                None,
                argv(&[
                    "powershell.exe",
                    "-Command",
                    &format!("echo 'This is a test file.' > {path}"),
                ]),
            )
            .await?;
        let read = f.exec(pod, None, argv(&["powershell.exe", "--", "cat", &path])).await?;
        if read.exit_code == 0 {
            return Ok(());
        }
        if Instant::now() >= deadline {
            fail!(
                "pod {pod} should write and read {path} on the {DOMAIN} share within {WITHIN:?}; last write: {}; last \
                 read: {}",
                shown(&write),
                shown(&read)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_domain_ip_is_the_first_address_after_the_name() {
        let out = "Server:  UnKnown\r\nAddress:  10.0.0.10\r\n\r\nName:    k8sgmsa.lan\r\nAddress:  10.1.2.3\r\n";
        assert_eq!(domain_ip(out).as_deref(), Some("10.1.2.3"));
        assert_eq!(domain_ip("*** UnKnown can't find x"), None);
    }

    #[test]
    fn a_channel_without_a_logon_server_is_not_valid() {
        assert!(is_valid_output(
            "Flags: 0\r\nConnection Status = 0 0x0 NERR_Success\r\nThe command completed successfully"
        ));
        assert!(!is_valid_output(
            "Flags: 0\r\nConnection Status = 1311 0x51f ERROR_NO_LOGON_SERVERS\r\nThe command completed successfully"
        ));
    }
}
