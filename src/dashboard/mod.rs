//! `crossconf dashboard`: one self-contained HTML page, like a TestGrid tab, from result folders.
//!
//! The main functions are [`load_run`] (one result folder → [`RunResults`]) and [`render`]
//! (runs → HTML). A result folder is what a run leaves in its report directory and what prow
//! uploads for a build: `junit*.xml`, `started.json` and `finished.json` (also looked for under
//! `artifacts/`, the prow layout TestGrid reads).
//!
//! # The page
//!
//! A grid of cases (rows, by full case name, sorted) × runs (columns, newest first by the
//! `started.json` timestamp). Cells are coloured by status; a skipped cell carries its reason
//! and a failed or flaky cell its failure text; clicking a cell shows that text in `#details`.
//! Each column header shows the run's totals and, on hover, its metadata. A filter box keeps
//! the rows whose name contains every word typed (tags are part of names, so `[Serial]` and
//! `LinuxOnly` work). `junit_runner.xml` steps (preflight, prepull, cleanup) are shown as a
//! separate block of rows below the cases, so an infrastructure failure is visible without
//! being counted as a case.
//!
//! The page needs no network: CSS and JS are inline, and there are no external references.
//! Every text from the results is HTML-escaped, because failure messages carry pod output, and
//! the page is also well-formed XML (void elements self-closed, no `<` or `&` in the inline
//! code), so tests can parse it strictly and an escaping mistake cannot hide.
//!
//! Stable hooks for tests and scripts: `table#grid`, `th.run-col`, `tr.case-row[data-name]`,
//! `tr.step-row`, `td.cell.pass|fail|flaky|skip|none`, `#details`, `#filter`. A URL fragment
//! `#filter=TEXT&open=CELL-ID` pre-fills the filter and opens a cell's details, so a headless
//! browser can check the script without clicking.
//!
//! # Status rules
//!
//! A `<failure>` or `<error>` is a failure (as TestGrid reads it). A passed case with
//! `<flakyFailure>`/`<flakyError>`/`<rerunFailure>`/`<rerunError>` elements, a `flaky=true`
//! property, or `attempt.N` properties whose value starts with "failed" is flaky. `<skipped>` is
//! a skip with its message as the reason. A case listed more than once in one run (several
//! JUnit files) keeps its most telling status: fail, then flaky, then pass, then skip.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod junit;
mod page;
mod xml;

use junit::parse_junit;
pub use page::{escape, render};

/// A `Result` whose error is this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can go wrong reading result folders or writing the page.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A results directory could not be listed.
    #[error("cannot read results directory {}", dir.display())]
    ReadDir {
        /// The directory.
        dir: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A results file could not be read.
    #[error("cannot read {}", path.display())]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A directory has no `junit*.xml` (a typo in `--results`, most likely).
    #[error("results directory {} has no junit*.xml file (nor has its artifacts/)", dir.display())]
    NoJunit {
        /// The directory.
        dir: PathBuf,
    },
    /// A JUnit file is not well-formed XML, or not JUnit.
    #[error("{} is not a JUnit XML file (line {line}: {problem})", path.display())]
    Junit {
        /// The file.
        path: PathBuf,
        /// The 1-based line of the problem.
        line: usize,
        /// What is wrong.
        problem: String,
    },
    /// `started.json` or `finished.json` is not the JSON object prow writes.
    #[error("{} is not a prow metadata file", path.display())]
    Metadata {
        /// The file.
        path: PathBuf,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
    /// The page could not be written.
    #[error("cannot write dashboard {}", path.display())]
    Write {
        /// The output file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// The status of one case in one run, as a cell shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Status {
    /// Skipped, with a reason.
    Skip,
    /// Passed on the first attempt.
    Pass,
    /// Passed after a failed attempt.
    Flaky,
    /// Failed (or errored, or was interrupted).
    Fail,
}

impl Status {
    /// The CSS class of the cell (`pass`, `fail`, `flaky`, `skip`).
    pub fn class(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::Flaky => "flaky",
            Status::Skip => "skip",
        }
    }

    /// A one-character label, so cells read without colour too.
    fn glyph(self) -> &'static str {
        match self {
            Status::Pass => "✓",
            Status::Fail => "✗",
            Status::Flaky => "~",
            Status::Skip => "–",
        }
    }
}

