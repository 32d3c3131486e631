//! What a plugin may touch and how much it may use: nothing unless granted.
//!
//! A [`Policy`] is plain data (serde): the configuration file format and the
//! CLI flags (`--allow-path`, `--allow-host`, `--config`, `--timeout`,
//! `--memory-limit`) both produce one. Invalid values are errors when the
//! policy is read, never a silent "no limit".

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::PolicyError;

/// Everything a plugin is granted. The default grants nothing: no
/// directories, no network, no config, and the default [`Limits`].
///
/// The plugin never sees the host's environment variables; values reach it
/// only as `config` entries.
#[derive(Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
#[non_exhaustive]
pub struct Policy {
    /// Directories the plugin may see, each at a path of its own.
    pub allowed_paths: Vec<PathGrant>,
    /// Host names the plugin may send HTTP requests to: exact
    /// (`api.example.com`) or with wildcards (`*.example.com`), on any port,
    /// or on one port only (`127.0.0.1:8080`, `*.example.com:443`). Requests
    /// to any other host (or port) are refused by the host. A name reaches
    /// the public addresses it resolves to, and an internal one only if a
    /// pattern names that address too ([`address_allowed`]).
    pub allowed_hosts: Vec<String>,
    /// Key/value pairs the plugin reads through Extism's config mechanism.
    pub config: BTreeMap<String, String>,
    /// Bounds on every call.
    pub limits: Limits,
}

/// Config values may hold secrets: `Debug` shows their keys only.
impl fmt::Debug for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policy")
            .field("allowed_paths", &self.allowed_paths)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("config_keys", &self.config.keys().collect::<Vec<_>>())
            .field("limits", &self.limits)
            .finish()
    }
}

/// A directory of the host made visible to the plugin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PathGrant {
    /// The directory on the host.
    pub host: PathBuf,
    /// Where the plugin sees it (absolute); defaults to the host path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest: Option<PathBuf>,
    /// Read-only (the default) or read-write.
    #[serde(default)]
    pub access: Access,
}

impl PathGrant {
    /// Where the plugin sees the directory.
    pub fn guest_path(&self) -> &Path {
        self.guest.as_deref().unwrap_or(&self.host)
    }

    /// Check that the grant can be honoured: the host directory exists and
    /// the guest path is absolute.
    pub fn check(&self) -> Result<(), PolicyError> {
        let invalid = |reason: String| PolicyError::Path { grant: self.to_string(), reason };
        match std::fs::metadata(&self.host) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => return Err(invalid("the host path is not a directory".to_owned())),
            Err(e) => return Err(invalid(format!("the host directory cannot be opened ({e})"))),
        }
        if !self.guest_path().is_absolute() {
            return Err(invalid("the guest path must be absolute".to_owned()));
        }
        if self.guest_path().to_str().is_none() || self.host.to_str().is_none() {
            return Err(invalid("paths must be UTF-8".to_owned()));
        }
        Ok(())
    }
}

impl fmt::Display for PathGrant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.host.display(), self.guest_path().display(), self.access)
    }
}

/// `HOST[:GUEST][:ro|rw]`, as the CLI's `--allow-path` takes it.
impl FromStr for PathGrant {
    type Err = PolicyError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = |reason: &str| PolicyError::Path { grant: text.to_owned(), reason: reason.to_owned() };
        let mut parts: Vec<&str> = text.split(':').collect();
        let access = match parts.last() {
            Some(&"ro") if parts.len() > 1 => {
                parts.pop();
                Access::ReadOnly
            }
            Some(&"rw") if parts.len() > 1 => {
                parts.pop();
                Access::ReadWrite
            }
            _ => Access::default(),
        };
        let (host, guest) = match parts.as_slice() {
            [host] => (*host, None),
            [host, guest] => (*host, Some(PathBuf::from(guest))),
            _ => return Err(invalid("expected HOST[:GUEST][:ro|rw]")),
        };
        if host.is_empty() || guest.as_ref().is_some_and(|g| g.as_os_str().is_empty()) {
            return Err(invalid("expected HOST[:GUEST][:ro|rw] with non-empty paths"));
        }
        Ok(PathGrant { host: PathBuf::from(host), guest, access })
    }
}

