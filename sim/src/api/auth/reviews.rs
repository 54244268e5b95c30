//! The review resources, answered about the caller or a named subject from the live RBAC
//! state: SubjectAccessReview, LocalSubjectAccessReview, SelfSubjectAccessReview,
//! SelfSubjectRulesReview (authorization.k8s.io) and TokenReview, SelfSubjectReview
//! (authentication.k8s.io).
//!
//! The main function is [`answer`]; nothing here is stored.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::attributes::Attributes;
use super::user::{UserInfo, current};
use crate::api::error::{ApiError, ApiResult, Cause};
use crate::api::registry::ResourceDef;
use crate::api::state::AppState;

fn invalid(def: &ResourceDef, field: &str, value: &Value, why: &str) -> ApiError {
    ApiError::invalid(def.group, def.kind, "", vec![Cause::invalid(field, value, why)])
}

/// The attributes a review spec asks about, after upstream's spec validation.
fn spec_attributes(def: &ResourceDef, spec: &Value) -> ApiResult<Attributes> {
    let res = spec.get("resourceAttributes").filter(|v| !v.is_null());
    let non = spec.get("nonResourceAttributes").filter(|v| !v.is_null());
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    match (res, non) {
        (Some(_), Some(n)) => Err(invalid(
            def,
            "spec.nonResourceAttributes",
            n,
            "cannot be specified in combination with resourceAttributes",
        )),
        (None, None) => Err(invalid(
            def,
            "spec.resourceAttributes",
            &Value::Null,
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )),
        (Some(r), None) => Ok(Attributes {
            verb: s(r, "verb"),
            resource_request: true,
            group: s(r, "group"),
            version: s(r, "version"),
            resource: s(r, "resource"),
            subresource: s(r, "subresource"),
            namespace: s(r, "namespace"),
            name: s(r, "name"),
            path: String::new(),
        }),
        (None, Some(n)) => Ok(Attributes {
            verb: s(n, "verb"),
            path: s(n, "path"),
            ..Attributes::default()
        }),
    }
}

/// The user a SubjectAccessReview spec names.
fn spec_user(def: &ResourceDef, spec: &Value) -> ApiResult<UserInfo> {
    let name = spec.get("user").and_then(Value::as_str).unwrap_or_default().to_string();
    let groups: Vec<String> = spec
        .get("groups")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(String::from).collect())
        .unwrap_or_default();
    if name.is_empty() && groups.is_empty() {
        return Err(invalid(
            def,
            "spec.user",
            &json!(name),
            "at least one of user or group must be specified",
        ));
    }
    let extra: BTreeMap<String, Vec<String>> = spec
        .get("extra")
        .and_then(|e| serde_json::from_value(e.clone()).ok())
        .unwrap_or_default();
    Ok(UserInfo {
        name,
        uid: spec.get("uid").and_then(Value::as_str).unwrap_or_default().to_string(),
        groups,
        extra,
    })
}

fn caller() -> ApiResult<UserInfo> {
    current().ok_or_else(|| ApiError::internal("no user in the request context"))
}

fn access_status(st: &AppState, u: &UserInfo, a: &Attributes) -> Value {
    let d = st.authz.authorize(&st.store, u, a);
    let mut status = json!({"allowed": d.allowed});
    if !d.reason.is_empty() {
        status["reason"] = json!(&*d.reason);
    }
    status
}

