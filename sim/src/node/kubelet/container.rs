//! One container run: creation checks (user, mounts, OS rules), the rootfs files the runtime
//! seeds, starting the program with its probes and postStart hook, and the termination
//! message when it exits. Separate because it is the runtime side of a single start.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::node::dns::PodDns;
use crate::node::error_chain;
use crate::node::fs::{FsView, Mount};
use crate::node::programs::{self, Ctx, Output, PodInfo, Usage};
use crate::node::registry::{Image, Tool};
use crate::node::runtime::{self, CState, LogBuffer};
use crossconf_model::os::Os;

use super::exec::log_text;
use super::hooks::run_handler;
use super::image_pull::pull;
use super::probes::spawn_probes;
use super::restart::StartFailure;
use super::subpath::expand_sub_paths;
use super::volumes::pod_fields;
use super::{Kubelet, PodRt, Role, gmsa, host_process, job_launch, metrics, sleep_or, with_ctr};

/// Known Windows container users (the built-in accounts of Windows container images).
const WINDOWS_USERS: &[&str] = &[
    "ContainerUser",
    "ContainerAdministrator",
    "NT AUTHORITY\\SYSTEM",
    "NT AUTHORITY\\Local service",
    "NT AUTHORITY\\NetworkService",
];

fn effective_user(kl: &Kubelet, pod: &Pod, c: &Container, img: &Image) -> (String, Option<bool>) {
    let psc = pod
        .spec
        .as_ref()
        .and_then(|s| s.security_context.clone())
        .unwrap_or_default();
    let csc = c.security_context.clone().unwrap_or_default();
    let non_root = csc.run_as_non_root.or(psc.run_as_non_root);
    match kl.cfg.os {
        // A runtime with the `run-as-username-ignored` fault runs every container as its
        // image's default user.
        Os::Windows if kl.net.faults().is_on("run-as-username-ignored") => (img.default_user.clone(), non_root),
        Os::Windows => {
            let u = csc
                .windows_options
                .as_ref()
                .and_then(|w| w.run_as_user_name.clone())
                .or_else(|| psc.windows_options.as_ref().and_then(|w| w.run_as_user_name.clone()))
                .unwrap_or_else(|| img.default_user.clone());
            (u, non_root)
        }
        Os::Linux => {
            let u = csc
                .run_as_user
                .or(psc.run_as_user)
                .map_or_else(|| img.default_user.clone(), |u| u.to_string());
            (u, non_root)
        }
    }
}

