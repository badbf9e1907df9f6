//! A minimal one-shot channel, so that the async entry point needs no runtime.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

struct Slot<T> {
    value: Option<T>,
    waker: Option<Waker>,
    closed: bool,
}

pub(crate) struct Sender<T>(Arc<Mutex<Slot<T>>>);
pub(crate) struct Receiver<T>(Arc<Mutex<Slot<T>>>);

pub(crate) fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let slot = Arc::new(Mutex::new(Slot {
        value: None,
        waker: None,
        closed: false,
    }));
    (Sender(slot.clone()), Receiver(slot))
}

fn lock<T>(m: &Mutex<Slot<T>>) -> std::sync::MutexGuard<'_, Slot<T>> {
    // The slot holds plain data; a panic elsewhere cannot leave it half-written.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<T> Sender<T> {
    pub(crate) fn send(self, value: T) {
        let mut slot = lock(&self.0);
        slot.value = Some(value);
        if let Some(w) = slot.waker.take() {
            w.wake();
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let mut slot = lock(&self.0);
        slot.closed = true;
        if let Some(w) = slot.waker.take() {
            w.wake();
        }
    }
}

impl<T> Future for Receiver<T> {
    /// `None` when the sender went away without sending (the worker panicked).
    type Output = Option<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut slot = lock(&self.0);
        if let Some(v) = slot.value.take() {
            return Poll::Ready(Some(v));
        }
        if slot.closed {
            return Poll::Ready(None);
        }
        slot.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}
