//! The CI configuration around crossconf stays consistent (issue 9):
//! - every YAML file under `suites/`, `ci/` and `testgrid/` parses;
//! - the prow jobs of `ci/prow/` use only fields prow and Kubernetes know, run `crossconf run`
//!   with flags the real binary accepts (checked with `--dry-run`), name existing suites, write
//!   to `$ARTIFACTS`, and reach their cluster through a mounted kubeconfig Secret;
//! - every job has a TestGrid test group and a tab on each dashboard its `testgrid-dashboards`
//!   annotation names, with the annotated tab name, alert address and thresholds, and every
//!   test group and tab of `testgrid/config.yaml` belongs to a job;
//! - the presubmit runs the simulated-cluster suite (`--sim`) and `cargo test`;
//! - the runner image's Dockerfile and the local kind + Windows VM recipe hang together, and
//!   every shell script under `ci/` (and every job's inline script) passes shellcheck.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use k8s_openapi::api::core::v1::{Container, PodSpec};
use serde::Deserialize;
use serde_json::Value;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn rel(path: &Path) -> String {
    path.strip_prefix(root()).unwrap_or(path).display().to_string()
}

/// Files under `dir` (recursively, hidden folders skipped) whose name ends with one of `exts`.
fn files_under(dir: &Path, exts: &[&str]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if !name.starts_with('.') {
                    stack.push(path);
                }
            } else if exts.iter().any(|e| name.ends_with(&format!(".{e}"))) {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", rel(path)))
}

/// Asserts that `text` (the file `name`) contains each of `needles`, naming the first missing one.
fn assert_mentions(text: &str, name: &str, needles: &[&str]) {
    for needle in needles {
        assert!(text.contains(needle), "{name}: no {needle:?}");
    }
}

/// Every YAML document of a file.
fn parse_yaml(path: &Path) -> Result<Vec<Value>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).map_err(|e| e.to_string())?;
    if docs.is_empty() || docs.iter().any(Value::is_null) {
        return Err("empty YAML document".into());
    }
    Ok(docs)
}

fn parse_one(path: &Path) -> Value {
    let mut docs = parse_yaml(path).unwrap_or_else(|e| panic!("{}: {e}", rel(path)));
    assert_eq!(docs.len(), 1, "{}: expected one YAML document", rel(path));
    docs.remove(0)
}

#[test]
fn every_yaml_file_under_suites_ci_and_testgrid_parses() {
    let mut errors = Vec::new();
    for (dir, at_least) in [("suites", 4), ("ci", 3), ("testgrid", 1)] {
        let files = files_under(&root().join(dir), &["yaml", "yml"]);
        assert!(
            files.len() >= at_least,
            "expected at least {at_least} YAML files under {dir}/, found {files:?}"
        );
        for f in files {
            if let Err(e) = parse_yaml(&f) {
                errors.push(format!("{}: {e}", rel(&f)));
            }
        }
    }
    assert!(
        errors.is_empty(),
        "YAML files that do not parse:\n{}",
        errors.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// Prow jobs (test-infra's job config format). Unknown fields are errors, as in prow's checkconfig.

#[allow(
    dead_code,
    reason = "fields are deserialized so that unknown or mistyped ones are rejected"
)]
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct JobConfig {
    #[serde(default)]
    periodics: Vec<Job>,
    #[serde(default)]
    presubmits: BTreeMap<String, Vec<Job>>,
    #[serde(default)]
    postsubmits: BTreeMap<String, Vec<Job>>,
    #[serde(default)]
    presets: Vec<Value>,
}

#[allow(
    dead_code,
    reason = "fields are deserialized so that unknown or mistyped ones are rejected"
)]
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Job {
    name: String,
    interval: Option<String>,
    cron: Option<String>,
    cluster: Option<String>,
    max_concurrency: Option<u32>,
    #[serde(default)]
    decorate: bool,
    decoration_config: Option<DecorationConfig>,
    #[serde(default)]
    extra_refs: Vec<Ref>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
    // presubmit / postsubmit fields
    always_run: Option<bool>,
    optional: Option<bool>,
    run_if_changed: Option<String>,
    skip_if_only_changed: Option<String>,
    #[serde(default)]
    branches: Vec<String>,
    #[serde(default)]
    skip_branches: Vec<String>,
    context: Option<String>,
    path_alias: Option<String>,
    skip_report: Option<bool>,
    reporter_config: Option<Value>,
    rerun_auth_config: Option<Value>,
    spec: Value,
}

#[allow(
    dead_code,
    reason = "fields are deserialized so that unknown or mistyped ones are rejected"
)]
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DecorationConfig {
    timeout: Option<String>,
    grace_period: Option<String>,
    gcs_configuration: Option<Value>,
    gcs_credentials_secret: Option<String>,
    utility_images: Option<Value>,
    skip_cloning: Option<bool>,
}

