//! Webhooks for requests that are not writes of the resource's own objects: POSTs to a
//! subresource that create another kind (`pods/binding`, `pods/eviction`), and CONNECTs
//! (exec, attach, port-forward, proxy), which webhooks see as the options object upstream
//! decodes from the query.

use serde_json::json;

use super::{Attributes, Operation};
use crate::api::error::{ApiError, ApiResult};
use crate::api::route::Target;
use crate::api::state::AppState;

/// Admission webhooks for a POST to a subresource that creates something other than the
/// resource's own kind (`pods/binding`, `pods/eviction`): a CREATE of that kind, whose body
/// mutating webhooks may patch.
pub async fn create(
    st: &AppState,
    t: &Target,
    name: &str,
    body: &[u8],
    kind: (&'static str, &'static str, &'static str),
) -> ApiResult<Vec<u8>> {
    // A body that is not JSON is left for the subresource's handler to refuse in its words.
    let Ok(mut obj) = serde_json::from_slice::<serde_json::Value>(body) else {
        return Ok(body.to_vec());
    };
    let mut attrs = Attributes::new(
        t.def,
        Operation::Create,
        t.namespace.as_deref().unwrap_or_default(),
        name,
    );
    attrs.sub = t.sub.clone().unwrap_or_default();
    attrs.sub_kind = Some(kind);
    super::mutate(st, &attrs, Some(&mut obj)).await?;
    super::validate(st, &attrs, Some(&obj)).await?;
    serde_json::to_vec(&obj).map_err(|e| ApiError::internal(format!("re-encoding the body: {e}")))
}

/// Admission webhooks for a CONNECT (exec, attach, port-forward, proxy): the options object
/// upstream decodes from the query (`PodExecOptions`, `PodAttachOptions`...) is what they see.
pub async fn connect(st: &AppState, t: &Target, raw_query: Option<&str>) -> ApiResult<()> {
    // `webhooks-skip-connect`: an API server that offers webhooks writes only.
    if st.cfg.faults.is_on("webhooks-skip-connect") {
        return Ok(());
    }
    let sub = t.sub.clone().unwrap_or_default();
    let pairs: Vec<(String, String)> = form_urlencoded::parse(raw_query.unwrap_or_default().as_bytes())
        .into_owned()
        .collect();
    let one = |k: &str| pairs.iter().rev().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let flag = |k: &str| one(k).is_some_and(|v| v == "true" || v == "1");
    let mut options = match sub.as_str() {
        "exec" | "attach" => {
            let mut o = json!({"stdin": flag("stdin"), "stdout": flag("stdout"), "stderr": flag("stderr"),
                "tty": flag("tty"), "container": one("container").unwrap_or_default()});
            if sub == "exec" {
                let command: Vec<&String> = pairs.iter().filter(|(n, _)| n == "command").map(|(_, v)| v).collect();
                o["command"] = json!(command);
            }
            o
        }
        "portforward" => {
            let ports: Vec<u64> = pairs
                .iter()
                .filter(|(n, _)| n == "ports")
                .filter_map(|(_, v)| v.parse().ok())
                .collect();
            json!({"ports": ports})
        }
        _ => json!({"path": t.rest}),
    };
    let kind = match (sub.as_str(), t.def.plural) {
        ("exec", _) => "PodExecOptions",
        ("attach", _) => "PodAttachOptions",
        ("portforward", _) => "PodPortForwardOptions",
        (_, "services") => "ServiceProxyOptions",
        (_, "nodes") => "NodeProxyOptions",
        _ => "PodProxyOptions",
    };
    options["kind"] = json!(kind);
    options["apiVersion"] = json!("v1");
    let name = t.name.clone().unwrap_or_default();
    let mut attrs = Attributes::new(
        t.def,
        Operation::Connect,
        t.namespace.as_deref().unwrap_or_default(),
        &name,
    );
    attrs.sub = sub;
    attrs.sub_kind = Some(("", "v1", kind));
    super::mutate(st, &attrs, Some(&mut options)).await?;
    super::validate(st, &attrs, Some(&options)).await
}
