//! The namespace controller: empties a terminating namespace of every namespaced object of
//! every served resource (found through discovery), waits for what is still going away (pods
//! waiting for their kubelet, objects with finalizers), then finalizes the namespace so the API
//! server can remove it.
//!
//! `namespace-content-left` finalizes a terminating namespace without deleting anything in it,
//! as a controller whose discovery came back empty would: the objects stay in storage and are
//! found again when a namespace of the same name is created.

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::discovery::{Scope, verbs};
use kube::{Api, ResourceExt};

use super::error::{ApiContext, Result, is_not_found};
use super::informer::{Requeue, Wake};
use super::namespace_conditions::{self, PassFindings};
use super::plane::Ctx;

/// The finalizer the API server puts in `spec.finalizers` of every namespace.
pub const KUBERNETES_FINALIZER: &str = "kubernetes";

/// How long one discovery result is reused across namespaces and passes.
const DISCOVERY_TTL: Duration = Duration::from_secs(30);

/// How long a discovery result with failed groups is reused: upstream rediscovers on every
/// sync, and a namespace waits on nothing else once the failing group is back.
const FAILED_DISCOVERY_TTL: Duration = Duration::from_secs(2);

struct Resources {
    list: Vec<ApiResource>,
    /// How many group versions failed, and client-go's text for it.
    failure: Option<(usize, String)>,
    at: Instant,
}

impl Resources {
    fn fresh(&self) -> bool {
        let ttl = if self.failure.is_some() {
            FAILED_DISCOVERY_TTL
        } else {
            DISCOVERY_TTL
        };
        self.at.elapsed() <= ttl
    }
}

/// Namespaces synced at once, as kube-controller-manager's
/// `--concurrent-namespace-syncs` default: one namespace whose lists are slow or retried does
/// not hold up the others.
const CONCURRENT_SYNCS: usize = 10;

/// Lists of one namespace's contents in flight at once, each starting as soon as another
/// ends (a latency spike on one list holds up only its own slot).
const CONCURRENT_LISTS: usize = 8;

/// Runs the namespace controller until cancelled.
pub(crate) async fn run(ctx: Ctx) -> Result<()> {
    let namespaces = ctx.informers.get::<Namespace>();
    tokio::select! {
        () = ctx.cancel.cancelled() => return Ok(()),
        r = namespaces.ready() => r?,
    }
    let mut wake = Wake::new(vec![namespaces.subscribe()], ctx.cfg.resync);
    let mut requeue = Requeue::default();
    let mut cache: Option<Resources> = None;
    loop {
        let terminating: Vec<_> = namespaces
            .list()
            .into_iter()
            .filter(|ns| ns.metadata.deletion_timestamp.is_some())
            .collect();
        if !terminating.is_empty() {
            if cache.as_ref().is_none_or(|c| !c.fresh()) {
                cache = match namespaced_resources(&ctx).await {
                    Ok(r) => Some(r),
                    Err(e) => {
                        tracing::warn!(error = %super::error::chain(&e), "discovery for namespace cleanup failed");
                        None
                    }
                };
            }
            match cache.as_ref() {
                None => requeue.after(Duration::from_secs(1)),
                Some(resources) => {
                    // At most CONCURRENT_SYNCS at a time, each starting as soon as another
                    // ends: one namespace held up by a slow answer does not hold a batch.
                    let syncs: Vec<_> = terminating.iter().map(|ns| named_sync(&ctx, ns, resources)).collect();
                    let outcomes: Vec<(&Namespace, Result<bool>)> = futures::stream::iter(syncs)
                        .buffer_unordered(CONCURRENT_SYNCS)
                        .collect()
                        .await;
                    let mut stale = false;
                    for (ns, outcome) in outcomes {
                        match outcome {
                            Ok(true) => {}
                            Ok(false) => requeue.after(Duration::from_millis(500)),
                            Err(e) => {
                                // A resource that went away means discovery is stale; any other
                                // error is the API server's trouble and is retried as it is.
                                if e.is_not_found() {
                                    stale = true;
                                } else {
                                    tracing::debug!(namespace = %ns.name_any(), error = %super::error::chain(&e), "namespace cleanup failed; retrying");
                                }
                                requeue.after(Duration::from_secs(1));
                            }
                        }
                    }
                    if stale {
                        cache = None;
                    }
                }
            }
        }
        if !wake.next(requeue.take(), &ctx.cancel).await {
            return Ok(());
        }
    }
}

