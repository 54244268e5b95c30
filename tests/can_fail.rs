//! Every case can fail: each case runs against a simulated cluster broken the way the case guards
//! against, and must fail with a message naming what broke.
//!
//! The rows live in `tests/fixtures/can_fail/*.tsv`, one file per area of the catalogue. Each
//! non-comment line is `os<TAB>faults<TAB>case name<TAB>expected fragment`:
//! - `faults` is a `--faults` spec (`blackhole=win-1,blackhole=win-2`; see
//!   `crossconf sim --help` and `sim/src/faults.rs`); the row passes only if the case *fails* and
//!   its failure message contains `expected fragment` (case-sensitive).
//! - `faults` `-` is for a case that skips on the simulator by design (no metrics API, say):
//!   the row passes only if the case skips with a reason containing the fragment.
//! - An `@timeout=SECONDS` entry among the faults is not a fault: it lets a case that needs more
//!   than [`MAX_CASE_TIME`] to reach its check (a CronJob waiting for its second scheduled run)
//!   take up to that long.
//!
//! Rows with the same fault spec share one simulated cluster, started when the first of them
//! runs and stopped after the last; a `[Serial]` case gets a cluster of its own. `coverage` checks
//! that every case that runs on the Windows target has a row, except the known failures and the
//! cases listed in `tests/fixtures/can_fail/pending.txt` (a to-do list that only shrinks).
//!
//! A case the plan skips on the simulator's provider (`sim`: no cloud load balancer) is not
//! run: its `-` row checks the plan's skip reason, as `crossconf run --sim` would report it.
//!
//! Groups start longest-expected-row first, and a group's rows one after another, longest first
//! (times from the last run, see `support/timing.rs`): the long rows overlap the short ones
//! instead of ending the run, and a group's cluster lives only while its rows run.
//!
//! `cargo test --test can_fail -- 'Granular'` runs the rows of matching cases only.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crossconf::catalog::{Case, Catalog};
use crossconf::os::Os;
use crossconf::run::{Durations, schedule};
use crossconf::select::{self, PlanContext, Provider, Selection, SkipReason};
use libtest_mimic::{Arguments, Failed, Trial};
use support::timing::{self, TrialTimes};
use support::{Attempt, Target, attempt_case, known_failures};

/// The longest a case may take under a fault: a broken cluster makes cases wait out their own
/// waits, and a wait that names what it waited for does so well before this. It must also cover
/// the probing cases' 55 s watch (upstream's `Consistently`) after the pod starts, plus the
/// framework's wait margin, on a loaded 2-core CI machine: at 60 s a pod that took 1.3 s to run
/// left 54.7 s, and the case rightly refused to call a shortened watch a result.
const MAX_CASE_TIME: Duration = Duration::from_secs(70);

/// One line of a `can_fail/*.tsv` file.
#[derive(Debug, Clone)]
struct Row {
    os: Os,
    /// `None` for `-`: the case must skip.
    faults: Option<String>,
    /// The row's own time limit (`@timeout=SECONDS`), if any.
    timeout: Option<Duration>,
    case: String,
    fragment: String,
    at: String,
}

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/can_fail")
}

/// Reads every row; a malformed line is an error naming its file and line.
fn read_rows() -> Result<Vec<Row>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixture_dir())
        .map_err(|e| format!("{}: {e}", fixture_dir().display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "tsv"))
        .collect();
    files.sort();
    let mut rows = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let short = file.file_name().unwrap_or_default().to_string_lossy().into_owned();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let at = format!("{short}:{}", i + 1);
            let cols: Vec<&str> = line.split('\t').collect();
            let [os, faults, case, fragment] = cols[..] else {
                return Err(format!("{at}: expected 4 tab-separated columns, found {}", cols.len()));
            };
            let os: Os = os.parse().map_err(|_| format!("{at}: unknown OS {os:?}"))?;
            if fragment.trim().is_empty() {
                return Err(format!("{at}: empty expected fragment"));
            }
            let mut timeout = None;
            let mut switches = Vec::new();
            for item in faults.split(',').map(str::trim).filter(|i| !i.is_empty()) {
                match item.strip_prefix("@timeout=") {
                    Some(secs) => {
                        let secs: u64 = secs.parse().map_err(|_| format!("{at}: bad {item:?} (seconds)"))?;
                        timeout = Some(Duration::from_secs(secs));
                    }
                    None if item.starts_with('@') => return Err(format!("{at}: unknown harness option {item:?}")),
                    None => switches.push(item),
                }
            }
            let faults = switches.join(",");
            rows.push(Row {
                os,
                timeout,
                faults: (faults != "-").then_some(faults),
                case: case.to_string(),
                fragment: fragment.to_string(),
                at,
            });
        }
    }
    Ok(rows)
}

