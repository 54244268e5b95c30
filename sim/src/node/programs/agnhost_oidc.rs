//! agnhost `test-service-account-issuer-discovery` (upstream test/images/agnhost/openidmetadata):
//! verifies the pod's own projected ServiceAccount token the way an outside relying party
//! would, with go-oidc's discovery and verifier.
//!
//! It reads the token at `--token-path`, takes the issuer from its unverified claims, then,
//! trusting only the cluster CA and sending the pod's own API token (client-go's in-cluster
//! transport), fetches `{issuer}/.well-known/openid-configuration` (whose `issuer` must equal
//! the token's) and the `jwks_uri` it names, and checks the token: issuer, audience
//! (`--audience`), expiry and not-before (five minutes' leeway), an `RS256`/`ES256` signature
//! by a key of the set with the token's `kid`. Success exits 0. A failure is logged and the
//! check repeated with "external" discovery: Go's default transport, which trusts the image's
//! public roots and sends no token; no public CA signs a cluster's serving certificate, so
//! the simulator models those roots as an empty store and that attempt fails at the TLS
//! handshake as it does on a real cluster, ending the program with `log.Fatal` (exit 1).
//! Lines carry Go's `log` prefix (`2006/01/02 15:04:05 `, UTC) and go to stderr.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use ring::signature::{self, UnparsedPublicKey};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;

use super::Ctx;
use super::agnhost::flags;
use crate::node::dns;
use crossconf_model::os::Os;

const SA_TOKEN_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";
const SA_CA_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
/// The algorithms the program allows (`SupportedSigningAlgs: {oidc.RS256, oidc.ES256}`).
const ALGORITHMS: [&str; 2] = ["RS256", "ES256"];
/// go-oidc's not-before leeway.
const NBF_LEEWAY_SECS: i64 = 5 * 60;
/// Bound of one HTTP exchange (Go's default transport: 30 s to dial, 10 s of TLS handshake).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Go's standard logger: `YYYY/MM/DD HH:MM:SS msg` on stderr.
fn log(ctx: &Ctx, msg: &str) {
    let now = jiff::Timestamp::now().strftime("%Y/%m/%d %H:%M:%S");
    let nl = if msg.ends_with('\n') { "" } else { "\n" };
    ctx.out
        .write(super::Stream::Stderr, format!("{now} {msg}{nl}").as_bytes());
}

/// `log.Fatal`: the message, then exit status 1.
fn fatal(ctx: &Ctx, msg: &str) -> i32 {
    log(ctx, msg);
    1
}

/// How the HTTP client trusts and authenticates: the in-cluster transport (cluster CA, the
/// pod's API token) or Go's default one (public roots, no credentials).
struct Client {
    tls: Arc<rustls::ClientConfig>,
    bearer: Option<String>,
}

/// What `validate` ended in: the token checks out, an error the program recovers from, or
/// one it calls `log.Fatal` on (a token that does not parse).
enum Outcome {
    Valid,
    Failed(String),
    Fatal(String),
}

/// Runs the subcommand; returns the exit code.
pub async fn run(ctx: Ctx, args: Vec<String>) -> i32 {
    let (f, pos) = flags(&args);
    if !pos.is_empty() {
        ctx.out
            .err_line(&format!("Error: accepts at most 0 arg(s), received {}", pos.len()));
        return 1;
    }
    let token_path = f.get("token-path").cloned().unwrap_or_default();
    let audience = f.get("audience").cloned().unwrap_or_default();
    let raw = match ctx.fs.read(&token_path) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(e) => return fatal(&ctx, &format!("open {token_path}: {e}")),
    };
    log(&ctx, "OK: Got token");

    log(&ctx, "validating with in-cluster discovery");
    let in_cluster = match in_cluster_client(&ctx) {
        Ok(c) => c,
        Err(e) => return fatal(&ctx, &e),
    };
    match validate(&ctx, &in_cluster, &raw, &audience).await {
        Outcome::Valid => return 0,
        Outcome::Fatal(e) => return fatal(&ctx, &e),
        Outcome::Failed(e) => log(&ctx, &format!("failed to validate with in-cluster discovery: {e}")),
    }

    log(&ctx, "falling back to validating with external discovery");
    let external = Client {
        tls: Arc::new(
            rustls::ClientConfig::builder()
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth(),
        ),
        bearer: None,
    };
    match validate(&ctx, &external, &raw, &audience).await {
        Outcome::Valid => 0,
        Outcome::Failed(e) | Outcome::Fatal(e) => fatal(&ctx, &e),
    }
}