/// Pulls, checks, creates and starts one container run, then waits for it to exit and returns
/// the exit code.
pub(super) async fn start_container(
    kl: &Arc<Kubelet>,
    rt: &Arc<PodRt>,
    c: &Container,
    role: Role,
    idx: usize,
) -> Result<i32, StartFailure> {
    let pod = rt.pod();
    let field = Some((c.name.as_str(), role));
    let img = pull(kl, rt, c, role).await?;
    with_ctr(rt, role, idx, |ct| ct.image_id = Some(img.image_id()));
    let fail_create = |reason: &'static str, msg: String| {
        kl.pod_event(rt, field, "Warning", "Failed", &format!("Error: {msg}"));
        Err(StartFailure::Waiting { reason, message: msg })
    };
    // Configuration (CreateContainerConfigError).
    let (ip, dns, volumes) = {
        let st = rt.state.lock().expect("state lock");
        (
            st.ip.unwrap_or(Ipv4Addr::UNSPECIFIED),
            st.dns.clone().unwrap_or(Err("no dns".into())),
            st.volumes.clone().unwrap_or_default(),
        )
    };
    let (user, non_root) = effective_user(kl, &pod, c, &img);
    // A HostProcess container runs on the host (see `host_process`): the node's name, file
    // system and network, and an account of the host.
    let hpc = kl.cfg.os == Os::Windows && host_process::requested(&pod, c);
    let host_root = host_process::host_root(&kl.cfg.root_dir);
    let hpc_account = hpc.then(|| host_process::account(&user, &host_root));
    let cid = format!("{:032x}{:032x}", rand::random::<u128>(), rand::random::<u128>());
    // containerd 1.6 mounts the image at a per-container location and resolves the command
    // line itself (`job_launch`); 1.7 binds it at `C:\hpc\`.
    let job_object = hpc && host_process::Flavour::of(&kl.cfg.runtime_version) == host_process::Flavour::JobObject;
    let mount_point = if job_object {
        job_launch::mount_point(&cid)
    } else {
        host_process::SANDBOX_MOUNT_POINT.to_string()
    };
    // A kubelet with the `run-as-non-root-ignored` fault never verifies runAsNonRoot.
    if non_root == Some(true) && !kl.net.faults().is_on("run-as-non-root-ignored") {
        let root = match kl.cfg.os {
            Os::Windows => user.eq_ignore_ascii_case("ContainerAdministrator"),
            Os::Linux => user == "root" || user == "0",
        };
        if root {
            let msg = match kl.cfg.os {
                Os::Windows => format!(
                    "container's runAsUserName ({user}) which will be regarded as root identity and will break non-root policy (pod: \"{}\", container: {})",
                    rt.label(),
                    c.name
                ),
                Os::Linux => format!(
                    "container has runAsNonRoot and image will run as root (pod: \"{}\", container: {})",
                    rt.label(),
                    c.name
                ),
            };
            return fail_create("CreateContainerConfigError", msg);
        }
    }
    let fields = pod_fields(kl, &pod, ip);
    let hostname = if hpc {
        kl.cfg.name.clone()
    } else {
        pod.spec
            .as_ref()
            .and_then(|s| s.hostname.clone())
            .unwrap_or_else(|| rt.name.clone())
    };
    // A kubelet with the `service-env-missing` fault has no Service informer: no
    // docker-links-style variables.
    let services = if kl.net.faults().is_on("service-env-missing") {
        Vec::new()
    } else {
        kl.services.state()
    };
    let faults = kl.net.faults().clone();
    let mut env = match runtime::container_env(
        &kl.client,
        &pod,
        c,
        &fields,
        &runtime::EnvNode {
            services: &services,
            os: kl.cfg.os,
            hostname: &hostname,
            faults: &faults,
        },
    )
    .await
    {
        Ok(e) => e,
        Err(e) => return fail_create("CreateContainerConfigError", error_chain(&e)),
    };
    if kl.cfg.os == Os::Windows {
        // Windows gives every process its account's USERNAME and USERPROFILE (`echo %USERNAME%`
        // is how the upstream runAsUserName cases read the user); an account such as
        // `NT AUTHORITY\SYSTEM` shows its name without the domain.
        let account = match &hpc_account {
            Some(Ok(a)) => a.rsplit('\\').next().unwrap_or(a).to_string(),
            _ => user.rsplit('\\').next().unwrap_or(&user).to_string(),
        };
        if hpc {
            env.insert("CONTAINER_SANDBOX_MOUNT_POINT".into(), mount_point.clone());
        }
        env.entry("USERPROFILE".into())
            .or_insert_with(|| format!("C:\\Users\\{account}"));
        env.entry("USERNAME".into()).or_insert(account);
    }
    // Creation (CreateContainerError): OS/build mismatch, mounts, unsupported resources.
    if let Some(why) = img.create_mismatch(kl.cfg.os, kl.cfg.windows_build.as_deref()) {
        let why = if kl.net.faults().is_on("errors-unexplained") {
            "unknown error".to_string()
        } else {
            why
        };
        return fail_create(
            "CreateContainerError",
            format!("failed to create containerd container: {why}"),
        );
    }
    // subPathExpr expansion is part of the container's configuration (CreateContainerConfigError).
    let expanded = match expand_sub_paths(c, &env, kl.cfg.os, &faults) {
        Ok(e) => e,
        Err(why) => return fail_create("CreateContainerConfigError", why),
    };
    let mounts = match volumes.mounts_for(&expanded, kl.cfg.os) {
        Ok(m) => m,
        Err(why) => {
            return fail_create(
                "CreateContainerError",
                format!("failed to create containerd container: {why}"),
            );
        }
    };
    // `linux-fields-enforced`: a Windows runtime that tries to apply Linux-only security
    // settings instead of ignoring them (pods without spec.os.name may carry them).
    if kl.cfg.os == Os::Windows && kl.net.faults().is_on("linux-fields-enforced") {
        let psc = pod
            .spec
            .as_ref()
            .and_then(|s| s.security_context.clone())
            .unwrap_or_default();
        let csc = c.security_context.clone().unwrap_or_default();
        let linux_only = psc.se_linux_options.is_some()
            || psc.run_as_user.is_some()
            || psc.run_as_group.is_some()
            || csc.se_linux_options.is_some()
            || csc.run_as_user.is_some()
            || csc.run_as_group.is_some();
        if linux_only {
            return fail_create(
                "CreateContainerError",
                "failed to create containerd container: SELinux options, runAsUser and runAsGroup are not supported on Windows".into(),
            );
        }
    }
    // hugepages never get here on Windows: the node advertises none, so admission refuses
    // the pod (`OutOfhugepages-2Mi`, see admission.rs).
    let expand = |v: &Option<Vec<String>>| -> Vec<String> {
        let v = v.clone().unwrap_or_default();
        if faults.is_on("env-expansion-off") {
            return v;
        }
        v.iter().map(|s| runtime::expand_refs(s, &env)).collect()
    };
    // `container-command-ignored`: a runtime that keeps the image's ENTRYPOINT although the
    // container sets `command`. `image-entrypoint-ignored`: one that drops the image's
    // ENTRYPOINT and runs the args (or the image's CMD) alone.
    let command = if faults.is_on("container-command-ignored") {
        Vec::new()
    } else {
        expand(&c.command)
    };
    let args = expand(&c.args);
    let argv0 = if command.is_empty() && faults.is_on("image-entrypoint-ignored") {
        if args.is_empty() { img.cmd.clone() } else { args }
    } else {
        img.argv(&command, &args)
    };
    let container_dir = kl
        .cfg
        .root_dir
        .join("pods")
        .join(&rt.uid)
        .join("containers")
        .join(&c.name);
    let rootfs = container_dir.join("rootfs");
    if let Err(e) = std::fs::create_dir_all(&rootfs) {
        return fail_create(
            "CreateContainerError",
            format!("failed to create containerd container: creating rootfs: {e}"),
        );
    }
    seed_rootfs(kl, &rootfs, &pod, &hostname, ip, dns.as_ref().ok());
    // `image-files-missing`: an image unpacked without the files its Dockerfile copies.
    let files = if faults.is_on("image-files-missing") {
        Vec::new()
    } else {
        programs::image_files::of(&img)
    };
    for (rel, content) in files {
        if let Err(e) = std::fs::write(rootfs.join(rel), content) {
            warn!(path = %rootfs.join(rel).display(), error = %e, "writing an image file failed");
        }
    }
    // The termination-message file: as the kubelet's `makeMounts` does, an empty file per
    // container instance under the pod's container directory, writable by any user (0666),
    // bind-mounted at `terminationMessagePath` (default `/dev/termination-log`), so the container
    // can write it wherever the path points and the kubelet reads it back when it ends.
    let message_path = c
        .termination_message_path
        .clone()
        .unwrap_or_else(|| "/dev/termination-log".into());
    let message_host = container_dir.join(format!("termination-log-{}", &cid[..12]));
    if let Err(e) = std::fs::write(&message_host, b"") {
        return fail_create(
            "CreateContainerError",
            format!(
                "failed to create termination message file {}: {e}",
                message_host.display()
            ),
        );
    }
    let mut mounts = mounts;
    mounts.insert(
        0,
        Mount {
            at: crate::node::fs::normalise(kl.cfg.os, &message_path, "/"),
            host: message_host,
            read_only: false,
            pipe: None,
            tmpfs_bytes: None,
        },
    );
    // The `rootfs-read-only` fault: a runtime that mounts every root filesystem read-only.
    let read_only_root = (kl.cfg.os == Os::Linux
        && c.security_context
            .as_ref()
            .and_then(|s| s.read_only_root_filesystem)
            .unwrap_or(false))
        || kl.net.faults().is_on("rootfs-read-only");
    let fs = if hpc {
        if let Err(e) = std::fs::create_dir_all(&host_root).and_then(|()| {
            host_process::lay_out_executables(&host_root, &rootfs, img.has(Tool::Busybox), img.has(Tool::PowerShell))
        }) {
            return fail_create(
                "CreateContainerError",
                format!("failed to create containerd container: creating the host file system: {e}"),
            );
        }
        let mounts = if job_object {
            host_process::mounts_job_object(&mount_point, rootfs, mounts)
        } else {
            host_process::mounts(rootfs, mounts)
        };
        FsView::new(kl.cfg.os, host_root, false, mounts, kl.net.faults().clone())
    } else {
        FsView::new(
            kl.cfg.os,
            rootfs,
            read_only_root,
            mounts_with_defaults(mounts),
            kl.net.faults().clone(),
        )
    };
    let windows_user_unknown =
        !hpc && kl.cfg.os == Os::Windows && !WINDOWS_USERS.iter().any(|u| u.eq_ignore_ascii_case(&user));
    // Start delay (sandbox + container start) from the profile.
    // The `slow-container-starts` fault: an overloaded node where every sandbox + container
    // start takes 35 s more (past the 30 s p50 that upstream's density case allows).
    let mut start_delay = kl.cfg.profile.start(kl.cfg.os);
    if kl.net.faults().is_on("slow-container-starts") {
        start_delay += Duration::from_secs(35);
    }
    if !sleep_or(start_delay, &rt.halted).await {
        return Err(StartFailure::Waiting {
            reason: "ContainerCreating",
            message: "pod is being deleted".into(),
        });
    }
    let logs = Arc::new(LogBuffer::default());
    let usage = Arc::new(Usage::default());
    with_ctr(rt, role, idx, |ct| {
        ct.container_id = Some(format!("containerd://{cid}"));
        if ct.restart_count > 0 || ct.last.is_some() {
            ct.prev_logs = Some(ct.logs.clone());
        }
        ct.logs = logs.clone();
        ct.usage = usage.clone();
        ct.base_memory = base_memory(&img);
        // CPU counters belong to one container instance, and starting its process already
        // costs CPU time, so even an idle container reports usageCoreNanoSeconds > 0 from its
        // first stats read on.
        ct.cpu_ns = Arc::new(AtomicU64::new(startup_cpu_ns(kl.cfg.os)));
        ct.cpu_rate = Arc::new(AtomicU64::new(0));
    });
    kl.pod_event(
        rt,
        field,
        "Normal",
        "Created",
        &format!("Created container: {}", c.name),
    );
    // Created: the kubelet counts the start now and a failure to start as an error.
    let kind = metrics::container_type(role);
    kl.metrics.started(kind, hpc);
    let start_error = |msg: String| {
        kl.metrics.start_failed(kind, "Unknown", hpc);
        Err(StartFailure::StartError(msg))
    };
    let user = match hpc_account {
        Some(Ok(account)) => account,
        Some(Err(msg)) => return start_error(msg),
        None => user,
    };
    if windows_user_unknown {
        return start_error(format!(
            "failed to create containerd task: failed to create shim task: hcs::System::CreateProcess {cid}: The user name or password is incorrect.: unknown (runAsUserName {user:?})"
        ));
    }
    // On containerd 1.6 hcsshim finds the executable by path and sets the working directory
    // (`job_launch`); the `hostprocess-mountpoint-unexpanded` fault models a runtime that
    // leaves `%CONTAINER_SANDBOX_MOUNT_POINT%` in them.
    let (argv0, launch_cwd) = if job_object {
        let expand = !kl.net.faults().is_on("hostprocess-mountpoint-unexpanded");
        match job_launch::resolve(&argv0, c.working_dir.as_deref(), &mount_point, expand, |p| fs.stat(p)) {
            Ok(l) => (l.argv, Some(l.cwd)),
            Err(msg) => {
                return start_error(format!(
                    "failed to create containerd task: failed to create shim task: {msg}: unknown"
                ));
            }
        }
    } else {
        (argv0, None)
    };
    let Some(a0) = argv0.first().cloned() else {
        return start_error("failed to create containerd task: no command specified".into());
    };
    if programs::find(&a0, &img).is_none() {
        return start_error(programs::not_found_message(&a0, &img));
    }
    let stop = CancellationToken::new();
    let kill = CancellationToken::new();
    // What the process sees of a stop: the stop signal, or (a Linux PID 1 without a SIGTERM
    // handler, see `programs::pid1`) only the kill at the grace deadline.
    let signalled = if programs::pid1::ends_on_stop_signal(&argv0, &img, kl.cfg.os) {
        stop.clone()
    } else {
        kill.child_token()
    };
    // A runtime with the `logs-lost` fault never records container output.
    let out = {
        let logs = logs.clone();
        let lost = kl.net.faults().is_on("logs-lost");
        Output::new(move |s, d| {
            if !lost {
                logs.write(s, d)
            }
        })
    };
    // hcsshim joins the container to the domain of its GMSA credential spec, unless the
    // `gmsa-credspec-dropped` fault models a kubelet that never passes the spec down.
    let domain = (kl.cfg.os == Os::Windows && !kl.net.faults().is_on("gmsa-credspec-dropped"))
        .then(|| gmsa::credential_spec(&pod, c).and_then(gmsa::domain_join))
        .flatten()
        .map(Arc::new);
    // A HostProcess container starts where hcsshim put it (1.6) or in its sandbox mount point
    // (1.7).
    let cwd = launch_cwd.or_else(|| c.working_dir.clone()).unwrap_or_else(|| {
        if hpc {
            host_process::SANDBOX_MOUNT_POINT.into()
        } else {
            "/".into()
        }
    });
    let ctx = Ctx {
        pod: Arc::new(PodInfo {
            name: rt.name.clone(),
            namespace: rt.namespace.clone(),
            uid: rt.uid.clone(),
            hostname: hostname.clone(),
            ip,
            node: kl.cfg.name.clone(),
            node_ip: kl.node_ip(),
            os: kl.cfg.os,
            disk_bytes: kl.cfg.capacity.ephemeral_storage_bytes,
            dns: dns.clone(),
        }),
        container: c.name.clone(),
        image: img.clone(),
        env,
        fs,
        net: kl.net.clone(),
        out,
        cancel: signalled,
        usage: usage.clone(),
        user,
        cwd,
        domain,
        host: hpc.then(|| kl.power.clone()),
        compute: (hpc && kl.cfg.os == Os::Windows).then(|| super::hyperv::ComputeView::of(kl)),
    };
    let started_at = jiff::Timestamp::now();
    // `stdin: true` gives the process an input that stays open (attach writes to it) until the
    // container ends or, with `stdinOnce`, the first attach closes it; without it reads see EOF.
    let (mut stdin_writer, stdin) = if c.stdin == Some(true) {
        let (w, r) = programs::Stdin::pipe();
        (Some(w), Some(r))
    } else {
        (None, None)
    };
    let mut task = tokio::spawn(programs::run(ctx.clone(), argv0, stdin));
    // The process runs (exec and termination can reach it), but as in the kubelet the container
    // is reported Running only once its postStart hook has returned (the pod worker is blocked
    // in the hook until then).
    with_ctr(rt, role, idx, |ct| {
        ct.exec = Some(ctx.clone());
        ct.stdin = stdin_writer.take();
        ct.run_stop = Some(stop.clone());
        ct.run_kill = Some(kill.clone());
        ct.ready = false;
    });
    kl.pod_event(rt, field, "Normal", "Started", &format!("Started container {}", c.name));
    // postStart hook (a kubelet with the `hooks-ignored` fault never runs it).
    if let Some(h) = c.lifecycle.as_ref().and_then(|l| l.post_start.clone())
        && !kl.net.faults().is_on("hooks-ignored")
        && let Err(msg) = run_handler(kl, &ctx, &h, c).await
    {
        kl.pod_event(rt, field, "Warning", "FailedPostStartHook", &msg);
        kl.pod_event(
            rt,
            field,
            "Normal",
            "Killing",
            &format!("FailedPostStartHook: Stopping container {}", c.name),
        );
        super::termination::stop_with_grace(
            kl,
            rt,
            (role, idx),
            &stop,
            super::termination::KillReason::PostStartHook,
        )
        .await;
    }
    let probes_ignored = kl.net.faults().is_on("probes-ignored");
    // A restartable init container (a sidecar) is probed and reports readiness as an app
    // container does; a regular init container has neither.
    let probed = role == Role::App || c.restart_policy.as_deref() == Some("Always");
    with_ctr(rt, role, idx, |ct| {
        ct.state = CState::Running { started_at };
        ct.started = c.startup_probe.is_none() || probes_ignored;
        ct.ready = probed && (probes_ignored || (c.readiness_probe.is_none() && c.startup_probe.is_none()));
    });
    rt.touch();
    let probes = CancellationToken::new();
    if probed && !probes_ignored {
        spawn_probes(
            kl.clone(),
            rt.clone(),
            (c.clone(), role, idx),
            ctx.clone(),
            probes.clone(),
            stop.clone(),
        );
    }
    let code = tokio::select! {
        r = &mut task => r.unwrap_or(1),
        _ = kill.cancelled() => {
            task.abort();
            137
        }
    };
    probes.cancel();
    let code = if code == programs::terminated_code(kl.cfg.os) && kill.is_cancelled() {
        137
    } else {
        code
    };
    logs.close();
    // A kubelet with the `prestop-on-exit` fault runs the preStop hook of a container that
    // exited on its own before it records the exit, the regression upstream's "ignore
    // terminated container" sleep-hook case guards against.
    if kl.net.faults().is_on("prestop-on-exit")
        && !stop.is_cancelled()
        && let Some(h) = c.lifecycle.as_ref().and_then(|l| l.pre_stop.clone())
    {
        let _ = run_handler(kl, &ctx, &h, c).await;
    }
    let finished = jiff::Timestamp::now();
    let message = termination_message(kl, &ctx, c, code, &logs);
    // A runtime with the `exit-codes-lost` fault reports every exit as a clean one.
    let code = if kl.net.faults().is_on("exit-codes-lost") {
        0
    } else {
        code
    };
    with_ctr(rt, role, idx, |ct| {
        ct.state = CState::Terminated {
            exit_code: code,
            reason: if code == 0 { "Completed".into() } else { "Error".into() },
            message,
            started_at: Some(started_at),
            finished_at: finished,
            container_id: format!("containerd://{cid}"),
        };
        ct.ready = false;
        ct.exec = None;
        ct.stdin = None;
        ct.run_stop = None;
        ct.run_kill = None;
    });
    rt.touch();
    Ok(code)
}

