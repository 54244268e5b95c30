//! `[sig-node] RuntimeClass should support RuntimeClasses API operations` (upstream
//! test/e2e/common/node/runtimeclass.go): the API walk over RuntimeClasses.

use std::collections::BTreeMap;

use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;

use super::walk::Walk;
use crate::case;
use crate::catalog::{Case, Kind};
use crate::framework::{CaseResult, Framework};

/// Upstream runtimeclass.go "should support RuntimeClasses API operations".
pub(crate) const RUNTIMECLASS_API: &str =
    "[sig-node] RuntimeClass should support RuntimeClasses API operations [Conformance]";

/// The cases of this module.
pub(super) fn cases() -> Vec<Case> {
    vec![case!(RUNTIMECLASS_API, Kind::Adapted, runtimeclass_api)]
}

/// Walks RuntimeClasses through discovery, create, get, list, watch, patch, update, delete and
/// delete a collection. The names carry the case namespace: RuntimeClasses are cluster-scoped
/// and both OS trials share one cluster.
async fn runtimeclass_api(f: &Framework) -> CaseResult {
    let walk = Walk::new(f.api_all::<RuntimeClass>(), format!("test={}", f.ns()));
    let classes = (1..=3)
        .map(|i| RuntimeClass {
            metadata: ObjectMeta {
                name: Some(format!("{}-runtimeclass{i}", f.ns())),
                labels: Some(BTreeMap::from([("test".to_string(), f.ns().to_string())])),
                ..Default::default()
            },
            handler: format!("e2e-handler{i}"),
            ..Default::default()
        })
        .collect();
    let first = walk.open(f, classes, 0).await?.name_any();
    walk.close(f, &first, 2).await
}
