//! The garbage collector: watches every served resource (found through discovery) and
//! - deletes objects whose owners (by uid) are all gone, in the background;
//! - for an owner deleted with foreground propagation (finalizer `foregroundDeletion`),
//!   deletes its dependents and removes the finalizer once no dependent with
//!   `blockOwnerDeletion` remains;
//! - for an owner deleted with orphan propagation (finalizer `orphan`), strips the owner's
//!   reference from its dependents, then removes the finalizer.
//!
//! - keeps a dependent that still has a valid owner, stripping its references to owners that
//!   are gone or waiting for their dependents (so a foreground owner is not blocked by it);
//! - breaks dependency circles as upstream's `attemptToDeleteItem` does: a dependent about to
//!   be deleted in the foreground whose own dependent already waits in the foreground first has
//!   its owner references made non-blocking.
//!
//! An owner missing from the caches is confirmed with a live GET before anything is deleted,
//! so a dependent created just after its owner (not yet cached) is safe.
//!
//! Fault switches break it as real garbage collectors have been broken: `gc-ignores-orphan`
//! drops the `orphan` finalizer without releasing the dependents (they are then collected),
//! `gc-foreground-ignored` drops `foregroundDeletion` at once (the owner goes before its
//! dependents), `gc-ignores-other-owners` deletes a dependent when any one owner goes, and
//! `gc-cycles-block` leaves a circle of foreground deletions waiting on itself.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use kube::discovery::{Scope, verbs};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use serde_json::json;
use tokio::sync::watch;

use super::error::{ApiContext, Result, is_conflict, is_not_found};
use super::informer::Wake;
use super::plane::Ctx;

/// The finalizer of foreground deletion.
pub const FOREGROUND: &str = "foregroundDeletion";
/// The finalizer of orphan deletion.
pub const ORPHAN: &str = "orphan";
/// How often discovery is repeated to pick up newly served resources.
const REDISCOVER: Duration = Duration::from_secs(60);

struct DynInformer {
    ar: ApiResource,
    namespaced: bool,
    store: Store<DynamicObject>,
}

/// The GC's view of one object.
#[derive(Debug, Clone)]
struct Node {
    res: usize,
    namespace: Option<String>,
    name: String,
    uid: String,
    deleting: bool,
    finalizers: Vec<String>,
    refs: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>,
    resource_version: Option<String>,
}

/// Runs the garbage collector until cancelled.
pub(crate) async fn run(ctx: Ctx) -> Result<()> {
    let mut informers: Vec<DynInformer> = Vec::new();
    let mut kinds: HashMap<(String, String), usize> = HashMap::new();
    let (tx, rx) = watch::channel(0u64);
    let mut wake = Wake::new(vec![rx], ctx.cfg.resync);
    let mut discovered_at: Option<Instant> = None;
    loop {
        if discovered_at.is_none_or(|t| t.elapsed() > REDISCOVER) {
            match discover(&ctx).await {
                Ok(found) => {
                    for (ar, namespaced) in found {
                        let key = (ar.api_version.clone(), ar.kind.clone());
                        if kinds.contains_key(&key) {
                            continue;
                        }
                        kinds.insert(key, informers.len());
                        informers.push(spawn(&ctx, ar, namespaced, tx.clone()));
                    }
                    discovered_at = Some(Instant::now());
                }
                Err(e) => tracing::warn!(error = %super::error::chain(&e), "garbage collector discovery failed"),
            }
        }
        if let Err(e) = pass(&ctx, &informers, &kinds).await {
            tracing::warn!(error = %super::error::chain(&e), "garbage collection pass failed");
        }
        let retry = discovered_at.is_none().then_some(Duration::from_secs(1));
        if !wake.next(retry, &ctx.cancel).await {
            return Ok(());
        }
    }
}

async fn discover(ctx: &Ctx) -> Result<Vec<(ApiResource, bool)>> {
    let mut out = Vec::new();
    let served = ctx.served_resources().await?;
    // Upstream's GetDeletableResources: a group that failed discovery is logged and left out;
    // the collector goes on with the rest.
    if let Some(why) = served.failure_text() {
        tracing::warn!(error = %why, "garbage collector discovery incomplete");
    }
    for (ar, caps) in served.resources {
        if ar.plural == "events"
            || !caps.supports_operation(verbs::LIST)
            || !caps.supports_operation(verbs::WATCH)
            || !caps.supports_operation(verbs::DELETE)
        {
            continue;
        }
        out.push((ar, caps.scope == Scope::Namespaced));
    }
    Ok(out)
}

