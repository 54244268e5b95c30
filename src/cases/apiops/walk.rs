//! The walk every upstream "should support … API operations" case makes through one kind:
//! discovery, create, get, list, watch, patch, update, delete, delete a collection.
//!
//! The main type is [`Walk`]: one per kind and label selector. Each step is a method a case
//! calls in upstream's order, with the kind's own steps (a `/status`, an approval) in between.
//! Writes go through the framework's retrying client; the update re-reads and resends on 409
//! Conflict, and accepts a conflict whose fresh read shows its change already stored (a replay
//! of an update whose answer was lost).

use std::collections::BTreeMap;
use std::fmt::Debug;

use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::{CONFLICT_TRIES, kind_of, plural_of};
use crate::ensure;
use crate::framework::{CaseError, CaseResult, Framework, RUN_ID_LABEL};

/// The annotation the patch step sets (upstream's `patched: "true"`).
pub(super) const PATCHED: &str = "patched";
/// The annotation the update step sets (upstream's `updated: "true"`).
pub(super) const UPDATED: &str = "updated";

/// One kind's API walk: the handle (namespaced or cluster-wide) and the label selector that
/// picks the case's objects.
pub(super) struct Walk<K> {
    api: Api<K>,
    selector: String,
    kind: String,
    plural: String,
}

/// Whether annotation `key` of `obj` is `"true"`.
pub(super) fn annotated<K: Resource>(obj: &K, key: &str) -> bool {
    obj.annotations().get(key).map(String::as_str) == Some("true")
}

