//! Decoding the protobuf request bodies kubectl sends for built-in types.
//!
//! kubectl's typed clients (`create namespace|configmap|secret|serviceaccount|deployment|
//! service|job|cronjob|quota|priorityclass|token`, `create job --from=cronjob/…`, `auth can-i`,
//! `auth whoami`) write `application/vnd.kubernetes.protobuf` and do not fall back to JSON, so
//! the server must read it. A body is the `k8s\0` magic and a `runtime.Unknown` envelope whose
//! `raw` is the object. Each supported kind has a field table (numbers from upstream's
//! `generated.proto`); responses are always JSON, which clients accept.
//!
//! Go's protobuf writes every non-pointer field, zero or not, so a field a table does not list
//! is skipped only when it holds the zero value; a set field the tables do not know fails the
//! request with 415 naming its path, rather than being dropped silently (the simulator must
//! never store less than it was sent). The main function is [`decode`].

use serde_json::{Map, Value, json};

use super::error::{ApiError, ApiResult};

/// What a field holds.
#[derive(Clone, Copy)]
enum Kind {
    Str,
    Bytes,
    /// A pointer int: present means set, zero included.
    Int,
    /// A plain int: zero is the Go zero value, omitted like JSON `omitempty`.
    Int0,
    /// A pointer bool.
    Bool,
    /// A plain bool: false is omitted.
    Bool0,
    IntOrString,
    Time,
    Msg(&'static [Field]),
    RepStr,
    RepMsg(&'static [Field]),
    MapStr,
    MapBytes,
    /// A `resource.Quantity` (a message holding its string form).
    Qty,
    /// `map<string, Quantity>`.
    MapQty,
    /// Repeated int64, packed or not.
    RepInt,
    /// An embedded Go struct whose fields JSON inlines into the parent (`ProbeHandler` in
    /// `Probe`, `VolumeSource` in `Volume`, `LocalObjectReference` in key selectors).
    Inline(&'static [Field]),
}

/// A field: number, JSON name, kind.
type Field = (u32, &'static str, Kind);

const TYPE_META: &[Field] = &[(1, "apiVersion", Kind::Str), (2, "kind", Kind::Str)];
const UNKNOWN: &[Field] = &[(1, "typeMeta", Kind::Msg(TYPE_META)), (2, "raw", Kind::Bytes)];
const OWNER_REF: &[Field] = &[
    (1, "kind", Kind::Str),
    (3, "name", Kind::Str),
    (4, "uid", Kind::Str),
    (5, "apiVersion", Kind::Str),
    (6, "controller", Kind::Bool),
    (7, "blockOwnerDeletion", Kind::Bool),
];
const OBJECT_META: &[Field] = &[
    (1, "name", Kind::Str),
    (2, "generateName", Kind::Str),
    (3, "namespace", Kind::Str),
    (5, "uid", Kind::Str),
    (6, "resourceVersion", Kind::Str),
    (7, "generation", Kind::Int0),
    (8, "creationTimestamp", Kind::Time),
    (11, "labels", Kind::MapStr),
    (12, "annotations", Kind::MapStr),
    (13, "ownerReferences", Kind::RepMsg(OWNER_REF)),
    (14, "finalizers", Kind::RepStr),
];
const NAMESPACE_SPEC: &[Field] = &[(1, "finalizers", Kind::RepStr)];
const NAMESPACE: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "spec", Kind::Msg(NAMESPACE_SPEC)),
];
const CONFIG_MAP: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "data", Kind::MapStr),
    (3, "binaryData", Kind::MapBytes),
    (4, "immutable", Kind::Bool),
];
const SECRET: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "data", Kind::MapBytes),
    (3, "type", Kind::Str),
    (4, "stringData", Kind::MapStr),
    (5, "immutable", Kind::Bool),
];
const LOCAL_REF: &[Field] = &[(1, "name", Kind::Str)];
const OBJECT_REF: &[Field] = &[
    (1, "kind", Kind::Str),
    (2, "namespace", Kind::Str),
    (3, "name", Kind::Str),
    (4, "uid", Kind::Str),
    (5, "apiVersion", Kind::Str),
];
const SERVICE_ACCOUNT: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "secrets", Kind::RepMsg(OBJECT_REF)),
    (3, "imagePullSecrets", Kind::RepMsg(LOCAL_REF)),
    (4, "automountServiceAccountToken", Kind::Bool),
];
const RESOURCE_ATTRS: &[Field] = &[
    (1, "namespace", Kind::Str),
    (2, "verb", Kind::Str),
    (3, "group", Kind::Str),
    (4, "version", Kind::Str),
    (5, "resource", Kind::Str),
    (6, "subresource", Kind::Str),
    (7, "name", Kind::Str),
];
const NON_RESOURCE_ATTRS: &[Field] = &[(1, "path", Kind::Str), (2, "verb", Kind::Str)];
const SSAR_SPEC: &[Field] = &[
    (1, "resourceAttributes", Kind::Msg(RESOURCE_ATTRS)),
    (2, "nonResourceAttributes", Kind::Msg(NON_RESOURCE_ATTRS)),
];
const SSAR: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "spec", Kind::Msg(SSAR_SPEC)),
];
const SSRR_SPEC: &[Field] = &[(1, "namespace", Kind::Str)];
const SSRR: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "spec", Kind::Msg(SSRR_SPEC)),
];
const BOUND_REF: &[Field] = &[
    (1, "kind", Kind::Str),
    (2, "apiVersion", Kind::Str),
    (3, "name", Kind::Str),
    (4, "uid", Kind::Str),
];
const TOKEN_SPEC: &[Field] = &[
    (1, "audiences", Kind::RepStr),
    (3, "boundObjectRef", Kind::Msg(BOUND_REF)),
    (4, "expirationSeconds", Kind::Int),
];
const TOKEN_REQUEST: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "spec", Kind::Msg(TOKEN_SPEC)),
];

