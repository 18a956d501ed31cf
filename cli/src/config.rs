//! Where the gateway, the key and the MCP servers come from: flags and `RUNAII_*` variables first, then
//! the config file (`$RUNAII_CONFIG`, or `$XDG_CONFIG_HOME/runaii/config.toml`, or
//! `~/.config/runaii/config.toml`), then what the quickstart leaves in a checkout: `.data/demo-api-key` and
//! `.data/demo-admin-token`, looked for in the current directory and its parents.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::args::Connection;
use crate::mcp::ServerSpec;
use crate::quoting::{self, QuoteError};

/// The quickstart's gateway (`scripts/run.sh`).
pub const DEFAULT_BASE_URL: &str = "http://127.0.0.1:8080";
const QUICKSTART_KEY: &str = ".data/demo-api-key";
const QUICKSTART_ADMIN_TOKEN: &str = ".data/demo-admin-token";

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path} is not a valid config file: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{what} {path} is empty")]
    EmptySecret { what: &'static str, path: PathBuf },
    #[error("--mcp {spec:?}: {source}")]
    McpQuoting { spec: String, source: QuoteError },
    #[error("[mcp.servers.{name}]: {source}")]
    ServerQuoting { name: String, source: QuoteError },
}

/// A credential: never printed, not even by `{:?}`.
#[derive(Clone)]
pub struct Secret(String);

impl Secret {
    #[must_use]
    pub fn new(value: &str) -> Option<Self> {
        let value = value.trim();
        (!value.is_empty()).then(|| Self(value.to_owned()))
    }

    #[must_use]
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(…)")
    }
}

/// The config file. Every field is optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub base_url: Option<String>,
    pub api_key: Option<String>,
    pub api_key_file: Option<PathBuf>,
    pub admin_token: Option<String>,
    pub admin_token_file: Option<PathBuf>,
    #[serde(default)]
    pub mcp: McpSection,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpSection {
    #[serde(default)]
    pub servers: BTreeMap<String, ServerConfig>,
}

/// `[mcp.servers.NAME]`: `command` and `args`, or `command` alone split with shell quoting.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub cwd: Option<PathBuf>,
}

/// Everything a command needs to reach the gateway, resolved.
#[derive(Debug)]
pub struct Resolved {
    pub base_url: String,
    pub api_key: Option<Secret>,
    pub admin_token: Option<Secret>,
    /// The config file's MCP servers, in name order.
    pub mcp_servers: Vec<ServerSpec>,
}

/// # Errors
/// An explicitly named config file that is missing, a file that does not parse, an unreadable key file.
pub fn resolve(flags: &Connection) -> Result<Resolved, ConfigError> {
    let file = load(flags.config.as_deref())?;
    let base_url = flags.base_url.clone().or(file.base_url).unwrap_or_else(|| DEFAULT_BASE_URL.to_owned());
    let api_key = secret(flags.api_key.as_deref(), file.api_key.as_deref(), file.api_key_file.as_deref(), QUICKSTART_KEY, "api_key_file")?;
    let admin_token = secret(
        flags.admin_token.as_deref(),
        file.admin_token.as_deref(),
        file.admin_token_file.as_deref(),
        QUICKSTART_ADMIN_TOKEN,
        "admin_token_file",
    )?;
    let mcp_servers = file.mcp.servers.into_iter().map(|(name, server)| server_spec(name, server)).collect::<Result<_, _>>()?;
    Ok(Resolved { base_url: normalize_base(&base_url), api_key, admin_token, mcp_servers })
}

/// `--mcp 'command args'` as a server named after its position and program.
///
/// # Errors
/// Bad quoting.
pub fn flag_server(position: usize, spec: &str) -> Result<ServerSpec, ConfigError> {
    let mut words = quoting::split(spec).map_err(|source| ConfigError::McpQuoting { spec: spec.to_owned(), source })?;
    let program = words.remove(0);
    let name =
        format!("--mcp #{position} ({})", Path::new(&program).file_name().map_or(program.clone(), |n| n.to_string_lossy().into_owned()));
    Ok(ServerSpec { name, program, args: words, env: Vec::new(), cwd: None })
}

