//! The command line (clap), as DESIGN.md's "Command line" contract fixes it.
//!
//! The structs here only parse; `to_*` methods turn them into library values. Environment
//! variables upstream jobs set (`ARTIFACTS`, `KUBE_TEST_REPO_LIST`, `KUBECONFIG`) are read here,
//! at the edge, and passed down as values.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::os::Os;

/// crossconf: does everything that should work on a cluster's Windows nodes work?
#[derive(Debug, Parser)]
#[command(name = "crossconf", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
    /// Log filter for diagnostics on stderr (tracing `EnvFilter` syntax, e.g. `crossconf=debug`).
    #[arg(
        long,
        global = true,
        env = "CROSSCONF_LOG",
        default_value = "crossconf=warn,crossconf_sim=error"
    )]
    pub log: String,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the catalogue and what a selection would run.
    List(ListArgs),
    /// Run the selected cases and write the prow/TestGrid results.
    Run(Box<RunArgs>),
    /// Start the simulated cluster in the foreground and write its kubeconfig.
    Sim(SimArgs),
    /// Delete everything a run created (by run id, or every run's).
    Cleanup(CleanupArgs),
    /// Preflight checks of a cluster: nodes, OS pools, builds, images, DNS, permissions.
    Doctor(DoctorArgs),
    /// Print the resolved test image per OS and Windows build.
    Images(ImagesArgs),
    /// Build a TestGrid-like HTML page from result folders.
    Dashboard(DashboardArgs),
}

/// Which cluster to talk to.
#[derive(Debug, Clone, Args, Default)]
pub struct ClusterArgs {
    /// Start the embedded simulated cluster in-process and run against it.
    #[arg(long, conflicts_with = "kubeconfig")]
    pub sim: bool,
    /// Kubeconfig file (default: KUBECONFIG, ~/.kube/config, in-cluster).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context (default: the current context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// Simulator options for `--sim`.
    #[command(flatten)]
    pub sim_options: SimOptions,
}

/// Options shaping the simulated cluster (for `crossconf sim` and `--sim`).
#[derive(Debug, Clone, Args)]
pub struct SimOptions {
    /// Windows nodes in the simulated cluster.
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub windows_nodes: usize,
    /// Linux nodes in the simulated cluster.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub linux_nodes: usize,
    /// Windows build of the simulated Windows nodes.
    #[arg(long, default_value = "10.0.20348", value_name = "BUILD")]
    pub windows_build: String,
    /// Taint for the simulated Windows nodes, e.g. `os=windows:NoSchedule`.
    #[arg(long, value_name = "KEY=VALUE:EFFECT")]
    pub windows_taint: Option<String>,
    /// Latency profile: `fast` (tests) or `realistic` (Windows-like pull and start times), or
    /// a YAML file overriding one.
    #[arg(long, default_value = "fast", value_name = "fast|realistic|FILE")]
    pub profile: String,
    /// Multiplies every simulated delay (0.05 replays a realistic run 20× faster).
    #[arg(long, default_value_t = 1.0, value_name = "F")]
    pub time_scale: f64,
    /// Faults to inject, e.g. `blackhole-node=win-1,dns-stopped` (see `crossconf sim --help`).
    #[arg(long, value_name = "SPEC")]
    pub faults: Option<String>,
    /// Control-plane feature gates, e.g. `ContainerStopSignals=true` (alpha gates are off, as
    /// on a real cluster, until named here).
    #[arg(long, value_name = "NAME=BOOL,...")]
    pub feature_gates: Option<String>,
    /// containerd version of each simulated Windows node in order, e.g. `1.7.27,1.6.28` (the
    /// last repeats for later nodes; default 1.7.27). 1.6 launches HostProcess containers as
    /// hcsshim's job containers did before the bind filter (upstream's "container command path
    /// validation" case needs a 1.6 node).
    #[arg(long, value_name = "VERSION,...")]
    pub windows_containerd: Option<String>,
    /// Runs a simulated Active Directory domain (`k8sgmsa.lan`, gMSA `gmsa-e2e`, SMB share
    /// `write_test`) and sets up the first Windows node for it (label
    /// `agentpool=windowsgmsa`, credential spec manifest under `C:\gmsa`), as upstream's GMSA
    /// Full cases expect; without it they skip.
    #[arg(long)]
    pub gmsa_domain: bool,
    /// Gives the simulated Windows nodes' containerd the Hyper-V isolation handler
    /// `runhcs-wcow-hypervisor` (a utility VM per pod) and creates RuntimeClass
    /// `runhcs-wcow-hypervisor`, as upstream's Hyper-V job sets the cluster up; without it the
    /// `[Feature:WindowsHyperVContainers]` case skips.
    #[arg(long)]
    pub hyperv: bool,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            windows_nodes: 2,
            linux_nodes: 1,
            windows_build: "10.0.20348".into(),
            windows_taint: None,
            profile: "fast".into(),
            time_scale: 1.0,
            faults: None,
            feature_gates: None,
            windows_containerd: None,
            gmsa_domain: false,
            hyperv: false,
        }
    }
}