#[allow(
    dead_code,
    reason = "fields are deserialized so that unknown or mistyped ones are rejected"
)]
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Ref {
    org: String,
    repo: String,
    base_ref: String,
    #[serde(default)]
    workdir: bool,
    path_alias: Option<String>,
    clone_uri: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JobType {
    Periodic,
    Presubmit,
    Postsubmit,
}

struct LoadedJob {
    job: Job,
    kind: JobType,
    file: PathBuf,
    spec: PodSpec,
}

impl LoadedJob {
    fn annotation(&self, key: &str) -> &str {
        self.job
            .annotations
            .get(key)
            .unwrap_or_else(|| panic!("job {}: annotation {key} is missing", self.job.name))
    }

    fn dashboards(&self) -> Vec<String> {
        self.annotation("testgrid-dashboards")
            .split(',')
            .map(|d| d.trim().to_string())
            .filter(|d| !d.is_empty())
            .collect()
    }

    fn number_annotation(&self, key: &str) -> u32 {
        let v = self.annotation(key);
        v.parse()
            .unwrap_or_else(|_| panic!("job {}: {key} must be a number, got {v:?}", self.job.name))
    }

    fn optional_number_annotation(&self, key: &str) -> Option<u32> {
        self.job
            .annotations
            .contains_key(key)
            .then(|| self.number_annotation(key))
    }
}

fn load_jobs() -> Vec<LoadedJob> {
    let mut jobs = Vec::new();
    for file in files_under(&root().join("ci/prow"), &["yaml", "yml"]) {
        let value = parse_one(&file);
        let config: JobConfig =
            serde_json::from_value(value).unwrap_or_else(|e| panic!("{}: not a prow job config: {e}", rel(&file)));
        let all = config
            .periodics
            .into_iter()
            .map(|j| (j, JobType::Periodic))
            .chain(
                config
                    .presubmits
                    .into_values()
                    .flatten()
                    .map(|j| (j, JobType::Presubmit)),
            )
            .chain(
                config
                    .postsubmits
                    .into_values()
                    .flatten()
                    .map(|j| (j, JobType::Postsubmit)),
            );
        for (job, kind) in all {
            let spec: PodSpec = serde_json::from_value(job.spec.clone())
                .unwrap_or_else(|e| panic!("{}: job {}: spec is not a PodSpec: {e}", rel(&file), job.name));
            // k8s-openapi skips unknown fields; a round trip shows them (a typo such as
            // `volumeMount` would silently drop the mount otherwise).
            let back = serde_json::to_value(&spec).unwrap();
            assert_eq!(
                back,
                job.spec,
                "{}: job {}: the pod spec has fields Kubernetes does not know",
                rel(&file),
                job.name
            );
            jobs.push(LoadedJob {
                job,
                kind,
                file: file.clone(),
                spec,
            });
        }
    }
    assert!(!jobs.is_empty(), "no prow jobs under ci/prow/");
    jobs
}

// ---------------------------------------------------------------------------------------------
// The commands a job's container runs: `command` + `args`, or the script of `bash -c`.

/// Splits a shell script into simple commands of words. Handles quotes, backslashes, comments,
/// line continuations, the separators `; && || | &` and drops redirections. Enough for the
/// scripts of job definitions; `$VAR` stays literal.
fn shell_commands(script: &str) -> Vec<Vec<String>> {
    let mut commands = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = script.chars().peekable();
    let end_word = |words: &mut Vec<String>, word: &mut String, in_word: &mut bool| {
        if *in_word {
            words.push(std::mem::take(word));
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    word.push(c);
                }
            }
            '"' => {
                in_word = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => {
                            if let Some(n) = chars.next() {
                                if !matches!(n, '"' | '\\' | '$' | '`' | '\n') {
                                    word.push('\\');
                                }
                                if n != '\n' {
                                    word.push(n);
                                }
                            }
                        }
                        _ => word.push(c),
                    }
                }
            }
            '\\' => match chars.next() {
                Some('\n') | None => {}
                Some(n) => {
                    in_word = true;
                    word.push(n);
                }
            },
            '#' if !in_word => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
                end_word(&mut words, &mut word, &mut in_word);
                if !words.is_empty() {
                    commands.push(std::mem::take(&mut words));
                }
            }
            '>' | '<' => {
                // A redirection: drop an fd number before it, the operator and its target.
                if in_word && word.chars().all(|c| c.is_ascii_digit()) {
                    word.clear();
                    in_word = false;
                }
                end_word(&mut words, &mut word, &mut in_word);
                while chars.peek().is_some_and(|c| matches!(c, '>' | '&')) {
                    chars.next();
                }
                while chars.peek().is_some_and(|c| *c == ' ' || *c == '\t') {
                    chars.next();
                }
                while chars
                    .peek()
                    .is_some_and(|c| !c.is_whitespace() && !matches!(c, ';' | '&' | '|'))
                {
                    chars.next();
                }
            }
            '\n' | ';' | '&' | '|' => {
                end_word(&mut words, &mut word, &mut in_word);
                if matches!(c, '&' | '|') && chars.peek() == Some(&c) {
                    chars.next();
                }
                if !words.is_empty() {
                    commands.push(std::mem::take(&mut words));
                }
            }
            c if c.is_whitespace() => end_word(&mut words, &mut word, &mut in_word),
            _ => {
                in_word = true;
                word.push(c);
            }
        }
    }
    end_word(&mut words, &mut word, &mut in_word);
    if !words.is_empty() {
        commands.push(words);
    }
    commands
}

#[test]
fn the_shell_splitter_reads_job_scripts_as_bash_does() {
    let cmds = shell_commands(
        "set -euo pipefail\n# a comment\ncrossconf run --suite 'suites/a b.yaml' \\\n  --report-dir \"$ARTIFACTS\" >&2 || echo \"x y\" 2>/dev/null; cargo test && exec ./target/debug/crossconf run --sim",
    );
    assert_eq!(
        cmds,
        vec![
            vec!["set", "-euo", "pipefail"],
            vec![
                "crossconf",
                "run",
                "--suite",
                "suites/a b.yaml",
                "--report-dir",
                "$ARTIFACTS"
            ],
            vec!["echo", "x y"],
            vec!["cargo", "test"],
            vec!["exec", "./target/debug/crossconf", "run", "--sim"],
        ]
    );
}