fn server_spec(name: String, server: ServerConfig) -> Result<ServerSpec, ConfigError> {
    let (program, args) = if server.args.is_empty() {
        let mut words = quoting::split(&server.command).map_err(|source| ConfigError::ServerQuoting { name: name.clone(), source })?;
        let program = words.remove(0);
        (program, words)
    } else {
        (server.command, server.args)
    };
    Ok(ServerSpec { name, program, args, env: server.env.into_iter().collect(), cwd: server.cwd })
}

fn load(explicit: Option<&Path>) -> Result<FileConfig, ConfigError> {
    let (path, required) = match explicit {
        Some(path) => (path.to_owned(), true),
        None => match default_path() {
            Some(path) => (path, false),
            None => return Ok(FileConfig::default()),
        },
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => return Ok(FileConfig::default()),
        Err(source) => return Err(ConfigError::Read { path, source }),
    };
    toml::from_str(&text).map_err(|e| ConfigError::Parse { path, message: e.to_string() })
}

fn default_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".config")))?;
    Some(base.join("runaii").join("config.toml"))
}

/// The first of: the flag (or its variable), the config's value, the config's file, the quickstart's file.
fn secret(
    flag: Option<&str>,
    value: Option<&str>,
    file: Option<&Path>,
    quickstart: &str,
    what: &'static str,
) -> Result<Option<Secret>, ConfigError> {
    if let Some(s) = flag.or(value).and_then(Secret::new) {
        return Ok(Some(s));
    }
    if let Some(path) = file {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_owned(), source })?;
        return Secret::new(&text).map(Some).ok_or_else(|| ConfigError::EmptySecret { what, path: path.to_owned() });
    }
    Ok(find_upwards(quickstart).and_then(|path| std::fs::read_to_string(path).ok()).and_then(|text| Secret::new(&text)))
}

/// `relative` in the current directory or the nearest parent that has it.
fn find_upwards(relative: &str) -> Option<PathBuf> {
    let start = std::env::current_dir().ok()?;
    start.ancestors().map(|dir| dir.join(relative)).find(|path| path.is_file())
}

/// `http://host:8080/`, `http://host:8080/v1` and `http://host:8080` name the same gateway.
#[must_use]
pub fn normalize_base(url: &str) -> String {
    let trimmed = url.trim().trim_end_matches('/');
    trimmed.strip_suffix("/v1").unwrap_or(trimmed).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_with_or_without_v1_are_the_same_gateway() {
        for url in ["http://127.0.0.1:8080", "http://127.0.0.1:8080/", "http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1/"] {
            assert_eq!(normalize_base(url), "http://127.0.0.1:8080", "{url}");
        }
    }

    #[test]
    fn the_config_file_names_servers_either_way() {
        let config: FileConfig = toml::from_str(
            r#"
            base_url = "https://api.example.com/v1"
            api_key = "rk-abc-def"
            [mcp.servers.weather]
            command = "python3 'my dir/weather.py'"
            [mcp.servers.fs]
            command = "npx"
            args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
            env = { DEBUG = "1" }
            "#,
        )
        .unwrap();
        let specs: Vec<ServerSpec> = config.mcp.servers.into_iter().map(|(n, s)| server_spec(n, s)).collect::<Result<_, _>>().unwrap();
        assert_eq!((specs[0].name.as_str(), specs[0].program.as_str(), specs[0].args.len()), ("fs", "npx", 3));
        assert_eq!(specs[0].env, [("DEBUG".to_owned(), "1".to_owned())]);
        assert_eq!((specs[1].program.as_str(), specs[1].args.as_slice()), ("python3", &["my dir/weather.py".to_owned()][..]));
        assert!(toml::from_str::<FileConfig>("api_kee = 'x'").is_err(), "a misspelt field is an error, not ignored");
    }

    #[test]
    fn flag_servers_are_named_by_position_and_program() {
        let spec = flag_server(2, "/usr/bin/python3 -u s.py").unwrap();
        assert_eq!(spec.name, "--mcp #2 (python3)");
        assert!(matches!(flag_server(1, "python3 'oops"), Err(ConfigError::McpQuoting { .. })));
    }

    #[test]
    fn secrets_never_print() {
        let s = Secret::new(" rk-abc \n").unwrap();
        assert_eq!(s.expose(), "rk-abc");
        assert!(!format!("{s:?}").contains("abc"));
        assert!(Secret::new("  ").is_none());
    }
}
