//! Who is calling and what they may do: authentication (bearer tokens: the admin token,
//! ServiceAccount tokens from TokenRequest and from legacy token Secrets), impersonation, and
//! RBAC authorization of every request, as kube-apiserver's filter chain does it.
//!
//! Modules, one concept each:
//! - [`user`]: the authenticated identity and the task-local that carries it to handlers.
//! - [`tokens`]: issuing and checking bearer tokens (signed JWTs, looked up rather than
//!   verified by signature: the simulator is the only issuer).
//! - [`signing`]: the ServiceAccount signing key and the OIDC discovery and JWKS documents.
//! - [`attributes`]: upstream's `RequestInfoFactory`: the verb, resource, subresource, name and
//!   namespace a request asks for.
//! - [`rbac`]: rule matching and the per-user rule cache.
//! - [`policy`]: the bootstrap ClusterRoles, ClusterRoleBindings, Roles and RoleBindings.
//! - [`impersonate`]: the `Impersonate-*` headers.
//! - [`escalation`]: no granting of rights one does not hold (`escalate` and `bind` verbs).
//! - [`reviews`]: the access and token review resources answered from the above.
//! - [`validation`]: upstream's validation of Roles, ClusterRoles and bindings.

pub mod attributes;
pub mod controller_policy;
pub mod escalation;
pub mod impersonate;
pub mod policy;
pub mod rbac;
pub mod reviews;
pub mod signing;
pub mod tokens;
pub mod user;
pub mod validation;

pub use attributes::Attributes;
pub use user::UserInfo;

use serde_json::{Map, Value};

use super::error::ApiError;

/// Upstream's 403 for a refused request (responsewriters `Forbidden` over `forbiddenMessage`,
/// wrapped by `apierrors.NewForbidden`): `pods is forbidden: User "u" cannot list resource
/// "pods" in API group "" in the namespace "ns"`, with `: REASON` when the authorizer gave one.
pub fn forbidden(u: &UserInfo, a: &Attributes, reason: &str) -> ApiError {
    let what = if !a.resource_request {
        format!("User {:?} cannot {} path {:?}", u.name, a.verb, a.path)
    } else if !a.namespace.is_empty() {
        format!(
            "User {:?} cannot {} resource {:?} in API group {:?} in the namespace {:?}",
            u.name,
            a.verb,
            a.resource_and_sub(),
            a.group,
            a.namespace
        )
    } else {
        format!(
            "User {:?} cannot {} resource {:?} in API group {:?} at the cluster scope",
            u.name,
            a.verb,
            a.resource_and_sub(),
            a.group
        )
    };
    // Upstream escapes what could read as HTML.
    let what = what.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    let err = if reason.is_empty() {
        what
    } else {
        format!("{what}: {reason}")
    };
    let (group, resource) = if a.resource_request {
        (a.group.as_str(), a.resource.as_str())
    } else {
        ("", "")
    };
    let qualified = if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    };
    let message = if qualified.is_empty() {
        format!("forbidden: {err}")
    } else if a.name.is_empty() {
        format!("{qualified} is forbidden: {err}")
    } else {
        format!("{qualified} {:?} is forbidden: {err}", a.name)
    };
    // StatusDetails in upstream's field order, empty fields omitted.
    let mut details = Map::new();
    if a.resource_request && !a.name.is_empty() {
        details.insert("name".into(), Value::String(a.name.clone()));
    }
    if !group.is_empty() {
        details.insert("group".into(), Value::String(group.into()));
    }
    if !resource.is_empty() {
        details.insert("kind".into(), Value::String(resource.into()));
    }
    ApiError {
        code: 403,
        reason: "Forbidden".into(),
        message,
        details: Some(Value::Object(details)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forbidden_messages_match_upstream() {
        let u = UserInfo::service_account("ns", "sa", "x");
        let a = Attributes {
            verb: "create".into(),
            resource_request: true,
            resource: "pods".into(),
            namespace: "ns".into(),
            ..Attributes::default()
        };
        let e = forbidden(&u, &a, "");
        assert_eq!(
            e.message,
            r#"pods is forbidden: User "system:serviceaccount:ns:sa" cannot create resource "pods" in API group "" in the namespace "ns""#
        );
        assert_eq!(e.status()["details"], serde_json::json!({"kind": "pods"}));
        let a = Attributes {
            verb: "get".into(),
            resource_request: true,
            group: "apps".into(),
            resource: "deployments".into(),
            subresource: "scale".into(),
            name: "web".into(),
            ..Attributes::default()
        };
        assert_eq!(
            forbidden(&u, &a, "").message,
            r#"deployments.apps "web" is forbidden: User "system:serviceaccount:ns:sa" cannot get resource "deployments/scale" in API group "apps" at the cluster scope"#
        );
        let a = Attributes {
            verb: "get".into(),
            path: "/metrics".into(),
            ..Attributes::default()
        };
        assert_eq!(
            forbidden(&u, &a, "").message,
            r#"forbidden: User "system:serviceaccount:ns:sa" cannot get path "/metrics""#
        );
    }
}