/// Which cases.
#[derive(Debug, Clone, Args, Default)]
pub struct SelectionArgs {
    /// A suite file (`suites/*.yaml`): focus, skip, labels and exclusions with reasons.
    #[arg(long, value_name = "FILE")]
    pub suite: Option<PathBuf>,
    /// Run only cases whose full name matches (repeatable; any may match).
    #[arg(long, value_name = "RE")]
    pub focus: Vec<String>,
    /// Skip cases whose full name matches (repeatable; any may match).
    #[arg(long, value_name = "RE")]
    pub skip: Vec<String>,
    /// A boolean expression over tags: `sig-windows && !Slow && !Feature:GMSA`.
    #[arg(long, value_name = "EXPR")]
    pub label_filter: Option<String>,
    /// The OS of the nodes under test.
    #[arg(long, value_name = "OS")]
    pub node_os_distro: Option<OsArg>,
    /// The cluster's infrastructure, as e2e.test names it (`skeleton`, `local`, `aws`, `azure`,
    /// `gce`, `gke`...): cases needing a cloud load balancer or disk skip at once elsewhere
    /// (default: `skeleton`, or `sim` with --sim).
    #[arg(long, value_name = "NAME")]
    pub provider: Option<String>,
}

/// `--node-os-distro` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OsArg {
    /// Windows nodes.
    Windows,
    /// Linux nodes.
    Linux,
}

impl From<OsArg> for Os {
    fn from(o: OsArg) -> Os {
        match o {
            OsArg::Windows => Os::Windows,
            OsArg::Linux => Os::Linux,
        }
    }
}

/// Output formats of `list`, `images` and `doctor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum OutputFormat {
    /// Aligned text for people.
    #[default]
    Text,
    /// JSON for scripts.
    Json,
}

/// `crossconf list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// The cluster (only needed to evaluate pool-dependent skips).
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// The selection.
    #[command(flatten)]
    pub selection: SelectionArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

/// `crossconf run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The cluster.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// The selection.
    #[command(flatten)]
    pub selection: SelectionArgs,
    /// Cases run at once in the parallel lane (`[Serial]` cases always run alone).
    #[arg(long, value_name = "N")]
    pub parallel: Option<usize>,
    /// Where results go (default: $ARTIFACTS, else ./_artifacts).
    #[arg(long, value_name = "DIR")]
    pub report_dir: Option<PathBuf>,
    /// Prefix of the JUnit file name: `junit_<prefix>01.xml`.
    #[arg(long, default_value = "", value_name = "P")]
    pub report_prefix: String,
    /// Budget for the whole run, e.g. `4h` (then it stops as on an interrupt).
    #[arg(long, value_parser = parse_duration, value_name = "DUR")]
    pub timeout: Option<Duration>,
    /// Per-case timeout, overriding the default derived from each case's tags.
    #[arg(long, value_parser = parse_duration, value_name = "DUR")]
    pub test_timeout: Option<Duration>,
    /// Attempts per case; a case passing on a retry is reported passed and flaky.
    #[arg(long, value_name = "N")]
    pub flake_attempts: Option<u32>,
    /// Pull every image the plan needs on every node before the cases start.
    #[arg(long)]
    pub prepull_images: bool,
    /// Registry override file (upstream format; default: $KUBE_TEST_REPO_LIST).
    #[arg(long, value_name = "FILE")]
    pub kube_test_repo_list: Option<PathBuf>,
    /// Delete each case's namespace when it ends.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub delete_namespace: bool,
    /// Delete a failed case's namespace too (false keeps it for inspection).
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub delete_namespace_on_failure: bool,
    /// Write events, pod states and logs of a failed case into its artifact folder.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub dump_logs_on_failure: bool,
    /// Run only shard K of N (stable by case name), e.g. `2/3`.
    #[arg(long, value_name = "K/N")]
    pub shard: Option<String>,
    /// Run exactly the cases that failed or errored in this JUnit file.
    #[arg(long, value_name = "JUNIT.xml")]
    pub rerun_failed: Option<PathBuf>,
    /// A previous run's JUnit file whose case times order the parallel lane, longest first
    /// (default: the report directory's last `junit_<prefix>01.xml`; else estimates).
    #[arg(long, value_name = "JUNIT.xml")]
    pub durations_from: Option<PathBuf>,
    /// Print the plan and exit without touching the cluster.
    #[arg(long)]
    pub dry_run: bool,
    /// Plain progress lines even on a terminal.
    #[arg(long)]
    pub no_progress: bool,
    /// A TCP/UDP endpoint outside the cluster network for the egress cases (HOST:PORT).
    #[arg(long, value_name = "HOST:PORT")]
    pub external_endpoint: Option<String>,
    /// A name that resolves (through the nodes' resolver) to the external endpoint, for the
    /// egress-by-name cases.
    #[arg(long, value_name = "NAME")]
    pub external_name: Option<String>,
    /// Pods the density case creates (upstream: 10).
    #[arg(long, value_name = "N")]
    pub density_pods: Option<usize>,
    /// The kubectl the `[sig-cli]` cases run (default: `CROSSCONF_KUBECTL`, then PATH).
    #[arg(long, value_name = "FILE")]
    pub kubectl_path: Option<PathBuf>,
}

