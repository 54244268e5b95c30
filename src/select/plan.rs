//! Selection → plan: which catalogue cases run, and why each other one does not.
//!
//! The main function is [`plan`]. It is pure (no I/O, no cluster): a compiled [`Selection`]
//! and a [`PlanContext`] (target OS, pools without a Ready node) decide every case
//! [`Decision::Run`] or [`Decision::Skip`] with a [`SkipReason`] whose `Display` is the JUnit
//! skip message.
//!
//! # How the rules combine
//!
//! The first rule that applies gives the reason, in this order:
//! 1. OS scope: `[LinuxOnly]` on a Windows target, windows-only cases on a Linux target
//!    (see [`Case::os_scope`]).
//! 2. Focus: the suite's focus regexes, then the CLI's. Both must match when both are given,
//!    so a CLI `--focus` narrows a suite rather than widening it.
//! 3. Suite exclusions (reason and link from the suite), for focused cases only: an exclusion
//!    documents why a case the suite wants cannot run, so it is reported; a case the suite
//!    never wanted stays a quiet `NotFocused`.
//! 4. Skip: a match of any suite or CLI skip regex (CLI skips add to the suite's).
//! 5. Label filters: the suite's and the CLI's must both hold.
//! 6. `--rerun-failed`: cases that did not fail or error in that file.
//! 7. `[Flaky]` and `[Feature:X]` cases unless named (below). `[Feature:Windows]` is exempt:
//!    it is upstream's marker for "needs Windows nodes", which the target OS already decides.
//! 8. `[Disruptive]` cases when nothing selects positively: no focus regex and no label filter
//!    (from the CLI or the suite) and the case is not in the `--rerun-failed` file. Skip
//!    regexes and exclusions only remove cases, so they do not make a selection.
//! 9. Pools: a case needing a pool listed in [`PlanContext::missing_pools`].
//! 10. `--shard`: applied last, to cases that would otherwise run, so the shards partition
//!     exactly the unsharded run set.
//!
//! A tag is **named** when a focus regex's text contains the tag text (ignoring ASCII case,
//! e.g. `\[Feature:GMSA\]` or `Feature:GMSA` names `[Feature:GMSA]`; a wildcard such as
//! `Feature:.*` names nothing), when a label filter mentions it outside a negation
//! (`sig-windows && Feature:GMSA` does, `!Feature:GMSA` does not), or when the case is in the
//! `--rerun-failed` file (it was run before, so it was selected by name).

use std::collections::BTreeSet;
use std::fmt;

use serde::Serialize;

use super::Error;
use super::filter::{NamePatterns, Pattern};
use super::label::LabelExpr;
use super::provider::Provider;
use super::rerun::RerunSet;
use super::shard::Shard;
use super::suite::Suite;
use crate::catalog::{Case, Catalog, Kind, OsScope, Tag};
use crate::os::Os;
use crate::run::PlannedCase;

/// What the user asked for, as written (CLI flags plus an optional suite); compile it with
/// [`SelectionSpec::compile`].
#[derive(Debug, Clone, Default)]
pub struct SelectionSpec {
    /// `--focus` regexes.
    pub focus: Vec<String>,
    /// `--skip` regexes.
    pub skip: Vec<String>,
    /// `--label-filter` expression.
    pub label_filter: Option<String>,
    /// `--suite` file, already parsed.
    pub suite: Option<Suite>,
    /// `--shard K/N`.
    pub shard: Option<Shard>,
    /// `--rerun-failed` file, already parsed.
    pub rerun: Option<RerunSet>,
}

#[derive(Debug, Clone)]
struct CompiledLabel {
    source: String,
    expr: LabelExpr,
}

#[derive(Debug, Clone)]
struct CompiledExclusion {
    pattern: Pattern,
    reason: String,
    link: Option<String>,
}

/// A compiled selection: regexes and label expressions parsed once, ready for [`plan`].
#[derive(Debug, Clone)]
pub struct Selection {
    suite: NamePatterns,
    cli: NamePatterns,
    labels: Vec<CompiledLabel>,
    exclusions: Vec<CompiledExclusion>,
    shard: Option<Shard>,
    rerun: Option<RerunSet>,
}