fn is_shell(program: &str) -> bool {
    matches!(program.rsplit('/').next().unwrap_or(program), "bash" | "sh" | "dash")
}

/// The inline script of a container that runs `bash -c SCRIPT`, if it does.
fn container_script(c: &Container) -> Option<String> {
    let argv: Vec<String> = c
        .command
        .clone()
        .unwrap_or_default()
        .into_iter()
        .chain(c.args.clone().unwrap_or_default())
        .collect();
    (argv.len() >= 3 && is_shell(&argv[0]) && argv[1] == "-c").then(|| argv[2].clone())
}

/// The simple commands a container runs.
fn container_commands(c: &Container) -> Vec<Vec<String>> {
    match container_script(c) {
        Some(script) => shell_commands(&script),
        None => vec![
            c.command
                .clone()
                .unwrap_or_default()
                .into_iter()
                .chain(c.args.clone().unwrap_or_default())
                .collect(),
        ],
    }
}

/// The words of a command after `exec` and leading `VAR=value` assignments.
fn program_and_args(cmd: &[String]) -> &[String] {
    let mut i = 0;
    while i < cmd.len() && (cmd[i] == "exec" || (cmd[i].contains('=') && !cmd[i].starts_with('-'))) {
        i += 1;
    }
    &cmd[i..]
}

/// The arguments of every `crossconf ...` invocation of a job (the word after `crossconf` first).
fn crossconf_invocations(job: &LoadedJob) -> Vec<Vec<String>> {
    job.spec
        .containers
        .iter()
        .flat_map(container_commands)
        .filter_map(|cmd| {
            let words = program_and_args(&cmd);
            let program = words.first()?;
            (program.rsplit('/').next() == Some("crossconf")).then(|| words[1..].to_vec())
        })
        .collect()
}

fn runs_cargo_test(job: &LoadedJob) -> bool {
    job.spec.containers.iter().flat_map(container_commands).any(|cmd| {
        let words = program_and_args(&cmd);
        words.first().map(String::as_str) == Some("cargo") && words.get(1).map(String::as_str) == Some("test")
    })
}

/// The value of `--flag VALUE` or `--flag=VALUE`.
fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    let eq = format!("{name}=");
    args.iter().enumerate().find_map(|(i, a)| {
        if a == name {
            args.get(i + 1).map(String::as_str)
        } else {
            a.strip_prefix(&eq)
        }
    })
}

fn has_flag(args: &[String], name: &str) -> bool {
    args.iter().any(|a| a == name || a.starts_with(&format!("{name}=")))
}

/// "4h", "90m", "1h30m", "15s" in seconds.
fn duration_secs(s: &str) -> u64 {
    let mut total = 0;
    let mut n = String::new();
    for c in s.chars() {
        if c.is_ascii_digit() {
            n.push(c);
        } else {
            let v: u64 = n.parse().unwrap_or_else(|_| panic!("bad duration {s:?}"));
            n.clear();
            total += v * match c {
                'h' => 3600,
                'm' => 60,
                's' => 1,
                _ => panic!("bad duration {s:?}"),
            };
        }
    }
    assert!(n.is_empty() && total > 0, "bad duration {s:?}");
    total
}

fn suite_files() -> Vec<PathBuf> {
    files_under(&root().join("suites"), &["yaml"])
}

fn stem(path: &str) -> &str {
    let file = path.rsplit('/').next().unwrap_or(path);
    file.strip_suffix(".yaml").unwrap_or(file)
}

/// The suite a job runs: the `--suite` of its single `crossconf run`.
fn job_run_args(job: &LoadedJob) -> Vec<String> {
    let runs: Vec<Vec<String>> = crossconf_invocations(job)
        .into_iter()
        .filter(|a| a.first().map(String::as_str) == Some("run"))
        .collect();
    assert_eq!(
        runs.len(),
        1,
        "job {}: expected exactly one `crossconf run`, found {runs:?}",
        job.job.name
    );
    runs.into_iter().next().unwrap()
}

