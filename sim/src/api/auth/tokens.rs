//! Bearer tokens: the admin token, tokens the server issued (TokenRequest, component tokens),
//! and legacy `kubernetes.io/service-account-token` Secrets.
//!
//! The main structure is [`Tokens`]. ServiceAccount tokens are upstream's JWTs, signed with
//! the cluster's [`SigningKey`] (ES256) so relying parties can verify them against the
//! published JWKS (`/openid/v1/jwks`). The API server itself checks them by lookup rather than
//! by signature: the simulator is the only issuer, so a lookup is exact and cheap.
//! As upstream's authenticator does, a ServiceAccount token stops working when its
//! ServiceAccount (or the pod it is bound to) is deleted or replaced by one with another uid.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};

use super::signing::{SigningError, SigningKey};
use super::user::{UserInfo, sa_user_name};
use crate::api::store::Store;

/// The issuer of bound tokens (kube-apiserver's default `--service-account-issuer` on kind).
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// The issuer claim of legacy Secret-based tokens.
pub const LEGACY_ISSUER: &str = "kubernetes/serviceaccount";
/// How many issued tokens make issuing sweep out the expired ones (then at every power of two).
const SWEEP_AT: usize = 1024;
/// The extra key upstream sets to the token's `jti` (`JTI=...`).
pub const CREDENTIAL_ID: &str = "authentication.kubernetes.io/credential-id";

/// What a bound ServiceAccount token names.
#[derive(Debug, Clone)]
struct Bound {
    namespace: String,
    name: String,
    uid: String,
    /// `(name, uid)` of the pod the token is bound to (projected volume tokens).
    pod: Option<(String, String)>,
}

/// One issued token.
#[derive(Debug, Clone)]
struct Issued {
    user: UserInfo,
    /// Unix seconds after which the token is refused.
    expires: Option<i64>,
    sa: Option<Bound>,
    /// The `aud` claim of a ServiceAccount token; empty for opaque component tokens, which
    /// carry no audience.
    audiences: Vec<String>,
}

/// A TokenRequest's answer: the token and when it expires.
#[derive(Debug, Clone)]
pub struct IssuedToken {
    /// The bearer token.
    pub token: String,
    /// Unix seconds.
    pub expires: i64,
}

/// The tokens the server accepts besides the admin token.
#[derive(Debug)]
pub struct Tokens {
    issued: Mutex<HashMap<String, Issued>>,
    /// The key bound tokens are signed with (`--service-account-signing-key-file`).
    key: Arc<SigningKey>,
    /// A key the cluster signed with before a rotation, published instead of `key` by a JWKS
    /// gone stale (fault `oidc-jwks-stale`).
    previous: SigningKey,
}

impl Default for Tokens {
    /// As [`Tokens::new`].
    ///
    /// # Panics
    /// When the OS gives no randomness (as `rand::rng`, which the rest of the server uses for
    /// its tokens and uids, does too).
    fn default() -> Self {
        Tokens::new().expect("the operating system's random number generator yields a signing key")
    }
}

impl Tokens {
    /// Tokens signed with a new random key.
    ///
    /// # Errors
    /// When no key can be generated.
    pub fn new() -> Result<Self, SigningError> {
        Ok(Tokens {
            issued: Mutex::default(),
            key: Arc::new(SigningKey::generate()?),
            previous: SigningKey::generate()?,
        })
    }

    /// The signing key (kube-controller-manager signs legacy Secret tokens with the same one).
    pub fn key(&self) -> &Arc<SigningKey> {
        &self.key
    }

    /// The key from before the last rotation (see [`Tokens::key`]).
    pub fn previous_key(&self) -> &SigningKey {
        &self.previous
    }
}

fn now_unix() -> i64 {
    jiff::Timestamp::now().as_second()
}

/// The claims segment of a JWT-shaped token, if it has one.
pub fn claims(token: &str) -> Option<Value> {
    let mut parts = token.split('.');
    let (_, payload, _) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()
}

/// A legacy Secret token's JWT, as upstream's tokens controller mints it with `key`.
///
/// # Errors
/// When signing fails.
pub fn legacy_token(key: &SigningKey, ns: &str, secret: &str, sa: &str, sa_uid: &str) -> Result<String, SigningError> {
    key.sign(&json!({
        "iss": LEGACY_ISSUER,
        "kubernetes.io/serviceaccount/namespace": ns,
        "kubernetes.io/serviceaccount/secret.name": secret,
        "kubernetes.io/serviceaccount/service-account.name": sa,
        "kubernetes.io/serviceaccount/service-account.uid": sa_uid,
        "sub": sa_user_name(ns, sa),
    }))
}

