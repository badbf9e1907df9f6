//! Why an operation on the PostgreSQL index failed.

/// Why an operation on the PostgreSQL index failed.
///
/// No variant carries server text or connection parameters: a server message can quote a user
/// name or a statement, and a connection string can hold a password. What is kept is the
/// SQLSTATE code, which names the class of failure and nothing else.
#[derive(Debug)]
pub enum PgIndexError {
    /// The configuration is unusable: an empty or credential-bearing tenant or repository id,
    /// or a pool of size zero.
    BadConfig(&'static str),
    /// The server could not be reached, or refused the connection or the login.
    Connect {
        /// The SQLSTATE the server answered with, when it answered.
        sqlstate: Option<String>,
    },
    /// Connecting took longer than [`crate::PgIndexConfig::connect_timeout`].
    ConnectTimeout,
    /// The connection was lost during the operation; nothing was committed by it.
    ConnectionLost,
    /// A statement ran past its `statement_timeout` and the server cancelled it.
    StatementTimeout,
    /// A statement failed on the server; its transaction was rolled back.
    Statement {
        /// The SQLSTATE the server answered with.
        sqlstate: Option<String>,
    },
    /// The database does not use UTF-8, which the trigram pre-filter needs.
    NotUtf8,
    /// The database's locale lowers text in ways the case-insensitive pre-filter cannot follow
    /// (an ICU provider, or a Turkic ctype): it could drop real matches, so it is refused.
    UnsafeLocale,
    /// The database holds a schema version newer than this crate knows.
    SchemaTooNew {
        /// The newest version applied to the database.
        found: i32,
    },
    /// A read-only index holds no schema to read: no writer has created it yet.
    NoSchema,
    /// A write was asked of an index opened read-only; nothing was sent to the server.
    ReadOnly,
    /// Reading a file of the worktree failed.
    Io(std::io::Error),
    /// The request is refused before it reaches the server: an option this backend does not
    /// declare, a bound exceeded, or a regex the shared profile refuses. The guard's error says
    /// which, with its `ERR_PRISM_INDEX_*` code.
    Refused(index_contract::IndexError),
}

impl std::fmt::Display for PgIndexError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let code = |s: &Option<String>| match s {
            Some(s) => format!(" (SQLSTATE {s})"),
            None => String::new(),
        };
        match self {
            PgIndexError::BadConfig(what) => write!(f, "bad configuration: {what}"),
            PgIndexError::Connect { sqlstate } => write!(
                f,
                "could not connect to the PostgreSQL server{}",
                code(sqlstate)
            ),
            PgIndexError::ConnectTimeout => {
                f.write_str("connecting to the PostgreSQL server timed out")
            }
            PgIndexError::ConnectionLost => {
                f.write_str("the connection to the PostgreSQL server was lost")
            }
            PgIndexError::StatementTimeout => {
                f.write_str("a statement ran past its timeout and was cancelled")
            }
            PgIndexError::Statement { sqlstate } => {
                write!(f, "a statement failed{}", code(sqlstate))
            }
            PgIndexError::NotUtf8 => f.write_str("the database encoding is not UTF8"),
            PgIndexError::UnsafeLocale => f.write_str(
                "the database's locale (ICU, or a Turkic ctype) folds case unlike the pre-filter",
            ),
            PgIndexError::SchemaTooNew { found } => write!(
                f,
                "the database schema is at version {found}, newer than this build knows"
            ),
            PgIndexError::NoSchema => {
                f.write_str("the database holds no repo_search schema; a writer creates it")
            }
            PgIndexError::ReadOnly => f.write_str("the index is read-only: nothing was written"),
            PgIndexError::Io(e) => write!(f, "reading the worktree failed: {e}"),
            PgIndexError::Refused(e) => write!(f, "the request is refused: {e}"),
        }
    }
}

impl std::error::Error for PgIndexError {}

impl From<std::io::Error> for PgIndexError {
    fn from(e: std::io::Error) -> Self {
        PgIndexError::Io(e)
    }
}

impl From<tokio_postgres::Error> for PgIndexError {
    fn from(e: tokio_postgres::Error) -> Self {
        let sqlstate = e.code().map(|c| c.code().to_owned());
        if e.is_closed() {
            PgIndexError::ConnectionLost
        } else if e.code() == Some(&tokio_postgres::error::SqlState::QUERY_CANCELED) {
            PgIndexError::StatementTimeout
        } else {
            PgIndexError::Statement { sqlstate }
        }
    }
}