/// client-go's `rest.InClusterConfig` + `rest.TransportFor`: the service environment must be
/// set and the API token readable; an unreadable CA is only logged (klog), leaving a
/// transport that trusts nothing.
fn in_cluster_client(ctx: &Ctx) -> Result<Client, String> {
    let set = |k: &str| ctx.env.get(k).is_some_and(|v| !v.is_empty());
    if !set("KUBERNETES_SERVICE_HOST") || !set("KUBERNETES_SERVICE_PORT") {
        return Err("unable to load in-cluster configuration, KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be defined".into());
    }
    let token = ctx
        .fs
        .read(SA_TOKEN_FILE)
        .map_err(|e| format!("open {SA_TOKEN_FILE}: {e}"))?;
    let mut roots = rustls::RootCertStore::empty();
    match ctx.fs.read(SA_CA_FILE) {
        Ok(pem) => {
            for der in CertificateDer::pem_slice_iter(&pem).flatten() {
                // A certificate the store refuses leaves the server unverifiable, which the
                // request then reports.
                let _ = roots.add(der);
            }
        }
        Err(e) => ctx.out.err_line(&format!(
            "Expected to load root CA config from {SA_CA_FILE}, but got err: open {SA_CA_FILE}: {e}"
        )),
    }
    Ok(Client {
        tls: Arc::new(
            rustls::ClientConfig::builder()
                .with_root_certificates(roots)
                .with_no_client_auth(),
        ),
        bearer: Some(String::from_utf8_lossy(&token).trim().to_string()),
    })
}

/// The claims the program decodes (`claims`: go-jose's `jwt.Claims` and `kubernetes.io`).
#[derive(Debug, Default, Clone, PartialEq)]
struct Claims {
    iss: String,
    sub: String,
    aud: Vec<String>,
    exp: Option<i64>,
    nbf: Option<i64>,
    iat: Option<i64>,
    jti: String,
    namespace: String,
    sa_name: String,
    sa_uid: String,
}

impl Claims {
    fn from_json(v: &Value) -> Result<Claims, String> {
        let s = |p: &str| v.pointer(p).and_then(Value::as_str).unwrap_or_default().to_string();
        let date = |k: &str| -> Result<Option<i64>, String> {
            match v.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::Number(n)) => Ok(n.as_f64().map(|f| f as i64)),
                Some(other) => Err(format!(
                    "json: cannot unmarshal {other} into Go struct field claims.{k} of type jwt.NumericDate"
                )),
            }
        };
        let aud = match v.get("aud") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(a)) => vec![a.clone()],
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).map(String::from).collect(),
            Some(other) => {
                return Err(format!(
                    "go-jose/go-jose/jwt: expected string or array value to unmarshal to Audience, got {other}"
                ));
            }
        };
        Ok(Claims {
            iss: s("/iss"),
            sub: s("/sub"),
            aud,
            exp: date("exp")?,
            nbf: date("nbf")?,
            iat: date("iat")?,
            jti: s("/jti"),
            namespace: s("/kubernetes.io/namespace"),
            sa_name: s("/kubernetes.io/serviceaccount/name"),
            sa_uid: s("/kubernetes.io/serviceaccount/uid"),
        })
    }

    /// Go's `%#v` of the struct (pointers print as addresses, as Go's do).
    fn go_syntax(&self) -> String {
        let date = |d: Option<i64>, addr: u64| match d {
            Some(_) => format!("(*jwt.NumericDate)(0x{addr:x})"),
            None => "(*jwt.NumericDate)(nil)".into(),
        };
        let aud = if self.aud.is_empty() {
            "jwt.Audience(nil)".to_string()
        } else {
            format!(
                "jwt.Audience{{{}}}",
                self.aud.iter().map(|a| format!("{a:?}")).collect::<Vec<_>>().join(", ")
            )
        };
        format!(
            "openidmetadata.claims{{Claims:jwt.Claims{{Issuer:{:?}, Subject:{:?}, Audience:{aud}, Expiry:{}, NotBefore:{}, IssuedAt:{}, ID:{:?}}}, Kubernetes:openidmetadata.kubeClaims{{Namespace:{:?}, ServiceAccount:openidmetadata.kubeName{{Name:{:?}, UID:{:?}}}}}}}",
            self.iss,
            self.sub,
            date(self.exp, 0x00c0_0001_4188),
            date(self.nbf, 0x00c0_0001_4190),
            date(self.iat, 0x00c0_0001_4198),
            self.jti,
            self.namespace,
            self.sa_name,
            self.sa_uid
        )
    }
}

