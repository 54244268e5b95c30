//! The admission webhook server of upstream's webhook cases (test/e2e/apimachinery/webhook.go
//! `BeforeEach`), and builders for the configurations that point at it.
//!
//! The main type is [`WebhookServer`]: a serving certificate for the Service's DNS name, signed
//! by a CA made for this case; a Secret holding it; a Deployment running `agnhost webhook` on
//! the target OS with the Secret mounted; and a Service in front of it. Every webhook it builds
//! is scoped, as upstream's are, with a namespaceSelector on a label only this case's namespace
//! (and namespaces the case creates on purpose) carries, so cases running side by side never
//! call each other's webhooks. Each configuration also carries a marker webhook that denies
//! labelled ConfigMaps: registering waits until a marker is denied, which proves the API server
//! uses the configuration (upstream's `waitWebhookConfigurationReady`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ServiceReference, ValidatingWebhook,
    ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, HTTPGetAction, Namespace, Probe};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use serde_json::json;

use super::services::ServiceBuilder;
use super::wait::conditions as wc;
use super::workloads::{deployment, secret, secret_volume, template_of};
use super::{CaseError, ContainerBuilder, Framework, RUN_ID_LABEL};

/// Upstream's `secretName`.
pub const SECRET_NAME: &str = "sample-webhook-secret";
/// Upstream's `deploymentName`.
pub const DEPLOYMENT_NAME: &str = "sample-webhook-deployment";
/// Upstream's `serviceName`.
pub const SERVICE_NAME: &str = "e2e-test-webhook";
/// Upstream's `servicePort`.
pub const SERVICE_PORT: i32 = 8443;
/// Upstream's `containerPort`.
pub const CONTAINER_PORT: i32 = 8444;
/// The label whose value (the case namespace) scopes every webhook this module builds.
pub const SCOPE_LABEL: &str = "crossconf.io/webhook-scope";
/// The label that makes a ConfigMap a marker; no other webhook of the case sees such objects.
pub const MARKER_LABEL: &str = "crossconf.io/webhook-marker";
/// How long a new configuration may take to be used: upstream polls the marker for 30 s.
const READY_WITHIN: Duration = Duration::from_secs(30);

/// Why setting up the webhook server failed before reaching the cluster.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// rcgen refused to build the CA or the serving certificate.
    #[error("failed to generate the webhook serving certificate")]
    Certificate(#[source] rcgen::Error),
}

/// One agnhost HTTPS server of upstream's webhook cases: its names, ports and program.
struct ServerSpec {
    /// What the steps call it.
    what: &'static str,
    secret: &'static str,
    deployment: &'static str,
    service: &'static str,
    service_port: i32,
    container_port: i32,
    container: &'static str,
    volume: &'static str,
    /// The agnhost subcommand.
    program: &'static str,
    labels: &'static [(&'static str, &'static str)],
    /// The Service's selector (one of `labels`).
    selector: (&'static str, &'static str),
}

/// webhook.go's admission webhook server.
const ADMISSION: ServerSpec = ServerSpec {
    what: "webhook server",
    secret: SECRET_NAME,
    deployment: DEPLOYMENT_NAME,
    service: SERVICE_NAME,
    service_port: SERVICE_PORT,
    container_port: CONTAINER_PORT,
    container: "sample-webhook",
    volume: "webhook-certs",
    program: "webhook",
    labels: &[("app", "sample-webhook"), ("webhook", "true")],
    selector: ("webhook", "true"),
};

/// crd_conversion_webhook.go's conversion webhook server (its `secretCRDName`,
/// `deploymentCRDName`, `serviceCRDName`, ports 9443/9444 and pod labels).
const CONVERSION: ServerSpec = ServerSpec {
    what: "CRD conversion webhook",
    secret: "sample-custom-resource-conversion-webhook-secret",
    deployment: "sample-crd-conversion-webhook-deployment",
    service: CONVERSION_SERVICE,
    service_port: 9443,
    container_port: 9444,
    container: "sample-crd-conversion-webhook",
    volume: "crd-conversion-webhook-certs",
    program: "crd-conversion-webhook",
    labels: &[("app", "sample-crd-conversion-webhook"), ("crd-webhook", "true")],
    selector: ("crd-webhook", "true"),
};

/// Upstream's `serviceCRDName`.
pub const CONVERSION_SERVICE: &str = "e2e-test-crd-conversion-webhook";

/// The CRD conversion webhook of one case, ready to be called.
#[derive(Debug, Clone)]
pub struct ConversionServer {
    ns: String,
    ca: ByteString,
}