#[test]
fn prow_jobs_run_existing_suites_into_artifacts() {
    let jobs = load_jobs();
    let mut names = BTreeSet::new();
    let mut suites_with_periodic = BTreeSet::new();
    for j in &jobs {
        let name = &j.job.name;
        assert!(names.insert(name.clone()), "job name {name} is used twice");
        assert!(
            j.job.decorate,
            "{}: job {name}: decorate: true (prow's pod utilities set $ARTIFACTS and upload it)",
            rel(&j.file)
        );
        assert!(!j.spec.containers.is_empty(), "job {name}: no container");
        for key in [
            "testgrid-dashboards",
            "testgrid-tab-name",
            "testgrid-alert-email",
            "testgrid-num-failures-to-alert",
            "testgrid-num-columns-recent",
        ] {
            assert!(
                !j.annotation(key).trim().is_empty(),
                "job {name}: annotation {key} is empty"
            );
        }
        j.number_annotation("testgrid-num-failures-to-alert");
        j.number_annotation("testgrid-num-columns-recent");
        assert!(
            j.annotation("testgrid-alert-email").contains('@'),
            "job {name}: testgrid-alert-email is not an address"
        );

        let run = job_run_args(j);
        let suite = flag(&run, "--suite").unwrap_or_else(|| panic!("job {name}: `crossconf run` has no --suite"));
        assert!(
            suite.starts_with("suites/") && root().join(suite).is_file(),
            "job {name}: --suite {suite} is not a file in suites/"
        );
        assert_eq!(
            j.job.labels.get("crossconf.io/suite").map(String::as_str),
            Some(stem(suite)),
            "job {name}: label crossconf.io/suite must name its suite"
        );
        let report_dir = flag(&run, "--report-dir");
        assert!(
            matches!(report_dir, Some("$ARTIFACTS" | "${ARTIFACTS}")),
            "job {name}: `crossconf run` must write to --report-dir \"$ARTIFACTS\", got {report_dir:?}"
        );
        let timeout = j
            .job
            .decoration_config
            .as_ref()
            .and_then(|d| d.timeout.as_deref())
            .unwrap_or_else(|| panic!("job {name}: decoration_config.timeout is missing"));
        let timeout = duration_secs(timeout);

        match j.kind {
            JobType::Periodic => {
                assert_eq!(
                    name,
                    &format!("ci-crossconf-{}", stem(suite)),
                    "periodic names are ci-crossconf-<suite>"
                );
                assert!(
                    j.job.interval.is_some() != j.job.cron.is_some(),
                    "job {name}: exactly one of interval and cron"
                );
                if let Some(i) = &j.job.interval {
                    duration_secs(i);
                }
                if let Some(c) = &j.job.cron {
                    assert_eq!(c.split_whitespace().count(), 5, "job {name}: cron {c:?} needs 5 fields");
                }
                assert!(
                    j.job.extra_refs.iter().any(|r| r.workdir),
                    "job {name}: extra_refs must check out crossconf as the working directory (for suites/)"
                );
                assert!(
                    !has_flag(&run, "--sim"),
                    "job {name}: a periodic runs against a real cluster"
                );
                // Prow must not kill the run before the suite's own budget ends it cleanly.
                let suite_doc = parse_one(&root().join(suite));
                if let Some(t) = suite_doc.get("timeout").and_then(Value::as_str) {
                    assert!(
                        timeout >= duration_secs(t),
                        "job {name}: decoration timeout is shorter than the suite's timeout {t}"
                    );
                }
                check_kubeconfig_is_a_mounted_secret(j, &run);
                suites_with_periodic.insert(stem(suite).to_string());
            }
            JobType::Presubmit | JobType::Postsubmit => {
                assert!(
                    name.starts_with("pull-crossconf-") || name.starts_with("post-crossconf-"),
                    "job {name}: name"
                );
            }
        }
    }

    // Every suite runs in a periodic job.
    let all_suites: BTreeSet<String> = suite_files()
        .iter()
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        suites_with_periodic, all_suites,
        "every suite in suites/ has a periodic job and vice versa"
    );

    // The nightly job mirrors the upstream capz Windows nightly job (shared/UPSTREAM.md).
    let nightly = jobs
        .iter()
        .find(|j| j.job.name == "ci-crossconf-windows-nightly")
        .expect("the ci-crossconf-windows-nightly job");
    assert_eq!(
        nightly.job.interval.as_deref(),
        Some("3h"),
        "the nightly job runs every 3h"
    );
    assert_eq!(
        nightly
            .job
            .decoration_config
            .as_ref()
            .and_then(|d| d.timeout.as_deref()),
        Some("4h"),
        "the nightly job times out after 4h"
    );
    let run = job_run_args(nightly);
    assert_eq!(flag(&run, "--suite"), Some("suites/windows-nightly.yaml"));
    assert!(has_flag(&run, "--prepull-images"), "the nightly job prepulls images");
    let dashboards = nightly.dashboards();
    for d in ["sig-windows-master-release", "sig-windows-signal"] {
        assert!(dashboards.iter().any(|x| x == d), "the nightly job is on {d}");
    }
}

/// A job against a real cluster passes `--kubeconfig PATH` where PATH lies in a read-only
/// volume mount of its container backed by a Secret (the cluster's kubeconfig).
fn check_kubeconfig_is_a_mounted_secret(j: &LoadedJob, run: &[String]) {
    let name = &j.job.name;
    let path = flag(run, "--kubeconfig").unwrap_or_else(|| panic!("job {name}: `crossconf run` has no --kubeconfig"));
    let secret_volumes: BTreeSet<&str> = j
        .spec
        .volumes
        .iter()
        .flatten()
        .filter(|v| v.secret.as_ref().is_some_and(|s| s.secret_name.is_some()))
        .map(|v| v.name.as_str())
        .collect();
    let mounted = j.spec.containers.iter().any(|c| {
        c.volume_mounts.iter().flatten().any(|m| {
            secret_volumes.contains(m.name.as_str())
                && m.read_only == Some(true)
                && path.starts_with(&format!("{}/", m.mount_path.trim_end_matches('/')))
        })
    });
    assert!(
        mounted,
        "job {name}: --kubeconfig {path} is not in a read-only Secret volume mount"
    );
    for other in crossconf_invocations(j) {
        if other.first().map(String::as_str) == Some("cleanup") {
            assert_eq!(
                flag(&other, "--kubeconfig"),
                Some(path),
                "job {name}: cleanup must use the run's kubeconfig"
            );
        }
    }
}

#[test]
fn the_presubmit_runs_the_simulated_cluster_suite_and_cargo_test() {
    let jobs = load_jobs();
    let presubmits: Vec<&LoadedJob> = jobs.iter().filter(|j| j.kind == JobType::Presubmit).collect();
    assert!(!presubmits.is_empty(), "ci/prow/ has no presubmit");
    for p in presubmits {
        let run = job_run_args(p);
        assert!(
            has_flag(&run, "--sim"),
            "presubmit {}: `crossconf run` must use --sim",
            p.job.name
        );
        assert!(
            !has_flag(&run, "--kubeconfig"),
            "presubmit {}: the simulator needs no kubeconfig",
            p.job.name
        );
        assert!(runs_cargo_test(p), "presubmit {}: must run `cargo test`", p.job.name);
        assert!(
            p.job.always_run == Some(true) || p.job.run_if_changed.is_some(),
            "presubmit {}: never triggered",
            p.job.name
        );
    }
}