/// Answers a review object `obj` (already decoded) for resource `def`.
pub fn answer(st: &AppState, def: &ResourceDef, mut obj: Value) -> ApiResult<Value> {
    crate::api::meta::meta_mut(&mut obj).insert("creationTimestamp".into(), Value::Null);
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    let status = match def.plural {
        "subjectaccessreviews" => {
            let a = spec_attributes(def, &spec)?;
            let u = spec_user(def, &spec)?;
            access_status(st, &u, &a)
        }
        "localsubjectaccessreviews" => {
            let ns = crate::api::meta::namespace(&obj).to_string();
            if spec.get("nonResourceAttributes").is_some_and(|v| !v.is_null()) {
                return Err(invalid(
                    def,
                    "spec.nonResourceAttributes",
                    &spec["nonResourceAttributes"],
                    "disallowed on this kind of request",
                ));
            }
            let a = spec_attributes(def, &spec)?;
            if a.namespace != ns {
                return Err(invalid(
                    def,
                    "spec.resourceAttributes.namespace",
                    &json!(a.namespace),
                    "must match metadata.namespace",
                ));
            }
            let u = spec_user(def, &spec)?;
            access_status(st, &u, &a)
        }
        "selfsubjectaccessreviews" => {
            let a = spec_attributes(def, &spec)?;
            access_status(st, &caller()?, &a)
        }
        "selfsubjectrulesreviews" => {
            let ns = spec.get("namespace").and_then(Value::as_str).unwrap_or_default();
            let (resource, non_resource) = st.authz.rules_review(&st.store, &caller()?, ns);
            json!({"resourceRules": resource, "nonResourceRules": non_resource, "incomplete": false})
        }
        "selfsubjectreviews" => json!({"userInfo": caller()?.to_json()}),
        "tokenreviews" => {
            let token = spec.get("token").and_then(Value::as_str).unwrap_or_default();
            let asked: Vec<String> = spec
                .get("audiences")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).map(String::from).collect())
                .filter(|a: &Vec<String>| !a.is_empty())
                .unwrap_or_else(|| vec![super::tokens::ISSUER.to_string()]);
            let user = if token.is_empty() {
                None
            } else if token == st.cfg.admin_token {
                Some((UserInfo::admin(), asked))
            } else {
                st.tokens.authenticate_for(&st.store, token, &asked)
            };
            match user {
                Some((u, audiences)) => json!({"authenticated": true, "user": u.to_json(), "audiences": audiences}),
                None => json!({"user": {}}),
            }
        }
        other => return Err(ApiError::method_not_allowed(format!("{other} cannot be created"))),
    };
    obj["status"] = status;
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::AddressBlock;
    use crate::api::registry::find;
    use crate::api::state::StateConfig;

    fn sar(spec: Value) -> Value {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "metadata": {}, "spec": spec})
    }

    #[test]
    fn subject_access_reviews_validate_and_answer_from_rbac() {
        let st = AppState::new(StateConfig::new(AddressBlock(202)));
        let def = find("authorization.k8s.io", "v1", "subjectaccessreviews").unwrap();
        let e = answer(
            &st,
            def,
            sar(json!({"resourceAttributes": {"verb": "get", "resource": "pods"}})),
        )
        .unwrap_err();
        assert_eq!(
            e.message,
            r#"SubjectAccessReview.authorization.k8s.io "" is invalid: spec.user: Invalid value: "": at least one of user or group must be specified"#
        );
        let e = answer(&st, def, sar(json!({"user": "u"}))).unwrap_err();
        assert!(
            e.message
                .contains("exactly one of nonResourceAttributes or resourceAttributes"),
            "{}",
            e.message
        );
        // kubeadm's admin group is bound to cluster-admin by the bootstrap policy.
        let ok = answer(
            &st,
            def,
            sar(json!({"user": "x", "groups": ["kubeadm:cluster-admins"],
                "resourceAttributes": {"verb": "delete", "resource": "nodes"}})),
        )
        .unwrap();
        assert_eq!(ok["status"]["allowed"], true);
        assert_eq!(
            ok["status"]["reason"],
            r#"RBAC: allowed by ClusterRoleBinding "kubeadm:cluster-admins" of ClusterRole "cluster-admin" to Group "kubeadm:cluster-admins""#
        );
        // Every authenticated user may read /version and discovery, nothing more.
        let basic = |attrs: Value| {
            answer(
                &st,
                def,
                sar(json!({"user": "x", "groups": ["system:authenticated"]}).merge(attrs)),
            )
            .unwrap()["status"]["allowed"]
                .clone()
        };
        assert_eq!(
            basic(json!({"nonResourceAttributes": {"verb": "get", "path": "/version"}})),
            true
        );
        assert_eq!(
            basic(json!({"nonResourceAttributes": {"verb": "get", "path": "/apis/apps"}})),
            true
        );
        assert_eq!(
            basic(json!({"nonResourceAttributes": {"verb": "get", "path": "/metrics"}})),
            false
        );
        assert_eq!(
            basic(json!({"resourceAttributes": {"verb": "list", "resource": "pods"}})),
            false
        );
    }

    #[tokio::test]
    async fn self_reviews_answer_about_the_caller() {
        let st = AppState::new(StateConfig::new(AddressBlock(203)));
        let ssr = find("authentication.k8s.io", "v1", "selfsubjectreviews").unwrap();
        let out = crate::api::auth::user::CURRENT
            .scope(UserInfo::admin(), async { answer(&st, ssr, json!({"metadata": {}})) })
            .await
            .unwrap();
        assert_eq!(out["status"]["userInfo"]["username"], "kubernetes-admin");
        let rules = find("authorization.k8s.io", "v1", "selfsubjectrulesreviews").unwrap();
        let u = UserInfo::service_account("ns", "sa", "x");
        let out = crate::api::auth::user::CURRENT
            .scope(u, async {
                answer(&st, rules, json!({"metadata": {}, "spec": {"namespace": "ns"}}))
            })
            .await
            .unwrap();
        let resources = out["status"]["resourceRules"].to_string();
        assert!(resources.contains("selfsubjectaccessreviews"), "{resources}");
        assert!(!resources.contains("\"pods\""), "{resources}");
        assert_eq!(out["status"]["incomplete"], false);
    }

    #[test]
    fn local_reviews_stay_in_their_namespace_and_token_reviews_authenticate() {
        let st = AppState::new(StateConfig::new(AddressBlock(204)));
        let lsar = find("authorization.k8s.io", "v1", "localsubjectaccessreviews").unwrap();
        let body = |ns: &str| {
            json!({"metadata": {"namespace": "a"}, "spec": {"user": "kubernetes-admin",
                "groups": ["kubeadm:cluster-admins"],
                "resourceAttributes": {"namespace": ns, "verb": "get", "resource": "pods"}}})
        };
        let e = answer(&st, lsar, body("b")).unwrap_err();
        assert!(
            e.message
                .contains("spec.resourceAttributes.namespace: Invalid value: \"b\": must match metadata.namespace"),
            "{}",
            e.message
        );
        assert_eq!(answer(&st, lsar, body("a")).unwrap()["status"]["allowed"], true);
        let tr = find("authentication.k8s.io", "v1", "tokenreviews").unwrap();
        let admin = st.cfg.admin_token.clone();
        let ok = answer(&st, tr, json!({"metadata": {}, "spec": {"token": admin}})).unwrap();
        assert_eq!(ok["status"]["authenticated"], true);
        assert_eq!(ok["status"]["user"]["username"], "kubernetes-admin");
        let bad = answer(&st, tr, json!({"metadata": {}, "spec": {"token": "nope"}})).unwrap();
        assert_eq!(bad["status"], json!({"user": {}}));
    }

    /// `a` with the keys of `b` added.
    trait Merge {
        fn merge(self, b: Value) -> Value;
    }
    impl Merge for Value {
        fn merge(mut self, b: Value) -> Value {
            if let (Some(a), Value::Object(b)) = (self.as_object_mut(), b) {
                a.extend(b);
            }
            self
        }
    }
}