impl ConversionServer {
    /// How the API server reaches the converter (`/crdconvert` on port 9443), trusting the
    /// case's CA: the `clientConfig` of a CRD's `spec.conversion.webhook`.
    pub fn client_config(
        &self,
    ) -> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::WebhookClientConfig {
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as ext;
        ext::WebhookClientConfig {
            service: Some(ext::ServiceReference {
                namespace: self.ns.clone(),
                name: CONVERSION_SERVICE.into(),
                path: Some("/crdconvert".into()),
                port: Some(CONVERSION.service_port),
            }),
            ca_bundle: Some(self.ca.clone()),
            url: None,
        }
    }
}

/// A CA certificate and a serving certificate and key it signed, PEM.
pub struct Certs {
    /// The CA certificate (what a `caBundle` carries).
    pub ca: String,
    /// The serving certificate.
    pub cert: String,
    /// Its private key.
    pub key: String,
}

/// Upstream's `setupServerCert`: a CA of the case's own and a certificate for `dns_name`.
///
/// # Errors
/// rcgen's refusal.
pub fn certs(dns_name: &str) -> Result<Certs, Error> {
    let ca_key = KeyPair::generate().map_err(Error::Certificate)?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(Error::Certificate)?;
    ca.distinguished_name.push(DnType::CommonName, "e2e-server-cert-ca");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).map_err(Error::Certificate)?;
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let key = KeyPair::generate().map_err(Error::Certificate)?;
    let cert = CertificateParams::new(vec![dns_name.to_string()])
        .map_err(Error::Certificate)?
        .signed_by(&key, &issuer)
        .map_err(Error::Certificate)?;
    Ok(Certs {
        ca: ca_cert.pem(),
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

/// A rule on `operations` of core/v1 `resources`.
pub fn core_rule(operations: &[&str], resources: &[&str]) -> RuleWithOperations {
    rule(operations, "", "v1", resources)
}

/// A rule on `operations` of `resources` in `group`/`version`.
pub fn rule(operations: &[&str], group: &str, version: &str, resources: &[&str]) -> RuleWithOperations {
    let strings = |v: &[&str]| Some(v.iter().map(ToString::to_string).collect());
    RuleWithOperations {
        operations: strings(operations),
        api_groups: strings(&[group]),
        api_versions: strings(&[version]),
        resources: strings(resources),
        scope: None,
    }
}

/// The webhook server of one case, ready to be called.
#[derive(Debug, Clone)]
pub struct WebhookServer {
    ns: String,
    /// The run id, labelled on every configuration so cleanup and leak checks find them.
    run_id: String,
    ca: ByteString,
}

impl Framework {
    /// Deploys upstream's webhook server in the case namespace on the target OS and labels the
    /// namespace with the case's webhook scope.
    ///
    /// Waits for the Deployment to roll out and for the Service to have a ready endpoint.
    ///
    /// # Errors
    /// A failure naming the step: certificate, Secret, Deployment, Service or endpoints.
    pub async fn deploy_webhook_server(&self) -> Result<WebhookServer, CaseError> {
        self.label_namespace(self.ns()).await?;
        let ca = self.deploy_tls_server(&ADMISSION).await?;
        Ok(WebhookServer {
            ns: self.ns().to_string(),
            run_id: self.run().run_id.clone(),
            ca,
        })
    }

    /// Deploys upstream's CRD conversion webhook (crd_conversion_webhook.go
    /// `deployCustomResourceWebhookAndService`: `agnhost crd-conversion-webhook` behind
    /// Service `e2e-test-crd-conversion-webhook`, port 9443 to 9444) on the target OS.
    ///
    /// # Errors
    /// A failure naming the step: certificate, Secret, Deployment, Service or endpoints.
    pub async fn deploy_conversion_webhook_server(&self) -> Result<ConversionServer, CaseError> {
        let ca = self.deploy_tls_server(&CONVERSION).await?;
        Ok(ConversionServer {
            ns: self.ns().to_string(),
            ca,
        })
    }

    /// Deploys one agnhost HTTPS server as `spec` describes and returns its CA (PEM).
    async fn deploy_tls_server(&self, spec: &ServerSpec) -> Result<ByteString, CaseError> {
        self.step(format!("setting up the {} certificate", spec.what));
        let c = certs(&format!("{}.{}.svc", spec.service, self.ns())).map_err(|e| CaseError::failed(e.to_string()))?;
        self.create(&secret(spec.secret, &[("tls.crt", &c.cert), ("tls.key", &c.key)]))
            .await?;

        self.step(format!("deploying the {} pod", spec.what));
        let os = self.target_os();
        let mount = os.join(os.volume_root(), spec.volume);
        let port = spec.container_port;
        let probe = Probe {
            http_get: Some(HTTPGetAction {
                scheme: Some("HTTPS".into()),
                port: IntOrString::Int(port),
                path: Some("/readyz".into()),
                ..Default::default()
            }),
            period_seconds: Some(1),
            ..Default::default()
        };
        let server = ContainerBuilder::new(spec.container, "agnhost")
            .args([
                spec.program.to_string(),
                format!("--tls-cert-file={}", os.join(&mount, "tls.crt")),
                format!("--tls-private-key-file={}", os.join(&mount, "tls.key")),
                "--alsologtostderr".into(),
                "-v=4".into(),
                format!("--port={port}"),
            ])
            .port(port, "TCP")
            .mount(spec.volume, &mount, true)
            .with(move |c| c.readiness_probe = Some(probe.clone()));
        let mut pod = self.pod(spec.container);
        for (k, v) in spec.labels {
            pod = pod.label(k, v);
        }
        let pod = pod
            .volume(secret_volume(spec.volume, spec.secret, &[]))
            .container(server)
            .build(self)?;
        self.create(&deployment(spec.deployment, 1, template_of(pod))).await?;
        self.wait_for(
            &self.api::<Deployment>(),
            spec.deployment,
            wc::is_deployment_rolled_out(),
            "to roll out the webhook server",
        )
        .await?;

        self.step(format!("deploying the {} service", spec.what));
        let (sk, sv) = spec.selector;
        let svc =
            ServiceBuilder::cluster_ip(spec.service)
                .selector(sk, sv)
                .port("https", spec.service_port, port, "TCP");
        self.create_service(&svc).await?;
        self.wait_ready_endpoints(spec.service, 1).await?;
        Ok(ByteString(c.ca.into_bytes()))
    }

    /// Adds the case's webhook scope label to namespace `name` (the case's own, or one the
    /// case made to be seen by its webhooks).
    async fn label_namespace(&self, name: &str) -> Result<(), CaseError> {
        let patch = json!({"metadata": {"labels": {SCOPE_LABEL: self.ns()}}});
        self.api_all::<Namespace>()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| CaseError::failed(format!("labelling namespace {name} with the webhook scope: {e}")))?;
        Ok(())
    }

    /// Creates namespace `<case namespace>-<suffix>` with `labels` and the webhook scope label;
    /// the caller deletes it with [`Framework::delete_extra_namespace`].
    ///
    /// # Errors
    /// The API's refusal.
    pub async fn create_scoped_namespace(&self, suffix: &str, labels: &[(&str, &str)]) -> Result<String, CaseError> {
        let name = format!("{}-{suffix}", self.ns());
        let mut all: BTreeMap<String, String> = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        all.insert(SCOPE_LABEL.into(), self.ns().into());
        all.insert(RUN_ID_LABEL.into(), self.run().run_id.clone());
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some(all),
                ..Default::default()
            },
            ..Default::default()
        };
        self.api_all::<Namespace>()
            .create(&PostParams::default(), &ns)
            .await
            .map_err(|e| CaseError::failed(format!("creating namespace {name}: {e}")))?;
        Ok(name)
    }

    /// Deletes a namespace [`Framework::create_scoped_namespace`] made (without waiting for it
    /// to go).
    ///
    /// # Errors
    /// The API's refusal.
    pub async fn delete_extra_namespace(&self, name: &str) -> Result<(), CaseError> {
        match self.api_all::<Namespace>().delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(CaseError::failed(format!("deleting namespace {name}: {e}"))),
        }
    }
}

