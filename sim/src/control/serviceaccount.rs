//! The serviceaccount controller: a `default` ServiceAccount in every active namespace, and
//! (upstream's root-ca-cert-publisher) a `kube-root-ca.crt` ConfigMap holding the cluster CA.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::error::{ApiContext, Result, is_conflict, is_not_found};
use super::informer::{Requeue, Wake};
use super::plane::Ctx;

/// The ConfigMap the root CA is published in.
pub const ROOT_CA_CONFIGMAP: &str = "kube-root-ca.crt";

/// Runs the serviceaccount controller until cancelled.
pub(crate) async fn run(ctx: Ctx) -> Result<()> {
    let namespaces = ctx.informers.get::<Namespace>();
    let accounts = ctx.informers.get::<ServiceAccount>();
    let configmaps = ctx.cfg.root_ca_pem.as_ref().map(|_| ctx.informers.get::<ConfigMap>());
    tokio::select! {
        () = ctx.cancel.cancelled() => return Ok(()),
        r = async {
            namespaces.ready().await?;
            accounts.ready().await?;
            if let Some(c) = &configmaps { c.ready().await?; }
            Ok::<_, super::error::Error>(())
        } => r?,
    }
    let mut receivers = vec![namespaces.subscribe(), accounts.subscribe()];
    receivers.extend(configmaps.as_ref().map(|c| c.subscribe()));
    let mut wake = Wake::new(receivers, ctx.cfg.resync);
    let mut requeue = Requeue::default();
    loop {
        for ns in namespaces.list() {
            if ns.metadata.deletion_timestamp.is_some()
                || ns.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Terminating")
            {
                continue;
            }
            let name = ns.name_any();
            if accounts.get(Some(&name), "default").is_none()
                && let Err(e) = ensure_default(&ctx, &name).await
            {
                tracing::warn!(namespace = %name, error = %super::error::chain(&e), "failed to create the default service account");
                requeue.after(Duration::from_secs(1));
            }
            // `root-ca-unpublished`: upstream runs the publisher as a loop of its own, which a
            // cluster can lose while this one keeps creating default ServiceAccounts.
            if let (Some(pem), Some(cms)) = (&ctx.cfg.root_ca_pem, &configmaps)
                && !ctx.cfg.faults.is_on("root-ca-unpublished")
            {
                let current = cms.get(Some(&name), ROOT_CA_CONFIGMAP);
                let up_to_date = current
                    .as_ref()
                    .and_then(|c| c.data.as_ref())
                    .and_then(|d| d.get("ca.crt"))
                    .is_some_and(|c| c == pem);
                if !up_to_date && let Err(e) = publish_ca(&ctx, &name, pem, current.is_some()).await {
                    tracing::warn!(namespace = %name, error = %super::error::chain(&e), "failed to publish the root ca");
                    requeue.after(Duration::from_secs(1));
                }
            }
        }
        if !wake.next(requeue.take(), &ctx.cancel).await {
            return Ok(());
        }
    }
}

async fn ensure_default(ctx: &Ctx, ns: &str) -> Result<()> {
    let api: Api<ServiceAccount> = Api::namespaced(ctx.client.clone(), ns);
    let sa = ServiceAccount {
        metadata: ObjectMeta {
            name: Some("default".into()),
            namespace: Some(ns.into()),
            ..ObjectMeta::default()
        },
        ..ServiceAccount::default()
    };
    match api.create(&PostParams::default(), &sa).await {
        Ok(_) => {
            tracing::debug!(namespace = %ns, "created the default service account");
            Ok(())
        }
        // Taken meanwhile, or the namespace started terminating: nothing to do.
        Err(e) if is_conflict(&e) || is_not_found(&e) || matches!(&e, kube::Error::Api(s) if s.code == 403) => Ok(()),
        Err(e) => Err(e).ctx("create", || format!("serviceaccount {ns}/default")),
    }
}

async fn publish_ca(ctx: &Ctx, ns: &str, pem: &str, exists: bool) -> Result<()> {
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), ns);
    let data = BTreeMap::from([("ca.crt".to_owned(), pem.to_owned())]);
    let result = if exists {
        api.patch(
            ROOT_CA_CONFIGMAP,
            &PatchParams::default(),
            &Patch::Merge(json!({"data": data})),
        )
        .await
        .map(|_| ())
    } else {
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(ROOT_CA_CONFIGMAP.into()),
                namespace: Some(ns.into()),
                annotations: Some(BTreeMap::from([(
                    "kubernetes.io/description".to_owned(),
                    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.".to_owned(),
                )])),
                ..ObjectMeta::default()
            },
            data: Some(data),
            ..ConfigMap::default()
        };
        api.create(&PostParams::default(), &cm).await.map(|_| ())
    };
    match result {
        Ok(()) => Ok(()),
        Err(e) if is_conflict(&e) || is_not_found(&e) || matches!(&e, kube::Error::Api(s) if s.code == 403) => Ok(()),
        Err(e) => Err(e).ctx("publish", || format!("configmap {ns}/{ROOT_CA_CONFIGMAP}")),
    }
}