const LABEL_SELECTOR_REQ: &[Field] = &[
    (1, "key", Kind::Str),
    (2, "operator", Kind::Str),
    (3, "values", Kind::RepStr),
];
const LABEL_SELECTOR: &[Field] = &[
    (1, "matchLabels", Kind::MapStr),
    (2, "matchExpressions", Kind::RepMsg(LABEL_SELECTOR_REQ)),
];
const CONTAINER_PORT: &[Field] = &[
    (1, "name", Kind::Str),
    (2, "hostPort", Kind::Int0),
    (3, "containerPort", Kind::Int0),
    (4, "protocol", Kind::Str),
    (5, "hostIP", Kind::Str),
];
const FIELD_REF: &[Field] = &[(1, "apiVersion", Kind::Str), (2, "fieldPath", Kind::Str)];
const RESOURCE_FIELD_REF: &[Field] = &[
    (1, "containerName", Kind::Str),
    (2, "resource", Kind::Str),
    (3, "divisor", Kind::Qty),
];
/// `ConfigMapKeySelector` and `SecretKeySelector`: the embedded `LocalObjectReference` is
/// inlined in JSON.
const KEY_SELECTOR: &[Field] = &[
    (1, "", Kind::Inline(LOCAL_REF)),
    (2, "key", Kind::Str),
    (3, "optional", Kind::Bool),
];
const ENV_VAR_SOURCE: &[Field] = &[
    (1, "fieldRef", Kind::Msg(FIELD_REF)),
    (2, "resourceFieldRef", Kind::Msg(RESOURCE_FIELD_REF)),
    (3, "configMapKeyRef", Kind::Msg(KEY_SELECTOR)),
    (4, "secretKeyRef", Kind::Msg(KEY_SELECTOR)),
];
const ENV_VAR: &[Field] = &[
    (1, "name", Kind::Str),
    (2, "value", Kind::Str),
    (3, "valueFrom", Kind::Msg(ENV_VAR_SOURCE)),
];
const ENV_FROM_REF: &[Field] = &[(1, "", Kind::Inline(LOCAL_REF)), (2, "optional", Kind::Bool)];
const ENV_FROM: &[Field] = &[
    (1, "prefix", Kind::Str),
    (2, "configMapRef", Kind::Msg(ENV_FROM_REF)),
    (3, "secretRef", Kind::Msg(ENV_FROM_REF)),
];
const RESOURCE_CLAIM: &[Field] = &[(1, "name", Kind::Str), (2, "request", Kind::Str)];
const RESOURCES: &[Field] = &[
    (1, "limits", Kind::MapQty),
    (2, "requests", Kind::MapQty),
    (3, "claims", Kind::RepMsg(RESOURCE_CLAIM)),
];
const VOLUME_MOUNT: &[Field] = &[
    (1, "name", Kind::Str),
    (2, "readOnly", Kind::Bool0),
    (3, "mountPath", Kind::Str),
    (4, "subPath", Kind::Str),
    (5, "mountPropagation", Kind::Str),
    (6, "subPathExpr", Kind::Str),
];
const EXEC_ACTION: &[Field] = &[(1, "command", Kind::RepStr)];
const HTTP_HEADER: &[Field] = &[(1, "name", Kind::Str), (2, "value", Kind::Str)];
const HTTP_GET: &[Field] = &[
    (1, "path", Kind::Str),
    (2, "port", Kind::IntOrString),
    (3, "host", Kind::Str),
    (4, "scheme", Kind::Str),
    (5, "httpHeaders", Kind::RepMsg(HTTP_HEADER)),
];
const TCP_SOCKET: &[Field] = &[(1, "port", Kind::IntOrString), (2, "host", Kind::Str)];
const GRPC_ACTION: &[Field] = &[(1, "port", Kind::Int0), (2, "service", Kind::Str)];
const PROBE_HANDLER: &[Field] = &[
    (1, "exec", Kind::Msg(EXEC_ACTION)),
    (2, "httpGet", Kind::Msg(HTTP_GET)),
    (3, "tcpSocket", Kind::Msg(TCP_SOCKET)),
    (4, "grpc", Kind::Msg(GRPC_ACTION)),
];
const PROBE: &[Field] = &[
    (1, "", Kind::Inline(PROBE_HANDLER)),
    (2, "initialDelaySeconds", Kind::Int0),
    (3, "timeoutSeconds", Kind::Int0),
    (4, "periodSeconds", Kind::Int0),
    (5, "successThreshold", Kind::Int0),
    (6, "failureThreshold", Kind::Int0),
    (7, "terminationGracePeriodSeconds", Kind::Int),
];
const SLEEP_ACTION: &[Field] = &[(1, "seconds", Kind::Int0)];
const LIFECYCLE_HANDLER: &[Field] = &[
    (1, "exec", Kind::Msg(EXEC_ACTION)),
    (2, "httpGet", Kind::Msg(HTTP_GET)),
    (3, "tcpSocket", Kind::Msg(TCP_SOCKET)),
    (4, "sleep", Kind::Msg(SLEEP_ACTION)),
];
const LIFECYCLE: &[Field] = &[
    (1, "postStart", Kind::Msg(LIFECYCLE_HANDLER)),
    (2, "preStop", Kind::Msg(LIFECYCLE_HANDLER)),
    (3, "stopSignal", Kind::Str),
];
const CAPABILITIES: &[Field] = &[(1, "add", Kind::RepStr), (2, "drop", Kind::RepStr)];
const SE_LINUX: &[Field] = &[
    (1, "user", Kind::Str),
    (2, "role", Kind::Str),
    (3, "type", Kind::Str),
    (4, "level", Kind::Str),
];
const WINDOWS_OPTIONS: &[Field] = &[
    (1, "gmsaCredentialSpecName", Kind::Str),
    (2, "gmsaCredentialSpec", Kind::Str),
    (3, "runAsUserName", Kind::Str),
    (4, "hostProcess", Kind::Bool),
];
const SECCOMP: &[Field] = &[(1, "type", Kind::Str), (2, "localhostProfile", Kind::Str)];
const SECURITY_CONTEXT: &[Field] = &[
    (1, "capabilities", Kind::Msg(CAPABILITIES)),
    (2, "privileged", Kind::Bool),
    (3, "seLinuxOptions", Kind::Msg(SE_LINUX)),
    (4, "runAsUser", Kind::Int),
    (5, "runAsNonRoot", Kind::Bool),
    (6, "readOnlyRootFilesystem", Kind::Bool),
    (7, "allowPrivilegeEscalation", Kind::Bool),
    (8, "runAsGroup", Kind::Int),
    (9, "procMount", Kind::Str),
    (10, "windowsOptions", Kind::Msg(WINDOWS_OPTIONS)),
    (11, "seccompProfile", Kind::Msg(SECCOMP)),
];
const SYSCTL: &[Field] = &[(1, "name", Kind::Str), (2, "value", Kind::Str)];
const POD_SECURITY_CONTEXT: &[Field] = &[
    (1, "seLinuxOptions", Kind::Msg(SE_LINUX)),
    (2, "runAsUser", Kind::Int),
    (3, "runAsNonRoot", Kind::Bool),
    (4, "supplementalGroups", Kind::RepInt),
    (5, "fsGroup", Kind::Int),
    (6, "runAsGroup", Kind::Int),
    (7, "sysctls", Kind::RepMsg(SYSCTL)),
    (8, "windowsOptions", Kind::Msg(WINDOWS_OPTIONS)),
    (9, "fsGroupChangePolicy", Kind::Str),
    (10, "seccompProfile", Kind::Msg(SECCOMP)),
];
const CONTAINER: &[Field] = &[
    (1, "name", Kind::Str),
    (2, "image", Kind::Str),
    (3, "command", Kind::RepStr),
    (4, "args", Kind::RepStr),
    (5, "workingDir", Kind::Str),
    (6, "ports", Kind::RepMsg(CONTAINER_PORT)),
    (7, "env", Kind::RepMsg(ENV_VAR)),
    (8, "resources", Kind::Msg(RESOURCES)),
    (9, "volumeMounts", Kind::RepMsg(VOLUME_MOUNT)),
    (10, "livenessProbe", Kind::Msg(PROBE)),
    (11, "readinessProbe", Kind::Msg(PROBE)),
    (12, "lifecycle", Kind::Msg(LIFECYCLE)),
    (13, "terminationMessagePath", Kind::Str),
    (14, "imagePullPolicy", Kind::Str),
    (15, "securityContext", Kind::Msg(SECURITY_CONTEXT)),
    (16, "stdin", Kind::Bool0),
    (17, "stdinOnce", Kind::Bool0),
    (18, "tty", Kind::Bool0),
    (19, "envFrom", Kind::RepMsg(ENV_FROM)),
    (20, "terminationMessagePolicy", Kind::Str),
    (22, "startupProbe", Kind::Msg(PROBE)),
    (24, "restartPolicy", Kind::Str),
];
const KEY_TO_PATH: &[Field] = &[(1, "key", Kind::Str), (2, "path", Kind::Str), (3, "mode", Kind::Int)];
const HOST_PATH: &[Field] = &[(1, "path", Kind::Str), (2, "type", Kind::Str)];
const EMPTY_DIR: &[Field] = &[(1, "medium", Kind::Str), (2, "sizeLimit", Kind::Qty)];
const SECRET_VOLUME: &[Field] = &[
    (1, "secretName", Kind::Str),
    (2, "items", Kind::RepMsg(KEY_TO_PATH)),
    (3, "defaultMode", Kind::Int),
    (4, "optional", Kind::Bool),
];
const PVC_VOLUME: &[Field] = &[(1, "claimName", Kind::Str), (2, "readOnly", Kind::Bool0)];
const CONFIG_MAP_VOLUME: &[Field] = &[
    (1, "", Kind::Inline(LOCAL_REF)),
    (2, "items", Kind::RepMsg(KEY_TO_PATH)),
    (3, "defaultMode", Kind::Int),
    (4, "optional", Kind::Bool),
];
const VOLUME_SOURCE: &[Field] = &[
    (1, "hostPath", Kind::Msg(HOST_PATH)),
    (2, "emptyDir", Kind::Msg(EMPTY_DIR)),
    (6, "secret", Kind::Msg(SECRET_VOLUME)),
    (10, "persistentVolumeClaim", Kind::Msg(PVC_VOLUME)),
    (19, "configMap", Kind::Msg(CONFIG_MAP_VOLUME)),
];
const VOLUME: &[Field] = &[(1, "name", Kind::Str), (2, "", Kind::Inline(VOLUME_SOURCE))];
const TOLERATION: &[Field] = &[
    (1, "key", Kind::Str),
    (2, "operator", Kind::Str),
    (3, "value", Kind::Str),
    (4, "effect", Kind::Str),
    (5, "tolerationSeconds", Kind::Int),
];
const POD_OS: &[Field] = &[(1, "name", Kind::Str)];
const POD_SPEC: &[Field] = &[
    (1, "volumes", Kind::RepMsg(VOLUME)),
    (2, "containers", Kind::RepMsg(CONTAINER)),
    (3, "restartPolicy", Kind::Str),
    (4, "terminationGracePeriodSeconds", Kind::Int),
    (5, "activeDeadlineSeconds", Kind::Int),
    (6, "dnsPolicy", Kind::Str),
    (7, "nodeSelector", Kind::MapStr),
    (8, "serviceAccountName", Kind::Str),
    (9, "serviceAccount", Kind::Str),
    (10, "nodeName", Kind::Str),
    (11, "hostNetwork", Kind::Bool0),
    (12, "hostPID", Kind::Bool0),
    (13, "hostIPC", Kind::Bool0),
    (14, "securityContext", Kind::Msg(POD_SECURITY_CONTEXT)),
    (15, "imagePullSecrets", Kind::RepMsg(LOCAL_REF)),
    (16, "hostname", Kind::Str),
    (17, "subdomain", Kind::Str),
    (19, "schedulerName", Kind::Str),
    (20, "initContainers", Kind::RepMsg(CONTAINER)),
    (21, "automountServiceAccountToken", Kind::Bool),
    (22, "tolerations", Kind::RepMsg(TOLERATION)),
    (24, "priorityClassName", Kind::Str),
    (25, "priority", Kind::Int),
    (27, "shareProcessNamespace", Kind::Bool),
    (29, "runtimeClassName", Kind::Str),
    (30, "enableServiceLinks", Kind::Bool),
    (31, "preemptionPolicy", Kind::Str),
    (35, "setHostnameAsFQDN", Kind::Bool),
    (36, "os", Kind::Msg(POD_OS)),
    (37, "hostUsers", Kind::Bool),
];
const POD_TEMPLATE: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "spec", Kind::Msg(POD_SPEC)),
];
const POD: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "spec", Kind::Msg(POD_SPEC)),
];
const ROLLING_UPDATE_DEPLOYMENT: &[Field] = &[
    (1, "maxUnavailable", Kind::IntOrString),
    (2, "maxSurge", Kind::IntOrString),
];
const DEPLOYMENT_STRATEGY: &[Field] = &[
    (1, "type", Kind::Str),
    (2, "rollingUpdate", Kind::Msg(ROLLING_UPDATE_DEPLOYMENT)),
];
const DEPLOYMENT_SPEC: &[Field] = &[
    (1, "replicas", Kind::Int),
    (2, "selector", Kind::Msg(LABEL_SELECTOR)),
    (3, "template", Kind::Msg(POD_TEMPLATE)),
    (4, "strategy", Kind::Msg(DEPLOYMENT_STRATEGY)),
    (5, "minReadySeconds", Kind::Int0),
    (6, "revisionHistoryLimit", Kind::Int),
    (7, "paused", Kind::Bool0),
    (9, "progressDeadlineSeconds", Kind::Int),
];
const DEPLOYMENT: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "spec", Kind::Msg(DEPLOYMENT_SPEC)),
];
const JOB_SPEC: &[Field] = &[
    (1, "parallelism", Kind::Int),
    (2, "completions", Kind::Int),
    (3, "activeDeadlineSeconds", Kind::Int),
    (4, "selector", Kind::Msg(LABEL_SELECTOR)),
    (5, "manualSelector", Kind::Bool),
    (6, "template", Kind::Msg(POD_TEMPLATE)),
    (7, "backoffLimit", Kind::Int),
    (8, "ttlSecondsAfterFinished", Kind::Int),
    (9, "completionMode", Kind::Str),
    (10, "suspend", Kind::Bool),
];
const JOB: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "spec", Kind::Msg(JOB_SPEC)),
];
const JOB_TEMPLATE: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "spec", Kind::Msg(JOB_SPEC)),
];
const CRON_JOB_SPEC: &[Field] = &[
    (1, "schedule", Kind::Str),
    (2, "startingDeadlineSeconds", Kind::Int),
    (3, "concurrencyPolicy", Kind::Str),
    (4, "suspend", Kind::Bool),
    (5, "jobTemplate", Kind::Msg(JOB_TEMPLATE)),
    (6, "successfulJobsHistoryLimit", Kind::Int),
    (7, "failedJobsHistoryLimit", Kind::Int),
    (8, "timeZone", Kind::Str),
];
const CRON_JOB: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "spec", Kind::Msg(CRON_JOB_SPEC)),
];
const SERVICE_PORT: &[Field] = &[
    (1, "name", Kind::Str),
    (2, "protocol", Kind::Str),
    (3, "port", Kind::Int0),
    (4, "targetPort", Kind::IntOrString),
    (5, "nodePort", Kind::Int0),
    (6, "appProtocol", Kind::Str),
];
const SERVICE_SPEC: &[Field] = &[
    (1, "ports", Kind::RepMsg(SERVICE_PORT)),
    (2, "selector", Kind::MapStr),
    (3, "clusterIP", Kind::Str),
    (4, "type", Kind::Str),
    (5, "externalIPs", Kind::RepStr),
    (7, "sessionAffinity", Kind::Str),
    (10, "externalName", Kind::Str),
    (11, "externalTrafficPolicy", Kind::Str),
    (13, "publishNotReadyAddresses", Kind::Bool0),
    (17, "ipFamilyPolicy", Kind::Str),
    (18, "clusterIPs", Kind::RepStr),
    (19, "ipFamilies", Kind::RepStr),
    (22, "internalTrafficPolicy", Kind::Str),
];
const SERVICE: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "spec", Kind::Msg(SERVICE_SPEC)),
];
const QUOTA_SPEC: &[Field] = &[(1, "hard", Kind::MapQty), (2, "scopes", Kind::RepStr)];
const RESOURCE_QUOTA: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "spec", Kind::Msg(QUOTA_SPEC)),
];
const PRIORITY_CLASS: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    // `value` has no omitempty in JSON: zero is a value.
    (2, "value", Kind::Int),
    (3, "globalDefault", Kind::Bool0),
    (4, "description", Kind::Str),
    (5, "preemptionPolicy", Kind::Str),
];
const SELF_SUBJECT_REVIEW: &[Field] = &[(1, "metadata", Kind::Msg(OBJECT_META))];

