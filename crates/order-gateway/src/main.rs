//! The `order-gateway` binary: `order-gateway serve` runs the server; `order-gateway ops …` is
//! the operator's CLI against a running gateway (see the library docs, `order_gateway::ops`).

use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use order_gateway::ops::{self, OpsArgs};
use order_gateway::{Application, Settings};
use rakuten_types::SystemClock;

/// Durable, leased, at-most-once order task queue (spec order-gateway.md).
#[derive(Debug, Parser)]
#[command(name = "order-gateway", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once at start and moved out at once: the size difference costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Command {
    /// Run the HTTP server. Every option can also be set through its RAKUTEN_* variable or `.env`.
    Serve(Settings),
    /// Operator commands against a running gateway (RAKUTEN_GATEWAY_URL, RAKUTEN_OPS_TOKEN).
    /// Exit codes: 0 done, 1 refused, 2 usage, 3 not found, 4 token refused, 5 unavailable.
    Ops(OpsArgs),
}

fn main() -> ExitCode {
    // `ops` prints its answer on standard output, so its logs (warnings only) go to standard error.
    let is_ops = std::env::args_os().nth(1).is_some_and(|a| a == "ops");
    let cli: Cli = if is_ops {
        rakuten_cli::start_with("warn", &[], rakuten_cli::LogOutput::Stderr)
    } else {
        rakuten_cli::start("info", &[])
    };
    let settings = match cli.command {
        Command::Serve(settings) => settings,
        Command::Ops(args) => return ops_main(&args),
    };
    if let Err(e) = settings.validate() {
        rakuten_cli::exit_invalid::<Cli>(e.name, &e.reason);
    }
    rakuten_cli::exit_on_error(
        tokio::runtime::Runtime::new()
            .map_err(Into::into)
            .and_then(|rt| {
                rt.block_on(async move {
                    let app = Application::build(settings, Arc::new(SystemClock)).await?;
                    app.run_until_stopped(shutdown_signal()).await
                })
            }),
    )
}

/// `order-gateway ops`: the answer alone on standard output; exit codes as documented.
fn ops_main(args: &OpsArgs) -> ExitCode {
    let status = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(ops::run(
            args,
            &mut std::io::stdout().lock(),
            &mut std::io::stderr(),
        )),
        Err(e) => {
            rakuten_cli::stderr_line!("error: cannot start the runtime: {e}");
            ops::ExitStatus::Unavailable
        }
    };
    ExitCode::from(status as u8)
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}