/// The namespaced resources that can be listed and deleted, from discovery, with the groups
/// whose discovery failed (their content cannot be deleted, so no namespace can be finalized
/// until they answer again: upstream's `NamespaceDeletionDiscoveryFailure`).
async fn namespaced_resources(ctx: &Ctx) -> Result<Resources> {
    let served = ctx.served_resources().await?;
    let failure = served.failure_text().map(|t| (served.failed.len(), t));
    if let Some((_, why)) = &failure {
        tracing::warn!(error = %why, "discovery for namespace cleanup incomplete");
    }
    let list = served
        .resources
        .into_iter()
        .filter(|(_, caps)| {
            caps.scope == Scope::Namespaced
                && caps.supports_operation(verbs::LIST)
                && caps.supports_operation(verbs::DELETE)
        })
        .map(|(ar, _)| ar)
        .collect();
    Ok(Resources {
        list,
        failure,
        at: Instant::now(),
    })
}

/// Lists `api`, trying again on a failure other than NotFound: client-go, which the real
/// controller uses, retries a GET whose connection was reset or whose answer was cut, and
/// honours Retry-After; without that, one cut list in forty would cost a whole pass.
async fn list_retrying(api: &Api<DynamicObject>) -> std::result::Result<Vec<DynamicObject>, kube::Error> {
    let mut attempt = 0;
    loop {
        match api.list(&ListParams::default()).await {
            Ok(l) => return Ok(l.items),
            Err(e) if is_not_found(&e) || attempt >= 4 => return Err(e),
            Err(e) => {
                attempt += 1;
                tracing::debug!(error = %e, attempt, "namespace content list failed; retrying");
                tokio::time::sleep(Duration::from_millis(200 * attempt)).await;
            }
        }
    }
}

/// [`sync`] with the namespace it was for (the futures are built here, not in a stream
/// combinator's closure, so the compiler can see they are `Send` for the spawned controller).
async fn named_sync<'a>(ctx: &Ctx, ns: &'a Namespace, resources: &Resources) -> (&'a Namespace, Result<bool>) {
    (ns, sync(ctx, ns, resources).await)
}

/// One resource's objects in a namespace, with what listed them.
async fn list_contents(
    api: Api<DynamicObject>,
    ar: ApiResource,
) -> (
    ApiResource,
    Api<DynamicObject>,
    std::result::Result<Vec<DynamicObject>, kube::Error>,
) {
    let items = list_retrying(&api).await;
    (ar, api, items)
}