const CROSS_VERSION_REF: &[Field] = &[
    (1, "kind", Kind::Str),
    (2, "name", Kind::Str),
    (3, "apiVersion", Kind::Str),
];
const METRIC_TARGET: &[Field] = &[
    (1, "type", Kind::Str),
    (2, "value", Kind::Qty),
    (3, "averageValue", Kind::Qty),
    (4, "averageUtilization", Kind::Int),
];
const METRIC_ID: &[Field] = &[(1, "name", Kind::Str), (2, "selector", Kind::Msg(LABEL_SELECTOR))];
const OBJECT_METRIC: &[Field] = &[
    (1, "describedObject", Kind::Msg(CROSS_VERSION_REF)),
    (2, "target", Kind::Msg(METRIC_TARGET)),
    (3, "metric", Kind::Msg(METRIC_ID)),
];
const PODS_METRIC: &[Field] = &[
    (1, "metric", Kind::Msg(METRIC_ID)),
    (2, "target", Kind::Msg(METRIC_TARGET)),
];
const RESOURCE_METRIC: &[Field] = &[(1, "name", Kind::Str), (2, "target", Kind::Msg(METRIC_TARGET))];
const CONTAINER_RESOURCE_METRIC: &[Field] = &[
    (1, "name", Kind::Str),
    (2, "target", Kind::Msg(METRIC_TARGET)),
    (3, "container", Kind::Str),
];
const METRIC_SPEC: &[Field] = &[
    (1, "type", Kind::Str),
    (2, "object", Kind::Msg(OBJECT_METRIC)),
    (3, "pods", Kind::Msg(PODS_METRIC)),
    (4, "resource", Kind::Msg(RESOURCE_METRIC)),
    (5, "external", Kind::Msg(PODS_METRIC)),
    (7, "containerResource", Kind::Msg(CONTAINER_RESOURCE_METRIC)),
];
const HPA_SPEC: &[Field] = &[
    (1, "scaleTargetRef", Kind::Msg(CROSS_VERSION_REF)),
    (2, "minReplicas", Kind::Int),
    (3, "maxReplicas", Kind::Int0),
    (4, "metrics", Kind::RepMsg(METRIC_SPEC)),
];
const HPA: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "spec", Kind::Msg(HPA_SPEC)),
];
const PRECONDITIONS: &[Field] = &[(1, "uid", Kind::Str), (2, "resourceVersion", Kind::Str)];
const DELETE_OPTIONS: &[Field] = &[
    (1, "gracePeriodSeconds", Kind::Int),
    (2, "preconditions", Kind::Msg(PRECONDITIONS)),
    (3, "orphanDependents", Kind::Bool),
    (4, "propagationPolicy", Kind::Str),
    (5, "dryRun", Kind::RepStr),
];
const EVICTION: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "deleteOptions", Kind::Msg(DELETE_OPTIONS)),
];
const BINDING: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "target", Kind::Msg(OBJECT_REF)),
];
const SCALE_SPEC: &[Field] = &[(1, "replicas", Kind::Int0)];
const SCALE: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "spec", Kind::Msg(SCALE_SPEC)),
];

