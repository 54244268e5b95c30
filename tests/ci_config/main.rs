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
//!
//! One file per configuration: `prow` (jobs, their scripts and command lines), `testgrid`,
//! `image` (the runner Dockerfile), `local_recipe` (kind + Windows VM) and `shellcheck`; the job
//! model and the YAML helpers they share are here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use k8s_openapi::api::core::v1::{Container, PodSpec};
use serde::Deserialize;
use serde_json::Value;

mod image;
mod local_recipe;
mod prow;
mod shellcheck;
mod testgrid;

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
