//! The emulated programs inside test images: agnhost subcommands, web servers, pause and the
//! shells, run natively as tokio tasks with a container's identity (pod IP, hostname, file
//! view, environment).
//!
//! The main function is [`run`], which finds a program for `argv[0]` in the image (see
//! [`find`]) and runs it until it exits or the container is stopped. A program the image does
//! not contain is not run: the runtime reports it the way containerd reports a missing
//! executable, with a note that the simulator does not emulate it.

pub mod agnhost;
pub mod agnhost_crd_conversion;
mod agnhost_grpc;
mod agnhost_netexec;
mod agnhost_nettest;
mod agnhost_oidc;
pub mod agnhost_webhook;
pub mod etcd;
pub mod gmsa_webhook;
mod grey_jpeg;
pub mod image_files;
pub mod inclusterclient;
pub mod pid1;
pub mod sample_apiserver;
pub mod sample_apiserver_store;
pub mod servers;
pub mod stdin;
pub mod tar;
pub mod testlimit;

pub use stdin::{Stdin, StdinWriter};

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::node::dns::PodDns;
use crate::node::fs::FsView;
use crate::node::net::{SimNet, Source};
use crate::node::registry::{Image, Tool};
use crate::node::shell;
use crossconf_model::os::Os;

/// Which output stream a write goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// stdout.
    Stdout,
    /// stderr.
    Stderr,
}

/// Where a program's output goes (the container log, an exec stream, a buffer).
#[derive(Clone)]
pub struct Output(Arc<WriteFn>);

/// The function behind an [`Output`].
type WriteFn = dyn Fn(Stream, &[u8]) + Send + Sync;

impl std::fmt::Debug for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Output")
    }
}

impl Output {
    /// An output calling `f` for every write.
    pub fn new(f: impl Fn(Stream, &[u8]) + Send + Sync + 'static) -> Self {
        Output(Arc::new(f))
    }

    /// Output that is thrown away.
    pub fn null() -> Self {
        Output::new(|_, _| {})
    }

    /// Writes bytes to `stream`.
    pub fn write(&self, stream: Stream, data: &[u8]) {
        (self.0)(stream, data);
    }

    /// Writes a line (with `\n`) to stdout.
    pub fn line(&self, s: &str) {
        self.write(Stream::Stdout, format!("{s}\n").as_bytes());
    }

    /// Writes a line (with `\n`) to stderr.
    pub fn err_line(&self, s: &str) {
        self.write(Stream::Stderr, format!("{s}\n").as_bytes());
    }

    /// An output collecting everything (both streams, interleaved) into a shared buffer.
    pub fn capture() -> (Output, Arc<std::sync::Mutex<Vec<u8>>>) {
        let buf = Arc::new(std::sync::Mutex::new(Vec::new()));
        let b = buf.clone();
        (
            Output::new(move |_, d| b.lock().expect("capture lock").extend_from_slice(d)),
            buf,
        )
    }
}

/// Resource usage a container's programs report, read by `/stats/summary`.
#[derive(Debug, Default)]
pub struct Usage {
    /// CPU the programs currently want, in millicores (before the limit is applied).
    pub demand_millicores: AtomicU64,
    /// Extra memory the programs hold, in bytes.
    pub extra_memory_bytes: AtomicU64,
    /// Bytes received.
    pub rx_bytes: AtomicU64,
    /// Bytes sent.
    pub tx_bytes: AtomicU64,
}

impl Usage {
    /// Adds `m` millicores of demand until the returned guard drops.
    pub fn busy(self: &Arc<Self>, m: u64) -> BusyGuard {
        self.demand_millicores.fetch_add(m, Ordering::SeqCst);
        BusyGuard { usage: self.clone(), m }
    }

    /// Counts network traffic.
    pub fn traffic(&self, rx: usize, tx: usize) {
        self.rx_bytes.fetch_add(rx as u64, Ordering::Relaxed);
        self.tx_bytes.fetch_add(tx as u64, Ordering::Relaxed);
    }
}

/// Removes CPU demand when dropped.
#[derive(Debug)]
pub struct BusyGuard {
    usage: Arc<Usage>,
    m: u64,
}

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.usage.demand_millicores.fetch_sub(self.m, Ordering::SeqCst);
    }
}