/// Every `crossconf` command line of every job is accepted by the real binary: `run` with
/// `--dry-run` (validates flags and loads the suite without touching a cluster), other
/// subcommands with `--help` appended (clap rejects unknown flags before it prints help).
#[test]
fn every_crossconf_command_line_of_the_jobs_is_accepted_by_the_binary() {
    let artifacts = tempfile::tempdir().unwrap();
    let artifacts_str = artifacts.path().to_str().unwrap().to_string();
    let mut checked = 0;
    for j in load_jobs() {
        for args in crossconf_invocations(&j) {
            let args: Vec<String> = args
                .into_iter()
                .map(|a| {
                    a.replace("${ARTIFACTS}", &artifacts_str)
                        .replace("$ARTIFACTS", &artifacts_str)
                })
                .collect();
            let extra = if args.first().map(String::as_str) == Some("run") {
                "--dry-run"
            } else {
                "--help"
            };
            let out = Command::new(env!("CARGO_BIN_EXE_crossconf"))
                .args(&args)
                .arg(extra)
                .current_dir(root())
                .env_remove("KUBECONFIG")
                .env_remove("KUBE_TEST_REPO_LIST")
                .env("ARTIFACTS", &artifacts_str)
                .env("CI", "true")
                .output()
                .expect("the crossconf binary runs");
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "job {}: `crossconf {} {extra}` failed ({}):\n{}{}",
                j.job.name,
                args.join(" "),
                out.status,
                stdout,
                String::from_utf8_lossy(&out.stderr)
            );
            if extra == "--dry-run" {
                let line = stdout
                    .lines()
                    .find(|l| l.starts_with("dry run: would run "))
                    .unwrap_or_else(|| panic!("job {}: no dry-run summary in:\n{stdout}", j.job.name));
                let n: usize = line["dry run: would run ".len()..]
                    .split_whitespace()
                    .next()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or_else(|| panic!("job {}: unexpected summary {line:?}", j.job.name));
                assert!(n > 0, "job {}: its suite selects no case: {line}", j.job.name);
            }
            checked += 1;
        }
    }
    assert!(
        checked >= 5,
        "expected the command lines of at least five jobs, checked {checked}"
    );
}

// ---------------------------------------------------------------------------------------------
// TestGrid configuration (GoogleCloudPlatform/testgrid pb/config/config.proto, YAML form).

#[allow(
    dead_code,
    reason = "fields are deserialized so that unknown or mistyped ones are rejected"
)]
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TestGridConfig {
    test_groups: Vec<TestGroup>,
    dashboards: Vec<Dashboard>,
    #[serde(default)]
    dashboard_groups: Vec<DashboardGroup>,
}

#[allow(
    dead_code,
    reason = "fields are deserialized so that unknown or mistyped ones are rejected"
)]
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TestGroup {
    name: String,
    gcs_prefix: String,
    days_of_results: Option<u32>,
    num_columns_recent: Option<u32>,
    tests_name_policy: Option<String>,
    ignore_skip: Option<bool>,
    column_header: Option<Value>,
    test_name_config: Option<Value>,
    notifications: Option<Value>,
    // num_failures_to_alert, alert_stale_results_hours and alert_mail_to_addresses are
    // deprecated here in config.proto (they live in the tab's alert_options): not accepted.
}

#[allow(
    dead_code,
    reason = "fields are deserialized so that unknown or mistyped ones are rejected"
)]
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Dashboard {
    name: String,
    dashboard_tab: Vec<DashboardTab>,
    notifications: Option<Value>,
    default_tab: Option<String>,
}

#[allow(
    dead_code,
    reason = "fields are deserialized so that unknown or mistyped ones are rejected"
)]
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DashboardTab {
    name: String,
    test_group_name: String,
    description: Option<String>,
    base_options: Option<String>,
    num_columns_recent: Option<u32>,
    code_search_url_template: Option<LinkTemplate>,
    open_test_template: Option<LinkTemplate>,
    file_bug_template: Option<LinkTemplate>,
    results_url_template: Option<LinkTemplate>,
    alert_options: Option<AlertOptions>,
}

#[allow(
    dead_code,
    reason = "fields are deserialized so that unknown or mistyped ones are rejected"
)]
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LinkTemplate {
    url: String,
    options: Option<Value>,
    name: Option<String>,
}

