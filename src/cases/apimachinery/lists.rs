//! `[sig-api-machinery] Servers with support for API chunking` (upstream
//! test/e2e/apimachinery/chunking.go) and `Servers with support for Table transformation`
//! (table_conversion.go): how the API server pages a LIST and which representations it agrees
//! to answer with.
//!
//! Only API calls, so one body serves both OSes.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::PodTemplate;
use kube::ResourceExt;
use kube::api::{ListParams, ObjectList};

use crate::case;
use crate::cases::api::podtemplates::pod_template;
use crate::catalog::{Case, Kind};
use crate::framework::{CaseError, CaseResult, Framework, render_kube_error};
use crate::{ensure, fail};

/// Upstream chunking.go "should return chunks of results for list calls".
pub(crate) const CHUNKS: &str = "[sig-api-machinery] Servers with support for API chunking should return chunks of results for list calls [Conformance]";
/// Upstream chunking.go "should support continue listing from the last key if the original
/// version has been compacted away, though the list is inconsistent".
pub(crate) const CHUNKS_COMPACTED: &str = "[sig-api-machinery] Servers with support for API chunking should support continue listing from the last key if the original version has been compacted away, though the list is inconsistent [Slow] [Conformance]";
/// Upstream table_conversion.go "should return a 406 for a backend which does not implement
/// metadata".
pub(crate) const TABLE_406: &str = "[sig-api-machinery] Servers with support for Table transformation should return a 406 for a backend which does not implement metadata [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![
        case!(CHUNKS, Kind::Adapted, chunks),
        case!(TABLE_406, Kind::Adapted, table_406),
        case!(CHUNKS_COMPACTED, Kind::Adapted, chunks_compacted),
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
    create_templates(f).await?;
    let api = f.api::<PodTemplate>();
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