/// How a granted directory may be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Access {
    /// Read files and list directories.
    #[default]
    #[serde(rename = "ro")]
    ReadOnly,
    /// Also create, write and delete.
    #[serde(rename = "rw")]
    ReadWrite,
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Access::ReadOnly => "ro",
            Access::ReadWrite => "rw",
        })
    }
}

/// Resource limits applied to every call of a plugin.
///
/// In files, durations are strings like `"500ms"` or `"30s"` and sizes like
/// `"64MiB"` or `"16MB"`; `null` means no limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
#[non_exhaustive]
pub struct Limits {
    /// Wall-clock time one call (or `describe`) may take. `None`: no limit.
    #[serde(with = "duration_text")]
    pub timeout: Option<Duration>,
    /// Most linear memory one instance may have, in bytes (rounded down to
    /// whole 64 KiB Wasm pages). `None`: no limit beyond the 4 GiB of wasm32.
    #[serde(rename = "memoryLimit", with = "size_text")]
    pub memory_max_bytes: Option<u64>,
    /// Largest request the host sends to `call`, in bytes.
    #[serde(rename = "maxInputSize", with = "size_text::required")]
    pub max_input_bytes: usize,
    /// Largest output the host accepts from a call, in bytes.
    #[serde(rename = "maxOutputSize", with = "size_text::required")]
    pub max_output_bytes: usize,
    /// Instruction budget per call (wasmtime fuel); `None`: no budget.
    /// Costs some speed when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fuel: Option<u64>,
}

impl Limits {
    /// With this time limit per call (`None`: none).
    pub fn with_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = timeout;
        self
    }

    /// With this memory cap per instance (`None`: none).
    pub fn with_memory_max_bytes(mut self, bytes: Option<u64>) -> Self {
        self.memory_max_bytes = bytes;
        self
    }

    /// With this output cap per call.
    pub fn with_max_output_bytes(mut self, bytes: usize) -> Self {
        self.max_output_bytes = bytes;
        self
    }

    /// With this fuel budget per call (`None`: none).
    pub fn with_fuel(mut self, fuel: Option<u64>) -> Self {
        self.fuel = fuel;
        self
    }

    /// The default time limit per call: 30 s.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
    /// The default memory cap per instance: 256 MiB.
    pub const DEFAULT_MEMORY_MAX_BYTES: u64 = 256 * 1024 * 1024;
    /// The default input and output size cap: 16 MiB.
    pub const DEFAULT_MAX_IO_BYTES: usize = 16 * 1024 * 1024;

    /// Check that the limits can be honoured.
    pub fn check(&self) -> Result<(), PolicyError> {
        if self.timeout.is_some_and(|t| t.is_zero()) {
            return Err(PolicyError::Limit("the timeout must be longer than zero".to_owned()));
        }
        if self.memory_max_bytes.is_some_and(|b| b < WASM_PAGE_BYTES) {
            return Err(PolicyError::Limit(format!(
                "the memory limit must be at least one Wasm page ({WASM_PAGE_BYTES} bytes)"
            )));
        }
        if self.max_output_bytes == 0 || self.max_input_bytes == 0 {
            return Err(PolicyError::Limit("input and output size limits must be above zero".to_owned()));
        }
        if self.fuel == Some(0) {
            return Err(PolicyError::Limit("a fuel budget must be above zero".to_owned()));
        }
        Ok(())
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Some(Self::DEFAULT_TIMEOUT),
            memory_max_bytes: Some(Self::DEFAULT_MEMORY_MAX_BYTES),
            max_input_bytes: Self::DEFAULT_MAX_IO_BYTES,
            max_output_bytes: Self::DEFAULT_MAX_IO_BYTES,
            fuel: None,
        }
    }
}

