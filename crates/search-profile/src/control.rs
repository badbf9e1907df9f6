//! Stopping a search: the trait every search checks on each read, and the one control that stops
//! a query at its deadline or on its cancel signal.

use std::time::{Duration, Instant};

use index_contract::CancelSignal;

/// Tells a search whether to stop now (deadline, cancellation). Checked on every read, so even a
/// huge file without matches is abandoned promptly.
pub trait SearchControl {
    /// Whether the search must stop.
    fn should_stop(&self) -> bool;
}

/// A [`SearchControl`] that never stops.
#[derive(Debug, Clone, Copy, Default)]
pub struct NeverStop;

impl SearchControl for NeverStop {
    fn should_stop(&self) -> bool {
        false
    }
}

/// Stops a query once its time is up or its signal fires: what a backend's query loop checks
/// between candidates and passes to each file's search.
///
/// # Example
///
/// ```
/// use std::time::{Duration, Instant};
/// use index_contract::CancelSignal;
/// use search_profile::{QueryControl, SearchControl};
///
/// let signal = CancelSignal::new();
/// let control = QueryControl::new(Instant::now(), Some(Duration::from_secs(60)), &signal);
/// assert!(!control.should_stop());
/// signal.cancel();
/// assert!(control.should_stop());
/// ```
#[derive(Debug, Clone, Copy)]
pub struct QueryControl<'a> {
    deadline: Option<Instant>,
    signal: &'a CancelSignal,
}

impl<'a> QueryControl<'a> {
    /// Stops `budget` after `started` (never without a budget, or with one too far off to
    /// represent), or when `signal` fires.
    pub fn new(started: Instant, budget: Option<Duration>, signal: &'a CancelSignal) -> Self {
        QueryControl {
            deadline: budget.and_then(|b| started.checked_add(b)),
            signal,
        }
    }
}

impl SearchControl for QueryControl<'_> {
    fn should_stop(&self) -> bool {
        self.signal.is_cancelled() || self.deadline.is_some_and(|d| Instant::now() >= d)
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use index_contract::CancelSignal;

    use super::{QueryControl, SearchControl};

    #[test]
    fn a_query_stops_at_its_deadline_or_its_signal_and_a_huge_budget_never_overflows() {
        let signal = CancelSignal::new();
        let started = Instant::now();
        let check = |budget: Option<Duration>, expected: bool| {
            let control = QueryControl::new(started, budget, &signal);
            assert_eq!(control.should_stop(), expected, "{budget:?}");
        };
        check(None, false);
        check(Some(Duration::ZERO), true);
        check(Some(Duration::from_secs(3600)), false);
        check(Some(Duration::MAX), false);
        signal.cancel();
        check(None, true);
        check(Some(Duration::MAX), true);
    }
}
