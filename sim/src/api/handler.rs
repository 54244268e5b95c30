//! The HTTP app: authentication, then one dispatcher that routes every path.
//!
//! The main function is [`router`]. It needs no socket, so handler tests drive it with
//! `tower::ServiceExt::oneshot`.

use axum::Router;
use axum::body::to_bytes;
use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};

use super::auth;
use super::discovery;
use super::error::{ApiError, ApiResult};
use super::objects::{self, Query, json_response};
use super::openapi;
use super::portforward;
use super::proxy;
use super::route::{self, Route, Target};
use super::state::AppState;
use super::watch;

/// Largest request body accepted (upstream's limit is 3 MiB for objects; patches are smaller).
const MAX_BODY: usize = 8 * 1024 * 1024;

/// The app over `state`: every request authenticated by bearer token, then dispatched.
pub fn router(state: AppState) -> Router {
    Router::new()
        .fallback(dispatch)
        // Inside authentication, as upstream's priority-and-fairness and timeout filters are.
        .layer(middleware::from_fn_with_state(state.clone(), super::transient::inject))
        .layer(middleware::from_fn_with_state(state.clone(), authenticate))
        .with_state(state)
}

/// Upstream's filter chain before dispatch: authentication (a bearer token, else anonymous),
/// impersonation, then authorization of the request's attributes (403 with upstream's
/// message). The rest of the request runs with the user in [`auth::user::CURRENT`].
///
/// Upstream puts the anonymous authenticator last in a fail-on-error union: a request that
/// presents a bearer token the server does not know is 401, while one that presents none is
/// `system:anonymous` and left to RBAC.
async fn authenticate(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let header = req
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let mut user = match header.as_deref().and_then(bearer_token) {
        None => auth::UserInfo::anonymous(),
        Some(t) => match st.authenticate_token(t) {
            Some(u) => u,
            None => {
                tracing::debug!(path = %req.uri().path(), "invalid bearer token");
                return ApiError::unauthorized().into_response();
            }
        },
    };
    // `impersonation-ignored`: the headers never reach the filter, as behind a stripping proxy.
    let impersonation = if st.cfg.faults.is_on("impersonation-ignored") {
        None
    } else {
        auth::impersonate::impersonate(&st.store, &st.authz, &user, req.headers())
    };
    match impersonation {
        None => {}
        Some(Ok(as_user)) => user = as_user,
        Some(Err(e)) => return e.into_response(),
    }
    let q = route::query_map(req.uri().query());
    let mut attrs = auth::Attributes::from_request(req.method(), req.uri().path(), &q);
    // Upstream (AuthorizePodWebsocketUpgradeCreatePermission, on by default since 1.31)
    // requires `create` for exec, attach and port-forward even when they arrive as a GET.
    if attrs.resource_request
        && attrs.resource == "pods"
        && attrs.verb == "get"
        && matches!(attrs.subresource.as_str(), "exec" | "attach" | "portforward")
    {
        attrs.verb = "create".into();
    }
    let decision = st.authz.authorize(&st.store, &user, &attrs);
    if !decision.allowed {
        tracing::debug!(user = %user.name, verb = %attrs.verb, resource = %attrs.resource_and_sub(), namespace = %attrs.namespace, path = %attrs.path, "request forbidden");
        return auth::forbidden(&user, &attrs, &decision.reason).into_response();
    }
    auth::user::CURRENT.scope(user, next.run(req)).await
}

/// The token of an `Authorization` header as upstream's `bearertoken` authenticator reads it:
/// the second of at most three space-separated parts after a case-insensitive `Bearer`.
/// `None` (no bearer credential, so the request goes on to the anonymous authenticator) for
/// an absent header, another scheme, or an empty token.
fn bearer_token(header: &str) -> Option<&str> {
    let mut parts = header.trim().splitn(3, ' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

async fn dispatch(State(st): State<AppState>, req: Request) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let result = handle(st, req).await;
    match result {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(%method, %path, code = e.code, reason = %e.reason, message = %e.message, "request failed");
            e.into_response()
        }
    }
}