fn compile_label(origin: &str, source: &str) -> Result<CompiledLabel, Error> {
    let expr = LabelExpr::parse(source).map_err(|e| Error::InvalidLabelFilter {
        origin: origin.to_string(),
        expr: source.to_string(),
        position: e.position,
        message: e.message,
    })?;
    Ok(CompiledLabel {
        source: source.to_string(),
        expr,
    })
}

impl SelectionSpec {
    /// Compiles every regex and label expression.
    ///
    /// # Errors
    ///
    /// The first invalid regex ([`Error::InvalidRegex`]) or label expression
    /// ([`Error::InvalidLabelFilter`]), suite ones first.
    pub fn compile(self) -> Result<Selection, Error> {
        let mut labels = Vec::new();
        let (suite, exclusions) = match &self.suite {
            Some(s) => {
                if let Some(expr) = &s.label_filter {
                    labels.push(compile_label("suite label filter", expr)?);
                }
                let exclusions = s
                    .exclusions
                    .iter()
                    .map(|e| {
                        Ok(CompiledExclusion {
                            pattern: Pattern::new("suite exclusion", &e.pattern)?,
                            reason: e.reason.clone(),
                            link: e.link.clone(),
                        })
                    })
                    .collect::<Result<Vec<_>, Error>>()?;
                let patterns = NamePatterns::compile("suite focus", &s.focus, "suite skip", &s.skip)?;
                (patterns, exclusions)
            }
            None => (NamePatterns::default(), Vec::new()),
        };
        let cli = NamePatterns::compile("--focus", &self.focus, "--skip", &self.skip)?;
        if let Some(expr) = &self.label_filter {
            labels.push(compile_label("--label-filter", expr)?);
        }
        Ok(Selection {
            suite,
            cli,
            labels,
            exclusions,
            shard: self.shard,
            rerun: self.rerun,
        })
    }
}

impl Selection {
    /// No selection at all: the README's default run.
    pub fn everything() -> Selection {
        SelectionSpec::default()
            .compile()
            .expect("an empty selection has nothing to compile")
    }

    /// Whether anything selects cases positively (a focus regex or a label filter).
    fn selects_positively(&self) -> bool {
        !self.suite.focus.is_empty() || !self.cli.focus.is_empty() || !self.labels.is_empty()
    }

    /// Whether a focus regex or label filter names `tag_text` (see the module docs).
    fn names(&self, tag_text: &str) -> bool {
        let lower = tag_text.to_ascii_lowercase();
        self.suite.focus_mentions(tag_text)
            || self.cli.focus_mentions(tag_text)
            || self.labels.iter().any(|l| l.expr.positive_labels().contains(&lower))
    }

    fn in_rerun(&self, name: &str) -> bool {
        self.rerun.as_ref().is_some_and(|r| r.contains(name))
    }

    fn decide(&self, case: &Case, ctx: &PlanContext) -> Decision {
        use SkipReason as R;
        let name = case.name;
        match case.os_scope() {
            OsScope::Only(Os::Linux) if ctx.target_os == Os::Windows => {
                return Decision::Skip(R::LinuxOnlyOnWindows);
            }
            OsScope::Only(Os::Windows) if ctx.target_os == Os::Linux => {
                return Decision::Skip(R::WindowsOnlyOnLinux);
            }
            _ => {}
        }
        if !self.suite.is_focused(name) || !self.cli.is_focused(name) {
            return Decision::Skip(R::NotFocused);
        }
        if let Some(e) = self.exclusions.iter().find(|e| e.pattern.is_match(name)) {
            return Decision::Skip(R::SuiteExcluded {
                reason: e.reason.clone(),
                link: e.link.clone(),
            });
        }
        if let Some(p) = self.suite.skipped_by(name).or_else(|| self.cli.skipped_by(name)) {
            return Decision::Skip(R::Skipped(p.source().to_string()));
        }
        if let Some(l) = self.labels.iter().find(|l| !l.expr.matches(&case.tags)) {
            return Decision::Skip(R::LabelFilter(l.source.clone()));
        }
        let explicit = self.in_rerun(name);
        if self.rerun.is_some() && !explicit {
            return Decision::Skip(R::NotInRerun);
        }
        if case.has_tag(&Tag::Flaky) && !explicit && !self.names("Flaky") {
            return Decision::Skip(R::FlakyNotFocused);
        }
        if let Some(feature) = case
            .features()
            .find(|x| *x != "Windows" && !explicit && !self.names(&format!("Feature:{x}")))
        {
            return Decision::Skip(R::FeatureNotFocused(feature.to_string()));
        }
        if case.has_tag(&Tag::Disruptive) && !explicit && !self.selects_positively() {
            return Decision::Skip(R::Disruptive);
        }
        if let Some(os) = case
            .pools
            .pools(ctx.target_os)
            .into_iter()
            .find(|os| ctx.missing_pools.contains(os))
        {
            return Decision::Skip(R::PoolMissing(os));
        }
        if let Some(supported) = case.providers
            && !ctx.provider.is_one_of(supported)
        {
            return Decision::Skip(R::ProviderUnsupported {
                supported,
                provider: ctx.provider.clone(),
            });
        }
        if let Some(shard) = self.shard
            && !shard.contains(name)
        {
            return Decision::Skip(R::NotInShard {
                shard,
                owner: Shard::of(name, shard.total),
            });
        }
        Decision::Run
    }
}

