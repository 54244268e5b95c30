//! A record of the transient trouble the API client met, so a failure can say what happened
//! around it ("API server unreachable for 12.0 s") instead of leaving a bare timeout to guess at.
//!
//! The retry layer writes every failed attempt, every recovered write and every slow request;
//! waits and the runner read a summary of a time window. One journal serves the process: the
//! trouble of an API server is shared by every case that talks to it.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Entries kept; older ones are dropped (a 4-hour run at a 5 % error rate stays well inside).
const CAPACITY: usize = 200_000;

/// A request slower than this is noted as a latency spike.
pub const SLOW: Duration = Duration::from_secs(2);

/// What went wrong (or right again) once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trouble {
    /// A retried answer with this status code.
    Status(u16),
    /// The connection was refused: nothing listens (the API server is down or restarting).
    Refused,
    /// The connection broke before the whole answer arrived.
    Reset,
    /// A request took this long.
    Slow(Duration),
    /// A write whose first attempt failed ambiguously was found done on replay.
    Recovered,
    /// A watch failed and was restarted.
    WatchRestart,
}

#[derive(Debug, Default)]
struct Inner {
    entries: VecDeque<(Instant, Trouble)>,
    /// When the current run of refused connections began (cleared by any answer).
    down_since: Option<Instant>,
    /// Finished and current outages: from the first refused connection to the first answer.
    outages: Vec<(Instant, Option<Instant>)>,
}

/// The journal.
#[derive(Debug, Default)]
pub struct Journal {
    inner: Mutex<Inner>,
}

/// The process's journal.
pub fn journal() -> &'static Journal {
    static J: OnceLock<Journal> = OnceLock::new();
    J.get_or_init(Journal::default)
}

impl Journal {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Notes one piece of trouble now.
    pub fn record(&self, trouble: Trouble) {
        let now = Instant::now();
        let mut inner = self.lock();
        if trouble == Trouble::Refused && inner.down_since.is_none() {
            inner.down_since = Some(now);
            inner.outages.push((now, None));
        }
        if inner.entries.len() >= CAPACITY {
            inner.entries.pop_front();
        }
        inner.entries.push_back((now, trouble));
    }

    /// Notes that the server answered (whatever the answer): an outage, if any, is over.
    pub fn answered(&self) {
        let mut inner = self.lock();
        if inner.down_since.take().is_some()
            && let Some(last) = inner.outages.last_mut()
        {
            last.1 = Some(Instant::now());
        }
    }

    /// The end of the last API server outage that overlaps `from`..now (now, when it is still
    /// going on), or `None` when the server answered throughout.
    pub fn outage_since(&self, from: Instant) -> Option<Instant> {
        let now = Instant::now();
        let inner = self.lock();
        inner
            .outages
            .iter()
            .map(|(_, end)| end.unwrap_or(now))
            .filter(|end| *end >= from)
            .max()
    }

    /// A one-line summary of the trouble between `from` and now, or `None` when there was none.
    pub fn summary_since(&self, from: Instant) -> Option<String> {
        let now = Instant::now();
        let inner = self.lock();
        let mut parts = Vec::new();
        for (start, end) in &inner.outages {
            let end_or_now = end.unwrap_or(now);
            if end_or_now < from {
                continue;
            }
            let secs = end_or_now.duration_since(*start).as_secs_f64();
            let state = if end.is_some() { "" } else { ", still" };
            let offset = if *start >= from {
                format!("{:.1} s in", start.duration_since(from).as_secs_f64())
            } else {
                "before it began".to_string()
            };
            parts.push(format!(
                "API server unreachable for {secs:.1} s (connection refused, from {offset}{state})"
            ));
        }
        let mut statuses: BTreeMap<u16, usize> = BTreeMap::new();
        let (mut resets, mut recovered, mut watch_restarts, mut slow) = (0, 0, 0, Vec::new());
        for (at, t) in inner.entries.iter().rev() {
            if *at < from {
                break;
            }
            match t {
                Trouble::Status(code) => *statuses.entry(*code).or_default() += 1,
                Trouble::Reset => resets += 1,
                Trouble::Recovered => recovered += 1,
                Trouble::WatchRestart => watch_restarts += 1,
                Trouble::Slow(d) => slow.push(*d),
                Trouble::Refused => {}
            }
        }
        if !statuses.is_empty() {
            let list: Vec<String> = statuses.iter().map(|(c, n)| format!("{n}x{c}")).collect();
            parts.push(format!(
                "{} answers retried ({})",
                statuses.values().sum::<usize>(),
                list.join(", ")
            ));
        }
        if resets > 0 {
            parts.push(format!("{resets} connections lost mid-answer"));
        }
        if recovered > 0 {
            parts.push(format!("{recovered} writes found done on replay"));
        }
        if watch_restarts > 0 {
            parts.push(format!("{watch_restarts} watches restarted"));
        }
        if let Some(max) = slow.iter().max() {
            parts.push(format!(
                "{} requests slower than {}s (slowest {:.1} s)",
                slow.len(),
                SLOW.as_secs(),
                max.as_secs_f64()
            ));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_journal_says_nothing() {
        let j = Journal::default();
        assert_eq!(j.summary_since(Instant::now() - Duration::from_secs(5)), None);
    }

    #[test]
    fn outages_and_counts_are_summarised() {
        let j = Journal::default();
        let from = Instant::now();
        j.record(Trouble::Refused);
        j.record(Trouble::Refused);
        j.answered();
        j.record(Trouble::Status(503));
        j.record(Trouble::Status(503));
        j.record(Trouble::Status(429));
        j.record(Trouble::Reset);
        j.record(Trouble::Slow(Duration::from_millis(3500)));
        let s = j.summary_since(from).unwrap();
        assert!(
            s.starts_with("API server unreachable for 0.0 s (connection refused, from 0.0 s in)"),
            "{s}"
        );
        assert!(s.contains("3 answers retried (1x429, 2x503)"), "{s}");
        assert!(s.contains("1 connections lost mid-answer"), "{s}");
        assert!(s.contains("slowest 3.5 s"), "{s}");
        // Nothing after `later`.
        let later = Instant::now() + Duration::from_millis(1);
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(j.summary_since(later), None);
    }

    #[test]
    fn an_ongoing_outage_says_still() {
        let j = Journal::default();
        let from = Instant::now();
        j.record(Trouble::Refused);
        assert!(j.summary_since(from).unwrap().contains("still"));
    }
}