fn schema(kind: &str) -> Option<&'static [Field]> {
    Some(match kind {
        "Namespace" => NAMESPACE,
        "ConfigMap" => CONFIG_MAP,
        "Secret" => SECRET,
        "ServiceAccount" => SERVICE_ACCOUNT,
        "SelfSubjectAccessReview" => SSAR,
        "SelfSubjectRulesReview" => SSRR,
        "TokenRequest" => TOKEN_REQUEST,
        "SelfSubjectReview" => SELF_SUBJECT_REVIEW,
        "Deployment" => DEPLOYMENT,
        "Service" => SERVICE,
        "Pod" => POD,
        "Job" => JOB,
        "CronJob" => CRON_JOB,
        "ResourceQuota" => RESOURCE_QUOTA,
        "PriorityClass" => PRIORITY_CLASS,
        "HorizontalPodAutoscaler" => HPA,
        "DeleteOptions" => DELETE_OPTIONS,
        "Eviction" => EVICTION,
        "Binding" => BINDING,
        "Scale" => SCALE,
        _ => return None,
    })
}

/// Decodes an enveloped protobuf body into the JSON form of the object.
pub fn decode(body: &[u8]) -> ApiResult<Value> {
    let bad = |why: &str| ApiError::bad_request(format!("unable to decode protobuf body: {why}"));
    let inner = body
        .strip_prefix(b"k8s\0")
        .ok_or_else(|| bad("missing the k8s envelope magic"))?;
    let env = message(inner, UNKNOWN, "").map_err(|e| e.into_api(&bad))?;
    let kind = env
        .pointer("/typeMeta/kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let api_version = env
        .pointer("/typeMeta/apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let fields = schema(&kind).ok_or_else(|| {
        ApiError::unsupported_media_type(format!(
            "the simulated server reads protobuf only for Namespace, ConfigMap, Secret, ServiceAccount, Service, Pod, Deployment, Job, CronJob, ResourceQuota, PriorityClass, HorizontalPodAutoscaler, Binding, Eviction, Scale, DeleteOptions and review objects, not {kind}; send application/json"
        ))
    })?;
    use base64::Engine;
    let raw = env
        .get("raw")
        .and_then(Value::as_str)
        .map(|b| base64::engine::general_purpose::STANDARD.decode(b))
        .transpose()
        .map_err(|_| bad("raw is not bytes"))?
        .unwrap_or_default();
    let mut obj = message(&raw, fields, "").map_err(|e| e.into_api(&bad))?;
    obj["apiVersion"] = json!(api_version);
    obj["kind"] = json!(kind);
    Ok(obj)
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self.buf.get(self.pos).ok_or("truncated varint")?;
            self.pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint too long".into())
    }

    fn bytes(&mut self) -> Result<&'a [u8], String> {
        let n = usize::try_from(self.varint()?).map_err(|_| "length overflow")?;
        let end = self
            .pos
            .checked_add(n)
            .filter(|e| *e <= self.buf.len())
            .ok_or("truncated field")?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn skip(&mut self, wire: u64) -> Result<(), String> {
        match wire {
            0 => self.varint().map(|_| ()),
            1 => self.advance(8),
            2 => self.bytes().map(|_| ()),
            5 => self.advance(4),
            w => Err(format!("unsupported wire type {w}")),
        }
    }

    fn advance(&mut self, n: usize) -> Result<(), String> {
        self.fixed(n).map(|_| ())
    }

    fn fixed(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.pos + n > self.buf.len() {
            return Err("truncated fixed field".into());
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }
}