/// One pass over a terminating namespace; `Ok(true)` once it is finalized.
async fn sync(ctx: &Ctx, ns: &Namespace, discovered: &Resources) -> Result<bool> {
    let name = ns.name_any();
    let pending_finalizer = ns
        .spec
        .as_ref()
        .and_then(|s| s.finalizers.as_ref())
        .is_some_and(|f| f.iter().any(|f| f == KUBERNETES_FINALIZER));
    if !pending_finalizer {
        return Ok(true);
    }
    // Like upstream's deleteAllContent: an error on one resource does not stop the others;
    // the first is returned once every resource had its turn, so a transient API error costs
    // one requeue, not a whole pass.
    let mut findings = PassFindings {
        discovery_failure: discovered.failure.clone(),
        ..Default::default()
    };
    let mut first_error: Option<Result<bool>> = None;
    let resources = if ctx.cfg.faults.is_on("namespace-content-left") {
        &[][..]
    } else {
        &discovered.list[..]
    };
    // The lists go out a few at a time (upstream lists one resource after another, but its
    // lists answer in milliseconds; here an `api-latency` switch can hold one for seconds, and
    // the kinds served keep growing), then each list's contents are deleted in order.
    let lists: Vec<_> = resources
        .iter()
        .map(|ar| list_contents(Api::namespaced_with(ctx.client.clone(), &name, ar), ar.clone()))
        .collect();
    let listed: Vec<_> = futures::stream::iter(lists)
        .buffer_unordered(CONCURRENT_LISTS)
        .collect()
        .await;
    for (ar, api, items) in listed {
        let items = match items {
            Ok(items) => items,
            Err(e) if is_not_found(&e) => continue,
            Err(e) => {
                findings.content_errors.push(e.to_string());
                first_error.get_or_insert(Err(e).ctx("list", || format!("{} in namespace {name}", ar.plural)));
                continue;
            }
        };
        for obj in items {
            // An object already going away, or one whose delete answered with the object
            // (graceful deletion or finalizers), is still there after this pass.
            if obj.metadata.deletion_timestamp.is_some() {
                findings.still_there(&ar.plural, &ar.group, obj.finalizers());
                continue;
            }
            match api.delete(&obj.name_any(), &DeleteParams::background()).await {
                // The answer is the object when it lingers (graceful deletion, finalizers) or when
                // the resource returns what it deleted: only the former is still there.
                Ok(answer) => match answer.left().filter(|o| o.metadata.deletion_timestamp.is_some()) {
                    Some(left) => findings.still_there(&ar.plural, &ar.group, left.finalizers()),
                    None => {
                        tracing::debug!(namespace = %name, resource = %ar.plural, object = %obj.name_any(), "deleted");
                    }
                },
                Err(e) if is_not_found(&e) => {}
                Err(e) => {
                    findings.still_there(&ar.plural, &ar.group, obj.finalizers());
                    findings.content_errors.push(e.to_string());
                    first_error
                        .get_or_insert(Err(e).ctx("delete", || format!("{} {name}/{}", ar.plural, obj.name_any())));
                }
            }
        }
    }
    record_conditions(ctx, ns, &findings).await;
    if let Some(err) = first_error {
        return err;
    }
    if let Some((_, why)) = &findings.discovery_failure {
        tracing::debug!(namespace = %name, error = %why, "not finalizing: discovery incomplete");
        return Ok(false);
    }
    let remaining: usize = findings.remaining.values().sum();
    if remaining > 0 {
        tracing::debug!(namespace = %name, remaining, "waiting for namespace contents to go");
        return Ok(false);
    }
    // Upstream's retryOnConflictError: the finalize PUT carries a resourceVersion, and the
    // informer's copy may be behind (a cut watch still resuming), so read the namespace afresh
    // and try again on a conflict.
    let api: Api<Namespace> = Api::all(ctx.client.clone());
    let mut current = ns.clone();
    let mut attempt = 0;
    let result = loop {
        let mut finalized = current.clone();
        if let Some(spec) = finalized.spec.as_mut() {
            spec.finalizers = Some(
                spec.finalizers
                    .iter()
                    .flatten()
                    .filter(|f| *f != KUBERNETES_FINALIZER)
                    .cloned()
                    .collect(),
            );
        }
        match api
            .replace_subresource("finalize", &name, &PostParams::default(), &finalized)
            .await
        {
            Err(kube::Error::Api(s)) if s.code == 409 && attempt < 3 => {
                attempt += 1;
                match api.get_opt(&name).await {
                    Ok(Some(fresh)) => current = fresh,
                    Ok(None) => return Ok(true),
                    Err(e) => break Err(e),
                }
            }
            other => break other,
        }
    };
    match result {
        Ok(_) => {
            tracing::info!(namespace = %name, "namespace finalized");
            Ok(true)
        }
        Err(e) if is_not_found(&e) => Ok(true),
        Err(e) => Err(e).ctx("finalize", || format!("namespace {name}")),
    }
}

/// Writes this pass's conditions to the namespace's status when they changed (upstream's
/// `conditionUpdater.Update` + `UpdateStatus`); a failed write is logged, as upstream does,
/// and the next pass writes again.
async fn record_conditions(ctx: &Ctx, ns: &Namespace, findings: &PassFindings) {
    let mut updated = ns.clone();
    let status = updated.status.get_or_insert_with(Default::default);
    if !namespace_conditions::update(status, findings, ctx.now()) {
        return;
    }
    let api: Api<Namespace> = Api::all(ctx.client.clone());
    if let Err(e) = api
        .replace_status(&ns.name_any(), &PostParams::default(), &updated)
        .await
        && !is_not_found(&e)
    {
        tracing::debug!(namespace = %ns.name_any(), error = %e, "recording namespace deletion conditions failed");
    }
}
