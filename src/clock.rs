//! Where "now" comes from.

use std::fmt::Debug;

use parking_lot::Mutex;

use crate::model::Timestamp;

/// A source of the current time. Every "now" inside soulmem (creation, access,
/// recency decay) reads it.
pub trait Clock: Send + Sync + Debug {
    /// The current instant (naive, UTC wall-clock).
    fn now(&self) -> Timestamp;
}

/// The system clock (UTC).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        chrono::Utc::now().naive_utc()
    }
}

/// A clock that stands still until set: for replay and tests.
#[derive(Debug)]
pub struct FixedClock(Mutex<Timestamp>);

impl FixedClock {
    /// A clock reading `at`.
    #[must_use]
    pub fn new(at: Timestamp) -> Self {
        Self(Mutex::new(at))
    }

    /// Moves the clock to `at`.
    pub fn set(&self, at: Timestamp) {
        *self.0.lock() = at;
    }
}

impl Clock for FixedClock {
    fn now(&self) -> Timestamp {
        *self.0.lock()
    }
}
