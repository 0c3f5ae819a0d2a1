//! The server's state in SQLite (`STATE/serve/server.db`): tokens (hashed), the sandbox
//! registry, approvals and idempotent responses. Migrations are numbered SQL steps applied in
//! order; `PRAGMA user_version` says how many have run, so a newer server upgrades an older
//! database in place and an older server refuses a newer one.

use std::path::Path;

use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;

/// Each step runs once, in order, inside one transaction with the version bump.
const MIGRATIONS: &[&str] = &[
    // 1: tokens, sandboxes, approvals.
    "CREATE TABLE tokens (
        name TEXT PRIMARY KEY,
        role TEXT NOT NULL CHECK (role IN ('agent', 'operator')),
        hash TEXT NOT NULL UNIQUE,
        created_at INTEGER NOT NULL
    );
    CREATE TABLE sandboxes (
        id TEXT PRIMARY KEY,
        workspace TEXT NOT NULL,
        preset TEXT,
        owner TEXT NOT NULL,
        fresh INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        idle_s INTEGER NOT NULL,
        last_used INTEGER NOT NULL
    );
    CREATE TABLE approvals (
        id TEXT PRIMARY KEY,
        sandbox TEXT NOT NULL,
        action TEXT NOT NULL,
        action_hash TEXT NOT NULL,
        reason TEXT NOT NULL,
        requested_by TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired', 'consumed')),
        decided_by TEXT,
        decision_reason TEXT,
        result TEXT,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        decided_at INTEGER
    );
    CREATE INDEX approvals_status ON approvals (status);",
    // 2: responses kept for Idempotency-Key.
    "CREATE TABLE idempotency (
        actor TEXT NOT NULL,
        key TEXT NOT NULL,
        request_hash TEXT NOT NULL,
        status INTEGER NOT NULL,
        body TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (actor, key)
    );",
    // 3: dashboard sessions (the hash of the cookie's value).
    "CREATE TABLE sessions (
        hash TEXT PRIMARY KEY,
        name TEXT NOT NULL REFERENCES tokens (name) ON DELETE CASCADE,
        expires_at INTEGER NOT NULL
    );",
    // 4: the workspace's identity (device, inode) when the sandbox was made: a directory put
    // at its path later (a link to elsewhere) is not the sandbox's workspace.
    "ALTER TABLE sandboxes ADD COLUMN dev INTEGER;
    ALTER TABLE sandboxes ADD COLUMN ino INTEGER;",
    // 5: the backend asked for when the sandbox was made (null: the preset's).
    "ALTER TABLE sandboxes ADD COLUMN backend TEXT;",
];

pub fn open(path: &Path) -> Result<Connection, String> {
    let mut c = Connection::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    c.busy_timeout(std::time::Duration::from_secs(5)).map_err(|e| e.to_string())?;
    c.pragma_update(None, "journal_mode", "WAL").map_err(|e| e.to_string())?;
    c.pragma_update(None, "synchronous", "NORMAL").map_err(|e| e.to_string())?;
    c.pragma_update(None, "foreign_keys", "ON").map_err(|e| e.to_string())?;
    migrate(&mut c).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(c)
}

fn migrate(c: &mut Connection) -> Result<(), String> {
    let have: i64 = c.pragma_query_value(None, "user_version", |r| r.get(0)).map_err(|e| e.to_string())?;
    let want = MIGRATIONS.len() as i64;
    if have > want {
        return Err(format!("the database is at schema version {have}, newer than this pinfold knows ({want}); run a newer pinfold"));
    }
    for (i, step) in MIGRATIONS.iter().enumerate().skip(have as usize) {
        let tx = c.transaction().map_err(|e| e.to_string())?;
        tx.execute_batch(step).map_err(|e| format!("migration {}: {e}", i + 1))?;
        tx.pragma_update(None, "user_version", (i + 1) as i64).map_err(|e| e.to_string())?;
        tx.commit().map_err(|e| e.to_string())?;
    }
    Ok(())
}

pub fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

// --- tokens ---

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Agent,
    Operator,
}

impl Role {
    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "agent" => Some(Role::Agent),
            "operator" => Some(Role::Operator),
            _ => None,
        }
    }
    pub fn as_str(&self) -> &'static str {
        match self {
            Role::Agent => "agent",
            Role::Operator => "operator",
        }
    }
}