async fn handle(st: AppState, req: Request) -> ApiResult<Response> {
    let path = req.uri().path().to_string();
    let raw_query = req.uri().query().map(String::from);
    let mut q: Query = route::query_map(raw_query.as_deref());
    // `field-validation-ignored`: every write is decoded as with fieldValidation=Ignore.
    if st.cfg.faults.is_on("field-validation-ignored") {
        q.insert("fieldValidation".into(), "Ignore".into());
    }
    let method = req.method().clone();
    let headers = req.headers().clone();
    let get_only = |m: &Method| {
        if *m == Method::GET || *m == Method::HEAD {
            Ok(())
        } else {
            Err(ApiError::method_not_allowed(format!("{m} is not supported on {path}")))
        }
    };
    let defs = st.crds.all();
    // `group-undiscovered=GROUP`: discovery leaves the group out; its resources stay served.
    let hidden = st.cfg.faults.values("group-undiscovered");
    let shown: Vec<&'static crate::api::registry::ResourceDef> = defs
        .iter()
        .copied()
        .filter(|d| !hidden.iter().any(|g| g == d.group))
        .collect();
    // kube-aggregator sits in front of everything else: a group version an APIService hands
    // to a Service is proxied, and a group only such APIServices serve has its own document.
    if let ["apis", g, rest @ ..] = path.trim_matches('/').split('/').collect::<Vec<_>>().as_slice() {
        if let Some(v) = rest.first()
            && let Some(svc) = super::aggregator::serving(&st, g, v)
        {
            return Ok(super::aggregator::proxy::serve(&st, &svc, req).await);
        }
        if rest.is_empty()
            && !defs.iter().any(|d| d.group == *g)
            && let Some(mut doc) = super::aggregator::groups(&st).into_iter().find(|e| e["name"] == *g)
        {
            get_only(&method)?;
            doc["kind"] = "APIGroup".into();
            doc["apiVersion"] = "v1".into();
            return Ok(json_response(200, &doc, &[]));
        }
    }
    match route::parse_with(&path, &defs) {
        Route::Group(g) | Route::GroupVersion(g, _) if hidden.contains(&g) => Err(ApiError::no_route(&path)),
        Route::Version => {
            get_only(&method)?;
            let mut v = discovery::version();
            // `version-unstamped`: a build without the version ldflags (major and minor empty).
            if st.cfg.faults.is_on("version-unstamped") {
                v["major"] = "".into();
                v["minor"] = "".into();
                v["gitVersion"] = "v0.0.0-master+$Format:%H$".into();
            }
            Ok(json_response(200, &v, &[]))
        }
        Route::Health => Ok(([(axum::http::header::CONTENT_TYPE, "text/plain; charset=utf-8")], "ok").into_response()),
        Route::Api => {
            get_only(&method)?;
            Ok(discovery::root(&st, &shown, true, &headers))
        }
        Route::Apis => {
            get_only(&method)?;
            Ok(discovery::root(&st, &shown, false, &headers))
        }
        Route::Group(g) => Ok(json_response(200, &discovery::api_group_in(&defs, &g), &[])),
        Route::GroupVersion(g, v) => Ok(json_response(200, &discovery::resource_list_in(&defs, &g, &v), &[])),
        Route::OpenApiRoot => Ok(json_response(200, &openapi::index_in(&published(&st, &defs)), &[])),
        Route::OpenApiDoc(g, v) => {
            let published = published(&st, &defs);
            if !published.iter().any(|d| d.group == g && d.version == v) {
                return Err(ApiError::no_route(&path));
            }
            Ok(json_response(200, &openapi::document_in(&published, &g, &v), &[]))
        }
        Route::OpenId(doc) => super::openid::serve(&st, doc, &method, &path),
        Route::NotFound => Err(ApiError::no_route(&path)),
        Route::Resource(t) => {
            if matches!(t.sub.as_deref(), Some("exec" | "attach" | "portforward" | "proxy")) {
                super::webhook::subresource::connect(&st, &t, raw_query.as_deref()).await?;
            }
            match t.sub.as_deref() {
                Some("log") => return proxy::log(&st, &t, &q).await,
                Some("exec" | "attach") => return proxy::exec(&st, &t, raw_query.as_deref(), req).await,
                Some("portforward") => return portforward::serve(&st, &t, raw_query.as_deref(), req).await,
                Some("proxy") => return proxy::proxy(&st, &t, raw_query.as_deref(), req).await,
                _ => {}
            }
            let body = to_bytes(req.into_body(), MAX_BODY)
                .await
                .map_err(|e| ApiError::bad_request(format!("failed to read the request body: {e}")))?;
            let (resp, warnings) =
                super::webhook::collecting_warnings(resource(&st, &t, &method, &q, &headers, &body)).await;
            // Warnings admission webhooks returned, as upstream's warning recorder sends them,
            // on a refusal too.
            let mut resp = match resp {
                Err(e) if !warnings.is_empty() => {
                    tracing::debug!(code = e.code, reason = %e.reason, message = %e.message, "request refused");
                    e.into_response()
                }
                r => r?,
            };
            for w in warnings {
                if let Ok(h) = axum::http::HeaderValue::from_str(&format!("299 - {w:?}")) {
                    resp.headers_mut().append("Warning", h);
                }
            }
            // The deprecation filter warns on every request to a deprecated resource, as
            // upstream's `WithDeprecationWarning` does (kubectl prints it as `Warning: ...`).
            if let Some(w) = t.def.deprecation()
                && let Ok(h) = axum::http::HeaderValue::from_str(&format!("299 - {w:?}"))
            {
                resp.headers_mut().append("Warning", h);
            }
            Ok(resp)
        }
    }
}

