//! The specification's 100 000-file metadata fixture: a backend whose index is a token map over
//! per-file metadata (path, module, language, one symbol). It answers in time proportional to the
//! hits, so the figures measured through it describe the seam, not a slow stand-in.

use std::collections::HashMap;
use std::sync::RwLock;
use std::time::Duration;

use index_contract::{
    BackendCapabilities, BackendError, BackendHit, BackendSearchResponse, BoxFuture, Change,
    IndexState, IndexStatus, RemoveRequest, RepositoryIndexBackend, SearchRequest, UnixMillis,
    UpdateRequest,
};

/// One file's metadata.
#[derive(Debug, Clone)]
struct Meta {
    path: String,
    symbol: String,
    generation: u32,
}

#[derive(Debug, Default)]
struct Index {
    files: Vec<Option<Meta>>,
    by_path: HashMap<String, u32>,
    by_token: HashMap<String, Vec<u32>>,
    status: Option<IndexStatus>,
}

/// The metadata fixture. `semantic` backends answer the same way; `never` ones never answer.
#[derive(Debug)]
pub struct MetadataFixture {
    index: RwLock<Index>,
    semantic: bool,
    never: bool,
    flood: Option<usize>,
}

/// The language tag of file `i`: a third of the files are `lang_rs`, so that tag is a common query.
fn tokens_of(i: u32, meta: &Meta) -> [String; 3] {
    let lang = match i % 3 {
        0 => "lang_rs",
        1 => "lang_c",
        _ => "lang_py",
    };
    [
        meta.symbol.clone(),
        format!("mod_{}", i / 100),
        lang.to_owned(),
    ]
}

impl MetadataFixture {
    /// `files` files at revision `rev-0`, updated now.
    pub fn new(files: usize) -> MetadataFixture {
        let mut index = Index::default();
        for i in 0..files as u32 {
            let meta = Meta {
                path: format!("src/mod_{}/file_{i}.rs", i / 100),
                symbol: format!("item_{i}"),
                generation: 0,
            };
            index.insert(i, meta);
        }
        index.status = Some(IndexStatus {
            state: IndexState::Ready,
            source_revision: Some("rev-0".into()),
            updated_at: Some(UnixMillis::now()),
        });
        MetadataFixture {
            index: RwLock::new(index),
            semantic: false,
            never: false,
            flood: None,
        }
    }

    /// Declares the semantic capability.
    pub fn semantic(mut self) -> MetadataFixture {
        self.semantic = true;
        self
    }

    /// Never answers a search.
    pub fn never(mut self) -> MetadataFixture {
        self.never = true;
        self
    }

    /// Answers every search with `n` distinct hits, ignoring `max_results`: a backend that floods.
    pub fn flood(mut self, n: usize) -> MetadataFixture {
        self.flood = Some(n);
        self
    }

    /// Files currently indexed.
    pub fn len(&self) -> usize {
        self.read().by_path.len()
    }

    /// Whether no file is indexed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Index> {
        self.index.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Index> {
        self.index.write().unwrap_or_else(|p| p.into_inner())
    }
}

impl Index {
    fn insert(&mut self, i: u32, meta: Meta) {
        for t in tokens_of(i, &meta) {
            self.by_token.entry(t).or_default().push(i);
        }
        self.by_path.insert(meta.path.clone(), i);
        if self.files.len() <= i as usize {
            self.files.resize(i as usize + 1, None);
        }
        self.files[i as usize] = Some(meta);
    }

    fn remove(&mut self, path: &str) {
        if let Some(i) = self.by_path.remove(path)
            && let Some(meta) = self.files[i as usize].take()
        {
            for t in tokens_of(i, &meta) {
                if let Some(v) = self.by_token.get_mut(&t) {
                    v.retain(|&x| x != i);
                }
            }
        }
    }
}

impl RepositoryIndexBackend for MetadataFixture {
    fn capabilities(&self) -> BackendCapabilities {
        BackendCapabilities {
            semantic: self.semantic,
            ..BackendCapabilities::default()
        }
    }

    fn update(&self, request: UpdateRequest) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move {
            let mut index = self.write();
            for change in &request.changes {
                let path = match change {
                    Change::Add { path } | Change::Edit { path } => path,
                    Change::Rename { .. } | Change::Delete { .. } => {
                        return Err("the facade must route renames and deletes".into());
                    }
                };
                let (i, generation) = match index.by_path.get(path) {
                    Some(&i) => (
                        i,
                        index.files[i as usize]
                            .as_ref()
                            .map_or(0, |m| m.generation + 1),
                    ),
                    None => (index.files.len() as u32, 0),
                };
                index.remove(path);
                let meta = Meta {
                    path: path.clone(),
                    symbol: format!("item_{i}"),
                    generation,
                };
                index.insert(i, meta);
            }
            index.status = Some(IndexStatus {
                state: IndexState::Ready,
                source_revision: Some(request.source_revision),
                updated_at: Some(UnixMillis::now()),
            });
            Ok(())
        })
    }

    fn remove(&self, request: RemoveRequest) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move {
            let mut index = self.write();
            for p in &request.paths {
                index.remove(p);
            }
            Ok(())
        })
    }

    fn search(
        &self,
        request: SearchRequest,
    ) -> BoxFuture<'_, Result<BackendSearchResponse, BackendError>> {
        Box::pin(async move {
            if self.never {
                std::future::pending::<()>().await;
            }
            let index = self.read();
            let status = index.status.clone().ok_or("no status")?;
            if let Some(n) = self.flood {
                let hits = (0..n)
                    .map(|i| BackendHit {
                        path: format!("flood/{i}.rs"),
                        line: 1,
                        column: 1,
                        snippet: "x".repeat(64),
                        score: 0.5,
                        count: None,
                        before: Vec::new(),
                        after: Vec::new(),
                    })
                    .collect();
                return Ok(BackendSearchResponse {
                    skipped: None,
                    status,
                    hits,
                    complete: true,
                    full_scan: false,
                });
            }
            let cap = request
                .max_results
                .unwrap_or(index_contract::limits::DEFAULT_MAX_RESULTS);
            let ids = index
                .by_token
                .get(&request.query)
                .map_or(&[][..], Vec::as_slice);
            let mut hits = Vec::with_capacity(ids.len().min(cap));
            for &i in ids {
                let Some(meta) = &index.files[i as usize] else {
                    continue;
                };
                if let Some(scope) = &request.path
                    && !(meta.path.starts_with(scope.as_str())
                        && meta.path.as_bytes().get(scope.len()) == Some(&b'/'))
                {
                    continue;
                }
                if hits.len() == cap {
                    break;
                }
                hits.push(BackendHit {
                    path: meta.path.clone(),
                    line: 1,
                    column: 8,
                    snippet: format!(
                        "pub fn {}() {{}} // generation {}",
                        meta.symbol, meta.generation
                    ),
                    score: 1.0 / (1.0 + hits.len() as f64),
                    count: None,
                    before: Vec::new(),
                    after: Vec::new(),
                });
            }
            let complete = hits.len() < cap;
            Ok(BackendSearchResponse {
                skipped: None,
                status,
                hits,
                complete,
                full_scan: false,
            })
        })
    }

    fn status(&self) -> BoxFuture<'_, Result<IndexStatus, BackendError>> {
        Box::pin(async move { self.read().status.clone().ok_or_else(|| "no status".into()) })
    }

    fn dispose(&self) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async { Ok(()) })
    }
}

/// How long a fixture that never answers is given in the semantic check.
pub const SEMANTIC_DEADLINE: Duration = Duration::from_millis(250);
