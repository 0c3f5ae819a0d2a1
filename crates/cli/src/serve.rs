//! `pinfold serve` (the governed server, crates/server) and `pinfold approvals`, a thin client
//! of a running server.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use pinfold_plan::{Dirs, Error};
use pinfold_server::client::Client;
use serde_json::{json, Value};

use crate::exit;

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ServeArgs {
    /// Address to listen on (loopback only; port 0 picks a free one).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7878")]
    listen: SocketAddr,
    /// Let sandboxes name workspaces at or beneath DIR (repeatable). Without it, every sandbox
    /// gets a fresh, empty workspace.
    #[arg(long = "workspace-root", value_name = "DIR")]
    workspace_roots: Vec<PathBuf>,
    /// Where fresh workspaces are made [default: ~/.local/share/pinfold/workspaces].
    #[arg(long, value_name = "DIR")]
    workspaces: Option<PathBuf>,
    /// Also answer requests whose Host header names HOST (repeatable).
    #[arg(long = "allow-host", value_name = "HOST")]
    allow_hosts: Vec<String>,
    /// Requests per second allowed per token and per client address.
    #[arg(long, value_name = "N", default_value_t = 50)]
    rate: u32,
    /// How long an approval waits for a person, in seconds.
    #[arg(long, value_name = "S", default_value_t = 3600)]
    approval_ttl: u64,
    /// The longest an exec may run, in seconds (a request's timeout_s is capped at this).
    #[arg(long, value_name = "S", default_value_t = 600)]
    max_timeout: u64,
    /// Most bytes of each of stdout and stderr returned by an exec.
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 20)]
    max_output: usize,
    /// How long a request's body may take to arrive once its headers have, in seconds.
    #[arg(long, value_name = "S", default_value_t = 30)]
    body_timeout: u64,
    /// Remove a sandbox nothing has used for this long, in seconds.
    #[arg(long, value_name = "S", default_value_t = 3600)]
    idle_timeout: u64,
    #[command(subcommand)]
    command: Option<ServeCommand>,
}

#[derive(Debug, Subcommand)]
enum ServeCommand {
    /// Manage the bearer tokens agents and operators use.
    #[command(subcommand)]
    Token(TokenCommand),
}

#[derive(Debug, Subcommand)]
enum TokenCommand {
    /// Make a token for NAME and print it (once; only its hash is stored).
    Add {
        name: String,
        #[arg(long, value_parser = ["agent", "operator"])]
        role: String,
    },
    /// List the tokens' names and roles.
    List,
    /// Revoke NAME's token.
    Remove { name: String },
}

pub fn run(args: ServeArgs, dirs: &Dirs) -> Result<i32, Error> {
    match args.command {
        Some(ServeCommand::Token(TokenCommand::Add { name, role })) => {
            let t = pinfold_server::add_token(dirs, &name, &role).map_err(|e| Error::new(format!("cannot add the token: {e}")))?;
            println!("{t}");
            say!("pinfold: token for `{name}` ({role}); it is shown only now");
            Ok(exit::OK)
        }
        Some(ServeCommand::Token(TokenCommand::List)) => {
            for (name, role, _) in pinfold_server::list_tokens(dirs).map_err(Error::new)? {
                println!("{name}\t{role}");
            }
            Ok(exit::OK)
        }
        Some(ServeCommand::Token(TokenCommand::Remove { name })) => {
            if pinfold_server::remove_token(dirs, &name).map_err(Error::new)? {
                Ok(exit::OK)
            } else {
                Err(Error::new(format!("no token named `{name}`")))
            }
        }
        None => {
            let workspaces = match args.workspaces {
                Some(w) => std::path::absolute(&w).map_err(|e| Error::new("bad --workspaces").cause(e))?,
                None => {
                    let data = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()).map(PathBuf::from).filter(|p| p.is_absolute());
                    let data = data.or_else(|| dirs.home.as_ref().map(|h| h.join(".local/share")));
                    data.ok_or_else(|| Error::new("no place for fresh workspaces").hint("set HOME, or pass --workspaces DIR"))?.join("pinfold/workspaces")
                }
            };
            let mut roots = Vec::new();
            for r in &args.workspace_roots {
                roots.push(std::fs::canonicalize(r).map_err(|e| Error::new(format!("--workspace-root {}", r.display())).cause(e))?);
            }
            let mut opts = pinfold_server::Options::new(args.listen, workspaces);
            opts.workspace_roots = roots;
            opts.allow_hosts = args.allow_hosts.iter().map(|h| h.to_ascii_lowercase()).collect();
            opts.rate = args.rate;
            opts.approval_ttl_s = args.approval_ttl.max(1);
            opts.max_timeout_s = args.max_timeout.max(1);
            opts.default_timeout_s = opts.default_timeout_s.min(opts.max_timeout_s);
            opts.output_cap = args.max_output;
            opts.sandbox_idle_s = args.idle_timeout.max(1);
            opts.body_timeout_s = args.body_timeout.max(1);
            pinfold_server::serve(opts, dirs.clone()).map_err(|e| Error::new(format!("pinfold serve: {e}")))?;
            Ok(exit::OK)
        }
    }
}

