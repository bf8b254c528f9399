//! `order-gateway ops <command>`: the operator's CLI, talking HTTP to a running gateway through
//! the typed [`gateway_client`].
//!
//! - The gateway: `--url` / `RAKUTEN_GATEWAY_URL` (default `http://127.0.0.1:31109`).
//! - The token: `--token` / `RAKUTEN_OPS_TOKEN`, else `RAKUTEN_API_TOKEN` (the environment or a
//!   `.env` file in the working directory).
//! - Output: readable tables by default ([`render`]), `--json` for scripts (the envelope's `data`,
//!   pretty-printed). Errors go to standard error, one line.
//!
//! Exit codes ([`ExitStatus`]): 0 done; 1 refused by the gateway (409 state conflict, 422 bad
//! input, …); 2 usage (bad arguments, no token); 3 not found (unknown task); 4 the token was
//! refused (401) or its role may not do this (403); 5 gateway unreachable, timed out or 5xx.
//!
//! Adding a command: a variant of [`OpsCommand`] (its flags), a client method, a
//! [`render`] function, and one arm in [`OpsCommand::run`].

pub mod render;

use std::io::Write;
use std::time::Duration;

use gateway_client::{AlertQuery, Client, Error, TaskQuery};
use rakuten_types::alert::{AlertKind, ResolveTask};
use rakuten_types::{ErrorCode, OrderState, Outcome, TaskId, TaskStatus, WorkerId};
use serde::Serialize;

/// Flags shared by every `ops` command.
#[derive(Debug, clap::Args)]
pub struct OpsArgs {
    /// Gateway base URL.
    #[arg(
        long,
        env = "RAKUTEN_GATEWAY_URL",
        default_value = "http://127.0.0.1:31109",
        global = true
    )]
    pub url: String,

    /// Operator token; unset = `RAKUTEN_API_TOKEN`.
    #[arg(long, env = "RAKUTEN_OPS_TOKEN", hide_env_values = true, global = true)]
    pub token: Option<String>,

    /// Print the answer as JSON (for scripts) instead of tables.
    #[arg(long, global = true)]
    pub json: bool,

    /// Timeout of one request, seconds.
    #[arg(long, default_value_t = 10.0, global = true)]
    pub timeout_seconds: f64,

    /// The command.
    #[command(subcommand)]
    pub command: OpsCommand,
}

/// One operator command.
#[derive(Debug, clap::Subcommand)]
pub enum OpsCommand {
    /// List tasks, oldest first.
    Tasks {
        /// Only this status: queued, leased, running, stale, succeeded, failed, needs_human.
        #[arg(long)]
        status: Option<String>,
        /// Page size (at most 200).
        #[arg(long, default_value_t = 50)]
        limit: i64,
        /// Tasks to skip.
        #[arg(long, default_value_t = 0)]
        offset: i64,
    },
    /// One task: its fields, known state and every reported state with its evidence.
    Show {
        /// The task id.
        id: String,
    },
    /// Hand a stale task to a named worker; the worker receives it on its next lease poll.
    Reclaim {
        /// The stale task.
        id: String,
        /// The worker that gets it.
        #[arg(long)]
        worker: String,
        /// Why (recorded with the action).
        #[arg(long)]
        reason: String,
    },
    /// End a stale or needs_human task by hand, after checking the site, or correct an ended task
    /// whose latest reported state contradicts its outcome.
    Resolve {
        /// The task.
        id: String,
        /// What the site shows: succeeded or failed.
        #[arg(long)]
        outcome: String,
        /// The site's order number, if there is one.
        #[arg(long)]
        site_order_id: Option<String>,
        /// The order state seen on the site (recorded in the history, marked as yours).
        #[arg(long)]
        state: Option<String>,
        /// Why (recorded with the action).
        #[arg(long)]
        reason: String,
    },
    /// Withdraw a queued task (it ends failed) before a worker takes it.
    Cancel {
        /// The queued task.
        id: String,
        /// Why (recorded with the action).
        #[arg(long)]
        reason: String,
    },
    /// Alerts, newest first: open ones, or every one with --all.
    Alerts {
        /// Cleared alerts too.
        #[arg(long)]
        all: bool,
        /// Only this kind (worker_offline, task_queued_too_long, task_stale, task_needs_human,
        /// account_logged_out, webhook_failing).
        #[arg(long)]
        kind: Option<String>,
        /// Page size (at most 200).
        #[arg(long, default_value_t = 50)]
        limit: i64,
        /// Alerts to skip.
        #[arg(long, default_value_t = 0)]
        offset: i64,
    },
    /// Known workers, one page with the total: last poll, offline, retired, the task it holds.
    /// Those holding a task first, then serving ones, then retired ones, each most recently seen
    /// first.
    Workers {
        /// Page size (at most 200).
        #[arg(long, default_value_t = 50)]
        limit: i64,
        /// Workers to skip.
        #[arg(long, default_value_t = 0)]
        offset: i64,
    },
    /// Retire a worker: gone from /health and worker_offline alerts until it polls again.
    Retire {
        /// The worker.
        worker: String,
        /// Why (recorded with the action).
        #[arg(long)]
        reason: String,
    },
}

