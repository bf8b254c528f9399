//! `card-polling serve`: thin entry point over the library.

use std::process::ExitCode;

use card_polling::settings::{Cli, Command};

fn main() -> ExitCode {
    let cli: Cli = rakuten_cli::start("info", &[]);
    let Command::Serve(settings) = cli.command;
    if let Err((name, reason)) = settings
        .edge
        .check_tls()
        .and_then(|()| settings.check_redis_ca())
    {
        rakuten_cli::exit_invalid::<Cli>(name, reason);
    }
    if let Some(addr) = settings.listen {
        tracing::warn!(
            listen = %addr,
            "deprecated setting RAKUTEN_POLL_LISTEN / --listen: use RAKUTEN_POLL_HOST and RAKUTEN_POLL_PORT"
        );
    }
    rakuten_cli::exit_on_error(
        tokio::runtime::Runtime::new()
            .map_err(Into::into)
            .and_then(|rt| rt.block_on(card_polling::serve(settings))),
    )
}