impl WebhookServer {
    /// The name of configuration `base` of this case (configurations are cluster-wide).
    pub fn config_name(&self, base: &str) -> String {
        format!("{base}-{}", self.ns)
    }

    /// The labels every configuration of this case carries, so cleanup finds them all.
    fn config_labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (SCOPE_LABEL.to_string(), self.ns.clone()),
            (RUN_ID_LABEL.to_string(), self.run_id.clone()),
        ])
    }

    /// The selector `scope-label=<case namespace>`, plus `extra` requirements.
    pub fn namespace_selector(&self, extra: Vec<LabelSelectorRequirement>) -> LabelSelector {
        LabelSelector {
            match_labels: Some(BTreeMap::from([(SCOPE_LABEL.to_string(), self.ns.clone())])),
            match_expressions: (!extra.is_empty()).then_some(extra),
        }
    }

    /// How the API server reaches the server at `path`, trusting the case's CA.
    pub fn client_config(&self, path: &str) -> WebhookClientConfig {
        WebhookClientConfig {
            service: Some(ServiceReference {
                namespace: self.ns.clone(),
                name: SERVICE_NAME.into(),
                path: Some(path.into()),
                port: Some(SERVICE_PORT),
            }),
            ca_bundle: Some(self.ca.clone()),
            url: None,
        }
    }

    /// A validating webhook `name` calling `path` for `rules`, scoped to the case and blind to
    /// markers; callers adjust the other fields.
    pub fn validating(&self, name: &str, path: &str, rules: Vec<RuleWithOperations>) -> ValidatingWebhook {
        ValidatingWebhook {
            name: name.into(),
            client_config: self.client_config(path),
            rules: Some(rules),
            namespace_selector: Some(self.namespace_selector(Vec::new())),
            object_selector: Some(not_marker()),
            side_effects: "None".into(),
            admission_review_versions: vec!["v1".into(), "v1beta1".into()],
            ..Default::default()
        }
    }

    /// A mutating webhook built like [`WebhookServer::validating`].
    pub fn mutating(&self, name: &str, path: &str, rules: Vec<RuleWithOperations>) -> MutatingWebhook {
        let v = self.validating(name, path, rules);
        MutatingWebhook {
            name: v.name,
            client_config: v.client_config,
            rules: v.rules,
            namespace_selector: v.namespace_selector,
            object_selector: v.object_selector,
            side_effects: v.side_effects,
            admission_review_versions: v.admission_review_versions,
            ..Default::default()
        }
    }

    /// The marker webhook: denies the case's labelled marker ConfigMaps (`/always-deny`).
    fn marker(&self) -> ValidatingWebhook {
        let mut hook = self.validating(
            "validating-is-webhook-configuration-ready.k8s.io",
            "/always-deny",
            vec![core_rule(&["CREATE"], &["configmaps"])],
        );
        hook.object_selector = Some(LabelSelector {
            match_labels: Some(BTreeMap::from([(MARKER_LABEL.to_string(), "true".to_string())])),
            match_expressions: None,
        });
        hook
    }

    /// A validating configuration `base` with `hooks` plus the marker, without registering it.
    pub fn validating_config(&self, base: &str, mut hooks: Vec<ValidatingWebhook>) -> ValidatingWebhookConfiguration {
        hooks.push(self.marker());
        ValidatingWebhookConfiguration {
            metadata: ObjectMeta {
                name: Some(self.config_name(base)),
                labels: Some(self.config_labels()),
                ..Default::default()
            },
            webhooks: Some(hooks),
        }
    }

    /// A mutating configuration `base` with `hooks` plus the marker, without registering it.
    pub fn mutating_config(&self, base: &str, mut hooks: Vec<MutatingWebhook>) -> MutatingWebhookConfiguration {
        let m = self.marker();
        hooks.push(MutatingWebhook {
            name: "mutating-is-webhook-configuration-ready.k8s.io".into(),
            client_config: m.client_config,
            rules: m.rules,
            namespace_selector: m.namespace_selector,
            object_selector: m.object_selector,
            side_effects: m.side_effects,
            admission_review_versions: m.admission_review_versions,
            ..Default::default()
        });
        MutatingWebhookConfiguration {
            metadata: ObjectMeta {
                name: Some(self.config_name(base)),
                labels: Some(self.config_labels()),
                ..Default::default()
            },
            webhooks: Some(hooks),
        }
    }

    /// Registers a validating configuration `base` with `hooks` and waits until it is used.
    ///
    /// # Errors
    /// The API's refusal, or the marker not being denied within 30 s.
    pub async fn register_validating(
        &self,
        f: &Framework,
        base: &str,
        hooks: Vec<ValidatingWebhook>,
    ) -> Result<ValidatingWebhookConfiguration, CaseError> {
        f.step(format!(
            "registering validating webhook configuration {}",
            self.config_name(base)
        ));
        let created = f
            .api_all::<ValidatingWebhookConfiguration>()
            .create(&PostParams::default(), &self.validating_config(base, hooks))
            .await
            .map_err(|e| CaseError::failed(format!("registering validating webhook configuration {base}: {e}")))?;
        self.wait_ready(f, &created.name_any()).await?;
        Ok(created)
    }

    /// Registers a mutating configuration `base` with `hooks` and waits until it is used.
    ///
    /// # Errors
    /// The API's refusal, or the marker not being denied within 30 s.
    pub async fn register_mutating(
        &self,
        f: &Framework,
        base: &str,
        hooks: Vec<MutatingWebhook>,
    ) -> Result<MutatingWebhookConfiguration, CaseError> {
        f.step(format!(
            "registering mutating webhook configuration {}",
            self.config_name(base)
        ));
        let created = f
            .api_all::<MutatingWebhookConfiguration>()
            .create(&PostParams::default(), &self.mutating_config(base, hooks))
            .await
            .map_err(|e| CaseError::failed(format!("registering mutating webhook configuration {base}: {e}")))?;
        self.wait_ready(f, &created.name_any()).await?;
        Ok(created)
    }

    /// Creates marker ConfigMaps (once a second) until one is denied by the marker webhook of
    /// configuration `config`; an admitted marker is deleted again.
    ///
    /// # Errors
    /// "configuration … was not used within 30 s" with the last answer.
    pub async fn wait_ready(&self, f: &Framework, config: &str) -> Result<(), CaseError> {
        let api = f.api::<ConfigMap>();
        let deadline = Instant::now() + READY_WITHIN.min(f.remaining());
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let mut last = String::new();
        for n in 0.. {
            tick.tick().await;
            let name = format!("marker-{n}");
            let marker = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    labels: Some(BTreeMap::from([(MARKER_LABEL.to_string(), "true".to_string())])),
                    ..Default::default()
                },
                ..Default::default()
            };
            match api.create(&PostParams::default(), &marker).await {
                Err(kube::Error::Api(s)) if s.message.contains("denied") => return Ok(()),
                Err(e) => last = e.to_string(),
                Ok(_) => {
                    last = format!("marker ConfigMap {name} was admitted");
                    api.delete(&name, &DeleteParams::default()).await?;
                }
            }
            if Instant::now() >= deadline {
                break;
            }
        }
        Err(CaseError::failed(format!(
            "webhook configuration {config} was not used within {READY_WITHIN:?}: its marker webhook never denied a marker ConfigMap; last: {last}"
        )))
    }

    /// Deletes every webhook configuration of this case.
    ///
    /// # Errors
    /// The API's refusal.
    pub async fn cleanup(&self, f: &Framework) -> Result<(), CaseError> {
        let lp = ListParams::default().labels(&format!("{SCOPE_LABEL}={}", self.ns));
        let dp = DeleteParams::default();
        f.api_all::<ValidatingWebhookConfiguration>()
            .delete_collection(&dp, &lp)
            .await?;
        f.api_all::<MutatingWebhookConfiguration>()
            .delete_collection(&dp, &lp)
            .await?;
        Ok(())
    }
}