/// The kinds the OpenAPI documents publish: every served one (`openapi-stale`: the built-in
/// ones only, as an OpenAPI controller that never learns of CRDs).
fn published(
    st: &AppState,
    defs: &[&'static super::registry::ResourceDef],
) -> Vec<&'static super::registry::ResourceDef> {
    let stale = st.cfg.faults.is_on("openapi-stale");
    defs.iter().copied().filter(|d| !stale || d.custom.is_none()).collect()
}

/// Whether a PATCH is a server-side apply (`application/apply-patch+yaml`).
fn is_apply(headers: &axum::http::HeaderMap) -> bool {
    matches!(super::patch::kind_of(headers), Ok(super::patch::PatchKind::Apply))
}

/// Upstream serves no strategic merge patch for custom resources: they have no Go struct
/// carrying patch strategies, so the patch handler accepts only the other three types.
fn refuse_strategic_for_custom(def: &super::registry::ResourceDef, headers: &axum::http::HeaderMap) -> ApiResult<()> {
    if def.custom.is_some() && matches!(super::patch::kind_of(headers), Ok(super::patch::PatchKind::Strategic)) {
        return Err(ApiError::unsupported_media_type(
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
        ));
    }
    Ok(())
}

/// Whether a request body is Kubernetes protobuf (`application/vnd.kubernetes.protobuf`).
fn is_protobuf(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .and_then(|ct| ct.split(';').next())
        .is_some_and(|ct| ct.trim() == "application/vnd.kubernetes.protobuf")
}