/// Who made a request: a token's name and role.
#[derive(Debug, Clone)]
pub struct Actor {
    pub name: String,
    pub role: Role,
}

pub fn add_token(c: &Connection, name: &str, role: &Role, hash: &str) -> Result<(), String> {
    // Names are compared without case everywhere (who asked, who decides): `OP` and `op` are
    // one name.
    let taken: Option<String> = c
        .query_row("SELECT name FROM tokens WHERE lower(name) = lower(?1)", params![name], |r| r.get(0))
        .optional()
        .map_err(|e| e.to_string())?;
    if let Some(t) = taken {
        return Err(format!("a token named `{t}` exists; remove it first (`pinfold serve token remove {t}`)"));
    }
    c.execute("INSERT INTO tokens (name, role, hash, created_at) VALUES (?1, ?2, ?3, ?4)", params![name, role.as_str(), hash, now()])
        .map_err(|e| match e {
            rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::ConstraintViolation => {
                format!("a token named `{name}` exists; remove it first (`pinfold serve token remove {name}`)")
            }
            e => e.to_string(),
        })?;
    Ok(())
}

pub fn remove_token(c: &Connection, name: &str) -> Result<bool, rusqlite::Error> {
    Ok(c.execute("DELETE FROM tokens WHERE name = ?1", params![name])? > 0)
}

pub fn list_tokens(c: &Connection) -> Result<Vec<(String, String, i64)>, rusqlite::Error> {
    let mut s = c.prepare("SELECT name, role, created_at FROM tokens ORDER BY name")?;
    let rows = s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    rows.collect()
}

pub fn actor_by_hash(c: &Connection, hash: &str) -> Result<Option<Actor>, rusqlite::Error> {
    c.query_row("SELECT name, role FROM tokens WHERE hash = ?1", params![hash], |r| {
        let role: String = r.get(1)?;
        Ok(Actor { name: r.get(0)?, role: Role::parse(&role).unwrap_or(Role::Agent) })
    })
    .optional()
}

// --- dashboard sessions ---

pub fn add_session(c: &Connection, hash: &str, name: &str, expires_at: i64) -> Result<(), rusqlite::Error> {
    c.execute("DELETE FROM sessions WHERE expires_at <= ?1", params![now()])?;
    c.execute("INSERT INTO sessions (hash, name, expires_at) VALUES (?1, ?2, ?3)", params![hash, name, expires_at])?;
    Ok(())
}

pub fn remove_session(c: &Connection, hash: &str) -> Result<(), rusqlite::Error> {
    c.execute("DELETE FROM sessions WHERE hash = ?1", params![hash])?;
    Ok(())
}

/// The token behind a live session: removing the token ends its sessions.
pub fn session_actor(c: &Connection, hash: &str, now: i64) -> Result<Option<Actor>, rusqlite::Error> {
    c.query_row(
        "SELECT t.name, t.role FROM sessions s JOIN tokens t ON t.name = s.name WHERE s.hash = ?1 AND s.expires_at > ?2",
        params![hash, now],
        |r| {
            let role: String = r.get(1)?;
            Ok(Actor { name: r.get(0)?, role: Role::parse(&role).unwrap_or(Role::Agent) })
        },
    )
    .optional()
}

// --- sandboxes ---

#[derive(Debug, Clone, Serialize)]
pub struct Sandbox {
    pub id: String,
    pub workspace: String,
    pub preset: Option<String>,
    pub owner: String,
    #[serde(skip)]
    pub fresh: bool,
    pub created_at: i64,
    pub expires_at: i64,
    pub idle_s: i64,
    pub last_used: i64,
    #[serde(skip)]
    pub dev: Option<i64>,
    #[serde(skip)]
    pub ino: Option<i64>,
    pub backend: Option<String>,
}

fn sandbox_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Sandbox> {
    Ok(Sandbox {
        id: r.get(0)?,
        workspace: r.get(1)?,
        preset: r.get(2)?,
        owner: r.get(3)?,
        fresh: r.get::<_, i64>(4)? != 0,
        created_at: r.get(5)?,
        expires_at: r.get(6)?,
        idle_s: r.get(7)?,
        last_used: r.get(8)?,
        dev: r.get(9)?,
        ino: r.get(10)?,
        backend: r.get(11)?,
    })
}

