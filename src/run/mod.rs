//! The executor: parallel lanes, a serial lane, timeouts, flake attempts, cancellation.
//!
//! It emits [`Event`]s; it never writes a report file (see [`crate::report`]).

#![expect(
    clippy::disallowed_methods,
    reason = "the suite timeout and signal escalation are deadlines, not polling"
)]

pub mod cleanup;
pub mod doctor;
pub mod events;
pub mod executor;
pub mod preflight;
pub mod prepull;
pub mod schedule;
pub mod signal;

pub use events::{Attempt, CaseOutcome, CaseRecord, Event, PlannedCase, RunStats, StepRecord};
pub use executor::{BuildError, Runner, RunnerBuilder, Scheduled, render_chain};
pub use schedule::{Durations, DurationsError, ScheduleSummary};
pub use signal::{Shutdown, SignalHandlerKind};
