//! Dynamic admission webhooks (`admissionregistration.k8s.io/v1`), as kube-apiserver 1.33
//! runs them: the `MutatingAdmissionWebhook` plugin last among the mutating plugins, the
//! `ValidatingAdmissionWebhook` plugin after object validation, both reading the stored
//! configurations on every request (upstream reads an informer cache; the store is this
//! server's cache).
//!
//! The main functions are [`mutate`] and [`validate`], which the write paths in
//! [`super::objects`] and the subresource handlers call with the request's [`Attributes`].
//!
//! Split by concept: `config` holds the two configuration kinds' defaults and validation,
//! `matching` which webhooks a request goes to, `call` the HTTPS call and the AdmissionReview
//! it carries, `mutate` the mutating chain (patches, reinvocation), `subresource` the
//! subresource creates and CONNECTs. This file keeps the validating dispatch, the error texts
//! shared by both, and the warnings webhooks return.
//!
//! Deliberately not modelled: audit annotations (there is no audit log), and the built-in
//! plugins' reinvocation (only webhooks are reinvoked).

use std::borrow::Cow;
use std::cell::RefCell;

use serde_json::{Value, json};

use super::auth::UserInfo;
use super::error::ApiError;
use super::registry::ResourceDef;
use super::state::AppState;

pub mod call;
pub mod config;
pub mod matching;
mod mutate;
pub mod subresource;

pub use mutate::mutate;

/// The operation of an admission request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// A new object (POST, and apply that creates).
    Create,
    /// A write to an existing object or its subresource.
    Update,
    /// A deletion (each object of a deletecollection too).
    Delete,
    /// exec, attach, port-forward and proxy.
    Connect,
}