/// What the plan needs to know about the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanContext {
    /// `--node-os-distro`.
    pub target_os: Os,
    /// Pools with no Ready, schedulable node; cases needing them are skipped with
    /// [`SkipReason::PoolMissing`]. Empty when planning without a cluster (`list`).
    pub missing_pools: BTreeSet<Os>,
    /// `--provider`: cases that need another provider's infrastructure are skipped.
    pub provider: Provider,
}

impl PlanContext {
    /// A context for `target_os` with every pool present, on e2e.test's default provider.
    pub fn new(target_os: Os) -> PlanContext {
        PlanContext {
            target_os,
            missing_pools: BTreeSet::new(),
            provider: Provider::default(),
        }
    }
}

/// Why a planned case does not run. `Display` is the JUnit `<skipped message>`: it starts
/// with a stable keyword and says why in words (TestGrid drops empty and bare "skipped"
/// messages and cuts at 140 characters, so the keyword comes first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipReason {
    /// `[LinuxOnly]` on a Windows target.
    LinuxOnlyOnWindows,
    /// A windows-only case on a Linux target.
    WindowsOnlyOnLinux,
    /// `[Feature:X]` not named by a focus or label filter; the payload is `X`.
    FeatureNotFocused(String),
    /// `[Flaky]` not named by a focus or label filter.
    FlakyNotFocused,
    /// `[Disruptive]` with no positive selection.
    Disruptive,
    /// No focus regex matches.
    NotFocused,
    /// This skip regex matches.
    Skipped(String),
    /// This label expression does not hold.
    LabelFilter(String),
    /// A suite exclusion matches.
    SuiteExcluded {
        /// The exclusion's reason.
        reason: String,
        /// Its tracking link.
        link: Option<String>,
    },
    /// The case needs this OS's pool, which has no Ready schedulable node.
    PoolMissing(Os),
    /// The case needs one of `supported` (cloud infrastructure), and the run is on `provider`.
    ProviderUnsupported {
        /// The providers the case runs on.
        supported: &'static [&'static str],
        /// `--provider`.
        provider: Provider,
    },
    /// The case belongs to another shard.
    NotInShard {
        /// The shard being run.
        shard: Shard,
        /// The shard the case belongs to.
        owner: u32,
    },
    /// The case did not fail or error in the `--rerun-failed` file.
    NotInRerun,
}