/// One `<testcase>` of a run, interpreted.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseResult {
    /// The full case name (the `name` attribute).
    pub name: String,
    /// The `<testsuite name>` it was in.
    pub suite: String,
    /// Its status.
    pub status: Status,
    /// The failure text (fail), the failed attempts (flaky), or the reason (skip); else empty.
    pub message: String,
    /// `time` in seconds, when given.
    pub seconds: Option<f64>,
    /// The `<property>` pairs, in file order.
    pub properties: Vec<(String, String)>,
}

/// Per-run counts for a column header.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Cases that passed on the first attempt.
    pub passed: usize,
    /// Cases that failed.
    pub failed: usize,
    /// Cases that passed after a failed attempt.
    pub flaky: usize,
    /// Cases skipped.
    pub skipped: usize,
}

/// One result folder: a column of the grid.
#[derive(Debug, Clone, PartialEq)]
pub struct RunResults {
    /// The folder it was read from.
    pub dir: PathBuf,
    /// The column title: the folder's name.
    pub name: String,
    /// `started.json` `timestamp`, in Unix seconds.
    pub started: Option<i64>,
    /// `finished.json` `timestamp`, in Unix seconds.
    pub finished: Option<i64>,
    /// `finished.json` `passed`.
    pub passed: Option<bool>,
    /// `metadata` of `started.json`, then of `finished.json` (which wins on conflicts).
    pub metadata: BTreeMap<String, serde_json::Value>,
    /// The cases of every `junit*.xml` except `junit_runner.xml`, one per name.
    pub cases: Vec<CaseResult>,
    /// The steps of `junit_runner.xml` (preflight, prepull, cleanup).
    pub steps: Vec<CaseResult>,
}

impl RunResults {
    /// The counts of each status among the cases.
    pub fn totals(&self) -> Totals {
        let mut t = Totals::default();
        for case in &self.cases {
            match case.status {
                Status::Pass => t.passed += 1,
                Status::Fail => t.failed += 1,
                Status::Flaky => t.flaky += 1,
                Status::Skip => t.skipped += 1,
            }
        }
        t
    }

    /// The case with this full name.
    pub fn case(&self, name: &str) -> Option<&CaseResult> {
        self.cases.iter().find(|c| c.name == name)
    }
}

/// The name of the runner-steps file, shown apart from the cases.
const RUNNER_FILE: &str = "junit_runner.xml";

