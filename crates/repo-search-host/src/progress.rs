//! How a host reports the progress of long work (a build, the re-rank vectors' pass) to a front
//! end, which shows it as it likes: the CLI as a bar on a terminal, a binding as events.

/// Told how far long work has come: `done` of `total` units (files, chunks). Called from the
/// thread doing the work, often; keep it cheap.
pub trait Progress {
    /// `done` of `total` units are done.
    fn set(&mut self, done: usize, total: usize);
}

impl<F: FnMut(usize, usize)> Progress for F {
    fn set(&mut self, done: usize, total: usize) {
        self(done, total)
    }
}

/// Progress nobody watches.
pub fn unwatched() -> impl Progress {
    |_: usize, _: usize| {}
}
