//! A runtime-free cancellation signal.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

#[derive(Debug, Default)]
struct Inner {
    cancelled: AtomicBool,
    wakers: Mutex<Vec<Waker>>,
}

/// A cancellation signal shared by clones: the specification's `signal`.
///
/// It needs no runtime: synchronous code polls [`CancelSignal::is_cancelled`], async code awaits
/// [`CancelSignal::cancelled`]. Firing it is idempotent.
#[derive(Debug, Clone, Default)]
pub struct CancelSignal {
    inner: Arc<Inner>,
}

impl CancelSignal {
    /// A signal that has not fired.
    pub fn new() -> CancelSignal {
        CancelSignal::default()
    }

    /// Fires the signal and wakes every task awaiting it.
    pub fn cancel(&self) {
        self.inner.cancelled.store(true, Ordering::SeqCst);
        let wakers = std::mem::take(&mut *self.lock_wakers());
        for w in wakers {
            w.wake();
        }
    }

    /// Whether the signal has fired.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }

    /// A future that completes once the signal fires.
    pub fn cancelled(&self) -> Cancelled<'_> {
        Cancelled { signal: self }
    }

    fn lock_wakers(&self) -> std::sync::MutexGuard<'_, Vec<Waker>> {
        // A panic while holding this lock cannot leave the list inconsistent: it only holds wakers.
        self.inner
            .wakers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The future returned by [`CancelSignal::cancelled`].
#[derive(Debug)]
pub struct Cancelled<'a> {
    signal: &'a CancelSignal,
}

impl Future for Cancelled<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.signal.is_cancelled() {
            return Poll::Ready(());
        }
        let mut wakers = self.signal.lock_wakers();
        // Check again under the lock: `cancel` sets the flag before taking the lock, so a waker
        // pushed after this check is always seen by it.
        if self.signal.is_cancelled() {
            return Poll::Ready(());
        }
        if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
            wakers.push(cx.waker().clone());
        }
        drop(wakers);
        Poll::Pending
    }
}