#[allow(
    dead_code,
    reason = "fields are deserialized so that unknown or mistyped ones are rejected"
)]
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AlertOptions {
    alert_mail_to_addresses: Option<String>,
    num_failures_to_alert: Option<u32>,
    alert_stale_results_hours: Option<u32>,
    num_passes_to_disable_alert: Option<u32>,
    subject: Option<String>,
    wait_minutes_between_emails: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DashboardGroup {
    name: String,
    dashboard_names: Vec<String>,
}

fn load_testgrid() -> TestGridConfig {
    let path = root().join("testgrid/config.yaml");
    serde_json::from_value(parse_one(&path))
        .unwrap_or_else(|e| panic!("testgrid/config.yaml is not a TestGrid config: {e}"))
}

#[test]
fn every_job_has_its_testgrid_tabs_and_every_tab_a_job() {
    let jobs = load_jobs();
    let tg = load_testgrid();
    let by_name: BTreeMap<&str, &LoadedJob> = jobs.iter().map(|j| (j.job.name.as_str(), j)).collect();
    let dashboards: BTreeMap<&str, &Dashboard> = tg.dashboards.iter().map(|d| (d.name.as_str(), d)).collect();
    assert_eq!(dashboards.len(), tg.dashboards.len(), "dashboard names must be unique");
    for required in ["sig-windows-master-release", "sig-windows-signal"] {
        assert!(dashboards.contains_key(required), "dashboard {required} is missing");
    }

    // Test groups: one per job, named like it, reading where prow uploads that job's results.
    let mut groups = BTreeMap::new();
    let mut buckets = BTreeSet::new();
    for g in &tg.test_groups {
        assert!(
            groups.insert(g.name.as_str(), g).is_none(),
            "test group {} is defined twice",
            g.name
        );
        let job = by_name
            .get(g.name.as_str())
            .unwrap_or_else(|| panic!("test group {} has no prow job of that name", g.name));
        let (bucket, path) = g
            .gcs_prefix
            .split_once('/')
            .unwrap_or_else(|| panic!("test group {}: gcs_prefix {} has no bucket", g.name, g.gcs_prefix));
        buckets.insert(bucket);
        let expected = match job.kind {
            JobType::Presubmit => format!("pr-logs/directory/{}", g.name),
            JobType::Periodic | JobType::Postsubmit => format!("logs/{}", g.name),
        };
        assert_eq!(path, expected, "test group {}: gcs_prefix {}", g.name, g.gcs_prefix);
        assert_eq!(
            g.num_columns_recent,
            Some(job.number_annotation("testgrid-num-columns-recent")),
            "test group {}: num_columns_recent must equal the job's testgrid-num-columns-recent",
            g.name
        );
    }
    assert_eq!(
        buckets.len(),
        1,
        "all test groups read the same bucket, found {buckets:?}"
    );

    // Jobs → tabs.
    for j in &jobs {
        let name = j.job.name.as_str();
        assert!(
            groups.contains_key(name),
            "job {name} has no test group in testgrid/config.yaml"
        );
        let listed = j.dashboards();
        assert!(!listed.is_empty(), "job {name}: testgrid-dashboards names no dashboard");
        let unique: BTreeSet<&String> = listed.iter().collect();
        assert_eq!(unique.len(), listed.len(), "job {name}: a dashboard is listed twice");
        let tab_name = j.annotation("testgrid-tab-name");
        let email = j.annotation("testgrid-alert-email");
        let failures = j.number_annotation("testgrid-num-failures-to-alert");
        let stale = j.optional_number_annotation("testgrid-alert-stale-results-hours");
        for (i, d) in listed.iter().enumerate() {
            let dashboard = dashboards
                .get(d.as_str())
                .unwrap_or_else(|| panic!("job {name}: dashboard {d} is not in testgrid/config.yaml"));
            let tabs: Vec<&DashboardTab> = dashboard
                .dashboard_tab
                .iter()
                .filter(|t| t.test_group_name == name)
                .collect();
            assert_eq!(
                tabs.len(),
                1,
                "job {name}: expected one tab on {d}, found {}",
                tabs.len()
            );
            let tab = tabs[0];
            assert_eq!(
                tab.name, tab_name,
                "job {name}: the tab on {d} must be named by testgrid-tab-name"
            );
            if let Some(desc) = j.job.annotations.get("description") {
                assert_eq!(
                    tab.description.as_deref(),
                    Some(desc.as_str()),
                    "job {name}: tab description on {d}"
                );
            }
            // Like the configurator: the alert address goes on the first dashboard's tab.
            if i == 0 {
                let alerts = tab
                    .alert_options
                    .as_ref()
                    .unwrap_or_else(|| panic!("job {name}: the tab on {d} (its first dashboard) has no alert_options"));
                assert_eq!(
                    alerts.alert_mail_to_addresses.as_deref(),
                    Some(email),
                    "job {name}: alert address on {d}"
                );
            }
            if let Some(alerts) = &tab.alert_options {
                if let Some(to) = &alerts.alert_mail_to_addresses {
                    assert_eq!(to, email, "job {name}: alert address on {d}");
                }
                assert_eq!(
                    alerts.num_failures_to_alert,
                    Some(failures),
                    "job {name}: num_failures_to_alert on {d}"
                );
                assert_eq!(
                    alerts.alert_stale_results_hours, stale,
                    "job {name}: alert_stale_results_hours on {d}"
                );
            }
        }
    }

    // Tabs → jobs: no tab for a job that does not ask for it, no duplicate tab names.
    for d in &tg.dashboards {
        let mut tab_names = BTreeSet::new();
        assert!(!d.dashboard_tab.is_empty(), "dashboard {} has no tab", d.name);
        for t in &d.dashboard_tab {
            assert!(
                tab_names.insert(t.name.as_str()),
                "dashboard {}: tab {} twice",
                d.name,
                t.name
            );
            let job = by_name.get(t.test_group_name.as_str()).unwrap_or_else(|| {
                panic!(
                    "dashboard {}: tab {} shows {}, which is no prow job",
                    d.name, t.name, t.test_group_name
                )
            });
            assert!(
                job.dashboards().contains(&d.name),
                "dashboard {}: tab {} but job {}'s testgrid-dashboards does not list {}",
                d.name,
                t.name,
                job.job.name,
                d.name
            );
            assert!(
                groups.contains_key(t.test_group_name.as_str()),
                "tab {} has no test group",
                t.name
            );
        }
    }
    for g in &tg.dashboard_groups {
        for d in &g.dashboard_names {
            assert!(
                dashboards.contains_key(d.as_str()),
                "dashboard group {}: no dashboard {d}",
                g.name
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The runner image.

/// "1.89" / "1.89.0" as (major, minor).
fn major_minor(v: &str) -> (u32, u32) {
    let mut it = v.trim().trim_matches('"').split('.');
    let major = it
        .next()
        .and_then(|x| x.parse().ok())
        .unwrap_or_else(|| panic!("bad version {v:?}"));
    let minor = it
        .next()
        .and_then(|x| x.parse().ok())
        .unwrap_or_else(|| panic!("bad version {v:?}"));
    (major, minor)
}

#[test]
fn the_runner_image_is_built_in_two_stages_with_a_new_enough_toolchain() {
    let dockerfile = read(&root().join("ci/prow/Dockerfile"));
    let lines: Vec<&str> = dockerfile
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let arg = |name: &str| {
        lines
            .iter()
            .find_map(|l| l.strip_prefix(&format!("ARG {name}=")))
            .unwrap_or_else(|| panic!("Dockerfile: ARG {name}=... missing"))
            .to_string()
    };
    let froms: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with("FROM "))
        .map(|(i, _)| i)
        .collect();
    assert!(
        froms.len() >= 2,
        "Dockerfile: expected a build stage and a runtime stage"
    );
    let build_from = lines[froms[0]];
    assert!(
        build_from.contains("rust:") && build_from.contains(" AS "),
        "Dockerfile: the first stage builds with the Rust image: {build_from}"
    );
    let runtime_from = lines[*froms.last().unwrap()];
    assert!(
        runtime_from.contains("debian:") && runtime_from.contains("-slim"),
        "Dockerfile: the final stage is slim Debian: {runtime_from}"
    );
    let runtime = &lines[*froms.last().unwrap()..];
    for needle in ["COPY --from=", "COPY suites/", "COPY images/"] {
        assert!(
            runtime.iter().any(|l| l.starts_with(needle)),
            "Dockerfile: final stage lacks {needle}"
        );
    }

    let cargo = read(&root().join("Cargo.toml"));
    let msrv = cargo
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("rust-version")
                .map(|r| r.trim_start_matches([' ', '=']).to_string())
        })
        .expect("Cargo.toml rust-version");
    let rust = arg("RUST_VERSION");
    assert!(
        major_minor(&rust) >= major_minor(&msrv),
        "Dockerfile RUST_VERSION {rust} is older than rust-version {msrv}"
    );

    // The presubmit builds with the same toolchain as the image; periodics all run one image.
    let jobs = load_jobs();
    for j in jobs.iter().filter(|j| j.kind == JobType::Presubmit) {
        for c in &j.spec.containers {
            let image = c.image.as_deref().unwrap_or_default();
            assert!(
                image.contains(&format!("rust:{rust}")),
                "presubmit {}: image {image} is not rust:{rust}",
                j.job.name
            );
        }
    }
    let runner_images: BTreeSet<&str> = jobs
        .iter()
        .filter(|j| j.kind == JobType::Periodic)
        .flat_map(|j| j.spec.containers.iter().filter_map(|c| c.image.as_deref()))
        .collect();
    assert_eq!(
        runner_images.len(),
        1,
        "periodics run one runner image, found {runner_images:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// The local kind + Windows VM recipe.

/// `VAR="${VAR:-default}"` in a script: the default.
fn script_default(script: &str, var: &str) -> String {
    let prefix = format!("{var}=\"${{{var}:-");
    script
        .lines()
        .find_map(|l| l.trim().strip_prefix(&prefix).and_then(|r| r.strip_suffix("}\"")))
        .unwrap_or_else(|| panic!("no default for {var}"))
        .to_string()
}

fn cidr(s: &str) -> (u32, u32) {
    let (ip, len) = s.split_once('/').unwrap_or_else(|| panic!("{s} is not a CIDR"));
    let ip: std::net::Ipv4Addr = ip.parse().unwrap_or_else(|_| panic!("{s} is not an IPv4 CIDR"));
    let len: u32 = len.parse().unwrap_or_else(|_| panic!("{s} is not a CIDR"));
    assert!(len <= 32, "{s}");
    (u32::from(ip), len)
}

fn contains(net: (u32, u32), ip: u32) -> bool {
    let mask = if net.1 == 0 { 0 } else { u32::MAX << (32 - net.1) };
    net.0 & mask == ip & mask
}

fn overlap(a: (u32, u32), b: (u32, u32)) -> bool {
    contains(a, b.0) || contains(b, a.0)
}

#[test]
fn the_local_recipe_exposes_the_api_server_to_the_vm_and_fits_flannel_vxlan() {
    let local = root().join("ci/local");
    for f in [
        "README.md",
        "kind-config.yaml",
        "setup-cni.sh",
        "join-windows.ps1",
        "create-cluster.sh",
    ] {
        assert!(local.join(f).is_file(), "ci/local/{f} is missing");
    }
    let kind = parse_one(&local.join("kind-config.yaml"));
    assert_eq!(kind["kind"], "Cluster");
    assert_eq!(kind["apiVersion"], "kind.x-k8s.io/v1alpha4");
    let net = &kind["networking"];
    let api_address = net["apiServerAddress"].as_str().expect("networking.apiServerAddress");
    let api_ip: std::net::Ipv4Addr = api_address.parse().expect("apiServerAddress is an IPv4 address");
    assert!(
        !api_ip.is_loopback(),
        "the Windows VM cannot reach a loopback apiServerAddress"
    );
    // The kubeconfigs kubeadm gives joining nodes name <cluster>-control-plane:6443.
    assert_eq!(
        net["apiServerPort"], 6443,
        "apiServerPort must be 6443 (see kind-config.yaml)"
    );
    assert_eq!(net["disableDefaultCNI"], true, "kindnet must make way for Flannel");
    let pods = cidr(net["podSubnet"].as_str().expect("podSubnet"));
    let services = cidr(net["serviceSubnet"].as_str().expect("serviceSubnet"));
    let nodes = kind["nodes"].as_array().expect("nodes");
    assert!(nodes.iter().any(|n| n["role"] == "control-plane"));
    assert!(
        nodes.iter().any(|n| n["role"] == "worker"),
        "a Linux worker for the Linux side of hybrid cases"
    );

    let create = read(&local.join("create-cluster.sh"));
    let host_ip = script_default(&create, "HOST_IP");
    let vm = cidr(&script_default(&create, "VM_CIDR"));
    let kind_net = cidr(&script_default(&create, "KIND_NETWORK_CIDR"));
    assert_eq!(
        host_ip, api_address,
        "create-cluster.sh's HOST_IP default and kind-config.yaml agree"
    );
    assert!(
        contains(vm, u32::from(api_ip)),
        "the API server address is on the VM network"
    );
    let named = [
        ("podSubnet", pods),
        ("serviceSubnet", services),
        ("VM_CIDR", vm),
        ("KIND_NETWORK_CIDR", kind_net),
    ];
    for (i, (a, na)) in named.iter().enumerate() {
        for (b, nb) in &named[i + 1..] {
            assert!(!overlap(*na, *nb), "{a} and {b} overlap");
        }
    }
    assert_mentions(
        &create,
        "create-cluster.sh",
        &[
            "kind create cluster",
            "kubeadm token create",
            "os=windows:NoSchedule",
            "doctor --kubeconfig",
            "suites/windows-nightly.yaml",
            "--focus",
        ],
    );

    let cni = read(&local.join("setup-cni.sh"));
    assert!(
        cni.lines().any(|l| l.trim() == "VXLAN_VNI=4096"),
        "setup-cni.sh: Flannel for Windows needs VNI 4096"
    );
    assert!(
        cni.lines().any(|l| l.trim() == "VXLAN_PORT=4789"),
        "setup-cni.sh: Flannel for Windows needs port 4789"
    );
    assert!(
        cni.contains("kubernetes-sigs/sig-windows-tools"),
        "setup-cni.sh: name the upstream project"
    );

    let join = read(&local.join("join-windows.ps1"));
    assert_mentions(
        &join,
        "join-windows.ps1",
        &[
            "kubeadm join",
            "--discovery-token-ca-cert-hash",
            "--cri-socket",
            "Install-Containerd.ps1",
            "PrepareNode.ps1",
        ],
    );
    assert!(
        !join.contains("--node-labels"),
        "join-windows.ps1: the kubelet sets the Windows labels itself"
    );

    let readme = read(&local.join("README.md"));
    assert_mentions(
        &readme,
        "ci/local/README.md",
        &[
            "crossconf doctor",
            "crossconf run --suite suites/windows-nightly.yaml --focus",
            "join-windows.ps1",
            "setup-cni.sh",
        ],
    );
}

// ---------------------------------------------------------------------------------------------
// Shell scripts.

fn shellcheck_available() -> Result<(), String> {
    match Command::new("shellcheck").arg("--version").output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!("`shellcheck --version` exited with {}", o.status)),
        Err(e) => Err(format!("shellcheck is not installed ({e})")),
    }
}

fn run_shellcheck(files: &[PathBuf]) -> Result<(), String> {
    let out = Command::new("shellcheck")
        .args(["--color=never", "--external-sources", "--shell=bash"])
        .args(files)
        .current_dir(root())
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() && out.stdout.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

#[test]
fn shell_scripts_under_ci_are_strict_and_pass_shellcheck() {
    let scripts = files_under(&root().join("ci"), &["sh"]);
    assert!(!scripts.is_empty(), "no shell scripts under ci/");
    for s in &scripts {
        let text = read(s);
        let first = text.lines().next().unwrap_or_default();
        assert!(
            first == "#!/usr/bin/env bash" || first == "#!/bin/bash",
            "{}: starts with {first:?}, expected a bash shebang",
            rel(s)
        );
        let first_command = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with('#'))
            .unwrap_or_default();
        assert_eq!(
            first_command,
            "set -euo pipefail",
            "{}: the first command must be `set -euo pipefail`",
            rel(s)
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(s).unwrap().permissions().mode();
            assert!(mode & 0o111 != 0, "{}: not executable", rel(s));
        }
    }
    if let Err(reason) = shellcheck_available() {
        println!("skipping shellcheck of {} scripts: {reason}", scripts.len());
        return;
    }
    if let Err(report) = run_shellcheck(&scripts) {
        panic!("shellcheck reports problems in ci/:\n{report}");
    }
}

#[test]
fn the_inline_scripts_of_the_prow_jobs_pass_shellcheck() {
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for j in load_jobs() {
        for (i, c) in j.spec.containers.iter().enumerate() {
            if let Some(script) = container_script(c) {
                let path = dir.path().join(format!("{}-{i}.sh", j.job.name));
                std::fs::write(&path, format!("#!/bin/bash\n{script}")).unwrap();
                files.push(path);
            }
        }
    }
    assert!(!files.is_empty(), "the jobs run no inline scripts; nothing to check");
    if let Err(reason) = shellcheck_available() {
        println!("skipping shellcheck of {} job scripts: {reason}", files.len());
        return;
    }
    if let Err(report) = run_shellcheck(&files) {
        panic!("shellcheck reports problems in the jobs' scripts:\n{report}");
    }
}