impl Tokens {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Issued>> {
        // Each write is one insert or retain, so a poisoned map is still consistent.
        self.issued.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A random opaque token for an in-process user (never expires).
    pub fn issue_user(&self, user: UserInfo) -> String {
        let t = crate::api::state::random_token();
        self.lock().insert(
            t.clone(),
            Issued {
                user,
                expires: None,
                sa: None,
                audiences: Vec::new(),
            },
        );
        t
    }

    /// A bound ServiceAccount token (TokenRequest), valid `secs` seconds, optionally bound to
    /// a pod `(name, uid)`.
    ///
    /// # Errors
    /// When signing fails.
    pub fn issue_service_account(
        &self,
        ns: &str,
        name: &str,
        uid: &str,
        secs: i64,
        audiences: &[String],
        pod: Option<(String, String)>,
    ) -> Result<IssuedToken, SigningError> {
        let iat = now_unix();
        let exp = iat + secs;
        let jti = crate::api::meta::new_uid();
        let mut k8s = json!({"namespace": ns, "serviceaccount": {"name": name, "uid": uid}});
        if let Some((pname, puid)) = &pod {
            k8s["pod"] = json!({"name": pname, "uid": puid});
        }
        let aud: Vec<String> = if audiences.is_empty() {
            vec![ISSUER.to_string()]
        } else {
            audiences.to_vec()
        };
        let token = self.key.sign(&json!({
            "aud": aud, "exp": exp, "iat": iat, "iss": ISSUER, "jti": jti,
            "kubernetes.io": k8s, "nbf": iat, "sub": sa_user_name(ns, name),
        }))?;
        let mut user = UserInfo::service_account(ns, name, uid);
        user.extra.insert(CREDENTIAL_ID.into(), vec![format!("JTI={jti}")]);
        if let Some((pname, puid)) = &pod {
            user.extra
                .insert("authentication.kubernetes.io/pod-name".into(), vec![pname.clone()]);
            user.extra
                .insert("authentication.kubernetes.io/pod-uid".into(), vec![puid.clone()]);
        }
        let issued = Issued {
            user,
            audiences: aud.clone(),
            expires: Some(exp),
            sa: Some(Bound {
                namespace: ns.into(),
                name: name.into(),
                uid: uid.into(),
                pod,
            }),
        };
        let mut map = self.lock();
        // Expired tokens are otherwise dropped only when presented: sweep them now and then
        // so a long run's TokenRequests (kubelets rotate every pod's token) do not pile up.
        if map.len() >= SWEEP_AT && map.len().is_power_of_two() {
            let now = now_unix();
            map.retain(|_, t| t.expires.is_none_or(|e| e > now));
        }
        map.insert(token.clone(), issued);
        Ok(IssuedToken { token, expires: exp })
    }

    /// The user `token` authenticates as to the API server, checking expiry, that a
    /// ServiceAccount token is meant for the API server (its `aud` holds the API audience,
    /// kube-apiserver's default: the issuer) and that what it names still exists; legacy
    /// Secret tokens are checked against their Secret.
    pub fn authenticate(&self, store: &Store, token: &str) -> Option<UserInfo> {
        self.authenticate_for(store, token, &[ISSUER.to_string()])
            .map(|(u, _)| u)
    }