/// Upstream's BeforeEach: [`TOTAL`] PodTemplates `template-0000`… created [`CREATORS`] at a
/// time.
async fn create_templates(f: &Framework) -> CaseResult {
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

/// How long the first page's continue token may take to expire: upstream's two
/// `storagebackend.DefaultCompactInterval`s (kube-apiserver compacts every 5 min, to the
/// revision of the run before, so a token lives one to two intervals).
const EXPIRES_WITHIN: Duration = Duration::from_secs(600);

/// How often the expired token is tried (upstream polls every 20 s; reads are cheap).
const EXPIRY_POLL: Duration = Duration::from_secs(1);

/// Upstream: the first page (limit 40) is read; its continue token is then tried until the
/// server has compacted the first page's resourceVersion away and answers 410 Expired, with a
/// Status whose `metadata.continue` goes on from the last key inconsistently; that token gives
/// the second page (40 items, template-0040 on, at a new resourceVersion), and the rest follows
/// in pages at that resourceVersion, `remainingItemCount` adding up, until all 400 are read.
///
/// The case reads the server's compaction as it happens (its interval is a server flag no API
/// shows), bounded by upstream's ten minutes and the case's time budget.
async fn chunks_compacted(f: &Framework) -> CaseResult {
    create_templates(f).await?;
    let api = f.api::<PodTemplate>();
    let limit = TOTAL / 10;
    let params = || ListParams::default().limit(u32::try_from(limit).unwrap_or(1));
    f.step(format!("retrieving the first page (limit {limit})"));
    let first = api.list(&params()).await?;
    let first_rv = first.metadata.resource_version.clone().unwrap_or_default();
    let Some(first_token) = first.metadata.continue_.clone().filter(|c| !c.is_empty()) else {
        fail!(
            "the first page of {TOTAL} PodTemplates with limit {limit} has no continue token ({} items)",
            first.items.len()
        );
    };
    check_remaining(&first, 0, "the first page")?;

    f.step(format!(
        "retrieving the second page with the first page's token until resourceVersion {first_rv} is compacted away"
    ));
    let within = EXPIRES_WITHIN.min(f.remaining().saturating_sub(Duration::from_secs(10)));
    let started = std::time::Instant::now();
    let mut tick = tokio::time::interval(EXPIRY_POLL);
    let inconsistent = loop {
        tick.tick().await;
        match api.list(&params().continue_token(&first_token)).await {
            Ok(_) if started.elapsed() < within => {}
            Ok(_) => fail!(
                "the continue token of the first page (resourceVersion {first_rv}) was still accepted after {:.0?}; \
                 expected the server's storage compaction to expire it (410 Expired) within {within:?}",
                started.elapsed()
            ),
            Err(kube::Error::Api(s)) if s.code == 410 && s.reason == "Expired" => {
                let token = s
                    .metadata
                    .as_ref()
                    .and_then(|m| m.continue_.clone())
                    .unwrap_or_default();
                ensure!(
                    !token.is_empty(),
                    "the expired continue token was answered 410 Expired ({}) without a continue token for an \
                     inconsistent continuation in the Status's metadata",
                    s.message
                );
                f.step(format!("expired after {:.1?}: {}", started.elapsed(), s.message));
                break token;
            }
            Err(e) => fail!(
                "the first page's continue token was answered {}, expected a page or 410 Expired",
                render_kube_error(&e)
            ),
        }
    };

    f.step("retrieving the second page with the token from the 410");
    let second = api.list(&params().continue_token(&inconsistent)).await?;
    let rv = second.metadata.resource_version.clone().unwrap_or_default();
    ensure!(
        rv != first_rv,
        "the inconsistent continuation answered at resourceVersion {rv}, the compacted first page's; expected a newer one"
    );
    ensure!(
        second.items.len() == limit,
        "the inconsistent continuation returned {} items, expected {limit}",
        second.items.len()
    );
    let mut found = limit;
    let mut page = second;
    for n in 2usize.. {
        let at = format!("page {n} (limit {limit}, {found} items read before it)");
        check_remaining(&page, found, &at)?;
        ensure!(
            page.items.len() <= limit,
            "{at}: {} items, more than the limit",
            page.items.len()
        );
        let page_rv = page.metadata.resource_version.clone().unwrap_or_default();
        ensure!(
            page_rv == rv,
            "{at}: resourceVersion {page_rv}, expected the inconsistent continuation's {rv}"
        );
        for item in &page.items {
            let want = template_name(found);
            ensure!(
                item.name_any() == want,
                "{at}: item {found} is {}, expected {want}",
                item.name_any()
            );
            found += 1;
        }
        let Some(next) = page.metadata.continue_.clone().filter(|c| !c.is_empty()) else {
            break;
        };
        page = api.list(&params().continue_token(&next)).await?;
    }
    ensure!(
        found == TOTAL,
        "the continued read returned {found} PodTemplates in all, expected {TOTAL}"
    );
    Ok(())
}

/// Upstream's check of a page: with a continue token, `remainingItemCount` plus this page plus
/// the `before` items already read is [`TOTAL`]; without one, no `remainingItemCount`.
fn check_remaining(list: &ObjectList<PodTemplate>, before: usize, at: &str) -> CaseResult {
    let more = list.metadata.continue_.as_deref().is_some_and(|c| !c.is_empty());
    match (more, list.metadata.remaining_item_count) {
        (false, Some(r)) => fail!("{at}: the last page reports remainingItemCount {r}, expected none"),
        (true, None) => fail!("{at}: a page with a continue token reports no remainingItemCount"),
        (true, Some(r)) => {
            let total = usize::try_from(r).unwrap_or(0) + list.items.len() + before;
            ensure!(
                total == TOTAL,
                "{at}: remainingItemCount {r} plus {} on this page plus {before} before adds up to {total}, expected {TOTAL}",
                list.items.len()
            );
            Ok(())
        }
        (false, None) => Ok(()),
    }
}
