//! One case of the catalogue: its full name, kind, tags, default timeout, pool needs and body.
//!
//! The main type is [`Case`]; bodies are registered in one line with the [`case!`](crate::case)
//! macro.

use std::fmt;
use std::time::Duration;

use futures::future::BoxFuture;
use serde::Serialize;

use super::tags::{Tag, parse_tags};
use crate::framework::{CaseResult, Framework};
use crate::os::Os;

/// The body of a case: an async function over the case's [`Framework`].
///
/// A plain higher-ranked function pointer rather than a boxed closure, so the catalogue is a
/// static table of cheap, `Copy` entries that can be handed to any lane.
pub type CaseBody = for<'a> fn(&'a Framework) -> BoxFuture<'a, CaseResult>;

/// The Windows node support plan's three kinds of case (see DESIGN.md, "The case catalogue").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// An OS-agnostic conformance case that passes on either OS with OS-matching images.
    Adapted,
    /// Follows a conformance case's flow where the Linux mechanism differs on Windows.
    Substitute,
    /// A Windows scenario with no Linux counterpart; skipped on a Linux target.
    WindowsSpecific,
}

impl Kind {
    /// The lowercase name used in listings (`adapted`, `substitute`, `windows-specific`).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Adapted => "adapted",
            Kind::Substitute => "substitute",
            Kind::WindowsSpecific => "windows-specific",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which node pools a case needs to be meaningful.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PoolNeed {
    /// Only the target OS's pool (`--node-os-distro`); the default.
    TargetOs,
    /// Both a Linux and a Windows pool (hybrid connectivity cases).
    BothPools,
}

impl PoolNeed {
    /// The pools needed when the target OS is `target`.
    pub fn pools(self, target: Os) -> Vec<Os> {
        match self {
            PoolNeed::TargetOs => vec![target],
            PoolNeed::BothPools => Os::ALL.to_vec(),
        }
    }
}

/// On which target OSes a case may run at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OsScope {
    /// Runs on either target.
    Both,
    /// Runs only when the target is this OS.
    Only(Os),
}

impl OsScope {
    /// Whether a case with this scope may run against `target`.
    pub fn allows(self, target: Os) -> bool {
        match self {
            OsScope::Both => true,
            OsScope::Only(os) => os == target,
        }
    }
}

/// The per-case timeout when no tag asks for more.
///
/// Upstream's `framework.PodStartTimeout` (test/e2e/framework/timeouts.go) is 5 minutes, and a
/// case that waits for more than one pod start within that budget is what upstream calls
/// "not slow".
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// The timeout of `[Serial]` and `[Disruptive]` cases.
///
/// Upstream's Windows serial cases (density, kubelet stats with 10 pods, memory limits) start
/// many pods one after another, and a Windows pod start has a p99 of about a minute (density
/// limits 30/54/59 s), so three default budgets.
pub const SERIAL_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// The timeout of `[Slow]` cases.
///
/// Upstream's e2e conventions (community/contributors/devel/sig-testing/e2e-tests.md) tag a case
/// `[Slow]` when it takes more than five minutes, without an upper bound; 30 minutes leaves
/// room for a cold Windows image pull (5–15 minutes) inside the case.
pub const SLOW_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// The default timeout for a case with these tags: the largest budget any tag asks for.
pub fn default_timeout(tags: &[Tag]) -> Duration {
    tags.iter()
        .map(|tag| match tag {
            Tag::Slow => SLOW_TIMEOUT,
            Tag::Serial | Tag::Disruptive => SERIAL_TIMEOUT,
            _ => DEFAULT_TIMEOUT,
        })
        .fold(DEFAULT_TIMEOUT, Duration::max)
}

/// One case of the catalogue.
#[derive(Clone)]
pub struct Case {
    /// The full upstream-style name; the case's identity in JUnit, TestGrid and regexes.
    pub name: &'static str,
    /// Adapted, substitute or windows-specific.
    pub kind: Kind,
    /// The bracketed tokens of `name`, in order.
    pub tags: Vec<Tag>,
    /// The async body.
    pub body: CaseBody,
    /// The per-attempt timeout; [`default_timeout`] of the tags unless overridden.
    pub timeout: Duration,
    /// The node pools the case needs.
    pub pools: PoolNeed,
    /// `Some(names)`: the case runs only on these `--provider`s (upstream's
    /// `SkipUnlessProviderIs`); `None`: on any.
    pub providers: Option<&'static [&'static str]>,
}

impl Case {
    /// A case whose tags, timeout and pool needs are derived from its name and kind.
    pub fn new(name: &'static str, kind: Kind, body: CaseBody) -> Case {
        let tags = parse_tags(name);
        let timeout = default_timeout(&tags);
        Case {
            name,
            kind,
            tags,
            body,
            timeout,
            pools: PoolNeed::TargetOs,
            providers: None,
        }
    }