/// What a webhook is told about a request (upstream's `admission.Attributes`).
#[derive(Debug, Clone)]
pub struct Attributes {
    /// The resource the request was made through.
    pub def: &'static ResourceDef,
    /// The subresource, empty for the main resource.
    pub sub: String,
    /// The kind of a subresource whose objects are not the resource's kind (`Eviction` for
    /// `pods/eviction`): group, version, kind.
    pub sub_kind: Option<(&'static str, &'static str, &'static str)>,
    /// The operation.
    pub op: Operation,
    /// The namespace, empty for cluster-scoped resources.
    pub namespace: String,
    /// The object's name (empty for a create with `generateName`).
    pub name: String,
    /// The stored object, for updates and deletes.
    pub old: Option<Value>,
    /// Whether the request is a dry run.
    pub dry_run: bool,
    /// The request's options object (`CreateOptions`, `UpdateOptions`, `DeleteOptions`...).
    pub options: Value,
    /// The caller.
    pub user: UserInfo,
}

impl Attributes {
    /// Attributes of a request by the current caller.
    pub fn new(def: &'static ResourceDef, op: Operation, namespace: &str, name: &str) -> Self {
        let options_kind = match op {
            Operation::Create => "CreateOptions",
            Operation::Update => "UpdateOptions",
            Operation::Delete => "DeleteOptions",
            Operation::Connect => "",
        };
        Self {
            def,
            sub: String::new(),
            sub_kind: None,
            op,
            namespace: namespace.to_string(),
            name: name.to_string(),
            old: None,
            dry_run: false,
            options: if options_kind.is_empty() {
                Value::Null
            } else {
                json!({"kind": options_kind, "apiVersion": "meta.k8s.io/v1"})
            },
            user: super::auth::user::current().unwrap_or_default(),
        }
    }
}

impl Attributes {
    /// The `kind` a webhook matching `def` is told (the subresource's own kind, if it has
    /// one), and the request's `requestKind`.
    pub fn kinds(&self, def: &ResourceDef) -> (Value, Value) {
        let of = |d: &ResourceDef| match self.sub_kind {
            Some((g, v, k)) => json!({"group": g, "version": v, "kind": k}),
            None => json!({"group": d.group, "version": d.version, "kind": d.kind}),
        };
        (of(def), of(self.def))
    }
}

/// `pods` or `deployments.apps`, as upstream names a resource in messages.
fn qualified(def: &ResourceDef) -> String {
    if def.group.is_empty() {
        def.plural.to_string()
    } else {
        format!("{}.{}", def.plural, def.group)
    }
}

/// Whether the webhooks never see requests on `def`: upstream exempts the admission
/// configuration kinds themselves (`rules.IsExemptAdmissionConfigurationResource`), so a
/// broken webhook can always be removed. The `webhook-configurations-not-exempt` fault offers
/// them like any other kind; `webhooks-skip-custom-resources` and `webhooks-skip-crds` model an
/// API server whose custom-resource handler, or CRD registry, has no webhook admission wired.
fn exempt(st: &AppState, def: &ResourceDef) -> bool {
    let faults = &st.cfg.faults;
    (def.group == config::GROUP && !faults.is_on("webhook-configurations-not-exempt"))
        || (def.custom.is_some() && faults.is_on("webhooks-skip-custom-resources"))
        || (def.group == super::crd::GROUP
            && def.plural == "customresourcedefinitions"
            && faults.is_on("webhooks-skip-crds"))
}

/// The webhooks of every configuration of `plural`, configurations in name order (as
/// upstream's configuration manager sorts them), webhooks in their listed order.
fn hooks(st: &AppState, plural: &str) -> Vec<Value> {
    let (mut configs, _) = st.store.list(&format!("{}/{plural}", config::GROUP), None);
    configs.sort_by(|a, b| super::meta::name(a).cmp(super::meta::name(b)));
    configs
        .into_iter()
        .flat_map(|c| c.get("webhooks").and_then(Value::as_array).cloned().unwrap_or_default())
        .collect()
}

fn hook_name(hook: &Value) -> &str {
    hook.get("name").and_then(Value::as_str).unwrap_or_default()
}

fn ignores_failures(hook: &Value) -> bool {
    hook.get("failurePolicy").and_then(Value::as_str) == Some("Ignore")
}

/// A dry-run request reaches only webhooks that declare no side effects; any other webhook
/// refuses it with upstream's 400, whatever its failure policy.
fn dry_run_allowed(hook: &Value, attrs: &Attributes) -> Result<(), ApiError> {
    if !attrs.dry_run {
        return Ok(());
    }
    match hook.get("sideEffects").and_then(Value::as_str) {
        Some("None" | "NoneOnDryRun") => Ok(()),
        _ => Err(ApiError::bad_request(format!(
            "admission webhook {:?} does not support dry run",
            hook_name(hook)
        ))),
    }
}

/// `apierrors.NewInternalError(err)`: 500 with the error as the only cause.
fn internal(text: String) -> ApiError {
    let mut e = ApiError::internal(format!("Internal error occurred: {text}"));
    e.details = Some(json!({"causes": [{"message": text}]}));
    e
}

/// A call that failed under `failurePolicy: Fail` (upstream's `ErrCallingWebhook`, failing
/// closed).
fn failed_call(hook: &Value, e: &call::CallError) -> ApiError {
    internal(format!("failed calling webhook {:?}: {e}", hook_name(hook)))
}

/// The webhook's refusal: its own Status, sanitized as upstream's `ToStatusErr` does (a code
/// below 400 becomes 400, `Failure` status) with the message
/// `admission webhook "NAME" denied the request: MESSAGE` (or its reason, or "without
/// explanation").
fn rejection(hook: &Value, status: Option<&Value>) -> ApiError {
    let status = status.cloned().unwrap_or_else(|| json!({}));
    let denied = format!("admission webhook {:?} denied the request", hook_name(hook));
    let text = |k: &str| status.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    let (message, reason) = (text("message"), text("reason"));
    let message = if !message.is_empty() {
        format!("{denied}: {message}")
    } else if !reason.is_empty() {
        format!("{denied}: {reason}")
    } else {
        format!("{denied} without explanation")
    };
    let code = status
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| *c >= 400)
        .unwrap_or(400);
    let mut e = ApiError::bad_request(message);
    e.code = code;
    e.reason = Cow::Owned(reason);
    e.details = status.get("details").filter(|d| d.is_object()).cloned();
    e
}

tokio::task_local! {
    /// Warnings the webhooks of the request being served returned (sent as `Warning` headers).
    static WARNINGS: RefCell<Vec<String>>;
}

/// Runs `fut` collecting the warnings webhooks return while it runs.
pub async fn collecting_warnings<F: std::future::Future>(fut: F) -> (F::Output, Vec<String>) {
    WARNINGS
        .scope(RefCell::new(Vec::new()), async move {
            let out = fut.await;
            let warnings = WARNINGS.with(|w| std::mem::take(&mut *w.borrow_mut()));
            (out, warnings)
        })
        .await
}