/// The pod a program runs in.
#[derive(Debug, Clone)]
pub struct PodInfo {
    /// Pod name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// UID.
    pub uid: String,
    /// The container hostname (spec.hostname or the pod name).
    pub hostname: String,
    /// The pod's IP.
    pub ip: Ipv4Addr,
    /// The node's name.
    pub node: String,
    /// The node's IP.
    pub node_ip: Ipv4Addr,
    /// The node's OS.
    pub os: Os,
    /// The node's disk (its ephemeral-storage capacity), which `df` shows for the container's
    /// root and every mount that is not a tmpfs.
    pub disk_bytes: u64,
    /// The pod's DNS configuration, or why it has none.
    pub dns: Result<PodDns, String>,
}

/// Everything a running program may use.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// The pod.
    pub pod: Arc<PodInfo>,
    /// The container name.
    pub container: String,
    /// The image.
    pub image: Arc<Image>,
    /// The environment, in definition order.
    pub env: BTreeMap<String, String>,
    /// The file view.
    pub fs: FsView,
    /// The network.
    pub net: SimNet,
    /// Where output goes.
    pub out: Output,
    /// Cancelled when the container is asked to stop (SIGTERM).
    pub cancel: CancellationToken,
    /// Usage counters for stats.
    pub usage: Arc<Usage>,
    /// The user the process runs as.
    pub user: String,
    /// The working directory.
    pub cwd: String,
    /// The Active Directory domain the container's GMSA credential spec joined it to
    /// (Windows; see [`crate::node::kubelet::gmsa`]).
    pub domain: Option<Arc<crate::node::kubelet::gmsa::DomainJoin>>,
    /// The machine's power, for a process running on the host with its privileges (a Windows
    /// HostProcess container): `shutdown.exe` schedules through it.
    pub host: Option<Arc<crate::node::kubelet::power::Power>>,
    /// The node's Host Compute Service, for a process on the host (a Windows HostProcess
    /// container): `Get-ComputeProcess` lists its compute systems.
    pub compute: Option<crate::node::kubelet::hyperv::ComputeView>,
}

impl Ctx {
    /// The source identity for dials from this container.
    pub fn source(&self) -> Source {
        Source {
            ip: Some(self.pod.ip),
            node: Some(self.pod.node.clone()),
            os: self.pod.os,
            is_pod: true,
        }
    }

    /// The same context with another output.
    #[must_use]
    pub fn with_output(&self, out: Output) -> Ctx {
        Ctx { out, ..self.clone() }
    }
}

/// A program found in an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prog {
    /// `/agnhost`.
    Agnhost,
    /// busybox `sh`.
    Sh,
    /// `cmd.exe`.
    Cmd,
    /// PowerShell.
    PowerShell,
    /// `/pause`.
    Pause,
    /// nginx.
    Nginx,
    /// httpd.
    Httpd,
    /// resource-consumer.
    Consumer,
    /// Sysinternals Testlimit (`testlimit.exe`, Windows resource-consumer).
    TestLimit,
    /// `tar`: busybox's applet on Linux, `tar.exe` (bsdtar) in Windows' System32.
    Tar,
    /// `/kube-sample-apiserver`.
    SampleApiServer,
    /// `etcd`.
    Etcd,
    /// The windows-gmsa admission webhook.
    GmsaWebhook,
    /// A single command run without a shell (a busybox applet or a Windows system program).
    Direct,
}

/// busybox applets the simulator emulates.
pub const BUSYBOX_APPLETS: &[&str] = &[
    "echo", "cat", "ls", "hostname", "sleep", "true", "false", "env", "printenv", "mkdir", "rm", "touch", "test", "[",
    "whoami", "id", "nslookup", "wget", "nc", "ping", "grep", "wc", "head", "tail", "date", "uname", "pwd", "curl",
    "ip", "ifconfig", "cp", "mv", "tee", "seq", "yes", "hexdump", "df", "awk",
];

/// Windows system programs the simulator emulates (besides cmd built-ins).
pub const WINDOWS_PROGRAMS: &[&str] = &[
    "ping", "ipconfig", "nslookup", "curl", "hostname", "whoami", "timeout", "findstr", "where", "tasklist", "net",
    "nltest", "shutdown",
];

/// The lower-case base name of `argv0` without a Windows `.exe` suffix.
pub fn base_name(argv0: &str) -> String {
    let b = argv0.rsplit(['/', '\\']).next().unwrap_or(argv0).to_ascii_lowercase();
    b.strip_suffix(".exe").map(str::to_string).unwrap_or(b)
}