impl<K> Walk<K>
where
    K: Resource + Clone + Debug + Send + Serialize + DeserializeOwned + 'static,
    K::DynamicType: Default,
{
    /// A walk over the objects of `api` matching `selector`.
    pub(super) fn new(api: Api<K>, selector: impl Into<String>) -> Walk<K> {
        Walk {
            api,
            selector: selector.into(),
            kind: kind_of::<K>(),
            plural: plural_of::<K>(),
        }
    }

    /// The API handle of the walk.
    pub(super) fn api(&self) -> &Api<K> {
        &self.api
    }

    /// Checks discovery: the kind's group lists its version, and that group version lists the
    /// kind's resource.
    ///
    /// # Errors
    /// A failure naming what discovery listed instead.
    async fn discover(&self, f: &Framework) -> CaseResult {
        let dt = K::DynamicType::default();
        let (group, version, plural) = (K::group(&dt), K::version(&dt), K::plural(&dt));
        let client = f.client();
        f.step(format!("getting /apis and /apis/{group}/{version}"));
        let groups = client.list_api_groups().await?;
        let versions: Vec<String> = groups
            .groups
            .iter()
            .filter(|g| g.name == group)
            .flat_map(|g| g.versions.iter().map(|v| v.version.clone()))
            .collect();
        ensure!(
            versions.iter().any(|v| v.as_str() == version),
            "discovery: expected API group {group} with version {version} in /apis, got versions {versions:?}"
        );
        let resources = client.list_api_group_resources(&format!("{group}/{version}")).await?;
        let names: Vec<&str> = resources.resources.iter().map(|r| r.name.as_str()).collect();
        ensure!(
            names.contains(&plural.as_ref()),
            "discovery: expected resource {plural} in /apis/{group}/{version}, got {names:?}"
        );
        Ok(())
    }

    /// Creates `objs` (with the run-id label added) and returns what the API stored.
    ///
    /// # Errors
    /// The API's refusal, naming the object.
    async fn create_all(&self, f: &Framework, objs: Vec<K>) -> Result<Vec<K>, CaseError> {
        let mut created = Vec::new();
        for mut obj in objs {
            obj.meta_mut()
                .labels
                .get_or_insert_with(BTreeMap::new)
                .insert(RUN_ID_LABEL.into(), f.run().run_id.clone());
            let name = obj.name_any();
            f.step(format!("creating {} {name}", self.kind));
            let stored = self
                .api
                .create(&PostParams::default(), &obj)
                .await
                .map_err(|e| CaseError::from(e).context(format!("creating {} {name}", self.kind)))?;
            created.push(stored);
        }
        Ok(created)
    }

    /// Gets `created` by name and checks it is the same object (its uid).
    ///
    /// # Errors
    /// A failure naming both uids.
    async fn get_same(&self, f: &Framework, created: &K) -> Result<K, CaseError> {
        let name = created.name_any();
        f.step(format!("getting {} {name}", self.kind));
        let got = self.api.get(&name).await?;
        ensure!(
            got.uid() == created.uid(),
            "{} {name} as read back: expected uid {:?} (the created object), got {:?}",
            self.kind,
            created.uid(),
            got.uid()
        );
        Ok(got)
    }

    /// Lists the walk's objects and checks there are `n`.
    ///
    /// # Errors
    /// A failure naming the objects listed.
    async fn list_expect(&self, f: &Framework, n: usize, when: &str) -> Result<Vec<K>, CaseError> {
        f.step(format!("listing {} with labels {}", self.plural, self.selector));
        let list = self.api.list(&ListParams::default().labels(&self.selector)).await?;
        // An object held by a finalizer (an ingress controller's) is listed until it lets go;
        // upstream counts it as deleted.
        let items: Vec<K> = list
            .items
            .into_iter()
            .filter(|o| o.meta().deletion_timestamp.is_none())
            .collect();
        let names: Vec<String> = items.iter().map(ResourceExt::name_any).collect();
        ensure!(
            names.len() == n,
            "listing {} with labels {} {when}: expected {n}, got {} {names:?}",
            self.plural,
            self.selector,
            names.len()
        );
        Ok(items)
    }

    /// Patches annotation [`PATCHED`] onto `name`, updates it to add [`UPDATED`], checks each
    /// answer, and waits on a watch until the object carries both.
    ///
    /// # Errors
    /// A failure naming the annotations seen after the step that lost them.
    async fn patch_update_watch(&self, f: &Framework, name: &str) -> Result<K, CaseError> {
        f.step(format!("patching {} {name}", self.kind));
        let patch = json!({"metadata": {"annotations": {PATCHED: "true"}}});
        let patched = self
            .api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        ensure!(
            annotated(&patched, PATCHED),
            "{} {name} after the patch: expected annotation {PATCHED}=true, got annotations {:?}",
            self.kind,
            patched.annotations()
        );
        let updated = update_with(
            f,
            &self.api,
            name,
            |o: &K| annotated(o, UPDATED),
            |o: &mut K| {
                o.annotations_mut().insert(UPDATED.into(), "true".into());
                Ok(())
            },
        )
        .await?;
        ensure!(
            annotated(&updated, PATCHED) && annotated(&updated, UPDATED),
            "{} {name} after the update: expected annotations {PATCHED}=true and {UPDATED}=true, got {:?}",
            self.kind,
            updated.annotations()
        );
        let seen = f
            .wait_for(
                &self.api,
                name,
                |o: Option<&K>| o.is_some_and(|o| annotated(o, PATCHED) && annotated(o, UPDATED)),
                "to be seen by a watch with the patched and updated annotations",
            )
            .await?;
        seen.ok_or_else(|| CaseError::failed(format!("{} {name} was seen annotated but not returned", self.kind)))
    }

    /// The first half of every walk: discovery, `objs` created, the one at `pick` read back,
    /// all of them listed, and that one patched, updated and watched. Returns it as created.
    ///
    /// # Errors
    /// A failure naming the step whose answer was wrong.
    pub(super) async fn open(&self, f: &Framework, objs: Vec<K>, pick: usize) -> Result<K, CaseError> {
        self.discover(f).await?;
        let n = objs.len();
        let created = self.create_all(f, objs).await?;
        let Some(picked) = created.get(pick).cloned() else {
            return Err(CaseError::failed(format!(
                "the walk over {} picks object {pick} of {n}",
                self.plural
            )));
        };
        self.get_same(f, &picked).await?;
        self.list_expect(f, n, &format!("after creating {n}")).await?;
        self.patch_update_watch(f, &picked.name_any()).await?;
        Ok(picked)
    }

    /// The end of every walk: `name` deleted (a get answers 404), `left` objects still listed,
    /// then all of them deleted as one collection.
    ///
    /// # Errors
    /// A failure naming what was still there.
    pub(super) async fn close(&self, f: &Framework, name: &str, left: usize) -> CaseResult {
        self.delete_one(f, name, left).await?;
        self.delete_all(f).await
    }

    /// Deletes `name`, checks a get answers 404, and that `left` objects remain listed.
    ///
    /// # Errors
    /// A failure naming what was still there.
    async fn delete_one(&self, f: &Framework, name: &str, left: usize) -> CaseResult {
        f.step(format!("deleting {} {name}", self.kind));
        self.api.delete(name, &DeleteParams::default()).await?;
        if let Some(still) = self.api.get_opt(name).await? {
            ensure!(
                still.meta().deletion_timestamp.is_some(),
                "{} {name} after its DELETE: expected 404 Not Found, got the object again",
                self.kind
            );
        }
        self.list_expect(f, left, &format!("after deleting {name}")).await?;
        Ok(())
    }

    /// Deletes the walk's objects as one collection and checks none is listed.
    ///
    /// # Errors
    /// A failure naming what remained.
    async fn delete_all(&self, f: &Framework) -> CaseResult {
        f.step(format!(
            "deleting the collection of {} with labels {}",
            self.plural, self.selector
        ));
        self.api
            .delete_collection(&DeleteParams::default(), &ListParams::default().labels(&self.selector))
            .await?;
        self.list_expect(f, 0, "after the DELETE of the collection").await?;
        Ok(())
    }
}

/// Reads `name`, applies `edit` and writes it back with an update; on 409 Conflict reads again
/// and, unless `done` says the change is already stored (an update replayed after its answer was
/// lost), edits and sends again. Returns the stored object.
///
/// # Errors
/// The API's refusal, or a failure from `edit`.
pub(super) async fn update_with<K>(
    f: &Framework,
    api: &Api<K>,
    name: &str,
    done: impl Fn(&K) -> bool,
    edit: impl Fn(&mut K) -> CaseResult,
) -> Result<K, CaseError>
where
    K: Resource + Clone + Debug + Serialize + DeserializeOwned,
    K::DynamicType: Default,
{
    f.step(format!("updating {} {name}", kind_of::<K>()));
    let mut attempt = 1;
    loop {
        let mut obj = api.get(name).await?;
        if attempt > 1 && done(&obj) {
            return Ok(obj);
        }
        edit(&mut obj)?;
        match api.replace(name, &PostParams::default(), &obj).await {
            Err(kube::Error::Api(s)) if s.code == 409 && attempt < CONFLICT_TRIES => attempt += 1,
            other => return Ok(other?),
        }
    }
}