/// A compact JWS split as go-jose parses it: the signing input, the header, the payload and
/// the signature.
struct Jws {
    input: String,
    header: Value,
    payload: Vec<u8>,
    signature: Vec<u8>,
}

/// go-jose's `ParseSigned` of a compact JWS (whitespace stripped first, as go-jose does).
fn parse_jws(raw: &str) -> Result<Jws, String> {
    let raw: String = raw.chars().filter(|c| !c.is_whitespace()).collect();
    let parts: Vec<&str> = raw.split('.').collect();
    if parts.len() != 3 {
        return Err("go-jose/go-jose: compact JWS format must have three parts".into());
    }
    let b64 = |s: &str| {
        URL_SAFE_NO_PAD
            .decode(s)
            .map_err(|e| format!("illegal base64 data: {e}"))
    };
    let header: Value =
        serde_json::from_slice(&b64(parts[0])?).map_err(|e| format!("go-jose/go-jose: invalid header: {e}"))?;
    if !header.is_object() {
        return Err("go-jose/go-jose: invalid header: not a JSON object".into());
    }
    Ok(Jws {
        input: format!("{}.{}", parts[0], parts[1]),
        header,
        payload: b64(parts[1])?,
        signature: b64(parts[2])?,
    })
}

/// upstream `validate`: logs the unverified issuer and claims, discovers the provider with
/// `client` and verifies the token.
async fn validate(ctx: &Ctx, client: &Client, raw: &str, audience: &str) -> Outcome {
    let jws = match parse_jws(raw) {
        Ok(j) => j,
        Err(e) => return Outcome::Fatal(e),
    };
    let unsafe_claims = match serde_json::from_slice::<Value>(&jws.payload)
        .map_err(|e| e.to_string())
        .and_then(|v| Claims::from_json(&v))
    {
        Ok(c) => c,
        Err(e) => return Outcome::Fatal(e),
    };
    log(ctx, &format!("OK: got issuer {}", unsafe_claims.iss));
    log(
        ctx,
        &format!("Full, not-validated claims: \n{}", unsafe_claims.go_syntax()),
    );
    if ctx.pod.os == Os::Windows
        && let Err(e) = ensure_windows_dns(ctx, &unsafe_claims.iss).await
    {
        return Outcome::Fatal(e);
    }
    let jwks_uri = match discover(ctx, client, &unsafe_claims.iss).await {
        Ok(u) => u,
        Err(e) => return Outcome::Failed(e),
    };
    log(
        ctx,
        &format!("OK: Constructed OIDC provider for issuer {}", unsafe_claims.iss),
    );
    let verified = match verify(ctx, client, &jws, &unsafe_claims.iss, audience, &jwks_uri).await {
        Ok(c) => c,
        Err(e) => return Outcome::Failed(e),
    };
    log(ctx, "OK: Validated signature on JWT");
    log(ctx, "OK: Got valid claims from token!");
    log(ctx, &format!("Full, validated claims: \n&{}", verified.go_syntax()));
    Outcome::Valid
}

/// upstream `ensureWindowsDNSAvailability`: resolves the issuer's host every 5 s for up to
/// 20 s before discovery (Windows pod networking could come up after the container).
async fn ensure_windows_dns(ctx: &Ctx, issuer: &str) -> Result<(), String> {
    log(ctx, "Ensuring Windows DNS availability");
    let host = http::Uri::try_from(issuer)
        .map_err(|e| format!("parse {issuer:?}: {e}"))?
        .host()
        .unwrap_or_default()
        .to_string();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut tick = tokio::time::interval(Duration::from_secs(5));
    loop {
        tick.tick().await;
        match lookup(ctx, &host).await {
            Ok(ip) => {
                log(ctx, &format!("OK: Resolved host {host}: [{ip}]"));
                return Ok(());
            }
            Err(e) => log(ctx, &e),
        }
        if tokio::time::Instant::now() >= deadline {
            return Err("timed out waiting for the condition".into());
        }
    }
}

/// go-oidc's `NewProvider`: the discovery document's `jwks_uri`, after checking its issuer.
async fn discover(ctx: &Ctx, client: &Client, issuer: &str) -> Result<String, String> {
    let url = format!("{}/.well-known/openid-configuration", issuer.trim_end_matches('/'));
    let (status, body) = get(ctx, client, &url).await?;
    if status != 200 {
        return Err(format!("{}: {}", status_text(status), String::from_utf8_lossy(&body)));
    }
    let doc: Value = serde_json::from_slice(&body).map_err(|e| {
        format!("oidc: failed to decode provider discovery object: got Content-Type = application/json, but could not unmarshal as JSON: {e}")
    })?;
    let got = doc.get("issuer").and_then(Value::as_str).unwrap_or_default();
    if got != issuer {
        return Err(format!(
            "oidc: issuer did not match the issuer returned by provider, expected {issuer:?} got {got:?}"
        ));
    }
    Ok(doc
        .get("jwks_uri")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string())
}