/// The program `argv0` names in `image`, if the image contains it.
pub fn find(argv0: &str, image: &Image) -> Option<Prog> {
    let b = base_name(argv0);
    let has = |t| image.has(t);
    match b.as_str() {
        // The agnhost image links `agnhost-2` to `agnhost` for upstream's entrypoint cases.
        "agnhost" | "agnhost-2" if has(Tool::Agnhost) => Some(Prog::Agnhost),
        "sh" | "ash" if has(Tool::Busybox) => Some(Prog::Sh),
        "cmd" if has(Tool::Cmd) => Some(Prog::Cmd),
        "powershell" | "pwsh" if has(Tool::PowerShell) => Some(Prog::PowerShell),
        "pause" if has(Tool::Pause) => Some(Prog::Pause),
        "nginx" if has(Tool::Nginx) => Some(Prog::Nginx),
        "httpd" | "httpd-foreground" if has(Tool::Httpd) => Some(Prog::Httpd),
        "consumer" | "resource-consumer" if has(Tool::Consumer) => Some(Prog::Consumer),
        "testlimit" | "testlimit64" if has(Tool::Consumer) && image.platform.os() == Os::Windows => {
            Some(Prog::TestLimit)
        }
        "kube-sample-apiserver" if has(Tool::SampleApiServer) => Some(Prog::SampleApiServer),
        "etcd" if has(Tool::Etcd) => Some(Prog::Etcd),
        "admission-webhook" if has(Tool::GmsaWebhook) => Some(Prog::GmsaWebhook),
        // Cluster add-on daemons idle: kube-proxy and the pod network are modelled in-process.
        "kube-proxy" | "flanneld" if has(Tool::Addon) => Some(Prog::Pause),
        // busybox has the applet; Windows Server 2019 and later ship tar.exe in System32.
        "tar" if has(Tool::Busybox) || has(Tool::Cmd) => Some(Prog::Tar),
        b if has(Tool::Busybox) && BUSYBOX_APPLETS.contains(&b) => Some(Prog::Direct),
        b if has(Tool::Cmd) && WINDOWS_PROGRAMS.contains(&b) => Some(Prog::Direct),
        _ => None,
    }
}

/// The message a runtime gives for an executable the image does not contain.
pub fn not_found_message(argv0: &str, image: &Image) -> String {
    match image.platform.os() {
        Os::Linux => format!(
            "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: \"{argv0}\": executable file not found in $PATH: unknown (the simulator emulates no program {argv0:?} in image {})",
            image.name
        ),
        Os::Windows => format!(
            "failed to create containerd task: failed to create shim task: hcs::System::CreateProcess: The system cannot find the file specified.: unknown (the simulator emulates no program {argv0:?} in image {})",
            image.name
        ),
    }
}

/// Runs `argv` in `ctx` to completion and returns its exit code; `stdin` is fed to programs
/// that read it. The caller has checked [`find`].
pub fn run(ctx: Ctx, argv: Vec<String>, stdin: Option<Stdin>) -> BoxFuture<'static, i32> {
    Box::pin(async move {
        let Some(prog) = argv.first().and_then(|a| find(a, &ctx.image)) else {
            let a0 = argv.first().cloned().unwrap_or_default();
            ctx.out.err_line(&not_found_message(&a0, &ctx.image));
            return 127;
        };
        match prog {
            Prog::Agnhost => agnhost::run_argv(ctx, argv).await,
            Prog::Sh => shell::run_sh_argv(ctx, &argv[1..], stdin).await,
            Prog::Cmd => shell::run_cmd_argv(ctx, &argv[1..]).await,
            Prog::PowerShell => shell::run_powershell_argv(ctx, &argv[1..]).await,
            Prog::Tar => tar::run(ctx, &argv[1..], stdin).await,
            Prog::Pause => servers::pause(ctx).await,
            Prog::Nginx => servers::static_web(ctx, servers::NGINX_PAGE).await,
            Prog::Httpd => servers::static_web(ctx, servers::HTTPD_PAGE).await,
            Prog::Consumer => servers::resource_consumer(ctx, argv[1..].to_vec()).await,
            Prog::TestLimit => testlimit::run(ctx, &argv[1..]).await,
            Prog::SampleApiServer => sample_apiserver::run(ctx, argv[1..].to_vec()).await,
            Prog::Etcd => etcd::run(ctx, argv[1..].to_vec()).await,
            Prog::GmsaWebhook => gmsa_webhook::run(ctx, argv[1..].to_vec()).await,
            Prog::Direct => {
                let dialect = if ctx.image.has(Tool::Busybox)
                    && !(ctx.pod.os == Os::Windows
                        && ctx.image.has(Tool::Cmd)
                        && WINDOWS_PROGRAMS.contains(&base_name(&argv[0]).as_str()))
                {
                    shell::Dialect::Sh
                } else {
                    shell::Dialect::Cmd
                };
                shell::run_direct(ctx, dialect, argv, stdin).await
            }
        }
    })
}

