//! The ServiceAccount token signing key and the OIDC documents that publish it.
//!
//! The main structure is [`SigningKey`]. kube-apiserver signs ServiceAccount tokens with the
//! key of `--service-account-signing-key-file` and serves its public half at
//! `/openid/v1/jwks`, named by a key id derived from the key (upstream pkg/serviceaccount
//! jwt.go `keyIDFromPublicKey`: the unpadded base64url SHA-256 of the PKIX DER public key), so
//! relying parties outside the cluster (and agnhost's `test-service-account-issuer-discovery`)
//! can verify tokens without asking the API server. The simulator's key is an ECDSA P-256 one,
//! which upstream accepts as a signing key and signs with ES256: ring, the TLS stack's
//! crypto, can generate such keys (it cannot generate RSA ones), and each cluster gets its own.
//! The API server still authenticates tokens by lookup (see [`super::tokens`]); the signature
//! is for everyone else.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use serde::Serialize;
use serde_json::Value;

/// The PKIX `SubjectPublicKeyInfo` DER before the 65-byte uncompressed point of a P-256 key:
/// SEQUENCE { SEQUENCE { id-ecPublicKey, prime256v1 }, BIT STRING (0 unused bits) }, as Go's
/// `x509.MarshalPKIXPublicKey` writes it.
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce,
    0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// The JWS algorithm of a P-256 key (upstream `algorithmFromPublicKey`).
pub const ALGORITHM: &str = "ES256";

/// Why a key could not be made.
#[derive(Debug, thiserror::Error)]
pub enum SigningError {
    /// ring refused to generate or load the key (no system randomness).
    #[error("generating the ServiceAccount signing key: {0}")]
    Generate(ring::error::Unspecified),
    /// ring refused to load the PKCS#8 document it had just generated.
    #[error("loading the ServiceAccount signing key: {0}")]
    Load(ring::error::KeyRejected),
    /// ring could not sign (its randomness source failed).
    #[error("signing a ServiceAccount token: {0}")]
    Sign(ring::error::Unspecified),
}

/// An ECDSA P-256 key pair that signs ServiceAccount tokens.
pub struct SigningKey {
    pair: EcdsaKeyPair,
    kid: String,
    rng: SystemRandom,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

/// One key of a JWKS, with go-jose's field order (`rawJSONWebKey`).
#[derive(Debug, Serialize)]
struct Jwk<'a> {
    #[serde(rename = "use")]
    use_: &'a str,
    kty: &'a str,
    kid: &'a str,
    crv: &'a str,
    alg: &'a str,
    x: String,
    y: String,
}

/// A JSON Web Key Set.
#[derive(Debug, Serialize)]
struct Jwks<'a> {
    keys: Vec<Jwk<'a>>,
}

/// Upstream's `openIDMetadata`, in its field order.
#[derive(Debug, Serialize)]
struct OpenIdMetadata<'a> {
    issuer: &'a str,
    jwks_uri: &'a str,
    response_types_supported: [&'a str; 1],
    subject_types_supported: [&'a str; 1],
    id_token_signing_alg_values_supported: Vec<&'a str>,
}

impl SigningKey {
    /// A new random key.
    ///
    /// # Errors
    /// When the system has no randomness to give.
    pub fn generate() -> Result<Self, SigningError> {
        let rng = SystemRandom::new();
        let pkcs8 =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).map_err(SigningError::Generate)?;
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .map_err(SigningError::Load)?;
        let kid = key_id(pair.public_key().as_ref());
        Ok(SigningKey { pair, kid, rng })
    }

    /// The key id tokens carry in their `kid` header and the JWKS names the key by.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The public key as an uncompressed point (`04 || x || y`).
    pub fn public_point(&self) -> &[u8] {
        self.pair.public_key().as_ref()
    }

    /// A compact JWS over `claims` with header `{"alg":"ES256","kid":...}`: what go-jose's
    /// signer writes for upstream's token generator (header keys sorted, as Go marshals maps).
    ///
    /// # Errors
    /// When ring cannot sign (its randomness source failed).
    pub fn sign(&self, claims: &Value) -> Result<String, SigningError> {
        let header = serde_json::json!({"alg": ALGORITHM, "kid": self.kid});
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let sig = self
            .pair
            .sign(&self.rng, input.as_bytes())
            .map_err(SigningError::Sign)?;
        Ok(format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig.as_ref())))
    }

    fn jwk(&self) -> Jwk<'_> {
        let point = self.public_point();
        Jwk {
            use_: "sig",
            kty: "EC",
            kid: &self.kid,
            crv: "P-256",
            alg: ALGORITHM,
            x: URL_SAFE_NO_PAD.encode(&point[1..33]),
            y: URL_SAFE_NO_PAD.encode(&point[33..65]),
        }
    }
}