/// Go's `time.Time` `%v` of Unix seconds.
fn go_time(secs: i64) -> String {
    jiff::Timestamp::from_second(secs)
        .map(|t| t.strftime("%Y-%m-%d %H:%M:%S +0000 UTC").to_string())
        .unwrap_or_else(|_| secs.to_string())
}

/// go-oidc's `IDTokenVerifier.Verify` with `ClientID: audience` and the two algorithms, over a
/// remote key set at `jwks_uri`.
async fn verify(
    ctx: &Ctx,
    client: &Client,
    jws: &Jws,
    issuer: &str,
    audience: &str,
    jwks_uri: &str,
) -> Result<Claims, String> {
    let payload: Value =
        serde_json::from_slice(&jws.payload).map_err(|e| format!("oidc: failed to unmarshal claims: {e}"))?;
    let claims = Claims::from_json(&payload).map_err(|e| format!("oidc: failed to unmarshal claims: {e}"))?;
    if claims.iss != issuer {
        return Err(format!(
            "oidc: id token issued by a different provider, expected {issuer:?} got {:?}",
            claims.iss
        ));
    }
    if audience.is_empty() {
        return Err("oidc: invalid configuration, clientID must be provided or SkipClientIDCheck must be set".into());
    }
    if !claims.aud.iter().any(|a| a == audience) {
        return Err(format!("oidc: expected audience {audience:?} got {:?}", claims.aud));
    }
    let now = jiff::Timestamp::now().as_second();
    let exp = claims.exp.unwrap_or(0);
    if exp < now {
        return Err(format!("oidc: token is expired (Token Expiry: {})", go_time(exp)));
    }
    if let Some(nbf) = claims.nbf
        && now + NBF_LEEWAY_SECS < nbf
    {
        return Err(format!(
            "oidc: current time {} before the nbf (not before) time: {}",
            go_time(now),
            go_time(nbf)
        ));
    }
    let alg = jws.header.get("alg").and_then(Value::as_str).unwrap_or_default();
    if !ALGORITHMS.contains(&alg) {
        return Err(format!(
            "oidc: id token signed with unsupported algorithm, expected [\"RS256\" \"ES256\"] got {alg:?}"
        ));
    }
    let kid = jws.header.get("kid").and_then(Value::as_str).unwrap_or_default();
    // The key set's cache starts empty, so the first verification fetches the keys.
    let (status, body) = get(ctx, client, jwks_uri)
        .await
        .map_err(|e| format!("failed to verify signature: fetching keys oidc: get keys failed {e}"))?;
    if status != 200 {
        return Err(format!(
            "failed to verify signature: fetching keys oidc: get keys failed: {} {}",
            status_text(status),
            String::from_utf8_lossy(&body)
        ));
    }
    let set: Value = serde_json::from_slice(&body).map_err(|e| {
        format!(
            "failed to verify signature: fetching keys oidc: failed to decode keys: {e} {}",
            String::from_utf8_lossy(&body)
        )
    })?;
    let keys = set.get("keys").and_then(Value::as_array).cloned().unwrap_or_default();
    let verified = keys
        .iter()
        .filter(|k| kid.is_empty() || k.get("kid").and_then(Value::as_str) == Some(kid))
        .any(|k| verify_with(k, alg, jws).is_ok());
    if !verified {
        return Err("failed to verify signature: failed to verify id token signature".into());
    }
    Ok(claims)
}

/// Checks `jws`'s signature with one JWK (`RS256` over an RSA key, `ES256` over a P-256 one).
fn verify_with(jwk: &Value, alg: &str, jws: &Jws) -> Result<(), String> {
    let field = |k: &str| -> Result<Vec<u8>, String> {
        let s = jwk
            .get(k)
            .and_then(Value::as_str)
            .ok_or_else(|| format!("jwk has no {k}"))?;
        URL_SAFE_NO_PAD.decode(s).map_err(|e| format!("jwk {k}: {e}"))
    };
    let kty = jwk.get("kty").and_then(Value::as_str).unwrap_or_default();
    let input = jws.input.as_bytes();
    match (kty, alg) {
        ("EC", "ES256") => {
            if jwk.get("crv").and_then(Value::as_str) != Some("P-256") {
                return Err("not a P-256 key".into());
            }
            let mut point = vec![4u8];
            point.extend(field("x")?);
            point.extend(field("y")?);
            UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, &point)
                .verify(input, &jws.signature)
                .map_err(|_| "square/go-jose: error in cryptographic primitive".into())
        }
        ("RSA", "RS256") => signature::RsaPublicKeyComponents {
            n: field("n")?,
            e: field("e")?,
        }
        .verify(&signature::RSA_PKCS1_2048_8192_SHA256, input, &jws.signature)
        .map_err(|_| "crypto/rsa: verification error".into()),
        _ => Err(format!("key type {kty} cannot verify {alg}")),
    }
}

