//! The suite benchmark: how close a run comes to its critical path, and what the harness costs.
//!
//! ```sh
//! cargo run --release --example bench_suite                      # default selection, 8 lanes, fast profile
//! cargo run --release --example bench_suite -- --profile realistic --time-scale 0.05
//! cargo run --release --example bench_suite -- --suite suites/windows-nightly.yaml --lanes 4
//! ```
//!
//! One invocation runs the selection twice on one simulated cluster: on 1 lane, then on N lanes
//! ordered by the times the first run measured (as `crossconf run` orders a nightly job by the
//! previous night's JUnit). For each it prints the wall, the critical-path bound of that run's
//! own case times (the serial lane plus the larger of the longest parallel case and the
//! parallel work over the lanes), wall / bound, the speed-up over 1 lane, the harness's CPU per
//! case and its peak resident memory.
//!
//! The simulated cluster runs in a child process (this program started again with
//! `--serve-sim`), so the CPU and memory figures are the harness's alone: CPU is the process's
//! user + system time from `/proc/self/stat` (in the kernel's fixed 100 Hz ticks), peak memory
//! its `VmHWM`, reset before each run through `/proc/self/clear_refs`. Linux only.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossconf::catalog::Catalog;
use crossconf::cluster::{Cluster, ClusterSpec};
use crossconf::framework::{CaseSettings, RunContext};
use crossconf::os::Os;
use crossconf::run::{Durations, Event, RunStats, RunnerBuilder, ScheduleSummary, Scheduled, Shutdown};
use crossconf::select::{self, PlanContext, Provider, SelectionSpec, Suite};

struct Options {
    lanes: usize,
    profile: String,
    time_scale: f64,
    suite: Option<PathBuf>,
    focus: Vec<String>,
    os: Os,
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        lanes: 8,
        profile: "fast".into(),
        time_scale: 1.0,
        suite: None,
        focus: Vec::new(),
        os: Os::Windows,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || it.next().cloned().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--lanes" => o.lanes = value()?.parse().map_err(|e| format!("--lanes: {e}"))?,
            "--profile" => o.profile = value()?,
            "--time-scale" => o.time_scale = value()?.parse().map_err(|e| format!("--time-scale: {e}"))?,
            "--suite" => o.suite = Some(value()?.into()),
            "--focus" => o.focus.push(value()?),
            "--node-os-distro" => o.os = value()?.parse().map_err(|_| "--node-os-distro: windows or linux")?,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if o.lanes < 2 {
        return Err("--lanes must be at least 2 (1 lane always runs first)".into());
    }
    Ok(o)
}

/// The child: a simulated cluster until stdin closes (the parent exited or is done).
fn serve_sim(profile: &str, time_scale: f64) -> ExitCode {
    crossconf::install_crypto_provider();
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    runtime.block_on(async {
        let cfg = match crossconf_sim::SimConfig::from_options(2, 1, "10.0.20348", None, profile, time_scale, None) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("simulator options: {e}");
                return ExitCode::from(2);
            }
        };
        let sim = match crossconf_sim::SimCluster::start(cfg).await {
            Ok(s) => s,
            Err(e) => {
                eprintln!("the simulated cluster did not start: {e}");
                return ExitCode::FAILURE;
            }
        };
        let dir = tempfile::tempdir().expect("a temporary directory");
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, sim.kubeconfig_yaml()).expect("writing the kubeconfig");
        println!(
            "READY\t{}\t{}\t{}",
            kubeconfig.display(),
            sim.external_endpoint(),
            sim.external_name()
        );
        std::io::stdout().flush().ok();
        let _ = tokio::task::spawn_blocking(|| std::io::stdin().read_to_end(&mut Vec::new())).await;
        sim.shutdown().await;
        ExitCode::SUCCESS
    })
}

/// This process's user + system CPU time.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let field = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    let ticks = field(11) + field(12);
    Duration::from_millis(ticks * 10)
}

