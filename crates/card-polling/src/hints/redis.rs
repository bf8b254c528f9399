//! The Redis channel: one list per key, `LPUSH` at the tail end and `RPOP key count` at the head
//! end (FIFO), through a reconnecting `ConnectionManager`.

use async_trait::async_trait;
use redis::aio::ConnectionManager;

use super::{ChannelError, QueueChannel};

/// Redis lists.
#[derive(Clone)]
pub struct RedisChannel {
    conn: ConnectionManager,
}

impl std::fmt::Debug for RedisChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may carry a password: never printed.
        f.debug_struct("RedisChannel").finish_non_exhaustive()
    }
}

fn err(e: redis::RedisError) -> ChannelError {
    ChannelError(format!("redis: {e}"))
}

impl RedisChannel {
    /// Connects (and answers a `PING`) within [`super::CONNECT_TIMEOUT`]. A `rediss://` URL
    /// speaks TLS (rustls) and verifies the server against `ca_pem` when given (PEM bytes of the
    /// CA), else against the system's trust store.
    ///
    /// # Errors
    /// [`ConnectError::Refused`]: a bad URL or CA, or a server that answers with an error (a
    /// wrong password, a database index it does not have) — the operator's to fix.
    /// [`ConnectError::NotAnswering`]: no connection or no answer in time — a restart may do.
    pub async fn connect(url: &str, ca_pem: Option<Vec<u8>>) -> Result<Self, ConnectError> {
        let client = match ca_pem {
            Some(root_cert) => redis::Client::build_with_tls(
                url,
                redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(root_cert),
                },
            ),
            None => redis::Client::open(url),
        }
        .map_err(|e| ConnectError::Refused(err(e)))?;
        // One plain attempt first: the connection manager retries whatever fails, so a server
        // that refuses (`-ERR AUTH …`) would look like one that never answered.
        let first = async {
            let mut conn = client.get_multiplexed_async_connection().await?;
            redis::cmd("PING").query_async::<String>(&mut conn).await
        };
        match tokio::time::timeout(super::CONNECT_TIMEOUT, first).await {
            Err(_) => return Err(ConnectError::NotAnswering(no_answer())),
            Ok(Err(e)) if e.is_io_error() || e.is_connection_refusal() || e.is_timeout() => {
                return Err(ConnectError::NotAnswering(err(e)));
            }
            Ok(Err(e)) => return Err(ConnectError::Refused(err(e))),
            Ok(Ok(_)) => {}
        }
        let connect = async {
            let mut conn = client.get_connection_manager().await.map_err(err)?;
            let _: String = redis::cmd("PING")
                .query_async(&mut conn)
                .await
                .map_err(err)?;
            Ok::<_, ChannelError>(conn)
        };
        let conn = tokio::time::timeout(super::CONNECT_TIMEOUT, connect)
            .await
            .map_err(|_| ConnectError::NotAnswering(no_answer()))?
            .map_err(ConnectError::NotAnswering)?;
        Ok(RedisChannel { conn })
    }
}

fn no_answer() -> ChannelError {
    ChannelError("redis: no answer to PING".into())
}

/// Why [`RedisChannel::connect`] failed: start-up exits 2 for the first, 3 for the second
/// (D-exit-2-or-3).
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The URL, the CA or the server refused: only the operator can fix it.
    #[error(transparent)]
    Refused(ChannelError),
    /// Nothing answered in time: Redis may still be starting.
    #[error(transparent)]
    NotAnswering(ChannelError),
}

#[async_trait]
impl QueueChannel for RedisChannel {
    async fn push(&self, key: &str, values: &[String]) -> Result<(), ChannelError> {
        if values.is_empty() {
            return Ok(());
        }
        let mut conn = self.conn.clone();
        let _: i64 = redis::cmd("LPUSH")
            .arg(key)
            .arg(values)
            .query_async(&mut conn)
            .await
            .map_err(err)?;
        Ok(())
    }

    async fn pop(&self, key: &str, max: usize) -> Result<Vec<String>, ChannelError> {
        if max == 0 {
            return Ok(vec![]);
        }
        let mut conn = self.conn.clone();
        let vals: Option<Vec<String>> = redis::cmd("RPOP")
            .arg(key)
            .arg(max)
            .query_async(&mut conn)
            .await
            .map_err(err)?;
        Ok(vals.unwrap_or_default())
    }

    async fn len(&self, key: &str) -> Result<u64, ChannelError> {
        let mut conn = self.conn.clone();
        redis::cmd("LLEN")
            .arg(key)
            .query_async(&mut conn)
            .await
            .map_err(err)
    }

    async fn clear(&self, key: &str) -> Result<(), ChannelError> {
        let mut conn = self.conn.clone();
        let _: i64 = redis::cmd("DEL")
            .arg(key)
            .query_async(&mut conn)
            .await
            .map_err(err)?;
        Ok(())
    }

    fn backend(&self) -> &'static str {
        "redis"
    }
}
