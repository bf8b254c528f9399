//! The real `order-gateway` binary on port 0: it writes the address it bound to
//! `RAKUTEN_GATEWAY_ADDR_FILE`, and the test reads it back (never a port picked in advance,
//! which another process may take in between).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use test_util::libfaketime;

use crate::helpers::TOKEN;

/// A running gateway process; killed (SIGKILL) when dropped.
pub struct Binary {
    pub child: Child,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
}

impl Drop for Binary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Binary {
    /// Starts `order-gateway serve` with the test token, a 3 s lease, a 0.2 s sweep, and `env`
    /// on top; waits until it has written its address.
    pub async fn start(dir: &Path, env: &[(&str, &str)]) -> Binary {
        Self::start_with_clock(dir, env, None, false).await
    }

    /// [`Self::start`] logging at INFO into pipes whose reading ends are closed at once, as under
    /// `order-gateway serve 2>&1 | head -1` after `head` has exited: every log write fails.
    pub async fn start_with_logs_closed(dir: &Path, env: &[(&str, &str)]) -> Binary {
        Self::start_with_clock(dir, env, None, true).await
    }

    /// [`Self::start`] under libfaketime with the wall clock moved by `offset` (`"+120s"`): the
    /// process's `SystemTime` is off, its monotonic clock is not (`FAKETIME_DONT_FAKE_MONOTONIC`,
    /// so tokio's timers run normally). Fails loudly when `faketime` is not installed.
    pub async fn start_faked(dir: &Path, env: &[(&str, &str)], offset: &str) -> Binary {
        Self::start_with_clock(dir, env, Some(offset), false).await
    }

    async fn start_with_clock(
        dir: &Path,
        env: &[(&str, &str)],
        fake: Option<&str>,
        logs_closed: bool,
    ) -> Binary {
        static N: AtomicU32 = AtomicU32::new(0);
        let addr_file = dir.join(format!("addr-{}", N.fetch_add(1, Ordering::Relaxed)));
        let _ = std::fs::remove_file(&addr_file);
        let bin = env!("CARGO_BIN_EXE_order-gateway");
        let mut cmd = Command::new(bin);
        if let Some(offset) = fake {
            // LD_PRELOAD rather than the `faketime` wrapper, which forks: the child would outlive
            // a SIGKILL of the wrapper, and a SIGTERM would not reach it.
            cmd.env("LD_PRELOAD", libfaketime())
                .env("FAKETIME", offset)
                .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        }
        cmd.arg("serve")
            .env("RAKUTEN_API_TOKEN", TOKEN)
            .env("RAKUTEN_GATEWAY_PORT", "0")
            .env("RAKUTEN_GATEWAY_ADDR_FILE", &addr_file)
            .env("RAKUTEN_LEASE_TTL_SECONDS", "3")
            .env("RAKUTEN_SWEEP_INTERVAL_SECONDS", "0.2")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if logs_closed {
            cmd.env("RUST_LOG", "info")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("start order-gateway");
        drop(child.stdout.take());
        drop(child.stderr.take());
        let addr = test_util::wait_for_addr_file(
            &mut child,
            &addr_file,
            Duration::from_secs(30),
            "order-gateway",
        )
        .await;
        Binary {
            child,
            base: format!("http://{addr}"),
        }
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        let killed = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(killed.success());
    }

    /// Waits for the process to exit, at most `within`; its exit status.
    pub async fn exited_within(&mut self, within: Duration) -> std::process::ExitStatus {
        test_util::wait_for_exit(&mut self.child, within, "order-gateway").await
    }
}