/// Peak resident memory since the last [`reset_peak`], in MiB.
fn peak_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn reset_peak() {
    // "5" resets the peak RSS (Linux 4.0+); without it the second figure includes the first run.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

struct Measured {
    lanes: usize,
    wall: Duration,
    stats: RunStats,
    schedule: Option<ScheduleSummary>,
    cpu: Duration,
    peak: f64,
    times: Vec<(String, Duration)>,
    failures: Vec<String>,
}

async fn run_once(
    cluster: &Cluster,
    settings: &CaseSettings,
    scheduled: &[Scheduled],
    os: Os,
    lanes: usize,
    durations: Option<Durations>,
) -> Result<Measured, String> {
    let mut builder = RunnerBuilder::default();
    builder.set_parallel(lanes).set_durations(durations);
    let runner = builder.build().map_err(|e| e.to_string())?;
    let run_id = format!("bench-{lanes}-{}", std::process::id());
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let ctx = Arc::new(RunContext {
        client: cluster.client().clone(),
        run_id: run_id.clone(),
        target_os: os,
        pools: cluster.pools().clone(),
        images: Arc::new(crossconf::images::ImageCatalog::load_default()),
        artifacts_dir: dir.path().to_path_buf(),
        settings: settings.clone(),
        started: Instant::now(),
    });
    let mut schedule = None;
    let mut times = Vec::new();
    let mut failures = Vec::new();
    reset_peak();
    let cpu0 = cpu_time();
    let t0 = Instant::now();
    let stats = runner
        .execute(ctx, scheduled.to_vec(), Shutdown::new(), |event| match event {
            Event::Scheduled(s) => {
                eprintln!("[{lanes} lane(s)] {}", s.render());
                schedule = Some(s);
            }
            Event::CaseFinished(r) => {
                if r.outcome.is_failure() {
                    failures.push(r.name.clone());
                }
                if !r.attempts.is_empty() {
                    times.push((r.name.clone(), r.duration));
                }
            }
            _ => {}
        })
        .await;
    let wall = t0.elapsed();
    let cpu = cpu_time().saturating_sub(cpu0);
    let peak = peak_mib();
    let selector = format!("{}={run_id}", crossconf::framework::RUN_ID_LABEL);
    crossconf::run::cleanup::delete_labelled(cluster.client(), &selector, Duration::from_secs(120))
        .await
        .map_err(|e| format!("cleanup: {}", crossconf::run::render_chain(&e)))?;
    Ok(Measured {
        lanes,
        wall,
        stats,
        schedule,
        cpu,
        peak,
        times,
        failures,
    })
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--serve-sim") {
        let profile = args.get(1).cloned().unwrap_or_else(|| "fast".into());
        let scale = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1.0);
        return serve_sim(&profile, scale);
    }
    let o = match parse_args(&args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    crossconf::install_crypto_provider();

    // The simulated cluster, in its own process.
    let exe = std::env::current_exe().expect("this program's path");
    let mut child = Command::new(exe)
        .args(["--serve-sim", &o.profile, &o.time_scale.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("starting the simulator process");
    let mut ready = String::new();
    let stdout = child.stdout.take().expect("piped stdout");
    if BufReader::new(stdout).read_line(&mut ready).is_err() || !ready.starts_with("READY\t") {
        eprintln!("error: the simulator process did not start");
        let _ = child.kill();
        let _ = child.wait();
        return ExitCode::FAILURE;
    }
    let parts: Vec<&str> = ready.trim_end().split('\t').collect();
    let [_, kubeconfig, endpoint, name] = parts[..] else {
        eprintln!("error: unexpected simulator line {ready:?}");
        let _ = child.kill();
        let _ = child.wait();
        return ExitCode::FAILURE;
    };

    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    let result = runtime.block_on(async {
        let cluster = Cluster::connect(ClusterSpec::Kubeconfig {
            path: kubeconfig.into(),
            context: None,
        })
        .await
        .map_err(|e| format!("connecting: {}", crossconf::run::render_chain(&e)))?;
        let suite = o
            .suite
            .as_deref()
            .map(Suite::load)
            .transpose()
            .map_err(|e| e.to_string())?;
        let spec = SelectionSpec {
            focus: o.focus.clone(),
            suite,
            ..SelectionSpec::default()
        };
        let selection = spec.compile().map_err(|e| e.to_string())?;
        let catalog = Catalog::new(crossconf::cases::all()).map_err(|e| e.to_string())?;
        let mut ctx = PlanContext::new(o.os);
        ctx.provider = Provider::SIM;
        ctx.missing_pools = Os::ALL.into_iter().filter(|p| !cluster.pools().has_pool(*p)).collect();
        let plan = select::plan(&catalog, &selection, &ctx);
        let scheduled: Vec<Scheduled> = plan
            .to_run()
            .map(|e| Scheduled {
                case: catalog.cases()[e.case_index].clone(),
                skip: None,
            })
            .collect();
        if scheduled.is_empty() {
            return Err("the selection runs no case".to_string());
        }
        let settings = CaseSettings {
            external_endpoint: Some(endpoint.to_string()),
            external_name: Some(name.to_string()),
            density_pods: None,
            // The [sig-cli] cases skip here: they time kubectl, not the cluster.
            kubectl: Default::default(),
        };
        eprintln!(
            "bench_suite: {} cases, profile {} at time scale {}, 1 lane then {} lanes",
            scheduled.len(),
            o.profile,
            o.time_scale,
            o.lanes
        );
        let one = run_once(&cluster, &settings, &scheduled, o.os, 1, None).await?;
        let measured = Durations::from_times("the 1-lane run", one.times.clone());
        let many = run_once(&cluster, &settings, &scheduled, o.os, o.lanes, Some(measured)).await?;
        Ok::<_, String>((scheduled.len(), one, many))
    });
    drop(child.stdin.take());
    let _ = child.wait();
    let (cases, one, many) = match result {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };

    println!(
        "\nbench_suite: {cases} cases on the simulated cluster, profile {} at time scale {}",
        o.profile, o.time_scale
    );
    println!(
        "| lanes | wall | expected | bound | wall / bound | speed-up | harness CPU per case | peak memory | passed / failed |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for m in [&one, &many] {
        let ran = (m.stats.passed + m.stats.failed + m.stats.interrupted).max(1);
        println!(
            "| {} | {:.1} s | {} | {:.1} s | {:.2} | {:.2} × | {:.0} ms | {:.0} MiB | {} / {} |",
            m.lanes,
            m.wall.as_secs_f64(),
            m.schedule
                .as_ref()
                .map_or("-".to_string(), |s| format!("{:.1} s", s.expected_wall.as_secs_f64())),
            m.stats.critical_path.as_secs_f64(),
            m.wall.as_secs_f64() / m.stats.critical_path.as_secs_f64().max(f64::EPSILON),
            one.wall.as_secs_f64() / m.wall.as_secs_f64().max(f64::EPSILON),
            m.cpu.as_secs_f64() * 1000.0 / ran as f64,
            m.peak,
            m.stats.passed,
            m.stats.failed + m.stats.interrupted,
        );
    }
    for m in [&one, &many] {
        if !m.failures.is_empty() {
            println!("failed on {} lane(s): {}", m.lanes, m.failures.join("; "));
        }
    }
    if one.failures.is_empty() && many.failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
