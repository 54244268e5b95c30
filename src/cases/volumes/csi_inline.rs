//! Pods carrying inline CSI volumes through the API (upstream `storage/csi_inline.go`, "should
//! support CSIVolumeSource in Pod API"): a pod with two `csi` volume sources of a fake driver is
//! created (a second create answers 409), read back with its volumes intact, listed, patched and
//! deleted. Nothing mounts: the driver does not exist, so the pod never starts.

use k8s_openapi::api::core::v1::{CSIVolumeSource, Pod, Volume};
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::{CaseError, CaseResult, ContainerBuilder, Framework, render_kube_error};
use crate::{ensure, fail};

/// The cases of this group.
pub(super) fn cases() -> Vec<Case> {
    vec![case!(CSI_INLINE_POD_API, Kind::Adapted, csi_inline_pod_api)]
}

/// Upstream csi_inline.go "should support CSIVolumeSource in Pod API".
pub(crate) const CSI_INLINE_POD_API: &str =
    "[sig-storage] CSIInlineVolumes should support CSIVolumeSource in Pod API [Conformance]";

/// Upstream's fake driver.
const DRIVER: &str = "e2e.example.com";

/// A CSI volume of [`DRIVER`].
fn csi_volume(name: &str, fs_type: Option<&str>, read_only: Option<bool>) -> Volume {
    Volume {
        name: name.into(),
        csi: Some(CSIVolumeSource {
            driver: DRIVER.into(),
            fs_type: fs_type.map(str::to_string),
            read_only,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The CSI sources among `pod`'s volumes, by volume name (admission adds the token volume).
fn csi_sources(pod: &Pod) -> Vec<(String, CSIVolumeSource)> {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| v.csi.clone().map(|c| (v.name.clone(), c)))
        .collect()
}

/// Create (twice: the second answers 409 AlreadyExists), get (same uid, both CSI sources as
/// sent), list (one pod), patch an annotation, delete (then 404, or a deletion timestamp).
async fn csi_inline_pod_api(f: &Framework) -> CaseResult {
    let os = f.target_os();
    let name = "pod-csi-inline-volumes";
    let (vol1, vol2) = ("csi-inline-vol1", "csi-inline-vol2");
    let builder = f
        .pod(name)
        .volume(csi_volume(vol1, None, None))
        .volume(csi_volume(vol2, Some("ext4"), Some(true)))
        .container(
            ContainerBuilder::new(name, "busybox")
                .command(os.shell(os.idle_script()))
                .mount(vol1, &os.join(os.volume_root(), "vol1"), false)
                .mount(vol2, &os.join(os.volume_root(), "vol2"), false),
        );
    let sent = builder.build(f)?;
    let pods = f.api::<Pod>();
    let created = f.create_pod(&builder).await?;
    f.step(format!("creating pod {name} again"));
    match pods.create(&PostParams::default(), &sent).await {
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => fail!(
            "creating pod {name} a second time: expected 409 AlreadyExists, got {}",
            render_kube_error(&e)
        ),
        // The retrying client answers a replayed create refused with 409 with the stored
        // object (its first attempt's answer was lost): the first pod's uid means 409 was seen.
        Ok(p) if p.uid() == created.uid() => f.step("the second create met 409 on a replay"),
        Ok(p) => fail!(
            "creating pod {name} a second time stored a new pod (uid {:?}, first {:?}); expected 409 AlreadyExists",
            p.uid(),
            created.uid()
        ),
    }
    f.step(format!("getting pod {name}"));
    let got = pods.get(name).await?;
    ensure!(
        got.uid() == created.uid(),
        "pod {name}: get answered uid {:?}, created uid {:?}",
        got.uid(),
        created.uid()
    );
    ensure!(
        csi_sources(&got) == csi_sources(&sent),
        "pod {name}: expected its CSI volumes read back as sent, {:?}, got {:?}",
        csi_sources(&sent),
        csi_sources(&got)
    );
    f.step("listing pods in the namespace");
    let listed = pods.list(&ListParams::default()).await?;
    ensure!(
        listed.items.len() == 1,
        "listing the case namespace: expected 1 pod, got {:?}",
        listed.items.iter().map(ResourceExt::name_any).collect::<Vec<_>>()
    );
    f.step(format!("patching pod {name}"));
    let patched = pods
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"annotations": {"patched": "true"}}})),
        )
        .await?;
    ensure!(
        patched.annotations().get("patched").map(String::as_str) == Some("true"),
        "pod {name}: the merge patch answered annotations {:?}, expected patched=true",
        patched.annotations()
    );
    f.step(format!("deleting pod {name}"));
    pods.delete(name, &DeleteParams::default()).await?;
    match pods.get_opt(name).await {
        Ok(None) => Ok(()),
        Ok(Some(p)) if p.metadata.deletion_timestamp.is_some() => Ok(()),
        Ok(Some(_)) => Err(CaseError::failed(format!(
            "pod {name} is still there without a deletion timestamp after its delete was accepted"
        ))),
        Err(e) => Err(CaseError::from(e).context(format!("getting pod {name} after deleting it"))),
    }
}
