use super::*;
use crate::api::auth::signing::{SigningKey, jwks_json};
use serde_json::json;

fn claims_json() -> Value {
    json!({
        "aud": ["oidc-discovery-test"], "exp": 2_000_000_000i64, "iat": 1_700_000_000i64,
        "iss": "https://kubernetes.default.svc.cluster.local", "jti": "j-1",
        "kubernetes.io": {"namespace": "ns", "serviceaccount": {"name": "default", "uid": "u-1"}},
        "nbf": 1_700_000_000i64, "sub": "system:serviceaccount:ns:default",
    })
}

#[test]
fn the_published_key_set_verifies_a_signed_token_and_another_key_does_not() {
    let key = SigningKey::generate().unwrap();
    let token = key.sign(&claims_json()).unwrap();
    let jws = parse_jws(&format!("{token}\n")).unwrap();
    assert_eq!(jws.header["alg"], "ES256");
    let set: Value = serde_json::from_str(&jwks_json(&[&key])).unwrap();
    verify_with(&set["keys"][0], "ES256", &jws).expect("verifies");
    assert!(
        verify_with(&set["keys"][0], "RS256", &jws).is_err(),
        "RS256 over an EC key"
    );
    let other = SigningKey::generate().unwrap();
    let other_set: Value = serde_json::from_str(&jwks_json(&[&other])).unwrap();
    assert!(verify_with(&other_set["keys"][0], "ES256", &jws).is_err());
    // A tampered payload fails with the right key.
    let mut tampered = parse_jws(&token).unwrap();
    tampered.input.push('x');
    assert!(verify_with(&set["keys"][0], "ES256", &tampered).is_err());
}

#[test]
fn malformed_tokens_are_refused_as_go_jose_refuses_them() {
    assert_eq!(
        parse_jws("a.b").err().as_deref(),
        Some("go-jose/go-jose: compact JWS format must have three parts")
    );
    assert!(parse_jws("!!.e30.e30").is_err());
}

#[test]
fn claims_print_as_gos_struct_syntax() {
    let c = Claims::from_json(&claims_json()).unwrap();
    assert_eq!(c.aud, ["oidc-discovery-test"]);
    let s = c.go_syntax();
    assert!(
        s.starts_with(r#"openidmetadata.claims{Claims:jwt.Claims{Issuer:"https://kubernetes.default.svc.cluster.local", Subject:"system:serviceaccount:ns:default", Audience:jwt.Audience{"oidc-discovery-test"}, Expiry:(*jwt.NumericDate)(0xc"#),
        "{s}"
    );
    assert!(
        s.ends_with(r#"ID:"j-1"}, Kubernetes:openidmetadata.kubeClaims{Namespace:"ns", ServiceAccount:openidmetadata.kubeName{Name:"default", UID:"u-1"}}}"#),
        "{s}"
    );
    let single = Claims::from_json(&json!({"aud": "one"})).unwrap();
    assert_eq!(single.aud, ["one"]);
    assert!(single.go_syntax().contains("Expiry:(*jwt.NumericDate)(nil)"));
}

#[test]
fn go_status_and_time_formats() {
    assert_eq!(status_text(403), "403 Forbidden");
    assert_eq!(go_time(0), "1970-01-01 00:00:00 +0000 UTC");
}
