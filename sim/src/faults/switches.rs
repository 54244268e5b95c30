//! The table of every fault switch: its name, its argument and what it breaks.

/// Whether a switch takes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg {
    /// A plain flag: `dns-stopped`.
    None,
    /// One or more values, each given as its own entry: `blackhole=win-1,blackhole=win-2`.
    Value(&'static str),
}

/// One fault switch: name, argument and what it breaks (shown in `--help` and errors).
#[derive(Debug, Clone, Copy)]
pub struct Switch {
    /// The name used in `--faults`.
    pub name: &'static str,
    /// Its argument.
    pub arg: Arg,
    /// What turning it on breaks.
    pub breaks: &'static str,
}

/// Every switch the simulator knows.
pub const SWITCHES: &[Switch] = &[
    Switch {
        name: "api-errors",
        arg: Arg::Value("[CODE:]PERCENT"),
        breaks: "transient: answers PERCENT of the API requests that are not long-running with CODE, \
                 as kube-apiserver does: 429 with Retry-After (throttling), 500 InternalError (a storage \
                 timeout), 503 with Retry-After (a draining server), 504 Timeout; PERCENT alone is an even \
                 mix of the four; repeat for several codes",
    },
    Switch {
        name: "conn-reset",
        arg: Arg::Value("PERCENT"),
        breaks: "transient: resets the connection of PERCENT of the API requests that are not long-running \
                 mid-response (after the request took effect: a load balancer or apiserver dying mid-write)",
    },
    Switch {
        name: "api-latency",
        arg: Arg::Value("DURATION"),
        breaks: "transient: latency spikes: 2% of API requests wait DURATION to 1.5 x DURATION before they \
                 are served, so p99 latency is DURATION (an overloaded apiserver or etcd)",
    },
    Switch {
        name: "api-down",
        arg: Arg::Value("DOWN/EVERY"),
        breaks: "transient: the API server restarts: for DOWN every EVERY (the first EVERY/2 in) every \
                 connection is dropped and new ones are refused, then it serves again with the same state",
    },
    Switch {
        name: "watch-cut",
        arg: Arg::Value("EVERY"),
        breaks: "transient: every EVERY the API server ends every open watch; every third cut also compacts \
                 the watch history, so watches resumed from an older resourceVersion get 410 Gone",
    },
    Switch {
        name: "node-flap",
        arg: Arg::Value("NODE:DOWN/EVERY"),
        breaks: "transient: NODE's kubelet reports NotReady (PLEG not healthy) for DOWN every EVERY (the \
                 first EVERY/2 in) and defers new pod work meanwhile; its pods keep running and stay Ready \
                 (as upstream, whose node lifecycle controller marks pods not ready only on unreachable \
                 nodes); the controller taints it not-ready (NoSchedule, NoExecute) until it is Ready again",
    },
    Switch {
        name: "node-lost",
        arg: Arg::Value("NODE:AFTER"),
        breaks: "NODE stops for good AFTER into the run: no more status or lease, its pods unreachable; the \
                 node lifecycle controller marks it Ready=Unknown, taints it unreachable and marks its pods \
                 not ready once the grace period (50 s) has passed",
    },
    Switch {
        name: "pull-fail-once",
        arg: Arg::None,
        breaks: "transient: the first pull of each image on each node fails with a registry error (503 from \
                 the registry); the kubelet's retry after back-off succeeds",
    },
    Switch {
        name: "dns-servfail",
        arg: Arg::Value("PERCENT"),
        breaks: "transient: the cluster DNS answers PERCENT of queries with SERVFAIL",
    },
    Switch {
        name: "blackhole",
        arg: Arg::Value("NODE"),
        breaks: "drops all traffic to and from the pods of NODE (a dead CNI on that node)",
    },
    Switch {
        name: "node-tainted",
        arg: Arg::Value("NODE"),
        breaks: "NODE's kubelet registers with the taint dedicated=e2e-fault:NoSchedule (kubelet \
                 --register-with-taints: a node kept for other workloads), so pods without a matching \
                 toleration stay off it and it no longer counts as an untainted schedulable node",
    },
    Switch {
        name: "kube-proxy-off",
        arg: Arg::Value("NODE"),
        breaks: "kube-proxy stopped on NODE: its NodePorts refuse and its pods cannot reach ClusterIPs",
    },
    Switch {
        name: "dns-stopped",
        arg: Arg::None,
        breaks: "the cluster DNS stops answering (queries time out)",
    },
    Switch {
        name: "stats-missing",
        arg: Arg::Value("cpuUsageCoreNanoSeconds|memoryWorkingSetBytes|logsAvailableBytes"),
        breaks: "removes that field from every /stats/summary answer",
    },
    Switch {
        name: "pull-policy-ignored",
        arg: Arg::None,
        breaks: "the runtime ignores imagePullPolicy (Never pulls, Always uses the cache)",
    },
    Switch {
        name: "read-only-writable",
        arg: Arg::None,
        breaks: "read-only volume mounts accept writes",
    },
    Switch {
        name: "rootfs-read-only",
        arg: Arg::None,
        breaks: "the runtime mounts every container's root filesystem read-only, whatever readOnlyRootFilesystem says",
    },
    Switch {
        name: "limits-not-applied",
        arg: Arg::None,
        breaks: "the runtime does not enforce CPU limits",
    },
    Switch {
        name: "controller-stopped",
        arg: Arg::Value(
            "scheduler|namespace|serviceaccount|endpoints|replicaset|deployment|daemonset|statefulset|job|cronjob|garbagecollector|resourcequota|nodelifecycle|disruption|clusterrole-aggregation|serviceaccount-token|endpointslice-mirroring|taint-eviction",
        ),
        breaks: "that control-plane loop never runs (as if kube-controller-manager lost it)",
    },
    Switch {
        name: "endpoints-emptied",
        arg: Arg::None,
        breaks: "the endpoints controller publishes every Service's Endpoints and EndpointSlices with no addresses",
    },
    Switch {
        name: "session-affinity-ignored",
        arg: Arg::None,
        breaks: "kube-proxy ignores sessionAffinity ClientIP and balances every connection",
    },
    Switch {
        name: "external-unreachable",
        arg: Arg::None,
        breaks: "pod traffic to the outside world is dropped (no outbound NAT); ping included",
    },
    Switch {
        name: "admission-off",
        arg: Arg::Value(
            "LimitRanger|ResourceQuota|ServiceAccount|MutatingAdmissionWebhook|ValidatingAdmissionWebhook|ValidatingAdmissionPolicy|RuntimeClass",
        ),
        breaks: "the API server runs without that admission plugin (no LimitRange defaults and limits, no quota enforcement, no service account token volume, no mutating or validating admission webhook calls, no ValidatingAdmissionPolicy enforcement, pods naming a missing RuntimeClass admitted and no overhead copied from their class)",
    },
    Switch {
        name: "webhook-timeout-ignored",
        arg: Arg::None,
        breaks: "the API server waits for an admission webhook's answer whatever its timeoutSeconds (up to the \
                 request's 60 s limit), as if the call had no deadline",
    },
    Switch {
        name: "webhooks-skip-custom-resources",
        arg: Arg::None,
        breaks: "the API server never offers requests on custom objects to admission webhooks (a custom-resource \
                 handler without the webhook admission chain): webhooks matching them are never called",
    },
    Switch {
        name: "webhooks-skip-connect",
        arg: Arg::None,
        breaks: "the API server never offers CONNECT requests (exec, attach, port-forward, proxy) to admission \
                 webhooks: a webhook denying pods/attach is never asked",
    },
    Switch {
        name: "webhooks-skip-crds",
        arg: Arg::None,
        breaks: "the API server never offers CustomResourceDefinition writes to admission webhooks: a webhook \
                 denying CRD creation is never asked",
    },
    Switch {
        name: "webhook-configurations-not-exempt",
        arg: Arg::None,
        breaks: "the API server offers writes of admissionregistration.k8s.io objects (webhook configurations, \
                 policies) to admission webhooks like any other kind, so a webhook can mutate them or block \
                 their deletion",
    },
    Switch {
        name: "webhook-patches-unpruned",
        arg: Arg::None,
        breaks: "the API server stores what a mutating webhook's patch adds to a custom object even where the \
                 CRD's structural schema does not declare it (no pruning after admission)",
    },
    Switch {
        name: "volume-updates-stopped",
        arg: Arg::None,
        breaks: "kubelets never resync ConfigMap, Secret, downward API and projected volume contents after the pod starts",
    },
    Switch {
        name: "hooks-ignored",
        arg: Arg::None,
        breaks: "the kubelet never runs postStart/preStop lifecycle hooks",
    },
    Switch {
        name: "ephemeral-containers-ignored",
        arg: Arg::None,
        breaks: "kubelets never start ephemeral containers (a kubelet from before 1.23, when the EphemeralContainers \
                 gate was off by default): the API takes them, the pod never reports them running",
    },
    Switch {
        name: "prestop-on-exit",
        arg: Arg::None,
        breaks: "the kubelet runs a container's preStop hook when the container exits on its own, before it \
                 records the exit: a finished container's finishedAt comes a preStop sleep late",
    },
    Switch {
        name: "hook-scheme-ignored",
        arg: Arg::None,
        breaks: "the kubelet sends httpGet lifecycle hooks as plain HTTP whatever their scheme (a kubelet from \
                 before ConsistentHTTPGetHandlers, 1.22): an HTTPS hook server never sees the request",
    },
    Switch {
        name: "readiness-gates-ignored",
        arg: Arg::None,
        breaks: "the kubelet reports a pod Ready once its containers are, ignoring spec.readinessGates (a kubelet \
                 from before pod readiness gates, 1.11)",
    },
    Switch {
        name: "exec-probe-timeout-ignored",
        arg: Arg::None,
        breaks: "exec probes run to their end whatever their timeoutSeconds (the kubelet before 1.20, or with \
                 the ExecProbeTimeout gate off)",
    },
    Switch {
        name: "pod-os-admission-off",
        arg: Arg::None,
        breaks: "kubelets admit pods whose `kubernetes.io/os` node selector or `spec.os.name` names another OS",
    },
    Switch {
        name: "kubelet-host-port-admission-off",
        arg: Arg::None,
        breaks: "kubelets admit a pod whose host port an active pod of the node already holds (no NodePorts \
                 predicate in the kubelet's admission), so a pod bound past the scheduler is never rejected",
    },
    Switch {
        name: "probes-ignored",
        arg: Arg::None,
        breaks: "the kubelet never runs probes: containers are ready at once and never restarted by liveness",
    },
    Switch {
        name: "probe-grace-ignored",
        arg: Arg::None,
        breaks: "the kubelet ignores a liveness or startup probe's own terminationGracePeriodSeconds and kills \
                 the container it restarts after the pod's grace period",
    },
    Switch {
        name: "exit-codes-lost",
        arg: Arg::None,
        breaks: "the runtime loses exit codes: every terminated container reports exit code 0 (Completed)",
    },
    Switch {
        name: "termination-message-lost",
        arg: Arg::None,
        breaks: "the kubelet never fills state.terminated.message (neither from the file nor from logs)",
    },
    Switch {
        name: "deadline-ignored",
        arg: Arg::None,
        breaks: "the kubelet never enforces a pod's activeDeadlineSeconds",
    },
    Switch {
        name: "cronjob-concurrency-forced",
        arg: Arg::Value("Allow|Forbid|Replace"),
        breaks: "the CronJob controller ignores each CronJob's concurrencyPolicy and applies this one to all",
    },
    Switch {
        name: "cronjob-suspend-ignored",
        arg: Arg::None,
        breaks: "the CronJob controller ignores spec.suspend and keeps starting Jobs",
    },
    Switch {
        name: "gc-ignores-orphan",
        arg: Arg::None,
        breaks: "the garbage collector removes the `orphan` finalizer without releasing the dependents, so an \
                 owner deleted with propagationPolicy Orphan takes its dependents with it",
    },
    Switch {
        name: "gc-foreground-ignored",
        arg: Arg::None,
        breaks: "the garbage collector removes the `foregroundDeletion` finalizer at once: an owner deleted in \
                 the foreground goes before its blocking dependents, which follow in the background",
    },
    Switch {
        name: "gc-ignores-other-owners",
        arg: Arg::None,
        breaks: "the garbage collector deletes a dependent as soon as one of its owners is gone or waits for \
                 its dependents, though another owner is still valid",
    },
    Switch {
        name: "gc-cycles-block",
        arg: Arg::None,
        breaks: "the garbage collector has no circle detection: a ring of owner references with \
                 blockOwnerDeletion deleted in the foreground waits on itself forever",
    },
    Switch {
        name: "namespace-content-left",
        arg: Arg::None,
        breaks: "the namespace controller finalizes a terminating namespace without deleting its content \
                 (a discovery that came back empty): the objects stay stored and reappear in a namespace of \
                 the same name",
    },
    Switch {
        name: "job-backoff-ignored",
        arg: Arg::None,
        breaks: "the Job controller never applies backoffLimit: failed pods are replaced forever",
    },
    Switch {
        name: "job-index-hostname-dropped",
        arg: Arg::None,
        breaks: "the Job controller leaves spec.hostname of an Indexed Job's pods unset (instead of \
                 JOB-INDEX), so they are not addressable by index",
    },
    Switch {
        name: "job-completions-ignored",
        arg: Arg::None,
        breaks: "the Job controller treats every Job as a work queue: it completes once a pod succeeds and none runs",
    },
    Switch {
        name: "job-pod-failure-policy-ignored",
        arg: Arg::None,
        breaks: "the Job controller ignores podFailurePolicy (as with the JobPodFailurePolicy gate off): no \
                 FailJob on a matching exit code, every failure counts against backoffLimit",
    },
    Switch {
        name: "statefulset-unordered",
        arg: Arg::None,
        breaks: "the StatefulSet controller creates and deletes pods all at once, ignoring OrderedReady and readiness",
    },
    Switch {
        name: "revision-history-limit-ignored",
        arg: Arg::None,
        breaks: "the Deployment controller keeps every old ReplicaSet, whatever revisionHistoryLimit says",
    },
    Switch {
        name: "deployment-recreate-ignored",
        arg: Arg::None,
        breaks: "the Deployment controller rolls Recreate Deployments like RollingUpdate (new pods start before old ones go)",
    },
    Switch {
        name: "deployment-proportional-off",
        arg: Arg::None,
        breaks: "the Deployment controller does not scale proportionally: a change of spec.replicas during a \
                 rollout goes to the new ReplicaSet alone (within maxSurge), the old ones keep their size",
    },
    Switch {
        name: "daemonset-ignores-node-selector",
        arg: Arg::None,
        breaks: "the DaemonSet controller creates a daemon pod for every node, ignoring the template's nodeSelector and affinity",
    },
    Switch {
        name: "daemonset-failed-pods-kept",
        arg: Arg::None,
        breaks: "the DaemonSet controller leaves Failed daemon pods in place instead of replacing them",
    },
    Switch {
        name: "revisions-not-written",
        arg: Arg::Value("daemonset|statefulset"),
        breaks: "that controller writes no ControllerRevisions for its template history (its pods still get a \
                 controller-revision-hash label), as a kube-controller-manager whose history writes are lost",
    },
    Switch {
        name: "rollout-stuck",
        arg: Arg::Value("daemonset|statefulset"),
        breaks: "that controller ignores template changes: pods of an old template are never replaced \
                 (new pods still get the new template), as a controller stuck on its old revision",
    },
    Switch {
        name: "statefulset-parallel-ignored",
        arg: Arg::None,
        breaks: "the StatefulSet controller manages Parallel sets as OrderedReady: it creates one pod at a time and \
                 halts while one is unready",
    },
    Switch {
        name: "statefulset-partition-ignored",
        arg: Arg::None,
        breaks: "the StatefulSet controller ignores rollingUpdate.partition: it rolls every ordinal to the update \
                 revision and recreates deleted pods there, so canaries and phased roll-outs update everything",
    },
    Switch {
        name: "statefulset-failed-pods-kept",
        arg: Arg::None,
        breaks: "the StatefulSet controller leaves Failed and Succeeded stateful pods in place instead of deleting \
                 and recreating them (a pod its node rejected or evicted never comes back)",
    },
    Switch {
        name: "run-as-username-ignored",
        arg: Arg::None,
        breaks: "the Windows runtime ignores runAsUserName: containers run as the image's default user",
    },
    Switch {
        name: "termination-stuck",
        arg: Arg::None,
        breaks: "the kubelet never acts on a pod's deletion: containers keep running and the pod stays Terminating",
    },
    Switch {
        name: "host-ip-unreported",
        arg: Arg::None,
        breaks: "the kubelet reports no status.hostIP/hostIPs for its pods (no usable node IP)",
    },
    Switch {
        name: "exec-broken",
        arg: Arg::None,
        breaks: "the container runtime's exec fails: kubectl exec, exec probes and exec hooks all error",
    },
    Switch {
        name: "logs-lost",
        arg: Arg::None,
        breaks: "the runtime never records container output: every container log is empty",
    },
    Switch {
        name: "service-env-missing",
        arg: Arg::None,
        breaks: "the kubelet injects no Service environment variables (FOO_SERVICE_HOST...) into containers",
    },
    Switch {
        name: "init-containers-skipped",
        arg: Arg::None,
        breaks: "the kubelet starts app containers without running the pod's init containers",
    },
    Switch {
        name: "fallback-to-logs-always",
        arg: Arg::None,
        breaks: "FallbackToLogsOnError uses the log tail as termination message even when the container succeeded",
    },
    Switch {
        name: "env-expansion-off",
        arg: Arg::None,
        breaks: "the kubelet passes $(VAR) references in command, args and env values through unexpanded",
    },
    Switch {
        name: "downward-env-missing",
        arg: Arg::None,
        breaks: "the kubelet resolves downward API env vars (fieldRef, resourceFieldRef) to empty strings",
    },
    Switch {
        name: "boot-id-missing",
        arg: Arg::None,
        breaks: "the kubelet reports an empty node.status.nodeInfo.bootID",
    },
    Switch {
        name: "run-as-non-root-ignored",
        arg: Arg::None,
        breaks: "the kubelet never verifies runAsNonRoot: root users start",
    },
    Switch {
        name: "pull-secrets-ignored",
        arg: Arg::None,
        breaks: "the kubelet passes no imagePullSecrets credentials to the runtime",
    },
    Switch {
        name: "registry-auth-off",
        arg: Arg::None,
        breaks: "private registries serve their images without credentials (misconfigured public)",
    },
    Switch {
        name: "host-network-allowed",
        arg: Arg::None,
        breaks: "Windows kubelets create hostNetwork sandboxes for pods that are not HostProcess pods",
    },
    Switch {
        name: "hostprocess-unsupported",
        arg: Arg::None,
        breaks: "Windows runtimes without HostProcess (job) containers, as containerd before 1.6: their sandboxes fail",
    },
    Switch {
        name: "hyperv-isolation-ignored",
        arg: Arg::None,
        breaks: "Windows runtimes run pods of the runhcs-wcow-hypervisor handler process-isolated (a shim that \
                 drops the utility VM request): no utility VM appears in Get-ComputeProcess",
    },
    Switch {
        name: "eviction-manager-off",
        arg: Arg::None,
        breaks: "kubelets whose eviction manager never runs: a node out of memory reports no MemoryPressure \
                 and evicts no pod",
    },
    Switch {
        name: "eviction-events-lost",
        arg: Arg::None,
        breaks: "kubelets that evict pods for memory pressure without recording the Evicted event on the pod",
    },
    Switch {
        name: "hostprocess-mountpoint-unexpanded",
        arg: Arg::None,
        breaks: "containerd 1.6 Windows nodes leave %CONTAINER_SANDBOX_MOUNT_POINT% and $env:CONTAINER_SANDBOX_MOUNT_POINT \
                 in a HostProcess container's command line and working directory: programs named through them \
                 are not found",
    },
    Switch {
        name: "gmsa-credspec-dropped",
        arg: Arg::None,
        breaks: "Windows kubelets never pass GMSA credential specs to the runtime: no container is domain-joined",
    },
    Switch {
        name: "domain-controller-down",
        arg: Arg::None,
        breaks: "the simulated Active Directory domain controller (--gmsa-domain) stops answering: domain-joined \
                 containers have no logon server (nltest /QUERY) and its SMB share is unreachable",
    },
    Switch {
        name: "image-cache-off",
        arg: Arg::None,
        breaks: "the runtime keeps no image store: no image is ever present on a node",
    },
    Switch {
        name: "registry-unreachable",
        arg: Arg::None,
        breaks: "nodes cannot reach any registry: every pull fails with an i/o timeout",
    },
    Switch {
        name: "pull-errors-hidden",
        arg: Arg::None,
        breaks: "the kubelet reports failing pulls as ContainerCreating (no ErrImagePull/ImagePullBackOff)",
    },
    Switch {
        name: "slow-container-starts",
        arg: Arg::None,
        breaks: "every sandbox + container start takes 35 s longer (an overloaded node)",
    },
    Switch {
        name: "errors-unexplained",
        arg: Arg::None,
        breaks: "the runtime reports pull and container-create failures as \"unknown error\", without their cause",
    },
    Switch {
        name: "volume-content-missing",
        arg: Arg::None,
        breaks: "kubelets mount ConfigMap, Secret, downward API and projected volumes empty (no files published)",
    },
    Switch {
        name: "container-command-ignored",
        arg: Arg::None,
        breaks: "the container runtime ignores a container's `command` and keeps the image's ENTRYPOINT",
    },
    Switch {
        name: "image-entrypoint-ignored",
        arg: Arg::None,
        breaks: "the container runtime drops the image's ENTRYPOINT: a container without `command` runs \
                 its args (or the image's CMD) as the whole command line",
    },
    Switch {
        name: "image-files-missing",
        arg: Arg::None,
        breaks: "the runtime unpacks images with their programs but without the files their Dockerfiles \
                 COPY (agnhost's localhost certificate pair, the update-demo images' data.json and picture): \
                 a file-serving image answers 404",
    },
    Switch {
        name: "emptydir-not-shared",
        arg: Arg::None,
        breaks: "each container of a pod gets a private emptyDir instead of the pod's shared one",
    },
    Switch {
        name: "memory-volume-size-ignored",
        arg: Arg::None,
        breaks: "Linux kubelets size a memory-backed emptyDir's tmpfs to node allocatable memory, ignoring its \
                 sizeLimit and the pod's memory limit (SizeMemoryBackedVolumes off)",
    },
    Switch {
        name: "named-pipes-as-directories",
        arg: Arg::None,
        breaks: "Windows kubelets mount a hostPath named pipe (\\\\.\\pipe\\NAME) as an empty directory instead of mapping the host's pipe (a runtime without named-pipe support)",
    },
    Switch {
        name: "unsupported-mounts-accepted",
        arg: Arg::None,
        breaks: "Windows kubelets silently accept emptyDir medium HugePages instead of failing the container",
    },
    Switch {
        name: "subpath-ignored",
        arg: Arg::None,
        breaks: "kubelets mount the whole volume where a volume mount names a subPath",
    },
    Switch {
        name: "allocatable-misreported",
        arg: Arg::None,
        breaks: "kubelets report allocatable memory equal to capacity (no reservations or eviction thresholds)",
    },
    Switch {
        name: "linux-fields-enforced",
        arg: Arg::None,
        breaks: "Windows runtimes fail containers that carry Linux-only securityContext fields instead of ignoring them",
    },
    Switch {
        name: "scheduler-filter-off",
        arg: Arg::Value("NodeAffinity|NodePorts|NodeResourcesFit|TaintToleration"),
        breaks: "the scheduler runs without that filter plugin (a KubeSchedulerConfiguration profile that \
                 lists it under plugins.filter.disabled): pods land on nodes their node selector or affinity, \
                 host ports, resource requests or taints rule out",
    },
    Switch {
        name: "taint-eviction-ignores",
        arg: Arg::Value("toleration-seconds|removal"),
        breaks: "the taint eviction controller reads every tolerationSeconds as 0, so a pod tolerating a NoExecute \
                 taint for a while is evicted at once, or keeps a scheduled eviction when its node's NoExecute taints \
                 are removed",
    },
    Switch {
        name: "preemption-off",
        arg: Arg::None,
        breaks: "the scheduler never preempts lower-priority pods for a pod that does not fit",
    },
    Switch {
        name: "validation-off",
        arg: Arg::Value("config-keys|immutable|match-conditions"),
        breaks: "the API server stops validating ConfigMap/Secret data keys, lets immutable ConfigMaps/Secrets (and a \
                 PriorityClass's value or preemptionPolicy) change, or stores webhook matchConditions whose CEL does \
                 not compile",
    },
    Switch {
        name: "field-dropped",
        arg: Arg::Value("RESOURCE:PATH"),
        breaks: "the API server drops field PATH (dotted, such as status.message) of RESOURCE (a plural such as \
                 pods) from every update it stores, as a server that does not know the field drops it on decoding",
    },
    Switch {
        name: "aggregator-front-proxy-off",
        arg: Arg::None,
        breaks: "kube-apiserver runs without --proxy-client-cert-file: the aggregator sends no X-Remote-User / \
                 X-Remote-Group headers to aggregated API servers, which then see every proxied request (the \
                 availability check's too) as system:anonymous and refuse it",
    },
    Switch {
        name: "impersonation-ignored",
        arg: Arg::None,
        breaks: "a proxy in front of the API server strips the Impersonate-* headers: requests run as the \
                 caller instead of the user they impersonate",
    },
    Switch {
        name: "match-conditions-dropped",
        arg: Arg::None,
        breaks: "the API server drops webhook configurations' matchConditions on write and calls those webhooks \
                 for every request (the AdmissionWebhookMatchConditions gate off)",
    },
    Switch {
        name: "config-env-missing",
        arg: Arg::None,
        breaks: "the kubelet drops environment variables from ConfigMaps and Secrets (configMapKeyRef, secretKeyRef, envFrom)",
    },
    Switch {
        name: "root-ca-unpublished",
        arg: Arg::None,
        breaks: "kube-controller-manager's root-ca-cert-publisher is stopped: namespaces get no kube-root-ca.crt \
                 ConfigMap, and a deleted or edited one is never restored",
    },
    Switch {
        name: "oidc-jwks-stale",
        arg: Arg::None,
        breaks: "the ServiceAccount issuer's key set (/openid/v1/jwks, and the discovery document) still \
                 publishes the key from before a signing-key rotation: tokens carry a kid it does not list \
                 and verify against none of its keys",
    },
    Switch {
        name: "eviction-budget-ignored",
        arg: Arg::None,
        breaks: "the pods/eviction subresource deletes the pod without consulting its PodDisruptionBudget \
                 (never 429 with the DisruptionBudget cause), as a plain DELETE would",
    },
    Switch {
        name: "writes-lost",
        arg: Arg::Value("RESOURCE/VERB"),
        breaks: "the API server acknowledges VERB (patch, update or deletecollection) on RESOURCE (a plural \
                 such as events, or a subresource such as replicasets/status) but its storage keeps the objects as they were (a write path that loses \
                 writes): patch and update answer with the unchanged object, deletecollection lists what it \
                 selected and deletes nothing",
    },
    Switch {
        name: "dns-config-searches-ignored",
        arg: Arg::None,
        breaks: "the kubelet/CNI configures pods without the search suffixes and options of their dnsConfig \
                 (nameservers still applied), as Windows CNIs that drop the pod's DNS search list do",
    },
    Switch {
        name: "etc-hosts-unmanaged",
        arg: Arg::None,
        breaks: "the kubelet does not manage Linux containers' /etc/hosts: the image's hosts file is left in \
                 place, without the kubelet's header, the pod's own IP, hostname and FQDN entry or host aliases",
    },
    Switch {
        name: "host-aliases-ignored",
        arg: Arg::None,
        breaks: "the kubelet leaves spec.hostAliases out of the hosts file it writes for Linux containers",
    },
    Switch {
        name: "subpath-expr-ignored",
        arg: Arg::None,
        breaks: "the kubelet ignores volume mounts' subPathExpr: the whole volume is mounted, nothing is expanded or checked",
    },
    Switch {
        name: "binary-data-dropped",
        arg: Arg::None,
        breaks: "kubelets publish only a ConfigMap's text data in its volumes, not its binaryData",
    },
    Switch {
        name: "hostpath-read-only",
        arg: Arg::None,
        breaks: "containers cannot write to hostPath volumes (as under an SELinux policy or a read-only host filesystem)",
    },
    Switch {
        name: "bootstrap-controller-off",
        arg: Arg::Value("all|endpoints"),
        breaks: "the API server's bootstrap controller does not publish where it listens: `all`, its post-start \
                 hook never ran (no default/kubernetes Service, Endpoints or EndpointSlice); `endpoints`, its \
                 endpoint reconciler is off (--endpoint-reconciler-type=none: the Service without Endpoints or \
                 EndpointSlice)",
    },
    Switch {
        name: "pod-os-validation-off",
        arg: Arg::None,
        breaks: "the API server accepts Linux-only and privileged fields on pods with spec.os.name windows, \
                 and any container lifecycle.stopSignal whatever the pod's OS (no spec.os.name cross-checks)",
    },
    Switch {
        name: "container-restart-policy-ignored",
        arg: Arg::None,
        breaks: "the kubelets ignore a container's own restartPolicy and restartPolicyRules (a kubelet \
                 without ContainerRestartRules): every container restarts as the pod's restartPolicy says",
    },
    Switch {
        name: "restart-rules-match-any",
        arg: Arg::None,
        breaks: "the kubelets take every Restart rule of a container's restartPolicyRules as matching, \
                 whatever the exit code: a container with rules restarts on any exit",
    },
    Switch {
        name: "restart-policy-fallback-never",
        arg: Arg::None,
        breaks: "the kubelets never restart a container that has no restartPolicy of its own, instead \
                 of following the pod's restartPolicy",
    },
    Switch {
        name: "windows-stop-signals-refused",
        arg: Arg::None,
        breaks: "the API server refuses every container lifecycle.stopSignal of a Windows pod, SIGTERM and \
                 SIGKILL included (a Windows list left empty), when the ContainerStopSignals gate is on",
    },
    Switch {
        name: "crd-establishing-stopped",
        arg: Arg::None,
        breaks: "the apiextensions establishing controller never runs: CRDs get their names accepted but never become Established",
    },
    Switch {
        name: "crd-storage-defaulting-off",
        arg: Arg::None,
        breaks: "the API server defaults custom objects only on requests, not when reading them from storage, \
                 so a default added to a CRD's schema never shows on objects stored before it",
    },
    Switch {
        name: "field-validation-ignored",
        arg: Arg::None,
        breaks: "the API server ignores the fieldValidation parameter (as one without server-side field \
                 validation): unknown and duplicate fields are dropped silently even under Strict",
    },
    Switch {
        name: "apply-unsupported",
        arg: Arg::None,
        breaks: "the API server has no server-side apply (the ServerSideApply feature off): a PATCH with \
                 application/apply-patch+yaml answers 415 Unsupported Media Type",
    },
    Switch {
        name: "crd-apply-untyped",
        arg: Arg::None,
        breaks: "server-side apply of custom objects uses a deduced (untyped) schema, as upstream does for a \
                 CRD schema it cannot convert: fields the CRD schema does not declare are not refused by the apply",
    },
    Switch {
        name: "crd-preserve-unknown-ignored",
        arg: Arg::None,
        breaks: "the API server ignores x-kubernetes-preserve-unknown-fields in CRD schemas: every field the \
                 schema does not declare is pruned (and refused by apply)",
    },
    Switch {
        name: "aggregated-discovery-stale",
        arg: Arg::None,
        breaks: "the aggregated discovery documents (/api and /apis asked for apidiscovery.k8s.io \
                 APIGroupDiscoveryList) never list custom resources, as a discovery manager that missed the \
                 CRD handler's updates; the per-group documents still do",
    },
    Switch {
        name: "openapi-stale",
        arg: Arg::None,
        breaks: "the OpenAPI v3 documents never publish custom resources (an OpenAPI controller that missed the \
                 CRD handler's updates): their group-version documents answer 404 and the index leaves them out",
    },
    Switch {
        name: "group-undiscovered",
        arg: Arg::Value("GROUP"),
        breaks: "the API group is left out of /apis and aggregated discovery and its group documents answer 404, \
                 as when an extension API fails to register (its resources are still served)",
    },
    Switch {
        name: "watch-events-dropped",
        arg: Arg::Value("RESOURCE/TYPE"),
        breaks: "watches of RESOURCE (a plural such as configmaps, or `custom` for every custom resource) never \
                 deliver notifications of TYPE (ADDED, MODIFIED or DELETED), as a watch cache that loses events: \
                 objects change in storage, watchers never hear of it",
    },
    Switch {
        name: "watch-history-ignored",
        arg: Arg::Value("RESOURCE"),
        breaks: "a watch of RESOURCE from a resourceVersion starts at the current one and replays nothing \
                 (a watch cache without history), so changes made since that resourceVersion are never delivered",
    },
    Switch {
        name: "table-accept-ignored",
        arg: Arg::None,
        breaks: "the API server answers a request for a Table of a resource without a Table form (the review \
                 kinds) with JSON instead of 406 NotAcceptable",
    },
    Switch {
        name: "list-continue-ignored",
        arg: Arg::None,
        breaks: "the API server ignores the continue token of a LIST: every page starts again at the first object",
    },
    Switch {
        name: "dry-run-ignored",
        arg: Arg::Value("RESOURCE"),
        breaks: "the API server ignores dryRun=All on creates, updates, patches and applies of RESOURCE (a plural \
                 such as pods) and stores them, as a server path that drops the option: a server-side dry run \
                 (kubectl --dry-run=server, kubectl diff) changes the live object",
    },
    Switch {
        name: "kubeconfig-stale-ca",
        arg: Arg::None,
        breaks: "the kubeconfig written for outside clients (kubectl) names a certificate authority that did not \
                 sign the API server's serving certificate, as a kubeconfig kept from before a control-plane \
                 certificate rotation: every kubectl call fails the TLS handshake",
    },
    Switch {
        name: "version-unstamped",
        arg: Arg::None,
        breaks: "/version reports what a kube-apiserver built without its version ldflags reports: empty major \
                 and minor, gitVersion v0.0.0-master+$Format:%H$",
    },
    Switch {
        name: "conversion-webhook-skipped",
        arg: Arg::None,
        breaks: "the API server never calls a CRD's conversion webhook: custom objects change apiVersion between \
                 versions with their fields unconverted (a `Webhook` strategy served like `None`)",
    },
    Switch {
        name: "probe-grpc-unsupported",
        arg: Arg::None,
        breaks: "the kubelet has no gRPC prober (GRPCContainerProbe off on the node, as a 1.23 kubelet by \
                 default): every gRPC probe fails with `missing probe handler`, so healthy gRPC servers restart",
    },
    Switch {
        name: "graceful-shutdown-off",
        arg: Arg::None,
        breaks: "the kubelets' node shutdown manager never runs (a preshutdown handler that failed to register, \
                 or its gate off): a host shutdown or restart kills the pods with the machine, without their \
                 grace periods, the Terminated status or the DisruptionTarget condition",
    },
    Switch {
        name: "kubelet-ignores-missing-secret",
        arg: Arg::None,
        breaks: "kubelets mount a Secret volume (plain or projected) whose non-optional Secret or `items` key \
                 is missing as if it were optional, so the pod starts instead of waiting on FailedMount",
    },
    Switch {
        name: "compaction-off",
        arg: Arg::None,
        breaks: "the API server never compacts storage (kube-apiserver with --etcd-compaction-interval=0): \
                 old resourceVersions and continue tokens stay readable until the bounded watch history drops them",
    },
];

/// The switches that model transient trouble a run must survive (rather than breakage a case
/// must catch); the fault-matrix test runs each of them.
pub const TRANSIENT: &[&str] = &[
    "api-errors",
    "conn-reset",
    "api-latency",
    "api-down",
    "watch-cut",
    "node-flap",
    "pull-fail-once",
    "dns-servfail",
];