/// The object selector every case webhook carries: markers are not its business.
fn not_marker() -> LabelSelector {
    LabelSelector {
        match_labels: None,
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: MARKER_LABEL.into(),
            operator: "DoesNotExist".into(),
            values: None,
        }]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_serving_certificate_is_signed_for_the_service_name() {
        let c = certs("e2e-test-webhook.ns.svc").expect("certificates");
        assert!(c.ca.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(c.cert.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(c.key.contains("PRIVATE KEY"));
    }

    #[test]
    fn webhooks_are_scoped_to_the_case_and_skip_markers() {
        let s = WebhookServer {
            ns: "ns-1".into(),
            run_id: "run-1".into(),
            ca: ByteString(b"ca".to_vec()),
        };
        let cfg = s.validating_config("deny", vec![s.validating("a.k8s.io", "/pods", vec![])]);
        assert_eq!(cfg.metadata.name.as_deref(), Some("deny-ns-1"));
        let hooks = cfg.webhooks.expect("webhooks");
        assert_eq!(hooks.len(), 2, "the case's webhook and the marker");
        let scope = hooks[0]
            .namespace_selector
            .as_ref()
            .and_then(|s| s.match_labels.as_ref());
        assert_eq!(scope.and_then(|l| l.get(SCOPE_LABEL)).map(String::as_str), Some("ns-1"));
        assert_eq!(hooks[0].object_selector, Some(not_marker()));
        assert_eq!(
            hooks[1].client_config.service.as_ref().and_then(|s| s.path.as_deref()),
            Some("/always-deny")
        );
    }
}
