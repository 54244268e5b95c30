//! The `Impersonate-*` headers, as upstream's impersonation filter
//! (k8s.io/apiserver endpoints/filters/impersonation.go) handles them: each requested identity
//! part is authorised with the `impersonate` verb, then the request runs as the new user.
//!
//! The main function is [`impersonate`].

use std::collections::BTreeMap;

use axum::http::HeaderMap;

use super::attributes::Attributes;
use super::rbac::Authorizer;
use super::user::{ALL_AUTHENTICATED, UserInfo, sa_groups, split_sa_user};
use crate::api::error::ApiError;
use crate::api::store::Store;

const USER: &str = "impersonate-user";
const UID: &str = "impersonate-uid";
const GROUP: &str = "impersonate-group";
const EXTRA_PREFIX: &str = "impersonate-extra-";

/// The user to run the request as: `None` without impersonation headers, the impersonated
/// user when every part is allowed, a 403 naming the first refused part, or (groups, extra
/// or uid without a user) upstream's 500.
pub fn impersonate(
    store: &Store,
    authz: &Authorizer,
    requester: &UserInfo,
    headers: &HeaderMap,
) -> Option<Result<UserInfo, ApiError>> {
    let values = |name: &str| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(String::from)
            .collect()
    };
    let user = values(USER).into_iter().next();
    let uid = values(UID).into_iter().next();
    let groups = values(GROUP);
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, v) in headers {
        if let Some(key) = name.as_str().strip_prefix(EXTRA_PREFIX)
            && let Ok(v) = v.to_str()
        {
            let key = percent_encoding::percent_decode_str(key)
                .decode_utf8_lossy()
                .into_owned();
            extra.entry(key).or_default().push(v.to_string());
        }
    }
    if user.is_none() && uid.is_none() && groups.is_empty() && extra.is_empty() {
        return None;
    }
    let Some(username) = user else {
        return Some(Err(ApiError::internal(
            "requested impersonation of groups, extra or uid without impersonating a user",
        )));
    };
    // The parts to authorise, in upstream's order: the user (or ServiceAccount), groups,
    // extra values, uid.
    let mut checks: Vec<Attributes> = Vec::new();
    let sa = split_sa_user(&username).map(|(ns, n)| (ns.to_string(), n.to_string()));
    checks.push(match &sa {
        Some((ns, name)) => attrs("", "serviceaccounts", "", ns, name),
        None => attrs("", "users", "", "", &username),
    });
    for g in &groups {
        checks.push(attrs("", "groups", "", "", g));
    }
    for (k, vs) in &extra {
        for v in vs {
            checks.push(attrs("authentication.k8s.io", "userextras", k, "", v));
        }
    }
    if let Some(u) = &uid {
        checks.push(attrs("authentication.k8s.io", "uids", "", "", u));
    }
    for a in &checks {
        let d = authz.authorize(store, requester, a);
        if !d.allowed {
            tracing::debug!(requester = %requester.name, verb = %a.verb, resource = %a.resource, name = %a.name, "impersonation refused");
            return Some(Err(super::forbidden(requester, a, &d.reason)));
        }
    }
    let mut groups = groups;
    if let Some((ns, _)) = &sa
        && groups.is_empty()
    {
        groups = sa_groups(ns, false);
    }
    if username != "system:anonymous" && !groups.iter().any(|g| g == ALL_AUTHENTICATED) {
        groups.push(ALL_AUTHENTICATED.into());
    }
    Some(Ok(UserInfo {
        name: username,
        uid: uid.unwrap_or_default(),
        groups,
        extra,
    }))
}

fn attrs(group: &str, resource: &str, sub: &str, ns: &str, name: &str) -> Attributes {
    Attributes {
        verb: "impersonate".into(),
        resource_request: true,
        group: group.into(),
        resource: resource.into(),
        subresource: sub.into(),
        namespace: ns.into(),
        name: name.into(),
        ..Attributes::default()
    }
}
