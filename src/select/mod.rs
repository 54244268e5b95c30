//! Selection: focus/skip regexes, label expressions, suites, shards, reruns and OS rules → a
//! [`Plan`] that says, for every case, run or skip with a reason.
//!
//! Everything here is pure and compiled once ([`SelectionSpec::compile`]); the entry point is
//! [`plan`].

mod error;
mod filter;
mod junit_xml;
mod label;
mod plan;
mod provider;
mod rerun;
mod shard;
mod suite;

pub use error::Error;
pub use filter::{NamePatterns, Pattern};
pub(crate) use junit_xml::testcases as junit_testcases;
pub use label::{LabelError, LabelExpr};
pub use plan::{Decision, ListedCase, Plan, PlanContext, PlanEntry, Selection, SelectionSpec, SkipReason, plan};
pub use provider::{PROVIDERS, Provider, UnknownProvider};
pub use rerun::RerunSet;
pub use shard::Shard;
pub(crate) use shard::fnv1a64;
pub use suite::{Exclusion, Suite, parse_duration};