/// The process exit status of an `ops` command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ExitStatus {
    /// Done.
    Ok = 0,
    /// The gateway refused the request (conflict, bad input, …).
    Refused = 1,
    /// Bad arguments or no token.
    Usage = 2,
    /// No such task.
    NotFound = 3,
    /// Token unknown (401) or its role may not do this (403).
    Auth = 4,
    /// The gateway did not answer, timed out, or failed (5xx).
    Unavailable = 5,
}

impl ExitStatus {
    /// The status for a client error.
    pub fn of(e: &Error) -> Self {
        match e {
            Error::Rejected {
                status: 401 | 403, ..
            } => ExitStatus::Auth,
            Error::Rejected { status: 404, .. } => ExitStatus::NotFound,
            Error::Rejected { code, .. }
                if *code == ErrorCode::TaskNotFound.as_i32()
                    || *code == ErrorCode::QueryNotFound.as_i32() =>
            {
                ExitStatus::NotFound
            }
            Error::Rejected { .. } | Error::LeaseLost(_) => ExitStatus::Refused,
            Error::Transient(_) | Error::ShuttingDown => ExitStatus::Unavailable,
        }
    }
}

/// What a command answered: its data (for `--json`) and its tables.
#[derive(Debug)]
pub struct Output {
    json: serde_json::Value,
    text: String,
}

impl Output {
    fn new<T: Serialize>(data: &T, text: String) -> Self {
        Output {
            json: serde_json::to_value(data).unwrap_or(serde_json::Value::Null),
            text,
        }
    }
}

/// Why a command failed.
#[derive(Debug)]
enum Failure {
    /// A bad argument clap could not check (exit 2).
    Usage(String),
    /// The gateway's answer or its absence.
    Gateway(Error),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Gateway(e)
    }
}

/// A `--reason`: not blank.
fn non_empty(reason: &str) -> Result<String, Failure> {
    if reason.trim().is_empty() {
        return Err(Failure::Usage("--reason must not be empty".into()));
    }
    Ok(reason.to_owned())
}

/// Parses an argument; its error is a usage error naming `what`.
fn arg<T, E: std::fmt::Display>(what: &str, r: Result<T, E>) -> Result<T, Failure> {
    r.map_err(|e| Failure::Usage(format!("{what}: {e}")))
}