fn spawn(ctx: &Ctx, ar: ApiResource, namespaced: bool, tx: watch::Sender<u64>) -> DynInformer {
    let writer = reflector::store::Writer::<DynamicObject>::new(ar.clone());
    let store = writer.as_reader();
    let api: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &ar);
    let stream = reflector::reflector(writer, watcher(api, watcher::Config::default()).default_backoff());
    let cancel = ctx.cancel.clone();
    let plural = ar.plural.clone();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        loop {
            tokio::select! {
                () = cancel.cancelled() => break,
                ev = stream.next() => match ev {
                    Some(Ok(_)) => tx.send_modify(|n| *n = n.wrapping_add(1)),
                    Some(Err(e)) => tracing::debug!(resource = %plural, error = %e, "gc watch failed; retrying"),
                    None => break,
                },
            }
        }
    });
    DynInformer { ar, namespaced, store }
}

/// Where an owner reference points, as far as the GC can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OwnerState {
    /// The owner exists and is not being deleted in the foreground.
    Alive,
    /// The owner is being deleted in the foreground and waits for its dependents.
    WaitingForDependents,
    /// The owner (with that uid) does not exist.
    Absent,
    /// The owner's kind is not served; the reference is left alone.
    Unknown,
}

async fn pass(ctx: &Ctx, informers: &[DynInformer], kinds: &HashMap<(String, String), usize>) -> Result<()> {
    let mut nodes: Vec<Node> = Vec::new();
    for (i, inf) in informers.iter().enumerate() {
        for o in inf.store.state() {
            nodes.push(Node {
                res: i,
                namespace: o.metadata.namespace.clone(),
                name: o.name_any(),
                uid: o.metadata.uid.clone().unwrap_or_default(),
                deleting: o.metadata.deletion_timestamp.is_some(),
                finalizers: o.finalizers().to_vec(),
                refs: o.owner_references().to_vec(),
                resource_version: o.metadata.resource_version.clone(),
            });
        }
    }
    let by_uid: HashMap<&str, &Node> = nodes.iter().map(|n| (n.uid.as_str(), n)).collect();
    let mut dependents: HashMap<&str, Vec<&Node>> = HashMap::new();
    for n in &nodes {
        for r in &n.refs {
            dependents.entry(r.uid.as_str()).or_default().push(n);
        }
    }
    let mut verified_absent: HashSet<String> = HashSet::new();

    // Owners being deleted with orphan or foreground propagation.
    for owner in nodes.iter().filter(|n| n.deleting) {
        let deps = dependents.get(owner.uid.as_str()).cloned().unwrap_or_default();
        if owner.finalizers.iter().any(|f| f == ORPHAN) {
            // `gc-ignores-orphan`: the finalizer goes, the dependents keep their references
            // to an owner that is about to vanish, and are collected with it.
            let release = !ctx.cfg.faults.is_on("gc-ignores-orphan");
            for d in deps.iter().filter(|_| release) {
                let refs: Vec<_> = d.refs.iter().filter(|r| r.uid != owner.uid).cloned().collect();
                patch_refs(ctx, &informers[d.res].ar, d, refs).await?;
            }
            remove_finalizer(ctx, &informers[owner.res].ar, owner, ORPHAN).await?;
            continue;
        }
        if owner.finalizers.iter().any(|f| f == FOREGROUND) {
            let blocking = blocks(owner, &deps) && !ctx.cfg.faults.is_on("gc-foreground-ignored");
            if !blocking {
                remove_finalizer(ctx, &informers[owner.res].ar, owner, FOREGROUND).await?;
            }
        }
    }

    // Dependents whose owners are gone or waiting for them.
    for n in nodes.iter().filter(|n| !n.refs.is_empty() && !n.deleting) {
        let mut states = Vec::with_capacity(n.refs.len());
        for r in &n.refs {
            let state = match by_uid.get(r.uid.as_str()) {
                // `gc-foreground-ignored`: the owner's finalizer was just dropped above; its
                // dependents are collected once it is confirmed gone, as in the background.
                Some(o)
                    if o.deleting
                        && o.finalizers.iter().any(|f| f == FOREGROUND)
                        && !ctx.cfg.faults.is_on("gc-foreground-ignored") =>
                {
                    OwnerState::WaitingForDependents
                }
                Some(_) => OwnerState::Alive,
                None if verified_absent.contains(&r.uid) => OwnerState::Absent,
                None => {
                    let s = verify_owner(ctx, informers, kinds, n, r).await?;
                    if s == OwnerState::Absent {
                        verified_absent.insert(r.uid.clone());
                    }
                    s
                }
            };
            states.push(state);
        }
        match verdict(&states, ctx.cfg.faults.is_on("gc-ignores-other-owners")) {
            Verdict::Keep => continue,
            Verdict::KeepWithout(dropped) => {
                // Upstream's attemptToDeleteItem: with a solid owner left, references to
                // dangling owners and to owners waiting for their dependents are removed, so
                // the object neither goes nor holds up a foreground deletion.
                let refs: Vec<_> = n
                    .refs
                    .iter()
                    .zip(&states)
                    .filter(|(_, s)| !dropped.contains(s))
                    .map(|(r, _)| r.clone())
                    .collect();
                patch_refs(ctx, &informers[n.res].ar, n, refs).await?;
                continue;
            }
            Verdict::Delete => {}
        }
        let waiting = states.contains(&OwnerState::WaitingForDependents);
        let deps = dependents.get(n.uid.as_str()).cloned().unwrap_or_default();
        let dp = if waiting && !deps.is_empty() {
            // A dependent of this object already waits in the foreground: deleting this one in
            // the foreground too could close a circle, so its own references stop blocking
            // first (upstream's "to prevent potential cycle").
            if closes_circle(&deps) && !ctx.cfg.faults.is_on("gc-cycles-block") {
                let refs: Vec<_> = n
                    .refs
                    .iter()
                    .cloned()
                    .map(|mut r| {
                        r.block_owner_deletion = Some(false);
                        r
                    })
                    .collect();
                if refs != n.refs {
                    patch_refs(ctx, &informers[n.res].ar, n, refs).await?;
                }
            }
            DeleteParams::foreground()
        } else {
            DeleteParams::background()
        };
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(n.uid.clone()),
                resource_version: None,
            }),
            ..dp
        };
        let api = dyn_api(ctx, &informers[n.res], n.namespace.as_deref());
        match api.delete(&n.name, &dp).await {
            Ok(_) => tracing::info!(
                resource = %informers[n.res].ar.plural,
                object = %format!("{}/{}", n.namespace.as_deref().unwrap_or(""), n.name),
                "garbage collected"
            ),
            Err(e) if is_not_found(&e) || is_conflict(&e) => {}
            Err(e) => {
                return Err(e).ctx("garbage collect", || {
                    format!("{} {}", informers[n.res].ar.plural, n.name)
                });
            }
        }
    }
    Ok(())
}

