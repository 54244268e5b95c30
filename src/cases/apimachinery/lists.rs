//! `[sig-api-machinery] Servers with support for API chunking` (upstream
//! test/e2e/apimachinery/chunking.go) and `Servers with support for Table transformation`
//! (table_conversion.go): how the API server pages a LIST and which representations it agrees
//! to answer with.
//!
//! Only API calls, so one body serves both OSes.

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::PodTemplate;
use kube::ResourceExt;
use kube::api::ListParams;

use crate::case;
use crate::cases::api::podtemplates::pod_template;
use crate::catalog::{Case, Kind};
use crate::framework::{CaseError, CaseResult, Framework, render_kube_error};
use crate::{ensure, fail};

/// Upstream chunking.go "should return chunks of results for list calls".
pub(crate) const CHUNKS: &str = "[sig-api-machinery] Servers with support for API chunking should return chunks of results for list calls [Conformance]";
/// Upstream table_conversion.go "should return a 406 for a backend which does not implement
/// metadata".
pub(crate) const TABLE_406: &str = "[sig-api-machinery] Servers with support for Table transformation should return a 406 for a backend which does not implement metadata [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(CHUNKS, Kind::Adapted, chunks),
        case!(TABLE_406, Kind::Adapted, table_406),
    ]
}

/// Upstream `numberOfTotalResources`.
const TOTAL: usize = 400;
/// Upstream creates the templates 20 at a time.
const CREATORS: usize = 20;

fn template_name(i: usize) -> String {
    format!("template-{i:04}")
}

/// Upstream: 400 PodTemplates are read three times in pages of 1 to 40 (every page at most its
/// limit, all at the first page's resourceVersion, `remainingItemCount` adding up, names in
/// order), then all at once with a limit of 401.
async fn chunks(f: &Framework) -> CaseResult {
    f.step(format!("creating {TOTAL} PodTemplates, {CREATORS} at a time"));
    let templates: Vec<PodTemplate> = (0..TOTAL)
        .map(|i| pod_template(f, &template_name(i), &[]))
        .collect::<Result<_, _>>()?;
    let api = f.api::<PodTemplate>();
    futures::stream::iter(templates.into_iter().map(|t| {
        let api = api.clone();
        async move {
            api.create(&Default::default(), &t)
                .await
                .map_err(|e| CaseError::from(e).context(format!("creating PodTemplate {}", t.name_any())))
        }
    }))
    .buffer_unordered(CREATORS)
    .try_collect::<Vec<_>>()
    .await?;

    for round in 0..3 {
        f.step(format!("reading the PodTemplates in pages, round {}", round + 1));
        let mut restarts = 0;
        loop {
            match read_in_pages(f, round).await? {
                // The server compacted the version the continue token reads at (every 5 min
                // upstream): the token is expired, and a client starts the list over.
                Some(why) if restarts < MAX_RESTARTS => {
                    restarts += 1;
                    f.step(format!(
                        "the continue token expired ({why}); reading from the first page again"
                    ));
                }
                Some(why) => fail!(
                    "the continue token expired {} times in a row; last: {why}",
                    restarts + 1
                ),
                None => break,
            }
        }
    }
    f.step("reading the PodTemplates all at once");
    let all = api
        .list(&ListParams::default().limit(u32::try_from(TOTAL + 1).unwrap_or(u32::MAX)))
        .await?;
    ensure!(
        all.items.len() == TOTAL,
        "a list with limit {} returned {} PodTemplates, expected {TOTAL}",
        TOTAL + 1,
        all.items.len()
    );
    Ok(())
}

/// How many times a round of paged reads starts over after its continue token expired.
const MAX_RESTARTS: usize = 3;

/// One paged read of all the templates; page sizes vary with `round` and the page number
/// (upstream draws them at random from 1 to 40). `Some(why)` when a page was answered 410
/// Expired (its continue token outlived a compaction) and the read must start over.
async fn read_in_pages(f: &Framework, round: usize) -> Result<Option<String>, CaseError> {
    let api = f.api::<PodTemplate>();
    let mut found = 0usize;
    let mut first_rv: Option<String> = None;
    let mut token: Option<String> = None;
    for page in 0usize.. {
        let limit = (round * 17 + page * 13) % (TOTAL / 10) + 1;
        let mut params = ListParams::default().limit(u32::try_from(limit).unwrap_or(1));
        if let Some(t) = &token {
            params = params.continue_token(t);
        }
        let list = match api.list(&params).await {
            Ok(l) => l,
            Err(kube::Error::Api(s)) if s.code == 410 && token.is_some() => {
                return Ok(Some(format!("page {page}: {} (410 {})", s.message, s.reason)));
            }
            Err(e) => return Err(CaseError::from(e)),
        };
        let rv = list.metadata.resource_version.clone().unwrap_or_default();
        let at = format!("page {page} (limit {limit}, {found} items read before it)");
        ensure!(
            list.items.len() <= limit,
            "{at}: {} items returned, more than the limit",
            list.items.len()
        );
        let first = first_rv.get_or_insert_with(|| rv.clone());
        ensure!(
            *first == rv,
            "{at}: resourceVersion {rv}, expected the first page's {first}"
        );
        let next = list.metadata.continue_.clone().filter(|c| !c.is_empty());
        let remaining = list.metadata.remaining_item_count;
        match (&next, remaining) {
            (None, Some(r)) => fail!("{at}: the last page reports remainingItemCount {r}, expected none"),
            (Some(_), None) => fail!("{at}: a page with a continue token reports no remainingItemCount"),
            (Some(_), Some(r)) => {
                let total = usize::try_from(r).unwrap_or(0) + list.items.len() + found;
                ensure!(
                    total == TOTAL,
                    "{at}: remainingItemCount {r} plus {} on this page plus {found} before adds up to {total}, \
                     expected {TOTAL}",
                    list.items.len()
                );
            }
            (None, None) => {}
        }
        for item in &list.items {
            let want = template_name(found);
            ensure!(
                item.name_any() == want,
                "{at}: item {found} of the list is {}, expected {want}",
                item.name_any()
            );
            found += 1;
        }
        match next {
            Some(t) => token = Some(t),
            None => break,
        }
    }
    ensure!(
        found == TOTAL,
        "the paged read returned {found} PodTemplates, expected {TOTAL}"
    );
    Ok(None)
}

/// Upstream: a SelfSubjectAccessReview POSTed with `Accept` naming only the meta.k8s.io/v1
/// Table form is refused with 406 (a review has no metadata to print as a Table).
async fn table_406(f: &Framework) -> CaseResult {
    let path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    let body = serde_json::json!({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"nonResourceAttributes": {"path": "/", "verb": "get"}}
    });
    let req = http::Request::post(path)
        .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
        .header("Content-Type", "application/json")
        .body(serde_json::to_vec(&body).map_err(|e| CaseError::failed(e.to_string()))?)
        .map_err(|e| CaseError::failed(format!("building the POST of {path}: {e}")))?;
    f.step(format!(
        "posting a SelfSubjectAccessReview to {path}, accepting only a Table"
    ));
    match f.client().request_text(req).await {
        Err(kube::Error::Api(s)) if s.code == 406 => Ok(()),
        Err(e) => fail!(
            "a SelfSubjectAccessReview POSTed accepting only a Table failed with {}, expected 406 NotAcceptable",
            render_kube_error(&e)
        ),
        Ok(text) => {
            let mut shown = text;
            shown.truncate(300);
            fail!(
                "a SelfSubjectAccessReview POSTed accepting only a Table was answered, expected 406 NotAcceptable; \
                 the answer: {shown}"
            )
        }
    }
}