/// The kubelet's cap on a termination message read from the file (4096 bytes).
const MAX_TERMINATION_MESSAGE_BYTES: usize = 4096;
/// How much log tail `FallbackToLogsOnError` uses: the last 80 lines, at most 2048 bytes.
const FALLBACK_LOG_LINES: usize = 80;
const FALLBACK_LOG_BYTES: usize = 2048;

/// The `state.terminated.message` of a finished run, as the kubelet fills it: the contents of
/// `terminationMessagePath` (default `/dev/termination-log`), or — under
/// `terminationMessagePolicy: FallbackToLogsOnError`, when that file is empty and the container
/// failed — the tail of its log. A kubelet with the `termination-message-lost` fault reports none.
fn termination_message(kl: &Kubelet, ctx: &Ctx, c: &Container, code: i32, logs: &LogBuffer) -> Option<String> {
    if kl.net.faults().is_on("termination-message-lost") {
        return None;
    }
    let path = c
        .termination_message_path
        .clone()
        .unwrap_or_else(|| "/dev/termination-log".into());
    let mut from_file = ctx.fs.read(&path).unwrap_or_default();
    from_file.truncate(MAX_TERMINATION_MESSAGE_BYTES);
    if !from_file.is_empty() {
        return Some(String::from_utf8_lossy(&from_file).into_owned());
    }
    let any_exit = kl.net.faults().is_on("fallback-to-logs-always");
    if (code == 0 && !any_exit) || c.termination_message_policy.as_deref() != Some("FallbackToLogsOnError") {
        return None;
    }
    let text = log_text(&logs.since(0), false);
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(FALLBACK_LOG_LINES)..].join("\n");
    let mut start = tail.len().saturating_sub(FALLBACK_LOG_BYTES);
    while !tail.is_char_boundary(start) {
        start += 1;
    }
    let tail = &tail[start..];
    (!tail.is_empty()).then(|| tail.to_string())
}