fn read_pending() -> BTreeSet<String> {
    std::fs::read_to_string(fixture_dir().join("pending.txt"))
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

/// A simulated cluster shared by the rows of one group, started on first use and stopped when
/// the group's last row is done (a cluster per fault spec would otherwise pile up over the run).
struct Group {
    faults: Option<String>,
    state: tokio::sync::Mutex<GroupState>,
    left: AtomicUsize,
}

enum GroupState {
    NotStarted,
    Running(Arc<Target>),
    Broken(String),
    Stopped,
}

impl Group {
    async fn target(&self) -> Result<Arc<Target>, String> {
        let mut state = self.state.lock().await;
        if matches!(*state, GroupState::NotStarted) {
            *state = match Target::start(Some(self.faults.as_deref().unwrap_or(""))).await {
                Ok(t) => GroupState::Running(Arc::new(t)),
                Err(e) => GroupState::Broken(e),
            };
        }
        match &*state {
            GroupState::Running(t) => Ok(t.clone()),
            GroupState::Broken(e) => Err(e.clone()),
            GroupState::NotStarted | GroupState::Stopped => Err("the group's cluster is already stopped".into()),
        }
    }

    /// Counts one row done; the last one stops the cluster.
    async fn row_done(&self) {
        if self.left.fetch_sub(1, Ordering::SeqCst) != 1 {
            return;
        }
        let old = std::mem::replace(&mut *self.state.lock().await, GroupState::Stopped);
        if let GroupState::Running(t) = old
            && let Some(t) = Arc::into_inner(t)
        {
            t.shutdown().await;
        }
    }
}

fn run_row(
    group: &Group,
    row: &Row,
    case: &Case,
    plan_skip: Option<String>,
    runtime: &tokio::runtime::Runtime,
) -> Result<(), Failed> {
    let result = runtime.block_on(async {
        if let Some(reason) = plan_skip {
            group.row_done().await;
            return Ok(Attempt::Skipped(reason));
        }
        let outcome = match group.target().await {
            Ok(target) => {
                let ctx = target.context(row.os, &format!("canfail-{}", std::process::id()));
                drop(target);
                let limit = row.timeout.unwrap_or(MAX_CASE_TIME);
                Ok(attempt_case(&ctx, case, case.timeout.min(limit)).await)
            }
            Err(e) => Err(format!("{}: {e}", row.at)),
        };
        group.row_done().await;
        outcome
    });
    let attempt = result.map_err(Failed::from)?;
    let faults = row.faults.as_deref().unwrap_or("-");
    match (attempt, &row.faults) {
        (Attempt::Failed(m), Some(_)) if m.contains(&row.fragment) => Ok(()),
        (Attempt::Failed(m), Some(_)) => Err(format!(
            "{}: under faults {faults} the case failed, but its message does not contain {:?}:\n{m}",
            row.at, row.fragment
        )
        .into()),
        (Attempt::Passed, Some(_)) => Err(format!(
            "{}: the case PASSED with faults {faults}; it does not detect that breakage (expected a failure naming {:?})",
            row.at, row.fragment
        )
        .into()),
        (Attempt::Skipped(r), Some(_)) => Err(format!(
            "{}: the case skipped under faults {faults} ({r}); expected a failure naming {:?}",
            row.at, row.fragment
        )
        .into()),
        (Attempt::Skipped(r), None) if r.contains(&row.fragment) => Ok(()),
        (other, None) => Err(format!(
            "{}: expected the case to skip with a reason containing {:?}, got {}",
            row.at,
            row.fragment,
            match other {
                Attempt::Passed => "a pass".to_string(),
                Attempt::Skipped(r) => format!("a skip: {r}"),
                Attempt::Failed(m) => format!("a failure: {m}"),
            }
        )
        .into()),
    }
}

/// The trial key of a row in the durations files.
fn row_key(row: &Row) -> String {
    format!(
        "[{}] {} | faults {}",
        row.os,
        row.case,
        row.faults.as_deref().unwrap_or("-")
    )
}

/// How long a row should take: measured last time, else the case's estimate within the row's
/// limit.
fn row_expected(row: &Row, case: Option<&Case>, previous: Option<&Durations>) -> Duration {
    previous.and_then(|p| p.get(&row_key(row))).unwrap_or_else(|| {
        let limit = row.timeout.unwrap_or(MAX_CASE_TIME);
        case.map_or(limit, |c| schedule::estimate(c).min(limit))
    })
}

/// Every row names a registered case that runs on its OS; every case that can run on Windows
/// (whatever its feature gates) has a row unless it is a known failure or pending.
fn coverage(catalog: &Catalog, rows: &[Row]) -> Result<(), Failed> {
    let known = known_failures();
    let pending = read_pending();
    let mut problems = Vec::new();
    let mut runs: BTreeMap<Os, BTreeSet<&str>> = BTreeMap::new();
    for os in Os::ALL {
        let plan = select::plan(catalog, &Selection::everything(), &PlanContext::new(os));
        runs.insert(
            os,
            plan.entries
                .iter()
                .filter(|e| {
                    // Feature-gated, flaky and disruptive cases run when named, so they need rows
                    // too; only the OS rules take a case off a target for good.
                    !matches!(
                        e.skip_reason(),
                        Some(SkipReason::LinuxOnlyOnWindows | SkipReason::WindowsOnlyOnLinux)
                    )
                })
                .map(|e| e.name)
                .collect(),
        );
    }
    for row in rows {
        if catalog.by_name(&row.case).is_none() {
            problems.push(format!("{}: no case named {:?}", row.at, row.case));
        } else if !runs[&row.os].contains(row.case.as_str()) {
            problems.push(format!("{}: {:?} does not run on {}", row.at, row.case, row.os));
        }
    }
    let covered: BTreeSet<&str> = rows
        .iter()
        .filter(|r| r.os == Os::Windows)
        .map(|r| r.case.as_str())
        .collect();
    for name in &pending {
        if covered.contains(name.as_str()) {
            problems.push(format!(
                "pending.txt lists {name:?}, which has a row now: remove it from pending.txt"
            ));
        } else if catalog.by_name(name).is_none() {
            problems.push(format!("pending.txt lists an unknown case {name:?}"));
        }
    }
    for name in &runs[&Os::Windows] {
        let known_failure = known.contains_key(&("windows".to_string(), (*name).to_string()));
        if !covered.contains(name) && !known_failure && !pending.contains(*name) {
            problems.push(format!("no can-fail row for {name:?} on windows"));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!("{} problem(s):\n{}", problems.len(), problems.join("\n")).into())
    }
}

fn main() {
    let mut args = Arguments::from_args();
    crossconf::install_crypto_provider();
    let catalog = Arc::new(Catalog::new(crossconf::cases::all()).expect("case names are unique"));
    let rows = match read_rows() {
        Ok(rows) => rows,
        Err(e) => {
            eprintln!("tests/fixtures/can_fail: {e}");
            std::process::exit(101);
        }
    };

    let mut trials = Vec::new();
    {
        let (catalog, rows) = (catalog.clone(), rows.clone());
        trials.push(Trial::test("coverage: every case has a can-fail row", move || {
            coverage(&catalog, &rows)
        }));
    }
    if args.list {
        trials.extend(rows.iter().map(|r| {
            Trial::test(
                format!("{} | faults {}", r.case, r.faults.as_deref().unwrap_or("-")),
                || Ok(()),
            )
            .with_kind(r.os.to_string())
        }));
        libtest_mimic::run(&args, trials).exit();
    }

    let runtime = Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("tokio runtime"),
    );
    // Group rows by cluster: the fault spec, and a cluster of its own for a serial case.
    let mut ordered = rows.clone();
    let group_key = |r: &Row| -> String {
        let serial = catalog.by_name(&r.case).is_some_and(|c| c.is_serial());
        format!(
            "{}{}",
            r.faults.as_deref().unwrap_or(""),
            if serial {
                format!(" #serial {}", r.case)
            } else {
                String::new()
            }
        )
    };
    let previous = timing::previous("can_fail");
    let expected = |r: &Row| row_expected(r, catalog.by_name(&r.case), previous.as_ref());
    // A group's rows longest first; groups by their longest row, longest first.
    let mut longest: BTreeMap<String, Duration> = BTreeMap::new();
    for r in &ordered {
        let slot = longest.entry(group_key(r)).or_default();
        *slot = (*slot).max(expected(r));
    }
    ordered.sort_by(|a, b| {
        let (ka, kb) = (group_key(a), group_key(b));
        longest[&kb]
            .cmp(&longest[&ka])
            .then_with(|| ka.cmp(&kb))
            .then_with(|| expected(b).cmp(&expected(a)))
    });
    // The plan's skips on the simulator's provider, per OS (a `-` row checks them).
    let provider_skips: BTreeMap<(Os, &str), String> = Os::ALL
        .into_iter()
        .flat_map(|os| {
            let mut ctx = PlanContext::new(os);
            ctx.provider = Provider::SIM;
            select::plan(&catalog, &Selection::everything(), &ctx)
                .entries
                .into_iter()
                .filter_map(move |e| match e.skip_reason() {
                    Some(r @ SkipReason::ProviderUnsupported { .. }) => Some(((os, e.name), r.to_string())),
                    _ => None,
                })
        })
        .collect();
    let times = TrialTimes::default();
    let mut groups: BTreeMap<String, Arc<Group>> = BTreeMap::new();
    for r in &ordered {
        groups
            .entry(group_key(r))
            .or_insert_with(|| {
                Arc::new(Group {
                    faults: r.faults.clone(),
                    state: tokio::sync::Mutex::new(GroupState::NotStarted),
                    left: AtomicUsize::new(0),
                })
            })
            .left
            .fetch_add(1, Ordering::SeqCst);
    }
    for row in ordered {
        let group = groups[&group_key(&row)].clone();
        let name = format!("{} | faults {}", row.case, row.faults.as_deref().unwrap_or("-"));
        let plan_skip = provider_skips.get(&(row.os, row.case.as_str())).cloned();
        let (catalog, runtime, kind, times) = (catalog.clone(), runtime.clone(), row.os.to_string(), times.clone());
        trials.push(
            Trial::test(name, move || {
                let Some(case) = catalog.by_name(&row.case) else {
                    return Err(format!("{}: no case named {:?}", row.at, row.case).into());
                };
                let t0 = std::time::Instant::now();
                let result = run_row(&group, &row, case, plan_skip, &runtime);
                times.record(row_key(&row), t0.elapsed());
                result
            })
            .with_kind(kind),
        );
    }
    // Rows wait on broken clusters rather than compute: lanes grow with the rows (one per 13,
    // at least 12) so a larger catalogue keeps about the same wall; see `timing::lanes_for`.
    // (One per 25 kept 373 rows at 13 % of two cores for 697 s; one per 18 kept 766 rows at
    // 53 % for 478 s.)
    if args.test_threads.is_none() {
        args.test_threads = Some(timing::lanes_for(trials.len(), 13, 12));
    }
    let conclusion = libtest_mimic::run(&args, trials);
    times.finish("can_fail");
    conclusion.exit();
}