/// Go's `resp.Status` (`403 Forbidden`).
fn status_text(code: u16) -> String {
    let reason = http::StatusCode::from_u16(code)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or_default();
    format!("{code} {reason}")
}

/// Resolves `host` as Go's resolver in the pod would.
async fn lookup(ctx: &Ctx, host: &str) -> Result<IpAddr, String> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(ip);
    }
    let d = ctx.pod.dns.as_ref().map_err(|e| format!("lookup {host}: {e}"))?;
    match dns::resolve(d, &ctx.net, &ctx.source(), host).await {
        Ok(r) => r
            .addrs
            .first()
            .map(|a| IpAddr::V4(*a))
            .ok_or_else(|| format!("lookup {host}: no such host")),
        Err(dns::ResolveError::NotFound { .. }) => Err(format!(
            "lookup {host} on {}:53: no such host",
            d.nameservers.first().map(ToString::to_string).unwrap_or_default()
        )),
        Err(e) => Err(format!("lookup {host}: {e}")),
    }
}

/// One HTTPS GET of `url` with `client`: `(status, body)`, or Go's `Get "url": ...` error.
async fn get(ctx: &Ctx, client: &Client, url: &str) -> Result<(u16, Vec<u8>), String> {
    let fail = |e: String| format!("Get {url:?}: {e}");
    let uri = http::Uri::try_from(url).map_err(|e| fail(e.to_string()))?;
    if uri.scheme_str() != Some("https") {
        return Err(fail(format!(
            "unsupported protocol scheme {:?}",
            uri.scheme_str().unwrap_or_default()
        )));
    }
    let host = uri.host().unwrap_or_default().trim_matches(['[', ']']).to_string();
    let port = uri.port_u16().unwrap_or(443);
    let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
    let exchange = async {
        let ip = lookup(ctx, &host).await.map_err(|e| fail(format!("dial tcp: {e}")))?;
        let addr = SocketAddr::new(ip, port);
        let tcp = ctx
            .net
            .dialer()
            .tcp(&ctx.source(), addr)
            .await
            .map_err(|e| fail(format!("dial tcp {addr}: {e}")))?;
        let name = ServerName::try_from(host.clone()).map_err(|e| fail(e.to_string()))?;
        let stream = tokio_rustls::TlsConnector::from(client.tls.clone())
            .connect(name, tcp)
            .await
            .map_err(|e| fail(tls_error(&e)))?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| fail(e.to_string()))?;
        tokio::spawn(async move {
            // The connection ends when the response is read; its error, if any, reached the
            // request.
            let _ = conn.await;
        });
        let mut req = http::Request::builder()
            .method("GET")
            .uri(path.as_str())
            .header("Host", uri.authority().map_or(host.as_str(), |a| a.as_str()))
            .header("User-Agent", "Go-http-client/1.1");
        if let Some(t) = &client.bearer {
            req = req.header("Authorization", format!("Bearer {t}"));
        }
        let req = req.body(Empty::<Bytes>::new()).map_err(|e| fail(e.to_string()))?;
        let resp = sender.send_request(req).await.map_err(|e| fail(e.to_string()))?;
        let status = resp.status().as_u16();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| fail(e.to_string()))?
            .to_bytes();
        Ok((status, body.to_vec()))
    };
    tokio::time::timeout(REQUEST_TIMEOUT, exchange)
        .await
        .map_err(|_| fail("context deadline exceeded".into()))?
}

/// Go's wording of a certificate the client does not trust.
fn tls_error(e: &std::io::Error) -> String {
    let inner = e.get_ref().map(ToString::to_string).unwrap_or_else(|| e.to_string());
    if inner.contains("UnknownIssuer") {
        "tls: failed to verify certificate: x509: certificate signed by unknown authority".into()
    } else if inner.contains("NotValidForName") {
        format!("tls: failed to verify certificate: x509: certificate is not valid for the requested name ({inner})")
    } else {
        format!("tls: {inner}")
    }
}

#[cfg(test)]
#[path = "agnhost_oidc_tests.rs"]
mod tests;