fn mounts_with_defaults(m: Vec<Mount>) -> Vec<Mount> {
    m
}

/// CPU time a container's process start takes, in nanoseconds: a Windows container's start
/// (its own session, services and the entrypoint) costs tens of milliseconds of CPU, a Linux
/// one a few.
fn startup_cpu_ns(os: Os) -> u64 {
    let ms = match os {
        Os::Windows => rand::random_range(30..80),
        Os::Linux => rand::random_range(3..12),
    };
    ms * 1_000_000
}

fn base_memory(img: &Image) -> u64 {
    let win = img.platform.os() == Os::Windows;
    let base: u64 = if img.has(Tool::Pause) { 1 << 20 } else { 6 << 20 };
    if win { base + (20 << 20) } else { base }
}

/// The kubelet's header of a hosts file it built for a pod (kubelet_pods.go `managedHostsHeader`).
const MANAGED_HOSTS_HEADER: &str = "# Kubernetes-managed hosts file.\n";
/// The header of a hostNetwork pod's copy of the node's hosts file
/// (`managedHostsHeaderWithHostNetwork`).
const MANAGED_HOSTS_HEADER_HOST_NETWORK: &str = "# Kubernetes-managed hosts file (host network).\n";
/// The loopback lines every Linux hosts file starts with (the images' own and the kubelet's).
const IMAGE_HOSTS: &str = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n";