/// Adds one warning to the request being served (a policy's Warn action).
pub(crate) fn add_warning(w: String) {
    add_warnings(vec![w]);
}

fn add_warnings(ws: Vec<String>) {
    if ws.is_empty() {
        return;
    }
    // Outside a request (an in-process write) there is no one to tell.
    if WARNINGS
        .try_with(|w| w.borrow_mut().extend(ws.iter().cloned()))
        .is_err()
    {
        tracing::debug!(warnings = ?ws, "webhook warnings outside a request");
    }
}

/// The validating webhooks' verdict on the request (`obj` absent for deletes), called after
/// the object passed validation. Matching webhooks are called in parallel, as upstream does;
/// the first refusal in configuration order is the answer.
pub async fn validate(st: &AppState, attrs: &Attributes, obj: Option<&Value>) -> Result<(), ApiError> {
    // The ValidatingAdmissionPolicy plugin comes before this one in upstream's order.
    super::vap::validate(st, attrs, obj)?;
    if exempt(st, attrs.def) || super::admission::plugin_off(st, "ValidatingAdmissionWebhook") {
        return Ok(());
    }
    let mut chosen = Vec::new();
    for hook in hooks(st, "validatingwebhookconfigurations") {
        if let Some(inv) = matching::should_call(st, &hook, attrs, obj)? {
            chosen.push((hook, inv));
        }
    }
    if chosen.is_empty() {
        return Ok(());
    }
    let calls = chosen.iter().map(|(hook, inv)| async move {
        dry_run_allowed(hook, attrs)?;
        let answer = match call::review_version(hook) {
            Ok(version) => {
                let review = call::review(attrs, inv.def, version, &super::meta::new_uid(), obj);
                call::call(st, hook, &review, false).await
            }
            Err(e) => Err(e),
        };
        match answer {
            Err(e) if ignores_failures(hook) => {
                tracing::warn!(webhook = hook_name(hook), error = %e, "failed calling webhook, failing open");
                Ok(())
            }
            Err(e) => Err(failed_call(hook, &e)),
            Ok(answer) => {
                add_warnings(answer.warnings);
                if answer.allowed {
                    Ok(())
                } else {
                    Err(rejection(hook, answer.status.as_ref()))
                }
            }
        }
    });
    let results = futures::future::join_all(calls).await;
    results.into_iter().collect::<Result<Vec<()>, ApiError>>().map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::AddressBlock;
    use crate::api::registry::find;
    use crate::api::state::StateConfig;

    fn state(faults: &str) -> AppState {
        let mut cfg = StateConfig::new(AddressBlock(205));
        cfg.faults = std::sync::Arc::new(crate::faults::Faults::parse(faults).expect("fault spec"));
        AppState::new(cfg)
    }

    #[test]
    fn webhook_configurations_are_exempt_unless_the_fault_says_otherwise() {
        let vwc = find(config::GROUP, "v1", "validatingwebhookconfigurations").expect("served");
        let mwc = find(config::GROUP, "v1", "mutatingwebhookconfigurations").expect("served");
        let crds = find(crate::api::crd::GROUP, "v1", "customresourcedefinitions").expect("served");
        let healthy = state("");
        assert!(exempt(&healthy, vwc) && exempt(&healthy, mwc));
        assert!(!exempt(&healthy, crds), "CRD writes reach webhooks");
        let broken = state("webhook-configurations-not-exempt,webhooks-skip-crds");
        assert!(!exempt(&broken, vwc) && !exempt(&broken, mwc));
        assert!(exempt(&broken, crds));
    }

    #[test]
    fn rejections_read_as_upstreams() {
        let hook = json!({"name": "deny.example.com"});
        let e = rejection(
            &hook,
            Some(&json!({"reason": "the configmap contains unwanted key and value"})),
        );
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                400,
                "admission webhook \"deny.example.com\" denied the request: the configmap contains unwanted key and value"
            )
        );
        let e = rejection(
            &hook,
            Some(&json!({"message": "no", "code": 403, "reason": "Forbidden"})),
        );
        assert_eq!((e.code, &*e.reason), (403, "Forbidden"));
        let e = rejection(&hook, None);
        assert_eq!(
            e.message,
            "admission webhook \"deny.example.com\" denied the request without explanation"
        );
    }
}