/// What the collector does with an object that has owner references, given each owner's state.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// Every owner is valid: nothing to do.
    Keep,
    /// A valid owner remains: keep the object, without its references to owners in these states.
    KeepWithout(Vec<OwnerState>),
    /// No valid owner remains: delete it.
    Delete,
}

/// Upstream's classification of owners into solid, dangling and waiting for dependents:
/// an object with one solid (or unknown) owner stays. `any_owner_gone` models a collector
/// that ignores the remaining owners (fault `gc-ignores-other-owners`).
fn verdict(states: &[OwnerState], any_owner_gone: bool) -> Verdict {
    let gone = [OwnerState::Absent, OwnerState::WaitingForDependents];
    let solid = states
        .iter()
        .any(|s| matches!(s, OwnerState::Alive | OwnerState::Unknown));
    if !solid || (any_owner_gone && states.iter().any(|s| gone.contains(s))) {
        return Verdict::Delete;
    }
    let dropped: Vec<OwnerState> = gone.into_iter().filter(|g| states.contains(g)).collect();
    if dropped.is_empty() {
        Verdict::Keep
    } else {
        Verdict::KeepWithout(dropped)
    }
}

/// Whether one of `deps` holds up `owner`'s foreground deletion (`blockOwnerDeletion`).
fn blocks(owner: &Node, deps: &[&Node]) -> bool {
    deps.iter().any(|d| {
        d.refs
            .iter()
            .any(|r| r.uid == owner.uid && r.block_owner_deletion == Some(true))
    })
}

/// Whether one of `deps` is itself being deleted in the foreground.
fn closes_circle(deps: &[&Node]) -> bool {
    deps.iter()
        .any(|d| d.deleting && d.finalizers.iter().any(|f| f == FOREGROUND))
}

fn dyn_api(ctx: &Ctx, inf: &DynInformer, namespace: Option<&str>) -> Api<DynamicObject> {
    match (inf.namespaced, namespace) {
        (true, Some(ns)) => Api::namespaced_with(ctx.client.clone(), ns, &inf.ar),
        _ => Api::all_with(ctx.client.clone(), &inf.ar),
    }
}

async fn verify_owner(
    ctx: &Ctx,
    informers: &[DynInformer],
    kinds: &HashMap<(String, String), usize>,
    dependent: &Node,
    r: &k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
) -> Result<OwnerState> {
    let Some(&i) = kinds.get(&(r.api_version.clone(), r.kind.clone())) else {
        return Ok(OwnerState::Unknown);
    };
    let inf = &informers[i];
    let api = dyn_api(ctx, inf, dependent.namespace.as_deref());
    match api.get_opt(&r.name).await {
        Ok(Some(o)) if o.metadata.uid.as_deref() == Some(r.uid.as_str()) => Ok(
            if o.metadata.deletion_timestamp.is_some() && o.finalizers().iter().any(|f| f == FOREGROUND) {
                OwnerState::WaitingForDependents
            } else {
                OwnerState::Alive
            },
        ),
        Ok(_) => Ok(OwnerState::Absent),
        Err(e) => Err(e).ctx("look up", || format!("owner {} {}", r.kind, r.name)),
    }
}