#[derive(Debug, Args)]
pub struct ApprovalsArgs {
    #[command(subcommand)]
    command: ApprovalsCommand,
}

#[derive(Debug, Subcommand)]
enum ApprovalsCommand {
    /// List approvals (pending ones unless --status says otherwise).
    List {
        #[arg(long, default_value = "pending", value_parser = ["pending", "approved", "denied", "expired", "consumed", "all"])]
        status: String,
        /// Print the server's JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show one approval: the exact action, who asked, and the result.
    Show { id: String },
    /// Approve ID: the action runs once, in its sandbox.
    Approve {
        id: String,
        #[arg(long)]
        reason: Option<String>,
    },
    /// Deny ID.
    Deny {
        id: String,
        #[arg(long)]
        reason: Option<String>,
    },
}

fn client() -> Result<Client, Error> {
    let server = std::env::var("PINFOLD_SERVER").unwrap_or_else(|_| "http://127.0.0.1:7878".into());
    let token = std::env::var("PINFOLD_TOKEN").map_err(|_| Error::new("PINFOLD_TOKEN is not set").hint("an operator token from `pinfold serve token add NAME --role operator`"))?;
    Client::new(&server, &token).map_err(Error::new)
}

fn call(c: &Client, method: &str, path: &str, body: Option<&Value>) -> Result<Value, Error> {
    let r = c.request(method, path, body, Duration::from_secs(30)).map_err(Error::new)?;
    let v = r.json().map_err(Error::new)?;
    if r.status >= 400 {
        let code = v["error"]["code"].as_str().unwrap_or("error");
        let msg = v["error"]["message"].as_str().unwrap_or("");
        return Err(Error::new(format!("the server refused ({} {code}): {msg}", r.status)));
    }
    Ok(v)
}

fn line(a: &Value) -> String {
    format!(
        "{}\t{}\t{}\t{}\t{}",
        a["id"].as_str().unwrap_or(""),
        a["status"].as_str().unwrap_or(""),
        a["requested_by"].as_str().unwrap_or(""),
        a["sandbox"].as_str().unwrap_or(""),
        crate::shown(a["action"]["command"].as_str().unwrap_or(""))
    )
}

pub fn approvals(args: ApprovalsArgs) -> Result<i32, Error> {
    let c = client()?;
    match args.command {
        ApprovalsCommand::List { status, json } => {
            let path = if status == "all" { "/v1/approvals".to_string() } else { format!("/v1/approvals?status={status}") };
            let v = call(&c, "GET", &path, None)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&v).expect("JSON serialises"));
            } else {
                for a in v["approvals"].as_array().into_iter().flatten() {
                    println!("{}", line(a));
                }
            }
        }
        ApprovalsCommand::Show { id } => {
            let v = call(&c, "GET", &format!("/v1/approvals/{}", seg(&id)?), None)?;
            println!("{}", serde_json::to_string_pretty(&v).expect("JSON serialises"));
        }
        ApprovalsCommand::Approve { id, reason } => {
            let v = call(&c, "POST", &format!("/v1/approvals/{}/approve", seg(&id)?), Some(&json!({"reason": reason})))?;
            println!("{}", line(&v));
        }
        ApprovalsCommand::Deny { id, reason } => {
            let v = call(&c, "POST", &format!("/v1/approvals/{}/deny", seg(&id)?), Some(&json!({"reason": reason})))?;
            println!("{}", line(&v));
        }
    }
    Ok(exit::OK)
}

/// An id as one path segment.
fn seg(id: &str) -> Result<&str, Error> {
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        return Err(Error::new(format!("`{id}` is not an approval id")));
    }
    Ok(id)
}