    /// As [`Self::authenticate`] for a TokenReview asking for `audiences`: the user and the
    /// audiences the token is valid for among them (upstream's intersection).
    pub fn authenticate_for(
        &self,
        store: &Store,
        token: &str,
        audiences: &[String],
    ) -> Option<(UserInfo, Vec<String>)> {
        let found = self.lock().get(token).cloned();
        let Some(issued) = found else {
            return legacy(store, token).map(|u| (u, audiences.to_vec()));
        };
        let granted: Vec<String> = if issued.audiences.is_empty() {
            audiences.to_vec()
        } else {
            audiences
                .iter()
                .filter(|a| issued.audiences.contains(a))
                .cloned()
                .collect()
        };
        if granted.is_empty() {
            return None;
        }
        if issued.expires.is_some_and(|e| now_unix() >= e) {
            self.lock().remove(token);
            return None;
        }
        if let Some(b) = &issued.sa {
            if !exists_with_uid(store, "/serviceaccounts", &b.namespace, &b.name, &b.uid) {
                return None;
            }
            if let Some((pod, uid)) = &b.pod
                && !exists_with_uid(store, "/pods", &b.namespace, pod, uid)
            {
                return None;
            }
        }
        Some((issued.user, granted))
    }
}

fn exists_with_uid(store: &Store, key: &str, ns: &str, name: &str, uid: &str) -> bool {
    store
        .get(key, ns, name)
        .is_some_and(|o| o.pointer("/metadata/uid").and_then(Value::as_str) == Some(uid))
}

/// A legacy `kubernetes.io/service-account-token` Secret token: valid while the Secret holds
/// exactly this token and its ServiceAccount exists with the uid the token names.
fn legacy(store: &Store, token: &str) -> Option<UserInfo> {
    let c = claims(token)?;
    if c.get("iss").and_then(Value::as_str) != Some(LEGACY_ISSUER) {
        return None;
    }
    let field = |k: &str| {
        c.get(format!("kubernetes.io/serviceaccount/{k}"))
            .and_then(Value::as_str)
    };
    let (ns, secret, sa, uid) = (
        field("namespace")?,
        field("secret.name")?,
        field("service-account.name")?,
        field("service-account.uid")?,
    );
    let s = store.get("/secrets", ns, secret)?;
    let stored = s.pointer("/data/token").and_then(Value::as_str)?;
    if STANDARD.decode(stored).ok()? != token.as_bytes() {
        return None;
    }
    if !exists_with_uid(store, "/serviceaccounts", ns, sa, uid) {
        return None;
    }
    Some(UserInfo::service_account(ns, sa, uid))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_with_sa(uid: &str) -> Store {
        let s = Store::new(100);
        s.create(
            "/serviceaccounts",
            "ns",
            "sa",
            json!({"metadata": {"name": "sa", "namespace": "ns", "uid": uid}}),
        )
        .unwrap();
        s
    }

    #[test]
    fn bound_token_is_a_jwt_and_dies_with_its_service_account() {
        let store = store_with_sa("u1");
        let t = Tokens::default();
        let issued = t.issue_service_account("ns", "sa", "u1", 3600, &[], None).unwrap();
        let c = claims(&issued.token).expect("jwt claims");
        assert_eq!(c["sub"], "system:serviceaccount:ns:sa");
        assert_eq!(c["kubernetes.io"]["serviceaccount"]["uid"], "u1");
        let u = t.authenticate(&store, &issued.token).expect("authenticates");
        assert_eq!(u.name, "system:serviceaccount:ns:sa");
        assert!(u.extra[CREDENTIAL_ID][0].starts_with("JTI="));
        store.remove("/serviceaccounts", "ns", "sa", None).unwrap();
        assert!(t.authenticate(&store, &issued.token).is_none());
    }

    #[test]
    fn tokens_for_other_audiences_do_not_reach_the_api() {
        let store = store_with_sa("u1");
        let t = Tokens::default();
        let vault = t
            .issue_service_account("ns", "sa", "u1", 3600, &["vault".to_string()], None)
            .unwrap();
        assert!(t.authenticate(&store, &vault.token).is_none());
        let (_, aud) = t
            .authenticate_for(&store, &vault.token, &["vault".to_string(), "x".to_string()])
            .expect("valid for vault");
        assert_eq!(aud, ["vault"]);
    }

    #[test]
    fn expired_and_unknown_tokens_fail() {
        let store = store_with_sa("u1");
        let t = Tokens::default();
        let issued = t.issue_service_account("ns", "sa", "u1", -1, &[], None).unwrap();
        assert!(t.authenticate(&store, &issued.token).is_none());
        assert!(t.authenticate(&store, "nope").is_none());
    }

    #[test]
    fn expired_tokens_are_swept_as_the_map_grows() {
        let t = Tokens::default();
        for _ in 0..SWEEP_AT + 1 {
            t.issue_service_account("ns", "sa", "u1", -1, &[], None).unwrap();
        }
        assert!(t.lock().len() < 10, "{} tokens kept", t.lock().len());
    }

    #[test]
    fn legacy_secret_token_matches_its_secret() {
        let store = store_with_sa("u1");
        let t = Tokens::default();
        let tok = legacy_token(t.key(), "ns", "sa-token", "sa", "u1").unwrap();
        store
            .create(
                "/secrets",
                "ns",
                "sa-token",
                json!({"metadata": {"name": "sa-token"}, "data": {"token": STANDARD.encode(&tok)}}),
            )
            .unwrap();
        assert_eq!(
            t.authenticate(&store, &tok).unwrap().name,
            "system:serviceaccount:ns:sa"
        );
        // ECDSA signatures are randomised: the same claims give another token.
        let other = legacy_token(t.key(), "ns", "sa-token", "sa", "u1").unwrap();
        assert!(
            t.authenticate(&store, &other).is_none(),
            "a token the secret does not hold"
        );
    }
}