fn string(b: &[u8]) -> Result<String, String> {
    String::from_utf8(b.to_vec()).map_err(|_| "string is not UTF-8".to_string())
}

/// Why a body did not decode.
enum DecodeError {
    /// Not well-formed protobuf.
    Malformed(String),
    /// A set field no table lists, by JSON path and field number.
    Unknown(String),
}

impl From<String> for DecodeError {
    fn from(e: String) -> Self {
        DecodeError::Malformed(e)
    }
}

impl From<&str> for DecodeError {
    fn from(e: &str) -> Self {
        DecodeError::Malformed(e.to_string())
    }
}

impl DecodeError {
    fn into_api(self, bad: &dyn Fn(&str) -> ApiError) -> ApiError {
        match self {
            DecodeError::Malformed(e) => bad(&e),
            DecodeError::Unknown(path) => ApiError::unsupported_media_type(format!(
                "the simulated server does not decode the protobuf field {path}; send application/json"
            )),
        }
    }
}

fn map_entry(b: &[u8], value: Kind) -> Result<(String, Value), String> {
    use base64::Engine;
    let mut r = Reader { buf: b, pos: 0 };
    let (mut k, mut v) = (String::new(), Value::String(String::new()));
    while r.pos < b.len() {
        let tag = r.varint()?;
        match (tag >> 3, tag & 7) {
            (1, 2) => k = string(r.bytes()?)?,
            (2, 2) => {
                let raw = r.bytes()?;
                v = match value {
                    Kind::MapBytes => json!(base64::engine::general_purpose::STANDARD.encode(raw)),
                    Kind::MapQty => json!(quantity(raw)?),
                    _ => json!(string(raw)?),
                };
            }
            (_, w) => r.skip(w)?,
        }
    }
    Ok((k, v))
}