/// The Linux node's own `/etc/hosts` (under its host root, where a hostPath volume of
/// `/etc/hosts` finds it), written on first use: the loopback lines and the node's address and
/// name.
pub(super) fn node_hosts_file(kl: &Kubelet) -> String {
    let path = super::host_process::host_root(&kl.cfg.root_dir)
        .join("etc")
        .join("hosts");
    if let Ok(s) = std::fs::read_to_string(&path)
        && !s.is_empty()
    {
        return s;
    }
    let content = format!("{IMAGE_HOSTS}{}\t{}\n", kl.node_ip(), kl.cfg.name);
    if let Some(dir) = path.parent()
        && let Err(e) = std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&path, &content))
    {
        warn!(path = %path.display(), error = %e, "writing the node's hosts file failed");
    }
    content
}

/// Writes the files the runtime puts into a container: `/etc/hosts` and `/etc/resolv.conf` on
/// Linux (the kubelet manages them), the default hosts file on Windows (not managed).
fn seed_rootfs(kl: &Kubelet, rootfs: &std::path::Path, pod: &Pod, hostname: &str, ip: Ipv4Addr, dns: Option<&PodDns>) {
    let write = |rel: &str, data: String| {
        let p = rootfs.join(rel);
        if let Some(parent) = p.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        if let Err(e) = std::fs::write(&p, data) {
            warn!(path = %p.display(), error = %e, "seeding container file failed");
        }
    };
    match kl.cfg.os {
        Os::Linux => {
            let spec = pod.spec.clone().unwrap_or_default();
            let fqdn = match (&spec.subdomain, &pod.metadata.namespace) {
                (Some(sd), Some(ns)) => format!("{hostname}.{sd}.{ns}.svc.cluster.local\t"),
                _ => String::new(),
            };
            // Fault `etc-hosts-unmanaged`: the image's own hosts file stays (no kubelet header,
            // no pod entry, no aliases).
            let unmanaged = kl.net.faults().is_on("etc-hosts-unmanaged");
            // As kubelet_pods.go: a hostNetwork pod gets the node's hosts file under its own
            // header (`nodeHostsFileContent`), any other pod one built from its IP and names
            // (`managedHostsFileContent`).
            let mut hosts = if unmanaged {
                IMAGE_HOSTS.to_string()
            } else if spec.host_network == Some(true) {
                format!("{MANAGED_HOSTS_HEADER_HOST_NETWORK}{}", node_hosts_file(kl))
            } else {
                format!("{MANAGED_HOSTS_HEADER}{IMAGE_HOSTS}{ip}\t{fqdn}{hostname}\n")
            };
            // Fault `host-aliases-ignored`: a kubelet that leaves spec.hostAliases out.
            let aliases = if unmanaged || kl.net.faults().is_on("host-aliases-ignored") {
                &[][..]
            } else {
                spec.host_aliases.as_deref().unwrap_or_default()
            };
            for ha in aliases {
                hosts.push_str(&format!(
                    "\n# Entries added by HostAliases.\n{}\t{}\n",
                    ha.ip,
                    ha.hostnames.clone().unwrap_or_default().join("\t")
                ));
            }
            write("etc/hosts", hosts);
            if let Some(d) = dns {
                let mut r = String::new();
                if !d.searches.is_empty() {
                    r.push_str(&format!("search {}\n", d.searches.join(" ")));
                }
                for ns in &d.nameservers {
                    r.push_str(&format!("nameserver {ns}\n"));
                }
                match d.attempts {
                    Some(a) => r.push_str(&format!("options ndots:{} attempts:{a}\n", d.ndots)),
                    None => r.push_str(&format!("options ndots:{}\n", d.ndots)),
                }
                write("etc/resolv.conf", r);
            }
            write("etc/hostname", format!("{hostname}\n"));
        }
        Os::Windows => {
            write(
                "windows/system32/drivers/etc/hosts",
                "# Copyright (c) 1993-2009 Microsoft Corp.\r\n#\r\n# This is a sample HOSTS file used by Microsoft TCP/IP for Windows.\r\n".into(),
            );
        }
    }
}