/// Upstream's key id: unpadded base64url of the SHA-256 of the PKIX DER public key.
fn key_id(point: &[u8]) -> String {
    let mut der = P256_SPKI_PREFIX.to_vec();
    der.extend_from_slice(point);
    URL_SAFE_NO_PAD.encode(ring::digest::digest(&ring::digest::SHA256, &der))
}

/// The JWKS document of `keys` (`/openid/v1/jwks`).
pub fn jwks_json(keys: &[&SigningKey]) -> String {
    let doc = Jwks {
        keys: keys.iter().map(|k| k.jwk()).collect(),
    };
    // Plain strings and arrays: serialising cannot fail.
    serde_json::to_string(&doc).unwrap_or_default()
}

/// The OIDC discovery document (`/.well-known/openid-configuration`) of an issuer whose keys
/// are `keys`: the algorithms are those of the keys, sorted and unique as upstream's `getAlgs`.
pub fn openid_configuration_json(issuer: &str, jwks_uri: &str, keys: &[&SigningKey]) -> String {
    let mut algs: Vec<&str> = keys.iter().map(|_| ALGORITHM).collect();
    algs.sort_unstable();
    algs.dedup();
    let doc = OpenIdMetadata {
        issuer,
        jwks_uri,
        response_types_supported: ["id_token"],
        subject_types_supported: ["public"],
        id_token_signing_alg_values_supported: algs,
    };
    serde_json::to_string(&doc).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::signature::{ECDSA_P256_SHA256_FIXED, UnparsedPublicKey};

    #[test]
    fn a_signed_token_verifies_with_the_published_key_of_its_kid() {
        let key = SigningKey::generate().unwrap();
        let token = key
            .sign(&serde_json::json!({"iss": "https://issuer", "sub": "me"}))
            .unwrap();
        let parts: Vec<&str> = token.split('.').collect();
        assert_eq!(parts.len(), 3);
        let header: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[0]).unwrap()).unwrap();
        assert_eq!(header["alg"], "ES256");
        let jwks: Value = serde_json::from_str(&jwks_json(&[&key])).unwrap();
        let jwk = &jwks["keys"][0];
        assert_eq!(jwk["kid"], header["kid"]);
        assert_eq!((jwk["use"].as_str(), jwk["kty"].as_str()), (Some("sig"), Some("EC")));
        let mut point = vec![4u8];
        for c in ["x", "y"] {
            point.extend(URL_SAFE_NO_PAD.decode(jwk[c].as_str().unwrap()).unwrap());
        }
        let sig = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
        let input = format!("{}.{}", parts[0], parts[1]);
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &point)
            .verify(input.as_bytes(), &sig)
            .expect("the JWKS key verifies the token");
        let other = SigningKey::generate().unwrap();
        assert!(
            UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, other.public_point())
                .verify(input.as_bytes(), &sig)
                .is_err()
        );
    }

    #[test]
    fn key_id_is_the_hash_of_the_pkix_encoding() {
        let key = SigningKey::generate().unwrap();
        // 32 bytes of SHA-256, unpadded base64url.
        assert_eq!(key.kid().len(), 43);
        assert_ne!(key.kid(), SigningKey::generate().unwrap().kid());
        // The DER is 91 bytes (Go's x509.MarshalPKIXPublicKey of a P-256 key).
        let mut der = P256_SPKI_PREFIX.to_vec();
        der.extend_from_slice(key.public_point());
        assert_eq!(der.len(), 91);
    }

    #[test]
    fn discovery_document_has_upstreams_fields_in_order() {
        let key = SigningKey::generate().unwrap();
        let doc = openid_configuration_json("https://iss", "https://1.2.3.4:6443/openid/v1/jwks", &[&key]);
        assert_eq!(
            doc,
            r#"{"issuer":"https://iss","jwks_uri":"https://1.2.3.4:6443/openid/v1/jwks","response_types_supported":["id_token"],"subject_types_supported":["public"],"id_token_signing_alg_values_supported":["ES256"]}"#
        );
    }
}