/// Headers that neither a plugin nor a tenant may set on a request the host
/// makes for it: the transport's own (the connection, its framing,
/// upgrades, a proxy's) and `Host`, which would send the request to a
/// virtual host other than the URL's, past the grant that checked the URL.
/// The same list wasmtime's `wasi:http` refuses for components
/// (`DEFAULT_FORBIDDEN_HEADERS`), so the SDK's portable HTTP behaves alike
/// in both flavours.
pub const TRANSPORT_HEADERS: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "host",
    "http2-settings",
];

/// The header of [`TRANSPORT_HEADERS`] `name` is (in any case, spaces
/// around it ignored), if it is one: as the list names it.
pub fn transport_header(name: &str) -> Option<&'static str> {
    TRANSPORT_HEADERS.into_iter().find(|header| name.trim().eq_ignore_ascii_case(header))
}

/// Bytes in a Wasm page.
pub(crate) const WASM_PAGE_BYTES: u64 = 64 * 1024;

impl Policy {
    /// Grant a directory too.
    pub fn allow_path(mut self, grant: PathGrant) -> Self {
        self.allowed_paths.push(grant);
        self
    }

    /// Allow HTTP requests to hosts matching `pattern` too (see
    /// [`allowed_hosts`](Self::allowed_hosts)).
    pub fn allow_host(mut self, pattern: impl Into<String>) -> Self {
        self.allowed_hosts.push(pattern.into());
        self
    }

    /// Set a config value the plugin can read.
    pub fn with_config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.config.insert(key.into(), value.into());
        self
    }

    /// With these limits.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Check every grant and limit.
    pub fn check(&self) -> Result<(), PolicyError> {
        for grant in &self.allowed_paths {
            grant.check()?;
        }
        for pattern in &self.allowed_hosts {
            check_host_pattern(pattern)?;
        }
        self.limits.check()
    }
}

/// A host pattern: a host name, optionally with `*` wildcards
/// (`*.example.com`), optionally with a port (`127.0.0.1:8080`,
/// `*.example.com:443`, `[::1]:8080`); no scheme or path. A pattern without
/// a port matches every port of the hosts it names.
pub fn check_host_pattern(pattern: &str) -> Result<(), PolicyError> {
    let invalid = |reason: &str| PolicyError::Host { pattern: pattern.to_owned(), reason: reason.to_owned() };
    if pattern.is_empty() {
        return Err(invalid("it is empty"));
    }
    if pattern.contains("://") || pattern.contains('/') {
        return Err(invalid("give a host name (like api.example.com), not a URL"));
    }
    let (host, port) = split_host_port(pattern);
    if host.is_empty() {
        return Err(invalid("the host name is empty"));
    }
    if !host.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '*' | '_' | '[' | ']' | ':')) {
        return Err(invalid("a host name has only letters, digits, `.`, `-` and `*` wildcards"));
    }
    if let Some(port) = port
        && !(port.bytes().all(|b| b.is_ascii_digit()) && port.parse::<u16>().is_ok_and(|p| p > 0))
    {
        return Err(invalid("a port is a number from 1 to 65535 (`host:8080`)"));
    }
    Ok(())
}

/// A host pattern's host part and, if it names one, its port: `host:port`,
/// `[v6]:port`; an IPv6 address without brackets (`::1`) has no port.
pub(crate) fn split_host_port(pattern: &str) -> (&str, Option<&str>) {
    if pattern.starts_with('[') {
        return match pattern.find(']') {
            Some(end) => match pattern[end + 1..].strip_prefix(':') {
                Some(port) => (&pattern[..=end], Some(port)),
                None => (pattern, None),
            },
            None => (pattern, None),
        };
    }
    match pattern.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => (host, Some(port)),
        _ => (pattern, None),
    }
}

/// Does `host` on `port` match a grant pattern? The host part matches with
/// `*` as any run of characters, case-insensitively, as host names compare;
/// a pattern with a port (`127.0.0.1:8080`, `*.example.com:443`,
/// `[::1]:8080`) matches that port only, one without matches any port.
pub fn host_matches(patterns: &[String], host: &str, port: Option<u16>) -> bool {
    let host = host.to_ascii_lowercase();
    patterns.iter().any(|pattern| grant_admits(pattern, port, false, |host_pattern| wildcard(host_pattern, &host)))
}

