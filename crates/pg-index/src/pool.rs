//! A small connection pool: at most `size` connections, reused only when an operation finished
//! cleanly.
//!
//! A connection goes back to the pool only through [`Conn::release`], which an operation calls
//! after its `COMMIT`. A connection dropped any other way (an error, a deadline that dropped the
//! future mid-statement) is closed, so the server rolls its transaction back and no later
//! operation can inherit a half-finished one. That rule is why this is not `deadpool-postgres`:
//! it is the one behaviour needed, and it is a few lines.

use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::{Semaphore, SemaphorePermit};
use tokio_postgres::{Client, NoTls};

use crate::PgIndexError;

/// The pool.
pub(crate) struct Pool {
    config: tokio_postgres::Config,
    idle: Mutex<Vec<Client>>,
    permits: Semaphore,
    connect_timeout: Duration,
}

/// A connection taken from the pool.
pub(crate) struct Conn<'a> {
    client: Option<Client>,
    pool: &'a Pool,
    _permit: SemaphorePermit<'a>,
}

impl Pool {
    pub(crate) fn new(
        config: tokio_postgres::Config,
        size: usize,
        connect_timeout: Duration,
    ) -> Pool {
        Pool {
            config,
            idle: Mutex::new(Vec::new()),
            permits: Semaphore::new(size),
            connect_timeout,
        }
    }

    /// An idle open connection, or a new one.
    pub(crate) async fn get(&self) -> Result<Conn<'_>, PgIndexError> {
        let permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| PgIndexError::ConnectionLost)?;
        let reused = {
            let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
            // A connection the server closed while idle is dropped here, not handed out.
            idle.retain(|c| !c.is_closed());
            idle.pop()
        };
        let client = match reused {
            Some(c) => c,
            None => self.connect().await?,
        };
        Ok(Conn {
            client: Some(client),
            pool: self,
            _permit: permit,
        })
    }

    /// Opens a connection; the whole handshake, not only the socket, is bounded by the timeout.
    pub(crate) async fn connect(&self) -> Result<Client, PgIndexError> {
        let connecting = self.config.connect(NoTls);
        let (client, connection) = tokio::time::timeout(self.connect_timeout, connecting)
            .await
            .map_err(|_| PgIndexError::ConnectTimeout)?
            .map_err(|e| PgIndexError::Connect {
                sqlstate: e.code().map(|c| c.code().to_owned()),
            })?;
        // The connection task ends when the client is dropped or the socket closes; its error,
        // if any, reaches the next statement as a closed client.
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(client)
    }

    /// Closes the idle connections.
    pub(crate) fn clear(&self) {
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

impl Conn<'_> {
    /// The client.
    pub(crate) fn client(&self) -> &Client {
        self.client
            .as_ref()
            .expect("a Conn holds its client until dropped")
    }

    /// The client, to open a transaction object on.
    pub(crate) fn client_mut(&mut self) -> &mut Client {
        self.client
            .as_mut()
            .expect("a Conn holds its client until dropped")
    }

    /// Returns the connection to the pool: call only when no transaction is open.
    pub(crate) fn release(mut self) {
        if let Some(c) = self.client.take()
            && !c.is_closed()
        {
            self.pool
                .idle
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(c);
        }
    }
}