    /// Runs the case only on these providers, as upstream's `SkipUnlessProviderIs(...)` at the
    /// start of its body does (a cloud load balancer, a cloud disk).
    #[must_use]
    pub fn only_on_providers(mut self, names: &'static [&'static str]) -> Case {
        self.providers = Some(names);
        self
    }

    /// Marks the case as needing both a Linux and a Windows pool (hybrid cases).
    #[must_use]
    pub fn hybrid(mut self) -> Case {
        self.pools = PoolNeed::BothPools;
        self
    }

    /// Overrides the timeout derived from the tags (a case that knows it waits longer).
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Case {
        self.timeout = timeout;
        self
    }

    /// Whether the case carries `tag`.
    pub fn has_tag(&self, tag: &Tag) -> bool {
        self.tags.contains(tag)
    }

    /// The `[Feature:X]` names of the case (`X`).
    pub fn features(&self) -> impl Iterator<Item = &str> {
        self.tags.iter().filter_map(|t| match t {
            Tag::Feature(x) => Some(x.as_str()),
            _ => None,
        })
    }

    /// Whether the case must run alone (`[Serial]` or `[Disruptive]`), in the serial lane.
    pub fn is_serial(&self) -> bool {
        self.has_tag(&Tag::Serial) || self.has_tag(&Tag::Disruptive)
    }

    /// On which target OSes the case may run.
    ///
    /// `[LinuxOnly]` cases run only on Linux. Windows-specific cases, and any case tagged
    /// `[Feature:Windows]` (upstream's marker for "needs Windows nodes"; every upstream Windows
    /// case skips unless the node OS distro is windows), run only on Windows. Everything else
    /// runs on both.
    pub fn os_scope(&self) -> OsScope {
        if self.has_tag(&Tag::LinuxOnly) {
            OsScope::Only(Os::Linux)
        } else if self.kind == Kind::WindowsSpecific || self.has_tag(&Tag::Feature("Windows".into())) {
            OsScope::Only(Os::Windows)
        } else {
            OsScope::Both
        }
    }
}

impl fmt::Debug for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Case")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("tags", &self.tags)
            .field("timeout", &self.timeout)
            .field("pools", &self.pools)
            .finish_non_exhaustive()
    }
}

/// Registers an `async fn(&Framework) -> CaseResult` as a [`Case`] in one line:
/// `case!(INTRA_POD_HTTP, Kind::Substitute, granular::intra_pod_http)`.
///
/// The macro boxes the body's future so every case fits the one [`CaseBody`] pointer type.
#[macro_export]
macro_rules! case {
    ($name:expr, $kind:expr, $body:path) => {
        $crate::catalog::Case::new($name, $kind, |f| ::std::boxed::Box::pin($body(f)))
    };
}

/// Test helpers: cases with a body that is never run.
#[cfg(test)]
pub(crate) mod test_helpers {
    use super::*;

    /// A body that passes; catalogue and selection tests never call it.
    pub(crate) async fn noop(_f: &Framework) -> CaseResult {
        Ok(())
    }

    /// A case named `name` of kind `kind` with the no-op body.
    pub(crate) fn fixture(name: &'static str, kind: Kind) -> Case {
        crate::case!(name, kind, noop)
    }
}

#[cfg(test)]
mod tests {
    use super::test_helpers::fixture;
    use super::*;
    use test_case::test_case;

    #[test_case("[sig-node] Pods should be submitted [Conformance]", DEFAULT_TIMEOUT; "plain")]
    #[test_case("[sig-windows] Density [Serial] x", SERIAL_TIMEOUT; "serial")]
    #[test_case("[sig-node] x [Disruptive]", SERIAL_TIMEOUT; "disruptive")]
    #[test_case("[sig-windows] Memory Limits [Serial] [Slow] x", SLOW_TIMEOUT; "slow wins")]
    fn timeout_from_tags(name: &'static str, expected: Duration) {
        assert_eq!(fixture(name, Kind::Adapted).timeout, expected);
    }

    #[test_case("[sig-network] x [LinuxOnly]", Kind::Adapted, OsScope::Only(Os::Linux); "linux only")]
    #[test_case("[sig-windows] x", Kind::WindowsSpecific, OsScope::Only(Os::Windows); "windows specific")]
    #[test_case("[sig-windows] [Feature:Windows] x", Kind::Substitute, OsScope::Only(Os::Windows); "feature windows")]
    #[test_case("[sig-windows] x", Kind::Substitute, OsScope::Both; "substitute")]
    #[test_case("[sig-node] x [Conformance]", Kind::Adapted, OsScope::Both; "adapted")]
    fn os_scope(name: &'static str, kind: Kind, expected: OsScope) {
        assert_eq!(fixture(name, kind).os_scope(), expected);
    }

    #[test]
    fn builders_override_derived_fields() {
        let case = fixture("[sig-windows] Hybrid x", Kind::WindowsSpecific)
            .hybrid()
            .with_timeout(Duration::from_secs(7));
        assert_eq!(case.pools, PoolNeed::BothPools);
        assert_eq!(case.timeout, Duration::from_secs(7));
        assert_eq!(case.pools.pools(Os::Windows), vec![Os::Linux, Os::Windows]);
        assert_eq!(PoolNeed::TargetOs.pools(Os::Windows), vec![Os::Windows]);
    }

    #[test]
    fn serial_lane_membership() {
        assert!(fixture("a [Serial]", Kind::Adapted).is_serial());
        assert!(fixture("a [Disruptive]", Kind::Adapted).is_serial());
        assert!(!fixture("a [Slow]", Kind::Adapted).is_serial());
    }
}