const SANDBOX_COLS: &str = "id, workspace, preset, owner, fresh, created_at, expires_at, idle_s, last_used, dev, ino, backend";

pub fn insert_sandbox(c: &Connection, s: &Sandbox) -> Result<(), rusqlite::Error> {
    c.execute(
        &format!("INSERT INTO sandboxes ({SANDBOX_COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"),
        params![s.id, s.workspace, s.preset, s.owner, s.fresh as i64, s.created_at, s.expires_at, s.idle_s, s.last_used, s.dev, s.ino, s.backend],
    )?;
    Ok(())
}

pub fn sandbox(c: &Connection, id: &str) -> Result<Option<Sandbox>, rusqlite::Error> {
    c.query_row(&format!("SELECT {SANDBOX_COLS} FROM sandboxes WHERE id = ?1"), params![id], sandbox_row).optional()
}

pub fn sandboxes(c: &Connection, owner: Option<&str>) -> Result<Vec<Sandbox>, rusqlite::Error> {
    let mut s = c.prepare(&format!("SELECT {SANDBOX_COLS} FROM sandboxes WHERE ?1 IS NULL OR owner = ?1 ORDER BY created_at, id"))?;
    let rows = s.query_map(params![owner], sandbox_row)?;
    rows.collect()
}

pub fn touch_sandbox(c: &Connection, id: &str) -> Result<(), rusqlite::Error> {
    c.execute("UPDATE sandboxes SET last_used = ?2 WHERE id = ?1", params![id, now()])?;
    Ok(())
}

pub fn delete_sandbox(c: &Connection, id: &str) -> Result<bool, rusqlite::Error> {
    Ok(c.execute("DELETE FROM sandboxes WHERE id = ?1", params![id])? > 0)
}

/// Sandboxes past their TTL or idle longer than their idle limit.
pub fn stale_sandboxes(c: &Connection, now: i64) -> Result<Vec<Sandbox>, rusqlite::Error> {
    let mut s = c.prepare(&format!("SELECT {SANDBOX_COLS} FROM sandboxes WHERE expires_at <= ?1 OR last_used + idle_s <= ?1"))?;
    let rows = s.query_map(params![now], sandbox_row)?;
    rows.collect()
}

// --- approvals ---

#[derive(Debug, Clone, Serialize)]
pub struct Approval {
    pub id: String,
    pub sandbox: String,
    pub status: String,
    pub action: serde_json::Value,
    pub action_hash: String,
    /// Why the policy asks.
    pub reason: String,
    pub requested_by: String,
    pub decided_by: Option<String>,
    pub decision_reason: Option<String>,
    pub result: Option<serde_json::Value>,
    pub created_at: i64,
    pub expires_at: i64,
    pub decided_at: Option<i64>,
}

const APPROVAL_COLS: &str = "id, sandbox, status, action, action_hash, reason, requested_by, decided_by, decision_reason, result, created_at, expires_at, decided_at";

fn approval_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Approval> {
    let action: String = r.get(3)?;
    let result: Option<String> = r.get(9)?;
    Ok(Approval {
        id: r.get(0)?,
        sandbox: r.get(1)?,
        status: r.get(2)?,
        action: serde_json::from_str(&action).unwrap_or(serde_json::Value::Null),
        action_hash: r.get(4)?,
        reason: r.get(5)?,
        requested_by: r.get(6)?,
        decided_by: r.get(7)?,
        decision_reason: r.get(8)?,
        result: result.and_then(|s| serde_json::from_str(&s).ok()),
        created_at: r.get(10)?,
        expires_at: r.get(11)?,
        decided_at: r.get(12)?,
    })
}

pub fn insert_approval(c: &Connection, a: &Approval) -> Result<(), rusqlite::Error> {
    c.execute(
        &format!("INSERT INTO approvals ({APPROVAL_COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"),
        params![
            a.id,
            a.sandbox,
            a.status,
            a.action.to_string(),
            a.action_hash,
            a.reason,
            a.requested_by,
            a.decided_by,
            a.decision_reason,
            a.result.as_ref().map(|v| v.to_string()),
            a.created_at,
            a.expires_at,
            a.decided_at
        ],
    )?;
    Ok(())
}