impl SkipReason {
    /// Whether the case was filtered out by the user's own selection (focus, skip, label,
    /// shard, rerun) rather than by a rule with a reason worth showing. Reports may leave
    /// these out; OS rules, feature gates and exclusions must stay visible.
    pub fn is_filter(&self) -> bool {
        matches!(
            self,
            SkipReason::NotFocused
                | SkipReason::Skipped(_)
                | SkipReason::LabelFilter(_)
                | SkipReason::NotInShard { .. }
                | SkipReason::NotInRerun
        )
    }
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::LinuxOnlyOnWindows => {
                f.write_str("LinuxOnly: the case relies on a Linux-only mechanism; not run on Windows nodes")
            }
            SkipReason::WindowsOnlyOnLinux => {
                f.write_str("WindowsOnly: the case checks Windows node behaviour; not run on Linux nodes")
            }
            SkipReason::FeatureNotFocused(x) => write!(
                f,
                "Feature:{x}: needs optional infrastructure; name Feature:{x} in --focus or --label-filter to run it"
            ),
            SkipReason::FlakyNotFocused => {
                f.write_str("Flaky: known to be flaky; name Flaky in --focus or --label-filter to run it")
            }
            SkipReason::Disruptive => {
                f.write_str("Disruptive: disturbs the cluster; runs only when selected by --focus or --label-filter")
            }
            SkipReason::NotFocused => f.write_str("NotFocused: the name matches no focus regex"),
            SkipReason::Skipped(re) => write!(f, "Skipped: the name matches skip regex {re}"),
            SkipReason::LabelFilter(expr) => {
                write!(f, "LabelFilter: the tags do not satisfy {expr}")
            }
            SkipReason::SuiteExcluded { reason, link } => {
                write!(f, "Excluded: {reason}")?;
                if let Some(link) = link {
                    write!(f, " ({link})")?;
                }
                Ok(())
            }
            SkipReason::PoolMissing(os) => write!(
                f,
                "PoolMissing({os}): the case needs a Ready, schedulable {} node and the cluster has none",
                os.title()
            ),
            SkipReason::ProviderUnsupported { supported, provider } => write!(
                f,
                "Provider: Only supported for providers [{}] (not {provider})",
                supported.join(" ")
            ),
            SkipReason::NotInShard { shard, owner } => write!(
                f,
                "NotInShard: runs in shard {owner}/{}, this is shard {shard}",
                shard.total
            ),
            SkipReason::NotInRerun => f.write_str("NotInRerun: did not fail or error in the --rerun-failed report"),
        }
    }
}

/// Run or skip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The case runs.
    Run,
    /// The case is skipped, for this reason.
    Skip(SkipReason),
}

/// One catalogue case and its decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanEntry {
    /// Index into [`Catalog::cases`].
    pub case_index: usize,
    /// The case's full name.
    pub name: &'static str,
    /// Run or skip with a reason.
    pub decision: Decision,
}

impl PlanEntry {
    /// Whether the case runs.
    pub fn runs(&self) -> bool {
        self.decision == Decision::Run
    }

    /// The skip reason, if skipped.
    pub fn skip_reason(&self) -> Option<&SkipReason> {
        match &self.decision {
            Decision::Run => None,
            Decision::Skip(r) => Some(r),
        }
    }
}

/// Every catalogue case, in catalogue order, with its decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// One entry per catalogue case.
    pub entries: Vec<PlanEntry>,
}

/// One row of `list --output json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListedCase {
    /// Full name.
    pub name: String,
    /// `adapted`, `substitute` or `windows-specific`.
    pub kind: Kind,
    /// Tag texts, e.g. `sig-windows`, `Feature:GMSA`.
    pub tags: Vec<String>,
    /// Whether the case would run.
    pub selected: bool,
    /// The skip message when not selected.
    pub skip_reason: Option<String>,
}

/// Decides every case of `catalog`. Pure: the same inputs give the same plan.
pub fn plan(catalog: &Catalog, selection: &Selection, ctx: &PlanContext) -> Plan {
    Plan {
        entries: catalog
            .cases()
            .iter()
            .enumerate()
            .map(|(case_index, case)| PlanEntry {
                case_index,
                name: case.name,
                decision: selection.decide(case, ctx),
            })
            .collect(),
    }
}

impl Plan {
    /// The entries that run, in catalogue order.
    pub fn to_run(&self) -> impl Iterator<Item = &PlanEntry> {
        self.entries.iter().filter(|e| e.runs())
    }

    /// How many cases run.
    pub fn run_count(&self) -> usize {
        self.to_run().count()
    }

    /// The cases for [`crate::run::Event::RunStarted`] and hence the JUnit file: every case
    /// that runs, and every skip whose reason is worth a row (see [`SkipReason::is_filter`]);
    /// cases the user filtered out are left out, as upstream's reports do.
    pub fn reported_cases(&self) -> Vec<PlannedCase> {
        self.entries
            .iter()
            .filter(|e| !e.skip_reason().is_some_and(SkipReason::is_filter))
            .map(|e| PlannedCase {
                name: e.name.to_string(),
                skip_reason: e.skip_reason().map(ToString::to_string),
            })
            .collect()
    }