/// Does `pattern` admit a connection to `port` (a port not known is
/// admitted by a pattern with a port only if `unknown_admitted`), and does
/// `names` accept its host part (lowercased)?
fn grant_admits(pattern: &str, port: Option<u16>, unknown_admitted: bool, names: impl Fn(&str) -> bool) -> bool {
    let (host_pattern, port_pattern) = split_host_port(pattern);
    let port_matches = match (port_pattern, port) {
        (None, _) => true,
        (Some(wanted), Some(port)) => wanted.parse::<u16>() == Ok(port),
        (Some(_), None) => unknown_admitted,
    };
    port_matches && names(&host_pattern.to_ascii_lowercase())
}

/// May a connection go to `ip` on `port`, for a request whose host name a
/// grant in `patterns` matched? A public address may: a grant of a name
/// reaches what that name resolves to on the internet. Any other address
/// (loopback, private networks, link-local, carrier-grade NAT, multicast,
/// reserved and documentation ranges; see [`is_public`]) only if a grant
/// names it too: by its text (`127.0.0.1`, `10.0.*`, `[::1]`, `*`), and
/// `localhost` names the loopback addresses. A port in the grant must be
/// the connection's; `port` is `None` where the resolver is not told the
/// port (the name's own grant has checked it).
///
/// This is what keeps a name's owner from turning a grant of the name
/// into a way in (DNS rebinding): a plugin granted `api.vendor.example`,
/// whose vendor points that name at `127.0.0.1` or `169.254.169.254`,
/// still reaches only public addresses through it.
pub fn address_allowed(patterns: &[String], ip: IpAddr, port: Option<u16>) -> bool {
    is_public(ip) || address_granted(patterns, ip, port)
}

/// Does a grant name `ip` (on `port`) itself? See [`address_allowed`].
fn address_granted(patterns: &[String], ip: IpAddr, port: Option<u16>) -> bool {
    let ip = ip.to_canonical();
    // As a URL writes it (`[::1]`), and as a grant may (`::1`).
    let texts = match ip {
        IpAddr::V4(v4) => vec![v4.to_string()],
        IpAddr::V6(v6) => vec![format!("[{v6}]"), v6.to_string()],
    };
    patterns.iter().any(|pattern| {
        grant_admits(pattern, port, true, |host| {
            texts.iter().any(|text| wildcard(host, text)) || (host == "localhost" && ip.is_loopback())
        })
    })
}

/// A host that resolved only to addresses no grant lets a connection
/// reach ([`address_allowed`]): what an HTTP client's resolver returns
/// then, and how the refusal reads.
#[derive(Debug)]
pub struct AddressRefused {
    /// The host name, as the URL has it.
    pub host: String,
    /// What it resolved to.
    pub addresses: Vec<IpAddr>,
}

impl fmt::Display for AddressRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let addresses: Vec<String> = self.addresses.iter().map(ToString::to_string).collect();
        let (which, it) = if addresses.len() == 1 {
            ("which is not a public address", "it")
        } else {
            ("none of them a public address", "them")
        };
        write!(
            f,
            "`{}` resolves to {} ({which}), and no allowed-host grant names {it} \
             (a grant of a name reaches public addresses only; grant an address itself, like `{}`, to reach it)",
            self.host,
            addresses.join(", "),
            addresses.first().map_or("", String::as_str),
        )
    }
}

impl std::error::Error for AddressRefused {}

