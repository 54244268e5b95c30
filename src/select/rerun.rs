//! `--rerun-failed JUNIT.xml`: select exactly the cases that failed or errored in a report.
//!
//! The main type is [`RerunSet`]; the XML is read by [`super::junit_xml`], which accepts
//! upstream ginkgo reports as well as ours and makes anything malformed an error with its line
//! and column rather than a silently empty rerun.

use std::collections::BTreeSet;
use std::path::Path;

use super::Error;
use super::junit_xml::testcases;

/// Names of the testcases that failed or errored in one JUnit file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RerunSet {
    /// Where the names came from, for skip reasons.
    pub source: String,
    /// Full case names (upstream's `[It] ` prefix removed).
    pub names: BTreeSet<String>,
}

impl RerunSet {
    /// Reads and parses a JUnit file.
    ///
    /// # Errors
    ///
    /// [`Error::RerunRead`] when the file cannot be read, [`Error::RerunMalformed`] when it is
    /// not well-formed JUnit XML.
    pub fn load(path: &Path) -> Result<RerunSet, Error> {
        let source = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| Error::RerunRead {
            path: source.clone(),
            source: e,
        })?;
        RerunSet::parse(&source, &text)
    }

    /// Parses JUnit XML text; `source` names it in errors.
    ///
    /// A testcase counts when it has a direct `<failure>` or `<error>` child; `flakyFailure`
    /// and `rerunFailure` rows are earlier attempts of a case whose own status decides.
    ///
    /// # Errors
    ///
    /// [`Error::RerunMalformed`] with the line and column of the problem.
    pub fn parse(source: &str, text: &str) -> Result<RerunSet, Error> {
        failed_cases(text)
            .map(|names| RerunSet {
                source: source.to_string(),
                names,
            })
            .map_err(|message| Error::RerunMalformed {
                path: source.to_string(),
                message,
            })
    }

    /// Whether the case named `name` failed or errored.
    pub fn contains(&self, name: &str) -> bool {
        self.names.contains(name)
    }

    /// Failed names that no catalogue case has (renamed or removed cases, or ginkgo's
    /// `[SynchronizedBeforeSuite]` rows): worth a warning, since a rerun of only those would
    /// run nothing and pass.
    pub fn unknown_names<'a>(&'a self, catalog: &crate::catalog::Catalog) -> Vec<&'a str> {
        self.names
            .iter()
            .filter(|n| catalog.by_name(n).is_none())
            .map(String::as_str)
            .collect()
    }
}

/// The names of failed or errored testcases, or where the XML is malformed.
fn failed_cases(text: &str) -> Result<BTreeSet<String>, String> {
    Ok(testcases(text)?
        .into_iter()
        .filter(|c| c.failed)
        .map(|c| c.name)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    const GINKGO: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<!-- written by ginkgo -->
<testsuites tests="5" disabled="0" errors="1" failures="1" time="12.5">
  <testsuite name="Kubernetes e2e suite" package="/" tests="5">
    <properties><property name="SuiteSucceeded" value="false"></property></properties>
    <testcase name="[It] [sig-node] passes" classname="Kubernetes e2e suite" status="passed" time="1"></testcase>
    <testcase name="[It] [sig-node] fails &amp; says &quot;why&quot;" status="failed" time="2">
      <failure message="boom" type="failed"><![CDATA[<b>not a tag</b> ]]></failure>
      <system-err>&lt;stderr&gt;</system-err>
    </testcase>
    <testcase name="[It] [sig-node] interrupted" status="interrupted"><error type="interrupted"/></testcase>
    <testcase name="[It] [sig-node] skipped [LinuxOnly]" status="skipped"><skipped message="skipped - LinuxOnly"/></testcase>
    <testcase name="[sig-node] flaky then passed"><flakyFailure message="x"/></testcase>
  </testsuite>
</testsuites>
"#;

    #[test]
    fn keeps_exactly_failed_and_errored_cases() {
        let set = RerunSet::parse("junit_01.xml", GINKGO).unwrap();
        let names: Vec<&str> = set.names.iter().map(String::as_str).collect();
        assert_eq!(names, vec!["[sig-node] fails & says \"why\"", "[sig-node] interrupted"]);
    }

    #[test]
    fn unknown_names_are_the_ones_missing_from_the_catalogue() {
        use crate::catalog::{Catalog, Kind, test_helpers::fixture};
        let catalog = Catalog::new(vec![fixture("[sig-node] interrupted", Kind::Adapted)]).unwrap();
        let set = RerunSet::parse("junit_01.xml", GINKGO).unwrap();
        assert_eq!(set.unknown_names(&catalog), vec!["[sig-node] fails & says \"why\""]);
    }

    #[test]
    fn reads_a_single_testsuite_root() {
        let xml = "<testsuite name='s'><testcase name='a'><failure/></testcase><testcase name='b'/></testsuite>";
        let set = RerunSet::parse("x", xml).unwrap();
        assert!(set.contains("a") && !set.contains("b"));
    }

    #[test_case("", "line 1 column 1: no <testsuites> or <testsuite> element"; "empty")]
    #[test_case("<testsuites><testsuite name='s'>", "line 1 column 13: <testsuite> is never closed"; "truncated")]
    #[test_case("<testsuites></testsuite>", "line 1 column 13: </testsuite> closes <testsuites> opened at line 1 column 1"; "mismatched")]
    #[test_case("<html></html>", "line 1 column 1: root element is <html>, not <testsuites> or <testsuite>"; "not junit")]
    #[test_case("<testsuites><testcase classname='x'/></testsuites>", "line 1 column 13: <testcase> without a name attribute"; "nameless case")]
    #[test_case("<testsuites>\n  <testcase name=\"a/>\n</testsuites>", "line 2 column 13: unterminated attribute value"; "unterminated attribute")]
    #[test_case("<testsuites a='1' a='2'/>", "line 1 column 19: duplicate attribute a"; "duplicate attribute")]
    #[test_case("<testsuites>&bogus;</testsuites>", "line 1 column 13: unknown entity &bogus;"; "bad entity")]
    #[test_case("<testsuites/><testsuites/>", "line 1 column 14: a second root element"; "two roots")]
    #[test_case("{\"json\": true}", "line 1 column 1: text outside the root element"; "json")]
    fn malformed_files_are_errors(xml: &str, expected: &str) {
        let err = RerunSet::parse("r.xml", xml).unwrap_err().to_string();
        assert!(err.starts_with("malformed JUnit file r.xml: "), "{err}");
        assert!(err.contains(expected), "{err}");
    }

    #[test]
    fn unreadable_file_is_an_error() {
        let err = RerunSet::load(Path::new("/nonexistent/junit.xml")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot read --rerun-failed file /nonexistent/junit.xml"
        );
    }
}
