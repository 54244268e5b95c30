//! The protobuf field tables: for each kind kubectl sends as protobuf, its fields by number,
//! JSON name and `Kind`, transcribed from upstream's `generated.proto`. Data only; one table
//! per message type, nested tables for nested messages.

use super::{Field, Kind};

const TYPE_META: &[Field] = &[(1, "apiVersion", Kind::Str), (2, "kind", Kind::Str)];
pub(super) const UNKNOWN: &[Field] = &[(1, "typeMeta", Kind::Msg(TYPE_META)), (2, "raw", Kind::Bytes)];
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
    (9, "deletionTimestamp", Kind::Time),
    (10, "deletionGracePeriodSeconds", Kind::Int),
    (11, "labels", Kind::MapStr),
    (12, "annotations", Kind::MapStr),
    (13, "ownerReferences", Kind::RepMsg(OWNER_REF)),
    (14, "finalizers", Kind::RepStr),
    (17, "managedFields", Kind::RepMsg(MANAGED_FIELDS_ENTRY)),
];
/// `ManagedFieldsEntry`: objects read with server-side apply's bookkeeping come back with it
/// (`kubectl certificate approve` sends the whole object it read).
const MANAGED_FIELDS_ENTRY: &[Field] = &[
    (1, "manager", Kind::Str),
    (2, "operation", Kind::Str),
    (3, "apiVersion", Kind::Str),
    (4, "time", Kind::Time),
    (6, "fieldsType", Kind::Str),
    (7, "fieldsV1", Kind::RawJson),
    (8, "subresource", Kind::Str),
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
// rbac.authorization.k8s.io/v1
const POLICY_RULE: &[Field] = &[
    (1, "verbs", Kind::RepStr),
    (2, "apiGroups", Kind::RepStr),
    (3, "resources", Kind::RepStr),
    (4, "resourceNames", Kind::RepStr),
    (5, "nonResourceURLs", Kind::RepStr),
];
const ROLE: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "rules", Kind::RepMsg(POLICY_RULE)),
];
const AGGREGATION_RULE: &[Field] = &[(1, "clusterRoleSelectors", Kind::RepMsg(LABEL_SELECTOR))];
const CLUSTER_ROLE: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "rules", Kind::RepMsg(POLICY_RULE)),
    (3, "aggregationRule", Kind::Msg(AGGREGATION_RULE)),
];
const SUBJECT: &[Field] = &[
    (1, "kind", Kind::Str),
    (2, "apiGroup", Kind::Str),
    (3, "name", Kind::Str),
    (4, "namespace", Kind::Str),
];
const ROLE_REF: &[Field] = &[
    (1, "apiGroup", Kind::Str),
    (2, "kind", Kind::Str),
    (3, "name", Kind::Str),
];
const ROLE_BINDING: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "subjects", Kind::RepMsg(SUBJECT)),
    (3, "roleRef", Kind::Msg(ROLE_REF)),
];
// authorization.k8s.io/v1 SubjectAccessReview (its `extra` map is not transcribed).
const SAR_SPEC: &[Field] = &[
    (1, "resourceAttributes", Kind::Msg(RESOURCE_ATTRS)),
    (2, "nonResourceAttributes", Kind::Msg(NON_RESOURCE_ATTRS)),
    (3, "user", Kind::Str),
    (4, "groups", Kind::RepStr),
    (6, "uid", Kind::Str),
];
const SAR: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "spec", Kind::Msg(SAR_SPEC)),
];
// authentication.k8s.io/v1 TokenReview
const TOKEN_REVIEW_SPEC: &[Field] = &[(1, "token", Kind::Str), (2, "audiences", Kind::RepStr)];
const TOKEN_REVIEW: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "spec", Kind::Msg(TOKEN_REVIEW_SPEC)),
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

const CSR_SPEC: &[Field] = &[
    (1, "request", Kind::Bytes),
    (2, "username", Kind::Str),
    (3, "uid", Kind::Str),
    (4, "groups", Kind::RepStr),
    (5, "usages", Kind::RepStr),
    (7, "signerName", Kind::Str),
    (8, "expirationSeconds", Kind::Int),
];
const CSR_CONDITION: &[Field] = &[
    (1, "type", Kind::Str),
    (2, "reason", Kind::Str),
    (3, "message", Kind::Str),
    (4, "lastUpdateTime", Kind::Time),
    (5, "lastTransitionTime", Kind::Time),
    (6, "status", Kind::Str),
];
const CSR_STATUS: &[Field] = &[
    (1, "conditions", Kind::RepMsg(CSR_CONDITION)),
    (2, "certificate", Kind::Bytes),
];
/// `kubectl certificate approve|deny` updates the approval subresource with protobuf.
const CSR: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "spec", Kind::Msg(CSR_SPEC)),
    (3, "status", Kind::Msg(CSR_STATUS)),
];

pub(super) fn schema(kind: &str) -> Option<&'static [Field]> {
    Some(match kind {
        "Namespace" => NAMESPACE,
        "ConfigMap" => CONFIG_MAP,
        "Secret" => SECRET,
        "ServiceAccount" => SERVICE_ACCOUNT,
        "SelfSubjectAccessReview" => SSAR,
        "SelfSubjectRulesReview" => SSRR,
        "TokenRequest" => TOKEN_REQUEST,
        "SelfSubjectReview" => SELF_SUBJECT_REVIEW,
        "Role" => ROLE,
        "ClusterRole" => CLUSTER_ROLE,
        "RoleBinding" | "ClusterRoleBinding" => ROLE_BINDING,
        "SubjectAccessReview" | "LocalSubjectAccessReview" => SAR,
        "TokenReview" => TOKEN_REVIEW,
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
        "CertificateSigningRequest" => CSR,
        _ => return None,
    })
}