/// The string form of a `resource.Quantity` message (`optional string string = 1`).
fn quantity(b: &[u8]) -> Result<String, String> {
    let mut r = Reader { buf: b, pos: 0 };
    let mut out = String::new();
    while r.pos < b.len() {
        let tag = r.varint()?;
        match (tag >> 3, tag & 7) {
            (1, 2) => out = string(r.bytes()?)?,
            (_, w) => r.skip(w)?,
        }
    }
    Ok(out)
}

/// Whether a length-delimited payload is the zero value: empty, or a message whose fields are
/// all zero (Go writes empty strings, zero ints and empty structs of non-pointer fields).
fn all_zero(b: &[u8]) -> bool {
    let mut r = Reader { buf: b, pos: 0 };
    while r.pos < b.len() {
        let Ok(tag) = r.varint() else { return false };
        let zero = match tag & 7 {
            0 => r.varint().is_ok_and(|v| v == 0),
            1 => r.fixed(8).is_ok_and(|f| f.iter().all(|x| *x == 0)),
            5 => r.fixed(4).is_ok_and(|f| f.iter().all(|x| *x == 0)),
            2 => r.bytes().is_ok_and(all_zero),
            _ => false,
        };
        if !zero {
            return false;
        }
    }
    true
}

fn message(b: &[u8], fields: &[Field], path: &str) -> Result<Value, DecodeError> {
    let mut out = Map::new();
    message_into(b, fields, path, &mut out)?;
    Ok(Value::Object(out))
}

