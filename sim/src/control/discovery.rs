//! Discovery as the garbage collector and the namespace controller use it: every group's
//! preferred version and its resources, tolerating groups whose discovery fails.
//!
//! Why partial: client-go's `ServerPreferredResources` returns what it could read together with
//! an `ErrGroupDiscoveryFailed` naming the group versions it could not (an aggregated API whose
//! backend is down answers 503). Upstream's controllers go on with the partial list — the
//! namespace controller still empties namespaces of every kind it found, and only holds back
//! the finalize step (its `NamespaceDeletionDiscoveryFailure` condition says why). Treating any
//! failure as "no resources at all" would stop content deletion everywhere.

use std::collections::BTreeMap;

use kube::core::GroupVersion;
use kube::discovery::{self, ApiCapabilities, ApiResource, Discovery};

use super::error::{Error, Result};
use super::plane::Ctx;

/// What discovery found.
#[derive(Debug, Default)]
pub(crate) struct Served {
    /// Each served resource at its group's preferred version.
    pub(crate) resources: Vec<(ApiResource, ApiCapabilities)>,
    /// Group versions whose discovery failed, with why (`wardle.example.com/v1alpha1` → the
    /// API's message).
    pub(crate) failed: BTreeMap<String, String>,
}

impl Served {
    /// client-go's `ErrGroupDiscoveryFailed` text, when a group failed.
    pub(crate) fn failure_text(&self) -> Option<String> {
        if self.failed.is_empty() {
            return None;
        }
        let groups: Vec<String> = self.failed.iter().map(|(gv, why)| format!("{gv}: {why}")).collect();
        Some(format!(
            "unable to retrieve the complete list of server APIs: {}",
            groups.join(", ")
        ))
    }
}

/// How an API error reads in client-go's messages: the Status message for an API answer.
fn render(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        other => other.to_string(),
    }
}

impl Ctx {
    /// Every resource the API serves (each group's preferred version) with what it supports.
    /// A group whose discovery fails is left out and named in [`Served::failed`].
    ///
    /// # Errors
    /// When the group list itself (`/api`, `/apis`) cannot be read: then nothing is known.
    pub(crate) async fn served_resources(&self) -> Result<Served> {
        // The common case, in one go.
        if let Ok(all) = Discovery::new(self.client.clone()).run().await {
            return Ok(Served {
                resources: all.groups().flat_map(|g| g.recommended_resources()).collect(),
                failed: BTreeMap::new(),
            });
        }
        // Some group failed: ask each group on its own to learn which.
        let mut served = Served::default();
        let core = discovery::group(&self.client, "").await.map_err(Error::Discovery)?;
        served.resources.extend(core.recommended_resources());
        let groups = self.client.list_api_groups().await.map_err(Error::Discovery)?;
        for g in groups.groups {
            let Some(preferred) = g
                .preferred_version
                .as_ref()
                .or(g.versions.first())
                .map(|v| v.group_version.clone())
            else {
                continue;
            };
            let gv: GroupVersion = match preferred.parse() {
                Ok(gv) => gv,
                Err(e) => {
                    served.failed.insert(preferred, format!("{e}"));
                    continue;
                }
            };
            match discovery::pinned_group(&self.client, &gv).await {
                Ok(group) => served.resources.extend(group.recommended_resources()),
                Err(e) => {
                    served.failed.insert(preferred, render(&e));
                }
            }
        }
        Ok(served)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_failure_text_is_client_gos() {
        let mut s = Served::default();
        assert_eq!(s.failure_text(), None);
        s.failed.insert(
            "wardle.example.com/v1alpha1".into(),
            "the server is currently unable to handle the request".into(),
        );
        assert_eq!(
            s.failure_text().unwrap(),
            "unable to retrieve the complete list of server APIs: wardle.example.com/v1alpha1: the server is \
             currently unable to handle the request"
        );
    }
}