async fn resource(
    st: &AppState,
    t: &Target,
    method: &Method,
    q: &Query,
    headers: &axum::http::HeaderMap,
    body: &[u8],
) -> ApiResult<Response> {
    let def = t.def;
    let verb_ok = |verb: &str| {
        if def.allows(verb) {
            Ok(())
        } else {
            Err(ApiError::method_not_allowed(format!(
                "{verb} is not supported on resources of kind {:?}",
                def.plural
            )))
        }
    };
    let ns = t.namespace.clone().unwrap_or_default();
    // Bodies read as plain JSON below (DeleteOptions, Binding, Eviction, TokenRequest, Scale)
    // come as protobuf from typed clients (`kubectl drain`, `create token`, the scheduler
    // framework); create and update bodies are decoded by `fieldcheck` instead.
    let converted;
    let body = if is_protobuf(headers)
        && (*method == Method::DELETE
            || def.plural == "bindings"
            || matches!(t.sub.as_deref(), Some("scale" | "binding" | "eviction" | "token")))
    {
        converted = serde_json::to_vec(&super::protobuf::decode(body)?)
            .map_err(|e| ApiError::internal(format!("re-encoding a decoded body: {e}")))?;
        &converted[..]
    } else {
        body
    };
    match (t.sub.as_deref(), t.name.as_deref(), method) {
        (None, None, m) if *m == Method::GET => {
            verb_ok("list")?;
            if objects::is_watch(t, q) {
                verb_ok("watch")?;
                watch::serve(st, def, t.namespace.clone(), None, q, headers)
            } else {
                objects::list(st, t, q, headers)
            }
        }
        (None, Some(name), m) if *m == Method::GET => {
            verb_ok("get")?;
            if t.legacy_watch {
                watch::serve(st, def, t.namespace.clone(), Some(name.to_string()), q, headers)
            } else {
                objects::get(st, t, q, headers)
            }
        }
        (None, None, m) if *m == Method::POST => {
            if def.plural == "bindings" {
                let b: serde_json::Value =
                    serde_json::from_slice(body).map_err(|e| ApiError::bad_request(e.to_string()))?;
                let pod = b
                    .pointer("/metadata/name")
                    .and_then(|v| v.as_str())
                    .unwrap_or_default()
                    .to_string();
                return objects::bind(st, &ns, &pod, body);
            }
            objects::create(st, t, q, headers, body).await
        }
        (None, Some(_), m) if *m == Method::PUT => {
            verb_ok("update")?;
            objects::update(st, t, q, headers, body).await
        }
        (None, Some(_), m) if *m == Method::PATCH => {
            verb_ok("patch")?;
            refuse_strategic_for_custom(def, headers)?;
            if is_apply(headers) {
                // `apply-unsupported`: an API server without server-side apply knows no such patch.
                if st.cfg.faults.is_on("apply-unsupported") {
                    return Err(ApiError::unsupported_media_type(
                        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json",
                    ));
                }
                return objects::apply_patch(st, t, q, headers, body).await;
            }
            objects::patch_object(st, t, q, headers, body).await
        }
        (None, Some(_), m) if *m == Method::DELETE => {
            verb_ok("delete")?;
            objects::delete(st, t, q, body).await
        }
        (None, None, m) if *m == Method::DELETE => objects::delete_collection(st, t, q, body).await,
        (Some(sub), Some(name), m) => {
            if !def.has_sub(sub) {
                return Err(ApiError::no_route(&format!("{}/{name}/{sub}", def.plural)));
            }
            match (sub, m.as_str()) {
                ("status" | "approval" | "ephemeralcontainers", "GET") => objects::get(st, t, q, headers),
                ("status" | "approval" | "ephemeralcontainers", "PUT") => {
                    objects::update(st, t, q, headers, body).await
                }
                ("status" | "approval" | "ephemeralcontainers", "PATCH") if is_apply(headers) => {
                    objects::apply_patch(st, t, q, headers, body).await
                }
                ("status" | "approval" | "ephemeralcontainers", "PATCH") => {
                    refuse_strategic_for_custom(def, headers)?;
                    objects::patch_object(st, t, q, headers, body).await
                }
                ("scale", "GET" | "PUT" | "PATCH") => objects::scale(st, t, q, headers, m, body).await,
                ("binding", "POST") => {
                    let body = super::webhook::subresource::create(st, t, name, body, ("", "v1", "Binding")).await?;
                    objects::bind(st, &ns, name, &body)
                }
                ("eviction", "POST") => {
                    let body =
                        super::webhook::subresource::create(st, t, name, body, ("policy", "v1", "Eviction")).await?;
                    objects::evict(st, &ns, name, q, &body)
                }
                ("finalize", "PUT") => objects::update(st, t, q, headers, body).await,
                ("token", "POST") => objects::token_request(st, &ns, name, body),
                _ => Err(ApiError::method_not_allowed(format!(
                    "{m} is not supported on {}/{sub}",
                    def.plural
                ))),
            }
        }
        (_, _, m) => Err(ApiError::method_not_allowed(format!("{m} is not supported here"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::AddressBlock;
    use crate::api::state::StateConfig;
    use axum::body::Body;
    use serde_json::{Value, json};
    use tower::ServiceExt;

    /// The handler future must be Send for axum to accept it.
    fn _assert_send(st: AppState, req: Request) {
        fn s<T: Send>(_: T) {}
        s(handle(st, req));
    }

    fn app() -> (Router, String) {
        let st = AppState::new(StateConfig::new(AddressBlock(201)));
        let token = st.cfg.admin_token.clone();
        (router(st), token)
    }

    async fn call(app: &Router, token: &str, method: &str, uri: &str, body: Option<Value>) -> (u16, Value) {
        let mut req = Request::builder()
            .method(method)
            .uri(uri)
            .header("authorization", format!("Bearer {token}"));
        if body.is_some() {
            req = req.header("content-type", "application/json");
        }
        let req = req
            .body(Body::from(body.map(|b| b.to_string()).unwrap_or_default()))
            .unwrap();
        let resp = app.clone().oneshot(req).await.unwrap();
        let code = resp.status().as_u16();
        let bytes = to_bytes(resp.into_body(), usize::MAX).await.unwrap();
        (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }

    async fn anonymous(app: &Router, uri: &str) -> (u16, Value) {
        let resp = app
            .clone()
            .oneshot(Request::get(uri).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let code = resp.status().as_u16();
        let bytes = to_bytes(resp.into_body(), usize::MAX).await.unwrap();
        (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }

    #[tokio::test]
    async fn anonymous_requests_are_authorized_and_bad_tokens_get_a_401_status() {
        let (app, _) = app();
        assert_eq!(anonymous(&app, "/version").await.0, 200);
        assert_eq!(anonymous(&app, "/readyz").await.0, 200);
        let (code, body) = anonymous(&app, "/api/v1/pods").await;
        assert_eq!(code, 403);
        assert_eq!(
            body["message"],
            r#"pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" at the cluster scope"#
        );
        let (code, body) = anonymous(&app, "/apis").await;
        assert_eq!(
            (code, body["message"].as_str()),
            (
                403,
                Some(r#"forbidden: User "system:anonymous" cannot get path "/apis""#)
            )
        );
        let req = Request::get("/version")
            .header("authorization", "Bearer nope")
            .body(Body::empty())
            .unwrap();
        let resp = app.clone().oneshot(req).await.unwrap();
        assert_eq!(resp.status(), 401);
        let raw = to_bytes(resp.into_body(), usize::MAX).await.unwrap();
        // Byte for byte, in upstream's field order.
        assert_eq!(
            String::from_utf8_lossy(&raw),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#
        );
    }

    #[test]
    fn bearer_tokens_are_read_as_upstream_reads_them() {
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token("  bearer abc  "), Some("abc"));
        assert_eq!(bearer_token("Bearer abc extra"), Some("abc"));
        assert_eq!(bearer_token("Bearer "), None);
        assert_eq!(bearer_token("Bearer  abc"), None);
        assert_eq!(bearer_token("Basic dXNlcjpwdw=="), None);
        assert_eq!(bearer_token(""), None);
    }

    #[tokio::test]
    async fn create_get_list_and_errors() {
        let (app, t) = app();
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"x": "1"}});
        let (code, created) = call(
            &app,
            &t,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            Some(cm.clone()),
        )
        .await;
        assert_eq!(code, 201);
        assert_eq!(created["metadata"]["namespace"], "default");
        let (code, got) = call(&app, &t, "GET", "/api/v1/namespaces/default/configmaps/a", None).await;
        assert_eq!((code, got["data"]["x"].as_str()), (200, Some("1")));
        let (code, list) = call(&app, &t, "GET", "/api/v1/configmaps", None).await;
        assert_eq!((code, list["kind"].as_str()), (200, Some("ConfigMapList")));
        assert!(list["metadata"]["resourceVersion"].as_str().is_some());
        let (code, e) = call(
            &app,
            &t,
            "PUT",
            "/api/v1/namespaces/default/configmaps",
            Some(cm.clone()),
        )
        .await;
        assert_eq!((code, e["reason"].as_str()), (405, Some("MethodNotAllowed")));
        let req = Request::post("/api/v1/namespaces/default/configmaps")
            .header("authorization", format!("Bearer {t}"))
            .header("content-type", "application/json")
            .body(Body::from("{not json"))
            .unwrap();
        let resp = app.clone().oneshot(req).await.unwrap();
        assert_eq!(resp.status(), 400);
        let (code, e) = call(&app, &t, "GET", "/apis/apps/v1/namespaces/default/widgets", None).await;
        assert_eq!((code, e["reason"].as_str()), (404, Some("NotFound")));
        let wrong = json!({"apiVersion": "apps/v1", "kind": "ConfigMap", "metadata": {"name": "b"}});
        let (code, _) = call(&app, &t, "POST", "/api/v1/namespaces/default/configmaps", Some(wrong)).await;
        assert_eq!(code, 400);
    }

    #[tokio::test]
    async fn binding_assigns_once_and_access_reviews_allow() {
        let (app, t) = app();
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
        assert_eq!(
            call(&app, &t, "POST", "/api/v1/namespaces/default/pods", Some(pod))
                .await
                .0,
            201
        );
        let b = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n1"}});
        assert_eq!(
            call(
                &app,
                &t,
                "POST",
                "/api/v1/namespaces/default/pods/p/binding",
                Some(b.clone())
            )
            .await
            .0,
            201
        );
        let (_, p) = call(&app, &t, "GET", "/api/v1/namespaces/default/pods/p", None).await;
        assert_eq!(p["spec"]["nodeName"], "n1");
        assert_eq!(p["status"]["conditions"][0]["type"], "PodScheduled");
        let (code, e) = call(&app, &t, "POST", "/api/v1/namespaces/default/pods/p/binding", Some(b)).await;
        assert_eq!((code, e["reason"].as_str()), (409, Some("Conflict")));
        let review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": "create", "resource": "pods", "namespace": "default"}}});
        let (code, r) = call(
            &app,
            &t,
            "POST",
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            Some(review),
        )
        .await;
        assert_eq!((code, r["status"]["allowed"].as_bool()), (201, Some(true)));
    }
}