fn message_into(b: &[u8], fields: &[Field], path: &str, out: &mut Map<String, Value>) -> Result<(), DecodeError> {
    use base64::Engine;
    let mut r = Reader { buf: b, pos: 0 };
    while r.pos < b.len() {
        let tag = r.varint()?;
        let (num, wire) = (tag >> 3, tag & 7);
        let Some((_, name, kind)) = fields.iter().find(|(n, _, _)| u64::from(*n) == num) else {
            let zero = match wire {
                0 => r.varint()? == 0,
                2 => all_zero(r.bytes()?),
                1 => r.fixed(8)?.iter().all(|x| *x == 0),
                5 => r.fixed(4)?.iter().all(|x| *x == 0),
                w => return Err(format!("unsupported wire type {w}").into()),
            };
            if zero {
                continue;
            }
            let at = if path.is_empty() { "the object" } else { path };
            return Err(DecodeError::Unknown(format!("#{num} of {at}")));
        };
        let key = (*name).to_string();
        let sub = if path.is_empty() {
            key.clone()
        } else {
            format!("{path}.{key}")
        };
        match (kind, wire) {
            (Kind::Str, 2) => {
                // Go's protobuf writes empty strings that JSON's omitempty leaves out.
                let v = string(r.bytes()?)?;
                if !v.is_empty() {
                    out.insert(key, json!(v));
                }
            }
            (Kind::Int0, 0) => {
                let v = r.varint()? as i64;
                if v != 0 {
                    out.insert(key, json!(v));
                }
            }
            (Kind::Bool0, 0) => {
                if r.varint()? != 0 {
                    out.insert(key, json!(true));
                }
            }
            (Kind::IntOrString, 2) => {
                let v = message(
                    r.bytes()?,
                    &[(1, "type", Kind::Int), (2, "int", Kind::Int), (3, "str", Kind::Str)],
                    &sub,
                )?;
                let value = if v.get("type").and_then(Value::as_i64) == Some(1) {
                    v.get("str").cloned().unwrap_or(json!(""))
                } else {
                    v.get("int").cloned().unwrap_or(json!(0))
                };
                out.insert(key, value);
            }
            (Kind::Bytes, 2) => {
                out.insert(key, json!(base64::engine::general_purpose::STANDARD.encode(r.bytes()?)));
            }
            (Kind::Int, 0) => {
                // Go's int32 and int64 are varints of the two's-complement value.
                out.insert(key, json!(r.varint()? as i64));
            }
            (Kind::Bool, 0) => {
                out.insert(key, json!(r.varint()? != 0));
            }
            (Kind::Time, 2) => {
                let t = message(r.bytes()?, &[(1, "s", Kind::Int), (2, "n", Kind::Int)], &sub)?;
                let secs = t.get("s").and_then(Value::as_i64).unwrap_or(0);
                // Go's zero time (year 1) means unset.
                if secs <= -62_135_596_800 || t.get("s").is_none() {
                    continue;
                }
                let ts = jiff::Timestamp::from_second(secs).map_err(|e| e.to_string())?;
                out.insert(key, json!(ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()));
            }
            (Kind::Qty, 2) => {
                let q = quantity(r.bytes()?)?;
                if !q.is_empty() {
                    out.insert(key, json!(q));
                }
            }
            (Kind::Msg(f), 2) => {
                let m = message(r.bytes()?, f, &sub)?;
                out.insert(key, m);
            }
            (Kind::Inline(f), 2) => message_into(r.bytes()?, f, path, out)?,
            (Kind::RepStr, 2) => {
                let s = string(r.bytes()?)?;
                push(out, key, json!(s))?;
            }
            (Kind::RepInt, 0) => {
                let v = r.varint()? as i64;
                push(out, key, json!(v))?;
            }
            (Kind::RepInt, 2) => {
                // Packed form.
                let packed = r.bytes()?;
                let mut p = Reader { buf: packed, pos: 0 };
                while p.pos < packed.len() {
                    let v = p.varint()? as i64;
                    push(out, key.clone(), json!(v))?;
                }
            }
            (Kind::RepMsg(f), 2) => {
                let m = message(r.bytes()?, f, &format!("{sub}[]"))?;
                push(out, key, m)?;
            }
            (Kind::MapStr | Kind::MapBytes | Kind::MapQty, 2) => {
                let (k, v) = map_entry(r.bytes()?, *kind)?;
                out.entry(key)
                    .or_insert_with(|| json!({}))
                    .as_object_mut()
                    .ok_or("not a map")?
                    .insert(k, v);
            }
            (_, w) => return Err(format!("field {sub} has the wrong wire type {w}").into()),
        }
    }
    Ok(())
}

