//! Trial times for the libtest-mimic harnesses (`e2e`, `can_fail`): recorded as trials finish,
//! written after the run, read back next time to start the longest trials first, and printed
//! (the slowest ten) so CI shows where its time goes.
//!
//! Expected durations come from `target/tmp/<harness>-durations.tsv` (this checkout's last
//! run), else `tests/fixtures/durations/<harness>.tsv` (a committed run, so a clean clone in
//! CI starts long trials first too; `CROSSCONF_UPDATE_DURATIONS=1` rewrites it), else the
//! harness's estimate. The format is `seconds<TAB>trial key`, one line per trial.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossconf::run::Durations;

fn local_file(harness: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{harness}-durations.tsv"))
}

fn fixture_file(harness: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/durations/{harness}.tsv"))
}

/// Parses `seconds<TAB>key` lines; `None` for a file that is missing or has a malformed line
/// (then the harness falls back to estimates, and says so once).
fn parse(path: &PathBuf) -> Option<Durations> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut times = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let parsed = line
            .split_once('\t')
            .and_then(|(secs, key)| Some((key.to_string(), Duration::from_secs_f64(secs.parse::<f64>().ok()?))));
        match parsed {
            Some(t) => times.push(t),
            None => {
                eprintln!(
                    "warning: {}:{}: not `seconds<TAB>key`; ordering trials by estimates",
                    path.display(),
                    i + 1
                );
                return None;
            }
        }
    }
    Some(Durations::from_times(&path.display().to_string(), times))
}

/// The previous durations of `harness`'s trials, if any were recorded.
pub fn previous(harness: &str) -> Option<Durations> {
    parse(&local_file(harness)).or_else(|| parse(&fixture_file(harness)))
}

/// Trial times recorded during a run.
#[derive(Clone)]
pub struct TrialTimes(Arc<Mutex<Vec<(String, Duration)>>>, Instant);

impl Default for TrialTimes {
    fn default() -> Self {
        Self(Arc::default(), Instant::now())
    }
}

/// This process's user + system CPU time so far, from `/proc/self/stat` (fields 14 and 15, in
/// the kernel's 100 Hz clock ticks); `None` off Linux.
fn process_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces; the fields after its closing parenthesis do not.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

impl TrialTimes {
    /// Records one finished trial.
    pub fn record(&self, key: String, took: Duration) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push((key, took));
    }

    /// Writes the times for the next run (and the fixture when asked), then prints the slowest
    /// ten trials with their share of the harness's total.
    pub fn finish(&self, harness: &str) {
        let ran = self.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if ran.is_empty() {
            return;
        }
        // A filtered run times only some trials: keep the others' earlier times.
        let mut merged: std::collections::BTreeMap<String, Duration> = std::fs::read_to_string(local_file(harness))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let (secs, key) = l.split_once('\t')?;
                Some((key.to_string(), Duration::from_secs_f64(secs.parse::<f64>().ok()?)))
            })
            .collect();
        merged.extend(ran.iter().cloned());
        let mut all: Vec<(String, Duration)> = merged.into_iter().collect();
        all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let mut times = ran;
        times.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let text: String = all
            .iter()
            .map(|(k, d)| format!("{:.1}\t{k}\n", d.as_secs_f64()))
            .collect();
        let mut targets = vec![local_file(harness)];
        if std::env::var_os("CROSSCONF_UPDATE_DURATIONS").is_some_and(|v| v == "1") {
            targets.push(fixture_file(harness));
        }
        for path in targets {
            if let Err(e) = std::fs::write(&path, &text) {
                eprintln!("warning: cannot write {}: {e}", path.display());
            }
        }
        let total: Duration = times.iter().map(|(_, d)| *d).sum();
        println!(
            "\nslowest {} of {} {harness} trials (sum of trial times {:.0}s):",
            times.len().min(10),
            times.len(),
            total.as_secs_f64()
        );
        for (key, d) in times.iter().take(10) {
            println!("  {:>7.1}s  {key}", d.as_secs_f64());
        }
        // What a catalogue three times this size would cost: trials wait on the simulated
        // cluster rather than compute, so the wall follows the trial-time sum over the threads
        // until the process's CPU (harness and in-process simulator) fills the cores.
        let wall = self.1.elapsed();
        let cores = std::thread::available_parallelism().map_or(1, usize::from) as f64;
        if let Some(cpu) = process_cpu() {
            let busy = cpu.as_secs_f64() / (wall.as_secs_f64() * cores).max(f64::EPSILON);
            println!(
                "{harness}: {} trials in {:.0}s wall, {:.0}s CPU ({:.0}% of {cores} cores); three times the trials at this \
                 concurrency: about {:.0}s, CPU-bound from {:.1}x the concurrency",
                times.len(),
                wall.as_secs_f64(),
                cpu.as_secs_f64(),
                busy * 100.0,
                3.0 * wall.as_secs_f64(),
                1.0 / busy.max(f64::EPSILON),
            );
        }
    }
}

/// Lanes for a harness of `trials` trials: one per `per_lane`, at least `min`.
///
/// Trials wait on the simulated cluster rather than compute (the line [`TrialTimes::finish`]
/// prints shows the process using a few percent of the cores), so a harness keeps its wall as
/// the catalogue grows by growing its lanes instead.
pub fn lanes_for(trials: usize, per_lane: usize, min: usize) -> usize {
    trials.div_ceil(per_lane).max(min)
}