/// Is `ip` an address of the public internet? Written out here because the
/// standard library's `IpAddr::is_global` is not stable: for IPv4, not
/// `0.0.0.0/8`, private (`10/8`, `172.16/12`, `192.168/16`), carrier-grade
/// NAT (`100.64/10`), loopback, link-local, `192.0.0/24`, documentation,
/// benchmarking (`198.18/15`), multicast, reserved (`240/4`) or broadcast;
/// for IPv6, inside global unicast (`2000::/3`) and not documentation
/// (`2001:db8::/32`, `3fff::/20`) or the IETF's special block
/// (`2001::/23`, Teredo among them). An IPv4 address written as IPv6
/// (mapped `::ffff:a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`) is
/// judged as the IPv4 address it carries.
pub fn is_public(ip: IpAddr) -> bool {
    match ip.to_canonical() {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => {
            let s = v6.segments();
            let embedded = |high: u16, low: u16| Ipv4Addr::from((u32::from(high) << 16) | u32::from(low));
            if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                return is_public_v4(embedded(s[6], s[7]));
            }
            if s[0] == 0x2002 {
                return is_public_v4(embedded(s[1], s[2]));
            }
            let global_unicast = s[0] & 0xe000 == 0x2000;
            let documentation = (s[0] == 0x2001 && s[1] == 0x0db8) || (s[0] == 0x3fff && s[1] < 0x1000);
            let ietf_special = s[0] == 0x2001 && s[1] < 0x0200;
            global_unicast && !documentation && !ietf_special
        }
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(a == 0
        || ip.is_private()
        || (a == 100 && (64..128).contains(&b))
        || ip.is_loopback()
        || ip.is_link_local()
        || (a == 192 && b == 0 && c == 0)
        || ip.is_documentation()
        || (a == 198 && (b == 18 || b == 19))
        || ip.is_multicast()
        || a >= 240)
}

/// `*` matches any run of characters. Greedy with one backtrack point (the
/// last `*`), so the time is at most pattern length × text length, whatever
/// the pattern (a host name is the plugin's to choose).
fn wildcard(pattern: &str, text: &str) -> bool {
    let (pattern, text): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && pattern[p] == '*' {
            star = Some((p, t));
            p += 1;
        } else if p < pattern.len() && pattern[p] == text[t] {
            p += 1;
            t += 1;
        } else if let Some((star_p, star_t)) = star {
            // Let the last `*` take one more character.
            p = star_p + 1;
            t = star_t + 1;
            star = Some((star_p, star_t + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == '*')
}

/// Parse a duration: `500ms`, `10s`, `2m`, `1h`, `1.5s`, `250us`.
pub fn parse_duration(text: &str) -> Result<Duration, PolicyError> {
    let error = || PolicyError::Duration(text.to_owned());
    let trimmed = text.trim();
    let split = trimmed.find(|c: char| !(c.is_ascii_digit() || c == '.')).ok_or_else(error)?;
    let (number, unit) = trimmed.split_at(split);
    let value: f64 = number.parse().map_err(|_| error())?;
    let seconds_per_unit = match unit.trim() {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" | "sec" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => return Err(error()),
    };
    Duration::try_from_secs_f64(value * seconds_per_unit).map_err(|_| error())
}

/// Parse a size in bytes: `65536`, `64KiB`, `16MB`, `1GiB` (`K`/`M`/`G` alone
/// are binary, as in `64M`).
pub fn parse_size(text: &str) -> Result<u64, PolicyError> {
    let error = || PolicyError::Size(text.to_owned());
    let trimmed = text.trim();
    let split = trimmed.find(|c: char| !c.is_ascii_digit()).unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let value: u64 = number.parse().map_err(|_| error())?;
    let multiplier: u64 = match unit.trim() {
        "" | "B" => 1,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "K" | "KiB" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        _ => return Err(error()),
    };
    value.checked_mul(multiplier).ok_or_else(error)
}

/// A size as text: the largest binary unit that divides it.
pub(crate) fn format_size(bytes: u64) -> String {
    for (unit, size) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if bytes >= size && bytes.is_multiple_of(size) {
            return format!("{}{unit}", bytes / size);
        }
    }
    bytes.to_string()
}

fn format_duration(duration: Duration) -> String {
    if duration.subsec_nanos() == 0 {
        format!("{}s", duration.as_secs())
    } else if duration.subsec_nanos().is_multiple_of(1_000_000) {
        format!("{}ms", duration.as_millis())
    } else {
        format!("{}ns", duration.as_nanos())
    }
}

mod duration_text {
    use super::*;

    pub fn serialize<S: Serializer>(value: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        value.map(format_duration).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|text| parse_duration(&text).map_err(serde::de::Error::custom))
            .transpose()
    }
}

mod size_text {
    use super::*;

