//! Peak resident memory, as the kernel counts it (Linux): heap, and also the file pages a process
//! maps and touches, which a counting allocator ([`crate::alloc`]) does not see. A damaged index
//! file read through a map costs resident memory, not heap.
//!
//! The high-water mark is reset through `/proc/self/clear_refs` before a measurement and read from
//! `VmHWM` after it. It is process-wide: measure in a test binary whose tests hold [`serial`]
//! around each measurement, so no other test's memory counts. Before its first measurement a
//! process checks that the probe sees 96 MiB it touches, both allocated and mapped from a file:
//! a probe that sees nothing fails rather than passes.

use std::sync::{Mutex, MutexGuard, OnceLock};

/// One KiB, the unit of `/proc/self/status`.
const KIB: u64 = 1024;
/// What the calibration touches.
const CALIBRATION: usize = 96 << 20;

/// A lock that tests measuring memory hold, so that they run one at a time in their binary.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// A field of `/proc/self/status`, in bytes.
fn status(field: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/self/status").expect("reads /proc/self/status");
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("/proc/self/status has no {field}"));
    let kib: u64 = line
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{field} is not a number of kB: {line}"));
    kib * KIB
}

/// Resets the high-water mark to the resident memory now; returns the latter.
fn reset() -> u64 {
    // "5" resets the peak resident set size (Linux 4.0 and later).
    std::fs::write("/proc/self/clear_refs", "5").expect("resets the peak through clear_refs");
    status("VmRSS")
}

fn measure<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let before = reset();
    let out = f();
    let peak = status("VmHWM");
    (out, peak.saturating_sub(before))
}

/// Checks, once per process, that the probe sees memory touched on the heap and through a map.
fn calibrate() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let ((), heap) = measure(|| {
            let mut v = vec![0u8; CALIBRATION];
            for page in v.chunks_mut(4096) {
                page[0] = 1;
            }
            std::hint::black_box(&v);
        });
        assert!(
            heap >= CALIBRATION as u64 * 9 / 10,
            "the probe saw {} MiB of 96 MiB touched on the heap",
            heap >> 20
        );
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("calibration");
        std::fs::write(&path, vec![7u8; CALIBRATION]).expect("writes the calibration file");
        let file = std::fs::File::open(&path).expect("opens the calibration file");
        // SAFETY: the file is this function's own temporary file; nothing writes to it while it
        // is mapped.
        #[allow(unsafe_code)]
        let map = unsafe { memmap2::Mmap::map(&file) }.expect("maps the calibration file");
        let ((), mapped) = measure(|| {
            let sum: u64 = map.iter().step_by(4096).map(|&b| u64::from(b)).sum();
            std::hint::black_box(sum);
        });
        assert!(
            mapped >= CALIBRATION as u64 * 9 / 10,
            "the probe saw {} MiB of 96 MiB read through a map",
            mapped >> 20
        );
    });
}

/// Runs `f` and returns its result with the peak resident memory above what was resident before
/// it, in bytes. Hold [`serial`] around it. Panics when the kernel's figures cannot be read or
/// reset, or when the probe is found blind (see the module docs).
pub fn peak_during<T>(f: impl FnOnce() -> T) -> (T, u64) {
    calibrate();
    measure(f)
}

/// Sets `path`'s length to `len` in place: grown sparse, an 8 GiB damaged file costs no disk.
pub fn set_len(path: &std::path::Path, len: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|f| f.set_len(len))
        .unwrap_or_else(|e| panic!("sets the length of {}: {e}", path.display()));
}
