//! Read-modify-write updates retried on conflict, as client-go's `retry.RetryOnConflict` does
//! for upstream's update steps.
//!
//! A PUT carries the resourceVersion it read, so it meets 409 Conflict when anything wrote the
//! object in between: a controller, or this very PUT, sent again by the retrying client after
//! its first answer was lost. Reading again and reapplying the change is what upstream does in
//! both cases.

use std::fmt::Debug;

use kube::api::PostParams;
use kube::{Api, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::CaseError;

/// Upstream `retry.DefaultRetry`'s step count.
const ATTEMPTS: u32 = 5;

/// Reads `name`, applies `change` to it and writes it back with a PUT, again from a fresh read
/// after each 409 Conflict; returns the server's answer to the PUT that succeeded.
///
/// # Errors
/// The read or write failed otherwise, or every attempt met a conflict.
pub async fn replace_retrying<K>(api: &Api<K>, name: &str, change: impl Fn(&mut K)) -> Result<K, CaseError>
where
    K: Resource + Clone + Debug + Serialize + DeserializeOwned,
{
    let mut attempt = 1;
    loop {
        let mut obj = api.get(name).await?;
        change(&mut obj);
        match api.replace(name, &PostParams::default(), &obj).await {
            Err(kube::Error::Api(s)) if s.code == 409 && attempt < ATTEMPTS => attempt += 1,
            other => return Ok(other?),
        }
    }
}