/// Waits until the container is stopped; returns the exit code a signal-terminated process
/// reports on this OS.
pub async fn until_stopped(ctx: &Ctx) -> i32 {
    ctx.cancel.cancelled().await;
    terminated_code(ctx.pod.os)
}

/// The exit code of a process ended by the stop signal: 128+SIGTERM on Linux; on Windows the
/// process is ended with `ERROR_PROCESS_ABORTED`-style code 1.
pub fn terminated_code(os: Os) -> i32 {
    match os {
        Os::Linux => 143,
        Os::Windows => 1,
    }
}

/// Helpers for unit tests of programs and shells.
#[cfg(test)]
pub(crate) mod testutil {
    use super::*;
    use crate::addr::AddressBlock;
    use crate::node::fs::{FsView, Mount, normalise};
    use crate::node::net::Faults;
    use crate::node::registry;

    /// The block unit tests of programs use.
    pub const BLOCK: AddressBlock = AddressBlock(205);

    /// A context for a container of `image` on a node of `os`, pod address number `n`, with a
    /// read-write volume at `<root>/mnt/rw` and a read-only one at `<root>/mnt/ro`.
    pub fn ctx(os: Os, image: &str, n: usize) -> (Ctx, Arc<std::sync::Mutex<Vec<u8>>>, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("tempdir");
        let img = registry::resolve(image, os, Some("10.0.20348"), &[]).expect("image");
        let faults = Arc::new(Faults::default());
        for d in ["rootfs", "rw", "ro"] {
            std::fs::create_dir_all(dir.path().join(d)).expect("mkdir");
        }
        std::fs::write(dir.path().join("ro/data.txt"), b"read-only data\n").expect("write");
        let root = os.volume_root();
        let mounts = vec![
            Mount {
                at: normalise(os, &os.join(root, "rw"), "/"),
                host: dir.path().join("rw"),
                read_only: false,
                pipe: None,
                tmpfs_bytes: None,
            },
            Mount {
                at: normalise(os, &os.join(root, "ro"), "/"),
                host: dir.path().join("ro"),
                read_only: true,
                pipe: None,
                tmpfs_bytes: None,
            },
        ];
        let fs = FsView::new(os, dir.path().join("rootfs"), false, mounts, faults.clone());
        let net = SimNet::new(
            BLOCK,
            faults,
            "127.205.96.10:53".parse().expect("addr"),
            "127.205.250.53:53".parse().expect("addr"),
        );
        let ip = BLOCK.pod(0, n).expect("pod ip");
        let (out, buf) = Output::capture();
        let pod = PodInfo {
            name: format!("pod-{n}"),
            namespace: "default".into(),
            uid: format!("uid-{n}"),
            hostname: format!("pod-{n}"),
            ip,
            node: "node-0".into(),
            node_ip: BLOCK.node(0),
            os,
            disk_bytes: 100 << 30,
            dns: Err("no dns in unit tests".into()),
        };
        let ctx = Ctx {
            pod: Arc::new(pod),
            container: "c".into(),
            image: Arc::new(img),
            env: BTreeMap::from([("GREETING".to_string(), "hello".to_string())]),
            fs,
            net,
            out,
            cancel: CancellationToken::new(),
            usage: Arc::new(Usage::default()),
            user: "ContainerUser".into(),
            cwd: "/".into(),
            domain: None,
            host: None,
            compute: None,
        };
        (ctx, buf, dir)
    }

    /// The captured output as a string.
    pub fn text(buf: &Arc<std::sync::Mutex<Vec<u8>>>) -> String {
        String::from_utf8_lossy(&buf.lock().expect("lock")).to_string()
    }

    /// The agnhost image unit tests use.
    pub const AGNHOST: &str = "registry.k8s.io/e2e-test-images/agnhost:2.53";
}