/// Reads one result folder: its `junit*.xml` files and prow metadata, in the folder itself or
/// under `artifacts/`.
///
/// # Errors
/// [`Error::ReadDir`], [`Error::ReadFile`], [`Error::NoJunit`] when neither place holds a
/// JUnit file, [`Error::Junit`] for a malformed file, [`Error::Metadata`] for bad JSON.
pub fn load_run(dir: &Path) -> Result<RunResults> {
    let mut junit_files = junit_files(dir)?;
    let artifacts = dir.join("artifacts");
    if junit_files.is_empty() && artifacts.is_dir() {
        junit_files = junit_files_in(&artifacts)?;
    }
    if junit_files.is_empty() {
        return Err(Error::NoJunit { dir: dir.to_path_buf() });
    }
    let mut cases: BTreeMap<String, CaseResult> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut steps = Vec::new();
    for path in &junit_files {
        let text = read(path)?;
        let parsed = parse_junit(&text).map_err(|e| Error::Junit {
            path: path.clone(),
            line: e.line,
            problem: e.problem,
        })?;
        if path.file_name().is_some_and(|n| n == RUNNER_FILE) {
            steps.extend(parsed);
            continue;
        }
        for case in parsed {
            match cases.get_mut(&case.name) {
                Some(existing) => merge(existing, case),
                None => {
                    order.push(case.name.clone());
                    cases.insert(case.name.clone(), case);
                }
            }
        }
    }
    let cases = order.into_iter().filter_map(|n| cases.remove(&n)).collect();
    let started = read_metadata(dir, "started.json")?;
    let finished = read_metadata(dir, "finished.json")?;
    let mut metadata = BTreeMap::new();
    for file in [&started, &finished].into_iter().flatten() {
        if let Some(serde_json::Value::Object(m)) = file.get("metadata") {
            metadata.extend(m.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    let timestamp = |f: &Option<serde_json::Map<String, serde_json::Value>>| {
        f.as_ref()
            .and_then(|m| m.get("timestamp"))
            .and_then(|t| t.as_i64().or_else(|| t.as_f64().map(|f| f as i64)))
    };
    Ok(RunResults {
        name: dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| dir.display().to_string()),
        dir: dir.to_path_buf(),
        started: timestamp(&started),
        finished: timestamp(&finished),
        passed: finished
            .as_ref()
            .and_then(|m| m.get("passed"))
            .and_then(serde_json::Value::as_bool),
        metadata,
        cases,
        steps,
    })
}

/// Reads every folder with [`load_run`].
///
/// # Errors
/// The first folder's error.
pub fn load_runs<P: AsRef<Path>>(dirs: &[P]) -> Result<Vec<RunResults>> {
    dirs.iter().map(|d| load_run(d.as_ref())).collect()
}

/// Renders the runs and writes the page to `out`.
///
/// # Errors
/// [`Error::Write`].
pub fn write_page(runs: &[RunResults], out: &Path) -> Result<()> {
    std::fs::write(out, render(runs)).map_err(|source| Error::Write {
        path: out.to_path_buf(),
        source,
    })
}

/// Keeps the most telling of two results for one case in one run, and both texts.
fn merge(existing: &mut CaseResult, other: CaseResult) {
    if other.status > existing.status {
        let previous = std::mem::replace(existing, other);
        if !previous.message.is_empty() && previous.status != Status::Skip {
            existing.message = format!("{}\n\n{}", existing.message, previous.message);
        }
    } else if other.status == existing.status && other.status != Status::Skip && !other.message.is_empty() {
        existing.message = format!("{}\n\n{}", existing.message, other.message);
    }
}

fn junit_files(dir: &Path) -> Result<Vec<PathBuf>> {
    if !dir.is_dir() {
        // Listing gives the clearest I/O error (not found, not a directory, no permission).
        std::fs::read_dir(dir).map_err(|source| Error::ReadDir {
            dir: dir.to_path_buf(),
            source,
        })?;
    }
    junit_files_in(dir)
}

fn junit_files_in(dir: &Path) -> Result<Vec<PathBuf>> {
    let read_dir_error = |source| Error::ReadDir {
        dir: dir.to_path_buf(),
        source,
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(read_dir_error)? {
        let path = entry.map_err(read_dir_error)?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        if name.is_some_and(|n| n.starts_with("junit") && n.ends_with(".xml")) && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|source| Error::ReadFile {
        path: path.to_path_buf(),
        source,
    })
}

/// `started.json` / `finished.json` from the folder, else from its parent layout's
/// `artifacts/`-less root; absent files are `None` (a run killed early has no finished.json).
fn read_metadata(dir: &Path, file: &str) -> Result<Option<serde_json::Map<String, serde_json::Value>>> {
    let path = dir.join(file);
    if !path.is_file() {
        return Ok(None);
    }
    let text = read(&path)?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|source| Error::Metadata { path, source })
}

#[cfg(test)]
mod tests {
    use super::page::{SCRIPT, STYLE, newest_first, short, tags};
    use super::*;

    const JUNIT: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="crossconf" tests="5" failures="1">
  <testsuite name="crossconf" tests="5">
    <testcase name="[sig-node] a passes [Conformance]" classname="crossconf" time="1.5"/>
    <testcase name="[sig-node] b fails" time="2">
      <failure type="failed" message="expected 3 pods">expected 3 pods, saw 2 on node &lt;win-1&gt;
pod dump follows</failure>
      <rerunFailure type="failed" message="first">first attempt</rerunFailure>
    </testcase>
    <testcase name="[sig-node] c flakes">
      <flakyFailure type="failed" message="timed out">timed out waiting</flakyFailure>
      <properties><property name="attempts" value="2"/></properties>
    </testcase>
    <testcase name="[sig-node] d skipped [LinuxOnly]"><skipped message="[LinuxOnly] case on a Windows target"/></testcase>
    <testcase name="[sig-node] e interrupted"><error type="interrupted" message="cancelled">cancelled by SIGINT</error></testcase>
    <testcase name="[sig-node] f attempt property">
      <properties><property name="attempt.1" value="failed: connection refused"/><property name="attempt.2" value="passed"/></properties>
    </testcase>
  </testsuite>
</testsuites>
"#;

    #[test]
    fn interprets_every_status() {
        let cases = parse_junit(JUNIT).unwrap();
        let status: Vec<Status> = cases.iter().map(|c| c.status).collect();
        assert_eq!(
            status,
            [
                Status::Pass,
                Status::Fail,
                Status::Flaky,
                Status::Skip,
                Status::Fail,
                Status::Flaky
            ]
        );
        assert!(
            cases[1]
                .message
                .starts_with("expected 3 pods, saw 2 on node <win-1>\npod dump")
        );
        assert!(cases[1].message.contains("earlier attempts:\nfirst attempt"));
        assert!(cases[2].message.contains("timed out waiting"));
        assert_eq!(cases[3].message, "[LinuxOnly] case on a Windows target");
        assert_eq!(cases[4].message, "[interrupted] cancelled by SIGINT");
        assert!(cases[5].message.contains("attempt.1: failed: connection refused"));
        assert_eq!(cases[0].seconds, Some(1.5));
        assert_eq!(cases[0].suite, "crossconf");
    }

    #[test]
    fn a_flaky_property_marks_a_pass_flaky() {
        let xml = r#"<testsuite name="s"><testcase name="x"><properties><property name="flaky" value="true"/></properties></testcase></testsuite>"#;
        assert_eq!(parse_junit(xml).unwrap()[0].status, Status::Flaky);
    }

    #[test]
    fn non_junit_roots_are_rejected() {
        let err = parse_junit("<html></html>").unwrap_err();
        assert!(err.problem.contains("<html>"));
        let err = parse_junit("<testsuite><testcase/></testsuite>").unwrap_err();
        assert!(err.problem.contains("no name"));
    }

    #[test]
    fn merging_keeps_the_most_telling_status() {
        let case = |status, message: &str| CaseResult {
            name: "x".into(),
            suite: "s".into(),
            status,
            message: message.into(),
            seconds: None,
            properties: Vec::new(),
        };
        let mut a = case(Status::Skip, "not in this shard");
        merge(&mut a, case(Status::Pass, ""));
        assert_eq!(a.status, Status::Pass);
        merge(&mut a, case(Status::Fail, "boom"));
        assert_eq!((a.status, a.message.as_str()), (Status::Fail, "boom"));
        merge(&mut a, case(Status::Skip, "later skip"));
        assert_eq!((a.status, a.message.as_str()), (Status::Fail, "boom"));
    }

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            escape(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }

    #[test]
    fn inline_code_has_no_markup_characters() {
        // Keeps the page well-formed XML as well as HTML, so tests can parse it strictly.
        for code in [STYLE, SCRIPT] {
            assert!(!code.contains('<') && !code.contains('&'));
        }
    }

    #[test]
    fn tags_are_the_bracketed_tokens() {
        assert_eq!(
            tags("[sig-network] a b [Conformance] [Feature:X]"),
            ["[sig-network]", "[Conformance]", "[Feature:X]"]
        );
        assert!(tags("no tags").is_empty());
    }

    #[test]
    fn short_cuts_to_the_first_line_and_limit() {
        assert_eq!(short("\n  first line\nsecond", 140), "first line");
        assert_eq!(short(&"x".repeat(200), 10).chars().count(), 10);
    }

    fn run(name: &str, started: Option<i64>, cases: Vec<CaseResult>) -> RunResults {
        RunResults {
            dir: PathBuf::from(format!("/results/{name}")),
            name: name.into(),
            started,
            finished: None,
            passed: None,
            metadata: BTreeMap::new(),
            cases,
            steps: Vec::new(),
        }
    }

    #[test]
    fn columns_are_newest_first_and_text_is_escaped() {
        let cases = parse_junit(JUNIT).unwrap();
        let runs = [
            run("old", Some(1_000), cases.clone()),
            run("undated", None, cases[..1].to_vec()),
            run("new", Some(2_000), cases),
        ];
        let order: Vec<&str> = newest_first(&runs).iter().map(|r| r.name.as_str()).collect();
        assert_eq!(order, ["new", "old", "undated"]);
        let html = render(&runs);
        assert_eq!(html.matches("<th class=\"run-col").count(), 3);
        assert_eq!(html.matches("<tr class=\"case-row\"").count(), 6);
        assert!(html.contains("saw 2 on node &lt;win-1&gt;"));
        assert!(!html.contains("<win-1>"));
        assert!(
            !html.contains("http://") && !html.contains("https://"),
            "no network references"
        );
        // The undated run has only the first case: the others show as absent there.
        assert_eq!(html.matches("class=\"cell none\"").count(), 5);
    }
}