fn push(out: &mut Map<String, Value>, key: String, v: Value) -> Result<(), DecodeError> {
    out.entry(key)
        .or_insert_with(|| json!([]))
        .as_array_mut()
        .ok_or("not a list")?
        .push(v);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(mut v: u64, out: &mut Vec<u8>) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }

    fn field(num: u64, payload: &[u8], out: &mut Vec<u8>) {
        varint(num << 3 | 2, out);
        varint(payload.len() as u64, out);
        out.extend_from_slice(payload);
    }

    #[test]
    fn decodes_an_enveloped_namespace() {
        let mut meta = Vec::new();
        field(1, b"demo", &mut meta);
        let mut label = Vec::new();
        field(1, b"team", &mut label);
        field(2, b"a", &mut label);
        field(11, &label, &mut meta);
        let mut ns = Vec::new();
        field(1, &meta, &mut ns);
        let mut tm = Vec::new();
        field(1, b"v1", &mut tm);
        field(2, b"Namespace", &mut tm);
        let mut env = b"k8s\0".to_vec();
        field(1, &tm, &mut env);
        field(2, &ns, &mut env);
        let v = decode(&env).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo", "labels": {"team": "a"}}})
        );
        assert_eq!(decode(b"nope").unwrap_err().code, 400);
    }

    fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let mut tm = Vec::new();
        field(1, api_version.as_bytes(), &mut tm);
        field(2, kind.as_bytes(), &mut tm);
        let mut env = b"k8s\0".to_vec();
        field(1, &tm, &mut env);
        field(2, raw, &mut env);
        field(3, b"", &mut env);
        env
    }

    fn int_field(num: u64, v: u64, out: &mut Vec<u8>) {
        varint(num << 3, out);
        varint(v, out);
    }

    /// A Job as `kubectl create job` writes it: zero-valued non-pointer fields present, a
    /// Quantity map, an inlined probe handler, and a pointer int that is zero.
    #[test]
    fn decodes_a_job_with_go_zero_values_and_quantities() {
        let mut qty = Vec::new();
        field(1, b"100m", &mut qty);
        let mut entry = Vec::new();
        field(1, b"cpu", &mut entry);
        field(2, &qty, &mut entry);
        let mut resources = Vec::new();
        field(1, &entry, &mut resources);
        let mut exec = Vec::new();
        field(1, b"true", &mut exec);
        let mut handler = Vec::new();
        field(1, &exec, &mut handler);
        let mut probe = Vec::new();
        field(1, &handler, &mut probe);
        int_field(4, 5, &mut probe);
        let mut container = Vec::new();
        field(1, b"j", &mut container);
        field(2, b"busybox", &mut container);
        field(3, b"echo", &mut container);
        field(5, b"", &mut container);
        field(8, &resources, &mut container);
        field(10, &probe, &mut container);
        int_field(16, 0, &mut container);
        // volumeDevices (21) empty: a zero value of a field the tables skip.
        field(21, b"", &mut container);
        let mut spec = Vec::new();
        field(2, &container, &mut spec);
        field(3, b"Never", &mut spec);
        let mut tmeta = Vec::new();
        let mut zero_time = Vec::new();
        int_field(1, (-62_135_596_800i64) as u64, &mut zero_time);
        field(8, &zero_time, &mut tmeta);
        let mut template = Vec::new();
        field(1, &tmeta, &mut template);
        field(2, &spec, &mut template);
        let mut job_spec = Vec::new();
        field(6, &template, &mut job_spec);
        int_field(7, 0, &mut job_spec);
        let mut meta = Vec::new();
        field(1, b"j", &mut meta);
        let mut job = Vec::new();
        field(1, &meta, &mut job);
        field(2, &job_spec, &mut job);
        field(3, b"", &mut job);
        let v = decode(&envelope("batch/v1", "Job", &job)).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {
                "backoffLimit": 0,
                "template": {"metadata": {}, "spec": {"restartPolicy": "Never", "containers": [{
                    "name": "j", "image": "busybox", "command": ["echo"],
                    "resources": {"limits": {"cpu": "100m"}},
                    "livenessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 5},
                }]}}
            }})
        );

        // A set field the tables do not know is refused, never dropped.
        let mut container = Vec::new();
        field(1, b"j", &mut container);
        let mut dev = Vec::new();
        field(1, b"disk", &mut dev);
        field(21, &dev, &mut container);
        let mut spec = Vec::new();
        field(2, &container, &mut spec);
        let mut pod = Vec::new();
        field(2, &spec, &mut pod);
        let err = decode(&envelope("v1", "Pod", &pod)).unwrap_err();
        assert_eq!(err.code, 415, "{}", err.message);
        assert!(err.message.contains("#21 of spec.containers[]"), "{}", err.message);
    }
}