pub fn approval(c: &Connection, id: &str) -> Result<Option<Approval>, rusqlite::Error> {
    c.query_row(&format!("SELECT {APPROVAL_COLS} FROM approvals WHERE id = ?1"), params![id], approval_row).optional()
}

pub fn approvals(c: &Connection, status: Option<&str>, requested_by: Option<&str>, limit: i64) -> Result<Vec<Approval>, rusqlite::Error> {
    let mut s = c.prepare(&format!(
        "SELECT {APPROVAL_COLS} FROM approvals WHERE (?1 IS NULL OR status = ?1) AND (?2 IS NULL OR requested_by = ?2) ORDER BY created_at DESC, id LIMIT ?3"
    ))?;
    let rows = s.query_map(params![status, requested_by, limit], approval_row)?;
    rows.collect()
}

/// Move an approval from `from` to `to`, recording who decided and why; false when it was not
/// in `from` (someone else decided first).
pub fn decide(c: &Connection, id: &str, from: &str, to: &str, by: Option<&str>, reason: Option<&str>) -> Result<bool, rusqlite::Error> {
    let n = c.execute(
        "UPDATE approvals SET status = ?3, decided_by = COALESCE(?4, decided_by), decision_reason = COALESCE(?5, decision_reason), decided_at = COALESCE(decided_at, ?6) WHERE id = ?1 AND status = ?2",
        params![id, from, to, by, reason, now()],
    )?;
    Ok(n > 0)
}

pub fn set_result(c: &Connection, id: &str, result: &serde_json::Value) -> Result<(), rusqlite::Error> {
    c.execute("UPDATE approvals SET status = 'consumed', result = ?2 WHERE id = ?1 AND status = 'approved'", params![id, result.to_string()])?;
    Ok(())
}

/// Pending approvals whose time is up.
pub fn expired_pending(c: &Connection, now: i64) -> Result<Vec<String>, rusqlite::Error> {
    let mut s = c.prepare("SELECT id FROM approvals WHERE status = 'pending' AND expires_at <= ?1")?;
    let rows = s.query_map(params![now], |r| r.get(0))?;
    rows.collect()
}

// --- idempotency ---

/// Reserve (actor, key) for a request hashing to `request_hash` (status 0: running). `None`:
/// reserved, go on; `Some((hash, status, body))`: the key was there first (status 0 while its
/// request runs).
pub fn reserve_idempotent(c: &Connection, actor: &str, key: &str, request_hash: &str) -> Result<Option<(String, u16, String)>, rusqlite::Error> {
    let n = c.execute(
        "INSERT OR IGNORE INTO idempotency (actor, key, request_hash, status, body, created_at) VALUES (?1, ?2, ?3, 0, '', ?4)",
        params![actor, key, request_hash, now()],
    )?;
    if n == 1 {
        return Ok(None);
    }
    c.query_row("SELECT request_hash, status, body FROM idempotency WHERE actor = ?1 AND key = ?2", params![actor, key], |r| {
        Ok((r.get(0)?, r.get::<_, i64>(1)? as u16, r.get(2)?))
    })
    .optional()
}

pub fn forget_running_idempotent(c: &Connection) -> Result<(), rusqlite::Error> {
    c.execute("DELETE FROM idempotency WHERE status = 0", [])?;
    Ok(())
}

pub fn forget_idempotent(c: &Connection, actor: &str, key: &str) -> Result<(), rusqlite::Error> {
    c.execute("DELETE FROM idempotency WHERE actor = ?1 AND key = ?2 AND status = 0", params![actor, key])?;
    Ok(())
}

pub fn keep_idempotent(c: &Connection, actor: &str, key: &str, request_hash: &str, status: u16, body: &str) -> Result<(), rusqlite::Error> {
    c.execute(
        "INSERT OR REPLACE INTO idempotency (actor, key, request_hash, status, body, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![actor, key, request_hash, status as i64, body, now()],
    )?;
    // A day's worth is kept.
    c.execute("DELETE FROM idempotency WHERE created_at < ?1", params![now() - 86_400])?;
    Ok(())
}
