//! Evidence on local disk (spec §6.1):
//! `{RAKUTEN_EVIDENCE_DIR}/{task_id}/{NN}-{step}.html|.png|.meta.json`, the report's
//! `evidence_ref` being `{task_id}/{NN}-{step}` without extension. Every file is fsynced and then
//! its directory, before the caller journals or reports anything, so the gateway never shows a
//! state whose evidence could still be lost.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use rakuten_types::{OrderState, TaskId, Timestamp};
use serde_json::json;

use crate::site::PageSnapshot;

/// Writes evidence under one root.
#[derive(Debug, Clone)]
pub struct EvidenceStore {
    root: PathBuf,
}

/// What one evidence write records besides the page: the task's step it belongs to and the
/// order state the worker held when it wrote it.
#[derive(Debug, Clone)]
pub struct EvidenceOf {
    /// Task.
    pub task_id: TaskId,
    /// Sequence number: `NN` in the file names.
    pub seq: i64,
    /// Step name: lower-case ASCII letters, digits and `-`, 1..=64 (anything else is refused).
    pub step: String,
    /// The local order state, written into `.meta.json`.
    pub local_state: OrderState,
    /// What the step saw, written into `.meta.json`.
    pub note: Option<String>,
    /// When.
    pub at: Timestamp,
}

/// What one evidence write produced.
#[derive(Debug, Clone)]
pub struct EvidenceEntry {
    /// `{task_id}/{NN}-{step}`.
    pub evidence_ref: String,
    /// Sequence number.
    pub seq: i64,
    /// Step name.
    pub step: String,
    /// Page URL, if a page was read.
    pub url: Option<String>,
    /// HTTP method.
    pub method: Option<String>,
    /// HTTP status.
    pub http_status: Option<u16>,
    /// Whether an `.html` file was written.
    pub has_html: bool,
    /// Whether a `.png` file was written.
    pub has_png: bool,
    /// When.
    pub at: Timestamp,
}

fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Checks a step name: lower-case ASCII letters, digits and `-` only, 1..=64.
fn check_step(step: &str) -> std::io::Result<()> {
    if step.is_empty()
        || step.len() > 64
        || !step
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("bad evidence step name {step:?}"),
        ));
    }
    Ok(())
}

impl EvidenceStore {
    /// A store rooted at `root` (created on first write).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        EvidenceStore { root: root.into() }
    }

    /// [`EvidenceStore::write`] on the blocking pool (it fsyncs), for async callers.
    ///
    /// # Errors
    /// As [`EvidenceStore::write`].
    pub async fn write_async(
        &self,
        about: EvidenceOf,
        page: Option<PageSnapshot>,
    ) -> std::io::Result<EvidenceEntry> {
        let store = self.clone();
        tokio::task::spawn_blocking(move || store.write(&about, page.as_ref()))
            .await
            .map_err(std::io::Error::other)?
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory of a task. `TaskId` refuses `/`, `\`, `..` and control characters
    /// (D-id-rules), so the path stays under the root.
    pub fn task_dir(&self, task_id: &TaskId) -> PathBuf {
        self.root.join(task_id.as_str())
    }

    /// Writes `{NN}-{step}.html` (when the page has HTML), `.png` (when it has one) and
    /// `.meta.json` (always: URL, method, HTTP status, timestamp, local order state, note), each
    /// fsynced, then the directory.
    ///
    /// # Errors
    /// Any I/O error; the caller must then not report the step.
    pub fn write(
        &self,
        about: &EvidenceOf,
        page: Option<&PageSnapshot>,
    ) -> std::io::Result<EvidenceEntry> {
        let EvidenceOf {
            task_id,
            seq,
            step,
            local_state,
            note,
            at,
        } = about;
        let (seq, local_state, at) = (*seq, *local_state, *at);
        check_step(step)?;
        let dir = self.task_dir(task_id);
        if !dir.exists() {
            fs::create_dir_all(&dir)?;
            sync_dir(&self.root)?;
        }
        let name = format!("{seq:02}-{step}");
        let mut has_html = false;
        let mut has_png = false;
        if let Some(p) = page {
            if let Some(html) = &p.html {
                write_synced(&dir.join(format!("{name}.html")), html.as_bytes())?;
                has_html = true;
            }
            if let Some(png) = &p.png {
                write_synced(&dir.join(format!("{name}.png")), png)?;
                has_png = true;
            }
        }
        let meta = json!({
            "evidence_ref": format!("{}/{name}", task_id.as_str()),
            "task_id": task_id.as_str(),
            "step": step,
            "url": page.map(|p| p.url.clone()),
            "method": page.map(|p| p.method.clone()),
            "http_status": page.map(|p| p.http_status),
            "timestamp": at,
            "local_order_state": local_state,
            "html": has_html.then(|| format!("{name}.html")),
            "png": has_png.then(|| format!("{name}.png")),
            "note": note,
        });
        let meta_bytes = serde_json::to_vec_pretty(&meta).map_err(std::io::Error::other)?;
        write_synced(&dir.join(format!("{name}.meta.json")), &meta_bytes)?;
        sync_dir(&dir)?;
        Ok(EvidenceEntry {
            evidence_ref: format!("{}/{name}", task_id.as_str()),
            seq,
            step: step.to_owned(),
            url: page.map(|p| p.url.clone()),
            method: page.map(|p| p.method.clone()),
            http_status: page.map(|p| p.http_status),
            has_html,
            has_png,
            at,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_html_and_meta_and_refuses_bad_step_names() {
        let dir = tempfile::tempdir().unwrap();
        let store = EvidenceStore::new(dir.path());
        let id = TaskId::parse("po-1").unwrap();
        let page = PageSnapshot {
            url: "http://shop/cart".into(),
            method: "GET".into(),
            http_status: 200,
            html: Some("<html></html>".into()),
            png: None,
        };
        let about = |seq: i64, step: &str| EvidenceOf {
            task_id: id.clone(),
            seq,
            step: step.to_owned(),
            local_state: OrderState::InCart,
            note: None,
            at: Timestamp::EPOCH,
        };
        let e = store.write(&about(1, "cart-add"), Some(&page)).unwrap();
        assert_eq!(e.evidence_ref, "po-1/01-cart-add");
        assert!(dir.path().join("po-1/01-cart-add.html").exists());
        assert!(!dir.path().join("po-1/01-cart-add.png").exists());
        let meta: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join("po-1/01-cart-add.meta.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(meta["http_status"], 200);
        assert_eq!(meta["local_order_state"], "in_cart");
        for bad in ["../x", "a/b", "", "UPPER"] {
            assert!(store.write(&about(2, bad), None).is_err(), "{bad}");
        }
    }
}
