//! Bound ServiceAccount tokens for projected `serviceAccountToken` sources, as the kubelet's
//! token manager gets them: a TokenRequest for the pod's ServiceAccount, bound to the pod,
//! reused until 80% of its lifetime has passed and then requested again (the file rotates on
//! the next volume sync), so a long-running pod always holds a valid token without the
//! kubelet asking for one on every sync.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ServiceAccount, ServiceAccountTokenProjection};
use kube::Api;
use kube::api::PostParams;

use super::VolumeError;
use super::volumes::FieldSource;

/// `(pod uid, serviceaccount, audience, seconds)`.
type Key = (String, String, String, i64);

/// A token and when to request a new one.
type Held = (Vec<u8>, Instant);

/// Tokens in use, by what they were requested for.
static CACHE: LazyLock<Mutex<HashMap<Key, Held>>> = LazyLock::new(Mutex::default);

/// The token for `source` in the pod `fields` describes.
pub(super) async fn token(
    client: &kube::Client,
    ns: &str,
    volume: &str,
    source: &ServiceAccountTokenProjection,
    fields: &dyn FieldSource,
) -> Result<Vec<u8>, VolumeError> {
    let pod = fields.field("metadata.name").unwrap_or_default();
    let uid = fields.field("metadata.uid").unwrap_or_default();
    let sa = fields
        .field("spec.serviceAccountName")
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "default".into());
    let secs = source.expiration_seconds.unwrap_or(3600);
    let audience = source.audience.clone().unwrap_or_default();
    let key = (uid.clone(), sa.clone(), audience.clone(), secs);
    let now = Instant::now();
    {
        let cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((tok, refresh)) = cache.get(&key)
            && *refresh > now
        {
            return Ok(tok.clone());
        }
    }
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: if audience.is_empty() {
                Vec::new()
            } else {
                vec![audience]
            },
            expiration_seconds: Some(secs),
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some(pod),
                uid: Some(uid),
            }),
        },
        ..TokenRequest::default()
    };
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    // The kubelet's volume manager retries a failed mount on every sync until the token is
    // issued; a 5xx, 429 or lost connection is tried again here (about 6 s in all) rather than
    // starting the pod without its token.
    let mut delay = Duration::from_millis(200);
    let mut attempt = 0;
    let answer: TokenRequest = loop {
        attempt += 1;
        match api
            .create_subresource("token", &sa, &PostParams::default(), &request)
            .await
        {
            Ok(answer) => break answer,
            Err(e) if attempt < 6 && transient(&e) => {
                tracing::debug!(serviceaccount = %sa, error = %e, "token request failed; retrying");
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
            Err(source) => {
                return Err(VolumeError::Api {
                    volume: volume.into(),
                    what: format!("token for serviceaccount {sa}"),
                    source,
                });
            }
        }
    };
    let tok = answer.status.map(|s| s.token).unwrap_or_default().into_bytes();
    // Refresh after 80% of the lifetime, as the kubelet's token manager does.
    let refresh = now + Duration::from_secs((secs.max(1) as u64) * 8 / 10);
    let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    cache.retain(|_, (_, r)| *r + Duration::from_secs(secs.max(1) as u64) > now);
    cache.insert(key, (tok.clone(), refresh));
    Ok(tok)
}

/// Whether a failed TokenRequest may succeed when sent again (server trouble, not a refusal).
fn transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code == 429 || s.code >= 500,
        _ => true,
    }
}
