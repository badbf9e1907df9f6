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
        stops(self.deadline, self.signal)
    }
}

impl QueryControl<'_> {
    /// This control as an owned check that stops exactly when it does, for a rule that outlives
    /// the borrow of the signal: a walk's pruning rule ([`crate::Selection::prune`]), which the
    /// walker keeps, so that a walk stops entering directories once the query is out of time.
    pub fn detached(&self) -> impl Fn() -> bool + Send + Sync + 'static {
        let (deadline, signal) = (self.deadline, self.signal.clone());
        move || stops(deadline, &signal)
    }
}

/// The one rule: cancelled, or past the deadline.
fn stops(deadline: Option<Instant>, signal: &CancelSignal) -> bool {
    signal.is_cancelled() || deadline.is_some_and(|d| Instant::now() >= d)
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

    #[test]
    fn a_detached_control_stops_when_its_control_does() {
        let signal = CancelSignal::new();
        let started = Instant::now();
        for budget in [None, Some(Duration::ZERO), Some(Duration::from_secs(3600))] {
            let control = QueryControl::new(started, budget, &signal);
            assert_eq!(control.detached()(), control.should_stop(), "{budget:?}");
        }
        let control = QueryControl::new(started, None, &signal);
        let detached = control.detached();
        signal.cancel();
        assert!(detached(), "a signal fired after detaching");
    }
}