    /// The rows of `list --output json`, in catalogue order.
    pub fn listing(&self, catalog: &Catalog) -> Vec<ListedCase> {
        self.entries
            .iter()
            .filter_map(|e| {
                let case = catalog.get(e.case_index)?;
                Some(ListedCase {
                    name: e.name.to_string(),
                    kind: case.kind,
                    tags: case.tags.iter().map(Tag::text).collect(),
                    selected: e.runs(),
                    skip_reason: e.skip_reason().map(ToString::to_string),
                })
            })
            .collect()
    }

    /// `list --output json`: one pretty-printed array of [`ListedCase`].
    pub fn to_json_listing(&self, catalog: &Catalog) -> String {
        serde_json::to_string_pretty(&self.listing(catalog)).expect("a listing holds only strings and booleans")
    }

    /// `list --output text`: one line per case, `run  <name>` or `skip <name>  (<reason>)`,
    /// then a count.
    pub fn to_text_listing(&self) -> String {
        let mut out = String::new();
        for e in &self.entries {
            match e.skip_reason() {
                None => out.push_str(&format!("run  {}\n", e.name)),
                Some(r) => out.push_str(&format!("skip {}  ({r})\n", e.name)),
            }
        }
        out.push_str(&format!(
            "{} of {} cases selected\n",
            self.run_count(),
            self.entries.len()
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::test_helpers::fixture;
    use test_case::test_case;

    fn catalog() -> Catalog {
        Catalog::new(vec![
            fixture("[sig-node] Pods should be submitted and removed [NodeConformance] [Conformance]", Kind::Adapted),
            fixture("[sig-network] Networking Granular Checks: Pods should function for node-pod communication: http [LinuxOnly] [NodeConformance] [Conformance]", Kind::Adapted),
            fixture("[sig-windows] [Feature:Windows] Kubelet-Stats [Serial] Kubelet stats collection for Windows nodes when windows is booted should return bootid within 10 seconds", Kind::WindowsSpecific),
            fixture("[sig-windows] [Feature:GMSA] GMSA full should work end to end", Kind::WindowsSpecific),
            fixture("[sig-node] Restart [Disruptive] should restart all nodes", Kind::Adapted),
            fixture("[sig-apps] CronJob should be flaky [Flaky]", Kind::Adapted),
            fixture("[sig-windows] Hybrid cluster network for all supported CNIs should have stable networking for Linux and Windows pods", Kind::WindowsSpecific).hybrid(),
            fixture("[sig-network] DNS should provide DNS for services [Conformance]", Kind::Substitute),
        ])
        .unwrap()
    }

    fn decisions(spec: SelectionSpec, ctx: &PlanContext) -> Vec<String> {
        let catalog = catalog();
        plan(&catalog, &spec.compile().unwrap(), ctx)
            .entries
            .iter()
            .map(|e| match &e.decision {
                Decision::Run => "run".to_string(),
                Decision::Skip(r) => r.to_string(),
            })
            .collect()
    }

    #[test]
    fn default_selection_on_windows() {
        insta::assert_snapshot!(
            decisions(SelectionSpec::default(), &PlanContext::new(Os::Windows)).join("\n"),
            @r"
        run
        LinuxOnly: the case relies on a Linux-only mechanism; not run on Windows nodes
        run
        Feature:GMSA: needs optional infrastructure; name Feature:GMSA in --focus or --label-filter to run it
        Disruptive: disturbs the cluster; runs only when selected by --focus or --label-filter
        Flaky: known to be flaky; name Flaky in --focus or --label-filter to run it
        run
        run
        "
        );
    }

    #[test]
    fn default_selection_on_linux_with_missing_windows_pool() {
        let ctx = PlanContext {
            target_os: Os::Linux,
            missing_pools: [Os::Windows].into(),
            ..PlanContext::new(Os::Linux)
        };
        insta::assert_snapshot!(decisions(SelectionSpec::default(), &ctx).join("\n"), @r"
        run
        run
        WindowsOnly: the case checks Windows node behaviour; not run on Linux nodes
        WindowsOnly: the case checks Windows node behaviour; not run on Linux nodes
        Disruptive: disturbs the cluster; runs only when selected by --focus or --label-filter
        Flaky: known to be flaky; name Flaky in --focus or --label-filter to run it
        WindowsOnly: the case checks Windows node behaviour; not run on Linux nodes
        run
        ");
    }

    #[test]
    fn hybrid_case_skips_when_a_pool_is_missing() {
        let ctx = PlanContext {
            target_os: Os::Windows,
            missing_pools: [Os::Linux].into(),
            ..PlanContext::new(Os::Windows)
        };
        let d = decisions(SelectionSpec::default(), &ctx);
        assert_eq!(
            d[6],
            "PoolMissing(linux): the case needs a Ready, schedulable Linux node and the cluster has none"
        );
        assert_eq!(d[0], "run");
    }

    #[test_case(SelectionSpec { focus: vec![r"\[Feature:GMSA\]".into()], ..Default::default() }, 3, "run"; "focus names the feature")]
    #[test_case(SelectionSpec { label_filter: Some("feature:gmsa".into()), ..Default::default() }, 3, "run"; "label names the feature")]
    #[test_case(SelectionSpec { label_filter: Some("!Feature:GMSA".into()), ..Default::default() }, 3, "LabelFilter: the tags do not satisfy !Feature:GMSA"; "negation does not name")]
    #[test_case(SelectionSpec { focus: vec![r"Feature:.*".into()], ..Default::default() }, 3, "Feature:GMSA: needs optional infrastructure; name Feature:GMSA in --focus or --label-filter to run it"; "wildcard does not name")]
    #[test_case(SelectionSpec { focus: vec!["Flaky".into()], ..Default::default() }, 5, "run"; "focus names flaky")]
    #[test_case(SelectionSpec { focus: vec!["Restart".into()], ..Default::default() }, 4, "run"; "focus selects disruptive")]
    #[test_case(SelectionSpec { skip: vec!["nothing".into()], ..Default::default() }, 4, "Disruptive: disturbs the cluster; runs only when selected by --focus or --label-filter"; "skip alone does not select disruptive")]
    #[test_case(SelectionSpec { skip: vec![r"\[sig-node\]".into()], ..Default::default() }, 0, r"Skipped: the name matches skip regex \[sig-node\]"; "skip names its regex")]
    #[test_case(SelectionSpec { focus: vec!["DNS".into()], ..Default::default() }, 0, "NotFocused: the name matches no focus regex"; "not focused")]
    #[test_case(SelectionSpec { focus: vec!["DNS".into()], ..Default::default() }, 1, "LinuxOnly: the case relies on a Linux-only mechanism; not run on Windows nodes"; "os rule comes before focus")]
    fn rules(spec: SelectionSpec, index: usize, expected: &str) {
        assert_eq!(decisions(spec, &PlanContext::new(Os::Windows))[index], expected);
    }

    fn suite(yaml: &str) -> Suite {
        Suite::from_yaml("t.yaml", yaml).unwrap()
    }

    #[test]
    fn cli_focus_narrows_the_suite_and_cli_skip_adds() {
        let spec = SelectionSpec {
            suite: Some(suite("name: s\nfocus: ['\\[sig-node\\]', 'DNS']\n")),
            focus: vec!["Pods".into(), "Restart".into(), "Flaky".into()],
            skip: vec!["Restart".into()],
            ..Default::default()
        };
        let d = decisions(spec, &PlanContext::new(Os::Windows));
        assert_eq!(d[0], "run");
        assert_eq!(d[4], "Skipped: the name matches skip regex Restart");
        assert_eq!(
            d[5], "NotFocused: the name matches no focus regex",
            "suite focus still applies"
        );
        assert_eq!(d[7], "NotFocused: the name matches no focus regex", "cli focus narrows");
    }

    #[test]
    fn suite_exclusions_carry_reason_and_link() {
        let spec = SelectionSpec {
            suite: Some(suite(
                "name: s\nexclusions:\n  - pattern: 'DNS should provide'\n    reason: CoreDNS on Windows lacks it\n    link: https://example.invalid/9\n",
            )),
            ..Default::default()
        };
        assert_eq!(
            decisions(spec, &PlanContext::new(Os::Windows))[7],
            "Excluded: CoreDNS on Windows lacks it (https://example.invalid/9)"
        );
    }

    #[test]
    fn exclusions_apply_to_focused_cases_only() {
        let spec = SelectionSpec {
            suite: Some(suite(
                "name: s\nfocus: ['DNS']\nexclusions:\n  - pattern: 'should'\n    reason: r\n",
            )),
            ..Default::default()
        };
        let d = decisions(spec, &PlanContext::new(Os::Windows));
        assert_eq!(d[7], "Excluded: r");
        assert_eq!(d[0], "NotFocused: the name matches no focus regex");
    }

    #[test]
    fn suite_and_cli_label_filters_both_hold() {
        let spec = SelectionSpec {
            suite: Some(suite("name: s\nlabel_filter: 'Conformance'\n")),
            label_filter: Some("sig-network".into()),
            ..Default::default()
        };
        let d = decisions(spec, &PlanContext::new(Os::Windows));
        assert_eq!(d[0], "LabelFilter: the tags do not satisfy sig-network");
        assert_eq!(d[7], "run");
    }

    #[test]
    fn rerun_selects_named_cases_even_feature_gated_ones() {
        let xml = "<testsuites><testsuite name='s'>\
            <testcase name='[It] [sig-windows] [Feature:GMSA] GMSA full should work end to end'><failure/></testcase>\
            <testcase name='[sig-network] DNS should provide DNS for services [Conformance]'/>\
            </testsuite></testsuites>";
        let spec = SelectionSpec {
            rerun: Some(RerunSet::parse("r.xml", xml).unwrap()),
            ..Default::default()
        };
        let d = decisions(spec, &PlanContext::new(Os::Windows));
        assert_eq!(d[3], "run");
        assert_eq!(d[7], "NotInRerun: did not fail or error in the --rerun-failed report");
    }

    #[test]
    fn compile_errors_name_their_origin() {
        let err = SelectionSpec {
            label_filter: Some("a &&".into()),
            ..Default::default()
        }
        .compile()
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid --label-filter \"a &&\" at position 5: expected a label, '!' or '(', found the end of the expression"
        );
        let err = SelectionSpec {
            suite: Some(suite("name: s\nexclusions:\n  - pattern: '('\n    reason: r\n")),
            ..Default::default()
        }
        .compile()
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid suite exclusion regex \"(\": unclosed group at position 1"
        );
    }

    #[test]
    fn reported_cases_leave_out_user_filters_only() {
        let catalog = catalog();
        let selection = SelectionSpec {
            focus: vec![r"\[sig-network\]".into()],
            ..Default::default()
        }
        .compile()
        .unwrap();
        let plan = plan(&catalog, &selection, &PlanContext::new(Os::Windows));
        let reported: Vec<(String, Option<String>)> = plan
            .reported_cases()
            .into_iter()
            .map(|p| (p.name, p.skip_reason))
            .collect();
        assert_eq!(reported.len(), 2, "{reported:#?}");
        assert!(reported[0].1.as_deref().unwrap().starts_with("LinuxOnly: "));
        assert_eq!(reported[1].1, None);
    }

    #[test]
    fn listings() {
        let catalog = Catalog::new(vec![
            fixture("[sig-node] a [Conformance]", Kind::Adapted),
            fixture("[sig-network] b [LinuxOnly]", Kind::Substitute),
        ])
        .unwrap();
        let plan = plan(&catalog, &Selection::everything(), &PlanContext::new(Os::Windows));
        insta::assert_snapshot!(plan.to_json_listing(&catalog), @r#"
        [
          {
            "name": "[sig-node] a [Conformance]",
            "kind": "adapted",
            "tags": [
              "sig-node",
              "Conformance"
            ],
            "selected": true,
            "skip_reason": null
          },
          {
            "name": "[sig-network] b [LinuxOnly]",
            "kind": "substitute",
            "tags": [
              "sig-network",
              "LinuxOnly"
            ],
            "selected": false,
            "skip_reason": "LinuxOnly: the case relies on a Linux-only mechanism; not run on Windows nodes"
          }
        ]
        "#);
        insta::assert_snapshot!(plan.to_text_listing(), @r"
        run  [sig-node] a [Conformance]
        skip [sig-network] b [LinuxOnly]  (LinuxOnly: the case relies on a Linux-only mechanism; not run on Windows nodes)
        1 of 2 cases selected
        ");
    }
}
