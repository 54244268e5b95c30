//! The tokens controller (kube-controller-manager's serviceaccount-token loop) for legacy
//! `kubernetes.io/service-account-token` Secrets: a Secret naming a ServiceAccount in its
//! `kubernetes.io/service-account.name` annotation gets a token for that account, the cluster
//! CA and the namespace in its data, and the account's uid in its
//! `kubernetes.io/service-account.uid` annotation; a Secret whose account is gone (or was
//! replaced by one with another uid) is deleted.
//!
//! The token is a JWT like upstream's, signed with the API server's ServiceAccount key
//! (kube-controller-manager's `--service-account-private-key-file`), and names the Secret, so
//! the API server accepts it exactly while the Secret holds it and its ServiceAccount exists.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::error::{ApiContext, Result, is_not_found};
use super::informer::{Requeue, Wake};
use super::plane::Ctx;

/// The Secret type the controller fills.
pub const TOKEN_TYPE: &str = "kubernetes.io/service-account-token";
const NAME_KEY: &str = "kubernetes.io/service-account.name";
const UID_KEY: &str = "kubernetes.io/service-account.uid";

/// Runs the controller until cancelled.
pub(crate) async fn run(ctx: Ctx) -> Result<()> {
    let secrets = ctx.informers.get::<Secret>();
    let accounts = ctx.informers.get::<ServiceAccount>();
    tokio::select! {
        () = ctx.cancel.cancelled() => return Ok(()),
        r = async { secrets.ready().await?; accounts.ready().await } => r?,
    }
    let mut wake = Wake::new(vec![secrets.subscribe(), accounts.subscribe()], ctx.cfg.resync);
    let mut requeue = Requeue::default();
    loop {
        for s in secrets.list() {
            if s.type_.as_deref() != Some(TOKEN_TYPE) {
                continue;
            }
            if let Err(e) = sync(&ctx, &s, &accounts).await {
                tracing::warn!(secret = %s.name_any(), error = %super::error::chain(&e), "failed to sync a service account token secret");
                requeue.after(Duration::from_secs(1));
            }
        }
        if !wake.next(requeue.take(), &ctx.cancel).await {
            return Ok(());
        }
    }
}

async fn sync(ctx: &Ctx, s: &Secret, accounts: &super::informer::Informer<ServiceAccount>) -> Result<()> {
    let ns = s.namespace().unwrap_or_default();
    let name = s.name_any();
    let annotations = s.metadata.annotations.clone().unwrap_or_default();
    let Some(sa_name) = annotations.get(NAME_KEY).filter(|n| !n.is_empty()) else {
        return Ok(());
    };
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    // The cache may lag a just-created account: ask the server before deleting.
    let account = match accounts.get(Some(&ns), sa_name) {
        Some(a) => Some((*a).clone()),
        None => Api::<ServiceAccount>::namespaced(ctx.client.clone(), &ns)
            .get_opt(sa_name)
            .await
            .ctx("get", || format!("serviceaccount {ns}/{sa_name}"))?,
    };
    let sa_uid = account.as_ref().and_then(|a| a.metadata.uid.clone());
    let stale = match (&sa_uid, annotations.get(UID_KEY)) {
        (None, _) => true,
        (Some(uid), Some(want)) => !want.is_empty() && want != uid,
        (Some(_), None) => false,
    };
    if stale {
        tracing::debug!(secret = %name, namespace = %ns, "deleting a token secret whose service account is gone");
        return match secrets.delete(&name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(e).ctx("delete", || format!("secret {ns}/{name}")),
        };
    }
    let Some(sa_uid) = sa_uid else { return Ok(()) };
    let data = s.data.clone().unwrap_or_default();
    let mut fill: BTreeMap<&str, String> = BTreeMap::new();
    if data.get("token").is_none_or(|t| t.0.is_empty()) {
        let token = crate::api::auth::tokens::legacy_token(&ctx.cfg.service_account_key, &ns, &name, sa_name, &sa_uid)
            .map_err(|source| super::error::Error::Sign {
                object: format!("secret {ns}/{name}"),
                source,
            })?;
        fill.insert("token", STANDARD.encode(token));
    }
    if !data.contains_key("ca.crt") {
        let ca = ctx.cfg.root_ca_pem.clone().unwrap_or_default();
        fill.insert("ca.crt", STANDARD.encode(ca));
    }
    if !data.contains_key("namespace") {
        fill.insert("namespace", STANDARD.encode(&ns));
    }
    if fill.is_empty() && annotations.get(UID_KEY) == Some(&sa_uid) {
        return Ok(());
    }
    let patch = json!({"metadata": {"annotations": {UID_KEY: sa_uid}}, "data": fill});
    match secrets
        .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        Ok(_) => {
            tracing::debug!(secret = %name, namespace = %ns, "filled a service account token secret");
            Ok(())
        }
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e).ctx("patch", || format!("secret {ns}/{name}")),
    }
}
