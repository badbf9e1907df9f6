//! The one worker pool: scoped threads pulling items from a shared counter.

use std::sync::atomic::{AtomicUsize, Ordering};

/// A worker panicked; its share of the results is lost, so the whole batch must fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Panicked;

/// Runs `work(i, &items[i], &mut state)` for every item on up to `threads` threads, each with its
/// own `state` from `init`, and returns the results in item order. A panic in any worker fails the
/// whole call: silently dropping a worker's results would commit or serve a partial answer.
pub(crate) fn map<T, S, R>(
    items: &[T],
    threads: usize,
    init: impl Fn() -> S + Sync,
    work: impl Fn(usize, &T, &mut S) -> R + Sync,
) -> Result<Vec<R>, Panicked>
where
    T: Sync,
    R: Send,
{
    let next = AtomicUsize::new(0);
    let threads = threads.clamp(1, items.len().max(1));
    let parts: Vec<std::thread::Result<Vec<(usize, R)>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let (next, init, work) = (&next, &init, &work);
                scope.spawn(move || {
                    let mut state = init();
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= items.len() {
                            break;
                        }
                        out.push((i, work(i, &items[i], &mut state)));
                    }
                    out
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join()).collect()
    });
    let mut all: Vec<(usize, R)> = Vec::with_capacity(items.len());
    for part in parts {
        all.extend(part.map_err(|_| Panicked)?);
    }
    all.sort_unstable_by_key(|(i, _)| *i);
    Ok(all.into_iter().map(|(_, r)| r).collect())
}

#[cfg(test)]
mod tests {
    use super::{Panicked, map};

    #[test]
    fn results_come_back_in_item_order() {
        let items: Vec<u32> = (0..1000).collect();
        let out = map(&items, 4, || (), |_, x, _| x * 2).unwrap();
        assert_eq!(out, items.iter().map(|x| x * 2).collect::<Vec<_>>());
    }

    #[test]
    fn a_panicking_worker_fails_the_whole_batch() {
        let items: Vec<u32> = (0..100).collect();
        let out = map(
            &items,
            2,
            || (),
            |_, &x, _| {
                assert!(x != 57, "injected");
                x
            },
        );
        assert_eq!(out, Err(Panicked));
    }
}