    /// A size given as text (`"64MiB"`) or as a number of bytes.
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum SizeValue {
        Bytes(u64),
        Text(String),
    }

    impl SizeValue {
        fn bytes<E: serde::de::Error>(self) -> Result<u64, E> {
            match self {
                SizeValue::Bytes(bytes) => Ok(bytes),
                SizeValue::Text(text) => parse_size(&text).map_err(E::custom),
            }
        }
    }

    pub fn serialize<S: Serializer>(value: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        value.map(format_size).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        Option::<SizeValue>::deserialize(d)?.map(SizeValue::bytes).transpose()
    }

    pub mod required {
        use super::*;

        pub fn serialize<S: Serializer>(value: &usize, s: S) -> Result<S::Ok, S::Error> {
            format_size(*value as u64).serialize(s)
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
            let bytes = SizeValue::deserialize(d)?.bytes()?;
            usize::try_from(bytes).map_err(serde::de::Error::custom)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        for bad in ["", "10", "ten s", "5 parsecs", "-1s", "ms"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("16MB"), Ok(16_000_000));
        assert_eq!(parse_size("65536"), Ok(65536));
        for bad in ["", "MiB", "12 parsecs", "-1", "99999999999999999999GiB"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn path_grants() {
        let grant: PathGrant = "/data".parse().unwrap();
        assert_eq!((grant.guest_path(), grant.access), (Path::new("/data"), Access::ReadOnly));
        let grant: PathGrant = "/srv/x:/x:rw".parse().unwrap();
        assert_eq!(
            (grant.host.as_path(), grant.guest_path(), grant.access),
            (Path::new("/srv/x"), Path::new("/x"), Access::ReadWrite)
        );
        let grant: PathGrant = "/srv/x:ro".parse().unwrap();
        assert_eq!((grant.guest_path(), grant.access), (Path::new("/srv/x"), Access::ReadOnly));
        assert!("a:b:c:d".parse::<PathGrant>().is_err());
        assert!(":/x".parse::<PathGrant>().is_err());
        assert!("/nonexistent-dir-for-toolhost".parse::<PathGrant>().unwrap().check().is_err());
        assert!("/tmp:relative".parse::<PathGrant>().unwrap().check().is_err());
    }

    #[test]
    fn public_addresses_are_those_of_the_internet() {
        let public = ["8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"];
        for text in public {
            assert!(is_public(text.parse().unwrap()), "{text} is public");
        }
        let not_public = [
            "0.0.0.0",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "100.64.0.1",
            "127.0.0.1",
            "127.8.9.10",
            "169.254.169.254",
            "192.0.0.8",
            "192.0.2.1",
            "198.18.0.1",
            "224.0.0.1",
            "240.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a00:1",
            "2002:7f00:1::",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "ff02::1",
            "2001:db8::1",
            "3fff::1",
            "2001::1",
        ];
        for text in not_public {
            assert!(!is_public(text.parse().unwrap()), "{text} is not public");
        }
        assert!(is_public("2002:808:808::".parse().unwrap()), "6to4 of a public address");
        assert!(is_public("172.32.0.1".parse().unwrap()) && is_public("100.128.0.1".parse().unwrap()));
    }

    #[test]
    fn other_addresses_are_reached_only_when_a_grant_names_them() {
        let grants = |patterns: &[&str]| patterns.iter().map(|p| p.to_string()).collect::<Vec<_>>();
        let ip = |text: &str| text.parse::<IpAddr>().unwrap();
        // A grant of a name alone: public addresses only.
        let name = grants(&["api.example.com"]);
        assert!(address_allowed(&name, ip("93.184.216.34"), Some(443)));
        for internal in ["127.0.0.1", "10.0.0.5", "169.254.169.254", "::1", "::ffff:10.0.0.5"] {
            assert!(!address_allowed(&name, ip(internal), Some(443)), "{internal}");
        }
        // Named by its text, with or without a port, by a wildcard.
        assert!(address_allowed(&grants(&["10.0.0.5"]), ip("10.0.0.5"), Some(80)));
        assert!(address_allowed(&grants(&["10.0.*"]), ip("10.0.7.5"), Some(80)));
        assert!(address_allowed(&grants(&["10.0.0.5"]), ip("::ffff:10.0.0.5"), Some(80)));
        assert!(address_allowed(&grants(&["127.0.0.1:8080"]), ip("127.0.0.1"), Some(8080)));
        assert!(!address_allowed(&grants(&["127.0.0.1:8080"]), ip("127.0.0.1"), Some(8081)));
        assert!(address_allowed(&grants(&["[::1]"]), ip("::1"), Some(80)));
        assert!(address_allowed(&grants(&["[::1]:8080"]), ip("::1"), Some(8080)));
        assert!(address_allowed(&grants(&["::1"]), ip("::1"), Some(80)));
        assert!(address_allowed(&grants(&["*"]), ip("169.254.169.254"), Some(80)));
        // A port not known: a grant's port is not compared.
        assert!(address_allowed(&grants(&["127.0.0.1:8080"]), ip("127.0.0.1"), None));
        assert!(address_allowed(&grants(&["localhost:8080"]), ip("::1"), None));
        assert!(!address_allowed(&grants(&["example.com:8080"]), ip("127.0.0.1"), None));
        // `localhost` names the loopback addresses, and nothing else.
        assert!(address_allowed(&grants(&["localhost"]), ip("127.0.0.1"), Some(80)));
        assert!(address_allowed(&grants(&["LocalHost:3000"]), ip("::1"), Some(3000)));
        assert!(!address_allowed(&grants(&["localhost:3000"]), ip("::1"), Some(3001)));
        assert!(!address_allowed(&grants(&["localhost"]), ip("10.0.0.5"), Some(80)));
        // A wildcard that matches the name `localhost` does not name an
        // address.
        assert!(!address_allowed(&grants(&["*host"]), ip("127.0.0.1"), Some(80)));
    }

    #[test]
    fn host_patterns_may_name_a_port() {
        for good in ["example.com", "*.example.com:443", "127.0.0.1:8080", "[::1]:8080", "[::1]", "::1"] {
            assert_eq!(check_host_pattern(good), Ok(()), "{good}");
        }
        for bad in ["example.com:", "example.com:0", "example.com:65536", "example.com:http", ":80", "https://x"] {
            assert!(check_host_pattern(bad).is_err(), "{bad}");
        }
        assert_eq!(split_host_port("127.0.0.1:8080"), ("127.0.0.1", Some("8080")));
        assert_eq!(split_host_port("[::1]:8080"), ("[::1]", Some("8080")));
        assert_eq!(split_host_port("::1"), ("::1", None));
        assert_eq!(split_host_port("*.example.com"), ("*.example.com", None));
    }

    #[test]
    fn policies_round_trip_through_json_with_readable_units() {
        let policy: Policy = serde_json::from_value(json!({
            "allowedPaths": [{"host": "/tmp", "guest": "/scratch", "access": "rw"}],
            "allowedHosts": ["*.example.com"],
            "config": {"region": "eu"},
            "limits": {"timeout": "500ms", "memoryLimit": "64MiB", "maxOutputSize": 1048576}
        }))
        .unwrap();
        assert_eq!(policy.limits.timeout, Some(Duration::from_millis(500)));
        assert_eq!(policy.limits.memory_max_bytes, Some(64 << 20));
        assert_eq!(policy.limits.max_output_bytes, 1 << 20);
        assert_eq!(policy.limits.max_input_bytes, Limits::DEFAULT_MAX_IO_BYTES);
        let text = serde_json::to_value(&policy).unwrap();
        assert_eq!(text["limits"]["memoryLimit"], "64MiB");
        assert_eq!(text["limits"]["timeout"], "500ms");
        assert_eq!(serde_json::from_value::<Policy>(text).unwrap(), policy);

        let error = serde_json::from_value::<Policy>(json!({"limits": {"timeout": "soon"}})).unwrap_err();
        assert!(error.to_string().contains("invalid duration `soon`"), "{error}");
        assert!(serde_json::from_value::<Policy>(json!({"allowedHost": []})).is_err());
    }
}