/// `crossconf sim`.
#[derive(Debug, Args)]
pub struct SimArgs {
    /// Simulator options.
    #[command(flatten)]
    pub options: SimOptions,
    /// Write the kubeconfig here once the API server is ready.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig_out: Option<PathBuf>,
}

/// `crossconf cleanup`.
#[derive(Debug, Args)]
pub struct CleanupArgs {
    /// The cluster.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Remove what the run with this id created.
    #[arg(long, value_name = "ID", required_unless_present = "all", conflicts_with = "all")]
    pub run_id: Option<String>,
    /// Remove what any run created.
    #[arg(long)]
    pub all: bool,
}

/// `crossconf doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// The cluster.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Registry override file (default: $KUBE_TEST_REPO_LIST).
    #[arg(long, value_name = "FILE")]
    pub kube_test_repo_list: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

/// `crossconf images`.
#[derive(Debug, Args)]
pub struct ImagesArgs {
    /// Registry override file (default: $KUBE_TEST_REPO_LIST).
    #[arg(long, value_name = "FILE")]
    pub kube_test_repo_list: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

/// `crossconf dashboard`.
#[derive(Debug, Args)]
pub struct DashboardArgs {
    /// Result folders (each one run: junit*.xml, started.json, finished.json).
    #[arg(long, value_name = "DIR", num_args = 1.., required = true)]
    pub results: Vec<PathBuf>,
    /// The HTML file to write.
    #[arg(long, value_name = "FILE.html")]
    pub out: PathBuf,
}

/// Parses Go-style durations as upstream flags take them: `90s`, `45m`, `4h`, `1h30m`, `500ms`.
///
/// # Errors
/// A one-line reason.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err("empty duration".into());
    }
    if let Ok(secs) = s.parse::<u64>() {
        return Err(format!("duration {secs:?} needs a unit (e.g. {secs}s or {secs}m)"));
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("duration {s:?} ends without a unit"))?;
        if digits == 0 {
            return Err(format!("invalid duration {s:?}"));
        }
        let value: f64 = rest[..digits]
            .parse()
            .map_err(|_| format!("invalid number in duration {s:?}"))?;
        rest = &rest[digits..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let secs = match unit {
            "ms" => value / 1000.0,
            "s" => value,
            "m" => value * 60.0,
            "h" => value * 3600.0,
            other => return Err(format!("unknown unit {other:?} in duration {s:?} (use ms, s, m, h)")),
        };
        total += Duration::from_secs_f64(secs);
    }
    if total.is_zero() {
        return Err(format!("duration {s:?} must be positive"));
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1.5h").unwrap(), Duration::from_secs(5400));
        assert!(parse_duration("10").unwrap_err().contains("needs a unit"));
        assert!(parse_duration("10x").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn cli_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