impl OpsCommand {
    /// Sends the command and renders the answer.
    async fn run(&self, client: &Client) -> Result<Output, Failure> {
        match self {
            OpsCommand::Tasks {
                status,
                limit,
                offset,
            } => {
                let status = match status {
                    Some(s) => Some(arg("--status", s.parse::<TaskStatus>())?),
                    None => None,
                };
                let q = TaskQuery {
                    status,
                    limit: Some(*limit),
                    offset: Some(*offset),
                };
                let page = client.tasks(&q).await?;
                Ok(Output::new(&page, render::tasks(&page)))
            }
            OpsCommand::Show { id } => {
                let d = client.task(&arg("task id", TaskId::parse(id))?).await?;
                Ok(Output::new(&d, render::task_detail(&d)))
            }
            OpsCommand::Reclaim { id, worker, reason } => {
                let id = arg("task id", TaskId::parse(id))?;
                let worker = arg("--worker", WorkerId::parse(worker))?;
                if reason.trim().is_empty() {
                    return Err(Failure::Usage("--reason must not be empty".into()));
                }
                let g = client.reclaim(&id, &worker, Some(reason)).await?;
                let mut text = render::grant(&g, &worker);
                // A typed worker id that no worker polls with takes the grant all
                // the same (the API names only the worker), and the task goes stale again a TTL
                // later. The CLI, where ids are typed, says so at once.
                // Only a whole list can show a worker is unknown: past one page it may be listed
                // further on.
                if let Ok(ws) = client.workers(Some(200), None).await
                    && ws.total <= ws.items.len() as i64
                    && !ws.items.iter().any(|w| w.worker_id == worker.as_str())
                {
                    text.push_str(&format!(
                        "note: worker {worker} has never polled this gateway (`ops workers` lists \
                         those that have): unless it polls before the lease expires, the task \
                         goes stale again\n"
                    ));
                }
                Ok(Output::new(&g, text))
            }
            OpsCommand::Resolve {
                id,
                outcome,
                site_order_id,
                state,
                reason,
            } => {
                let id = arg("task id", TaskId::parse(id))?;
                // Only the two outcomes a person may set; the message names them, not the
                // whole status vocabulary the parser would list.
                let outcome = match outcome.parse::<Outcome>() {
                    Ok(o @ (Outcome::Succeeded | Outcome::Failed)) => o,
                    _ => {
                        return Err(Failure::Usage(format!(
                            "--outcome must be succeeded or failed, not {outcome:?}"
                        )));
                    }
                };
                let state = match state {
                    Some(s) => Some(arg("--state", s.parse::<OrderState>())?),
                    None => None,
                };
                let body = ResolveTask {
                    outcome,
                    reason: non_empty(reason)?,
                    site_order_id: site_order_id.clone(),
                    state,
                };
                let ack = client.resolve(&id, &body).await?;
                Ok(Output::new(&ack, render::action_ack(&ack)))
            }
            OpsCommand::Cancel { id, reason } => {
                let id = arg("task id", TaskId::parse(id))?;
                let ack = client.cancel(&id, &non_empty(reason)?).await?;
                Ok(Output::new(&ack, render::action_ack(&ack)))
            }
            OpsCommand::Alerts {
                all,
                kind,
                limit,
                offset,
            } => {
                let kind = match kind {
                    Some(k) => Some(arg("--kind", k.parse::<AlertKind>())?),
                    None => None,
                };
                let q = AlertQuery {
                    all: *all,
                    kind,
                    limit: Some(*limit),
                    offset: Some(*offset),
                };
                let page = client.alerts(&q).await?;
                Ok(Output::new(&page, render::alerts(&page)))
            }
            OpsCommand::Workers { limit, offset } => {
                let page = client.workers(Some(*limit), Some(*offset)).await?;
                Ok(Output::new(&page, render::workers(&page)))
            }
            OpsCommand::Retire { worker, reason } => {
                let worker = arg("worker id", WorkerId::parse(worker))?;
                let a = client.retire(&worker, &non_empty(reason)?).await?;
                Ok(Output::new(&a, render::action(&a)))
            }
        }
    }
}

/// Runs `args`, writing the answer to `out` and errors to `err`; returns the exit status.
pub async fn run(args: &OpsArgs, out: &mut dyn Write, err: &mut dyn Write) -> ExitStatus {
    let token = args
        .token
        .clone()
        .or_else(|| std::env::var("RAKUTEN_API_TOKEN").ok())
        .filter(|t| !t.trim().is_empty());
    let Some(token) = token else {
        let _ = writeln!(
            err,
            "error: no token: set RAKUTEN_OPS_TOKEN (or RAKUTEN_API_TOKEN) or pass --token"
        );
        return ExitStatus::Usage;
    };
    // A URL that cannot be one is a usage error (2) naming its setting, not an unreachable
    // gateway (5) (D-exit-2-or-3).
    let url_ok = reqwest::Url::parse(&args.url)
        .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some());
    if !url_ok {
        let _ = writeln!(
            err,
            "error: invalid setting --url / RAKUTEN_GATEWAY_URL: {:?} is not an http(s) URL \
             (e.g. http://127.0.0.1:31109)",
            args.url
        );
        return ExitStatus::Usage;
    }
    let timeout = args.timeout_seconds;
    if !(timeout.is_finite() && timeout > 0.0 && timeout <= 3600.0) {
        let _ = writeln!(err, "error: --timeout-seconds must be in (0, 3600]");
        return ExitStatus::Usage;
    }
    let client = match Client::builder(&args.url, token.trim())
        .timeout(Duration::from_secs_f64(timeout))
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            let _ = writeln!(err, "error: cannot build the HTTP client: {e}");
            return ExitStatus::Unavailable;
        }
    };
    match args.command.run(&client).await {
        Ok(o) => {
            let written = if args.json {
                // Stored text written before the reason checks could hold what a terminal obeys.
                serde_json::to_string_pretty(&o.json)
                    .map_err(std::io::Error::other)
                    .and_then(|j| writeln!(out, "{}", rakuten_types::text::json_printable(&j)))
            } else {
                write!(out, "{}", o.text)
            };
            match written {
                Ok(()) => ExitStatus::Ok,
                Err(_) => ExitStatus::Unavailable,
            }
        }
        Err(Failure::Usage(msg)) => {
            let _ = writeln!(err, "error: {msg}");
            ExitStatus::Usage
        }
        Err(Failure::Gateway(e)) => {
            let _ = writeln!(err, "error: {} ({})", e, args.url);
            ExitStatus::of(&e)
        }
    }
}