async fn patch_refs(
    ctx: &Ctx,
    ar: &ApiResource,
    n: &Node,
    refs: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>,
) -> Result<()> {
    let api: Api<DynamicObject> = match &n.namespace {
        Some(ns) => Api::namespaced_with(ctx.client.clone(), ns, ar),
        None => Api::all_with(ctx.client.clone(), ar),
    };
    let patch = json!({"metadata": {"ownerReferences": refs, "uid": n.uid}});
    match api.patch(&n.name, &PatchParams::default(), &Patch::Merge(&patch)).await {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) || is_conflict(&e) => Ok(()),
        Err(e) => Err(e).ctx("update owner references of", || format!("{} {}", ar.plural, n.name)),
    }
}

async fn remove_finalizer(ctx: &Ctx, ar: &ApiResource, n: &Node, finalizer: &str) -> Result<()> {
    let api: Api<DynamicObject> = match &n.namespace {
        Some(ns) => Api::namespaced_with(ctx.client.clone(), ns, ar),
        None => Api::all_with(ctx.client.clone(), ar),
    };
    let rest: Vec<&String> = n.finalizers.iter().filter(|f| *f != finalizer).collect();
    // The resourceVersion makes this a compare-and-swap: a concurrent finalizer change wins
    // and the next pass retries.
    let patch = json!({"metadata": {"finalizers": rest, "resourceVersion": n.resource_version}});
    match api.patch(&n.name, &PatchParams::default(), &Patch::Merge(&patch)).await {
        Ok(_) => {
            tracing::debug!(resource = %ar.plural, object = %n.name, finalizer, "finalizer removed");
            Ok(())
        }
        Err(e) if is_not_found(&e) || is_conflict(&e) => Ok(()),
        Err(e) => Err(e).ctx("remove the finalizer from", || format!("{} {}", ar.plural, n.name)),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    use super::*;

    fn node(uid: &str, owners: &[(&str, bool)], foreground: bool) -> Node {
        Node {
            res: 0,
            namespace: Some("ns".into()),
            name: uid.into(),
            uid: uid.into(),
            deleting: foreground,
            finalizers: if foreground {
                vec![FOREGROUND.into()]
            } else {
                Vec::new()
            },
            refs: owners
                .iter()
                .map(|(o, block)| OwnerReference {
                    api_version: "v1".into(),
                    kind: "Pod".into(),
                    name: (*o).into(),
                    uid: (*o).into(),
                    block_owner_deletion: Some(*block),
                    controller: None,
                })
                .collect(),
            resource_version: None,
        }
    }

    #[test]
    fn a_valid_owner_keeps_the_object_without_the_waiting_owner() {
        use OwnerState::*;
        assert_eq!(verdict(&[Alive], false), Verdict::Keep);
        assert_eq!(verdict(&[Unknown, Absent], false), Verdict::KeepWithout(vec![Absent]));
        assert_eq!(
            verdict(&[WaitingForDependents, Alive], false),
            Verdict::KeepWithout(vec![WaitingForDependents])
        );
        assert_eq!(verdict(&[WaitingForDependents, Absent], false), Verdict::Delete);
        assert_eq!(verdict(&[Absent], false), Verdict::Delete);
    }

    #[test]
    fn ignoring_other_owners_deletes_on_the_first_owner_gone() {
        use OwnerState::*;
        assert_eq!(verdict(&[WaitingForDependents, Alive], true), Verdict::Delete);
        assert_eq!(verdict(&[Alive], true), Verdict::Keep);
    }

    #[test]
    fn only_blocking_references_hold_up_a_foreground_owner() {
        let owner = node("rc", &[], true);
        let blocking = node("p1", &[("rc", true)], false);
        let plain = node("p2", &[("rc", false)], false);
        assert!(blocks(&owner, &[&plain, &blocking]));
        assert!(!blocks(&owner, &[&plain]));
    }

    #[test]
    fn a_dependent_waiting_in_the_foreground_closes_a_circle() {
        // pod1 (deleting in the foreground) is owned by pod3; pod3 is owned by pod2.
        let pod1 = node("pod1", &[("pod3", true)], true);
        let idle = node("pod2", &[("pod1", true)], false);
        assert!(closes_circle(&[&pod1]));
        assert!(!closes_circle(&[&idle]));
    }
}
