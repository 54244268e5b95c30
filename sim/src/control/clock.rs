//! The control plane's notion of "now", [`Clock`], injectable so CronJob schedules and Job
//! deadlines can be tested without waiting and replayed faster (`--time-scale`).

use std::fmt::Debug;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};

/// A source of simulated wall-clock time.
pub trait Clock: Debug + Send + Sync {
    /// The current simulated time.
    fn now(&self) -> Timestamp;

    /// How long to really wait for `simulated` to pass on this clock.
    ///
    /// Controllers use it to requeue until a deadline or the next CronJob run; a clock that
    /// runs faster than real time shortens the wait accordingly.
    fn real_delay(&self, simulated: SignedDuration) -> Duration {
        simulated.try_into().unwrap_or(Duration::ZERO)
    }
}

/// The machine's clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A clock that starts at the real time and runs `factor` times faster.
///
/// It models the simulator's time acceleration: a CronJob scheduled every minute fires every
/// three seconds at a factor of 20.
#[derive(Debug, Clone, Copy)]
pub struct ScaledClock {
    origin: Timestamp,
    started: Instant,
    factor: f64,
}

impl ScaledClock {
    /// A clock running `factor` times faster than real time (values ≤ 0 are taken as 1).
    pub fn new(factor: f64) -> Self {
        let factor = if factor > 0.0 && factor.is_finite() {
            factor
        } else {
            1.0
        };
        Self {
            origin: Timestamp::now(),
            started: Instant::now(),
            factor,
        }
    }
}

impl Clock for ScaledClock {
    fn now(&self) -> Timestamp {
        let elapsed = self.started.elapsed().mul_f64(self.factor);
        let elapsed = SignedDuration::try_from(elapsed).unwrap_or(SignedDuration::MAX);
        self.origin.saturating_add(elapsed).unwrap_or(self.origin)
    }

    fn real_delay(&self, simulated: SignedDuration) -> Duration {
        let d: Duration = simulated.try_into().unwrap_or(Duration::ZERO);
        d.div_f64(self.factor)
    }
}

/// A clock that only moves when told to, for tests.
#[derive(Debug)]
pub struct ManualClock(Mutex<Timestamp>);

impl ManualClock {
    /// A clock standing at `at`.
    pub fn new(at: Timestamp) -> Self {
        Self(Mutex::new(at))
    }

    /// Moves the clock to `at`.
    pub fn set(&self, at: Timestamp) {
        *self.0.lock().expect("clock lock poisoned") = at;
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: SignedDuration) {
        let mut t = self.0.lock().expect("clock lock poisoned");
        *t = t.saturating_add(by).unwrap_or(*t);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        *self.0.lock().expect("clock lock poisoned")
    }

    fn real_delay(&self, _simulated: SignedDuration) -> Duration {
        // Nothing passes on its own: poll again soon so a test that advances the clock is seen.
        Duration::from_millis(100)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaled_clock_runs_faster_and_shortens_waits() {
        let c = ScaledClock::new(20.0);
        assert_eq!(c.real_delay(SignedDuration::from_secs(60)), Duration::from_secs(3));
        let before = Timestamp::now();
        assert!(c.now() >= before.checked_sub(SignedDuration::from_secs(1)).unwrap());
        assert_eq!(ScaledClock::new(-1.0).factor, 1.0);
    }

    #[test]
    fn manual_clock_moves_only_when_told() {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let c = ManualClock::new(t0);
        assert_eq!(c.now(), t0);
        c.advance(SignedDuration::from_mins(5));
        assert_eq!(c.now(), "2026-01-01T00:05:00Z".parse().unwrap());
    }
}
