//! The real `order-gateway` binary on port 0: it writes the address it bound to
//! `RAKUTEN_GATEWAY_ADDR_FILE`, and the test reads it back (never a port picked in advance,
//! which another process may take in between, issue #12 item 13).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

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
        static N: AtomicU32 = AtomicU32::new(0);
        let addr_file = dir.join(format!("addr-{}", N.fetch_add(1, Ordering::Relaxed)));
        let _ = std::fs::remove_file(&addr_file);
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_order-gateway"));
        cmd.arg("serve")
            .env("RAKUTEN_API_TOKEN", TOKEN)
            .env("RAKUTEN_GATEWAY_PORT", "0")
            .env("RAKUTEN_GATEWAY_ADDR_FILE", &addr_file)
            .env("RAKUTEN_LEASE_TTL_SECONDS", "3")
            .env("RAKUTEN_SWEEP_INTERVAL_SECONDS", "0.2")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("start order-gateway");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(addr) = std::fs::read_to_string(&addr_file) {
                return Binary {
                    child,
                    base: format!("http://{}", addr.trim()),
                };
            }
            if let Some(status) = child.try_wait().unwrap() {
                panic!("order-gateway exited before listening: {status}");
            }
            assert!(Instant::now() < deadline, "order-gateway did not come up");
            tokio::time::sleep(Duration::from_millis(20)).await;
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
        let deadline = Instant::now() + within;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "order-gateway still running after {within:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
