//! The in-process channel: one `VecDeque` per key behind a mutex. Lost on restart, which the
//! scheduler's recovery read covers.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use async_trait::async_trait;

use super::{ChannelError, QueueChannel};

/// In-process FIFO lists.
#[derive(Debug, Default)]
pub struct MemoryChannel {
    lists: Mutex<HashMap<String, VecDeque<String>>>,
}

impl MemoryChannel {
    fn lists(&self) -> std::sync::MutexGuard<'_, HashMap<String, VecDeque<String>>> {
        self.lists.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait]
impl QueueChannel for MemoryChannel {
    async fn push(&self, key: &str, values: &[String]) -> Result<(), ChannelError> {
        self.lists()
            .entry(key.to_owned())
            .or_default()
            .extend(values.iter().cloned());
        Ok(())
    }

    async fn pop(&self, key: &str, max: usize) -> Result<Vec<String>, ChannelError> {
        let mut lists = self.lists();
        let Some(list) = lists.get_mut(key) else {
            return Ok(vec![]);
        };
        let n = max.min(list.len());
        Ok(list.drain(..n).collect())
    }

    async fn len(&self, key: &str) -> Result<u64, ChannelError> {
        Ok(self.lists().get(key).map_or(0, |l| l.len() as u64))
    }

    async fn clear(&self, key: &str) -> Result<(), ChannelError> {
        self.lists().remove(key);
        Ok(())
    }

    fn backend(&self) -> &'static str {
        "memory"
    }
}
